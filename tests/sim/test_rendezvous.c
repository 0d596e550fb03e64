/*
 * test_rendezvous.c - multi-process specifications of the core on the sim
 * shim: each test forks N ranks over a file store and checks what every
 * rank saw, that nothing leaked (shim ledger, fds), and that failures are
 * bounded and named.  ctest runs this binary under several arch profiles
 * and quirk sets (MORI_SIM_ARCH, MORI_SIM_QUIRKS).
 */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ranks.h"

#define MiB (1u << 20)

/* The end of every failure test: the rendezvous returned rc, which must be
 * one of the two codes (want2 0 for one), with a message containing
 * needle; then the block frees and nothing is left. */
static int expect_failure(const mori_rank_ctx *ctx, int rc, int want1, int want2,
                          const char *needle, void *base, int fds0, char *msg, size_t msglen,
                          const char *what) {
  if (rc != want1 && (want2 == 0 || rc != want2)) {
    snprintf(msg, msglen, "rank %d %s: expected %s, got %d: %s", ctx->rank, what,
             mori_error_name(want1), rc, mori_last_error());
    return 1;
  }
  if (strstr(mori_last_error(), needle) == NULL) {
    snprintf(msg, msglen, "rank %d %s: message does not say \"%s\": %s", ctx->rank, what, needle,
             mori_last_error());
    return 1;
  }
  return ranks_end(ctx, msg, msglen, fds0, base, what);
}

/* One signal around the ring on channel: put to the next rank, wait for
 * the previous one's. */
static int ring_signal(const mori_rank_ctx *ctx, mori_window *w, int channel, char *msg,
                       size_t msglen) {
  int next = (ctx->rank + 1) % ctx->world, prev = (ctx->rank + ctx->world - 1) % ctx->world;
  CHECK(mori_window_put_signal(w, next, channel, NULL, 0) == 0, "put: %s", mori_last_error());
  CHECK(mori_window_wait_signal(w, prev, channel, NULL, 0) == 0, "wait: %s", mori_last_error());
  return 0;
}

/* Every rank writes its rank into every peer's slot and reads all back. */
static int check_peer_access(const mori_rank_ctx *ctx, mori_window *w, char *msg, size_t msglen) {
  int world = ctx->world;
  void *const *peers = mori_window_buffer_ptrs(w);
  for (int p = 0; p < world; p++) {
    uint32_t v = 0xA5000000u | (uint32_t)(ctx->rank << 8) | (uint32_t)p;
    CHECK(mori_hipMemcpy((uint32_t *)peers[p] + ctx->rank, &v, 4, hipMemcpyHostToDevice) ==
              hipSuccess, "write to peer %d: %s", p, mori_shim_message());
  }
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  for (int q = 0; q < world; q++) {
    uint32_t v = 0;
    CHECK(mori_hipMemcpy(&v, (uint32_t *)peers[ctx->rank] + q, 4, hipMemcpyDeviceToHost) ==
              hipSuccess, "read own slot: %s", mori_shim_message());
    CHECK(v == (0xA5000000u | (uint32_t)(q << 8) | (uint32_t)ctx->rank),
          "word from rank %d is 0x%08x", q, v);
  }
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  return 0;
}

static int lifecycle_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  void *base = NULL;
  mori_window *w = NULL;
  size_t off = 99;
  if (ranks_begin_block(ctx, msg, msglen, &fds0, 3 * MiB + 5, &base, NULL, NULL)) return 1;
  CHECK(mori_symm_rendezvous(base, "world", ctx->rank, ctx->world, ctx->store, &w, &off) == 0,
        "rendezvous: %s", mori_last_error());
  CHECK(off == 0, "offset %zu", off);
  CHECK(mori_window_world_size(w) == ctx->world && mori_window_rank(w) == ctx->rank, "geometry");
  CHECK(mori_window_world_within_direct_access(w) == 1, "direct access");
  CHECK(mori_window_buffer_size(w) == 3 * MiB + 5, "buffer size");
  /* torch's contract: the own rank's entries are the tensor's own address;
   * the span's own slot is a second mapping of the same memory. */
  CHECK(mori_window_buffer_ptrs(w)[ctx->rank] == base, "own buffer_ptrs entry %p, base %p",
        mori_window_buffer_ptrs(w)[ctx->rank], base);
  CHECK((char *)mori_window_signal_pad_ptrs(w)[ctx->rank] == (char *)base + ((3 * MiB + 5 + 15) & ~(size_t)15),
        "own signal pad entry is not base + round_up(size, 16)");
  size_t stride = 0;
  char *own_slot = (char *)mori_window_span(w, &stride) + (size_t)ctx->rank * stride;
  uint32_t mark = 0x5eed0000u | (uint32_t)ctx->rank, back = 0;
  CHECK(mori_hipMemcpy((char *)base + 4096, &mark, 4, hipMemcpyHostToDevice) == hipSuccess, "mark");
  CHECK(mori_hipMemcpy(&back, own_slot + 4096, 4, hipMemcpyDeviceToHost) == hipSuccess, "read slot");
  CHECK(back == mark, "own slot in the span reads 0x%08x, not the mark 0x%08x", back, mark);
  if (check_peer_access(ctx, w, msg, msglen)) return 1;
  /* put/wait around the ring, several rounds, on two channels */
  for (int round = 0; round < 3; round++)
    for (int ch = 1; ch < 3; ch++)
      if (ring_signal(ctx, w, ch, msg, msglen)) return 1;
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  /* torch's part of the pad stays zero: signals use the private area */
  uint32_t pad[16];
  CHECK(mori_hipMemcpy(pad, mori_window_signal_pad_ptrs(w)[ctx->rank], sizeof pad,
                       hipMemcpyDeviceToHost) == hipSuccess, "read pad");
  for (int i = 0; i < 16; i++) CHECK(pad[i] == 0, "torch pad word %d is %u", i, pad[i]);
  return ranks_end(ctx, msg, msglen, fds0, base, "lifecycle");
}

/* dead_rank: the one rank expected to exit nonzero on purpose (-1: none). */
static void run_expect(int world, mori_rank_fn fn, void *arg, int dead_rank) {
  ranks_run(world, fn, arg, dead_rank >= 0 ? 1ull << dead_rank : 0);
}


/* Over a store that cannot tell changes (torch's c10d::Store: no
 * wait_change) and has no launcher incarnation (agreed in-band, the leader
 * answering joins while it gathers), with one rank 30 ms late: the
 * rendezvous completes, and no rank ever waits on a key that only it
 * writes (the leader's pause used to be a 1 ms wait on its own abort key,
 * which costs a late peer up to that much before it is seen). */
typedef struct plain_store {
  mori_store base;
  mori_store *inner;
  int rank;
  long self_waits, gets;
  char self_key[256];
  int delay_request_ms; /* this rank publishes its request that late */
  int fail_mapped;      /* sets of this rank's "mapped" barrier key fail */
  int watch_rank;       /* reads of this rank's join that found it (-1: none) */
  long join_reads, quick_rereads; /* the latter: within 0.9 ms of the one before */
  double last_read_ms;
} plain_store;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int own_key(const plain_store *p, const char *key) {
  const char *last = strrchr(key, '/');
  char rank[16];
  snprintf(rank, sizeof rank, "%d", p->rank);
  return strncmp(key, "mori_symm/", 10) == 0 && last != NULL && strcmp(last + 1, rank) == 0;
}

