/*
 * rendezvous.c - rendezvous as a WINDOW machine: one step function per forward
 * row of the table in fsm.c (attach, bind, publish, gather, validate, take
 * a signal slot, exchange fds, import, reserve the span, map, grant, build
 * the tables, barrier), driven by mori__drive; the cache per (block,
 * group); the accessors.  Everything a window acquires is in its ledger,
 * so its teardown and its rollback are the ledger's unwind (alloc/ledger.c).
 */
#include "rendezvous.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mori/channel.h"
#include "mori/protocol.h"

static long next_window_id = 1;

/* ---- per-group sequence numbers (one counter per group, never shared:
 * a process-wide counter mismatches keys on overlapping subgroups) ---- */

struct group_seq {
  struct group_seq *next;
  uint64_t next_seq;
  char name[];
};
static struct group_seq *group_seqs;

/* On failure *seq is still the number the rendezvous has (0: the group is
 * new), so that its abort tells the peers that wait on it. */
static int take_seq(const char *group, uint64_t *seq) {
  struct group_seq *g;
  for (g = group_seqs; g != NULL; g = g->next)
    if (strcmp(g->name, group) == 0) break;
  if (g == NULL) {
    size_t n = strlen(group) + 1;
    g = mori_calloc(1, sizeof *g + n);
    *seq = 0;
    if (g == NULL) return mori__nomem("rendezvous");
    memcpy(g->name, group, n);
    g->next = group_seqs;
    group_seqs = g;
  }
  *seq = g->next_seq++;
  return 0;
}

int mori__group_next_seq(const char *group, uint64_t *next) {
  pthread_mutex_lock(&mori__lock);
  struct group_seq *g = group_seqs;
  while (g != NULL && strcmp(g->name, group) != 0) g = g->next;
  *next = g ? g->next_seq : 0;
  pthread_mutex_unlock(&mori__lock);
  return 0;
}

mori_window *mori__window_find(mori_block *b, const char *group) {
  for (mori_window *w = b->windows; w != NULL; w = w->next)
    if (strcmp(w->group, group) == 0) return w;
  return NULL;
}

/* ---- PUBLISH ---- */

int mori__fill_request(const mori_window *w, const char *socket_name, mori_request *q) {
  const mori_block *b = w->block;
  memset(q, 0, sizeof *q);
  q->rank = (uint32_t)w->rank;
  q->world_size = (uint32_t)w->world_size;
  q->alloc_size = b->alloc_size;
  q->buffer_size = b->buffer_size;
  q->signal_pad_offset = b->signal_pad_offset;
  q->signal_pad_size = b->signal_pad_size;
  q->device = b->device;
  q->pid = (uint32_t)getpid();
  q->uid = (uint32_t)geteuid(); /* the uid every check compares with */
  MORI_GUARD(mori__host_id(q->host_id));
  q->handle_type = (uint32_t)b->handle_type;
  MORI_GUARD(mori__random64(&q->nonce, "the request's nonce"));
  q->signal_slots_used = b->signal_slots_used;
  if (b->handle_type == hipMemHandleTypeFabric)
    memcpy(q->fabric, b->fabric.data, sizeof q->fabric);
  else
    snprintf(q->socket_name, sizeof q->socket_name, "%s", socket_name);
  return 0;
}


/* Windows of one block share its private signal area, so each takes a slot
 * of its own: the lowest slot no member has in use on its block (every
 * member computes the same one from the same requests).  Without it, two
 * groups signalling on one channel at once would consume each other's
 * signals; the fault sweep of the two-groups scenario caught that. */
static int take_signal_slot(mori_window *w, const mori_request *reqs) {
  uint32_t used = 0;
  for (int r = 0; r < w->world_size; r++) used |= reqs[r].signal_slots_used;
  for (int s = 0; s < MORI_WIRE_SIGNAL_SLOTS; s++)
    if (!(used & (1u << s))) {
      w->signal_slot = s;
      w->block->signal_slots_used |= 1u << s;
      return mori__ledger_add(&w->fsm, MORI_RES_SIGNAL_SLOT, (uintptr_t)w, 0, s);
    }
  return mori__error(MORI_ERANGE,
                     "rendezvous: every one of the %d signal slots of this block is taken by "
                     "another group on some member (used 0x%x)",
                     MORI_WIRE_SIGNAL_SLOTS, used);
}

