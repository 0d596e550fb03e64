/*
 * fsm.h - the block and window state machines as data: their states,
 * events and resource kinds, each written once in a list below, and the
 * functions that move a machine by those lists.  Pure C: no I/O, no
 * runtime calls.  Releasing a resource is the caller's job, through a
 * callback, in exact reverse order of acquisition.
 *
 * A BLOCK machine owns the local allocation (physical handle, local
 * reservation and mapping, exported fd); alloc() leaves it in ALLOCATED;
 * its first rendezvous exports it (EXPORT, the one step run outside
 * alloc), and it lives there until free().  A WINDOW machine is one
 * (block, group) rendezvous: it starts by attaching to its block, exported
 * by then (a borrowed reference, never released by the window), and owns
 * everything the rendezvous acquires.  Each step is one piece of the work:
 * the caller runs the step's function and fires the step's event
 * (mori_fsm_forward names the event that leaves a state).
 *
 *   INIT -CREATE-> CREATED -RESERVE-> RESERVED -MAP-> BACKED -GRANT->
 *     ACCESSIBLE -ZERO-> ALLOCATED -EXPORT-> EXPORTED              (block)
 *   INIT -ATTACH-> ATTACHED -BIND-> BOUND -PUBLISH-> PUBLISHED -GATHER->
 *     GATHERED -VALIDATE-> VALIDATED -TAKE_SLOT-> SLOT_TAKEN -EXCHANGE->
 *     EXCHANGED -IMPORT-> RENDEZVOUS -RESERVE-> SPAN_RESERVED -MAP->
 *     SLOTS_MAPPED -GRANT-> SLOTS_ACCESSIBLE -BUILD_TABLES-> TABLES_BUILT
 *     -BARRIER-> MAPPED
 *   MAPPED -FLATTEN-> MAPPED (the own slot of the span, at the first
 *     mori_window_span)                                             (window)
 *   ALLOCATED | EXPORTED (block) | MAPPED (window) -RELEASE-> RELEASED
 *                                                   (ledger unwound)
 *   any non-terminal -FAIL-> FAILED (ledger rolled back)
 */
#ifndef MORI_FSM_H
#define MORI_FSM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the lists: every other table, name and line of prose derives from them ----
 *
 * Each is an X-macro, a list of X(...) lines.  The words in their columns
 * (EXACTLY, RESTS, LAST, PEER, SOME, ...) mean something only where
 * fsm.c, lifecycle.c and the fsm fuzzer expand a list. */

/* Resource kinds in the ledger, numbered in the order they were added (the
 * fuzz corpora name kinds by number).  Columns: the kind; its tier, the
 * ledger's order (tiers never decrease along a ledger, so reverse order is
 * a safe teardown); what its aux is (NONE: not a rank, unchecked; RANK: a
 * rank of the world; PEER: a rank other than the machine's own; at most
 * one entry per rank of either); how an unwind gives it back (IN_ORDER: in
 * reverse ledger order; LAST: after every other entry; BORROWED: never, it
 * is not the machine's); its nouns; what it is.  Which machine holds a
 * kind is the steps' to say. */
