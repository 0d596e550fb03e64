/*
 * kernel.h - the signal kernels' engine (kernel.c), as signal.c uses it:
 * the module per device, the launch, and the failure words a kernel whose
 * wait gave up leaves in its window.
 */
#ifndef MORI_CORE_KERNEL_H
#define MORI_CORE_KERNEL_H

#include "mori/signal_kernel.h"
#include "watchdog.h"

/* The entries of mori/signal_kernel.h, in its order. */
#define MORI__KENTRY(name, what) MORI__K_##name,
enum mori__kentry { MORI_SIGNAL_KERNELS(MORI__KENTRY) MORI__K__COUNT };
#undef MORI__KENTRY

/* Makes the kernels usable on device (its module loaded once): 0, or an
 * error naming the call; *unsupported is set when the runtime cannot load
 * them at all (no JIT for the PTX, no hiprtc), which is then remembered. */
int mori__kernel_load(int device, int *unsupported);
/* Makes the kernels usable on w: its device's module (mori__kernel_load)
 * and its failure words (mapped host memory).  Neither a module load nor
 * a pinned allocation is permitted while a CUDA stream captures in global
 * mode, so signal.c does this outside a capture; *unsupported as for
 * mori__kernel_load. */
int mori__kernel_prepare(mori_window *w, int *unsupported);
/* Whether w's kernels are prepared. */
int mori__kernel_ready(const mori_window *w);
/* Launches entry on stream with a (its pads and status filled here); w
 * was prepared. */
int mori__kernel_launch(mori_window *w, enum mori__kentry entry, struct mori_signal_args *a,
                        hipStream_t stream);
/* MORI_ETIMEDOUT naming the ranks a kernel of w gave up on, or 0: a kernel
 * that timed out leaves the window failed for good. */
int mori__kernel_failed(const mori_window *w, const char *op);
/* Windows whose kernel gave up, as mori__kernel_failed found them. */
long mori__kernel_expired(void);
/* The window's failure words go (after the device was synchronized): 0, or
 * the error of a release the runtime refused twice. */
int mori__kernel_release(mori_window *w);
/* Every module goes (release_all). */
void mori__kernel_release_all(void);

#endif
