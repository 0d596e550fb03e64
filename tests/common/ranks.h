/*
 * ranks.h - what the multi-process tests of the core share: run N forked
 * ranks and check each one's fate, CHECK (rank_check.h), a rank's prologue
 * (the sim selected, the fd count taken, a block and its window) and the
 * epilogue that frees everything and requires the shim ledger and the fd
 * count back where they were.
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

/* A rank's prologue: the sim shim selected and, in *fds0, the fd count
 * ranks_finish wants back.  0, or 1 with msg saying why (as CHECK). */
static inline int ranks_begin(const mori_rank_ctx *ctx, char *msg, size_t msglen, int *fds0) {
  CHECK(mori_shim_select("sim") == 0, "%s", mori_shim_message());
  *fds0 = mori_count_fds();
  return 0;
}

/* ranks_begin, then a block of size bytes on the rank's own device in
 * *base and, if group is not NULL, its window in *w: rank ctx->rank of
 * ctx->world over the launcher's store. */
static inline int ranks_begin_block(const mori_rank_ctx *ctx, char *msg, size_t msglen, int *fds0,
                                    size_t size, void **base, const char *group, mori_window **w) {
  if (ranks_begin(ctx, msg, msglen, fds0)) return 1;
  CHECK(mori_symm_alloc(size, ctx->rank, base) == 0, "alloc: %s", mori_last_error());
  if (group != NULL)
    CHECK(mori_symm_rendezvous(*base, group, ctx->rank, ctx->world, ctx->store, w, NULL) == 0,
          "rendezvous %s: %s", group, mori_last_error());
  return 0;
}

/* The block at base freed, then ranks_finish. */
static inline int ranks_end(const mori_rank_ctx *ctx, char *msg, size_t msglen, int fds0,
                            void *base, const char *what) {
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, what);
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