#define MORI_RES_KINDS(X)                                                                         \
  X(PHYS_HANDLE, 0, NONE, IN_ORDER, "physical handle", "physical handles", "hipMemCreate")        \
  X(LOCAL_RESERVATION, 1, NONE, IN_ORDER, "local reservation", "local reservations",              \
    "hipMemAddressReserve of its size")                                                           \
  X(LOCAL_MAPPING, 2, NONE, IN_ORDER, "local mapping", "local mappings",                          \
    "hipMemMap of its own handle")                                                                \
  X(EXPORTED_FD, 4, NONE, LAST, "exported fd", "exported fds",                                    \
    "the fd of hipMemExportToShareableHandle (aux: the device); closed after the final "          \
    "hipMemRelease, which some ROCm releases tie to it (mori #618, docs/quirks.md "               \
    "export-fd-lifetime), or kept open after it as the device's warm export "                     \
    "(mori_symm_keep_warm); a block kept warm keeps it, and the block that takes "                \
    "that one back records it at EXPORT instead of exporting")                                    \
  X(BLOCK_REF, 5, NONE, BORROWED, "block reference", "block references",                          \
    "the block it attached to, borrowed")                                                         \
  X(CHANNEL, 6, NONE, IN_ORDER, "channel", "channels", "the bound fd-channel socket")             \
  X(RECEIVED_FD, 8, PEER, IN_ORDER, "received fd", "received fds",                                \
    "an fd received from a peer, open until the handle imported from it is released")             \
  X(IMPORTED_HANDLE, 8, PEER, IN_ORDER, "imported handle", "imported handles",                    \
    "hipMemImportFromShareableHandle of a peer's fd or fabric blob")                              \
  X(SPAN_RESERVATION, 9, NONE, IN_ORDER, "span reservation", "span reservations",                 \
    "the reservation of world_size x stride")                                                     \
  X(SLOT_MAPPING, 10, PEER, IN_ORDER, "slot mapping", "slot mappings",                            \
    "hipMemMap of one peer's slot of the span, from the handle imported from it")                 \
  X(DEVICE_TABLE, 11, NONE, IN_ORDER, "device table", "device tables",                            \
    "the device pointer tables, one slot of the device's arena of hipMalloc chunks")              \
  X(ZERO_EVENT, 3, NONE, IN_ORDER, "zero event", "zero events",                                   \
    "the event after its zeroing on the caller's stream (value: the block), until its "           \
    "first rendezvous waits for it")                                                              \
  X(SIGNAL_SLOT, 7, NONE, IN_ORDER, "signal slot", "signal slots",                                \
    "its private area of the block's signal pad (value: the window, aux: the slot)")              \
  X(SIGNAL_STATE, 12, NONE, IN_ORDER, "signal state", "signal states",                            \
    "signal counts and the watchdog's entries for the window (value: the window)")               \
  X(OWN_SLOT_MAPPING, 10, NONE, IN_ORDER, "own slot mapping", "own slot mappings",                \
    "hipMemMap of the block's own handle at the own rank's slot of the span, made when "          \
    "mori_window_span first hands the span out (flat-form kernels)")

/* The steps, one event each, in the order the two lists below use them;
 * a block and a window share RESERVE, MAP and GRANT. */
#define MORI_EVENTS(X)                                                                            \
  X(CREATE)       /* block: hipMemCreate */                                                       \
  X(RESERVE)      /* block: local reservation; window: world_size x stride span */                \
  X(MAP)          /* block: own handle mapped; window: every slot mapped */                       \
  X(GRANT)        /* hipMemSetAccess on the block / on every slot */                              \
  X(ZERO)         /* block: memory zeroed */                                                      \
  X(EXPORT)       /* block: shareable handle exported (fd or fabric blob) */                      \
  X(ATTACH)       /* window: borrowed its block */                                                \
  X(BIND)         /* window: fd-channel socket bound (fd path) */                                 \
  X(PUBLISH)      /* window: own request in the store */                                          \
  X(GATHER)       /* window: every peer's request read and decoded */                             \
  X(VALIDATE)     /* window: the world agrees (sizes, types, hosts, devices) */                   \
  X(TAKE_SLOT)    /* window: private signal slot chosen */                                        \
  X(EXCHANGE)     /* window: every peer's fd received (fd path); channel closed */                \
  X(IMPORT)       /* window: every peer's handle imported */                                      \
  X(BUILD_TABLES) /* window: host and device pointer tables */                                    \
  X(BARRIER)      /* window: every rank mapped (store barrier) */                                 \
  X(RELEASE)      /* orderly teardown */                                                          \
  X(FAIL)         /* an error: roll back */                                                       \
  X(LOSE)         /* window heal: the dead rank's slot, import and fd given back */              \
  X(REBIND)       /* window heal: a channel bound for the replacement's fd (fd path) */          \
  X(REJOIN)       /* window heal: offer, requests published and gathered, the world checked */   \
  X(REEXCHANGE)   /* window heal: the replacement's fd received; channel closed */               \
  X(REMAP)        /* window heal: the replacement's handle imported, mapped at its slot */       \
  X(RESYNC)       /* window heal: signals from 0 on every rank (store barrier) */                \
  X(BREAK)        /* window heal: it failed; the window is failed for good */                    \
  X(FLATTEN)      /* window: its own slot of the span mapped, for mori_window_span */

