/*
 * test_fi_clock.c - time through the seam, under
 * LD_PRELOAD=libmori_faultinject.so: a failure of the clock, of randomness
 * or of the watchdog's thread is an error naming the call with nothing
 * left behind, and the clock the core's deadlines run on is the seam's, so
 * a test moves it ahead (mori_fi_clock_advance) instead of waiting: a wait
 * ends at its deadline without the time passing, and a stream held past
 * its timeout is no failure, since the deadline runs from when the stream
 * reaches the waits.  No case waits on a sleep: each waits on the store or
 * on the fault shim's count of a call.  ctest runs it with
 * MORI_SIM_STREAMS=async (a stream's waits are only enqueued).
 */
#include "fault_harness.h"
#include "rank_check.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "mori/hip_shim.h"

#define MiB ((size_t)1 << 20)

/* A window on a fresh block of this rank's device, in group. */
static int open_window(const mori_rank_ctx *ctx, const char *group, void **base,
                       mori_window **w) {
  if (mori_shim_select("sim") != 0) return -1;
  if (mori_symm_alloc(MiB, ctx->rank, base) != 0) return -1;
  return mori_symm_rendezvous(*base, group, ctx->rank, ctx->world, ctx->store, w, NULL);
}

/* ---- failures: named, nothing left ---- */

/* A rendezvous of two ranks; rank 0's line carries its error. */
static int rendezvous_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds() - mori_fi_own_fds();
  void *base = NULL;
  mori_window *w = NULL;
  int rc = open_window(ctx, "g", &base, &w);
  return fh_report(msg, msglen, fds0, rc, NULL);
}

/* The rank the rule hits fails naming the call, its peer with its abort;
 * both release everything. */
static void fails_naming(const char *spec, const char *named) {
  mori_rank_result res[2];
  fh_run(spec, 2, rendezvous_rank, NULL, res, -1);
  fh_assert_clean(spec, res, 2, -1);
  for (int r = 0; r < 2; r++)
    if (strstr(res[r].msg, "rc=0 ") != NULL || strstr(res[r].msg, named) == NULL)
      fail_msg("'%s': rank %d does not fail naming %s: %s", spec, r, named, res[r].msg);
}

/* A nonce the kernel could not draw is an error, not one made of the
 * clock and the pid (before: no such failure could happen, and the
 * fallback took the clock's nanoseconds as a nonce). */
static void getrandom_failing_fails_the_rendezvous_naming_it(void **s) {
  (void)s;
  fails_naming("rank=0 getrandom#1=ENOSYS", "getrandom: Function not implemented");
}

/* A wait that cannot read the clock cannot keep its deadline. */
static void clock_failing_in_a_wait_fails_the_rendezvous_naming_it(void **s) {
  (void)s;
  fails_naming("rank=0 clock_gettime#*=EINVAL", "clock_gettime(CLOCK_MONOTONIC): Invalid argument");
}

/* An interrupted nap is a short one: over a store without its watch (no
 * inotify), which naps between attempts, with every nap interrupted, a get
 * of a key nobody sets still ends at its deadline, by the clock. */
static int napping_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds() - mori_fi_own_fds();
  mori_store *st = NULL;
  void *v = NULL;
  size_t len = 0;
  char extra[64];
  mori_fi_counts c0, c1;
  int rc = mori_file_store_open(ctx->store_dir, &st);
  if (rc == 0) {
    (void)mori_fi_counts_get(&c0);
    rc = st->get(st, "never", &v, &len, 50);
    (void)mori_fi_counts_get(&c1);
    st->destroy(st);
  }
  snprintf(extra, sizeof extra, "naps=%ld",
           c1.calls[MORI_FI_CALL_nanosleep] - c0.calls[MORI_FI_CALL_nanosleep]);
  return fh_report(msg, msglen, fds0, rc, extra);
}

static void interrupted_naps_are_short_ones(void **s) {
  (void)s;
  mori_rank_result res[1];
  const char *spec = "inotify_init1#*=EMFILE;nanosleep#*=EINTR";
  fh_run(spec, 1, napping_rank, NULL, res, -1);
  fh_assert_clean(spec, res, 1, -1);
  if (strstr(res[0].msg, "rc=-4 ") == NULL || fh_num(res[0].msg, "naps") < 1 ||
      strstr(res[0].msg, "key 'never' not set within 50 ms") == NULL)
    fail_msg("%s", res[0].msg);
}

