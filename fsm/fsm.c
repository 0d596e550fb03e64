/*
 * fsm.c - the window state machine: the transition table, the per-state
 * ledger invariants, and the functions that move a machine by looking
 * them up.  Nothing here branches on a state; the tables decide.
 */
#include "fsm_internal.h"

#include <assert.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/*
 * The states and what the ledger holds in each.  An invariant holds on
 * entry to its state (mori_fsm_fire checks it there).  While the machine
 * sits in a state, the step of its forward row appends the kinds that row
 * acquires (the `acquires` column below), so between entry and the next
 * event the ledger is the state's invariant plus a prefix of that step's
 * work; RELEASE or FAIL can unwind it at any point.  FAILED is entered
 * only by mori_fsm_fail, after an error, from any non-terminal state.
 *
 * INIT:
 *   A fresh machine.  The ledger is empty.  A block creates its physical
 *   handle from here; a window records the block it borrows.
 *
 * CREATED (block):
 *   Exactly one physical handle (hipMemCreate); no address yet.
 *
 * RESERVED (block):
 *   The physical handle and one local reservation of its size, nothing
 *   mapped.
 *
 * BACKED (block):
 *   The reservation is mapped to the handle (one local mapping), not yet
 *   accessible: hipMemSetAccess has not run.
 *
 * ACCESSIBLE (block):
 *   BACKED, with read-write access granted to the device.  The ledger
 *   does not change.
 *
 * ALLOCATED (block):
 *   ACCESSIBLE, and the memory is zeroed (torch's pad must read 0), or
 *   its zeroing is queued on the caller's stream with an event after it
 *   (0..1 zero event: an allocation on a stream; the block's first
 *   rendezvous waits for it and gives it back).  Nothing has been
 *   exported: no exported fd.  alloc() leaves the block here, usable; its
 *   first rendezvous exports it, or free() releases it.
 *
 * EXPORTED (block):
 *   ALLOCATED plus the exported fd of the POSIX-fd path (0..1: the fabric
 *   path keeps its 64-byte blob in the block and holds no fd).  The block
 *   stays here, usable, until free() releases it.
 *
 * ATTACHED (window):
 *   Exactly one BLOCK_REF, the borrowed block, exported by this step if
 *   it was not yet, and nothing else.  The window never releases what the
 *   block owns.
 *
 * BOUND (window):
 *   The fd path has bound its channel socket (0..1: the fabric path binds
 *   none), before anything is published, so that peers' datagrams always
 *   find it.
 *
 * PUBLISHED, GATHERED, VALIDATED (window):
 *   The ledger is BOUND's; what moves on is outside it: the own request is
 *   in the store (peers may act on it; a failure from here on publishes an
 *   abort), then every peer's request is decoded, then the world agrees.
 *
 * SLOT_TAKEN (window):
 *   BOUND plus exactly one signal slot: the window's private area of its
 *   block's signal pad, marked taken on the block until it is given back
 *   (and then marked for zeroing before its next use).
 *
 * EXCHANGED (window):
 *   Every peer's fd received on the fd path (0..world_size-1 received fds: the
 *   fabric path receives none), kept open until the handle imported from it
 *   is released; the channel is closed and out of the ledger.
 *
 * RENDEZVOUS (window):
 *   Every peer's handle imported: exactly world_size-1 imported handles (none
 *   for the own rank, whose slot maps the block's own handle).  No span,
 *   slot or table yet.
 *
 * SPAN_RESERVED (window):
 *   The RENDEZVOUS resources plus one span reservation of world_size x stride;
 *   no slot mapped yet.
 *
 * SLOTS_MAPPED (window):
 *   Exactly world_size slot mappings, one per rank (the own slot from the
 *   block's own handle, each peer's from its imported handle), not yet
 *   accessible.
 *
 * SLOTS_ACCESSIBLE (window):
 *   SLOTS_MAPPED, with read-write access granted on every slot.
 *
 * TABLES_BUILT (window):
 *   SLOTS_ACCESSIBLE plus exactly one device table (the buffer pointers,
 *   then the signal pad pointers), the host tables filled, and the signal
 *   state (0..1: none when the block has no signal pad), whose release
 *   also drops the watchdog's entries for the window.
 *
 * MAPPED (window):
 *   TABLES_BUILT, and every rank has mapped (the store barrier): the window
 *   is usable.  It stays here until its block's teardown releases it.
 *
 * RELEASED, FAILED:
 *   Terminal.  The ledger has been unwound in reverse order and is empty.
 */
