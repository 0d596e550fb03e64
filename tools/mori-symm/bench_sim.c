/*
 * bench_sim.c - `mori-symm bench-sim`: the cost model of the control path.
 * N forked ranks over the file store run each step below and count, per
 * rank, what the step cost them: store operations (a counting store wrapped
 * around the launcher's), datagrams, stream memops (the core's own count of
 * operations) and the runtime calls that enqueued them, other runtime calls,
 * syscalls and host allocations (the seam's per-call counters, kept by the
 * fault shim, which the command preloads itself).  For each count it prints
 * how it grows with the world size and flags a per-rank count that grows as
 * N^2.  Counts, not times: the figures mean the same on a loaded machine.
 */
#include "cli.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch.h"
#include "mori/error_internal.h"
#include "mori/fi.h"
#include "mori/symm.h"

/* ---- what is counted ---- */

enum { M_STORE_OPS, M_STORE_POLLS, M_DATAGRAMS, M_MEMOPS, M_MEMOP_CALLS, M_RUNTIME, M_SYSCALLS,
       M_ALLOCS, M_COUNT };

/* timing: the count depends on how long a rank waits for its peers (a
 * poll that finds nothing), so it is reported but never flagged. */
static const struct {
  const char *name;
  int timing;
  const char *what;
} metrics[M_COUNT] = {
    [M_STORE_OPS] = {"store_ops", 0, "store set/add, and gets that found something new"},
    [M_STORE_POLLS] = {"store_polls", 1,
                       "store gets that timed out (a peer not there yet) or found again what "
                       "they found before"},
    [M_DATAGRAMS] = {"datagrams", 0, "fd-channel datagrams sent and received"},
    [M_MEMOPS] = {"memops", 0, "stream memory operations the signals enqueued (write/wait value)"},
    [M_MEMOP_CALLS] = {"memop_calls", 0, "runtime calls that enqueued them (a batch is one)"},
    [M_RUNTIME] = {"runtime", 0, "other GPU runtime calls (VMM, copies, syncs)"},
    [M_SYSCALLS] = {"syscalls", 1, "OS calls through the seam (polling included)"},
    [M_ALLOCS] = {"allocs", 1, "host allocations through the seam"},
};

/* Seam calls that are not counted as what their side of the seam says:
 * runtime calls are M_RUNTIME and OS calls M_SYSCALLS unless listed here.
 * Names absent from this build's call list are simply never seen. */
static const struct {
  const char *name;
  int metric;
} call_metrics[] = {
    {"hipStreamWriteValue32", M_MEMOP_CALLS}, {"hipStreamWaitValue32", M_MEMOP_CALLS},
    {"hipStreamWriteValue64", M_MEMOP_CALLS}, {"hipStreamWaitValue64", M_MEMOP_CALLS},
    {"hipStreamBatchMemOp", M_MEMOP_CALLS},   {"malloc", M_ALLOCS},
    {"calloc", M_ALLOCS},                {"realloc", M_ALLOCS},
    {"strdup", M_ALLOCS},
};

static int metric_of_call(int call) {
  const char *name = mori_fi_call_name(call);
  if (strncmp(name, "mori_", 5) == 0) name += 5;
  for (size_t i = 0; i < sizeof call_metrics / sizeof call_metrics[0]; i++)
    if (strcmp(name, call_metrics[i].name) == 0) return call_metrics[i].metric;
  return mori_fi_call_is_hip(call) ? M_RUNTIME : M_SYSCALLS;
}

/* ---- the counting store ---- */

/* What each key held when a get last found it (a hash of both), so that
 * a get finding the same value again counts as a poll: the leader of a
 * first rendezvous reads the joins it answered again now and then, as
 * often as its wait is long, and so does anyone looking for a change. */
#define SEEN_SLOTS 4096

