/*
 * fi_calls.h - every call of the shim seam as one X-macro list: the fault
 * shim generates its wrappers from it, the schedule parser and the trace
 * format take their call names and argument layouts from it.
 *
 * MORI_FI_HIP_CALLS(X) rows: X(name, arity, params, args, spec)
 *   name    the HIP name; the shim exports it as mori_<name>
 *   params  the parameter list, args the same names in a call
 *   spec    one "key:kind" per parameter, in order: the key it has in a
 *           trace line and how its value is written there (kinds below).
 *           Kind '-' marks a parameter a trace leaves out because its value
 *           is a fact of one runtime (versions, attribute values), or a
 *           list the format has no word for (a batch's operations).
 *
 * Events and the streams a call creates are written as '-': the trace
 * names streams where they are used (sN), and the replay runs stream work
 * on the default stream.
 *
 * Kinds: H out handle (new symbol hN)   h handle (hN, 0)
 *        R out reservation (rN)         M out device allocation (dN)
 *        a address (rN+0xOFF, dN+0xOFF, host, 0)
 *        z size  u unsigned  i int      Z out size
 *        P allocation prop (alloc/handletype/device)
 *        D access descriptor (access/device)
 *        t handle type (posix_fd, fabric, none, or a number)
 *        X export output (fdN or fabric)   O import input (fdN, fabric, other)
 *        s stream (0 or sN)                F fd list (fdN,fdM or none)
 *        f fd (fdN or other)
 * The kinds of a handle or fd that comes out of a call name a new symbol;
 * the sizes the symbol covers come from the first 'z' of the same row.
 */
#ifndef MORI_FI_CALLS_H
#define MORI_FI_CALLS_H

#include "mori/hip_shim.h"

