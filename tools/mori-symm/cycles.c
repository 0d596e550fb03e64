/*
 * cycles.c - `mori-symm cycles`: alloc -> rendezvous -> barrier -> free,
 * repeated, in N ranks; reports growth of open fds, of the shim's resource
 * registry (printed as ledger_growth, the field's first name) and
 * of device memory in use between the end of a warm-up and the end.
 *
 * fds and the registry must not grow at all.  Device memory is read
 * device-wide (hipMemGetInfo), where the driver's own lazily made buffers
 * show too (a few MiB, now and then), so it fails only at the size of a
 * leak: half the cycles' blocks or more.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mori/hip_shim.h"
#include "mori/symm.h"

struct cycles_args {
  cli_ranks r;
  int count;
  size_t size;
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
  if (mori_shim_select(a->r.shim) != 0 || mori_hipGetDeviceCount(&ndev) != hipSuccess) {
    snprintf(msg, msglen, "rank %d: %s", ctx->rank, mori_shim_message());
    return 1;
  }
  int device = ctx->rank % ndev, warm = a->count < 10 ? a->count : 10;
  for (int i = 0; i < warm; i++)
    if (one_cycle(ctx, a, device, msg, msglen)) return 1;
  int fds0 = mori_count_fds();
  long registry0 = mori_shim_registry_total(), mem0 = used_bytes();
  double t0 = cli_now_us();
  for (int i = warm; i < a->count; i++)
    if (one_cycle(ctx, a, device, msg, msglen)) return 1;
  double per = (cli_now_us() - t0) / (a->count - warm > 0 ? a->count - warm : 1);
  long mem1 = used_bytes();
  int fd_growth = mori_count_fds() - fds0;
  long registry = mori_shim_registry_total() - registry0;
  long devmem = mem0 >= 0 && mem1 >= 0 ? mem1 - mem0 : 0;
  long leak_floor = (long)(a->size * (size_t)(a->count - warm) / 2);
  int grew = fd_growth != 0 || registry != 0 || (mem0 >= 0 && mem1 >= 0 && devmem >= leak_floor &&
                                                leak_floor > 0);
  snprintf(msg, msglen, "rank %d%s cycle_us=%.0f fd_growth=%d ledger_growth=%ld devmem_growth=%ld%s",
           ctx->rank, grew ? ": growth:" : " ok", per, fd_growth, registry, devmem,
           mem0 < 0 ? " (device memory not reported by this backend)" : "");
  return grew;
}

static const cli_option cycles_options[] = {
    CLI_RANKS_OPTIONS(struct cycles_args, 2),
    {"--count", CLI_INT, offsetof(struct cycles_args, count), 1, 1000000, NULL, "N",
     "cycles per rank, the first min(10, N) a warm-up (default 1000)"},
    {"--size", CLI_SIZE, offsetof(struct cycles_args, size), 1, 16LL << 30, NULL, "BYTES",
     "bytes allocated per cycle (default 1M)"},
    {0},
};

#define CYCLES_DEADLINE_MS 600000

static int cycles_run(int argc, char **argv) {
  struct cycles_args a = {.r = {.ranks = 2}, .count = 1000, .size = 1u << 20};
  int rc = cli_parse(&cli_cycles_command, &a, argc, argv);
  if (rc != 0) return rc == CLI_EXIT_HELP ? 0 : rc;
  rc = cli_ranks_prepare(&cli_cycles_command, &a.r);
  if (rc != 0) return rc;
  printf("cycles: %d ranks on %d device(s), %d x (alloc %zu bytes, rendezvous, barrier, free), "
         "shim %s\n",
         a.r.ranks, a.r.devices, a.count, a.size, cli_shim_label(a.r.shim));
  fflush(stdout);
  mori_rank_result *res = calloc((size_t)a.r.ranks, sizeof *res);
  if (res == NULL) {
    fprintf(stderr, "cycles FAILED: out of host memory\n");
    return 1;
  }
  (void)mori_launch(a.r.ranks, cycles_rank, &a, CYCLES_DEADLINE_MS, res);
  int failed = cli_ranks_report(&cli_cycles_command, a.r.ranks, res, CYCLES_DEADLINE_MS);
  if (failed == 0)
    printf("cycles ok: ranks=%d count=%d%s\n", a.r.ranks, a.count, cli_emulator_note(a.r.shim));
  free(res);
  return failed ? 1 : 0;
}

const cli_command cli_cycles_command = {
    .name = "cycles",
    .run = cycles_run,
    .summary = "alloc, rendezvous, barrier, free, repeated in N ranks: no growth of fds, shim "
               "resource registry or device memory",
    .options = cycles_options,
};
