/*
 * test_fsm.c - the state machines' specification: which (kind, state,
 * event) triples move and where, the forward path a driver walks, what
 * each state's ledger may hold, the ledger's room and allocator, the order
 * in which release and rollback give resources back, and a window's heal
 * (MAPPED back to MAPPED, or BROKEN) with the places its entries take.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mori_cmocka.h"

#include "fsm_internal.h"
#include "mori/fsm.h"

#define BLOCK MORI_FSM_BLOCK
#define WINDOW MORI_FSM_WINDOW
#define WORLD 4
#define RANK 1
#define DEAD 2 /* the rank a heal replaces */
#define BIT(r) (1u << (r))

/* The legal transitions, written out independently of fsm.c's table. */
typedef struct triple {
  mori_fsm_kind kind;
  int from;
  mori_wevent ev;
  int to;
} triple;

#define T(k, from, ev, to) {k, from, MORI_EV_##ev, to}
#define TB(from, ev, to) T(BLOCK, MORI_BS_##from, ev, MORI_BS_##to)
#define TW(from, ev, to) T(WINDOW, MORI_WS_##from, ev, MORI_WS_##to)
#define FAILS_B(from) TB(from, FAIL, FAILED)
#define FAILS_W(from) TW(from, FAIL, FAILED)

static const triple legal[] = {
    TB(INIT, CREATE, CREATED),
    TB(CREATED, RESERVE, RESERVED),
    TB(RESERVED, MAP, BACKED),
    TB(BACKED, GRANT, ACCESSIBLE),
    TB(ACCESSIBLE, ZERO, ALLOCATED),
    TB(ALLOCATED, EXPORT, EXPORTED),
    TB(ALLOCATED, RELEASE, RELEASED), /* freed before any rendezvous exported it */
    TB(EXPORTED, RELEASE, RELEASED),
    FAILS_B(INIT), FAILS_B(CREATED), FAILS_B(RESERVED), FAILS_B(BACKED),
    FAILS_B(ACCESSIBLE), FAILS_B(ALLOCATED), FAILS_B(EXPORTED),
    TW(INIT, ATTACH, ATTACHED),
    TW(ATTACHED, BIND, BOUND),
    TW(BOUND, PUBLISH, PUBLISHED),
    TW(PUBLISHED, GATHER, GATHERED),
    TW(GATHERED, VALIDATE, VALIDATED),
    TW(VALIDATED, TAKE_SLOT, SLOT_TAKEN),
    TW(SLOT_TAKEN, EXCHANGE, EXCHANGED),
    TW(EXCHANGED, IMPORT, RENDEZVOUS),
    TW(RENDEZVOUS, RESERVE, SPAN_RESERVED),
    TW(SPAN_RESERVED, MAP, SLOTS_MAPPED),
    TW(SLOTS_MAPPED, GRANT, SLOTS_ACCESSIBLE),
    TW(SLOTS_ACCESSIBLE, BUILD_TABLES, TABLES_BUILT),
    TW(TABLES_BUILT, BARRIER, MAPPED),
    TW(MAPPED, RELEASE, RELEASED),
    FAILS_W(INIT), FAILS_W(ATTACHED), FAILS_W(BOUND), FAILS_W(PUBLISHED),
    FAILS_W(GATHERED), FAILS_W(VALIDATED), FAILS_W(SLOT_TAKEN),
    FAILS_W(EXCHANGED), FAILS_W(RENDEZVOUS), FAILS_W(SPAN_RESERVED),
    FAILS_W(SLOTS_MAPPED), FAILS_W(SLOTS_ACCESSIBLE), FAILS_W(TABLES_BUILT),
    FAILS_W(MAPPED),
    /* a heal: MAPPED round to MAPPED; BREAK from MAPPED (a heal failing at
     * its first step) and from each state of it to BROKEN, which rests */
    TW(MAPPED, LOSE, SLOT_LOST),
    TW(SLOT_LOST, REBIND, HEAL_BOUND),
    TW(HEAL_BOUND, REJOIN, REJOINED),
    TW(REJOINED, REEXCHANGE, REEXCHANGED),
    TW(REEXCHANGED, REMAP, HEALED),
    TW(HEALED, RESYNC, MAPPED),
    TW(MAPPED, BREAK, BROKEN), TW(SLOT_LOST, BREAK, BROKEN), TW(HEAL_BOUND, BREAK, BROKEN),
    TW(REJOINED, BREAK, BROKEN), TW(REEXCHANGED, BREAK, BROKEN), TW(HEALED, BREAK, BROKEN),
    TW(BROKEN, RELEASE, RELEASED),
    /* the own slot of the span, at the first mori_window_span */
    TW(MAPPED, FLATTEN, MAPPED),
    FAILS_W(SLOT_LOST), FAILS_W(HEAL_BOUND), FAILS_W(REJOINED), FAILS_W(REEXCHANGED),
    FAILS_W(HEALED), FAILS_W(BROKEN),
};
#define NLEGAL (sizeof legal / sizeof legal[0])

/* Each kind's forward path: the steps in the order a driver fires them. */
static const mori_wevent block_path[] = {MORI_EV_CREATE, MORI_EV_RESERVE, MORI_EV_MAP,
                                         MORI_EV_GRANT,  MORI_EV_ZERO,    MORI_EV_EXPORT};
static const mori_wevent window_path[] = {
    MORI_EV_ATTACH,   MORI_EV_BIND,    MORI_EV_PUBLISH, MORI_EV_GATHER, MORI_EV_VALIDATE,
    MORI_EV_TAKE_SLOT, MORI_EV_EXCHANGE, MORI_EV_IMPORT, MORI_EV_RESERVE, MORI_EV_MAP,
    MORI_EV_GRANT,    MORI_EV_BUILD_TABLES, MORI_EV_BARRIER};
/* A window's heal, from MAPPED back to it: the path on from MAPPED. */
static const mori_wevent heal_path[] = {MORI_EV_LOSE,       MORI_EV_REBIND, MORI_EV_REJOIN,
                                        MORI_EV_REEXCHANGE, MORI_EV_REMAP,  MORI_EV_RESYNC};
#define NHEAL (sizeof heal_path / sizeof heal_path[0])
/* The states a heal passes through, then the one a failed heal leaves. */
static const int heal_states[] = {MORI_WS_SLOT_LOST,   MORI_WS_HEAL_BOUND, MORI_WS_REJOINED,
                                  MORI_WS_REEXCHANGED, MORI_WS_HEALED,     MORI_WS_BROKEN};
#define NHEAL_STATES (sizeof heal_states / sizeof heal_states[0])

/* What mori_fsm_push accepts in each (kind, state); absent means nothing. */
static const struct {
  mori_fsm_kind kind;
  int state;
  unsigned res;
} pushable[] = {
    {BLOCK, MORI_BS_INIT, BIT(MORI_RES_PHYS_HANDLE)},
    {BLOCK, MORI_BS_CREATED, BIT(MORI_RES_LOCAL_RESERVATION)},
    {BLOCK, MORI_BS_RESERVED, BIT(MORI_RES_LOCAL_MAPPING)},
    {BLOCK, MORI_BS_ACCESSIBLE, BIT(MORI_RES_ZERO_EVENT)},
    {BLOCK, MORI_BS_ALLOCATED, BIT(MORI_RES_EXPORTED_FD)},
    {WINDOW, MORI_WS_INIT, BIT(MORI_RES_BLOCK_REF)},
    {WINDOW, MORI_WS_ATTACHED, BIT(MORI_RES_CHANNEL)},
    {WINDOW, MORI_WS_VALIDATED, BIT(MORI_RES_SIGNAL_SLOT)},
    {WINDOW, MORI_WS_SLOT_TAKEN, BIT(MORI_RES_RECEIVED_FD)},
    {WINDOW, MORI_WS_EXCHANGED, BIT(MORI_RES_IMPORTED_HANDLE)},
    {WINDOW, MORI_WS_RENDEZVOUS, BIT(MORI_RES_SPAN_RESERVATION)},
    {WINDOW, MORI_WS_SPAN_RESERVED, BIT(MORI_RES_SLOT_MAPPING) | BIT(MORI_RES_OWN_SLOT_MAPPING)},
    {WINDOW, MORI_WS_SLOTS_ACCESSIBLE, BIT(MORI_RES_DEVICE_TABLE) | BIT(MORI_RES_SIGNAL_STATE)},
    {WINDOW, MORI_WS_MAPPED, BIT(MORI_RES_OWN_SLOT_MAPPING)},
    /* a heal records only the replacement's: LOSE and BREAK record nothing */
    {WINDOW, MORI_WS_SLOT_LOST, BIT(MORI_RES_CHANNEL)},
    {WINDOW, MORI_WS_REJOINED, BIT(MORI_RES_RECEIVED_FD)},
    {WINDOW, MORI_WS_REEXCHANGED, BIT(MORI_RES_IMPORTED_HANDLE) | BIT(MORI_RES_SLOT_MAPPING)},
};

static const mori_fsm_kind kinds[] = {BLOCK, WINDOW};

static int expected_next(mori_fsm_kind kind, int s, mori_wevent ev) {
  for (size_t i = 0; i < NLEGAL; i++)
    if (legal[i].kind == kind && legal[i].from == s && legal[i].ev == ev) return (int)legal[i].to;
  return -1;
}

static unsigned expected_pushable(mori_fsm_kind kind, int s) {
  for (size_t i = 0; i < sizeof pushable / sizeof pushable[0]; i++)
    if (pushable[i].kind == kind && pushable[i].state == s) return pushable[i].res;
  return 0;
}

static int terminal(int s) { return s == MORI_FSM_RELEASED || s == MORI_FSM_FAILED; }

static int in_heal(int s) {
  for (size_t i = 0; i < NHEAL_STATES; i++)
    if (heal_states[i] == s) return 1;
  return 0;
}

/* ---- a release callback that records what it is given ---- */

typedef struct recorder {
  mori_ledger_entry seen[256];
  size_t n;
  struct {
    mori_res kind;
    int aux, rc;
  } fail[2]; /* entries whose release fails, and with which code */
} recorder;

static int record(void *ctx, const mori_ledger_entry *e) {
  recorder *r = ctx;
  assert_true(r->n < sizeof r->seen / sizeof r->seen[0]);
  r->seen[r->n++] = *e;
  for (int i = 0; i < 2; i++)
    if (r->fail[i].rc != 0 && r->fail[i].kind == e->kind && r->fail[i].aux == e->aux)
      return r->fail[i].rc;
  return 0;
}

static recorder *new_recorder(void) {
  recorder *r = calloc(1, sizeof *r);
  assert_non_null(r);
  return r;
}

/* ---- driving a machine through its life ---- */

static void must_push(mori_fsm *m, mori_res kind, uintptr_t value, size_t size, int aux) {
  assert_int_equal(mori_fsm_push(m, kind, value, size, aux), MORI_FSM_OK);
}

/* The values a walk records for rank r's slot, and for what a heal
 * receives and imports from the replacement of rank r. */
static uintptr_t slot_va(int r) { return 0x7e0000000000 + ((uintptr_t)r << 21); }
#define HEAL_CHANNEL 0xc4a8
#define HEAL_FD(r) ((uintptr_t)(40 + (r)))
#define HEAL_IMPORT(r) ((uintptr_t)(0x2000 + (r)))

/* One piece of a heal's work on the ledger: the step it belongs to, and
 * a push or a forget. */
typedef struct heal_op {
  mori_wevent step;
  int push; /* 1: push, 0: forget */
  mori_res kind;
  uintptr_t value;
  int aux;
} heal_op;

/* A heal's work as rendezvous/heal.c does it, in order: LOSE gives back
 * the dead rank's slot, import and fd (drop_slot, while still MAPPED);
 * REBIND binds a channel; REEXCHANGE records the replacement's fd and
 * forgets the closed channel; REMAP records its import and the slot
 * mapped from it, at the address the dead rank's had.  The fabric path
 * (fds 0) receives no fd and binds no channel.  Returns the count. */
static size_t heal_ops(int dead, int fds, heal_op *ops) {
  size_t n = 0;
  ops[n++] = (heal_op){MORI_EV_LOSE, 0, MORI_RES_SLOT_MAPPING, slot_va(dead), dead};
  ops[n++] = (heal_op){MORI_EV_LOSE, 0, MORI_RES_IMPORTED_HANDLE, 0x1000 + (uintptr_t)dead, dead};
  if (fds) {
    ops[n++] = (heal_op){MORI_EV_LOSE, 0, MORI_RES_RECEIVED_FD, 20 + (uintptr_t)dead, dead};
    ops[n++] = (heal_op){MORI_EV_REBIND, 1, MORI_RES_CHANNEL, HEAL_CHANNEL, 0};
    ops[n++] = (heal_op){MORI_EV_REEXCHANGE, 1, MORI_RES_RECEIVED_FD, HEAL_FD(dead), dead};
    ops[n++] = (heal_op){MORI_EV_REEXCHANGE, 0, MORI_RES_CHANNEL, HEAL_CHANNEL, 0};
  }
  ops[n++] = (heal_op){MORI_EV_REMAP, 1, MORI_RES_IMPORTED_HANDLE, HEAL_IMPORT(dead), dead};
  ops[n++] = (heal_op){MORI_EV_REMAP, 1, MORI_RES_SLOT_MAPPING, slot_va(dead), dead};
  return n;
}

static void apply(mori_fsm *m, const heal_op *op) {
  int rc = op->push ? mori_fsm_push(m, op->kind, op->value, 0, op->aux)
                    : mori_fsm_forget(m, op->kind, op->value);
  if (rc != MORI_FSM_OK)
    fail_msg("%s %s in %s: %d (%s)", op->push ? "push" : "forget", mori_res_name(op->kind),
             mori_fsm_state_name(m->state.id), rc, m->why);
}

/* The work of the heal's step ev, on the fd path; REJOIN, RESYNC and
 * BREAK record nothing. */
static void heal_acquire(mori_fsm *m, mori_wevent ev, int dead) {
  heal_op ops[16];
  size_t n = heal_ops(dead, 1, ops);
  for (size_t i = 0; i < n; i++)
    if (ops[i].step == ev) apply(m, &ops[i]);
}

/* Records what the step `ev` of m's kind acquires, as the core's steps
 * do: EXCHANGE records every peer's fd and forgets the closed channel; a
 * block is allocated on a stream (ZERO records its zeroing's event); a
 * heal's steps replace rank DEAD. */