/* ---- the window machine's steps, one per forward row of fsm.c ---- */

/* What the steps of one rendezvous share, besides the window. */
struct rendezvous {
  mori_window *w;
  mori_store *store;
  mori_request *reqs; /* world_size entries (ATTACH); the own one filled by PUBLISH */
  mori_channel *ch;   /* the fd path's channel, BIND to EXCHANGE */
  int timeout_ms;
};

static int fd_path(const mori_window *w) {
  return w->block->handle_type == hipMemHandleTypePosixFileDescriptor;
}

/* The block's first rendezvous exports its handle (the fabric blob rides
 * in the request, the fd is sent at EXCHANGE). */
static int step_attach(void *p) {
  struct rendezvous *r = p;
  mori_window *w = r->w;
  MORI_GUARD(mori__ledger_add(&w->fsm, MORI_RES_BLOCK_REF, (uintptr_t)w->block, 0, 0));
  MORI_HIP("hipSetDevice", mori_hipSetDevice(w->block->device));
  MORI_GUARD(mori__block_export(w->block));
  r->reqs = mori_calloc((size_t)w->world_size, sizeof *r->reqs);
  return r->reqs ? 0 : mori__nomem("rendezvous");
}

static int close_channel(const mori_ledger_entry *e) {
  mori_channel_close((mori_channel *)e->value);
  return 0;
}

/* The ledger's row for CHANNEL, which only this file records. */
__attribute__((constructor)) static void channel_release_row(void) {
  mori__ledger_set_release(MORI_RES_CHANNEL, close_channel, 0, 0);
}

/* The socket is bound before the request names it, so a peer's datagram
 * always finds it and no retry loop is needed. */
static int step_bind(void *p) {
  struct rendezvous *r = p;
  if (!fd_path(r->w)) return 0;
  MORI_GUARD(mori_channel_open(r->w->seq, &r->ch));
  return mori__ledger_add(&r->w->fsm, MORI_RES_CHANNEL, (uintptr_t)r->ch, 0, 0);
}

static int step_publish(void *p) {
  struct rendezvous *r = p;
  mori_window *w = r->w;
  MORI_GUARD(mori__fill_request(w, r->ch ? mori_channel_name(r->ch) : "", &r->reqs[w->rank]));
  return mori__publish_request(w, r->store, &r->reqs[w->rank]);
}

static int step_gather(void *p) {
  struct rendezvous *r = p;
  return mori__gather_requests(r->w, r->store, r->reqs, r->timeout_ms);
}

static int step_validate(void *p) {
  struct rendezvous *r = p;
  mori_world_info info;
  int rc = mori_validate_world(r->reqs, r->w->world_size, r->w->rank, &info);
  if (rc == MORI_EMISMATCH) /* a probe may have answered differently here: say why */
    mori__error_suffix(" (this rank's probe of device %d: %s)", r->w->block->device,
                       mori__probe_why(r->w->block->device));
  MORI_GUARD(rc);
  r->w->handle_type = (int)info.handle_type;
  for (int k = 0; k < r->w->world_size; k++) r->w->pids[k] = r->reqs[k].pid;
  r->w->direct_access = info.world_within_direct_access;
  r->w->shared_device = info.shared_device;
  return 0;
}

static int step_take_slot(void *p) {
  struct rendezvous *r = p;
  return take_signal_slot(r->w, r->reqs);
}

/* Received fds stay open (in the ledger) until the handle imported from
 * each is released: some ROCm releases fail map/access if the importer
 * closed its fd early.  The socket has done its work: closing it now
 * bounds fd use. */
