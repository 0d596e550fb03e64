/*
 * fsm.h - the block and window state machines as data: states, events,
 * the transition table that drives them, and the resource ledger whose
 * contents each state constrains.  Pure C: no I/O, no runtime calls.
 * Releasing a resource is the caller's job, through a callback, in exact
 * reverse order of acquisition.
 *
 * Two kinds of machine share one table.  A BLOCK machine owns the local
 * allocation (physical handle, local reservation and mapping, exported fd);
 * alloc() leaves it in ALLOCATED; its first rendezvous exports it (EXPORT,
 * the one row run outside alloc), and it lives there until free().  A
 * WINDOW machine is one (block, group) rendezvous: it starts by attaching
 * to its block, exported by then (a borrowed reference, never released by
 * the window) and owns everything the rendezvous acquires.  Each forward row is one step of the work: the
 * caller runs the step's function and fires the row's event
 * (mori_fsm_forward names the event that leaves a state).
 *
 *   INIT -CREATE-> CREATED -RESERVE-> RESERVED -MAP-> BACKED -GRANT->
 *     ACCESSIBLE -ZERO-> ALLOCATED -EXPORT-> EXPORTED              (block)
 *   INIT -ATTACH-> ATTACHED -BIND-> BOUND -PUBLISH-> PUBLISHED -GATHER->
 *     GATHERED -VALIDATE-> VALIDATED -TAKE_SLOT-> SLOT_TAKEN -EXCHANGE->
 *     EXCHANGED -IMPORT-> RENDEZVOUS -RESERVE-> SPAN_RESERVED -MAP->
 *     SLOTS_MAPPED -GRANT-> SLOTS_ACCESSIBLE -BUILD_TABLES-> TABLES_BUILT
 *     -BARRIER-> MAPPED
 *                                                                   (window)
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

/* INIT, RELEASED and FAILED are every machine's; the others belong to one
 * kind (mori_fsm_check reports a machine in another kind's state). */
typedef enum mori_wstate {
  MORI_WS_INIT = 0,
  MORI_WS_CREATED,          /* block */
  MORI_WS_RESERVED,         /* block */
  MORI_WS_BACKED,           /* block */
  MORI_WS_ACCESSIBLE,       /* block */
  MORI_WS_ALLOCATED,        /* block */
  MORI_WS_EXPORTED,         /* block */
  MORI_WS_ATTACHED,         /* window */
  MORI_WS_BOUND,            /* window */
  MORI_WS_PUBLISHED,        /* window */
  MORI_WS_GATHERED,         /* window */
  MORI_WS_VALIDATED,        /* window */
  MORI_WS_SLOT_TAKEN,       /* window */
  MORI_WS_EXCHANGED,        /* window */
  MORI_WS_RENDEZVOUS,       /* window */
  MORI_WS_SPAN_RESERVED,    /* window */
  MORI_WS_SLOTS_MAPPED,     /* window */
  MORI_WS_SLOTS_ACCESSIBLE, /* window */
  MORI_WS_TABLES_BUILT,     /* window */
  MORI_WS_MAPPED,           /* window */
  MORI_WS_RELEASED,
  MORI_WS_FAILED,
  MORI_WS__COUNT
} mori_wstate;

/* One event per step: what the caller did before firing it. */
typedef enum mori_wevent {
  MORI_EV_CREATE = 0,   /* block: hipMemCreate */
  MORI_EV_RESERVE,      /* block: local reservation; window: world_size x stride span */
  MORI_EV_MAP,          /* block: own handle mapped; window: every slot mapped */
  MORI_EV_GRANT,        /* hipMemSetAccess on the block / on every slot */
  MORI_EV_ZERO,         /* block: memory zeroed */
  MORI_EV_EXPORT,       /* block: shareable handle exported (fd or fabric blob) */
  MORI_EV_ATTACH,       /* window: borrowed its block */
  MORI_EV_BIND,         /* window: fd-channel socket bound (fd path) */
  MORI_EV_PUBLISH,      /* window: own request in the store */
  MORI_EV_GATHER,       /* window: every peer's request read and decoded */
  MORI_EV_VALIDATE,     /* window: the world agrees (sizes, types, hosts, devices) */
  MORI_EV_TAKE_SLOT,    /* window: private signal slot chosen */
  MORI_EV_EXCHANGE,     /* window: every peer's fd received (fd path); channel closed */
  MORI_EV_IMPORT,       /* window: every peer's handle imported */
  MORI_EV_BUILD_TABLES, /* window: host and device pointer tables */
  MORI_EV_BARRIER,      /* window: every rank mapped (store barrier) */
  MORI_EV_RELEASE,      /* orderly teardown */
  MORI_EV_FAIL,         /* an error: roll back */
  MORI_EV__COUNT
} mori_wevent;