static void acquire(mori_fsm *m, mori_wevent ev) {
  int block = m->kind == BLOCK;
  switch (ev) {
  case MORI_EV_CREATE:
    must_push(m, MORI_RES_PHYS_HANDLE, 0x100, 1 << 21, 0);
    break;
  case MORI_EV_RESERVE:
    if (block)
      must_push(m, MORI_RES_LOCAL_RESERVATION, 0x7f0000000000, 1 << 21, 0);
    else
      must_push(m, MORI_RES_SPAN_RESERVATION, 0x7e0000000000, (size_t)m->world_size << 21, 0);
    break;
  case MORI_EV_MAP:
    if (block) {
      must_push(m, MORI_RES_LOCAL_MAPPING, 0x7f0000000000, 1 << 21, 0);
      break;
    }
    for (int r = 0; r < m->world_size; r++)
      if (r != m->rank) must_push(m, MORI_RES_SLOT_MAPPING, slot_va(r), 1 << 21, r);
    break;
  case MORI_EV_FLATTEN:
    must_push(m, MORI_RES_OWN_SLOT_MAPPING, slot_va(m->rank), 1 << 21, 0);
    break;
  case MORI_EV_ZERO:
    must_push(m, MORI_RES_ZERO_EVENT, 0xb10c, 0, 0);
    break;
  case MORI_EV_EXPORT:
    must_push(m, MORI_RES_EXPORTED_FD, 7, 0, 0);
    break;
  case MORI_EV_TAKE_SLOT:
    must_push(m, MORI_RES_SIGNAL_SLOT, 0x3170, 0, 2);
    break;
  case MORI_EV_ATTACH:
    must_push(m, MORI_RES_BLOCK_REF, 0xb10c, 0, 0);
    break;
  case MORI_EV_BIND:
    must_push(m, MORI_RES_CHANNEL, 0xc4a7, 0, 0);
    break;
  case MORI_EV_EXCHANGE:
    for (int p = 0; p < m->world_size; p++)
      if (p != m->rank) must_push(m, MORI_RES_RECEIVED_FD, (uintptr_t)(20 + p), 0, p);
    assert_int_equal(mori_fsm_forget(m, MORI_RES_CHANNEL, 0xc4a7), MORI_FSM_OK);
    break;
  case MORI_EV_IMPORT:
    for (int p = 0; p < m->world_size; p++)
      if (p != m->rank)
        must_push(m, MORI_RES_IMPORTED_HANDLE, (uintptr_t)(0x1000 + p), 1 << 21, p);
    break;
  case MORI_EV_BUILD_TABLES:
    must_push(m, MORI_RES_DEVICE_TABLE, 0xd0, 16 * (size_t)m->world_size, 0);
    must_push(m, MORI_RES_SIGNAL_STATE, 0x3170, 0, 0);
    break;
  default:
    heal_acquire(m, ev, DEAD);
    break;
  }
}

static void step(mori_fsm *m, mori_wevent ev) {
  acquire(m, ev);
  assert_int_equal(mori_fsm_fire(m, ev), MORI_FSM_OK);
}

/* Puts a fresh machine in state s by legal steps; a state the kind never
 * reaches is set directly, with an empty ledger.  A heal's state is
 * reached through MAPPED and the heal, BROKEN by a heal that breaks with
 * the channel bound (REJOINED: its ledger then holds the most kinds). */
static void walk(mori_fsm *m, int s) {
  const mori_wevent *path = m->kind == BLOCK ? block_path : window_path;
  size_t len = m->kind == BLOCK ? sizeof block_path / sizeof block_path[0]
                                : sizeof window_path / sizeof window_path[0];
  for (size_t i = 0; i < len && m->state.id != s; i++) step(m, path[i]);
  if (m->kind != WINDOW || m->state.id != MORI_WS_MAPPED || !in_heal(s)) return;
  int until = s == MORI_WS_BROKEN ? MORI_WS_REJOINED : s;
  for (size_t i = 0; i < NHEAL && m->state.id != until; i++) step(m, heal_path[i]);
  if (s == MORI_WS_BROKEN) step(m, MORI_EV_BREAK);
}

static void reach(mori_fsm *m, mori_fsm_kind kind, int s, int world) {
  mori_fsm_init(m, kind, kind == BLOCK ? 0 : RANK, kind == BLOCK ? 0 : world);
  if (s == MORI_FSM_FAILED) {
    assert_int_equal(mori_fsm_fail(m, NULL, NULL), 0);
    return;
  }
  if (s == MORI_FSM_RELEASED) {
    walk(m, MORI_FSM_RELEASED);
    recorder *r = new_recorder();
    assert_int_equal(mori_fsm_release(m, record, r), 0);
    free(r);
    return;
  }
  walk(m, s);
  if (m->state.id != s) m->state.id = s;
}

/* Unwinds whatever is left and frees the machine. */
static void finish(mori_fsm *m) {
  if (!terminal(m->state.id)) {
    recorder *r = new_recorder();
    if (mori_fsm_fail(m, record, r) == MORI_FSM_EILLEGAL) {
      m->len = 0; /* a state the kind never reaches: no row unwinds it */
      m->state.id = MORI_FSM_INIT;
    }
    free(r);
  }
  mori_fsm_destroy(m);
}

static size_t find(const mori_fsm *m, mori_res kind, int aux) {
  for (size_t i = 0; i < m->len; i++)
    if (m->ledger[i].kind == kind && m->ledger[i].aux == aux) return i;
  fail_msg("no %s entry with aux %d", mori_res_name(kind), aux);
  return 0;
}

/* ---- the transition table ---- */

static void next_matches_expected_triples_for_every_kind_state_event(void **state) {
  for (size_t k = 0; k < 2; k++)
    for (int s = 0; s < MORI_FSM_NSTATES; s++)
      for (int ev = 0; ev < MORI_EV__COUNT; ev++)
        if (mori_fsm_next(kinds[k], s, (mori_wevent)ev) !=
            expected_next(kinds[k], s, (mori_wevent)ev))
          fail_msg("%s %s %s", k ? "window" : "block", mori_fsm_state_name(s),
                   mori_wevent_name((mori_wevent)ev));
}

static void next_rejects_out_of_range_kind_state_and_event(void **state) {
  assert_int_equal(mori_fsm_next((mori_fsm_kind)0, MORI_FSM_INIT, MORI_EV_CREATE), -1);
  assert_int_equal(mori_fsm_next((mori_fsm_kind)3, MORI_FSM_INIT, MORI_EV_CREATE), -1);
  assert_int_equal(mori_fsm_next(BLOCK, MORI_FSM_NSTATES, MORI_EV_FAIL), -1);
  assert_int_equal(mori_fsm_next(BLOCK, MORI_BS_INIT, MORI_EV__COUNT), -1);
}

/* Every (kind, state, event) on a live machine: legal ones move to the
 * expected state, illegal ones are refused and change nothing. */
static void every_triple_moves_when_legal_and_changes_nothing_when_not(void **state) {
  for (size_t k = 0; k < 2; k++) {
    for (int s = 0; s < MORI_FSM_NSTATES; s++) {
      for (int ev = 0; ev < MORI_EV__COUNT; ev++) {
        mori_fsm m;
        recorder *r = new_recorder();
        reach(&m, kinds[k], s, WORLD);
        int to = expected_next(kinds[k], s, (mori_wevent)ev);
        size_t len = m.len;
        int rc;
        if (ev == MORI_EV_RELEASE)
          rc = mori_fsm_release(&m, record, r);
        else if (ev == MORI_EV_FAIL)
          rc = mori_fsm_fail(&m, record, r);
        else {
          if (to >= 0) acquire(&m, (mori_wevent)ev);
          rc = mori_fsm_fire(&m, (mori_wevent)ev);
        }
        if (to >= 0) {
          assert_int_equal(rc, MORI_FSM_OK);
          assert_int_equal(m.state.id, to);
          if (terminal(to)) assert_int_equal(m.len, 0);
        } else {
          if (rc != (terminal(s) ? MORI_FSM_ETERMINAL : MORI_FSM_EILLEGAL))
            fail_msg("%s %s %s returned %d", k ? "window" : "block",
                     mori_fsm_state_name(s), mori_wevent_name((mori_wevent)ev), rc);
          assert_int_equal(m.state.id, s);
          assert_int_equal(m.len, len);
          assert_int_equal(r->n, 0);
          assert_true(m.why[0] != '\0');
        }
        free(r);
        finish(&m);
      }
    }
  }
}

/* The forward paths are what the driver walks: from every state the one
 * event mori_fsm_forward names is the next step of the path, and the final
 * and terminal states have none.  A window's path goes on from MAPPED
 * through a heal and back to MAPPED (the core's driver stops at MAPPED;
 * heal.c fires the heal's steps); BROKEN, where a failed heal rests, has
 * no forward step. */
static void forward_names_each_step_of_the_path_and_none_at_the_end(void **state) {
  for (size_t k = 0; k < 2; k++) {
    const mori_wevent *path = kinds[k] == BLOCK ? block_path : window_path;
    size_t len = kinds[k] == BLOCK ? sizeof block_path / sizeof block_path[0]
                                   : sizeof window_path / sizeof window_path[0];
    mori_fsm m;
    mori_fsm_init(&m, kinds[k], kinds[k] == BLOCK ? 0 : RANK, kinds[k] == BLOCK ? 0 : WORLD);
    for (size_t i = 0; i < len; i++) {
      assert_int_equal(mori_fsm_forward(kinds[k], m.state.id), path[i]);
      step(&m, path[i]);
    }
    if (kinds[k] == BLOCK) {
      assert_int_equal(m.state.block, MORI_BS_EXPORTED);
      assert_int_equal(mori_fsm_forward(BLOCK, m.state.id), -1);
      finish(&m);
      continue;
    }
    assert_int_equal(m.state.window, MORI_WS_MAPPED);
    for (size_t i = 0; i < NHEAL; i++) {
      assert_int_equal(mori_fsm_forward(WINDOW, m.state.id), heal_path[i]);
      step(&m, heal_path[i]);
    }
    assert_int_equal(m.state.window, MORI_WS_MAPPED);
    assert_int_equal(mori_fsm_forward(WINDOW, m.state.id), MORI_EV_LOSE);
    finish(&m);
  }
  assert_int_equal(mori_fsm_forward(WINDOW, MORI_WS_BROKEN), -1);
  assert_int_equal(mori_fsm_forward(BLOCK, MORI_WS_SLOT_LOST), -1); /* another kind's state */
  assert_int_equal(mori_fsm_forward(BLOCK, MORI_BS_RELEASED), -1);
  assert_int_equal(mori_fsm_forward(WINDOW, MORI_WS_FAILED), -1);
  assert_int_equal(mori_fsm_forward(BLOCK, MORI_WS_ATTACHED), -1); /* another kind's state */
  assert_int_equal(mori_fsm_forward((mori_fsm_kind)0, MORI_FSM_INIT), -1);
}

static void fire_refuses_release_and_fail_which_need_a_callback(void **state) {
  static const struct {
    mori_fsm_kind kind;
    int s;
  } live[] = {{BLOCK, MORI_BS_ALLOCATED}, {BLOCK, MORI_BS_EXPORTED}, {WINDOW, MORI_WS_ATTACHED},
              {WINDOW, MORI_WS_MAPPED},    {WINDOW, MORI_WS_REJOINED},  {WINDOW, MORI_WS_BROKEN}};
  for (size_t i = 0; i < sizeof live / sizeof live[0]; i++) {
    mori_fsm m;
    reach(&m, live[i].kind, live[i].s, WORLD);
    size_t len = m.len;
    assert_int_equal(mori_fsm_fire(&m, MORI_EV_RELEASE), MORI_FSM_EILLEGAL);
    assert_int_equal(mori_fsm_fire(&m, MORI_EV_FAIL), MORI_FSM_EILLEGAL);
    assert_int_equal(m.state.id, live[i].s);
    assert_int_equal(m.len, len);
    finish(&m);
  }
}

static void lifecycle_holds_for_worlds_of_1_2_4_and_16(void **state) {
  static const int worlds[] = {1, 2, 4, 16};
  for (size_t i = 0; i < 4; i++) {
    mori_fsm m;
    mori_fsm_init(&m, WINDOW, 0, worlds[i]);
    for (size_t e = 0; e < sizeof window_path / sizeof window_path[0]; e++) {
      step(&m, window_path[e]);
      if (m.state.window == MORI_WS_RENDEZVOUS)
        assert_int_equal(mori_fsm_count(&m, MORI_RES_IMPORTED_HANDLE), worlds[i] - 1);
    }
    assert_int_equal(m.state.window, MORI_WS_MAPPED);
    /* the peers' slots; the own one only once the span is handed out */
    assert_int_equal(mori_fsm_count(&m, MORI_RES_SLOT_MAPPING), worlds[i] - 1);
    assert_int_equal(mori_fsm_count(&m, MORI_RES_OWN_SLOT_MAPPING), 0);
    step(&m, MORI_EV_FLATTEN);
    assert_int_equal(m.state.window, MORI_WS_MAPPED);
    assert_int_equal(mori_fsm_count(&m, MORI_RES_OWN_SLOT_MAPPING), 1);
    assert_int_equal(mori_fsm_count(&m, MORI_RES_CHANNEL), 0);
    recorder *r = new_recorder();
    assert_int_equal(mori_fsm_release(&m, record, r), 0);
    /* fds, imports, span, peers' slots and the own, table, signal state,
     * signal slot */
    assert_int_equal(r->n, 2 * (worlds[i] - 1) + 1 + worlds[i] + 1 + 1 + 1);
    free(r);
    finish(&m);
  }
}

static void block_on_the_fabric_path_exports_without_an_fd(void **state) {
  mori_fsm m;
  reach(&m, BLOCK, MORI_BS_ALLOCATED, 0);
  assert_int_equal(mori_fsm_fire(&m, MORI_EV_EXPORT), MORI_FSM_OK);
  assert_int_equal(m.state.block, MORI_BS_EXPORTED);
  assert_int_equal(mori_fsm_count(&m, MORI_RES_EXPORTED_FD), 0);
  finish(&m);
}

/* ---- push ---- */

static void push_accepts_only_what_the_outgoing_transition_acquires(void **state) {
  for (size_t k = 0; k < 2; k++) {
    for (int s = 0; s < MORI_FSM_NSTATES; s++) {
      for (int res = 0; res <= MORI_RES__COUNT; res++) {
        mori_fsm m;
        reach(&m, kinds[k], s, WORLD);
        size_t len = m.len;
        int rc = mori_fsm_push(&m, (mori_res)res, 0x42, 0, 2);
        int ok = res < MORI_RES__COUNT && (expected_pushable(kinds[k], s) & BIT(res));
        int want = terminal(s) ? MORI_FSM_ETERMINAL
                   : ok                     ? MORI_FSM_OK
                                            : MORI_FSM_EILLEGAL;
        if (rc != want)
          fail_msg("%s %s push %s returned %d", k ? "window" : "block",
                   mori_fsm_state_name(s), mori_res_name((mori_res)res), rc);
        assert_int_equal(m.len, len + (rc == MORI_FSM_OK));
        assert_int_equal(m.state.id, s);
        if (rc == MORI_FSM_EILLEGAL) assert_non_null(strstr(m.why, mori_res_name((mori_res)res)));
        finish(&m);
      }
    }
  }
}

static void push_grows_the_ledger_and_keeps_every_entry(void **state) {
  mori_fsm m;
  reach(&m, WINDOW, MORI_WS_MAPPED, 64);
  assert_int_equal(m.len, 1 + 1 + 2 * 63 + 1 + 63 + 1 + 1);
  assert_true(m.cap >= m.len);
  assert_int_equal(m.ledger[find(&m, MORI_RES_SLOT_MAPPING, 63)].value, slot_va(63));
  finish(&m);
}

/* ---- the ledger's room and memory ---- */

/* A hook that counts the ledger's allocations and fails them on demand. */
static struct {
  int calls, frees, fail;
} hook;

