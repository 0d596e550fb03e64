/*
 * hip_abi_facts.h - the facts of HIP's binary interface that mori-symm
 * relies on, as rows and nothing else: enum values, sizes and offsets
 * (x86_64), no type definitions, so that any file can include it beside
 * the real <hip/hip_runtime_api.h> or beside the shim's mirror of it.
 *
 * - mori/hip_shim.h builds its enums and handle types from these rows and
 *   checks its structs against the size and offset rows;
 * - tests/rocm/real_abi_check.c checks every MORI_HIP_SHARED_* row against
 *   Debian's real HIP 5.2.3 header (what 5.2.3 declares as 6.2 and later do);
 * - the MORI_HIP_NEWER_* rows (HIP after 5.2: absent from 5.2.3's header, or
 *   laid out otherwise there) are restated with their sources in
 *   tests/hipstub/hip_abi_check.c and listed in docs/backends.md.
 *
 * Rows: X(name, value) per enum, one list per HIP type; X(type, bytes);
 * X(type, member, offset); X(handle typedef, struct tag).
 */
#ifndef MORI_HIP_ABI_FACTS_H
#define MORI_HIP_ABI_FACTS_H

/* ---- enum values that HIP 5.2.3 and HIP >= 6.2 declare alike ---- */

/* hipError_t: the codes the shim and its backends return or translate to. */
#define MORI_HIP_SHARED_hipError_t(X) \
  X(hipSuccess, 0)                    \
  X(hipErrorInvalidValue, 1)          \
  X(hipErrorOutOfMemory, 2)           \
  X(hipErrorNotInitialized, 3)        \
  X(hipErrorInvalidDevice, 101)       \
  X(hipErrorInvalidContext, 201)      \
  X(hipErrorMapFailed, 205)           \
  X(hipErrorUnmapFailed, 206)         \
  X(hipErrorAlreadyMapped, 208)       \
  X(hipErrorNotMapped, 211)           \
  X(hipErrorPeerAccessUnsupported, 217) \
  X(hipErrorInvalidHandle, 400)       \
  X(hipErrorNotFound, 500)            \
  X(hipErrorNotReady, 600)            \
  X(hipErrorIllegalAddress, 700)      \
  X(hipErrorLaunchTimeOut, 702)       \
  X(hipErrorLaunchFailure, 719)       \
  X(hipErrorNotSupported, 801)        \
  X(hipErrorUnknown, 999)             \
  X(hipErrorRuntimeOther, 1053)

#define MORI_HIP_SHARED_hipMemAllocationType(X) \
  X(hipMemAllocationTypeInvalid, 0x0)           \
  X(hipMemAllocationTypePinned, 0x1)            \
  X(hipMemAllocationTypeMax, 0x7FFFFFFF)

#define MORI_HIP_SHARED_hipMemAllocationHandleType(X) \
  X(hipMemHandleTypeNone, 0x0)                        \
  X(hipMemHandleTypePosixFileDescriptor, 0x1)         \
  X(hipMemHandleTypeWin32, 0x2)                       \
  X(hipMemHandleTypeWin32Kmt, 0x4)

#define MORI_HIP_SHARED_hipMemLocationType(X) \
  X(hipMemLocationTypeInvalid, 0)             \
  X(hipMemLocationTypeDevice, 1)

#define MORI_HIP_SHARED_hipMemAccessFlags(X) \
  X(hipMemAccessFlagsProtNone, 0)            \
  X(hipMemAccessFlagsProtRead, 1)            \
  X(hipMemAccessFlagsProtReadWrite, 3)

#define MORI_HIP_SHARED_hipMemAllocationGranularity_flags(X) \
  X(hipMemAllocationGranularityMinimum, 0x0)                 \
  X(hipMemAllocationGranularityRecommended, 0x1)

#define MORI_HIP_SHARED_hipMemcpyKind(X) \
  X(hipMemcpyHostToHost, 0)              \
  X(hipMemcpyHostToDevice, 1)            \
  X(hipMemcpyDeviceToHost, 2)            \
  X(hipMemcpyDeviceToDevice, 3)          \
  X(hipMemcpyDefault, 4)

#define MORI_HIP_SHARED_hipStreamCaptureStatus(X) \
  X(hipStreamCaptureStatusNone, 0)                \
  X(hipStreamCaptureStatusActive, 1)              \
  X(hipStreamCaptureStatusInvalidated, 2)

/* Flags HIP declares as macros; the mirror makes them enum constants. */
#define MORI_HIP_SHARED_STREAM_WAIT_FLAGS(X) \
  X(hipStreamWaitValueGte, 0x0)              \
  X(hipStreamWaitValueEq, 0x1)               \
  X(hipStreamWaitValueAnd, 0x2)              \
  X(hipStreamWaitValueNor, 0x3)

#define MORI_HIP_SHARED_STREAM_FLAGS(X) \
  X(hipStreamDefault, 0x0)              \
  X(hipStreamNonBlocking, 0x1)

