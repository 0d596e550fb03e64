/*
 * demo.c - `mori-symm demo`: N forked ranks allocate, rendezvous, push an
 * all-to-all through the mapped peer slots, run barriers and signals,
 * verify every byte, tear down and count leaks.  The same rank body runs on
 * the sim shim in CI and on real GPUs through the cuda or hip shim.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mori/hip_shim.h"
#include "mori/symm.h"

struct demo_args {
  cli_ranks r;
  size_t size;        /* bytes per rank buffer */
  int deadline_ms;    /* the launcher kills ranks still running then */
  int exit_live;      /* end with the window live: teardown is the exit hook's */
  int cached_calls;   /* cached rendezvous calls timed */
  int barriers;       /* barriers timed */
};

/* Byte i of the chunk rank src sends to rank dst. */
static uint8_t pattern(int src, int dst, size_t i) {
  uint64_t x = ((uint64_t)src * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)dst << 32) ^ i;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return (uint8_t)(x >> 56);
}

struct rank_report {
  double init_us, alloc_us, rendezvous_us, cached_us, barrier_us, a2a_us;
  size_t bytes_verified;
  long leaks;
  int fd_delta;
};

#define TRY(expr, what)                                                              \
  do {                                                                               \
    if ((expr) != 0) {                                                               \
      snprintf(msg, msglen, "rank %d: %s: %s", ctx->rank, what, mori_last_error());  \
      return 1;                                                                      \
    }                                                                                \
  } while (0)
#define TRY_HIP(expr, what)                                                          \
  do {                                                                               \
    hipError_t e_ = (expr);                                                          \
    if (e_ != hipSuccess) {                                                          \
      snprintf(msg, msglen, "rank %d: %s: %s", ctx->rank, what, mori_shim_message());\
      return 1;                                                                      \
    }                                                                                \
  } while (0)

static int exchange(const mori_rank_ctx *ctx, const struct demo_args *a, mori_window *w,
                    void *base, uint8_t *host, struct rank_report *rep, char *msg,
                    size_t msglen) {
  int world = ctx->world, me = ctx->rank;
  size_t half = a->size / 2, chunk = half / (size_t)world;
  void *const *peers = mori_window_buffer_ptrs(w);
  for (int p = 0; p < world; p++)
    for (size_t i = 0; i < chunk; i++) host[(size_t)p * chunk + i] = pattern(me, p, i);
  TRY_HIP(mori_hipMemcpy(base, host, half, hipMemcpyHostToDevice), "fill send area");
  TRY(mori_window_barrier(w, 0, NULL, 0), "barrier before all-to-all");
  double t0 = cli_now_us();
  for (int i = 0; i < world; i++) {
    int p = (me + i) % world; /* stagger so ranks do not all hit one peer */
    char *dst = (char *)peers[p] + half + (size_t)me * chunk;
    TRY_HIP(mori_hipMemcpy(dst, (char *)base + (size_t)p * chunk, chunk,
                           hipMemcpyDeviceToDevice),
            "push chunk to peer");
  }
  TRY_HIP(mori_hipDeviceSynchronize(), "synchronize after push");
  rep->a2a_us = cli_now_us() - t0;
  TRY(mori_window_barrier(w, 0, NULL, 0), "barrier after all-to-all");
  TRY_HIP(mori_hipDeviceSynchronize(), "synchronize after barrier");
  TRY_HIP(mori_hipMemcpy(host, (char *)base + half, chunk * (size_t)world,
                         hipMemcpyDeviceToHost),
          "read receive area");
  for (int q = 0; q < world; q++)
    for (size_t i = 0; i < chunk; i++)
      if (host[(size_t)q * chunk + i] != pattern(q, me, i)) {
        snprintf(msg, msglen, "rank %d: byte %zu of the chunk from rank %d is 0x%02x, expected 0x%02x",
                 me, i, q, host[(size_t)q * chunk + i], pattern(q, me, i));
        return 1;
      }
  rep->bytes_verified = chunk * (size_t)world;
  return 0;
}

static int signals(const mori_rank_ctx *ctx, mori_window *w, struct rank_report *rep, int n,
                   char *msg, size_t msglen) {
  int next = (ctx->rank + 1) % ctx->world, prev = (ctx->rank + ctx->world - 1) % ctx->world;
  TRY(mori_window_put_signal(w, next, 1, NULL, 0), "put_signal to next rank");
  TRY(mori_window_wait_signal(w, prev, 1, NULL, 0), "wait_signal from previous rank");
  double t0 = cli_now_us();
  for (int i = 0; i < n; i++) TRY(mori_window_barrier(w, 2, NULL, 0), "barrier");
  TRY_HIP(mori_hipDeviceSynchronize(), "synchronize after barriers");
  rep->barrier_us = (cli_now_us() - t0) / n;
  return 0;
}

/* --exit-live: the rank returns with its window live and its block
 * allocated, so the core's exit hook tears everything down.  This hook is
 * registered before the first allocation registers the core's, so it runs
 * after it (atexit is last in, first out) and fails the rank's exit status
 * if the teardown left anything in the shim's ledger. */