static void *counting_alloc(void *ptr, size_t size) {
  if (size == 0) {
    hook.frees++;
    free(ptr);
    return NULL;
  }
  hook.calls++;
  return hook.fail ? NULL : realloc(ptr, size);
}

static void capacity_is_the_largest_ledger_a_state_allows(void **state) {
  static const int worlds[] = {1, 4, 64};
  for (size_t i = 0; i < 3; i++) {
    mori_fsm m;
    mori_fsm_init(&m, WINDOW, 0, worlds[i]);
    /* MAPPED: block ref, signal slot, fds and imports from every peer,
     * span, slots, 1 table, signal state; BROKEN allows as much and a
     * channel (the upper bounds of what a heal may leave) */
    size_t mapped = 1 + 1 + 2 * (size_t)(worlds[i] - 1) + 1 + (size_t)worlds[i] + 1 + 1;
    assert_int_equal(mori_fsm_capacity(&m), mapped + 1);
    finish(&m);
  }
  mori_fsm m;
  mori_fsm_init(&m, BLOCK, 0, 0);
  assert_int_equal(mori_fsm_capacity(&m), 5); /* and a zero event */
  finish(&m);
}

/* After the reservation no step allocates: a push cannot fail for memory
 * between an acquisition and its record. */
static void reserved_room_makes_every_push_allocation_free(void **state) {
  for (size_t k = 0; k < 2; k++) {
    memset(&hook, 0, sizeof hook);
    mori_fsm_set_allocator(counting_alloc);
    mori_fsm m;
    mori_fsm_init(&m, kinds[k], kinds[k] == BLOCK ? 0 : RANK, kinds[k] == BLOCK ? 0 : 16);
    assert_int_equal(mori_fsm_reserve(&m, mori_fsm_capacity(&m)), MORI_FSM_OK);
    assert_int_equal(hook.calls, 1);
    hook.fail = 1; /* any allocation from here on would fail the test */
    walk(&m, kinds[k] == BLOCK ? MORI_BS_EXPORTED : MORI_WS_MAPPED);
    assert_int_equal(m.state.id, kinds[k] == BLOCK ? (int)MORI_BS_EXPORTED : (int)MORI_WS_MAPPED);
    if (kinds[k] == WINDOW) { /* a heal, and one that breaks, record in place */
      for (size_t i = 0; i < NHEAL; i++) step(&m, heal_path[i]);
      step(&m, MORI_EV_BREAK);
      assert_int_equal(m.state.window, MORI_WS_BROKEN);
    }
    assert_int_equal(hook.calls, 1);
    hook.fail = 0;
    finish(&m);
    assert_int_equal(hook.frees, 1); /* the ledger went back through the hook */
    mori_fsm_set_allocator(NULL);
  }
}

static void a_failed_growth_refuses_the_push_and_changes_nothing(void **state) {
  memset(&hook, 0, sizeof hook);
  mori_fsm_set_allocator(counting_alloc);
  mori_fsm m;
  mori_fsm_init(&m, BLOCK, 0, 0);
  hook.fail = 1;
  assert_int_equal(mori_fsm_push(&m, MORI_RES_PHYS_HANDLE, 0x100, 0, 0), MORI_FSM_ENOMEM);
  assert_non_null(strstr(m.why, "no memory"));
  assert_int_equal(mori_fsm_reserve(&m, 4), MORI_FSM_ENOMEM);
  assert_int_equal(m.len, 0);
  assert_int_equal(m.state.block, MORI_BS_INIT);
  assert_int_equal(hook.calls, 2);
  hook.fail = 0;
  assert_int_equal(mori_fsm_push(&m, MORI_RES_PHYS_HANDLE, 0x100, 0, 0), MORI_FSM_OK);
  mori_fsm_set_allocator(NULL);
  finish(&m);
  assert_int_equal(hook.frees, 0); /* the default allocator freed it, not the hook */
}

/* ---- forget ---- */

static void forget_removes_the_most_recent_match_and_keeps_order(void **state) {
  mori_fsm m;
  reach(&m, WINDOW, MORI_WS_SLOT_TAKEN, WORLD);
  must_push(&m, MORI_RES_RECEIVED_FD, 9, 0, 0);
  must_push(&m, MORI_RES_RECEIVED_FD, 9, 0, 2);
  must_push(&m, MORI_RES_RECEIVED_FD, 8, 0, 3);
  assert_int_equal(mori_fsm_forget(&m, MORI_RES_RECEIVED_FD, 9), MORI_FSM_OK);
  static const struct {
    mori_res kind;
    int aux;
  } left[] = {{MORI_RES_BLOCK_REF, 0},
              {MORI_RES_CHANNEL, 0},
              {MORI_RES_SIGNAL_SLOT, 2},
              {MORI_RES_RECEIVED_FD, 0},
              {MORI_RES_RECEIVED_FD, 3}};
  assert_int_equal(m.len, 5);
  for (size_t i = 0; i < 5; i++) {
    assert_int_equal(m.ledger[i].kind, left[i].kind);
    assert_int_equal(m.ledger[i].aux, left[i].aux);
  }
  finish(&m);
}

static void forget_of_an_entry_not_in_the_ledger_is_refused(void **state) {
  mori_fsm m;
  reach(&m, WINDOW, MORI_WS_SLOT_TAKEN, WORLD);
  must_push(&m, MORI_RES_RECEIVED_FD, 9, 0, 0);
  assert_int_equal(mori_fsm_forget(&m, MORI_RES_RECEIVED_FD, 8), MORI_FSM_EILLEGAL);
  assert_int_equal(mori_fsm_forget(&m, MORI_RES_CHANNEL, 9), MORI_FSM_EILLEGAL);
  assert_non_null(strstr(m.why, "not in the ledger"));
  assert_int_equal(m.len, 4);
  finish(&m);
}

/* ---- terminal states ---- */

static void terminal_states_refuse_push_fire_forget_release_and_fail(void **state) {
  static const int ends[] = {MORI_FSM_RELEASED, MORI_FSM_FAILED};
  for (size_t k = 0; k < 2; k++) {
    for (size_t i = 0; i < 2; i++) {
      mori_fsm m;
      recorder *r = new_recorder();
      reach(&m, kinds[k], ends[i], WORLD);
      assert_int_equal(mori_fsm_push(&m, MORI_RES_PHYS_HANDLE, 1, 0, 0), MORI_FSM_ETERMINAL);
      assert_int_equal(mori_fsm_push(&m, MORI_RES_BLOCK_REF, 1, 0, 0), MORI_FSM_ETERMINAL);
      for (int ev = 0; ev < MORI_EV__COUNT; ev++)
        assert_int_equal(mori_fsm_fire(&m, (mori_wevent)ev), MORI_FSM_ETERMINAL);
      assert_int_equal(mori_fsm_forget(&m, MORI_RES_PHYS_HANDLE, 1), MORI_FSM_ETERMINAL);
      assert_int_equal(mori_fsm_release(&m, record, r), MORI_FSM_ETERMINAL);
      assert_int_equal(mori_fsm_fail(&m, record, r), MORI_FSM_ETERMINAL);
      assert_int_equal(m.state.id, ends[i]);
      assert_int_equal(m.len, 0);
      assert_int_equal(r->n, 0);
      assert_non_null(strstr(m.why, mori_fsm_state_name(ends[i])));
      free(r);
      mori_fsm_destroy(&m);
    }
  }
}

/* ---- invariants ---- */

/* A corruption of a valid machine and the message that must name it. */
typedef struct breakage {
  const char *what;
  mori_fsm_kind kind;
  int state;
  void (*corrupt)(mori_fsm *m);
  const char *why;
} breakage;

static void drop_slot_3(mori_fsm *m) {
  uintptr_t va = m->ledger[find(m, MORI_RES_SLOT_MAPPING, 3)].value;
  assert_int_equal(mori_fsm_forget(m, MORI_RES_SLOT_MAPPING, va), 0);
}
static void drop_import_3(mori_fsm *m) {
  assert_int_equal(mori_fsm_forget(m, MORI_RES_IMPORTED_HANDLE, 0x1003), 0);
}
static void second_device_table(mori_fsm *m) {
  m->ledger[find(m, MORI_RES_SIGNAL_STATE, 0)].kind = MORI_RES_DEVICE_TABLE;
}
static void slot_taken_without_its_signal_slot(mori_fsm *m) {
  assert_int_equal(mori_fsm_forget(m, MORI_RES_SIGNAL_SLOT, 0x3170), MORI_FSM_OK);
}
static void two_signal_states(mori_fsm *m) {
  m->state.window = MORI_WS_SLOTS_ACCESSIBLE; /* the one state that records it */
  must_push(m, MORI_RES_SIGNAL_STATE, 0x3171, 0, 0);
  m->state.window = MORI_WS_MAPPED;
}
static void signal_state_before_the_table(mori_fsm *m) {
  size_t t = find(m, MORI_RES_DEVICE_TABLE, 0), st = find(m, MORI_RES_SIGNAL_STATE, 0);
  mori_ledger_entry e = m->ledger[t];
  m->ledger[t] = m->ledger[st];
  m->ledger[st] = e;
}
static void two_zero_events(mori_fsm *m) {
  m->state.block = MORI_BS_ACCESSIBLE;
  must_push(m, MORI_RES_ZERO_EVENT, 0xb10d, 0, 0);
  m->state.block = MORI_BS_ALLOCATED;
}
static void second_block_ref(mori_fsm *m) {
  m->ledger[find(m, MORI_RES_SIGNAL_SLOT, 2)].kind = MORI_RES_BLOCK_REF;
}
static void import_aux_outside_world(mori_fsm *m) {
  m->ledger[find(m, MORI_RES_IMPORTED_HANDLE, 3)].aux = WORLD;
}
static void negative_slot_aux(mori_fsm *m) {
  m->ledger[find(m, MORI_RES_SLOT_MAPPING, 0)].aux = -1;
}
/* the own slot recorded as a peer's; and twice, as the span's own */
static void slot_of_own_rank(mori_fsm *m) {
  m->ledger[find(m, MORI_RES_SLOT_MAPPING, 0)].aux = RANK;
}
static void two_own_slots(mori_fsm *m) {
  must_push(m, MORI_RES_OWN_SLOT_MAPPING, slot_va(RANK), 1 << 21, 0);
  must_push(m, MORI_RES_OWN_SLOT_MAPPING, slot_va(RANK), 1 << 21, 0);
}
static void import_from_own_rank(mori_fsm *m) {
  m->ledger[find(m, MORI_RES_IMPORTED_HANDLE, 3)].aux = RANK;
}
static void received_fd_from_own_rank(mori_fsm *m) {
  m->ledger[find(m, MORI_RES_RECEIVED_FD, 0)].aux = RANK;
}
static void two_slots_for_rank_2(mori_fsm *m) {
  m->ledger[find(m, MORI_RES_SLOT_MAPPING, 3)].aux = 2;
}
static void block_resource_in_window(mori_fsm *m) {
  m->ledger[find(m, MORI_RES_RECEIVED_FD, 0)].kind = MORI_RES_EXPORTED_FD;
}
static void span_before_last_import(mori_fsm *m) {
  size_t a = find(m, MORI_RES_IMPORTED_HANDLE, 3), b = find(m, MORI_RES_SPAN_RESERVATION, 0);
  mori_ledger_entry t = m->ledger[a];
  m->ledger[a] = m->ledger[b];
  m->ledger[b] = t;
}
static void unknown_kind(mori_fsm *m) { m->ledger[0].kind = (mori_res)42; }
static void rank_outside_world(mori_fsm *m) { m->rank = WORLD; }
/* another kind's state, on purpose: the types refuse it without the cast */
static void window_in_allocated(mori_fsm *m) { m->state.window = (mori_wstate)MORI_BS_ALLOCATED; }
static void block_in_bound(mori_fsm *m) { m->state.block = (mori_bstate)MORI_WS_BOUND; }
static void rendezvous_missing_import(mori_fsm *m) {
  assert_int_equal(mori_fsm_forget(m, MORI_RES_IMPORTED_HANDLE, 0x1000), 0);
}
static void rendezvous_with_span(mori_fsm *m) {
  must_push(m, MORI_RES_SPAN_RESERVATION, 0x7e0000000000, 0, 0);
}
static void second_fd_from_rank_0(mori_fsm *m) {
  m->state.window = MORI_WS_SLOT_TAKEN; /* the one state that may push fds */
  must_push(m, MORI_RES_RECEIVED_FD, 30, 0, 0);
  m->state.window = MORI_WS_RENDEZVOUS;
}
static void attached_with_channel(mori_fsm *m) { must_push(m, MORI_RES_CHANNEL, 0xc4a7, 0, 0); }
/* an exchange that received every fd but never closed its socket */
static void exchanged_keeping_the_channel(mori_fsm *m) {
  for (int p = 0; p < WORLD; p++)
    if (p != RANK) must_push(m, MORI_RES_RECEIVED_FD, (uintptr_t)(20 + p), 0, p);
  m->state.window = MORI_WS_EXCHANGED;
}
static void block_without_local_mapping(mori_fsm *m) {
  assert_int_equal(mori_fsm_forget(m, MORI_RES_LOCAL_MAPPING, 0x7f0000000000), 0);
}
static void block_with_window_resource(mori_fsm *m) {
  m->ledger[2].kind = MORI_RES_SLOT_MAPPING;
}
static void allocated_with_exported_fd(mori_fsm *m) {
  must_push(m, MORI_RES_EXPORTED_FD, 7, 0, 0);
}
static void two_exported_fds(mori_fsm *m) {
  m->state.block = MORI_BS_ALLOCATED;
  must_push(m, MORI_RES_EXPORTED_FD, 8, 0, 0);
  m->state.block = MORI_BS_EXPORTED;
}
static void init_holding_a_handle(mori_fsm *m) {
  must_push(m, MORI_RES_PHYS_HANDLE, 0x100, 0, 0);
}
static void created_with_a_reservation(mori_fsm *m) {
  must_push(m, MORI_RES_LOCAL_RESERVATION, 0x7f0000000000, 0, 0);
}

/* A heal's: LOSE that kept the dead rank's import; an exchange that
 * never closed the heal's channel; a REMAP that mapped no slot; a broken
 * heal that bound a second channel or gave back a second import. */
static void lose_keeping_the_import(mori_fsm *m) {
  m->state.window = MORI_WS_REEXCHANGED; /* a state that records imports */
  must_push(m, MORI_RES_IMPORTED_HANDLE, 0x1000 + DEAD, 1 << 21, DEAD);
  m->state.window = MORI_WS_SLOT_LOST;
}
static void reexchanged_keeping_the_channel(mori_fsm *m) {
  must_push(m, MORI_RES_RECEIVED_FD, HEAL_FD(DEAD), 0, DEAD);
  m->state.window = MORI_WS_REEXCHANGED;
}
static void healed_without_the_slot(mori_fsm *m) {
  must_push(m, MORI_RES_IMPORTED_HANDLE, HEAL_IMPORT(DEAD), 0, DEAD);
  m->state.window = MORI_WS_HEALED;
}
static void broken_with_two_channels(mori_fsm *m) {
  m->ledger[find(m, MORI_RES_SIGNAL_SLOT, 2)].kind = MORI_RES_CHANNEL;
}
static void broken_short_of_an_import(mori_fsm *m) {
  assert_int_equal(mori_fsm_forget(m, MORI_RES_IMPORTED_HANDLE, 0x1000), MORI_FSM_OK);
}
static void broken_with_the_dead_ranks_slot_twice(mori_fsm *m) {
  m->ledger[find(m, MORI_RES_SLOT_MAPPING, 3)].aux = 0;
}

