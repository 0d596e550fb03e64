/*
 * ledger.c - how each kind of ledger entry is given back (one row per
 * mori_res; the state machine decides the order, this table the call) and
 * the unwind through it: free, the last release, release_all and every
 * rollback give resources back through this one table.  The rows of the
 * kinds this subsystem does not own (a rendezvous's channel, a window's
 * signal state) are registered by the subsystem that records them
 * (mori__ledger_set_release), so nothing here calls above alloc/.
 */
#include "alloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int release_handle(const mori_ledger_entry *e) {
  MORI_HIP("hipMemRelease", mori_hipMemRelease((hipMemGenericAllocationHandle_t)e->value));
  return 0;
}

static int free_reservation(const mori_ledger_entry *e) {
  MORI_HIP("hipMemAddressFree", mori_hipMemAddressFree((void *)e->value, e->size));
  return 0;
}

static int unmap(const mori_ledger_entry *e) {
  MORI_HIP("hipMemUnmap", mori_hipMemUnmap((void *)e->value, e->size));
  return 0;
}

/* Linux closes the fd whatever close returns; EINTR says only that a flush
 * was interrupted, which an fd we never wrote through does not have. */
static int close_fd(const mori_ledger_entry *e) {
  if (mori_close((int)e->value) != 0 && errno != EINTR)
    return mori__error(MORI_EIO, "close(fd %d) failed", (int)e->value);
  return 0;
}


/* ---- the exported fds: how many are open per device, and the one kept ----
 *
 * A driver may hold per-process state for as long as any exported fd is
 * open and drop it with the last: then the next export builds it again,
 * and both that export and that last close cost ten times what they cost
 * beside another open exported fd (docs/performance.md, "Call by call",
 * has the figures).  A process that keeps warm keeps the last exported fd
 * of a device open when its block goes, if the block's memory is small
 * (the fd holds it), until mori_symm_release_all or the exit. */
/* guards these counts, the kept export and the kept blocks (below) */
static pthread_mutex_t warm_lock = PTHREAD_MUTEX_INITIALIZER;
static int open_exports[MORI_MAX_DEVICES];
static int kept_export[MORI_MAX_DEVICES]; /* the kept fd + 1; 0: none */

int mori__ledger_add_export(mori_fsm *m, int fd, size_t size, int device) {
  MORI_GUARD(mori__ledger_add(m, MORI_RES_EXPORTED_FD, (uintptr_t)fd, size, device));
  if (device >= 0 && device < MORI_MAX_DEVICES) {
    pthread_mutex_lock(&warm_lock);
    open_exports[device]++;
    pthread_mutex_unlock(&warm_lock);
  }
  return 0;
}

static int export_keep(int fd, int device, size_t size) {
  int keep = 0;
  if (device < 0 || device >= MORI_MAX_DEVICES) return 0;
  pthread_mutex_lock(&warm_lock);
  if (open_exports[device] > 0) open_exports[device]--;
  if (open_exports[device] == 0 && kept_export[device] == 0 && size <= MORI_SYMM_WARM_EXPORT_MAX &&
      fd >= 0 && mori_symm_keep_warm()) {
    kept_export[device] = fd + 1;
    keep = 1;
  }
  pthread_mutex_unlock(&warm_lock);
  return keep;
}

void mori__exports_release_all(void) {
  for (int d = 0; d < MORI_MAX_DEVICES; d++) {
    pthread_mutex_lock(&warm_lock);
    int fd = kept_export[d] - 1;
    kept_export[d] = 0;
    pthread_mutex_unlock(&warm_lock);
    if (fd >= 0) (void)mori_close(fd);
  }
}

long mori__exports_kept(void) {
  long n = 0;
  pthread_mutex_lock(&warm_lock);
  for (int d = 0; d < MORI_MAX_DEVICES; d++) n += kept_export[d] != 0;
  pthread_mutex_unlock(&warm_lock);
  return n;
}

