/*
 * heal.c - a window heals after one of its ranks died: a replacement
 * process, started as that rank, makes the group's rendezvous as any rank
 * does, and each survivor heals its window with mori_window_heal.  The
 * survivor keeps everything it had (its span at the same address, its own
 * memory, its mappings of the other live ranks, its device tables and so
 * every pointer and captured graph that names them); only the dead rank's
 * slot is given back and mapped again from the replacement's memory, and
 * the window's signal state starts over, the same on every rank.
 *
 * The replacement learns where to join from the survivors' offer: under
 * mori_symm/<group>/heal/<rank> the group's incarnation and how far its
 * sequence has come, and under .../heal/<rank>/<seq> the generation of the
 * heal of window <seq>.  Its rendezvous of a sequence number below that
 * runs in the heal's keys (mori_symm/<group>/<incarnation>/<seq>.<gen>/...,
 * see mori__store_key), where the survivors publish their requests again;
 * the offer carries no authority: the replacement's request passes every
 * check a first peer's does (validation, the fd channel's proof of
 * possession and credentials, the job's seal).
 *
 * Only the dead are replaced: a survivor heals rank k only once k's
 * process, as its request named it, is gone from this host, and it takes
 * from the heal's requests a new handle for rank k alone, checking that
 * every other rank's request comes from the process it had before.
 */
#include "rendezvous.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mori/channel.h"
#include "mori/protocol.h"

#define KEY_MAX (MORI_STORE_KEY_MAX + 1)

/* ---- the offer ---- */


/* The group's part of the offer (its incarnation, and the sequence
 * number its next rendezvous takes) and the window's (the generation of
 * its heal), published by the lowest surviving rank. */
static int publish_offer(mori_window *w, mori_store *store, int dead, uint64_t next_seq) {
  char key[KEY_MAX], value[128];
  int n = snprintf(value, sizeof value, "%s %llu", w->incarnation, (unsigned long long)next_seq);
  MORI_GUARD(mori__heal_offer_key(key, sizeof key, w->group, dead, -1));
  MORI_GUARD(mori__sealed_set(store, key, value, (size_t)n));
  n = snprintf(value, sizeof value, "%d", w->heal_gen);
  MORI_GUARD(mori__heal_offer_key(key, sizeof key, w->group, dead, (long long)w->seq));
  return mori__sealed_set(store, key, value, (size_t)n);
}

/* The lowest surviving rank offers the dead rank's place. */
static int is_leader(const mori_window *w, int dead) {
  return w->rank == 0 || (dead == 0 && w->rank == 1);
}

static void remove_offer(mori_window *w, mori_store *store, int dead) {
  char key[KEY_MAX];
  if (store->remove == NULL) return;
  if (mori__heal_offer_key(key, sizeof key, w->group, dead, (long long)w->seq) == 0)
    (void)store->remove(store, key);
}

/* ---- the evidence ---- */

static int check_dead(const mori_window *w, int dead) {
  if (dead < 0 || dead >= w->world_size)
    return mori__error(MORI_ERANGE, "heal: rank %d is not in a world of %d", dead, w->world_size);
  if (dead == w->rank)
    return mori__error(MORI_EINVAL, "heal: rank %d is this rank, which is alive", dead);
  if (w->handle_type != hipMemHandleTypePosixFileDescriptor)
    return mori__error(MORI_ENOTSUP,
                       "heal: only a world on one host (the fd path) can tell that rank %d's "
                       "process is gone",
                       dead);
  if (!mori__process_gone(w->pids[dead]))
    return mori__error(MORI_ESTATE,
                       "heal: rank %d's process (pid %u) is alive; only a rank whose process "
                       "is gone can be replaced",
                       dead, w->pids[dead]);
  return 0;
}

/* ---- the steps ---- */

struct heal {
  mori_window *w;
  mori_store *store;
  int dead;
  mori_request *reqs;
  mori_channel *ch;
  int timeout_ms;
};