static int step_exchange(void *p) {
  struct rendezvous *r = p;
  mori_window *w = r->w;
  if (!fd_path(w)) return 0;
  int *fds = mori_malloc((size_t)w->world_size * sizeof *fds);
  if (fds == NULL) return mori__nomem("rendezvous");
  struct mori__abort_ctx actx = {w, r->store};
  mori_channel_set_abort_check(r->ch, mori__channel_abort_check, &actx);
  int rc = mori_channel_exchange(r->ch, r->reqs, w->world_size, w->rank, w->seq,
                                 w->block->exported_fd, fds, r->timeout_ms);
  for (int k = 0; rc == 0 && k < w->world_size; k++)
    if (k != w->rank) rc = mori__ledger_add(&w->fsm, MORI_RES_RECEIVED_FD, (uintptr_t)fds[k], 0, k);
  free(fds);
  MORI_GUARD(rc);
  if (mori_fsm_forget(&w->fsm, MORI_RES_CHANNEL, (uintptr_t)r->ch) != 0)
    return mori__error(MORI_ESTATE, "ledger: %s", w->fsm.why);
  mori_channel_close(r->ch);
  r->ch = NULL;
  return 0;
}

static int step_import(void *p) {
  struct rendezvous *r = p;
  mori_window *w = r->w;
  for (int k = 0; k < w->world_size; k++) {
    if (k == w->rank) continue;
    hipMemGenericAllocationHandle_t h;
    hipMemFabricHandle_t blob;
    void *os_handle = &blob;
    if (w->handle_type == hipMemHandleTypeFabric) {
      memcpy(blob.data, r->reqs[k].fabric, sizeof blob.data);
    } else {
      uintptr_t fd = 0;
      MORI_GUARD(mori__ledger_find(&w->fsm, MORI_RES_RECEIVED_FD, k, &fd));
      os_handle = (void *)fd; /* the shim takes the fd by value */
    }
    hipError_t e = mori_hipMemImportFromShareableHandle(
        &h, os_handle, (hipMemAllocationHandleType)w->handle_type);
    if (e != hipSuccess) {
      mori__hip_error("hipMemImportFromShareableHandle", e);
      mori__error_prefix("import from rank %d: ", k);
      return MORI_EHIP;
    }
    MORI_GUARD(mori__ledger_add(&w->fsm, MORI_RES_IMPORTED_HANDLE, (uintptr_t)h, 0, k));
  }
  return 0;
}

static int step_reserve(void *p) {
  mori_window *w = ((struct rendezvous *)p)->w;
  const mori_block *b = w->block;
  size_t total = b->alloc_size * (size_t)w->world_size;
  MORI_HIP("hipMemAddressReserve",
           mori_hipMemAddressReserve(&w->span, total, b->granularity, NULL, 0));
  w->stride = b->alloc_size;
  return mori__ledger_add(&w->fsm, MORI_RES_SPAN_RESERVATION, (uintptr_t)w->span, total, 0);
}

char *mori__window_slot(const mori_window *w, int rank) {
  return (char *)w->span + (size_t)rank * w->stride;
}
#define slot_of mori__window_slot

/* Each peer's slot separately: one unmap per mapping at teardown, never
 * one over several (docs/quirks.md, unmap-multi).  The own slot stays
 * unmapped until mori_window_span hands the span out (map_own_slot):
 * torch's tables point at the block's own address, and a window whose
 * span nobody asks for saves a map, a grant and an unmap. */
static int step_map(void *p) {
  mori_window *w = ((struct rendezvous *)p)->w;
  for (int k = 0; k < w->world_size; k++) {
    uintptr_t h = 0;
    if (k == w->rank) continue;
    MORI_GUARD(mori__ledger_find(&w->fsm, MORI_RES_IMPORTED_HANDLE, k, &h));
    MORI_HIP("hipMemMap",
             mori_hipMemMap(slot_of(w, k), w->stride, 0, (hipMemGenericAllocationHandle_t)h, 0));
    MORI_GUARD(mori__ledger_add(&w->fsm, MORI_RES_SLOT_MAPPING, (uintptr_t)slot_of(w, k),
                                w->stride, k));
  }
  return 0;
}

static int step_grant(void *p) {
  mori_window *w = ((struct rendezvous *)p)->w;
  hipMemAccessDesc access = {{hipMemLocationTypeDevice, w->block->device},
                             hipMemAccessFlagsProtReadWrite};
  for (int k = 0; k < w->world_size; k++)
    if (k != w->rank)
      MORI_HIP("hipMemSetAccess", mori_hipMemSetAccess(slot_of(w, k), w->stride, &access, 1));
  return 0;
}

