/*
 * block.c - symmetric allocations: the handle-type probe (cached per
 * device), alloc as a BLOCK machine (create -> reserve -> map -> access ->
 * zero; the export waits for the block's first rendezvous), and the sorted
 * block table with covering lookup, out of which free and release_all
 * (life.c) take blocks.
 */
#include "alloc.h"

#include <stdlib.h>
#include <string.h>

pthread_mutex_t mori__lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t mori__cond = PTHREAD_COND_INITIALIZER;

static mori_block **blocks; /* sorted by base */
static size_t nblocks, cap_blocks;

/* ---- the probe ---- */

/* The probe cache has its own lock: probing calls the runtime, which no
 * caller of mori__lock should wait for. */
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  int done, handle_type;
  size_t granularity; /* recommended, for handle_type: every allocation's */
  char why[200];
} probes[MORI_MAX_DEVICES];

static hipMemAllocationProp make_prop(int device, int handle_type) {
  hipMemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = hipMemAllocationTypePinned;
  p.requestedHandleType = (hipMemAllocationHandleType)handle_type;
  p.location.type = hipMemLocationTypeDevice;
  p.location.id = device;
  return p;
}

/* An answer to "can this device share fabric handles?": the runtime says
 * no with NotSupported (and releases that do not know the handle type,
 * with InvalidValue).  Anything else is a failure of the call. */
static int answers_no(hipError_t e) {
  return e == hipErrorNotSupported || e == hipErrorInvalidValue;
}

/* Fabric only if create AND export both succeed: they fail at different
 * steps on different parts (create on gfx9, export on gfx1250 with older
 * ROCm).  The sticky error the probe leaves is cleared.  A call that fails
 * with anything but an answer fails the probe (MORI_EHIP naming it) and
 * nothing is cached: a transient failure must not decide the handle type,
 * which every peer must agree on. */
static int probe_device(int device) {
  hipMemAllocationProp prop = make_prop(device, hipMemHandleTypeFabric);
  hipMemGenericAllocationHandle_t h;
  size_t gran = 0;
  hipError_t e;
  const char *failed = NULL;
  int type = hipMemHandleTypePosixFileDescriptor;
  char why[sizeof probes[0].why];
  if ((e = mori_hipMemGetAllocationGranularity(&gran, &prop,
                                               hipMemAllocationGranularityRecommended)) !=
          hipSuccess ||
      gran == 0) {
    failed = e != hipSuccess && !answers_no(e) ? "hipMemGetAllocationGranularity" : NULL;
    snprintf(why, sizeof why, "fabric granularity query failed: %s", mori_shim_message());
  } else if ((e = mori_hipMemCreate(&h, gran, &prop, 0)) != hipSuccess) {
    failed = answers_no(e) ? NULL : "hipMemCreate";
    snprintf(why, sizeof why, "fabric create failed: %s", mori_shim_message());
  } else {
    hipMemFabricHandle_t blob;
    e = mori_hipMemExportToShareableHandle(&blob, h, hipMemHandleTypeFabric, 0);
    if (e == hipSuccess) type = hipMemHandleTypeFabric;
    failed = e == hipSuccess || answers_no(e) ? NULL : "hipMemExportToShareableHandle";
    snprintf(why, sizeof why, e == hipSuccess ? "fabric create and export succeeded"
                                              : "fabric create succeeded, export failed: %s",
             mori_shim_message());
    mori_ledger_entry handle = {MORI_RES_PHYS_HANDLE, (uintptr_t)h, gran, 0};
    hipError_t answer = e;
    if (mori__release_entry(NULL, &handle) != 0 && failed == NULL) return MORI_EHIP;
    e = answer;
  }
  (void)mori_hipGetLastError();
  if (failed != NULL) return mori__hip_error(failed, e);
  if (type != hipMemHandleTypeFabric) {
    prop = make_prop(device, type);
    gran = 0;
    MORI_HIP("hipMemGetAllocationGranularity",
             mori_hipMemGetAllocationGranularity(&gran, &prop,
                                                 hipMemAllocationGranularityRecommended));
  }
  if (gran == 0) return mori__error(MORI_EHIP, "hipMemGetAllocationGranularity returned 0");
  probes[device].handle_type = type;
  probes[device].granularity = gran;
  snprintf(probes[device].why, sizeof probes[device].why, "%s", why);
  probes[device].done = 1;
  return 0;
}

