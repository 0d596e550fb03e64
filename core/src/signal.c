/*
 * signal.c - stream-ordered signals between the ranks of a window: put,
 * wait and barrier over the window's private slot of the block's signal
 * area (torch's own pad stays zero for torch's kernels).
 */
#include "internal.h"

static uint32_t *private_cell(const mori_window *w, int owner, int channel, int peer) {
  char *pad = (char *)w->pad_ptrs[owner] +
              (size_t)(1 + w->signal_slot) * w->block->signal_pad_size;
  return (uint32_t *)pad + (size_t)channel * (size_t)w->world + (size_t)peer;
}

static int check_signal(const mori_window *w, const char *op, int peer, int channel) {
  if (w->block->signal_pad_size == 0)
    return mori__error(MORI_ENOTSUP, "%s: the signal pad is disabled (size 0)", op);
  if (peer < 0 || peer >= w->world)
    return mori__error(MORI_ERANGE, "%s: rank %d out of range [0, %d)", op, peer, w->world);
  if (channel < 0 || channel >= w->max_channels)
    return mori__error(MORI_ERANGE, "%s: channel %d out of range [0, %d)", op, channel,
                       w->max_channels);
  return 0;
}

/* A cell is a one-slot mailbox, as in torch's own pads: put waits until the
 * receiver has emptied it (0) and sets it (1); wait waits for 1 and empties
 * it.  Cells return to 0 after every use, so groups sharing a block can use
 * the same channel one after another (not at the same time, as in torch). */
static int put(mori_window *w, int dst, int channel, void *stream) {
  uint32_t *cell = private_cell(w, dst, channel, w->rank);
  hipError_t e = mori_hipStreamWaitValue32((hipStream_t)stream, cell, 0, hipStreamWaitValueEq,
                                           0xffffffffu);
  if (e == hipErrorLaunchTimeOut)
    return mori__error(MORI_ETIMEDOUT,
                       "put_signal: rank %d never consumed the previous signal on channel %d (%s)",
                       dst, channel, mori_shim_message());
  if (e != hipSuccess) return mori__hip_error("hipStreamWaitValue32", e);
  MORI_HIP("hipStreamWriteValue32", mori_hipStreamWriteValue32((hipStream_t)stream, cell, 1, 0));
  return 0;
}

static int wait_cell(mori_window *w, int src, int channel, void *stream) {
  uint32_t *cell = private_cell(w, w->rank, channel, src);
  hipError_t e = mori_hipStreamWaitValue32((hipStream_t)stream, cell, 1, hipStreamWaitValueEq,
                                           0xffffffffu);
  if (e == hipErrorLaunchTimeOut)
    return mori__error(MORI_ETIMEDOUT, "wait_signal: rank %d never signalled channel %d (%s)",
                       src, channel, mori_shim_message());
  if (e != hipSuccess) return mori__hip_error("hipStreamWaitValue32", e);
  MORI_HIP("hipStreamWriteValue32", mori_hipStreamWriteValue32((hipStream_t)stream, cell, 0, 0));
  return 0;
}

/* Each public call holds a temporary reference (mori__window_enter), so a
 * free on another thread defers the teardown until the call is done. */
static int put_signal(mori_window *w, int dst_rank, int channel, void *stream) {
  MORI_GUARD(check_signal(w, "put_signal", dst_rank, channel));
  return put(w, dst_rank, channel, stream);
}

static int wait_signal(mori_window *w, int src_rank, int channel, void *stream) {
  MORI_GUARD(check_signal(w, "wait_signal", src_rank, channel));
  return wait_cell(w, src_rank, channel, stream);
}

static int barrier(mori_window *w, int channel, void *stream) {
  MORI_GUARD(check_signal(w, "barrier", w->rank, channel));
  for (int i = 1; i < w->world; i++) MORI_GUARD(put(w, (w->rank + i) % w->world, channel, stream));
  for (int i = 1; i < w->world; i++)
    MORI_GUARD(wait_cell(w, (w->rank + w->world - i) % w->world, channel, stream));
  return 0;
}

int mori_window_put_signal(mori_window *w, int dst_rank, int channel, void *stream,
                           int timeout_ms) {
  (void)timeout_ms;
  MORI_GUARD(mori__window_enter(w, "put_signal"));
  return mori__window_leave(w, put_signal(w, dst_rank, channel, stream));
}

int mori_window_wait_signal(mori_window *w, int src_rank, int channel, void *stream,
                            int timeout_ms) {
  (void)timeout_ms;
  MORI_GUARD(mori__window_enter(w, "wait_signal"));
  return mori__window_leave(w, wait_signal(w, src_rank, channel, stream));
}

int mori_window_barrier(mori_window *w, int channel, void *stream, int timeout_ms) {
  (void)timeout_ms;
  MORI_GUARD(mori__window_enter(w, "barrier"));
  return mori__window_leave(w, barrier(w, channel, stream));
}
