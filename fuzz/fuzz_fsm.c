/*
 * fuzz_fsm.c - fuzz target for the block and window state machines.  The input is a
 * sequence of push/forget/fire/release/fail operations on one machine; a
 * model read here from fsm.h's lists (the steps, a window's heal, the
 * resource kinds' columns), with its own reading of what they mean, runs
 * beside it and must agree on every return code, every state, every ledger
 * entry and its place, the order of every release, and on what
 * mori_fsm_check says after each step.
 *
 * Input: kind byte (bit 0: window), world byte, rank byte, then operations:
 *   0 push kind value aux | 1 forget kind value | 2 fire event | 3 release | 4 fail
 * A released value with bit 7 set makes the release callback fail.
 */
#include "fuzz.h"

#include <string.h>

#include "mori/fsm.h"

#define BIT(r) (1u << (unsigned)(r))
#define B MORI_FSM_BLOCK
#define W MORI_FSM_WINDOW
#define MAX_LEDGER 4096
#define MAX_WORLD 8 /* windows of 0..MAX_WORLD ranks (0 and rank == world are invalid) */
#define UNWRAP(...) __VA_ARGS__

/* ---- the model: fsm.h's lists, read as fsm.h documents them ---- */

/* A count on entry to a step's `to`: lo_w * world_size + lo .. hi_w * world_size + hi;
 * set 0: the step leaves the kind's count as it was.  `gives` says how
 * the step came to it without recording anything: GAVE_ONE, a heal's LESS
 * or LESS_UP_TO (one rank's entry given back, so one below what `from`
 * held); LIES, a BREAK's BETWEEN (wherever the heal left it). */
typedef struct bound {
  int set, gives, lo_w, lo, hi_w, hi;
} bound;

#define RECORDS 0
#define GAVE_ONE 1
#define LIES 2
#define N_0 0, 0
#define N_1 0, 1
#define N_PEERS 1, -1
#define N_PEERS_LESS_1 1, -2
#define N_RANKS 1, 0
#define EXACTLY(kind, n) [MORI_RES_##kind] = {1, RECORDS, N_##n, N_##n}
#define UP_TO(kind, n) [MORI_RES_##kind] = {1, RECORDS, 0, 0, N_##n}
#define ENDS(kind) [MORI_RES_##kind] = {1, RECORDS, 0, 0, 0, 0}
#define LESS(kind, n) [MORI_RES_##kind] = {1, GAVE_ONE, N_##n, N_##n}
#define LESS_UP_TO(kind, n) [MORI_RES_##kind] = {1, GAVE_ONE, 0, 0, N_##n}
#define BETWEEN(kind, lo, hi) [MORI_RES_##kind] = {1, LIES, N_##lo, N_##hi}
#define NOTHING {0, 0, 0, 0, 0, 0}
#define RESTS 1
#define PASSES 0

typedef struct step {
  unsigned kind;
  int from;
  mori_wevent ev;
  int to, rests;
  bound adds[MORI_RES__COUNT];
} step;