/* ---- the kept block: at most one per device ----
 *
 * A process that keeps warm keeps the memory of a freed block of at most
 * MORI_SYMM_WARM_EXPORT_MAX physical bytes, mapped and accessible at its
 * address, when its device keeps none yet: the next allocation of that
 * device and physical size takes it (mori__kept_block_take) instead of
 * calling hipMemCreate, hipMemAddressReserve, hipMemMap and
 * hipMemSetAccess, and zeroes it as every allocation is zeroed; the free
 * that kept it called none of hipMemUnmap, hipMemAddressFree and
 * hipMemRelease.  Those four calls are most of an allocation's host time
 * and a third of a free's on a GPU (docs/performance.md, "A freed block
 * kept").  Its exported fd, if it has one, stays open with it and goes to
 * the block that takes it, whose first rendezvous sends it instead of
 * exporting again: on some ROCm releases the fd may not be closed before
 * the handle's final release (docs/quirks.md, export-fd-lifetime), and
 * the kept block's release closes it after that release.  Under
 * warm_lock; full: 0 none, 1 kept, 2 being filled by a teardown's
 * unwind. */
static struct {
  int full;
  hipMemGenericAllocationHandle_t handle;
  void *base;
  size_t size;
  int handle_type;
  int fd; /* its exported fd, still counted open (open_exports); -1: none */
} kept_blocks[MORI_MAX_DEVICES];

struct keep_ctx {
  mori__first_error first; /* first: mori__release_entry's ctx is this */
  int device;
  int got; /* 1: the handle, 2: the reservation */
};

/* The unwind's row for a kept block: its handle and its mapped
 * reservation go to the device's slot, everything else is given back. */
static int keep_entry(void *ctx, const mori_ledger_entry *e) {
  struct keep_ctx *k = ctx;
  switch (e->kind) {
    case MORI_RES_PHYS_HANDLE:
      kept_blocks[k->device].handle = (hipMemGenericAllocationHandle_t)e->value;
      k->got |= 1;
      return 0;
    case MORI_RES_LOCAL_RESERVATION:
      kept_blocks[k->device].base = (void *)e->value;
      kept_blocks[k->device].size = e->size;
      k->got |= 2;
      return 0;
    case MORI_RES_LOCAL_MAPPING:
      return 0; /* the reservation's, kept with it */
    case MORI_RES_EXPORTED_FD:
      kept_blocks[k->device].fd = (int)e->value;
      return 0;
    default:
      return mori__release_entry(&k->first, e);
  }
}

/* An exported fd outside any ledger (carried from a kept block, or a kept
 * block's own), given back through its row after its handle's release. */
static int release_kept_fd(int fd, size_t size, int device, mori__first_error *first) {
  if (fd < 0) return 0;
  mori_ledger_entry e = {MORI_RES_EXPORTED_FD, (uintptr_t)fd, size, device};
  return mori__release_entry(first, &e);
}

int mori__unwind_block(mori_block *b, int may_keep) {
  int d = b->device, keep = 0;
  int whole = b->fsm.state.block == MORI_BS_ALLOCATED || b->fsm.state.block == MORI_BS_EXPORTED;
  if (may_keep && whole && d >= 0 && d < MORI_MAX_DEVICES &&
      b->alloc_size <= MORI_SYMM_WARM_EXPORT_MAX && mori_symm_keep_warm()) {
    pthread_mutex_lock(&warm_lock);
    if (kept_blocks[d].full == 0) {
      kept_blocks[d].full = 2;
      keep = 1;
    }
    pthread_mutex_unlock(&warm_lock);
  }
  struct keep_ctx k = {.device = d};
  int carried = b->carried_fd;
  b->carried_fd = -1;
  if (!keep) {
    /* a fd carried from a kept block this one took and never sent:
     * closed after the handle's release, as the ledger closes its own */
    (void)mori__first_keep(&k.first, mori__unwind(&b->fsm, 0));
    (void)release_kept_fd(carried, b->alloc_size, d, &k.first);
    return mori__first_end(&k.first, 0);
  }
  kept_blocks[d].fd = carried; /* or the ledger's own exported fd, below */
  /* ALLOCATED and EXPORTED hold exactly one handle, reservation and
   * mapping, and release from either visits every entry (a failed
   * release is in k.first) */
  int from = b->fsm.state.id;
  (void)mori_fsm_release(&b->fsm, keep_entry, &k);
  if (k.got != 3)
    mori__bug("block %p: its unwind from %s kept %s", b->base,
              mori_fsm_state_name(from), k.got & 1 ? "no reservation" : "no handle");
  pthread_mutex_lock(&warm_lock);
  kept_blocks[d].full = 1;
  kept_blocks[d].handle_type = b->handle_type;
  pthread_mutex_unlock(&warm_lock);
  mori_fsm_destroy(&b->fsm); /* RELEASED, empty */
  return mori__first_end(&k.first, 0);
}

