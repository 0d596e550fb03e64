/*
 * test_fi_datagrams.c - the fd channel under datagram faults, driven by the
 * fault shim (run under LD_PRELOAD=libmori_faultinject.so): every arrival
 * order of every receiver at 3, 4 and 5 ranks gives a correct window;
 * duplicates, drops and truncation are rejected with a clear error, a
 * forged sender (no member) is dropped, and no rank leaks anything.
 */
#include "fault_harness.h"

#include <unistd.h>

#define MiB ((size_t)1 << 20)

/* A rendezvous of the whole world, each rank writing its rank into every
 * peer's slot and reading them all back; the line reports the senders the
 * fault shim delivered, and (on failure) what was mapped when it failed. */
static int exchange_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds() - mori_fi_own_fds(); /* its trace file may be open already */
  const int *timeout_ms = ctx->arg;
  char extra[256] = "";
  void *base = NULL;
  mori_window *w = NULL;
  if (mori_shim_select("sim") != 0) {
    snprintf(msg, msglen, "rc=-99 err=%s", mori_shim_message());
    return 1;
  }
  mori_symm_set_timeout_ms(*timeout_ms);
  int rc = mori_symm_alloc(MiB, ctx->rank, &base);
  if (rc == 0) rc = mori_symm_rendezvous(base, "g", ctx->rank, ctx->world, ctx->store, &w, NULL);
  if (rc != 0) {
    mori_shim_registry_counts c;
    mori_shim_registry(&c);
    mori_symm_stats st;
    mori_symm_stats_get(&st);
    snprintf(extra, sizeof extra, "fail_handles=%ld fail_mappings=%ld fail_windows=%ld",
             c.handles, c.mappings, st.windows);
    return fh_report(msg, msglen, fds0, rc, extra);
  }
  void *const *peers = mori_window_buffer_ptrs(w);
  for (int p = 0; p < ctx->world && rc == 0; p++) {
    uint32_t v = 0xD0000000u | (uint32_t)ctx->rank << 8 | (uint32_t)p;
    if (mori_hipMemcpy((uint32_t *)peers[p] + ctx->rank, &v, 4, hipMemcpyHostToDevice))
      rc = MORI_EHIP;
  }
  if (rc == 0) rc = mori_window_barrier(w, 0, NULL, 0);
  uint32_t got[8] = {0};
  if (rc == 0 && mori_hipMemcpy(got, base, 4 * (size_t)ctx->world, hipMemcpyDeviceToHost))
    rc = MORI_EHIP;
  int bad = 0;
  for (int q = 0; q < ctx->world && rc == 0; q++)
    bad += got[q] != (0xD0000000u | (uint32_t)q << 8 | (uint32_t)ctx->rank);
  if (rc == 0) rc = mori_window_barrier(w, 0, NULL, 0);
  int senders[16], n = mori_fi_delivered(senders, 16);
  size_t k = (size_t)snprintf(extra, sizeof extra, "bad_words=%d delivered=", bad);
  for (int i = 0; i < n && k < sizeof extra; i++)
    k += (size_t)snprintf(extra + k, sizeof extra - k, "%s%d", i ? "," : "", senders[i]);
  if (rc == 0) rc = mori_symm_free(base);
  return fh_report(msg, msglen, fds0, rc, extra) || bad;
}

/* ---- every arrival order ---- */

/* The k-th permutation (lexicographic) of items[0..n). */
static void permutation(int *items, int n, long k) {
  for (int i = 0; i < n - 1; i++) {
    long f = 1;
    for (int j = 2; j < n - i; j++) f *= j;
    int pick = (int)(k / f);
    k %= f;
    int v = items[i + pick];
    memmove(&items[i + 1], &items[i], (size_t)pick * sizeof *items);
    items[i] = v;
  }
}

/* Permutation k of every receiver's senders, all at once: each run drives
 * one arrival order per receiver, and (world-1)! runs drive all of them. */
static void all_orders(int world) {
  long orders = 1;
  int timeout_ms = 10000;
  for (int j = 2; j < world; j++) orders *= j;
  mori_rank_result *res = calloc((size_t)world, sizeof *res);
  for (long k = 0; k < orders; k++) {
    char spec[512] = "", want[16][64];
    size_t len = 0;
    for (int r = 0; r < world; r++) {
      int others[16], n = 0;
      for (int s = 0; s < world; s++)
        if (s != r) others[n++] = s;
      permutation(others, n, k);
      size_t w = 0;
      want[r][0] = '\0';
      for (int i = 0; i < n; i++) w += (size_t)snprintf(want[r] + w, sizeof want[r] - w, "%s%d", i ? "," : "", others[i]);
      len += (size_t)snprintf(spec + len, sizeof spec - len, "%srank=%d recv=order:%s",
                              r ? ";" : "", r, want[r]);
    }
    fh_run(spec, world, exchange_rank, &timeout_ms, res, -1);
    for (int r = 0; r < world; r++) {
      char delivered[96];
      snprintf(delivered, sizeof delivered, " delivered=%s ", want[r]);
      if (res[r].exit_code != 0 || fh_num(res[r].msg, "bad_words") != 0 ||
          strstr(res[r].msg, delivered) == NULL)
        fail_msg("'%s': rank %d (wanted%s): %s", spec, r, delivered, res[r].msg);
    }
    fh_assert_clean(spec, res, world, -1);
  }
  free(res);
}

static void every_arrival_order_at_3_ranks_gives_a_correct_window(void **s) { (void)s; all_orders(3); }
static void every_arrival_order_at_4_ranks_gives_a_correct_window(void **s) { (void)s; all_orders(4); }
static void every_arrival_order_at_5_ranks_gives_a_correct_window(void **s) { (void)s; all_orders(5); }

