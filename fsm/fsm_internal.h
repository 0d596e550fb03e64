/*
 * fsm_internal.h - the tables behind fsm.h, shared by the machine (fsm.c),
 * the renderers (fsm_dot.c) and the tests that compare the two.
 */
#ifndef MORI_FSM_INTERNAL_H
#define MORI_FSM_INTERNAL_H

#include "mori/fsm.h"

#define MORI__BIT(x) (1u << (unsigned)(x))

/* One legal transition.  `acquires` is the set of resource kinds the
 * transition's work records while the machine still sits in `from`: it is
 * what mori_fsm_push accepts there. */
typedef struct mori__fsm_row {
  unsigned kinds; /* MORI_FSM_BLOCK | MORI_FSM_WINDOW */
  mori_wstate from;
  mori_wevent event;
  mori_wstate to;
  unsigned acquires; /* MORI__BIT(mori_res) */
} mori__fsm_row;

/* A count bound: per_world * world_size + plus. */
typedef struct mori__bound {
  signed char per_world, plus;
} mori__bound;

typedef struct mori__count {
  mori__bound lo, hi;
} mori__count;

/* What the ledger holds on entry to `state` for the kinds in `kinds`;
 * kinds absent from `count` (zero-initialised) must not be held. */
typedef struct mori__fsm_invariant {
  unsigned kinds;
  mori_wstate state;
  mori__count count[MORI_RES__COUNT];
} mori__fsm_invariant;

typedef struct mori__res_info {
  const char *name, *singular, *plural;
  unsigned char per_peer; /* aux is a rank in [0, world_size) */
  unsigned char peer_only; /* ... and never the own rank */
  unsigned char tier;      /* ledger order: tiers never decrease */
  unsigned char deferred;  /* unwound after every other entry */
} mori__res_info;

extern const mori__fsm_row mori__fsm_rows[];
extern const size_t mori__fsm_nrows;
extern const mori__res_info mori__res_infos[MORI_RES__COUNT];

/* The invariant row for (kind, state), or NULL when the kind never
 * reaches that state. */
const mori__fsm_invariant *mori__fsm_invariant_of(mori_fsm_kind kind, mori_wstate s);
int mori__bound_value(mori__bound b, int world_size);
const char *mori__fsm_kind_name(mori_fsm_kind kind);

/* Renders the state's invariants from the table, in the words of
 * mori_wstate_invariants(); returns the length snprintf would. */
int mori__fsm_describe(mori_wstate s, char *buf, size_t n);

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
} mori__lc_state;

typedef struct mori__lc_row {
  unsigned char from, event, to;
} mori__lc_row;

typedef struct mori__lifecycle {
  const char *name; /* "window life" */
  const char *id;   /* "life": the prefix of its diagram's nodes */
  const mori__lc_state *states;
  int nstates;
  const char *const *events;
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
