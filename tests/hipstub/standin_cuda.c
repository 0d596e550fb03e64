/*
 * standin_cuda.c - libcuda_standin.so: a test stand-in for NVIDIA's
 * libcuda.so.1 that answers the driver calls the cuda backend makes with
 * the sim backend.  It is as strict as the driver where the backend could
 * go wrong: cuInit first, a current context for context-bound calls,
 * reserved bytes zero, one handle type per allocation, fds by value, and
 * fabric handles refused without an IMEX domain (MORI_STANDIN_CUDA_IMEX=1
 * grants one), as on the H200 host.
 */
#include "standin_cuda.h"

#include "shim_internal.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define CU_OK MORI__CUDA_SUCCESS
#define MAX_DEVICES 1024 /* MORI_SIM_DEVICES' bound */

/* The sim's detail, shown with MORI_STANDIN_TRACE=1: the driver itself
 * gives the backend only codes. */
void mori__shim_detail(const char *fmt, ...) {
  char detail[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  const char *trace = getenv("MORI_STANDIN_TRACE");
  if (trace != NULL && strcmp(trace, "1") == 0) fprintf(stderr, "standin: %s\n", detail);
}

/* ---- errors: the sim's hipError_t back to a CUresult ---- */

static const struct {
  hipError_t hip;
  mori__CUresult cu;
  const char *name;
} errors[] = {
    {hipSuccess, MORI__CUDA_SUCCESS, "CUDA_SUCCESS"},
    {hipErrorInvalidValue, MORI__CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
    {hipErrorOutOfMemory, MORI__CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
    {hipErrorNotInitialized, MORI__CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
    {hipErrorInvalidDevice, MORI__CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
    {hipErrorInvalidContext, MORI__CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
    {hipErrorMapFailed, MORI__CUDA_ERROR_MAP_FAILED, "CUDA_ERROR_MAP_FAILED"},
    {hipErrorUnmapFailed, MORI__CUDA_ERROR_UNMAP_FAILED, "CUDA_ERROR_UNMAP_FAILED"},
    {hipErrorAlreadyMapped, MORI__CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED"},
    {hipErrorNotMapped, MORI__CUDA_ERROR_NOT_MAPPED, "CUDA_ERROR_NOT_MAPPED"},
    {hipErrorInvalidHandle, MORI__CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
    {hipErrorNotFound, MORI__CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
    {hipErrorNotReady, MORI__CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY"},
    {hipErrorIllegalAddress, MORI__CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"},
    {hipErrorLaunchTimeOut, MORI__CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT"},
    {hipErrorNotSupported, MORI__CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"},
    {hipErrorUnknown, MORI__CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN"},
};
/* Codes only the driver produces, so only cuGetErrorName needs them. */
static const struct {
  mori__CUresult cu;
  const char *name;
} driver_only[] = {
    {MORI__CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED"},
};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static mori__CUresult from_hip(hipError_t e) {
  for (size_t i = 0; i < COUNT(errors); i++)
    if (errors[i].hip == e) return errors[i].cu;
  return MORI__CUDA_ERROR_UNKNOWN;
}

mori__CUresult cuGetErrorName(mori__CUresult error, const char **name) {
  for (size_t i = 0; i < COUNT(errors); i++)
    if (errors[i].cu == error) return *name = errors[i].name, CU_OK;
  for (size_t i = 0; i < COUNT(driver_only); i++)
    if (driver_only[i].cu == error) return *name = driver_only[i].name, CU_OK;
  *name = NULL;
  return MORI__CUDA_ERROR_INVALID_VALUE;
}

/* ---- initialization and contexts ---- */

struct CUctx_st {
  int device;
};

static struct CUctx_st primary[MAX_DEVICES];
static int initialized;
static __thread struct CUctx_st *current;

static void init_sim(void) {
  char why[256] = "";
  if (mori__shim_sim.init(why, sizeof why) == 0)
    initialized = 1;
  else
    fprintf(stderr, "standin: sim init failed: %s\n", why);
}

mori__CUresult cuInit(unsigned int flags) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  if (flags != 0) return MORI__CUDA_ERROR_INVALID_VALUE;
  pthread_once(&once, init_sim);
  return initialized ? CU_OK : MORI__CUDA_ERROR_NOT_INITIALIZED;
}

mori__CUresult cuDriverGetVersion(int *version) {
  const char *v = getenv("MORI_STANDIN_CUDA_VERSION");
  if (version == NULL) return MORI__CUDA_ERROR_INVALID_VALUE;
  *version = v != NULL && *v != '\0' ? atoi(v) : STANDIN_CUDA_DEFAULT_VERSION;
  return CU_OK;
}

/* Every call but the three above needs cuInit; context-bound ones also a
 * current context, which the backend must have made current. */
static mori__CUresult need_init(void) {
  return initialized ? CU_OK : MORI__CUDA_ERROR_NOT_INITIALIZED;
}

static mori__CUresult need_context(void) {
  if (!initialized) return MORI__CUDA_ERROR_NOT_INITIALIZED;
  return current != NULL ? CU_OK : MORI__CUDA_ERROR_INVALID_CONTEXT;
}

static mori__CUresult check_device(int ordinal) {
  int count = 0;
  mori__CUresult r = need_init();
  if (r == CU_OK) r = from_hip(mori__shim_sim.hipGetDeviceCount(&count));
  if (r == CU_OK && (ordinal < 0 || ordinal >= count || ordinal >= MAX_DEVICES))
    r = MORI__CUDA_ERROR_INVALID_DEVICE;
  return r;
}

mori__CUresult cuDeviceGet(mori__CUdevice *device, int ordinal) {
  mori__CUresult r = check_device(ordinal);
  if (r == CU_OK) *device = ordinal;
  return r;
}

mori__CUresult cuDeviceGetCount(int *count) {
  mori__CUresult r = need_init();
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipGetDeviceCount(count));
}

static const struct {
  mori__CUdevice_attribute cu;
  hipDeviceAttribute_t mori;
} attributes[] = {
    {MORI__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, moriDeviceAttributeMultiprocessorCount},
    {MORI__CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, moriDeviceAttributePciBusId},
    {MORI__CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, moriDeviceAttributePciDeviceId},
    {MORI__CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
     moriDeviceAttributeVirtualMemoryManagementSupported},
    {MORI__CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED,
     moriDeviceAttributeFabricHandleSupported},
};

mori__CUresult cuDeviceGetAttribute(int *value, mori__CUdevice_attribute attr,
                                    mori__CUdevice device) {
  mori__CUresult r = check_device(device);
  for (size_t i = 0; r == CU_OK && i < COUNT(attributes); i++)
    if (attributes[i].cu == attr)
      return from_hip(mori__shim_sim.hipDeviceGetAttribute(value, attributes[i].mori, device));
  return r != CU_OK ? r : MORI__CUDA_ERROR_INVALID_VALUE;
}

mori__CUresult cuDevicePrimaryCtxRetain(mori__CUcontext *ctx, mori__CUdevice device) {
  mori__CUresult r = check_device(device);
  if (r != CU_OK) return r;
  primary[device].device = device;
  *ctx = &primary[device];
  return CU_OK;
}

mori__CUresult cuCtxSetCurrent(mori__CUcontext ctx) {
  mori__CUresult r = need_init();
  if (r != CU_OK) return r;
  if (ctx != NULL && (ctx < primary || ctx >= primary + MAX_DEVICES))
    return MORI__CUDA_ERROR_INVALID_CONTEXT;
  current = ctx;
  return ctx != NULL ? from_hip(mori__shim_sim.hipSetDevice(ctx->device)) : CU_OK;
}

mori__CUresult cuCtxGetCurrent(mori__CUcontext *ctx) {
  mori__CUresult r = need_init();
  if (r == CU_OK) *ctx = current;
  return r;
}

mori__CUresult cuCtxSynchronize(void) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipDeviceSynchronize());
}

mori__CUresult cuStreamSynchronize(mori__CUstream stream) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipStreamSynchronize((hipStream_t)(void *)stream));
}

/* ---- VMM ---- */

#define PTR(d) ((void *)(uintptr_t)(d))
#define HIP_HANDLE(h) ((hipMemGenericAllocationHandle_t)(uintptr_t)(h))

/* CUDA's handle types are a bitmask; the sim (as HIP) takes one type. */
static mori__CUresult one_handle_type(unsigned int mask, hipMemAllocationHandleType *out) {
  static const struct {
    unsigned int cu;
    hipMemAllocationHandleType hip;
  } types[] = {
      {MORI__CU_MEM_HANDLE_TYPE_NONE, hipMemHandleTypeNone},
      {MORI__CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, hipMemHandleTypePosixFileDescriptor},
      {MORI__CU_MEM_HANDLE_TYPE_FABRIC, hipMemHandleTypeFabric},
  };
  for (size_t i = 0; i < COUNT(types); i++)
    if (types[i].cu == mask) return *out = types[i].hip, CU_OK;
  return MORI__CUDA_ERROR_NOT_SUPPORTED;
}

static mori__CUresult to_hip_prop(const mori__CUmemAllocationProp *in, hipMemAllocationProp *out) {
  static const unsigned char zero[sizeof in->allocFlags.reserved];
  if (in == NULL || in->type != MORI__CU_MEM_ALLOCATION_TYPE_PINNED ||
      in->location.type != MORI__CU_MEM_LOCATION_TYPE_DEVICE ||
      memcmp(in->allocFlags.reserved, zero, sizeof zero) != 0)
    return MORI__CUDA_ERROR_INVALID_VALUE;
  memset(out, 0, sizeof *out);
  out->type = hipMemAllocationTypePinned;
  out->location.type = hipMemLocationTypeDevice;
  out->location.id = in->location.id;
  out->win32HandleMetaData = in->win32HandleMetaData;
  out->allocFlags.compressionType = in->allocFlags.compressionType;
  out->allocFlags.gpuDirectRDMACapable = in->allocFlags.gpuDirectRDMACapable;
  out->allocFlags.usage = in->allocFlags.usage;
  return one_handle_type(in->requestedHandleTypes, &out->requestedHandleType);
}

static int imex_domain(void) {
  const char *v = getenv("MORI_STANDIN_CUDA_IMEX");
  return v != NULL && strcmp(v, "1") == 0;
}

mori__CUresult cuMemCreate(mori__CUmemGenericAllocationHandle *handle, size_t size,
                           const mori__CUmemAllocationProp *prop, unsigned long long flags) {
  hipMemAllocationProp p;
  hipMemGenericAllocationHandle_t h = NULL;
  mori__CUresult r = need_init();
  if (r == CU_OK) r = to_hip_prop(prop, &p);
  if (r == CU_OK && p.requestedHandleType == hipMemHandleTypeFabric && !imex_domain())
    r = MORI__CUDA_ERROR_NOT_PERMITTED;
  if (r == CU_OK) r = from_hip(mori__shim_sim.hipMemCreate(&h, size, &p, flags));
  if (r == CU_OK) *handle = (mori__CUmemGenericAllocationHandle)(uintptr_t)h;
  return r;
}

mori__CUresult cuMemRelease(mori__CUmemGenericAllocationHandle handle) {
  mori__CUresult r = need_init();
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipMemRelease(HIP_HANDLE(handle)));
}

mori__CUresult cuMemRetainAllocationHandle(mori__CUmemGenericAllocationHandle *handle,
                                           void *addr) {
  hipMemGenericAllocationHandle_t h = NULL;
  mori__CUresult r = need_init();
  if (r == CU_OK) r = from_hip(mori__shim_sim.hipMemRetainAllocationHandle(&h, addr));
  if (r == CU_OK) *handle = (mori__CUmemGenericAllocationHandle)(uintptr_t)h;
  return r;
}

mori__CUresult cuMemAddressReserve(mori__CUdeviceptr *ptr, size_t size, size_t alignment,
                                   mori__CUdeviceptr addr, unsigned long long flags) {
  void *p = NULL;
  mori__CUresult r = need_init();
  if (r == CU_OK)
    r = from_hip(mori__shim_sim.hipMemAddressReserve(&p, size, alignment, PTR(addr), flags));
  if (r == CU_OK) *ptr = (mori__CUdeviceptr)(uintptr_t)p;
  return r;
}

mori__CUresult cuMemAddressFree(mori__CUdeviceptr ptr, size_t size) {
  mori__CUresult r = need_init();
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipMemAddressFree(PTR(ptr), size));
}

mori__CUresult cuMemMap(mori__CUdeviceptr ptr, size_t size, size_t offset,
                        mori__CUmemGenericAllocationHandle handle, unsigned long long flags) {
  mori__CUresult r = need_init();
  return r != CU_OK ? r
                    : from_hip(mori__shim_sim.hipMemMap(PTR(ptr), size, offset, HIP_HANDLE(handle),
                                                      flags));
}

mori__CUresult cuMemUnmap(mori__CUdeviceptr ptr, size_t size) {
  mori__CUresult r = need_init();
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipMemUnmap(PTR(ptr), size));
}

mori__CUresult cuMemSetAccess(mori__CUdeviceptr ptr, size_t size,
                              const mori__CUmemAccessDesc *desc, size_t count) {
  hipMemAccessDesc d[64];
  mori__CUresult r = need_init();
  if (r == CU_OK && (desc == NULL || count == 0 || count > COUNT(d)))
    r = MORI__CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; r == CU_OK && i < count; i++) {
    if (desc[i].location.type != MORI__CU_MEM_LOCATION_TYPE_DEVICE)
      return MORI__CUDA_ERROR_INVALID_VALUE;
    d[i].location.type = hipMemLocationTypeDevice;
    d[i].location.id = desc[i].location.id;
    d[i].flags = (hipMemAccessFlags)desc[i].flags; /* same numbers */
  }
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipMemSetAccess(PTR(ptr), size, d, count));
}

mori__CUresult cuMemGetAllocationGranularity(size_t *granularity,
                                             const mori__CUmemAllocationProp *prop,
                                             mori__CUmemAllocationGranularity_flags option) {
  hipMemAllocationProp p;
  mori__CUresult r = need_init();
  if (r == CU_OK) r = to_hip_prop(prop, &p);
  return r != CU_OK ? r
                    : from_hip(mori__shim_sim.hipMemGetAllocationGranularity(granularity, &p,
                                                          (hipMemAllocationGranularity_flags)option));
}

mori__CUresult cuMemExportToShareableHandle(void *shareable,
                                            mori__CUmemGenericAllocationHandle handle,
                                            mori__CUmemAllocationHandleType type,
                                            unsigned long long flags) {
  hipMemAllocationHandleType t = hipMemHandleTypeNone;
  mori__CUresult r = need_init();
  if (r == CU_OK) r = one_handle_type(type, &t);
  return r != CU_OK ? r
                    : from_hip(mori__shim_sim.hipMemExportToShareableHandle(shareable, HIP_HANDLE(handle), t,
                                                            flags));
}

/* The driver takes a POSIX fd by value; a pointer here is the backend
 * using the old ROCm convention on CUDA, and must fail loudly. */
mori__CUresult cuMemImportFromShareableHandle(mori__CUmemGenericAllocationHandle *handle,
                                              void *osHandle,
                                              mori__CUmemAllocationHandleType type) {
  hipMemAllocationHandleType t = hipMemHandleTypeNone;
  hipMemGenericAllocationHandle_t h = NULL;
  mori__CUresult r = need_init();
  if (r == CU_OK) r = one_handle_type(type, &t);
  if (r == CU_OK && t == hipMemHandleTypePosixFileDescriptor) {
    intptr_t fd = (intptr_t)osHandle;
    if (fd <= 0 || fd > INT_MAX || fcntl((int)fd, F_GETFD) == -1) {
      fprintf(stderr, "standin: import ABI mismatch: CUDA takes the fd by value; osHandle %p "
                      "is not an open fd\n",
              osHandle);
      return MORI__CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (r == CU_OK) r = from_hip(mori__shim_sim.hipMemImportFromShareableHandle(&h, osHandle, t));
  if (r == CU_OK) *handle = (mori__CUmemGenericAllocationHandle)(uintptr_t)h;
  return r;
}

/* ---- context-bound memory calls ---- */

mori__CUresult cuMemAlloc_v2(mori__CUdeviceptr *ptr, size_t size) {
  void *p = NULL;
  mori__CUresult r = need_context();
  if (r == CU_OK) r = from_hip(mori__shim_sim.hipMalloc(&p, size));
  if (r == CU_OK) *ptr = (mori__CUdeviceptr)(uintptr_t)p;
  return r;
}

mori__CUresult cuMemFree_v2(mori__CUdeviceptr ptr) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipFree(PTR(ptr)));
}

mori__CUresult cuMemcpy(mori__CUdeviceptr dst, mori__CUdeviceptr src, size_t size) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r
                    : from_hip(mori__shim_sim.hipMemcpy(PTR(dst), PTR(src), size, hipMemcpyDefault));
}

mori__CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipMemGetInfo(free_bytes, total_bytes));
}

mori__CUresult cuMemsetD8_v2(mori__CUdeviceptr dst, unsigned char value, size_t count) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipMemset(PTR(dst), value, count));
}

