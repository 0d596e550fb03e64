/*
 * test_store_left_clean.c - a finished run leaves its store as it found it:
 * every key a rendezvous wrote is removed once every rank is done with it
 * (the requests and joins by their writers, the mapped barrier by the last
 * rank out), so runs over one store directory do not pile up keys.  Runs
 * of 2 and 3 ranks, with the launcher's incarnation and with one agreed
 * in-band, two rendezvous of one group and one of another per run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch.h"
#include "mori/symm.h"

typedef struct plan {
  int in_band; /* the launcher's incarnation hidden: the ranks agree one */
} plan;

/* alloc, rendezvous twice in group "a" and once in "b", free. */
static int rank_run(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const plan *p = ctx->arg;
  if (p->in_band) ctx->store->incarnation = NULL;
  mori_symm_set_timeout_ms(30000);
  void *base[3] = {NULL, NULL, NULL};
  static const char *const groups[3] = {"a", "a", "b"};
  int rc = 0;
  for (int i = 0; rc == 0 && i < 3; i++) {
    mori_window *w = NULL;
    rc = mori_symm_alloc(1 << 20, ctx->rank, &base[i]);
    if (rc == 0)
      rc = mori_symm_rendezvous(base[i], groups[i], ctx->rank, ctx->world, ctx->store, &w, NULL);
  }
  snprintf(msg, msglen, "rc=%d %s", rc, rc ? mori_last_error() : "");
  for (int i = 0; i < 3; i++)
    if (base[i]) mori_symm_free(base[i]);
  mori_symm_release_all();
  return rc;
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st, (void)type, (void)ftw;
  return remove(path);
}

/* What the runs left in dir, its sockets/ directory (the launcher's) aside:
 * the count, and the first few names. */
static int left_in(const char *dir, char *names, size_t cap) {
  DIR *d = opendir(dir);
  int n = 0;
  names[0] = '\0';
  for (struct dirent *e; d && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, "sockets"))
      continue;
    size_t k = strlen(names);
    if (n++ < 4) snprintf(names + k, cap - k, " %.80s", e->d_name);
  }
  if (d) closedir(d);
  return n;
}

static void runs_leave_no_keys(int world, int in_band) {
  char dir[] = "/tmp/mori-test-store-clean-XXXXXX", names[512];
  assert_non_null(mkdtemp(dir));
  plan p = {in_band};
  for (int run = 0; run < 3; run++) {
    mori_rank_result res[3];
    int failed = mori_launch_at(dir, world, rank_run, &p, 120000, res);
    if (failed) {
      nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
      fail_msg("run %d failed: rank 0: %s; rank 1: %s", run, res[0].msg, res[1].msg);
    }
    int n = left_in(dir, names, sizeof names);
    print_message("%d ranks%s, after run %d: %d entries in the store%s\n", world,
                  in_band ? " (in-band incarnation)" : "", run + 1, n, names);
    if (n != 0) {
      nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
      fail_msg("%d entries left in the store after run %d of %d ranks:%s", n, run + 1, world,
               names);
    }
  }
  nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void two_ranks_leave_no_keys(void **state) {
  (void)state;
  runs_leave_no_keys(2, 0);
}

static void three_ranks_leave_no_keys(void **state) {
  (void)state;
  runs_leave_no_keys(3, 0);
}

static void ranks_agreeing_an_incarnation_in_band_leave_no_keys(void **state) {
  (void)state;
  runs_leave_no_keys(2, 1);
  runs_leave_no_keys(3, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(two_ranks_leave_no_keys),
      cmocka_unit_test(three_ranks_leave_no_keys),
      cmocka_unit_test(ranks_agreeing_an_incarnation_in_band_leave_no_keys),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