/* torch's contract: the own rank's entry is the tensor's own address
 * (buffer_ptrs[rank] + offset == data_ptr()); peers point into the span.
 * The own slot of the span is mapped only for flat-form kernels, when
 * mori_window_span first hands the span out.  The two
 * host tables are one array (buffer pointers, then pad pointers), and so
 * are the device tables: one slot of the arena (alloc/arena.c, no runtime
 * call while a chunk of the device has room), filled by one copy on the
 * device's service stream and synchronized there, so that the rendezvous
 * never waits for unrelated work queued on the legacy default stream.
 * The zeroing an allocation on a stream left on the caller's stream is
 * waited for by its event: no peer signals or writes into the block before
 * the "mapped" barrier that follows, so none is overwritten by a late
 * zeroing. */
static int step_build_tables(void *p) {
  mori_window *w = ((struct rendezvous *)p)->w;
  const mori_block *b = w->block;
  for (int k = 0; k < w->world_size; k++) {
    char *base = k == w->rank ? (char *)b->base : slot_of(w, k);
    w->buffer_ptrs[k] = base;
    w->pad_ptrs[k] = base + b->signal_pad_offset;
  }
  size_t n = 2 * (size_t)w->world_size * sizeof(void *);
  void *dev = NULL;
  hipStream_t svc = NULL;
  MORI_GUARD(mori__service_stream(b->device, &svc));
  MORI_GUARD(mori__arena_take(b->device, n, &dev));
  MORI_GUARD(mori__ledger_add(&w->fsm, MORI_RES_DEVICE_TABLE, (uintptr_t)dev, n, 0));
  MORI_HIP("hipMemcpyAsync", mori_hipMemcpyAsync(dev, w->buffer_ptrs, n, hipMemcpyHostToDevice, svc));
  MORI_HIP("hipStreamSynchronize", mori_hipStreamSynchronize(svc));
  MORI_GUARD(mori__block_wait_zeroed(w->block));
  w->buffer_ptrs_dev = dev;
  w->pad_ptrs_dev = (void **)dev + w->world_size;
  /* the signal state, and the slot zeroed if an earlier window used it */
  return mori__signal_prepare(w);
}

/* No rank may use the window before every rank has mapped it.  Past it,
 * the rendezvous's keys are done with. */
static int step_barrier(void *p) {
  struct rendezvous *r = p;
  MORI_GUARD(mori__store_barrier(r->w, r->store, "mapped", r->timeout_ms));
  mori__store_cleanup(r->w, r->store);
  return 0;
}

static const mori__step window_steps[MORI_EV__COUNT] = {
    [MORI_EV_ATTACH] = step_attach,
    [MORI_EV_BIND] = step_bind,
    [MORI_EV_PUBLISH] = step_publish,
    [MORI_EV_GATHER] = step_gather,
    [MORI_EV_VALIDATE] = step_validate,
    [MORI_EV_TAKE_SLOT] = step_take_slot,
    [MORI_EV_EXCHANGE] = step_exchange,
    [MORI_EV_IMPORT] = step_import,
    [MORI_EV_RESERVE] = step_reserve,
    [MORI_EV_MAP] = step_map,
    [MORI_EV_GRANT] = step_grant,
    [MORI_EV_BUILD_TABLES] = step_build_tables,
    [MORI_EV_BARRIER] = step_barrier,
};

/* A failed rank tells its peers at once, so that they stop waiting for it
 * (unless its failure is a peer's abort: that peer told them already, and
 * a failure here that a peer's can cause is then reported as the peer's). */
static int rendezvous_abort(void *p, int rc) {
  /* the steps that meet the peers or what they made */
  static const mori_wevent with_peers[] = {MORI_EV_GATHER, MORI_EV_EXCHANGE, MORI_EV_IMPORT,
                                           MORI_EV_BARRIER};
  struct rendezvous *r = p;
  int step = mori_fsm_forward(r->w->fsm.kind, r->w->fsm.state.window); /* the one that failed */
  for (size_t i = 0; i < sizeof with_peers / sizeof with_peers[0]; i++)
    if (step == (int)with_peers[i]) rc = mori__peer_failed_first(r->w, r->store, rc);
  if (rc != MORI_EPEER) mori__publish_abort(r->w, r->store);
  return rc;
}

