/*
 * resource.c - how each kind of ledger entry is given back (one row per
 * mori_res; the state machine decides the order, this table the call), the
 * driver that walks a machine through its steps, and a block's teardown:
 * free, the last release, release_all and every rollback give resources
 * back through this one unwind.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>

#include "mori/channel.h"

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

static int close_channel(const mori_ledger_entry *e) {
  mori_channel_close((mori_channel *)e->value);
  return 0;
}

static int free_device(const mori_ledger_entry *e) {
  MORI_HIP("hipFree", mori_hipFree((void *)e->value));
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
static const struct {
  int (*release)(const mori_ledger_entry *);
  int retry, quiet;
} release_row[MORI_RES__COUNT] = {
    [MORI_RES_PHYS_HANDLE] = {release_handle, 1, 0},
    [MORI_RES_LOCAL_RESERVATION] = {free_reservation, 1, 0},
    [MORI_RES_LOCAL_MAPPING] = {unmap, 1, 0},
    [MORI_RES_ZERO_EVENT] = {destroy_zero_event, 0, 1},
    [MORI_RES_EXPORTED_FD] = {close_fd, 0, 0},
    [MORI_RES_BLOCK_REF] = {NULL, 0, 0}, /* borrowed: the block releases itself */
    [MORI_RES_CHANNEL] = {close_channel, 0, 0},
    [MORI_RES_SIGNAL_SLOT] = {give_back_signal_slot, 0, 0},
    [MORI_RES_RECEIVED_FD] = {close_fd, 0, 0},
    [MORI_RES_IMPORTED_HANDLE] = {release_handle, 1, 0},
    [MORI_RES_SPAN_RESERVATION] = {free_reservation, 1, 0},
    [MORI_RES_SLOT_MAPPING] = {unmap, 1, 0},
    [MORI_RES_DEVICE_TABLE] = {free_device, 1, 0},
    [MORI_RES_SIGNAL_STATE] = {mori__signal_release, 0, 0},
};

/* The first failure of an unwind: later failures must not overwrite its
 * message, since it names the call that went wrong first. */
struct unwind_first {
  int rc;
  char message[1024];
};

int mori__release_entry(void *ctx, const mori_ledger_entry *e) {
  if ((unsigned)e->kind >= MORI_RES__COUNT || release_row[e->kind].release == NULL) return 0;
  MORI_LOG(MORI_LOG_TRACE, -1, -1, "release %s 0x%lx size %zu aux %d", mori_res_name(e->kind),
           (unsigned long)e->value, e->size, e->aux);
  int rc = release_row[e->kind].release(e);
  if (rc != 0 && release_row[e->kind].quiet) {
    MORI_LOG(MORI_LOG_WARN, -1, -1, "release %s: %s", mori_res_name(e->kind), mori_last_error());
    return 0;
  }
  struct unwind_first *first = ctx;
  if (rc != 0 && first != NULL && first->rc == 0) {
    first->rc = rc;
    snprintf(first->message, sizeof first->message, "%s", mori_last_error());
  }
  /* The failure is reported either way; only the leak is avoided. */
  if (rc != 0 && release_row[e->kind].retry && release_row[e->kind].release(e) == 0)
    MORI_LOG(MORI_LOG_WARN, -1, -1, "release %s 0x%lx succeeded when tried again",
             mori_res_name(e->kind), (unsigned long)e->value);
  return rc;
}

