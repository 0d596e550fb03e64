/*
 * test_shrink.c - the survivors of a dead rank go on without it: they
 * rendezvous the allocations they already have into a new group of
 * world_size - 1, without reallocating (docs/heal.md, "Shrink").
 *
 * Four ranks each fill their buffer with their own pattern, rendezvous in
 * "job" and pass a barrier; rank 3 then dies with SIGKILL (nothing of it is
 * cleaned up by itself).  The survivors see the death (a bounded barrier on
 * the old window fails naming rank 3), rendezvous the same pointers in
 * "job.shrunk" as ranks 0..2 of 3, and check: the pointer is the one they
 * had, their own data was never touched, each peer's data is visible
 * through the new window, and signals work there; then everything is
 * released and the shim's registry is back to 0.
 */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "ranks.h"

#define SIZE ((size_t)1 << 20)
#define WORDS 64
#define DEAD 3

static uint32_t pattern(int rank, int i) { return 0x5eed0000u ^ (uint32_t)(rank << 12) ^ (uint32_t)i; }

static int fill(void *base, int rank) {
  uint32_t words[WORDS];
  for (int i = 0; i < WORDS; i++) words[i] = pattern(rank, i);
  return mori_symm_memcpy(base, words, sizeof words);
}

/* 0 if the WORDS words at p are rank's pattern; else the first index that
 * differs, plus one. */
static int differs(const void *p, int rank) {
  uint32_t words[WORDS];
  if (mori_symm_memcpy(words, p, sizeof words) != 0) return -1;
  for (int i = 0; i < WORDS; i++)
    if (words[i] != pattern(rank, i)) return i + 1;
  return 0;
}

static int shrink_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL, *w2 = NULL;
  CHECK(mori_symm_alloc(SIZE, ctx->rank, &base) == 0, "alloc: %s", mori_last_error());
  CHECK(fill(base, ctx->rank) == 0, "fill: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(base, "job", ctx->rank, ctx->world, ctx->store, &w, NULL) == 0,
        "rendezvous: %s", mori_last_error());
  CHECK(mori_window_barrier(w, 0, NULL, 10000) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_hipStreamSynchronize(NULL) == hipSuccess, "sync: %s", mori_shim_message());
  if (ctx->rank == DEAD) raise(SIGKILL);

  /* The survivors see it: a bounded barrier on the old window names it. */
  int rc = mori_window_barrier(w, 0, NULL, 1000);
  if (rc == 0) rc = mori_hipStreamSynchronize(NULL) == hipSuccess ? 0 : MORI_EHIP;
  if (rc == 0) rc = mori_window_barrier(w, 0, NULL, 1000); /* the failure shows by now */
  CHECK(rc == MORI_ETIMEDOUT && strstr(mori_last_error(), "rank(s) 3 never signalled") != NULL,
        "barrier after rank 3 died: rc %d: %s", rc, mori_last_error());

  /* Shrink: the same allocation, a new group of the survivors. */
  size_t offset = 1;
  CHECK(mori_symm_rendezvous(base, "job.shrunk", ctx->rank, ctx->world - 1, ctx->store, &w2,
                             &offset) == 0,
        "shrink rendezvous: %s", mori_last_error());
  CHECK(offset == 0, "offset %zu", offset);
  CHECK(mori_window_world_size(w2) == ctx->world - 1, "world %d", mori_window_world_size(w2));
  size_t n = 0, off = 0;
  CHECK(mori_symm_lookup(base, &n, &off) == 0 && n == SIZE && off == 0,
        "the allocation is not the one it was: %s", mori_last_error());
  CHECK(differs(base, ctx->rank) == 0, "own data changed by the shrink");
  for (int p = 0; p < ctx->world - 1; p++) {
    int d = differs(mori_window_buffer_ptrs(w2)[p], p);
    CHECK(d == 0, "rank %d's data through the shrunk window: word %d differs", p, d - 1);
  }
  CHECK(mori_window_barrier(w2, 0, NULL, 10000) == 0, "barrier on the shrunk window: %s",
        mori_last_error());
  CHECK(mori_hipStreamSynchronize(NULL) == hipSuccess, "sync: %s", mori_shim_message());
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "shrink");
}

static void survivors_rendezvous_their_allocations_into_a_smaller_group(void **state) {
  (void)state;
  mori_rank_result res[4];
  memset(res, 0, sizeof res);
  (void)mori_launch(4, shrink_rank, NULL, 120000, res);
  for (int r = 0; r < 4; r++) {
    int ok = r == DEAD ? res[r].signal == SIGKILL : (res[r].exit_code == 0 && !res[r].signal);
    if (!ok || res[r].hung)
      print_error("rank %d: exit %d signal %d hung %d: %s\n", r, res[r].exit_code, res[r].signal,
                  res[r].hung, res[r].msg);
    assert_false(res[r].hung);
    assert_true(ok);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(survivors_rendezvous_their_allocations_into_a_smaller_group),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
