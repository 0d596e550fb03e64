/*
 * fsm.c - the block and window machines: the transition table and the
 * resource table, expanded from fsm.h's lists; the ledger each state
 * holds, derived from the steps that lead to it; and the functions that
 * move a machine by looking them up.  Nothing here branches on a state;
 * the tables decide.
 *
 * An invariant holds on entry to its state (mori_fsm_fire checks it
 * there).  While the machine sits in a state, the work of the step that
 * leaves it appends the kinds that step adds, so between entry and the
 * next event the ledger is the state's invariant plus a prefix of that
 * step's work; RELEASE or FAIL can unwind it at any point.  FAILED is
 * entered only by mori_fsm_fail, after an error, from any non-terminal
 * state.
 */
#include "fsm_internal.h"

#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- the resource table ---- */

#define RES_INFO(kind, tier, aux, unwind, singular, plural, words) \
  [MORI_RES_##kind] = {#kind, singular, plural, words, tier, MORI__AUX_##aux, MORI__##unwind},
const mori__res_info mori__res_infos[MORI_RES__COUNT] = {MORI_RES_KINDS(RES_INFO)};
#undef RES_INFO

/* ---- the transition table ---- */

#define B MORI_FSM_BLOCK
#define W MORI_FSM_WINDOW

/* The count columns of the steps' `adds`. */
#define N_1 {0, 1}
#define N_PEERS {1, -1}
#define N_RANKS {1, 0}
#define N_PEERS_LESS_1 {1, -2}
#define N_0 {0, 0}
#define EXACTLY(kind, n) [MORI_RES_##kind] = {1, 0, {N_##n, N_##n}}
#define UP_TO(kind, n) [MORI_RES_##kind] = {1, 0, {{0, 0}, N_##n}}
#define ENDS(kind) [MORI_RES_##kind] = {1, 0, {{0, 0}, {0, 0}}}
#define LESS(kind, n) [MORI_RES_##kind] = {1, 1, {N_##n, N_##n}}
#define LESS_UP_TO(kind, n) [MORI_RES_##kind] = {1, 1, {{0, 0}, N_##n}}
#define BETWEEN(kind, lo, hi) [MORI_RES_##kind] = {1, 1, {N_##lo, N_##hi}}
#define NOTHING {0}

#define STEP(k, S, a, ev, b, counts) \
  {.kinds = k, .from = S##a, .event = MORI_EV_##ev, .to = S##b, .adds = {MORI__ID counts}},
#define BLOCK_STEP(from, ev, to, rest, adds, words) STEP(B, MORI_BS_, from, ev, to, adds)
#define WINDOW_STEP(from, ev, to, rest, adds, words) STEP(W, MORI_WS_, from, ev, to, adds)
#define HEAL_BACK(a, ev, b) STEP(W, MORI_WS_, a, ev, b, (NOTHING))
#define FLATTEN_STEP(a, ev, b, adds) STEP(W, MORI_WS_, a, ev, b, adds)
/* BREAK from MAPPED (a heal that fails at its first step) and every state
 * of a heal; RELEASE leaves BROKEN. */
#define HEAL_BREAK_FROM(a, ev, ...) \
  {.kinds = W, .from = MORI_WS_##a, .event = MORI_EV_BREAK, .to = MORI_WS_BROKEN,          \
   .adds = {MORI__APPLY(MORI__ID, MORI_HEAL_BROKEN_ADDS)}},
#define BROKEN_ADDS(to, adds, words) adds
#define MORI_HEAL_BROKEN_ADDS MORI_HEAL_BROKEN(BROKEN_ADDS)
#define HEAL_BROKEN_RELEASE(b, adds, words) RELEASE_RESTS(W, MORI_WS_##b) FAIL(W, MORI_WS_##b)
/* RELEASE leaves the states where a machine rests; FAIL every state. */
#define RELEASE_RESTS(k, s) \
  {.kinds = k, .from = s, .event = MORI_EV_RELEASE, .to = MORI_FSM_RELEASED},
#define RELEASE_PASSES(k, s)
#define BLOCK_RELEASE(from, ev, to, rest, ...) RELEASE_##rest(B, MORI_BS_##to)
#define WINDOW_RELEASE(from, ev, to, rest, ...) RELEASE_##rest(W, MORI_WS_##to)
#define FAIL(k, s) {.kinds = k, .from = s, .event = MORI_EV_FAIL, .to = MORI_FSM_FAILED},
#define BLOCK_FAIL(from, ev, to, ...) FAIL(B, MORI_BS_##to)
#define WINDOW_FAIL(from, ev, to, ...) FAIL(W, MORI_WS_##to)

/* The steps in order are the two machines' forward paths; a driver fires
 * them one after another (mori_fsm_forward).  Then the RELEASE rows, and
 * FAIL from every state a kind passes through. */
const mori__fsm_row mori__fsm_rows[] = {
    MORI_BLOCK_STEPS(BLOCK_STEP) MORI_WINDOW_STEPS(WINDOW_STEP)
    MORI_BLOCK_STEPS(BLOCK_RELEASE) MORI_WINDOW_STEPS(WINDOW_RELEASE)
    FAIL(B | W, MORI_FSM_INIT) MORI_BLOCK_STEPS(BLOCK_FAIL) MORI_WINDOW_STEPS(WINDOW_FAIL)
    /* a heal: after every row above, so that the steps above are the ones
     * entering MAPPED (its ledger is the rendezvous's) */
    MORI_HEAL_STEPS(WINDOW_STEP) MORI_HEAL_BACK(HEAL_BACK) MORI_HEAL_STEPS(HEAL_BREAK_FROM)
    MORI_HEAL_BACK(HEAL_BREAK_FROM)
    MORI_HEAL_STEPS(WINDOW_FAIL) MORI_HEAL_BROKEN(HEAL_BROKEN_RELEASE)
    /* last: MAPPED's forward event stays the heal's first */
    MORI_WINDOW_FLATTEN(FLATTEN_STEP)
};
const size_t mori__fsm_nrows = sizeof mori__fsm_rows / sizeof mori__fsm_rows[0];

/* ---- names and words ---- */

#define BLOCK_NAME(from, ev, to, ...) [MORI_BS_##to] = #to,
#define WINDOW_NAME(from, ev, to, ...) [MORI_WS_##to] = #to,
#define BROKEN_NAME(to, ...) [MORI_WS_##to] = #to,
static const char *const state_names[MORI_FSM_NSTATES] = {
    [MORI_FSM_INIT] = "INIT", MORI_BLOCK_STEPS(BLOCK_NAME) MORI_WINDOW_STEPS(WINDOW_NAME)
    MORI_HEAL_STEPS(WINDOW_NAME) MORI_HEAL_BROKEN(BROKEN_NAME)
    [MORI_FSM_RELEASED] = "RELEASED", [MORI_FSM_FAILED] = "FAILED",
};

#define BLOCK_WORDS(from, ev, to, rest, adds, words) [MORI_BS_##to] = words,
#define WINDOW_WORDS(from, ev, to, rest, adds, words) [MORI_WS_##to] = words,
#define BROKEN_WORDS(to, adds, words) [MORI_WS_##to] = words,
static const char *const state_words[MORI_FSM_NSTATES] = {
    [MORI_FSM_INIT] = "a fresh machine: a block creates its physical handle from here, a window "
                     "records the block it borrows",
    MORI_BLOCK_STEPS(BLOCK_WORDS) MORI_WINDOW_STEPS(WINDOW_WORDS)
    MORI_HEAL_STEPS(WINDOW_WORDS) MORI_HEAL_BROKEN(BROKEN_WORDS)
    [MORI_FSM_RELEASED] = "terminal: the ledger was unwound in reverse order",
    [MORI_FSM_FAILED] = "terminal: after an error, the ledger was rolled back in reverse order",
};

#define EVENT_NAME(ev) #ev,
static const char *const event_names[MORI_EV__COUNT] = {MORI_EVENTS(EVENT_NAME)};

#undef B
#undef W
#undef N_1
#undef N_PEERS
#undef N_RANKS
#undef N_PEERS_LESS_1
#undef N_0
#undef LESS
#undef LESS_UP_TO
#undef BETWEEN
#undef EXACTLY
#undef UP_TO
#undef ENDS
#undef NOTHING
#undef FAIL

const char *mori_fsm_state_name(int s) {
  return s >= 0 && s < MORI_FSM_NSTATES ? state_names[s] : "?";
}

const char *mori__fsm_state_words(int s) {
  return s >= 0 && s < MORI_FSM_NSTATES ? state_words[s] : "?";
}

const char *mori_wevent_name(mori_wevent e) {
  return (unsigned)e < MORI_EV__COUNT ? event_names[e] : "?";
}

const char *mori_res_name(mori_res r) {
  return (unsigned)r < MORI_RES__COUNT ? mori__res_infos[r].name : "?";
}

const char *mori__fsm_kind_name(mori_fsm_kind kind) {
  return kind == MORI_FSM_BLOCK ? "block" : kind == MORI_FSM_WINDOW ? "window" : "?";
}

int mori__bound_value(mori__bound b, int world_size) { return b.per_world * world_size + b.plus; }

static int valid_kind(mori_fsm_kind kind) {
  return kind == MORI_FSM_BLOCK || kind == MORI_FSM_WINDOW;
}

static const mori__fsm_row *find_row(mori_fsm_kind kind, int s, mori_wevent ev) {
  if (!valid_kind(kind)) return NULL;
  for (size_t i = 0; i < mori__fsm_nrows; i++) {
    const mori__fsm_row *r = &mori__fsm_rows[i];
    if ((r->kinds & (unsigned)kind) && r->from == s && r->event == ev) return r;
  }
  return NULL;
}

/* ---- what the rows imply, derived once ----
 *
 * The rows never change, but every fire, push and check asked them the
 * same questions again: a check scanned every row once per ledger entry
 * (which machine kinds own this kind?), mori_fsm_forward scanned every
 * row for each row it looked at (is its target terminal?), and each drive
 * walked every state's path from INIT (how large can the ledger grow?):
 * about half of an allocation's time on the sim.  One pass over the rows
 * answers them all, once per process (pthread_once, run when the library
 * is loaded), and the calls below look the answers up. */

#define NROWS (sizeof mori__fsm_rows / sizeof mori__fsm_rows[0])
#define KIND_INDEX(kind) ((kind) == MORI_FSM_BLOCK ? 0 : 1)

static struct {
  unsigned acquires[NROWS];           /* mori__fsm_acquires of each row */
  unsigned owners[MORI_RES__COUNT];   /* mori__fsm_owners */
  unsigned char leaves[MORI_FSM_NSTATES]; /* some row leaves the state */
  struct derived_state {
    short enter;                       /* the first row of the kind entering it, -1: none */
    signed char forward;               /* mori_fsm_forward's event, -1: none */
    int reached;                       /* mori__fsm_ledger returns 0 (1) or -1 (0) */
    unsigned acquirable;               /* what the rows leaving it acquire */
    mori__count held[MORI_RES__COUNT]; /* mori__fsm_ledger */
  } at[2][MORI_FSM_NSTATES];           /* [KIND_INDEX(kind)][state] */
} derived;

static pthread_once_t derived_once = PTHREAD_ONCE_INIT;
static int derived_done; /* derive() ran: mori__fsm_derived, for the tests */
static void derive(void);

/* Before any answer below is read; never inside derive(). */
static void derive_once(void) { pthread_once(&derived_once, derive); }

/* When the library is loaded, not at a process's first allocation: the
 * pass fills tables none of whose pages was touched yet, one of a first
 * allocation's larger pieces of host work besides the runtime's calls
 * (docs/performance.md, "Call by call").  It calls no runtime. */
__attribute__((constructor)) static void derive_at_load(void) { derive_once(); }

int mori__fsm_derived(void) { return __atomic_load_n(&derived_done, __ATOMIC_ACQUIRE); }

static int in_range(int s) { return s >= 0 && s < MORI_FSM_NSTATES; }

/* A state no row leaves. */
static int terminal(int s) { return !in_range(s) || !derived.leaves[s]; }

static int is_terminal(int s) {
  derive_once();
  return terminal(s);
}

/* The kinds a row's adds may record, from its columns. */
static unsigned acquires_of(const mori__fsm_row *r) {
  unsigned mask = 0;
  for (int k = 0; k < MORI_RES__COUNT; k++) {
    mori__bound hi = r->adds[k].count.hi;
    if (r->adds[k].set && !r->adds[k].gives_back && (hi.per_world != 0 || hi.plus != 0))
      mask |= MORI__BIT(k);
  }
  return mask;
}

unsigned mori__fsm_acquires(const mori__fsm_row *r) {
  uintptr_t at = (uintptr_t)r, first = (uintptr_t)mori__fsm_rows;
  if (at < first || at >= first + sizeof mori__fsm_rows) return acquires_of(r); /* a copy */
  derive_once();
  return derived.acquires[(at - first) / sizeof *r];
}

/* The step of kind that enters s (a state no RELEASE or FAIL reaches). */
static const mori__fsm_row *entering(mori_fsm_kind kind, int s) {
  int i = in_range(s) ? derived.at[KIND_INDEX(kind)][s].enter : -1;
  return i >= 0 ? &mori__fsm_rows[i] : NULL;
}

/* INIT and the terminal states hold nothing; any other state holds what
 * the steps from INIT to it set, the later step's count winning.  Walked
 * once per state, in derive(). */
static int ledger_walk(mori_fsm_kind kind, int s, mori__count out[MORI_RES__COUNT]) {
  const mori__fsm_row *path[MORI_FSM_NSTATES];
  int n = 0;
  memset(out, 0, MORI_RES__COUNT * sizeof out[0]);
  if (!valid_kind(kind) || s < 0 || s >= MORI_FSM_NSTATES) return -1;
  if (s == MORI_FSM_INIT || terminal(s)) return 0;
  for (int at = s; at != MORI_FSM_INIT; at = path[n - 1]->from) {
    const mori__fsm_row *r = entering(kind, at);
    if (r == NULL || n == MORI_FSM_NSTATES) return -1;
    path[n++] = r;
  }
  while (n-- > 0)
    for (int k = 0; k < MORI_RES__COUNT; k++)
      if (path[n]->adds[k].set) out[k] = path[n]->adds[k].count;
  return 0;
}

int mori__fsm_ledger(mori_fsm_kind kind, int s, mori__count out[MORI_RES__COUNT]) {
  memset(out, 0, MORI_RES__COUNT * sizeof out[0]);
  if (!valid_kind(kind) || !in_range(s)) return -1;
  derive_once();
  const struct derived_state *at = &derived.at[KIND_INDEX(kind)][s];
  memcpy(out, at->held, sizeof at->held);
  return at->reached ? 0 : -1;
}

/* The resource kinds the outgoing transitions of (kind, s) acquire. */
static unsigned acquirable(mori_fsm_kind kind, int s) {
  if (!valid_kind(kind) || !in_range(s)) return 0;
  derive_once();
  return derived.at[KIND_INDEX(kind)][s].acquirable;
}

/* The machine kinds whose transitions acquire resource kind r. */
unsigned mori__fsm_owners(mori_res r) {
  if ((unsigned)r >= MORI_RES__COUNT) return 0;
  derive_once();
  return derived.owners[r];
}

/* One pass over the rows in order (so "the first row" means what a scan
 * from the top found), then each state's ledger along its path. */
static void derive(void) {
  static const mori_fsm_kind kinds[2] = {MORI_FSM_BLOCK, MORI_FSM_WINDOW};
  _Static_assert(NROWS <= 32767 && MORI_EV__COUNT <= 127, "derived's fields hold the table");
  for (int k = 0; k < 2; k++)
    for (int s = 0; s < MORI_FSM_NSTATES; s++) {
      derived.at[k][s].enter = -1;
      derived.at[k][s].forward = -1;
    }
  for (size_t i = 0; i < NROWS; i++) {
    const mori__fsm_row *r = &mori__fsm_rows[i];
    derived.acquires[i] = acquires_of(r);
    for (int res = 0; res < MORI_RES__COUNT; res++)
      if (derived.acquires[i] & MORI__BIT(res)) derived.owners[res] |= r->kinds;
    if (in_range(r->from)) derived.leaves[r->from] = 1;
  }
  for (size_t i = 0; i < NROWS; i++) { /* terminal() answers from here on */
    const mori__fsm_row *r = &mori__fsm_rows[i];
    for (int k = 0; k < 2; k++) {
      if (!(r->kinds & (unsigned)kinds[k])) continue;
      if (in_range(r->from)) {
        struct derived_state *from = &derived.at[k][r->from];
        from->acquirable |= derived.acquires[i];
        if (from->forward < 0 && !terminal(r->to)) from->forward = (signed char)r->event;
      }
      if (in_range(r->to) && derived.at[k][r->to].enter < 0) derived.at[k][r->to].enter = (short)i;
    }
  }
  for (int k = 0; k < 2; k++)
    for (int s = 0; s < MORI_FSM_NSTATES; s++)
      derived.at[k][s].reached = ledger_walk(kinds[k], s, derived.at[k][s].held) == 0;
  __atomic_store_n(&derived_done, 1, __ATOMIC_RELEASE);
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int say(mori_fsm *m, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->why, sizeof m->why, fmt, ap);
  va_end(ap);
  return rc;
}

int mori_fsm_next(mori_fsm_kind kind, int state, mori_wevent ev) {
  const mori__fsm_row *r = find_row(kind, state, ev);
  return r ? (int)r->to : -1;
}

/* A forward row leads to a non-terminal state: not RELEASE, not FAIL. */
int mori_fsm_forward(mori_fsm_kind kind, int state) {
  if (!valid_kind(kind) || !in_range(state)) return -1;
  derive_once();
  return derived.at[KIND_INDEX(kind)][state].forward;
}

/* ---- the ledger's memory ---- */

static void *libc_alloc(void *ptr, size_t size) {
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, size);
}

static mori_fsm_alloc_fn ledger_alloc = libc_alloc;

void mori_fsm_set_allocator(mori_fsm_alloc_fn fn) { ledger_alloc = fn ? fn : libc_alloc; }

size_t mori_fsm_capacity(const mori_fsm *m) {
  size_t most = 0;
  for (int s = 0; s < MORI_FSM_NSTATES; s++) {
    mori__count held[MORI_RES__COUNT];
    if (mori__fsm_ledger(m->kind, s, held) != 0) continue;
    size_t n = 0;
    for (int r = 0; r < MORI_RES__COUNT; r++) {
      int hi = mori__bound_value(held[r].hi, m->world_size);
      n += hi > 0 ? (size_t)hi : 0;
    }
    if (n > most) most = n;
  }
  return most;
}

static int grow(mori_fsm *m, size_t cap, const char *why) {
  if (cap <= m->cap) return MORI_FSM_OK;
  mori_ledger_entry *grown = ledger_alloc(m->ledger, cap * sizeof *grown);
  if (grown == NULL)
    return say(m, MORI_FSM_ENOMEM, "%s: no memory for a ledger of %zu entries", why, cap);
  m->ledger = grown;
  m->cap = cap;
  return MORI_FSM_OK;
}

int mori_fsm_reserve(mori_fsm *m, size_t n) {
  if (is_terminal(m->state.id))
    return say(m, MORI_FSM_ETERMINAL, "reserve: machine is %s", mori_fsm_state_name(m->state.id));
  return grow(m, m->len + n, "reserve");
}

void mori_fsm_init(mori_fsm *m, mori_fsm_kind kind, int rank, int world_size) {
  assert(valid_kind(kind));
  memset(m, 0, sizeof *m);
  m->kind = kind;
  m->state.id = MORI_FSM_INIT;
  m->rank = rank;
  m->world_size = world_size;
}

void mori_fsm_destroy(mori_fsm *m) {
  /* A live machine still owns resources that nothing would release. */
  assert(m->len == 0 && (m->state.id == MORI_FSM_INIT || is_terminal(m->state.id)));
  if (m->ledger != NULL) (void)ledger_alloc(m->ledger, 0);
  m->ledger = NULL;
  m->len = m->cap = 0;
}

size_t mori_fsm_count(const mori_fsm *m, mori_res kind) {
  size_t n = 0;
  for (size_t i = 0; i < m->len; i++) n += m->ledger[i].kind == kind;
  return n;
}

/* The caller's resource exists once it reaches us: a push of a kind the
 * state allows is recorded even if it breaks an invariant, so that rollback
 * releases it; mori_fsm_fire reports the breakage. */
int mori_fsm_push(mori_fsm *m, mori_res kind, uintptr_t value, size_t size, int aux) {
  const char *sn = mori_fsm_state_name(m->state.id);
  if (is_terminal(m->state.id))
    return say(m, MORI_FSM_ETERMINAL, "push %s: machine is %s", mori_res_name(kind), sn);
  if ((unsigned)kind >= MORI_RES__COUNT || !(acquirable(m->kind, m->state.id) & MORI__BIT(kind)))
    return say(m, MORI_FSM_EILLEGAL, "push %s: not acquired in %s (%s)", mori_res_name(kind), sn,
               mori__fsm_kind_name(m->kind));
  if (m->len == m->cap) {
    int rc = grow(m, m->cap ? 2 * m->cap : 8, mori_res_name(kind));
    if (rc != MORI_FSM_OK) return rc;
  }
  /* after every entry of its tier or a lower one: an append on the way to
   * MAPPED (tiers never fall there), its tier's place in a heal */
  size_t at = m->len;
  while (at > 0 && mori__res_infos[m->ledger[at - 1].kind].tier > mori__res_infos[kind].tier) at--;
  memmove(&m->ledger[at + 1], &m->ledger[at], (m->len - at) * sizeof m->ledger[0]);
  m->ledger[at] = (mori_ledger_entry){kind, value, size, aux};
  m->len++;
  return MORI_FSM_OK;
}

int mori_fsm_forget(mori_fsm *m, mori_res kind, uintptr_t value) {
  if (is_terminal(m->state.id))
    return say(m, MORI_FSM_ETERMINAL, "forget %s: machine is %s", mori_res_name(kind),
               mori_fsm_state_name(m->state.id));
  for (size_t i = m->len; i-- > 0;) {
    if (m->ledger[i].kind != kind || m->ledger[i].value != value) continue;
    memmove(&m->ledger[i], &m->ledger[i + 1], (m->len - i - 1) * sizeof m->ledger[0]);
    m->len--;
    return MORI_FSM_OK;
  }
  return say(m, MORI_FSM_EILLEGAL, "forget %s 0x%lx: not in the ledger", mori_res_name(kind),
             (unsigned long)value);
}

int mori_fsm_fire(mori_fsm *m, mori_wevent ev) {
  const char *sn = mori_fsm_state_name(m->state.id), *en = mori_wevent_name(ev);
  if (is_terminal(m->state.id)) return say(m, MORI_FSM_ETERMINAL, "%s: machine is %s", en, sn);
  const mori__fsm_row *r = find_row(m->kind, m->state.id, ev);
  if (r == NULL)
    return say(m, MORI_FSM_EILLEGAL, "%s: not legal in %s (%s)", en, sn,
               mori__fsm_kind_name(m->kind));
  if (is_terminal(r->to))
    return say(m, MORI_FSM_EILLEGAL, "%s: unwinds the ledger; use mori_fsm_release/fail", en);
  /* Move, check, and move back on a broken ledger: a failed fire leaves
   * the machine where it was, ready for mori_fsm_fail. */
  int from = m->state.id;
  m->state.id = r->to;
  int rc = mori_fsm_check(m);
  if (rc != 0) m->state.id = from;
  return rc;
}

/* The entries an unwind gives back through the callback. */
static size_t given_back(const mori_fsm *m) {
  size_t n = 0;
  for (size_t i = 0; i < m->len; i++)
    n += mori__res_infos[m->ledger[i].kind].unwind != MORI__BORROWED;
  return n;
}

static int unwind(mori_fsm *m, mori_wevent ev, mori_release_fn fn, void *ctx) {
  const char *sn = mori_fsm_state_name(m->state.id), *en = mori_wevent_name(ev);
  if (is_terminal(m->state.id)) return say(m, MORI_FSM_ETERMINAL, "%s: machine is %s", en, sn);
  const mori__fsm_row *r = find_row(m->kind, m->state.id, ev);
  if (r == NULL)
    return say(m, MORI_FSM_EILLEGAL, "%s: not legal in %s (%s)", en, sn,
               mori__fsm_kind_name(m->kind));
  if (fn == NULL && given_back(m) > 0)
    return say(m, MORI_FSM_EILLEGAL, "%s: %zu entries and no release callback", en, m->len);
  /* Reverse order in two passes: LAST kinds after everything else, and
   * BORROWED ones (not ours to release) in neither. */
  static const unsigned char passes[] = {MORI__IN_ORDER, MORI__LAST};
  int first = 0;
  for (size_t pass = 0; pass < 2; pass++)
    for (size_t i = m->len; i-- > 0;) {
      mori_ledger_entry e = m->ledger[i];
      if (mori__res_infos[e.kind].unwind != passes[pass]) continue;
      int rc = fn(ctx, &e);
      if (rc != 0 && first == 0)
        first = say(m, rc, "%s: releasing %s 0x%lx (aux %d) returned %d", en,
                    mori_res_name(e.kind), (unsigned long)e.value, e.aux, rc);
    }
  m->len = 0;
  m->state.id = r->to;
  return first;
}

int mori_fsm_release(mori_fsm *m, mori_release_fn fn, void *ctx) {
  return unwind(m, MORI_EV_RELEASE, fn, ctx);
}

int mori_fsm_fail(mori_fsm *m, mori_release_fn fn, void *ctx) {
  return unwind(m, MORI_EV_FAIL, fn, ctx);
}

/* ---- assert_window_state() ---- */

/* Per entry: a known kind, owned by this machine kind, a per-peer aux in
 * range (and not the own rank where the peer is remote), tiers in order. */
static int check_entries(mori_fsm *m, const char *sn) {
  unsigned prev_tier = 0;
  mori_res prev = MORI_RES__COUNT;
  for (size_t i = 0; i < m->len; i++) {
    const mori_ledger_entry *e = &m->ledger[i];
    if ((unsigned)e->kind >= MORI_RES__COUNT)
      return say(m, MORI_FSM_EINVARIANT, "%s: entry %zu has unknown kind %d", sn, i, (int)e->kind);
    const mori__res_info *info = &mori__res_infos[e->kind];
    if (!(mori__fsm_owners(e->kind) & (unsigned)m->kind))
      return say(m, MORI_FSM_EINVARIANT, "%s: %s in a %s ledger", sn, info->name,
                 mori__fsm_kind_name(m->kind));
    if (info->aux != MORI__AUX_NONE && (e->aux < 0 || e->aux >= m->world_size))
      return say(m, MORI_FSM_EINVARIANT, "%s: %s aux %d outside the world of %d", sn, info->name,
                 e->aux, m->world_size);
    if (info->aux == MORI__AUX_PEER && e->aux == m->rank)
      return say(m, MORI_FSM_EINVARIANT, "%s: %s from own rank %d", sn, info->name, e->aux);
    if (info->tier < prev_tier)
      return say(m, MORI_FSM_EINVARIANT, "%s: %s recorded after %s", sn, info->name,
                 mori_res_name(prev));
    prev_tier = info->tier;
    prev = e->kind;
  }
  return 0;
}

/* No two entries of a per-peer kind for one peer.  Quadratic, but a
 * ledger holds about three entries per rank and this allocates nothing. */
static int check_peers(mori_fsm *m, const char *sn) {
  for (size_t i = 0; i < m->len; i++) {
    if (mori__res_infos[m->ledger[i].kind].aux == MORI__AUX_NONE) continue;
    for (size_t j = i + 1; j < m->len; j++)
      if (m->ledger[j].kind == m->ledger[i].kind && m->ledger[j].aux == m->ledger[i].aux)
        return say(m, MORI_FSM_EINVARIANT, "%s: two %s entries for rank %d", sn,
                   mori_res_name(m->ledger[i].kind), m->ledger[i].aux);
  }
  return 0;
}

static int check_counts(mori_fsm *m, const char *sn, const mori__count inv[MORI_RES__COUNT]) {
  size_t n[MORI_RES__COUNT] = {0};
  for (size_t i = 0; i < m->len; i++) n[m->ledger[i].kind]++;
  for (int r = 0; r < MORI_RES__COUNT; r++) {
    int lo = mori__bound_value(inv[r].lo, m->world_size);
    int hi = mori__bound_value(inv[r].hi, m->world_size);
    if ((long)n[r] >= lo && (long)n[r] <= hi) continue;
    const mori__res_info *info = &mori__res_infos[r];
    const char *noun = n[r] == 1 ? info->singular : info->plural;
    if (lo == hi) return say(m, MORI_FSM_EINVARIANT, "%s: %zu %s, expected %d", sn, n[r], noun, lo);
    return say(m, MORI_FSM_EINVARIANT, "%s: %zu %s, expected %d..%d", sn, n[r], noun, lo, hi);
  }
  return 0;
}

int mori_fsm_check(mori_fsm *m) {
  const char *sn = mori_fsm_state_name(m->state.id);
  mori__count inv[MORI_RES__COUNT];
  if (mori__fsm_ledger(m->kind, m->state.id, inv) != 0)
    return say(m, MORI_FSM_EINVARIANT, "%s: not a state of a %s machine", sn,
               mori__fsm_kind_name(m->kind));
  if (m->kind == MORI_FSM_WINDOW && (m->rank < 0 || m->rank >= m->world_size))
    return say(m, MORI_FSM_EINVARIANT, "%s: rank %d outside the world of %d", sn, m->rank,
               m->world_size);
  int rc = check_entries(m, sn);
  if (rc == 0) rc = check_peers(m, sn);
  if (rc == 0) rc = check_counts(m, sn, inv);
  return rc;
}
