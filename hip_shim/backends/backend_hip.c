/*
 * backend_hip.c - the shim over ROCm's libamdhip64, loaded at run time so
 * that one build serves every ROCm from 6.2: HIP's error codes pass through
 * unchanged; what differs between releases (the fd import ABI, attribute
 * numbers) is decided here at run time, never by the headers of the build.
 * In a torch process the runtime torch loaded is the one bound: a second
 * libamdhip64 in one process would be a second HIP runtime.  A runtime
 * older than 6.2 is found, judged by its version and refused by name.
 */
#include "gpu_common.h"
#include "hip_abi.h"
#include "hiprtc.h"
#include "mori/runtime_search.h"

#include "mori/text.h"
#include "mori/values.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static struct {
  hipError_t (*Init)(unsigned int flags);
  hipError_t (*RuntimeGetVersion)(int *version);
  const char *(*GetErrorName)(hipError_t error);
  hipError_t (*GetLastError)(void);
  hipError_t (*MemCreate)(hipMemGenericAllocationHandle_t *, size_t, const hipMemAllocationProp *,
                          unsigned long long);
  hipError_t (*MemRelease)(hipMemGenericAllocationHandle_t);
  hipError_t (*MemRetainAllocationHandle)(hipMemGenericAllocationHandle_t *, void *);
  hipError_t (*MemAddressReserve)(void **, size_t, size_t, void *, unsigned long long);
  hipError_t (*MemAddressFree)(void *, size_t);
  hipError_t (*MemMap)(void *, size_t, size_t, hipMemGenericAllocationHandle_t,
                       unsigned long long);
  hipError_t (*MemUnmap)(void *, size_t);
  hipError_t (*MemSetAccess)(void *, size_t, const hipMemAccessDesc *, size_t);
  hipError_t (*MemGetAllocationGranularity)(size_t *, const hipMemAllocationProp *,
                                            hipMemAllocationGranularity_flags);
  hipError_t (*MemExportToShareableHandle)(void *, hipMemGenericAllocationHandle_t,
                                           hipMemAllocationHandleType, unsigned long long);
  hipError_t (*MemImportFromShareableHandle)(hipMemGenericAllocationHandle_t *, void *,
                                             hipMemAllocationHandleType);
  hipError_t (*Malloc)(void **, size_t);
  hipError_t (*Free)(void *);
  hipError_t (*Memcpy)(void *, const void *, size_t, hipMemcpyKind);
  hipError_t (*Memset)(void *, int, size_t);
  hipError_t (*MemGetInfo)(size_t *, size_t *);
  hipError_t (*GetDevice)(int *);
  hipError_t (*SetDevice)(int);
  hipError_t (*GetDeviceCount)(int *);
  hipError_t (*DeviceSynchronize)(void);
  hipError_t (*StreamSynchronize)(hipStream_t);
  hipError_t (*StreamWriteValue32)(hipStream_t, void *, uint32_t, unsigned int);
  hipError_t (*StreamWaitValue32)(hipStream_t, void *, uint32_t, unsigned int, uint32_t);
  hipError_t (*GetDeviceProperties)(void *props, int device);
  hipError_t (*DeviceGetPCIBusId)(char *id, int len, int device);
  hipError_t (*StreamCreateWithFlags)(hipStream_t *, unsigned int);
  hipError_t (*StreamDestroy)(hipStream_t);
  hipError_t (*StreamIsCapturing)(hipStream_t, hipStreamCaptureStatus *);
  hipError_t (*EventCreateWithFlags)(hipEvent_t *, unsigned int);
  hipError_t (*EventRecord)(hipEvent_t, hipStream_t);
  hipError_t (*EventQuery)(hipEvent_t);
  hipError_t (*EventSynchronize)(hipEvent_t);
  hipError_t (*EventDestroy)(hipEvent_t);
  hipError_t (*MemsetAsync)(void *, int, size_t, hipStream_t);
  hipError_t (*MemcpyAsync)(void *, const void *, size_t, hipMemcpyKind, hipStream_t);
  hipError_t (*ModuleLoadData)(hipModule_t *, const void *);
  hipError_t (*ModuleGetFunction)(hipFunction_t *, hipModule_t, const char *);
  hipError_t (*ModuleLaunchKernel)(hipFunction_t, unsigned int, unsigned int, unsigned int,
                                   unsigned int, unsigned int, unsigned int, unsigned int,
                                   hipStream_t, void **, void **);
  hipError_t (*ModuleUnload)(hipModule_t);
  hipError_t (*HostMalloc)(void **, size_t, unsigned int);
  hipError_t (*HostFree)(void *);
  /* Not in the table (newer ROCm releases have it): without it the shim issues a
   * batch's operations one by one. */
  hipError_t (*StreamBatchMemOp)(hipStream_t, unsigned int, hipStreamBatchMemOpParams *,
                                 unsigned int);
} hip;

