/*
 * gpu_cuda.h - the slice of the CUDA driver API the cuda backend uses,
 * declared here because CI machines have no cuda.h.  Names are CUDA's with
 * a mori__ prefix; tests/hipstub/cuda_abi_check*.c assert every size,
 * offset, value and prototype against the real cuda.h wherever it exists.
 */
#ifndef MORI_GPU_CUDA_H
#define MORI_GPU_CUDA_H

#include <stddef.h>

/* Enums are passed as unsigned int: that is the type GCC and Clang give a
 * C enum without negative values, so the prototypes stay compatible. */
typedef unsigned int mori__CUresult;
typedef int mori__CUdevice;
typedef unsigned long long mori__CUdeviceptr;
typedef unsigned long long mori__CUmemGenericAllocationHandle;
typedef struct CUctx_st *mori__CUcontext;
typedef struct CUstream_st *mori__CUstream;
typedef struct CUevent_st *mori__CUevent;
typedef struct CUmod_st *mori__CUmodule;
typedef struct CUfunc_st *mori__CUfunction;
typedef unsigned int mori__CUstreamCaptureStatus;
typedef unsigned int mori__CUdevice_attribute;
typedef unsigned int mori__CUmemAllocationHandleType;
typedef unsigned int mori__CUmemAllocationGranularity_flags;

enum {
  MORI__CUDA_SUCCESS = 0,
  MORI__CUDA_ERROR_INVALID_VALUE = 1,
  MORI__CUDA_ERROR_OUT_OF_MEMORY = 2,
  MORI__CUDA_ERROR_NOT_INITIALIZED = 3,
  MORI__CUDA_ERROR_DEINITIALIZED = 4,
  MORI__CUDA_ERROR_STUB_LIBRARY = 34,
  MORI__CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER = 36,
  MORI__CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
  MORI__CUDA_ERROR_NO_DEVICE = 100,
  MORI__CUDA_ERROR_INVALID_DEVICE = 101,
  MORI__CUDA_ERROR_INVALID_CONTEXT = 201,
  MORI__CUDA_ERROR_MAP_FAILED = 205,
  MORI__CUDA_ERROR_UNMAP_FAILED = 206,
  MORI__CUDA_ERROR_ALREADY_MAPPED = 208,
  MORI__CUDA_ERROR_INVALID_IMAGE = 200,
  MORI__CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  MORI__CUDA_ERROR_NOT_MAPPED = 211,
  MORI__CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
  MORI__CUDA_ERROR_INVALID_PTX = 218,
  MORI__CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221,
  MORI__CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  MORI__CUDA_ERROR_OPERATING_SYSTEM = 304,
  MORI__CUDA_ERROR_INVALID_HANDLE = 400,
  MORI__CUDA_ERROR_NOT_FOUND = 500,
  MORI__CUDA_ERROR_NOT_READY = 600,
  MORI__CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  MORI__CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  MORI__CUDA_ERROR_LAUNCH_TIMEOUT = 702,
  MORI__CUDA_ERROR_LAUNCH_FAILED = 719,
  MORI__CUDA_ERROR_NOT_PERMITTED = 800,
  MORI__CUDA_ERROR_NOT_SUPPORTED = 801,
  MORI__CUDA_ERROR_TIMEOUT = 909,
  MORI__CUDA_ERROR_UNKNOWN = 999
};

enum {
  MORI__CU_MEM_ALLOCATION_TYPE_PINNED = 0x1,
  MORI__CU_MEM_HANDLE_TYPE_NONE = 0x0,
  MORI__CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1,
  MORI__CU_MEM_HANDLE_TYPE_WIN32 = 0x2,
  MORI__CU_MEM_HANDLE_TYPE_WIN32_KMT = 0x4,
  MORI__CU_MEM_HANDLE_TYPE_FABRIC = 0x8,
  MORI__CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
  MORI__CU_MEM_ACCESS_FLAGS_PROT_NONE = 0x0,
  MORI__CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1,
  MORI__CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
  MORI__CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0,
  MORI__CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 0x1,
  MORI__CU_STREAM_WAIT_VALUE_GEQ = 0x0,
  MORI__CU_STREAM_WAIT_VALUE_EQ = 0x1,
  MORI__CU_STREAM_WAIT_VALUE_AND = 0x2,
  MORI__CU_STREAM_WAIT_VALUE_NOR = 0x3,
  MORI__CU_STREAM_WRITE_VALUE_DEFAULT = 0x0,
  MORI__CU_STREAM_DEFAULT = 0x0,
  MORI__CU_STREAM_NON_BLOCKING = 0x1,
  MORI__CU_EVENT_DEFAULT = 0x0,
  MORI__CU_EVENT_BLOCKING_SYNC = 0x1,
  MORI__CU_EVENT_DISABLE_TIMING = 0x2,
  MORI__CU_MEMHOSTALLOC_PORTABLE = 0x1,
  MORI__CU_MEMHOSTALLOC_DEVICEMAP = 0x2,
  MORI__CU_STREAM_CAPTURE_STATUS_NONE = 0,
  MORI__CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  MORI__CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
  MORI__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  MORI__CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  MORI__CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  MORI__CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
  MORI__CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED = 128
};