typedef struct counting_store {
  mori_store base;
  mori_store *inner;
  long ops, polls;
  struct {
    uint64_t key, value;
  } seen[SEEN_SLOTS];
} counting_store;

static uint64_t fnv1a(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* 1 if key last held value; records it either way. */
static int found_again(counting_store *c, const char *key, const void *value, size_t len) {
  uint64_t k = fnv1a(0xcbf29ce484222325ull, key, strlen(key)) | 1, v = fnv1a(k, value, len);
  for (size_t i = k % SEEN_SLOTS, n = 0; n < SEEN_SLOTS; i = (i + 1) % SEEN_SLOTS, n++) {
    if (c->seen[i].key == 0) c->seen[i].key = k; /* a free slot: the key's now */
    if (c->seen[i].key != k) continue;
    int again = c->seen[i].value == v;
    c->seen[i].value = v;
    return again;
  }
  return 0; /* full: counted as new */
}

static int cs_set(mori_store *s, const char *key, const void *value, size_t len) {
  counting_store *c = (counting_store *)s;
  c->ops++;
  return c->inner->set(c->inner, key, value, len);
}

static int cs_get(mori_store *s, const char *key, void **value, size_t *len, int timeout_ms) {
  counting_store *c = (counting_store *)s;
  int rc = c->inner->get(c->inner, key, value, len, timeout_ms);
  if (rc == MORI_ETIMEDOUT || (rc == 0 && found_again(c, key, *value, *len))) c->polls++;
  else c->ops++;
  return rc;
}

static int cs_add(mori_store *s, const char *key, int64_t delta, int64_t *result) {
  counting_store *c = (counting_store *)s;
  c->ops++;
  return c->inner->add(c->inner, key, delta, result);
}

static void cs_destroy(mori_store *s) { (void)s; /* the launcher destroys the inner one */ }

/* ---- one rank ---- */

typedef struct snapshot {
  long m[M_COUNT];
  double us;
} snapshot;

typedef struct rank_state {
  counting_store store;
  int seam; /* the fault shim's counters are readable */
  const mori_rank_ctx *ctx;
  int device, reps;
  size_t size;
  void *base;
  mori_window *w;
} rank_state;

static void take(const rank_state *st, snapshot *s) {
  static mori_fi_counts counts; /* large: not on the stack */
  memset(s, 0, sizeof *s);
  mori_symm_signal_stats sig;
  mori_symm_signal_stats_get(&sig);
  s->m[M_STORE_OPS] = st->store.ops;
  s->m[M_STORE_POLLS] = st->store.polls;
  s->m[M_MEMOPS] = sig.remote_writes + sig.local_writes + sig.local_waits + sig.remote_waits;
  if (st->seam && mori_fi_counts_get(&counts) == 0) {
    for (int c = 0; c < MORI_FI_CALL__COUNT; c++) s->m[metric_of_call(c)] += counts.calls[c];
    s->m[M_DATAGRAMS] = counts.datagrams_sent + counts.datagrams_received;
  }
  s->us = cli_now_us();
}

static int step_alloc(rank_state *st) { return mori_symm_alloc(st->size, st->device, &st->base); }

static int step_rendezvous(rank_state *st) {
  return mori_symm_rendezvous(st->base, "bench", st->ctx->rank, st->ctx->world,
                              &st->store.base, &st->w, NULL);
}

static int step_cached(rank_state *st) {
  for (int i = 0; i < st->reps; i++) {
    mori_window *again = NULL;
    int rc = mori_symm_rendezvous(st->base, "bench", st->ctx->rank, st->ctx->world,
                                  &st->store.base, &again, NULL);
    if (rc != 0) return rc;
  }
  return 0;
}

static int step_barrier(rank_state *st) {
  for (int i = 0; i < st->reps; i++) MORI_GUARD(mori_window_barrier(st->w, 0, NULL, 0));
  return mori_hipDeviceSynchronize() == hipSuccess ? 0 : MORI_EHIP;
}

static int step_put_wait(rank_state *st) {
  int world = st->ctx->world, next = (st->ctx->rank + 1) % world,
      prev = (st->ctx->rank + world - 1) % world;
  for (int i = 0; i < st->reps; i++) {
    MORI_GUARD(mori_window_put_signal(st->w, next, 1, NULL, 0));
    MORI_GUARD(mori_window_wait_signal(st->w, prev, 1, NULL, 0));
  }
  return mori_hipDeviceSynchronize() == hipSuccess ? 0 : MORI_EHIP;
}

static int step_teardown(rank_state *st) {
  int rc = mori_symm_free(st->base);
  st->base = NULL;
  return rc;
}

/* repeated: the step runs its operation reps times; counts are per one.
 * quiesce: an uncounted barrier first, so that no peer still signals into
 * what the step takes away (teardown is local). */
static const struct step {
  const char *name;
  int (*run)(rank_state *st);
  int repeated, quiesce;
} steps[] = {
    {"alloc", step_alloc, 0, 0},
    {"rendezvous", step_rendezvous, 0, 0},
    {"cached", step_cached, 1, 0},
    {"barrier", step_barrier, 1, 0},
    {"put_wait", step_put_wait, 1, 0},
    {"teardown", step_teardown, 0, 1},
};
#define NSTEPS (sizeof steps / sizeof steps[0])

struct bench_args {
  const char *shim;
  size_t size;
  int reps;
};

static int bench_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const struct bench_args *a = ctx->arg;
  rank_state st = {.store = {.base = {cs_set, cs_get, cs_add, cs_destroy}, .inner = ctx->store},
                   .seam = mori_fi_loaded(), .ctx = ctx, .reps = a->reps, .size = a->size};
  int ndev = 0;
  if (mori_shim_select(a->shim) != 0 || mori_hipGetDeviceCount(&ndev) != hipSuccess) {
    snprintf(msg, msglen, "rank %d: %s", ctx->rank, mori_shim_message());
    return 1;
  }
  st.device = ctx->rank % ndev;
  /* Runtime bring-up and the probe happen once per process: not a step. */
  void *warm = NULL;
  if (mori_symm_alloc(1, st.device, &warm) != 0 || mori_symm_free(warm) != 0) {
    snprintf(msg, msglen, "rank %d: warm-up: %s", ctx->rank, mori_last_error());
    return 1;
  }
  size_t n = (size_t)snprintf(msg, msglen, "counts");
  for (size_t s = 0; s < NSTEPS; s++) {
    snapshot before, after;
    if (steps[s].quiesce && step_barrier(&(rank_state){.w = st.w, .reps = 1}) != 0) {
      snprintf(msg, msglen, "rank %d: barrier before %s: %s", ctx->rank, steps[s].name,
               mori_last_error());
      return 1;
    }
    take(&st, &before);
    if (steps[s].run(&st) != 0) {
      snprintf(msg, msglen, "rank %d: %s: %s", ctx->rank, steps[s].name, mori_last_error());
      return 1;
    }
    take(&st, &after);
    n += (size_t)snprintf(msg + n, n < msglen ? msglen - n : 0, " %s:", steps[s].name);
    for (int m = 0; m < M_COUNT; m++)
      n += (size_t)snprintf(msg + n, n < msglen ? msglen - n : 0, "%ld,",
                            after.m[m] - before.m[m]);
    n += (size_t)snprintf(msg + n, n < msglen ? msglen - n : 0, "%.0f", after.us - before.us);
  }
  n += (size_t)snprintf(msg + n, n < msglen ? msglen - n : 0, " seam=%d", st.seam);
  if (n >= msglen) {
    snprintf(msg, msglen, "rank %d: report does not fit", ctx->rank);
    return 1;
  }
  return 0;
}

