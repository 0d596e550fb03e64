/*
 * test_out_of_memory.c - every host allocation of the core fails in turn,
 * on the sim.  The test interposes the allocation seam (mori_malloc,
 * mori_calloc, mori_realloc, mori_strdup: the core reaches them through
 * the PLT, as the fault shim does) and fails the Nth call from the moment
 * it is armed, for N = 1, 2, ... until a run needs fewer.  Each time the
 * API call that made the allocation fails with MORI_ENOMEM, and nothing
 * leaks on any rank: shim ledger 0, fds back, no block or window left.
 * The ledgers' growth is among these calls (fsm's allocator is the seam).
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "launch.h"
#include "mori/hip_shim.h"
#include "mori/symm.h"
#include "rank_check.h"

/* ---- the seam, interposed: the countdown-th allocation fails, once ---- */

static long countdown; /* 0: off */
static int injected;

static int fail_now(void) {
  if (countdown > 0 && --countdown == 0) {
    injected = 1;
    return 1;
  }
  return 0;
}

#define MORI_TEST_SEAM(ret, name, params, args)                                      \
  ret mori_##name params {                                                           \
    static ret(*real) params;                                                        \
    if (real == NULL) *(void **)&real = dlsym(RTLD_NEXT, "mori_" #name);              \
    return fail_now() ? NULL : real args;                                            \
  }
MORI_TEST_SEAM(void *, malloc, (size_t size), (size))
MORI_TEST_SEAM(void *, calloc, (size_t count, size_t size), (count, size))
MORI_TEST_SEAM(void *, realloc, (void *ptr, size_t size), (ptr, size))
MORI_TEST_SEAM(char *, strdup, (const char *s), (s))

/* ---- one rank: alloc, rendezvous, barrier, free ---- */

enum { RAN_CLEAN = 42 }; /* the exit code of a failing rank that had no allocation left to fail */

typedef struct plan {
  long fail_at;     /* the allocation of rank 0 that fails (counted from arming) */
  int arm_at_alloc; /* 1: count from alloc; 0: from the rendezvous */
} plan;

static int leftovers(const mori_rank_ctx *ctx, int fds0, char *msg, size_t msglen) {
  mori_symm_stats st;
  CHECK(mori_symm_release_all() == 0, "release_all: %s", mori_last_error());
  mori_symm_stats_get(&st);
  CHECK(st.blocks == 0 && st.windows == 0 && st.deferred == 0,
        "blocks %ld windows %ld deferred %ld left", st.blocks, st.windows, st.deferred);
  long leaks = mori_shim_registry_total();
  if (leaks != 0) mori_shim_registry_report(stderr);
  CHECK(leaks == 0, "%ld shim ledger entries leaked", leaks);
  CHECK(mori_count_fds() == fds0, "fds %+d", mori_count_fds() - fds0);
  return 0;
}

static int oom_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const plan *p = ctx->arg;
  CHECK(mori_shim_select("sim") == 0, "%s", mori_shim_message());
  mori_symm_set_timeout_ms(1500); /* peers of a rank that failed before publishing */
  int fds0 = mori_count_fds();
  int me = ctx->rank == 0;
  void *base = NULL;
  mori_window *w = NULL;
  const char *call = "alloc";
  if (me && p->arm_at_alloc) countdown = p->fail_at;
  int rc = mori_symm_alloc(1 << 20, ctx->rank, &base);
  if (rc == 0) {
    call = "rendezvous";
    if (me && !p->arm_at_alloc) countdown = p->fail_at;
    rc = mori_symm_rendezvous(base, "g", ctx->rank, ctx->world, ctx->store, &w, NULL);
  }
  if (rc == 0) {
    call = "barrier";
    rc = mori_window_barrier(w, 0, NULL, 0);
  }
  if (rc == 0) {
    call = "free";
    rc = mori_symm_free(base);
    base = NULL;
  }
  countdown = 0;
  /* The one step that may absorb a failed allocation: a finished
   * rendezvous's removal of its store keys is best effort (a key left
   * behind is stale under the next run's incarnation), so a store
   * operation refused there leaves the call's result alone. */
  const char *err = mori_last_error();
  int in_cleanup = rc == 0 && (strncmp(err, "file store: add", 15) == 0 ||
                               strncmp(err, "file store: remove", 18) == 0);
  if (me && injected && in_cleanup) {
    call = "the rendezvous's store cleanup";
  } else if (me && injected) {
    CHECK(rc == MORI_ENOMEM, "%s returned %s after an allocation failed: %s", call,
          mori_error_name(rc), mori_last_error());
    CHECK(mori_last_error()[0] != '\0', "%s failed without a message", call);
  } else if (me) {
    CHECK(rc == 0, "%s: %s", call, mori_last_error());
  } else {
    /* a peer of the failing rank may fail too (its abort, its closed
     * socket, a timeout), with a message; it must leak nothing either */
    CHECK(rc == 0 || mori_last_error()[0] != '\0', "%s failed without a message", call);
  }
  if (base != NULL) CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  if (leftovers(ctx, fds0, msg, msglen)) return 1;
  snprintf(msg, msglen, "%s %s", injected ? "failed in" : "no failure in", call);
  if (me && !injected) _exit(RAN_CLEAN);
  return 0;
}

/* Fails allocation 1, 2, ... of rank 0 until it runs clean; returns how
 * many allocations there were. */
static long every_allocation(int world, int arm_at_alloc) {
  for (long n = 1; n < 400; n++) {
    plan p = {n, arm_at_alloc};
    mori_rank_result res[4];
    memset(res, 0, sizeof res);
    mori_launch(world, oom_rank, &p, 60000, res);
    for (int r = 0; r < world; r++) {
      int clean = r == 0 && res[r].exit_code == RAN_CLEAN;
      if (!clean && (res[r].hung || res[r].signal || res[r].exit_code != 0))
        fail_msg("allocation %ld, rank %d: exit %d signal %d hung %d: %s", n, r,
                 res[r].exit_code, res[r].signal, res[r].hung, res[r].msg);
    }
    if (res[0].exit_code == RAN_CLEAN) return n - 1;
  }
  fail_msg("rank 0 never ran out of allocations to fail");
  return 0;
}

static void every_allocation_of_alloc_rendezvous_and_free_fails_cleanly_alone(void **s) {
  (void)s;
  long n = every_allocation(1, 1);
  print_message("1 rank: %ld allocations failed in turn\n", n);
  assert_true(n > 5);
}

static void every_allocation_of_a_rendezvous_fails_cleanly_among_peers(void **s) {
  (void)s;
  long n = every_allocation(3, 0);
  print_message("3 ranks: %ld allocations of rank 0's rendezvous failed in turn\n", n);
  assert_true(n > 5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_allocation_of_alloc_rendezvous_and_free_fails_cleanly_alone),
      cmocka_unit_test(every_allocation_of_a_rendezvous_fails_cleanly_among_peers),
  };
  setenv("MORI_SIM_DEVICES", "4", 0);
  /* A failure after the own barrier key is set lets peers finish their
   * rendezvous; their barrier with the failed rank then times out. */
  setenv("MORI_SIM_WAIT_TIMEOUT_MS", "1000", 0);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
