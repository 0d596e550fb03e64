/*
 * hip_shim.h - the one seam between mori-symm and a GPU runtime.
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

#ifdef __cplusplus
extern "C" {
#endif

/* ---- types mirroring HIP (values from hip_runtime_api.h, ROCm >= 6.2) -- */

typedef enum hipError_t {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorOutOfMemory = 2,
  hipErrorNotInitialized = 3,
  hipErrorInvalidDevice = 101,
  hipErrorInvalidContext = 201,
  hipErrorMapFailed = 205,
  hipErrorUnmapFailed = 206,
  hipErrorAlreadyMapped = 208,
  hipErrorNotMapped = 211,
  hipErrorInvalidHandle = 400,
  hipErrorNotFound = 500,
  hipErrorNotReady = 600,
  hipErrorPeerAccessUnsupported = 217,
  hipErrorIllegalAddress = 700,
  hipErrorLaunchFailure = 719,
  hipErrorNotSupported = 801,
  hipErrorLaunchTimeOut = 702,  /* sim: a stream wait that timed out */
  hipErrorUnknown = 999,
  hipErrorRuntimeOther = 1053   /* the shim: backend not built or not available */
} hipError_t;

/* Every hipError_t above, once: the shim's names and the fault schedule's
 * error names both expand this list. */
#define MORI_HIP_ERROR_LIST(X) \
  X(hipSuccess) \
  X(hipErrorInvalidValue) \
  X(hipErrorOutOfMemory) \
  X(hipErrorNotInitialized) \
  X(hipErrorInvalidDevice) \
  X(hipErrorInvalidContext) \
  X(hipErrorMapFailed) \
  X(hipErrorUnmapFailed) \
  X(hipErrorAlreadyMapped) \
  X(hipErrorNotMapped) \
  X(hipErrorPeerAccessUnsupported) \
  X(hipErrorInvalidHandle) \
  X(hipErrorNotFound) \
  X(hipErrorNotReady) \
  X(hipErrorIllegalAddress) \
  X(hipErrorLaunchTimeOut) \
  X(hipErrorLaunchFailure) \
  X(hipErrorNotSupported) \
  X(hipErrorUnknown) \
  X(hipErrorRuntimeOther)

typedef enum hipMemAllocationType {
  hipMemAllocationTypeInvalid = 0x0,
  hipMemAllocationTypePinned = 0x1,
  hipMemAllocationTypeUncached = 0x40000000,
  hipMemAllocationTypeMax = 0x7FFFFFFF
} hipMemAllocationType;

typedef enum hipMemAllocationHandleType {
  hipMemHandleTypeNone = 0x0,
  hipMemHandleTypePosixFileDescriptor = 0x1,
  hipMemHandleTypeWin32 = 0x2,
  hipMemHandleTypeWin32Kmt = 0x4,
  hipMemHandleTypeFabric = 0x8  /* declared from ROCm 7.14; value is ABI */
} hipMemAllocationHandleType;

typedef enum hipMemLocationType {
  hipMemLocationTypeInvalid = 0,
  hipMemLocationTypeDevice = 1
} hipMemLocationType;

typedef enum hipMemAccessFlags {
  hipMemAccessFlagsProtNone = 0,
  hipMemAccessFlagsProtRead = 1,
  hipMemAccessFlagsProtReadWrite = 3
} hipMemAccessFlags;

typedef enum hipMemAllocationGranularity_flags {
  hipMemAllocationGranularityMinimum = 0x0,
  hipMemAllocationGranularityRecommended = 0x1
} hipMemAllocationGranularity_flags;

typedef enum hipMemcpyKind {
  hipMemcpyHostToHost = 0,
  hipMemcpyHostToDevice = 1,
  hipMemcpyDeviceToHost = 2,
  hipMemcpyDeviceToDevice = 3,
  hipMemcpyDefault = 4
} hipMemcpyKind;

/* hipStreamWaitValue32 flags (same numbers as CU_STREAM_WAIT_VALUE_*). */
enum {
  hipStreamWaitValueGte = 0x0,
  hipStreamWaitValueEq = 0x1,
  hipStreamWaitValueAnd = 0x2,
  hipStreamWaitValueNor = 0x3
};

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

