/*
 * test_tsan_stress.c - the core under threads, on the sim: each test forks
 * a small world and runs several threads per rank against one core.  Built
 * with -fsanitize=thread in build-tsan (tests/tsan/ci.sh) with
 * halt_on_error=1, so any data race, lock-order inversion or use after
 * free fails the rank; the tests also fail on their own checks (a call that
 * hangs, a wrong result, a leak).
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mori_cmocka.h"

#include "launch.h"
#include "rank_check.h"
#include "mori/hip_shim.h"
#include "mori/symm.h"

#define KiB (1u << 10)

/* A thread's verdict: 0, or a line saying what went wrong. */
typedef struct worker {
  pthread_t tid;
  const mori_rank_ctx *ctx;
  int index;
  void *arg;
  int failed;
  char why[512];
} worker;

static void *fail_at(worker *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->why, sizeof t->why, fmt, ap);
  va_end(ap);
  t->failed = 1;
  return NULL;
}

/* Runs fn on n threads and reports the first failure into msg. */
static int run_threads(const mori_rank_ctx *ctx, int n, void *(*fn)(void *), void *arg, char *msg,
                       size_t msglen) {
  worker *ws = calloc((size_t)n, sizeof *ws);
  CHECK(ws != NULL, "calloc");
  for (int i = 0; i < n; i++) {
    ws[i] = (worker){.ctx = ctx, .index = i, .arg = arg};
    CHECK(pthread_create(&ws[i].tid, NULL, fn, &ws[i]) == 0, "pthread_create");
  }
  int bad = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(ws[i].tid, NULL);
    if (ws[i].failed && !bad) {
      snprintf(msg, msglen, "rank %d thread %d: %s", ctx->rank, i, ws[i].why);
      bad = 1;
    }
  }
  free(ws);
  return bad;
}

static int finish(const mori_rank_ctx *ctx, int fds0, char *msg, size_t msglen) {
  CHECK(mori_symm_release_all() == 0, "release_all: %s", mori_last_error());
  long leaks = mori_shim_registry_total();
  int fds = mori_count_fds() - fds0;
  if (leaks != 0) mori_shim_registry_report(stderr);
  CHECK(leaks == 0 && fds == 0, "leaks=%ld fds=%+d", leaks, fds);
  snprintf(msg, msglen, "ok");
  return 0;
}

static void run_world(int world, mori_rank_fn fn) {
  mori_rank_result *res = calloc((size_t)world, sizeof *res);
  int failed = mori_launch(world, fn, NULL, 90000, res);
  for (int r = 0; r < world; r++)
    if (res[r].hung || res[r].signal || res[r].exit_code != 0)
      print_error("rank %d: exit %d signal %d hung %d: %s\n", r, res[r].exit_code, res[r].signal,
                  res[r].hung, res[r].msg);
  assert_int_equal(failed, 0);
  free(res);
}

/* ---- a store that says when its thread first waits ----
 * Threads of one rank order themselves by it, not by sleeps: a wait on the
 * store (a get that may block, or a wait for any change) is where a
 * rendezvous holds whatever it holds while it waits for its peers. */
typedef struct waiting_store {
  mori_store base;
  mori_store *inner;
  int *waiting; /* set at the first wait */
} waiting_store;

static int ws_set(mori_store *s, const char *key, const void *value, size_t len) {
  mori_store *in = ((waiting_store *)s)->inner;
  return in->set(in, key, value, len);
}

static int ws_get(mori_store *s, const char *key, void **value, size_t *len, int timeout_ms) {
  waiting_store *w = (waiting_store *)s;
  if (timeout_ms > 0) __atomic_store_n(w->waiting, 1, __ATOMIC_RELEASE);
  return w->inner->get(w->inner, key, value, len, timeout_ms);
}

static int ws_add(mori_store *s, const char *key, int64_t delta, int64_t *result) {
  mori_store *in = ((waiting_store *)s)->inner;
  return in->add(in, key, delta, result);
}