/*
 * The two machines, one line per step in the order a driver runs them:
 * X(from, event, to, rest, adds, words).  `adds` is what the step records
 * in the ledger while the machine sits in `from` (what mori_fsm_push
 * accepts there), with its count on entry to `to`: EXACTLY(kind, n) or
 * UP_TO(kind, n), n being 1, PEERS (world_size - 1) or RANKS (world_size);
 * ENDS(kind): the step gave that kind back.  What the ledger holds on entry
 * to a state is what the steps from INIT to it added, and nothing else.
 * `rest` is RESTS where the machine may stay (RELEASE leaves it) and
 * PASSES elsewhere; `words` says what holds in `to` beyond its ledger.
 * Every machine also has INIT, RELEASED and FAILED; FAIL leaves every
 * state but RELEASED and FAILED, and unwinds the ledger as RELEASE does.
 */
#define MORI_BLOCK_STEPS(X)                                                                       \
  X(INIT, CREATE, CREATED, PASSES, (EXACTLY(PHYS_HANDLE, 1)),                                     \
    "hipMemCreate made its handle; no address yet")                                               \
  X(CREATED, RESERVE, RESERVED, PASSES, (EXACTLY(LOCAL_RESERVATION, 1)),                          \
    "a local reservation of its size, nothing mapped")                                            \
  X(RESERVED, MAP, BACKED, PASSES, (EXACTLY(LOCAL_MAPPING, 1)),                                   \
    "the reservation mapped to the handle, not yet accessible: hipMemSetAccess has not run")      \
  X(BACKED, GRANT, ACCESSIBLE, PASSES, (NOTHING), "read-write access granted to the device")      \
  X(ACCESSIBLE, ZERO, ALLOCATED, RESTS, (UP_TO(ZERO_EVENT, 1)),                                   \
    "zeroed (torch's pad must read 0), or its zeroing queued on the caller's stream with an "     \
    "event after it, which its first rendezvous waits for and gives back; nothing exported; "     \
    "alloc() leaves it here, usable")                                                             \
  X(ALLOCATED, EXPORT, EXPORTED, RESTS, (UP_TO(EXPORTED_FD, 1)),                                  \
    "exported by its first rendezvous: an fd on the POSIX-fd path, a 64-byte blob in the "        \
    "block on the fabric path; usable until free() releases it")

#define MORI_WINDOW_STEPS(X)                                                                      \
  X(INIT, ATTACH, ATTACHED, PASSES, (EXACTLY(BLOCK_REF, 1)),                                      \
    "borrows its block, exported by this step if it was not yet; never releases what the "        \
    "block owns")                                                                                 \
  X(ATTACHED, BIND, BOUND, PASSES, (UP_TO(CHANNEL, 1)),                                           \
    "the fd path's channel socket bound (the fabric path binds none) before anything is "         \
    "published, so that peers' datagrams always find it")                                         \
  X(BOUND, PUBLISH, PUBLISHED, PASSES, (NOTHING),                                                 \
    "its request is in the store: peers may act on it, so a failure from here on publishes "      \
    "an abort")                                                                                   \
  X(PUBLISHED, GATHER, GATHERED, PASSES, (NOTHING), "every peer's request read and decoded")      \
  X(GATHERED, VALIDATE, VALIDATED, PASSES, (NOTHING),                                             \
    "the world agrees: sizes, handle type, devices, hosts")                                       \
  X(VALIDATED, TAKE_SLOT, SLOT_TAKEN, PASSES, (EXACTLY(SIGNAL_SLOT, 1)),                          \
    "its private area of the block's signal pad, marked taken on the block until given back "     \
    "(and then marked for zeroing before its next use)")                                          \
  X(SLOT_TAKEN, EXCHANGE, EXCHANGED, PASSES, (UP_TO(RECEIVED_FD, PEERS), ENDS(CHANNEL)),          \
    "every peer's fd received on the fd path (the fabric path receives none), each kept open "    \
    "until the handle imported from it is released; the channel closed")                          \
  X(EXCHANGED, IMPORT, RENDEZVOUS, PASSES, (EXACTLY(IMPORTED_HANDLE, PEERS)),                     \
    "every peer's handle imported; none for the own rank, whose slot maps the block's own "       \
    "handle")                                                                                     \
  X(RENDEZVOUS, RESERVE, SPAN_RESERVED, PASSES, (EXACTLY(SPAN_RESERVATION, 1)),                   \
    "a span of world_size x stride reserved, no slot mapped yet")                                 \
  X(SPAN_RESERVED, MAP, SLOTS_MAPPED, PASSES,                                                     \
    (EXACTLY(SLOT_MAPPING, PEERS), UP_TO(OWN_SLOT_MAPPING, 1)),                                   \
    "one slot mapped per peer, from its import, not yet accessible; the own slot stays "          \
    "unmapped until mori_window_span hands the span out (FLATTEN)")                               \
  X(SLOTS_MAPPED, GRANT, SLOTS_ACCESSIBLE, PASSES, (NOTHING),                                     \
    "read-write access granted on every peer's slot")                                             \
  X(SLOTS_ACCESSIBLE, BUILD_TABLES, TABLES_BUILT, PASSES,                                         \
    (EXACTLY(DEVICE_TABLE, 1), UP_TO(SIGNAL_STATE, 1)),                                           \
    "the host tables filled; one device table, the buffer pointers then the signal pad's; "       \
    "the signal state unless the block has no signal pad")                                        \
  X(TABLES_BUILT, BARRIER, MAPPED, RESTS, (NOTHING),                                              \
    "every rank has mapped (the store barrier): usable until its block's teardown releases it")