/* cuda_abi_check_calls.c defines the guard to read these names as cuda.h's
 * own structs when it compares prototypes. */
#ifndef MORI_GPU_CUDA_STRUCTS_FROM_CUDA_H
typedef struct mori__CUmemLocation {
  unsigned int type; /* CUmemLocationType */
  int id;
} mori__CUmemLocation;

/* Unlike hipMemAllocationProp, requestedHandleTypes is a bitmask and the
 * flags carry four reserved bytes (same total size, different meaning). */
typedef struct mori__CUmemAllocationProp {
  unsigned int type; /* CUmemAllocationType */
  mori__CUmemAllocationHandleType requestedHandleTypes;
  mori__CUmemLocation location;
  void *win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} mori__CUmemAllocationProp;

typedef struct mori__CUmemAccessDesc {
  mori__CUmemLocation location;
  unsigned int flags; /* CUmemAccess_flags */
} mori__CUmemAccessDesc;

#endif

#define MORI__CU_FABRIC_HANDLE_SIZE 64

/* One typedef per driver entry point, named after the symbol the backend
 * resolves (the versioned one where the driver has several). */
typedef mori__CUresult (*mori__cuInit_fn)(unsigned int flags);
typedef mori__CUresult (*mori__cuDriverGetVersion_fn)(int *version);
typedef mori__CUresult (*mori__cuGetErrorName_fn)(mori__CUresult error, const char **name);
typedef mori__CUresult (*mori__cuDeviceGet_fn)(mori__CUdevice *device, int ordinal);
typedef mori__CUresult (*mori__cuDeviceGetCount_fn)(int *count);
typedef mori__CUresult (*mori__cuDeviceGetAttribute_fn)(int *value,
                                                       mori__CUdevice_attribute attr,
                                                       mori__CUdevice device);
typedef mori__CUresult (*mori__cuDevicePrimaryCtxRetain_fn)(mori__CUcontext *ctx,
                                                           mori__CUdevice device);
typedef mori__CUresult (*mori__cuCtxSetCurrent_fn)(mori__CUcontext ctx);
typedef mori__CUresult (*mori__cuCtxSynchronize_fn)(void);
typedef mori__CUresult (*mori__cuStreamSynchronize_fn)(mori__CUstream stream);
typedef mori__CUresult (*mori__cuMemCreate_fn)(mori__CUmemGenericAllocationHandle *handle,
                                              size_t size, const mori__CUmemAllocationProp *prop,
                                              unsigned long long flags);
typedef mori__CUresult (*mori__cuMemRelease_fn)(mori__CUmemGenericAllocationHandle handle);
typedef mori__CUresult (*mori__cuMemRetainAllocationHandle_fn)(
    mori__CUmemGenericAllocationHandle *handle, void *addr);
typedef mori__CUresult (*mori__cuMemAddressReserve_fn)(mori__CUdeviceptr *ptr, size_t size,
                                                      size_t alignment, mori__CUdeviceptr addr,
                                                      unsigned long long flags);
typedef mori__CUresult (*mori__cuMemAddressFree_fn)(mori__CUdeviceptr ptr, size_t size);
typedef mori__CUresult (*mori__cuMemMap_fn)(mori__CUdeviceptr ptr, size_t size, size_t offset,
                                           mori__CUmemGenericAllocationHandle handle,
                                           unsigned long long flags);
typedef mori__CUresult (*mori__cuMemUnmap_fn)(mori__CUdeviceptr ptr, size_t size);
typedef mori__CUresult (*mori__cuMemSetAccess_fn)(mori__CUdeviceptr ptr, size_t size,
                                                 const mori__CUmemAccessDesc *desc, size_t count);
typedef mori__CUresult (*mori__cuMemGetAllocationGranularity_fn)(
    size_t *granularity, const mori__CUmemAllocationProp *prop,
    mori__CUmemAllocationGranularity_flags option);
typedef mori__CUresult (*mori__cuMemExportToShareableHandle_fn)(
    void *shareable, mori__CUmemGenericAllocationHandle handle,
    mori__CUmemAllocationHandleType type, unsigned long long flags);