static int ws_wait_change(mori_store *s, int timeout_ms) {
  waiting_store *w = (waiting_store *)s;
  __atomic_store_n(w->waiting, 1, __ATOMIC_RELEASE);
  return w->inner->wait_change(w->inner, timeout_ms);
}

static void ws_destroy(mori_store *s) { (void)s; /* the launcher destroys the inner one */ }

static waiting_store waiting_store_of(mori_store *inner, int *waiting) {
  return (waiting_store){{ws_set, ws_get, ws_add, ws_destroy,
                          inner->wait_change ? ws_wait_change : NULL, inner->incarnation, NULL},
                         inner, waiting};
}

static void await_flag(const int *flag) {
  while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE)) sched_yield();
}

static int setup(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  CHECK(mori_shim_select("sim") == 0, "%s", mori_shim_message());
  mori_symm_set_timeout_ms(20000);
  return 0;
}

/* ---- alloc/free on several threads while another rendezvouses ---- */

enum { CHURN_THREADS = 3, CHURN_ROUNDS = 40, RENDEZVOUS_ROUNDS = 6 };

static void *churn(void *p) {
  worker *t = p;
  for (int i = 0; i < CHURN_ROUNDS; i++) {
    void *a = NULL;
    size_t size = (size_t)(1 + (t->index * 7 + i) % 5) * 64 * KiB;
    if (mori_symm_alloc(size, t->ctx->rank, &a) != 0)
      return fail_at(t, "alloc %d: %s", i, mori_last_error());
    size_t got = 0;
    if (mori_symm_lookup((char *)a + size - 1, &got, NULL) != 0 || got != size)
      return fail_at(t, "lookup %d: %s", i, mori_last_error());
    if (mori_symm_free(a) != 0) return fail_at(t, "free %d: %s", i, mori_last_error());
  }
  return NULL;
}

static void *rendezvous_rounds(void *p) {
  worker *t = p;
  const mori_rank_ctx *ctx = t->ctx;
  for (int i = 0; i < RENDEZVOUS_ROUNDS; i++) {
    void *a = NULL;
    mori_window *w = NULL;
    if (mori_symm_alloc(128 * KiB, ctx->rank, &a) != 0)
      return fail_at(t, "alloc: %s", mori_last_error());
    if (mori_symm_rendezvous(a, "g", ctx->rank, ctx->world, ctx->store, &w, NULL) != 0)
      return fail_at(t, "rendezvous %d: %s", i, mori_last_error());
    if (mori_window_barrier(w, 0, NULL, 0) != 0)
      return fail_at(t, "barrier %d: %s", i, mori_last_error());
    if (mori_symm_free(a) != 0) return fail_at(t, "free %d: %s", i, mori_last_error());
  }
  return NULL;
}

static void *churn_or_rendezvous(void *p) {
  worker *t = p;
  return t->index == 0 ? rendezvous_rounds(p) : churn(p);
}

static int churn_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  if (setup(ctx, msg, msglen)) return 1;
  int fds0 = mori_count_fds();
  if (run_threads(ctx, 1 + CHURN_THREADS, churn_or_rendezvous, NULL, msg, msglen)) return 1;
  return finish(ctx, fds0, msg, msglen);
}

static void alloc_and_free_on_threads_while_another_rendezvouses(void **s) {
  (void)s;
  run_world(2, churn_rank);
}

/* ---- the kept block, taken and kept on threads while another counts ----
 * Keeping warm: threads allocate and free blocks of one size, so each
 * free may keep its block and each allocation may take the kept one,
 * while another thread reads what is kept (mori_symm_warm) throughout. */

enum { WARM_THREADS = 3, WARM_ROUNDS = 40, WARM_COUNTS = 4000 };

