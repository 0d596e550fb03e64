/*
 * sim_internal.h - what the files of the sim backend share: the active
 * profile and quirks, the contract rules, the one lock over the sim tables,
 * and the VMM emulator's entry points (sim_vmm.c) used by the table (sim.c).
 */
#ifndef MORI_SIM_INTERNAL_H
#define MORI_SIM_INTERNAL_H

#include "mori/signal_kernel.h"
#include "shim_internal.h"

#include <pthread.h>

/* Private to the object library: the stand-in runtime that links it too must
 * not see two copies of these through the dynamic linker. */
#define MORI__SIM_HIDDEN __attribute__((visibility("hidden")))

/* HIP on MI300/MI350 reports 2 MiB for both the minimum and the recommended
 * granularity; the sim keeps the same number so sizes behave as on hardware. */
#define MORI__SIM_GRANULARITY ((size_t)2 << 20)

/* One row per MORI_SIM_ARCH value (sim.c). */
struct mori__sim_profile {
  const char *arch;
  int runtime_version; /* HIP_VERSION the profile's ROCm reports */
  int fabric_create;   /* hipMemCreate with requestedHandleType fabric works */
  int fabric_export;   /* exporting such a handle as fabric works */
  int fabric_hint;     /* moriDeviceAttributeFabricHandleSupported */
  int cu_count;        /* moriDeviceAttributeMultiprocessorCount */
};

/* One bit per MORI_SIM_QUIRKS name (sim.c has the table). */
enum mori__sim_quirk {
  MORI__SIM_Q_RETAIN_NO_REF = 1u << 0,
  MORI__SIM_Q_EXPORT_FD_LIFETIME = 1u << 1,
  MORI__SIM_Q_UNMAP_MULTI = 1u << 2,
  MORI__SIM_Q_MEMSET_FABRIC = 1u << 3,
  MORI__SIM_Q_IMPORT_FD_LIFETIME = 1u << 4,
  MORI__SIM_Q_CONCURRENT_VMM = 1u << 5,
};

struct mori__sim_config {
  const struct mori__sim_profile *profile;
  unsigned quirks;
  int devices;
  long wait_timeout_ms;
  int async_streams; /* MORI_SIM_STREAMS=async: a worker thread per stream */
};

extern struct mori__sim_config mori__sim_config MORI__SIM_HIDDEN;
/* Every table of the sim (handles, reservations, mappings, hipMalloc blocks)
 * sits under this one lock; the engine looks up its views under it and
 * moves bytes and spins on waits outside it. */
extern pthread_mutex_t mori__sim_lock MORI__SIM_HIDDEN;

static inline int mori__sim_quirk(enum mori__sim_quirk q) {
  return (mori__sim_config.quirks & (unsigned)q) != 0;
}

/* The HIP contract rules the sim enforces; sim.c holds their wording, which
 * is what mori_shim_message() names ("<call>: contract: <rule> (<detail>)"). */
enum mori__sim_rule {
  RULE_NULL_ARGUMENT,
  RULE_SIZE_GRANULARITY,
  RULE_FLAGS_ZERO,
  RULE_MAP_OFFSET_ZERO,
  RULE_ALIGNMENT_POW2,
  RULE_ADDRESS_ALIGNED,
  RULE_MAP_INSIDE_RESERVATION,
  RULE_MAP_OVERLAP,
  RULE_MAP_LARGER_THAN_ALLOCATION,
  RULE_UNMAP_WHOLE_MAPPINGS,
  RULE_FREE_LIVE_MAPPINGS,
  RULE_FREE_SIZE,
  RULE_FREE_UNKNOWN,
  RULE_UNKNOWN_HANDLE,
  RULE_DOUBLE_RELEASE,
  RULE_USE_AFTER_RELEASE,
  RULE_EXPORT_TYPE,
  RULE_HANDLE_TYPE,
  RULE_IMPORT_GARBAGE,
  RULE_NOT_MAPPED,
  RULE_NO_ACCESS,
  RULE_NOT_DEVICE,
  RULE_ACCESS_FLAGS,
  RULE_LOCATION,
  RULE_ALLOCATION_TYPE,
  RULE_HIPFREE_UNKNOWN,
  RULE_MEMCPY_KIND,
  RULE_VALUE_ALIGNED,
  RULE_WAIT_FLAGS,
  RULE_GRANULARITY_OPTION,
  RULE_ATTRIBUTE,
  RULE_UNKNOWN_STREAM,
  RULE_UNKNOWN_EVENT,
  RULE_STREAM_FLAGS,
  RULE_CAPTURE,
  RULE_UNKNOWN_MODULE,
  RULE_UNKNOWN_FUNCTION,
  RULE_LAUNCH_SHAPE,
  RULE_COUNT
};