typedef struct ihipMemGenericAllocationHandle *hipMemGenericAllocationHandle_t;
typedef struct ihipStream_t *hipStream_t;
typedef struct ihipEvent_t *hipEvent_t;

/* hipStreamCreateWithFlags / hipEventCreateWithFlags flags (CUDA's numbers
 * too: CU_STREAM_NON_BLOCKING, CU_EVENT_DISABLE_TIMING). */
enum { hipStreamDefault = 0x0, hipStreamNonBlocking = 0x1 };
enum { hipEventDefault = 0x0, hipEventBlockingSync = 0x1, hipEventDisableTiming = 0x2 };

typedef enum hipStreamCaptureStatus {
  hipStreamCaptureStatusNone = 0,
  hipStreamCaptureStatusActive = 1,
  hipStreamCaptureStatusInvalidated = 2
} hipStreamCaptureStatus;
typedef void *hipDeviceptr_t;

/* hipStreamBatchMemOp: several stream memory operations in one call, run
 * in array order (HIP's layout, which is CUDA's: 48 bytes an entry).  The
 * shim takes 32-bit waits and writes. */
typedef enum hipStreamBatchMemOpType {
  hipStreamMemOpWaitValue32 = 0x1,
  hipStreamMemOpWriteValue32 = 0x2,
  hipStreamMemOpFlushRemoteWrites = 0x3,
  hipStreamMemOpWaitValue64 = 0x4,
  hipStreamMemOpWriteValue64 = 0x5,
  hipStreamMemOpBarrier = 0x6
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

/* The ABI is what mori's HIP backend passes to libamdhip64 by pointer. */
#ifdef __cplusplus
#define MORI_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define MORI_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif
MORI_STATIC_ASSERT(sizeof(hipMemLocation) == 8, "hipMemLocation ABI");
MORI_STATIC_ASSERT(sizeof(hipMemAllocationProp) == 32, "hipMemAllocationProp ABI");
MORI_STATIC_ASSERT(offsetof(hipMemAllocationProp, requestedHandleType) == 4, "ABI");
MORI_STATIC_ASSERT(offsetof(hipMemAllocationProp, location) == 8, "ABI");
MORI_STATIC_ASSERT(offsetof(hipMemAllocationProp, win32HandleMetaData) == 16, "ABI");
MORI_STATIC_ASSERT(offsetof(hipMemAllocationProp, allocFlags) == 24, "ABI");
MORI_STATIC_ASSERT(sizeof(hipMemAccessDesc) == 12, "hipMemAccessDesc ABI");
MORI_STATIC_ASSERT(sizeof(hipMemFabricHandle_t) == 64, "fabric handle ABI");
MORI_STATIC_ASSERT(sizeof(hipError_t) == 4, "hipError_t ABI");
MORI_STATIC_ASSERT(sizeof(hipStreamBatchMemOpParams) == 48, "hipStreamBatchMemOpParams ABI");
MORI_STATIC_ASSERT(offsetof(hipStreamBatchMemOpParams, waitValue.address) == 8, "ABI");
MORI_STATIC_ASSERT(offsetof(hipStreamBatchMemOpParams, waitValue.value) == 16, "ABI");
MORI_STATIC_ASSERT(offsetof(hipStreamBatchMemOpParams, waitValue.flags) == 24, "ABI");

/* ---- the shim's functions (one per HIP call; same contract as HIP) ---- */

hipError_t mori_hipMemCreate(hipMemGenericAllocationHandle_t *handle, size_t size,
                             const hipMemAllocationProp *prop, unsigned long long flags);
hipError_t mori_hipMemRelease(hipMemGenericAllocationHandle_t handle);
hipError_t mori_hipMemRetainAllocationHandle(hipMemGenericAllocationHandle_t *handle,
                                             void *addr);
hipError_t mori_hipMemAddressReserve(void **ptr, size_t size, size_t alignment, void *addr,
                                     unsigned long long flags);
hipError_t mori_hipMemAddressFree(void *ptr, size_t size);
hipError_t mori_hipMemMap(void *ptr, size_t size, size_t offset,
                          hipMemGenericAllocationHandle_t handle, unsigned long long flags);
hipError_t mori_hipMemUnmap(void *ptr, size_t size);
hipError_t mori_hipMemSetAccess(void *ptr, size_t size, const hipMemAccessDesc *desc,
                                size_t count);
hipError_t mori_hipMemGetAllocationGranularity(size_t *granularity,
                                               const hipMemAllocationProp *prop,
                                               hipMemAllocationGranularity_flags option);
/* POSIX fd: shareableHandle points to an int that receives a new fd.
 * Fabric: shareableHandle points to a hipMemFabricHandle_t. */
hipError_t mori_hipMemExportToShareableHandle(void *shareableHandle,
                                              hipMemGenericAllocationHandle_t handle,
                                              hipMemAllocationHandleType handleType,
                                              unsigned long long flags);
/* The shim's convention is fixed whatever the ROCm version: POSIX fd by
 * value, (void *)(intptr_t)fd; fabric: pointer to the 64-byte handle.  The
 * hip backend converts for ROCm < 7.1, which takes a pointer to the fd.
 * The caller keeps ownership of the fd. */
hipError_t mori_hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t *handle,
                                                void *osHandle,
                                                hipMemAllocationHandleType shHandleType);

