/*
 * fsm_internal.h - the tables fsm.h's lists expand to, shared by the
 * machine (fsm.c), the lifecycles (lifecycle.c), the renderers (fsm_dot.c)
 * and the tests that compare them.
 */
#ifndef MORI_FSM_INTERNAL_H
#define MORI_FSM_INTERNAL_H

#include "mori/fsm.h"

#define MORI__BIT(x) (1u << (unsigned)(x))
/* Unwraps a parenthesized column of a list: MORI__ID (a, b) is a, b. */
#define MORI__ID(...) __VA_ARGS__
/* m applied to a list that a macro expands to: MORI__APPLY(MORI__ID, L). */
#define MORI__APPLY(m, args) m args

/* A count bound: per_world * world_size + plus. */
typedef struct mori__bound {
  signed char per_world, plus;
} mori__bound;

typedef struct mori__count {
  mori__bound lo, hi;
} mori__count;

/* What a step does to one kind's count: nothing (set 0), or sets its
 * bounds on entry to the step's `to` (an ENDS: 0..0). */
typedef struct mori__change {
  unsigned char set;
  unsigned char gives_back; /* a heal's LESS: the count falls, nothing is recorded */
  mori__count count;
} mori__change;

/* One legal transition: a step of a list in fsm.h, or a RELEASE or FAIL
 * row the lists imply.  A step's `adds` are what its work records while
 * the machine still sits in `from`: what mori_fsm_push accepts there. */
typedef struct mori__fsm_row {
  unsigned kinds; /* MORI_FSM_BLOCK | MORI_FSM_WINDOW */
  int from;
  mori_wevent event;
  int to;
  mori__change adds[MORI_RES__COUNT];
} mori__fsm_row;

/* How an unwind gives a kind back: the passes in order, then never. */
enum { MORI__IN_ORDER = 0, MORI__LAST = 1, MORI__BORROWED = 2 };
/* What a kind's aux names. */
enum { MORI__AUX_NONE = 0, MORI__AUX_RANK = 1, MORI__AUX_PEER = 2 };

typedef struct mori__res_info {
  const char *name, *singular, *plural, *words;
  unsigned char tier;   /* ledger order: tiers never decrease */
  unsigned char aux;    /* MORI__AUX_* */
  unsigned char unwind; /* MORI__IN_ORDER, MORI__LAST or MORI__BORROWED */
} mori__res_info;

extern const mori__fsm_row mori__fsm_rows[];
extern const size_t mori__fsm_nrows;
extern const mori__res_info mori__res_infos[MORI_RES__COUNT];

/* The kinds a row records (its adds that may be above 0), and the
 * machine kinds whose rows record kind r. */
unsigned mori__fsm_acquires(const mori__fsm_row *r);
unsigned mori__fsm_owners(mori_res r);
/* 1 once the rows' answers are derived (at the library's load). */
int mori__fsm_derived(void);
/* What the ledger holds on entry to state s of a kind: the counts the
 * steps on the path from INIT to s set, every other kind 0.  Returns 0, or
 * -1 when the kind never reaches s. */
int mori__fsm_ledger(mori_fsm_kind kind, int s, mori__count out[MORI_RES__COUNT]);
/* A state's words (fsm.h's lists; INIT, RELEASED and FAILED are fsm.c's),
 * "?" out of range. */
const char *mori__fsm_state_words(int s);
int mori__bound_value(mori__bound b, int world_size);
const char *mori__fsm_kind_name(mori_fsm_kind kind);

/* Renders the state's invariants from the table ("block: 1 physical
 * handle"; "empty ledger"); returns the length snprintf would. */
int mori__fsm_describe(int s, char *buf, size_t n);

/* ---- the lifecycles without a ledger (lifecycle.c) ----
 *
 * A window's life and a watchdog entry: states, events, the legal rows,
 * and per state what each fact its owner reports may be.  A fact's value
 * is put in a class (a count: 0 none, 1 some; a flag: 0 or 1; a window
 * machine's state: the state) and a state allows a set of classes. */
typedef enum mori__fact_kind {
  MORI__FACT_COUNT,  /* a count: class 0 is none, class 1 any more */
  MORI__FACT_FLAG,   /* 0 or 1 */
  MORI__FACT_WSTATE  /* a mori_wstate */
} mori__fact_kind;

typedef struct mori__fact {
  const char *name; /* and a flag's 1 in words */
  mori__fact_kind kind;
  const char *no;   /* a flag's 0 in words */
} mori__fact;

enum { MORI__MAX_FACTS = 5 };
#define MORI__ANY 0xffffffffu

typedef struct mori__lc_state {
  const char *name;
  unsigned allowed[MORI__MAX_FACTS]; /* bit c: class c allowed */
  const char *words;
} mori__lc_state;

typedef struct mori__lc_event {
  const char *name, *words;
} mori__lc_event;

typedef struct mori__lc_row {
  unsigned char from, event, to;
} mori__lc_row;

typedef struct mori__lifecycle {
  const char *name; /* "window life" */
  const char *id;   /* "life": the prefix of its diagram's nodes */
  const mori__lc_state *states;
  int nstates;
  const mori__lc_event *events;
  int nevents;
  const mori__lc_row *rows;
  size_t nrows;
  const mori__fact *facts;
  int nfacts;
} mori__lifecycle;

extern const mori__lifecycle mori__life_lifecycle, mori__watch_lifecycle;

int mori__lc_next(const mori__lifecycle *lc, int s, int ev);
int mori__lc_fire(const mori__lifecycle *lc, int *s, int ev);
/* facts: lc->nfacts values, -1 where unknown (not checked). */
int mori__lc_check(const mori__lifecycle *lc, int s, const int *facts, char *why, size_t n);
/* What state s requires, in words ("busy 0, listed, window machine
 * MAPPED"); returns the length snprintf would. */
int mori__lc_describe(const mori__lifecycle *lc, int s, char *buf, size_t n);

#endif
