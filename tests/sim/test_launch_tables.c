/*
 * test_launch_tables.c - the launcher that forks every multi-rank test and
 * `mori-symm demo|cycles` runs ranks from six tables of its own.  When one
 * of them cannot be allocated, the launch fails cleanly: every rank's
 * result says so, nothing is forked, nothing leaks.  The test interposes
 * calloc (glibc's own __libc_calloc does the work) and fails the Nth call
 * made inside mori_launch, for each of the tables in turn.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "launch.h"

extern void *__libc_calloc(size_t count, size_t size);

static int countdown; /* 0: off; N: the Nth calloc from now fails */
static int callocs;   /* calloc calls since arming */

void *calloc(size_t count, size_t size) {
  if (countdown > 0) {
    callocs++;
    if (--countdown == 0) return NULL;
  }
  return __libc_calloc(count, size);
}

static int rank_ran_ok(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  snprintf(msg, msglen, "rank %d ran", ctx->rank);
  return 0;
}

static void a_launch_whose_tables_cannot_be_allocated_fails_every_rank_cleanly(void **s) {
  (void)s;
  enum { WORLD = 3 };
  mori_rank_result res[WORLD];
  /* how many tables: count the callocs of a launch that succeeds */
  countdown = 1 << 30;
  callocs = 0;
  assert_int_equal(mori_launch(WORLD, rank_ran_ok, NULL, 30000, res), 0);
  countdown = 0;
  int tables = callocs;
  assert_true(tables >= 1);
  for (int n = 1; n <= tables; n++) {
    countdown = n;
    callocs = 0;
    memset(res, 0xa5, sizeof res);
    int failed = mori_launch(WORLD, rank_ran_ok, NULL, 30000, res);
    countdown = 0;
    if (failed != WORLD) fail_msg("calloc #%d failed: %d of %d ranks failed", n, failed, WORLD);
    for (int r = 0; r < WORLD; r++) {
      if (res[r].exit_code == 0 || strstr(res[r].msg, "out of memory") == NULL)
        fail_msg("calloc #%d failed: rank %d: exit %d, '%.80s'", n, r, res[r].exit_code,
                 res[r].msg);
      assert_int_equal(res[r].pid, 0); /* nothing forked */
    }
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1); /* and no child is left */
  }
  print_message("%d launcher tables, each failed in turn\n", tables);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_launch_whose_tables_cannot_be_allocated_fails_every_rank_cleanly),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