static const breakage breakages[] = {
    {"missing slot", WINDOW, MORI_WS_MAPPED, drop_slot_3, "MAPPED: 2 slot mappings, expected 3"},
    {"own slot as a peer's", WINDOW, MORI_WS_MAPPED, slot_of_own_rank,
     "MAPPED: SLOT_MAPPING from own rank 1"},
    {"two own slots", WINDOW, MORI_WS_MAPPED, two_own_slots,
     "MAPPED: 2 own slot mappings, expected 0..1"},
    {"missing import", WINDOW, MORI_WS_MAPPED, drop_import_3,
     "MAPPED: 2 imported handles, expected 3"},
    {"two tables", WINDOW, MORI_WS_MAPPED, second_device_table,
     "MAPPED: 2 device tables, expected 1"},
    {"no signal slot", WINDOW, MORI_WS_SLOT_TAKEN, slot_taken_without_its_signal_slot,
     "SLOT_TAKEN: 0 signal slots, expected 1"},
    {"two signal states", WINDOW, MORI_WS_MAPPED, two_signal_states,
     "MAPPED: 2 signal states, expected 0..1"},
    {"signal state order", WINDOW, MORI_WS_MAPPED, signal_state_before_the_table,
     "MAPPED: DEVICE_TABLE recorded after SIGNAL_STATE"},
    {"two zero events", BLOCK, MORI_BS_ALLOCATED, two_zero_events,
     "ALLOCATED: 2 zero events, expected 0..1"},
    {"two block refs", WINDOW, MORI_WS_MAPPED, second_block_ref,
     "MAPPED: 2 block references, expected 1"},
    {"aux >= world", WINDOW, MORI_WS_MAPPED, import_aux_outside_world,
     "MAPPED: IMPORTED_HANDLE aux 4 outside the world of 4"},
    {"aux < 0", WINDOW, MORI_WS_MAPPED, negative_slot_aux,
     "MAPPED: SLOT_MAPPING aux -1 outside the world of 4"},
    {"self import", WINDOW, MORI_WS_MAPPED, import_from_own_rank,
     "MAPPED: IMPORTED_HANDLE from own rank 1"},
    {"self fd", WINDOW, MORI_WS_MAPPED, received_fd_from_own_rank,
     "MAPPED: RECEIVED_FD from own rank 1"},
    {"duplicate slot", WINDOW, MORI_WS_MAPPED, two_slots_for_rank_2,
     "MAPPED: two SLOT_MAPPING entries for rank 2"},
    {"block kind in window", WINDOW, MORI_WS_MAPPED, block_resource_in_window,
     "MAPPED: EXPORTED_FD in a window ledger"},
    {"order", WINDOW, MORI_WS_MAPPED, span_before_last_import,
     "MAPPED: IMPORTED_HANDLE recorded after SPAN_RESERVATION"},
    {"unknown kind", WINDOW, MORI_WS_MAPPED, unknown_kind, "MAPPED: entry 0 has unknown kind 42"},
    {"rank", WINDOW, MORI_WS_MAPPED, rank_outside_world,
     "MAPPED: rank 4 outside the world of 4"},
    {"unreachable", WINDOW, MORI_WS_ATTACHED, window_in_allocated,
     "ALLOCATED: not a state of a window machine"},
    {"unreachable block", BLOCK, MORI_BS_EXPORTED, block_in_bound,
     "BOUND: not a state of a block machine"},
    {"rendezvous import", WINDOW, MORI_WS_RENDEZVOUS, rendezvous_missing_import,
     "RENDEZVOUS: 2 imported handles, expected 3"},
    {"rendezvous span", WINDOW, MORI_WS_RENDEZVOUS, rendezvous_with_span,
     "RENDEZVOUS: 1 span reservation, expected 0"},
    {"duplicate fd", WINDOW, MORI_WS_RENDEZVOUS, second_fd_from_rank_0,
     "RENDEZVOUS: two RECEIVED_FD entries for rank 0"},
    {"attached window", WINDOW, MORI_WS_ATTACHED, attached_with_channel,
     "ATTACHED: 1 channel, expected 0"},
    {"channel kept", WINDOW, MORI_WS_SLOT_TAKEN, exchanged_keeping_the_channel,
     "EXCHANGED: 1 channel, expected 0"},
    {"block mapping", BLOCK, MORI_BS_EXPORTED, block_without_local_mapping,
     "EXPORTED: 0 local mappings, expected 1"},
    {"window kind in block", BLOCK, MORI_BS_ALLOCATED, block_with_window_resource,
     "ALLOCATED: SLOT_MAPPING in a block ledger"},
    {"early fd", BLOCK, MORI_BS_ALLOCATED, allocated_with_exported_fd,
     "ALLOCATED: 1 exported fd, expected 0"},
    {"two fds", BLOCK, MORI_BS_EXPORTED, two_exported_fds, "EXPORTED: 2 exported fds, expected 0..1"},
    {"init", BLOCK, MORI_BS_INIT, init_holding_a_handle, "INIT: 1 physical handle, expected 0"},
    {"created", BLOCK, MORI_BS_CREATED, created_with_a_reservation,
     "CREATED: 1 local reservation, expected 0"},
    {"lose kept import", WINDOW, MORI_WS_SLOT_LOST, lose_keeping_the_import,
     "SLOT_LOST: 3 imported handles, expected 2"},
    {"heal channel kept", WINDOW, MORI_WS_REJOINED, reexchanged_keeping_the_channel,
     "REEXCHANGED: 1 channel, expected 0"},
    {"healed short a slot", WINDOW, MORI_WS_REEXCHANGED, healed_without_the_slot,
     "HEALED: 2 slot mappings, expected 3"},
    {"broken two channels", WINDOW, MORI_WS_BROKEN, broken_with_two_channels,
     "BROKEN: 2 channels, expected 0..1"},
    {"broken short an import", WINDOW, MORI_WS_BROKEN, broken_short_of_an_import,
     "BROKEN: 1 imported handle, expected 2..3"},
    {"broken duplicate slot", WINDOW, MORI_WS_BROKEN, broken_with_the_dead_ranks_slot_twice,
     "BROKEN: two SLOT_MAPPING entries for rank 0"},
};

static void check_names_the_first_broken_invariant(void **state) {
  for (size_t i = 0; i < sizeof breakages / sizeof breakages[0]; i++) {
    const breakage *b = &breakages[i];
    mori_fsm m;
    reach(&m, b->kind, b->state, WORLD);
    assert_int_equal(mori_fsm_check(&m), MORI_FSM_OK); /* the control: intact passes */
    b->corrupt(&m);
    int rc = mori_fsm_check(&m);
    if (rc != MORI_FSM_EINVARIANT || strcmp(m.why, b->why) != 0)
      fail_msg("%s: rc %d, why \"%s\", expected \"%s\"", b->what, rc, m.why, b->why);
    m.rank = RANK;
    finish(&m);
  }
}

static void received_fds_range_up_to_world_minus_1(void **state) {
  mori_fsm m;
  reach(&m, WINDOW, MORI_WS_RENDEZVOUS, WORLD);
  assert_int_equal(mori_fsm_count(&m, MORI_RES_RECEIVED_FD), WORLD - 1);
  assert_int_equal(mori_fsm_check(&m), MORI_FSM_OK);
  for (int p = 0; p < WORLD; p++) {
    if (p == RANK) continue;
    assert_int_equal(mori_fsm_forget(&m, MORI_RES_RECEIVED_FD, (uintptr_t)(20 + p)), 0);
    assert_int_equal(mori_fsm_check(&m), MORI_FSM_OK);
  }
  assert_int_equal(mori_fsm_count(&m, MORI_RES_RECEIVED_FD), 0);
  finish(&m);
}

static void fire_with_a_broken_ledger_fails_and_stays_put(void **state) {
  mori_fsm m;
  reach(&m, WINDOW, MORI_WS_SPAN_RESERVED, WORLD);
  for (int r = 0; r < WORLD - 1; r++)
    if (r != RANK) must_push(&m, MORI_RES_SLOT_MAPPING, slot_va(r), 1 << 21, r);
  assert_int_equal(mori_fsm_fire(&m, MORI_EV_MAP), MORI_FSM_EINVARIANT);
  assert_string_equal(m.why, "SLOTS_MAPPED: 2 slot mappings, expected 3");
  assert_int_equal(m.state.window, MORI_WS_SPAN_RESERVED);
  must_push(&m, MORI_RES_SLOT_MAPPING, slot_va(3), 1 << 21, 3);
  assert_int_equal(mori_fsm_fire(&m, MORI_EV_MAP), MORI_FSM_OK);
  assert_int_equal(m.state.window, MORI_WS_SLOTS_MAPPED);
  finish(&m);
}

static void import_requires_every_peer_handle_imported(void **state) {
  mori_fsm m;
  reach(&m, WINDOW, MORI_WS_EXCHANGED, WORLD);
  must_push(&m, MORI_RES_IMPORTED_HANDLE, 0x1000, 0, 0);
  must_push(&m, MORI_RES_IMPORTED_HANDLE, 0x1002, 0, 2);
  assert_int_equal(mori_fsm_fire(&m, MORI_EV_IMPORT), MORI_FSM_EINVARIANT);
  assert_string_equal(m.why, "RENDEZVOUS: 2 imported handles, expected 3");
  assert_int_equal(m.state.window, MORI_WS_EXCHANGED);
  must_push(&m, MORI_RES_IMPORTED_HANDLE, 0x1003, 0, 3);
  assert_int_equal(mori_fsm_fire(&m, MORI_EV_IMPORT), MORI_FSM_OK);
  finish(&m);
}

/* ---- release and rollback ---- */

/* Reverse order, with the one deferred kind (EXPORTED_FD) after the rest. */
static void release_unwinds_in_reverse_order_exported_fd_last(void **state) {
  for (size_t k = 0; k < 2; k++) {
    mori_fsm m;
    recorder *r = new_recorder();
    reach(&m, kinds[k], kinds[k] == BLOCK ? MORI_BS_EXPORTED : MORI_WS_MAPPED, WORLD);
    mori_ledger_entry pushed[128];
    size_t n = m.len, j = 0;
    memcpy(pushed, m.ledger, n * sizeof pushed[0]);
    assert_int_equal(mori_fsm_release(&m, record, r), MORI_FSM_OK);
    for (size_t pass = 0; pass < 2; pass++)
    for (size_t i = n; i-- > 0;) {
      if (pushed[i].kind == MORI_RES_BLOCK_REF) continue;
      if ((pushed[i].kind == MORI_RES_EXPORTED_FD) != pass) continue;
      assert_true(j < r->n);
      assert_int_equal(r->seen[j].kind, pushed[i].kind);
      assert_int_equal(r->seen[j].value, pushed[i].value);
      assert_int_equal(r->seen[j].size, pushed[i].size);
      assert_int_equal(r->seen[j].aux, pushed[i].aux);
      j++;
    }
    assert_int_equal(j, r->n);
    assert_int_equal(m.state.id, MORI_FSM_RELEASED);
    assert_int_equal(m.len, 0);
    free(r);
    finish(&m);
  }
}

/* Collapses the release sequence into runs of one kind. */
static size_t runs(const recorder *r, mori_res *out) {
  size_t n = 0;
  for (size_t i = 0; i < r->n; i++)
    if (n == 0 || out[n - 1] != r->seen[i].kind) out[n++] = r->seen[i].kind;
  return n;
}

/* The teardown as first written: synchronize; free device tables; unmap
 * each slot; release imports; free the span.  Reverse acquisition gives
 * the first three steps, then frees the span before the imports (it was
 * reserved after them), and releases every import before any fd is closed
 * (each fd stays open until the handle imported from it is gone;
 * docs/state-machine.md).  The signal state goes first (the watchdog's
 * entries read the cells the slots map) and the signal slot last (host
 * bits only).  The own slot, mapped after MAPPED by the span's first
 * hand-out, takes its tier's place: unmapped before the peers' slots,
 * and every slot before the span goes. */
static void window_release_frees_tables_then_slots_then_span_then_imports(void **state) {
  mori_fsm m;
  recorder *r = new_recorder();
  reach(&m, WINDOW, MORI_WS_MAPPED, WORLD);
  step(&m, MORI_EV_FLATTEN);
  assert_int_equal(mori_fsm_release(&m, record, r), MORI_FSM_OK);
  static const mori_res want[] = {MORI_RES_SIGNAL_STATE,     MORI_RES_DEVICE_TABLE,
                                  MORI_RES_OWN_SLOT_MAPPING, MORI_RES_SLOT_MAPPING,
                                  MORI_RES_SPAN_RESERVATION,
                                  MORI_RES_IMPORTED_HANDLE,  MORI_RES_RECEIVED_FD,
                                  MORI_RES_SIGNAL_SLOT};
  mori_res got[128];
  size_t n = runs(r, got);
  assert_int_equal(n, sizeof want / sizeof want[0]);
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i])
      fail_msg("run %zu is %s, expected %s", i, mori_res_name(got[i]), mori_res_name(want[i]));
  /* the own slot at its address; then slots, imports and fds, highest
   * peer first */
  assert_int_equal(r->seen[2].value, slot_va(RANK));
  static const int peers[] = {3, 2, 0};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(r->seen[3 + i].aux, peers[i]);
    assert_int_equal(r->seen[3 + 3 + 1 + i].aux, peers[i]);
    assert_int_equal(r->seen[3 + 3 + 4 + i].aux, peers[i]);
  }
  free(r);
  finish(&m);
}

/* The exported fd is deferred: closed only after the final release of the
 * handle it came from (docs/quirks.md, export-fd-lifetime).  An
 * allocation's zeroing event, never waited for, goes first. */
static void block_release_unmaps_unreserves_releases_handle_then_closes_fd(void **state) {
  mori_fsm m;
  recorder *r = new_recorder();
  reach(&m, BLOCK, MORI_BS_EXPORTED, 0);
  assert_int_equal(mori_fsm_release(&m, record, r), MORI_FSM_OK);
  static const mori_res want[] = {MORI_RES_ZERO_EVENT, MORI_RES_LOCAL_MAPPING,
                                  MORI_RES_LOCAL_RESERVATION, MORI_RES_PHYS_HANDLE,
                                  MORI_RES_EXPORTED_FD};
  assert_int_equal(r->n, 5);
  for (size_t i = 0; i < 5; i++) assert_int_equal(r->seen[i].kind, want[i]);
  free(r);
  finish(&m);
}