/*
 * A window's heal (rendezvous/heal.c): from MAPPED, after the death of one
 * rank, back to MAPPED with the replacement's memory at that rank's slot,
 * and every other entry of the ledger as it was.  The same columns as the
 * steps above, and LESS(kind, n) / LESS_UP_TO(kind, n): the step gave
 * back one rank's entry of that kind, leaving n (PEERS_LESS_1: world_size
 * - 2).  The last step returns to MAPPED (MORI_HEAL_BACK); a heal that
 * fails breaks the window (MORI_HEAL_BROKEN), whose ledger is whatever
 * the heal left, until its teardown.  Entries a heal records go to their
 * tier's place in the ledger (mori_fsm_push), so its reverse order stays
 * a safe teardown.
 */
#define MORI_HEAL_STEPS(X)                                                                        \
  X(MAPPED, LOSE, SLOT_LOST, PASSES,                                                              \
    (LESS(IMPORTED_HANDLE, PEERS_LESS_1), LESS(SLOT_MAPPING, PEERS_LESS_1),                       \
     LESS_UP_TO(RECEIVED_FD, PEERS_LESS_1)),                                                      \
    "a rank died: its slot unmapped (the span stays reserved, every other slot mapped), the "     \
    "handle imported from it released and its fd closed")                                         \
  X(SLOT_LOST, REBIND, HEAL_BOUND, PASSES, (UP_TO(CHANNEL, 1)),                                   \
    "a channel bound for the replacement's fd (the fd path)")                                     \
  X(HEAL_BOUND, REJOIN, REJOINED, PASSES, (NOTHING),                                              \
    "the offer and the own request in the heal's keys; every rank's request read; the world "     \
    "is the window's, every survivor's part from the process it had")                             \
  X(REJOINED, REEXCHANGE, REEXCHANGED, PASSES, (UP_TO(RECEIVED_FD, PEERS), ENDS(CHANNEL)),         \
    "the own fd sent to the replacement and its fd received; the channel closed")                  \
  X(REEXCHANGED, REMAP, HEALED, PASSES,                                                           \
    (EXACTLY(IMPORTED_HANDLE, PEERS), EXACTLY(SLOT_MAPPING, PEERS)),                              \
    "the replacement's handle imported and mapped at the dead rank's slot, access granted: "      \
    "every slot at the address it had")
/* HEALED -RESYNC-> MAPPED: the window's signals start over on every rank. */
#define MORI_HEAL_BACK(X) X(HEALED, RESYNC, MAPPED)
/* MAPPED -FLATTEN-> MAPPED: the first mori_window_span maps the own slot
 * of the span from the block's own handle, so that a flat-form kernel can
 * reach every rank at span + rank x stride.  A window nobody asks for its
 * span never maps it: the rendezvous saves a map and a grant, the teardown
 * an unmap (torch's own tables point at the block's own address).  The
 * count is UP_TO on both this row and MAP, so MAPPED and every heal state
 * hold 0 or 1 of it, whichever way they were entered. */
#define MORI_WINDOW_FLATTEN(X) X(MAPPED, FLATTEN, MAPPED, (UP_TO(OWN_SLOT_MAPPING, 1)))
/* MAPPED (a heal failing at its first step) and any heal state -BREAK->
 * BROKEN, which rests: its ledger anywhere between SLOT_LOST's and
 * MAPPED's with a channel. */