static const struct mori__gpu_symbol hip_symbols[] = {
    MORI_GPU_SYMBOL("hipInit", hip.Init),
    MORI_GPU_SYMBOL("hipRuntimeGetVersion", hip.RuntimeGetVersion),
    MORI_GPU_SYMBOL("hipGetErrorName", hip.GetErrorName),
    MORI_GPU_SYMBOL("hipGetLastError", hip.GetLastError),
    MORI_GPU_SYMBOL("hipMemCreate", hip.MemCreate),
    MORI_GPU_SYMBOL("hipMemRelease", hip.MemRelease),
    MORI_GPU_SYMBOL("hipMemRetainAllocationHandle", hip.MemRetainAllocationHandle),
    MORI_GPU_SYMBOL("hipMemAddressReserve", hip.MemAddressReserve),
    MORI_GPU_SYMBOL("hipMemAddressFree", hip.MemAddressFree),
    MORI_GPU_SYMBOL("hipMemMap", hip.MemMap),
    MORI_GPU_SYMBOL("hipMemUnmap", hip.MemUnmap),
    MORI_GPU_SYMBOL("hipMemSetAccess", hip.MemSetAccess),
    MORI_GPU_SYMBOL("hipMemGetAllocationGranularity", hip.MemGetAllocationGranularity),
    MORI_GPU_SYMBOL("hipMemExportToShareableHandle", hip.MemExportToShareableHandle),
    MORI_GPU_SYMBOL("hipMemImportFromShareableHandle", hip.MemImportFromShareableHandle),
    MORI_GPU_SYMBOL("hipMalloc", hip.Malloc),
    MORI_GPU_SYMBOL("hipFree", hip.Free),
    MORI_GPU_SYMBOL("hipMemcpy", hip.Memcpy),
    MORI_GPU_SYMBOL("hipMemset", hip.Memset),
    MORI_GPU_SYMBOL("hipMemGetInfo", hip.MemGetInfo),
    MORI_GPU_SYMBOL("hipGetDevice", hip.GetDevice),
    MORI_GPU_SYMBOL("hipSetDevice", hip.SetDevice),
    MORI_GPU_SYMBOL("hipGetDeviceCount", hip.GetDeviceCount),
    MORI_GPU_SYMBOL("hipDeviceSynchronize", hip.DeviceSynchronize),
    MORI_GPU_SYMBOL("hipStreamSynchronize", hip.StreamSynchronize),
    MORI_GPU_SYMBOL("hipStreamWriteValue32", hip.StreamWriteValue32),
    MORI_GPU_SYMBOL("hipStreamWaitValue32", hip.StreamWaitValue32),
    MORI_GPU_SYMBOL("hipGetDevicePropertiesR0600", hip.GetDeviceProperties),
    MORI_GPU_SYMBOL("hipDeviceGetPCIBusId", hip.DeviceGetPCIBusId),
    MORI_GPU_SYMBOL("hipStreamCreateWithFlags", hip.StreamCreateWithFlags),
    MORI_GPU_SYMBOL("hipStreamDestroy", hip.StreamDestroy),
    MORI_GPU_SYMBOL("hipStreamIsCapturing", hip.StreamIsCapturing),
    MORI_GPU_SYMBOL("hipEventCreateWithFlags", hip.EventCreateWithFlags),
    MORI_GPU_SYMBOL("hipEventRecord", hip.EventRecord),
    MORI_GPU_SYMBOL("hipEventQuery", hip.EventQuery),
    MORI_GPU_SYMBOL("hipEventSynchronize", hip.EventSynchronize),
    MORI_GPU_SYMBOL("hipEventDestroy", hip.EventDestroy),
    MORI_GPU_SYMBOL("hipMemsetAsync", hip.MemsetAsync),
    MORI_GPU_SYMBOL("hipMemcpyAsync", hip.MemcpyAsync),
    MORI_GPU_SYMBOL("hipModuleLoadData", hip.ModuleLoadData),
    MORI_GPU_SYMBOL("hipModuleGetFunction", hip.ModuleGetFunction),
    MORI_GPU_SYMBOL("hipModuleLaunchKernel", hip.ModuleLaunchKernel),
    MORI_GPU_SYMBOL("hipModuleUnload", hip.ModuleUnload),
    MORI_GPU_SYMBOL("hipHostMalloc", hip.HostMalloc),
    MORI_GPU_SYMBOL("hipHostFree", hip.HostFree),
};