static void fail_rolls_back_a_partial_allocation_in_reverse(void **state) {
  mori_fsm m;
  recorder *r = new_recorder();
  mori_fsm_init(&m, BLOCK, 0, 0);
  step(&m, MORI_EV_CREATE);
  step(&m, MORI_EV_RESERVE);
  assert_int_equal(mori_fsm_fire(&m, MORI_EV_MAP), MORI_FSM_EINVARIANT);
  assert_string_equal(m.why, "BACKED: 0 local mappings, expected 1");
  assert_int_equal(m.state.block, MORI_BS_RESERVED);
  assert_int_equal(mori_fsm_fail(&m, record, r), MORI_FSM_OK);
  assert_int_equal(r->n, 2);
  assert_int_equal(r->seen[0].kind, MORI_RES_LOCAL_RESERVATION);
  assert_int_equal(r->seen[1].kind, MORI_RES_PHYS_HANDLE);
  assert_int_equal(r->seen[1].value, 0x100);
  assert_int_equal(m.state.block, MORI_BS_FAILED);
  assert_int_equal(m.len, 0);
  free(r);
  finish(&m);
}

static void fail_mid_exchange_rolls_back_fds_then_the_slot_then_the_channel(void **state) {
  mori_fsm m;
  recorder *r = new_recorder();
  reach(&m, WINDOW, MORI_WS_SLOT_TAKEN, WORLD);
  must_push(&m, MORI_RES_RECEIVED_FD, 20, 0, 0);
  must_push(&m, MORI_RES_RECEIVED_FD, 22, 0, 2);
  assert_int_equal(mori_fsm_fail(&m, record, r), MORI_FSM_OK);
  static const uintptr_t want[] = {22, 20, 0x3170, 0xc4a7};
  assert_int_equal(r->n, 4);
  for (size_t i = 0; i < 4; i++) assert_int_equal(r->seen[i].value, want[i]);
  assert_int_equal(m.state.window, MORI_WS_FAILED);
  free(r);
  finish(&m);
}

static void release_goes_on_past_failing_callbacks_and_reports_the_first(void **state) {
  mori_fsm m;
  recorder *r = new_recorder();
  reach(&m, WINDOW, MORI_WS_MAPPED, WORLD);
  size_t n = m.len;
  r->fail[0].kind = MORI_RES_IMPORTED_HANDLE; /* released later, so not the first */
  r->fail[0].aux = 0;
  r->fail[0].rc = -9;
  r->fail[1].kind = MORI_RES_SLOT_MAPPING;
  r->fail[1].aux = 2;
  r->fail[1].rc = -7;
  assert_int_equal(mori_fsm_release(&m, record, r), -7);
  assert_int_equal(r->n, n - 1); /* every entry but the block reference */
  assert_int_equal(r->seen[r->n - 1].kind, MORI_RES_SIGNAL_SLOT);
  assert_non_null(strstr(m.why, "SLOT_MAPPING"));
  assert_int_equal(m.state.window, MORI_WS_RELEASED);
  assert_int_equal(m.len, 0);
  free(r);
  finish(&m);
}

static void fail_goes_on_past_a_failing_callback_and_ends_failed(void **state) {
  mori_fsm m;
  recorder *r = new_recorder();
  reach(&m, BLOCK, MORI_BS_EXPORTED, 0);
  r->fail[0].kind = MORI_RES_EXPORTED_FD;
  r->fail[0].rc = -5;
  assert_int_equal(mori_fsm_fail(&m, record, r), -5);
  assert_int_equal(r->n, 5);
  assert_int_equal(r->seen[3].kind, MORI_RES_PHYS_HANDLE);
  assert_int_equal(r->seen[4].kind, MORI_RES_EXPORTED_FD);
  assert_int_equal(m.state.block, MORI_BS_FAILED);
  assert_int_equal(m.len, 0);
  free(r);
  finish(&m);
}

static void block_ref_never_reaches_the_release_callback(void **state) {
  static const struct {
    mori_wstate from;
    mori_wevent ev;
  } unwinds[] = {{MORI_WS_ATTACHED, MORI_EV_FAIL},   {MORI_WS_SLOT_TAKEN, MORI_EV_FAIL},
                 {MORI_WS_RENDEZVOUS, MORI_EV_FAIL}, {MORI_WS_MAPPED, MORI_EV_RELEASE},
                 {MORI_WS_MAPPED, MORI_EV_FAIL}};
  for (size_t i = 0; i < sizeof unwinds / sizeof unwinds[0]; i++) {
    mori_fsm m;
    recorder *r = new_recorder();
    reach(&m, WINDOW, unwinds[i].from, WORLD);
    size_t n = m.len;
    assert_int_equal(mori_fsm_count(&m, MORI_RES_BLOCK_REF), 1);
    int rc = unwinds[i].ev == MORI_EV_FAIL ? mori_fsm_fail(&m, record, r)
                                           : mori_fsm_release(&m, record, r);
    assert_int_equal(rc, MORI_FSM_OK);
    assert_int_equal(r->n, n - 1);
    for (size_t j = 0; j < r->n; j++) assert_int_not_equal(r->seen[j].kind, MORI_RES_BLOCK_REF);
    assert_int_equal(m.len, 0);
    free(r);
    finish(&m);
  }
}

static void rollback_of_only_a_block_ref_needs_no_callback(void **state) {
  mori_fsm m;
  reach(&m, WINDOW, MORI_WS_ATTACHED, WORLD);
  assert_int_equal(mori_fsm_fail(&m, NULL, NULL), MORI_FSM_OK);
  assert_int_equal(m.state.window, MORI_WS_FAILED);
  mori_fsm_destroy(&m);
}

static void release_without_a_callback_is_refused_while_entries_need_one(void **state) {
  mori_fsm m;
  reach(&m, BLOCK, MORI_BS_EXPORTED, 0);
  assert_int_equal(mori_fsm_release(&m, NULL, NULL), MORI_FSM_EILLEGAL);
  assert_int_equal(mori_fsm_fail(&m, NULL, NULL), MORI_FSM_EILLEGAL);
  assert_non_null(strstr(m.why, "no release callback"));
  assert_int_equal(m.state.block, MORI_BS_EXPORTED);
  assert_int_equal(m.len, 5);
  finish(&m);
}

/* ---- a window's heal ---- */

/* The release of a window is a safe teardown whatever a heal did to its
 * ledger: every entry but the block reference given back once; the signal
 * state first, then the device table, then every slot (the watchdog reads
 * cells the slots map, the table points into them); the span after every
 * slot; every import after the span (reserved after the imports) and
 * before the fd it came by; the signal slot and the channel after all of
 * those. */
static void assert_safe_release(const recorder *r, size_t entries, int world) {
  long at_table = -1, at_state = -1, at_span = -1, first_slot = -1, last_slot = -1;
  long import_at[64], fd_at[64], signal_slot = -1, channel = -1;
  assert_true(world <= 64);
  for (int p = 0; p < world; p++) import_at[p] = fd_at[p] = -1;
  assert_int_equal(r->n, entries - 1);
  for (size_t i = 0; i < r->n; i++) {
    const mori_ledger_entry *e = &r->seen[i];
    long at = (long)i;
    switch (e->kind) {
    case MORI_RES_SIGNAL_STATE: at_state = at; break;
    case MORI_RES_DEVICE_TABLE: at_table = at; break;
    case MORI_RES_SPAN_RESERVATION: at_span = at; break;
    case MORI_RES_SIGNAL_SLOT: signal_slot = at; break;
    case MORI_RES_CHANNEL: channel = at; break;
    case MORI_RES_SLOT_MAPPING:
    case MORI_RES_OWN_SLOT_MAPPING:
      if (first_slot < 0) first_slot = at;
      last_slot = at;
      break;
    case MORI_RES_IMPORTED_HANDLE:
      assert_int_equal(import_at[e->aux], -1);
      import_at[e->aux] = at;
      break;
    case MORI_RES_RECEIVED_FD:
      assert_int_equal(fd_at[e->aux], -1);
      fd_at[e->aux] = at;
      break;
    default:
      fail_msg("released %s from a window", mori_res_name(e->kind));
    }
  }
  assert_true(at_state >= 0 && at_state < at_table);
  assert_true(at_table < first_slot && last_slot < at_span);
  for (int p = 0; p < world; p++) {
    if (import_at[p] >= 0) assert_true(at_span < import_at[p]);
    if (import_at[p] >= 0 && fd_at[p] >= 0 && import_at[p] > fd_at[p])
      fail_msg("rank %d's fd closed before the handle imported from it", p);
    assert_true(fd_at[p] < signal_slot && import_at[p] < signal_slot);
  }
  if (channel >= 0) assert_true(signal_slot < channel); /* tier 6, under the slot's 7 */
}

/* A MAPPED window as the fabric path leaves it: no received fd. */
static void as_on_the_fabric_path(mori_fsm *m) {
  for (int p = 0; p < m->world_size; p++)
    if (p != m->rank)
      assert_int_equal(mori_fsm_forget(m, MORI_RES_RECEIVED_FD, 20 + (uintptr_t)p), MORI_FSM_OK);
  assert_int_equal(mori_fsm_check(m), MORI_FSM_OK);
}

/* MAPPED -LOSE-> ... -RESYNC-> MAPPED, with the heal's work as heal.c
 * does it: the ledger passes the check in every state; back in MAPPED it
 * is the rendezvous's, but for the dead rank's fd, import and slot, which
 * are the replacement's, each at its tier's place (the fd and the import
 * after every other rank's, before the span; the slot after every other
 * slot, before the device table), not appended; and a RELEASE then is as
 * safe a teardown as a window's that never healed.  On the fd path and
 * the fabric path, for a dead rank below, above and at either end; every
 * other case with the own slot of the span mapped (FLATTEN) before the
 * heal, which keeps it where it was. */
static void heal_returns_a_mapped_window_to_mapped_with_each_entry_at_its_place(void **state) {
  static const struct {
    int world, rank, dead, fds;
  } cases[] = {{4, RANK, DEAD, 1}, {2, 0, 1, 1},   {2, 1, 0, 1},    {4, 3, 0, 0},
               {16, 5, 0, 1},      {16, 5, 15, 1}, {16, 15, 7, 0}};
  static const int after[NHEAL] = {MORI_WS_SLOT_LOST,   MORI_WS_HEAL_BOUND, MORI_WS_REJOINED,
                                   MORI_WS_REEXCHANGED, MORI_WS_HEALED,     MORI_WS_MAPPED};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int world = cases[c].world, dead = cases[c].dead, fds = cases[c].fds;
    mori_fsm m;
    mori_fsm_init(&m, WINDOW, cases[c].rank, world);
    walk(&m, MORI_WS_MAPPED);
    if (c % 2) step(&m, MORI_EV_FLATTEN);
    if (!fds) as_on_the_fabric_path(&m);
    assert_int_equal(mori_fsm_check(&m), MORI_FSM_OK);
    /* what MAPPED must hold after the heal: the same entries in the same
     * order, the replacement's fd and import before the span, its slot
     * before the device table */
    mori_ledger_entry want[128];
    size_t n = 0;
    for (size_t i = 0; i < m.len; i++) {
      mori_ledger_entry e = m.ledger[i];
      int dead_ones = e.aux == dead && (e.kind == MORI_RES_RECEIVED_FD ||
                                        e.kind == MORI_RES_IMPORTED_HANDLE ||
                                        e.kind == MORI_RES_SLOT_MAPPING);
      if (e.kind == MORI_RES_SPAN_RESERVATION) {
        if (fds) want[n++] = (mori_ledger_entry){MORI_RES_RECEIVED_FD, HEAL_FD(dead), 0, dead};
        want[n++] = (mori_ledger_entry){MORI_RES_IMPORTED_HANDLE, HEAL_IMPORT(dead), 0, dead};
      }
      if (e.kind == MORI_RES_DEVICE_TABLE)
        want[n++] = (mori_ledger_entry){MORI_RES_SLOT_MAPPING, slot_va(dead), 0, dead};
      if (!dead_ones) want[n++] = e;
    }
    assert_int_equal(n, m.len);
    heal_op ops[16];
    size_t nops = heal_ops(dead, fds, ops);
    for (size_t i = 0; i < NHEAL; i++) {
      for (size_t j = 0; j < nops; j++)
        if (ops[j].step == heal_path[i]) apply(&m, &ops[j]);
      int rc = mori_fsm_fire(&m, heal_path[i]);
      if (rc != MORI_FSM_OK)
        fail_msg("world %d: %s: %d (%s)", world, mori_wevent_name(heal_path[i]), rc, m.why);
      assert_int_equal(m.state.window, after[i]);
      assert_int_equal(mori_fsm_check(&m), MORI_FSM_OK);
      if (after[i] == MORI_WS_SLOT_LOST) {
        assert_int_equal(mori_fsm_count(&m, MORI_RES_SLOT_MAPPING), world - 2);
        assert_int_equal(mori_fsm_count(&m, MORI_RES_OWN_SLOT_MAPPING), c % 2);
        assert_int_equal(mori_fsm_count(&m, MORI_RES_IMPORTED_HANDLE), world - 2);
        assert_int_equal(mori_fsm_count(&m, MORI_RES_RECEIVED_FD), fds ? world - 2 : 0);
      }
      if (after[i] == MORI_WS_HEAL_BOUND && fds) { /* the channel at its tier's place */
        assert_int_equal(m.ledger[0].kind, MORI_RES_BLOCK_REF);
        assert_int_equal(m.ledger[1].kind, MORI_RES_CHANNEL);
        assert_int_equal(m.ledger[2].kind, MORI_RES_SIGNAL_SLOT);
      }
    }
    assert_int_equal(m.len, n);
    for (size_t i = 0; i < n; i++)
      if (m.ledger[i].kind != want[i].kind || m.ledger[i].value != want[i].value ||
          m.ledger[i].aux != want[i].aux)
        fail_msg("world %d, dead %d: entry %zu is %s 0x%lx (aux %d), expected %s 0x%lx (aux %d)",
                 world, dead, i, mori_res_name(m.ledger[i].kind),
                 (unsigned long)m.ledger[i].value, m.ledger[i].aux, mori_res_name(want[i].kind),
                 (unsigned long)want[i].value, want[i].aux);
    /* and a heal again, from the healed window */
    assert_int_equal(mori_fsm_forward(WINDOW, m.state.id), MORI_EV_LOSE);
    recorder *r = new_recorder();
    assert_int_equal(mori_fsm_release(&m, record, r), MORI_FSM_OK);
    assert_safe_release(r, n, world);
    /* the replacement's: its slot unmapped right after the device table,
     * its import released before its fd */
    size_t table = 0;
    while (r->seen[table].kind != MORI_RES_DEVICE_TABLE) table++;
    assert_int_equal(r->seen[table + 1].kind, MORI_RES_SLOT_MAPPING);
    assert_int_equal(r->seen[table + 1].aux, dead);
    free(r);
    finish(&m);
  }
}

/* A heal that fails anywhere, after any piece of its work, breaks the
 * window: BREAK is legal from MAPPED (its first step failed) and from
 * every state of the heal, BROKEN's bounds admit whatever was left, no
 * step leaves BROKEN, and its RELEASE (or FAIL) gives every entry back,
 * in a safe order, once. */