typedef enum mori_fsm_kind { MORI_FSM_BLOCK = 1, MORI_FSM_WINDOW = 2 } mori_fsm_kind;

/* Where the ledger's memory comes from: realloc semantics, and size 0
 * frees ptr.  The default is libc's; the core sets its allocation seam
 * (mori_realloc), so that the ledger's growth is a fault site.  Set it
 * before any machine holds a ledger. */
typedef void *(*mori_fsm_alloc_fn)(void *ptr, size_t size);
void mori_fsm_set_allocator(mori_fsm_alloc_fn fn);

/* Resource kinds in the ledger, in the order they are normally acquired. */
typedef enum mori_res {
  MORI_RES_PHYS_HANDLE = 0,   /* block: hipMemCreate */
  MORI_RES_LOCAL_RESERVATION, /* block: hipMemAddressReserve */
  MORI_RES_LOCAL_MAPPING,     /* block: hipMemMap of own handle */
  MORI_RES_EXPORTED_FD,       /* block: fd from hipMemExportToShareableHandle */
  MORI_RES_BLOCK_REF,         /* window: borrowed block (not released by the window) */
  MORI_RES_CHANNEL,           /* window: bound fd-channel socket */
  MORI_RES_RECEIVED_FD,       /* window: fd received from a peer (aux = peer rank) */
  MORI_RES_IMPORTED_HANDLE,   /* window: hipMemImportFromShareableHandle (aux = peer) */
  MORI_RES_SPAN_RESERVATION,  /* window: world_size x stride reservation */
  MORI_RES_SLOT_MAPPING,      /* window: one slot of the span mapped (aux = rank) */
  MORI_RES_DEVICE_TABLE,      /* window: device pointer table (hipMalloc) */
  /* Numbered after the others (the fuzz corpora name kinds by number);
   * the ledger's order is the tier column of fsm.c, not this one. */
  MORI_RES_ZERO_EVENT,        /* block: event after the buffer's zeroing on the caller's stream
                                 (value: the block), until the first rendezvous waits for it */
  MORI_RES_SIGNAL_SLOT,       /* window: its private signal slot (value: the window, aux: slot) */
  MORI_RES_SIGNAL_STATE,      /* window: signal counts and watchdog entries (value: the window) */
  MORI_RES__COUNT
} mori_res;

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
  mori_wstate state;
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
int mori_fsm_next(mori_fsm_kind kind, mori_wstate state, mori_wevent ev);
/* The event of the forward step that leaves state (every state has at most
 * one), or -1 in a final or terminal state: what a driver fires next. */
int mori_fsm_forward(mori_fsm_kind kind, mori_wstate state);

/* The most entries the machine's ledger can hold (the largest invariant of
 * its kind), and reserving that room up front: after mori_fsm_reserve a
 * push cannot fail for memory, so nothing acquired is ever left outside
 * the ledger by an allocation failure. */
size_t mori_fsm_capacity(const mori_fsm *m);
int mori_fsm_reserve(mori_fsm *m, size_t n);

/* Records an acquired resource.  Legal only in non-terminal states; the
 * kinds allowed are those the current state's outgoing transition acquires.
 * Grows the ledger when it is full (MORI_FSM_ENOMEM if that fails). */
int mori_fsm_push(mori_fsm *m, mori_res kind, uintptr_t value, size_t size, int aux);
/* Removes the most recent entry of kind/value (used when ownership passes,
 * e.g. a received fd closed right after a successful import is not). */
int mori_fsm_forget(mori_fsm *m, mori_res kind, uintptr_t value);

/* Fires an ordinary event (not RELEASE/FAIL): checks legality, moves, then
 * checks the new state's invariants. */
int mori_fsm_fire(mori_fsm *m, mori_wevent ev);

/* RELEASE: unwinds the ledger in reverse order through fn and moves to
 * RELEASED; deferred kinds (EXPORTED_FD: closed only after the final
 * release of the physical handle) go last.  FAIL: the same, moving to FAILED.  BLOCK_REF entries are
 * dropped without calling fn.  Returns the first error of fn, or 0; the
 * machine ends terminal with an empty ledger either way. */
int mori_fsm_release(mori_fsm *m, mori_release_fn fn, void *ctx);
int mori_fsm_fail(mori_fsm *m, mori_release_fn fn, void *ctx);

/* assert_window_state(): re-checks the current state's invariants against
 * the ledger.  0 or MORI_FSM_EINVARIANT with m->why saying which. */
int mori_fsm_check(mori_fsm *m);

size_t mori_fsm_count(const mori_fsm *m, mori_res kind);
const char *mori_wstate_name(mori_wstate s);
const char *mori_wevent_name(mori_wevent e);
const char *mori_res_name(mori_res r);
/* One line per state: its invariants, for docs and messages. */
const char *mori_wstate_invariants(mori_wstate s);

