/*
 * fsm.h - the window state machine as data: states, events, the transition
 * table, and the resource ledger whose contents each state constrains.
 * Pure C: no I/O, no runtime calls.  Releasing a resource is the caller's
 * job, through a callback, in exact reverse order of acquisition.
 *
 * Two kinds of machine share one table.  A BLOCK machine owns the local
 * allocation (physical handle, local reservation and mapping, exported fd);
 * it lives in ALLOCATED/EXPORTED until free().  A WINDOW machine is one
 * (block, group) rendezvous: it starts by attaching to an EXPORTED block
 * (a borrowed reference, never released by the window) and owns everything
 * the rendezvous acquires.
 *
 *   INIT -ALLOCATE-> ALLOCATED -EXPORT-> EXPORTED                  (block)
 *   INIT -ATTACH-> EXPORTED -PUBLISH-> RENDEZVOUS -MAP-> MAPPED     (window)
 *   ALLOCATED|EXPORTED|MAPPED -RELEASE-> RELEASED (ledger unwound)
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

typedef enum mori_wstate {
  MORI_WS_INIT = 0,
  MORI_WS_ALLOCATED,
  MORI_WS_EXPORTED,
  MORI_WS_RENDEZVOUS,
  MORI_WS_MAPPED,
  MORI_WS_RELEASED,
  MORI_WS_FAILED,
  MORI_WS__COUNT
} mori_wstate;

typedef enum mori_wevent {
  MORI_EV_ALLOCATE = 0, /* block: handle created, reserved, mapped, access set, zeroed */
  MORI_EV_EXPORT,       /* block: shareable handle exported (fd or fabric blob) */
  MORI_EV_ATTACH,       /* window: borrowed its block */
  MORI_EV_PUBLISH,      /* window: channel bound, request published, world gathered,
                           handles exchanged and imported */
  MORI_EV_MAP,          /* window: span reserved, every slot mapped, tables built */
  MORI_EV_RELEASE,      /* orderly teardown */
  MORI_EV_FAIL,         /* an error: roll back */
  MORI_EV__COUNT
} mori_wevent;

typedef enum mori_fsm_kind { MORI_FSM_BLOCK = 1, MORI_FSM_WINDOW = 2 } mori_fsm_kind;

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

/* Records an acquired resource.  Legal only in non-terminal states; the
 * kinds allowed are those the current state's outgoing transition acquires. */
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

/* The diagram from the table, in Graphviz DOT. */
void mori_fsm_write_dot(FILE *out);

#ifdef __cplusplus
}
#endif
#endif