mori__CUresult cuStreamWriteValue32_v2(mori__CUstream stream, mori__CUdeviceptr addr,
                                       unsigned int value, unsigned int flags) {
  mori__CUresult r = need_context();
  if (r == CU_OK && flags != MORI__CU_STREAM_WRITE_VALUE_DEFAULT)
    r = MORI__CUDA_ERROR_INVALID_VALUE;
  return r != CU_OK ? r
                    : from_hip(mori__shim_sim.hipStreamWriteValue32((hipStream_t)(void *)stream,
                                                            PTR(addr), value, 0));
}

/* CU_STREAM_WAIT_VALUE_* have HIP's numbers; CUDA compares whole words. */
mori__CUresult cuStreamWaitValue32_v2(mori__CUstream stream, mori__CUdeviceptr addr,
                                      unsigned int value, unsigned int flags) {
  mori__CUresult r = need_context();
  if (r == CU_OK && flags > MORI__CU_STREAM_WAIT_VALUE_NOR) r = MORI__CUDA_ERROR_INVALID_VALUE;
  return r != CU_OK ? r
                    : from_hip(mori__shim_sim.hipStreamWaitValue32((hipStream_t)(void *)stream, PTR(addr),
                                                           value, flags, 0xFFFFFFFFu));
}

/* The 32-bit wait and write entries, in order, as the driver runs them. */
mori__CUresult cuStreamBatchMemOp_v2(mori__CUstream stream, unsigned int count,
                                     mori__CUstreamBatchMemOpParams *ops, unsigned int flags) {
  mori__CUresult r = need_context();
  if (r == CU_OK && (ops == NULL || count == 0 || count > 255 || flags != 0))
    r = MORI__CUDA_ERROR_INVALID_VALUE;
  for (unsigned int i = 0; r == CU_OK && i < count; i++)
    r = ops[i].op.operation == 1
            ? cuStreamWaitValue32_v2(stream, ops[i].op.address, (unsigned int)ops[i].op.value,
                                     ops[i].op.flags)
        : ops[i].op.operation == 2
            ? cuStreamWriteValue32_v2(stream, ops[i].op.address, (unsigned int)ops[i].op.value,
                                      ops[i].op.flags)
            : MORI__CUDA_ERROR_INVALID_VALUE;
  return r;
}

