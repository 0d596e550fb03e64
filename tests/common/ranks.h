/*
 * ranks.h - what the multi-process tests of the core share: run N forked
 * ranks and check each one's fate, CHECK (rank_check.h), and the epilogue
 * that frees everything and requires the shim ledger and the fd count back
 * where they were.
 */
#ifndef MORI_TEST_RANKS_H
#define MORI_TEST_RANKS_H

#include <stdio.h>
#include <stdlib.h>

#include "mori_cmocka.h"

#include "launch.h"
#include "mori/hip_shim.h"
#include "mori/symm.h"
#include "rank_check.h"

/* Per-rank epilogue: free everything, then the ledger and fds must be back. */
static inline int ranks_finish(int fds0, char *msg, size_t msglen, const char *what) {
  if (mori_symm_release_all() != 0) {
    snprintf(msg, msglen, "release_all: %s", mori_last_error());
    return 1;
  }
  long leaks = mori_shim_registry_total();
  int fds = mori_count_fds() - fds0;
  if (leaks != 0 || fds != 0) {
    mori_shim_registry_report(stderr);
    snprintf(msg, msglen, "%s: leaks=%ld fds=%+d", what, leaks, fds);
    return 1;
  }
  snprintf(msg, msglen, "ok %s", what);
  return 0;
}

/* Runs world ranks of fn; the ranks in dead_mask must end with a nonzero
 * exit (they die on purpose), every other rank must succeed; none may hang
 * or crash. */
static inline void ranks_run(int world, mori_rank_fn fn, void *arg, uint64_t dead_mask) {
  mori_rank_result *res = calloc((size_t)world, sizeof *res);
  int failed = mori_launch(world, fn, arg, 60000, res), dead = 0;
  for (int r = 0; r < world; r++) {
    int want_dead = r < 64 && (dead_mask >> r & 1);
    dead += want_dead;
    if (res[r].hung || res[r].signal || (res[r].exit_code != 0) != want_dead)
      print_error("rank %d: exit %d signal %d hung %d: %s\n", r, res[r].exit_code,
                  res[r].signal, res[r].hung, res[r].msg);
  }
  for (int r = 0; r < world; r++) {
    assert_int_equal(res[r].hung, 0);
    assert_int_equal(res[r].signal, 0);
    assert_int_equal(res[r].exit_code != 0, r < 64 && (dead_mask >> r & 1));
  }
  assert_int_equal(failed, dead);
  free(res);
}

#endif
