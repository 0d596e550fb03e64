/*
 * backend_cuda.c - the shim over the NVIDIA driver API (libcuda.so.1): each
 * HIP-typed call becomes its cuMem* / cuStream* counterpart, issued on the
 * primary context of the calling thread's device.  This is how mori-symm
 * runs, and is measured, on NVIDIA GPUs.
 */
#include "gpu_common.h"
#include "gpu_cuda.h"
#include "mori/runtime_search.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the driver's entry points, resolved all at once by init ---- */

static struct {
  mori__cuInit_fn Init;
  mori__cuDriverGetVersion_fn DriverGetVersion;
  mori__cuGetErrorName_fn GetErrorName;
  mori__cuDeviceGet_fn DeviceGet;
  mori__cuDeviceGetCount_fn DeviceGetCount;
  mori__cuDeviceGetAttribute_fn DeviceGetAttribute;
  mori__cuDevicePrimaryCtxRetain_fn DevicePrimaryCtxRetain;
  mori__cuCtxSetCurrent_fn CtxSetCurrent;
  mori__cuCtxSynchronize_fn CtxSynchronize;
  mori__cuStreamSynchronize_fn StreamSynchronize;
  mori__cuMemCreate_fn MemCreate;
  mori__cuMemRelease_fn MemRelease;
  mori__cuMemRetainAllocationHandle_fn MemRetainAllocationHandle;
  mori__cuMemAddressReserve_fn MemAddressReserve;
  mori__cuMemAddressFree_fn MemAddressFree;
  mori__cuMemMap_fn MemMap;
  mori__cuMemUnmap_fn MemUnmap;
  mori__cuMemSetAccess_fn MemSetAccess;
  mori__cuMemGetAllocationGranularity_fn MemGetAllocationGranularity;
  mori__cuMemExportToShareableHandle_fn MemExportToShareableHandle;
  mori__cuMemImportFromShareableHandle_fn MemImportFromShareableHandle;
  mori__cuMemAlloc_v2_fn MemAlloc;
  mori__cuMemFree_v2_fn MemFree;
  mori__cuMemcpy_fn Memcpy;
  mori__cuMemsetD8_v2_fn MemsetD8;
  mori__cuMemGetInfo_v2_fn MemGetInfo;
  mori__cuStreamWriteValue32_v2_fn StreamWriteValue32;
  mori__cuStreamWaitValue32_v2_fn StreamWaitValue32;
  mori__cuStreamCreate_fn StreamCreate;
  mori__cuStreamDestroy_v2_fn StreamDestroy;
  mori__cuStreamIsCapturing_fn StreamIsCapturing;
  mori__cuEventCreate_fn EventCreate;
  mori__cuEventRecord_fn EventRecord;
  mori__cuEventQuery_fn EventQuery;
  mori__cuEventSynchronize_fn EventSynchronize;
  mori__cuEventDestroy_v2_fn EventDestroy;
  mori__cuMemsetD8Async_fn MemsetD8Async;
  mori__cuMemcpyAsync_fn MemcpyAsync;
  mori__cuModuleLoadData_fn ModuleLoadData;
  mori__cuModuleGetFunction_fn ModuleGetFunction;
  mori__cuLaunchKernel_fn LaunchKernel;
  mori__cuModuleUnload_fn ModuleUnload;
  mori__cuMemHostAlloc_fn MemHostAlloc;
  mori__cuMemFreeHost_fn MemFreeHost;
  mori__cuMemHostGetDevicePointer_v2_fn MemHostGetDevicePointer;
  /* Not in the table: a driver without it still runs everything, the
   * shim issuing a batch's operations one by one. */
  mori__cuStreamBatchMemOp_v2_fn StreamBatchMemOp;
} cu;

/* The versioned names are the ones cuda.h maps the plain names to; the
 * unversioned cuStream*Value32 are the deprecated v1 memops. */
