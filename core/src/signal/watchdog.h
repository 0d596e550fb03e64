/*
 * watchdog.h - bounded GPU waits (watchdog.c), as the memop engine
 * (engine_memop.c) uses them: a call with a timeout hands the watchdog the
 * local cells its stream waits on, between an event recorded before the
 * waits and one recorded after.  The watchdog also keeps the record of a
 * window failed for good (mori__signals_fail).
 */
#ifndef MORI_CORE_WATCHDOG_H
#define MORI_CORE_WATCHDOG_H

#include "engine.h"

/* One enqueued wait: the stream waits until cell meets (flags, value); the
 * watchdog releases it by writing `release`.  peer is the rank that should
 * have written the cell; what says what that rank failed to do. */
struct mori__watch_cell {
  uint32_t *cell;
  uint32_t value, release;
  unsigned flags; /* hipStreamWaitValueEq or hipStreamWaitValueAnd */
  int peer;
  const char *what;
};

struct mori__watch;

/* Records the start event on stream and hands the cells to the watchdog
 * (started lazily); the deadline runs from when the stream reaches the
 * start event.  Call before enqueuing the waits. */
int mori__watch_begin(mori_window *w, hipStream_t stream, const char *op, int channel,
                      int timeout_ms, const struct mori__watch_cell *cells, int ncells,
                      struct mori__watch **out);
/* Records the end event after the waits (the entry retires once it has
 * completed).  Errors are the caller's only if it has none of its own. */
int mori__watch_end(struct mori__watch *x, hipStream_t stream);
/* The window's signal state goes (its ledger's SIGNAL_STATE, after the
 * teardown's synchronize): waits out a release in progress on w and
 * retires w's entries, so the watchdog never touches w again.  Never
 * takes mori__lock. */
void mori__watch_retire(const mori_window *w);
/* Fails the window for good (the first failure is the one kept): every
 * later signal call on it fails with rc and the message. */
void mori__signals_fail(const mori_window *w, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Whether the window was failed (by an expired wait, or by a call that
 * failed after some of its signals had left); if so sets the error (the
 * failure's code and message) and returns it. */
int mori__watch_failed(const mori_window *w, const char *op);
/* The thread stops, and a later call starts it again (release_all, before
 * the devices' event pools go: mori__device_release_all). */
void mori__watch_release_all(void);
/* Counts for mori_symm_signal_stats. */
void mori__watch_counts(long *watched, long *expired);

#endif
