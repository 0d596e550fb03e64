/*
 * hip_shim.h - replaces HIP's headers: the HIP-typed seam between mori-symm
 * and a GPU runtime, for the library, its backends, the fault shim, the
 * tools and the tests; not installed, and never included beside
 * <hip/hip_runtime_api.h> (it defines HIP's own names).  Users get the
 * shim's control API from the public mori/shim.h, which this includes.
 *
 * Types mirror HIP's ABI (ROCm >= 6.2).  Every function is exported from
 * libmori_hip_shim.so as mori_<hipName> (never the bare HIP name, because
 * torch on ROCm loads the real libamdhip64 into the same process) and is
 * called through the PLT, so libmori_faultinject.so can interpose any of
 * them with LD_PRELOAD.  Backends: sim (host-memory VMM emulator), cuda
 * (NVIDIA driver API), hip (ROCm), chosen by MORI_SYMM_SHIM or
 * mori_shim_select().
 */
#ifndef MORI_HIP_SHIM_H
#define MORI_HIP_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>

#include "mori/api.h"
#include "mori/shim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- types mirroring HIP (ROCm >= 6.2) ----
 *
 * Every value, size and offset below comes from, or is checked against,
 * the rows of mori/hip_abi_facts.h; tests/rocm checks the rows HIP 5.2.3
 * shares with 6.2+ against Debian's real HIP header. */

#include "mori/hip_abi_facts.h"

#define MORI_HIP_ENUM_ROW(name, value) name = value,

/* Besides HIP's own uses: hipErrorLaunchTimeOut is also the sim's stream
 * wait that timed out, hipErrorRuntimeOther the shim's "backend not built
 * or not available". */
typedef enum hipError_t { MORI_HIP_SHARED_hipError_t(MORI_HIP_ENUM_ROW) } hipError_t;

/* Every hipError_t above, once, as X(name, value): the shim's names and the
 * fault schedule's error names both expand this list. */
#define MORI_HIP_ERROR_LIST(X) MORI_HIP_SHARED_hipError_t(X)

typedef enum hipMemAllocationType {
  MORI_HIP_SHARED_hipMemAllocationType(MORI_HIP_ENUM_ROW)
  MORI_HIP_NEWER_hipMemAllocationType(MORI_HIP_ENUM_ROW)
} hipMemAllocationType;

typedef enum hipMemAllocationHandleType {
  MORI_HIP_SHARED_hipMemAllocationHandleType(MORI_HIP_ENUM_ROW)
  MORI_HIP_NEWER_hipMemAllocationHandleType(MORI_HIP_ENUM_ROW)
} hipMemAllocationHandleType;

typedef enum hipMemLocationType {
  MORI_HIP_SHARED_hipMemLocationType(MORI_HIP_ENUM_ROW)
} hipMemLocationType;

typedef enum hipMemAccessFlags { MORI_HIP_SHARED_hipMemAccessFlags(MORI_HIP_ENUM_ROW) } hipMemAccessFlags;

typedef enum hipMemAllocationGranularity_flags {
  MORI_HIP_SHARED_hipMemAllocationGranularity_flags(MORI_HIP_ENUM_ROW)
} hipMemAllocationGranularity_flags;

typedef enum hipMemcpyKind { MORI_HIP_SHARED_hipMemcpyKind(MORI_HIP_ENUM_ROW) } hipMemcpyKind;

/* hipStreamWaitValue32 flags (same numbers as CU_STREAM_WAIT_VALUE_*). */
enum { MORI_HIP_SHARED_STREAM_WAIT_FLAGS(MORI_HIP_ENUM_ROW) };

/* HIP's own hipDeviceAttribute_t numbers shift between releases, so the shim
 * defines stable values of its own and each backend translates them. */
typedef enum hipDeviceAttribute_t {
  moriDeviceAttributeMultiprocessorCount = 1,
  moriDeviceAttributeVirtualMemoryManagementSupported = 2,
  moriDeviceAttributePciBusId = 3,
  moriDeviceAttributePciDeviceId = 4,
  moriDeviceAttributeFabricHandleSupported = 5 /* a hint only: the probe decides */
} hipDeviceAttribute_t;

