/*
 * symm.h - the public C API of mori-symm: symmetric allocations, their
 * rendezvous into windows, and the windows' pointer tables and signals.
 *
 * Every allocation is an independent VMM allocation; free() is purely
 * local.  A rendezvous is collective over a group (every rank calls it with
 * the same group name, in the same order per group) and builds one flat VA
 * span of world_size x stride with every rank's memory in its slot.
 * Functions return 0 or a negative MORI_E*; mori_last_error() says why.
 *
 * How data moves.  Every pointer this API returns into a block, a span, a
 * signal pad or a device table is a device address: the host never
 * dereferences one (on a GPU that faults, and so it does on the sim
 * backend, which keeps its device memory PROT_NONE to the host).  Kernels
 * reach the peers through the device arrays (mori_window_buffer_ptrs_dev,
 * mori_window_signal_pad_ptrs_dev; or span + r * stride).  The host moves
 * data with mori_symm_memcpy, mori_symm_memset and their stream-ordered
 * forms (below, "Moving data"), given the addresses in the host arrays
 * (mori_window_buffer_ptrs, mori_window_signal_pad_ptrs), which are host
 * memory holding device addresses.  They work on every backend, the sim
 * included, where the real runtime's hipMemcpy cannot reach the emulator's
 * memory; on a GPU, the runtime's own hipMemcpy (or cudaMemcpy) on the
 * same addresses does the same.
 *
 * docs/architecture.md describes what each call does (blocks, windows,
 * lifetimes, signals, teardown); docs/torch.md how the torch adapter maps
 * onto it; docs/backends.md the shim backends, the sim's memory model
 * among them.
 */
#ifndef MORI_SYMM_H
#define MORI_SYMM_H

#include <stddef.h>
#include <stdint.h>

#include "mori/api.h"
#include "mori/error.h"
#include "mori/shim.h"
#include "mori/store.h"
#include "mori/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A GPU stream: a hipStream_t on ROCm, a cudaStream_t on CUDA, passed as
 * it is (both are pointers); NULL is the default stream.  mori-symm's
 * headers name no HIP or CUDA type, so they compile beside either
 * runtime's headers. */
typedef void *mori_stream;

/* How a block is shared with its peers (mori_symm_probe,
 * mori_window_handle_type): the values of HIP's hipMemAllocationHandleType. */
enum {
  MORI_HANDLE_TYPE_POSIX_FD = 0x1, /* an fd, passed over SCM_RIGHTS (one host) */
  MORI_HANDLE_TYPE_FABRIC = 0x8    /* a 64-byte fabric handle (across hosts) */
};

/* ---- process-wide settings (before the first allocation) ---- */

/* torch's default signal pad is 9216 bytes; 0 turns the pad off.  The block
 * carries the torch-visible pad and, after it, 8 private signal slots (one
 * per window of the block, 5 pads each) for barrier/put_signal/wait_signal
 * (docs/architecture.md, Signals). */
#define MORI_SYMM_DEFAULT_SIGNAL_PAD 9216
MORI_API void mori_symm_set_signal_pad_size(size_t bytes);
MORI_API size_t mori_symm_signal_pad_size(void);
/* Rendezvous and signal timeout (ms); default 30000 or MORI_SYMM_TIMEOUT_MS. */
MORI_API void mori_symm_set_timeout_ms(int ms);
MORI_API int mori_symm_timeout_ms(void);
/* Teardown on by default; MORI_SYMM_TEARDOWN=0 leaves windows mapped at exit. */
MORI_API int mori_symm_teardown_enabled(void);
/* MORI_SYMM_DEBUG's level (0 off, 1 WARN, 2 INFO, 3 TRACE), read once per
 * process; an unknown value is reported on stderr then.  A launcher calls
 * it before forking, so that its ranks inherit the verdict. */
MORI_API int mori_symm_log_level(void);
/* Several ranks of a group on one device of one host are refused unless
 * allowed (torch's TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES, which the torch
 * adapter passes on): 1 allows, 0 refuses, -1 (the default) defers to
 * MORI_SYMM_ALLOW_OVERLAPPING_DEVICES=1, read at every rendezvous. */