static int exit_rank = -1;
static void check_exit_teardown(void) {
  long live = mori_shim_registry_total();
  if (live == 0) return;
  fprintf(stderr, "rank %d: the exit teardown left %ld resources live:\n", exit_rank, live);
  mori_shim_registry_report(stderr);
  fflush(stderr);
  _exit(3);
}

/* The ranks meet at a start line (through the store, untimed) before the
 * timed rendezvous, so that its figure is what the rendezvous costs, not
 * how far apart the ranks came out of runtime bring-up. */
static int start_line(const mori_rank_ctx *ctx) {
  char key[160];
  const char *run = ctx->store->incarnation ? ctx->store->incarnation : "-";
  snprintf(key, sizeof key, "demo/%s/start/%d", run, ctx->rank);
  if (ctx->store->set(ctx->store, key, "1", 1) != 0) return -1;
  for (int r = 0; r < ctx->world; r++) {
    void *v = NULL;
    size_t n = 0;
    snprintf(key, sizeof key, "demo/%s/start/%d", run, r);
    if (r != ctx->rank && ctx->store->get(ctx->store, key, &v, &n, mori_symm_timeout_ms()) != 0)
      return -1;
    free(v);
  }
  return 0;
}

static int demo_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const struct demo_args *a = ctx->arg;
  struct rank_report rep = {0};
  int ndev = 0;
  if (a->exit_live) {
    exit_rank = ctx->rank;
    atexit(check_exit_teardown);
  }
  if (mori_shim_select(a->r.shim) != 0) {
    snprintf(msg, msglen, "rank %d: %s", ctx->rank, mori_shim_message());
    return 1;
  }
  TRY_HIP(mori_hipGetDeviceCount(&ndev), "hipGetDeviceCount");
  /* The first allocation brings the runtime up (contexts, driver fds):
   * time it apart, and take the fd baseline after it. */
  void *warm = NULL;
  double t0 = cli_now_us();
  TRY(mori_symm_alloc(1, ctx->rank % ndev, &warm), "warm-up alloc");
  TRY(mori_symm_free(warm), "warm-up free");
  rep.init_us = cli_now_us() - t0;
  int fds0 = mori_count_fds();
  uint8_t *host = malloc(a->size);
  if (host == NULL) {
    snprintf(msg, msglen, "rank %d: out of host memory", ctx->rank);
    return 1;
  }
  void *base = NULL;
  mori_window *w = NULL;
  t0 = cli_now_us();
  int rc = mori_symm_alloc(a->size, ctx->rank % ndev, &base);
  rep.alloc_us = cli_now_us() - t0;
  if (rc == 0) rc = start_line(ctx);
  if (rc == 0) {
    t0 = cli_now_us();
    rc = mori_symm_rendezvous(base, "demo", ctx->rank, ctx->world, ctx->store, &w, NULL);
    rep.rendezvous_us = cli_now_us() - t0;
  }
  if (rc != 0) {
    snprintf(msg, msglen, "rank %d: %s", ctx->rank, mori_last_error());
    free(host);
    return 1;
  }
  t0 = cli_now_us();
  for (int i = 0; i < a->cached_calls; i++) {
    mori_window *again = NULL;
    if (mori_symm_rendezvous((char *)base + 64, "demo", ctx->rank, ctx->world, ctx->store,
                             &again, NULL) != 0 || again != w) {
      snprintf(msg, msglen, "rank %d: cached rendezvous: %s", ctx->rank, mori_last_error());
      free(host);
      return 1;
    }
  }
  rep.cached_us = (cli_now_us() - t0) / (a->cached_calls ? a->cached_calls : 1);
  rc = exchange(ctx, a, w, base, host, &rep, msg, msglen);
  if (rc == 0) rc = signals(ctx, w, &rep, a->barriers, msg, msglen);
  free(host);
  if (rc != 0) return rc;
  /* Teardown is local; no rank may unmap while a peer still writes. */
  TRY(mori_window_barrier(w, 0, NULL, 0), "final barrier");
  TRY_HIP(mori_hipDeviceSynchronize(), "synchronize before teardown");
  if (a->exit_live) {
    snprintf(msg, msglen,
             "rank %d ok init_us=%.0f alloc_us=%.0f rendezvous_us=%.0f cached_us=%.3f "
             "barrier_us=%.1f a2a_us=%.0f bytes=%zu live=%ld (torn down at exit)",
             ctx->rank, rep.init_us, rep.alloc_us, rep.rendezvous_us, rep.cached_us,
             rep.barrier_us, rep.a2a_us, rep.bytes_verified, mori_shim_registry_total());
    return 0;
  }
  TRY(mori_symm_free(base), "free");
  TRY(mori_symm_release_all(), "release_all");
  rep.leaks = mori_shim_registry_total();
  rep.fd_delta = mori_count_fds() - fds0;
  snprintf(msg, msglen,
           "rank %d ok init_us=%.0f alloc_us=%.0f rendezvous_us=%.0f cached_us=%.3f barrier_us=%.1f "
           "a2a_us=%.0f bytes=%zu leaks=%ld fds=%+d",
           ctx->rank, rep.init_us, rep.alloc_us, rep.rendezvous_us, rep.cached_us, rep.barrier_us,
           rep.a2a_us, rep.bytes_verified, rep.leaks, rep.fd_delta);
  return rep.leaks != 0 || rep.fd_delta != 0;
}