typedef struct hipMemLocation {
  hipMemLocationType type;
  int id;
} hipMemLocation;

typedef struct hipMemAllocationProp {
  hipMemAllocationType type;
  hipMemAllocationHandleType requestedHandleType; /* one type, not a mask */
  hipMemLocation location;
  void *win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
  } allocFlags;
} hipMemAllocationProp;

typedef struct hipMemAccessDesc {
  hipMemLocation location;
  hipMemAccessFlags flags;
} hipMemAccessDesc;

#define MORI_HIP_FABRIC_HANDLE_SIZE 64
typedef struct hipMemFabricHandle_t {
  unsigned char data[MORI_HIP_FABRIC_HANDLE_SIZE];
} hipMemFabricHandle_t;

#define MORI_HIP_HANDLE_TYPEDEF(name, tag) typedef struct tag *name;
MORI_HIP_SHARED_HANDLES(MORI_HIP_HANDLE_TYPEDEF)
#undef MORI_HIP_HANDLE_TYPEDEF

/* hipStreamCreateWithFlags / hipEventCreateWithFlags flags (CUDA's numbers
 * too: CU_STREAM_NON_BLOCKING, CU_EVENT_DISABLE_TIMING). */
enum { MORI_HIP_SHARED_STREAM_FLAGS(MORI_HIP_ENUM_ROW) };
enum { MORI_HIP_SHARED_EVENT_FLAGS(MORI_HIP_ENUM_ROW) };

typedef enum hipStreamCaptureStatus {
  MORI_HIP_SHARED_hipStreamCaptureStatus(MORI_HIP_ENUM_ROW)
} hipStreamCaptureStatus;
typedef void *hipDeviceptr_t;

/* Modules and their kernels (HIP's names: hipModule_t, hipFunction_t). */
typedef struct ihipModule_t *hipModule_t;
typedef struct ihipModuleSymbol_t *hipFunction_t;

/* hipModuleLoadData's image in the shim's convention, whatever the
 * runtime: a module's source in both forms, each backend taking its own.
 * cuda hands the PTX to the driver (cuModuleLoadData compiles it for the
 * GPU it finds); hip compiles the HIP source with the runtime's hiprtc and
 * loads the code object; the sim models the kernels it knows by their
 * entry names, each of which must appear in both texts.  A text may be
 * NULL where its backend is not used (the CUDA stand-in passes PTX only). */
typedef struct mori_module_image {
  const char *ptx;        /* PTX text (NUL-terminated) */
  const char *hip_source; /* HIP C++ for hiprtc (NUL-terminated) */
  const char *name;       /* the source's name in compiler messages */
} mori_module_image;

/* hipHostMalloc flags (CUDA's numbers too: CU_MEMHOSTALLOC_*). */
enum { hipHostMallocPortable = 0x1, hipHostMallocMapped = 0x2 };

/* hipStreamBatchMemOp: several stream memory operations in one call, run
 * in array order (HIP's layout, which is CUDA's: 48 bytes an entry).  The
 * shim takes 32-bit waits and writes. */
typedef enum hipStreamBatchMemOpType {
  MORI_HIP_NEWER_hipStreamBatchMemOpType(MORI_HIP_ENUM_ROW)
} hipStreamBatchMemOpType;

typedef union hipStreamBatchMemOpParams {
  hipStreamBatchMemOpType operation;
  struct hipStreamMemOpWaitValueParams_t {
    hipStreamBatchMemOpType operation;
    hipDeviceptr_t address;
    union {
      uint32_t value;
      uint64_t value64;
    };
    unsigned int flags; /* hipStreamWaitValue* */
    hipDeviceptr_t alias;
  } waitValue;
  struct hipStreamMemOpWriteValueParams_t {
    hipStreamBatchMemOpType operation;
    hipDeviceptr_t address;
    union {
      uint32_t value;
      uint64_t value64;
    };
    unsigned int flags; /* 0 */
    hipDeviceptr_t alias;
  } writeValue;
  uint64_t pad[6];
} hipStreamBatchMemOpParams;
/* The most operations one batch takes (HIP's and CUDA's "less than 256"). */
#define MORI_HIP_BATCH_MAX 255

#undef MORI_HIP_ENUM_ROW

