/*
 * shim_internal.h - the backend table behind libmori_hip_shim.so.
 *
 * shim.c owns what every backend shares: backend selection, the
 * thread-local last error and detail message, the resource ledger, the
 * socket calls.  A backend supplies only the runtime calls, as one table,
 * in the manner of SQLite's aSyscall[].  A backend entry returns a hipError_t
 * and, on failure, may call mori__shim_detail() to say what its runtime said.
 */
#ifndef MORI_SHIM_INTERNAL_H
#define MORI_SHIM_INTERNAL_H

#include "mori/hip_shim.h"

struct mori__shim_backend {
  const char *name;
  /* Bring the runtime up.  0 on success; otherwise nonzero with the reason
   * written to why (e.g. "libcuda.so.1: cannot open shared object file"). */
  int (*init)(char *why, size_t whylen);

  hipError_t (*mem_create)(hipMemGenericAllocationHandle_t *handle, size_t size,
                           const hipMemAllocationProp *prop, unsigned long long flags);
  hipError_t (*mem_release)(hipMemGenericAllocationHandle_t handle);
  hipError_t (*mem_retain)(hipMemGenericAllocationHandle_t *handle, void *addr);
  hipError_t (*address_reserve)(void **ptr, size_t size, size_t alignment, void *addr,
                                 unsigned long long flags);
  hipError_t (*address_free)(void *ptr, size_t size);
  hipError_t (*mem_map)(void *ptr, size_t size, size_t offset,
                        hipMemGenericAllocationHandle_t handle, unsigned long long flags);
  hipError_t (*mem_unmap)(void *ptr, size_t size);
  hipError_t (*set_access)(void *ptr, size_t size, const hipMemAccessDesc *desc, size_t count);
  hipError_t (*granularity)(size_t *gran, const hipMemAllocationProp *prop,
                            hipMemAllocationGranularity_flags option);
  hipError_t (*export_handle)(void *shareable, hipMemGenericAllocationHandle_t handle,
                              hipMemAllocationHandleType type, unsigned long long flags);
  /* osHandle follows the shim's convention (fd by value; fabric by pointer). */
  hipError_t (*import_handle)(hipMemGenericAllocationHandle_t *handle, void *osHandle,
                              hipMemAllocationHandleType type);
  hipError_t (*malloc_)(void **ptr, size_t size);
  hipError_t (*free_)(void *ptr);
  hipError_t (*memcpy_)(void *dst, const void *src, size_t size, hipMemcpyKind kind);
  hipError_t (*memset_)(void *dst, int value, size_t size);
  hipError_t (*get_device)(int *device);
  hipError_t (*set_device)(int device);
  hipError_t (*device_count)(int *count);
  hipError_t (*mem_get_info)(size_t *free_bytes, size_t *total_bytes); /* may be NULL */
  hipError_t (*device_sync)(void);
  hipError_t (*stream_sync)(hipStream_t stream);
  hipError_t (*write_value32)(hipStream_t stream, void *ptr, uint32_t value, unsigned int flags);
  hipError_t (*wait_value32)(hipStream_t stream, void *ptr, uint32_t value, unsigned int flags,
                             uint32_t mask);
  /* May be NULL, or return hipErrorNotSupported (a runtime without the
   * call): the shim then runs the operations one by one. */
  hipError_t (*batch_mem_op)(hipStream_t stream, unsigned int count,
                             hipStreamBatchMemOpParams *ops, unsigned int flags);
  hipError_t (*device_attribute)(int *value, hipDeviceAttribute_t attr, int device);
  hipError_t (*stream_create)(hipStream_t *stream, unsigned int flags);
  hipError_t (*stream_destroy)(hipStream_t stream);
  hipError_t (*stream_is_capturing)(hipStream_t stream, hipStreamCaptureStatus *status);
  hipError_t (*event_create)(hipEvent_t *event, unsigned int flags);
  hipError_t (*event_record)(hipEvent_t event, hipStream_t stream);
  hipError_t (*event_query)(hipEvent_t event);
  hipError_t (*event_sync)(hipEvent_t event);
  hipError_t (*event_destroy)(hipEvent_t event);
  hipError_t (*memset_async)(void *dst, int value, size_t size, hipStream_t stream);
  hipError_t (*memcpy_async)(void *dst, const void *src, size_t size, hipMemcpyKind kind,
                             hipStream_t stream);
  /* Clears the runtime's own sticky error; may be NULL. */
  hipError_t (*clear_last_error)(void);
  hipError_t (*runtime_version)(int *version);
  /* fds the backend itself holds for resources still live (the sim: one
   * memfd per live allocation); may be NULL (none it can name). */
  int (*own_fds)(void);
};

extern const struct mori__shim_backend mori__shim_sim;
extern const struct mori__shim_backend mori__shim_cuda;
extern const struct mori__shim_backend mori__shim_hip;

/* The sim's capture and replay (sim_stream.c), behind mori_sim_*. */
#define MORI__SHIM_HIDDEN __attribute__((visibility("hidden")))
hipError_t mori__sim_begin_capture(hipStream_t stream) MORI__SHIM_HIDDEN;
hipError_t mori__sim_end_capture(hipStream_t stream, mori_sim_graph **graph) MORI__SHIM_HIDDEN;
hipError_t mori__sim_graph_launch(const mori_sim_graph *graph,
                                  hipStream_t stream) MORI__SHIM_HIDDEN;
void mori__sim_graph_destroy(mori_sim_graph *graph) MORI__SHIM_HIDDEN;

/* Sets the thread-local detail message of the current call (printf-style). */
void mori__shim_detail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