static const struct mori__gpu_symbol cu_symbols[] = {
    MORI_GPU_SYMBOL("cuInit", cu.Init),
    MORI_GPU_SYMBOL("cuDriverGetVersion", cu.DriverGetVersion),
    MORI_GPU_SYMBOL("cuGetErrorName", cu.GetErrorName),
    MORI_GPU_SYMBOL("cuDeviceGet", cu.DeviceGet),
    MORI_GPU_SYMBOL("cuDeviceGetCount", cu.DeviceGetCount),
    MORI_GPU_SYMBOL("cuDeviceGetAttribute", cu.DeviceGetAttribute),
    MORI_GPU_SYMBOL("cuDevicePrimaryCtxRetain", cu.DevicePrimaryCtxRetain),
    MORI_GPU_SYMBOL("cuCtxSetCurrent", cu.CtxSetCurrent),
    MORI_GPU_SYMBOL("cuCtxSynchronize", cu.CtxSynchronize),
    MORI_GPU_SYMBOL("cuStreamSynchronize", cu.StreamSynchronize),
    MORI_GPU_SYMBOL("cuMemCreate", cu.MemCreate),
    MORI_GPU_SYMBOL("cuMemRelease", cu.MemRelease),
    MORI_GPU_SYMBOL("cuMemRetainAllocationHandle", cu.MemRetainAllocationHandle),
    MORI_GPU_SYMBOL("cuMemAddressReserve", cu.MemAddressReserve),
    MORI_GPU_SYMBOL("cuMemAddressFree", cu.MemAddressFree),
    MORI_GPU_SYMBOL("cuMemMap", cu.MemMap),
    MORI_GPU_SYMBOL("cuMemUnmap", cu.MemUnmap),
    MORI_GPU_SYMBOL("cuMemSetAccess", cu.MemSetAccess),
    MORI_GPU_SYMBOL("cuMemGetAllocationGranularity", cu.MemGetAllocationGranularity),
    MORI_GPU_SYMBOL("cuMemExportToShareableHandle", cu.MemExportToShareableHandle),
    MORI_GPU_SYMBOL("cuMemImportFromShareableHandle", cu.MemImportFromShareableHandle),
    MORI_GPU_SYMBOL("cuMemAlloc_v2", cu.MemAlloc),
    MORI_GPU_SYMBOL("cuMemFree_v2", cu.MemFree),
    MORI_GPU_SYMBOL("cuMemcpy", cu.Memcpy),
    MORI_GPU_SYMBOL("cuMemsetD8_v2", cu.MemsetD8),
    MORI_GPU_SYMBOL("cuMemGetInfo_v2", cu.MemGetInfo),
    MORI_GPU_SYMBOL("cuStreamWriteValue32_v2", cu.StreamWriteValue32),
    MORI_GPU_SYMBOL("cuStreamWaitValue32_v2", cu.StreamWaitValue32),
    MORI_GPU_SYMBOL("cuStreamCreate", cu.StreamCreate),
    MORI_GPU_SYMBOL("cuStreamDestroy_v2", cu.StreamDestroy),
    MORI_GPU_SYMBOL("cuStreamIsCapturing", cu.StreamIsCapturing),
    MORI_GPU_SYMBOL("cuEventCreate", cu.EventCreate),
    MORI_GPU_SYMBOL("cuEventRecord", cu.EventRecord),
    MORI_GPU_SYMBOL("cuEventQuery", cu.EventQuery),
    MORI_GPU_SYMBOL("cuEventSynchronize", cu.EventSynchronize),
    MORI_GPU_SYMBOL("cuEventDestroy_v2", cu.EventDestroy),
    MORI_GPU_SYMBOL("cuMemsetD8Async", cu.MemsetD8Async),
    MORI_GPU_SYMBOL("cuMemcpyAsync", cu.MemcpyAsync),
    MORI_GPU_SYMBOL("cuModuleLoadData", cu.ModuleLoadData),
    MORI_GPU_SYMBOL("cuModuleGetFunction", cu.ModuleGetFunction),
    MORI_GPU_SYMBOL("cuLaunchKernel", cu.LaunchKernel),
    MORI_GPU_SYMBOL("cuModuleUnload", cu.ModuleUnload),
    MORI_GPU_SYMBOL("cuMemHostAlloc", cu.MemHostAlloc),
    MORI_GPU_SYMBOL("cuMemFreeHost", cu.MemFreeHost),
    MORI_GPU_SYMBOL("cuMemHostGetDevicePointer_v2", cu.MemHostGetDevicePointer),
};

/* ---- errors: CUresult to the nearest hipError_t ---- */

static const struct mori__gpu_error cu_errors[] = {
    {MORI__CUDA_ERROR_INVALID_VALUE, hipErrorInvalidValue},
    {MORI__CUDA_ERROR_OUT_OF_MEMORY, hipErrorOutOfMemory},
    {MORI__CUDA_ERROR_NOT_INITIALIZED, hipErrorNotInitialized},
    {MORI__CUDA_ERROR_DEINITIALIZED, hipErrorNotInitialized},
    {MORI__CUDA_ERROR_STUB_LIBRARY, hipErrorNotInitialized},
    {MORI__CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, hipErrorNotSupported},
    {MORI__CUDA_ERROR_DEVICE_UNAVAILABLE, hipErrorInvalidDevice},
    {MORI__CUDA_ERROR_NO_DEVICE, hipErrorInvalidDevice},
    {MORI__CUDA_ERROR_INVALID_DEVICE, hipErrorInvalidDevice},
    {MORI__CUDA_ERROR_INVALID_CONTEXT, hipErrorInvalidContext},
    {MORI__CUDA_ERROR_MAP_FAILED, hipErrorMapFailed},
    {MORI__CUDA_ERROR_UNMAP_FAILED, hipErrorUnmapFailed},
    {MORI__CUDA_ERROR_ALREADY_MAPPED, hipErrorAlreadyMapped},
    {MORI__CUDA_ERROR_NOT_MAPPED, hipErrorNotMapped},
    {MORI__CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, hipErrorPeerAccessUnsupported},
    {MORI__CUDA_ERROR_INVALID_HANDLE, hipErrorInvalidHandle},
    {MORI__CUDA_ERROR_NOT_FOUND, hipErrorNotFound},
    {MORI__CUDA_ERROR_NOT_READY, hipErrorNotReady},
    {MORI__CUDA_ERROR_ILLEGAL_ADDRESS, hipErrorIllegalAddress},
    {MORI__CUDA_ERROR_LAUNCH_TIMEOUT, hipErrorLaunchTimeOut},
    {MORI__CUDA_ERROR_LAUNCH_FAILED, hipErrorLaunchFailure},
    {MORI__CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, hipErrorLaunchFailure},
    /* PTX this driver cannot compile or run: the module is not usable here
     * (the core's automatic engine then keeps stream memory operations). */
    {MORI__CUDA_ERROR_INVALID_IMAGE, hipErrorNotSupported},
    {MORI__CUDA_ERROR_NO_BINARY_FOR_GPU, hipErrorNotSupported},
    {MORI__CUDA_ERROR_INVALID_PTX, hipErrorNotSupported},
    {MORI__CUDA_ERROR_JIT_COMPILER_NOT_FOUND, hipErrorNotSupported},
    {MORI__CUDA_ERROR_UNSUPPORTED_PTX_VERSION, hipErrorNotSupported},
    /* A fabric handle without an IMEX domain: to the caller's probe this
     * is "this handle type is not available here", as on ROCm. */
    {MORI__CUDA_ERROR_NOT_PERMITTED, hipErrorNotSupported},
    {MORI__CUDA_ERROR_NOT_SUPPORTED, hipErrorNotSupported},
    {MORI__CUDA_ERROR_TIMEOUT, hipErrorLaunchTimeOut},
    {MORI__CUDA_ERROR_UNKNOWN, hipErrorUnknown},
};

/* hipSuccess, or the mapped error with "call: CUDA_ERROR_X (n)" as detail. */
static hipError_t cu_check(const char *call, mori__CUresult r) {
  const char *name = NULL;
  if (r == MORI__CUDA_SUCCESS) return hipSuccess;
  if (cu.GetErrorName(r, &name) != MORI__CUDA_SUCCESS) name = NULL;
  return mori__gpu_fail(call, name, (int)r,
                        mori__gpu_map_error(cu_errors, MORI_GPU_COUNT(cu_errors), (int)r));
}