static int ps_set(mori_store *s, const char *key, const void *value, size_t len) {
  plain_store *p = (plain_store *)s;
  if (p->delay_request_ms > 0 && strstr(key, "/req/") != NULL) usleep(p->delay_request_ms * 1000);
  if (p->fail_mapped && strstr(key, "/mapped/") != NULL) return MORI_EIO;
  return p->inner->set(p->inner, key, value, len);
}

static int ps_get(mori_store *s, const char *key, void **value, size_t *len, int timeout_ms) {
  plain_store *p = (plain_store *)s;
  p->gets++;
  if (timeout_ms > 0 && own_key(p, key) && p->self_waits++ == 0)
    snprintf(p->self_key, sizeof p->self_key, "%s (%d ms)", key, timeout_ms);
  int rc = p->inner->get(p->inner, key, value, len, timeout_ms);
  char join[64];
  snprintf(join, sizeof join, "/join/%d", p->watch_rank);
  if (rc == 0 && p->watch_rank >= 0 && strstr(key, join) != NULL &&
      strcmp(strstr(key, join), join) == 0) {
    double t = now_ms();
    if (p->join_reads++ > 0 && t - p->last_read_ms < 0.9) p->quick_rereads++;
    p->last_read_ms = t;
  }
  return rc;
}

static int ps_add(mori_store *s, const char *key, int64_t delta, int64_t *result) {
  plain_store *p = (plain_store *)s;
  return p->inner->add(p->inner, key, delta, result);
}

static void ps_destroy(mori_store *s) { (void)s; }

static plain_store plain_store_of(const mori_rank_ctx *ctx) {
  return (plain_store){.base = {ps_set, ps_get, ps_add, ps_destroy, NULL, NULL, NULL},
                       .inner = ctx->store, .rank = ctx->rank, .watch_rank = -1};
}

static int plain_store_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  plain_store ps = plain_store_of(ctx);
  void *base = NULL;
  mori_window *w = NULL;
  if (ranks_begin_block(ctx, msg, msglen, &fds0, MiB, &base, NULL, NULL)) return 1;
  if (ctx->rank == ctx->world - 1) usleep(30000);
  CHECK(mori_symm_rendezvous(base, "plain", ctx->rank, ctx->world, &ps.base, &w, NULL) == 0,
        "rendezvous: %s", mori_last_error());
  if (check_peer_access(ctx, w, msg, msglen)) return 1;
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  CHECK(ps.self_waits == 0, "rank %d waited %ld times on its own keys, first %s", ctx->rank,
        ps.self_waits, ps.self_key);
  return ranks_end(ctx, msg, msglen, fds0, base, "plain store");
}

static void rendezvous_over_a_store_without_change_waits(void **s) {
  (void)s;
  run_expect(4, plain_store_rank, NULL, -1);
}

/* The leader of a first rendezvous over such a store, waiting 40 ms for a
 * rank that joined at once but publishes its request late: it reads that
 * rank's answered join again at most once a millisecond (a stale join, an
 * earlier run's, is rare; each read is a store round trip), not at every
 * pass of its wait.  Before, it read it at every pass: about 40 times in
 * 41 ms, most of them within 0.1 ms of the one before. */
static int late_request_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  plain_store ps = plain_store_of(ctx);
  if (ctx->rank == 1) ps.delay_request_ms = 40;
  if (ctx->rank == 0) ps.watch_rank = 1;
  void *base = NULL;
  mori_window *w = NULL;
  if (ranks_begin_block(ctx, msg, msglen, &fds0, MiB, &base, NULL, NULL)) return 1;
  double t0 = now_ms();
  CHECK(mori_symm_rendezvous(base, "late-req", ctx->rank, ctx->world, &ps.base, &w, NULL) == 0,
        "rendezvous: %s", mori_last_error());
  double waited_ms = now_ms() - t0;
  /* Two reads may come close together: the leader's first look, as it
   * takes the lead, and the first pass of its wait. */
  if (ctx->rank == 0)
    CHECK(ps.quick_rereads <= 2,
          "the leader read rank 1's join %ld times in %.0f ms, %ld of them within 0.9 ms of the "
          "read before", ps.join_reads, waited_ms, ps.quick_rereads);
  return ranks_end(ctx, msg, msglen, fds0, base, "late request");
}

static void leader_reads_an_answered_join_at_most_once_a_millisecond(void **s) {
  (void)s;
  run_expect(2, late_request_rank, NULL, -1);
}

/* A rendezvous that fails after it took its signal slot (at the "mapped"
 * barrier, the last step: everything is acquired) gives the slot back with
 * the rest of its ledger.  A block has eight slots: after eight such
 * failures a ninth rendezvous on the block still finds one free. */
static int failed_rendezvous_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  plain_store ps = plain_store_of(ctx);
  void *base = NULL;
  mori_window *w = NULL;
  char group[32];
  if (ranks_begin_block(ctx, msg, msglen, &fds0, MiB, &base, NULL, NULL)) return 1;
  ps.fail_mapped = 1;
  for (int i = 0; i < 8; i++) {
    snprintf(group, sizeof group, "failing-%d", i);
    int rc = mori_symm_rendezvous(base, group, ctx->rank, ctx->world, &ps.base, &w, NULL);
    CHECK(rc != 0, "rendezvous %s with a failing barrier succeeded", group);
    CHECK(strstr(mori_last_error(), "signal slots") == NULL, "rendezvous %s: %s", group,
          mori_last_error());
  }
  ps.fail_mapped = 0;
  CHECK(mori_symm_rendezvous(base, "after", ctx->rank, ctx->world, &ps.base, &w, NULL) == 0,
        "rendezvous after eight failed ones: %s", mori_last_error());
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  return ranks_end(ctx, msg, msglen, fds0, base, "failed rendezvous");
}

static void a_failed_rendezvous_gives_its_signal_slot_back(void **s) {
  (void)s;
  run_expect(2, failed_rendezvous_rank, NULL, -1);
}

/* The in-band incarnation of two groups agreed at once in one process:
 * the process-wide lock over the groups' incarnations is not held while a
 * member waits for its leader's answer.  Rank 1 starts group "held" on one
 * thread, whose join waits for rank 0, and once that join is in the store,
 * the first rendezvous of group "free" on another; rank 0 leads "held"
 * only after "free" completed.  A lock held across the wait would keep
 * "free" from agreeing its incarnation on rank 1 until "held" timed out. */
typedef struct in_band_store {
  mori_store base;
  mori_store *inner;
} in_band_store;

static int ib_set(mori_store *s, const char *key, const void *value, size_t len) {
  mori_store *in = ((in_band_store *)s)->inner;
  return in->set(in, key, value, len);
}

static int ib_get(mori_store *s, const char *key, void **value, size_t *len, int timeout_ms) {
  mori_store *in = ((in_band_store *)s)->inner;
  return in->get(in, key, value, len, timeout_ms);
}