/* ---- the parent: launches, parsing, growth ---- */

typedef struct world_counts {
  int world, ranks_ok, seam;
  double max[NSTEPS][M_COUNT + 1]; /* per rank, per operation; [M_COUNT]: wall us */
  double mean[NSTEPS][M_COUNT + 1];
} world_counts;

static int parse_rank(const char *msg, const struct bench_args *a, double out[NSTEPS][M_COUNT + 1],
                      int *seam) {
  const char *names[NSTEPS];
  int repeated[NSTEPS];
  for (size_t s = 0; s < NSTEPS; s++) {
    names[s] = steps[s].name;
    repeated[s] = steps[s].repeated;
  }
  return cli_bench_parse(msg, names, repeated, NSTEPS, M_COUNT, a->reps, &out[0][0], seam);
}

static int run_world(int world, const struct bench_args *a, int deadline_ms, world_counts *wc) {
  memset(wc, 0, sizeof *wc);
  wc->world = world;
  mori_rank_result *res = calloc((size_t)world, sizeof *res);
  if (res == NULL) return -1;
  int failed = mori_launch(world, bench_rank, (void *)a, deadline_ms, res);
  wc->seam = 1;
  for (int r = 0; r < world; r++) {
    double one[NSTEPS][M_COUNT + 1];
    int seam = 0;
    if (res[r].hung || res[r].signal || res[r].exit_code || parse_rank(res[r].msg, a, one, &seam)) {
      printf("  %d ranks: rank %d: %s\n", world, r,
             res[r].hung ? "hung" : res[r].msg[0] ? res[r].msg : "no report");
      continue;
    }
    wc->ranks_ok++;
    wc->seam &= seam;
    for (size_t s = 0; s < NSTEPS; s++)
      for (int m = 0; m <= M_COUNT; m++) {
        wc->max[s][m] = one[s][m] > wc->max[s][m] ? one[s][m] : wc->max[s][m];
        wc->mean[s][m] += one[s][m] / world;
      }
  }
  free(res);
  return failed == 0 && wc->ranks_ok == world ? 0 : -1;
}