hipError_t mori_hipMalloc(void **ptr, size_t size);
hipError_t mori_hipFree(void *ptr);
hipError_t mori_hipMemcpy(void *dst, const void *src, size_t size, hipMemcpyKind kind);
hipError_t mori_hipMemset(void *dst, int value, size_t size);
hipError_t mori_hipGetDevice(int *device);
hipError_t mori_hipSetDevice(int device);
hipError_t mori_hipGetDeviceCount(int *count);
hipError_t mori_hipMemGetInfo(size_t *free_bytes, size_t *total_bytes);
hipError_t mori_hipDeviceSynchronize(void);
hipError_t mori_hipStreamSynchronize(hipStream_t stream);
hipError_t mori_hipStreamWriteValue32(hipStream_t stream, void *ptr, uint32_t value,
                                      unsigned int flags);
hipError_t mori_hipStreamWaitValue32(hipStream_t stream, void *ptr, uint32_t value,
                                     unsigned int flags, uint32_t mask);
/* count (1..MORI_HIP_BATCH_MAX) 32-bit waits and writes in one call, in
 * order; flags 0.  Where the runtime has no batch call, the shim runs the
 * operations one by one (the same stream semantics, a call each), and stops
 * at the first that fails. */
hipError_t mori_hipStreamBatchMemOp(hipStream_t stream, unsigned int count,
                                    hipStreamBatchMemOpParams *paramArray, unsigned int flags);
hipError_t mori_hipDeviceGetAttribute(int *value, hipDeviceAttribute_t attr, int device);
hipError_t mori_hipGetLastError(void);
/* Streams, events and stream-ordered fills and copies: what the signals'
 * watchdog and the allocation path need to stay off the host's critical
 * path.  hipEventQuery returns hipErrorNotReady while the work before the
 * event is pending (that is an answer, not a failure). */
hipError_t mori_hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags);
hipError_t mori_hipStreamDestroy(hipStream_t stream);
hipError_t mori_hipStreamIsCapturing(hipStream_t stream, hipStreamCaptureStatus *status);
hipError_t mori_hipEventCreateWithFlags(hipEvent_t *event, unsigned int flags);
hipError_t mori_hipEventRecord(hipEvent_t event, hipStream_t stream);
hipError_t mori_hipEventQuery(hipEvent_t event);
hipError_t mori_hipEventSynchronize(hipEvent_t event);
hipError_t mori_hipEventDestroy(hipEvent_t event);
hipError_t mori_hipMemsetAsync(void *dst, int value, size_t size, hipStream_t stream);
hipError_t mori_hipMemcpyAsync(void *dst, const void *src, size_t size, hipMemcpyKind kind,
                               hipStream_t stream);
hipError_t mori_hipRuntimeGetVersion(int *version);

/* Every OS call the core makes goes through the seam too (socket calls of
 * the fd channel, the file store's I/O, host memory), so that the fault
 * shim can fail each of them as it fails a runtime call.  The shim only
 * forwards them to libc.  One row per call: X(ret, name, params, args);
 * exported as mori_<name>.  Paths are always *at() forms (AT_FDCWD for a
 * plain path), so there is one spelling per operation. */
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
  X(char *, strdup, (const char *s), (s))