static int runtime_version; /* from hipRuntimeGetVersion at bring-up */

/* HIP's codes are the shim's: only the detail needs the runtime's name,
 * which also covers codes newer than the shim's table. */
static hipError_t hip_check(const char *call, hipError_t e) {
  if (e == hipSuccess) return hipSuccess;
  return mori__gpu_fail(call, hip.GetErrorName(e), (int)e, e);
}

#define HIP_CALL(name, args) hip_check("hip" #name, hip.name args)

static hipError_t hip_mem_create(hipMemGenericAllocationHandle_t *handle, size_t size,
                                 const hipMemAllocationProp *prop, unsigned long long flags) {
  return HIP_CALL(MemCreate, (handle, size, prop, flags));
}

static hipError_t hip_mem_release(hipMemGenericAllocationHandle_t handle) {
  return HIP_CALL(MemRelease, (handle));
}

static hipError_t hip_mem_retain(hipMemGenericAllocationHandle_t *handle, void *addr) {
  return HIP_CALL(MemRetainAllocationHandle, (handle, addr));
}

static hipError_t hip_address_reserve(void **ptr, size_t size, size_t alignment, void *addr,
                                      unsigned long long flags) {
  return HIP_CALL(MemAddressReserve, (ptr, size, alignment, addr, flags));
}

static hipError_t hip_address_free(void *ptr, size_t size) {
  return HIP_CALL(MemAddressFree, (ptr, size));
}

static hipError_t hip_mem_map(void *ptr, size_t size, size_t offset,
                              hipMemGenericAllocationHandle_t handle, unsigned long long flags) {
  return HIP_CALL(MemMap, (ptr, size, offset, handle, flags));
}

static hipError_t hip_mem_unmap(void *ptr, size_t size) { return HIP_CALL(MemUnmap, (ptr, size)); }

static hipError_t hip_set_access(void *ptr, size_t size, const hipMemAccessDesc *desc,
                                 size_t count) {
  return HIP_CALL(MemSetAccess, (ptr, size, desc, count));
}

static hipError_t hip_granularity(size_t *gran, const hipMemAllocationProp *prop,
                                  hipMemAllocationGranularity_flags option) {
  return HIP_CALL(MemGetAllocationGranularity, (gran, prop, option));
}

static hipError_t hip_export_handle(void *shareable, hipMemGenericAllocationHandle_t handle,
                                    hipMemAllocationHandleType type, unsigned long long flags) {
  return HIP_CALL(MemExportToShareableHandle, (shareable, handle, type, flags));
}

/* The shim's callers pass a POSIX fd by value; ROCm before 7.1 wants a
 * pointer to it.  From 7.1 a null osHandle is rejected, so fd 0 cannot be
 * passed by value: refused here with a message rather than by HIP. */
static hipError_t hip_import_handle(hipMemGenericAllocationHandle_t *handle, void *osHandle,
                                    hipMemAllocationHandleType type) {
  int fd = (int)(intptr_t)osHandle;
  void *arg = osHandle;
  if (type == hipMemHandleTypePosixFileDescriptor) {
    if (runtime_version < MORI_HIP_FD_BY_VALUE_SINCE) {
      arg = &fd;
    } else if (fd == 0) {
      mori__shim_detail("hipMemImportFromShareableHandle: fd 0 cannot be passed by value "
                        "(ROCm >= 7.1 rejects a null osHandle)");
      return hipErrorInvalidValue;
    }
  }
  return HIP_CALL(MemImportFromShareableHandle, (handle, arg, type));
}

static hipError_t hip_malloc(void **ptr, size_t size) { return HIP_CALL(Malloc, (ptr, size)); }

static hipError_t hip_free(void *ptr) { return HIP_CALL(Free, (ptr)); }

static hipError_t hip_memcpy(void *dst, const void *src, size_t size, hipMemcpyKind kind) {
  return HIP_CALL(Memcpy, (dst, src, size, kind));
}

static hipError_t hip_mem_get_info(size_t *free_bytes, size_t *total_bytes) {
  return HIP_CALL(MemGetInfo, (free_bytes, total_bytes));
}

static hipError_t hip_memset(void *dst, int value, size_t size) {
  return HIP_CALL(Memset, (dst, value, size));
}

static hipError_t hip_get_device(int *device) { return HIP_CALL(GetDevice, (device)); }

static hipError_t hip_set_device(int device) { return HIP_CALL(SetDevice, (device)); }

static hipError_t hip_device_count(int *count) { return HIP_CALL(GetDeviceCount, (count)); }