#define MORI_HEAL_BROKEN(X)                                                                       \
  X(BROKEN,                                                                                       \
    (BETWEEN(IMPORTED_HANDLE, PEERS_LESS_1, PEERS), BETWEEN(SLOT_MAPPING, PEERS_LESS_1, PEERS),    \
     BETWEEN(RECEIVED_FD, 0, PEERS), BETWEEN(CHANNEL, 0, 1), BETWEEN(SIGNAL_SLOT, 0, 1)),          \
    "a heal failed: the window is failed for good (every later signal call and heal fails), "     \
    "never half healed; its ledger is whatever the heal left, for its teardown, less its "        \
    "signal slot, given back for the block's next window")

/* ---- what the lists make ---- */

#define MORI__ENUM_RES(kind, ...) MORI_RES_##kind,
typedef enum mori_res { MORI_RES_KINDS(MORI__ENUM_RES) MORI_RES__COUNT } mori_res;

#define MORI__ENUM_EV(ev) MORI_EV_##ev,
typedef enum mori_wevent { MORI_EVENTS(MORI__ENUM_EV) MORI_EV__COUNT } mori_wevent;

/* One numbering for both machines' states, so that one transition table
 * holds both: the states every machine has (INIT, RELEASED, FAILED), which
 * code that drives either kind names thus, and the block's and the
 * window's between them.  Each machine's states have a type of their own,
 * and a block state used where a window state is wanted is a compiler
 * warning (-Wenum-conversion, and GCC's -Wenum-compare). */
#define MORI__ENUM_BID(from, ev, to, ...) MORI__S_B_##to,
#define MORI__ENUM_WID(from, ev, to, ...) MORI__S_W_##to,
#define MORI__ENUM_WBROKEN(to, ...) MORI__S_W_##to,
enum {
  MORI_FSM_INIT = 0,
  MORI_BLOCK_STEPS(MORI__ENUM_BID) MORI_WINDOW_STEPS(MORI__ENUM_WID)
  MORI_HEAL_STEPS(MORI__ENUM_WID) MORI_HEAL_BROKEN(MORI__ENUM_WBROKEN) MORI_FSM_RELEASED,
  MORI_FSM_FAILED,
  MORI_FSM_NSTATES
};

#define MORI__ENUM_BS(from, ev, to, ...) MORI_BS_##to = MORI__S_B_##to,
typedef enum mori_bstate {
  MORI_BS_INIT = MORI_FSM_INIT,
  MORI_BLOCK_STEPS(MORI__ENUM_BS) MORI_BS_RELEASED = MORI_FSM_RELEASED,
  MORI_BS_FAILED = MORI_FSM_FAILED
} mori_bstate;

#define MORI__ENUM_WS(from, ev, to, ...) MORI_WS_##to = MORI__S_W_##to,
#define MORI__ENUM_WSBROKEN(to, ...) MORI_WS_##to = MORI__S_W_##to,
typedef enum mori_wstate {
  MORI_WS_INIT = MORI_FSM_INIT,
  MORI_WINDOW_STEPS(MORI__ENUM_WS) MORI_HEAL_STEPS(MORI__ENUM_WS)
  MORI_HEAL_BROKEN(MORI__ENUM_WSBROKEN) MORI_WS_RELEASED = MORI_FSM_RELEASED,
  MORI_WS_FAILED = MORI_FSM_FAILED
} mori_wstate;

typedef enum mori_fsm_kind { MORI_FSM_BLOCK = 1, MORI_FSM_WINDOW = 2 } mori_fsm_kind;

/* Where the ledger's memory comes from: realloc semantics, and size 0
 * frees ptr.  The default is libc's; the core sets its allocation seam
 * (mori_realloc), so that the ledger's growth is a fault site.  Set it
 * before any machine holds a ledger. */
typedef void *(*mori_fsm_alloc_fn)(void *ptr, size_t size);
void mori_fsm_set_allocator(mori_fsm_alloc_fn fn);

typedef struct mori_ledger_entry {
  mori_res kind;
  uintptr_t value; /* handle, address, fd or object pointer */
  size_t size;
  int aux;         /* peer rank for per-peer resources; else 0 */
} mori_ledger_entry;

/* Result codes of this module (0 is success). */
enum {
  MORI_FSM_OK = 0,
  MORI_FSM_EILLEGAL = -1,   /* event not legal in this state for this kind */
  MORI_FSM_EINVARIANT = -2, /* ledger does not match the state's invariants */
  MORI_FSM_ENOMEM = -3,
  MORI_FSM_ETERMINAL = -4   /* the machine is RELEASED or FAILED */
};

