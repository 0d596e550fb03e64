/*
 * lifecycle.c - the two lifecycles that hold no ledger, beside the block
 * and window machines: a window's life and a watchdog entry.  Each is a
 * table of legal rows, and its states, events and facts expanded from
 * fsm.h's lists; the one setter of each looks the row up, and the check
 * (SQLite's assert_pager_state) compares the facts its owner reports with
 * what the state allows.
 */
#include "fsm_internal.h"

#include <stdio.h>
#include <string.h>

#define NONE (1u << 0) /* a count of 0; a flag that is 0 */
#define SOME (1u << 1) /* a count above 0; a flag that is 1 */
#define ANY MORI__ANY
#define WS(x) MORI__BIT(MORI_WS_##x)
/* The states of a heal in progress (fsm.h's MORI_HEAL_STEPS). */
#define HEAL_STATE_BIT(from, ev, to, ...) | WS(to)
#define MORI__WS_HEALING (0 MORI_HEAL_STEPS(HEAL_STATE_BIT))
#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))
/* A lifecycle from its four tables, named x_states, x_events, x_rows, x_facts. */
#define LIFECYCLE(title, x, nstates, nevents)                                              \
  {title, #x, x##_states, nstates, x##_events, nevents, x##_rows, COUNT_OF(x##_rows), x##_facts, \
   (int)COUNT_OF(x##_facts)}

#define FACT(field, kind, yes, no, words) {yes, MORI__FACT_##kind, no},
#define STATE(s, allowed, words) {#s, {MORI__ID allowed}, words},
#define EVENT(ev, words) {#ev, words},

/* A window's life (fsm.h's lists), and the legal rows. */
static const mori__fact life_facts[] = {MORI_LIFE_FACTS(FACT)};
static const mori__lc_state life_states[MORI_LIFE__COUNT] = {MORI_LIFE_STATES(STATE)};
static const mori__lc_event life_events[MORI_LIFE_EV__COUNT] = {MORI_LIFE_EVENTS(EVENT)};

#define LIFE(from, ev, to) {MORI_LIFE_##from, MORI_LIFE_EV_##ev, MORI_LIFE_##to}
static const mori__lc_row life_rows[] = {
    LIFE(OPENING, OPEN, OPEN),
    LIFE(OPENING, ABANDON, CLOSED),
    LIFE(OPEN, CLOSE, CLOSING),
    LIFE(CLOSING, FINISH, CLOSED),
};

const mori__lifecycle mori__life_lifecycle =
    LIFECYCLE("window life", life, MORI_LIFE__COUNT, MORI_LIFE_EV__COUNT);

/* A watchdog entry (fsm.h's lists), and the legal rows. */
static const mori__fact watch_facts[] = {MORI_WATCH_FACTS(FACT)};
static const mori__lc_state watch_states[MORI_WATCH__COUNT] = {MORI_WATCH_STATES(STATE)};
static const mori__lc_event watch_events[MORI_WATCH_EV__COUNT] = {MORI_WATCH_EVENTS(EVENT)};

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
  return kind == MORI__FACT_WSTATE ? MORI_FSM_NSTATES : 2;
}

static const char *class_name(mori__fact_kind kind, int c, char *buf, size_t n) {
  if (kind == MORI__FACT_WSTATE) return mori_fsm_state_name(c);
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
    if (kind == MORI__FACT_WSTATE && c >= 0 && c < MORI_FSM_NSTATES)
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
  return ev >= 0 && ev < lc->nevents ? lc->events[ev].name : "?";
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

/* The owner's struct as the table's array of facts, in the list's order. */
#define FACT_VALUE(field, ...) f->field,

int mori_life_check(mori_life s, const mori_life_facts *f, char *why, size_t n) {
  const int facts[] = {MORI_LIFE_FACTS(FACT_VALUE)};
  return mori__lc_check(&mori__life_lifecycle, (int)s, facts, why, n);
}

int mori_watch_check(mori_watch_state s, const mori_watch_facts *f, char *why, size_t n) {
  const int facts[] = {MORI_WATCH_FACTS(FACT_VALUE)};
  return mori__lc_check(&mori__watch_lifecycle, (int)s, facts, why, n);
}
