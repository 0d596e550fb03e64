/*
 * standin_hip.h - the HIP C entry points libamdhip64_standin.so exports,
 * with libamdhip64's own names and ABI, for the shim's hip backend to load
 * in tests.  Types come from the shim header, which mirrors HIP's.
 */
#ifndef MORI_STANDIN_HIP_H
#define MORI_STANDIN_HIP_H

#include "mori/hip_shim.h"

/* What MORI_STANDIN_HIP_VERSION defaults to: the first ROCm that takes the
 * fd of hipMemImportFromShareableHandle by value. */
#define STANDIN_DEFAULT_VERSION 70100000

hipError_t hipInit(unsigned int flags);
hipError_t hipRuntimeGetVersion(int *version);
const char *hipGetErrorName(hipError_t error);
hipError_t hipGetLastError(void);
hipError_t hipMemCreate(hipMemGenericAllocationHandle_t *handle, size_t size,
                        const hipMemAllocationProp *prop, unsigned long long flags);
hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle);
hipError_t hipMemRetainAllocationHandle(hipMemGenericAllocationHandle_t *handle, void *addr);
hipError_t hipMemAddressReserve(void **ptr, size_t size, size_t alignment, void *addr,
                                unsigned long long flags);
hipError_t hipMemAddressFree(void *ptr, size_t size);
hipError_t hipMemMap(void *ptr, size_t size, size_t offset, hipMemGenericAllocationHandle_t handle,
                     unsigned long long flags);
hipError_t hipMemUnmap(void *ptr, size_t size);
hipError_t hipMemSetAccess(void *ptr, size_t size, const hipMemAccessDesc *desc, size_t count);
hipError_t hipMemGetAllocationGranularity(size_t *granularity, const hipMemAllocationProp *prop,
                                          hipMemAllocationGranularity_flags option);
hipError_t hipMemExportToShareableHandle(void *shareableHandle,
                                         hipMemGenericAllocationHandle_t handle,
                                         hipMemAllocationHandleType handleType,
                                         unsigned long long flags);
/* ROCm >= 7.1: osHandle is the fd by value; before: a pointer to the fd. */
hipError_t hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t *handle,
                                           void *osHandle,
                                           hipMemAllocationHandleType shHandleType);
hipError_t hipMalloc(void **ptr, size_t size);
hipError_t hipFree(void *ptr);
hipError_t hipMemcpy(void *dst, const void *src, size_t size, hipMemcpyKind kind);
hipError_t hipMemset(void *dst, int value, size_t size);
hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total_bytes);
hipError_t hipGetDevice(int *device);
hipError_t hipSetDevice(int device);
hipError_t hipGetDeviceCount(int *count);
hipError_t hipDeviceSynchronize(void);
hipError_t hipStreamSynchronize(hipStream_t stream);
hipError_t hipStreamWriteValue32(hipStream_t stream, void *ptr, uint32_t value,
                                 unsigned int flags);
hipError_t hipStreamWaitValue32(hipStream_t stream, void *ptr, uint32_t value, unsigned int flags,
                                uint32_t mask);
hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags);
hipError_t hipStreamDestroy(hipStream_t stream);
hipError_t hipStreamIsCapturing(hipStream_t stream, hipStreamCaptureStatus *status);
hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned int flags);
hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream);
hipError_t hipEventQuery(hipEvent_t event);
hipError_t hipEventSynchronize(hipEvent_t event);
hipError_t hipEventDestroy(hipEvent_t event);
hipError_t hipMemsetAsync(void *dst, int value, size_t size, hipStream_t stream);
hipError_t hipMemcpyAsync(void *dst, const void *src, size_t size, hipMemcpyKind kind,
                          hipStream_t stream);
hipError_t hipGetDevicePropertiesR0600(void *props, int device);
hipError_t hipDeviceGetPCIBusId(char *pciBusId, int len, int device);

hipError_t hipModuleLoadData(hipModule_t *module, const void *image);
hipError_t hipModuleGetFunction(hipFunction_t *function, hipModule_t module, const char *kname);
hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int gridDimX, unsigned int gridDimY,
                                 unsigned int gridDimZ, unsigned int blockDimX,
                                 unsigned int blockDimY, unsigned int blockDimZ,
                                 unsigned int sharedMemBytes, hipStream_t stream,
                                 void **kernelParams, void **extra);
hipError_t hipModuleUnload(hipModule_t module);
hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags);
hipError_t hipHostFree(void *ptr);
/* hiprtc, inside the runtime as in ROCm 5 (hiprtcResult: 0 is success). */
typedef struct standin_hiprtc_program *hiprtcProgram;
int hiprtcCreateProgram(hiprtcProgram *prog, const char *src, const char *name, int numHeaders,
                        const char **headers, const char **includeNames);
int hiprtcCompileProgram(hiprtcProgram prog, int numOptions, const char **options);
int hiprtcGetProgramLogSize(hiprtcProgram prog, size_t *size);
int hiprtcGetProgramLog(hiprtcProgram prog, char *log);
int hiprtcGetCodeSize(hiprtcProgram prog, size_t *size);
int hiprtcGetCode(hiprtcProgram prog, char *code);
int hiprtcDestroyProgram(hiprtcProgram *prog);
const char *hiprtcGetErrorString(int result);

#endif
