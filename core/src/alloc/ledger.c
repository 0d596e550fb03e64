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
static pthread_mutex_t export_lock = PTHREAD_MUTEX_INITIALIZER;
static int open_exports[MORI_MAX_DEVICES];
static int kept_export[MORI_MAX_DEVICES]; /* the kept fd + 1; 0: none */

int mori__ledger_add_export(mori_fsm *m, int fd, size_t size, int device) {
  MORI_GUARD(mori__ledger_add(m, MORI_RES_EXPORTED_FD, (uintptr_t)fd, size, device));
  if (device >= 0 && device < MORI_MAX_DEVICES) {
    pthread_mutex_lock(&export_lock);
    open_exports[device]++;
    pthread_mutex_unlock(&export_lock);
  }
  return 0;
}

static int export_keep(int fd, int device, size_t size) {
  int keep = 0;
  if (device < 0 || device >= MORI_MAX_DEVICES) return 0;
  pthread_mutex_lock(&export_lock);
  if (open_exports[device] > 0) open_exports[device]--;
  if (open_exports[device] == 0 && kept_export[device] == 0 && size <= MORI_SYMM_WARM_EXPORT_MAX &&
      fd >= 0 && mori_symm_keep_warm()) {
    kept_export[device] = fd + 1;
    keep = 1;
  }
  pthread_mutex_unlock(&export_lock);
  return keep;
}

void mori__exports_release_all(void) {
  for (int d = 0; d < MORI_MAX_DEVICES; d++) {
    pthread_mutex_lock(&export_lock);
    int fd = kept_export[d] - 1;
    kept_export[d] = 0;
    pthread_mutex_unlock(&export_lock);
    if (fd >= 0) (void)mori_close(fd);
  }
}

long mori__exports_kept(void) {
  long n = 0;
  pthread_mutex_lock(&export_lock);
  for (int d = 0; d < MORI_MAX_DEVICES; d++) n += kept_export[d] != 0;
  pthread_mutex_unlock(&export_lock);
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

__attribute__((constructor)) static void ledgers_use_the_seam(void) {
  mori_fsm_set_allocator(ledger_alloc);
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