static int ib_add(mori_store *s, const char *key, int64_t delta, int64_t *result) {
  mori_store *in = ((in_band_store *)s)->inner;
  return in->add(in, key, delta, result);
}

static int ib_wait_change(mori_store *s, int timeout_ms) {
  mori_store *in = ((in_band_store *)s)->inner;
  return in->wait_change(in, timeout_ms);
}

/* The launcher's store without its incarnation: the groups agree one. */
static in_band_store in_band_store_of(const mori_rank_ctx *ctx) {
  return (in_band_store){{ib_set, ib_get, ib_add, ps_destroy, ib_wait_change, NULL, NULL},
                         ctx->store};
}

typedef struct held_group {
  const mori_rank_ctx *ctx;
  mori_store *store;
  void *base;
  int rc;
  char err[512];
} held_group;

static void *rendezvous_held(void *arg) {
  held_group *h = arg;
  mori_window *w = NULL;
  h->rc = mori_symm_rendezvous(h->base, "held", h->ctx->rank, h->ctx->world, h->store, &w, NULL);
  snprintf(h->err, sizeof h->err, "%s", h->rc ? mori_last_error() : "");
  return NULL;
}

static int two_incarnations_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  if (ranks_begin(ctx, msg, msglen, &fds0)) return 1;
  in_band_store ib = in_band_store_of(ctx);
  void *held = NULL, *free_ = NULL;
  mori_window *w = NULL;
  mori_symm_set_timeout_ms(5000); /* what a lock held across the wait costs */
  CHECK(mori_symm_alloc(MiB, ctx->rank, &held) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_alloc(MiB, ctx->rank, &free_) == 0, "alloc: %s", mori_last_error());
  if (ctx->rank == 0) {
    CHECK(mori_symm_rendezvous(free_, "free", 0, ctx->world, &ib.base, &w, NULL) == 0,
          "free: %s", mori_last_error());
    CHECK(mori_symm_rendezvous(held, "held", 0, ctx->world, &ib.base, &w, NULL) == 0,
          "held: %s", mori_last_error());
  } else {
    held_group h = {ctx, &ib.base, held, -1, ""};
    pthread_t t;
    void *join = NULL;
    size_t len = 0;
    char key[64];
    snprintf(key, sizeof key, "mori_symm/held/join/%d", ctx->rank);
    CHECK(pthread_create(&t, NULL, rendezvous_held, &h) == 0, "pthread_create");
    int rc = ctx->store->get(ctx->store, key, &join, &len, 60000);
    free(join);
    if (rc == 0) rc = mori_symm_rendezvous(free_, "free", ctx->rank, ctx->world, &ib.base, &w, NULL);
    char err[512];
    snprintf(err, sizeof err, "%s", rc ? mori_last_error() : "");
    pthread_join(t, NULL);
    CHECK(rc == 0, "group free, while group held waited for its leader: %s", err);
    CHECK(h.rc == 0, "group held: %s", h.err);
  }
  CHECK(mori_symm_free(held) == 0 && mori_symm_free(free_) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "two incarnations");
}

static void a_group_agrees_its_incarnation_while_another_waits_for_its_leader(void **s) {
  (void)s;
  run_expect(2, two_incarnations_rank, NULL, -1);
}

static void lifecycle_at_2_ranks(void **s) { (void)s; run_expect(2, lifecycle_rank, NULL, -1); }
static void lifecycle_at_3_ranks(void **s) { (void)s; run_expect(3, lifecycle_rank, NULL, -1); }
static void lifecycle_at_4_ranks(void **s) { (void)s; run_expect(4, lifecycle_rank, NULL, -1); }
static void lifecycle_at_8_ranks(void **s) { (void)s; run_expect(8, lifecycle_rank, NULL, -1); }
static void lifecycle_at_16_ranks(void **s) { (void)s; run_expect(16, lifecycle_rank, NULL, -1); }
static void single_rank_world_needs_no_peers(void **s) { (void)s; run_expect(1, lifecycle_rank, NULL, -1); }

static int cache_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  void *base = NULL;
  mori_window *w = NULL, *again = NULL;
  size_t off = 0;
  if (ranks_begin_block(ctx, msg, msglen, &fds0, MiB, &base, "g", &w)) return 1;
  mori_symm_stats st0, st1;
  mori_symm_stats_get(&st0);
  for (int i = 0; i < 100; i++) {
    CHECK(mori_symm_rendezvous((char *)base + 4096 + (size_t)i, "g", ctx->rank, ctx->world,
                               ctx->store, &again, &off) == 0, "cached: %s", mori_last_error());
    CHECK(again == w, "cached rendezvous returned another window");
    CHECK(off == 4096 + (size_t)i, "interior offset %zu", off);
  }
  mori_symm_stats_get(&st1);
  CHECK(st1.cache_hits - st0.cache_hits == 100, "cache hits %ld", st1.cache_hits - st0.cache_hits);
  CHECK(st1.rendezvous == st0.rendezvous, "a cached call ran a new rendezvous");
  size_t bsz = 0;
  CHECK(mori_symm_lookup((char *)base + MiB - 1, &bsz, &off) == 0 && off == MiB - 1, "lookup");
  CHECK(mori_symm_lookup((char *)base + MiB, NULL, NULL) == MORI_ENOTFOUND,
        "a pointer past the buffer must not be found");
  CHECK(mori_symm_free((char *)base + 16) == MORI_ENOTFOUND, "free of an interior pointer");
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(base, "g", ctx->rank, ctx->world, ctx->store, &w, NULL) ==
            MORI_ENOTFOUND, "rendezvous on a freed block");
  return ranks_finish(fds0, msg, msglen, "cache");
}

static void repeated_rendezvous_is_a_cache_hit(void **s) { (void)s; run_expect(3, cache_rank, NULL, -1); }

/* A repeated rendezvous of a group names the same geometry or is refused:
 * the cache answers only a call that would have formed the same window.
 * Another world size (or rank) fails with MORI_EMISMATCH naming both, at
 * once and locally (no store operation, no sequence number taken), and the
 * window stays whole for the calls that agree. */