static double field(const char *line, const char *key) {
  const char *p = strstr(line, key);
  return p ? strtod(p + strlen(key), NULL) : 0;
}

static const cli_option demo_options[] = {
    CLI_RANKS_OPTIONS(struct demo_args, 4),
    {"--size", CLI_SIZE, offsetof(struct demo_args, size), 2, 16LL << 30, NULL, "BYTES",
     "buffer per rank, half sent, half received (default 8M; at least 2 per rank)"},
    {"--timeout-ms", CLI_INT, offsetof(struct demo_args, deadline_ms), CLI_DEADLINE_MS_MIN, CLI_DEADLINE_MS_MAX, NULL, "MS",
     "kill ranks still running after MS (default 120000)"},
    {"--exit-live", CLI_FLAG, offsetof(struct demo_args, exit_live), 0, 0, NULL, NULL,
     "end with the window live and the block allocated: the exit hook tears down, and a rank "
     "fails if that leaves anything"},
    {0},
};

static int demo_run(int argc, char **argv) {
  struct demo_args a = {.r = {.ranks = 4}, .size = 8u << 20, .deadline_ms = 120000,
                        .cached_calls = 1000, .barriers = 100};
  int rc = cli_parse(&cli_demo_command, &a, argc, argv);
  if (rc != 0) return rc == CLI_EXIT_HELP ? 0 : rc;
  if (a.size < (size_t)a.r.ranks * 2)
    return cli_usage_error(&cli_demo_command,
                           "--size '%zu' is too small for %d ranks (accepted: at least 2 bytes "
                           "per rank, %d)",
                           a.size, a.r.ranks, a.r.ranks * 2);
  rc = cli_ranks_prepare(&cli_demo_command, &a.r);
  if (rc != 0) return rc;
  /* What each rank sends and verifies, the quantity of every rank's bytes=
   * and, summed, of the closing line: the second half of its buffer, a
   * chunk from each rank (demo_rank). */
  size_t per_rank = a.size / 2 / (size_t)a.r.ranks * (size_t)a.r.ranks;
  char buffer[32];
  cli_format_size((long long)a.size, buffer, sizeof buffer);
  printf("demo: %d ranks on %d device(s), shim %s, buffers of %s: bytes=%zu per rank "
         "(a chunk to every rank, each verified)\n",
         a.r.ranks, a.r.devices, cli_shim_label(a.r.shim), buffer, per_rank);
  fflush(stdout);

  mori_rank_result *res = calloc((size_t)a.r.ranks, sizeof *res);
  if (res == NULL) {
    fprintf(stderr, "demo FAILED: out of host memory\n");
    return 1;
  }
  (void)mori_launch(a.r.ranks, demo_rank, &a, a.deadline_ms, res);
  int failed = cli_ranks_report(&cli_demo_command, a.r.ranks, res, a.deadline_ms);
  double rdv = 0, cached = 0, barrier = 0, a2a = 0, alloc = 0, init = 0;
  size_t bytes = 0;
  long leaks = 0;
  for (int r = 0; r < a.r.ranks && failed == 0; r++) {
    const char *m = res[r].msg;
    init = init > field(m, "init_us=") ? init : field(m, "init_us=");
    alloc = alloc > field(m, " alloc_us=") ? alloc : field(m, " alloc_us=");
    rdv = rdv > field(m, "rendezvous_us=") ? rdv : field(m, "rendezvous_us=");
    cached += field(m, "cached_us=") / a.r.ranks;
    barrier += field(m, "barrier_us=") / a.r.ranks;
    a2a = a2a > field(m, "a2a_us=") ? a2a : field(m, "a2a_us=");
    bytes += (size_t)field(m, "bytes=");
    leaks += (long)field(m, "leaks=");
  }
  if (failed == 0) {
    size_t moved = bytes / (size_t)a.r.ranks * (size_t)(a.r.ranks - 1);
    printf("timings: runtime init + first alloc/free %.0f us, alloc %.0f us, first rendezvous "
           "%.0f us, cached rendezvous %.3f us, barrier %.1f us, all-to-all %.0f us (%.2f GB/s "
           "aggregate, peers only)\n",
           init, alloc, rdv, cached, barrier, a2a, a2a > 0 ? (double)moved / a2a / 1e3 : 0.0);
    printf("demo ok: ranks=%d bytes=%zu leaks=%ld (bytes: %d x %zu per rank)%s%s\n", a.r.ranks,
           bytes, leaks, a.r.ranks, per_rank,
           a.exit_live ? " (teardown at exit, checked by each rank)" : "",
           cli_emulator_note(a.r.shim));
  }
  free(res);
  return failed == 0 ? 0 : 1;
}

const cli_command cli_demo_command = {
    .name = "demo",
    .run = demo_run,
    .summary = "N forked ranks: alloc, rendezvous, all-to-all, barriers, verify every byte, "
               "teardown, count leaks",
    .options = demo_options,
};