#define EXACT(c) {{0, (c)}, {0, (c)}}
#define UPTO(c) {{0, 0}, {0, (c)}}
#define EXACT_WORLD(c) {{1, (c)}, {1, (c)}}
#define UPTO_WORLD(c) {{0, 0}, {1, (c)}}

/* The ledgers the steps build on, as designated initializers. */
#define BLOCK_RESERVED [MORI_RES_PHYS_HANDLE] = EXACT(1), [MORI_RES_LOCAL_RESERVATION] = EXACT(1)
#define BLOCK_BACKED BLOCK_RESERVED, [MORI_RES_LOCAL_MAPPING] = EXACT(1)
#define BLOCK_ZEROED BLOCK_BACKED, [MORI_RES_ZERO_EVENT] = UPTO(1)
#define WINDOW_BOUND [MORI_RES_BLOCK_REF] = EXACT(1), [MORI_RES_CHANNEL] = UPTO(1)
#define WINDOW_SLOT WINDOW_BOUND, [MORI_RES_SIGNAL_SLOT] = EXACT(1)
#define WINDOW_EXCHANGED                                                     \
  [MORI_RES_BLOCK_REF] = EXACT(1), [MORI_RES_SIGNAL_SLOT] = EXACT(1),        \
  [MORI_RES_RECEIVED_FD] = UPTO_WORLD(-1)
#define WINDOW_IMPORTED WINDOW_EXCHANGED, [MORI_RES_IMPORTED_HANDLE] = EXACT_WORLD(-1)
#define WINDOW_RESERVED WINDOW_IMPORTED, [MORI_RES_SPAN_RESERVATION] = EXACT(1)
#define WINDOW_BACKED WINDOW_RESERVED, [MORI_RES_SLOT_MAPPING] = EXACT_WORLD(0)
#define WINDOW_TABLES                                                        \
  WINDOW_BACKED, [MORI_RES_DEVICE_TABLE] = EXACT(1), [MORI_RES_SIGNAL_STATE] = UPTO(1)

#define B MORI_FSM_BLOCK
#define W MORI_FSM_WINDOW

static const mori__fsm_invariant invariants[] = {
    {.kinds = B | W, .state = MORI_WS_INIT}, /* nothing held */
    {B, MORI_WS_CREATED, {[MORI_RES_PHYS_HANDLE] = EXACT(1)}},
    {B, MORI_WS_RESERVED, {BLOCK_RESERVED}},
    {B, MORI_WS_BACKED, {BLOCK_BACKED}},
    {B, MORI_WS_ACCESSIBLE, {BLOCK_BACKED}},
    {B, MORI_WS_ALLOCATED, {BLOCK_ZEROED}},
    {B, MORI_WS_EXPORTED, {BLOCK_ZEROED, [MORI_RES_EXPORTED_FD] = UPTO(1)}},
    {W, MORI_WS_ATTACHED, {[MORI_RES_BLOCK_REF] = EXACT(1)}},
    {W, MORI_WS_BOUND, {WINDOW_BOUND}},
    {W, MORI_WS_PUBLISHED, {WINDOW_BOUND}},
    {W, MORI_WS_GATHERED, {WINDOW_BOUND}},
    {W, MORI_WS_VALIDATED, {WINDOW_BOUND}},
    {W, MORI_WS_SLOT_TAKEN, {WINDOW_SLOT}},
    {W, MORI_WS_EXCHANGED, {WINDOW_EXCHANGED}},
    {W, MORI_WS_RENDEZVOUS, {WINDOW_IMPORTED}},
    {W, MORI_WS_SPAN_RESERVED, {WINDOW_RESERVED}},
    {W, MORI_WS_SLOTS_MAPPED, {WINDOW_BACKED}},
    {W, MORI_WS_SLOTS_ACCESSIBLE, {WINDOW_BACKED}},
    {W, MORI_WS_TABLES_BUILT, {WINDOW_TABLES}},
    {W, MORI_WS_MAPPED, {WINDOW_TABLES}},
    {.kinds = B | W, .state = MORI_WS_RELEASED}, /* nothing held */
    {.kinds = B | W, .state = MORI_WS_FAILED},   /* nothing held */
};