/* Under probe_lock: the device's handle type, probed once, in *type. */
static int probed_type(int device, int *type) {
  if (!probes[device].done) {
    double t0 = mori__log_level() >= MORI_LOG_INFO ? mori__log_clock_us() : 0;
    MORI_GUARD(probe_device(device));
    if (t0 > 0)
      MORI_LOG_DEVICE(MORI_LOG_INFO, device, "probe: %s (%s); %zu-byte granularity; %.0f us",
                      probes[device].handle_type == hipMemHandleTypeFabric ? "fabric" : "posix_fd",
                      probes[device].why, probes[device].granularity,
                      mori__log_clock_us() - t0);
  }
  *type = probes[device].handle_type;
  return 0;
}

const char *mori__probe_why(int device) {
  return device >= 0 && device < MORI_MAX_DEVICES && probes[device].done ? probes[device].why
                                                                         : "not probed";
}

int mori_symm_probe(int device, int *handle_type, char *why, size_t whylen) {
  if (device < 0 || device >= MORI_MAX_DEVICES)
    return mori__error(MORI_ERANGE, "probe: device %d out of range", device);
  int rc = 0;
  hipError_t e = mori_hipSetDevice(device);
  if (e != hipSuccess) return mori__hip_error("hipSetDevice", e);
  pthread_mutex_lock(&probe_lock);
  rc = probed_type(device, handle_type);
  if (rc == 0 && why) snprintf(why, whylen, "%s", probes[device].why);
  pthread_mutex_unlock(&probe_lock);
  return rc;
}

/* ---- the table ---- */

