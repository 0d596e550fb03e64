/*
 * alloc.h - allocation and lifetime: the block table and its allocations
 * (block.c), the lifetimes of windows and blocks (life.c), the ledger's
 * release table and unwind (ledger.c), the machine driver (driver.c), a
 * block's teardown (teardown.c), the public copies (copy.c) and the arena
 * of the windows' device tables (arena.c).  A block is
 * one local VMM allocation driven by a BLOCK machine; a window is one
 * (block, group) rendezvous driven by a WINDOW machine, whose structure is
 * here because its life is: the rendezvous (rendezvous/) fills it, the
 * signals (signal/) use it.  One process-wide mutex (mori__lock) guards the
 * tables and every window's life, references and in-use count; it is never
 * held across a wait on the store, the channel or the GPU.
 */
#ifndef MORI_CORE_ALLOC_H
#define MORI_CORE_ALLOC_H

#include "../base/base.h"

/* ---- the ledger (ledger.c), the driver (driver.c), the teardown (teardown.c) ---- */

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
 * `until`, one of its kind's (a mori_bstate or a mori_wstate), firing each
 * row's event; t (may be NULL) receives each step's time.  A failed step
 * leaves m where it was, with whatever that step recorded (the state's
 * invariant plus a prefix of its row's work), for a later attempt or its
 * release; the message names the step. */
int mori__advance(mori_fsm *m, const mori__step steps[MORI_EV__COUNT], void *ctx,
                  int until, mori__step_times *t);
/* mori__advance, and on a failure: on_fail (may be NULL), then the
 * rollback through the release table. */
int mori__drive(mori_fsm *m, const mori__step steps[MORI_EV__COUNT], void *ctx,
                int until, int (*on_fail)(void *ctx, int rc), mori__step_times *t);
struct mori_block;
/* A claimed block's teardown, outside mori__lock: one hipDeviceSynchronize,
 * then the unwind of every window's ledger and of the block's.  The first
 * error; the tombstones are life.c's. */
int mori__teardown(struct mori_block *b);
/* Sets the release row of a kind whose entries a subsystem above alloc/
 * records (the rendezvous's channel, the signal state): called once, by
 * that subsystem, before its first entry of the kind.  retry: a failed
 * release is tried once more; quiet: its failure is only logged. */
void mori__ledger_set_release(mori_res kind, int (*release)(const mori_ledger_entry *), int retry,
                              int quiet);
/* Records an acquired resource (cannot fail for memory under mori__drive). */
int mori__ledger_add(mori_fsm *m, mori_res kind, uintptr_t value, size_t size, int aux);
/* The devices a process may use: the probe's cache and the exported fds'
 * counts are per device. */
#define MORI_MAX_DEVICES 256

/* Records a block's exported fd (aux: its device, size: its physical
 * bytes) and counts it open on that device.  Its release closes it, or
 * keeps it open as the device's warm export (mori_symm_keep_warm) when it
 * is the device's last open one, of a block of at most
 * MORI_SYMM_WARM_EXPORT_MAX bytes, and none is kept yet. */
int mori__ledger_add_export(mori_fsm *m, int fd, size_t size, int device);
/* Closes every kept export; how many are kept. */
void mori__exports_release_all(void);
long mori__exports_kept(void);
/* A freed block's ledger unwound: into the device's kept block
 * (ledger.c, "the kept block") when may_keep (its teardown met no
 * failure), the process keeps warm, the block is whole and of at most
 * MORI_SYMM_WARM_EXPORT_MAX physical bytes, and its device keeps none;
 * otherwise as mori__unwind(&b->fsm, 0), and a carried fd closed after. */
struct mori_block;
int mori__unwind_block(struct mori_block *b, int may_keep);
/* 1 and the kept block's handle, mapped base and exported fd (-1: none,
 * else carried by the block that takes it: see carried_fd) if its device
 * keeps one of size physical bytes and handle_type (out of the slot
 * then); 0. */
int mori__kept_block_take(int device, size_t size, int handle_type,
                          hipMemGenericAllocationHandle_t *handle, void **base, int *fd);
/* A block's carried fd given back (after its handle's release): the
 * rollback of an allocation that took a kept block. */
int mori__carried_fd_release(struct mori_block *b);
/* Every kept block back to the runtime: 0 or the first failure; and the
 * runtime resources they hold (3 each, 4 with an exported fd). */
int mori__kept_blocks_release_all(void);
long mori__kept_blocks(void);
/* Gives back one resource before its machine ends (the first rendezvous
 * waited for an allocation's zeroing): out of the ledger, released through
 * its row of the release table. */
int mori__ledger_drop(mori_fsm *m, mori_res kind, uintptr_t value);
/* The value of the entry of kind for rank aux. */
int mori__ledger_find(const mori_fsm *m, mori_res kind, int aux, uintptr_t *value);

/* ---- the arena (arena.c): the windows' device tables ---- */

/* n bytes of device memory on device (the current one), from a chunk the
 * arena keeps: 0, or an error naming the hipMalloc that made the chunk.
 * Not zeroed. */
int mori__arena_take(int device, size_t n, void **p);
/* p back to the arena; the chunk goes back to the runtime with its last
 * slot: hipSuccess, or hipFree's error for that chunk, after which giving
 * p back again tries hipFree again (the ledger's retry);
 * hipErrorInvalidValue for a p the arena did not hand out. */
hipError_t mori__arena_give(void *p);
/* Every empty chunk (those kept warm) back to the runtime: hipSuccess or
 * the first hipFree's error; and how many empty chunks there are. */
hipError_t mori__arena_trim(void);
long mori__arena_kept(void);

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
  /* Taken from the device's kept block (ledger.c): that block's exported
   * fd, outside the ledger until the first rendezvous sends it (the
   * EXPORT step records it, exporting nothing); -1 otherwise. */
  int carried_fd;
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
/* Enqueues the zeroing of [p, p + n) of block b on stream (a fill, or
 * copies where fills fail on the block's memory: quirk memset-fabric). */
int mori__block_zero(const mori_block *b, void *p, size_t n, hipStream_t stream);
/* Why the device's handle type is what it is (the probe's findings). */
const char *mori__probe_why(int device);
/* Covering lookup: the block whose [base, base + buffer_size) holds ptr. */
mori_block *mori__block_find(const void *ptr);
long mori__blocks_live(void);
/* Under mori__lock, for free (life.c): the block whose base is ptr, out of
 * the table; NULL if ptr is no block's base. */
mori_block *mori__block_take(const void *ptr);
/* Under mori__lock, for release_all (life.c): the whole table, handed over
 * (the caller frees the array), n blocks; the table is left empty. */
mori_block **mori__blocks_take_all(size_t *n);

/* Guards the block table, the deferred list, the window registry and every
 * window's life/refs/busy; broadcast on mori__cond whenever a window stops
 * being OPENING or busy. */
extern pthread_mutex_t mori__lock;
extern pthread_cond_t mori__cond;

/* ---- windows (filled by rendezvous/rendezvous.c) ---- */

struct mori_window {
  struct mori_window *next; /* in block->windows */
  mori_life life;           /* the window life (fsm.h), set by mori__window_set_life only */
  int refs;                 /* mori_window_retain - mori_window_release */
  int busy;                 /* calls in progress (temporary references) */
  mori_block *block;
  char *group;
  uint64_t seq;             /* the group's rendezvous sequence number */
  char incarnation[65];     /* the group's, namespacing every key (rendezvous/group_store.c) */
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
  uint32_t *pids;           /* world_size: each rank's process, as its request named it */
  int heal_gen;             /* heals run on this window (its keys' generation) */
  int heal_failed;          /* a heal failed: the window is failed for good */
  int healing;              /* 1 + the rank a heal in progress replaces; 0: none */
  uint32_t heal_pid;        /* the process replacing it, once its request is in; 0: not yet */
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
/* Free and release_all take mori__lock themselves and let it go before
 * they return; no caller hands them the lock.  mori_symm_free is defined
 * here: a freed block waits on the deferred list until nothing holds it,
 * and if nothing does now, its teardown runs in the call.
 * mori__blocks_release_all is release_all's first part: every block leaves
 * the table and is torn down, references or not, after the calls in
 * progress on it (process.c goes on with what the process holds beyond
 * any block).  The first error. */
int mori__blocks_release_all(void);
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

#endif