MORI_API void mori_symm_set_allow_overlapping_devices(int allow);
MORI_API int mori_symm_allow_overlapping_devices(void);
/* Keeping warm what the next allocation and rendezvous would make again
 * (off unless set; the torch adapter sets it): a freed block of at most
 * MORI_SYMM_WARM_EXPORT_MAX physical bytes is kept, mapped at its address,
 * when its device keeps none, and the next allocation of that device and
 * size takes it back (zeroed, as every allocation is) without a VMM call;
 * when the last window of a device goes, its device-table chunk is kept,
 * and so is the exported fd of such a block when it was the device's last
 * open one (drivers that drop per-process export state with the last
 * exported fd rebuild it at the next export: docs/performance.md, "Call by
 * call").  At most one of each per device, given back by
 * mori_symm_release_all and at exit.  1 keeps, 0 does not, -1 (the
 * default) defers to MORI_SYMM_KEEP_WARM=1, read at each decision.
 * mori_symm_warm counts the runtime resources kept now (a block's handle,
 * reservation and mapping are 3; a chunk and an fd 1 each). */
#define MORI_SYMM_WARM_EXPORT_MAX (4u << 20)
MORI_API void mori_symm_set_keep_warm(int keep);
MORI_API int mori_symm_keep_warm(void);
MORI_API long mori_symm_warm(void);

/* ---- allocations ---- */

/* Allocates at least size bytes on device: probe (cached), granularity,
 * create, reserve, map, grant access, zero.  The pointer is the block base
 * (a device address).
 * The memory is zero when the call returns; the zeroing runs on a private
 * stream of the device and waits for nothing else on the device. */
MORI_API int mori_symm_alloc(size_t size, int device, void **ptr);
/* The same, but the block (buffer and signal pads) is zeroed in stream
 * order on `stream` (a mori_stream; NULL: the default stream) and not
 * waited for: work enqueued later on that stream sees zeros; the call
 * itself does no synchronous device work.  (A stream being captured into a
 * graph gets mori_symm_alloc's zeroing instead, outside the graph.)  The
 * block's first rendezvous waits for the zeroing (and so for the work
 * enqueued on `stream` up to this call) before any peer can write or
 * signal into the block. */
MORI_API int mori_symm_alloc_on_stream(size_t size, int device, mori_stream stream, void **ptr);
/* Frees the block whose base is ptr.  Purely local, as torch's free: the
 * block leaves the table at once (lookup, rendezvous and free of it then
 * fail with MORI_ENOTFOUND); its windows and then the block are torn down
 * now if no window of it is referenced (mori_window_retain) or in use by a
 * call on another thread, else by whoever lets go last. */
MORI_API int mori_symm_free(void *ptr);
/* The buffer size of the block covering ptr (interior pointers allowed)
 * and, optionally, ptr's offset in it. */
MORI_API int mori_symm_lookup(const void *ptr, size_t *buffer_size, size_t *offset);

/* The handle type the probe picks for device (MORI_HANDLE_TYPE_*): fabric
 * only if create AND export both succeed; why says which step failed. */
MORI_API int mori_symm_probe(int device, int *handle_type, char *why, size_t whylen);

/* ---- moving data ---- */

/* The host's copies and fills, through the library's GPU seam (the
 * active shim backend: the runtime's hipMemcpy, hipMemset, ... on hip, the
 * driver's on cuda, the emulator's engine on sim).  They are core
 * functions rather than the seam's HIP-typed mori_hip* entry points made
 * public: these take and return the library's types only (installed
 * headers define no HIP name), fail like every other call (0 or MORI_EHIP,
 * mori_last_error() naming the runtime call, its error and the backend's
 * detail), and keep the seam free to change.
 *
 * dst and src are any mix of host memory and device addresses this API
 * returned (the runtime tells which, as hipMemcpyDefault does).  The
 * synchronous forms order after the work of the default stream, as HIP's
 * legacy default stream does, and return once the bytes moved; the _async
 * forms are enqueued on `stream` (NULL: the default stream) and complete
 * in its order: mori_symm_synchronize(stream) waits for them. */