/* Fails a call for breaking `rule`: sets the detail message and returns
 * hipErrorInvalidValue.  fmt (may be NULL) adds the specifics. */
hipError_t mori__sim_contract(const char *call, enum mori__sim_rule rule, const char *fmt, ...)
    MORI__SIM_HIDDEN __attribute__((format(printf, 3, 4)));

/* A growable array with room for one more element (possibly moved), or NULL
 * with errno set; *cap changes only on success. */
void *mori__sim_grow(void *array, size_t *cap, size_t len, size_t elem) MORI__SIM_HIDDEN;

/* ---- device memory: the VMM emulator and hipMalloc (sim_vmm.c) ---- */

hipError_t mori__sim_granularity(size_t *gran, const hipMemAllocationProp *prop,
                                 hipMemAllocationGranularity_flags option) MORI__SIM_HIDDEN;
hipError_t mori__sim_mem_create(hipMemGenericAllocationHandle_t *handle, size_t size,
                                const hipMemAllocationProp *prop,
                                unsigned long long flags) MORI__SIM_HIDDEN;
hipError_t mori__sim_mem_release(hipMemGenericAllocationHandle_t handle) MORI__SIM_HIDDEN;
hipError_t mori__sim_mem_retain(hipMemGenericAllocationHandle_t *handle,
                                void *addr) MORI__SIM_HIDDEN;
hipError_t mori__sim_address_reserve(void **ptr, size_t size, size_t alignment, void *addr,
                                     unsigned long long flags) MORI__SIM_HIDDEN;
hipError_t mori__sim_address_free(void *ptr, size_t size) MORI__SIM_HIDDEN;
hipError_t mori__sim_mem_map(void *ptr, size_t size, size_t offset,
                             hipMemGenericAllocationHandle_t handle,
                             unsigned long long flags) MORI__SIM_HIDDEN;
hipError_t mori__sim_mem_unmap(void *ptr, size_t size) MORI__SIM_HIDDEN;
hipError_t mori__sim_set_access(void *ptr, size_t size, const hipMemAccessDesc *desc,
                                size_t count) MORI__SIM_HIDDEN;
hipError_t mori__sim_export(void *shareable, hipMemGenericAllocationHandle_t handle,
                            hipMemAllocationHandleType type,
                            unsigned long long flags) MORI__SIM_HIDDEN;
hipError_t mori__sim_import(hipMemGenericAllocationHandle_t *handle, void *osHandle,
                            hipMemAllocationHandleType type) MORI__SIM_HIDDEN;
/* A block's device address is PROT_NONE to the host, as every device
 * address of the sim is; only the engine reaches its bytes. */
hipError_t mori__sim_malloc(void **ptr, size_t size) MORI__SIM_HIDDEN;
hipError_t mori__sim_free(void *ptr) MORI__SIM_HIDDEN;

/* Checks that the bytes [p, p + n) a copy, fill or memop touches are
 * usable.  A device operand lies wholly in device memory the sim can see:
 * inside a reservation, mapped with read (or read-write) access; a hipMalloc
 * block; a hipHostMalloc block.  Plain host memory is usable only where
 * host_ok says this operand is a copy's host side, and then wholly outside
 * device address space; the first byte says which the operand is (as HIP
 * infers it for hipMemcpyDefault).  Anything else is refused with
 * hipErrorInvalidValue, as HIP refuses an operand none of its allocations
 * holds.  Called with mori__sim_lock held. */