/* The ABI is what mori's HIP backend passes to libamdhip64 by pointer: the
 * mirror's sizes and offsets are the facts' rows. */
#ifdef __cplusplus
#define MORI_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define MORI_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif
#define MORI_HIP_CHECK_SIZE(type, bytes) \
  MORI_STATIC_ASSERT(sizeof(type) == (bytes), "HIP ABI: sizeof(" #type ") == " #bytes);
#define MORI_HIP_CHECK_OFFSET(type, member, offset)   \
  MORI_STATIC_ASSERT(offsetof(type, member) == (offset), \
                     "HIP ABI: offsetof(" #type ", " #member ") == " #offset);
MORI_HIP_SHARED_SIZES(MORI_HIP_CHECK_SIZE)
MORI_HIP_NEWER_SIZES(MORI_HIP_CHECK_SIZE)
MORI_HIP_SHARED_OFFSETS(MORI_HIP_CHECK_OFFSET)
MORI_HIP_NEWER_OFFSETS(MORI_HIP_CHECK_OFFSET)
#undef MORI_HIP_CHECK_SIZE
#undef MORI_HIP_CHECK_OFFSET

/* ---- the runtime calls of the seam: one list ----
 *
 * Every runtime call is one row of MORI_SHIM_HIP_CALLS, as every OS call is
 * a row of MORI_SHIM_OS_CALLS below (SQLite's aSyscall[] is the model).
 * Everything else that names a call is generated from the rows: the
 * mori_hip* prototypes (below), the backends' table (shim_internal.h), the
 * shim's forwarding wrappers (shim.c), and the fault shim's wrappers, call
 * enum, trace layouts and error sets (faultinject/).  A row added here is
 * declared, forwarded, injectable and swept at once; a backend that leaves
 * its entry NULL answers hipErrorNotSupported.  Same contract as HIP; every
 * call returns hipError_t.
 *
 * X(name, arity, params, args, registry, shim, spec, errors)
 *   name      the HIP name; exported as mori_<name>
 *   arity     how many parameters (the fault shim keeps them for traces)
 *   params    the parameter list; args: the same names, as a call passes them
 *   registry  what a successful call does to the shim's resource registry
 *             (mori_shim_registry()), one of
 *               (acquire, KIND, key, size, when)   adds one entry, if `when`
 *               (release, KIND, key, 0, when)      removes the entry of key
 *               (release_range, KIND, lo, size, 1) every entry in [lo, lo+size)
 *               (none, NONE, 0, 0, 0)
 *             KIND: HANDLE, RESERVATION, MAPPING, EXPORTED_FD, DEVICE_ALLOC,
 *             HOST_ALLOC.
 *             A call that releases leaves its resource live when it fails:
 *             the fault shim counts those (mori_fi_refused).
 *   shim      how shim.c forwards it: vmm (the backend's entry, under the
 *             process-wide VMM lock: mori #476), plain (the backend's entry),
 *             own (shim.c writes the wrapper itself)
 *   spec      how a trace writes each parameter, "key:kind ..." (the kinds
 *             are the trace format's, listed in faultinject's fi.h)
 *   errors    what the call really returns when it fails, most likely first:
 *             the fault shim fails it with these (sources in
 *             docs/fault-injection.md)
 */
#define MORI_SHIM_HIP_CALLS(X)                                                            \
  X(hipMemCreate, 4,                                                                      \
    (hipMemGenericAllocationHandle_t * handle, size_t size, const hipMemAllocationProp *prop, \
     unsigned long long flags),                                                           \
    (handle, size, prop, flags), (acquire, HANDLE, *handle, size, 1), vmm,                 \
    "out:H size:z prop:P flags:u",                                                        \
    (hipErrorOutOfMemory, hipErrorInvalidValue, hipErrorNotSupported, hipErrorUnknown))   \
  X(hipMemRelease, 1, (hipMemGenericAllocationHandle_t handle), (handle),                 \
    (release, HANDLE, handle, 0, 1), vmm, "handle:h", (hipErrorInvalidValue, hipErrorUnknown)) \
  X(hipMemRetainAllocationHandle, 2, (hipMemGenericAllocationHandle_t * handle, void *addr), \
    (handle, addr), (acquire, HANDLE, *handle, 0, 1), vmm, "out:H addr:a",                \
    (hipErrorInvalidValue, hipErrorUnknown))                                              \
  X(hipMemAddressReserve, 5,                                                              \
    (void **ptr, size_t size, size_t alignment, void *addr, unsigned long long flags),    \
    (ptr, size, alignment, addr, flags), (acquire, RESERVATION, *ptr, size, 1), vmm,       \
    "out:R size:z align:z hint:a flags:u",                                                \
    (hipErrorOutOfMemory, hipErrorInvalidValue, hipErrorUnknown))                         \
  X(hipMemAddressFree, 2, (void *ptr, size_t size), (ptr, size),                          \
    (release, RESERVATION, ptr, 0, 1), vmm, "addr:a size:z",                              \
    (hipErrorInvalidValue, hipErrorUnknown))                                              \
  X(hipMemMap, 5,                                                                         \
    (void *ptr, size_t size, size_t offset, hipMemGenericAllocationHandle_t handle,       \
     unsigned long long flags),                                                           \
    (ptr, size, offset, handle, flags), (acquire, MAPPING, ptr, size, 1), vmm,             \
    "addr:a size:z offset:z handle:h flags:u",                                            \
    (hipErrorOutOfMemory, hipErrorMapFailed, hipErrorInvalidValue, hipErrorNotSupported,  \
     hipErrorUnknown))                                                                    \
  /* every mapping inside the range: an unmap may cover several (the sim   \
   * refuses that unless its quirk is off; the registry follows the call) */ \
  X(hipMemUnmap, 2, (void *ptr, size_t size), (ptr, size),                                \
    (release_range, MAPPING, ptr, size, 1), vmm, "addr:a size:z",                         \
    (hipErrorUnmapFailed, hipErrorInvalidValue, hipErrorUnknown))                         \
  X(hipMemSetAccess, 4, (void *ptr, size_t size, const hipMemAccessDesc *desc, size_t count), \
    (ptr, size, desc, count), (none, NONE, 0, 0, 0), vmm, "addr:a size:z desc:D count:z", \
    (hipErrorInvalidValue, hipErrorOutOfMemory, hipErrorNotSupported, hipErrorUnknown))   \
  X(hipMemGetAllocationGranularity, 3,                                                    \
    (size_t * granularity, const hipMemAllocationProp *prop,                              \
     hipMemAllocationGranularity_flags option),                                           \
    (granularity, prop, option), (none, NONE, 0, 0, 0), plain, "out:Z prop:P option:u",   \
    (hipErrorInvalidValue, hipErrorNotSupported))                                         \
  /* POSIX fd: shareableHandle points to an int that receives a new fd (an \
   * exported fd leaves the registry at mori_close); fabric: it points to a \
   * hipMemFabricHandle_t */                                                              \
  X(hipMemExportToShareableHandle, 4,                                                     \
    (void *shareableHandle, hipMemGenericAllocationHandle_t handle,                       \
     hipMemAllocationHandleType handleType, unsigned long long flags),                    \
    (shareableHandle, handle, handleType, flags),                                         \
    (acquire, EXPORTED_FD, *(int *)shareableHandle, 0,                                    \
     handleType == hipMemHandleTypePosixFileDescriptor),                                  \
    vmm, "out:X handle:h type:t flags:u",                                                 \
    (hipErrorInvalidValue, hipErrorNotSupported, hipErrorOutOfMemory, hipErrorUnknown))   \
  /* The shim's convention whatever the ROCm version: a POSIX fd by value,  \
   * (void *)(intptr_t)fd (the hip backend converts for ROCm < 7.1, which \
   * takes a pointer to it), a fabric handle by pointer to its 64 bytes.  \
   * The caller keeps ownership of the fd. */                                             \
  X(hipMemImportFromShareableHandle, 3,                                                   \
    (hipMemGenericAllocationHandle_t * handle, void *osHandle,                            \
     hipMemAllocationHandleType shHandleType),                                            \
    (handle, osHandle, shHandleType), (acquire, HANDLE, *handle, 0, 1), vmm,               \
    "out:H os:O type:t",                                                                  \
    (hipErrorInvalidValue, hipErrorOutOfMemory, hipErrorNotSupported, hipErrorUnknown))   \
  X(hipMalloc, 2, (void **ptr, size_t size), (ptr, size),                                 \
    (acquire, DEVICE_ALLOC, *ptr, size, *ptr != NULL), plain, "out:M size:z",             \
    (hipErrorOutOfMemory, hipErrorUnknown))                                               \
  X(hipFree, 1, (void *ptr), (ptr), (release, DEVICE_ALLOC, ptr, 0, ptr != NULL), plain,  \
    "addr:a", (hipErrorInvalidValue, hipErrorUnknown))                                    \
  X(hipMemcpy, 4, (void *dst, const void *src, size_t size, hipMemcpyKind kind),          \
    (dst, src, size, kind), (none, NONE, 0, 0, 0), plain, "dst:a src:a size:z kind:u",     \
    (hipErrorInvalidValue, hipErrorIllegalAddress, hipErrorUnknown))                      \
  X(hipMemset, 3, (void *dst, int value, size_t size), (dst, value, size),                \
    (none, NONE, 0, 0, 0), plain, "dst:a value:i size:z",                                 \
    (hipErrorOutOfMemory, hipErrorInvalidValue, hipErrorUnknown))                         \
  X(hipGetDevice, 1, (int *device), (device), (none, NONE, 0, 0, 0), plain, "out:-",      \
    (hipErrorNotInitialized, hipErrorUnknown))                                            \
  X(hipSetDevice, 1, (int device), (device), (none, NONE, 0, 0, 0), plain, "device:i",    \
    (hipErrorInvalidDevice, hipErrorNotInitialized))                                      \
  X(hipGetDeviceCount, 1, (int *count), (count), (none, NONE, 0, 0, 0), plain, "out:-",   \
    (hipErrorNotInitialized, hipErrorUnknown))                                            \
  X(hipMemGetInfo, 2, (size_t * free_bytes, size_t * total_bytes), (free_bytes, total_bytes), \
    (none, NONE, 0, 0, 0), plain, "free:- total:-",                                          \
    (hipErrorInvalidValue, hipErrorInvalidDevice))                                        \
  X(hipDeviceSynchronize, 0, (void), (), (none, NONE, 0, 0, 0), plain, "",                \
    (hipErrorLaunchFailure, hipErrorIllegalAddress, hipErrorUnknown))                     \
  X(hipStreamSynchronize, 1, (hipStream_t stream), (stream), (none, NONE, 0, 0, 0), plain, \
    "stream:s", (hipErrorLaunchFailure, hipErrorIllegalAddress, hipErrorUnknown))         \
  X(hipStreamWriteValue32, 4, (hipStream_t stream, void *ptr, uint32_t value, unsigned int flags), \
    (stream, ptr, value, flags), (none, NONE, 0, 0, 0), plain,                            \
    "stream:s addr:a value:u flags:u",                                                    \
    (hipErrorInvalidValue, hipErrorNotSupported, hipErrorUnknown))                        \
  X(hipStreamWaitValue32, 5,                                                              \
    (hipStream_t stream, void *ptr, uint32_t value, unsigned int flags, uint32_t mask),   \
    (stream, ptr, value, flags, mask), (none, NONE, 0, 0, 0), plain,                      \
    "stream:s addr:a value:u flags:u mask:u",                                             \
    (hipErrorInvalidValue, hipErrorNotSupported, hipErrorUnknown))                        \
  /* count (1..MORI_HIP_BATCH_MAX) 32-bit waits and writes in one call, in \
   * order; flags 0.  Where the runtime has no batch call (the backend's   \
   * entry NULL or answering hipErrorNotSupported) the shim runs them one  \
   * by one (the same stream semantics, a call each) and stops at the first \
   * that fails.  A trace line leaves the operations out. */                              \
  X(hipStreamBatchMemOp, 4,                                                               \
    (hipStream_t stream, unsigned int count, hipStreamBatchMemOpParams *paramArray,       \
     unsigned int flags),                                                                 \
    (stream, count, paramArray, flags), (none, NONE, 0, 0, 0), own,                       \
    "stream:s count:u ops:- flags:u",                                                     \
    (hipErrorInvalidValue, hipErrorNotSupported, hipErrorUnknown))                        \
  X(hipDeviceGetAttribute, 3, (int *value, hipDeviceAttribute_t attr, int device),        \
    (value, attr, device), (none, NONE, 0, 0, 0), plain, "out:- attr:u device:i",         \
    (hipErrorInvalidValue, hipErrorInvalidDevice))                                        \
  /* The thread's last result, reset by the call, as HIP's; it also clears  \
   * the runtime's own sticky error (the backend's entry is the runtime's  \
   * hipGetLastError, NULL where there is none), and answers without a     \
   * backend. */                                                                          \
  X(hipGetLastError, 0, (void), (), (none, NONE, 0, 0, 0), own, "", (hipErrorUnknown))    \
  X(hipRuntimeGetVersion, 1, (int *version), (version), (none, NONE, 0, 0, 0), plain,     \
    "out:-", (hipErrorNotInitialized))                                                    \
  /* Streams, events and stream-ordered fills and copies: what the signals' \
   * watchdog and the allocation path need to stay off the host's critical \
   * path.  hipEventQuery returns hipErrorNotReady while the work before   \
   * the event is pending (an answer, not a failure).  A trace writes      \
   * events and created streams as '-': it names a stream where it is      \
   * used (sN), and a replay runs stream work on the default stream. */                   \
  X(hipStreamCreateWithFlags, 2, (hipStream_t * stream, unsigned int flags), (stream, flags), \
    (none, NONE, 0, 0, 0), plain, "out:- flags:u", (hipErrorOutOfMemory, hipErrorInvalidValue)) \
  X(hipStreamDestroy, 1, (hipStream_t stream), (stream), (none, NONE, 0, 0, 0), plain,    \
    "stream:s", (hipErrorInvalidHandle, hipErrorUnknown))                                 \
  X(hipStreamIsCapturing, 2, (hipStream_t stream, hipStreamCaptureStatus * status),       \
    (stream, status), (none, NONE, 0, 0, 0), plain, "stream:s out:-",                     \
    (hipErrorInvalidValue, hipErrorInvalidHandle))                                        \
  X(hipEventCreateWithFlags, 2, (hipEvent_t * event, unsigned int flags), (event, flags), \
    (none, NONE, 0, 0, 0), plain, "out:- flags:u", (hipErrorOutOfMemory, hipErrorInvalidValue)) \
  X(hipEventRecord, 2, (hipEvent_t event, hipStream_t stream), (event, stream),           \
    (none, NONE, 0, 0, 0), plain, "event:- stream:s",                                     \
    (hipErrorInvalidHandle, hipErrorInvalidValue, hipErrorUnknown))                       \
  X(hipEventQuery, 1, (hipEvent_t event), (event), (none, NONE, 0, 0, 0), plain, "event:-", \
    (hipErrorInvalidHandle, hipErrorLaunchFailure, hipErrorUnknown))                      \
  X(hipEventSynchronize, 1, (hipEvent_t event), (event), (none, NONE, 0, 0, 0), plain,    \
    "event:-", (hipErrorLaunchFailure, hipErrorInvalidHandle, hipErrorUnknown))           \
  X(hipEventDestroy, 1, (hipEvent_t event), (event), (none, NONE, 0, 0, 0), plain,        \
    "event:-", (hipErrorInvalidHandle, hipErrorUnknown))                                  \
  X(hipMemsetAsync, 4, (void *dst, int value, size_t size, hipStream_t stream),           \
    (dst, value, size, stream), (none, NONE, 0, 0, 0), plain,                             \
    "dst:a value:i size:z stream:s",                                                      \
    (hipErrorOutOfMemory, hipErrorInvalidValue, hipErrorUnknown))                         \
  X(hipMemcpyAsync, 5,                                                                    \
    (void *dst, const void *src, size_t size, hipMemcpyKind kind, hipStream_t stream),    \
    (dst, src, size, kind, stream), (none, NONE, 0, 0, 0), plain,                         \
    "dst:a src:a size:z kind:u stream:s",                                                 \
    (hipErrorInvalidValue, hipErrorIllegalAddress, hipErrorUnknown))                      \
  /* The signal kernels (core/src/kernel.c).  A module belongs to the      \
   * current device; image is a mori_module_image (the shim's convention,  \
   * above).  Modules are the core's cache, one per device until           \
   * release_all, as its private streams are: not in the registry.  A launch copies its parameters, as the runtimes do, and     \
   * neither waits nor fails for what the kernel does; a trace leaves out  \
   * the image, the name and the parameters, and a replay takes these     \
   * calls as done (there is no kernel without its module). */                            \
  X(hipModuleLoadData, 2, (hipModule_t * module, const void *image), (module, image),     \
    (none, NONE, 0, 0, 0), plain, "out:- image:-",                                        \
    (hipErrorInvalidValue, hipErrorOutOfMemory, hipErrorNotSupported, hipErrorUnknown))   \
  X(hipModuleGetFunction, 3, (hipFunction_t * function, hipModule_t module, const char *kname), \
    (function, module, kname), (none, NONE, 0, 0, 0), plain, "out:- module:- name:-",     \
    (hipErrorNotFound, hipErrorInvalidHandle, hipErrorInvalidValue))                      \
  X(hipModuleLaunchKernel, 11,                                                            \
    (hipFunction_t f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, \
     unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,              \
     unsigned int sharedMemBytes, hipStream_t stream, void **kernelParams, void **extra), \
    (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,    \
     stream, kernelParams, extra),                                                        \
    (none, NONE, 0, 0, 0), plain,                                                         \
    "function:- gx:u gy:u gz:u bx:u by:u bz:u shared:u stream:s params:- extra:-",         \
    (hipErrorInvalidValue, hipErrorLaunchFailure, hipErrorOutOfMemory, hipErrorUnknown))  \
  X(hipModuleUnload, 1, (hipModule_t module), (module), (none, NONE, 0, 0, 0), plain,     \
    "module:-", (hipErrorInvalidHandle, hipErrorUnknown))                                 \
  /* Host memory a kernel writes and the host reads without a copy: the    \
   * shim's convention is flags hipHostMallocMapped (| Portable) and a     \
   * pointer valid on every device as it is (unified addressing). */                      \
  X(hipHostMalloc, 3, (void **ptr, size_t size, unsigned int flags), (ptr, size, flags),  \
    (acquire, HOST_ALLOC, *ptr, size, 1), plain, "out:- size:z flags:u",                  \
    (hipErrorOutOfMemory, hipErrorInvalidValue))                                          \
  X(hipHostFree, 1, (void *ptr), (ptr), (release, HOST_ALLOC, ptr, 0, ptr != NULL), plain, \
    "addr:-", (hipErrorInvalidValue, hipErrorUnknown))

#define MORI_SHIM_HIP_DECLARE(name, arity, params, args, registry, shim, spec, errors) \
  MORI_API hipError_t mori_##name params;
MORI_SHIM_HIP_CALLS(MORI_SHIM_HIP_DECLARE)
#undef MORI_SHIM_HIP_DECLARE

/* Every OS call the core makes goes through the seam too (socket calls of
 * the fd channel, the file store's I/O, host memory, and time: the clock,
 * its sleeps, randomness and the one thread it starts, the watchdog's), so
 * that the fault shim can fail each of them as it fails a runtime call, and
 * a test can skew the clock the core's deadlines read.  The shim only
 * forwards them to libc.  One row per call: X(ret, name, params, args);
 * exported as mori_<name>.  Paths are always *at() forms (AT_FDCWD for a
 * plain path), so there is one spelling per operation, and every row fails
 * as most of libc does, -1 and errno (NULL for an allocation):
 * thread_create is pthread_create with that convention. */
#define MORI_SHIM_OS_CALLS(X)                                                           \
  X(int, socket, (int domain, int type, int protocol), (domain, type, protocol))       \
  X(int, bind, (int fd, const struct sockaddr *addr, socklen_t len), (fd, addr, len))  \
  X(int, connect, (int fd, const struct sockaddr *addr, socklen_t len), (fd, addr, len)) \
  X(int, setsockopt, (int fd, int level, int name, const void *value, socklen_t len),  \
    (fd, level, name, value, len))                                                     \
  X(int, poll, (struct pollfd * fds, nfds_t nfds, int timeout), (fds, nfds, timeout))  \
  X(ssize_t, sendmsg, (int fd, const struct msghdr *msg, int flags), (fd, msg, flags)) \
  X(ssize_t, recvmsg, (int fd, struct msghdr *msg, int flags), (fd, msg, flags))       \
  X(int, openat, (int dirfd, const char *path, int flags, mode_t mode),                \
    (dirfd, path, flags, mode))                                                        \
  X(ssize_t, read, (int fd, void *buf, size_t count), (fd, buf, count))                \
  X(ssize_t, write, (int fd, const void *buf, size_t count), (fd, buf, count))         \
  X(int, fsync, (int fd), (fd))                                                        \
  X(int, fstat, (int fd, struct stat *st), (fd, st))                                   \
  X(int, flock, (int fd, int operation), (fd, operation))                              \
  X(int, renameat, (int olddirfd, const char *oldpath, int newdirfd, const char *newpath), \
    (olddirfd, oldpath, newdirfd, newpath))                                            \
  X(int, unlinkat, (int dirfd, const char *path, int flags), (dirfd, path, flags))     \
  X(int, mkdirat, (int dirfd, const char *path, mode_t mode), (dirfd, path, mode))     \
  X(int, fchmodat, (int dirfd, const char *path, mode_t mode, int flags),               \
    (dirfd, path, mode, flags))                                                        \
  X(ssize_t, getdents64, (int fd, void *buf, size_t count), (fd, buf, count))          \
  X(int, inotify_init1, (int flags), (flags))                                          \
  X(int, inotify_add_watch, (int fd, const char *path, uint32_t mask), (fd, path, mask)) \
  X(int, kill, (pid_t pid, int sig), (pid, sig))                                       \
  X(void *, malloc, (size_t size), (size))                                             \
  X(void *, calloc, (size_t count, size_t size), (count, size))                        \
  X(void *, realloc, (void *ptr, size_t size), (ptr, size))                            \
  X(char *, strdup, (const char *s), (s))                                               \
  X(int, clock_gettime, (clockid_t clock, struct timespec * now), (clock, now))         \
  X(int, nanosleep, (const struct timespec *pause, struct timespec *left), (pause, left)) \
  X(ssize_t, getrandom, (void *buf, size_t len, unsigned int flags), (buf, len, flags)) \
  X(int, thread_create,                                                                 \
    (pthread_t * thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg), \
    (thread, attr, start, arg))

/* What a failed row returns: -1 (errno set), or NULL for an allocation. */
#define MORI_SHIM_OS_FAILURE(ret) ((ret)_Generic((ret)0, void *: 0, char *: 0, default: -1))

#define MORI_SHIM_OS_DECLARE(ret, name, params, args) MORI_API ret mori_##name params;
MORI_SHIM_OS_CALLS(MORI_SHIM_OS_DECLARE)
#undef MORI_SHIM_OS_DECLARE

/* Closes an fd; an exported fd leaves the resource registry here. */
MORI_API int mori_close(int fd);

/* ---- shim control (the rest is public: mori/shim.h) ---- */

/* "hipErrorOutOfMemory" etc.; "hipError(<n>)" for values not in the table. */
MORI_API const char *mori_hipGetErrorName(hipError_t err);

/* ---- sim only: stream capture, for tests of graph replay ----
 *
 * A stream in capture records the memory operations enqueued on it instead
 * of running them (hipStreamIsCapturing then answers Active); a graph
 * launch enqueues the recorded operations again, with the values baked in
 * at capture, as a CUDA or HIP graph replay does.  On any other backend
 * these return hipErrorNotSupported. */
typedef struct mori_sim_graph mori_sim_graph;
MORI_API hipError_t mori_sim_begin_capture(hipStream_t stream);
MORI_API hipError_t mori_sim_end_capture(hipStream_t stream, mori_sim_graph **graph);
MORI_API hipError_t mori_sim_graph_launch(const mori_sim_graph *graph, hipStream_t stream);
MORI_API void mori_sim_graph_destroy(mori_sim_graph *graph);

#ifdef __cplusplus
}
#endif
#endif /* MORI_HIP_SHIM_H */