typedef mori__CUresult (*mori__cuMemImportFromShareableHandle_fn)(
    mori__CUmemGenericAllocationHandle *handle, void *osHandle,
    mori__CUmemAllocationHandleType type);
typedef mori__CUresult (*mori__cuMemAlloc_v2_fn)(mori__CUdeviceptr *ptr, size_t size);
typedef mori__CUresult (*mori__cuMemFree_v2_fn)(mori__CUdeviceptr ptr);
typedef mori__CUresult (*mori__cuMemGetInfo_v2_fn)(size_t *free_bytes, size_t *total_bytes);
typedef mori__CUresult (*mori__cuMemcpy_fn)(mori__CUdeviceptr dst, mori__CUdeviceptr src,
                                           size_t size);
typedef mori__CUresult (*mori__cuMemsetD8_v2_fn)(mori__CUdeviceptr dst, unsigned char value,
                                                size_t count);
typedef mori__CUresult (*mori__cuStreamWriteValue32_v2_fn)(mori__CUstream stream,
                                                          mori__CUdeviceptr addr,
                                                          unsigned int value, unsigned int flags);
typedef mori__CUresult (*mori__cuStreamWaitValue32_v2_fn)(mori__CUstream stream,
                                                         mori__CUdeviceptr addr,
                                                         unsigned int value, unsigned int flags);
/* CUstreamBatchMemOpParams: a 48-byte union; the 32-bit wait and write
 * entries share this layout (operation, address, value, flags, alias). */
typedef union mori__CUstreamBatchMemOpParams {
  unsigned int operation; /* CUstreamBatchMemOpType: WAIT_VALUE_32 1, WRITE_VALUE_32 2 */
  struct {
    unsigned int operation;
    mori__CUdeviceptr address;
    unsigned long long value; /* cuuint32_t value / cuuint64_t value64 */
    unsigned int flags;
    mori__CUdeviceptr alias;
  } op;
  unsigned long long pad[6];
} mori__CUstreamBatchMemOpParams;
typedef mori__CUresult (*mori__cuStreamBatchMemOp_v2_fn)(mori__CUstream stream,
                                                        unsigned int count,
                                                        mori__CUstreamBatchMemOpParams *ops,
                                                        unsigned int flags);
typedef mori__CUresult (*mori__cuStreamCreate_fn)(mori__CUstream *stream, unsigned int flags);
typedef mori__CUresult (*mori__cuStreamDestroy_v2_fn)(mori__CUstream stream);
typedef mori__CUresult (*mori__cuStreamIsCapturing_fn)(mori__CUstream stream,
                                                      mori__CUstreamCaptureStatus *status);
typedef mori__CUresult (*mori__cuEventCreate_fn)(mori__CUevent *event, unsigned int flags);
typedef mori__CUresult (*mori__cuEventRecord_fn)(mori__CUevent event, mori__CUstream stream);
typedef mori__CUresult (*mori__cuEventQuery_fn)(mori__CUevent event);
typedef mori__CUresult (*mori__cuEventSynchronize_fn)(mori__CUevent event);
typedef mori__CUresult (*mori__cuEventDestroy_v2_fn)(mori__CUevent event);
typedef mori__CUresult (*mori__cuMemsetD8Async_fn)(mori__CUdeviceptr dst, unsigned char value,
                                                  size_t count, mori__CUstream stream);
typedef mori__CUresult (*mori__cuMemcpyAsync_fn)(mori__CUdeviceptr dst, mori__CUdeviceptr src,
                                                size_t size, mori__CUstream stream);
typedef mori__CUresult (*mori__cuModuleLoadData_fn)(mori__CUmodule *module, const void *image);
typedef mori__CUresult (*mori__cuModuleGetFunction_fn)(mori__CUfunction *function,
                                                      mori__CUmodule module, const char *name);
typedef mori__CUresult (*mori__cuLaunchKernel_fn)(
    mori__CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
    unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
    unsigned int sharedMemBytes, mori__CUstream stream, void **kernelParams, void **extra);
typedef mori__CUresult (*mori__cuModuleUnload_fn)(mori__CUmodule module);
typedef mori__CUresult (*mori__cuMemHostAlloc_fn)(void **ptr, size_t size, unsigned int flags);
typedef mori__CUresult (*mori__cuMemFreeHost_fn)(void *ptr);
typedef mori__CUresult (*mori__cuMemHostGetDevicePointer_v2_fn)(mori__CUdeviceptr *dptr,
                                                               void *ptr, unsigned int flags);

#endif
