/*
 * internal.h - what the core's files share: settings, logging, the block
 * table and the window structure.  A block is one local VMM allocation
 * driven by a BLOCK machine; a window is one (block, group) rendezvous
 * driven by a WINDOW machine.  One process-wide mutex (mori__lock) guards
 * the tables and every window's life, references and in-use count; it is
 * never held across a wait on the store, the channel or the GPU.
 */
#ifndef MORI_CORE_INTERNAL_H
#define MORI_CORE_INTERNAL_H

#include <pthread.h>

#include "mori/error_internal.h"
#include "mori/fsm.h"
#include "mori/symm.h"
#include "mori/wire.h"

/* The public handle-type names are HIP's values (symm.h). */
_Static_assert((int)MORI_HANDLE_TYPE_POSIX_FD == (int)hipMemHandleTypePosixFileDescriptor &&
                   (int)MORI_HANDLE_TYPE_FABRIC == (int)hipMemHandleTypeFabric,
               "MORI_HANDLE_TYPE_* are hipMemAllocationHandleType's values");

/* ---- settings and logging (config.c) ---- */

enum { MORI_LOG_WARN = 1, MORI_LOG_INFO = 2, MORI_LOG_TRACE = 3 };
int mori__log_level(void);
void mori__log(int level, int rank, long window, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define MORI_LOG(level, rank, window, ...)                                           \
  do {                                                                               \
    if (mori__log_level() >= (level)) mori__log((level), (rank), (window), __VA_ARGS__); \
  } while (0)
/* Lines about a block, which has a device but no rank or window yet. */
void mori__log_device(int level, int device, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define MORI_LOG_DEVICE(level, device, ...)                                           \
  do {                                                                                \
    if (mori__log_level() >= (level)) mori__log_device((level), (device), __VA_ARGS__); \
  } while (0)

/* An illegal transition or a broken state of a lifecycle: the message on
 * stderr, then abort(). */
_Noreturn void mori__bug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

size_t mori__round_up(size_t n, size_t to);
/* 16 bytes of the host's boot id, so ranks can tell whether they share a
 * host; 0, or MORI_EIO naming the call that failed. */
int mori__host_id(uint8_t out[MORI_WIRE_HOST_ID_SIZE]);
/* MORI_EINVAL naming MORI_SYMM_TIMEOUT_MS, its value and what is accepted
 * if the strict reader refuses it (config.c); 0 if unset or good. */
int mori__timeout_env_check(void);
/* MORI_EINVAL naming the first of the library's 0/1 switches
 * (MORI_SYMM_TEARDOWN, _ALLOW_OVERLAPPING_DEVICES, _MEMOP_BATCH) set to
 * anything else (config.c); 0 otherwise. */
int mori__env_switches_check(void);

/* ---- what is trusted on disk (trust.c) ---- */

#include <sys/stat.h>

#include "mori/trust.h" /* mori_trusted_dir_open: the walk, public for the tools */

/* A directory owned by our euid (or root, if shared), not writable by
 * group or others (unless shared, root-owned and sticky). */
int mori__dir_check(const struct stat *st, const char *path, int shared, const char *who);
/* "regular file", "FIFO", "directory", ... */
const char *mori__file_type(mode_t mode);

/* ---- resources (resource.c) ---- */

/* The ledger's release callback: one row per resource kind. */
int mori__release_entry(void *ctx, const mori_ledger_entry *e);
/* RELEASE (fail = 0) or FAIL (fail = 1) through mori__release_entry.  A
 * release reports its first failure with that failure's message; a
 * rollback keeps the message of the error that caused it, adding the first
 * rollback failure, if any. */
int mori__unwind(mori_fsm *m, int fail);
/* A step of a machine: one forward row's work (the row's acquisitions
 * recorded with mori__ledger_add). */
typedef int (*mori__step)(void *ctx);
/* How long each step of one drive took, in the order they ran (filled by
 * mori__drive and mori__advance, for the INFO lines that explain where an
 * allocation's or a rendezvous's time went). */
typedef struct mori__step_times {
  int n;
  struct {
    mori_wevent event;
    double us;
  } step[MORI_EV__COUNT];
} mori__step_times;
/* "CREATE 12 RESERVE 2 ..." (microseconds), the steps in the order they ran. */
void mori__step_times_format(const mori__step_times *t, char *out, size_t n);
/* Runs m's steps (indexed by event) from its state until it reaches state
 * `until`, firing each row's event; t (may be NULL) receives each step's
 * time.  A failed step leaves m where it was, with whatever that step
 * recorded (the state's invariant plus a prefix of its row's work), for a
 * later attempt or its release; the message names the step. */
int mori__advance(mori_fsm *m, const mori__step steps[MORI_EV__COUNT], void *ctx,
                  mori_wstate until, mori__step_times *t);
/* mori__advance, and on a failure: on_fail (may be NULL), then the
 * rollback through the release table. */
int mori__drive(mori_fsm *m, const mori__step steps[MORI_EV__COUNT], void *ctx,
                mori_wstate until, int (*on_fail)(void *ctx, int rc), mori__step_times *t);
struct mori_block;
/* A claimed block's teardown, outside mori__lock: one hipDeviceSynchronize,
 * then the unwind of every window's ledger and of the block's.  The first
 * error; the tombstones are life.c's. */
int mori__teardown(struct mori_block *b);
/* Records an acquired resource (cannot fail for memory under mori__drive). */
int mori__ledger_add(mori_fsm *m, mori_res kind, uintptr_t value, size_t size, int aux);
/* Gives back one resource before its machine ends (the first rendezvous
 * waited for an allocation's zeroing): out of the ledger, released through
 * its row of the release table. */
int mori__ledger_drop(mori_fsm *m, mori_res kind, uintptr_t value);
/* The value of the entry of kind for rank aux. */
int mori__ledger_find(const mori_fsm *m, mori_res kind, int aux, uintptr_t *value);
/* ---- OS calls (os.c) ---- */

/* mori_openat, with EINTR retried. */
int mori__openat(int dirfd, const char *path, int flags, mode_t mode);
/* mori_unlinkat of a file of ours, tried once more if the first fails (a
 * transient failure must not leave it behind); a file already gone counts
 * as removed.  0, or -1 with errno. */
int mori__unlinkat(int dirfd, const char *path, int flags);

/* Time, through the seam like every other OS call, so that a sweep fails
 * it and a test can advance the clock a deadline reads.  Each is 0, or
 * MORI_EIO with a message that names the call, prefixed with what needed
 * it: a wait that cannot read the clock cannot keep its deadline, a nonce
 * the kernel could not draw is no nonce (no weaker fallback is taken). */
/* The monotonic clock in microseconds. */
int mori__clock_us(double *us, const char *what);
/* Sleeps up to us microseconds; an interrupted sleep is a short one. */
int mori__nap_us(double us, const char *what);
/* 64 bits from the kernel's random source (getrandom; EINTR retried). */
int mori__random64(uint64_t *out, const char *what);
/* For a log line's figures only (read at INFO and above): the monotonic
 * clock in microseconds, or NAN where it could not be read, which the line
 * then shows; nothing else depends on it. */
double mori__log_clock_us(void);

/* Runs a shim call and turns a failure into MORI_EHIP naming it. */
#define MORI_HIP(call, expr)                                                         \
  do {                                                                               \
    hipError_t mori__e = (expr);                                                     \
    if (mori__e != hipSuccess) return mori__hip_error(call, mori__e);                \
  } while (0)

/* ---- blocks (block.c) ---- */

typedef struct mori_block {
  void *base;               /* local mapping == the pointer handed to torch */
  size_t alloc_size;        /* physical bytes (granularity multiple) == stride */
  size_t granularity;       /* the runtime's recommended granularity */
  size_t buffer_size;       /* what the user asked for */
  size_t signal_pad_offset; /* torch pad here; private counters after it */
  size_t signal_pad_size;
  int device;
  int handle_type;
  hipMemGenericAllocationHandle_t handle;
  int exported_fd;          /* POSIX fd path; -1 otherwise */
  hipMemFabricHandle_t fabric;
  /* An allocation on a stream: recorded on the caller's stream after the
   * buffer's zeroing, waited for by the block's first rendezvous (no
   * peer's write may land before the zeroing does), destroyed then or by
   * the teardown (the ledger's ZERO_EVENT).  NULL otherwise. */
  hipEvent_t zeroed;
  mori_fsm fsm;
  struct mori_window *windows; /* list of windows on this block */
  uint32_t signal_slots_used;   /* bit s: private signal slot s taken by a window */
  uint32_t signal_slots_dirty;  /* bit s: slot s was used and must be zeroed before reuse */
  /* Freed by its owner but still held by a window reference or a call in
   * progress: out of the table, on the deferred list until the last lets go. */
  int freed;
  struct mori_block *next_deferred;
  /* One rendezvous runs on a block at a time (the signal slot it takes
   * depends on the slots the block's other windows hold): the window being
   * set up, outside mori__lock, and the threads waiting for it. */
  struct mori_window *opening;
  int waiters;
  /* The last rendezvous of this block that failed, for the threads that
   * waited for it in the same group. */
  long failed_id;
  int failed_rc;
  char failure[512];
} mori_block;

/* The block's shareable handle (fd or fabric blob), exported once, by its
 * first rendezvous; the block stays ALLOCATED if that fails.  Only by the
 * thread that holds the block's rendezvous (block->opening). */
int mori__block_export(mori_block *b);
/* Waits for the buffer's zeroing that an allocation on a stream left on
 * the caller's stream (nothing to wait for otherwise), then gives its event
 * (the ledger's ZERO_EVENT) back.  Only by the thread that holds the
 * block's rendezvous, before the "mapped" barrier lets a peer in; a
 * teardown gives back an event never waited for. */
int mori__block_wait_zeroed(mori_block *b);
/* Why the device's handle type is what it is (the probe's findings). */
const char *mori__probe_why(int device);
/* Covering lookup: the block whose [base, base + buffer_size) holds ptr. */
mori_block *mori__block_find(const void *ptr);
long mori__blocks_live(void);

/* Guards the block table, the deferred list, the window registry and every
 * window's life/refs/busy; broadcast on mori__cond whenever a window stops
 * being OPENING or busy. */
extern pthread_mutex_t mori__lock;
extern pthread_cond_t mori__cond;

/* ---- windows (window.c) ---- */

struct mori_window {
  struct mori_window *next; /* in block->windows */
  mori_life life;           /* the window life (fsm.h), set by mori__window_set_life only */
  int refs;                 /* mori_window_retain - mori_window_release */
  int busy;                 /* calls in progress (temporary references) */
  mori_block *block;
  char *group;
  uint64_t seq;             /* the group's rendezvous sequence number */
  char incarnation[65];     /* the group's, namespacing every key (rendezvous_store.c) */
  int incarnation_tried;    /* its agreement ran here (and failed, if incarnation is "") */
  long id;                  /* process-unique, for log lines */
  int rank, world_size;
  int handle_type, direct_access;
  int shared_device;        /* a peer uses this rank's device (signal.c's engine choice) */
  mori_fsm fsm;
  void *span;
  size_t stride;
  void **buffer_ptrs, **pad_ptrs; /* host tables: 2 * world_size, pad_ptrs the second half */
  void *buffer_ptrs_dev, *pad_ptrs_dev; /* the same on the device: one allocation */
  int max_channels;
  int signal_slot;          /* this window's private signal slot on the block */
  struct mori__signals *signals; /* signal.c's state: barrier counts, failure */
};

mori_window *mori__window_find(mori_block *b, const char *group);

/* ---- lifetimes (life.c) ---- */

/* The one setter of a window's life, under mori__lock: fires ev (fsm.h's
 * window life table) and checks what the new state implies (references,
 * calls in progress, the block's list, the window machine); an illegal
 * transition or a broken state is a bug (mori__bug). */
void mori__window_set_life(mori_window *w, mori_life_event ev);

/* Every window handed out stays registered until long after it closed, so
 * that a call on it is checked against the registry, never dereferenced
 * blindly.  Under mori__lock. */
int mori__window_register(mori_window *w);
void mori__window_unregister(mori_window *w);
/* A temporary reference for one call: 0 if w is OPEN (busy++), else a
 * named error.  leave drops it and, if w's block was freed meanwhile and
 * nothing holds it any more, tears the block down; it returns rc. */
int mori__window_enter(const mori_window *w, const char *op);
int mori__window_leave(const mori_window *w, int rc);
/* free(): called under mori__lock, which it releases, once the caller took
 * b out of the table.  The block waits on the deferred list until nothing
 * holds it; if nothing does now, its teardown runs here.  0 or the
 * teardown's first error. */
int mori__block_free(mori_block *b);
/* release_all(): called under mori__lock, which it releases, with every
 * block the table held (the caller emptied it).  Tears down every deferred
 * block, references or not, after waiting for the calls in progress on
 * them.  The first error. */
int mori__release_all(mori_block **all, size_t n);
/* Under mori__lock: if nothing holds b (no reference, no call in progress,
 * no rendezvous running), claims its teardown (its windows become CLOSING)
 * and returns 1; the caller then runs mori__block_teardown_quietly after
 * unlocking. */
int mori__block_claim_if_idle(mori_block *b);
/* Outside mori__lock, for a block a call claimed: its teardown (the unwind
 * of every ledger, then the tombstones), whose error goes to the log; the
 * call's own message stays. */
void mori__block_teardown_quietly(mori_block *b);
/* Whether base is a freed block still waiting for its teardown. */
int mori__block_freed(const void *base);
/* Under mori__lock: a window that never served (its rendezvous failed and
 * was rolled back, or never ran) is CLOSED and goes at once. */
void mori__window_abandon(mori_window *w);

/* Counters for mori_symm_stats, under mori__lock. */
extern struct mori__counters {
  long windows, cache_hits, rendezvous, deferred;
} mori__counters;

/* ---- signals (signal.c, watchdog.c) ---- */

/* Before a window's first use (rendezvous, ahead of the "mapped" store
 * barrier): zeroes its signal slot if an earlier window used it. */
int mori__signal_prepare(mori_window *w);
/* The release of a window's SIGNAL_STATE entry: the watchdog's entries for
 * the window retire, then its signal state goes. */
int mori__signal_release(const mori_ledger_entry *e);
/* Enqueues the zeroing of [p, p + n) of block b on stream (a fill, or
 * copies where fills fail on the block's memory: quirk memset-fabric). */
int mori__block_zero(const mori_block *b, void *p, size_t n, hipStream_t stream);
/* The device's private non-blocking stream (zeroing, watchdog releases). */
int mori__service_stream(int device, hipStream_t *out);
/* *captured = 1 while stream is being captured into a graph; an
 * invalidated capture is an error. */
int mori__stream_capturing(hipStream_t stream, int *captured);
/* Releases the private streams and events (release_all). */
void mori__signal_release_all(void);
/* Unloads the signal kernels' modules (release_all; kernel.c). */
void mori__kernel_release_all(void);

/* ---- the job's seal on store entries (seal.c) ---- */

/* key = value, sealed with the job's secret (MORI_SYMM_JOB_SECRET) if it
 * has one: an HMAC-SHA256 over key and value follows the value. */
int mori__sealed_set(mori_store *store, const char *key, const void *value, size_t len);
/* Checks the seal of a value read under key and strips it (*len shrinks):
 * MORI_EAUTH naming key and what ("rank 1's req") if the value is not
 * sealed with this job's secret, or sealed where this rank has none. */
int mori__unseal(const char *key, const void *value, size_t *len, const char *what);
/* store->get, then mori__unseal (the value freed and NULL if refused). */
int mori__sealed_get(mori_store *store, const char *key, void **value, size_t *len,
                     int timeout_ms, const char *what);
/* Once per process, at INFO: this rendezvous runs without a job secret. */
void mori__seal_note(int rank, long window);
/* 1 if this build can seal (it has libcrypto). */
int mori__seal_supported(void);

/* ---- the rendezvous's store entries (rendezvous_store.c) ---- */

/* MORI_ERANGE naming the limit if group is longer than
 * MORI_SYMM_GROUP_MAX: what every rendezvous entry point checks first. */
int mori__group_check(const char *group);
/* mori_symm/<group>/<incarnation>/<seq>/<what>/<rank>; MORI_ESTATE if the
 * group has no incarnation yet (mori__publish_request agrees on it),
 * MORI_ERANGE if it does not fit n bytes (never cut short). */
int mori__store_key(char *out, size_t n, const mori_window *w, const char *what, int rank);
/* Gets what/<r> for every rank r != self into vals/lens (malloc'd; free
 * with mori__free_vals); ends early with MORI_EPEER on a peer's abort, and
 * on a timeout names every rank still missing. */
int mori__gather(mori_window *w, mori_store *store, const char *what, void **vals,
                 size_t *lens, int timeout_ms);
void mori__free_vals(void **vals, int n);
/* Sets what/<self>, then gathers what/<r> of every other rank. */
int mori__store_barrier(mori_window *w, mori_store *store, const char *what, int timeout_ms);
/* After the rendezvous's last barrier: the keys it wrote leave the store
 * (best effort, where the store can remove). */
void mori__store_cleanup(mori_window *w, mori_store *store);
/* Tells the group this rank gave up, so peers stop waiting (best effort);
 * the error message keeps the cause first, and a failure to publish is
 * appended to it. */
void mori__publish_abort(mori_window *w, mori_store *store);
/* After a failure rc of this rank's rendezvous: MORI_EPEER with the peer's
 * reason if a peer gave up first and rc is what that can cause here (a
 * socket gone, an allocation released), else rc unchanged. */
int mori__peer_failed_first(mori_window *w, mori_store *store, int rc);
/* Publishes this rank's request; the group's first rendezvous in this
 * process agrees on its incarnation first (rank 0 leads, others join). */
int mori__publish_request(mori_window *w, mori_store *store, const mori_request *q);
/* Gathers and decodes every other rank's request into reqs. */
int mori__gather_requests(mori_window *w, mori_store *store, mori_request *reqs, int timeout_ms);
/* For a rank that will not take part in the group's rendezvous number
 * seq: agrees the incarnation as that rendezvous would (the leader keeps
 * answering joins until every member's request is in, or timeout_ms) and
 * publishes an abort saying why, so peers fail now, not at their timeout. */
int mori__abort_rendezvous(const char *group, uint64_t seq, int rank, int world_size,
                           mori_store *store, const char *why, int timeout_ms);
/* The fd channel's abort check: ctx is a struct mori__abort_ctx. */
struct mori__abort_ctx {
  mori_window *w;
  mori_store *store;
};
int mori__channel_abort_check(void *ctx);

#endif