static void seeded_reorder_still_gives_a_correct_window(void **s) {
  (void)s;
  int timeout_ms = 10000;
  mori_rank_result res[4];
  for (int seed = 1; seed <= 6; seed++) {
    char spec[64];
    snprintf(spec, sizeof spec, "recv=reorder:seed=%d", seed);
    fh_run(spec, 4, exchange_rank, &timeout_ms, res, -1);
    for (int r = 0; r < 4; r++) {
      if (res[r].exit_code != 0 || fh_num(res[r].msg, "bad_words") != 0)
        fail_msg("'%s': rank %d: %s", spec, r, res[r].msg);
      /* every peer's datagram was handed out exactly once */
      const char *d = strstr(res[r].msg, " delivered=");
      int seen[4] = {0}, n = 0;
      for (const char *p = d ? d + 11 : ""; *p >= '0' && *p <= '9'; p += 2, n++) seen[*p - '0']++;
      assert_int_equal(n, 3);
      for (int q = 0; q < 4; q++) assert_int_equal(seen[q], q == r ? 0 : 1);
    }
    fh_assert_clean(spec, res, 4, -1);
  }
}

/* ---- rejected datagrams ---- */

/* The peer rank 0's first fd datagram goes to: which of its peers proves
 * its socket first (docs/fd-channel.md), so either. */
#define FIRST_FD_PEER (-1)

/* Runs 3 ranks under spec: the victim (FIRST_FD_PEER: rank 1 or rank 2)
 * must fail with code and a message containing says; every rank fails (no
 * window without the victim), and none leaks. */
static const mori_rank_result *expect_rejected(const char *spec, int victim, int code,
                                               const char *says, int timeout_ms) {
  static mori_rank_result res[3];
  fh_run(spec, 3, exchange_rank, &timeout_ms, res, -1);
  for (int r = 0; r < 3; r++)
    if (fh_num(res[r].msg, "rc") == 0) fail_msg("'%s': rank %d succeeded: %s", spec, r, res[r].msg);
  for (int r = 1; victim == FIRST_FD_PEER && r < 3; r++)
    if (fh_num(res[r].msg, "rc") == code && strstr(fh_err(res[r].msg), says) != NULL) victim = r;
  if (victim == FIRST_FD_PEER) victim = 1; /* neither did: report rank 1's */
  if (fh_num(res[victim].msg, "rc") != code || strstr(fh_err(res[victim].msg), says) == NULL)
    fail_msg("'%s': rank %d should fail with %s saying '%s': %s", spec, victim,
             mori_error_name(code), says, res[victim].msg);
  fh_assert_clean(spec, res, 3, -1);
  return res;
}

static void duplicate_datagram_is_rejected_and_nothing_leaks(void **s) {
  (void)s;
  expect_rejected("rank=1 recv=duplicate#1", 1, MORI_EPROTO, "duplicate fd datagram from rank",
                  5000);
}

static void dropped_datagram_times_out_naming_the_missing_rank(void **s) {
  (void)s;
  /* rank 0's first fd datagram never leaves */
  expect_rejected("rank=0 send=drop#1", FIRST_FD_PEER, MORI_ETIMEDOUT,
                  "not heard from rank(s) 0", 1000);
}

static void truncated_datagram_is_rejected(void **s) {
  (void)s;
  expect_rejected("rank=0 send=truncate#1", FIRST_FD_PEER, MORI_EPROTO,
                  "undecodable datagram of 24 bytes", 5000);
}

/* The forged copy comes from a process that is no member: the receiver
 * drops it (closing its fd) and takes the real one, so the window forms. */
static void forged_sender_is_dropped_and_the_window_still_forms(void **s) {
  (void)s;
  int timeout_ms = 5000;
  mori_rank_result res[3];
  fh_run("rank=0 send=forge#1", 3, exchange_rank, &timeout_ms, res, -1);
  for (int r = 0; r < 3; r++)
    if (res[r].exit_code != 0 || fh_num(res[r].msg, "bad_words") != 0)
      fail_msg("'send=forge#1': rank %d: %s", r, res[r].msg);
  fh_assert_clean("send=forge#1", res, 3, -1);
}

static void rank_killed_mid_import_leaves_peers_failing_not_hanging(void **s) {
  (void)s;
  int timeout_ms = 1000;
  mori_rank_result res[3];
  fh_run("rank=1 hipMemImportFromShareableHandle#1=kill", 3, exchange_rank, &timeout_ms, res, 1);
  assert_int_equal(res[1].signal, 9);
  for (int r = 0; r < 3; r += 2)
    if (fh_num(res[r].msg, "rc") == 0) fail_msg("rank %d succeeded without rank 1: %s", r, res[r].msg);
  fh_assert_clean("kill", res, 3, 1);
}

int main(void) {
  if (!mori_fi_loaded()) {
    fprintf(stderr, "test_fi_datagrams needs LD_PRELOAD=libmori_faultinject.so\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_arrival_order_at_3_ranks_gives_a_correct_window),
      cmocka_unit_test(every_arrival_order_at_4_ranks_gives_a_correct_window),
      cmocka_unit_test(every_arrival_order_at_5_ranks_gives_a_correct_window),
      cmocka_unit_test(seeded_reorder_still_gives_a_correct_window),
      cmocka_unit_test(duplicate_datagram_is_rejected_and_nothing_leaks),
      cmocka_unit_test(dropped_datagram_times_out_naming_the_missing_rank),
      cmocka_unit_test(truncated_datagram_is_rejected),
      cmocka_unit_test(forged_sender_is_dropped_and_the_window_still_forms),
      cmocka_unit_test(rank_killed_mid_import_leaves_peers_failing_not_hanging),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