static hipError_t hip_device_sync(void) { return HIP_CALL(DeviceSynchronize, ()); }

static hipError_t hip_stream_sync(hipStream_t stream) {
  return HIP_CALL(StreamSynchronize, (stream));
}

static hipError_t hip_write_value32(hipStream_t stream, void *ptr, uint32_t value,
                                    unsigned int flags) {
  return HIP_CALL(StreamWriteValue32, (stream, ptr, value, flags));
}

static hipError_t hip_wait_value32(hipStream_t stream, void *ptr, uint32_t value,
                                   unsigned int flags, uint32_t mask) {
  return HIP_CALL(StreamWaitValue32, (stream, ptr, value, flags, mask));
}

/* The shim's params are HIP's own layout: passed through. */
static hipError_t hip_batch_mem_op(hipStream_t stream, unsigned int count,
                                   hipStreamBatchMemOpParams *ops, unsigned int flags) {
  if (hip.StreamBatchMemOp == NULL) return hipErrorNotSupported;
  return HIP_CALL(StreamBatchMemOp, (stream, count, ops, flags));
}

static hipError_t hip_stream_create(hipStream_t *stream, unsigned int flags) {
  return HIP_CALL(StreamCreateWithFlags, (stream, flags));
}

static hipError_t hip_stream_destroy(hipStream_t stream) { return HIP_CALL(StreamDestroy, (stream)); }

static hipError_t hip_stream_is_capturing(hipStream_t stream, hipStreamCaptureStatus *status) {
  return HIP_CALL(StreamIsCapturing, (stream, status));
}

static hipError_t hip_event_create(hipEvent_t *event, unsigned int flags) {
  return HIP_CALL(EventCreateWithFlags, (event, flags));
}

static hipError_t hip_event_record(hipEvent_t event, hipStream_t stream) {
  return HIP_CALL(EventRecord, (event, stream));
}

static hipError_t hip_event_query(hipEvent_t event) { return HIP_CALL(EventQuery, (event)); }
static hipError_t hip_event_sync(hipEvent_t event) { return HIP_CALL(EventSynchronize, (event)); }
static hipError_t hip_event_destroy(hipEvent_t event) { return HIP_CALL(EventDestroy, (event)); }

static hipError_t hip_memset_async(void *dst, int value, size_t size, hipStream_t stream) {
  return HIP_CALL(MemsetAsync, (dst, value, size, stream));
}

static hipError_t hip_memcpy_async(void *dst, const void *src, size_t size, hipMemcpyKind kind,
                                   hipStream_t stream) {
  return HIP_CALL(MemcpyAsync, (dst, src, size, kind, stream));
}

static hipError_t hip_clear_last_error(void) { return hip.GetLastError(); }

static hipError_t hip_runtime_version(int *version) {
  return HIP_CALL(RuntimeGetVersion, (version));
}

/* ---- device attributes, each by the call that answers it stably ---- */

static hipError_t attr_multiprocessors(int *value, int device) {
  union {
    struct mori__hip_props_r0600 p;
    unsigned char bytes[MORI_HIP_PROPS_BYTES];
  } props;
  hipError_t e = HIP_CALL(GetDeviceProperties, (&props, device));
  if (e == hipSuccess) *value = props.p.multiProcessorCount;
  return e;
}

/* field 1 is the bus, 2 the device of "domain:bus:device.function". */
static hipError_t attr_pci_field(int *value, int device, int field) {
  char id[64];
  unsigned int f[4];
  hipError_t e = HIP_CALL(DeviceGetPCIBusId, (id, (int)sizeof id, device));
  if (e != hipSuccess) return e;
  if (sscanf(id, "%x:%x:%x.%x", &f[0], &f[1], &f[2], &f[3]) != 4) {
    mori__shim_detail("hipDeviceGetPCIBusId: unexpected bus id '%.32s'", id);
    return hipErrorUnknown;
  }
  *value = (int)f[field];
  return hipSuccess;
}

static hipError_t attr_pci_bus(int *value, int device) { return attr_pci_field(value, device, 1); }

static hipError_t attr_pci_device(int *value, int device) {
  return attr_pci_field(value, device, 2);
}

/* "Supported" means the runtime gives an allocation granularity for VMM
 * on that device; hipErrorNotSupported is an answer (0), not an error, and
 * must not leave HIP's sticky error set. */