/* ---- rendezvous ---- */

static mori_window *window_new(mori_block *b, const char *group, int rank, int world_size) {
  mori_window *w = mori_calloc(1, sizeof *w);
  if (w == NULL) return NULL;
  w->block = b;
  w->life = MORI_LIFE_OPENING;
  w->rank = rank;
  w->world_size = world_size;
  w->id = next_window_id++;
  w->signal_slot = -1;
  w->group = mori_strdup(group);
  /* one allocation: the buffer pointers, the pad pointers, the pids */
  w->buffer_ptrs = mori_calloc(1, 2 * (size_t)world_size * sizeof(void *) +
                                      (size_t)world_size * sizeof *w->pids);
  w->pad_ptrs = w->buffer_ptrs ? w->buffer_ptrs + world_size : NULL;
  w->pids = w->buffer_ptrs ? (uint32_t *)(w->buffer_ptrs + 2 * world_size) : NULL;
  size_t cells = b->signal_pad_size / 4;
  w->max_channels = (int)(cells / (size_t)world_size);
  mori_fsm_init(&w->fsm, MORI_FSM_WINDOW, rank, world_size);
  if (!w->group || !w->buffer_ptrs || !w->pad_ptrs) {
    mori__window_abandon(w);
    return NULL;
  }
  return w;
}

/* Under mori__lock: a new window of (b, group), OPENING, claiming b's
 * rendezvous slot, with its group's next sequence number (*seq, set even
 * when a later allocation fails: the peers then wait on that sequence). */
static int rendezvous_open(mori_block *b, const char *group, int rank, int world_size,
                           uint64_t *seq, mori_window **out) {
  MORI_GUARD(take_seq(group, seq));
  mori_window *w = window_new(b, group, rank, world_size);
  if (w == NULL) return mori__nomem("rendezvous");
  w->seq = *seq;
  int rc = mori__window_register(w);
  if (rc != 0) {
    mori__window_abandon(w);
    return rc;
  }
  b->opening = w;
  *out = w;
  return 0;
}

/* Outside mori__lock: a rendezvous that failed before it had a window
 * still tells its peers, under its sequence number, so that they stop
 * waiting for its request. */
static void abort_unopened(const char *group, uint64_t seq, int rank, int world_size,
                           mori_store *store) {
  mori_window w = {
      .group = (char *)group, .seq = seq, .rank = rank, .world_size = world_size, .id = -1};
  mori__error_prefix("rank %d group %s (seq %llu): rendezvous failed: ", rank, group,
                     (unsigned long long)seq);
  mori__publish_abort(&w, store);
  /* a replacement's survivors may be healing, in keys it has not learned */
  if (mori__replacement()) mori__heal_abort_publish(group, rank, seq, rank, store);
}

/* Outside mori__lock: the collective part, which waits on the store and
 * the channel.  Nothing but this thread touches w until it is settled. */
static int rendezvous_run(mori_window *w, mori_store *store) {
  struct rendezvous r = {w, store, NULL, NULL, mori_symm_timeout_ms()};
  /* step times only for the INFO line below */
  int timed = mori__log_level() >= MORI_LOG_INFO;
  double t0 = timed ? mori__log_clock_us() : 0;
  mori__step_times t;
  /* A replacement's rendezvous of a window the survivors heal runs in the
   * heal's keys from its first step (replacement.c), so that any abort it
   * publishes reaches them; every other one as it is. */
  int rc = mori__replacement() ? mori__heal_join(w, store, r.timeout_ms) : 0;
  if (rc != 0) mori__heal_abort_publish(w->group, w->rank, w->seq, w->rank, store);
  if (rc == 0)
    rc = mori__drive(&w->fsm, window_steps, &r, MORI_WS_MAPPED, rendezvous_abort,
                     timed ? &t : NULL);
  free(r.reqs);
  if (rc != 0) {
    mori__error_prefix("rank %d group %s window %ld (seq %llu): rendezvous failed: ", w->rank,
                       w->group, w->id, (unsigned long long)w->seq);
    MORI_LOG(MORI_LOG_WARN, w->rank, w->id, "%s", mori_last_error());
    return rc;
  }
  /* Each step's time: what bounds a first rendezvous (the store's waits,
   * the exchange, the runtime's import, map and access calls). */
  if (timed) {
    char steps[512];
    mori__step_times_format(&t, steps, sizeof steps);
    MORI_LOG(MORI_LOG_INFO, w->rank, w->id,
             "rendezvous group %s seq %llu: %d ranks, %s, %.0f us; us: %s", w->group,
             (unsigned long long)w->seq, w->world_size,
             w->handle_type == hipMemHandleTypeFabric ? "fabric" : "posix_fd",
             mori__log_clock_us() - t0, steps);
  }
  return 0;
}