int mori__kept_block_take(int device, size_t size, int handle_type,
                          hipMemGenericAllocationHandle_t *handle, void **base, int *fd) {
  int taken = 0;
  if (device < 0 || device >= MORI_MAX_DEVICES) return 0;
  pthread_mutex_lock(&warm_lock);
  if (kept_blocks[device].full == 1 && kept_blocks[device].size == size &&
      kept_blocks[device].handle_type == handle_type) {
    *handle = kept_blocks[device].handle;
    *base = kept_blocks[device].base;
    *fd = kept_blocks[device].fd;
    kept_blocks[device].full = 0;
    taken = 1;
  }
  pthread_mutex_unlock(&warm_lock);
  return taken;
}

int mori__carried_fd_release(mori_block *b) {
  int fd = b->carried_fd;
  b->carried_fd = -1;
  mori__first_error first = {0};
  (void)release_kept_fd(fd, b->alloc_size, b->device, &first);
  return mori__first_end(&first, 0);
}

/* A kept block's memory goes as a block's does: unmap, address free,
 * release, each tried once more if refused (the ledger's retry), then its
 * exported fd. */
int mori__kept_blocks_release_all(void) {
  mori__first_error first = {0};
  for (int d = 0; d < MORI_MAX_DEVICES; d++) {
    pthread_mutex_lock(&warm_lock);
    int full = kept_blocks[d].full == 1, fd = kept_blocks[d].fd;
    size_t size = kept_blocks[d].size;
    mori_ledger_entry back[3] = {
        {MORI_RES_LOCAL_MAPPING, (uintptr_t)kept_blocks[d].base, size, 0},
        {MORI_RES_LOCAL_RESERVATION, (uintptr_t)kept_blocks[d].base, size, 0},
        {MORI_RES_PHYS_HANDLE, (uintptr_t)kept_blocks[d].handle, size, 0}};
    if (full) kept_blocks[d].full = 0;
    pthread_mutex_unlock(&warm_lock);
    if (!full) continue;
    for (int i = 0; i < 3; i++) (void)mori__release_entry(&first, &back[i]);
    (void)release_kept_fd(fd, size, d, &first);
  }
  return mori__first_end(&first, 0);
}

/* The runtime resources a kept block holds: its handle, its reservation,
 * its mapping and its exported fd if it has one (what mori_symm_warm
 * counts). */
long mori__kept_blocks(void) {
  long n = 0;
  pthread_mutex_lock(&warm_lock);
  for (int d = 0; d < MORI_MAX_DEVICES; d++)
    n += kept_blocks[d].full == 1 ? 3 + (kept_blocks[d].fd >= 0) : 0;
  pthread_mutex_unlock(&warm_lock);
  return n;
}

/* An exported fd is closed, unless it stays as the device's warm export
 * (export_keep above): the entry's aux is the device, its size the
 * block's physical bytes. */
static int close_exported_fd(const mori_ledger_entry *e) {
  if (export_keep((int)e->value, e->aux, e->size)) return 0;
  return close_fd(e);
}