static void a_heal_broken_after_any_piece_of_its_work_unwinds_everything(void **state) {
  for (int fds = 0; fds <= 1; fds++) {
    heal_op ops[16];
    size_t nops = heal_ops(DEAD, fds, ops);
    /* the heal as a script: each step's work, then its event */
    size_t len = nops + NHEAL;
    for (size_t cut = 0; cut <= len; cut++) {
      for (int by_fail = 0; by_fail <= 1; by_fail++) {
        mori_fsm m;
        reach(&m, WINDOW, MORI_WS_MAPPED, WORLD);
        if (!fds) as_on_the_fabric_path(&m);
        size_t done = 0;
        for (size_t i = 0; i < NHEAL && done < cut; i++) {
          for (size_t j = 0; j < nops && done < cut; j++)
            if (ops[j].step == heal_path[i]) apply(&m, &ops[j]), done++;
          if (done < cut) {
            assert_int_equal(mori_fsm_fire(&m, heal_path[i]), MORI_FSM_OK);
            done++;
          }
        }
        int from = m.state.id;
        int rc = mori_fsm_fire(&m, MORI_EV_BREAK);
        if (rc != MORI_FSM_OK)
          fail_msg("fds %d, cut %zu: BREAK from %s: %d (%s)", fds, cut,
                   mori_fsm_state_name(from), rc, m.why);
        assert_int_equal(m.state.window, MORI_WS_BROKEN);
        assert_int_equal(mori_fsm_forward(WINDOW, m.state.id), -1);
        for (size_t i = 0; i < NHEAL; i++) /* failed for good: no heal goes on */
          assert_int_equal(mori_fsm_fire(&m, heal_path[i]), MORI_FSM_EILLEGAL);
        assert_int_equal(mori_fsm_fire(&m, MORI_EV_BREAK), MORI_FSM_EILLEGAL);
        assert_int_equal(m.state.window, MORI_WS_BROKEN);
        size_t entries = m.len;
        recorder *r = new_recorder();
        rc = by_fail ? mori_fsm_fail(&m, record, r) : mori_fsm_release(&m, record, r);
        assert_int_equal(rc, MORI_FSM_OK);
        assert_int_equal(m.state.id, by_fail ? MORI_FSM_FAILED : MORI_FSM_RELEASED);
        assert_int_equal(m.len, 0);
        assert_safe_release(r, entries, WORLD);
        free(r);
        finish(&m);
      }
    }
  }
}

/* A heal records only the replacement's entries, each in the one state
 * whose step records it: nothing comes back in MAPPED (LOSE gives back,
 * records nothing), a slot before REMAP, an import before its fd, a
 * second channel, or anything once BROKEN.  Each refusal names the kind
 * and the state, leaves the ledger as it was, and the heal goes on. */
static void a_push_outside_a_heal_states_acquisitions_is_refused(void **state) {
  static const struct {
    int s;
    mori_res kind;
  } refused[] = {
      {MORI_WS_MAPPED, MORI_RES_IMPORTED_HANDLE}, {MORI_WS_MAPPED, MORI_RES_SLOT_MAPPING},
      {MORI_WS_MAPPED, MORI_RES_RECEIVED_FD},     {MORI_WS_SLOT_LOST, MORI_RES_SLOT_MAPPING},
      {MORI_WS_SLOT_LOST, MORI_RES_RECEIVED_FD},  {MORI_WS_HEAL_BOUND, MORI_RES_CHANNEL},
      {MORI_WS_HEAL_BOUND, MORI_RES_RECEIVED_FD}, {MORI_WS_REJOINED, MORI_RES_IMPORTED_HANDLE},
      {MORI_WS_REJOINED, MORI_RES_CHANNEL},       {MORI_WS_REEXCHANGED, MORI_RES_RECEIVED_FD},
      {MORI_WS_REEXCHANGED, MORI_RES_DEVICE_TABLE}, {MORI_WS_HEALED, MORI_RES_SLOT_MAPPING},
      {MORI_WS_HEALED, MORI_RES_SIGNAL_STATE},    {MORI_WS_BROKEN, MORI_RES_CHANNEL},
      {MORI_WS_BROKEN, MORI_RES_IMPORTED_HANDLE}, {MORI_WS_BROKEN, MORI_RES_SLOT_MAPPING},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    mori_fsm m;
    reach(&m, WINDOW, refused[i].s, WORLD);
    assert_int_equal(m.state.id, refused[i].s);
    mori_ledger_entry before[128];
    size_t n = m.len;
    memcpy(before, m.ledger, n * sizeof before[0]);
    int rc = mori_fsm_push(&m, refused[i].kind, 0x42, 0, DEAD);
    if (rc != MORI_FSM_EILLEGAL) fail_msg("push %s in %s: %d", mori_res_name(refused[i].kind),
                                          mori_fsm_state_name(refused[i].s), rc);
    char why[128];
    snprintf(why, sizeof why, "push %s: not acquired in %s (window)",
             mori_res_name(refused[i].kind), mori_fsm_state_name(refused[i].s));
    assert_string_equal(m.why, why);
    assert_int_equal(m.len, n);
    for (size_t j = 0; j < n; j++) { /* field by field: the struct has padding */
      assert_int_equal(m.ledger[j].kind, before[j].kind);
      assert_int_equal(m.ledger[j].value, before[j].value);
      assert_int_equal(m.ledger[j].aux, before[j].aux);
    }
    assert_int_equal(mori_fsm_check(&m), MORI_FSM_OK);
    int ev = mori_fsm_forward(WINDOW, m.state.id);
    if (ev >= 0) step(&m, (mori_wevent)ev); /* the heal goes on */
    finish(&m);
  }
}

/* ---- lifecycle asserts ---- */

static void destroy_of_a_live_machine_aborts(void **state) {
#ifdef NDEBUG
  skip(); /* the lifecycle asserts are compiled out */
#endif
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (freopen("/dev/null", "w", stderr) == NULL) _exit(3);
    mori_fsm m;
    reach(&m, WINDOW, MORI_WS_MAPPED, WORLD);
    mori_fsm_destroy(&m);
    _exit(0);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGABRT);
}

/* ---- names, invariant lines and the diagram ---- */

static void names_are_the_enumerators_and_out_of_range_is_a_question_mark(void **state) {
  static const char *const states[] = {
      "INIT",      "CREATED",    "RESERVED",      "BACKED",       "ACCESSIBLE",       "ALLOCATED",
      "EXPORTED",  "ATTACHED",   "BOUND",         "PUBLISHED",    "GATHERED",         "VALIDATED",
      "SLOT_TAKEN", "EXCHANGED", "RENDEZVOUS",    "SPAN_RESERVED", "SLOTS_MAPPED",
      "SLOTS_ACCESSIBLE", "TABLES_BUILT", "MAPPED", "SLOT_LOST", "HEAL_BOUND", "REJOINED",
      "REEXCHANGED", "HEALED", "BROKEN", "RELEASED", "FAILED"};
  static const char *const events[] = {
      "CREATE", "RESERVE",  "MAP",    "GRANT",     "ZERO",     "EXPORT",       "ATTACH",
      "BIND",   "PUBLISH",  "GATHER", "VALIDATE",  "TAKE_SLOT", "EXCHANGE",    "IMPORT",
      "BUILD_TABLES", "BARRIER", "RELEASE", "FAIL", "LOSE", "REBIND", "REJOIN", "REEXCHANGE",
      "REMAP", "RESYNC", "BREAK", "FLATTEN"};
  static const char *const res[] = {
      "PHYS_HANDLE", "LOCAL_RESERVATION", "LOCAL_MAPPING",    "EXPORTED_FD",
      "BLOCK_REF",   "CHANNEL",           "RECEIVED_FD",      "IMPORTED_HANDLE",
      "SPAN_RESERVATION", "SLOT_MAPPING", "DEVICE_TABLE",     "ZERO_EVENT",
      "SIGNAL_SLOT",      "SIGNAL_STATE",      "OWN_SLOT_MAPPING"};
  assert_int_equal(MORI_FSM_NSTATES, sizeof states / sizeof states[0]);
  /* the tables' masks (a row's acquisitions, a lifecycle's allowed window
   * states, the diagram's states in use) hold one bit per state */
  assert_true(MORI_FSM_NSTATES <= 32);
  for (int i = 0; i < MORI_FSM_NSTATES; i++) {
    assert_string_equal(mori_fsm_state_name(i), states[i]);
    assert_true(strlen(mori__fsm_state_words(i)) > 0);
  }
  for (int i = 0; i < MORI_EV__COUNT; i++)
    assert_string_equal(mori_wevent_name((mori_wevent)i), events[i]);
  for (int i = 0; i < MORI_RES__COUNT; i++)
    assert_string_equal(mori_res_name((mori_res)i), res[i]);
  assert_string_equal(mori_fsm_state_name(MORI_FSM_NSTATES), "?");
  assert_string_equal(mori_fsm_state_name(-1), "?");
  assert_string_equal(mori_wevent_name((mori_wevent)-1), "?");
  assert_string_equal(mori_res_name(MORI_RES__COUNT), "?");
  assert_string_equal(mori__fsm_state_words(MORI_FSM_NSTATES), "?");
}

/* The states the two machines share have one number, and each machine's
 * own states are numbered apart from the other's. */
static void block_and_window_states_share_only_init_released_and_failed(void **state) {
  assert_int_equal(MORI_BS_INIT, MORI_FSM_INIT);
  assert_int_equal(MORI_WS_INIT, MORI_FSM_INIT);
  assert_int_equal(MORI_BS_RELEASED, MORI_FSM_RELEASED);
  assert_int_equal(MORI_WS_RELEASED, MORI_FSM_RELEASED);
  assert_int_equal(MORI_BS_FAILED, MORI_FSM_FAILED);
  assert_int_equal(MORI_WS_FAILED, MORI_FSM_FAILED);
  static const int block[] = {MORI_BS_CREATED, MORI_BS_RESERVED, MORI_BS_BACKED,
                              MORI_BS_ACCESSIBLE, MORI_BS_ALLOCATED, MORI_BS_EXPORTED};
  for (size_t i = 0; i < sizeof block / sizeof block[0]; i++) {
    mori__count held[MORI_RES__COUNT];
    assert_int_equal(mori__fsm_ledger(BLOCK, block[i], held), 0);
    assert_int_equal(mori__fsm_ledger(WINDOW, block[i], held), -1);
    assert_int_equal(mori_fsm_forward(WINDOW, block[i]), -1);
  }
  /* a heal's states are a window's alone */
  for (size_t i = 0; i < NHEAL_STATES; i++) {
    mori__count held[MORI_RES__COUNT];
    assert_int_equal(mori__fsm_ledger(WINDOW, heal_states[i], held), 0);
    assert_int_equal(mori__fsm_ledger(BLOCK, heal_states[i], held), -1);
    for (int ev = 0; ev < MORI_EV__COUNT; ev++)
      assert_int_equal(mori_fsm_next(BLOCK, heal_states[i], (mori_wevent)ev), -1);
  }
}

/* A state's line is what the steps that lead to it add, kind by kind in
 * ledger order; the window's says what the design says. */
static void invariant_lines_are_rendered_from_the_steps(void **state) {
  static const struct {
    int s;
    const char *line;
  } lines[] = {
      {MORI_FSM_INIT, "empty ledger"},
      {MORI_BS_CREATED, "block: 1 physical handle"},
      {MORI_BS_ACCESSIBLE, "block: 1 physical handle, 1 local reservation, 1 local mapping"},
      {MORI_BS_EXPORTED, "block: 1 physical handle, 1 local reservation, 1 local mapping, "
                         "0..1 zero event, 0..1 exported fd"},
      {MORI_WS_SLOT_TAKEN, "window: 1 block reference, 0..1 channel, 1 signal slot"},
      {MORI_WS_EXCHANGED, "window: 1 block reference, 1 signal slot, "
                          "0..world_size-1 received fds"},
      {MORI_WS_MAPPED, "window: 1 block reference, 1 signal slot, 0..world_size-1 received fds, "
                       "world_size-1 imported handles, 1 span reservation, world_size-1 slot "
                       "mappings, 0..1 own slot mapping, 1 device table, 0..1 signal state"},
      /* a heal: one rank's fd, import and slot fewer, then a channel, then
       * back; a broken one anywhere between */
      {MORI_WS_SLOT_LOST, "window: 1 block reference, 1 signal slot, 0..world_size-2 received "
                          "fds, world_size-2 imported handles, 1 span reservation, "
                          "world_size-2 slot mappings, 0..1 own slot mapping, 1 device table, "
                          "0..1 signal state"},
      {MORI_WS_REJOINED, "window: 1 block reference, 0..1 channel, 1 signal slot, "
                         "0..world_size-2 received fds, world_size-2 imported handles, 1 span "
                         "reservation, world_size-2 slot mappings, 0..1 own slot mapping, 1 "
                         "device table, 0..1 signal state"},
      {MORI_WS_HEALED, "window: 1 block reference, 1 signal slot, 0..world_size-1 received fds, "
                       "world_size-1 imported handles, 1 span reservation, world_size-1 slot "
                       "mappings, 0..1 own slot mapping, 1 device table, 0..1 signal state"},
      {MORI_WS_BROKEN, "window: 1 block reference, 0..1 channel, 0..1 signal slot, "
                       "0..world_size-1 received fds, world_size-2..world_size-1 imported "
                       "handles, 1 span reservation, world_size-2..world_size-1 slot mappings, "
                       "0..1 own slot mapping, 1 device table, 0..1 signal state"},
      {MORI_FSM_FAILED, "empty ledger"},
  };
  for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
    char line[512];
    int n = mori__fsm_describe(lines[i].s, line, sizeof line);
    assert_true(n > 0 && (size_t)n < sizeof line);
    assert_string_equal(line, lines[i].line);
  }
  char line[16] = "x";
  assert_int_equal(mori__fsm_describe(MORI_FSM_NSTATES, line, sizeof line), 0);
  assert_string_equal(line, "");
}

static void describe_truncates_and_reports_the_full_length(void **state) {
  char full[512], small[8];
  int n = mori__fsm_describe(MORI_WS_MAPPED, full, sizeof full);
  assert_int_equal(mori__fsm_describe(MORI_WS_MAPPED, small, sizeof small), n);
  assert_int_equal(strlen(small), sizeof small - 1);
  assert_memory_equal(small, full, sizeof small - 1);
}

/* ---- the lifecycles without a ledger: window life, watchdog entry ---- */

/* The legal rows, written out independently of lifecycle.c's tables. */
static const struct {
  mori_life from;
  mori_life_event ev;
  mori_life to;
} life_legal[] = {
    {MORI_LIFE_OPENING, MORI_LIFE_EV_OPEN, MORI_LIFE_OPEN},
    {MORI_LIFE_OPENING, MORI_LIFE_EV_ABANDON, MORI_LIFE_CLOSED},
    {MORI_LIFE_OPEN, MORI_LIFE_EV_CLOSE, MORI_LIFE_CLOSING},
    {MORI_LIFE_CLOSING, MORI_LIFE_EV_FINISH, MORI_LIFE_CLOSED},
};

static int life_expected(mori_life s, mori_life_event ev) {
  for (size_t i = 0; i < sizeof life_legal / sizeof life_legal[0]; i++)
    if (life_legal[i].from == s && life_legal[i].ev == ev) return (int)life_legal[i].to;
  return -1;
}