int mori__unwind(mori_fsm *m, int fail) {
  struct unwind_first first = {0, ""};
  char original[1024];
  snprintf(original, sizeof original, "%s", mori_last_error());
  int rc = fail ? mori_fsm_fail(m, mori__release_entry, &first)
                : mori_fsm_release(m, mori__release_entry, &first);
  /* unwound: the ledger's own memory goes too (a failed unwind keeps it) */
  if (m->len == 0 && (m->state == MORI_WS_RELEASED || m->state == MORI_WS_FAILED))
    mori_fsm_destroy(m);
  if (fail) {
    /* The error that caused the rollback is the one to report. */
    if (first.rc != 0)
      mori__error(first.rc, "%s (rollback also failed: %s)", original, first.message);
    else
      mori__error(MORI_OK, "%s", original);
    return first.rc;
  }
  if (first.rc != 0) return mori__error(first.rc, "%s", first.message);
  if (rc != 0) return mori__error(MORI_ESTATE, "release: %s", m->why);
  return 0;
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

/* s2n's handshake loop: the table says which step leaves the current
 * state; the driver runs it and fires its event, which checks the new
 * state's invariants.  The ledger's room is reserved first, so a step's
 * acquisition can always be recorded: an allocation failure can only
 * come before anything was acquired, or from a step, never between a
 * step's acquisition and its record. */
int mori__advance(mori_fsm *m, const mori__step steps[MORI_EV__COUNT], void *ctx,
                  mori_wstate until, mori__step_times *t) {
  int rc = 0, ev = -1;
  if (t != NULL) t->n = 0;
  if (mori_fsm_reserve(m, mori_fsm_capacity(m)) != 0) return mori__nomem("ledger: %s", m->why);
  while (rc == 0 && m->state != until && (ev = mori_fsm_forward(m->kind, m->state)) >= 0) {
    const char *name = mori_wevent_name((mori_wevent)ev);
    MORI_LOG(MORI_LOG_TRACE, m->kind == MORI_FSM_WINDOW ? m->rank : -1, -1, "step %s from %s",
             name, mori_wstate_name(m->state));
    double t0 = t != NULL ? mori__log_clock_us() : 0;
    rc = steps[ev] ? steps[ev](ctx) : mori__error(MORI_ESTATE, "no step for %s", name);
    if (t != NULL && t->n < MORI_EV__COUNT) {
      t->step[t->n].event = (mori_wevent)ev;
      t->step[t->n++].us = mori__log_clock_us() - t0;
    }
    if (rc == 0 && mori_fsm_fire(m, (mori_wevent)ev) != 0)
      rc = mori__error(MORI_ESTATE, "%s", m->why);
    if (rc != 0) mori__error_prefix("step %s: ", name);
  }
  return rc;
}

int mori__drive(mori_fsm *m, const mori__step steps[MORI_EV__COUNT], void *ctx,
                mori_wstate until, int (*on_fail)(void *ctx, int rc), mori__step_times *t) {
  int rc = mori__advance(m, steps, ctx, until, t);
  if (rc != 0) {
    if (on_fail != NULL) rc = on_fail(ctx, rc);
    (void)mori__unwind(m, 1);
  }
  return rc;
}

void mori__step_times_format(const mori__step_times *t, char *out, size_t n) {
  size_t len = 0;
  out[0] = '\0';
  for (int i = 0; i < t->n && len < n; i++)
    len += (size_t)snprintf(out + len, n - len, "%s%s %.0f", i ? " " : "",
                            mori_wevent_name(t->step[i].event), t->step[i].us);
}

/* ---- a block's teardown ---- */

/* A window's ledger, unwound (the device was synchronized). */
static int window_unwind(mori_window *w) {
  int rc = mori__unwind(&w->fsm, 0);
  if (rc != 0) mori__error_prefix("rank %d window %ld teardown: ", w->rank, w->id);
  MORI_LOG(MORI_LOG_INFO, w->rank, w->id, "released group %s%s", w->group, rc ? " (errors)" : "");
  return rc;
}

int mori__teardown(mori_block *b) {
  int first = 0;
  char message[1024] = "";
  /* the phases' times only for the INFO line at the end */
  int timed = mori__log_level() >= MORI_LOG_INFO;
  double t0 = timed ? mori__log_clock_us() : 0;
  (void)mori_hipSetDevice(b->device);
  /* Work queued on the block or its windows (its zeroing on the caller's
   * stream, the caller's kernels, signals into the slots) must be done
   * before the memory goes: an unmap under a pending memset is an illegal
   * address that poisons the context.  One synchronize serves the block
   * and every window on it, and lets the watchdog's releases finish. */
  hipError_t e = mori_hipDeviceSynchronize();
  if (e != hipSuccess) {
    first = mori__hip_error("hipDeviceSynchronize", e);
    snprintf(message, sizeof message, "%s", mori_last_error());
  }
  double t1 = timed ? mori__log_clock_us() : 0;
  /* b is claimed: no other thread reaches its windows' ledgers now. */
  for (mori_window *w = b->windows; w != NULL; w = w->next) {
    int rc = window_unwind(w);
    if (rc != 0 && first == 0) {
      first = rc;
      snprintf(message, sizeof message, "%s", mori_last_error());
    }
  }
  double t2 = timed ? mori__log_clock_us() : 0;
  int rc = mori__unwind(&b->fsm, 0);
  if (rc != 0 && first == 0) first = rc;
  else if (first != 0) mori__error(first, "%s", message); /* the first failure wins */
  MORI_LOG_DEVICE(MORI_LOG_INFO, b->device,
                  "block %p torn down%s; us: synchronize %.0f windows %.0f block %.0f", b->base,
                  first ? " (errors)" : "", t1 - t0, t2 - t1,
                  timed ? mori__log_clock_us() - t2 : 0);
  return first;
}
