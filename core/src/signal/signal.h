/*
 * signal.h - the signal calls' subsystem as the rest of the core uses it:
 * a window's signal state (signal.c), the engines that carry a call (the
 * stream's memops, the kernels: kernel.c) and the watchdog that bounds the
 * GPU's waits (watchdog.c).
 */
#ifndef MORI_CORE_SIGNAL_H
#define MORI_CORE_SIGNAL_H

#include "../alloc/alloc.h"

/* Before a window's first use (rendezvous, ahead of the "mapped" store
 * barrier): its signal state (the SIGNAL_STATE entry), and its signal slot
 * zeroed if an earlier window used it. */
int mori__signal_prepare(mori_window *w);
/* Releases the watchdog (its thread and pooled events) and the kernels'
 * modules (release_all). */
void mori__signal_release_all(void);

#endif
