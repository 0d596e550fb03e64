/*
 * test_fi_signals.c - a signal call that fails partway, under the fault
 * shim (LD_PRELOAD=libmori_faultinject.so): each operation of an eager
 * barrier (3 ranks: two remote writes, then two waits) and of a put and of
 * a wait (2 ranks: a wait, then a remote write) fails in turn, one runtime
 * call per operation (MORI_SYMM_MEMOP_BATCH=0), the waits run in the call
 * (the sim's sync streams).  Whatever failed, the window is then either
 * failed for good or its counts are what its peers saw: a call that sent
 * nothing is the same call when called again (the ranks then run rounds of
 * barriers that order every rank's write before every peer's read, and
 * put/wait rounds); one that failed after a signal left fails the window
 * (every later call on it fails, and its peers fail with their timeout).
 * A barrier whose writes all left but whose wait failed, counted as done,
 * let rank 0 run two barriers ahead of its peers and break the phases:
 * its peers hung to their timeout while it passed a barrier alone.  And a
 * barrier whose one batch failed (it may have reached some peers: where
 * the runtime has no batch call the shim issues the operations one by one)
 * fails the window for good; a failed kernel launch sent nothing.  A
 * forced kernel engine whose kernels the rendezvous could not ready
 * readies them in a captured call or fails it, never falling back to
 * memory operations unsaid.
 */
#include "mori/fi.h"
#include "signal_rounds.h"

/* What the peers saw of rank 0's failed call, so what comes next. */
enum outcome {
  REPEATED, /* it reached no peer: called again, it is the same call */
  FAILED    /* it reached some or all, but not every wait of it ran: the
             * window is failed for good */
};

struct fault {
  const char *rule; /* MORI_FI, set in the faulted rank just before its call */
  enum outcome outcome;
};

/* The call made with the rule in force failed with the injected error;
 * the rule goes. */
static int faulted(const mori_rank_ctx *ctx, const char *rule, int rc_of_call, char *msg,
                   size_t msglen) {
  char err[256];
  (void)mori_fi_control("", err, sizeof err);
  CHECK(rc_of_call == MORI_EHIP && strstr(mori_last_error(), "injected") != NULL,
        "'%s': expected the injected failure, got %d: %s", rule, rc_of_call, mori_last_error());
  return 0;
}

/* This rank's next calls under rule (its counts start again from zero). */
static int arm(const mori_rank_ctx *ctx, const char *rule, char *msg, size_t msglen) {
  char err[256];
  CHECK(mori_fi_control(rule, err, sizeof err) == 0, "MORI_FI '%s': %s", rule, err);
  return 0;
}

/* Each case sets the engine and the batching it runs with (a case that
 * failed returns early, so nothing is set back). */
static void setting(const char *engine, const char *batch) {
  if (engine) setenv("MORI_SYMM_SIGNAL_ENGINE", engine, 1);
  else unsetenv("MORI_SYMM_SIGNAL_ENGINE");
  if (batch) setenv("MORI_SYMM_MEMOP_BATCH", batch, 1);
  else unsetenv("MORI_SYMM_MEMOP_BATCH");
}

/* ---- a barrier, 3 ranks ---- */

static int barrier_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const struct fault *f = ctx->arg;
  int fds0 = mori_count_fds(), ch = 0;
  void *base = NULL;
  mori_window *w = NULL;
  if (open_window(ctx, "partway", &base, &w, msg, msglen)) return 1;
  CHECK(mori_window_barrier(w, ch, NULL, 0) == 0, "barrier: %s", mori_last_error());
  if (ctx->rank == 0) {
    if (arm(ctx, f->rule, msg, msglen)) return 1;
    int rc = mori_window_barrier(w, ch, NULL, 0);
    if (faulted(ctx, f->rule, rc, msg, msglen)) return 1;
    if (f->outcome == FAILED) {
      rc = mori_window_barrier(w, ch, NULL, 0);
      CHECK(rc == MORI_ESTATE && strstr(mori_last_error(), "the window is failed") != NULL,
            "'%s': the window should be failed for good, got %d: %s", f->rule, rc,
            mori_last_error());
      CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
      return ranks_finish(fds0, msg, msglen, "failed for good");
    }
    if (f->outcome == REPEATED)
      CHECK(mori_window_barrier(w, ch, NULL, 0) == 0, "'%s': the barrier called again: %s",
            f->rule, mori_last_error());
  } else if (f->outcome == FAILED) {
    /* some peer of rank 0 never hears from it again: its barrier (the
     * failed one, or the next) fails with its timeout.  (Which rank it
     * names is the first wait's of a batch that timed out in the call, in
     * the sim's sync mode; the watchdog names the absent ones.) */
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0; i++) rc = mori_window_barrier(w, ch, NULL, 0);
    CHECK(rc == MORI_ETIMEDOUT && strstr(mori_last_error(), "never signalled") != NULL,
          "'%s': expected a timeout, got %d: %s", f->rule, rc, mori_last_error());
    CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
    return ranks_finish(fds0, msg, msglen, "peer of a failed window");
  } else {
    CHECK(mori_window_barrier(w, ch, NULL, 0) == 0, "barrier: %s", mori_last_error());
  }
  if (ordered_rounds(ctx, w, ch, 6, msg, msglen)) return 1;
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "in step");
}

