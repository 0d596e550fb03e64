/*
 * engine_kernel.c - the signal kernels as an engine (engine.h): a call is
 * one small kernel of its form (core/kernels/signal.cu), launched from its
 * device's module (base/device.c loads it once, from the image the library
 * carries: the PTX nvcc made for the CUDA driver, and that source itself,
 * for hiprtc on ROCm: the shim's backend takes its own), and each window's
 * failure words in host memory the kernels write and the host reads with a
 * load.  Every call here passes the seam, so each is a fault site.
 */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

#include "signal_hip_source.h" /* generated at build time from core/kernels/signal.cu */
#include "signal_ptx.h"        /* core/kernels, made by scripts/gen_signal_ptx.sh */

static const mori_module_image image = {mori__signal_ptx, mori__signal_hip_source, "signal.cu"};

#define ENTRY_NAME(name, what) #name,
static const char *const entry_names[MORI__K__COUNT] = {MORI_SIGNAL_KERNELS(ENTRY_NAME)};
#undef ENTRY_NAME
_Static_assert(MORI__K__COUNT <= MORI__MODULE_ENTRIES, "a device's module holds every entry");

static const mori__module_spec module = {
    &image, entry_names, MORI__K__COUNT, "signal kernels",
    "the automatic signal engine keeps stream memory operations"};

static struct {
  long kernels, captured; /* launches, and those into a capture */
  long expired;           /* windows whose kernel gave up */
} counts;

static void count(long *c) { __atomic_fetch_add(c, 1, __ATOMIC_RELAXED); }

/* Pinned memory may come back as another user left it, and any nonzero
 * word reads as a kernel that gave up: the words are zeroed on the
 * device's private stream (which waits for nothing of the caller's), and
 * a block that could not be is given back. */
static int zero_status(const mori_window *w, void *p, size_t n) {
  hipStream_t svc = NULL;
  int rc = mori__service_stream(w->block->device, &svc);
  hipError_t e = hipSuccess;
  if (rc == 0 && (e = mori_hipMemsetAsync(p, 0, n, svc)) != hipSuccess)
    rc = mori__hip_error("hipMemsetAsync (the kernels' failure words)", e);
  if (rc == 0 && (e = mori_hipStreamSynchronize(svc)) != hipSuccess)
    rc = mori__hip_error("hipStreamSynchronize (the kernels' failure words)", e);
  /* a release the runtime refuses is tried once more, as the ledger (alloc/ledger.c) does */
  if (rc != 0 && mori_hipHostFree(p) != hipSuccess && mori_hipHostFree(p) != hipSuccess)
    mori__error_suffix("; and hipHostFree failed: %s", mori_shim_message());
  return rc;
}

/* The device's module, and w's failure words (mapped host memory). */
static int prepare(mori_window *w, int *unsupported) {
  struct mori__signals *s = w->signals;
  MORI_GUARD(mori__device_module_load(w->block->device, &module, unsupported));
  if (s->status == NULL) {
    void *p = NULL;
    size_t n = MORI_SIGNAL_STATUS_WORDS(w->world_size) * sizeof(uint32_t);
    MORI_HIP("hipHostMalloc",
             mori_hipHostMalloc(&p, n, hipHostMallocMapped | hipHostMallocPortable));
    MORI_GUARD(zero_status(w, p, n));
    s->status = p;
  }
  return 0;
}

static int ready(const mori_window *w) {
  return w->signals->status != NULL && mori__device_module_loaded(w->block->device);
}

/* One kernel: bounded by the call's timeout from its start (0: no bound),
 * past which it writes the window's failure words and ends.  It has no
 * watchdog entry: the next call on the window reads those words.  A
 * launch happened or not: a failed one sent nothing. */