/* Under mori__lock: publishes the outcome.  A window whose block was freed
 * while it was being set up joins the block's teardown, and the call
 * reports MORI_ENOTFOUND as a rendezvous of a freed pointer would. */
static int rendezvous_settle(mori_block *b, mori_window *w, int rc, mori_block **teardown) {
  b->opening = NULL;
  if (rc != 0) {
    b->failed_id = w->id;
    b->failed_rc = rc;
    snprintf(b->failure, sizeof b->failure, "%s", mori_last_error());
    mori__window_abandon(w); /* its ledger was rolled back by the driver */
  } else {
    w->next = b->windows;
    b->windows = w;
    mori__window_set_life(w, MORI_LIFE_EV_OPEN);
    mori__counters.windows++;
    mori__counters.rendezvous++;
    if (b->freed)
      rc = mori__error(MORI_ENOTFOUND,
                       "rendezvous(%p): the block was freed on another thread while its "
                       "rendezvous ran",
                       b->base);
  }
  pthread_cond_broadcast(&mori__cond);
  if (mori__block_claim_if_idle(b)) *teardown = b;
  return rc;
}

/* Under mori__lock: waits (the lock released) for the rendezvous running
 * on b.  A caller of the same group shares its outcome: its failure, or
 * its window, which the caller's next lookup finds. */
static int wait_for_opening(mori_block *b, const char *group, mori_block **teardown) {
  long id = b->opening->id;
  int same = strcmp(b->opening->group, group) == 0;
  int rc = 0;
  b->waiters++;
  while (b->opening != NULL && b->opening->id == id) pthread_cond_wait(&mori__cond, &mori__lock);
  b->waiters--;
  if (same && b->failed_id == id)
    rc = mori__error(b->failed_rc, "rendezvous: group %s failed on another thread: %s", group,
                     b->failure);
  else if (b->freed)
    rc = mori__error(MORI_ENOTFOUND,
                     "rendezvous(%p): the block was freed on another thread while this call "
                     "waited for its rendezvous",
                     b->base);
  pthread_cond_broadcast(&mori__cond);
  if (mori__block_claim_if_idle(b)) *teardown = b;
  return rc;
}

/* mori__lock guards the tables only: a cached call is a lookup under it; a
 * new rendezvous claims the block (b->opening) under it, runs without it,
 * and takes it again to publish the result. */