static void *warm_churn(void *p) {
  worker *t = p;
  if (t->index == 0) {
    for (int i = 0; i < WARM_COUNTS; i++)
      if (mori_symm_warm() < 0) return fail_at(t, "warm count %d below 0", i);
    return NULL;
  }
  for (int i = 0; i < WARM_ROUNDS; i++) {
    void *a = NULL;
    if (mori_symm_alloc(256 * KiB, t->ctx->rank, &a) != 0)
      return fail_at(t, "alloc %d: %s", i, mori_last_error());
    if (mori_symm_free(a) != 0) return fail_at(t, "free %d: %s", i, mori_last_error());
  }
  return NULL;
}

static int warm_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  if (setup(ctx, msg, msglen)) return 1;
  mori_symm_set_keep_warm(1);
  int fds0 = mori_count_fds();
  if (run_threads(ctx, 1 + WARM_THREADS, warm_churn, NULL, msg, msglen)) return 1;
  CHECK(mori_symm_warm() == 3, "%ld runtime resources kept after the churn, expected a "
        "block's 3", mori_symm_warm());
  return finish(ctx, fds0, msg, msglen);
}

static void kept_blocks_taken_and_kept_on_threads_while_another_counts(void **s) {
  (void)s;
  run_world(1, warm_rank);
}

/* ---- two groups on two threads ----
 * Each thread has its own group and its own blocks; rank 1 starts with
 * beta (its alpha thread begins once beta waits on the store), rank 0 in
 * whatever order its threads get there.  A lock held across the store's
 * waits deadlocks this: rank 1's lock is held by the group rank 0 may not
 * be in yet. */

enum { GROUP_ROUNDS = 5 };

static void *group_rounds(void *p) {
  worker *t = p;
  const mori_rank_ctx *ctx = t->ctx;
  const char *group = t->index == 0 ? "alpha" : "beta";
  /* beta numbers ranks in reverse, as an overlapping subgroup might */
  int rank = t->index == 0 ? ctx->rank : ctx->world - 1 - ctx->rank, alpha_waiting = 0;
  int *beta_waiting = t->arg;
  waiting_store ws = waiting_store_of(ctx->store, t->index == 1 ? beta_waiting : &alpha_waiting);
  if (ctx->rank == 1 && t->index == 0) await_flag(beta_waiting); /* rank 1 starts with beta */
  for (int i = 0; i < GROUP_ROUNDS; i++) {
    void *a = NULL;
    mori_window *w = NULL;
    if (mori_symm_alloc(64 * KiB, ctx->rank, &a) != 0)
      return fail_at(t, "alloc: %s", mori_last_error());
    if (mori_symm_rendezvous(a, group, rank, ctx->world, &ws.base, &w, NULL) != 0)
      return fail_at(t, "%s rendezvous %d: %s", group, i, mori_last_error());
    if (mori_window_barrier(w, 0, NULL, 0) != 0)
      return fail_at(t, "%s barrier %d: %s", group, i, mori_last_error());
    if (mori_symm_free(a) != 0) return fail_at(t, "free: %s", mori_last_error());
  }
  return NULL;
}

static int two_groups_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  if (setup(ctx, msg, msglen)) return 1;
  mori_symm_set_timeout_ms(5000); /* a deadlock shows as a timeout, not a hang */
  int fds0 = mori_count_fds(), beta_waiting = 0;
  if (run_threads(ctx, 2, group_rounds, &beta_waiting, msg, msglen)) return 1;
  return finish(ctx, fds0, msg, msglen);
}

static void two_groups_rendezvous_on_two_threads(void **s) {
  (void)s;
  run_world(2, two_groups_rank);
}

/* The same over a store without the launcher's id: each group's first
 * rendezvous agrees its incarnation through rank 0 (docs/security.md),
 * both groups at once. */
static int two_groups_in_band_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  ctx->store->incarnation = NULL;
  return two_groups_rank(ctx, msg, msglen);
}