/* The exponent k of c ~ (N-1)^k between the two largest worlds: a rank's
 * cost is naturally per peer, so a count linear in the peers reads 1.0 at
 * any pair of sizes and a count per pair of peers reads 2.0. */
static double growth(double c0, int n0, double c1, int n1) {
  if (c1 <= 0 && c0 <= 0) return 0;
  if (c0 <= 0 || n0 < 2 || n1 <= n0) return NAN;
  return log(c1 / c0) / log((double)(n1 - 1) / (double)(n0 - 1));
}

static const char *growth_class(double k, double c1) {
  if (isnan(k)) return c1 > 0 ? "appears" : "O(1)";
  if (k < 0.3) return "O(1)";
  if (k < 1.5) return "O(N)";
  return "O(N^2)";
}

static int parse_worlds(const char *text, int *worlds, int max) {
  int n = 0;
  for (const char *p = text; *p && n < max;) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 2 || v > 1024 || (n > 0 && v <= worlds[n - 1])) return -1;
    worlds[n++] = (int)v;
    if (*end == '\0') break;
    if (*end != ',') return -1;
    p = end + 1;
  }
  return n;
}

/* The fault shim beside libmori_core.so, preloaded by re-running this
 * command under it: its counters are the seam's.  Returns only if that
 * cannot be done (the counts of the seam are then reported as absent). */
