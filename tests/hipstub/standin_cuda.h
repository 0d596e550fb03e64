/*
 * standin_cuda.h - the CUDA driver entry points libcuda_standin.so exports,
 * under the symbol names the cuda backend resolves, typed with the
 * backend's own declarations (hip_shim/backends/gpu_cuda.h; checked against
 * cuda.h by cuda_abi_check*.c where it exists).
 */
#ifndef MORI_STANDIN_CUDA_H
#define MORI_STANDIN_CUDA_H

#include "gpu_cuda.h"

/* MORI_STANDIN_CUDA_VERSION's default: CUDA 13.0. */
#define STANDIN_CUDA_DEFAULT_VERSION 13000

mori__CUresult cuInit(unsigned int flags);
mori__CUresult cuDriverGetVersion(int *version);
mori__CUresult cuGetErrorName(mori__CUresult error, const char **name);
mori__CUresult cuDeviceGet(mori__CUdevice *device, int ordinal);
mori__CUresult cuDeviceGetCount(int *count);
mori__CUresult cuDeviceGetAttribute(int *value, mori__CUdevice_attribute attr,
                                    mori__CUdevice device);
mori__CUresult cuDevicePrimaryCtxRetain(mori__CUcontext *ctx, mori__CUdevice device);
mori__CUresult cuCtxSetCurrent(mori__CUcontext ctx);
mori__CUresult cuCtxGetCurrent(mori__CUcontext *ctx);
mori__CUresult cuCtxSynchronize(void);
mori__CUresult cuStreamSynchronize(mori__CUstream stream);
mori__CUresult cuMemCreate(mori__CUmemGenericAllocationHandle *handle, size_t size,
                           const mori__CUmemAllocationProp *prop, unsigned long long flags);
mori__CUresult cuMemRelease(mori__CUmemGenericAllocationHandle handle);
mori__CUresult cuMemRetainAllocationHandle(mori__CUmemGenericAllocationHandle *handle,
                                           void *addr);
mori__CUresult cuMemAddressReserve(mori__CUdeviceptr *ptr, size_t size, size_t alignment,
                                   mori__CUdeviceptr addr, unsigned long long flags);
mori__CUresult cuMemAddressFree(mori__CUdeviceptr ptr, size_t size);
mori__CUresult cuMemMap(mori__CUdeviceptr ptr, size_t size, size_t offset,
                        mori__CUmemGenericAllocationHandle handle, unsigned long long flags);
mori__CUresult cuMemUnmap(mori__CUdeviceptr ptr, size_t size);
mori__CUresult cuMemSetAccess(mori__CUdeviceptr ptr, size_t size,
                              const mori__CUmemAccessDesc *desc, size_t count);
mori__CUresult cuMemGetAllocationGranularity(size_t *granularity,
                                             const mori__CUmemAllocationProp *prop,
                                             mori__CUmemAllocationGranularity_flags option);
mori__CUresult cuMemExportToShareableHandle(void *shareable,
                                            mori__CUmemGenericAllocationHandle handle,
                                            mori__CUmemAllocationHandleType type,
                                            unsigned long long flags);
mori__CUresult cuMemImportFromShareableHandle(mori__CUmemGenericAllocationHandle *handle,
                                              void *osHandle,
                                              mori__CUmemAllocationHandleType type);
mori__CUresult cuMemAlloc_v2(mori__CUdeviceptr *ptr, size_t size);
mori__CUresult cuMemFree_v2(mori__CUdeviceptr ptr);
mori__CUresult cuMemcpy(mori__CUdeviceptr dst, mori__CUdeviceptr src, size_t size);
mori__CUresult cuMemsetD8_v2(mori__CUdeviceptr dst, unsigned char value, size_t count);
mori__CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes);
mori__CUresult cuStreamWriteValue32_v2(mori__CUstream stream, mori__CUdeviceptr addr,
                                       unsigned int value, unsigned int flags);
mori__CUresult cuStreamWaitValue32_v2(mori__CUstream stream, mori__CUdeviceptr addr,
                                      unsigned int value, unsigned int flags);
mori__CUresult cuStreamBatchMemOp_v2(mori__CUstream stream, unsigned int count,
                                     mori__CUstreamBatchMemOpParams *ops, unsigned int flags);
mori__CUresult cuStreamCreate(mori__CUstream *stream, unsigned int flags);
mori__CUresult cuStreamDestroy_v2(mori__CUstream stream);
mori__CUresult cuStreamIsCapturing(mori__CUstream stream, mori__CUstreamCaptureStatus *status);
mori__CUresult cuEventCreate(mori__CUevent *event, unsigned int flags);
mori__CUresult cuEventRecord(mori__CUevent event, mori__CUstream stream);
mori__CUresult cuEventQuery(mori__CUevent event);
mori__CUresult cuEventSynchronize(mori__CUevent event);
mori__CUresult cuEventDestroy_v2(mori__CUevent event);
mori__CUresult cuMemsetD8Async(mori__CUdeviceptr dst, unsigned char value, size_t count,
                               mori__CUstream stream);
mori__CUresult cuMemcpyAsync(mori__CUdeviceptr dst, mori__CUdeviceptr src, size_t size,
                             mori__CUstream stream);
mori__CUresult cuModuleLoadData(mori__CUmodule *module, const void *image);
mori__CUresult cuModuleGetFunction(mori__CUfunction *function, mori__CUmodule module,
                                   const char *name);
mori__CUresult cuLaunchKernel(mori__CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                              unsigned int gridDimZ, unsigned int blockDimX,
                              unsigned int blockDimY, unsigned int blockDimZ,
                              unsigned int sharedMemBytes, mori__CUstream stream,
                              void **kernelParams, void **extra);
mori__CUresult cuModuleUnload(mori__CUmodule module);
mori__CUresult cuMemHostAlloc(void **ptr, size_t size, unsigned int flags);
mori__CUresult cuMemFreeHost(void *ptr);
mori__CUresult cuMemHostGetDevicePointer_v2(mori__CUdeviceptr *dptr, void *ptr,
                                            unsigned int flags);

#endif