#define BLOCK_STEP(a, ev, b, rest, adds, words) \
  {B, MORI_BS_##a, MORI_EV_##ev, MORI_BS_##b, rest, {UNWRAP adds}},
#define WINDOW_STEP(a, ev, b, rest, adds, words) \
  {W, MORI_WS_##a, MORI_EV_##ev, MORI_WS_##b, rest, {UNWRAP adds}},
/* A heal's way back to MAPPED, which rests by the step above that enters it. */
#define HEAL_BACK(a, ev, b) {W, MORI_WS_##a, MORI_EV_##ev, MORI_WS_##b, PASSES, {NOTHING}},
/* The own slot of the span, mapped at the first mori_window_span: MAPPED
 * back to MAPPED, which rests by the step that first entered it. */
#define FLATTEN_STEP(a, ev, b, adds) {W, MORI_WS_##a, MORI_EV_##ev, MORI_WS_##b, PASSES, {UNWRAP adds}},
/* BREAK leaves MAPPED (a heal that fails at its first step) and every
 * state of a heal, each a `from` of the heal's steps or of its way back,
 * for BROKEN, which rests; its ledger is MORI_HEAL_BROKEN's. */
#define BROKEN_STATE(to, adds, words) MORI_WS_##to
#define BROKEN_ADDS(to, adds, words) UNWRAP adds
#define HEAL_BREAK(a, ...)                                                  \
  {W, MORI_WS_##a, MORI_EV_BREAK, MORI_HEAL_BROKEN(BROKEN_STATE), RESTS, \
   {MORI_HEAL_BROKEN(BROKEN_ADDS)}},
static const step steps[] = {MORI_BLOCK_STEPS(BLOCK_STEP) MORI_WINDOW_STEPS(WINDOW_STEP)
                             MORI_HEAL_STEPS(WINDOW_STEP) MORI_HEAL_BACK(HEAL_BACK)
                             MORI_HEAL_STEPS(HEAL_BREAK) MORI_HEAL_BACK(HEAL_BREAK)
                             MORI_WINDOW_FLATTEN(FLATTEN_STEP)};
#define NSTEPS (sizeof steps / sizeof steps[0])

/* The resource kinds' columns: the tier is the ledger's order (received
 * fds and imports alternate peer by peer, so they share one); an aux that
 * is a rank, one that is a peer's; given back last, or never. */
#define AUX_NONE 0
#define AUX_RANK 1
#define AUX_PEER 2
#define UNWIND_IN_ORDER 0
#define UNWIND_LAST 1
#define UNWIND_BORROWED 2
static const struct {
  unsigned char tier, aux, unwind;
} kinds[MORI_RES__COUNT] = {
#define KIND(kind, tier, aux, unwind, ...) [MORI_RES_##kind] = {tier, AUX_##aux, UNWIND_##unwind},
    MORI_RES_KINDS(KIND)
#undef KIND
};

/* Each state's counts on entry, built once along the lists: a step's `to`
 * holds what its `from` held, changed by the step's adds.  INIT, RELEASED
 * and FAILED hold nothing. */
static struct {
  int reached[MORI_FSM_NSTATES + 1];
  bound count[MORI_FSM_NSTATES][MORI_RES__COUNT];
} spec_states[W + 1];

static int same_bounds(const bound *a, const bound *b) {
  return a->lo_w == b->lo_w && a->lo == b->lo && a->hi_w == b->hi_w && a->hi == b->hi;
}

/* A LESS: one entry fewer than `from` held at most, and at least (a
 * count that could be 0 stays 0 there). */
static int one_less(const bound *from, const bound *to) {
  int lo_ok = from->lo_w == 0 && from->lo == 0 ? to->lo_w == 0 && to->lo == 0
                                               : to->lo_w == from->lo_w && to->lo == from->lo - 1;
  return lo_ok && to->hi_w == from->hi_w && to->hi == from->hi - 1;
}

static void build_states(void) {
  for (unsigned k = B; k <= W; k <<= 1) {
    spec_states[k].reached[MORI_FSM_INIT] = 1;
    spec_states[k].reached[MORI_FSM_RELEASED] = 1;
    spec_states[k].reached[MORI_FSM_FAILED] = 1;
  }
  for (size_t i = 0; i < NSTEPS; i++) {
    const step *st = &steps[i];
    bound to[MORI_RES__COUNT];
    MORI_FUZZ_CHECK(spec_states[st->kind].reached[st->from], "step %zu leaves %s before any step "
                    "enters it", i, mori_fsm_state_name(st->from));
    memcpy(to, spec_states[st->kind].count[st->from], sizeof to);
    for (int r = 0; r < MORI_RES__COUNT; r++) {
      if (!st->adds[r].set) continue;
      MORI_FUZZ_CHECK(st->adds[r].gives != GAVE_ONE || one_less(&to[r], &st->adds[r]),
                      "step %zu: %s's LESS is not one below what %s holds", i,
                      mori_res_name((mori_res)r), mori_fsm_state_name(st->from));
      to[r] = st->adds[r];
    }
    /* A state's ledger does not depend on the way in: the heal's way back
     * to MAPPED, and BREAK from each state of it, agree with the first. */
    if (spec_states[st->kind].reached[st->to])
      for (int r = 0; r < MORI_RES__COUNT; r++)
        MORI_FUZZ_CHECK(same_bounds(&to[r], &spec_states[st->kind].count[st->to][r]),
                        "step %zu enters %s with another bound on %s than an earlier step", i,
                        mori_fsm_state_name(st->to), mori_res_name((mori_res)r));
    memcpy(spec_states[st->kind].count[st->to], to, sizeof to);
    spec_states[st->kind].reached[st->to] = 1;
  }
}

static int terminal(int s) { return s == MORI_FSM_RELEASED || s == MORI_FSM_FAILED; }

/* Where (kind, s) goes on ev: a step, RELEASE from a state a step enters
 * to rest, FAIL from every state but the terminal ones; -1 otherwise. */
static int spec_next(mori_fsm_kind kind, int s, mori_wevent ev) {
  if (s < 0 || s >= MORI_FSM_NSTATES || terminal(s) || !spec_states[kind].reached[s]) return -1;
  if (ev == MORI_EV_FAIL) return MORI_FSM_FAILED;
  for (size_t i = 0; i < NSTEPS; i++) {
    if (steps[i].kind != (unsigned)kind) continue;
    if (ev == MORI_EV_RELEASE && steps[i].to == s && steps[i].rests) return MORI_FSM_RELEASED;
    if (ev != MORI_EV_RELEASE && steps[i].from == s && steps[i].ev == ev) return steps[i].to;
  }
  return -1;
}

/* What a step leaving (kind, s) records: its adds that may be above 0,
 * but not a count it reached by giving back or by breaking. */
static unsigned spec_acquires(mori_fsm_kind kind, int s) {
  unsigned mask = 0;
  for (size_t i = 0; i < NSTEPS; i++) {
    if (steps[i].kind != (unsigned)kind || steps[i].from != s) continue;
    for (int r = 0; r < MORI_RES__COUNT; r++) {
      const bound *b = &steps[i].adds[r];
      if (b->set && b->gives == RECORDS && (b->hi_w != 0 || b->hi != 0)) mask |= BIT(r);
    }
  }
  return mask;
}

typedef struct model {
  mori_fsm_kind kind;
  int state;
  int rank, world;
  mori_ledger_entry ledger[MAX_LEDGER];
  size_t len;
} model;

/* Field by field: the struct has padding that memcmp would compare. */
static int same_entry(const mori_ledger_entry *a, const mori_ledger_entry *b) {
  return a->kind == b->kind && a->value == b->value && a->size == b->size && a->aux == b->aux;
}

static int counts_hold(const model *md, int s, const size_t n[MORI_RES__COUNT]) {
  if (!spec_states[md->kind].reached[s]) return 0; /* a state this kind never reaches */
  for (int r = 0; r < MORI_RES__COUNT; r++) {
    const bound *b = &spec_states[md->kind].count[s][r];
    long lo = (long)b->lo_w * md->world + b->lo, hi = (long)b->hi_w * md->world + b->hi;
    if ((long)n[r] < lo || (long)n[r] > hi) return 0;
  }
  return 1;
}

/* What mori_fsm_check must say about the model sitting in state s. */
static int invariant_holds(const model *md, int s) {
  size_t n[MORI_RES__COUNT] = {0};
  unsigned char taken[MORI_RES__COUNT][MAX_WORLD] = {{0}}; /* per-peer kind x rank */
  if (md->kind == W && (md->rank < 0 || md->rank >= md->world)) return 0;
  for (size_t i = 0; i < md->len; i++) {
    const mori_ledger_entry *e = &md->ledger[i];
    if (i > 0 && kinds[e->kind].tier < kinds[md->ledger[i - 1].kind].tier) return 0;
    if (kinds[e->kind].aux != AUX_NONE) {
      if (e->aux < 0 || e->aux >= md->world) return 0;
      if (kinds[e->kind].aux == AUX_PEER && e->aux == md->rank) return 0;
      if (taken[e->kind][e->aux]++) return 0; /* a second entry for one peer */
    }
    n[e->kind]++;
  }
  return counts_hold(md, s, n);
}

/* ---- the operations, applied to both ---- */

typedef struct released {
  mori_ledger_entry entry[MAX_LEDGER];
  size_t n;
} released;

static int release_cb(void *ctx, const mori_ledger_entry *e) {
  released *log = ctx;
  MORI_FUZZ_CHECK(log->n < MAX_LEDGER, "release callback called more often than entries exist");
  log->entry[log->n++] = *e;
  return (e->value & 0x80) ? -100 - (int)(e->value & 0x7f) : 0;
}

static void op_push(mori_fsm *m, model *md, mori__fuzz_reader *in) {
  mori_res kind = (mori_res)((int)(mori__fuzz_u8(in) % (MORI_RES__COUNT + 2)) - 1);
  uintptr_t value = mori__fuzz_u8(in);
  int aux = (int)(mori__fuzz_u8(in) % (unsigned)(md->world + 2)) - 1;
  int want = MORI_FSM_OK;
  if (terminal(md->state))
    want = MORI_FSM_ETERMINAL;
  else if ((unsigned)kind >= MORI_RES__COUNT || !(spec_acquires(md->kind, md->state) & BIT(kind)))
    want = MORI_FSM_EILLEGAL;
  else if (md->len == MAX_LEDGER)
    return; /* the model's capacity, not the machine's */
  int rc = mori_fsm_push(m, kind, value, 0, aux);
  MORI_FUZZ_CHECK(rc == want, "push %s in %s: %d, expected %d (%s)", mori_res_name(kind),
                  mori_fsm_state_name(md->state), rc, want, m->why);
  if (rc != MORI_FSM_OK) return;
  /* Its tier's place: after the last entry of its tier or a lower one
   * (the end, on the way to MAPPED; inside the ledger, in a heal). */
  size_t at = 0;
  for (size_t i = 0; i < md->len; i++)
    if (kinds[md->ledger[i].kind].tier <= kinds[kind].tier) at = i + 1;
  memmove(&md->ledger[at + 1], &md->ledger[at], (md->len - at) * sizeof md->ledger[0]);
  md->ledger[at] = (mori_ledger_entry){kind, value, 0, aux};
  md->len++;
}

static void op_forget(mori_fsm *m, model *md, mori__fuzz_reader *in) {
  mori_res kind = (mori_res)((int)(mori__fuzz_u8(in) % (MORI_RES__COUNT + 2)) - 1);
  uintptr_t value = mori__fuzz_u8(in);
  size_t at = md->len;
  for (size_t i = md->len; i-- > 0;)
    if (md->ledger[i].kind == kind && md->ledger[i].value == value) {
      at = i;
      break;
    }
  int want = terminal(md->state) ? MORI_FSM_ETERMINAL
             : at == md->len     ? MORI_FSM_EILLEGAL
                                 : MORI_FSM_OK;
  int rc = mori_fsm_forget(m, kind, value);
  MORI_FUZZ_CHECK(rc == want, "forget %s %lu in %s: %d, expected %d (%s)", mori_res_name(kind),
                  (unsigned long)value, mori_fsm_state_name(md->state), rc, want, m->why);
  if (rc != MORI_FSM_OK) return;
  memmove(&md->ledger[at], &md->ledger[at + 1], (md->len - at - 1) * sizeof md->ledger[0]);
  md->len--;
}

static void op_fire(mori_fsm *m, model *md, mori__fuzz_reader *in) {
  mori_wevent ev = (mori_wevent)(mori__fuzz_u8(in) % (MORI_EV__COUNT + 1));
  int to = spec_next(md->kind, md->state, ev), want;
  if (terminal(md->state))
    want = MORI_FSM_ETERMINAL;
  else if (to < 0 || ev == MORI_EV_RELEASE || ev == MORI_EV_FAIL)
    want = MORI_FSM_EILLEGAL;
  else
    want = invariant_holds(md, to) ? MORI_FSM_OK : MORI_FSM_EINVARIANT;
  int rc = mori_fsm_fire(m, ev);
  MORI_FUZZ_CHECK(rc == want, "fire %s in %s: %d, expected %d (%s)", mori_wevent_name(ev),
                  mori_fsm_state_name(md->state), rc, want, m->why);
  if (rc == MORI_FSM_OK) md->state = to;
}

/* RELEASE or FAIL: every entry but the borrowed ones reaches the callback
 * exactly once, newest first, except that LAST kinds come after all the
 * others; the first callback error is the result. */
static void op_unwind(mori_fsm *m, model *md, mori_wevent ev) {
  static released log;
  int to = spec_next(md->kind, md->state, ev), want = 0;
  if (terminal(md->state))
    want = MORI_FSM_ETERMINAL;
  else if (to < 0)
    want = MORI_FSM_EILLEGAL;
  log.n = 0;
  int rc = ev == MORI_EV_RELEASE ? mori_fsm_release(m, release_cb, &log)
                                 : mori_fsm_fail(m, release_cb, &log);
  if (want != 0) {
    MORI_FUZZ_CHECK(rc == want && log.n == 0, "%s in %s: %d after %zu releases, expected %d",
                    mori_wevent_name(ev), mori_fsm_state_name(md->state), rc, log.n, want);
    return;
  }
  size_t k = 0;
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = md->len; i-- > 0;) {
      const mori_ledger_entry *e = &md->ledger[i];
      int last = kinds[e->kind].unwind == UNWIND_LAST;
      if (kinds[e->kind].unwind == UNWIND_BORROWED || last != pass) continue;
      MORI_FUZZ_CHECK(k < log.n && same_entry(&log.entry[k], e),
                      "%s: release %zu is not ledger entry %zu (%s)", mori_wevent_name(ev), k, i,
                      mori_res_name(e->kind));
      if (want == 0 && (e->value & 0x80)) want = -100 - (int)(e->value & 0x7f);
      k++;
    }
  MORI_FUZZ_CHECK(k == log.n, "%s: %zu releases for %zu entries", mori_wevent_name(ev), log.n, k);
  MORI_FUZZ_CHECK(rc == want, "%s: returned %d, expected the first callback error %d",
                  mori_wevent_name(ev), rc, want);
  md->len = 0;
  md->state = to;
}

static void op_release(mori_fsm *m, model *md, mori__fuzz_reader *in) {
  op_unwind(m, md, MORI_EV_RELEASE);
}

static void op_fail(mori_fsm *m, model *md, mori__fuzz_reader *in) {
  op_unwind(m, md, MORI_EV_FAIL);
}

/* Indexed by the operation byte, modulo the count. */
static void (*const ops[])(mori_fsm *, model *, mori__fuzz_reader *) = {
    op_push, op_forget, op_fire, op_release, op_fail,
};
#define NOPS (sizeof ops / sizeof ops[0])

/* ---- after every step ---- */

static void compare(mori_fsm *m, const model *md) {
  MORI_FUZZ_CHECK(m->state.id == md->state, "machine in %s, model in %s",
                  mori_fsm_state_name(m->state.id), mori_fsm_state_name(md->state));
  MORI_FUZZ_CHECK(m->len == md->len, "ledger of %zu entries, model has %zu", m->len, md->len);
  for (size_t i = 0; i < md->len; i++)
    MORI_FUZZ_CHECK(same_entry(&m->ledger[i], &md->ledger[i]),
                    "ledger entry %zu differs from the model's", i);
  for (int r = 0; r < MORI_RES__COUNT; r++) {
    size_t n = 0;
    for (size_t i = 0; i < md->len; i++) n += md->ledger[i].kind == (mori_res)r;
    MORI_FUZZ_CHECK(mori_fsm_count(m, (mori_res)r) == n, "mori_fsm_count(%s) %zu, model %zu",
                    mori_res_name((mori_res)r), mori_fsm_count(m, (mori_res)r), n);
  }
  int holds = invariant_holds(md, md->state);
  int rc = mori_fsm_check(m);
  MORI_FUZZ_CHECK(holds || rc == MORI_FSM_EINVARIANT,
                  "mori_fsm_check missed a broken invariant in %s (%zu entries, rank %d of %d)",
                  mori_fsm_state_name(md->state), md->len, md->rank, md->world);
  MORI_FUZZ_CHECK(!holds || rc == MORI_FSM_OK, "mori_fsm_check rejects a valid %s ledger: %s",
                  mori_fsm_state_name(md->state), m->why);
}

/* The model built from the lists, and the table behind mori_fsm_next
 * against it, once per process. */
static void check_table(void) {
  static int done;
  if (done) return;
  build_states();
  for (int kind = B; kind <= W; kind++)
    for (int s = 0; s < MORI_FSM_NSTATES; s++)
      for (int ev = 0; ev < MORI_EV__COUNT; ev++) {
        int want = spec_next((mori_fsm_kind)kind, s, (mori_wevent)ev);
        int got = mori_fsm_next((mori_fsm_kind)kind, s, (mori_wevent)ev);
        MORI_FUZZ_CHECK(got == want, "mori_fsm_next(%d, %s, %s) = %d, expected %d", kind,
                        mori_fsm_state_name(s), mori_wevent_name((mori_wevent)ev), got, want);
      }
  done = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static model md;
  static released sink;
  mori__fuzz_reader in = {data, data + size};
  check_table();

  md.kind = (mori__fuzz_u8(&in) & 1) ? W : B;
  md.world = md.kind == W ? mori__fuzz_u8(&in) % (MAX_WORLD + 1) : 0;
  md.rank = md.kind == W ? (int)(mori__fuzz_u8(&in) % (unsigned)(md.world + 1)) : 0;
  md.state = MORI_FSM_INIT;
  md.len = 0;
  mori_fsm m;
  mori_fsm_init(&m, md.kind, md.rank, md.world);
  compare(&m, &md);

  while (mori__fuzz_left(&in) > 0) {
    ops[mori__fuzz_u8(&in) % NOPS](&m, &md, &in);
    compare(&m, &md);
  }
  /* Leave nothing behind: a live machine is failed before it is destroyed. */
  sink.n = 0;
  if (!terminal(m.state.id)) mori_fsm_fail(&m, release_cb, &sink);
  mori_fsm_destroy(&m);
  return 0;
}
