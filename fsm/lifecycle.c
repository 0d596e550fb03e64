/*
 * lifecycle.c - the two lifecycles that hold no ledger, beside the block
 * and window machines: a window's life and a watchdog entry.  Each is a
 * table of legal rows and a table of what each state implies; the one
 * setter of each looks the row up, and the check (SQLite's
 * assert_pager_state) compares the facts its owner reports with the state.
 */
#include "fsm_internal.h"

#include <stdio.h>
#include <string.h>

#define NONE (1u << 0) /* a count of 0; a flag that is 0 */
#define SOME (1u << 1) /* a count above 0; a flag that is 1 */
#define ANY MORI__ANY
#define WS(x) MORI__BIT(MORI_WS_##x)
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
/* A lifecycle from its four tables, named x_states, x_events, x_rows, x_facts. */
#define LIFECYCLE(title, x, nstates, nevents)                                              \
  {title, #x, x##_states, nstates, x##_events, nevents, x##_rows, COUNT(x##_rows), x##_facts, \
   (int)COUNT(x##_facts)}

/*
 * A window's life.  The facts are read under mori__lock, which guards the
 * window's life, references, calls in progress and its block's list.
 *
 * OPENING:
 *   Its rendezvous runs on one thread, outside the lock.  Not handed out:
 *   no reference and no call can name it yet, it is not on its block's
 *   list (block->opening names it), and its window machine is anywhere
 *   from INIT to MAPPED, or FAILED once rolled back; never RELEASED.
 *
 * OPEN:
 *   On its block's list, its window machine MAPPED: it serves calls, each
 *   holding a temporary reference (busy) for its duration.
 *
 * CLOSING:
 *   Its block's teardown claimed it when no call was in progress, and
 *   refuses every call since: busy stays 0.  Still on the list; the
 *   teardown, outside the lock, moves its machine from MAPPED to RELEASED.
 *
 * CLOSED:
 *   Off the list and detached from the block, which is gone; the ledger
 *   was unwound (RELEASED), rolled back (FAILED) or never started (INIT).
 *   The struct stays as a tombstone while references remain and then in
 *   the quarantine.  Terminal.
 */
static const mori__fact life_facts[] = {
    {"refs", MORI__FACT_COUNT, NULL},
    {"busy", MORI__FACT_COUNT, NULL},
    {"listed", MORI__FACT_FLAG, "not listed"},
    {"attached", MORI__FACT_FLAG, "detached"},
    {"window machine", MORI__FACT_WSTATE, NULL},
};

static const mori__lc_state life_states[MORI_LIFE__COUNT] = {
    [MORI_LIFE_OPENING] = {"OPENING", {NONE, NONE, NONE, SOME, ANY & ~WS(RELEASED)}},
    [MORI_LIFE_OPEN] = {"OPEN", {ANY, ANY, SOME, SOME, WS(MAPPED)}},
    [MORI_LIFE_CLOSING] = {"CLOSING", {ANY, NONE, SOME, SOME, WS(MAPPED) | WS(RELEASED)}},
    [MORI_LIFE_CLOSED] = {"CLOSED", {ANY, NONE, NONE, NONE, WS(INIT) | WS(RELEASED) | WS(FAILED)}},
};

static const char *const life_events[MORI_LIFE_EV__COUNT] = {"OPEN", "ABANDON", "CLOSE", "FINISH"};

#define LIFE(from, ev, to) {MORI_LIFE_##from, MORI_LIFE_EV_##ev, MORI_LIFE_##to}
static const mori__lc_row life_rows[] = {
    LIFE(OPENING, OPEN, OPEN),
    LIFE(OPENING, ABANDON, CLOSED),
    LIFE(OPEN, CLOSE, CLOSING),
    LIFE(CLOSING, FINISH, CLOSED),
};

const mori__lifecycle mori__life_lifecycle =
    LIFECYCLE("window life", life, MORI_LIFE__COUNT, MORI_LIFE_EV__COUNT);

/*
 * A watchdog entry.  The facts are read under the watchdog's lock, which
 * guards its list and every entry's state.
 *
 * HELD_QUEUED, QUEUED:
 *   On the list.  Its stream has not reached the start event recorded
 *   before the waits (a stream busy with earlier work is not late), so no
 *   deadline is set.
 *
 * HELD_ARMED, ARMED:
 *   On the list, with a deadline.
 *
 * HELD_RELEASING, RELEASING:
 *   Expired: the watchdog thread reads its cells and writes the awaited
 *   values outside its lock.  Still on the list, skipped by the scan; a
 *   teardown that would forget the entry waits for it.
 *
 * RETIRED:
 *   Off the list while its call still holds it (a release may end the
 *   waits while the call is still enqueuing them: the sim's sync mode runs
 *   them in the call).  The call frees it when it ends.
 *
 * In every HELD_ state and RETIRED the entry holds its end event, not yet
 * recorded.  A call that ended (the plain states) recorded it, or gave the
 * event back when the record failed: such an entry ends by its release.
 *
 * FREED:
 *   Off the list, held by nobody: its memory goes.  Terminal.
 */
static const mori__fact watch_facts[] = {
    {"listed", MORI__FACT_FLAG, "not listed"},
    {"armed", MORI__FACT_FLAG, "not armed"},
    {"end event", MORI__FACT_FLAG, "no end event"},
};

static const mori__lc_state watch_states[MORI_WATCH__COUNT] = {
    [MORI_WATCH_HELD_QUEUED] = {"HELD_QUEUED", {SOME, NONE, SOME}},
    [MORI_WATCH_HELD_ARMED] = {"HELD_ARMED", {SOME, SOME, SOME}},
    [MORI_WATCH_HELD_RELEASING] = {"HELD_RELEASING", {SOME, SOME, SOME}},
    [MORI_WATCH_RETIRED] = {"RETIRED", {NONE, ANY, SOME}},
    [MORI_WATCH_QUEUED] = {"QUEUED", {SOME, NONE, ANY}},
    [MORI_WATCH_ARMED] = {"ARMED", {SOME, SOME, ANY}},
    [MORI_WATCH_RELEASING] = {"RELEASING", {SOME, SOME, ANY}},
    [MORI_WATCH_FREED] = {"FREED", {NONE, ANY, ANY}},
};

static const char *const watch_events[MORI_WATCH_EV__COUNT] = {"START", "EXPIRE", "REARM",
                                                                "RETIRE", "END"};

#define WATCH(from, ev, to) {MORI_WATCH_##from, MORI_WATCH_EV_##ev, MORI_WATCH_##to}
static const mori__lc_row watch_rows[] = {
    WATCH(HELD_QUEUED, START, HELD_ARMED),
    WATCH(HELD_ARMED, EXPIRE, HELD_RELEASING),
    WATCH(HELD_RELEASING, REARM, HELD_ARMED),
    WATCH(QUEUED, START, ARMED),
    WATCH(ARMED, EXPIRE, RELEASING),
    WATCH(RELEASING, REARM, ARMED),
    WATCH(HELD_QUEUED, END, QUEUED),
    WATCH(HELD_ARMED, END, ARMED),
    WATCH(HELD_RELEASING, END, RELEASING),
    WATCH(RETIRED, END, FREED),
    WATCH(HELD_QUEUED, RETIRE, RETIRED),
    WATCH(HELD_ARMED, RETIRE, RETIRED),
    WATCH(HELD_RELEASING, RETIRE, RETIRED),
    WATCH(QUEUED, RETIRE, FREED),
    WATCH(ARMED, RETIRE, FREED),
    WATCH(RELEASING, RETIRE, FREED),
};

const mori__lifecycle mori__watch_lifecycle =
    LIFECYCLE("watchdog entry", watch, MORI_WATCH__COUNT, MORI_WATCH_EV__COUNT);

/* ---- the machinery both share ---- */

int mori__lc_next(const mori__lifecycle *lc, int s, int ev) {
  for (size_t i = 0; i < lc->nrows; i++)
    if (lc->rows[i].from == s && lc->rows[i].event == ev) return lc->rows[i].to;
  return -1;
}

static int leaves(const mori__lifecycle *lc, int s) {
  for (size_t i = 0; i < lc->nrows; i++)
    if (lc->rows[i].from == s) return 1;
  return 0;
}

int mori__lc_fire(const mori__lifecycle *lc, int *s, int ev) {
  if (*s < 0 || *s >= lc->nstates || !leaves(lc, *s)) return MORI_FSM_ETERMINAL;
  int to = mori__lc_next(lc, *s, ev);
  if (to < 0) return MORI_FSM_EILLEGAL;
  *s = to;
  return MORI_FSM_OK;
}

static int fact_class(mori__fact_kind kind, int v) {
  return kind == MORI__FACT_COUNT ? v > 0 : v;
}

static int class_count(mori__fact_kind kind) {
  return kind == MORI__FACT_WSTATE ? MORI_WS__COUNT : 2;
}

static const char *class_name(mori__fact_kind kind, int c, char *buf, size_t n) {
  if (kind == MORI__FACT_WSTATE) return mori_wstate_name((mori_wstate)c);
  snprintf(buf, n, "%s", kind == MORI__FACT_COUNT && c ? "> 0" : c ? "1" : "0");
  return buf;
}

/* "0", "> 0", "MAPPED or RELEASED": the classes of mask. */
static void say_allowed(char *buf, size_t n, mori__fact_kind kind, unsigned mask) {
  size_t len = 0;
  int total = 0, k = 0;
  for (int c = 0; c < class_count(kind); c++) total += (mask >> c) & 1;
  buf[0] = '\0';
  for (int c = 0; c < class_count(kind) && len < n; c++) {
    if (!((mask >> c) & 1)) continue;
    char word[8];
    k++;
    len += (size_t)snprintf(buf + len, n - len, "%s%s", k == 1 ? "" : k == total ? " or " : ", ",
                            class_name(kind, c, word, sizeof word));
  }
}

int mori__lc_check(const mori__lifecycle *lc, int s, const int *facts, char *why, size_t n) {
  if (s < 0 || s >= lc->nstates) {
    snprintf(why, n, "%s: no state %d", lc->name, s);
    return MORI_FSM_EINVARIANT;
  }
  const mori__lc_state *st = &lc->states[s];
  for (int i = 0; i < lc->nfacts; i++) {
    mori__fact_kind kind = lc->facts[i].kind;
    int v = facts[i];
    if (v == -1) continue; /* unknown where the owner checks */
    int c = v < 0 ? -1 : fact_class(kind, v);
    if (c >= 0 && c < class_count(kind) && ((st->allowed[i] >> c) & 1)) continue;
    char expected[256], word[8];
    say_allowed(expected, sizeof expected, kind, st->allowed[i]);
    if (kind == MORI__FACT_WSTATE && c >= 0 && c < MORI_WS__COUNT)
      snprintf(why, n, "%s: %s is %s, expected %s", st->name, lc->facts[i].name,
               class_name(kind, c, word, sizeof word), expected);
    else
      snprintf(why, n, "%s: %s is %d, expected %s", st->name, lc->facts[i].name, v, expected);
    return MORI_FSM_EINVARIANT;
  }
  return MORI_FSM_OK;
}

/* ---- the typed faces ---- */

static const char *lc_state_name(const mori__lifecycle *lc, int s) {
  return s >= 0 && s < lc->nstates ? lc->states[s].name : "?";
}

static const char *lc_event_name(const mori__lifecycle *lc, int ev) {
  return ev >= 0 && ev < lc->nevents ? lc->events[ev] : "?";
}

/* next, the setter and the names of one lifecycle, typed. */
#define TYPED_FACE(prefix, lc, state_t, event_t)                                          \
  int prefix##_next(state_t s, event_t ev) { return mori__lc_next(&lc, (int)s, (int)ev); } \
  int prefix##_fire(state_t *s, event_t ev) {                                             \
    int v = (int)*s, rc = mori__lc_fire(&lc, &v, (int)ev);                                \
    *s = (state_t)v;                                                                      \
    return rc;                                                                            \
  }                                                                                       \
  const char *prefix##_name(state_t s) { return lc_state_name(&lc, (int)s); }             \
  const char *prefix##_event_name(event_t ev) { return lc_event_name(&lc, (int)ev); }

TYPED_FACE(mori_life, mori__life_lifecycle, mori_life, mori_life_event)
TYPED_FACE(mori_watch, mori__watch_lifecycle, mori_watch_state, mori_watch_event)

int mori_life_check(mori_life s, const mori_life_facts *f, char *why, size_t n) {
  const int facts[] = {f->refs, f->busy, f->listed, f->attached, f->machine};
  return mori__lc_check(&mori__life_lifecycle, (int)s, facts, why, n);
}

int mori_watch_check(mori_watch_state s, const mori_watch_facts *f, char *why, size_t n) {
  const int facts[] = {f->listed, f->armed, f->has_end};
  return mori__lc_check(&mori__watch_lifecycle, (int)s, facts, why, n);
}