/* ---- value translation: HIP's numbers to CUDA's, one table each ---- */

struct pair {
  int hip, cu;
};

static const struct pair alloc_types[] = {
    {hipMemAllocationTypePinned, MORI__CU_MEM_ALLOCATION_TYPE_PINNED}};
static const struct pair handle_types[] = {
    {hipMemHandleTypeNone, MORI__CU_MEM_HANDLE_TYPE_NONE},
    {hipMemHandleTypePosixFileDescriptor, MORI__CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR},
    {hipMemHandleTypeWin32, MORI__CU_MEM_HANDLE_TYPE_WIN32},
    {hipMemHandleTypeWin32Kmt, MORI__CU_MEM_HANDLE_TYPE_WIN32_KMT},
    {hipMemHandleTypeFabric, MORI__CU_MEM_HANDLE_TYPE_FABRIC}};
static const struct pair location_types[] = {
    {hipMemLocationTypeDevice, MORI__CU_MEM_LOCATION_TYPE_DEVICE}};
static const struct pair access_flags[] = {
    {hipMemAccessFlagsProtNone, MORI__CU_MEM_ACCESS_FLAGS_PROT_NONE},
    {hipMemAccessFlagsProtRead, MORI__CU_MEM_ACCESS_FLAGS_PROT_READ},
    {hipMemAccessFlagsProtReadWrite, MORI__CU_MEM_ACCESS_FLAGS_PROT_READWRITE}};
static const struct pair granularity_options[] = {
    {hipMemAllocationGranularityMinimum, MORI__CU_MEM_ALLOC_GRANULARITY_MINIMUM},
    {hipMemAllocationGranularityRecommended, MORI__CU_MEM_ALLOC_GRANULARITY_RECOMMENDED}};
static const struct pair wait_flags[] = {
    {hipStreamWaitValueGte, MORI__CU_STREAM_WAIT_VALUE_GEQ},
    {hipStreamWaitValueEq, MORI__CU_STREAM_WAIT_VALUE_EQ},
    {hipStreamWaitValueAnd, MORI__CU_STREAM_WAIT_VALUE_AND},
    {hipStreamWaitValueNor, MORI__CU_STREAM_WAIT_VALUE_NOR}};
static const struct pair write_flags[] = {{0, MORI__CU_STREAM_WRITE_VALUE_DEFAULT}};
static const struct pair stream_flags[] = {
    {hipStreamDefault, MORI__CU_STREAM_DEFAULT},
    {hipStreamNonBlocking, MORI__CU_STREAM_NON_BLOCKING}};
static const struct pair capture_status[] = {
    {hipStreamCaptureStatusNone, MORI__CU_STREAM_CAPTURE_STATUS_NONE},
    {hipStreamCaptureStatusActive, MORI__CU_STREAM_CAPTURE_STATUS_ACTIVE},
    {hipStreamCaptureStatusInvalidated, MORI__CU_STREAM_CAPTURE_STATUS_INVALIDATED}};