static hipError_t attr_vmm(int *value, int device) {
  hipMemAllocationProp prop = {.type = hipMemAllocationTypePinned,
                               .requestedHandleType = hipMemHandleTypePosixFileDescriptor,
                               .location = {hipMemLocationTypeDevice, device}};
  size_t gran = 0;
  hipError_t e =
      hip.MemGetAllocationGranularity(&gran, &prop, hipMemAllocationGranularityMinimum);
  if (e == hipErrorNotSupported) {
    (void)hip.GetLastError();
    *value = 0;
    return hipSuccess;
  }
  if (e == hipSuccess) *value = gran > 0;
  return hip_check("hipMemGetAllocationGranularity", e);
}

/* ROCm has no stable attribute for it, and a guess would be worse than
 * none: the caller's probe (create and export) is the answer. */
static hipError_t attr_fabric(int *value, int device) {
  mori__shim_detail("hipDeviceGetAttribute: the hip backend has no fabric-handle attribute; "
                    "probe with hipMemCreate and hipMemExportToShareableHandle");
  return hipErrorNotSupported;
}

static const struct {
  hipDeviceAttribute_t attr;
  hipError_t (*get)(int *value, int device);
} attributes[] = {
    {moriDeviceAttributeMultiprocessorCount, attr_multiprocessors},
    {moriDeviceAttributeVirtualMemoryManagementSupported, attr_vmm},
    {moriDeviceAttributePciBusId, attr_pci_bus},
    {moriDeviceAttributePciDeviceId, attr_pci_device},
    {moriDeviceAttributeFabricHandleSupported, attr_fabric},
};

static hipError_t hip_device_attribute(int *value, hipDeviceAttribute_t attr, int device) {
  for (size_t i = 0; i < MORI_GPU_COUNT(attributes); i++)
    if (attributes[i].attr == attr) return attributes[i].get(value, device);
  mori__shim_detail("hipDeviceGetAttribute: unknown shim attribute %d", (int)attr);
  return hipErrorInvalidValue;
}

/* ---- the signal kernels: HIP source, compiled by the runtime's hiprtc ---- */

/* Every file name a runtime may have (mori/runtime_search.h says why). */
static const char *const hip_sonames[] = {MORI_HIP_SONAMES(MORI_SONAME_ROW)};

static void *hip_lib;

/* The code object of the last source compiled: a process loads the module
 * once per device, and its devices share one target in practice (hiprtc
 * compiles for the current device's). */
static struct {
  pthread_mutex_t lock;
  const char *source;
  void *code;
  size_t size;
} compiled = {.lock = PTHREAD_MUTEX_INITIALIZER};

static hipError_t hip_module_load(hipModule_t *module, const void *image) {
  const mori_module_image *m = image;
  char why[1024];
  hipError_t e = hipSuccess;
  if (m == NULL || m->hip_source == NULL) {
    mori__shim_detail("hipModuleLoadData: the image carries no HIP source");
    return hipErrorInvalidValue;
  }
  pthread_mutex_lock(&compiled.lock);
  if (compiled.source != m->hip_source) {
    free(compiled.code);
    compiled.source = NULL;
    if (mori__hiprtc_compile(hip_lib, m->hip_source, m->name ? m->name : "module", NULL,
                             &compiled.code, &compiled.size, why, sizeof why) == 0) {
      compiled.source = m->hip_source;
    } else {
      mori__shim_detail("hipModuleLoadData: %s", why);
      e = hipErrorNotSupported;
    }
  }
  if (e == hipSuccess) e = HIP_CALL(ModuleLoadData, (module, compiled.code));
  pthread_mutex_unlock(&compiled.lock);
  return e;
}

static hipError_t hip_module_function(hipFunction_t *function, hipModule_t module,
                                      const char *kname) {
  return HIP_CALL(ModuleGetFunction, (function, module, kname));
}

static hipError_t hip_launch_kernel(hipFunction_t f, unsigned int gx, unsigned int gy,
                                    unsigned int gz, unsigned int bx, unsigned int by,
                                    unsigned int bz, unsigned int shared, hipStream_t stream,
                                    void **params, void **extra) {
  return HIP_CALL(ModuleLaunchKernel, (f, gx, gy, gz, bx, by, bz, shared, stream, params, extra));
}

static hipError_t hip_module_unload(hipModule_t module) {
  return HIP_CALL(ModuleUnload, (module));
}

/* hipHostMallocMapped memory is addressed alike on host and devices under
 * ROCm's unified addressing: the shim's convention holds as it is. */
static hipError_t hip_host_malloc(void **ptr, size_t size, unsigned int flags) {
  return HIP_CALL(HostMalloc, (ptr, size, flags));
}

static hipError_t hip_host_free(void *ptr) { return HIP_CALL(HostFree, (ptr)); }

/* ---- bring-up ---- */

