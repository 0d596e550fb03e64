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
/* Releases what each engine keeps for the process: the watchdog's thread
 * (release_all; the devices' events and modules go after it, with
 * mori__device_release_all). */
void mori__signal_release_all(void);

#endif
