/*
 * test_incarnations.c - a store may outlive a run: every entry an earlier
 * run left (requests, mapped, abort, the keys of a run killed half-way) is
 * never taken as current, and the same job rerun on the same store
 * succeeds.  Every case runs twice: with the id mori_launch hands its
 * ranks, and with the ranks agreeing one in-band, as they do over a store
 * that carries none (torch's).  A launcher's id longer than a window keeps
 * is refused (labels: security).
 */
#include "sec_harness.h"

#include "mori/error.h"
#include "mori/hip_shim.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { WORLD = 2 };

typedef struct fixture {
  sec_fixture base; /* .arg: non-NULL to agree the incarnation in-band */
  char *dir;
  int in_band;
  mori_rank_result res[WORLD];
} fixture;

static int setup(void **state) {
  sec_fixture_setup(state, sizeof(fixture), "inc");
  fixture *f = *state;
  f->dir = f->base.dir;
  f->in_band = f->base.arg != NULL;
  return 0;
}

static int teardown(void **state) { return sec_fixture_teardown(state); }

static void assert_all_succeeded(const fixture *f, const char *run) {
  for (int r = 0; r < WORLD; r++)
    if (sec_num(f->res[r].msg, "rc") != 0 || sec_num(f->res[r].msg, "fds") != 0 ||
        sec_num(f->res[r].msg, "leaks") != 0)
      fail_msg("%s: rank %d: %s", run, r, f->res[r].msg);
}

static void run_clean(fixture *f, const char *run) {
  sec_plan plan = {.in_band = f->in_band};
  sec_launch(f->dir, WORLD, &plan, f->res);
  assert_all_succeeded(f, run);
}

static void the_same_job_rerun_on_the_same_store_succeeds(void **state) {
  fixture *f = *state;
  run_clean(f, "first run");
  run_clean(f, "second run");
  run_clean(f, "third run");
}

/* Rank 1 comes late: its request of the earlier run is all rank 0 can find
 * for a while, and must not be taken for this run's. */
static void a_request_left_by_an_earlier_run_is_never_taken_as_current(void **state) {
  fixture *f = *state;
  run_clean(f, "first run");
  sec_plan plan = {.in_band = f->in_band};
  plan.timeout_ms = 3000;
  plan.rank[1].delay_first_op_ms = 300;
  sec_launch(f->dir, WORLD, &plan, f->res);
  assert_all_succeeded(f, "rerun with rank 1 late");
}

/* Removes the store's files whose name contains what (keys are encoded
 * into file names, '/' as %2F). */
static void remove_entries(const fixture *f, const char *what) {
  DIR *d = opendir(f->dir);
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d));)
    if (strstr(e->d_name, what)) assert_int_equal(unlinkat(dirfd(d), e->d_name, 0), 0);
  closedir(d);
}

/* Rank 1 dies before it publishes "mapped"; rank 0 finds the earlier run's
 * "mapped" of rank 1 and must not return from rendezvous on it.  The
 * earlier run's requests are gone, so that both ranks of the rerun meet
 * on their fresh requests and get as far as the mapping. */
static void a_mapped_entry_left_by_an_earlier_run_never_releases_a_rank(void **state) {
  fixture *f = *state;
  run_clean(f, "first run");
  remove_entries(f, "req");
  sec_plan plan = {.in_band = f->in_band};
  plan.rank[1].kill_at_key = "mapped";
  sec_launch(f->dir, WORLD, &plan, f->res);
  assert_int_equal(f->res[1].signal, 9);
  if (sec_num(f->res[0].msg, "rdv") == 0)
    fail_msg("rank 0 returned from rendezvous without rank 1's mapping: %s", f->res[0].msg);
  run_clean(f, "rerun");
}

/* The earlier run failed (sizes differ) and published an abort. */
static void an_abort_left_by_an_earlier_run_never_fails_a_rerun(void **state) {
  fixture *f = *state;
  sec_plan plan = {.in_band = f->in_band};
  plan.rank[1].size = 3u << 20;
  sec_launch(f->dir, WORLD, &plan, f->res);
  for (int r = 0; r < WORLD; r++)
    if (sec_num(f->res[r].msg, "rc") == 0) fail_msg("mismatched run: rank %d: %s", r, f->res[r].msg);
  run_clean(f, "rerun after an abort");
}

/* Each rank killed at its 3rd store operation: the run published some
 * keys, not all. */
static void a_run_killed_half_way_leaves_a_store_a_rerun_can_use(void **state) {
  fixture *f = *state;
  for (int victim = 0; victim < WORLD; victim++) {
    sec_plan plan = {.in_band = f->in_band};
    plan.rank[victim].kill_at_op = 3;
    sec_launch(f->dir, WORLD, &plan, f->res);
    assert_int_equal(f->res[victim].signal, 9);
    run_clean(f, victim ? "rerun after rank 1 was killed" : "rerun after rank 0 was killed");
  }
}

/* A launcher's id is 1 to 64 letters, digits, '-' or '_' (a window keeps
 * 64 and the end): one of 65 is refused naming the limit, where a copy one
 * byte longer than the window's buffer would otherwise be made; one of 64
 * is taken. */
static void a_launcher_id_of_65_characters_is_refused_and_one_of_64_taken(void **state) {
  fixture *f = *state;
  static const char id64[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  char id65[sizeof id64 + 1];
  snprintf(id65, sizeof id65, "%s_", id64);
  mori_store *st = NULL;
  void *base = NULL;
  mori_window *w = NULL;
  assert_int_equal(mori_shim_select("sim"), 0);
  assert_int_equal(mori_file_store_open(f->dir, &st), 0);
  assert_int_equal(mori_symm_alloc(1 << 20, 0, &base), 0);
  st->incarnation = id65;
  int rc = mori_symm_rendezvous(base, "g", 0, 1, st, &w, NULL);
  print_message("an id of %zu characters: %s\n", strlen(id65), rc ? mori_last_error() : "taken");
  if (rc != MORI_EINVAL || !strstr(mori_last_error(), "is not 1-64 letters"))
    fail_msg("an id of 65 characters: want MORI_EINVAL naming the limit of 64, got %s: %s",
             mori_error_name(rc), rc ? mori_last_error() : "(taken)");
  st->incarnation = id64;
  if (mori_symm_rendezvous(base, "g", 0, 1, st, &w, NULL) != 0)
    fail_msg("an id of 64 characters: %s", mori_last_error());
  assert_int_equal(mori_symm_free(base), 0);
  assert_int_equal(mori_symm_release_all(), 0);
  st->destroy(st);
}

#define BOTH(name)                                                                    \
  {#name "_with_the_launcher_s_id", name, setup, teardown, NULL},                     \
      {#name "_agreed_in_band", name, setup, teardown, (void *)1}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      BOTH(the_same_job_rerun_on_the_same_store_succeeds),
      BOTH(a_request_left_by_an_earlier_run_is_never_taken_as_current),
      BOTH(a_mapped_entry_left_by_an_earlier_run_never_releases_a_rank),
      BOTH(an_abort_left_by_an_earlier_run_never_fails_a_rerun),
      BOTH(a_run_killed_half_way_leaves_a_store_a_rerun_can_use),
      /* in this process: after every case that forks its ranks */
      cmocka_unit_test_setup_teardown(a_launcher_id_of_65_characters_is_refused_and_one_of_64_taken,
                                      setup, teardown),
  };
  return mori_run_tests(argc, argv, tests);
}