int mori_symm_rendezvous(void *ptr, const char *group, int rank, int world_size,
                         mori_store *store, mori_window **out, size_t *offset) {
  if (group == NULL || *group == '\0' || store == NULL || out == NULL)
    return mori__error(MORI_EINVAL, "rendezvous: group, store and out are required");
  MORI_GUARD(mori__group_check(group));
  if (world_size < 1 || world_size > MORI_WIRE_MAX_WORLD || rank < 0 || rank >= world_size)
    return mori__error(MORI_ERANGE, "rendezvous: rank %d / world_size %d out of range", rank,
                       world_size);
  mori_block *b = NULL, *teardown = NULL;
  mori_window *w = NULL, *opened = NULL;
  uint64_t seq = UINT64_MAX;
  int rc;
  pthread_mutex_lock(&mori__lock);
  for (;;) {
    b = mori__block_find(ptr);
    if (b == NULL) {
      rc = mori__error(MORI_ENOTFOUND, "rendezvous(%p): not in a live mori-symm allocation", ptr);
      break;
    }
    if ((w = mori__window_find(b, group)) != NULL) {
      rc = 0;
      if (w->rank != rank || w->world_size != world_size)
        rc = mori__error(MORI_EMISMATCH,
                         "rendezvous: group %s was set up as rank %d of %d, not %d of %d",
                         group, w->rank, w->world_size, rank, world_size);
      else
        mori__counters.cache_hits++;
      break;
    }
    if (b->opening == NULL) {
      /* The variables a new window reads (its timeout, the switches) are
       * checked before it is made; a cached call reads none of them, and
       * their five getenv calls were ten times the cost of its lookup. */
      rc = mori__timeout_env_check();
      if (rc == 0) rc = mori__env_switches_check();
      if (rc == 0) rc = rendezvous_open(b, group, rank, world_size, &seq, &opened);
      w = opened;
      break;
    }
    if ((rc = wait_for_opening(b, group, &teardown)) != 0) break;
  }
  if (rc == 0 && offset) *offset = (size_t)((uintptr_t)ptr - (uintptr_t)b->base);
  pthread_mutex_unlock(&mori__lock);
  if (rc != 0 && seq != UINT64_MAX) abort_unopened(group, seq, rank, world_size, store);
  if (opened != NULL) {
    rc = rendezvous_run(opened, store);
    pthread_mutex_lock(&mori__lock);
    rc = rendezvous_settle(b, opened, rc, &teardown);
    pthread_mutex_unlock(&mori__lock);
  }
  if (teardown != NULL) mori__block_teardown_quietly(teardown);
  if (rc == 0) *out = w;
  return rc;
}

/* The rendezvous number this rank would have taken in the group is the
 * one it aborts, so that its peers' rendezvous fail at once. */
int mori_symm_rendezvous_abort(const char *group, int rank, int world_size, mori_store *store,
                               const char *why) {
  if (group == NULL || *group == '\0' || store == NULL)
    return mori__error(MORI_EINVAL, "rendezvous abort: group and store are required");
  MORI_GUARD(mori__group_check(group));
  MORI_GUARD(mori__timeout_env_check());
  MORI_GUARD(mori__env_switches_check());
  if (world_size < 1 || world_size > MORI_WIRE_MAX_WORLD || rank < 0 || rank >= world_size)
    return mori__error(MORI_ERANGE, "rendezvous abort: rank %d / world_size %d out of range",
                       rank, world_size);
  uint64_t seq = 0;
  pthread_mutex_lock(&mori__lock);
  int rc = take_seq(group, &seq);
  pthread_mutex_unlock(&mori__lock);
  if (rc == 0)
    rc = mori__abort_rendezvous(group, seq, rank, world_size, store, why ? why : "gave up",
                                mori_symm_timeout_ms());
  /* a replacement's survivors may be healing, in keys it has not learned */
  if (mori__replacement()) {
    mori__first_error own;
    (void)mori__first_set(&own, rc);
    mori__error(MORI_EPEER, "%s", why ? why : "gave up");
    mori__heal_abort_publish(group, rank, seq, rank, store);
    rc = mori__first_end(&own, rc);
  }
  if (rc != 0)
    mori__error_prefix("rank %d group %s (seq %llu): rendezvous abort: ", rank, group,
                       (unsigned long long)seq);
  return rc;
}

/* ---- accessors ----
 *
 * Each checks the window under mori__lock first, so that an accessor on a
 * window after its final release reports it (mori_last_error) and returns
 * a neutral value instead of reading freed memory. */