/* The device finishes what it had queued on the dead rank's slot before
 * the slot goes; then its mapping, the handle imported from it and the fd
 * it came by are given back, in the reverse of their acquisition. */
static int drop_slot(struct heal *h) {
  mori_window *w = h->w;
  uintptr_t v = 0;
  MORI_HIP("hipSetDevice", mori_hipSetDevice(w->block->device));
  MORI_HIP("hipDeviceSynchronize", mori_hipDeviceSynchronize());
  MORI_GUARD(mori__ledger_find(&w->fsm, MORI_RES_SLOT_MAPPING, h->dead, &v));
  MORI_GUARD(mori__ledger_drop(&w->fsm, MORI_RES_SLOT_MAPPING, v));
  MORI_GUARD(mori__ledger_find(&w->fsm, MORI_RES_IMPORTED_HANDLE, h->dead, &v));
  MORI_GUARD(mori__ledger_drop(&w->fsm, MORI_RES_IMPORTED_HANDLE, v));
  if (mori__ledger_find(&w->fsm, MORI_RES_RECEIVED_FD, h->dead, &v) == 0)
    MORI_GUARD(mori__ledger_drop(&w->fsm, MORI_RES_RECEIVED_FD, v));
  return 0;
}

static int bind_channel(struct heal *h) {
  MORI_GUARD(mori_channel_open(h->w->seq, &h->ch));
  return mori__ledger_add(&h->w->fsm, MORI_RES_CHANNEL, (uintptr_t)h->ch, 0, 0);
}

/* Every survivor publishes its request again, in the heal's keys. */
static int publish(struct heal *h) {
  mori_window *w = h->w;
  mori_request *q = &h->reqs[w->rank];
  MORI_GUARD(mori__fill_request(w, mori_channel_name(h->ch), q));
  /* The replacement takes the lowest slot nobody uses: this window's. */
  q->signal_slots_used = ((1u << MORI_WIRE_SIGNAL_SLOTS) - 1) & ~(1u << w->signal_slot);
  return mori__publish_request(w, h->store, q);
}

/* The heal's world must be the window's: the same sizes and handle type,
 * every survivor's request from the process it had, the dead rank's from
 * another. */
static int validate(struct heal *h) {
  mori_window *w = h->w;
  mori_world_info info;
  MORI_GUARD(mori_validate_world(h->reqs, w->world_size, w->rank, &info));
  for (int r = 0; r < w->world_size; r++) {
    const mori_request *q = &h->reqs[r];
    if (q->alloc_size != w->stride || (int)q->handle_type != w->handle_type)
      return mori__error(MORI_EMISMATCH,
                         "heal: rank %d's allocation (%llu bytes, handle type %u) is not the "
                         "window's (%zu bytes, handle type %d)",
                         r, (unsigned long long)q->alloc_size, q->handle_type, w->stride,
                         w->handle_type);
    if (r != h->dead && q->pid != w->pids[r])
      return mori__error(MORI_EAUTH,
                         "heal: rank %d's request comes from pid %u, not from pid %u, the "
                         "process it had: only the dead rank %d is replaced",
                         r, q->pid, w->pids[r], h->dead);
  }
  if (h->reqs[h->dead].pid == w->pids[h->dead])
    return mori__error(MORI_EAUTH, "heal: the replacement of rank %d names the dead process %u",
                       h->dead, w->pids[h->dead]);
  return 0;
}