#define MORI_HIP_SHARED_EVENT_FLAGS(X) \
  X(hipEventDefault, 0x0)              \
  X(hipEventBlockingSync, 0x1)         \
  X(hipEventDisableTiming, 0x2)

/* Every shared enum row, for checkers. */
#define MORI_HIP_SHARED_ENUMS(X)                        \
  MORI_HIP_SHARED_hipError_t(X)                         \
  MORI_HIP_SHARED_hipMemAllocationType(X)               \
  MORI_HIP_SHARED_hipMemAllocationHandleType(X)         \
  MORI_HIP_SHARED_hipMemLocationType(X)                 \
  MORI_HIP_SHARED_hipMemAccessFlags(X)                  \
  MORI_HIP_SHARED_hipMemAllocationGranularity_flags(X)  \
  MORI_HIP_SHARED_hipMemcpyKind(X)                      \
  MORI_HIP_SHARED_hipStreamCaptureStatus(X)             \
  MORI_HIP_SHARED_STREAM_WAIT_FLAGS(X)                  \
  MORI_HIP_SHARED_STREAM_FLAGS(X)                       \
  MORI_HIP_SHARED_EVENT_FLAGS(X)

/* ---- types, sizes and offsets that 5.2.3 and >= 6.2 share (x86_64) ---- */

/* Opaque handles: a pointer to an incomplete struct of HIP's own tag, so a
 * handle from a HIP program is the shim's type too. */
#define MORI_HIP_SHARED_HANDLES(X)                                 \
  X(hipStream_t, ihipStream_t)                                     \
  X(hipEvent_t, ihipEvent_t)                                       \
  X(hipMemGenericAllocationHandle_t, ihipMemGenericAllocationHandle)

#define MORI_HIP_SHARED_SIZES(X)            \
  X(hipError_t, 4)                          \
  X(hipMemAllocationType, 4)                \
  X(hipMemAllocationHandleType, 4)          \
  X(hipMemLocationType, 4)                  \
  X(hipMemAccessFlags, 4)                   \
  X(hipMemAllocationGranularity_flags, 4)   \
  X(hipMemcpyKind, 4)                       \
  X(hipStreamCaptureStatus, 4)              \
  X(hipMemLocation, 8)                      \
  X(hipMemAccessDesc, 12)                   \
  X(hipStream_t, 8)                         \
  X(hipEvent_t, 8)                          \
  X(hipMemGenericAllocationHandle_t, 8)     \
  X(hipDeviceptr_t, 8)

#define MORI_HIP_SHARED_OFFSETS(X)    \
  X(hipMemLocation, type, 0)          \
  X(hipMemLocation, id, 4)            \
  X(hipMemAccessDesc, location, 0)    \
  X(hipMemAccessDesc, flags, 8)

/* ---- HIP after 5.2: not in 5.2.3's header, or laid out otherwise ---- */

/* Uncached allocations: not declared by 5.2.3. */
#define MORI_HIP_NEWER_hipMemAllocationType(X) X(hipMemAllocationTypeUncached, 0x40000000)

/* Fabric handles: declared from ROCm 7.14; the value is the ABI before. */
#define MORI_HIP_NEWER_hipMemAllocationHandleType(X) X(hipMemHandleTypeFabric, 0x8)

/* hipStreamBatchMemOp: not in 5.2.3; CUDA's numbers. */
#define MORI_HIP_NEWER_hipStreamBatchMemOpType(X) \
  X(hipStreamMemOpWaitValue32, 0x1)               \
  X(hipStreamMemOpWriteValue32, 0x2)              \
  X(hipStreamMemOpFlushRemoteWrites, 0x3)         \
  X(hipStreamMemOpWaitValue64, 0x4)               \
  X(hipStreamMemOpWriteValue64, 0x5)              \
  X(hipStreamMemOpBarrier, 0x6)

#define MORI_HIP_NEWER_ENUMS(X)                  \
  MORI_HIP_NEWER_hipMemAllocationType(X)         \
  MORI_HIP_NEWER_hipMemAllocationHandleType(X)   \
  MORI_HIP_NEWER_hipStreamBatchMemOpType(X)

/* hipMemAllocationProp as >= 6.2 lays it out (5.2.3's begins with
 * compressionType and has no allocFlags); the 64-byte fabric handle; the
 * batch operation's 48-byte entry. */
#define MORI_HIP_NEWER_SIZES(X)         \
  X(hipMemAllocationProp, 32)           \
  X(hipMemFabricHandle_t, 64)           \
  X(hipStreamBatchMemOpParams, 48)

#define MORI_HIP_NEWER_OFFSETS(X)                          \
  X(hipMemAllocationProp, type, 0)                         \
  X(hipMemAllocationProp, requestedHandleType, 4)          \
  X(hipMemAllocationProp, location, 8)                     \
  X(hipMemAllocationProp, win32HandleMetaData, 16)         \
  X(hipMemAllocationProp, allocFlags, 24)                  \
  X(hipStreamBatchMemOpParams, waitValue.address, 8)       \
  X(hipStreamBatchMemOpParams, waitValue.value, 16)        \
  X(hipStreamBatchMemOpParams, waitValue.flags, 24)

#endif
