/*
 * test_fi_teardown.c - the >= 4 rank teardown: ranks finish in a given
 * order (rank r tears down only after its predecessor in the order has
 * finished), every order at 4 ranks and rotations, reversals and
 * interleavings at 8 and 16, under the sim quirk set ctest gives this run
 * (MORI_SIM_QUIRKS: none, each quirk, all).  No rank may leak or crash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "launch.h"
#include "mori/hip_shim.h"
#include "mori/symm.h"

#define MiB ((size_t)1 << 20)
#define MAX_WORLD 16

typedef struct order {
  int world;
  int seq[MAX_WORLD]; /* ranks, in the order they tear down */
} order;

#define CHECK(cond, ...)                                                             \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      int n_ = snprintf(msg, msglen, "rank %d line %d: ", ctx->rank, __LINE__);      \
      snprintf(msg + n_, msglen - (size_t)n_, __VA_ARGS__);                          \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

/* Everything a window holds is live when the first rank starts tearing
 * down: two groups on one block, written through every peer's slot. */
static int ordered_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const order *o = ctx->arg;
  int fds0 = mori_count_fds(), pos = 0;
  void *base = NULL;
  mori_window *w = NULL, *v = NULL;
  CHECK(mori_shim_select("sim") == 0, "%s", mori_shim_message());
  CHECK(mori_symm_alloc(MiB, ctx->rank, &base) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(base, "a", ctx->rank, ctx->world, ctx->store, &w, NULL) == 0,
        "rendezvous: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(base, "b", ctx->world - 1 - ctx->rank, ctx->world, ctx->store, &v,
                             NULL) == 0,
        "second rendezvous: %s", mori_last_error());
  void *const *peers = mori_window_buffer_ptrs(w);
  for (int p = 0; p < ctx->world; p++) {
    uint32_t word = 0xE0000000u | (uint32_t)ctx->rank;
    CHECK(mori_hipMemcpy((uint32_t *)peers[p] + ctx->rank, &word, 4, hipMemcpyHostToDevice) ==
              hipSuccess, "write to rank %d: %s", p, mori_shim_message());
  }
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  uint32_t got[MAX_WORLD];
  CHECK(mori_hipMemcpy(got, base, 4 * (size_t)ctx->world, hipMemcpyDeviceToHost) == hipSuccess,
        "read: %s", mori_shim_message());
  for (int q = 0; q < ctx->world; q++)
    CHECK(got[q] == (0xE0000000u | (uint32_t)q), "word of rank %d reads 0x%08x", q, got[q]);
  CHECK(mori_window_barrier(v, 0, NULL, 0) == 0, "barrier b: %s", mori_last_error());
  while (o->seq[pos] != ctx->rank) pos++;
  char key[64];
  if (pos > 0) {
    void *val = NULL;
    size_t len = 0;
    snprintf(key, sizeof key, "teardown/%d", o->seq[pos - 1]);
    CHECK(ctx->store->get(ctx->store, key, &val, &len, 60000) == 0, "waiting for rank %d: %s",
          o->seq[pos - 1], mori_last_error());
    free(val);
  }
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  CHECK(mori_symm_release_all() == 0, "release_all: %s", mori_last_error());
  long leaks = mori_shim_registry_total();
  int fds = mori_count_fds() - fds0;
  if (leaks) mori_shim_registry_report(stderr);
  snprintf(key, sizeof key, "teardown/%d", ctx->rank);
  CHECK(ctx->store->set(ctx->store, key, "1", 1) == 0, "publish: %s", mori_last_error());
  CHECK(leaks == 0 && fds == 0, "after teardown: leaks=%ld fds=%+d", leaks, fds);
  snprintf(msg, msglen, "ok at position %d", pos);
  return 0;
}

static void run_order(const order *o) {
  mori_rank_result res[MAX_WORLD];
  char text[128];
  size_t n = 0;
  for (int i = 0; i < o->world; i++) n += (size_t)snprintf(text + n, sizeof text - n, " %d", o->seq[i]);
  mori_launch(o->world, ordered_rank, (void *)o, 120000, res);
  for (int r = 0; r < o->world; r++)
    if (res[r].hung || res[r].signal || res[r].exit_code)
      fail_msg("order%s: rank %d exit %d signal %d hung %d: %s", text, r, res[r].exit_code,
               res[r].signal, res[r].hung, res[r].msg);
}

static order rotation(int world, int by, int reverse) {
  order o = {world, {0}};
  for (int i = 0; i < world; i++) {
    int r = (i + by) % world;
    o.seq[i] = reverse ? world - 1 - r : r;
  }
  return o;
}

/* Even ranks first, then odd ones (or the other way round). */
static order interleaved(int world, int odd_first) {
  order o = {world, {0}};
  int k = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int r = (pass ^ odd_first); r < world; r += 2) o.seq[k++] = r;
  return o;
}

static void every_finishing_order_at_4_ranks_leaks_nothing(void **s) {
  (void)s;
  int count = 0;
  order o = {4, {0}};
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++)
      for (int c = 0; c < 4; c++) {
        int d = 6 - a - b - c;
        if (a == b || a == c || b == c || d < 0 || d > 3 || d == a || d == b || d == c) continue;
        o.seq[0] = a, o.seq[1] = b, o.seq[2] = c, o.seq[3] = d;
        run_order(&o);
        count++;
      }
  assert_int_equal(count, 24);
}

static void rotations_reversals_and_interleavings_at_8_ranks_leak_nothing(void **s) {
  (void)s;
  const order orders[] = {rotation(8, 0, 0), rotation(8, 0, 1), rotation(8, 1, 0),
                          rotation(8, 5, 0), rotation(8, 3, 1), interleaved(8, 0),
                          interleaved(8, 1)};
  for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++) run_order(&orders[i]);
}

static void rotations_reversals_and_interleavings_at_16_ranks_leak_nothing(void **s) {
  (void)s;
  const order orders[] = {rotation(16, 0, 0), rotation(16, 0, 1), rotation(16, 7, 0),
                          interleaved(16, 1)};
  for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++) run_order(&orders[i]);
}

int main(void) {
  setenv("MORI_SIM_DEVICES", "16", 0);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_finishing_order_at_4_ranks_leaks_nothing),
      cmocka_unit_test(rotations_reversals_and_interleavings_at_8_ranks_leak_nothing),
      cmocka_unit_test(rotations_reversals_and_interleavings_at_16_ranks_leak_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
