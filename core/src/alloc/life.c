/*
 * life.c - how long blocks and windows live: free and release_all,
 * references (retain/release), temporary references of calls in progress,
 * the deferred teardown of a freed block that something still holds, and
 * the registry that lets a call on a closed window be caught instead of
 * touching freed memory.
 *
 * A block goes when the last of {its allocation, its windows' references,
 * calls in progress on its windows, a rendezvous running on it} lets go.
 * Whoever lets go last claims the block here and runs its teardown,
 * outside mori__lock: teardown.c's unwind of every ledger (mori__teardown);
 * then the windows become tombstones here.
 */
#include "alloc.h"

#include <stdlib.h>
#include <string.h>

struct mori__counters mori__counters;

/* ---- the registry: every window handed out, sorted by address ---- */

static mori_window **registry;
static size_t nregistry, cap_registry;

/* First index whose window is at or after w. */
static size_t registry_lower_bound(const mori_window *w) {
  size_t lo = 0, hi = nregistry;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if ((uintptr_t)registry[mid] < (uintptr_t)w)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static int registered(const mori_window *w) {
  size_t i = registry_lower_bound(w);
  return i < nregistry && registry[i] == w;
}

int mori__window_register(mori_window *w) {
  if (nregistry == cap_registry) {
    size_t cap = cap_registry ? 2 * cap_registry : 32;
    mori_window **grown = mori_realloc(registry, cap * sizeof *grown);
    if (grown == NULL) return mori__nomem("rendezvous: window registry");
    registry = grown;
    cap_registry = cap;
  }
  size_t i = registry_lower_bound(w);
  memmove(&registry[i + 1], &registry[i], (nregistry - i) * sizeof *registry);
  registry[i] = w;
  nregistry++;
  return 0;
}

void mori__window_unregister(mori_window *w) {
  size_t i = registry_lower_bound(w);
  if (i == nregistry || registry[i] != w) return;
  memmove(&registry[i], &registry[i + 1], (nregistry - i - 1) * sizeof *registry);
  nregistry--;
}

/* The window struct's own memory, and its place in the registry: the one
 * way a window's memory goes (abandoned, or out of the quarantine). */
static void window_free(mori_window *w) {
  mori__window_unregister(w);
  mori_fsm_destroy(&w->fsm); /* its ledger's memory went with the unwind, if it ran */
  free(w->buffer_ptrs);      /* pad_ptrs is its second half */
  free(w->group);
  free(w);
}

/* ---- tombstones ----
 *
 * A closed window nobody references is kept for the last MORI_QUARANTINE
 * closings before its memory goes, so that its address is not handed to a
 * new window while a late caller may still use the old pointer (a
 * quarantine, as ASan's).  A closed window still referenced stays until
 * its last release: the reference owns the struct. */
enum { MORI_QUARANTINE = 256 };
static mori_window *quarantined[MORI_QUARANTINE];
static size_t quarantine_next;

static void quarantine(mori_window *w) {
  mori_window *old = quarantined[quarantine_next];
  quarantined[quarantine_next] = w;
  quarantine_next = (quarantine_next + 1) % MORI_QUARANTINE;
  if (old != NULL) window_free(old);
}

/* ---- the window life: one setter, one check ---- */

static int listed(const mori_window *w) {
  if (w->block == NULL) return 0;
  for (const mori_window *v = w->block->windows; v != NULL; v = v->next)
    if (v == w) return 1;
  return 0;
}

/* assert_life_state(): machine is the window machine's state, or -1 where
 * another thread may be moving it (a call looking at any window). */
static void assert_life(const mori_window *w, int machine) {
  mori_life_facts f = {w->refs, w->busy, listed(w), w->block != NULL, machine};
  char why[160];
  if (mori_life_check(w->life, &f, why, sizeof why) != 0)
    mori__bug("window %ld (group %s): %s", w->id, w->group, why);
}

/* Whoever fires an event owns the window machine at that moment (its
 * rendezvous, or the teardown that claimed it), so its state is checked
 * too. */
void mori__window_set_life(mori_window *w, mori_life_event ev) {
  mori_life from = w->life;
  if (mori_life_fire(&w->life, ev) != 0)
    mori__bug("window %ld (group %s): %s while %s is not a transition of its life", w->id,
              w->group, mori_life_event_name(ev), mori_life_name(from));
  assert_life(w, w->fsm.state.window);
}

/* ---- what a call may do with a window ---- */

/* Why each state but OPEN refuses a call. */
static const char *const refusals[MORI_LIFE__COUNT] = {
    [MORI_LIFE_OPENING] = "is still being set up",
    [MORI_LIFE_CLOSING] = "is closing: its block was freed and is being torn down",
    [MORI_LIFE_CLOSED] = "was torn down: its block was freed and its last reference released, "
                         "or release_all ran",
};

static int refuse(const mori_window *w, const char *op) {
  if (!registered(w))
    return mori__error(MORI_ENOTFOUND, "%s: %p is not a mori-symm window", op, (const void *)w);
  assert_life(w, -1);
  if (refusals[w->life] == NULL) return 0;
  return mori__error(MORI_ESTATE, "%s: window %ld (group %s) %s", op, w->id, w->group,
                     refusals[w->life]);
}

/* Nothing holds b but its allocation: no reference, no call in progress,
 * no rendezvous running on it or waited for. */
static int block_idle(const mori_block *b) {
  if (b->opening != NULL || b->waiters > 0) return 0;
  for (const mori_window *w = b->windows; w != NULL; w = w->next)
    if (w->refs > 0 || w->busy > 0 || w->life == MORI_LIFE_OPENING) return 0;
  return 1;
}

/* No call in progress, no rendezvous running or waited for: references
 * may remain. */
static int block_quiet(const mori_block *b) {
  if (b->opening != NULL || b->waiters > 0) return 0;
  for (const mori_window *w = b->windows; w != NULL; w = w->next)
    if (w->busy > 0 || w->life == MORI_LIFE_OPENING) return 0;
  return 1;
}

static mori_block *deferred;

/* free() or release_all(): the block left the table and waits here until
 * nothing holds it. */
static void defer(mori_block *b) {
  b->freed = 1;
  b->next_deferred = deferred;
  deferred = b;
  mori__counters.deferred++;
}

static void claim(mori_block *b) {
  for (mori_block **p = &deferred; *p != NULL; p = &(*p)->next_deferred)
    if (*p == b) {
      *p = b->next_deferred;
      mori__counters.deferred--;
      break;
    }
  for (mori_window *w = b->windows; w != NULL; w = w->next)
    mori__window_set_life(w, MORI_LIFE_EV_CLOSE);
}

int mori__block_claim_if_idle(mori_block *b) {
  if (!b->freed || !block_idle(b)) return 0;
  claim(b);
  return 1;
}

int mori__block_freed(const void *base) {
  for (const mori_block *b = deferred; b != NULL; b = b->next_deferred)
    if (b->base == base) return 1;
  return 0;
}

/* Under mori__lock, after the teardown ran: the windows become tombstones
 * and the block struct goes. */
static void finish_teardown(mori_block *b) {
  while (b->windows != NULL) {
    mori_window *w = b->windows;
    b->windows = w->next;
    w->next = NULL;
    w->block = NULL;
    mori__window_set_life(w, MORI_LIFE_EV_FINISH);
    mori__counters.windows--;
    if (w->refs == 0) quarantine(w);
  }
  mori_fsm_destroy(&b->fsm);
  free(b);
  pthread_cond_broadcast(&mori__cond);
}

/* A claimed block: the unwind of every ledger (teardown.c), then its
 * tombstones. */
static int teardown(mori_block *b) {
  int rc = mori__teardown(b);
  pthread_mutex_lock(&mori__lock);
  finish_teardown(b);
  pthread_mutex_unlock(&mori__lock);
  return rc;
}

/* ---- free and release_all: each takes mori__lock and lets it go ---- */

/* Purely local, as torch's free: the block leaves the table now, so that
 * lookup, rendezvous and a second free of ptr fail with MORI_ENOTFOUND; its
 * teardown runs now, or at the last release of a window reference (or the
 * end of a call in progress) if something still holds it.  It leaves the
 * table and joins the deferred list under one hold of mori__lock, so every
 * other thread finds it in one or the other (a second free is told it was
 * freed; a rendezvous running on it fails). */
int mori_symm_free(void *ptr) {
  int rc = 0, claimed = 0;
  pthread_mutex_lock(&mori__lock);
  mori_block *b = mori__block_take(ptr);
  if (b != NULL) {
    defer(b);
    claimed = mori__block_claim_if_idle(b);
  } else {
    rc = mori__error(MORI_ENOTFOUND, "free(%p): not the base of a live mori-symm allocation%s",
                     ptr, mori__block_freed(ptr) ? " (already freed; its teardown waits for "
                                                   "the last window reference)"
                                                 : "");
  }
  pthread_mutex_unlock(&mori__lock);
  return claimed ? teardown(b) : rc;
}

/* Every block, freed or not, whatever references remain, leaves the table
 * at once and is torn down, after the calls in progress on it. */
int mori__blocks_release_all(void) {
  mori__first_error first = {0};
  size_t n = 0;
  pthread_mutex_lock(&mori__lock);
  mori_block **all = mori__blocks_take_all(&n); /* the whole table, handed over at once */
  for (size_t i = n; i-- > 0;) defer(all[i]);
  while (deferred != NULL) {
    mori_block *b = deferred;
    /* Calls in progress are bounded by their timeouts; references are not
     * waited for: at exit nothing will release them. */
    if (!block_quiet(b)) {
      pthread_cond_wait(&mori__cond, &mori__lock);
      continue;
    }
    claim(b);
    pthread_mutex_unlock(&mori__lock);
    (void)mori__first_keep(&first, teardown(b));
    pthread_mutex_lock(&mori__lock);
  }
  pthread_mutex_unlock(&mori__lock);
  free(all);
  return mori__first_end(&first, 0);
}

void mori__window_abandon(mori_window *w) {
  w->block = NULL;
  mori__window_set_life(w, MORI_LIFE_EV_ABANDON);
  window_free(w);
}

/* ---- temporary references of calls in progress ---- */

int mori__window_enter(const mori_window *cw, const char *op) {
  mori_window *w = (mori_window *)cw;
  pthread_mutex_lock(&mori__lock);
  int rc = refuse(w, op);
  if (rc == 0) w->busy++;
  pthread_mutex_unlock(&mori__lock);
  return rc;
}

/* The block of a window whose last holder just let go, claimed for
 * teardown if its owner freed it; NULL otherwise.  Under mori__lock. */
static mori_block *let_go(mori_window *w) {
  mori_block *b = w->block;
  if (w->busy == 0) pthread_cond_broadcast(&mori__cond);
  return b != NULL && w->life == MORI_LIFE_OPEN && mori__block_claim_if_idle(b) ? b : NULL;
}

int mori__window_leave(const mori_window *cw, int rc) {
  mori_window *w = (mori_window *)cw;
  pthread_mutex_lock(&mori__lock);
  w->busy--;
  mori_block *b = let_go(w);
  pthread_mutex_unlock(&mori__lock);
  if (b != NULL) mori__block_teardown_quietly(b);
  return rc;
}

void mori__block_teardown_quietly(mori_block *b) {
  mori__first_error call; /* the call's own message, which stays */
  (void)mori__first_set(&call, MORI_OK);
  if (teardown(b) != 0)
    MORI_LOG(MORI_LOG_WARN, -1, -1, "deferred teardown: %s", mori_last_error());
  (void)mori__first_end(&call, MORI_OK);
}

/* ---- references ---- */

int mori_window_retain(mori_window *w) {
  pthread_mutex_lock(&mori__lock);
  int rc = refuse(w, "mori_window_retain");
  if (rc == 0) w->refs++;
  pthread_mutex_unlock(&mori__lock);
  return rc;
}

int mori_window_release(mori_window *w) {
  mori_block *b = NULL;
  int rc = 0;
  pthread_mutex_lock(&mori__lock);
  if (!registered(w)) {
    rc = mori__error(MORI_ENOTFOUND, "mori_window_release: %p is not a mori-symm window",
                     (void *)w);
  } else if (w->refs == 0) {
    /* Closing is a state: a release past the last reference is a bug in
     * the caller, reported instead of undefined. */
    rc = mori__error(MORI_ESTATE,
                     "mori_window_release: window %ld (group %s) holds no reference (%s)", w->id,
                     w->group,
                     w->life == MORI_LIFE_CLOSED ? "released after its last release" : "no retain");
  } else if (--w->refs == 0) {
    if (w->life == MORI_LIFE_CLOSED)
      quarantine(w);
    else
      b = let_go(w);
  }
  pthread_mutex_unlock(&mori__lock);
  if (b != NULL) rc = teardown(b);
  return rc;
}