/* The watchdog's thread not started: the bounded call fails naming
 * pthread_create, its entry and events released; the next bounded call
 * starts the thread. */
static int bounded_barrier_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds() - mori_fi_own_fds();
  void *base = NULL;
  mori_window *w = NULL;
  char extra[700] = "first=-";
  int rc = open_window(ctx, "bounded", &base, &w);
  if (rc == 0) {
    int first = mori_window_barrier(w, 0, NULL, 30000);
    if (first != 0) snprintf(extra, sizeof extra, "first=%d %s", first, mori_last_error());
    rc = mori_window_barrier(w, 0, NULL, 30000);
    if (rc == 0) rc = mori_hipStreamSynchronize(NULL) == hipSuccess ? 0 : -1;
  }
  if (rc == 0) rc = mori_symm_free(base);
  return fh_report(msg, msglen, fds0, rc, extra);
}

static void the_watchdog_s_thread_failing_fails_the_call_naming_it(void **s) {
  (void)s;
  mori_rank_result res[2];
  const char *spec = "thread_create#1=EAGAIN";
  fh_run(spec, 2, bounded_barrier_rank, NULL, res, -1);
  fh_assert_clean(spec, res, 2, -1);
  for (int r = 0; r < 2; r++) {
    if (strstr(res[r].msg, "rc=0 ") == NULL) fail_msg("rank %d: %s", r, res[r].msg);
    if (strstr(res[r].msg, "first=-2 ") == NULL ||
        strstr(res[r].msg, "cannot start the watchdog thread: "
                           "pthread_create: Resource temporarily unavailable") == NULL)
      fail_msg("rank %d's first bounded barrier: %s", r, res[r].msg);
  }
}

/* The watchdog, which answers to no call, cannot read the clock: it fails
 * the window it watches, naming the call, and the next signal call on it
 * reports that.  The clock fails from the moment the bounded barrier is
 * enqueued, so every read after is the watchdog's or the call's; the test
 * waits until two of them were failed (a whole look of the watchdog's
 * after the first). */
static int clockless_watchdog_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds() - mori_fi_own_fds();
  void *base = NULL;
  mori_window *w = NULL;
  char extra[700] = "next=-";
  int rc = open_window(ctx, "clockless", &base, &w);
  if (rc == 0 && ctx->rank == 0) {
    char err[256];
    hipStream_t s = NULL;
    rc = mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking) == hipSuccess ? 0 : -1;
    if (rc == 0) rc = mori_fi_control("clock_gettime#*=EINVAL", err, sizeof err);
    if (rc == 0) (void)mori_window_barrier(w, 0, s, 30000); /* its own report may be either */
    for (long i = 0; rc == 0 && i < 100000000 && mori_fi_injected() < 2; i++) sched_yield();
    (void)mori_fi_control("", err, sizeof err);
    if (rc == 0) rc = mori_hipStreamSynchronize(s) == hipSuccess ? 0 : -1;
    if (s != NULL) (void)mori_hipStreamDestroy(s);
    int next = rc == 0 ? mori_window_barrier(w, 1, NULL, 0) : 0;
    if (rc == 0) snprintf(extra, sizeof extra, "next=%d %s", next, next ? mori_last_error() : "");
  } else if (rc == 0) {
    rc = mori_window_barrier(w, 0, NULL, 0);
    if (rc == 0) rc = mori_hipStreamSynchronize(NULL) == hipSuccess ? 0 : -1;
  }
  if (rc == 0) rc = mori_symm_free(base);
  return fh_report(msg, msglen, fds0, rc, extra);
}

static void the_watchdog_without_a_clock_fails_its_window_naming_it(void **s) {
  (void)s;
  mori_rank_result res[2];
  fh_run("", 2, clockless_watchdog_rank, NULL, res, -1);
  fh_assert_clean("", res, 2, -1);
  for (int r = 0; r < 2; r++)
    if (strstr(res[r].msg, "rc=0 ") == NULL) fail_msg("rank %d: %s", r, res[r].msg);
  if (strstr(res[0].msg, " next=-4 barrier: barrier on channel 0: the deadline of 30000 ms "
                         "cannot be kept: watchdog: clock_gettime(CLOCK_MONOTONIC): Invalid "
                         "argument") == NULL)
    fail_msg("rank 0's next signal call: %s", res[0].msg);
}