/* The own fd goes to the replacement alone, and its fd comes back. */
static int exchange(struct heal *h) {
  mori_window *w = h->w;
  int *fds = mori_malloc((size_t)w->world_size * sizeof *fds);
  uint8_t *with = mori_calloc((size_t)w->world_size, 1);
  int rc = fds && with ? 0 : mori__nomem("heal");
  if (rc == 0) {
    with[h->dead] = 1;
    struct mori__abort_ctx actx = {w, h->store};
    mori_channel_set_abort_check(h->ch, mori__channel_abort_check, &actx);
    rc = mori_channel_exchange_with(h->ch, h->reqs, w->world_size, w->rank, w->seq,
                                    w->block->exported_fd, fds, h->timeout_ms, with);
  }
  if (rc == 0)
    rc = mori__ledger_add(&w->fsm, MORI_RES_RECEIVED_FD, (uintptr_t)fds[h->dead], 0, h->dead);
  free(fds);
  free(with);
  MORI_GUARD(rc);
  if (mori_fsm_forget(&w->fsm, MORI_RES_CHANNEL, (uintptr_t)h->ch) != 0)
    return mori__error(MORI_ESTATE, "ledger: %s", w->fsm.why);
  mori_channel_close(h->ch);
  h->ch = NULL;
  return 0;
}

/* The replacement's memory, at the dead rank's address. */
static int map_slot(struct heal *h) {
  mori_window *w = h->w;
  int k = h->dead;
  uintptr_t fd = 0;
  hipMemGenericAllocationHandle_t handle;
  MORI_GUARD(mori__ledger_find(&w->fsm, MORI_RES_RECEIVED_FD, k, &fd));
  hipError_t e = mori_hipMemImportFromShareableHandle(&handle, (void *)fd,
                                                      (hipMemAllocationHandleType)w->handle_type);
  if (e != hipSuccess) {
    mori__hip_error("hipMemImportFromShareableHandle", e);
    mori__error_prefix("import from rank %d: ", k);
    return MORI_EHIP;
  }
  MORI_GUARD(mori__ledger_add(&w->fsm, MORI_RES_IMPORTED_HANDLE, (uintptr_t)handle, 0, k));
  char *slot = mori__window_slot(w, k);
  MORI_HIP("hipMemMap", mori_hipMemMap(slot, w->stride, 0, handle, 0));
  MORI_GUARD(mori__ledger_add(&w->fsm, MORI_RES_SLOT_MAPPING, (uintptr_t)slot, w->stride, k));
  hipMemAccessDesc access = {{hipMemLocationTypeDevice, w->block->device},
                             hipMemAccessFlagsProtReadWrite};
  MORI_HIP("hipMemSetAccess", mori_hipMemSetAccess(slot, w->stride, &access, 1));
  return 0;
}

/* A broken window keeps what it maps for its teardown, but not its signal
 * slot: every signal call on it fails, and the block's next window (its
 * survivors rendezvous the block again) needs one of the block's 8, which
 * it zeroes first.  A graph captured on the broken window must not be
 * replayed (docs/recovery.md). */
static void give_back_signal_slot(mori_window *w) {
  uintptr_t v = 0;
  if (w->signal_slot >= 0 &&
      mori__ledger_find(&w->fsm, MORI_RES_SIGNAL_SLOT, w->signal_slot, &v) == 0)
    (void)mori__ledger_drop(&w->fsm, MORI_RES_SIGNAL_SLOT, v);
}

/* The event that ends a step of the heal (fsm.h, MORI_HEAL_STEPS): the
 * machine checks the ledger against the state it enters. */
static int fire(mori_window *w, mori_wevent ev) {
  if (mori_fsm_fire(&w->fsm, ev) != 0) return mori__error(MORI_ESTATE, "%s", w->fsm.why);
  return 0;
}

static int rejoin(struct heal *h) {
  MORI_GUARD(publish(h));
  MORI_GUARD(mori__gather_requests(h->w, h->store, h->reqs, h->timeout_ms));
  MORI_GUARD(validate(h));
  /* from here every wait ends once the replacement's process is gone */
  h->w->heal_pid = h->reqs[h->dead].pid;
  return 0;
}

static int resync(struct heal *h) {
  MORI_GUARD(mori__signal_heal(h->w, h->dead));
  return mori__store_barrier(h->w, h->store, "mapped", h->timeout_ms);
}