static void two_groups_agree_their_incarnations_on_two_threads(void **s) {
  (void)s;
  run_world(2, two_groups_in_band_rank);
}

/* ---- free from another thread during the block's rendezvous ----
 * Rank 0's other thread frees the block once the rendezvous waits on the
 * store for rank 1's request, and only then does rank 1 start: the free is
 * deferred (returns 0 at once), and the rendezvous, once done, reports
 * that its block was freed and leaves nothing behind. */

struct free_during {
  void *base;
  int waiting; /* rank 0's rendezvous waits on the store */
};

static void *free_during_rendezvous(void *p) {
  worker *t = p;
  struct free_during *fd = t->arg;
  const mori_rank_ctx *ctx = t->ctx;
  if (t->index == 0) {
    mori_window *w = NULL;
    waiting_store ws = waiting_store_of(ctx->store, &fd->waiting);
    if (ctx->rank == 1 && await_key(ctx->store, "test/freed") != 0)
      return fail_at(t, "rank 0 never freed its block: %s", mori_last_error());
    int rc = mori_symm_rendezvous(fd->base, "g", ctx->rank, ctx->world, &ws.base, &w, NULL);
    if (ctx->rank == 0 && rc != MORI_ENOTFOUND)
      return fail_at(t, "rendezvous of a block freed meanwhile returned %d: %s", rc,
                     mori_last_error());
    if (ctx->rank == 0 && strstr(mori_last_error(), "freed") == NULL)
      return fail_at(t, "the error does not say the block was freed: %s", mori_last_error());
    if (ctx->rank == 1 && rc != 0) return fail_at(t, "rendezvous: %s", mori_last_error());
    return NULL;
  }
  if (ctx->rank != 0) return NULL;
  await_flag(&fd->waiting); /* the rendezvous waits for rank 1's request */
  if (mori_symm_free(fd->base) != 0) return fail_at(t, "free: %s", mori_last_error());
  mori_symm_stats st;
  mori_symm_stats_get(&st);
  if (st.blocks != 0) return fail_at(t, "the freed block is still in the table");
  if (mori_symm_lookup(fd->base, NULL, NULL) != MORI_ENOTFOUND)
    return fail_at(t, "lookup of the freed block succeeded");
  if (ctx->store->set(ctx->store, "test/freed", "1", 1) != 0)
    return fail_at(t, "set: %s", mori_last_error());
  return NULL;
}

static int free_during_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  if (setup(ctx, msg, msglen)) return 1;
  int fds0 = mori_count_fds();
  struct free_during fd = {NULL, 0};
  CHECK(mori_symm_alloc(64 * KiB, ctx->rank, &fd.base) == 0, "alloc: %s", mori_last_error());
  if (run_threads(ctx, 2, free_during_rendezvous, &fd, msg, msglen)) return 1;
  if (ctx->rank == 0) {
    mori_symm_stats st;
    mori_symm_stats_get(&st);
    CHECK(st.deferred == 0 && st.windows == 0, "deferred %ld windows %ld after the rendezvous",
          st.deferred, st.windows);
    CHECK(mori_shim_registry_total() == 0, "the deferred teardown left %ld ledger entries",
          mori_shim_registry_total());
  } else {
    CHECK(mori_symm_free(fd.base) == 0, "free: %s", mori_last_error());
  }
  return finish(ctx, fds0, msg, msglen);
}

static void free_of_a_block_during_its_rendezvous_is_deferred(void **s) {
  (void)s;
  run_world(2, free_during_rank);
}

/* ---- signals on one thread while another frees ----
 * Without a reference: a thread signals its own rank in a loop (a put and
 * a wait on its own mailbox need no peer) until a call reports the window
 * gone; another frees the block meanwhile.  Every call either works or
 * fails with MORI_ESTATE; none touches freed memory.  With a reference:
 * the free is deferred, every barrier with the peer works, and the last
 * release tears down. */

