/*
 * engine_memop.c - stream memory operations as an engine (engine.h): a
 * call's writes and waits go to the runtime in batches of at most
 * MORI_HIP_BATCH_MAX (hipStreamBatchMemOp; MORI_SYMM_MEMOP_BATCH=0 issues
 * them one by one), and a call with a timeout, outside a capture, is
 * bounded by the watchdog (watchdog.c), which keeps the record of a window
 * failed for good that this engine reports.
 */
#include "watchdog.h"

#include <stdlib.h>
#include <string.h>

static struct {
  long remote_writes, local_writes, local_waits, remote_waits, captured, calls;
} counts;

static void count(long *c) { __atomic_fetch_add(c, 1, __ATOMIC_RELAXED); }

static void count_op(const mori_window *w, const struct mori__signal_op *op) {
  if (op->kind == MORI__OP_WAIT) count(&counts.local_waits);
  else count(op->owner == w->rank ? &counts.local_writes : &counts.remote_writes);
}

/* MORI_SYMM_MEMOP_BATCH=0: one runtime call per operation (to measure the
 * difference on a runtime where batching may not pay). */
static int batching(void) {
  const char *v = getenv("MORI_SYMM_MEMOP_BATCH");
  return v == NULL || strcmp(v, "0") != 0;
}

/* ops[0, n) as one runtime call (n <= MORI_HIP_BATCH_MAX), or one call each
 * where batching is off; *done counts the operations known to be
 * enqueued.  *unsure is set when a failed batch may have enqueued some of
 * its operations: where the runtime has no batch call the shim issues them
 * one by one and stops at the first that fails. */
static int enqueue(const mori_window *w, hipStream_t stream, const char *opname, int channel,
                   const struct mori__signal_op *ops, int n, int batch, int *done, int *unsure) {
  hipStreamBatchMemOpParams params[MORI_HIP_BATCH_MAX];
  hipError_t e = hipSuccess;
  const struct mori__signal_op *failed = &ops[0];
  if (batch) {
    memset(params, 0, (size_t)n * sizeof params[0]);
    for (int i = 0; i < n; i++) {
      params[i].operation =
          ops[i].kind == MORI__OP_WAIT ? hipStreamMemOpWaitValue32 : hipStreamMemOpWriteValue32;
      params[i].waitValue.address = ops[i].cell;
      params[i].waitValue.value = ops[i].value;
      params[i].waitValue.flags = ops[i].kind == MORI__OP_WAIT ? ops[i].flags : 0;
    }
    e = mori_hipStreamBatchMemOp(stream, (unsigned)n, params, 0);
    count(&counts.calls);
    if (e == hipSuccess) *done += n;
    else
      for (int i = 0; i < n; i++)
        *unsure |= ops[i].kind == MORI__OP_WRITE && ops[i].owner != w->rank;
  } else {
    for (int i = 0; i < n && e == hipSuccess; i++) {
      failed = &ops[i];
      e = ops[i].kind == MORI__OP_WAIT
              ? mori_hipStreamWaitValue32(stream, ops[i].cell, ops[i].value, ops[i].flags,
                                          0xffffffffu)
              : mori_hipStreamWriteValue32(stream, ops[i].cell, ops[i].value, 0);
      count(&counts.calls);
      if (e == hipSuccess) ++*done;
    }
  }
  const char *call = batch ? "hipStreamBatchMemOp"
                           : failed->kind == MORI__OP_WAIT ? "hipStreamWaitValue32"
                                                           : "hipStreamWriteValue32";
  /* The sim in sync mode waits in the call, bounded by MORI_SIM_WAIT_TIMEOUT_MS. */
  if (e == hipErrorLaunchTimeOut) {
    const struct mori__signal_op *wait = failed;
    for (int i = 0; batch && i < n && wait->kind != MORI__OP_WAIT; i++) wait = &ops[i];
    return mori__error(MORI_ETIMEDOUT, "%s: rank %d %s on channel %d (%s)", opname, wait->peer,
                       wait->what, channel, mori_shim_message());
  }
  if (e != hipSuccess) return mori__hip_error(call, e);
  return 0;
}

/* The watchdog's entry for c's waits (NULL where it has none: nothing to
 * wait for, as in a world of one). */