static int hip_fail_init(void) {
  memset(&hip, 0, sizeof hip);
  runtime_version = 0;
  if (hip_lib != NULL) dlclose(hip_lib);
  hip_lib = NULL;
  return -1;
}

static int hip_init_step(const char *call, hipError_t e, char *why, size_t whylen) {
  if (e == hipSuccess) return 0;
  const char *name = hip.GetErrorName(e);
  snprintf(why, whylen, "%s: %s (%d)", call, name ? name : "unknown hipError_t", (int)e);
  return -1;
}

/* A runtime this process already loaded (torch's), found by file name:
 * libamdhip64.so or libamdhip64.so.<anything>, wherever it lies (a torch
 * wheel bundles its own copy in torch/lib). */
static int find_loaded_runtime(struct dl_phdr_info *info, size_t size, void *data) {
  static const char stem[] = "libamdhip64.so";
  const char *path = info->dlpi_name, *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (strncmp(base, stem, sizeof stem - 1) != 0) return 0;
  if (base[sizeof stem - 1] != '\0' && base[sizeof stem - 1] != '.') return 0;
  snprintf(data, PATH_MAX, "%s", path);
  return 1;
}

/* RTLD_NOLOAD: a handle on the runtime only if it is loaded already, under
 * any of the names the search would open, else under any other name. */
static void *open_loaded_runtime(const char **opened) {
  static char path[PATH_MAX];
  for (size_t i = 0; i < MORI_GPU_COUNT(hip_sonames); i++) {
    void *lib = dlopen(hip_sonames[i], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (lib != NULL) {
      *opened = hip_sonames[i];
      return lib;
    }
  }
  path[0] = '\0';
  if (dl_iterate_phdr(find_loaded_runtime, path) == 0 || path[0] == '\0') return NULL;
  *opened = path;
  return dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
}

/* The file the loader mapped for lib (its search result, not the name
 * asked for); `opened` where it cannot say. */
static void loaded_path(void *lib, const char *opened, char *path, size_t len) {
  struct link_map *map = NULL;
  if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map != NULL && map->l_name != NULL &&
      map->l_name[0] != '\0')
    snprintf(path, len, "%s", map->l_name);
  else
    snprintf(path, len, "%s", opened);
}

/* The runtime's own answer, asked before anything else is resolved: it
 * needs no device (HIP 5.2.3 answers 50221153 on a host without one).
 * 0 with the reason in why where it does not answer. */
static int version_of_runtime(void *lib, char *why, size_t whylen) {
  hipError_t (*get)(int *);
  const char *(*name_of)(hipError_t);
  int version = 0;
  *(void **)&get = dlsym(lib, "hipRuntimeGetVersion");
  *(void **)&name_of = dlsym(lib, "hipGetErrorName");
  if (get == NULL) {
    snprintf(why, whylen, "no hipRuntimeGetVersion");
    return 0;
  }
  hipError_t e = get(&version);
  if (e == hipSuccess && version > 0) return version;
  const char *name = e != hipSuccess && name_of != NULL ? name_of(e) : NULL;
  if (e == hipSuccess)
    snprintf(why, whylen, "hipRuntimeGetVersion gave %d", version);
  else
    snprintf(why, whylen, "hipRuntimeGetVersion: %s (%d)", name ? name : "unknown hipError_t",
             (int)e);
  return 0;
}

/* The library's own version, from the name of the file behind any links:
 * libamdhip64.so.MAJOR.MINOR[.PATCH] (Debian's is libamdhip64.so.5.2.21153),
 * read by the strict reader (digits only, MAJOR <= 200, MINOR <= 99, PATCH
 * <= 99999: no sign, no wrap).  0 where the name carries none (no field
 * after the stem, or MAJOR alone); -1 where it carries one that cannot be
 * read, with why naming the file (escaped) and the field; real receives
 * the file's path. */
static int version_of_file(const char *path, char *real, size_t len, char *why, size_t whylen) {
  static const char stem[] = "libamdhip64.so.";
  static const long long max[3] = {200, 99, 99999};
  char buf[PATH_MAX], detail[160], shown[4 * 128 + 48];
  int field[3];
  if (realpath(path, buf) == NULL) return 0;
  snprintf(real, len, "%s", buf);
  const char *base = strrchr(buf, '/');
  base = base ? base + 1 : buf;
  if (strncmp(base, stem, sizeof stem - 1) != 0) return 0;
  const char *v = base + sizeof stem - 1;
  if (*v == '\0' || strchr(v, '.') == NULL) return 0; /* .so or .so.7: no version */
  if (mori_value_version(v, max, field, detail, sizeof detail) != 0) {
    snprintf(why, whylen,
             "cannot read a HIP version from the file name %s (%s; expected "
             "libamdhip64.so.MAJOR.MINOR[.PATCH], MAJOR <= 200, MINOR <= 99, PATCH <= 99999)",
             mori__escape(shown, sizeof shown, buf, strlen(buf), 128), detail);
    return -1;
  }
  return MORI_HIP_VERSION(field[0], field[1], field[2]);
}

