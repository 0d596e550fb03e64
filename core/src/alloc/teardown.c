/*
 * teardown.c - a claimed block's teardown: one hipDeviceSynchronize, then
 * the unwind of every window's ledger and of the block's (ledger.c).
 */
#include "alloc.h"

/* A window's ledger, unwound (the device was synchronized). */
static int window_unwind(mori_window *w) {
  int rc = mori__unwind(&w->fsm, 0);
  if (rc != 0) mori__error_prefix("rank %d window %ld teardown: ", w->rank, w->id);
  MORI_LOG(MORI_LOG_INFO, w->rank, w->id, "released group %s%s", w->group, rc ? " (errors)" : "");
  return rc;
}

int mori__teardown(mori_block *b) {
  mori__first_error first = {0}; /* the first failure wins */
  /* the phases' times only for the INFO line at the end */
  int timed = mori__log_level() >= MORI_LOG_INFO;
  double t0 = timed ? mori__log_clock_us() : 0;
  (void)mori_hipSetDevice(b->device);
  /* Work queued on the block or its windows (its zeroing on the caller's
   * stream, the caller's kernels, signals into the slots) must be done
   * before the memory goes: an unmap under a pending memset is an illegal
   * address that poisons the context.  One synchronize serves the block
   * and every window on it, and lets the watchdog's releases finish. */
  hipError_t e = mori_hipDeviceSynchronize();
  if (e != hipSuccess) (void)mori__first_keep(&first, mori__hip_error("hipDeviceSynchronize", e));
  double t1 = timed ? mori__log_clock_us() : 0;
  /* b is claimed: no other thread reaches its windows' ledgers now. */
  for (mori_window *w = b->windows; w != NULL; w = w->next)
    (void)mori__first_keep(&first, window_unwind(w));
  double t2 = timed ? mori__log_clock_us() : 0;
  /* kept warm (ledger.c) only after a teardown that met no failure */
  int rc = mori__first_end(&first, mori__unwind_block(b, first.rc == 0));
  MORI_LOG_DEVICE(MORI_LOG_INFO, b->device,
                  "block %p torn down%s; us: synchronize %.0f windows %.0f block %.0f", b->base,
                  rc ? " (errors)" : "", t1 - t0, t2 - t1, timed ? mori__log_clock_us() - t2 : 0);
  return rc;
}
