/*
 * signal_kernel.h - the signal kernels' interface: the one argument every
 * kernel takes, the entry names, and the failure words a timed-out wait
 * writes.  Read by the kernels' source (core/kernels/signal.cu: nvcc makes
 * the PTX the library embeds, hiprtc compiles it on ROCm), by the core
 * that launches them (core/src/kernel.c) and by the sim that models them
 * (hip_shim/sim_kernel.c).  Plain C that C11, CUDA and hiprtc all read: no
 * includes, no fixed-width typedefs (LP64 everywhere these run).
 */
#ifndef MORI_SIGNAL_KERNEL_H
#define MORI_SIGNAL_KERNEL_H

/* One entry per signal form, each doing what that form's memory
 * operations do (core/src/signal.c), on the same cells:
 *   barrier            eager: phase to every peer, wait for each peer's (AND)
 *   put                eager: wait own ACK cell (AND wait_value; none if 0),
 *                      then write_value into dst's SIGNAL cell
 *   wait               eager: wait own SIGNAL cell (AND), then write_value
 *                      into src's ACK cell
 *   captured_put       wait own ACK == 0, own ACK = 1, dst's SIGNAL = 1
 *   captured_wait      wait own SIGNAL == 1, own SIGNAL = 0, src's ACK = 0
 *   captured_barrier   a captured put to every peer, then a captured wait
 *                      for every peer (every cell back at 0: replay-safe)
 * X(name, what): what a timed-out wait of the form reports. */
#define MORI_SIGNAL_KERNELS(X)                                  \
  X(mori_signal_barrier, MORI_SIGNAL_NEVER_SIGNALLED)           \
  X(mori_signal_put, MORI_SIGNAL_NEVER_CONSUMED)                \
  X(mori_signal_wait, MORI_SIGNAL_NEVER_SIGNALLED)              \
  X(mori_signal_captured_barrier, MORI_SIGNAL_NEVER_SIGNALLED)  \
  X(mori_signal_captured_put, MORI_SIGNAL_NEVER_CONSUMED)       \
  X(mori_signal_captured_wait, MORI_SIGNAL_NEVER_SIGNALLED)

/* A cell is (unsigned *)(pads[owner] + area) + channel * world + index,
 * torch's layout within each area (signal.c's cell()). */
struct mori_signal_args {
  unsigned long long pads;        /* device table of the world's pad bases (char *const *) */
  unsigned long long status;      /* the window's failure words (unsigned *), 0: none */
  unsigned long long timeout_ns;  /* each wait's bound from the kernel's start; 0: none */
  unsigned long long signal_area; /* byte offsets from a pad base: the signal (or */
  unsigned long long ack_area;    /* barrier) area, and the acknowledgement area */
  int world, rank;
  int peer;                       /* put: dst; wait: src; barriers: unused */
  int channel;
  unsigned wait_value;            /* eager forms: the AND mask awaited (put: 0, none) */
  unsigned write_value;           /* eager forms: the phase written */
  unsigned code;                  /* what status[0] becomes on a timeout (nonzero) */
  unsigned timeout_ms;            /* for the message: the bound as the caller gave it */
};

/* The failure words, MORI_SIGNAL_STATUS_WORDS(world) of them: a wait that
 * times out writes status[2 + r] = what (r: the rank it waited for),
 * status[1] = timeout_ms, and then status[0] = code, and gives up (no
 * trap: the context survives).  Nothing ever clears them: a window whose
 * kernel timed out is failed for good, and the first failure is the one
 * kept: a wait that times out once status[0] holds another code writes
 * nothing (one of the same call and channel adds its rank).  The check is
 * a plain read, not an atomic (host memory need not take the device's
 * atomics), so two kernels giving up at one instant on two streams may
 * still both write. */
#define MORI_SIGNAL_STATUS_WORDS(world) (2 + (world))
#define MORI_SIGNAL_NEVER_SIGNALLED 1u
#define MORI_SIGNAL_NEVER_CONSUMED 2u
/* code: the call (0 put, 1 wait, 2 barrier) and its channel. */
#define MORI_SIGNAL_CODE(call, channel) \
  (0x80000000u | ((unsigned)(call) << 24) | ((unsigned)(channel) & 0xffffffu))
#define MORI_SIGNAL_CODE_CALL(code) ((int)(((code) >> 24) & 0x7fu))
#define MORI_SIGNAL_CODE_CHANNEL(code) ((int)((code) & 0xffffffu))

/* The block each launch uses: one; threads a multiple of every runtime's
 * warp or wavefront, each peer handled by thread (i - 1) % threads. */
#define MORI_SIGNAL_THREADS 64

#endif