static int cache_mismatch_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  void *base = NULL;
  mori_window *w = NULL, *again = NULL;
  if (ranks_begin_block(ctx, msg, msglen, &fds0, MiB, &base, "g", &w)) return 1;
  mori_symm_stats st0, st1;
  mori_symm_stats_get(&st0);
  int rc = mori_symm_rendezvous(base, "g", ctx->rank, ctx->world + 1, ctx->store, &again, NULL);
  char want[128];
  snprintf(want, sizeof want, "group g was set up as rank %d of %d, not %d of %d", ctx->rank,
           ctx->world, ctx->rank, ctx->world + 1);
  CHECK(rc == MORI_EMISMATCH && again == NULL,
        "a cached rendezvous with world size %d returned %d (window %p): %s", ctx->world + 1, rc,
        (void *)again, mori_last_error());
  CHECK(strstr(mori_last_error(), want) != NULL, "the error does not say \"%s\": %s", want,
        mori_last_error());
  int other = (ctx->rank + 1) % ctx->world;
  rc = mori_symm_rendezvous(base, "g", other, ctx->world, ctx->store, &again, NULL);
  CHECK(rc == MORI_EMISMATCH && again == NULL,
        "a cached rendezvous as rank %d returned %d: %s", other, rc, mori_last_error());
  mori_symm_stats_get(&st1);
  CHECK(st1.cache_hits == st0.cache_hits && st1.rendezvous == st0.rendezvous,
        "the refused calls counted %ld cache hits and %ld rendezvous",
        st1.cache_hits - st0.cache_hits, st1.rendezvous - st0.rendezvous);
  CHECK(mori_symm_rendezvous(base, "g", ctx->rank, ctx->world, ctx->store, &again, NULL) == 0 &&
            again == w, "the agreeing call after them: %s", mori_last_error());
  if (check_peer_access(ctx, w, msg, msglen)) return 1;
  return ranks_end(ctx, msg, msglen, fds0, base, "cache mismatch");
}

static void cached_rendezvous_with_another_world_size_is_a_mismatch(void **s) {
  (void)s;
  run_expect(2, cache_mismatch_rank, NULL, -1);
}

static int two_groups_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  void *base = NULL;
  mori_window *a = NULL, *b = NULL;
  if (ranks_begin_block(ctx, msg, msglen, &fds0, MiB, &base, NULL, NULL)) return 1;
  CHECK(mori_symm_rendezvous(base, "alpha", ctx->rank, ctx->world, ctx->store, &a, NULL) == 0,
        "alpha: %s", mori_last_error());
  /* the second group numbers ranks in reverse */
  int rb = ctx->world - 1 - ctx->rank;
  CHECK(mori_symm_rendezvous(base, "beta", rb, ctx->world, ctx->store, &b, NULL) == 0,
        "beta: %s", mori_last_error());
  CHECK(a != b, "two groups share one window");
  if (check_peer_access(ctx, a, msg, msglen)) return 1;
  /* the same memory through the other group's span: slot rb of beta is mine */
  uint32_t v = 0;
  CHECK(mori_hipMemcpy(&v, (uint32_t *)mori_window_buffer_ptrs(b)[rb] + 0, 4,
                       hipMemcpyDeviceToHost) == hipSuccess, "read via beta");
  CHECK(v == (0xA5000000u | (uint32_t)ctx->rank), "beta slot shows 0x%08x", v);
  CHECK(mori_window_barrier(b, 0, NULL, 0) == 0, "beta barrier: %s", mori_last_error());
  return ranks_end(ctx, msg, msglen, fds0, base, "two groups");
}

static void two_groups_on_one_block(void **s) { (void)s; run_expect(4, two_groups_rank, NULL, -1); }

static long device_allocs(void) {
  mori_shim_registry_counts c;
  mori_shim_registry(&c);
  return c.device_allocs;
}

/* The windows' device tables come from the device's arena (alloc/arena.c):
 * a second window's rendezvous makes no hipMalloc while the first holds a
 * chunk, the free of either leaves the other's tables working, and the
 * chunk goes with the last window, so nothing is left after the last free. */
static int shared_tables_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  void *a = NULL, *b = NULL;
  mori_window *wa = NULL, *wb = NULL;
  if (ranks_begin_block(ctx, msg, msglen, &fds0, MiB, &a, "first", &wa)) return 1;
  CHECK(device_allocs() == 1, "one window: %ld device allocations", device_allocs());
  CHECK(mori_symm_alloc(MiB, ctx->rank, &b) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(b, "second", ctx->rank, ctx->world, ctx->store, &wb, NULL) == 0,
        "rendezvous second: %s", mori_last_error());
  CHECK(device_allocs() == 1, "the second window's tables made a device allocation of their own "
        "(%ld)", device_allocs());
  CHECK(mori_window_buffer_ptrs_dev(wa) != mori_window_buffer_ptrs_dev(wb),
        "two windows share one device table");
  CHECK(mori_window_barrier(wb, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_symm_free(a) == 0, "free: %s", mori_last_error());
  CHECK(device_allocs() == 1, "the chunk went while a window still uses it (%ld)",
        device_allocs());
  void *tables[2 * 8];
  CHECK(ctx->world <= 8, "world %d", ctx->world);
  CHECK(mori_hipMemcpy(tables, mori_window_buffer_ptrs_dev(wb), 2 * (size_t)ctx->world * sizeof(void *),
                       hipMemcpyDeviceToHost) == hipSuccess, "read the device tables: %s",
        mori_shim_message());
  for (int r = 0; r < ctx->world; r++)
    CHECK(tables[r] == mori_window_buffer_ptrs(wb)[r] &&
              tables[ctx->world + r] == mori_window_signal_pad_ptrs(wb)[r],
          "the second window's device tables changed with the first's free (rank %d)", r);
  if (check_peer_access(ctx, wb, msg, msglen)) return 1;
  CHECK(mori_symm_free(b) == 0, "free: %s", mori_last_error());
  CHECK(mori_shim_registry_total() == 0, "the last free left %ld live resources",
        mori_shim_registry_total());
  return ranks_finish(fds0, msg, msglen, "shared tables");
}

static void windows_share_the_device_tables_chunk_until_the_last_goes(void **s) {
  (void)s;
  run_expect(2, shared_tables_rank, NULL, -1);
}

static long exported_fds(void) {
  mori_shim_registry_counts c;
  mori_shim_registry(&c);
  return c.exported_fds;
}

/* Exporting is the costliest call of an allocation on some drivers (an
 * H200: 0.5 ms of 0.64), so alloc leaves it to the block's first
 * rendezvous, which exports once for every group; a block freed before
 * any rendezvous never exports. */
static int lazy_export_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  if (ranks_begin(ctx, msg, msglen, &fds0)) return 1;
  void *base = NULL, *alone = NULL;
  mori_window *a = NULL, *b = NULL;
  CHECK(mori_symm_alloc(MiB, ctx->rank, &alone) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_alloc(MiB, ctx->rank, &base) == 0, "alloc: %s", mori_last_error());
  CHECK(exported_fds() == 0, "alloc exported %ld fds before any rendezvous", exported_fds());
  CHECK(mori_symm_free(alone) == 0, "free of a block never exported: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(base, "alpha", ctx->rank, ctx->world, ctx->store, &a, NULL) == 0,
        "alpha: %s", mori_last_error());
  long want = mori_window_handle_type(a) == hipMemHandleTypePosixFileDescriptor ? 1 : 0;
  CHECK(exported_fds() == want, "%ld exported fds after the first rendezvous, expected %ld",
        exported_fds(), want);
  CHECK(mori_symm_rendezvous(base, "beta", ctx->rank, ctx->world, ctx->store, &b, NULL) == 0,
        "beta: %s", mori_last_error());
  CHECK(exported_fds() == want, "%ld exported fds after a second group, expected %ld (once per "
        "block)", exported_fds(), want);
  if (check_peer_access(ctx, b, msg, msglen)) return 1;
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  CHECK(exported_fds() == 0, "free left %ld exported fds", exported_fds());
  return ranks_finish(fds0, msg, msglen, "lazy export");
}