/* A barrier of rank r of 3 is: write to r + 1, write to r + 2, wait for
 * r - 1, wait for r - 2. */
static void barrier_fails_partway_at_each_operation(void **s) {
  static const struct fault faults[] = {
      {"hipStreamWriteValue32#1=hipErrorInvalidValue", REPEATED},
      {"hipStreamWriteValue32#2=hipErrorInvalidValue", FAILED},
      {"hipStreamWaitValue32#1=hipErrorInvalidValue", FAILED},
      {"hipStreamWaitValue32#2=hipErrorInvalidValue", FAILED},
  };
  setting(NULL, "0");
  for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
    print_message("barrier, rank 0: %s\n", faults[i].rule);
    ranks_run(3, barrier_rank, (void *)&faults[i], 0);
  }
}

/* One batch for the whole barrier failed: whether it reached a peer is
 * unknown, so the window is failed for good. */
static void barrier_whose_batch_failed_fails_the_window(void **s) {
  static const struct fault batch = {"hipStreamBatchMemOp#1=hipErrorUnknown", FAILED};
  setting(NULL, NULL);
  ranks_run(3, barrier_rank, (void *)&batch, 0);
}

/* The kernel engine: one launch, which happened or not; one that failed
 * reached no peer. */
static void barrier_whose_kernel_launch_failed_is_called_again(void **s) {
  static const struct fault launch = {"hipModuleLaunchKernel#1=hipErrorLaunchFailure", REPEATED};
  setting("kernel", "0");
  ranks_run(3, barrier_rank, (void *)&launch, 0);
}

/* ---- a put and a wait, 2 ranks ---- */

struct pw_fault {
  int rank; /* 0: rank 0's put fails; 1: rank 1's wait fails */
  const char *rule;
};

/* Round k: rank 0 puts, rank 1 waits and checks the word rank 0 wrote
 * before its put (a word per round: the next is written while the last is
 * read).  The faulted call of round 2 reached no peer (a put's or
 * a wait's one remote write is its last operation), so it is called again;
 * rounds 3 and 4 then need every count right: a put one ahead would wait
 * for an acknowledgement never sent, a wait one ahead for a signal never
 * put. */
static int putwait_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const struct pw_fault *f = ctx->arg;
  int fds0 = mori_count_fds(), ch = 1;
  void *base = NULL;
  mori_window *w = NULL;
  if (open_window(ctx, "partway", &base, &w, msg, msglen)) return 1;
  for (int k = 1; k <= 4; k++) {
    int faulty = k == 2 && f->rank == ctx->rank;
    if (faulty && arm(ctx, f->rule, msg, msglen)) return 1;
    int rc;
    if (ctx->rank == 0) {
      CHECK(put_word(w, 1, k, (uint32_t)k) == 0, "write: %s", mori_shim_message());
      rc = mori_window_put_signal(w, 1, ch, NULL, 0);
    } else {
      rc = mori_window_wait_signal(w, 0, ch, NULL, 0);
    }
    if (faulty) {
      if (faulted(ctx, f->rule, rc, msg, msglen)) return 1;
      rc = ctx->rank == 0 ? mori_window_put_signal(w, 1, ch, NULL, 0)
                          : mori_window_wait_signal(w, 0, ch, NULL, 0);
    }
    CHECK(rc == 0, "round %d: %s", k, mori_last_error());
    if (ctx->rank == 1)
      CHECK(get_word(w, 1, k) == (uint32_t)k, "round %d: word %u", k, get_word(w, 1, k));
  }
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "in step");
}