/* ---- the clock moved ahead ---- */

/* Rank 0's rendezvous waits 120 s for rank 1, which never comes; once its
 * request is in the store (it waits now), another thread moves the clock
 * 121 s ahead each time the core has read it twice since: at the first
 * move after the wait took its deadline, the wait ends, now. */
struct advancer {
  const mori_rank_ctx *ctx;
  int done;
  long advanced;
};

static long clock_reads(void) {
  mori_fi_counts c;
  return mori_fi_counts_get(&c) == 0 ? c.calls[MORI_FI_CALL_clock_gettime] : -1;
}

static void *advance_while_waiting(void *arg) {
  struct advancer *a = arg;
  char key[256];
  snprintf(key, sizeof key, "mori_symm/alone/%s/0/req/0", a->ctx->incarnation);
  if (await_key(a->ctx->store, key) != 0) return NULL;
  while (!__atomic_load_n(&a->done, __ATOMIC_ACQUIRE)) {
    a->advanced = mori_fi_clock_advance(121000);
    long from = clock_reads();
    while (clock_reads() < from + 2 && !__atomic_load_n(&a->done, __ATOMIC_ACQUIRE))
      sched_yield();
  }
  return NULL;
}

static int alone_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds() - mori_fi_own_fds();
  void *base = NULL;
  mori_window *w = NULL;
  char extra[64] = "";
  if (ctx->rank != 0) return fh_report(msg, msglen, fds0, 0, "absent");
  if (mori_shim_select("sim") != 0) return 1;
  mori_symm_set_timeout_ms(120000);
  int rc = mori_symm_alloc(MiB, 0, &base);
  struct advancer a = {ctx, 0, 0};
  pthread_t t;
  if (rc == 0 && pthread_create(&t, NULL, advance_while_waiting, &a) != 0) rc = -1;
  if (rc == 0) {
    rc = mori_symm_rendezvous(base, "alone", 0, ctx->world, ctx->store, &w, NULL);
    __atomic_store_n(&a.done, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
  }
  snprintf(extra, sizeof extra, "advanced=%ld", a.advanced);
  return fh_report(msg, msglen, fds0, rc, extra);
}

static void a_wait_ends_at_its_deadline_when_the_clock_is_moved_past_it(void **s) {
  (void)s;
  mori_rank_result res[2];
  fh_run("", 2, alone_rank, NULL, res, -1);
  fh_assert_clean("", res, 2, -1);
  if (strstr(res[0].msg, "rc=-4 ") == NULL || fh_num(res[0].msg, "advanced") < 121000 ||
      strstr(res[0].msg, "timed out after 120000 ms waiting for req from rank(s) 1") == NULL)
    fail_msg("rank 0: %s", res[0].msg);
}

/* The deadline of a bounded wait runs from when the stream reaches it, not
 * from the call: rank 0's stream is held (a gate on host memory) while its
 * wait_signal of 600 ms is queued behind the gate; once the watchdog looked
 * at the entry, the clock moves 6 s ahead, and the watchdog looks at it
 * again on the moved clock (the fault shim counts its hipEventQuery calls,
 * two an entry each look).  Only then
 * does rank 1 put its signal, and only once the signal is in does rank 0
 * open the gate: the wait finds it and nothing expires.  A deadline
 * counted from the call would have expired at the watchdog's look, with
 * rank 1 absent. */
enum { CH = 1, HELD_TIMEOUT_MS = 600 };

static long event_queries(void) {
  mori_fi_counts c;
  return mori_fi_counts_get(&c) == 0 ? c.calls[MORI_FI_CALL_hipEventQuery] : -1;
}

static long expired(void) {
  mori_symm_signal_stats st;
  mori_symm_signal_stats_get(&st);
  return st.expired;
}

/* Until the watchdog made n more hipEventQuery calls than at `from`, or
 * released an expired entry (after which it has nothing left to look at:
 * the final count reports the expiry). */