/* HIP older than 6.2 cannot share VMM memory (6.0 and 6.1 return
 * hipErrorNotSupported from a shareable hipMemCreate, from export and from
 * import): refused at bring-up in one message that names what was found,
 * where, and the minimum, rather than at the first allocation or by the
 * symbols a later release added. */
static int hip_refuse_old(int version, const char *file, const char *how, char *why,
                          size_t whylen) {
  if (version >= MORI_HIP_SHARING_SINCE) return 0;
  char shown[4 * 128 + 48];
  snprintf(why, whylen, "found HIP %d.%d.%d (%s, %s); mori-symm needs HIP >= %d.%d (ROCm %d.%d)",
           MORI_HIP_MAJOR(version), MORI_HIP_MINOR(version), MORI_HIP_PATCH(version),
           mori__escape(shown, sizeof shown, file, strlen(file), 128), how,
           MORI_HIP_MAJOR(MORI_HIP_SHARING_SINCE), MORI_HIP_MINOR(MORI_HIP_SHARING_SINCE),
           MORI_HIP_MAJOR(MORI_HIP_SHARING_SINCE), MORI_HIP_MINOR(MORI_HIP_SHARING_SINCE));
  return -1;
}

static int hip_refuse_old_runtime(int version, const char *file, char *why, size_t whylen) {
  char how[64];
  snprintf(how, sizeof how, "hipRuntimeGetVersion %d", version);
  return hip_refuse_old(version, file, how, why, whylen);
}

/* The runtime judged by its version before the rest is resolved: by its own
 * answer, else by its file name.  Where neither tells (not a HIP runtime at
 * all, or no version anywhere) the symbols and hipInit decide, and the
 * version is judged again after them. */
static int hip_judge(void *lib, const char *path, char *why, size_t whylen) {
  char unanswered[128], real[PATH_MAX], how[192];
  int version = version_of_runtime(lib, unanswered, sizeof unanswered);
  if (version > 0) return hip_refuse_old_runtime(version, path, why, whylen);
  version = version_of_file(path, real, sizeof real, why, whylen);
  if (version <= 0) return version;
  snprintf(how, sizeof how, "from its file name; %s", unanswered);
  return hip_refuse_old(version, real, how, why, whylen);
}

/* MORI_SYMM_HIP_LIB if set (the user's decision); else the runtime already
 * in the process; else the first of the sonames that loads.  NULL with the
 * attempts in why where none loads. */
static void *hip_open(const char **opened, char *path, size_t pathlen, char *why, size_t whylen) {
  const char *env = getenv("MORI_SYMM_HIP_LIB");
  void *lib = NULL;
  *opened = hip_sonames[0];
  if (env == NULL || *env == '\0') lib = open_loaded_runtime(opened);
  if (lib == NULL)
    lib = mori__gpu_open("MORI_SYMM_HIP_LIB", hip_sonames, MORI_GPU_COUNT(hip_sonames), opened,
                         why, whylen);
  if (lib != NULL) loaded_path(lib, *opened, path, pathlen);
  return lib;
}

/* The search and the judgement of hip_init, and nothing after them (no
 * symbol, no hipInit): 1 found and not refused, 0 none found, -1 refused or
 * MORI_SYMM_HIP_LIB does not load.  The runtime's own version call may
 * bring it up: callers that fork later ask in a child (mori-symm does). */
static int hip_find(char *why, size_t whylen) {
  const char *opened, *env = getenv("MORI_SYMM_HIP_LIB");
  char path[PATH_MAX];
  void *lib = hip_open(&opened, path, sizeof path, why, whylen);
  if (lib == NULL) return env != NULL && *env != '\0' ? -1 : 0;
  int rc = hip_judge(lib, path, why, whylen) != 0 ? -1 : 1;
  char unanswered[128];
  int version = rc == 1 ? version_of_runtime(lib, unanswered, sizeof unanswered) : 0;
  if (rc == 1 && version > 0)
    snprintf(why, whylen, "HIP %d.%d.%d (%s)", MORI_HIP_MAJOR(version), MORI_HIP_MINOR(version),
             MORI_HIP_PATCH(version), path);
  else if (rc == 1)
    snprintf(why, whylen, "%s (%s)", path, unanswered);
  dlclose(lib);
  return rc;
}