static int watch(mori_window *w, const struct mori__signal_call *c, struct mori__watch **out) {
  const char *opname = mori__call_names[c->what];
  struct mori__watch_cell *cells = mori_malloc((size_t)c->nops * sizeof *cells);
  int n = 0, rc = 0;
  if (cells == NULL) return mori__nomem("%s", opname);
  for (int i = 0; i < c->nops; i++)
    if (c->ops[i].kind == MORI__OP_WAIT)
      cells[n++] = (struct mori__watch_cell){c->ops[i].cell,  c->ops[i].value, c->ops[i].release,
                                             c->ops[i].flags, c->ops[i].peer,  c->ops[i].what};
  if (n > 0) rc = mori__watch_begin(w, c->stream, opname, c->channel, c->timeout_ms, cells, n, out);
  free(cells);
  return rc;
}

/* The plan in batches, with a timeout (and outside a capture) under the
 * watchdog.  *sent: a signal of the call may have reached a peer (a
 * remote write was enqueued, or a failed batch holding one may have been
 * in part). */
static int run_ops(mori_window *w, const struct mori__signal_call *c, int *sent) {
  const char *opname = mori__call_names[c->what];
  struct mori__watch *x = NULL;
  int rc = 0, done = 0, unsure = 0, batch = batching(), reached = 0;
  if (c->timeout_ms > 0 && !c->captured) MORI_GUARD(watch(w, c, &x));
  for (int i = 0; i < c->nops && rc == 0;) {
    int n = c->nops - i < MORI_HIP_BATCH_MAX ? c->nops - i : MORI_HIP_BATCH_MAX, before = done;
    rc = enqueue(w, c->stream, opname, c->channel, &c->ops[i], n, batch, &done, &unsure);
    for (int k = before; k < done; k++) {
      count_op(w, &c->ops[k]);
      reached += c->ops[k].kind == MORI__OP_WRITE && c->ops[k].owner != w->rank;
    }
    i += n;
  }
  *sent = reached > 0 || unsure;
  if (x != NULL) {
    int end = mori__watch_end(x, c->stream);
    if (rc == 0) rc = end;
  }
  if (c->captured) count(&counts.captured);
  return rc;
}

/* An eager call that failed after some of its signals had left fails the
 * window for good: signal.c's comment on its counts says why. */
static int run(mori_window *w, struct mori__signal_call *c) {
  int sent = 0, rc = run_ops(w, c, &sent);
  if (rc == 0 || c->captured) return rc; /* captured: nothing counts */
  if (sent)
    mori__signals_fail(w, MORI_ESTATE,
                       "%s on channel %d failed after some of its signals had left (%s); its "
                       "peers saw part of it, and the window is failed (window %ld, group %s)",
                       mori__call_names[c->what], c->channel, mori_last_error(), w->id, w->group);
  return rc;
}

/* Nothing to make ready: memory operations run on every runtime. */
static int prepare(mori_window *w, int *unsupported) {
  (void)w;
  *unsupported = 0;
  return 0;
}

static int ready(const mori_window *w) {
  (void)w;
  return 1;
}

/* Failed by the watchdog, or by a call that failed after some of its
 * signals had left. */
static int failed(const mori_window *w, const char *op) { return mori__watch_failed(w, op); }

/* The watchdog's entries for w (they read w's state) go: a teardown
 * synchronized the device first, so any release in progress can end; a
 * rollback has none (no call ran on w). */
static int release(mori_window *w) {
  mori__watch_retire(w);
  return 0;
}

/* A heal: the watchdog's entries for w go as at its release; the
 * failure they recorded is the window's, cleared by signal.c. */
static int reset(mori_window *w) {
  mori__watch_retire(w);
  return 0;
}

static void release_all(void) { mori__watch_release_all(); }

static void stats(mori_symm_signal_stats *out) {
  long watched = 0, expired = 0;
  out->remote_writes += __atomic_load_n(&counts.remote_writes, __ATOMIC_RELAXED);
  out->local_writes += __atomic_load_n(&counts.local_writes, __ATOMIC_RELAXED);
  out->local_waits += __atomic_load_n(&counts.local_waits, __ATOMIC_RELAXED);
  out->remote_waits += __atomic_load_n(&counts.remote_waits, __ATOMIC_RELAXED);
  out->captured += __atomic_load_n(&counts.captured, __ATOMIC_RELAXED);
  out->calls += __atomic_load_n(&counts.calls, __ATOMIC_RELAXED);
  mori__watch_counts(&watched, &expired);
  out->watched += watched;
  out->expired += expired;
}

const struct mori__signal_engine mori__signal_engine_memop = {
    "memop", prepare, ready, run, failed, release, reset, release_all, stats};
