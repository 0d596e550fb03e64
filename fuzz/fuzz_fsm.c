/*
 * fuzz_fsm.c - fuzz target for the block and window state machines.  The input is a
 * sequence of push/forget/fire/release/fail operations on one machine; a
 * model written from fsm.h's documentation runs beside it and must agree
 * on every return code, every state, every ledger entry, the order of
 * every release, and on what mori_fsm_check says after each step.
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

/* ---- the model: fsm.h's diagram and the state invariants, restated ---- */

static const struct {
  unsigned kinds;
  mori_wstate from;
  mori_wevent ev;
  mori_wstate to;
  unsigned acquires;
} spec_rows[] = {
    {B, MORI_WS_INIT, MORI_EV_CREATE, MORI_WS_CREATED, BIT(MORI_RES_PHYS_HANDLE)},
    {B, MORI_WS_CREATED, MORI_EV_RESERVE, MORI_WS_RESERVED, BIT(MORI_RES_LOCAL_RESERVATION)},
    {B, MORI_WS_RESERVED, MORI_EV_MAP, MORI_WS_BACKED, BIT(MORI_RES_LOCAL_MAPPING)},
    {B, MORI_WS_BACKED, MORI_EV_GRANT, MORI_WS_ACCESSIBLE, 0},
    {B, MORI_WS_ACCESSIBLE, MORI_EV_ZERO, MORI_WS_ALLOCATED, BIT(MORI_RES_ZERO_EVENT)},
    {B, MORI_WS_ALLOCATED, MORI_EV_EXPORT, MORI_WS_EXPORTED, BIT(MORI_RES_EXPORTED_FD)},
    {W, MORI_WS_INIT, MORI_EV_ATTACH, MORI_WS_ATTACHED, BIT(MORI_RES_BLOCK_REF)},
    {W, MORI_WS_ATTACHED, MORI_EV_BIND, MORI_WS_BOUND, BIT(MORI_RES_CHANNEL)},
    {W, MORI_WS_BOUND, MORI_EV_PUBLISH, MORI_WS_PUBLISHED, 0},
    {W, MORI_WS_PUBLISHED, MORI_EV_GATHER, MORI_WS_GATHERED, 0},
    {W, MORI_WS_GATHERED, MORI_EV_VALIDATE, MORI_WS_VALIDATED, 0},
    {W, MORI_WS_VALIDATED, MORI_EV_TAKE_SLOT, MORI_WS_SLOT_TAKEN, BIT(MORI_RES_SIGNAL_SLOT)},
    {W, MORI_WS_SLOT_TAKEN, MORI_EV_EXCHANGE, MORI_WS_EXCHANGED, BIT(MORI_RES_RECEIVED_FD)},
    {W, MORI_WS_EXCHANGED, MORI_EV_IMPORT, MORI_WS_RENDEZVOUS, BIT(MORI_RES_IMPORTED_HANDLE)},
    {W, MORI_WS_RENDEZVOUS, MORI_EV_RESERVE, MORI_WS_SPAN_RESERVED,
     BIT(MORI_RES_SPAN_RESERVATION)},
    {W, MORI_WS_SPAN_RESERVED, MORI_EV_MAP, MORI_WS_SLOTS_MAPPED, BIT(MORI_RES_SLOT_MAPPING)},
    {W, MORI_WS_SLOTS_MAPPED, MORI_EV_GRANT, MORI_WS_SLOTS_ACCESSIBLE, 0},
    {W, MORI_WS_SLOTS_ACCESSIBLE, MORI_EV_BUILD_TABLES, MORI_WS_TABLES_BUILT,
     BIT(MORI_RES_DEVICE_TABLE) | BIT(MORI_RES_SIGNAL_STATE)},
    {W, MORI_WS_TABLES_BUILT, MORI_EV_BARRIER, MORI_WS_MAPPED, 0},
    {B, MORI_WS_ALLOCATED, MORI_EV_RELEASE, MORI_WS_RELEASED, 0}, /* never exported */
    {B, MORI_WS_EXPORTED, MORI_EV_RELEASE, MORI_WS_RELEASED, 0},
    {W, MORI_WS_MAPPED, MORI_EV_RELEASE, MORI_WS_RELEASED, 0},
    /* FAIL from every state each kind passes through */
    {B | W, MORI_WS_INIT, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {B, MORI_WS_CREATED, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {B, MORI_WS_RESERVED, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {B, MORI_WS_BACKED, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {B, MORI_WS_ACCESSIBLE, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {B, MORI_WS_ALLOCATED, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {B, MORI_WS_EXPORTED, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {W, MORI_WS_ATTACHED, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {W, MORI_WS_BOUND, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {W, MORI_WS_PUBLISHED, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {W, MORI_WS_GATHERED, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {W, MORI_WS_VALIDATED, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {W, MORI_WS_SLOT_TAKEN, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {W, MORI_WS_EXCHANGED, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {W, MORI_WS_RENDEZVOUS, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {W, MORI_WS_SPAN_RESERVED, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {W, MORI_WS_SLOTS_MAPPED, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {W, MORI_WS_SLOTS_ACCESSIBLE, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {W, MORI_WS_TABLES_BUILT, MORI_EV_FAIL, MORI_WS_FAILED, 0},
    {W, MORI_WS_MAPPED, MORI_EV_FAIL, MORI_WS_FAILED, 0},
};

/* Count bounds: lo/hi = per_world * world_size + plus. */
typedef struct bound {
  int lo_w, lo, hi_w, hi;
} bound;

/* clang-format off */
#define ONE {0, 1, 0, 1}
#define UPTO(n) {0, 0, 0, n}
#define PEERS {1, -1, 1, -1}
#define UPTO_PEERS {0, 0, 1, -1}
#define ALL_RANKS {1, 0, 1, 0}
/* clang-format on */

#define BLOCK_RESERVED [MORI_RES_PHYS_HANDLE] = ONE, [MORI_RES_LOCAL_RESERVATION] = ONE
#define BLOCK_MAPPED BLOCK_RESERVED, [MORI_RES_LOCAL_MAPPING] = ONE
#define BLOCK_ZEROED BLOCK_MAPPED, [MORI_RES_ZERO_EVENT] = UPTO(1)
#define WINDOW_BOUND [MORI_RES_BLOCK_REF] = ONE, [MORI_RES_CHANNEL] = UPTO(1)
#define WINDOW_SLOT WINDOW_BOUND, [MORI_RES_SIGNAL_SLOT] = ONE
#define WINDOW_FDS                                                                    \
  [MORI_RES_BLOCK_REF] = ONE, [MORI_RES_SIGNAL_SLOT] = ONE, [MORI_RES_RECEIVED_FD] = UPTO_PEERS
#define WINDOW_IMPORTED WINDOW_FDS, [MORI_RES_IMPORTED_HANDLE] = PEERS
#define WINDOW_SPAN WINDOW_IMPORTED, [MORI_RES_SPAN_RESERVATION] = ONE
#define WINDOW_SLOTS WINDOW_SPAN, [MORI_RES_SLOT_MAPPING] = ALL_RANKS
#define WINDOW_TABLES                                                                 \
  WINDOW_SLOTS, [MORI_RES_DEVICE_TABLE] = {0, 1, 0, 1}, [MORI_RES_SIGNAL_STATE] = UPTO(1)

static const struct {
  unsigned kinds;
  mori_wstate state;
  bound count[MORI_RES__COUNT];
} spec_states[] = {
    {B | W, MORI_WS_INIT, {{0}}},
    {B, MORI_WS_CREATED, {[MORI_RES_PHYS_HANDLE] = ONE}},
    {B, MORI_WS_RESERVED, {BLOCK_RESERVED}},
    {B, MORI_WS_BACKED, {BLOCK_MAPPED}},
    {B, MORI_WS_ACCESSIBLE, {BLOCK_MAPPED}},
    {B, MORI_WS_ALLOCATED, {BLOCK_ZEROED}},
    {B, MORI_WS_EXPORTED, {BLOCK_ZEROED, [MORI_RES_EXPORTED_FD] = UPTO(1)}},
    {W, MORI_WS_ATTACHED, {[MORI_RES_BLOCK_REF] = ONE}},
    {W, MORI_WS_BOUND, {WINDOW_BOUND}},
    {W, MORI_WS_PUBLISHED, {WINDOW_BOUND}},
    {W, MORI_WS_GATHERED, {WINDOW_BOUND}},
    {W, MORI_WS_VALIDATED, {WINDOW_BOUND}},
    {W, MORI_WS_SLOT_TAKEN, {WINDOW_SLOT}},
    {W, MORI_WS_EXCHANGED, {WINDOW_FDS}},
    {W, MORI_WS_RENDEZVOUS, {WINDOW_IMPORTED}},
    {W, MORI_WS_SPAN_RESERVED, {WINDOW_SPAN}},
    {W, MORI_WS_SLOTS_MAPPED, {WINDOW_SLOTS}},
    {W, MORI_WS_SLOTS_ACCESSIBLE, {WINDOW_SLOTS}},
    {W, MORI_WS_TABLES_BUILT, {WINDOW_TABLES}},
    {W, MORI_WS_MAPPED, {WINDOW_TABLES}},
    {B | W, MORI_WS_RELEASED, {{0}}},
    {B | W, MORI_WS_FAILED, {{0}}},
};

/* Ledger order (teardown runs it backwards): received fds and imports
 * alternate peer by peer, so they share a place. */
static const unsigned char spec_order[MORI_RES__COUNT] = {
    [MORI_RES_PHYS_HANDLE] = 0,   [MORI_RES_LOCAL_RESERVATION] = 1, [MORI_RES_LOCAL_MAPPING] = 2,
    [MORI_RES_ZERO_EVENT] = 3,    [MORI_RES_EXPORTED_FD] = 4,       [MORI_RES_BLOCK_REF] = 5,
    [MORI_RES_CHANNEL] = 6,       [MORI_RES_SIGNAL_SLOT] = 7,       [MORI_RES_RECEIVED_FD] = 8,
    [MORI_RES_IMPORTED_HANDLE] = 8, [MORI_RES_SPAN_RESERVATION] = 9, [MORI_RES_SLOT_MAPPING] = 10,
    [MORI_RES_DEVICE_TABLE] = 11, [MORI_RES_SIGNAL_STATE] = 12,
};
static const unsigned per_peer =
    BIT(MORI_RES_RECEIVED_FD) | BIT(MORI_RES_IMPORTED_HANDLE) | BIT(MORI_RES_SLOT_MAPPING);
static const unsigned peer_only = BIT(MORI_RES_RECEIVED_FD) | BIT(MORI_RES_IMPORTED_HANDLE);
/* Released after everything else: an exported fd outlives the final
 * release of the physical handle (fsm.h). */
static const unsigned spec_deferred = BIT(MORI_RES_EXPORTED_FD);

typedef struct model {
  mori_fsm_kind kind;
  mori_wstate state;
  int rank, world;
  mori_ledger_entry ledger[MAX_LEDGER];
  size_t len;
} model;

/* Field by field: the struct has padding that memcmp would compare. */
static int same_entry(const mori_ledger_entry *a, const mori_ledger_entry *b) {
  return a->kind == b->kind && a->value == b->value && a->size == b->size && a->aux == b->aux;
}

static int terminal(mori_wstate s) { return s == MORI_WS_RELEASED || s == MORI_WS_FAILED; }

static int spec_row(mori_fsm_kind kind, mori_wstate s, mori_wevent ev) {
  for (size_t i = 0; i < sizeof spec_rows / sizeof spec_rows[0]; i++)
    if ((spec_rows[i].kinds & (unsigned)kind) && spec_rows[i].from == s && spec_rows[i].ev == ev)
      return (int)i;
  return -1;
}

static unsigned spec_acquires(mori_fsm_kind kind, mori_wstate s) {
  unsigned mask = 0;
  for (size_t i = 0; i < sizeof spec_rows / sizeof spec_rows[0]; i++)
    if ((spec_rows[i].kinds & (unsigned)kind) && spec_rows[i].from == s)
      mask |= spec_rows[i].acquires;
  return mask;
}

static int counts_hold(const model *md, mori_wstate s, const size_t n[MORI_RES__COUNT]) {
  for (size_t i = 0; i < sizeof spec_states / sizeof spec_states[0]; i++) {
    if (!(spec_states[i].kinds & (unsigned)md->kind) || spec_states[i].state != s) continue;
    for (int r = 0; r < MORI_RES__COUNT; r++) {
      const bound *b = &spec_states[i].count[r];
      long lo = (long)b->lo_w * md->world + b->lo, hi = (long)b->hi_w * md->world + b->hi;
      if ((long)n[r] < lo || (long)n[r] > hi) return 0;
    }
    return 1;
  }
  return 0; /* a state this kind never reaches */
}

/* What mori_fsm_check must say about the model sitting in state s. */
static int invariant_holds(const model *md, mori_wstate s) {
  size_t n[MORI_RES__COUNT] = {0};
  unsigned char taken[MORI_RES__COUNT][MAX_WORLD] = {{0}}; /* per-peer kind x rank */
  if (md->kind == W && (md->rank < 0 || md->rank >= md->world)) return 0;
  for (size_t i = 0; i < md->len; i++) {
    const mori_ledger_entry *e = &md->ledger[i];
    unsigned bit = BIT(e->kind);
    if (i > 0 && spec_order[e->kind] < spec_order[md->ledger[i - 1].kind]) return 0;
    if (bit & per_peer) {
      if (e->aux < 0 || e->aux >= md->world) return 0;
      if ((bit & peer_only) && e->aux == md->rank) return 0;
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
                  mori_wstate_name(md->state), rc, want, m->why);
  if (rc == MORI_FSM_OK) md->ledger[md->len++] = (mori_ledger_entry){kind, value, 0, aux};
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
                  (unsigned long)value, mori_wstate_name(md->state), rc, want, m->why);
  if (rc != MORI_FSM_OK) return;
  memmove(&md->ledger[at], &md->ledger[at + 1], (md->len - at - 1) * sizeof md->ledger[0]);
  md->len--;
}

static void op_fire(mori_fsm *m, model *md, mori__fuzz_reader *in) {
  mori_wevent ev = (mori_wevent)(mori__fuzz_u8(in) % (MORI_EV__COUNT + 1));
  int row = spec_row(md->kind, md->state, ev), want;
  if (terminal(md->state))
    want = MORI_FSM_ETERMINAL;
  else if (row < 0 || ev == MORI_EV_RELEASE || ev == MORI_EV_FAIL)
    want = MORI_FSM_EILLEGAL;
  else
    want = invariant_holds(md, spec_rows[row].to) ? MORI_FSM_OK : MORI_FSM_EINVARIANT;
  int rc = mori_fsm_fire(m, ev);
  MORI_FUZZ_CHECK(rc == want, "fire %s in %s: %d, expected %d (%s)", mori_wevent_name(ev),
                  mori_wstate_name(md->state), rc, want, m->why);
  if (rc == MORI_FSM_OK) md->state = spec_rows[row].to;
}

/* RELEASE or FAIL: every entry but the borrowed block reaches the callback
 * exactly once, newest first, except that deferred kinds come after all
 * the others; the first callback error is the result. */
static void op_unwind(mori_fsm *m, model *md, mori_wevent ev) {
  static released log;
  int row = spec_row(md->kind, md->state, ev), want = 0;
  if (terminal(md->state))
    want = MORI_FSM_ETERMINAL;
  else if (row < 0)
    want = MORI_FSM_EILLEGAL;
  log.n = 0;
  int rc = ev == MORI_EV_RELEASE ? mori_fsm_release(m, release_cb, &log)
                                 : mori_fsm_fail(m, release_cb, &log);
  if (want != 0) {
    MORI_FUZZ_CHECK(rc == want && log.n == 0, "%s in %s: %d after %zu releases, expected %d",
                    mori_wevent_name(ev), mori_wstate_name(md->state), rc, log.n, want);
    return;
  }
  size_t k = 0;
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = md->len; i-- > 0;) {
      const mori_ledger_entry *e = &md->ledger[i];
      int deferred = (BIT(e->kind) & spec_deferred) != 0;
      if (e->kind == MORI_RES_BLOCK_REF || deferred != pass) continue;
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
  md->state = spec_rows[row].to;
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
  MORI_FUZZ_CHECK(m->state == md->state, "machine in %s, model in %s", mori_wstate_name(m->state),
                  mori_wstate_name(md->state));
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
                  mori_wstate_name(md->state), md->len, md->rank, md->world);
  MORI_FUZZ_CHECK(!holds || rc == MORI_FSM_OK, "mori_fsm_check rejects a valid %s ledger: %s",
                  mori_wstate_name(md->state), m->why);
}

/* The table behind mori_fsm_next against the diagram, once per process. */
static void check_table(void) {
  static int done;
  if (done) return;
  for (int kind = B; kind <= W; kind++)
    for (int s = 0; s < MORI_WS__COUNT; s++)
      for (int ev = 0; ev < MORI_EV__COUNT; ev++) {
        int row = spec_row((mori_fsm_kind)kind, (mori_wstate)s, (mori_wevent)ev);
        int want = row < 0 ? -1 : (int)spec_rows[row].to;
        int got = mori_fsm_next((mori_fsm_kind)kind, (mori_wstate)s, (mori_wevent)ev);
        MORI_FUZZ_CHECK(got == want, "mori_fsm_next(%d, %s, %s) = %d, expected %d", kind,
                        mori_wstate_name((mori_wstate)s), mori_wevent_name((mori_wevent)ev), got,
                        want);
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
  md.state = MORI_WS_INIT;
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
  if (!terminal(m.state)) mori_fsm_fail(&m, release_cb, &sink);
  mori_fsm_destroy(&m);
  return 0;
}
