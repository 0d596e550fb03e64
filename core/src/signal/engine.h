/*
 * engine.h - signal/'s own header: a window's signal state, one planned
 * call as signal.c hands it over, and the interface every engine offers
 * (the stream's memory operations, engine_memop.c; the signal kernels,
 * engine_kernel.c).  signal.c plans a call, chooses its engine and calls
 * it only through struct mori__signal_engine, as the shim calls its
 * backends through struct mori__shim_backend.
 */
#ifndef MORI_CORE_SIGNAL_ENGINE_H
#define MORI_CORE_SIGNAL_ENGINE_H

#include "mori/signal_kernel.h"
#include "signal.h"

/* A window's signal state (w->signals), from its rendezvous to the
 * release of its ledger's SIGNAL_STATE. */
struct mori__signals {
  uint64_t *barriers; /* per channel: eager barriers enqueued so far */
  uint64_t *puts;     /* per (channel, destination): eager puts enqueued so far */
  uint64_t *waits;    /* per (channel, source): eager waits enqueued so far */
  int failed;         /* set once, atomically (mori__signals_fail) */
  int failed_rc;      /* what later calls fail with: MORI_ETIMEDOUT, or MORI_ESTATE */
  char failure[768];  /* written before failed is set */
  uint32_t *status;   /* the kernels' failure words (engine_kernel.c), once they are ready */
  int status_seen;    /* a kernel's timeout was reported (counted, logged) */
};

/* The calls, in the order the kernels' failure code numbers them
 * (MORI_SIGNAL_CODE). */
enum mori__call { MORI__CALL_PUT, MORI__CALL_WAIT, MORI__CALL_BARRIER };
static const char *const mori__call_names[] = {"put_signal", "wait_signal", "barrier"};

/* The entries of mori/signal_kernel.h, in its order. */
#define MORI__KENTRY(name, what) MORI__K_##name,
enum mori__kentry { MORI_SIGNAL_KERNELS(MORI__KENTRY) MORI__K__COUNT };
#undef MORI__KENTRY

/* One memory operation of a call. */
enum mori__op_kind { MORI__OP_WRITE, MORI__OP_WAIT };
struct mori__signal_op {
  enum mori__op_kind kind;
  uint32_t *cell;
  uint32_t value;   /* write: the value; wait: compared per flags */
  uint32_t release; /* wait: what the watchdog writes to end it */
  unsigned flags;   /* wait: hipStreamWaitValueEq or hipStreamWaitValueAnd */
  int owner, peer;  /* owner of the cell; the rank a wait waits for */
  const char *what; /* wait: what its peer failed to do if it never ends */
};

/* One planned call: its work both ways, as memory operations and as one
 * kernel, for whichever engine runs it. */
struct mori__signal_call {
  enum mori__call what;
  int channel, timeout_ms; /* timeout_ms 0: no bound */
  int captured;            /* stream is being captured into a graph */
  hipStream_t stream;
  struct mori__signal_op *ops;
  int nops;
  /* The same work as one kernel: its entry, and its argument but for
   * what the engine fills (the tables, the failure words, the bound). */
  enum mori__kentry entry;
  struct mori_signal_args k;
};

/* An engine.  Each function is set; a question an engine has no work for
 * answers at once (the memory operations are always ready). */
struct mori__signal_engine {
  const char *name; /* as MORI_SYMM_SIGNAL_ENGINE spells it */
  /* Makes the engine usable on w, outside a capture (a module load or a
   * pinned allocation may wait for the device, and CUDA refuses both
   * while a stream captures in global mode): 0, or an error naming the
   * call; *unsupported is set when the runtime cannot run it at all. */
  int (*prepare)(mori_window *w, int *unsupported);
  /* Whether w was prepared. */
  int (*ready)(const mori_window *w);
  /* Enqueues the call on its stream; w was prepared.  0, or the error of
   * the call.  An eager call that failed after some of its signals had
   * left fails the window for good (its peers saw part of it). */
  int (*run)(mori_window *w, struct mori__signal_call *c);
  /* The error a window this engine failed for good reports (op names the
   * call asking), or 0. */
  int (*failed)(const mori_window *w, const char *op);
  /* w's state in the engine goes (its ledger's SIGNAL_STATE, after the
   * teardown's synchronize): 0, or the error of a release the runtime
   * refused twice. */
  int (*release)(mori_window *w);
  /* w's record of a failure in the engine is cleared, as if no call had
   * run on w (a heal, once the device is idle and no call is on w): 0, or
   * the error of the call that could not clear it. */
  int (*reset)(mori_window *w);
  /* What the engine keeps for the process goes (release_all). */
  void (*release_all)(void);
  /* Adds its counts to out (mori_symm_signal_stats). */
  void (*stats)(mori_symm_signal_stats *out);
};

extern const struct mori__signal_engine mori__signal_engine_memop;
extern const struct mori__signal_engine mori__signal_engine_kernel;

#endif