static void alloc_exports_nothing_until_the_first_rendezvous_of_its_block(void **s) {
  (void)s;
  run_expect(2, lazy_export_rank, NULL, -1);
}

/* Keeping warm (mori_symm_set_keep_warm, the torch adapter's choice): a
 * process whose windows come and go one at a time keeps, after each last
 * free, one device-table chunk, the last exported fd of a small block and
 * one small freed block, so that the next allocation of that size calls
 * no VMM function, the next rendezvous allocates no chunk and the driver's
 * export state is not rebuilt.  In order: a block larger than
 * MORI_SYMM_WARM_EXPORT_MAX is neither kept nor has its fd kept (its
 * memory would stay with it) but leaves the chunk; of two blocks, the
 * first freed is kept and closes its fd (the other's is open), the
 * second is given back (one block is kept already) and its fd stays;
 * then lone cycles take the kept block back, at its address, zeroed over
 * what the last cycle wrote, and keep it again; a block of another size
 * does not take it; release_all gives everything kept back. */
static int warm_cycle(const mori_rank_ctx *ctx, char *msg, size_t msglen, size_t size,
                      const char *group, void **base, long *fd_path) {
  mori_window *w = NULL;
  CHECK(mori_symm_alloc(size, ctx->rank, base) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(*base, group, ctx->rank, ctx->world, ctx->store, &w, NULL) == 0,
        "%s: %s", group, mori_last_error());
  *fd_path = mori_window_handle_type(w) == hipMemHandleTypePosixFileDescriptor;
  if (check_peer_access(ctx, w, msg, msglen)) return 1;
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "%s barrier: %s", group, mori_last_error());
  return 0;
}

#define WARM_STATE(what, fds, allocs, warm)                                                      \
  CHECK(exported_fds() == (fds) && device_allocs() == (allocs) && mori_symm_warm() == (warm),    \
        "%s: %ld exported fds, %ld device allocations, %ld kept; expected %ld, %ld, %ld", what,   \
        exported_fds(), device_allocs(), mori_symm_warm(), (long)(fds), (long)(allocs),          \
        (long)(warm))

static long vmm_handles(void) {
  mori_shim_registry_counts c;
  mori_shim_registry(&c);
  return c.handles;
}

/* The whole buffer reads 0 (the kept block is zeroed when taken). */
static int reads_zero(const mori_rank_ctx *ctx, void *base, size_t n, char *msg, size_t msglen) {
  unsigned char *host = malloc(n);
  CHECK(host != NULL, "malloc");
  hipError_t e = mori_hipMemcpy(host, base, n, hipMemcpyDeviceToHost);
  size_t at = n;
  for (size_t i = 0; e == hipSuccess && i < n && at == n; i++)
    if (host[i] != 0) at = i;
  free(host);
  CHECK(e == hipSuccess, "read back: %s", mori_shim_message());
  CHECK(at == n, "byte %zu of a block taken back is not 0", at);
  return 0;
}

static int warm_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  long fd = 0;
  void *big = NULL, *a = NULL, *b = NULL, *other = NULL;
  if (ranks_begin(ctx, msg, msglen, &fds0)) return 1;
  mori_symm_set_keep_warm(1);
  if (warm_cycle(ctx, msg, msglen, 2 * (size_t)MORI_SYMM_WARM_EXPORT_MAX, "big", &big, &fd))
    return 1;
  CHECK(mori_symm_free(big) == 0, "free: %s", mori_last_error());
  WARM_STATE("a large block freed", 0, 1, 1);
  CHECK(vmm_handles() == 0, "a large block's handle was kept");
  if (warm_cycle(ctx, msg, msglen, MiB, "pair-a", &a, &fd) ||
      warm_cycle(ctx, msg, msglen, MiB, "pair-b", &b, &fd))
    return 1;
  void *kept = a;
  CHECK(mori_symm_free(a) == 0, "free: %s", mori_last_error());
  WARM_STATE("the first of two freed", 2 * fd, 1, 3 + fd);
  CHECK(mori_symm_free(b) == 0, "free: %s", mori_last_error());
  WARM_STATE("the second of two freed", fd, 1, 3 + fd + 1);
  CHECK(vmm_handles() == 1, "%ld handles with one block kept", vmm_handles());
  for (int i = 0; i < 3; i++) {
    void *base = NULL;
    mori_window *w = NULL;
    char group[16];
    snprintf(group, sizeof group, "lone%d", i);
    CHECK(mori_symm_alloc(MiB, ctx->rank, &base) == 0, "alloc: %s", mori_last_error());
    CHECK(base == kept, "%s: the kept block %p was not taken (%p)", group, kept, base);
    WARM_STATE("the kept block taken", fd, 1, 1);
    CHECK(vmm_handles() == 1, "%s: %ld handles after taking the kept block", group,
          vmm_handles());
    if (reads_zero(ctx, base, MiB, msg, msglen)) return 1;
    if (i == 0) { /* freed unsent: kept again, with the fd it carries */
      CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
      WARM_STATE("the kept block freed unsent", fd, 1, 3 + fd + 1);
      CHECK(mori_symm_alloc(MiB, ctx->rank, &base) == 0 && base == kept, "alloc: %s",
            mori_last_error());
    }
    CHECK(mori_symm_rendezvous(base, group, ctx->rank, ctx->world, ctx->store, &w, NULL) == 0,
          "%s: %s", group, mori_last_error());
    CHECK(exported_fds() == fd, "%s: %ld exported fds: the kept block was exported again", group,
          exported_fds());
    if (check_peer_access(ctx, w, msg, msglen)) return 1;
    CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
    WARM_STATE(group, fd, 1, 3 + fd + 1);
  }
  /* taken back, then freed unsent while another block of its size fills
   * the slot: released, and the fd it carried given back after its handle
   * (kept as the warm export: it was the device's last open one) */
  void *x = NULL, *y = NULL;
  CHECK(mori_symm_alloc(MiB, ctx->rank, &x) == 0 && x == kept, "alloc: %s", mori_last_error());
  CHECK(mori_symm_alloc(MiB, ctx->rank, &y) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_free(y) == 0, "free: %s", mori_last_error());
  CHECK(mori_symm_free(x) == 0, "free: %s", mori_last_error());
  WARM_STATE("a block carrying an fd freed unsent, the slot full", fd, 1, 3 + fd + 1);
  kept = y;
  CHECK(mori_symm_alloc(3 * MiB, ctx->rank, &other) == 0, "alloc: %s", mori_last_error());
  CHECK(other != kept && vmm_handles() == 2, "a block of another size took the kept one");
  CHECK(mori_symm_free(other) == 0, "free: %s", mori_last_error());
  WARM_STATE("a block of another size freed", fd, 1, 3 + fd + 1);
  CHECK(mori_symm_release_all() == 0, "release_all: %s", mori_last_error());
  WARM_STATE("release_all", 0, 0, 0);
  CHECK(mori_shim_registry_total() == 0, "release_all left %ld live resources",
        mori_shim_registry_total());
  return ranks_finish(fds0, msg, msglen, "warm");
}