/* ---- streams, events, stream-ordered fills and copies ---- */

#define HIP_STREAM(s) ((hipStream_t)(void *)(s))
#define HIP_EVENT(e) ((hipEvent_t)(void *)(e))

/* The stream flags and capture statuses have HIP's numbers. */
mori__CUresult cuStreamCreate(mori__CUstream *stream, unsigned int flags) {
  mori__CUresult r = need_context();
  hipStream_t s = NULL;
  if (r == CU_OK) r = from_hip(mori__shim_sim.hipStreamCreateWithFlags(&s, flags));
  if (r == CU_OK) *stream = (mori__CUstream)(void *)s;
  return r;
}

mori__CUresult cuStreamDestroy_v2(mori__CUstream stream) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipStreamDestroy(HIP_STREAM(stream)));
}

mori__CUresult cuStreamIsCapturing(mori__CUstream stream, mori__CUstreamCaptureStatus *status) {
  hipStreamCaptureStatus s = hipStreamCaptureStatusNone;
  mori__CUresult r = need_context();
  if (r == CU_OK) r = from_hip(mori__shim_sim.hipStreamIsCapturing(HIP_STREAM(stream), &s));
  if (r == CU_OK) *status = (mori__CUstreamCaptureStatus)s;
  return r;
}

mori__CUresult cuEventCreate(mori__CUevent *event, unsigned int flags) {
  mori__CUresult r = need_context();
  hipEvent_t e = NULL;
  if (r == CU_OK) r = from_hip(mori__shim_sim.hipEventCreateWithFlags(&e, flags));
  if (r == CU_OK) *event = (mori__CUevent)(void *)e;
  return r;
}