MORI_API int mori_symm_memcpy(void *dst, const void *src, size_t bytes);
MORI_API int mori_symm_memset(void *dst, int value, size_t bytes);
MORI_API int mori_symm_memcpy_async(void *dst, const void *src, size_t bytes, mori_stream stream);
MORI_API int mori_symm_memset_async(void *dst, int value, size_t bytes, mori_stream stream);
/* Waits until the work enqueued on stream (NULL: the default stream),
 * signals included, has completed. */
MORI_API int mori_symm_synchronize(mori_stream stream);

/* ---- windows ---- */

typedef struct mori_window mori_window;

/* References, for handles that outlive the allocation (torch's
 * `hdl = rendezvous(t); del t`): while a window holds one, free of its
 * block defers the teardown, and the window stays fully usable (pointer
 * tables, signals).  The memory goes at the last of {free, releases}.  The
 * rendezvous cache holds no reference of its own.  release without a
 * matching retain, and any call on a window after it was torn down, fail
 * with MORI_ESTATE (closing is a state, never undefined). */
MORI_API int mori_window_retain(mori_window *w);
MORI_API int mori_window_release(mori_window *w);

/* The longest group name: every store key of a rendezvous holds the name
 * and fits MORI_STORE_KEY_MAX bytes, which every store takes (a key cut
 * short would alias another rank's).  A longer one is refused with
 * MORI_ERANGE before anything is done. */
#define MORI_SYMM_GROUP_MAX 403

/* Collective over group (rank/world of this process in it; store shared by
 * the group; at most MORI_SYMM_GROUP_MAX bytes).  ptr may be interior to a
 * block; *offset receives its offset.  A repeated call for the same
 * (block, group) is a table lookup. */
MORI_API int mori_symm_rendezvous(void *ptr, const char *group, int rank, int world_size,
                         mori_store *store, mori_window **out, size_t *offset);
/* For a rank that will not make the group's next rendezvous (its
 * allocation failed, say): takes that rendezvous's place in the group's
 * sequence and tells the group why, so that its peers' rendezvous fail now
 * rather than at their timeout.  Waits only as long as the group's
 * incarnation needs (docs/security.md), at most the rendezvous timeout. */
MORI_API int mori_symm_rendezvous_abort(const char *group, int rank, int world_size, mori_store *store,
                               const char *why);

/* Heals w after the death of its rank dead_rank: collective over the
 * survivors, each calling it on its window, and a replacement process
 * started as dead_rank, which makes the group's rendezvous as any rank
 * does with MORI_SYMM_REPLACEMENT=1 (or mori_symm_set_replacement(1))
 * set.  The survivor keeps its span at the same address, its own memory
 * and its mappings of the live ranks: buffer_ptrs, the device tables and
 * graphs captured on w stay valid; the dead rank's slot maps the
 * replacement's memory, and w's signals start over on every rank.  Only a
 * dead rank is replaced: its process, as its request named it, must be
 * gone from this host (MORI_ESTATE otherwise, and nothing changes; the
 * fd path only, MORI_ENOTSUP on the fabric path), and every other rank's
 * part must come from the process it had.  A heal that fails leaves w
 * failed for good (MORI_ESTATE on every later signal call and heal),
 * never half healed; its error names the step, the call and the rank.
 * No other call may run on w meanwhile.  docs/recovery.md. */
MORI_API int mori_window_heal(mori_window *w, int dead_rank, mori_store *store);
/* 1: this process replaces a dead rank (see mori_window_heal); 0: it does
 * not; overrides MORI_SYMM_REPLACEMENT. */
MORI_API void mori_symm_set_replacement(int on);

MORI_API int mori_window_rank(const mori_window *w);
MORI_API int mori_window_world_size(const mori_window *w);
MORI_API int mori_window_device(const mori_window *w);
MORI_API size_t mori_window_buffer_size(const mori_window *w);
MORI_API size_t mori_window_signal_pad_size(const mori_window *w);
MORI_API int mori_window_handle_type(const mori_window *w);
MORI_API int mori_window_world_within_direct_access(const mori_window *w);
/* Accessors check the window first: on a window that was torn down they
 * return -1, 0 or NULL and mori_last_error() says why. */
/* Host arrays of world_size peer pointers (peer r's block base, r's pad):
 * the arrays are host memory, the pointers in them device addresses, for
 * the runtime's copies and stream operations. */
