/*
 * teardown.c - a claimed block's teardown: one hipDeviceSynchronize, then
 * the unwind of every window's ledger and of the block's (ledger.c).
 */
#include "alloc.h"

#include <stdio.h>

/* A window's ledger, unwound (the device was synchronized). */
static int window_unwind(mori_window *w) {
  int rc = mori__unwind(&w->fsm, 0);
  if (rc != 0) mori__error_prefix("rank %d window %ld teardown: ", w->rank, w->id);
  MORI_LOG(MORI_LOG_INFO, w->rank, w->id, "released group %s%s", w->group, rc ? " (errors)" : "");
  return rc;
}

int mori__teardown(mori_block *b) {
  int first = 0;
  char message[1024] = "";
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
  if (e != hipSuccess) {
    first = mori__hip_error("hipDeviceSynchronize", e);
    snprintf(message, sizeof message, "%s", mori_last_error());
  }
  double t1 = timed ? mori__log_clock_us() : 0;
  /* b is claimed: no other thread reaches its windows' ledgers now. */
  for (mori_window *w = b->windows; w != NULL; w = w->next) {
    int rc = window_unwind(w);
    if (rc != 0 && first == 0) {
      first = rc;
      snprintf(message, sizeof message, "%s", mori_last_error());
    }
  }
  double t2 = timed ? mori__log_clock_us() : 0;
  int rc = mori__unwind(&b->fsm, 0);
  if (rc != 0 && first == 0) first = rc;
  else if (first != 0) mori__error(first, "%s", message); /* the first failure wins */
  MORI_LOG_DEVICE(MORI_LOG_INFO, b->device,
                  "block %p torn down%s; us: synchronize %.0f windows %.0f block %.0f", b->base,
                  first ? " (errors)" : "", t1 - t0, t2 - t1,
                  timed ? mori__log_clock_us() - t2 : 0);
  return first;
}