/* Every (state, event): a legal one moves; an illegal one is refused and
 * changes nothing, with ETERMINAL from CLOSED, which nothing leaves. */
static void life_fire_moves_by_each_row_and_refuses_every_other_pair(void **state) {
  int illegal = 0;
  for (int s = 0; s < MORI_LIFE__COUNT; s++)
    for (int ev = 0; ev < MORI_LIFE_EV__COUNT; ev++) {
      int want = life_expected((mori_life)s, (mori_life_event)ev);
      assert_int_equal(mori_life_next((mori_life)s, (mori_life_event)ev), want);
      mori_life life = (mori_life)s;
      int rc = mori_life_fire(&life, (mori_life_event)ev);
      if (want >= 0) {
        assert_int_equal(rc, MORI_FSM_OK);
        assert_int_equal(life, want);
        continue;
      }
      illegal++;
      if (rc != (s == MORI_LIFE_CLOSED ? MORI_FSM_ETERMINAL : MORI_FSM_EILLEGAL))
        fail_msg("%s -%s-> returned %d", mori_life_name((mori_life)s),
                 mori_life_event_name((mori_life_event)ev), rc);
      assert_int_equal(life, s);
    }
  assert_int_equal(illegal, MORI_LIFE__COUNT * MORI_LIFE_EV__COUNT - 4);
  mori_life life = MORI_LIFE_OPEN;
  assert_int_equal(mori_life_fire(&life, (mori_life_event)MORI_LIFE_EV__COUNT), MORI_FSM_EILLEGAL);
  life = (mori_life)MORI_LIFE__COUNT;
  assert_int_equal(mori_life_fire(&life, MORI_LIFE_EV_OPEN), MORI_FSM_ETERMINAL);
  assert_int_equal(mori_life_next((mori_life)-1, MORI_LIFE_EV_OPEN), -1);
}

/* What each state implies: a fact each state forbids, one at a time, is
 * named; the facts of an ordinary window in that state pass; -1 (a fact
 * the caller cannot read there) is not checked. */