struct signals_free {
  void *base;
  mori_window *w;
  volatile int calls;
};

static void *signal_own_rank(void *p) {
  worker *t = p;
  struct signals_free *sf = t->arg;
  int me = t->ctx->rank;
  if (t->index == 1) {
    while (__atomic_load_n(&sf->calls, __ATOMIC_ACQUIRE) < 50) sched_yield();
    if (mori_symm_free(sf->base) != 0) return fail_at(t, "free: %s", mori_last_error());
    return NULL;
  }
  for (int i = 0;; i++) {
    int rc = mori_window_put_signal(sf->w, me, 1, NULL, 0);
    if (rc == 0) rc = mori_window_wait_signal(sf->w, me, 1, NULL, 0);
    if (rc == MORI_ESTATE || rc == MORI_ENOTFOUND) return NULL;
    if (rc != 0) return fail_at(t, "signal %d: %d %s", i, rc, mori_last_error());
    if (mori_window_max_channels(sf->w) < 0 && i > 0) return NULL;
    __atomic_add_fetch(&sf->calls, 1, __ATOMIC_RELEASE);
    if (i > 100000) return fail_at(t, "the window never went away");
  }
}

static void *barriers_holding_a_reference(void *p) {
  worker *t = p;
  struct signals_free *sf = t->arg;
  if (t->index == 1) {
    while (__atomic_load_n(&sf->calls, __ATOMIC_ACQUIRE) < 20) sched_yield();
    if (mori_symm_free(sf->base) != 0) return fail_at(t, "free: %s", mori_last_error());
    return NULL;
  }
  for (int i = 0; i < 60; i++) {
    if (mori_window_barrier(sf->w, 0, NULL, 0) != 0)
      return fail_at(t, "barrier %d: %s", i, mori_last_error());
    __atomic_add_fetch(&sf->calls, 1, __ATOMIC_RELEASE);
  }
  if (mori_window_release(sf->w) != 0) return fail_at(t, "release: %s", mori_last_error());
  return NULL;
}

static int signals_free_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  if (setup(ctx, msg, msglen)) return 1;
  int fds0 = mori_count_fds();
  struct signals_free sf = {NULL, NULL, 0};
  CHECK(mori_symm_alloc(64 * KiB, ctx->rank, &sf.base) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(sf.base, "own", ctx->rank, ctx->world, ctx->store, &sf.w, NULL) == 0,
        "rendezvous: %s", mori_last_error());
  if (run_threads(ctx, 2, signal_own_rank, &sf, msg, msglen)) return 1;
  CHECK(mori_shim_registry_total() == 0, "free during signals left %ld ledger entries",
        mori_shim_registry_total());
  CHECK(mori_symm_alloc(64 * KiB, ctx->rank, &sf.base) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(sf.base, "held", ctx->rank, ctx->world, ctx->store, &sf.w, NULL) ==
            0, "rendezvous: %s", mori_last_error());
  CHECK(mori_window_retain(sf.w) == 0, "retain: %s", mori_last_error());
  sf.calls = 0;
  if (run_threads(ctx, 2, barriers_holding_a_reference, &sf, msg, msglen)) return 1;
  mori_symm_stats st;
  mori_symm_stats_get(&st);
  CHECK(st.deferred == 0 && st.windows == 0, "deferred %ld windows %ld", st.deferred, st.windows);
  return finish(ctx, fds0, msg, msglen);
}

static void signals_on_one_thread_while_another_frees(void **s) {
  (void)s;
  run_world(2, signals_free_rank);
}

/* ---- one (block, group) from two threads at once ----
 * The second call waits for the first one's outcome and gets its window:
 * one collective, one cache hit. */

struct same_group {
  void *base;
  mori_window *w[2];
};