/* The window's device tables, a slot of the arena (arena.c); the chunk's
 * hipFree, when it was the last slot, is what can fail. */
static int free_device(const mori_ledger_entry *e) {
  MORI_HIP("hipFree", mori__arena_give((void *)e->value));
  return 0;
}

/* The event after an allocation's zeroing on the caller's stream, never
 * waited for by a rendezvous (or waited for, and given back then). */
static int destroy_zero_event(const mori_ledger_entry *e) {
  mori_block *b = (mori_block *)e->value;
  hipError_t err = mori_hipEventDestroy(b->zeroed);
  b->zeroed = NULL;
  return err == hipSuccess ? 0 : mori__hip_error("hipEventDestroy", err);
}

/* The slot is free for the block's next window, which zeroes it first:
 * this window's phases are still in its cells. */
static int give_back_signal_slot(const mori_ledger_entry *e) {
  mori_window *w = (mori_window *)e->value;
  uint32_t bit = 1u << e->aux;
  w->block->signal_slots_used &= ~bit;
  w->block->signal_slots_dirty |= bit;
  w->signal_slot = -1;
  return 0;
}


/* How each kind is given back, whether a failed release is tried once
 * more at once (a runtime that fails a release transiently must not make
 * us leak what it held: the fault sweeps fail each release once; never a
 * close: Linux closes the fd whatever close returns, and the number may
 * already name another file), and whether its failure is only said: an
 * event whose destroy fails holds nothing a later call needs. */
static struct {
  int (*release)(const mori_ledger_entry *);
  int retry, quiet;
} release_row[MORI_RES__COUNT] = {
    [MORI_RES_PHYS_HANDLE] = {release_handle, 1, 0},
    [MORI_RES_LOCAL_RESERVATION] = {free_reservation, 1, 0},
    [MORI_RES_LOCAL_MAPPING] = {unmap, 1, 0},
    [MORI_RES_ZERO_EVENT] = {destroy_zero_event, 0, 1},
    [MORI_RES_EXPORTED_FD] = {close_exported_fd, 0, 0},
    [MORI_RES_BLOCK_REF] = {NULL, 0, 0}, /* borrowed: the block releases itself */
    [MORI_RES_SIGNAL_SLOT] = {give_back_signal_slot, 0, 0},
    [MORI_RES_RECEIVED_FD] = {close_fd, 0, 0},
    [MORI_RES_IMPORTED_HANDLE] = {release_handle, 1, 0},
    [MORI_RES_SPAN_RESERVATION] = {free_reservation, 1, 0},
    [MORI_RES_SLOT_MAPPING] = {unmap, 1, 0},
    [MORI_RES_OWN_SLOT_MAPPING] = {unmap, 1, 0},
    [MORI_RES_DEVICE_TABLE] = {free_device, 1, 0},
    /* MORI_RES_CHANNEL, MORI_RES_SIGNAL_STATE: registered by their owners */
};


void mori__ledger_set_release(mori_res kind, int (*release)(const mori_ledger_entry *), int retry,
                              int quiet) {
  if ((unsigned)kind >= MORI_RES__COUNT) mori__bug("ledger: release row for kind %d", (int)kind);
  release_row[kind].release = release;
  release_row[kind].retry = retry;
  release_row[kind].quiet = quiet;
}