typedef struct mori_fsm {
  mori_fsm_kind kind;
  union {
    int id;             /* in the one numbering: what code for either kind reads */
    mori_bstate block;  /* kind MORI_FSM_BLOCK */
    mori_wstate window; /* kind MORI_FSM_WINDOW */
  } state;
  int world_size;          /* window: expected slot count for MAPPED; block: 0 */
  int rank;                /* window: own rank */
  mori_ledger_entry *ledger;
  size_t len, cap;
  char why[160];           /* the last invariant failure, for messages */
} mori_fsm;

/* Releases one resource; returns 0 or a negative error.  Rollback and
 * release go on past a failed entry (nothing else may leak) and report the
 * first error. */
typedef int (*mori_release_fn)(void *ctx, const mori_ledger_entry *entry);

void mori_fsm_init(mori_fsm *m, mori_fsm_kind kind, int rank, int world_size);
/* Frees the ledger array itself (not the resources).  Only in RELEASED/FAILED/INIT. */
void mori_fsm_destroy(mori_fsm *m);

/* Looks up the table: the next state, or -1 if (state, event) is illegal
 * for this kind.  No side effects. */
int mori_fsm_next(mori_fsm_kind kind, int state, mori_wevent ev);
/* The event of the forward step that leaves state (every state has at most
 * one), or -1 in a final or terminal state: what a driver fires next. */
int mori_fsm_forward(mori_fsm_kind kind, int state);

/* The most entries the machine's ledger can hold (the largest invariant of
 * its kind), and reserving that room up front: after mori_fsm_reserve a
 * push cannot fail for memory, so nothing acquired is ever left outside
 * the ledger by an allocation failure. */
size_t mori_fsm_capacity(const mori_fsm *m);
int mori_fsm_reserve(mori_fsm *m, size_t n);

/* Records an acquired resource.  Legal only in non-terminal states; the
 * kinds allowed are those the current state's outgoing step adds.
 * Grows the ledger when it is full (MORI_FSM_ENOMEM if that fails). */
int mori_fsm_push(mori_fsm *m, mori_res kind, uintptr_t value, size_t size, int aux);
/* Removes the most recent entry of kind/value (used when ownership passes,
 * e.g. a received fd closed right after a successful import is not). */
int mori_fsm_forget(mori_fsm *m, mori_res kind, uintptr_t value);

/* Fires an ordinary event (not RELEASE/FAIL): checks legality, moves, then
 * checks the new state's invariants. */
int mori_fsm_fire(mori_fsm *m, mori_wevent ev);

/* RELEASE: unwinds the ledger in reverse order through fn and moves to
 * RELEASED; LAST kinds (EXPORTED_FD: closed only after the final release
 * of the physical handle) go last and BORROWED ones (BLOCK_REF) are
 * dropped without calling fn.  FAIL: the same, moving to FAILED.  Returns
 * the first error of fn, or 0; the machine ends terminal with an empty
 * ledger either way. */
int mori_fsm_release(mori_fsm *m, mori_release_fn fn, void *ctx);
int mori_fsm_fail(mori_fsm *m, mori_release_fn fn, void *ctx);

/* assert_window_state(): re-checks the current state's invariants against
 * the ledger.  0 or MORI_FSM_EINVARIANT with m->why saying which. */
int mori_fsm_check(mori_fsm *m);

size_t mori_fsm_count(const mori_fsm *m, mori_res kind);
/* Names, "?" out of range; a state's name is its enumerator's, for either kind. */
const char *mori_fsm_state_name(int state);
const char *mori_wevent_name(mori_wevent e);
const char *mori_res_name(mori_res r);

/* The diagram from the tables, in Graphviz DOT: the block and window
 * machines, then the window life and the watchdog entry, each a cluster. */
void mori_fsm_write_dot(FILE *out);
/* A markdown table from the lists, for docs/state-machine.md: "steps"
 * (every forward and RELEASE row, then one FAIL line per kind), "states"
 * (each state's ledger and words), "resources" (the kinds in ledger
 * order), "life" and "watch" (each lifecycle's rows and states).  Returns
 * 0, or -1 for another name. */
int mori_fsm_write_table(FILE *out, const char *name);