static int await_queries(long from, long n) {
  long gone = expired();
  for (long i = 0; i < 100000000 && event_queries() < from + n && expired() == gone; i++)
    sched_yield();
  return event_queries() >= from + n || expired() != gone ? 0 : -1;
}

static int held_stream_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds() - mori_fi_own_fds();
  void *base = NULL;
  mori_window *w = NULL;
  hipStream_t s = NULL;
  char extra[200] = "";
  mori_symm_signal_stats s0, s1;
  int rc = open_window(ctx, "held", &base, &w);
  if (rc != 0) return fh_report(msg, msglen, fds0, rc, "step=open");
  mori_symm_signal_stats_get(&s0);
  const char *step = "stream";
  uint32_t *gate = NULL; /* pinned: a stream operation reaches no other host memory */
  if (mori_hipHostMalloc((void **)&gate, 64, 0) == hipSuccess) memset(gate, 0, 64);
  if (ctx->rank == 0) {
    rc = mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking) == hipSuccess &&
                 mori_hipStreamWaitValue32(s, gate, 1, hipStreamWaitValueEq, ~0u) == hipSuccess
             ? 0
             : -1;
    if (rc == 0) step = "wait_signal", rc = mori_window_wait_signal(w, 1, CH, s, HELD_TIMEOUT_MS);
    /* the watchdog looked at the entry before the clock moves, and again
     * (a whole look, two queries) after */
    if (rc == 0) step = "watchdog's first look", rc = await_queries(event_queries(), 2);
    long from = mori_fi_clock_advance(10 * HELD_TIMEOUT_MS) >= 0 ? event_queries() : -1;
    if (rc == 0) step = "watchdog's looks", rc = from < 0 ? -1 : await_queries(from, 4);
    if (rc == 0) step = "looked", rc = ctx->store->set(ctx->store, "looked", "1", 1);
    if (rc == 0) step = "signalled", rc = await_key(ctx->store, "signalled");
    if (gate) __atomic_store_n(gate, 1, __ATOMIC_RELEASE); /* host memory: the host's to write */
    if (rc == 0) step = "sync", rc = mori_hipStreamSynchronize(s) == hipSuccess ? 0 : -1;
    if (s != NULL) (void)mori_hipStreamDestroy(s);
  } else {
    step = "looked", rc = await_key(ctx->store, "looked");
    if (rc == 0) step = "put_signal", rc = mori_window_put_signal(w, 0, CH, NULL, 0);
    if (rc == 0) step = "sync", rc = mori_hipStreamSynchronize(NULL) == hipSuccess ? 0 : -1;
    if (rc == 0) step = "signalled", rc = ctx->store->set(ctx->store, "signalled", "1", 1);
  }
  /* the window is not failed: a later signal call on it passes (a put and
   * a wait on the rank's own mailbox, which need no peer) */
  if (rc == 0) step = "own put", rc = mori_window_put_signal(w, ctx->rank, 2, NULL, 0);
  if (rc == 0) step = "own wait", rc = mori_window_wait_signal(w, ctx->rank, 2, NULL, 0);
  if (rc == 0) step = "own sync", rc = mori_hipStreamSynchronize(NULL) == hipSuccess ? 0 : -1;
  mori_symm_signal_stats_get(&s1);
  if (gate) (void)mori_hipHostFree(gate);
  snprintf(extra, sizeof extra, "step=%s expired=%ld watched=%ld", rc ? step : "-",
           s1.expired - s0.expired, s1.watched - s0.watched);
  if (rc == 0) rc = mori_symm_free(base);
  return fh_report(msg, msglen, fds0, rc, extra);
}

static void a_stream_held_past_the_timeout_is_no_failure(void **s) {
  (void)s;
  mori_rank_result res[2];
  fh_run("", 2, held_stream_rank, NULL, res, -1);
  fh_assert_clean("", res, 2, -1);
  for (int r = 0; r < 2; r++)
    if (strstr(res[r].msg, "rc=0 ") == NULL || fh_num(res[r].msg, "expired") != 0)
      fail_msg("rank %d: %s", r, res[r].msg);
  assert_int_equal(fh_num(res[0].msg, "watched"), 1);
}