mori__CUresult cuEventRecord(mori__CUevent event, mori__CUstream stream) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r
                    : from_hip(mori__shim_sim.hipEventRecord(HIP_EVENT(event), HIP_STREAM(stream)));
}

mori__CUresult cuEventQuery(mori__CUevent event) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipEventQuery(HIP_EVENT(event)));
}

mori__CUresult cuEventSynchronize(mori__CUevent event) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipEventSynchronize(HIP_EVENT(event)));
}

mori__CUresult cuEventDestroy_v2(mori__CUevent event) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipEventDestroy(HIP_EVENT(event)));
}

mori__CUresult cuMemsetD8Async(mori__CUdeviceptr dst, unsigned char value, size_t count,
                               mori__CUstream stream) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r
                    : from_hip(mori__shim_sim.hipMemsetAsync(PTR(dst), value, count,
                                                           HIP_STREAM(stream)));
}

mori__CUresult cuMemcpyAsync(mori__CUdeviceptr dst, mori__CUdeviceptr src, size_t size,
                             mori__CUstream stream) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r
                    : from_hip(mori__shim_sim.hipMemcpyAsync(PTR(dst), PTR(src), size,
                                                           hipMemcpyDefault, HIP_STREAM(stream)));
}

/* ---- modules and kernels: the driver takes PTX (or a cubin); the sim
 * models the kernels an image's PTX defines ---- */