/* ---- two lifecycles without a ledger: a window's life, a watchdog entry ----
 *
 * Each is a state, its legal transitions as a table (lifecycle.c), one
 * setter that checks (an illegal transition changes nothing and is
 * reported, as libuv asserts a handle's flags), and a check of what each
 * state implies about the facts its owner reports (SQLite's
 * assert_pager_state).  The owner holds the state and the lock that guards
 * it; nothing here locks.
 *
 * Their lists: X(fact, kind, words for 1, words for 0, what it is) for
 * the facts, in the order of the owner's struct; X(state, allowed, words)
 * for the states, `allowed` saying per fact which values the state allows
 * (NONE: a count of 0, a flag 0; SOME: a count above 0, a flag 1; ANY;
 * WS(x): the window machine in state x); X(event, words) for the events.
 */

/* A window's life, as libuv's handle flags: only an OPEN window serves
 * calls; closing is a state, so a call on a closed window is caught.
 * The facts are read under mori__lock, which guards the window's life,
 * references, calls in progress and its block's list.
 *
 *   OPENING -OPEN-> OPEN -CLOSE-> CLOSING -FINISH-> CLOSED
 *   OPENING -ABANDON-> CLOSED
 */
#define MORI_LIFE_FACTS(X)                                                                        \
  X(refs, COUNT, "refs", NULL, "references (retain - release)")                                   \
  X(busy, COUNT, "busy", NULL, "calls in progress")                                               \
  X(listed, FLAG, "listed", "not listed", "1: on its block's list of windows")                    \
  X(attached, FLAG, "attached", "detached", "1: still names its block")                           \
  X(machine, WSTATE, "window machine", NULL,                                                      \
    "its WINDOW machine's mori_wstate, or -1 where another thread may be moving it "              \
    "(a window being set up or torn down, seen from a call): then not checked")

#define MORI_LIFE_STATES(X)                                                                       \
  X(OPENING, (NONE, NONE, NONE, SOME, ANY & ~WS(RELEASED)),                                       \
    "its rendezvous runs on one thread, outside the lock; not handed out, so no reference or "    \
    "call names it and its block's list does not hold it (block->opening does); its machine "     \
    "anywhere from INIT to MAPPED, or FAILED once rolled back")                                   \
  X(OPEN, (ANY, ANY, SOME, SOME, WS(MAPPED) | MORI__WS_HEALING | WS(BROKEN)),                     \
    "usable: it serves calls, each holding a temporary reference (busy) while it runs; its "      \
    "machine MAPPED, in a heal, or BROKEN by one that failed")                                    \
  X(CLOSING, (ANY, NONE, SOME, SOME, WS(MAPPED) | WS(BROKEN) | WS(RELEASED)),                     \
    "its block's teardown claimed it when no call was in progress and refuses every call "        \
    "since; outside the lock, the teardown moves its machine from MAPPED to RELEASED")            \
  X(CLOSED, (ANY, NONE, NONE, NONE, WS(INIT) | WS(RELEASED) | WS(FAILED)),                        \
    "torn down, rolled back or never started, its block gone: a tombstone while references "      \
    "remain and then in the quarantine, so that late calls are caught; terminal")

#define MORI_LIFE_EVENTS(X)                                                                       \
  X(OPEN, "its rendezvous succeeded: the window is handed out")                                   \
  X(ABANDON, "its rendezvous failed (rolled back), or never ran")                                 \
  X(CLOSE, "its block's teardown claimed it (no call in progress)")                               \
  X(FINISH, "that teardown is done: the struct stays as a tombstone")

/* A watchdog entry (one signal call's bounded waits).  Two parties hold
 * it: the watchdog's list, until the entry retires, and the call that
 * made it, until it ends (records the end event after its waits).  The
 * HELD_ states are the ones the call still holds, and hold the end event,
 * not yet recorded; whichever party lets go last frees the entry.  The
 * facts are read under the watchdog's lock, which guards its list and
 * every entry's state.
 *
 *   QUEUED -START-> ARMED -EXPIRE-> RELEASING -REARM-> ARMED  (and HELD_ alike)
 *   HELD_x -END-> x;  RETIRED -END-> FREED
 *   HELD_x -RETIRE-> RETIRED;  x -RETIRE-> FREED     (x: QUEUED, ARMED, RELEASING)
 */
#define MORI_WATCH_FACTS(X)                                                                       \
  X(listed, FLAG, "listed", "not listed", "1: on the watchdog's list")                            \
  X(armed, FLAG, "armed", "not armed", "1: a deadline is set")                                    \
  X(has_end, FLAG, "end event", "no end event",                                                   \
    "1: it holds its end event (a call whose record failed gives it back)")