#define MORI_FI_HIP_CALLS(X)                                                              \
  X(hipMemCreate, 4,                                                                      \
    (hipMemGenericAllocationHandle_t * handle, size_t size, const hipMemAllocationProp *prop, \
     unsigned long long flags),                                                           \
    (handle, size, prop, flags), "out:H size:z prop:P flags:u")                           \
  X(hipMemRelease, 1, (hipMemGenericAllocationHandle_t handle), (handle), "handle:h")     \
  X(hipMemRetainAllocationHandle, 2, (hipMemGenericAllocationHandle_t * handle, void *addr), \
    (handle, addr), "out:H addr:a")                                                       \
  X(hipMemAddressReserve, 5,                                                              \
    (void **ptr, size_t size, size_t alignment, void *addr, unsigned long long flags),    \
    (ptr, size, alignment, addr, flags), "out:R size:z align:z hint:a flags:u")           \
  X(hipMemAddressFree, 2, (void *ptr, size_t size), (ptr, size), "addr:a size:z")         \
  X(hipMemMap, 5,                                                                         \
    (void *ptr, size_t size, size_t offset, hipMemGenericAllocationHandle_t handle,       \
     unsigned long long flags),                                                           \
    (ptr, size, offset, handle, flags), "addr:a size:z offset:z handle:h flags:u")        \
  X(hipMemUnmap, 2, (void *ptr, size_t size), (ptr, size), "addr:a size:z")               \
  X(hipMemSetAccess, 4,                                                                   \
    (void *ptr, size_t size, const hipMemAccessDesc *desc, size_t count),                 \
    (ptr, size, desc, count), "addr:a size:z desc:D count:z")                             \
  X(hipMemGetAllocationGranularity, 3,                                                    \
    (size_t * granularity, const hipMemAllocationProp *prop,                              \
     hipMemAllocationGranularity_flags option),                                           \
    (granularity, prop, option), "out:Z prop:P option:u")                                 \
  X(hipMemExportToShareableHandle, 4,                                                     \
    (void *shareableHandle, hipMemGenericAllocationHandle_t handle,                       \
     hipMemAllocationHandleType handleType, unsigned long long flags),                    \
    (shareableHandle, handle, handleType, flags), "out:X handle:h type:t flags:u")        \
  X(hipMemImportFromShareableHandle, 3,                                                   \
    (hipMemGenericAllocationHandle_t * handle, void *osHandle,                            \
     hipMemAllocationHandleType shHandleType),                                            \
    (handle, osHandle, shHandleType), "out:H os:O type:t")                                \
  X(hipMalloc, 2, (void **ptr, size_t size), (ptr, size), "out:M size:z")                 \
  X(hipFree, 1, (void *ptr), (ptr), "addr:a")                                             \
  X(hipMemcpy, 4, (void *dst, const void *src, size_t size, hipMemcpyKind kind),          \
    (dst, src, size, kind), "dst:a src:a size:z kind:u")                                  \
  X(hipMemset, 3, (void *dst, int value, size_t size), (dst, value, size),                \
    "dst:a value:i size:z")                                                               \
  X(hipGetDevice, 1, (int *device), (device), "out:-")                                    \
  X(hipSetDevice, 1, (int device), (device), "device:i")                                  \
  X(hipGetDeviceCount, 1, (int *count), (count), "out:-")                                 \
  X(hipDeviceSynchronize, 0, (void), (), "")                                              \
  X(hipStreamSynchronize, 1, (hipStream_t stream), (stream), "stream:s")                  \
  X(hipStreamWriteValue32, 4,                                                             \
    (hipStream_t stream, void *ptr, uint32_t value, unsigned int flags),                  \
    (stream, ptr, value, flags), "stream:s addr:a value:u flags:u")                       \
  X(hipStreamWaitValue32, 5,                                                              \
    (hipStream_t stream, void *ptr, uint32_t value, unsigned int flags, uint32_t mask),   \
    (stream, ptr, value, flags, mask), "stream:s addr:a value:u flags:u mask:u")          \
  X(hipDeviceGetAttribute, 3, (int *value, hipDeviceAttribute_t attr, int device),        \
    (value, attr, device), "out:- attr:u device:i")                                       \
  X(hipGetLastError, 0, (void), (), "")                                                   \
  X(hipRuntimeGetVersion, 1, (int *version), (version), "out:-")                          \
  X(hipStreamCreateWithFlags, 2, (hipStream_t * stream, unsigned int flags), (stream, flags), \
    "out:- flags:u")                                                                      \
  X(hipStreamDestroy, 1, (hipStream_t stream), (stream), "stream:s")                      \
  X(hipStreamIsCapturing, 2, (hipStream_t stream, hipStreamCaptureStatus * status),       \
    (stream, status), "stream:s out:-")                                                   \
  X(hipEventCreateWithFlags, 2, (hipEvent_t * event, unsigned int flags), (event, flags), \
    "out:- flags:u")                                                                      \
  X(hipEventRecord, 2, (hipEvent_t event, hipStream_t stream), (event, stream),           \
    "event:- stream:s")                                                                   \
  X(hipEventQuery, 1, (hipEvent_t event), (event), "event:-")                             \
  X(hipEventSynchronize, 1, (hipEvent_t event), (event), "event:-")                       \
  X(hipEventDestroy, 1, (hipEvent_t event), (event), "event:-")                           \
  X(hipMemsetAsync, 4, (void *dst, int value, size_t size, hipStream_t stream),           \
    (dst, value, size, stream), "dst:a value:i size:z stream:s")                          \
  X(hipMemcpyAsync, 5,                                                                    \
    (void *dst, const void *src, size_t size, hipMemcpyKind kind, hipStream_t stream),    \
    (dst, src, size, kind, stream), "dst:a src:a size:z kind:u stream:s")                \
  X(hipStreamBatchMemOp, 4,                                                               \
    (hipStream_t stream, unsigned int count, hipStreamBatchMemOpParams *paramArray,       \
     unsigned int flags),                                                                 \
    (stream, count, paramArray, flags), "stream:s count:u ops:- flags:u")

/* The OS calls of the seam: the shim's own list (MORI_SHIM_OS_CALLS in
 * hip_shim.h: sockets, the store's I/O, host allocation) plus close, which
 * the shim declares apart because it also keeps the ledger of exported fds.
 * X(ret, name, params, args); the seam exports each as mori_<name>.  They
 * fail the way libc does (-1 and errno, or NULL), carry no hipError_t and
 * take no global call index: how often a nonblocking recvmsg finds the
 * queue empty, or a store read polls for a key, is timing. */
#define MORI_FI_OS_CALLS(X) MORI_SHIM_OS_CALLS(X) X(int, close, (int fd), (fd))

#endif