#define MORI_ACCESSOR(type, name, none, expr)                                        \
  type mori_window_##name(const mori_window *w) {                                    \
    if (mori__window_enter(w, "mori_window_" #name) != 0) return none;              \
    type v = (expr);                                                                 \
    (void)mori__window_leave(w, 0);                                                  \
    return v;                                                                        \
  }

MORI_ACCESSOR(int, rank, -1, w->rank)
MORI_ACCESSOR(int, world_size, -1, w->world_size)
MORI_ACCESSOR(int, device, -1, w->block->device)
MORI_ACCESSOR(size_t, buffer_size, 0, w->block->buffer_size)
MORI_ACCESSOR(size_t, signal_pad_size, 0, w->block->signal_pad_size)
MORI_ACCESSOR(int, handle_type, -1, w->handle_type)
MORI_ACCESSOR(int, world_within_direct_access, -1, w->direct_access)
MORI_ACCESSOR(void *const *, buffer_ptrs, NULL, (void *const *)w->buffer_ptrs)
MORI_ACCESSOR(void *const *, signal_pad_ptrs, NULL, (void *const *)w->pad_ptrs)
MORI_ACCESSOR(void *, buffer_ptrs_dev, NULL, w->buffer_ptrs_dev)
MORI_ACCESSOR(void *, signal_pad_ptrs_dev, NULL, w->pad_ptrs_dev)
MORI_ACCESSOR(int, max_channels, -1, w->max_channels)

/* The own rank's slot of the span, mapped from the block's own handle and
 * made accessible (fsm.h, MORI_WINDOW_FLATTEN), once per window: under
 * mori__lock, so that two callers map it once, and only in MAPPED (not
 * while a heal runs, nor after one broke the window).  A failure gives
 * back what it made and leaves the window as it was, its span unmapped at
 * the own slot, for a later call to try again. */
static int map_own_slot(mori_window *w) {
  if (mori_fsm_count(&w->fsm, MORI_RES_OWN_SLOT_MAPPING) > 0) return 0;
  if (w->healing || w->fsm.state.window != MORI_WS_MAPPED)
    return mori__error(MORI_ESTATE, "the window is %s%s, and it is mapped only in MAPPED",
                       mori_fsm_state_name(w->fsm.state.id), w->healing ? " (healing)" : "");
  char *slot = slot_of(w, w->rank);
  hipMemAccessDesc access = {{hipMemLocationTypeDevice, w->block->device},
                             hipMemAccessFlagsProtReadWrite};
  MORI_HIP("hipSetDevice", mori_hipSetDevice(w->block->device));
  MORI_HIP("hipMemMap", mori_hipMemMap(slot, w->stride, 0, w->block->handle, 0));
  int rc = mori__ledger_add(&w->fsm, MORI_RES_OWN_SLOT_MAPPING, (uintptr_t)slot, w->stride, 0);
  if (rc != 0) {
    (void)mori_hipMemUnmap(slot, w->stride);
    return rc;
  }
  hipError_t e = mori_hipMemSetAccess(slot, w->stride, &access, 1);
  if (e == hipSuccess && mori_fsm_fire(&w->fsm, MORI_EV_FLATTEN) == 0) return 0;
  rc = e != hipSuccess ? mori__hip_error("hipMemSetAccess", e)
                       : mori__error(MORI_ESTATE, "%s", w->fsm.why);
  mori__first_error first;
  (void)mori__first_set(&first, rc);
  (void)mori__ledger_drop(&w->fsm, MORI_RES_OWN_SLOT_MAPPING, (uintptr_t)slot);
  return mori__first_end(&first, rc);
}

void *mori_window_span(const mori_window *w, size_t *stride) {
  if (mori__window_enter(w, "mori_window_span") != 0) return NULL;
  pthread_mutex_lock(&mori__lock);
  int rc = map_own_slot((mori_window *)w);
  pthread_mutex_unlock(&mori__lock);
  if (rc != 0)
    mori__error_prefix("mori_window_span: rank %d group %s window %ld: its own slot: ", w->rank,
                       w->group, w->id);
  if (rc == 0 && stride) *stride = w->stride;
  void *span = rc == 0 ? w->span : NULL;
  (void)mori__window_leave(w, rc);
  return span;
}

void mori_symm_stats_get(mori_symm_stats *out) {
  pthread_mutex_lock(&mori__lock);
  out->blocks = mori__blocks_live();
  out->windows = mori__counters.windows;
  out->cache_hits = mori__counters.cache_hits;
  out->rendezvous = mori__counters.rendezvous;
  out->deferred = mori__counters.deferred;
  pthread_mutex_unlock(&mori__lock);
}
