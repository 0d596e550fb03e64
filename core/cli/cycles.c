/*
 * cycles.c - `mori-symm cycles`: alloc -> rendezvous -> barrier -> free,
 * repeated, in N ranks; reports growth of open fds, of the shim ledger and
 * of device memory in use between the end of a warm-up and the end.
 *
 * fds and the ledger must not grow at all.  Device memory is read
 * device-wide (hipMemGetInfo), where the driver's own lazily made buffers
 * show too (4 MiB once in 1000 cycles on an H200), so it fails only at the
 * size of a leak: half the cycles' blocks or more.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch.h"
#include "mori/symm.h"

struct cycles_args {
  int ranks, count;
  size_t size;
  const char *shim;
};

static long used_bytes(void) {
  size_t free_b = 0, total = 0;
  if (mori_hipMemGetInfo(&free_b, &total) != hipSuccess) return -1;
  return (long)(total - free_b);
}

static int one_cycle(const mori_rank_ctx *ctx, const struct cycles_args *a, int device,
                     char *msg, size_t msglen) {
  void *p = NULL;
  mori_window *w = NULL;
  int rc = mori_symm_alloc(a->size, device, &p);
  if (rc == 0) rc = mori_symm_rendezvous(p, "cycles", ctx->rank, ctx->world, ctx->store, &w, NULL);
  if (rc == 0) rc = mori_window_barrier(w, 0, NULL, 0);
  if (rc == 0 && mori_hipDeviceSynchronize() != hipSuccess) rc = MORI_EHIP;
  if (p != NULL) {
    int f = mori_symm_free(p);
    if (rc == 0) rc = f;
  }
  if (rc != 0) snprintf(msg, msglen, "rank %d: %s", ctx->rank, mori_last_error());
  return rc;
}

static int cycles_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const struct cycles_args *a = ctx->arg;
  int ndev = 0;
  if (mori_shim_select(a->shim) != 0 || mori_hipGetDeviceCount(&ndev) != hipSuccess) {
    snprintf(msg, msglen, "rank %d: %s", ctx->rank, mori_shim_message());
    return 1;
  }
  int device = ctx->rank % ndev, warm = a->count < 10 ? a->count : 10;
  for (int i = 0; i < warm; i++)
    if (one_cycle(ctx, a, device, msg, msglen)) return 1;
  int fds0 = mori_count_fds();
  long ledger0 = mori_shim_ledger_total(), mem0 = used_bytes();
  double t0 = cli_now_us();
  for (int i = warm; i < a->count; i++)
    if (one_cycle(ctx, a, device, msg, msglen)) return 1;
  double per = (cli_now_us() - t0) / (a->count - warm > 0 ? a->count - warm : 1);
  long mem1 = used_bytes();
  int fd_growth = mori_count_fds() - fds0;
  long ledger = mori_shim_ledger_total() - ledger0;
  snprintf(msg, msglen, "rank %d ok cycle_us=%.0f fd_growth=%d ledger_growth=%ld devmem_growth=%ld%s",
           ctx->rank, per, fd_growth, ledger, mem0 >= 0 && mem1 >= 0 ? mem1 - mem0 : 0,
           mem0 < 0 ? " (device memory not reported by this backend)" : "");
  long leak_floor = (long)(a->size * (size_t)(a->count - warm) / 2);
  return fd_growth != 0 || ledger != 0 ||
         (mem0 >= 0 && mem1 >= 0 && mem1 - mem0 >= leak_floor && leak_floor > 0);
}

int cli_cycles(int argc, char **argv) {
  struct cycles_args a = {.ranks = 2, .count = 1000, .size = 1u << 20, .shim = NULL};
  for (int i = 0; i < argc; i++) {
    if (i + 1 < argc && strcmp(argv[i], "--ranks") == 0) a.ranks = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--count") == 0) a.count = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--size") == 0) a.size = cli_parse_size(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--shim") == 0) a.shim = argv[++i];
    else {
      fprintf(stderr, "usage: mori-symm cycles [--ranks N] [--count N] [--size B] [--shim S]\n");
      return 2;
    }
  }
  if (a.ranks < 1 || a.count < 1 || a.size == 0) return 2;
  a.shim = cli_default_shim(a.shim);
  printf("cycles: %d ranks, %d x (alloc %zu bytes, rendezvous, barrier, free), shim %s\n",
         a.ranks, a.count, a.size, a.shim);
  fflush(stdout);
  mori_rank_result *res = calloc((size_t)a.ranks, sizeof *res);
  int failed = mori_launch(a.ranks, cycles_rank, &a, 600000, res);
  for (int r = 0; r < a.ranks; r++)
    printf("  %s\n", res[r].hung ? "hung" : res[r].msg[0] ? res[r].msg : "no report");
  printf(failed ? "cycles FAILED: ranks=%d count=%d\n" : "cycles ok: ranks=%d count=%d\n",
         a.ranks, a.count);
  free(res);
  return failed ? 1 : 0;
}