static int run(mori_window *w, struct mori__signal_call *c) {
  if (c->what == MORI__CALL_BARRIER && w->world_size == 1) return 0; /* no peer: nothing to do */
  struct mori_signal_args *a = &c->k;
  a->timeout_ns = c->timeout_ms > 0 ? (unsigned long long)c->timeout_ms * 1000000ull : 0;
  a->timeout_ms = c->timeout_ms > 0 ? (unsigned)c->timeout_ms : 0;
  a->code = MORI_SIGNAL_CODE(c->what, c->channel);
  a->pads = (uintptr_t)w->pad_ptrs_dev;
  a->status = (uintptr_t)w->signals->status;
  void *params[] = {a};
  hipFunction_t f = mori__device_module_entry(w->block->device, c->entry);
  MORI_HIP("hipModuleLaunchKernel",
           mori_hipModuleLaunchKernel(f, 1, 1, 1, MORI_SIGNAL_THREADS, 1, 1, 0, c->stream, params,
                                      NULL));
  count(&counts.kernels);
  if (c->captured) count(&counts.captured);
  return 0;
}

/* MORI_ETIMEDOUT naming the ranks a kernel of w gave up on, or 0: a kernel
 * that timed out leaves the window failed for good. */
static int failed(const mori_window *w, const char *op) {
  struct mori__signals *s = w->signals;
  const volatile uint32_t *st = s ? s->status : NULL;
  uint32_t code = st ? __atomic_load_n(&st[0], __ATOMIC_ACQUIRE) : 0;
  if (code == 0) return 0;
  if (!__atomic_exchange_n(&s->status_seen, 1, __ATOMIC_RELAXED))
    count(&counts.expired); /* once per window */
  /* status[0] is written last: the rest is there */
  char peers[256] = "";
  const char *what = "never signalled";
  for (int r = 0, len = 0, k = 0; r < w->world_size && (size_t)len < sizeof peers; r++) {
    uint32_t v = st[2 + r];
    if (v == 0) continue;
    if (v == MORI_SIGNAL_NEVER_CONSUMED) what = "never consumed the previous signal";
    len += snprintf(peers + len, sizeof peers - (size_t)len, "%s%d", k++ ? ", " : "", r);
  }
  int call = MORI_SIGNAL_CODE_CALL(code);
  return mori__error(MORI_ETIMEDOUT,
                     "%s: %s on channel %d: rank(s) %s %s within %u ms (window %ld, group %s); "
                     "the kernel's waits gave up and the window is failed",
                     op, call >= 0 && call < 3 ? mori__call_names[call] : "signal",
                     MORI_SIGNAL_CODE_CHANNEL(code), peers, what, st[1], w->id, w->group);
}

/* The window's failure words go (the device was synchronized: no kernel
 * writes them any more). */
static int release(mori_window *w) {
  struct mori__signals *s = w->signals;
  if (s == NULL || s->status == NULL) return 0;
  /* a release the runtime refuses is tried once more, as the ledger (alloc/ledger.c) does */
  hipError_t e = mori_hipHostFree(s->status);
  if (e != hipSuccess) e = mori_hipHostFree(s->status);
  if (e != hipSuccess) return mori__hip_error("hipHostFree (the kernels' failure words)", e);
  s->status = NULL;
  return 0;
}

/* Nothing of the process's is this engine's: the modules are the
 * devices' (base/device.c, mori__device_release_all). */
static void release_all(void) {}

static void stats(mori_symm_signal_stats *out) {
  out->kernels += __atomic_load_n(&counts.kernels, __ATOMIC_RELAXED);
  out->captured += __atomic_load_n(&counts.captured, __ATOMIC_RELAXED);
  /* a kernel that gave up, as a wait released */
  out->expired += __atomic_load_n(&counts.expired, __ATOMIC_RELAXED);
}

/* A heal: the failure words back to 0, as a kernel that never gave up
 * leaves them (the device is idle: no kernel writes them now). */
static int reset(mori_window *w) {
  struct mori__signals *s = w->signals;
  if (s->status == NULL) return 0;
  hipStream_t svc = NULL;
  size_t n = MORI_SIGNAL_STATUS_WORDS(w->world_size) * sizeof(uint32_t);
  MORI_GUARD(mori__service_stream(w->block->device, &svc));
  MORI_HIP("hipMemsetAsync", mori_hipMemsetAsync(s->status, 0, n, svc));
  MORI_HIP("hipStreamSynchronize", mori_hipStreamSynchronize(svc));
  s->status_seen = 0;
  return 0;
}

const struct mori__signal_engine mori__signal_engine_kernel = {
    "kernel", prepare, ready, run, failed, release, reset, release_all, stats};