/* The diagram from the tables, in Graphviz DOT: the block and window
 * machines, then the window life and the watchdog entry, each a cluster. */
void mori_fsm_write_dot(FILE *out);
/* The table's steps as a markdown table: every forward and RELEASE row,
 * then one FAIL line per kind. */
void mori_fsm_write_steps(FILE *out);

/* ---- two lifecycles without a ledger: a window's life, a watchdog entry ----
 *
 * Each is a state, its legal transitions as a table, one setter that
 * checks (an illegal transition changes nothing and is reported, as libuv
 * asserts a handle's flags), and a check of what each state implies about
 * the facts its owner reports (SQLite's assert_pager_state).  The owner
 * holds the state and the lock that guards it; nothing here locks.
 */

/* A window's life, as libuv's handle flags: only an OPEN window serves
 * calls; closing is a state, so a call on a closed window is caught.
 *
 *   OPENING -OPEN-> OPEN -CLOSE-> CLOSING -FINISH-> CLOSED
 *   OPENING -ABANDON-> CLOSED
 */
typedef enum mori_life {
  MORI_LIFE_OPENING = 0, /* its rendezvous runs; not handed out yet */
  MORI_LIFE_OPEN,        /* usable */
  MORI_LIFE_CLOSING,     /* its block's teardown runs on some thread */
  MORI_LIFE_CLOSED,      /* torn down, or abandoned: a tombstone, so that late calls are caught */
  MORI_LIFE__COUNT
} mori_life;

typedef enum mori_life_event {
  MORI_LIFE_EV_OPEN = 0, /* its rendezvous succeeded: the window is handed out */
  MORI_LIFE_EV_ABANDON,  /* its rendezvous failed (rolled back) or never ran */
  MORI_LIFE_EV_CLOSE,    /* its block's teardown claimed it */
  MORI_LIFE_EV_FINISH,   /* that teardown is done: what is left is the tombstone */
  MORI_LIFE_EV__COUNT
} mori_life_event;

/* What the owner of a window reads under its lock.  machine is -1 where
 * another thread may be moving the window machine (a window being set up
 * or torn down, seen from a call): that fact is then not checked. */
typedef struct mori_life_facts {
  int refs;     /* references (retain - release) */
  int busy;     /* calls in progress */
  int listed;   /* 1: on its block's list of windows */
  int attached; /* 1: still names its block */
  int machine;  /* its WINDOW machine's mori_wstate, or -1 */
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

/* A watchdog entry (one signal call's bounded waits).  Two parties hold
 * it: the watchdog's list, until the entry retires, and the call that
 * made it, until it ends (records the end event after its waits).  The
 * HELD_ states are the ones the call still holds; whichever lets go last
 * frees the entry.
 *
 *   QUEUED -START-> ARMED -EXPIRE-> RELEASING -REARM-> ARMED  (and HELD_ alike)
 *   HELD_x -END-> x;  RETIRED -END-> FREED
 *   HELD_x -RETIRE-> RETIRED;  x -RETIRE-> FREED     (x: QUEUED, ARMED, RELEASING)
 */
typedef enum mori_watch_state {
  MORI_WATCH_HELD_QUEUED = 0, /* on the list; its stream has not reached the start event */
  MORI_WATCH_HELD_ARMED,      /* on the list; its deadline runs */
  MORI_WATCH_HELD_RELEASING,  /* the watchdog releases its waits, outside the list's lock */
  MORI_WATCH_RETIRED,         /* off the list; freed when its call ends it */
  MORI_WATCH_QUEUED,          /* as HELD_QUEUED, its call ended */
  MORI_WATCH_ARMED,           /* as HELD_ARMED, its call ended */
  MORI_WATCH_RELEASING,       /* as HELD_RELEASING, its call ended */
  MORI_WATCH_FREED,           /* nobody holds it: its memory goes */
  MORI_WATCH__COUNT
} mori_watch_state;

typedef enum mori_watch_event {
  MORI_WATCH_EV_START = 0, /* the stream reached the start event: the deadline runs */
  MORI_WATCH_EV_EXPIRE,    /* the deadline passed: the watchdog takes it to release */
  MORI_WATCH_EV_REARM,     /* the release found the waits met, or could not run: again */
  MORI_WATCH_EV_RETIRE,    /* done (completed, released or forgotten): off the list */
  MORI_WATCH_EV_END,       /* its call recorded the end event (or failed to) and let go */
  MORI_WATCH_EV__COUNT
} mori_watch_event;

/* What the watchdog reads under its lock. */
typedef struct mori_watch_facts {
  int listed;  /* 1: on the watchdog's list */
  int armed;   /* 1: a deadline is set */
  int has_end; /* 1: it holds its end event (a call whose record failed gives it back) */
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
