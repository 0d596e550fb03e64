/*
 * cuda_abi_check_calls.c - compiled only where cuda.h exists: each driver
 * entry point the cuda backend resolves has, in
 * hip_shim/backends/gpu_cuda.h, the prototype cuda.h gives the symbol of
 * that name.  Its structs are read as
 * NVIDIA's here (their layouts are checked in cuda_abi_check.c), so that
 * the function types can be compared whole.
 */
#include <cuda.h>

#define mori__CUmemAllocationProp CUmemAllocationProp
#define mori__CUmemAccessDesc CUmemAccessDesc
#define mori__CUmemLocation CUmemLocation
#define MORI_GPU_CUDA_STRUCTS_FROM_CUDA_H 1
#include "gpu_cuda.h"

#define SAME_PROTOTYPE(symbol)                                                             \
  _Static_assert(__builtin_types_compatible_p(mori__##symbol##_fn, __typeof__(&symbol)),   \
                 #symbol " prototype")

/* cuda.h maps the plain names of some calls to versioned symbols; the
 * backend resolves the versioned ones, so those are what is compared. */
#undef cuMemAlloc
#undef cuMemFree
#undef cuMemsetD8
#undef cuStreamWriteValue32
#undef cuStreamWaitValue32
#undef cuMemcpy
#undef cuStreamSynchronize
#undef cuStreamDestroy
#undef cuEventDestroy
#undef cuStreamIsCapturing
#undef cuEventRecord
#undef cuMemsetD8Async
#undef cuMemcpyAsync
#undef cuMemHostGetDevicePointer

SAME_PROTOTYPE(cuInit);
SAME_PROTOTYPE(cuDriverGetVersion);
SAME_PROTOTYPE(cuGetErrorName);
SAME_PROTOTYPE(cuDeviceGet);
SAME_PROTOTYPE(cuDeviceGetCount);
SAME_PROTOTYPE(cuDeviceGetAttribute);
SAME_PROTOTYPE(cuDevicePrimaryCtxRetain);
SAME_PROTOTYPE(cuCtxSetCurrent);
SAME_PROTOTYPE(cuCtxSynchronize);
SAME_PROTOTYPE(cuStreamSynchronize);
SAME_PROTOTYPE(cuMemCreate);
SAME_PROTOTYPE(cuMemRelease);
SAME_PROTOTYPE(cuMemRetainAllocationHandle);
SAME_PROTOTYPE(cuMemAddressReserve);
SAME_PROTOTYPE(cuMemAddressFree);
SAME_PROTOTYPE(cuMemMap);
SAME_PROTOTYPE(cuMemUnmap);
SAME_PROTOTYPE(cuMemSetAccess);
SAME_PROTOTYPE(cuMemGetAllocationGranularity);
SAME_PROTOTYPE(cuMemExportToShareableHandle);
SAME_PROTOTYPE(cuMemImportFromShareableHandle);
SAME_PROTOTYPE(cuMemAlloc_v2);
SAME_PROTOTYPE(cuMemFree_v2);
SAME_PROTOTYPE(cuMemcpy);
SAME_PROTOTYPE(cuMemsetD8_v2);
SAME_PROTOTYPE(cuMemGetInfo_v2);
SAME_PROTOTYPE(cuStreamWriteValue32_v2);
SAME_PROTOTYPE(cuStreamWaitValue32_v2);
SAME_PROTOTYPE(cuStreamCreate);
SAME_PROTOTYPE(cuStreamDestroy_v2);
SAME_PROTOTYPE(cuStreamIsCapturing);
SAME_PROTOTYPE(cuEventCreate);
SAME_PROTOTYPE(cuEventRecord);
SAME_PROTOTYPE(cuEventQuery);
SAME_PROTOTYPE(cuEventSynchronize);
SAME_PROTOTYPE(cuEventDestroy_v2);
SAME_PROTOTYPE(cuMemsetD8Async);
SAME_PROTOTYPE(cuMemcpyAsync);
SAME_PROTOTYPE(cuModuleLoadData);
SAME_PROTOTYPE(cuModuleGetFunction);
SAME_PROTOTYPE(cuLaunchKernel);
SAME_PROTOTYPE(cuModuleUnload);
SAME_PROTOTYPE(cuMemHostAlloc);
SAME_PROTOTYPE(cuMemFreeHost);
SAME_PROTOTYPE(cuMemHostGetDevicePointer_v2);