/* A put k > 1 is: wait for the acknowledgement of k - 1, write k to the
 * receiver; a wait j: wait for signal j, acknowledge j to the sender. */
static void put_and_wait_fail_partway_at_each_operation(void **s) {
  static const struct pw_fault faults[] = {
      {0, "hipStreamWaitValue32#1=hipErrorInvalidValue"},
      {0, "hipStreamWriteValue32#1=hipErrorInvalidValue"},
      {1, "hipStreamWaitValue32#1=hipErrorInvalidValue"},
      {1, "hipStreamWriteValue32#1=hipErrorInvalidValue"},
  };
  setting(NULL, "0");
  for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
    print_message("%s, rank %d: %s\n", faults[i].rank ? "wait" : "put", faults[i].rank,
                  faults[i].rule);
    ranks_run(2, putwait_rank, (void *)&faults[i], 0);
  }
}

/* ---- a forced kernel whose kernels are not ready ---- */

/* MORI_SYMM_SIGNAL_ENGINE=kernel, and rank 0's rendezvous could not ready
 * the kernels (its pinned allocation for their failure words refused: a
 * WARN, memory operations until a call outside a capture readies them).
 * Its first call is captured: the forced kernel readies them there or
 * fails naming them (the sim refuses a pinned allocation in a capture, as
 * CUDA's global capture mode does), and never captures memory operations
 * in their place.  Its next call, eager, readies them, and both ranks go
 * on in step. */
static int unready_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds(), ch = 0;
  void *base = NULL;
  mori_window *w = NULL;
  if (ctx->rank == 0 && arm(ctx, "hipHostMalloc#1=hipErrorOutOfMemory", msg, msglen)) return 1;
  if (open_window(ctx, "unready", &base, &w, msg, msglen)) return 1;
  if (ctx->rank == 0) {
    char err[256], cause[700] = "(memory operations captured in their place)";
    hipStream_t s = NULL;
    mori_sim_graph *g = NULL;
    mori_symm_signal_stats k0, k1;
    CHECK(mori_fi_injected() == 1, "the rendezvous made no pinned allocation to refuse");
    (void)mori_fi_control("", err, sizeof err);
    CHECK(mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking) == hipSuccess, "stream: %s",
          mori_shim_message());
    mori_symm_signal_stats_get(&k0);
    CHECK(mori_sim_begin_capture(s) == hipSuccess, "capture: %s", mori_shim_message());
    int rc = mori_window_barrier(w, 1, s, 0);
    if (rc != 0) snprintf(cause, sizeof cause, "%s", mori_last_error());
    CHECK(mori_sim_end_capture(s, &g) == hipSuccess, "end capture: %s", mori_shim_message());
    mori_symm_signal_stats_get(&k1);
    long kernels = k1.kernels - k0.kernels;
    CHECK((rc != 0 && strstr(cause, "barrier: the signal kernels: ") != NULL) ||
              (rc == 0 && kernels == 1),
          "a forced kernel captured before its kernels are ready: rc %d, %ld kernel(s): %s", rc,
          kernels, cause);
    mori_sim_graph_destroy(g);
    CHECK(mori_hipStreamDestroy(s) == hipSuccess, "stream destroy");
  }
  if (ordered_rounds(ctx, w, ch, 2, msg, msglen)) return 1;
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "kernels readied after a refusal");
}

static void a_forced_kernel_captured_before_its_kernels_are_ready_readies_or_fails(void **s) {
  setting("kernel", NULL);
  ranks_run(2, unready_rank, NULL, 0);
}

int main(int argc, char **argv) {
  if (!mori_fi_loaded()) {
    fprintf(stderr, "test_fi_signals needs LD_PRELOAD=libmori_faultinject.so\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(barrier_fails_partway_at_each_operation),
      cmocka_unit_test(barrier_whose_batch_failed_fails_the_window),
      cmocka_unit_test(barrier_whose_kernel_launch_failed_is_called_again),
      cmocka_unit_test(put_and_wait_fail_partway_at_each_operation),
      cmocka_unit_test(a_forced_kernel_captured_before_its_kernels_are_ready_readies_or_fails),
  };
  return mori_run_tests(argc, argv, tests);
}
