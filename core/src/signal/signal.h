/*
 * signal.h - the signal calls' subsystem as the rest of the core uses it:
 * the calls and a window's signal state (signal.c), the engines that carry
 * a call behind one interface (engine.h: the stream's memops,
 * engine_memop.c; the kernels, engine_kernel.c) and the watchdog that
 * bounds the memops' waits (watchdog.c).
 */
#ifndef MORI_CORE_SIGNAL_H
#define MORI_CORE_SIGNAL_H

#include "../alloc/alloc.h"

/* Before a window's first use (rendezvous, ahead of the "mapped" store
 * barrier): its signal state (the SIGNAL_STATE entry), and its signal slot
 * zeroed if an earlier window used it. */
int mori__signal_prepare(mori_window *w);
/* A heal's new start (rendezvous/heal.c), on a window whose device is
 * idle and on which no call runs: each engine's record of a failure
 * cleared, every count back to 0, the window's slot of the own pad
 * zeroed and torch's cells of `rank` (the replaced one) in it cleared. */
int mori__signal_heal(mori_window *w, int rank);
/* The window is failed for good with rc and message: every later signal
 * call on it fails so (a failed heal); nothing if it has no signal state. */
void mori__signal_fail(const mori_window *w, int rc, const char *message);
/* Releases what each engine keeps for the process: the watchdog's thread
 * (release_all; the devices' events and modules go after it, with
 * mori__device_release_all). */
void mori__signal_release_all(void);

#endif