static void preload_counting_shim(int argc, char **argv) {
  Dl_info info;
  if (mori_fi_loaded() || getenv("MORI_BENCH_SIM_PRELOADED") != NULL ||
      dladdr((void *)mori_symm_alloc, &info) == 0 || info.dli_fname == NULL)
    return;
  char lib[4096], preload[8192];
  const char *slash = strrchr(info.dli_fname, '/');
  int dirlen = slash ? (int)(slash - info.dli_fname) : 1;
  snprintf(lib, sizeof lib, "%.*s/libmori_faultinject.so", dirlen, slash ? info.dli_fname : ".");
  if (access(lib, R_OK) != 0) return;
  const char *old = getenv("LD_PRELOAD");
  snprintf(preload, sizeof preload, "%s%s%s", lib, old && *old ? ":" : "", old ? old : "");
  char **args = calloc((size_t)argc + 3, sizeof *args);
  if (args == NULL) return;
  args[0] = "mori-symm";
  args[1] = "bench-sim";
  for (int i = 0; i < argc; i++) args[i + 2] = argv[i];
  setenv("LD_PRELOAD", preload, 1);
  setenv("MORI_BENCH_SIM_PRELOADED", "1", 1);
  fflush(NULL);
  execv("/proc/self/exe", args);
  unsetenv("MORI_BENCH_SIM_PRELOADED"); /* exec failed: go on without it */
  free(args);
}

struct bench_sim_args {
  const char *ranks, *shim;
  size_t size;
  int reps, deadline_ms;
};

static const cli_option bench_sim_options[] = {
    {"--ranks", CLI_TEXT, offsetof(struct bench_sim_args, ranks), 0, 0, NULL, "N,N,...",
     "world sizes, rising, each 2 to 1024 (default 2,4,8,16)"},
    {"--reps", CLI_INT, offsetof(struct bench_sim_args, reps), 1, 100000, NULL, "N",
     "repetitions of each repeated step (default 20)"},
    {"--size", CLI_SIZE, offsetof(struct bench_sim_args, size), 1, 16LL << 30, NULL, "BYTES",
     "block size (default 1M)"},
    {"--shim", CLI_CHOICE, offsetof(struct bench_sim_args, shim), 0, 0, cli_shims, "SHIM",
     "GPU shim backend (default sim)"},
    {"--timeout-ms", CLI_INT, offsetof(struct bench_sim_args, deadline_ms), CLI_DEADLINE_MS_MIN, CLI_DEADLINE_MS_MAX, NULL,
     "MS", "kill a world's ranks still running after MS (default 600000)"},
    {0},
};