static void *rendezvous_same_group(void *p) {
  worker *t = p;
  struct same_group *sg = t->arg;
  const mori_rank_ctx *ctx = t->ctx;
  if (mori_symm_rendezvous(sg->base, "g", ctx->rank, ctx->world, ctx->store, &sg->w[t->index],
                           NULL) != 0)
    return fail_at(t, "rendezvous: %s", mori_last_error());
  return NULL;
}

static int same_group_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  if (setup(ctx, msg, msglen)) return 1;
  int fds0 = mori_count_fds();
  struct same_group sg = {NULL, {NULL, NULL}};
  for (int round = 0; round < 4; round++) {
    mori_symm_stats st0, st1;
    mori_symm_stats_get(&st0);
    CHECK(mori_symm_alloc(64 * KiB, ctx->rank, &sg.base) == 0, "alloc: %s", mori_last_error());
    if (run_threads(ctx, 2, rendezvous_same_group, &sg, msg, msglen)) return 1;
    mori_symm_stats_get(&st1);
    CHECK(sg.w[0] == sg.w[1], "two windows for one (block, group)");
    CHECK(st1.rendezvous - st0.rendezvous == 1 && st1.cache_hits - st0.cache_hits == 1,
          "%ld rendezvous and %ld cache hits", st1.rendezvous - st0.rendezvous,
          st1.cache_hits - st0.cache_hits);
    CHECK(mori_window_barrier(sg.w[0], 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
    CHECK(mori_symm_free(sg.base) == 0, "free: %s", mori_last_error());
  }
  return finish(ctx, fds0, msg, msglen);
}

static void one_block_and_group_from_two_threads_is_one_rendezvous(void **s) {
  (void)s;
  run_world(3, same_group_rank);
}

/* ---- process-wide settings read and set concurrently ---- */

static void *settings(void *p) {
  worker *t = p;
  for (int i = 0; i < 300; i++) {
    switch ((t->index + i) % 6) {
    case 0:
      if (mori_shim_select("sim") != 0) return fail_at(t, "select: %s", mori_shim_message());
      break;
    case 1:
      if (mori_shim_backend() == NULL) return fail_at(t, "backend: %s", mori_shim_message());
      break;
    case 2:
      mori_symm_set_timeout_ms(10000 + i);
      if (mori_symm_timeout_ms() <= 0) return fail_at(t, "timeout");
      break;
    case 3:
      mori_symm_set_signal_pad_size(9216);
      if (mori_symm_signal_pad_size() != 9216) return fail_at(t, "pad size");
      break;
    case 4: {
      int type = 0;
      if (mori_symm_probe(t->index % 2, &type, NULL, 0) != 0)
        return fail_at(t, "probe: %s", mori_last_error());
      break;
    }
    default:
      (void)mori_hipGetLastError();
      (void)mori_symm_teardown_enabled();
      break;
    }
  }
  return NULL;
}

static int settings_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  /* no setup: the threads race to bring the shim up */
  if (run_threads(ctx, 4, settings, NULL, msg, msglen)) return 1;
  return 0;
}

static void shim_and_config_globals_read_and_set_concurrently(void **s) {
  (void)s;
  run_world(1, settings_rank);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(shim_and_config_globals_read_and_set_concurrently),
      cmocka_unit_test(alloc_and_free_on_threads_while_another_rendezvouses),
      cmocka_unit_test(kept_blocks_taken_and_kept_on_threads_while_another_counts),
      cmocka_unit_test(two_groups_rendezvous_on_two_threads),
      cmocka_unit_test(two_groups_agree_their_incarnations_on_two_threads),
      cmocka_unit_test(one_block_and_group_from_two_threads_is_one_rendezvous),
      cmocka_unit_test(free_of_a_block_during_its_rendezvous_is_deferred),
      cmocka_unit_test(signals_on_one_thread_while_another_frees),
  };
  setenv("MORI_SIM_DEVICES", "4", 0);
  setenv("MORI_SIM_WAIT_TIMEOUT_MS", "10000", 0);
  return mori_run_tests(argc, argv, tests);
}