/* Every symbol of hip_lib, opened as `opened`: all or none. */
static int hip_resolve(const char *opened, char *why, size_t whylen) {
  if (mori__gpu_resolve(hip_lib, opened, hip_symbols, MORI_GPU_COUNT(hip_symbols), why, whylen))
    return -1;
  *(void **)&hip.StreamBatchMemOp = dlsym(hip_lib, "hipStreamBatchMemOp");
  return 0;
}

/* The search and every symbol, no runtime call (mori_shim_load: not even
 * hipRuntimeGetVersion, which may bring ROCm up); once.  A runtime that
 * lacks a symbol is not kept: the bring-up searches again and judges its
 * version before its symbols, so that an old ROCm is refused by name. */
static int hip_load(char *why, size_t whylen) {
  const char *opened;
  char path[PATH_MAX];
  if (hip_lib != NULL) return 0;
  hip_lib = hip_open(&opened, path, sizeof path, why, whylen);
  if (hip_lib == NULL) return -1;
  return hip_resolve(opened, why, whylen) != 0 ? hip_fail_init() : 0;
}

/* The search, the version (the runtime's own answer, else its file's),
 * every symbol, unless mori_shim_load did the search and the symbols;
 * then hipInit and the version the fd ABI follows. */
static int hip_init(char *why, size_t whylen) {
  const char *opened = hip_sonames[0];
  char path[PATH_MAX];
  int loaded = hip_lib != NULL;
  if (!loaded && (hip_lib = hip_open(&opened, path, sizeof path, why, whylen)) == NULL) return -1;
  if (loaded) loaded_path(hip_lib, opened, path, sizeof path);
  if (hip_judge(hip_lib, path, why, whylen) ||
      (!loaded && hip_resolve(opened, why, whylen)) ||
      hip_init_step("hipInit", hip.Init(0), why, whylen) ||
      hip_init_step("hipRuntimeGetVersion", hip.RuntimeGetVersion(&runtime_version), why,
                    whylen) ||
      hip_refuse_old_runtime(runtime_version, path, why, whylen))
    return hip_fail_init();
  return 0;
}

const struct mori__shim_backend mori__shim_hip = {
    .name = "hip",
    .init = hip_init,
    .find = hip_find,
    .load = hip_load,
    .hipMemCreate = hip_mem_create,
    .hipMemRelease = hip_mem_release,
    .hipMemRetainAllocationHandle = hip_mem_retain,
    .hipMemAddressReserve = hip_address_reserve,
    .hipMemAddressFree = hip_address_free,
    .hipMemMap = hip_mem_map,
    .hipMemUnmap = hip_mem_unmap,
    .hipMemSetAccess = hip_set_access,
    .hipMemGetAllocationGranularity = hip_granularity,
    .hipMemExportToShareableHandle = hip_export_handle,
    .hipMemImportFromShareableHandle = hip_import_handle,
    .hipMalloc = hip_malloc,
    .hipFree = hip_free,
    .hipMemGetInfo = hip_mem_get_info,
    .hipMemcpy = hip_memcpy,
    .hipMemset = hip_memset,
    .hipGetDevice = hip_get_device,
    .hipSetDevice = hip_set_device,
    .hipGetDeviceCount = hip_device_count,
    .hipDeviceSynchronize = hip_device_sync,
    .hipStreamSynchronize = hip_stream_sync,
    .hipStreamWriteValue32 = hip_write_value32,
    .hipStreamWaitValue32 = hip_wait_value32,
    .hipStreamBatchMemOp = hip_batch_mem_op,
    .hipDeviceGetAttribute = hip_device_attribute,
    .hipStreamCreateWithFlags = hip_stream_create,
    .hipStreamDestroy = hip_stream_destroy,
    .hipStreamIsCapturing = hip_stream_is_capturing,
    .hipEventCreateWithFlags = hip_event_create,
    .hipEventRecord = hip_event_record,
    .hipEventQuery = hip_event_query,
    .hipEventSynchronize = hip_event_sync,
    .hipEventDestroy = hip_event_destroy,
    .hipMemsetAsync = hip_memset_async,
    .hipMemcpyAsync = hip_memcpy_async,
    .hipGetLastError = hip_clear_last_error,
    .hipRuntimeGetVersion = hip_runtime_version,
    .hipModuleLoadData = hip_module_load,
    .hipModuleGetFunction = hip_module_function,
    .hipModuleLaunchKernel = hip_launch_kernel,
    .hipModuleUnload = hip_module_unload,
    .hipHostMalloc = hip_host_malloc,
    .hipHostFree = hip_host_free,
};