#define MORI_WATCH_STATES(X)                                                                      \
  X(HELD_QUEUED, (SOME, NONE, SOME),                                                              \
    "on the list; its stream has not reached the start event recorded before the waits (a "       \
    "stream busy with earlier work is not late), so no deadline runs")                            \
  X(HELD_ARMED, (SOME, SOME, SOME), "on the list, its deadline running")                          \
  X(HELD_RELEASING, (SOME, SOME, SOME),                                                           \
    "expired: the watchdog reads its cells and writes the awaited values outside its lock; "      \
    "still listed, skipped by the scan, and a teardown that would forget it waits")               \
  X(RETIRED, (NONE, ANY, SOME),                                                                   \
    "off the list while its call still holds it (a release may end the waits while the call "     \
    "still enqueues them: the sim's sync mode); the call frees it when it ends")                  \
  X(QUEUED, (SOME, NONE, ANY), "as HELD_QUEUED, its call ended")                                  \
  X(ARMED, (SOME, SOME, ANY), "as HELD_ARMED, its call ended")                                    \
  X(RELEASING, (SOME, SOME, ANY),                                                                 \
    "as HELD_RELEASING, its call ended; one whose end event failed to record ends only by its "   \
    "release, or when a teardown forgets it")                                                     \
  X(FREED, (NONE, ANY, ANY), "nobody holds it: its memory goes; terminal")

#define MORI_WATCH_EVENTS(X)                                                                      \
  X(START, "the stream reached the start event: the deadline runs")                               \
  X(EXPIRE, "the deadline passed: the watchdog takes it to release")                              \
  X(REARM, "the release found the waits met, or could not run: again")                            \
  X(RETIRE, "done (completed, released or forgotten): off the list")                              \
  X(END, "its call recorded the end event (or failed to) and let go")

#define MORI__ENUM_FACT(field, ...) int field;
#define MORI__ENUM_LIFE(s, ...) MORI_LIFE_##s,
#define MORI__ENUM_LIFE_EV(ev, ...) MORI_LIFE_EV_##ev,
#define MORI__ENUM_WATCH(s, ...) MORI_WATCH_##s,
#define MORI__ENUM_WATCH_EV(ev, ...) MORI_WATCH_EV_##ev,

typedef enum mori_life { MORI_LIFE_STATES(MORI__ENUM_LIFE) MORI_LIFE__COUNT } mori_life;
typedef enum mori_life_event {
  MORI_LIFE_EVENTS(MORI__ENUM_LIFE_EV) MORI_LIFE_EV__COUNT
} mori_life_event;
/* What the owner of a window reads under its lock. */
typedef struct mori_life_facts {
  MORI_LIFE_FACTS(MORI__ENUM_FACT)
} mori_life_facts;

/* The next state, or -1 if (state, event) is not in the table. */
int mori_life_next(mori_life s, mori_life_event ev);
/* The one setter: moves *s, or returns MORI_FSM_EILLEGAL (MORI_FSM_ETERMINAL
 * from CLOSED) and leaves it. */
int mori_life_fire(mori_life *s, mori_life_event ev);
/* assert_life_state(): 0, or MORI_FSM_EINVARIANT with why (n bytes) naming
 * the first fact the state forbids, e.g. "CLOSING: busy is 1, expected 0". */
int mori_life_check(mori_life s, const mori_life_facts *f, char *why, size_t n);
const char *mori_life_name(mori_life s);
const char *mori_life_event_name(mori_life_event ev);

typedef enum mori_watch_state {
  MORI_WATCH_STATES(MORI__ENUM_WATCH) MORI_WATCH__COUNT
} mori_watch_state;
typedef enum mori_watch_event {
  MORI_WATCH_EVENTS(MORI__ENUM_WATCH_EV) MORI_WATCH_EV__COUNT
} mori_watch_event;
/* What the watchdog reads under its lock. */
typedef struct mori_watch_facts {
  MORI_WATCH_FACTS(MORI__ENUM_FACT)
} mori_watch_facts;

int mori_watch_next(mori_watch_state s, mori_watch_event ev);
int mori_watch_fire(mori_watch_state *s, mori_watch_event ev);
/* assert_watch_state(), as mori_life_check. */
int mori_watch_check(mori_watch_state s, const mori_watch_facts *f, char *why, size_t n);
const char *mori_watch_name(mori_watch_state s);
const char *mori_watch_event_name(mori_watch_event ev);

#ifdef __cplusplus
}
#endif
#endif