/* A refused start is not remembered: once the thread could not start, a
 * later bounded wait whose peer never comes is still watched, expires and
 * is released, and the next call reports it (a start taken as done, or a
 * thread told to stop, leaves the late peer waited for forever).  Every
 * rank's first bounded barrier is refused; rank 0 then waits 100 ms for a
 * signal rank 1 puts only if no release came within 10 s (so that an
 * unwatched wait ends, and the test says so rather than hang). */
static int unwatched_wait_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds() - mori_fi_own_fds();
  void *base = NULL;
  mori_window *w = NULL;
  char extra[700] = "first=- expired=-";
  void *verdict = NULL;
  size_t len = 0;
  int rc = open_window(ctx, "refused", &base, &w);
  int first = rc == 0 ? mori_window_barrier(w, 0, NULL, 30000) : 0;
  if (rc == 0 && ctx->rank == 0) {
    long gone = expired();
    rc = mori_window_wait_signal(w, 1, CH, NULL, 100);
    for (time_t until = time(NULL) + 10; rc == 0 && expired() == gone && time(NULL) < until;)
      sched_yield();
    long n = expired() - gone;
    if (rc == 0) rc = ctx->store->set(ctx->store, "verdict", n ? "released" : "unwatched", 9);
    if (rc == 0) rc = mori_hipStreamSynchronize(NULL) == hipSuccess ? 0 : -1;
    /* a window not failed would wait in this barrier for rank 1, gone */
    int next = rc == 0 && n > 0 ? mori_window_barrier(w, 0, NULL, 0) : 0;
    snprintf(extra, sizeof extra, "first=%d expired=%ld next=%d %s", first, n, next,
             next ? mori_last_error() : "");
  } else if (rc == 0) {
    snprintf(extra, sizeof extra, "first=%d", first);
    rc = ctx->store->get(ctx->store, "verdict", &verdict, &len, 60000);
    if (rc == 0 && memcmp(verdict, "unwatched", 9) == 0) {
      rc = mori_window_put_signal(w, 0, CH, NULL, 0);
      if (rc == 0) rc = mori_hipStreamSynchronize(NULL) == hipSuccess ? 0 : -1;
    }
    free(verdict);
  }
  if (rc == 0) rc = mori_symm_free(base);
  return fh_report(msg, msglen, fds0, rc, extra);
}

static void a_refused_start_leaves_later_waits_watched(void **s) {
  (void)s;
  mori_rank_result res[2];
  const char *spec = "thread_create#1=EAGAIN";
  fh_run(spec, 2, unwatched_wait_rank, NULL, res, -1);
  fh_assert_clean(spec, res, 2, -1);
  for (int r = 0; r < 2; r++)
    if (strstr(res[r].msg, "rc=0 ") == NULL || strstr(res[r].msg, "first=-2 ") == NULL)
      fail_msg("rank %d: %s", r, res[r].msg);
  if (fh_num(res[0].msg, "expired") != 1 ||
      strstr(res[0].msg, " next=-4 barrier: wait_signal on channel 1: rank(s) 1 never signalled "
                         "within 100 ms") == NULL)
    fail_msg("rank 0's wait after the refused start was %s: %s",
             fh_num(res[0].msg, "expired") ? "not reported" : "never released", res[0].msg);
}

int main(int argc, char **argv) {
  if (!mori_fi_loaded()) {
    fprintf(stderr, "test_fi_clock needs LD_PRELOAD=libmori_faultinject.so\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(getrandom_failing_fails_the_rendezvous_naming_it),
      cmocka_unit_test(clock_failing_in_a_wait_fails_the_rendezvous_naming_it),
      cmocka_unit_test(interrupted_naps_are_short_ones),
      cmocka_unit_test(the_watchdog_s_thread_failing_fails_the_call_naming_it),
      cmocka_unit_test(a_refused_start_leaves_later_waits_watched),
      cmocka_unit_test(the_watchdog_without_a_clock_fails_its_window_naming_it),
      cmocka_unit_test(a_wait_ends_at_its_deadline_when_the_clock_is_moved_past_it),
      cmocka_unit_test(a_stream_held_past_the_timeout_is_no_failure),
  };
  (void)argc, (void)argv;
  return cmocka_run_group_tests(tests, NULL, NULL);
}