static void lone_windows_keep_a_chunk_an_export_and_a_block_warm(void **s) {
  (void)s;
  run_expect(2, warm_rank, NULL, -1);
}

/* Ranks run ahead into the second group's barrier while others are still
 * in the first's, on the same channel: each window has its own signal slot
 * on the block, so no signal is taken by the wrong group. */
static int same_channel_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  void *base = NULL;
  mori_window *a = NULL, *b = NULL;
  if (ranks_begin_block(ctx, msg, msglen, &fds0, MiB, &base, NULL, NULL)) return 1;
  CHECK(mori_symm_rendezvous(base, "alpha", ctx->rank, ctx->world, ctx->store, &a, NULL) == 0,
        "alpha: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(base, "beta", ctx->world - 1 - ctx->rank, ctx->world, ctx->store,
                             &b, NULL) == 0, "beta: %s", mori_last_error());
  for (int i = 0; i < 200; i++) {
    CHECK(mori_window_barrier(a, 0, NULL, 0) == 0, "alpha barrier %d: %s", i, mori_last_error());
    CHECK(mori_window_barrier(b, 0, NULL, 0) == 0, "beta barrier %d: %s", i, mori_last_error());
  }
  return ranks_end(ctx, msg, msglen, fds0, base, "same channel");
}

static void two_groups_of_one_block_signal_on_one_channel_at_once(void **s) {
  (void)s;
  setenv("MORI_SIM_WAIT_TIMEOUT_MS", "5000", 1);
  run_expect(8, same_channel_rank, NULL, -1);
  unsetenv("MORI_SIM_WAIT_TIMEOUT_MS");
}

/* Groups {0,1,2} and {1,2,3} of a 4-rank job, both on one block each. */
static int overlap_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  if (ranks_begin(ctx, msg, msglen, &fds0)) return 1;
  void *x = NULL, *y = NULL;
  mori_window *w = NULL;
  CHECK(mori_symm_alloc(MiB, ctx->rank, &x) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_alloc(MiB, ctx->rank, &y) == 0, "alloc: %s", mori_last_error());
  for (int round = 0; round < 2; round++) {
    void *buf = round ? y : x;
    if (ctx->rank <= 2) {
      CHECK(mori_symm_rendezvous(buf, "low", ctx->rank, 3, ctx->store, &w, NULL) == 0,
            "low: %s", mori_last_error());
      CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "low barrier: %s", mori_last_error());
    }
    if (ctx->rank >= 1) {
      CHECK(mori_symm_rendezvous(buf, "high", ctx->rank - 1, 3, ctx->store, &w, NULL) == 0,
            "high: %s", mori_last_error());
      CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "high barrier: %s", mori_last_error());
    }
  }
  CHECK(mori_symm_free(x) == 0 && mori_symm_free(y) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "overlap");
}

static void overlapping_subgroups_keep_their_own_sequence(void **s) {
  (void)s;
  run_expect(4, overlap_rank, NULL, -1);
}

/* torch's TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES: two ranks on each
 * device, each with its own allocation; peers on one device reach each
 * other's memory and signals as peers on two devices do. */
static int overlapping_devices_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  if (ranks_begin(ctx, msg, msglen, &fds0)) return 1;
  void *base = NULL;
  mori_window *w = NULL;
  mori_symm_set_allow_overlapping_devices(1);
  CHECK(mori_symm_alloc(MiB, ctx->rank / 2, &base) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(base, "shared", ctx->rank, ctx->world, ctx->store, &w, NULL) == 0,
        "rendezvous: %s", mori_last_error());
  CHECK(mori_window_device(w) == ctx->rank / 2, "device %d", mori_window_device(w));
  CHECK(mori_window_buffer_ptrs(w)[ctx->rank] == base, "own entry is not the block's base");
  if (check_peer_access(ctx, w, msg, msglen)) return 1;
  if (ring_signal(ctx, w, 1, msg, msglen)) return 1;
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  mori_symm_set_allow_overlapping_devices(-1);
  return ranks_finish(fds0, msg, msglen, "overlapping devices");
}

static void two_ranks_per_device_when_overlapping_devices_are_allowed(void **s) {
  (void)s;
  run_expect(4, overlapping_devices_rank, NULL, -1);
}

/* The default, as torch's: refused on every rank, naming the device. */
static int shared_device_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  if (ranks_begin(ctx, msg, msglen, &fds0)) return 1;
  void *base = NULL;
  mori_window *w = NULL;
  CHECK(mori_symm_alloc(MiB, 0, &base) == 0, "alloc: %s", mori_last_error());
  int rc = mori_symm_rendezvous(base, "world", ctx->rank, ctx->world, ctx->store, &w, NULL);
  return expect_failure(ctx, rc, MORI_EMISMATCH, MORI_EPEER, "both use device 0", base, fds0, msg,
                        msglen, "shared device");
}

static void ranks_sharing_a_device_are_refused_by_default(void **s) {
  (void)s;
  run_expect(2, shared_device_rank, NULL, -1);
}

/* ---- failures ---- */

static int dying_peer_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  if (ranks_begin(ctx, msg, msglen, &fds0)) return 1;
  void *base = NULL;
  mori_window *w = NULL;
  mori_symm_set_timeout_ms(1500);
  /* an id agreed in-band: no launcher tells of the death (test_rank_death.c) */
  ctx->store->incarnation = NULL;
  CHECK(mori_symm_alloc(MiB, ctx->rank, &base) == 0, "alloc: %s", mori_last_error());
  if (ctx->rank == 1) _exit(3); /* dies before publishing its request */
  int rc = mori_symm_rendezvous(base, "world", ctx->rank, ctx->world, ctx->store, &w, NULL);
  /* a timeout of its own, or a peer's abort carrying that peer's timeout */
  return expect_failure(ctx, rc, MORI_ETIMEDOUT, MORI_EPEER, "rank(s) 1", base, fds0, msg, msglen,
                        "dying peer");
}

static void dying_peer_gives_timeout_naming_it(void **s) {
  (void)s;
  run_expect(3, dying_peer_rank, NULL, 1);
}

static int size_mismatch_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  void *base = NULL;
  mori_window *w = NULL;
  if (ranks_begin_block(ctx, msg, msglen, &fds0, ctx->rank == 2 ? 3 * MiB : MiB, &base, NULL, NULL))
    return 1;
  int rc = mori_symm_rendezvous(base, "world", ctx->rank, ctx->world, ctx->store, &w, NULL);
  /* Its own validation, or a faster peer's abort carrying that peer's. */
  return expect_failure(ctx, rc, MORI_EMISMATCH, MORI_EPEER, "alloc_size", base, fds0, msg, msglen,
                        "size mismatch");
}

static void rendezvous_rejects_unequal_sizes_on_every_rank(void **s) {
  (void)s;
  run_expect(3, size_mismatch_rank, NULL, -1);
}