static size_t table_upper_bound(const void *ptr) { /* first index with base > ptr */
  size_t lo = 0, hi = nblocks;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if ((uintptr_t)blocks[mid]->base <= (uintptr_t)ptr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

mori_block *mori__block_find(const void *ptr) {
  size_t i = table_upper_bound(ptr);
  if (i == 0) return NULL;
  mori_block *b = blocks[i - 1];
  uintptr_t off = (uintptr_t)ptr - (uintptr_t)b->base;
  return off < b->buffer_size ? b : NULL;
}

static int table_insert(mori_block *b) {
  if (nblocks == cap_blocks) {
    size_t cap = cap_blocks ? cap_blocks * 2 : 16;
    mori_block **n = mori_realloc(blocks, cap * sizeof *n);
    if (n == NULL) return mori__nomem("alloc: block table");
    blocks = n;
    cap_blocks = cap;
  }
  size_t i = table_upper_bound(b->base);
  memmove(&blocks[i + 1], &blocks[i], (nblocks - i) * sizeof *blocks);
  blocks[i] = b;
  nblocks++;
  return 0;
}

static void table_remove(mori_block *b) {
  for (size_t i = 0; i < nblocks; i++) {
    if (blocks[i] != b) continue;
    memmove(&blocks[i], &blocks[i + 1], (nblocks - i - 1) * sizeof *blocks);
    nblocks--;
    return;
  }
}

/* ---- alloc ---- */

/* Never written: the source of the copies that zero fabric memory.  It
 * outlives every copy, however asynchronous the runtime makes them. */
static unsigned char zeros[1 << 20];

int mori__block_zero(const mori_block *b, void *p, size_t n, hipStream_t stream) {
  if (b->handle_type != hipMemHandleTypeFabric) {
    MORI_HIP("hipMemsetAsync", mori_hipMemsetAsync(p, 0, n, stream));
    return 0;
  }
  /* hipMemset fails on fabric-handle memory on some ROCm releases
   * (docs/quirks.md, memset-fabric): zero those with copies instead. */
  for (size_t off = 0; off < n; off += sizeof zeros) {
    size_t len = n - off < sizeof zeros ? n - off : sizeof zeros;
    MORI_HIP("hipMemcpyAsync", mori_hipMemcpyAsync((char *)p + off, zeros, len,
                                                   hipMemcpyHostToDevice, stream));
  }
  return 0;
}

/* Zeroes the block without synchronous device-wide work: all of it on
 * `stream` in stream order (torch's current stream: later work on it sees
 * zeros), one fill, not waited for: no peer reaches the block before its
 * first rendezvous, whose BUILD_TABLES waits for the event recorded here
 * before the "mapped" barrier lets any peer in, and a teardown
 * synchronizes the device first.  With stream_order 0 the caller wants the
 * memory zero on return: all of it on the private stream, waited for.  So
 * too on a stream being captured into a graph: a zeroing recorded there
 * would run at each replay, over the data, and never at the allocation. */
static int zero_block(mori_block *b, hipStream_t stream, int stream_order) {
  hipStream_t svc = NULL;
  int captured = 0;
  if (stream_order) MORI_GUARD(mori__stream_capturing(stream, &captured));
  if (stream_order && !captured) {
    MORI_GUARD(mori__block_zero(b, b->base, b->alloc_size, stream));
    MORI_HIP("hipEventCreateWithFlags",
             mori_hipEventCreateWithFlags(&b->zeroed, hipEventDisableTiming));
    MORI_GUARD(mori__ledger_add(&b->fsm, MORI_RES_ZERO_EVENT, (uintptr_t)b, 0, 0));
    MORI_HIP("hipEventRecord", mori_hipEventRecord(b->zeroed, stream));
    return 0;
  }
  MORI_GUARD(mori__service_stream(b->device, &svc));
  MORI_GUARD(mori__block_zero(b, b->base, b->alloc_size, svc));
  MORI_HIP("hipStreamSynchronize", mori_hipStreamSynchronize(svc));
  return 0;
}

/* ---- the block machine's steps, one per forward row of fsm.c ---- */

struct alloc_ctx {
  mori_block *b;
  hipMemAllocationProp prop;
  hipStream_t stream; /* where the buffer is zeroed, with stream_order */
  int stream_order;
  /* A block its device kept warm (ledger.c): its handle and its base,
   * mapped and accessible, taken by the steps below without a call. */
  int kept;
  hipMemGenericAllocationHandle_t kept_handle;
  void *kept_base;
};

static int step_create(void *p) {
  struct alloc_ctx *c = p;
  mori_block *b = c->b;
  if (c->kept)
    b->handle = c->kept_handle;
  else
    MORI_HIP("hipMemCreate", mori_hipMemCreate(&b->handle, b->alloc_size, &c->prop, 0));
  return mori__ledger_add(&b->fsm, MORI_RES_PHYS_HANDLE, (uintptr_t)b->handle, b->alloc_size, 0);
}

static int step_reserve(void *p) {
  struct alloc_ctx *c = p;
  mori_block *b = c->b;
  if (c->kept)
    b->base = c->kept_base;
  else
    MORI_HIP("hipMemAddressReserve",
             mori_hipMemAddressReserve(&b->base, b->alloc_size, b->granularity, NULL, 0));
  return mori__ledger_add(&b->fsm, MORI_RES_LOCAL_RESERVATION, (uintptr_t)b->base, b->alloc_size,
                          0);
}

static int step_map(void *p) {
  struct alloc_ctx *c = p;
  mori_block *b = c->b;
  if (!c->kept) MORI_HIP("hipMemMap", mori_hipMemMap(b->base, b->alloc_size, 0, b->handle, 0));
  return mori__ledger_add(&b->fsm, MORI_RES_LOCAL_MAPPING, (uintptr_t)b->base, b->alloc_size, 0);
}

static int step_grant(void *p) {
  struct alloc_ctx *c = p;
  mori_block *b = c->b;
  hipMemAccessDesc access = {{hipMemLocationTypeDevice, b->device},
                             hipMemAccessFlagsProtReadWrite};
  if (!c->kept)
    MORI_HIP("hipMemSetAccess", mori_hipMemSetAccess(b->base, b->alloc_size, &access, 1));
  return 0;
}

static int step_zero(void *p) {
  struct alloc_ctx *c = p;
  return zero_block(c->b, c->stream, c->stream_order);
}

/* The shareable handle every rendezvous on this block will send: run by
 * the block's first rendezvous (mori__block_export), not by alloc, since
 * exporting costs more than the rest of an allocation together on some
 * drivers (docs/performance.md, "The control path ... taken apart") and a
 * block that never meets a peer needs none. */
static int step_export(void *p) {
  mori_block *b = ((struct alloc_ctx *)p)->b;
  if (b->handle_type == hipMemHandleTypeFabric) {
    MORI_HIP("hipMemExportToShareableHandle",
             mori_hipMemExportToShareableHandle(&b->fabric, b->handle, hipMemHandleTypeFabric, 0));
    return 0;
  }
  if (b->carried_fd >= 0) { /* the kept block's own export, still counted open */
    b->exported_fd = b->carried_fd;
    b->carried_fd = -1;
    return mori__ledger_add(&b->fsm, MORI_RES_EXPORTED_FD, (uintptr_t)b->exported_fd,
                            b->alloc_size, b->device);
  }
  MORI_HIP("hipMemExportToShareableHandle",
           mori_hipMemExportToShareableHandle(&b->exported_fd, b->handle,
                                              hipMemHandleTypePosixFileDescriptor, 0));
  return mori__ledger_add_export(&b->fsm, b->exported_fd, b->alloc_size, b->device);
}

static const mori__step block_steps[MORI_EV__COUNT] = {
    [MORI_EV_CREATE] = step_create, [MORI_EV_RESERVE] = step_reserve,
    [MORI_EV_MAP] = step_map,       [MORI_EV_GRANT] = step_grant,
    [MORI_EV_ZERO] = step_zero,     [MORI_EV_EXPORT] = step_export,
};

static void release_all_at_exit(void) {
  if (mori_symm_teardown_enabled()) (void)mori_symm_release_all();
}

static void register_exit_hook(void) { atexit(release_all_at_exit); }

/* Outside mori__lock (zeroing waits on the GPU): the block is nobody
 * else's until it enters the table. */
static int alloc_block(mori_block *b, size_t size, int device, hipStream_t stream,
                       int stream_order) {
  b->device = device;
  b->exported_fd = -1;
  b->carried_fd = -1;
  b->buffer_size = size;
  b->signal_pad_size = mori_symm_signal_pad_size();
  b->signal_pad_offset = mori__round_up(size, 16);
  mori_fsm_init(&b->fsm, MORI_FSM_BLOCK, 0, 0);
  MORI_HIP("hipSetDevice", mori_hipSetDevice(device));
  pthread_mutex_lock(&probe_lock);
  int probed = probed_type(device, &b->handle_type);
  size_t gran = probes[device].granularity;
  pthread_mutex_unlock(&probe_lock);
  MORI_GUARD(probed);

  hipMemAllocationProp prop = make_prop(device, b->handle_type);
  b->granularity = gran;
  /* The torch pad, then the private slots' areas of the same size. */
  b->alloc_size = mori__round_up(
      b->signal_pad_offset + MORI_WIRE_SIGNAL_AREAS * b->signal_pad_size, gran);
  if (b->signal_pad_size == 0) b->signal_pad_offset = b->alloc_size;
  struct alloc_ctx c = {b, prop, stream, stream_order, 0, 0, NULL};
  /* The ledger's room before a kept block is taken: out of the slot, it
   * is in no ledger until the steps record it, which then cannot fail
   * for memory (the driver would reserve it only after the take). */
  if (mori_fsm_reserve(&b->fsm, mori_fsm_capacity(&b->fsm)) != 0)
    return mori__nomem("ledger: %s", b->fsm.why);
  c.kept = mori__kept_block_take(device, b->alloc_size, b->handle_type, &c.kept_handle,
                                 &c.kept_base, &b->carried_fd);
  mori__step_times t; /* the step times only for the INFO line below */
  int timed = mori__log_level() >= MORI_LOG_INFO;
  int rc = mori__drive(&b->fsm, block_steps, &c, MORI_BS_ALLOCATED, NULL, timed ? &t : NULL);
  if (rc == 0 && timed) {
    char steps[256];
    mori__step_times_format(&t, steps, sizeof steps);
    MORI_LOG_DEVICE(MORI_LOG_INFO, device, "alloc %zu bytes: base %p, %zu physical, %s%s; us: %s",
                    size, b->base, b->alloc_size,
                    b->handle_type == hipMemHandleTypeFabric ? "fabric" : "posix_fd",
                    c.kept ? ", the block kept warm" : "", steps);
  }
  return rc;
}

int mori__block_wait_zeroed(mori_block *b) {
  if (b->zeroed == NULL) return 0;
  MORI_HIP("hipEventSynchronize", mori_hipEventSynchronize(b->zeroed));
  return mori__ledger_drop(&b->fsm, MORI_RES_ZERO_EVENT, (uintptr_t)b);
}

int mori__block_export(mori_block *b) {
  if (b->fsm.state.block == MORI_BS_EXPORTED) return 0;
  struct alloc_ctx c = {.b = b};
  mori__step_times t;
  int timed = mori__log_level() >= MORI_LOG_INFO;
  int rc = mori__advance(&b->fsm, block_steps, &c, MORI_BS_EXPORTED, timed ? &t : NULL);
  if (rc == 0 && timed) {
    char steps[64];
    mori__step_times_format(&t, steps, sizeof steps);
    MORI_LOG_DEVICE(MORI_LOG_INFO, b->device, "block %p exported (%s); us: %s", b->base,
                    b->handle_type == hipMemHandleTypeFabric ? "fabric" : "posix_fd", steps);
  }
  return rc;
}

static int alloc(size_t size, int device, hipStream_t stream, int stream_order, void **ptr) {
  static pthread_once_t exit_hook = PTHREAD_ONCE_INIT;
  if (ptr == NULL || size == 0)
    return mori__error(MORI_EINVAL, "alloc: size must be > 0 and ptr non-null");
  if (device < 0 || device >= MORI_MAX_DEVICES)
    return mori__error(MORI_ERANGE, "alloc: device %d out of range", device);
  pthread_once(&exit_hook, register_exit_hook);
  mori_block *b = mori_calloc(1, sizeof *b);
  if (b == NULL) return mori__nomem("alloc");
  int rc = alloc_block(b, size, device, stream, stream_order);
  if (rc == 0) {
    *ptr = b->base; /* read before another thread can reach (and free) it */
    pthread_mutex_lock(&mori__lock);
    rc = table_insert(b);
    pthread_mutex_unlock(&mori__lock);
  }
  if (rc != 0) {
    /* The driver rolled back a failed step; a block that was whole but
     * found no room in the table is rolled back here, after its zeroing
     * (no unmap under a pending memset). */
    if (b->zeroed != NULL) (void)mori_hipEventSynchronize(b->zeroed);
    if (b->fsm.state.block != MORI_BS_FAILED) (void)mori__unwind(&b->fsm, 1);
    mori__first_error cause; /* the close must not overwrite why alloc failed */
    (void)mori__first_set(&cause, rc);
    (void)mori__carried_fd_release(b); /* after the handle's release */
    (void)mori__first_end(&cause, rc);
    free(b);
    mori__error_prefix("alloc(%zu bytes, device %d): ", size, device);
    *ptr = NULL;
    return rc;
  }
  return 0;
}

int mori_symm_alloc(size_t size, int device, void **ptr) {
  return alloc(size, device, NULL, 0, ptr);
}

int mori_symm_alloc_on_stream(size_t size, int device, void *stream, void **ptr) {
  return alloc(size, device, (hipStream_t)stream, 1, ptr);
}

int mori_symm_lookup(const void *ptr, size_t *buffer_size, size_t *offset) {
  pthread_mutex_lock(&mori__lock);
  mori_block *b = mori__block_find(ptr);
  if (b != NULL) {
    if (buffer_size) *buffer_size = b->buffer_size;
    if (offset) *offset = (size_t)((uintptr_t)ptr - (uintptr_t)b->base);
  }
  pthread_mutex_unlock(&mori__lock);
  return b ? 0 : mori__error(MORI_ENOTFOUND, "lookup(%p): not in a mori-symm allocation", ptr);
}

/* ---- out of the table (free and release_all, life.c) ---- */

mori_block *mori__block_take(const void *ptr) {
  mori_block *b = mori__block_find(ptr);
  if (b == NULL || b->base != ptr) return NULL;
  table_remove(b);
  return b;
}

mori_block **mori__blocks_take_all(size_t *n) {
  mori_block **all = blocks;
  *n = nblocks;
  blocks = NULL;
  nblocks = cap_blocks = 0;
  return all;
}

long mori__blocks_live(void) { return (long)nblocks; }