MORI_API void *const *mori_window_buffer_ptrs(const mori_window *w);
MORI_API void *const *mori_window_signal_pad_ptrs(const mori_window *w);
/* The same arrays in device memory, for kernels (the host reads them only
 * by a copy). */
MORI_API void *mori_window_buffer_ptrs_dev(const mori_window *w);
MORI_API void *mori_window_signal_pad_ptrs_dev(const mori_window *w);
/* The span, device address space: base and stride (slot r = base + r *
 * stride), for flat-form kernels.  The rendezvous maps every peer's slot;
 * the first call maps the own rank's (a second mapping of the block, which
 * buffer_ptrs never name), so it may fail: NULL, mori_last_error() naming
 * the call, the window unchanged and usable, and the next call tries
 * again.  Only on a window at rest (not while mori_window_heal runs on it,
 * nor after a heal broke it, unless an earlier call mapped it). */
MORI_API void *mori_window_span(const mori_window *w, size_t *stride);

/* Stream-ordered signals over the window's own slot of the block's private
 * signal area (torch's pad stays zero for torch's kernels; up to 8 windows
 * per block), enqueued on `stream` (NULL: the default stream) as stream
 * memory operations that wait on this rank's own memory only.
 *
 * put_signal(dst, ch) / wait_signal(src, ch) keep torch's semantics: a
 * signal is consumed by one wait, and a put waits until dst consumed the
 * previous one on that channel.  barrier(ch) returns when every rank of
 * the window reached barrier(ch); eager barriers and put/wait use separate
 * cells, so they may interleave on one channel.  Channels are bounded by
 * pad_size / 4 / world_size, as in torch.  Inside a stream capture (CUDA or
 * HIP graph) the same calls enqueue a form that a graph may replay any
 * number of times; every rank must capture a barrier if one does.
 *
 * timeout_ms bounds the GPU wait: 0 waits without bound (torch's meaning);
 * otherwise, if the enqueued waits have not completed timeout_ms after the
 * stream reached them, a watchdog thread releases them (so the stream, the
 * context and teardown go on), marks the window failed, and this call (if
 * it is still running) or the next signal call on the window fails with
 * MORI_ETIMEDOUT naming the operation, the channel and the peers that never
 * signalled; every later signal call on the window fails the same way.
 * Waits inside a capture are replayed by the runtime and not watched. */
MORI_API int mori_window_put_signal(mori_window *w, int dst_rank, int channel, mori_stream stream,
                           int timeout_ms);
MORI_API int mori_window_wait_signal(mori_window *w, int src_rank, int channel, mori_stream stream,
                            int timeout_ms);
MORI_API int mori_window_barrier(mori_window *w, int channel, mori_stream stream, int timeout_ms);
MORI_API int mori_window_max_channels(const mori_window *w);

/* Process-wide counts of the memory operations the signal calls enqueued,
 * for tests and the cost model: remote writes (through a peer's mapping),
 * local writes and waits (this rank's own cells), remote waits (polls of a
 * peer's memory: none by design), calls enqueued into a capture, calls
 * with a deadline and deadlines that fired. */
typedef struct mori_symm_signal_stats {
  long remote_writes, local_writes, local_waits, remote_waits;
  long captured, watched, expired;
  long calls; /* runtime calls that enqueued them (a batch is one) */
  long kernels; /* signal kernels launched (the kernel engine: one per call) */
} mori_symm_signal_stats;
MORI_API void mori_symm_signal_stats_get(mori_symm_signal_stats *out);

/* Tears down every window and block (the order of docs/teardown.md), freed
 * or not, referenced or not, after the calls in progress on them return.
 * Called from an atexit hook (registered at the first allocation). */
MORI_API int mori_symm_release_all(void);

/* Counts for tests: live blocks (in the table), live windows, rendezvous
 * cache hits, rendezvous run, and deferred blocks (freed, their teardown
 * waiting for window references or calls in progress). */
typedef struct mori_symm_stats {
  long blocks, windows, cache_hits, rendezvous, deferred;
} mori_symm_stats;
MORI_API void mori_symm_stats_get(mori_symm_stats *out);

#ifdef __cplusplus
}
#endif
#endif