static int cross_host_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  if (ranks_begin(ctx, msg, msglen, &fds0)) return 1;
  void *base = NULL;
  mori_window *w = NULL;
  if (ctx->rank == 1) setenv("MORI_SYMM_HOST_ID", "0123456789abcdef0123456789abcdef", 1);
  CHECK(mori_symm_alloc(MiB, 0, &base) == 0, "alloc: %s", mori_last_error());
  int type = 0;
  CHECK(mori_symm_probe(0, &type, NULL, 0) == 0, "probe");
  int rc = mori_symm_rendezvous(base, "world", ctx->rank, ctx->world, ctx->store, &w, NULL);
  if (type == hipMemHandleTypeFabric) {
    /* fabric handles cross hosts: the window forms but is not all direct */
    CHECK(rc == 0, "fabric across hosts: %s", mori_last_error());
    CHECK(mori_window_world_within_direct_access(w) == 1, "fabric is direct access");
    CHECK(mori_symm_free(base) == 0, "free");
    return ranks_finish(fds0, msg, msglen, "cross host fabric");
  }
  /* its own validation, or a faster peer's abort carrying that peer's */
  return expect_failure(ctx, rc, MORI_EMISMATCH, MORI_EPEER, "host", base, fds0, msg, msglen,
                        "cross host");
}

static void posix_fd_group_spanning_hosts_is_refused(void **s) {
  (void)s;
  run_expect(2, cross_host_rank, NULL, -1);
}

static int wait_timeout_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  void *base = NULL;
  mori_window *w = NULL;
  if (ranks_begin_block(ctx, msg, msglen, &fds0, MiB, &base, "world", &w)) return 1;
  int rc = mori_window_wait_signal(w, (ctx->rank + 1) % ctx->world, 3, NULL, 0);
  CHECK(rc == MORI_ETIMEDOUT, "expected MORI_ETIMEDOUT, got %d: %s", rc, mori_last_error());
  CHECK(mori_window_put_signal(w, ctx->world, 0, NULL, 0) == MORI_ERANGE, "rank bound");
  CHECK(mori_window_put_signal(w, 0, mori_window_max_channels(w), NULL, 0) == MORI_ERANGE,
        "channel bound");
  return ranks_end(ctx, msg, msglen, fds0, base, "wait timeout");
}

static void wait_signal_without_put_times_out(void **s) {
  (void)s;
  setenv("MORI_SIM_WAIT_TIMEOUT_MS", "300", 1);
  run_expect(2, wait_timeout_rank, NULL, -1);
  unsetenv("MORI_SIM_WAIT_TIMEOUT_MS");
}

static int no_pad_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  if (ranks_begin(ctx, msg, msglen, &fds0)) return 1;
  void *base = NULL;
  mori_window *w = NULL;
  mori_symm_set_signal_pad_size(0);
  CHECK(mori_symm_alloc(2 * MiB, ctx->rank, &base) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(base, "world", ctx->rank, ctx->world, ctx->store, &w, NULL) == 0,
        "rendezvous: %s", mori_last_error());
  size_t stride = 0;
  mori_window_span(w, &stride);
  CHECK(stride == 2 * MiB, "without a pad 2 MiB fits one granule, stride %zu", stride);
  CHECK(mori_window_barrier(w, 0, NULL, 0) == MORI_ENOTSUP, "barrier without a pad");
  return ranks_end(ctx, msg, msglen, fds0, base, "no pad");
}

/* Four threads ask for the span at once: each gets the same span, and the
 * own slot is mapped once (the shim's live mappings grow by one). */
struct span_ask {
  mori_window *w;
  char *span;
};
static void *ask_span(void *arg) {
  struct span_ask *a = arg;
  size_t stride = 0;
  a->span = mori_window_span(a->w, &stride);
  return NULL;
}

static int span_threads_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  void *base = NULL;
  mori_window *w = NULL;
  if (ranks_begin_block(ctx, msg, msglen, &fds0, MiB, &base, NULL, NULL)) return 1;
  CHECK(mori_symm_rendezvous(base, "world", ctx->rank, ctx->world, ctx->store, &w, NULL) == 0,
        "rendezvous: %s", mori_last_error());
  mori_shim_registry_counts before, after;
  mori_shim_registry(&before);
  struct span_ask asks[4];
  pthread_t t[4];
  for (int i = 0; i < 4; i++) {
    asks[i] = (struct span_ask){w, NULL};
    CHECK(pthread_create(&t[i], NULL, ask_span, &asks[i]) == 0, "pthread_create");
  }
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  mori_shim_registry(&after);
  for (int i = 0; i < 4; i++)
    CHECK(asks[i].span != NULL && asks[i].span == asks[0].span, "thread %d's span %p, thread 0's %p",
          i, (void *)asks[i].span, (void *)asks[0].span);
  CHECK(after.mappings == before.mappings + 1, "%ld mappings after four asks, %ld before",
        after.mappings, before.mappings);
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  return ranks_end(ctx, msg, msglen, fds0, base, "span threads");
}

static void the_span_asked_from_four_threads_maps_the_own_slot_once(void **s) {
  (void)s;
  run_expect(2, span_threads_rank, NULL, -1);
}

static void signal_pad_size_zero_turns_signals_off(void **s) { (void)s; run_expect(2, no_pad_rank, NULL, -1); }

/* ---- lifetimes: references, deferred teardown, closing ---- */

/* Every rank takes a reference, and the even ranks free their block while
 * holding it: the window must stay whole (own memory mapped, peers' slots
 * readable and writable, signals working) until the last release, which
 * tears it down with nothing left.  Odd ranks free with no reference at
 * the end, which tears down at once. */
static int free_with_reference_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  void *base = NULL;
  mori_window *w = NULL, *again = NULL;
  mori_symm_stats st;
  if (ranks_begin_block(ctx, msg, msglen, &fds0, MiB, &base, "world", &w)) return 1;
  CHECK(mori_window_retain(w) == 0, "retain: %s", mori_last_error());
  int early = ctx->rank % 2 == 0;
  if (early) {
    CHECK(mori_symm_free(base) == 0, "free with a reference: %s", mori_last_error());
    mori_symm_stats_get(&st);
    CHECK(st.blocks == 0 && st.deferred == 1 && st.windows == 1,
          "after free: blocks %ld deferred %ld windows %ld", st.blocks, st.deferred, st.windows);
    CHECK(mori_shim_registry_total() > 0, "the teardown ran under a live reference");
    CHECK(mori_symm_lookup(base, NULL, NULL) == MORI_ENOTFOUND, "lookup of a freed block");
    CHECK(mori_symm_rendezvous(base, "world", ctx->rank, ctx->world, ctx->store, &again, NULL) ==
              MORI_ENOTFOUND, "rendezvous of a freed block");
    CHECK(mori_symm_free(base) == MORI_ENOTFOUND, "second free");
    CHECK(strstr(mori_last_error(), "already freed") != NULL, "second free says: %s",
          mori_last_error());
  }
  /* every rank's window works whether its own block was freed or not */
  if (check_peer_access(ctx, w, msg, msglen)) return 1;
  if (ring_signal(ctx, w, 1, msg, msglen)) return 1;
  CHECK(mori_window_buffer_ptrs(w)[ctx->rank] == base, "own entry after free");
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  if (early) {
    CHECK(mori_window_release(w) == 0, "last release: %s", mori_last_error());
    mori_symm_stats_get(&st);
    CHECK(st.deferred == 0 && st.windows == 0, "after release: deferred %ld windows %ld",
          st.deferred, st.windows);
    CHECK(mori_shim_registry_total() == 0, "the last release left %ld ledger entries",
          mori_shim_registry_total());
    /* closing is a state: every later use is caught */
    CHECK(mori_window_barrier(w, 0, NULL, 0) == MORI_ESTATE, "barrier after the last release");
    CHECK(strstr(mori_last_error(), "torn down") != NULL, "says: %s", mori_last_error());
    CHECK(mori_window_release(w) == MORI_ESTATE, "release after the last release");
    CHECK(mori_window_retain(w) == MORI_ESTATE, "retain after the last release");
    CHECK(mori_window_buffer_ptrs(w) == NULL, "accessor after the last release");
  } else {
    CHECK(mori_window_release(w) == 0, "release: %s", mori_last_error());
    CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  }
  return ranks_finish(fds0, msg, msglen, "free with reference");
}