static int bench_sim_run(int argc, char **argv) {
  struct bench_sim_args p = {.ranks = "2,4,8,16", .shim = "sim", .size = 1u << 20, .reps = 20,
                             .deadline_ms = 600000};
  int rc = cli_parse(&cli_bench_sim_command, &p, argc, argv);
  if (rc != 0) return rc == CLI_EXIT_HELP ? 0 : rc;
  struct bench_args a = {.shim = p.shim, .size = p.size, .reps = p.reps};
  const char *ranks = p.ranks;
  int deadline_ms = p.deadline_ms;
  int worlds[16];
  int nworlds = parse_worlds(ranks, worlds, 16);
  if (nworlds < 1)
    return cli_usage_error(&cli_bench_sim_command,
                           "--ranks '%s': not a list of world sizes (accepted: up to 16 whole "
                           "numbers, 2 to 1024, rising, comma separated)",
                           ranks);
  preload_counting_shim(argc, argv);
  a.shim = cli_default_shim(a.shim);
  int seam = mori_fi_loaded();
  printf("bench-sim: ranks %s, shim %s, %d reps of each repeated step, %zu-byte blocks\n", ranks,
         cli_shim_label(a.shim), a.reps, a.size);
  printf("  per rank and per operation (a repeated step's counts and wall_us divided by its %d "
         "reps), the most any rank did; growth k: count ~ (N-1)^k between the two largest "
         "worlds\n", a.reps);
  if (!seam)
    printf("  seam counts absent: libmori_faultinject.so not found beside libmori_core.so\n");
  fflush(stdout);

  world_counts *wc = calloc((size_t)nworlds, sizeof *wc);
  if (wc == NULL) return 1;
  int failed = 0;
  for (int i = 0; i < nworlds; i++) {
    char n[16];
    snprintf(n, sizeof n, "%d", worlds[i]);
    if (strcmp(a.shim, "sim") == 0 && worlds[i] > 8) setenv("MORI_SIM_DEVICES", n, 1);
    if (run_world(worlds[i], &a, deadline_ms, &wc[i]) != 0) failed++;
    seam &= wc[i].seam;
  }

  printf("%-11s %-12s", "step", "count");
  for (int i = 0; i < nworlds; i++) printf(" %8s%-3d", "N=", worlds[i]);
  printf(" %7s  %s\n", "k", "growth");
  int flagged = 0, rows = 0, zero = 0;
  const world_counts *lo = &wc[nworlds > 1 ? nworlds - 2 : 0], *hi = &wc[nworlds - 1];
  for (size_t s = 0; s < NSTEPS; s++)
    for (int m = 0; m <= M_COUNT; m++) {
      int is_wall = m == M_COUNT, nonzero = 0;
      if (!seam && !is_wall && m != M_STORE_OPS && m != M_STORE_POLLS) continue;
      for (int i = 0; i < nworlds; i++) nonzero |= wc[i].max[s][m] != 0;
      if (!nonzero) {
        zero++;
        continue;
      }
      double k = growth(lo->max[s][m], lo->world, hi->max[s][m], hi->world);
      const char *cls = nworlds < 2 || is_wall ? "-" : growth_class(k, hi->max[s][m]);
      int flag = !is_wall && !metrics[m].timing && strcmp(cls, "O(N^2)") == 0;
      flagged += flag;
      rows++;
      printf("%-11s %-12s", steps[s].name, is_wall ? "wall_us" : metrics[m].name);
      for (int i = 0; i < nworlds; i++) printf(" %11.1f", wc[i].max[s][m]);
      if (isnan(k) || nworlds < 2) printf(" %7s", "-");
      else printf(" %7.2f", k);
      printf("  %s%s\n", cls,
             flag ? "  FLAGGED: grows per pair of peers"
                  : is_wall ? "  (time on this machine)"
                            : metrics[m].timing ? "  (depends on waits for peers)" : "");
    }
  printf("  (%d more step/count pairs are 0 at every size)\n", zero);

  /* What must hold at any size: a cached rendezvous is a lookup, and a
   * barrier is memops, not store traffic. */
  int bad = 0;
  for (int i = 0; i < nworlds; i++) {
    const double *cached = wc[i].max[2], *barrier = wc[i].max[3];
    if (cached[M_STORE_OPS] + cached[M_STORE_POLLS] + cached[M_DATAGRAMS] + cached[M_MEMOPS] +
            cached[M_MEMOP_CALLS] + cached[M_RUNTIME] + cached[M_SYSCALLS] != 0) {
      printf("  %d ranks: a cached rendezvous costs more than a lookup\n", worlds[i]);
      bad++;
    }
    if (barrier[M_STORE_OPS] + barrier[M_STORE_POLLS] != 0 || barrier[M_MEMOPS] <= 0) {
      printf("  %d ranks: a barrier uses the store or no memops\n", worlds[i]);
      bad++;
    }
  }
  free(wc);
  if (failed || bad || flagged) {
    fprintf(stderr, "bench-sim FAILED: ranks=%s failed_worlds=%d broken_rules=%d flagged=%d\n",
            ranks, failed, bad, flagged);
    return 1;
  }
  printf("bench-sim ok: ranks=%s steps=%zu rows=%d flagged=0 seam=%s%s\n", ranks, NSTEPS, rows,
         seam ? "yes" : "no", cli_emulator_note(a.shim));
  return 0;
}

const cli_command cli_bench_sim_command = {
    .name = "bench-sim",
    .run = bench_sim_run,
    .summary = "per-rank store ops, datagrams, memops, runtime calls, syscalls and allocations "
               "per step against world size; O(N^2) growth flagged",
    .options = bench_sim_options,
};