/* Each step, then its event; a failure names the step, and the window
 * breaks (BROKEN: failed for good, its ledger kept for the teardown). */
static int heal_run(struct heal *h) {
  mori_window *w = h->w;
  const char *step = "lose the slot";
  int rc = drop_slot(h);
  if (rc == 0) rc = fire(w, MORI_EV_LOSE);
  if (rc == 0 && (step = "bind")) rc = bind_channel(h);
  if (rc == 0) rc = fire(w, MORI_EV_REBIND);
  if (rc == 0 && (step = "rejoin")) rc = rejoin(h);
  if (rc == 0) rc = fire(w, MORI_EV_REJOIN);
  if (rc == 0 && (step = "exchange")) rc = exchange(h);
  if (rc == 0) rc = fire(w, MORI_EV_REEXCHANGE);
  if (rc == 0 && (step = "map")) rc = map_slot(h);
  if (rc == 0) rc = fire(w, MORI_EV_REMAP);
  if (rc == 0 && (step = "resynchronize")) rc = resync(h);
  if (rc == 0) rc = fire(w, MORI_EV_RESYNC);
  if (rc == 0) return 0;
  mori__error_prefix("heal step %s: ", step);
  if (mori_fsm_fire(&w->fsm, MORI_EV_BREAK) != 0)
    mori__error_suffix(" (and the window machine did not break: %s)", w->fsm.why);
  return rc;
}

int mori_window_heal(mori_window *w, int dead, mori_store *store) {
  MORI_GUARD(mori__window_enter(w, "heal"));
  int rc = store == NULL ? mori__error(MORI_EINVAL, "heal: NULL store")
           : w->heal_failed
               ? mori__error(MORI_ESTATE, "heal: an earlier heal of this window failed; it is "
                                          "failed for good")
               : check_dead(w, dead);
  uint64_t next_seq = 0;
  struct heal h = {w, store, dead, NULL, NULL, mori_symm_timeout_ms()};
  /* Past the checks, the heal has begun: from here a failure breaks the
   * window and tells the others, in the heal's keys. */
  if (rc == 0) {
    w->heal_gen++;
    w->healing = 1 + dead;
    rc = mori__group_next_seq(w->group, &next_seq);
    h.reqs = mori_calloc((size_t)w->world_size, sizeof *h.reqs);
    if (rc == 0 && h.reqs == NULL) rc = mori__nomem("heal");
    /* the offer first, so that the replacement learns the heal's keys,
     * and with them any abort, whatever fails next */
    if (rc == 0 && is_leader(w, dead)) rc = publish_offer(w, store, dead, next_seq);
    if (rc == 0) {
      rc = heal_run(&h);
    } else {
      mori__error_prefix("heal step offer: ");
      if (mori_fsm_fire(&w->fsm, MORI_EV_BREAK) != 0)
        mori__error_suffix(" (and the window machine did not break: %s)", w->fsm.why);
    }
    w->healing = 0;
    w->heal_pid = 0;
    if (rc == 0) {
      w->pids[dead] = h.reqs[dead].pid;
      mori__death_notice_clear(w, store, dead);
      mori__store_cleanup(w, store);
      remove_offer(w, store, dead);
      MORI_LOG(MORI_LOG_INFO, w->rank, w->id, "group %s: healed rank %d (pid %u), generation %d",
               w->group, dead, w->pids[dead], w->heal_gen);
    } else {
      /* what the heal acquired stays in the ledger, for the teardown */
      w->heal_failed = 1;
      mori__publish_abort(w, store);
      mori__heal_abort_publish(w->group, dead, w->seq, w->rank, store);
      mori__error_prefix("rank %d group %s window %ld: heal of rank %d failed: ", w->rank,
                         w->group, w->id, dead);
      /* never half healed: the window is failed for good */
      mori__signal_fail(w, MORI_ESTATE, mori_last_error());
      give_back_signal_slot(w);
    }
  }
  free(h.reqs);
  return mori__window_leave(w, rc);
}