#define HIP_MODULE(m) ((hipModule_t)(void *)(m))

mori__CUresult cuModuleLoadData(mori__CUmodule *module, const void *image) {
  mori__CUresult r = need_context();
  hipModule_t m = NULL;
  mori_module_image img = {.ptx = image, .hip_source = NULL, .name = "standin"};
  if (r == CU_OK && image == NULL) r = MORI__CUDA_ERROR_INVALID_VALUE;
  if (r == CU_OK) r = from_hip(mori__shim_sim.hipModuleLoadData(&m, &img));
  if (r == CU_OK) *module = (mori__CUmodule)(void *)m;
  return r;
}

mori__CUresult cuModuleGetFunction(mori__CUfunction *function, mori__CUmodule module,
                                   const char *name) {
  mori__CUresult r = need_context();
  hipFunction_t f = NULL;
  if (r == CU_OK)
    r = from_hip(mori__shim_sim.hipModuleGetFunction(&f, HIP_MODULE(module), name));
  if (r == CU_OK) *function = (mori__CUfunction)(void *)f;
  return r;
}

mori__CUresult cuLaunchKernel(mori__CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                              unsigned int gridDimZ, unsigned int blockDimX,
                              unsigned int blockDimY, unsigned int blockDimZ,
                              unsigned int sharedMemBytes, mori__CUstream stream,
                              void **kernelParams, void **extra) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r
                    : from_hip(mori__shim_sim.hipModuleLaunchKernel(
                          (hipFunction_t)(void *)f, gridDimX, gridDimY, gridDimZ, blockDimX,
                          blockDimY, blockDimZ, sharedMemBytes, HIP_STREAM(stream), kernelParams,
                          extra));
}

mori__CUresult cuModuleUnload(mori__CUmodule module) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipModuleUnload(HIP_MODULE(module)));
}

/* CU_MEMHOSTALLOC_* have HIP's numbers; the sim's host memory is addressed
 * alike by host and device, as under unified addressing. */
mori__CUresult cuMemHostAlloc(void **ptr, size_t size, unsigned int flags) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipHostMalloc(ptr, size, flags));
}

mori__CUresult cuMemFreeHost(void *ptr) {
  mori__CUresult r = need_context();
  return r != CU_OK ? r : from_hip(mori__shim_sim.hipHostFree(ptr));
}

mori__CUresult cuMemHostGetDevicePointer_v2(mori__CUdeviceptr *dptr, void *ptr,
                                            unsigned int flags) {
  mori__CUresult r = need_context();
  if (r == CU_OK && (dptr == NULL || ptr == NULL || flags != 0))
    r = MORI__CUDA_ERROR_INVALID_VALUE;
  if (r == CU_OK) *dptr = (mori__CUdeviceptr)(uintptr_t)ptr;
  return r;
}