/* The tier orders the ledger: entries appear in non-decreasing tier, which
 * is what makes reverse order a safe teardown (the watchdog's entries
 * before the cells they watch, tables before the slots they point into,
 * slots before the span, everything before what it was imported or mapped
 * from).  Received fds and imports share a tier: they alternate peer by
 * peer. */
const mori__res_info mori__res_infos[MORI_RES__COUNT] = {
    [MORI_RES_PHYS_HANDLE] = {"PHYS_HANDLE", "physical handle", "physical handles", 0, 0, 0, 0},
    [MORI_RES_LOCAL_RESERVATION] = {"LOCAL_RESERVATION", "local reservation",
                                    "local reservations", 0, 0, 1, 0},
    [MORI_RES_LOCAL_MAPPING] = {"LOCAL_MAPPING", "local mapping", "local mappings", 0, 0, 2, 0},
    [MORI_RES_ZERO_EVENT] = {"ZERO_EVENT", "zero event", "zero events", 0, 0, 3, 0},
    /* Deferred: on some ROCm releases an exported fd's lifetime is tied to
     * the physical allocation, and closing it before the final hipMemRelease
     * corrupts that release (mori #618; docs/quirks.md, export-fd-lifetime). */
    [MORI_RES_EXPORTED_FD] = {"EXPORTED_FD", "exported fd", "exported fds", 0, 0, 4, 1},
    [MORI_RES_BLOCK_REF] = {"BLOCK_REF", "block reference", "block references", 0, 0, 5, 0},
    [MORI_RES_CHANNEL] = {"CHANNEL", "channel", "channels", 0, 0, 6, 0},
    [MORI_RES_SIGNAL_SLOT] = {"SIGNAL_SLOT", "signal slot", "signal slots", 0, 0, 7, 0},
    [MORI_RES_RECEIVED_FD] = {"RECEIVED_FD", "received fd", "received fds", 1, 1, 8, 0},
    [MORI_RES_IMPORTED_HANDLE] = {"IMPORTED_HANDLE", "imported handle", "imported handles", 1, 1,
                                  8, 0},
    [MORI_RES_SPAN_RESERVATION] = {"SPAN_RESERVATION", "span reservation", "span reservations", 0,
                                   0, 9, 0},
    [MORI_RES_SLOT_MAPPING] = {"SLOT_MAPPING", "slot mapping", "slot mappings", 1, 0, 10, 0},
    [MORI_RES_DEVICE_TABLE] = {"DEVICE_TABLE", "device table", "device tables", 0, 0, 11, 0},
    [MORI_RES_SIGNAL_STATE] = {"SIGNAL_STATE", "signal state", "signal states", 0, 0, 12, 0},
};