static void life_check_names_the_fact_a_state_forbids(void **state) {
  static const struct {
    mori_life s;
    mori_life_facts f;
    const char *why; /* NULL: passes */
  } cases[] = {
      {MORI_LIFE_OPENING, {0, 0, 0, 1, MORI_WS_GATHERED}, NULL},
      {MORI_LIFE_OPENING, {0, 0, 0, 1, MORI_WS_FAILED}, NULL},
      {MORI_LIFE_OPENING, {1, 0, 0, 1, MORI_WS_INIT}, "OPENING: refs is 1, expected 0"},
      {MORI_LIFE_OPENING, {0, 2, 0, 1, MORI_WS_INIT}, "OPENING: busy is 2, expected 0"},
      {MORI_LIFE_OPENING, {0, 0, 1, 1, MORI_WS_INIT}, "OPENING: listed is 1, expected 0"},
      {MORI_LIFE_OPENING, {0, 0, 0, 0, MORI_WS_INIT}, "OPENING: attached is 0, expected 1"},
      {MORI_LIFE_OPENING, {0, 0, 0, 1, MORI_WS_RELEASED},
       "OPENING: window machine is RELEASED, expected INIT, "},
      {MORI_LIFE_OPEN, {3, 2, 1, 1, MORI_WS_MAPPED}, NULL},
      {MORI_LIFE_OPEN, {0, 0, 1, 1, -1}, NULL},
      {MORI_LIFE_OPEN, {0, 0, 0, 1, MORI_WS_MAPPED}, "OPEN: listed is 0, expected 1"},
      {MORI_LIFE_OPEN, {0, 0, 1, 0, MORI_WS_MAPPED}, "OPEN: attached is 0, expected 1"},
      {MORI_LIFE_OPEN, {0, 0, 1, 1, MORI_WS_TABLES_BUILT},
       "OPEN: window machine is TABLES_BUILT, expected MAPPED, SLOT_LOST, HEAL_BOUND, REJOINED, "
       "REEXCHANGED, HEALED or BROKEN"},
      {MORI_LIFE_OPEN, {-2, 0, 1, 1, MORI_WS_MAPPED}, "OPEN: refs is -2, expected 0 or > 0"},
      /* an open window heals while a call holds it, and one whose heal
       * failed stays open, BROKEN, until its teardown */
      {MORI_LIFE_OPEN, {1, 1, 1, 1, MORI_WS_SLOT_LOST}, NULL},
      {MORI_LIFE_OPEN, {1, 1, 1, 1, MORI_WS_HEAL_BOUND}, NULL},
      {MORI_LIFE_OPEN, {1, 1, 1, 1, MORI_WS_REJOINED}, NULL},
      {MORI_LIFE_OPEN, {1, 1, 1, 1, MORI_WS_REEXCHANGED}, NULL},
      {MORI_LIFE_OPEN, {1, 1, 1, 1, MORI_WS_HEALED}, NULL},
      {MORI_LIFE_OPEN, {1, 0, 1, 1, MORI_WS_BROKEN}, NULL},
      {MORI_LIFE_OPEN, {1, 0, 1, 1, MORI_WS_RELEASED},
       "OPEN: window machine is RELEASED, expected MAPPED, SLOT_LOST, HEAL_BOUND, REJOINED, "
       "REEXCHANGED, HEALED or BROKEN"},
      {MORI_LIFE_CLOSING, {1, 0, 1, 1, MORI_WS_MAPPED}, NULL},
      {MORI_LIFE_CLOSING, {1, 0, 1, 1, MORI_WS_BROKEN}, NULL},
      {MORI_LIFE_CLOSING, {1, 0, 1, 1, MORI_WS_RELEASED}, NULL},
      {MORI_LIFE_CLOSING, {0, 1, 1, 1, MORI_WS_MAPPED}, "CLOSING: busy is 1, expected 0"},
      {MORI_LIFE_CLOSING, {0, 0, 0, 1, MORI_WS_MAPPED}, "CLOSING: listed is 0, expected 1"},
      {MORI_LIFE_CLOSING, {0, 0, 1, 1, MORI_WS_FAILED},
       "CLOSING: window machine is FAILED, expected MAPPED, BROKEN or RELEASED"},
      /* a teardown claims no window in the middle of a heal */
      {MORI_LIFE_CLOSING, {0, 0, 1, 1, MORI_WS_REEXCHANGED},
       "CLOSING: window machine is REEXCHANGED, expected MAPPED, BROKEN or RELEASED"},
      {MORI_LIFE_CLOSED, {2, 0, 0, 0, MORI_WS_RELEASED}, NULL},
      {MORI_LIFE_CLOSED, {0, 0, 0, 0, MORI_WS_FAILED}, NULL},
      {MORI_LIFE_CLOSED, {0, 0, 0, 0, MORI_WS_INIT}, NULL},
      {MORI_LIFE_CLOSED, {0, 1, 0, 0, MORI_WS_RELEASED}, "CLOSED: busy is 1, expected 0"},
      {MORI_LIFE_CLOSED, {0, 0, 1, 0, MORI_WS_RELEASED}, "CLOSED: listed is 1, expected 0"},
      {MORI_LIFE_CLOSED, {0, 0, 0, 1, MORI_WS_RELEASED}, "CLOSED: attached is 1, expected 0"},
      {MORI_LIFE_CLOSED, {0, 0, 0, 0, MORI_WS_MAPPED},
       "CLOSED: window machine is MAPPED, expected INIT, RELEASED or FAILED"},
      {MORI_LIFE_CLOSED, {0, 0, 0, 0, MORI_WS_BROKEN},
       "CLOSED: window machine is BROKEN, expected INIT, RELEASED or FAILED"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char why[256] = "";
    int rc = mori_life_check(cases[i].s, &cases[i].f, why, sizeof why);
    if (cases[i].why == NULL) {
      if (rc != 0) fail_msg("case %zu: %s", i, why);
      continue;
    }
    assert_int_equal(rc, MORI_FSM_EINVARIANT);
    if (strncmp(why, cases[i].why, strlen(cases[i].why)) != 0)
      fail_msg("case %zu: \"%s\", expected \"%s\"", i, why, cases[i].why);
  }
  char why[64];
  mori_life_facts ok = {0, 0, 1, 1, MORI_WS_MAPPED};
  assert_int_equal(mori_life_check((mori_life)7, &ok, why, sizeof why), MORI_FSM_EINVARIANT);
}

static const struct {
  mori_watch_state from;
  mori_watch_event ev;
  mori_watch_state to;
} watch_legal[] = {
#define W_(from, ev, to) {MORI_WATCH_##from, MORI_WATCH_EV_##ev, MORI_WATCH_##to}
    W_(HELD_QUEUED, START, HELD_ARMED),       W_(QUEUED, START, ARMED),
    W_(HELD_ARMED, EXPIRE, HELD_RELEASING),   W_(ARMED, EXPIRE, RELEASING),
    W_(HELD_RELEASING, REARM, HELD_ARMED),    W_(RELEASING, REARM, ARMED),
    W_(HELD_QUEUED, END, QUEUED),             W_(HELD_ARMED, END, ARMED),
    W_(HELD_RELEASING, END, RELEASING),       W_(RETIRED, END, FREED),
    W_(HELD_QUEUED, RETIRE, RETIRED),         W_(HELD_ARMED, RETIRE, RETIRED),
    W_(HELD_RELEASING, RETIRE, RETIRED),      W_(QUEUED, RETIRE, FREED),
    W_(ARMED, RETIRE, FREED),                 W_(RELEASING, RETIRE, FREED),
#undef W_
};
#define NWATCH_LEGAL (sizeof watch_legal / sizeof watch_legal[0])

static int watch_expected(mori_watch_state s, mori_watch_event ev) {
  for (size_t i = 0; i < NWATCH_LEGAL; i++)
    if (watch_legal[i].from == s && watch_legal[i].ev == ev) return (int)watch_legal[i].to;
  return -1;
}

static void watch_fire_moves_by_each_row_and_refuses_every_other_pair(void **state) {
  int illegal = 0;
  for (int s = 0; s < MORI_WATCH__COUNT; s++)
    for (int ev = 0; ev < MORI_WATCH_EV__COUNT; ev++) {
      int want = watch_expected((mori_watch_state)s, (mori_watch_event)ev);
      assert_int_equal(mori_watch_next((mori_watch_state)s, (mori_watch_event)ev), want);
      mori_watch_state st = (mori_watch_state)s;
      int rc = mori_watch_fire(&st, (mori_watch_event)ev);
      if (want >= 0) {
        assert_int_equal(rc, MORI_FSM_OK);
        assert_int_equal(st, want);
        continue;
      }
      illegal++;
      if (rc != (s == MORI_WATCH_FREED ? MORI_FSM_ETERMINAL : MORI_FSM_EILLEGAL))
        fail_msg("%s -%s-> returned %d", mori_watch_name((mori_watch_state)s),
                 mori_watch_event_name((mori_watch_event)ev), rc);
      assert_int_equal(st, s);
    }
  assert_int_equal(illegal, MORI_WATCH__COUNT * MORI_WATCH_EV__COUNT - (int)NWATCH_LEGAL);
}

/* Whoever lets go last frees the entry: the watchdog's list (RETIRE) or
 * the call that made it (END), in either order, from every state. */
static void watch_entry_is_freed_by_whichever_lets_go_last(void **state) {
  static const mori_watch_state held[] = {MORI_WATCH_HELD_QUEUED, MORI_WATCH_HELD_ARMED,
                                          MORI_WATCH_HELD_RELEASING};
  for (size_t i = 0; i < 3; i++) {
    mori_watch_state a = held[i], b = held[i];
    assert_int_equal(mori_watch_fire(&a, MORI_WATCH_EV_RETIRE), 0);
    assert_int_equal(a, MORI_WATCH_RETIRED);
    assert_int_equal(mori_watch_fire(&a, MORI_WATCH_EV_END), 0);
    assert_int_equal(a, MORI_WATCH_FREED);
    assert_int_equal(mori_watch_fire(&b, MORI_WATCH_EV_END), 0);
    assert_int_not_equal(b, MORI_WATCH_FREED);
    assert_int_equal(mori_watch_fire(&b, MORI_WATCH_EV_RETIRE), 0);
    assert_int_equal(b, MORI_WATCH_FREED);
  }
}

static void watch_check_names_the_fact_a_state_forbids(void **state) {
  static const struct {
    mori_watch_state s;
    mori_watch_facts f;
    const char *why;
  } cases[] = {
      {MORI_WATCH_HELD_QUEUED, {1, 0, 1}, NULL},
      {MORI_WATCH_HELD_QUEUED, {0, 0, 1}, "HELD_QUEUED: listed is 0, expected 1"},
      {MORI_WATCH_HELD_QUEUED, {1, 1, 1}, "HELD_QUEUED: armed is 1, expected 0"},
      {MORI_WATCH_HELD_QUEUED, {1, 0, 0}, "HELD_QUEUED: end event is 0, expected 1"},
      {MORI_WATCH_HELD_ARMED, {1, 1, 1}, NULL},
      {MORI_WATCH_HELD_ARMED, {1, 0, 1}, "HELD_ARMED: armed is 0, expected 1"},
      {MORI_WATCH_HELD_RELEASING, {1, 1, 1}, NULL},
      {MORI_WATCH_HELD_RELEASING, {0, 1, 1}, "HELD_RELEASING: listed is 0, expected 1"},
      {MORI_WATCH_RETIRED, {0, 1, 1}, NULL},
      {MORI_WATCH_RETIRED, {0, 0, 1}, NULL},
      {MORI_WATCH_RETIRED, {1, 1, 1}, "RETIRED: listed is 1, expected 0"},
      {MORI_WATCH_RETIRED, {0, 1, 0}, "RETIRED: end event is 0, expected 1"},
      {MORI_WATCH_QUEUED, {1, 0, 0}, NULL},
      {MORI_WATCH_QUEUED, {1, 0, 1}, NULL},
      {MORI_WATCH_QUEUED, {1, 1, 1}, "QUEUED: armed is 1, expected 0"},
      {MORI_WATCH_ARMED, {1, 1, 0}, NULL},
      {MORI_WATCH_ARMED, {0, 1, 0}, "ARMED: listed is 0, expected 1"},
      {MORI_WATCH_RELEASING, {1, 1, 1}, NULL},
      {MORI_WATCH_RELEASING, {1, 0, 1}, "RELEASING: armed is 0, expected 1"},
      {MORI_WATCH_FREED, {0, 1, 0}, NULL},
      {MORI_WATCH_FREED, {1, 1, 0}, "FREED: listed is 1, expected 0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char why[256] = "";
    int rc = mori_watch_check(cases[i].s, &cases[i].f, why, sizeof why);
    if (cases[i].why == NULL) {
      if (rc != 0) fail_msg("case %zu: %s", i, why);
      continue;
    }
    assert_int_equal(rc, MORI_FSM_EINVARIANT);
    assert_string_equal(why, cases[i].why);
  }
}

/* The lines docs/state-machine.md shows for each state, and the names. */
static void lifecycle_lines_and_names_are_what_the_tables_say(void **state) {
  static const char *const life_lines[] = {
      "refs 0; busy 0; not listed; attached; window machine not RELEASED",
      "listed; attached; window machine MAPPED, SLOT_LOST, HEAL_BOUND, REJOINED, REEXCHANGED, "
      "HEALED or BROKEN",
      "busy 0; listed; attached; window machine MAPPED, BROKEN or RELEASED",
      "busy 0; not listed; detached; window machine INIT, RELEASED or FAILED",
  };
  static const char *const life_names[] = {"OPENING", "OPEN", "CLOSING", "CLOSED"};
  static const char *const life_events[] = {"OPEN", "ABANDON", "CLOSE", "FINISH"};
  static const char *const watch_names[] = {"HELD_QUEUED", "HELD_ARMED", "HELD_RELEASING",
                                            "RETIRED",     "QUEUED",     "ARMED",
                                            "RELEASING",   "FREED"};
  static const char *const watch_events[] = {"START", "EXPIRE", "REARM", "RETIRE", "END"};
  char line[256];
  for (int s = 0; s < MORI_LIFE__COUNT; s++) {
    assert_string_equal(mori_life_name((mori_life)s), life_names[s]);
    mori__lc_describe(&mori__life_lifecycle, s, line, sizeof line);
    assert_string_equal(line, life_lines[s]);
  }
  for (int ev = 0; ev < MORI_LIFE_EV__COUNT; ev++)
    assert_string_equal(mori_life_event_name((mori_life_event)ev), life_events[ev]);
  for (int s = 0; s < MORI_WATCH__COUNT; s++)
    assert_string_equal(mori_watch_name((mori_watch_state)s), watch_names[s]);
  for (int ev = 0; ev < MORI_WATCH_EV__COUNT; ev++)
    assert_string_equal(mori_watch_event_name((mori_watch_event)ev), watch_events[ev]);
  mori__lc_describe(&mori__watch_lifecycle, MORI_WATCH_HELD_QUEUED, line, sizeof line);
  assert_string_equal(line, "listed; not armed; end event");
  mori__lc_describe(&mori__watch_lifecycle, MORI_WATCH_FREED, line, sizeof line);
  assert_string_equal(line, "not listed");
  assert_string_equal(mori_life_name(MORI_LIFE__COUNT), "?");
  assert_string_equal(mori_watch_event_name((mori_watch_event)-1), "?");
}

/* Not inlined: GCC 12 then mistakes open_memstream's buffer for a local. */
__attribute__((noinline)) static char *dot_text(void) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  mori_fsm_write_dot(f);
  assert_int_equal(fclose(f), 0);
  return buf;
}

/* The text between "subgraph cluster_NAME {" and its closing line. */
static char *cluster_of(const char *dot, const char *name) {
  char open[64];
  snprintf(open, sizeof open, "\n  subgraph cluster_%s {\n", name);
  const char *at = strstr(dot, open);
  if (at == NULL) return NULL;
  const char *end = strstr(at, "\n  }\n");
  assert_non_null(end);
  return strndup(at, (size_t)(end - at) + 1);
}

/* Readable at page size: each machine a cluster of its own states (named
 * <kind>_<STATE>, its ledger as the tooltip), every row of the kind an edge
 * of its cluster, every FAIL ending in that machine's own FAILED, and a
 * legend; nothing drawn outside the clusters. */
static void dot_draws_each_machine_as_a_cluster_with_its_own_failure_sink(void **state) {
  char *dot = dot_text();
  assert_memory_equal(dot, "digraph mori_fsm {\n", 19);
  assert_string_equal(dot + strlen(dot) - 2, "}\n");
  char *cluster[2] = {cluster_of(dot, "block"), cluster_of(dot, "window")};
  assert_non_null(cluster[0]);
  assert_non_null(cluster[1]);
  assert_true(strstr(dot, "subgraph cluster_block") < strstr(dot, "subgraph cluster_window"));
  assert_true(strstr(dot, "subgraph cluster_window") < strstr(dot, "subgraph cluster_life"));
  assert_non_null(strstr(dot, "\n  subgraph cluster_legend {\n    label=\"legend\";\n"));
  size_t distinct[2] = {0, 0};
  char edge[160];
  for (size_t i = 0; i < NLEGAL; i++) {
    int k = legal[i].kind == BLOCK ? 0 : 1;
    const char *kn = k ? "window" : "block";
    if (legal[i].ev == MORI_EV_FAIL)
      snprintf(edge, sizeof edge, "\n    %s_%s -> %s_FAILED [style=dashed", kn,
               mori_fsm_state_name(legal[i].from), kn);
    else
      snprintf(edge, sizeof edge, "\n    %s_%s -> %s_%s [label=\"%s", kn,
               mori_fsm_state_name(legal[i].from), kn, mori_fsm_state_name(legal[i].to),
               mori_wevent_name(legal[i].ev));
    if (strstr(cluster[k], edge) == NULL) fail_msg("no edge %s in the %s cluster", edge + 5, kn);
    int seen_before = 0;
    for (size_t j = 0; j < i; j++)
      seen_before |= legal[j].kind == legal[i].kind && legal[j].from == legal[i].from &&
                     legal[j].ev == legal[i].ev && legal[j].to == legal[i].to;
    distinct[k] += !seen_before;
  }
  for (int k = 0; k < 2; k++) {
    const char *kn = k ? "window" : "block";
    size_t edges = 0;
    for (const char *p = cluster[k]; (p = strstr(p, " -> ")) != NULL; p++) edges++;
    assert_int_equal(edges, distinct[k]);
    /* one failure sink per machine, and no FAIL of one machine in the other */
    char sink[64];
    snprintf(sink, sizeof sink, "\n    %s_FAILED [", kn);
    const char *first = strstr(cluster[k], sink);
    assert_non_null(first);
    assert_null(strstr(first + 1, sink));
    assert_null(strstr(cluster[k], k ? "block_" : "window_"));
    /* a node's tooltip is what that machine's ledger holds in it */
    for (int st = 0; st < MORI_FSM_NSTATES; st++) {
      mori__count held[MORI_RES__COUNT];
      int reached = mori__fsm_ledger(k ? MORI_FSM_WINDOW : MORI_FSM_BLOCK, st, held) == 0;
      char node[96];
      snprintf(node, sizeof node, "\n    %s_%s [label=\"%s\", tooltip=\"", kn,
               mori_fsm_state_name(st), mori_fsm_state_name(st));
      const char *at = strstr(cluster[k], node);
      if (!reached) continue;
      if (at == NULL) fail_msg("no node %s", node + 5);
    }
  }
  /* a tooltip says what its row does: a step records, RELEASE and FAIL unwind */
  assert_non_null(strstr(cluster[0], "    block_BACKED -> block_ACCESSIBLE [label=\"GRANT\", "
                                     "tooltip=\"acquires nothing\"];\n"));
  assert_non_null(strstr(cluster[1], "    window_MAPPED -> window_RELEASED [label=\"RELEASE\", "
                                     "tooltip=\"unwinds the ledger in reverse order\"];\n"));
  /* and what it gives back: a step that closes its channel, a heal's LOSE;
   * a BREAK records and gives back nothing */
  assert_non_null(strstr(cluster[1], "    window_SLOT_TAKEN -> window_EXCHANGED [label=\"EXCHANGE"
                                     "\\n+ received fd\\n- channel\", tooltip=\"acquires "
                                     "RECEIVED_FD; gives back CHANNEL\"];\n"));
  assert_non_null(strstr(cluster[1], "    window_MAPPED -> window_SLOT_LOST [label=\"LOSE\\n- "
                                     "received fd\\n- imported handle\\n- slot mapping\", "
                                     "tooltip=\"gives back RECEIVED_FD, IMPORTED_HANDLE, "
                                     "SLOT_MAPPING\"];\n"));
  assert_non_null(strstr(cluster[1], "    window_REJOINED -> window_BROKEN [label=\"BREAK\", "
                                     "tooltip=\"acquires nothing\"];\n"));
  /* nothing but the clusters: no node or edge at the top level */
  for (const char *p = dot; (p = strstr(p, "\n  ")) != NULL; p++) {
    if (p[3] == ' ') continue;
    const char *eol = strchr(p + 1, '\n');
    char line[256];
    snprintf(line, sizeof line, "%.*s", (int)(eol - p - 1), p + 1);
    if (strstr(line, "->") != NULL || strstr(line, "label=") != NULL)
      fail_msg("drawn outside every cluster: %s", line);
  }
  free(cluster[0]);
  free(cluster[1]);
  free(dot);
}

static void dot_draws_each_lifecycle_as_a_cluster_of_its_rows(void **state) {
  char *dot = dot_text();
  const char *life = strstr(dot, "\n  subgraph cluster_life {\n    label=\"window life\";\n");
  const char *watch = strstr(dot, "\n  subgraph cluster_watch {\n    label=\"watchdog entry\";\n");
  assert_non_null(life);
  assert_non_null(watch);
  assert_true(life < watch);
  char edge[160];
  for (size_t i = 0; i < sizeof life_legal / sizeof life_legal[0]; i++) {
    snprintf(edge, sizeof edge, "    life_%s -> life_%s [label=\"%s\"];\n",
             mori_life_name(life_legal[i].from), mori_life_name(life_legal[i].to),
             mori_life_event_name(life_legal[i].ev));
    const char *at = strstr(life, edge);
    if (at == NULL || at > watch) fail_msg("no edge %s", edge);
  }
  for (size_t i = 0; i < NWATCH_LEGAL; i++) {
    snprintf(edge, sizeof edge, "    watch_%s -> watch_%s [label=\"%s\"];\n",
             mori_watch_name(watch_legal[i].from), mori_watch_name(watch_legal[i].to),
             mori_watch_event_name(watch_legal[i].ev));
    if (strstr(watch, edge) == NULL) fail_msg("no edge %s", edge);
  }
  size_t edges = 0;
  for (const char *p = life; (p = strstr(p, "    life_")) != NULL; p++) edges += strstr(p, " -> ") < strchr(p, '\n');
  assert_int_equal(edges, sizeof life_legal / sizeof life_legal[0]);
  edges = 0;
  for (const char *p = watch; (p = strstr(p, "    watch_")) != NULL; p++) edges += strstr(p, " -> ") < strchr(p, '\n');
  assert_int_equal(edges, NWATCH_LEGAL);
  char node[64];
  for (int st = 0; st < MORI_LIFE__COUNT; st++) {
    snprintf(node, sizeof node, "    life_%s [label=\"%s\\n", mori_life_name((mori_life)st),
             mori_life_name((mori_life)st));
    assert_non_null(strstr(life, node));
  }
  for (int st = 0; st < MORI_WATCH__COUNT; st++) {
    snprintf(node, sizeof node, "    watch_%s [label=\"%s\\n", mori_watch_name((mori_watch_state)st),
             mori_watch_name((mori_watch_state)st));
    assert_non_null(strstr(watch, node));
  }
  free(dot);
}

/* Read by main before any test runs: whatever the tests call later, the
 * rows' answers were derived when the library was loaded. */
static int derived_before_main_ran;

static void the_rows_answers_are_derived_when_the_library_is_loaded(void **state) {
  (void)state;
  assert_int_equal(derived_before_main_ran, 1);
}

int main(int argc, char **argv) {
  derived_before_main_ran = mori__fsm_derived();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_rows_answers_are_derived_when_the_library_is_loaded),
      cmocka_unit_test(next_matches_expected_triples_for_every_kind_state_event),
      cmocka_unit_test(next_rejects_out_of_range_kind_state_and_event),
      cmocka_unit_test(every_triple_moves_when_legal_and_changes_nothing_when_not),
      cmocka_unit_test(forward_names_each_step_of_the_path_and_none_at_the_end),
      cmocka_unit_test(fire_refuses_release_and_fail_which_need_a_callback),
      cmocka_unit_test(lifecycle_holds_for_worlds_of_1_2_4_and_16),
      cmocka_unit_test(block_on_the_fabric_path_exports_without_an_fd),
      cmocka_unit_test(push_accepts_only_what_the_outgoing_transition_acquires),
      cmocka_unit_test(push_grows_the_ledger_and_keeps_every_entry),
      cmocka_unit_test(capacity_is_the_largest_ledger_a_state_allows),
      cmocka_unit_test(reserved_room_makes_every_push_allocation_free),
      cmocka_unit_test(a_failed_growth_refuses_the_push_and_changes_nothing),
      cmocka_unit_test(forget_removes_the_most_recent_match_and_keeps_order),
      cmocka_unit_test(forget_of_an_entry_not_in_the_ledger_is_refused),
      cmocka_unit_test(terminal_states_refuse_push_fire_forget_release_and_fail),
      cmocka_unit_test(check_names_the_first_broken_invariant),
      cmocka_unit_test(received_fds_range_up_to_world_minus_1),
      cmocka_unit_test(fire_with_a_broken_ledger_fails_and_stays_put),
      cmocka_unit_test(import_requires_every_peer_handle_imported),
      cmocka_unit_test(release_unwinds_in_reverse_order_exported_fd_last),
      cmocka_unit_test(window_release_frees_tables_then_slots_then_span_then_imports),
      cmocka_unit_test(block_release_unmaps_unreserves_releases_handle_then_closes_fd),
      cmocka_unit_test(fail_rolls_back_a_partial_allocation_in_reverse),
      cmocka_unit_test(fail_mid_exchange_rolls_back_fds_then_the_slot_then_the_channel),
      cmocka_unit_test(release_goes_on_past_failing_callbacks_and_reports_the_first),
      cmocka_unit_test(fail_goes_on_past_a_failing_callback_and_ends_failed),
      cmocka_unit_test(block_ref_never_reaches_the_release_callback),
      cmocka_unit_test(rollback_of_only_a_block_ref_needs_no_callback),
      cmocka_unit_test(release_without_a_callback_is_refused_while_entries_need_one),
      cmocka_unit_test(heal_returns_a_mapped_window_to_mapped_with_each_entry_at_its_place),
      cmocka_unit_test(a_heal_broken_after_any_piece_of_its_work_unwinds_everything),
      cmocka_unit_test(a_push_outside_a_heal_states_acquisitions_is_refused),
      cmocka_unit_test(destroy_of_a_live_machine_aborts),
      cmocka_unit_test(names_are_the_enumerators_and_out_of_range_is_a_question_mark),
      cmocka_unit_test(block_and_window_states_share_only_init_released_and_failed),
      cmocka_unit_test(invariant_lines_are_rendered_from_the_steps),
      cmocka_unit_test(describe_truncates_and_reports_the_full_length),
      cmocka_unit_test(dot_draws_each_machine_as_a_cluster_with_its_own_failure_sink),
      cmocka_unit_test(dot_draws_each_lifecycle_as_a_cluster_of_its_rows),
      cmocka_unit_test(life_fire_moves_by_each_row_and_refuses_every_other_pair),
      cmocka_unit_test(life_check_names_the_fact_a_state_forbids),
      cmocka_unit_test(watch_fire_moves_by_each_row_and_refuses_every_other_pair),
      cmocka_unit_test(watch_entry_is_freed_by_whichever_lets_go_last),
      cmocka_unit_test(watch_check_names_the_fact_a_state_forbids),
      cmocka_unit_test(lifecycle_lines_and_names_are_what_the_tables_say),
  };
  return mori_run_tests(argc, argv, tests);
}