hipError_t mori__sim_check_access(const char *call, const void *p, size_t n, int need_write,
                                  int host_ok) MORI__SIM_HIDDEN;
/* Whether any byte of [p, p + n) is mapped from a fabric-type allocation
 * (quirk memset-fabric).  Called with mori__sim_lock held. */
int mori__sim_touches_fabric(const void *p, size_t n) MORI__SIM_HIDDEN;
/* Whether [p, p + n) overlaps a reservation (hipFree must refuse those). */
int mori__sim_in_reservation(const void *p, size_t n) MORI__SIM_HIDDEN;

/* The engine: what a copy, a fill or a stream memory operation does to
 * memory, once its checks passed.  Device addresses are PROT_NONE to the
 * host; the engine translates each one (a binary search of the sorted
 * tables, under mori__sim_lock) to the private alias of the same memory and
 * moves the bytes there, outside the lock.  Memory unmapped or access taken
 * away after the checks fails with hipErrorIllegalAddress, the detail in
 * why.  Never a host dereference of a device address: anything else that
 * must touch device memory comes here. */
hipError_t mori__sim_copy(const char *call, void *dst, const void *src, size_t size,
                          unsigned host, char *why, size_t whylen) MORI__SIM_HIDDEN;
/* A copy's operands that may be plain host memory (its host side). */
#define MORI__SIM_HOST_DST 1u
#define MORI__SIM_HOST_SRC 2u
/* Whole pages of shared memory are zeroed by punching a hole. */
hipError_t mori__sim_fill(const char *call, void *dst, int value, size_t size, char *why,
                          size_t whylen) MORI__SIM_HIDDEN;
/* The engine's address of the 4-aligned word at p, for stores and waits. */
hipError_t mori__sim_word(const char *call, void *p, int need_write, uint32_t **word, char *why,
                          size_t whylen) MORI__SIM_HIDDEN;

/* ---- streams and events (sim_stream.c) ---- */

/* A stream memory operation, a fill, a copy or a kernel, as a stream runs it. */
enum mori__sim_op_kind {
  MORI__SIM_OP_WRITE, MORI__SIM_OP_WAIT, MORI__SIM_OP_FILL, MORI__SIM_OP_COPY, MORI__SIM_OP_KERNEL
};
struct mori__sim_kernel; /* a row of sim_kernel.c's models */
struct mori__sim_op {
  enum mori__sim_op_kind kind;
  void *dst;
  const void *src;
  size_t size;
  uint32_t value, mask; /* write: value; wait: condition flags, value, mask */
  unsigned flags;
  unsigned host; /* a copy: MORI__SIM_HOST_DST/SRC, its operands that may be host memory */
  const struct mori__sim_kernel *kernel; /* a kernel: its model, and its argument */
  struct mori_signal_args args;          /* (copied at the launch) */
};
/* Runs op on stream (its checks already passed): at once on the caller's
 * thread in sync mode, after the stream's earlier work in async mode, into
 * the graph while the stream captures. */
hipError_t mori__sim_enqueue(const char *call, hipStream_t stream,
                             const struct mori__sim_op *op) MORI__SIM_HIDDEN;
/* Runs op now on the caller's thread (a synchronous copy or fill). */
hipError_t mori__sim_run(const char *call, const struct mori__sim_op *op) MORI__SIM_HIDDEN;
/* What a synchronous copy or fill on the legacy default stream waits for in
 * async mode: every blocking stream's earlier work. */
hipError_t mori__sim_legacy_sync(const char *call) MORI__SIM_HIDDEN;
/* The wait conditions of hipStreamWaitValue32; 0 for flags outside them. */
int mori__sim_wait_flags_valid(unsigned flags) MORI__SIM_HIDDEN;

