/*
 * kernel.c - the signal kernels as an engine of signal.c: the module per
 * device, loaded at the first kernel call on it from the image the library
 * carries (the PTX nvcc made from core/kernels/signal.cu, for the CUDA
 * driver, and that source itself, for hiprtc on ROCm: the shim's backend
 * takes its own), the entries by name, each window's failure words in
 * host memory the kernels write and the host reads with a load, and the
 * launch.  Every call here passes the seam, so each is a fault site.
 */
#include "kernel.h"

#include <stdlib.h>
#include <string.h>

#include "signal_hip_source.h" /* generated at build time from core/kernels/signal.cu */
#include "signal_ptx.h"        /* core/kernels, made by scripts/gen_signal_ptx.sh */

#define MAX_DEVICES 256

static const mori_module_image image = {mori__signal_ptx, mori__signal_hip_source, "signal.cu"};

#define ENTRY_NAME(name, what) #name,
static const char *const entry_names[MORI__K__COUNT] = {MORI_SIGNAL_KERNELS(ENTRY_NAME)};
#undef ENTRY_NAME

/* The module of each device, loaded once; a runtime that cannot load it at
 * all (hipErrorNotSupported: no JIT for this PTX, no hiprtc) is remembered
 * with its reason, any other failure is tried again at the next call. */
static struct {
  pthread_mutex_t lock;
  struct {
    hipModule_t module;
    hipFunction_t fn[MORI__K__COUNT];
    int unsupported;
    char why[512];
  } dev[MAX_DEVICES];
} mods = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void atfork_child(void) {
  pthread_mutex_init(&mods.lock, NULL);
  memset(mods.dev, 0, sizeof mods.dev); /* a child has none of the parent's GPU objects */
}

static void install_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

/* Under mods.lock: loads device's module and finds every entry. */
static int load(int device) {
  hipModule_t m = NULL;
  hipError_t e = mori_hipModuleLoadData(&m, &image);
  if (e != hipSuccess) {
    int rc = mori__hip_error("hipModuleLoadData", e);
    if (e == hipErrorNotSupported) {
      mods.dev[device].unsupported = 1;
      snprintf(mods.dev[device].why, sizeof mods.dev[device].why, "%s", mori_last_error());
      MORI_LOG_DEVICE(MORI_LOG_WARN, device,
                      "the signal kernels cannot be loaded here (%s): the automatic signal "
                      "engine keeps stream memory operations",
                      mods.dev[device].why);
    }
    return rc;
  }
  for (int k = 0; k < MORI__K__COUNT; k++) {
    e = mori_hipModuleGetFunction(&mods.dev[device].fn[k], m, entry_names[k]);
    if (e != hipSuccess) {
      int rc = mori__hip_error("hipModuleGetFunction", e);
      mori__error_suffix(" (entry %s)", entry_names[k]);
      if (mori_hipModuleUnload(m) != hipSuccess)
        mori__error_suffix("; and hipModuleUnload failed: %s", mori_shim_message());
      memset(mods.dev[device].fn, 0, sizeof mods.dev[device].fn);
      return rc;
    }
  }
  mods.dev[device].module = m;
  return 0;
}

int mori__kernel_load(int device, int *unsupported) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  int rc = 0;
  *unsupported = 0;
  if (device < 0 || device >= MAX_DEVICES)
    return mori__error(MORI_ERANGE, "signal kernels: device %d out of range", device);
  pthread_once(&once, install_atfork);
  pthread_mutex_lock(&mods.lock);
  if (mods.dev[device].unsupported) {
    *unsupported = 1;
    rc = mori__error(MORI_ENOTSUP, "%s", mods.dev[device].why);
  } else if (mods.dev[device].module == NULL) {
    rc = load(device);
    *unsupported = mods.dev[device].unsupported;
  }
  pthread_mutex_unlock(&mods.lock);
  return rc;
}

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

int mori__kernel_prepare(mori_window *w, int *unsupported) {
  struct mori__signals *s = w->signals;
  MORI_GUARD(mori__kernel_load(w->block->device, unsupported));
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

int mori__kernel_ready(const mori_window *w) {
  int device = w->block->device;
  if (w->signals->status == NULL || device < 0 || device >= MAX_DEVICES) return 0;
  pthread_mutex_lock(&mods.lock);
  int ready = mods.dev[device].module != NULL;
  pthread_mutex_unlock(&mods.lock);
  return ready;
}

int mori__kernel_launch(mori_window *w, enum mori__kentry entry, struct mori_signal_args *a,
                        hipStream_t stream) {
  int device = w->block->device;
  struct mori__signals *s = w->signals;
  a->pads = (uintptr_t)w->pad_ptrs_dev;
  a->status = (uintptr_t)s->status;
  void *params[] = {a};
  pthread_mutex_lock(&mods.lock);
  hipFunction_t f = mods.dev[device].fn[entry];
  pthread_mutex_unlock(&mods.lock);
  MORI_HIP("hipModuleLaunchKernel",
           mori_hipModuleLaunchKernel(f, 1, 1, 1, MORI_SIGNAL_THREADS, 1, 1, 0, stream, params,
                                      NULL));
  return 0;
}

static const char *const call_names[] = {"put_signal", "wait_signal", "barrier"};
static long expired; /* windows whose kernel gave up */

long mori__kernel_expired(void) { return __atomic_load_n(&expired, __ATOMIC_RELAXED); }

int mori__kernel_failed(const mori_window *w, const char *op) {
  struct mori__signals *s = w->signals;
  const volatile uint32_t *st = s ? s->status : NULL;
  uint32_t code = st ? __atomic_load_n(&st[0], __ATOMIC_ACQUIRE) : 0;
  if (code == 0) return 0;
  if (!__atomic_exchange_n(&s->status_seen, 1, __ATOMIC_RELAXED))
    __atomic_fetch_add(&expired, 1, __ATOMIC_RELAXED); /* once per window */
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
                     op, call >= 0 && call < 3 ? call_names[call] : "signal",
                     MORI_SIGNAL_CODE_CHANNEL(code), peers, what, st[1], w->id, w->group);
}

int mori__kernel_release(mori_window *w) {
  struct mori__signals *s = w->signals;
  if (s == NULL || s->status == NULL) return 0;
  /* the device was synchronized: no kernel writes them any more; a
   * release the runtime refuses is tried once more, as the ledger (alloc/ledger.c) does */
  hipError_t e = mori_hipHostFree(s->status);
  if (e != hipSuccess) e = mori_hipHostFree(s->status);
  if (e != hipSuccess) return mori__hip_error("hipHostFree (the kernels' failure words)", e);
  s->status = NULL;
  return 0;
}

void mori__kernel_release_all(void) {
  pthread_mutex_lock(&mods.lock);
  for (int d = 0; d < MAX_DEVICES; d++) {
    if (mods.dev[d].module == NULL) continue;
    (void)mori_hipSetDevice(d);
    /* a release the runtime refuses is tried once more, as the ledger (alloc/ledger.c) does */
    if (mori_hipModuleUnload(mods.dev[d].module) != hipSuccess &&
        mori_hipModuleUnload(mods.dev[d].module) != hipSuccess)
      MORI_LOG_DEVICE(MORI_LOG_WARN, d, "hipModuleUnload of the signal kernels: %s",
                      mori_shim_message());
    memset(&mods.dev[d], 0, sizeof mods.dev[d]);
  }
  pthread_mutex_unlock(&mods.lock);
}