#define R(x) MORI__BIT(MORI_RES_##x)
#define FORWARD(kinds, from, event, to, acquires) \
  {kinds, MORI_WS_##from, MORI_EV_##event, MORI_WS_##to, acquires}
#define FAIL(kinds, from) {kinds, MORI_WS_##from, MORI_EV_FAIL, MORI_WS_FAILED, 0}

/* The forward rows in order are the two machines' steps; a driver fires
 * them one after another (mori_fsm_forward).  Then the one RELEASE of each
 * kind, and FAIL from every state a kind passes through. */
const mori__fsm_row mori__fsm_rows[] = {
    FORWARD(B, INIT, CREATE, CREATED, R(PHYS_HANDLE)),
    FORWARD(B, CREATED, RESERVE, RESERVED, R(LOCAL_RESERVATION)),
    FORWARD(B, RESERVED, MAP, BACKED, R(LOCAL_MAPPING)),
    FORWARD(B, BACKED, GRANT, ACCESSIBLE, 0),
    FORWARD(B, ACCESSIBLE, ZERO, ALLOCATED, R(ZERO_EVENT)),
    FORWARD(B, ALLOCATED, EXPORT, EXPORTED, R(EXPORTED_FD)),
    FORWARD(W, INIT, ATTACH, ATTACHED, R(BLOCK_REF)),
    FORWARD(W, ATTACHED, BIND, BOUND, R(CHANNEL)),
    FORWARD(W, BOUND, PUBLISH, PUBLISHED, 0),
    FORWARD(W, PUBLISHED, GATHER, GATHERED, 0),
    FORWARD(W, GATHERED, VALIDATE, VALIDATED, 0),
    FORWARD(W, VALIDATED, TAKE_SLOT, SLOT_TAKEN, R(SIGNAL_SLOT)),
    FORWARD(W, SLOT_TAKEN, EXCHANGE, EXCHANGED, R(RECEIVED_FD)),
    FORWARD(W, EXCHANGED, IMPORT, RENDEZVOUS, R(IMPORTED_HANDLE)),
    FORWARD(W, RENDEZVOUS, RESERVE, SPAN_RESERVED, R(SPAN_RESERVATION)),
    FORWARD(W, SPAN_RESERVED, MAP, SLOTS_MAPPED, R(SLOT_MAPPING)),
    FORWARD(W, SLOTS_MAPPED, GRANT, SLOTS_ACCESSIBLE, 0),
    FORWARD(W, SLOTS_ACCESSIBLE, BUILD_TABLES, TABLES_BUILT, R(DEVICE_TABLE) | R(SIGNAL_STATE)),
    FORWARD(W, TABLES_BUILT, BARRIER, MAPPED, 0),
    {B, MORI_WS_ALLOCATED, MORI_EV_RELEASE, MORI_WS_RELEASED, 0},
    {B, MORI_WS_EXPORTED, MORI_EV_RELEASE, MORI_WS_RELEASED, 0},
    {W, MORI_WS_MAPPED, MORI_EV_RELEASE, MORI_WS_RELEASED, 0},
    FAIL(B | W, INIT),
    FAIL(B, CREATED),
    FAIL(B, RESERVED),
    FAIL(B, BACKED),
    FAIL(B, ACCESSIBLE),
    FAIL(B, ALLOCATED),
    FAIL(B, EXPORTED),
    FAIL(W, ATTACHED),
    FAIL(W, BOUND),
    FAIL(W, PUBLISHED),
    FAIL(W, GATHERED),
    FAIL(W, VALIDATED),
    FAIL(W, SLOT_TAKEN),
    FAIL(W, EXCHANGED),
    FAIL(W, RENDEZVOUS),
    FAIL(W, SPAN_RESERVED),
    FAIL(W, SLOTS_MAPPED),
    FAIL(W, SLOTS_ACCESSIBLE),
    FAIL(W, TABLES_BUILT),
    FAIL(W, MAPPED),
};
const size_t mori__fsm_nrows = sizeof mori__fsm_rows / sizeof mori__fsm_rows[0];

#undef B
#undef W
#undef R
#undef FORWARD
#undef FAIL

static const char *const state_names[MORI_WS__COUNT] = {
    "INIT",         "CREATED",    "RESERVED",      "BACKED",       "ACCESSIBLE",
    "ALLOCATED",    "EXPORTED",   "ATTACHED",      "BOUND",        "PUBLISHED",
    "GATHERED",     "VALIDATED",  "SLOT_TAKEN",    "EXCHANGED",    "RENDEZVOUS",
    "SPAN_RESERVED", "SLOTS_MAPPED", "SLOTS_ACCESSIBLE", "TABLES_BUILT", "MAPPED",
    "RELEASED",     "FAILED",
};

static const char *const event_names[MORI_EV__COUNT] = {
    "CREATE",   "RESERVE",  "MAP",       "GRANT",    "ZERO",   "EXPORT",
    "ATTACH",   "BIND",     "PUBLISH",   "GATHER",   "VALIDATE", "TAKE_SLOT",
    "EXCHANGE", "IMPORT",   "BUILD_TABLES", "BARRIER", "RELEASE", "FAIL",
};

/* The invariant table in words; a test renders the table and compares. */
static const char *const state_lines[MORI_WS__COUNT] = {
    [MORI_WS_INIT] = "empty ledger",
    [MORI_WS_CREATED] = "block: 1 physical handle",
    [MORI_WS_RESERVED] = "block: 1 physical handle, 1 local reservation",
    [MORI_WS_BACKED] = "block: 1 physical handle, 1 local reservation, 1 local mapping",
    [MORI_WS_ACCESSIBLE] = "block: 1 physical handle, 1 local reservation, 1 local mapping",
    [MORI_WS_ALLOCATED] = "block: 1 physical handle, 1 local reservation, 1 local mapping, "
        "0..1 zero event",
    [MORI_WS_EXPORTED] = "block: 1 physical handle, 1 local reservation, 1 local mapping, "
        "0..1 zero event, 0..1 exported fd",
    [MORI_WS_ATTACHED] = "window: 1 block reference",
    [MORI_WS_BOUND] = "window: 1 block reference, 0..1 channel",
    [MORI_WS_PUBLISHED] = "window: 1 block reference, 0..1 channel",
    [MORI_WS_GATHERED] = "window: 1 block reference, 0..1 channel",
    [MORI_WS_VALIDATED] = "window: 1 block reference, 0..1 channel",
    [MORI_WS_SLOT_TAKEN] = "window: 1 block reference, 0..1 channel, 1 signal slot",
    [MORI_WS_EXCHANGED] = "window: 1 block reference, 1 signal slot, "
        "0..world_size-1 received fds",
    [MORI_WS_RENDEZVOUS] = "window: 1 block reference, 1 signal slot, "
        "0..world_size-1 received fds, world_size-1 imported handles",
    [MORI_WS_SPAN_RESERVED] = "window: 1 block reference, 1 signal slot, "
        "0..world_size-1 received fds, world_size-1 imported handles, "
        "1 span reservation",
    [MORI_WS_SLOTS_MAPPED] = "window: 1 block reference, 1 signal slot, "
        "0..world_size-1 received fds, world_size-1 imported handles, "
        "1 span reservation, world_size slot mappings",
    [MORI_WS_SLOTS_ACCESSIBLE] = "window: 1 block reference, 1 signal slot, "
        "0..world_size-1 received fds, world_size-1 imported handles, "
        "1 span reservation, world_size slot mappings",
    [MORI_WS_TABLES_BUILT] = "window: 1 block reference, 1 signal slot, "
        "0..world_size-1 received fds, world_size-1 imported handles, "
        "1 span reservation, world_size slot mappings, 1 device table, "
        "0..1 signal state",
    [MORI_WS_MAPPED] = "window: 1 block reference, 1 signal slot, "
        "0..world_size-1 received fds, world_size-1 imported handles, "
        "1 span reservation, world_size slot mappings, 1 device table, "
        "0..1 signal state",
    [MORI_WS_RELEASED] = "empty ledger",
    [MORI_WS_FAILED] = "empty ledger",
};

const char *mori_wstate_name(mori_wstate s) {
  return (unsigned)s < MORI_WS__COUNT ? state_names[s] : "?";
}

const char *mori_wevent_name(mori_wevent e) {
  return (unsigned)e < MORI_EV__COUNT ? event_names[e] : "?";
}

const char *mori_res_name(mori_res r) {
  return (unsigned)r < MORI_RES__COUNT ? mori__res_infos[r].name : "?";
}

const char *mori_wstate_invariants(mori_wstate s) {
  return (unsigned)s < MORI_WS__COUNT ? state_lines[s] : "?";
}

const char *mori__fsm_kind_name(mori_fsm_kind kind) {
  return kind == MORI_FSM_BLOCK ? "block" : kind == MORI_FSM_WINDOW ? "window" : "?";
}

int mori__bound_value(mori__bound b, int world_size) { return b.per_world * world_size + b.plus; }

static int valid_kind(mori_fsm_kind kind) {
  return kind == MORI_FSM_BLOCK || kind == MORI_FSM_WINDOW;
}

const mori__fsm_invariant *mori__fsm_invariant_of(mori_fsm_kind kind, mori_wstate s) {
  if (!valid_kind(kind)) return NULL;
  for (size_t i = 0; i < sizeof invariants / sizeof invariants[0]; i++)
    if ((invariants[i].kinds & (unsigned)kind) && invariants[i].state == s) return &invariants[i];
  return NULL;
}

static const mori__fsm_row *find_row(mori_fsm_kind kind, mori_wstate s, mori_wevent ev) {
  if (!valid_kind(kind)) return NULL;
  for (size_t i = 0; i < mori__fsm_nrows; i++) {
    const mori__fsm_row *r = &mori__fsm_rows[i];
    if ((r->kinds & (unsigned)kind) && r->from == s && r->event == ev) return r;
  }
  return NULL;
}

/* A state no row leaves. */
static int is_terminal(mori_wstate s) {
  for (size_t i = 0; i < mori__fsm_nrows; i++)
    if (mori__fsm_rows[i].from == s) return 0;
  return 1;
}

/* The resource kinds the outgoing transitions of (kind, s) acquire. */
static unsigned acquirable(mori_fsm_kind kind, mori_wstate s) {
  unsigned mask = 0;
  for (size_t i = 0; i < mori__fsm_nrows; i++)
    if ((mori__fsm_rows[i].kinds & (unsigned)kind) && mori__fsm_rows[i].from == s)
      mask |= mori__fsm_rows[i].acquires;
  return mask;
}

/* The machine kinds whose transitions acquire resource kind r. */
static unsigned owners(mori_res r) {
  unsigned kinds = 0;
  for (size_t i = 0; i < mori__fsm_nrows; i++)
    if (mori__fsm_rows[i].acquires & MORI__BIT(r)) kinds |= mori__fsm_rows[i].kinds;
  return kinds;
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

int mori_fsm_next(mori_fsm_kind kind, mori_wstate state, mori_wevent ev) {
  const mori__fsm_row *r = find_row(kind, state, ev);
  return r ? (int)r->to : -1;
}

/* A forward row leads to a non-terminal state: not RELEASE, not FAIL. */
int mori_fsm_forward(mori_fsm_kind kind, mori_wstate state) {
  if (!valid_kind(kind)) return -1;
  for (size_t i = 0; i < mori__fsm_nrows; i++) {
    const mori__fsm_row *r = &mori__fsm_rows[i];
    if ((r->kinds & (unsigned)kind) && r->from == state && !is_terminal(r->to))
      return (int)r->event;
  }
  return -1;
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
  for (size_t i = 0; i < sizeof invariants / sizeof invariants[0]; i++) {
    if (!(invariants[i].kinds & (unsigned)m->kind)) continue;
    size_t n = 0;
    for (int r = 0; r < MORI_RES__COUNT; r++) {
      int hi = mori__bound_value(invariants[i].count[r].hi, m->world_size);
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
  if (is_terminal(m->state))
    return say(m, MORI_FSM_ETERMINAL, "reserve: machine is %s", mori_wstate_name(m->state));
  return grow(m, m->len + n, "reserve");
}

void mori_fsm_init(mori_fsm *m, mori_fsm_kind kind, int rank, int world_size) {
  assert(valid_kind(kind));
  memset(m, 0, sizeof *m);
  m->kind = kind;
  m->state = MORI_WS_INIT;
  m->rank = rank;
  m->world_size = world_size;
}

void mori_fsm_destroy(mori_fsm *m) {
  /* A live machine still owns resources that nothing would release. */
  assert(m->len == 0 && (m->state == MORI_WS_INIT || is_terminal(m->state)));
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
  const char *sn = mori_wstate_name(m->state);
  if (is_terminal(m->state))
    return say(m, MORI_FSM_ETERMINAL, "push %s: machine is %s", mori_res_name(kind), sn);
  if ((unsigned)kind >= MORI_RES__COUNT || !(acquirable(m->kind, m->state) & MORI__BIT(kind)))
    return say(m, MORI_FSM_EILLEGAL, "push %s: not acquired in %s (%s)", mori_res_name(kind), sn,
               mori__fsm_kind_name(m->kind));
  if (m->len == m->cap) {
    int rc = grow(m, m->cap ? 2 * m->cap : 8, mori_res_name(kind));
    if (rc != MORI_FSM_OK) return rc;
  }
  m->ledger[m->len++] = (mori_ledger_entry){kind, value, size, aux};
  return MORI_FSM_OK;
}

int mori_fsm_forget(mori_fsm *m, mori_res kind, uintptr_t value) {
  if (is_terminal(m->state))
    return say(m, MORI_FSM_ETERMINAL, "forget %s: machine is %s", mori_res_name(kind),
               mori_wstate_name(m->state));
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
  const char *sn = mori_wstate_name(m->state), *en = mori_wevent_name(ev);
  if (is_terminal(m->state)) return say(m, MORI_FSM_ETERMINAL, "%s: machine is %s", en, sn);
  const mori__fsm_row *r = find_row(m->kind, m->state, ev);
  if (r == NULL)
    return say(m, MORI_FSM_EILLEGAL, "%s: not legal in %s (%s)", en, sn,
               mori__fsm_kind_name(m->kind));
  if (is_terminal(r->to))
    return say(m, MORI_FSM_EILLEGAL, "%s: unwinds the ledger; use mori_fsm_release/fail", en);
  /* Move, check, and move back on a broken ledger: a failed fire leaves
   * the machine where it was, ready for mori_fsm_fail. */
  mori_wstate from = m->state;
  m->state = r->to;
  int rc = mori_fsm_check(m);
  if (rc != 0) m->state = from;
  return rc;
}

static int unwind(mori_fsm *m, mori_wevent ev, mori_release_fn fn, void *ctx) {
  const char *sn = mori_wstate_name(m->state), *en = mori_wevent_name(ev);
  if (is_terminal(m->state)) return say(m, MORI_FSM_ETERMINAL, "%s: machine is %s", en, sn);
  const mori__fsm_row *r = find_row(m->kind, m->state, ev);
  if (r == NULL)
    return say(m, MORI_FSM_EILLEGAL, "%s: not legal in %s (%s)", en, sn,
               mori__fsm_kind_name(m->kind));
  if (fn == NULL && m->len > mori_fsm_count(m, MORI_RES_BLOCK_REF))
    return say(m, MORI_FSM_EILLEGAL, "%s: %zu entries and no release callback", en, m->len);
  /* Reverse order, except that deferred kinds go after everything else. */
  int first = 0;
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = m->len; i-- > 0;) {
      mori_ledger_entry e = m->ledger[i];
      if (e.kind == MORI_RES_BLOCK_REF) continue; /* borrowed, not ours to release */
      if (mori__res_infos[e.kind].deferred != pass) continue;
      int rc = fn(ctx, &e);
      if (rc != 0 && first == 0)
        first = say(m, rc, "%s: releasing %s 0x%lx (aux %d) returned %d", en,
                    mori_res_name(e.kind), (unsigned long)e.value, e.aux, rc);
    }
  m->len = 0;
  m->state = r->to;
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
    if (!(owners(e->kind) & (unsigned)m->kind))
      return say(m, MORI_FSM_EINVARIANT, "%s: %s in a %s ledger", sn, info->name,
                 mori__fsm_kind_name(m->kind));
    if (info->per_peer && (e->aux < 0 || e->aux >= m->world_size))
      return say(m, MORI_FSM_EINVARIANT, "%s: %s aux %d outside the world of %d", sn, info->name,
                 e->aux, m->world_size);
    if (info->peer_only && e->aux == m->rank)
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
    if (!mori__res_infos[m->ledger[i].kind].per_peer) continue;
    for (size_t j = i + 1; j < m->len; j++)
      if (m->ledger[j].kind == m->ledger[i].kind && m->ledger[j].aux == m->ledger[i].aux)
        return say(m, MORI_FSM_EINVARIANT, "%s: two %s entries for rank %d", sn,
                   mori_res_name(m->ledger[i].kind), m->ledger[i].aux);
  }
  return 0;
}

static int check_counts(mori_fsm *m, const char *sn, const mori__fsm_invariant *inv) {
  size_t n[MORI_RES__COUNT] = {0};
  for (size_t i = 0; i < m->len; i++) n[m->ledger[i].kind]++;
  for (int r = 0; r < MORI_RES__COUNT; r++) {
    int lo = mori__bound_value(inv->count[r].lo, m->world_size);
    int hi = mori__bound_value(inv->count[r].hi, m->world_size);
    if ((long)n[r] >= lo && (long)n[r] <= hi) continue;
    const mori__res_info *info = &mori__res_infos[r];
    const char *noun = n[r] == 1 ? info->singular : info->plural;
    if (lo == hi) return say(m, MORI_FSM_EINVARIANT, "%s: %zu %s, expected %d", sn, n[r], noun, lo);
    return say(m, MORI_FSM_EINVARIANT, "%s: %zu %s, expected %d..%d", sn, n[r], noun, lo, hi);
  }
  return 0;
}

int mori_fsm_check(mori_fsm *m) {
  const char *sn = mori_wstate_name(m->state);
  const mori__fsm_invariant *inv = mori__fsm_invariant_of(m->kind, m->state);
  if (inv == NULL)
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