int mori__release_entry(void *ctx, const mori_ledger_entry *e) {
  if ((unsigned)e->kind >= MORI_RES__COUNT || release_row[e->kind].release == NULL) return 0;
  double t0 = mori__log_level() >= MORI_LOG_TRACE ? mori__log_clock_us() : 0;
  int rc = release_row[e->kind].release(e);
  MORI_LOG(MORI_LOG_TRACE, -1, -1, "release %s 0x%lx size %zu aux %d: %.0f us%s",
           mori_res_name(e->kind), (unsigned long)e->value, e->size, e->aux,
           t0 > 0 ? mori__log_clock_us() - t0 : 0.0, rc ? " (failed)" : "");
  if (rc != 0 && release_row[e->kind].quiet) {
    MORI_LOG(MORI_LOG_WARN, -1, -1, "release %s: %s", mori_res_name(e->kind), mori_last_error());
    return 0;
  }
  /* an unwind's first failure (ctx); later ones must not overwrite it */
  if (ctx != NULL) (void)mori__first_keep(ctx, rc);
  /* The failure is reported either way; only the leak is avoided. */
  if (rc != 0 && release_row[e->kind].retry && release_row[e->kind].release(e) == 0)
    MORI_LOG(MORI_LOG_WARN, -1, -1, "release %s 0x%lx succeeded when tried again",
             mori_res_name(e->kind), (unsigned long)e->value);
  return rc;
}

int mori__unwind(mori_fsm *m, int fail) {
  mori__first_error first = {0}, cause;
  (void)mori__first_set(&cause, MORI_OK); /* a rollback's: the message now */
  int rc = fail ? mori_fsm_fail(m, mori__release_entry, &first)
                : mori_fsm_release(m, mori__release_entry, &first);
  /* unwound: the ledger's own memory goes too (a failed unwind keeps it) */
  if (m->len == 0 && (m->state.id == MORI_FSM_RELEASED || m->state.id == MORI_FSM_FAILED))
    mori_fsm_destroy(m);
  if (fail) {
    /* The error that caused the rollback is the one to report. */
    (void)mori__first_end(&cause, MORI_OK);
    if (first.rc != 0) mori__error_suffix(" (rollback also failed: %s)", first.message);
    return first.rc;
  }
  if (first.rc == 0 && rc != 0) return mori__error(MORI_ESTATE, "release: %s", m->why);
  return mori__first_end(&first, 0);
}

/* The ledgers' memory comes through the allocation seam like every other
 * host allocation of the core, so that the fault shim can fail it. */
static void *ledger_alloc(void *ptr, size_t size) {
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  return mori_realloc(ptr, size);
}

/* A forked child has none of the parent's runtime memory (arena.c and
 * base/device.c start it from nothing too): it must not take the parent's
 * kept block, whose memory the parent may hand out again. */
static void atfork_child(void) {
  pthread_mutex_init(&warm_lock, NULL);
  memset(kept_blocks, 0, sizeof kept_blocks);
}

__attribute__((constructor)) static void ledgers_use_the_seam(void) {
  mori_fsm_set_allocator(ledger_alloc);
  pthread_atfork(NULL, NULL, atfork_child);
}

int mori__ledger_add(mori_fsm *m, mori_res kind, uintptr_t value, size_t size, int aux) {
  /* The driver reserved the ledger's room before the first step, so only
   * a step recording what its row does not acquire should get here. */
  int rc = mori_fsm_push(m, kind, value, size, aux);
  if (rc == 0) return 0;
  return mori__error(rc == MORI_FSM_ENOMEM ? MORI_ENOMEM : MORI_ESTATE, "ledger: %s", m->why);
}

int mori__ledger_drop(mori_fsm *m, mori_res kind, uintptr_t value) {
  for (size_t i = m->len; i-- > 0;) {
    mori_ledger_entry e = m->ledger[i];
    if (e.kind != kind || e.value != value) continue;
    if (mori_fsm_forget(m, kind, value) != 0) break;
    return mori__release_entry(NULL, &e);
  }
  return mori__error(MORI_ESTATE, "ledger: no %s 0x%lx to give back", mori_res_name(kind),
                     (unsigned long)value);
}

int mori__ledger_find(const mori_fsm *m, mori_res kind, int aux, uintptr_t *value) {
  for (size_t i = 0; i < m->len; i++)
    if (m->ledger[i].kind == kind && m->ledger[i].aux == aux) {
      *value = m->ledger[i].value;
      return 0;
    }
  return mori__error(MORI_ESTATE, "ledger: no %s for rank %d", mori_res_name(kind), aux);
}
