/*
 * cuda_abi_check.c - compiled only where cuda.h exists: the cuda backend's
 * own declarations of the driver API (hip_shim/backends/gpu_cuda.h) must
 * agree with NVIDIA's header in every size, offset and value, or this does
 * not build.
 */
#include <cuda.h>

#include "gpu_cuda.h"

#define SAME_SIZE(mine, theirs) _Static_assert(sizeof(mine) == sizeof(theirs), #mine " size")
#define SAME_OFFSET(mine, theirs, field)                                                   \
  _Static_assert(offsetof(mine, field) == offsetof(theirs, field), #mine "." #field)
#define SAME_VALUE(name) _Static_assert((long)MORI__##name == (long)name, #name)

/* Scalar types: same size, and the same type where C can tell. */
_Static_assert(__builtin_types_compatible_p(mori__CUresult, CUresult), "CUresult");
_Static_assert(__builtin_types_compatible_p(mori__CUdevice, CUdevice), "CUdevice");
_Static_assert(__builtin_types_compatible_p(mori__CUdeviceptr, CUdeviceptr), "CUdeviceptr");
_Static_assert(__builtin_types_compatible_p(mori__CUmemGenericAllocationHandle,
                                            CUmemGenericAllocationHandle),
               "CUmemGenericAllocationHandle");
_Static_assert(__builtin_types_compatible_p(mori__CUcontext, CUcontext), "CUcontext");
_Static_assert(__builtin_types_compatible_p(mori__CUstream, CUstream), "CUstream");
_Static_assert(__builtin_types_compatible_p(mori__CUevent, CUevent), "CUevent");
_Static_assert(__builtin_types_compatible_p(mori__CUmodule, CUmodule), "CUmodule");
_Static_assert(__builtin_types_compatible_p(mori__CUfunction, CUfunction), "CUfunction");
_Static_assert(sizeof(mori__CUstreamCaptureStatus) == sizeof(CUstreamCaptureStatus),
               "CUstreamCaptureStatus");
_Static_assert(__builtin_types_compatible_p(mori__CUdevice_attribute, CUdevice_attribute),
               "CUdevice_attribute");
_Static_assert(__builtin_types_compatible_p(mori__CUmemAllocationHandleType,
                                            CUmemAllocationHandleType),
               "CUmemAllocationHandleType");
_Static_assert(__builtin_types_compatible_p(mori__CUmemAllocationGranularity_flags,
                                            CUmemAllocationGranularity_flags),
               "CUmemAllocationGranularity_flags");

/* Structs passed by pointer. */
SAME_SIZE(mori__CUstreamBatchMemOpParams, CUstreamBatchMemOpParams);
_Static_assert(offsetof(mori__CUstreamBatchMemOpParams, op.address) ==
                   offsetof(CUstreamBatchMemOpParams, waitValue.address) &&
               offsetof(mori__CUstreamBatchMemOpParams, op.value) ==
                   offsetof(CUstreamBatchMemOpParams, waitValue.value) &&
               offsetof(mori__CUstreamBatchMemOpParams, op.flags) ==
                   offsetof(CUstreamBatchMemOpParams, waitValue.flags) &&
               offsetof(mori__CUstreamBatchMemOpParams, op.flags) ==
                   offsetof(CUstreamBatchMemOpParams, writeValue.flags),
               "CUstreamBatchMemOpParams layout");
_Static_assert(CU_STREAM_MEM_OP_WAIT_VALUE_32 == 1 && CU_STREAM_MEM_OP_WRITE_VALUE_32 == 2,
               "CUstreamBatchMemOpType");
SAME_SIZE(mori__CUmemLocation, CUmemLocation);
SAME_OFFSET(mori__CUmemLocation, CUmemLocation, type);
SAME_OFFSET(mori__CUmemLocation, CUmemLocation, id);
SAME_SIZE(mori__CUmemAllocationProp, CUmemAllocationProp);
SAME_OFFSET(mori__CUmemAllocationProp, CUmemAllocationProp, type);
SAME_OFFSET(mori__CUmemAllocationProp, CUmemAllocationProp, requestedHandleTypes);
SAME_OFFSET(mori__CUmemAllocationProp, CUmemAllocationProp, location);
SAME_OFFSET(mori__CUmemAllocationProp, CUmemAllocationProp, win32HandleMetaData);
SAME_OFFSET(mori__CUmemAllocationProp, CUmemAllocationProp, allocFlags);
SAME_OFFSET(mori__CUmemAllocationProp, CUmemAllocationProp, allocFlags.compressionType);
SAME_OFFSET(mori__CUmemAllocationProp, CUmemAllocationProp, allocFlags.gpuDirectRDMACapable);
SAME_OFFSET(mori__CUmemAllocationProp, CUmemAllocationProp, allocFlags.usage);
SAME_OFFSET(mori__CUmemAllocationProp, CUmemAllocationProp, allocFlags.reserved);
SAME_SIZE(mori__CUmemAccessDesc, CUmemAccessDesc);
SAME_OFFSET(mori__CUmemAccessDesc, CUmemAccessDesc, location);
SAME_OFFSET(mori__CUmemAccessDesc, CUmemAccessDesc, flags);
_Static_assert(MORI__CU_FABRIC_HANDLE_SIZE == sizeof(CUmemFabricHandle), "fabric handle");

/* Error codes the backend names. */
SAME_VALUE(CUDA_SUCCESS);
SAME_VALUE(CUDA_ERROR_INVALID_VALUE);
SAME_VALUE(CUDA_ERROR_OUT_OF_MEMORY);
SAME_VALUE(CUDA_ERROR_NOT_INITIALIZED);
SAME_VALUE(CUDA_ERROR_DEINITIALIZED);
SAME_VALUE(CUDA_ERROR_STUB_LIBRARY);
SAME_VALUE(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER);
SAME_VALUE(CUDA_ERROR_DEVICE_UNAVAILABLE);
SAME_VALUE(CUDA_ERROR_NO_DEVICE);
SAME_VALUE(CUDA_ERROR_INVALID_DEVICE);
SAME_VALUE(CUDA_ERROR_INVALID_CONTEXT);
SAME_VALUE(CUDA_ERROR_MAP_FAILED);
SAME_VALUE(CUDA_ERROR_UNMAP_FAILED);
SAME_VALUE(CUDA_ERROR_ALREADY_MAPPED);
SAME_VALUE(CUDA_ERROR_INVALID_IMAGE);
SAME_VALUE(CUDA_ERROR_NO_BINARY_FOR_GPU);
SAME_VALUE(CUDA_ERROR_NOT_MAPPED);
SAME_VALUE(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
SAME_VALUE(CUDA_ERROR_INVALID_PTX);
SAME_VALUE(CUDA_ERROR_JIT_COMPILER_NOT_FOUND);
SAME_VALUE(CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
SAME_VALUE(CUDA_ERROR_OPERATING_SYSTEM);
SAME_VALUE(CUDA_ERROR_INVALID_HANDLE);
SAME_VALUE(CUDA_ERROR_NOT_FOUND);
SAME_VALUE(CUDA_ERROR_NOT_READY);
SAME_VALUE(CUDA_ERROR_ILLEGAL_ADDRESS);
SAME_VALUE(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
SAME_VALUE(CUDA_ERROR_LAUNCH_TIMEOUT);
SAME_VALUE(CUDA_ERROR_LAUNCH_FAILED);
SAME_VALUE(CUDA_ERROR_NOT_PERMITTED);
SAME_VALUE(CUDA_ERROR_NOT_SUPPORTED);
SAME_VALUE(CUDA_ERROR_TIMEOUT);
SAME_VALUE(CUDA_ERROR_UNKNOWN);

/* Enumerators the backend translates to. */
SAME_VALUE(CU_MEM_ALLOCATION_TYPE_PINNED);
SAME_VALUE(CU_MEM_HANDLE_TYPE_NONE);
SAME_VALUE(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
SAME_VALUE(CU_MEM_HANDLE_TYPE_WIN32);
SAME_VALUE(CU_MEM_HANDLE_TYPE_WIN32_KMT);
SAME_VALUE(CU_MEM_HANDLE_TYPE_FABRIC);
SAME_VALUE(CU_MEM_LOCATION_TYPE_DEVICE);
SAME_VALUE(CU_MEM_ACCESS_FLAGS_PROT_NONE);
SAME_VALUE(CU_MEM_ACCESS_FLAGS_PROT_READ);
SAME_VALUE(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
SAME_VALUE(CU_MEM_ALLOC_GRANULARITY_MINIMUM);
SAME_VALUE(CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
SAME_VALUE(CU_STREAM_WAIT_VALUE_GEQ);
SAME_VALUE(CU_STREAM_WAIT_VALUE_EQ);
SAME_VALUE(CU_STREAM_WAIT_VALUE_AND);
SAME_VALUE(CU_STREAM_WAIT_VALUE_NOR);
SAME_VALUE(CU_STREAM_WRITE_VALUE_DEFAULT);
SAME_VALUE(CU_STREAM_DEFAULT);
SAME_VALUE(CU_STREAM_NON_BLOCKING);
SAME_VALUE(CU_EVENT_DEFAULT);
SAME_VALUE(CU_EVENT_BLOCKING_SYNC);
SAME_VALUE(CU_EVENT_DISABLE_TIMING);
SAME_VALUE(CU_MEMHOSTALLOC_PORTABLE);
SAME_VALUE(CU_MEMHOSTALLOC_DEVICEMAP);
SAME_VALUE(CU_STREAM_CAPTURE_STATUS_NONE);
SAME_VALUE(CU_STREAM_CAPTURE_STATUS_ACTIVE);
SAME_VALUE(CU_STREAM_CAPTURE_STATUS_INVALIDATED);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
SAME_VALUE(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED);
