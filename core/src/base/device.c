/*
 * device.c - the services the core keeps per device, each created at its
 * first use and given back by release_all: a private non-blocking stream
 * for its own work (an allocation's zeroing, a signal slot's, the
 * watchdog's releases), a pool of events (the watchdog's: creating one is
 * a runtime call), and a module with its entries (the signal kernels');
 * and the question whether a stream is being captured into a graph.  Each
 * table has its own lock, taken last: a caller may hold its own.
 */
#include "base.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 256

static pthread_mutex_t service_lock = PTHREAD_MUTEX_INITIALIZER;
static hipStream_t service[MAX_DEVICES];

static struct {
  pthread_mutex_t lock;
  struct {
    hipEvent_t *free;
    size_t n, cap;
  } dev[MAX_DEVICES];
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The module of each device, loaded once; a runtime that cannot load it at
 * all (hipErrorNotSupported: no JIT for this PTX, no hiprtc) is remembered
 * with its reason, any other failure is tried again at the next call. */
static struct {
  pthread_mutex_t lock;
  struct {
    hipModule_t module;
    const mori__module_spec *spec; /* what was loaded, for release_all's message */
    hipFunction_t fn[MORI__MODULE_ENTRIES];
    int unsupported;
    char why[512];
  } dev[MAX_DEVICES];
} mods = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* A forked child has none of the parent's GPU objects: it starts from
 * nothing. */
static void atfork_child(void) {
  pthread_mutex_init(&service_lock, NULL);
  memset(service, 0, sizeof service);
  pthread_mutex_init(&pool.lock, NULL);
  memset(pool.dev, 0, sizeof pool.dev);
  pthread_mutex_init(&mods.lock, NULL);
  memset(mods.dev, 0, sizeof mods.dev);
}

static void install_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

/* The handler is installed at the first use of any table. */
static void once(void) {
  static pthread_once_t o = PTHREAD_ONCE_INIT;
  pthread_once(&o, install_atfork);
}

static int in_range(int device, const char *what) {
  if (device >= 0 && device < MAX_DEVICES) return 0;
  return mori__error(MORI_ERANGE, "%s: device %d out of range", what, device);
}

/* ---- the private stream ---- */

int mori__service_stream(int device, hipStream_t *out) {
  MORI_GUARD(in_range(device, "service stream"));
  once();
  pthread_mutex_lock(&service_lock);
  hipError_t e = hipSuccess;
  if (service[device] == NULL)
    e = mori_hipStreamCreateWithFlags(&service[device], hipStreamNonBlocking);
  *out = service[device];
  pthread_mutex_unlock(&service_lock);
  return e == hipSuccess ? 0 : mori__hip_error("hipStreamCreateWithFlags", e);
}

int mori__stream_capturing(hipStream_t stream, int *captured) {
  hipStreamCaptureStatus st = hipStreamCaptureStatusNone;
  MORI_HIP("hipStreamIsCapturing", mori_hipStreamIsCapturing(stream, &st));
  if (st == hipStreamCaptureStatusInvalidated)
    return mori__error(MORI_EHIP, "the stream's capture was invalidated by an earlier error");
  *captured = st == hipStreamCaptureStatusActive;
  return 0;
}

/* ---- the event pool ---- */

/* Under pool.lock.  An event the pool cannot take is destroyed. */
static void pool_put(int device, hipEvent_t ev) {
  if (ev == NULL) return;
  if (pool.dev[device].n == pool.dev[device].cap) {
    size_t cap = pool.dev[device].cap ? 2 * pool.dev[device].cap : 16;
    hipEvent_t *grown = mori_realloc(pool.dev[device].free, cap * sizeof *grown);
    if (grown == NULL) {
      (void)mori_hipEventDestroy(ev);
      return;
    }
    pool.dev[device].free = grown;
    pool.dev[device].cap = cap;
  }
  pool.dev[device].free[pool.dev[device].n++] = ev;
}

void mori__device_events_put(int device, const hipEvent_t *evs, int n) {
  if (device < 0 || device >= MAX_DEVICES) { /* no pool: none of ours */
    for (int i = 0; i < n; i++)
      if (evs[i] != NULL) (void)mori_hipEventDestroy(evs[i]);
    return;
  }
  pthread_mutex_lock(&pool.lock);
  for (int i = 0; i < n; i++) pool_put(device, evs[i]);
  pthread_mutex_unlock(&pool.lock);
}

/* The pool's events first, then new ones (outside the lock: creating one
 * is a runtime call). */
int mori__device_events_get(int device, hipEvent_t *out, int n) {
  MORI_GUARD(in_range(device, "event pool"));
  once();
  int have = 0;
  pthread_mutex_lock(&pool.lock);
  for (; have < n && pool.dev[device].n > 0; have++)
    out[have] = pool.dev[device].free[--pool.dev[device].n];
  pthread_mutex_unlock(&pool.lock);
  for (; have < n; have++) {
    hipError_t e = mori_hipEventCreateWithFlags(&out[have], hipEventDisableTiming);
    if (e != hipSuccess) {
      mori__device_events_put(device, out, have); /* none is taken */
      for (int i = 0; i < n; i++) out[i] = NULL;
      return mori__hip_error("hipEventCreateWithFlags", e);
    }
  }
  return 0;
}

/* ---- the module ---- */

/* Under mods.lock: loads device's module and finds every entry. */
static int load(int device, const mori__module_spec *spec) {
  hipModule_t m = NULL;
  hipError_t e = mori_hipModuleLoadData(&m, spec->image);
  if (e != hipSuccess) {
    int rc = mori__hip_error("hipModuleLoadData", e);
    if (e == hipErrorNotSupported) {
      mods.dev[device].unsupported = 1;
      snprintf(mods.dev[device].why, sizeof mods.dev[device].why, "%s", mori_last_error());
      MORI_LOG_DEVICE(MORI_LOG_WARN, device, "the %s cannot be loaded here (%s): %s", spec->what,
                      mods.dev[device].why, spec->without);
    }
    return rc;
  }
  for (int k = 0; k < spec->nentries; k++) {
    e = mori_hipModuleGetFunction(&mods.dev[device].fn[k], m, spec->entries[k]);
    if (e != hipSuccess) {
      int rc = mori__hip_error("hipModuleGetFunction", e);
      mori__error_suffix(" (entry %s)", spec->entries[k]);
      if (mori_hipModuleUnload(m) != hipSuccess)
        mori__error_suffix("; and hipModuleUnload failed: %s", mori_shim_message());
      memset(mods.dev[device].fn, 0, sizeof mods.dev[device].fn);
      return rc;
    }
  }
  mods.dev[device].module = m;
  mods.dev[device].spec = spec;
  return 0;
}

int mori__device_module_load(int device, const mori__module_spec *spec, int *unsupported) {
  int rc = 0;
  *unsupported = 0;
  MORI_GUARD(in_range(device, spec->what));
  once();
  pthread_mutex_lock(&mods.lock);
  if (mods.dev[device].unsupported) {
    *unsupported = 1;
    rc = mori__error(MORI_ENOTSUP, "%s", mods.dev[device].why);
  } else if (mods.dev[device].module == NULL) {
    rc = load(device, spec);
    *unsupported = mods.dev[device].unsupported;
  }
  pthread_mutex_unlock(&mods.lock);
  return rc;
}

int mori__device_module_loaded(int device) {
  if (device < 0 || device >= MAX_DEVICES) return 0;
  pthread_mutex_lock(&mods.lock);
  int loaded = mods.dev[device].module != NULL;
  pthread_mutex_unlock(&mods.lock);
  return loaded;
}

hipFunction_t mori__device_module_entry(int device, int entry) {
  if (device < 0 || device >= MAX_DEVICES || entry < 0 || entry >= MORI__MODULE_ENTRIES)
    return NULL;
  pthread_mutex_lock(&mods.lock);
  hipFunction_t f = mods.dev[device].fn[entry];
  pthread_mutex_unlock(&mods.lock);
  return f;
}

/* ---- release_all ---- */

/* Each device's pooled events go, then its module (a release the runtime
 * refuses is tried once more, as the ledger, alloc/ledger.c, does), then
 * its private stream.  release_all calls this once the watchdog, which
 * takes events, has stopped (mori__signal_release_all). */
void mori__device_release_all(void) {
  pthread_mutex_lock(&pool.lock);
  for (int d = 0; d < MAX_DEVICES; d++) {
    if (pool.dev[d].n) (void)mori_hipSetDevice(d);
    while (pool.dev[d].n > 0) (void)mori_hipEventDestroy(pool.dev[d].free[--pool.dev[d].n]);
  }
  pthread_mutex_unlock(&pool.lock);
  pthread_mutex_lock(&mods.lock);
  for (int d = 0; d < MAX_DEVICES; d++) {
    if (mods.dev[d].module == NULL) continue;
    (void)mori_hipSetDevice(d);
    if (mori_hipModuleUnload(mods.dev[d].module) != hipSuccess &&
        mori_hipModuleUnload(mods.dev[d].module) != hipSuccess)
      MORI_LOG_DEVICE(MORI_LOG_WARN, d, "hipModuleUnload of the %s: %s", mods.dev[d].spec->what,
                      mori_shim_message());
    memset(&mods.dev[d], 0, sizeof mods.dev[d]);
  }
  pthread_mutex_unlock(&mods.lock);
  pthread_mutex_lock(&service_lock);
  for (int d = 0; d < MAX_DEVICES; d++) {
    if (service[d] == NULL) continue;
    (void)mori_hipSetDevice(d);
    (void)mori_hipStreamDestroy(service[d]);
    service[d] = NULL;
  }
  pthread_mutex_unlock(&service_lock);
}