/* What a failed row returns: -1 (errno set), or NULL for an allocation. */
#define MORI_SHIM_OS_FAILURE(ret) ((ret)_Generic((ret)0, void *: 0, char *: 0, default: -1))

#define MORI_SHIM_OS_DECLARE(ret, name, params, args) ret mori_##name params;
MORI_SHIM_OS_CALLS(MORI_SHIM_OS_DECLARE)
#undef MORI_SHIM_OS_DECLARE

/* Closes an fd; an exported fd leaves the ledger here. */
int mori_close(int fd);

/* ---- shim control ---- */

/* "auto", "sim", "cuda" or "hip".  Must come before the first call; later
 * it succeeds only if it names the backend already active.  Returns 0, or
 * -1 with mori_shim_message() saying why (e.g. backend not built). */
int mori_shim_select(const char *name);
/* Name of the active backend, selecting it from MORI_SYMM_SHIM if needed;
 * NULL if it could not be brought up (mori_shim_message() says why). */
const char *mori_shim_backend(void);
/* Thread-local detail of the last failed shim call: the backend's own
 * error name and code, e.g. "cuMemCreate: CUDA_ERROR_NOT_PERMITTED (800)",
 * or the sim contract rule that was violated; for an OS call of the seam,
 * its name and errno ("calloc: Cannot allocate memory (errno 12)"). */
const char *mori_shim_message(void);
/* "hipErrorOutOfMemory" etc.; "hipError(<n>)" for values not in the table. */
const char *mori_hipGetErrorName(hipError_t err);

/* The ledger of live runtime resources made through the shim in this
 * process: physical handles, reservations, mappings, exported fds, device
 * allocations.  Counts are for every backend, so "0 leaks" is checkable on
 * real GPUs too. */
typedef struct mori_shim_ledger_counts {
  long handles;      /* created + imported + retained - released */
  long reservations; /* AddressReserve - AddressFree */
  long mappings;     /* Map - Unmap (per mapping) */
  long exported_fds; /* exported fds not yet closed with mori_close */
  long device_allocs;/* hipMalloc - hipFree */
} mori_shim_ledger_counts;
void mori_shim_ledger(mori_shim_ledger_counts *out);
long mori_shim_ledger_total(void);
/* Writes "0 leaks" or one line per live resource; returns the count.
 * MORI_SHIM_LEDGER_REPORT=1 prints it to stderr at exit. */
long mori_shim_ledger_report(FILE *out);

/* fds the active backend holds itself for resources still live (the sim's
 * memfds; 0 where the backend cannot name them): a leak check that counts
 * a process's fds subtracts these, as it counts the live resources in the
 * ledger.  A resource whose release the runtime refused keeps its fd. */
int mori_shim_runtime_fds(void);

/* The runtime version the active backend reports: HIP's (e.g. 70100000) on
 * hip and sim, the CUDA driver's (e.g. 13000) on cuda. */
int mori_shim_runtime_version(void);

/* ---- sim only: stream capture, for tests of graph replay ----
 *
 * A stream in capture records the memory operations enqueued on it instead
 * of running them (hipStreamIsCapturing then answers Active); a graph
 * launch enqueues the recorded operations again, with the values baked in
 * at capture, as a CUDA or HIP graph replay does.  On any other backend
 * these return hipErrorNotSupported. */
typedef struct mori_sim_graph mori_sim_graph;
hipError_t mori_sim_begin_capture(hipStream_t stream);
hipError_t mori_sim_end_capture(hipStream_t stream, mori_sim_graph **graph);
hipError_t mori_sim_graph_launch(const mori_sim_graph *graph, hipStream_t stream);
void mori_sim_graph_destroy(mori_sim_graph *graph);

/* The sim's profiles (MORI_SIM_ARCH values) and quirks (MORI_SIM_QUIRKS
 * names) by index, from the tables the sim reads them with; NULL past the
 * last.  Whichever backend is active: `mori-symm replay` walks them. */
const char *mori_sim_profile_name(int i);
const char *mori_sim_quirk_name(int i);

#ifdef __cplusplus
}
#endif
#endif /* MORI_HIP_SHIM_H */