static const struct pair attributes[] = {
    {moriDeviceAttributeMultiprocessorCount, MORI__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
    {moriDeviceAttributeVirtualMemoryManagementSupported,
     MORI__CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED},
    {moriDeviceAttributePciBusId, MORI__CU_DEVICE_ATTRIBUTE_PCI_BUS_ID},
    {moriDeviceAttributePciDeviceId, MORI__CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID},
    {moriDeviceAttributeFabricHandleSupported,
     MORI__CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED}};
#define TABLE(t) t, MORI_GPU_COUNT(t)

/* Finds hip's CUDA counterpart; a value CUDA has no word for is the
 * caller's error, reported before the driver is called. */
static hipError_t translate(const char *call, const char *what, const struct pair *t, size_t n,
                            int hip, unsigned int *out) {
  for (size_t i = 0; i < n; i++)
    if (t[i].hip == hip) {
      *out = (unsigned int)t[i].cu;
      return hipSuccess;
    }
  mori__shim_detail("%s: %s 0x%x has no CUDA equivalent", call, what, (unsigned)hip);
  return hipErrorInvalidValue;
}

/* hipMemAllocationProp and CUmemAllocationProp differ in meaning (one type
 * vs a bitmask) and padding, so the struct is built field by field. */
static hipError_t translate_prop(const char *call, const hipMemAllocationProp *in,
                                 mori__CUmemAllocationProp *out) {
  hipError_t e;
  if (in == NULL) {
    mori__shim_detail("%s: null allocation properties", call);
    return hipErrorInvalidValue;
  }
  memset(out, 0, sizeof *out);
  if ((e = translate(call, "allocation type", TABLE(alloc_types), in->type, &out->type)) ||
      (e = translate(call, "handle type", TABLE(handle_types), in->requestedHandleType,
                     &out->requestedHandleTypes)) ||
      (e = translate(call, "location type", TABLE(location_types), in->location.type,
                     &out->location.type)))
    return e;
  out->location.id = in->location.id;
  out->win32HandleMetaData = in->win32HandleMetaData;
  out->allocFlags.compressionType = in->allocFlags.compressionType;
  out->allocFlags.gpuDirectRDMACapable = in->allocFlags.gpuDirectRDMACapable;
  out->allocFlags.usage = in->allocFlags.usage;
  return hipSuccess;
}

#define DPTR(p) ((mori__CUdeviceptr)(uintptr_t)(p))
#define CU_HANDLE(h) ((mori__CUmemGenericAllocationHandle)(uintptr_t)(h))
#define HIP_HANDLE(h) ((hipMemGenericAllocationHandle_t)(uintptr_t)(h))
#define CU_STREAM(s) ((mori__CUstream)(void *)(s))
#define CU_EVENT(e) ((mori__CUevent)(void *)(e))

/* ---- contexts: the primary context of the thread's device ---- */

static pthread_mutex_t retain_lock = PTHREAD_MUTEX_INITIALIZER;
static mori__CUcontext *primary; /* per device, retained once, kept to exit */
static int device_count;
static __thread int thread_device; /* set by hipSetDevice; 0 as in HIP */

/* Retains device's primary context once, under the lock; readers outside
 * it see either NULL or the published context. */
static hipError_t retain_primary(int device, mori__CUcontext *ctx) {
  mori__CUdevice dev;
  mori__CUcontext c = NULL;
  hipError_t e = hipSuccess;
  pthread_mutex_lock(&retain_lock);
  c = primary[device];
  if (c == NULL) {
    e = cu_check("cuDeviceGet", cu.DeviceGet(&dev, device));
    if (e == hipSuccess)
      e = cu_check("cuDevicePrimaryCtxRetain", cu.DevicePrimaryCtxRetain(&c, dev));
    if (e == hipSuccess) __atomic_store_n(&primary[device], c, __ATOMIC_RELEASE);
  }
  *ctx = c;
  pthread_mutex_unlock(&retain_lock);
  return e;
}

/* Makes device's primary context current on this thread, as cudaSetDevice
 * does, so that the runtime and the shim agree on the device. */
static hipError_t make_current(const char *call, int device) {
  mori__CUcontext ctx = NULL;
  hipError_t e;
  if (device < 0 || device >= device_count) {
    mori__shim_detail("%s: device %d out of range (%d devices)", call, device, device_count);
    return hipErrorInvalidDevice;
  }
  ctx = __atomic_load_n(&primary[device], __ATOMIC_ACQUIRE);
  if (ctx == NULL && (e = retain_primary(device, &ctx)) != hipSuccess) return e;
  return cu_check("cuCtxSetCurrent", cu.CtxSetCurrent(ctx));
}

static hipError_t current(const char *call) { return make_current(call, thread_device); }

/* ---- the backend table's entries ---- */

/* Fabric handles need an IMEX channel the process may open: NVIDIA's IMEX
 * guide ("IMEX Channels") says the driver registers the character device
 * nvidia-caps-imex-channels, that nobody creates its nodes
 * /dev/nvidia-caps-imex-channels/channelN by default, and that without one
 * the CUDA calls that need it fail with an insufficient-permission error
 * (cuMemCreate of a fabric handle: CUDA_ERROR_NOT_PERMITTED, 800).  A look
 * at that folder costs a directory read; the failed cuMemCreate it spares
 * was the largest part of a process's first allocation on a GPU host
 * (docs/performance.md, "A process's first allocation").  Looked at once
 * per process; MORI_SYMM_IMEX_CHANNELS names another folder (tests). */
static pthread_once_t imex_once = PTHREAD_ONCE_INIT;
static int imex_channel; /* 1: a channel node this process may read and write */

static const char *imex_folder(void) {
  const char *dir = getenv("MORI_SYMM_IMEX_CHANNELS");
  return dir != NULL && *dir != '\0' ? dir : "/dev/nvidia-caps-imex-channels";
}

static void look_for_imex_channel(void) {
  DIR *d = opendir(imex_folder());
  if (d == NULL) return;
  for (struct dirent *e; imex_channel == 0 && (e = readdir(d)) != NULL;)
    if (strncmp(e->d_name, "channel", 7) == 0 &&
        faccessat(dirfd(d), e->d_name, R_OK | W_OK, 0) == 0)
      imex_channel = 1;
  closedir(d);
}

static hipError_t cuda_mem_create(hipMemGenericAllocationHandle_t *handle, size_t size,
                                  const hipMemAllocationProp *prop, unsigned long long flags) {
  mori__CUmemAllocationProp p;
  mori__CUmemGenericAllocationHandle h = 0;
  hipError_t e = translate_prop("cuMemCreate", prop, &p);
  if (e == hipSuccess && (p.requestedHandleTypes & MORI__CU_MEM_HANDLE_TYPE_FABRIC)) {
    pthread_once(&imex_once, look_for_imex_channel);
    if (!imex_channel) {
      /* the answer the driver gives without one, without asking it */
      mori__shim_detail("cuMemCreate: a fabric handle needs an IMEX channel and %s has none this "
                        "process may open (CUDA_ERROR_NOT_PERMITTED without asking the driver)",
                        imex_folder());
      return mori__gpu_map_error(cu_errors, MORI_GPU_COUNT(cu_errors),
                                 MORI__CUDA_ERROR_NOT_PERMITTED);
    }
  }
  if (e == hipSuccess) e = current("cuMemCreate");
  if (e == hipSuccess) e = cu_check("cuMemCreate", cu.MemCreate(&h, size, &p, flags));
  if (e == hipSuccess) *handle = HIP_HANDLE(h);
  return e;
}

static hipError_t cuda_mem_release(hipMemGenericAllocationHandle_t handle) {
  hipError_t e = current("cuMemRelease");
  return e ? e : cu_check("cuMemRelease", cu.MemRelease(CU_HANDLE(handle)));
}

static hipError_t cuda_mem_retain(hipMemGenericAllocationHandle_t *handle, void *addr) {
  mori__CUmemGenericAllocationHandle h = 0;
  hipError_t e = current("cuMemRetainAllocationHandle");
  if (e == hipSuccess)
    e = cu_check("cuMemRetainAllocationHandle", cu.MemRetainAllocationHandle(&h, addr));
  if (e == hipSuccess) *handle = HIP_HANDLE(h);
  return e;
}

static hipError_t cuda_address_reserve(void **ptr, size_t size, size_t alignment, void *addr,
                                       unsigned long long flags) {
  mori__CUdeviceptr p = 0;
  hipError_t e = current("cuMemAddressReserve");
  if (e == hipSuccess)
    e = cu_check("cuMemAddressReserve", cu.MemAddressReserve(&p, size, alignment, DPTR(addr), flags));
  if (e == hipSuccess) *ptr = (void *)(uintptr_t)p;
  return e;
}

static hipError_t cuda_address_free(void *ptr, size_t size) {
  hipError_t e = current("cuMemAddressFree");
  return e ? e : cu_check("cuMemAddressFree", cu.MemAddressFree(DPTR(ptr), size));
}

static hipError_t cuda_mem_map(void *ptr, size_t size, size_t offset,
                               hipMemGenericAllocationHandle_t handle, unsigned long long flags) {
  hipError_t e = current("cuMemMap");
  return e ? e : cu_check("cuMemMap", cu.MemMap(DPTR(ptr), size, offset, CU_HANDLE(handle), flags));
}

static hipError_t cuda_mem_unmap(void *ptr, size_t size) {
  hipError_t e = current("cuMemUnmap");
  return e ? e : cu_check("cuMemUnmap", cu.MemUnmap(DPTR(ptr), size));
}

/* Access descriptors are translated into a local array; a request for
 * more peers than it holds is issued in parts, which the driver treats the
 * same.  count 0 still reaches the driver, which judges it. */
static hipError_t cuda_set_access(void *ptr, size_t size, const hipMemAccessDesc *desc,
                                  size_t count) {
  enum { CHUNK = 16 };
  mori__CUmemAccessDesc d[CHUNK];
  size_t done = 0;
  hipError_t e = current("cuMemSetAccess");
  if (e == hipSuccess && desc == NULL && count > 0) {
    mori__shim_detail("cuMemSetAccess: null descriptors");
    e = hipErrorInvalidValue;
  }
  while (e == hipSuccess) {
    size_t n = count - done < CHUNK ? count - done : CHUNK;
    for (size_t i = 0; e == hipSuccess && i < n; i++) {
      const hipMemAccessDesc *in = &desc[done + i];
      d[i].location.id = in->location.id;
      e = translate("cuMemSetAccess", "location type", TABLE(location_types), in->location.type,
                    &d[i].location.type);
      if (e == hipSuccess)
        e = translate("cuMemSetAccess", "access flags", TABLE(access_flags), in->flags,
                      &d[i].flags);
    }
    if (e == hipSuccess) e = cu_check("cuMemSetAccess", cu.MemSetAccess(DPTR(ptr), size, d, n));
    done += n;
    if (done >= count) break;
  }
  return e;
}

static hipError_t cuda_granularity(size_t *gran, const hipMemAllocationProp *prop,
                                   hipMemAllocationGranularity_flags option) {
  mori__CUmemAllocationProp p;
  unsigned int o = 0;
  hipError_t e = translate_prop("cuMemGetAllocationGranularity", prop, &p);
  if (e == hipSuccess)
    e = translate("cuMemGetAllocationGranularity", "granularity option",
                  TABLE(granularity_options), option, &o);
  if (e == hipSuccess) e = current("cuMemGetAllocationGranularity");
  if (e == hipSuccess)
    e = cu_check("cuMemGetAllocationGranularity", cu.MemGetAllocationGranularity(gran, &p, o));
  return e;
}

/* Both runtimes write an int (fd) or 64 bytes (fabric) to shareable. */
static hipError_t cuda_export_handle(void *shareable, hipMemGenericAllocationHandle_t handle,
                                     hipMemAllocationHandleType type, unsigned long long flags) {
  unsigned int t = 0;
  hipError_t e = translate("cuMemExportToShareableHandle", "handle type", TABLE(handle_types),
                           type, &t);
  if (e == hipSuccess) e = current("cuMemExportToShareableHandle");
  if (e == hipSuccess)
    e = cu_check("cuMemExportToShareableHandle",
                 cu.MemExportToShareableHandle(shareable, CU_HANDLE(handle), t, flags));
  return e;
}

/* CUDA takes a POSIX fd by value and a fabric handle by pointer: exactly
 * the shim's convention, so osHandle passes through. */
static hipError_t cuda_import_handle(hipMemGenericAllocationHandle_t *handle, void *osHandle,
                                     hipMemAllocationHandleType type) {
  mori__CUmemGenericAllocationHandle h = 0;
  unsigned int t = 0;
  hipError_t e = translate("cuMemImportFromShareableHandle", "handle type", TABLE(handle_types),
                           type, &t);
  if (e == hipSuccess) e = current("cuMemImportFromShareableHandle");
  if (e == hipSuccess)
    e = cu_check("cuMemImportFromShareableHandle",
                 cu.MemImportFromShareableHandle(&h, osHandle, t));
  if (e == hipSuccess) *handle = HIP_HANDLE(h);
  return e;
}

static hipError_t cuda_malloc(void **ptr, size_t size) {
  mori__CUdeviceptr p = 0;
  hipError_t e = current("cuMemAlloc");
  if (e == hipSuccess) e = cu_check("cuMemAlloc", cu.MemAlloc(&p, size));
  if (e == hipSuccess) *ptr = (void *)(uintptr_t)p;
  return e;
}

static hipError_t cuda_free(void *ptr) {
  hipError_t e;
  if (ptr == NULL) return hipSuccess; /* hipFree(NULL) is a no-op */
  e = current("cuMemFree");
  return e ? e : cu_check("cuMemFree", cu.MemFree(DPTR(ptr)));
}

/* Unified addressing lets the driver infer the direction, so kind is not
 * needed. */
static hipError_t cuda_memcpy(void *dst, const void *src, size_t size, hipMemcpyKind kind) {
  hipError_t e = current("cuMemcpy");
  return e ? e : cu_check("cuMemcpy", cu.Memcpy(DPTR(dst), DPTR(src), size));
}

static hipError_t cuda_memset(void *dst, int value, size_t size) {
  hipError_t e = current("cuMemsetD8");
  return e ? e : cu_check("cuMemsetD8", cu.MemsetD8(DPTR(dst), (unsigned char)value, size));
}

static hipError_t cuda_mem_get_info(size_t *free_bytes, size_t *total_bytes) {
  hipError_t e = current("cuMemGetInfo");
  return e ? e : cu_check("cuMemGetInfo", cu.MemGetInfo(free_bytes, total_bytes));
}

static hipError_t cuda_get_device(int *device) {
  *device = thread_device;
  return hipSuccess;
}

static hipError_t cuda_set_device(int device) {
  hipError_t e = make_current("hipSetDevice", device);
  if (e == hipSuccess) thread_device = device;
  return e;
}

static hipError_t cuda_device_count(int *count) {
  return cu_check("cuDeviceGetCount", cu.DeviceGetCount(count));
}

static hipError_t cuda_device_sync(void) {
  hipError_t e = current("cuCtxSynchronize");
  return e ? e : cu_check("cuCtxSynchronize", cu.CtxSynchronize());
}

static hipError_t cuda_stream_sync(hipStream_t stream) {
  hipError_t e = current("cuStreamSynchronize");
  return e ? e : cu_check("cuStreamSynchronize", cu.StreamSynchronize(CU_STREAM(stream)));
}

static hipError_t cuda_write_value32(hipStream_t stream, void *ptr, uint32_t value,
                                     unsigned int flags) {
  unsigned int f = 0;
  hipError_t e = translate("cuStreamWriteValue32", "write flags", TABLE(write_flags), (int)flags, &f);
  if (e == hipSuccess) e = current("cuStreamWriteValue32");
  if (e == hipSuccess)
    e = cu_check("cuStreamWriteValue32",
                 cu.StreamWriteValue32(CU_STREAM(stream), DPTR(ptr), value, f));
  return e;
}

/* The comparisons have the same numbers in both runtimes; HIP's mask has
 * no CUDA counterpart, so only the full mask is accepted. */
static hipError_t cuda_wait_value32(hipStream_t stream, void *ptr, uint32_t value,
                                    unsigned int flags, uint32_t mask) {
  unsigned int f = 0;
  hipError_t e = translate("cuStreamWaitValue32", "wait flags", TABLE(wait_flags), (int)flags, &f);
  if (e == hipSuccess && mask != 0xFFFFFFFFu) {
    mori__shim_detail("cuStreamWaitValue32: mask 0x%x not supported (CUDA compares all bits)",
                      (unsigned)mask);
    e = hipErrorNotSupported;
  }
  if (e == hipSuccess) e = current("cuStreamWaitValue32");
  if (e == hipSuccess)
    e = cu_check("cuStreamWaitValue32",
                 cu.StreamWaitValue32(CU_STREAM(stream), DPTR(ptr), value, f));
  return e;
}

/* The operation types have the same numbers in both runtimes; the flags go
 * through the wait and write tables.  One driver call for the batch, which
 * costs the host about what one memop costs (docs/performance.md). */
static hipError_t cuda_batch_mem_op(hipStream_t stream, unsigned int count,
                                    hipStreamBatchMemOpParams *ops, unsigned int flags) {
  mori__CUstreamBatchMemOpParams p[MORI_HIP_BATCH_MAX];
  hipError_t e = hipSuccess;
  if (cu.StreamBatchMemOp == NULL) return hipErrorNotSupported;
  memset(p, 0, (size_t)count * sizeof p[0]);
  for (unsigned int i = 0; i < count && e == hipSuccess; i++) {
    int wait = ops[i].operation == hipStreamMemOpWaitValue32;
    p[i].op.operation = wait ? 1u : 2u; /* CU_STREAM_MEM_OP_WAIT_VALUE_32, _WRITE_VALUE_32 */
    p[i].op.address = DPTR(ops[i].waitValue.address);
    p[i].op.value = ops[i].waitValue.value;
    e = wait ? translate("cuStreamBatchMemOp", "wait flags", TABLE(wait_flags),
                         (int)ops[i].waitValue.flags, &p[i].op.flags)
             : translate("cuStreamBatchMemOp", "write flags", TABLE(write_flags),
                         (int)ops[i].writeValue.flags, &p[i].op.flags);
  }
  if (e == hipSuccess) e = current("cuStreamBatchMemOp");
  if (e == hipSuccess)
    e = cu_check("cuStreamBatchMemOp", cu.StreamBatchMemOp(CU_STREAM(stream), count, p, flags));
  return e;
}

static hipError_t cuda_stream_create(hipStream_t *stream, unsigned int flags) {
  unsigned int f = 0;
  mori__CUstream s = NULL;
  hipError_t e = translate("cuStreamCreate", "stream flags", TABLE(stream_flags), (int)flags, &f);
  if (e == hipSuccess) e = current("cuStreamCreate");
  if (e == hipSuccess) e = cu_check("cuStreamCreate", cu.StreamCreate(&s, f));
  if (e == hipSuccess) *stream = (hipStream_t)(void *)s;
  return e;
}

static hipError_t cuda_stream_destroy(hipStream_t stream) {
  hipError_t e = current("cuStreamDestroy");
  return e ? e : cu_check("cuStreamDestroy", cu.StreamDestroy(CU_STREAM(stream)));
}

/* The statuses have the same numbers; the table says so once. */
static hipError_t cuda_stream_is_capturing(hipStream_t stream, hipStreamCaptureStatus *status) {
  mori__CUstreamCaptureStatus s = 0;
  hipError_t e = current("cuStreamIsCapturing");
  if (e == hipSuccess) e = cu_check("cuStreamIsCapturing", cu.StreamIsCapturing(CU_STREAM(stream), &s));
  for (size_t i = 0; e == hipSuccess && i < MORI_GPU_COUNT(capture_status); i++)
    if ((unsigned)capture_status[i].cu == s) {
      *status = (hipStreamCaptureStatus)capture_status[i].hip;
      return hipSuccess;
    }
  if (e == hipSuccess) {
    mori__shim_detail("cuStreamIsCapturing: unknown capture status %u", s);
    e = hipErrorUnknown;
  }
  return e;
}

/* CU_EVENT_* have HIP's numbers for the flags both runtimes know. */
static hipError_t cuda_event_create(hipEvent_t *event, unsigned int flags) {
  mori__CUevent ev = NULL;
  hipError_t e = current("cuEventCreate");
  if (e == hipSuccess && (flags & ~(unsigned)(hipEventBlockingSync | hipEventDisableTiming))) {
    mori__shim_detail("cuEventCreate: event flags 0x%x have no CUDA equivalent", flags);
    e = hipErrorInvalidValue;
  }
  if (e == hipSuccess) e = cu_check("cuEventCreate", cu.EventCreate(&ev, flags));
  if (e == hipSuccess) *event = (hipEvent_t)(void *)ev;
  return e;
}

static hipError_t cuda_event_record(hipEvent_t event, hipStream_t stream) {
  hipError_t e = current("cuEventRecord");
  return e ? e : cu_check("cuEventRecord", cu.EventRecord(CU_EVENT(event), CU_STREAM(stream)));
}

/* CUDA_ERROR_NOT_READY maps to hipErrorNotReady: pending work, not a fault. */
static hipError_t cuda_event_query(hipEvent_t event) {
  hipError_t e = current("cuEventQuery");
  return e ? e : cu_check("cuEventQuery", cu.EventQuery(CU_EVENT(event)));
}

static hipError_t cuda_event_sync(hipEvent_t event) {
  hipError_t e = current("cuEventSynchronize");
  return e ? e : cu_check("cuEventSynchronize", cu.EventSynchronize(CU_EVENT(event)));
}

static hipError_t cuda_event_destroy(hipEvent_t event) {
  hipError_t e = current("cuEventDestroy");
  return e ? e : cu_check("cuEventDestroy", cu.EventDestroy(CU_EVENT(event)));
}

static hipError_t cuda_memset_async(void *dst, int value, size_t size, hipStream_t stream) {
  hipError_t e = current("cuMemsetD8Async");
  return e ? e
           : cu_check("cuMemsetD8Async", cu.MemsetD8Async(DPTR(dst), (unsigned char)value, size,
                                                          CU_STREAM(stream)));
}

/* Unified addressing: the driver infers the direction, as for cuMemcpy. */
static hipError_t cuda_memcpy_async(void *dst, const void *src, size_t size, hipMemcpyKind kind,
                                    hipStream_t stream) {
  hipError_t e = current("cuMemcpyAsync");
  return e ? e
           : cu_check("cuMemcpyAsync",
                      cu.MemcpyAsync(DPTR(dst), DPTR(src), size, CU_STREAM(stream)));
}

static hipError_t cuda_device_attribute(int *value, hipDeviceAttribute_t attr, int device) {
  unsigned int a = 0;
  mori__CUdevice dev;
  hipError_t e = translate("cuDeviceGetAttribute", "device attribute", TABLE(attributes),
                           (int)attr, &a);
  if (e == hipSuccess) e = cu_check("cuDeviceGet", cu.DeviceGet(&dev, device));
  if (e == hipSuccess) e = cu_check("cuDeviceGetAttribute", cu.DeviceGetAttribute(value, a, dev));
  return e;
}

/* The CUDA driver version (e.g. 13000 for 13.0): the number that says what
 * this runtime supports. */
static hipError_t cuda_runtime_version(int *version) {
  return cu_check("cuDriverGetVersion", cu.DriverGetVersion(version));
}

/* ---- bring-up ---- */

static void *cuda_lib;

static int cuda_fail_init(void) {
  memset(&cu, 0, sizeof cu);
  free(primary);
  primary = NULL;
  device_count = 0;
  if (cuda_lib != NULL) dlclose(cuda_lib);
  cuda_lib = NULL;
  return -1;
}

/* Reports a failed driver call of bring-up in why, by CUDA name. */
static int cuda_init_step(const char *call, mori__CUresult r, char *why, size_t whylen) {
  const char *name = NULL;
  if (r == MORI__CUDA_SUCCESS) return 0;
  if (cu.GetErrorName(r, &name) != MORI__CUDA_SUCCESS || name == NULL) name = "unknown CUresult";
  snprintf(why, whylen, "%s: %s (%d)", call, name, (int)r);
  return -1;
}

static const char *const cuda_sonames[] = {MORI_CUDA_SONAMES(MORI_SONAME_ROW)};

/* The search alone: 1 the driver loads, 0 it is not there, -1
 * MORI_SYMM_CUDA_LIB names a file that does not load. */
static int cuda_find(char *why, size_t whylen) {
  const char *opened, *env = getenv("MORI_SYMM_CUDA_LIB");
  void *lib = mori__gpu_open("MORI_SYMM_CUDA_LIB", TABLE(cuda_sonames), &opened, why, whylen);
  if (lib == NULL) return env != NULL && *env != '\0' ? -1 : 0;
  snprintf(why, whylen, "%s", opened);
  dlclose(lib);
  return 1;
}

/* The library and every entry point, no driver call (mori_shim_load);
 * once: a bring-up after it finds them resolved.  Most of the bring-up's
 * time (docs/performance.md), which a first allocation no longer pays
 * when the program loaded it ahead. */
static int cuda_load(char *why, size_t whylen) {
  const char *opened = cuda_sonames[0];
  if (cuda_lib != NULL) return 0;
  cuda_lib = mori__gpu_open("MORI_SYMM_CUDA_LIB", TABLE(cuda_sonames), &opened, why, whylen);
  if (cuda_lib == NULL) return -1;
  if (mori__gpu_resolve(cuda_lib, opened, TABLE(cu_symbols), why, whylen) != 0)
    return cuda_fail_init();
  *(void **)&cu.StreamBatchMemOp = dlsym(cuda_lib, "cuStreamBatchMemOp_v2");
  return 0;
}

static int cuda_init(char *why, size_t whylen) {
  if (cuda_load(why, whylen) != 0) return -1;
  if (cuda_init_step("cuInit", cu.Init(0), why, whylen) != 0 ||
      cuda_init_step("cuDeviceGetCount", cu.DeviceGetCount(&device_count), why, whylen) != 0)
    return cuda_fail_init();
  primary = calloc(device_count > 0 ? (size_t)device_count : 1, sizeof *primary);
  if (primary == NULL) {
    snprintf(why, whylen, "out of memory for %d device contexts", device_count);
    return cuda_fail_init();
  }
  return 0;
}

/* ---- the signal kernels: a module of PTX, JIT-compiled by the driver ---- */

/* The image's PTX; the HIP source is hiprtc's, not the driver's. */
static hipError_t cuda_module_load(hipModule_t *module, const void *image) {
  const mori_module_image *m = image;
  mori__CUmodule mod = NULL;
  if (m == NULL || m->ptx == NULL) {
    mori__shim_detail("cuModuleLoadData: the image carries no PTX");
    return hipErrorInvalidValue;
  }
  hipError_t e = current("cuModuleLoadData");
  if (e == hipSuccess) e = cu_check("cuModuleLoadData", cu.ModuleLoadData(&mod, m->ptx));
  if (e == hipSuccess) *module = (hipModule_t)(void *)mod;
  return e;
}

static hipError_t cuda_module_function(hipFunction_t *function, hipModule_t module,
                                       const char *kname) {
  mori__CUfunction f = NULL;
  hipError_t e = current("cuModuleGetFunction");
  if (e == hipSuccess)
    e = cu_check("cuModuleGetFunction",
                 cu.ModuleGetFunction(&f, (mori__CUmodule)(void *)module, kname));
  if (e == hipSuccess) *function = (hipFunction_t)(void *)f;
  return e;
}

static hipError_t cuda_launch_kernel(hipFunction_t f, unsigned int gx, unsigned int gy,
                                     unsigned int gz, unsigned int bx, unsigned int by,
                                     unsigned int bz, unsigned int shared, hipStream_t stream,
                                     void **params, void **extra) {
  hipError_t e = current("cuLaunchKernel");
  return e ? e
           : cu_check("cuLaunchKernel", cu.LaunchKernel((mori__CUfunction)(void *)f, gx, gy, gz,
                                                        bx, by, bz, shared, CU_STREAM(stream),
                                                        params, extra));
}

static hipError_t cuda_module_unload(hipModule_t module) {
  hipError_t e = current("cuModuleUnload");
  return e ? e : cu_check("cuModuleUnload", cu.ModuleUnload((mori__CUmodule)(void *)module));
}

/* Mapped (and portable) pinned memory: with unified addressing its device
 * address is its host address, which the shim's convention promises; a
 * driver that says otherwise is refused rather than given a pointer the
 * device cannot use. */
static hipError_t cuda_host_malloc(void **ptr, size_t size, unsigned int flags) {
  mori__CUdeviceptr d = 0;
  void *p = NULL;
  if (flags & ~(unsigned)(hipHostMallocPortable | hipHostMallocMapped)) {
    mori__shim_detail("cuMemHostAlloc: flags 0x%x have no CUDA equivalent", flags);
    return hipErrorInvalidValue;
  }
  hipError_t e = current("cuMemHostAlloc");
  if (e == hipSuccess) e = cu_check("cuMemHostAlloc", cu.MemHostAlloc(&p, size, flags));
  if (e == hipSuccess && (flags & hipHostMallocMapped))
    e = cu_check("cuMemHostGetDevicePointer", cu.MemHostGetDevicePointer(&d, p, 0));
  if (e == hipSuccess && (flags & hipHostMallocMapped) && d != DPTR(p)) {
    mori__shim_detail("cuMemHostAlloc: device address 0x%llx is not the host address %p "
                      "(no unified addressing)", (unsigned long long)d, p);
    e = hipErrorNotSupported;
  }
  if (e == hipSuccess) *ptr = p;
  else if (p != NULL) (void)cu.MemFreeHost(p);
  return e;
}

static hipError_t cuda_host_free(void *ptr) {
  if (ptr == NULL) return hipSuccess;
  hipError_t e = current("cuMemFreeHost");
  return e ? e : cu_check("cuMemFreeHost", cu.MemFreeHost(ptr));
}

const struct mori__shim_backend mori__shim_cuda = {
    .name = "cuda",
    .init = cuda_init,
    .find = cuda_find,
    .load = cuda_load,
    .hipMemCreate = cuda_mem_create,
    .hipMemRelease = cuda_mem_release,
    .hipMemRetainAllocationHandle = cuda_mem_retain,
    .hipMemAddressReserve = cuda_address_reserve,
    .hipMemAddressFree = cuda_address_free,
    .hipMemMap = cuda_mem_map,
    .hipMemUnmap = cuda_mem_unmap,
    .hipMemSetAccess = cuda_set_access,
    .hipMemGetAllocationGranularity = cuda_granularity,
    .hipMemExportToShareableHandle = cuda_export_handle,
    .hipMemImportFromShareableHandle = cuda_import_handle,
    .hipMalloc = cuda_malloc,
    .hipFree = cuda_free,
    .hipMemGetInfo = cuda_mem_get_info,
    .hipMemcpy = cuda_memcpy,
    .hipMemset = cuda_memset,
    .hipGetDevice = cuda_get_device,
    .hipSetDevice = cuda_set_device,
    .hipGetDeviceCount = cuda_device_count,
    .hipDeviceSynchronize = cuda_device_sync,
    .hipStreamSynchronize = cuda_stream_sync,
    .hipStreamWriteValue32 = cuda_write_value32,
    .hipStreamWaitValue32 = cuda_wait_value32,
    .hipStreamBatchMemOp = cuda_batch_mem_op,
    .hipDeviceGetAttribute = cuda_device_attribute,
    .hipStreamCreateWithFlags = cuda_stream_create,
    .hipStreamDestroy = cuda_stream_destroy,
    .hipStreamIsCapturing = cuda_stream_is_capturing,
    .hipEventCreateWithFlags = cuda_event_create,
    .hipEventRecord = cuda_event_record,
    .hipEventQuery = cuda_event_query,
    .hipEventSynchronize = cuda_event_sync,
    .hipEventDestroy = cuda_event_destroy,
    .hipMemsetAsync = cuda_memset_async,
    .hipMemcpyAsync = cuda_memcpy_async,
    .hipGetLastError = NULL, /* the driver keeps no per-thread sticky error */
    .hipRuntimeGetVersion = cuda_runtime_version,
    .hipModuleLoadData = cuda_module_load,
    .hipModuleGetFunction = cuda_module_function,
    .hipModuleLaunchKernel = cuda_launch_kernel,
    .hipModuleUnload = cuda_module_unload,
    .hipHostMalloc = cuda_host_malloc,
    .hipHostFree = cuda_host_free,
};