static void free_with_a_live_reference_defers_teardown_to_the_last_release(void **s) {
  (void)s;
  run_expect(4, free_with_reference_rank, NULL, -1);
}

/* A release without a free keeps everything: the cache still answers with
 * the same window, which still works; the free then tears down at once. */
static int release_without_free_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  void *base = NULL;
  mori_window *w = NULL, *again = NULL;
  if (ranks_begin_block(ctx, msg, msglen, &fds0, MiB, &base, "g", &w)) return 1;
  for (int i = 0; i < 3; i++) CHECK(mori_window_retain(w) == 0, "retain: %s", mori_last_error());
  for (int i = 0; i < 3; i++) CHECK(mori_window_release(w) == 0, "release: %s", mori_last_error());
  CHECK(mori_window_release(w) == MORI_ESTATE, "a release past the last retain");
  CHECK(mori_symm_rendezvous(base, "g", ctx->rank, ctx->world, ctx->store, &again, NULL) == 0 &&
            again == w, "the cache lost the window");
  if (check_peer_access(ctx, w, msg, msglen)) return 1;
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  CHECK(mori_shim_registry_total() == 0, "free without references left %ld ledger entries",
        mori_shim_registry_total());
  CHECK(mori_window_barrier(w, 0, NULL, 0) == MORI_ESTATE, "barrier on a torn-down window");
  return ranks_finish(fds0, msg, msglen, "release without free");
}

static void release_without_free_keeps_the_window(void **s) {
  (void)s;
  run_expect(3, release_without_free_rank, NULL, -1);
}

/* release_all tears down blocks held by references, freed or not; the
 * holders' releases afterwards are still theirs to make, once. */
static int release_all_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0;
  if (ranks_begin(ctx, msg, msglen, &fds0)) return 1;
  void *x = NULL, *y = NULL;
  mori_window *a = NULL, *b = NULL;
  CHECK(mori_symm_alloc(MiB, ctx->rank, &x) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_alloc(MiB, ctx->rank, &y) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(x, "g", ctx->rank, ctx->world, ctx->store, &a, NULL) == 0,
        "rendezvous: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(y, "g", ctx->rank, ctx->world, ctx->store, &b, NULL) == 0,
        "rendezvous: %s", mori_last_error());
  CHECK(mori_window_retain(a) == 0 && mori_window_retain(b) == 0 && mori_window_retain(b) == 0,
        "retain: %s", mori_last_error());
  CHECK(mori_window_barrier(a, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_symm_free(x) == 0, "free: %s", mori_last_error());
  CHECK(mori_symm_release_all() == 0, "release_all: %s", mori_last_error());
  mori_symm_stats st;
  mori_symm_stats_get(&st);
  CHECK(st.blocks == 0 && st.deferred == 0 && st.windows == 0,
        "after release_all: blocks %ld deferred %ld windows %ld", st.blocks, st.deferred,
        st.windows);
  CHECK(mori_shim_registry_total() == 0, "release_all left %ld ledger entries",
        mori_shim_registry_total());
  CHECK(mori_window_barrier(b, 0, NULL, 0) == MORI_ESTATE, "barrier after release_all");
  CHECK(mori_window_release(a) == 0, "the holder's release: %s", mori_last_error());
  CHECK(mori_window_release(b) == 0 && mori_window_release(b) == 0, "the holder's releases: %s",
        mori_last_error());
  CHECK(mori_window_release(b) == MORI_ESTATE, "one release too many");
  return ranks_finish(fds0, msg, msglen, "release_all with references");
}

static void release_all_with_references_outstanding_leaves_nothing(void **s) {
  (void)s;
  run_expect(2, release_all_rank, NULL, -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(single_rank_world_needs_no_peers),
      cmocka_unit_test(lifecycle_at_2_ranks),
      cmocka_unit_test(lifecycle_at_3_ranks),
      cmocka_unit_test(lifecycle_at_4_ranks),
      cmocka_unit_test(lifecycle_at_8_ranks),
      cmocka_unit_test(lifecycle_at_16_ranks),
      cmocka_unit_test(repeated_rendezvous_is_a_cache_hit),
      cmocka_unit_test(cached_rendezvous_with_another_world_size_is_a_mismatch),
      cmocka_unit_test(rendezvous_over_a_store_without_change_waits),
      cmocka_unit_test(leader_reads_an_answered_join_at_most_once_a_millisecond),
      cmocka_unit_test(a_group_agrees_its_incarnation_while_another_waits_for_its_leader),
      cmocka_unit_test(two_groups_on_one_block),
      cmocka_unit_test(a_failed_rendezvous_gives_its_signal_slot_back),
      cmocka_unit_test(alloc_exports_nothing_until_the_first_rendezvous_of_its_block),
      cmocka_unit_test(lone_windows_keep_a_chunk_an_export_and_a_block_warm),
      cmocka_unit_test(two_groups_of_one_block_signal_on_one_channel_at_once),
      cmocka_unit_test(overlapping_subgroups_keep_their_own_sequence),
      cmocka_unit_test(two_ranks_per_device_when_overlapping_devices_are_allowed),
      cmocka_unit_test(ranks_sharing_a_device_are_refused_by_default),
      cmocka_unit_test(dying_peer_gives_timeout_naming_it),
      cmocka_unit_test(rendezvous_rejects_unequal_sizes_on_every_rank),
      cmocka_unit_test(posix_fd_group_spanning_hosts_is_refused),
      cmocka_unit_test(wait_signal_without_put_times_out),
      cmocka_unit_test(signal_pad_size_zero_turns_signals_off),
      cmocka_unit_test(the_span_asked_from_four_threads_maps_the_own_slot_once),
      cmocka_unit_test(free_with_a_live_reference_defers_teardown_to_the_last_release),
      cmocka_unit_test(release_without_free_keeps_the_window),
      cmocka_unit_test(windows_share_the_device_tables_chunk_until_the_last_goes),
      cmocka_unit_test(release_all_with_references_outstanding_leaves_nothing),
  };
  setenv("MORI_SIM_DEVICES", "16", 0);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