hipError_t mori__sim_stream_create(hipStream_t *stream, unsigned int flags) MORI__SIM_HIDDEN;
hipError_t mori__sim_stream_destroy(hipStream_t stream) MORI__SIM_HIDDEN;
hipError_t mori__sim_stream_sync(hipStream_t stream) MORI__SIM_HIDDEN;
hipError_t mori__sim_device_sync(void) MORI__SIM_HIDDEN;
hipError_t mori__sim_stream_is_capturing(hipStream_t stream,
                                         hipStreamCaptureStatus *status) MORI__SIM_HIDDEN;
hipError_t mori__sim_event_create(hipEvent_t *event, unsigned int flags) MORI__SIM_HIDDEN;
hipError_t mori__sim_event_record(hipEvent_t event, hipStream_t stream) MORI__SIM_HIDDEN;
hipError_t mori__sim_event_query(hipEvent_t event) MORI__SIM_HIDDEN;
hipError_t mori__sim_event_sync(hipEvent_t event) MORI__SIM_HIDDEN;
hipError_t mori__sim_event_destroy(hipEvent_t event) MORI__SIM_HIDDEN;
/* Spins until (*p & mask) meets value under flags, for at most bound_ms
 * (a short spin, then growing pauses); 0 when met, -1 past the bound, the
 * word's last value in *last. */
int mori__sim_spin(const uint32_t *p, uint32_t value, unsigned flags, uint32_t mask, long bound_ms,
                   uint32_t *last) MORI__SIM_HIDDEN;

/* Whether any stream of the process captures (sim_stream.c). */
int mori__sim_capturing(void) MORI__SIM_HIDDEN;
/* Capture and replay, the table's begin_capture, end_capture, graph_launch
 * and graph_destroy (behind mori_sim_*). */
hipError_t mori__sim_begin_capture(hipStream_t stream) MORI__SIM_HIDDEN;
hipError_t mori__sim_end_capture(hipStream_t stream, mori_sim_graph **graph) MORI__SIM_HIDDEN;
hipError_t mori__sim_graph_launch(const mori_sim_graph *graph,
                                  hipStream_t stream) MORI__SIM_HIDDEN;
void mori__sim_graph_destroy(mori_sim_graph *graph) MORI__SIM_HIDDEN;

/* ---- modules, kernels, mapped host memory (sim_kernel.c) ---- */

hipError_t mori__sim_module_load(hipModule_t *module, const void *image) MORI__SIM_HIDDEN;
hipError_t mori__sim_module_function(hipFunction_t *function, hipModule_t module,
                                     const char *kname) MORI__SIM_HIDDEN;
hipError_t mori__sim_launch(hipFunction_t f, unsigned int gx, unsigned int gy, unsigned int gz,
                            unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                            hipStream_t stream, void **params, void **extra) MORI__SIM_HIDDEN;
hipError_t mori__sim_module_unload(hipModule_t module) MORI__SIM_HIDDEN;
hipError_t mori__sim_host_malloc(void **ptr, size_t size, unsigned int flags) MORI__SIM_HIDDEN;
hipError_t mori__sim_host_free(void *ptr) MORI__SIM_HIDDEN;
/* The bytes from addr to the end of the hipHostMalloc block holding it (0:
 * none holds it).  Called with mori__sim_lock held. */
size_t mori__sim_host_block_rest(uintptr_t addr) MORI__SIM_HIDDEN;
/* Runs a launched kernel's model (a stream's turn has come); a failure's
 * detail goes to why. */
hipError_t mori__sim_run_kernel(const struct mori__sim_op *op, char *why,
                                size_t whylen) MORI__SIM_HIDDEN;

/* Drops the streams' workers in a forked child (they did not survive). */
void mori__sim_streams_atfork_child(void) MORI__SIM_HIDDEN;

/* Bytes of device memory still alive (physical allocations held by a
 * handle or a mapping, hipMalloc blocks); caller holds mori__sim_lock. */
size_t mori__sim_live_bytes(void) MORI__SIM_HIDDEN;
/* The memfds of live allocations (takes mori__sim_lock). */
int mori__sim_own_fds(void) MORI__SIM_HIDDEN;

#endif
