/*
 * test_rank_death.c - a rank killed mid-rendezvous is told of by its
 * launcher: the survivors' waits for it end with MORI_EPEER naming it and
 * the launcher's words, in well under their 30 s timeout, and leave nothing
 * behind.  Four ranks under mori_launch; rank 2 dies of SIGKILL, which
 * publishes nothing of its own, at one of two points of the store's
 * traffic: instead of its request (the survivors gather requests), or
 * instead of its mapped entry (they wait in the store barrier); or it
 * exits with status 3 instead of its request.  (Killed right after its
 * request, it is seen without the launcher: the fd exchange's sendmsg to
 * its socket is refused at once.)
 */
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ranks.h"

enum { WORLD = 4, DEAD = 2, TIMEOUT_MS = 30000, BOUND_MS = 10000, DEADLINE_MS = 120000 };
#define KILLED "rank 2 killed by signal 9 (Killed), says the launcher"

/* Rank DEAD ends instead of setting the first key whose name holds key:
 * killed by SIGKILL, or (exit_code) exiting with that status. */
typedef struct plan {
  const char *key;
  int exit_code;
  const char *words; /* what the survivors' errors must say */
} plan;

/* Rank DEAD's store: the launcher's, until the set that kills it. */
typedef struct dying_store {
  mori_store base;
  mori_store *real;
  const plan *p;
} dying_store;

static mori_store *real_of(mori_store *s) { return ((dying_store *)s)->real; }

static int dying_set(mori_store *s, const char *key, const void *value, size_t len) {
  const plan *p = ((dying_store *)s)->p;
  if (strstr(key, p->key) != NULL && p->exit_code) _exit(p->exit_code);
  if (strstr(key, p->key) != NULL) raise(SIGKILL);
  return real_of(s)->set(real_of(s), key, value, len);
}

static int dying_get(mori_store *s, const char *key, void **value, size_t *len, int timeout_ms) {
  return real_of(s)->get(real_of(s), key, value, len, timeout_ms);
}

static int dying_add(mori_store *s, const char *key, int64_t delta, int64_t *result) {
  return real_of(s)->add(real_of(s), key, delta, result);
}

static int dying_wait_change(mori_store *s, int timeout_ms) {
  return real_of(s)->wait_change(real_of(s), timeout_ms);
}

static int dying_remove(mori_store *s, const char *key) {
  return real_of(s)->remove(real_of(s), key);
}

static void dying_destroy(mori_store *s) { (void)s; /* the launcher's store is the launcher's */ }

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Every rank allocates and rendezvous; a survivor must fail with
 * MORI_EPEER naming rank DEAD's death, within BOUND_MS, with nothing left
 * once it frees. */
static int rank_body(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const plan *p = ctx->arg;
  int fds0 = mori_count_fds();
  dying_store d = {.base = {.set = dying_set,
                            .get = dying_get,
                            .add = dying_add,
                            .destroy = dying_destroy,
                            .wait_change = ctx->store->wait_change ? dying_wait_change : NULL,
                            .incarnation = ctx->store->incarnation,
                            .remove = ctx->store->remove ? dying_remove : NULL},
                   .real = ctx->store,
                   .p = p};
  mori_store *store = ctx->rank == DEAD ? &d.base : ctx->store;
  void *base = NULL;
  mori_window *w = NULL;
  CHECK(mori_symm_timeout_ms() == TIMEOUT_MS, "timeout %d ms, not %d", mori_symm_timeout_ms(),
        TIMEOUT_MS);
  CHECK(mori_symm_alloc(1 << 20, ctx->rank, &base) == 0, "alloc: %s", mori_last_error());
  double t0 = now_ms();
  int rc = mori_symm_rendezvous(base, "job", ctx->rank, ctx->world, store, &w, NULL);
  double ms = now_ms() - t0;
  CHECK(ctx->rank != DEAD, "rank %d lived on (rc %d: %s)", DEAD, rc, mori_last_error());
  char err[768];
  snprintf(err, sizeof err, "%s", mori_last_error());
  CHECK(rc == MORI_EPEER, "rc %d after %.0f ms, not MORI_EPEER: %s", rc, ms, err);
  CHECK(strstr(err, p->words) != NULL, "the error does not say \"%s\": %s", p->words, err);
  CHECK(ms < BOUND_MS, "failed after %.0f ms, not within %d: %s", ms, BOUND_MS, err);
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  char what[900];
  snprintf(what, sizeof what, "failed after %.0f ms: %s", ms, err);
  return ranks_finish(fds0, msg, msglen, what);
}

static void rank_2_ends(plan p) {
  mori_rank_result res[WORLD];
  memset(res, 0, sizeof res);
  double t0 = now_ms();
  (void)mori_launch(WORLD, rank_body, &p, DEADLINE_MS, res);
  double launch_ms = now_ms() - t0;
  for (int r = 0; r < WORLD; r++) {
    int ok = r == DEAD ? (p.exit_code ? res[r].exit_code == p.exit_code : res[r].signal == SIGKILL)
                       : res[r].exit_code == 0 && !res[r].signal && !res[r].hung;
    if (!ok)
      print_error("rank %d: exit %d signal %d hung %d after %.0f ms: %s\n", r, res[r].exit_code,
                  res[r].signal, res[r].hung, res[r].wall_ms, res[r].msg);
    else if (r != DEAD)
      print_message("rank 2 ended instead of its %s entry: rank %d %s\n", p.key, r, res[r].msg);
  }
  double last_ms = 0;
  for (int r = 0; r < WORLD; r++)
    if (r != DEAD && res[r].wall_ms > last_ms) last_ms = res[r].wall_ms;
  print_message("rank 2 died %.0f ms into the launch, the last survivor ended %.0f ms after; "
                "the launch took %.0f ms (rendezvous timeout %d ms)\n",
                res[DEAD].wall_ms, last_ms - res[DEAD].wall_ms, launch_ms, TIMEOUT_MS);
  for (int r = 0; r < WORLD; r++) {
    assert_false(res[r].hung);
    if (r == DEAD && p.exit_code) assert_int_equal(res[r].exit_code, p.exit_code);
    else if (r == DEAD) assert_int_equal(res[r].signal, SIGKILL);
    else assert_true(res[r].exit_code == 0 && res[r].signal == 0);
  }
}

static void survivors_gathering_requests_fail_naming_the_dead_rank(void **s) {
  (void)s;
  rank_2_ends((plan){"/req/", 0, KILLED});
}

/* A failing exit is a death too: nothing of it was published either. */
static void survivors_of_a_rank_that_exits_failing_fail_naming_it(void **s) {
  (void)s;
  rank_2_ends((plan){"/req/", 3, "rank 2 exited with status 3, says the launcher"});
}

static void survivors_in_the_mapped_barrier_fail_naming_the_dead_rank(void **s) {
  (void)s;
  rank_2_ends((plan){"/mapped/", 0, KILLED});
}

int main(int argc, char **argv) {
  /* the timeout the survivors must not wait out: a failure to see the
   * death shows as a 30 s wait and a failed bound, not as a hang */
  setenv("MORI_SYMM_TIMEOUT_MS", "30000", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(survivors_gathering_requests_fail_naming_the_dead_rank),
      cmocka_unit_test(survivors_in_the_mapped_barrier_fail_naming_the_dead_rank),
      cmocka_unit_test(survivors_of_a_rank_that_exits_failing_fail_naming_it),
  };
  return mori_run_tests(argc, argv, tests);
}
