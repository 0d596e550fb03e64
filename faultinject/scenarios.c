/*
 * scenarios.c - the rank bodies fault sweeps run, and `mori-fi
 * run-scenario S --ranks N`, which runs one of them under mori_launch and
 * prints one line per rank.  A rank stops at its first error, tears down
 * whatever is left, and reports what it leaked.
 */
#include "fi_tool.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mori/fi.h"
#include "mori/symm.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* The first error of a rank: where, and the library's message. */
typedef struct outcome {
  char err[768];
} outcome;

static int failed(outcome *o, const char *step) {
  if (o->err[0] == '\0') snprintf(o->err, sizeof o->err, "%s: %s", step, mori_last_error());
  return -1;
}

#define STEP(o, expr, step)                                                          \
  do {                                                                               \
    if ((expr) != 0) return failed((o), (step));                                     \
  } while (0)

/* A runtime call the scenario makes itself (copies of test data). */
static int hip_failed(outcome *o, hipError_t e, const char *step, const char *call) {
  if (e == hipSuccess) return 0;
  if (o->err[0] == '\0')
    snprintf(o->err, sizeof o->err, "%s: %s failed: %s (%d): %s", step, call,
             mori_hipGetErrorName(e), (int)e, mori_shim_message());
  return -1;
}

#define HIP_STEP(o, expr, step, call)                                                \
  do {                                                                               \
    if (hip_failed((o), (expr), (step), (call)) != 0) return -1;                     \
  } while (0)

/* A rank that fails before it reaches a rendezvous tells the group
 * (mori_symm_rendezvous_abort), so peers stop waiting for its request now
 * rather than at their timeout. */
static void abort_group(const mori_rank_ctx *ctx, const char *group, int seq, const outcome *o) {
  (void)seq; /* the group's next rendezvous, which the core counts */
  (void)mori_symm_rendezvous_abort(group, ctx->rank, ctx->world, ctx->store, o->err);
}

static int alloc_or_abort(const mori_rank_ctx *ctx, size_t size, void **p, const char *group,
                          int seq, outcome *o) {
  if (mori_symm_alloc(size, ctx->rank, p) == 0) return 0;
  failed(o, "alloc");
  abort_group(ctx, group, seq, o);
  return -1;
}

/* basic: alloc -> rendezvous -> barrier -> free */
static int basic(const mori_rank_ctx *ctx, outcome *o) {
  void *base = NULL;
  mori_window *w = NULL;
  if (alloc_or_abort(ctx, MiB, &base, "world", 0, o) != 0) return -1;
  STEP(o, mori_symm_rendezvous(base, "world", ctx->rank, ctx->world, ctx->store, &w, NULL),
       "rendezvous");
  STEP(o, mori_window_barrier(w, 0, NULL, 0), "barrier");
  STEP(o, mori_symm_free(base), "free");
  return 0;
}

/* two-groups: one block in two groups, ranks numbered the other way round
 * in the second */
static int two_groups(const mori_rank_ctx *ctx, outcome *o) {
  void *base = NULL;
  mori_window *a = NULL, *b = NULL;
  if (alloc_or_abort(ctx, MiB, &base, "alpha", 0, o) != 0) return -1;
  STEP(o, mori_symm_rendezvous(base, "alpha", ctx->rank, ctx->world, ctx->store, &a, NULL),
       "rendezvous alpha");
  STEP(o, mori_symm_rendezvous(base, "beta", ctx->world - 1 - ctx->rank, ctx->world, ctx->store,
                               &b, NULL),
       "rendezvous beta");
  STEP(o, mori_window_barrier(a, 0, NULL, 0), "barrier alpha");
  STEP(o, mori_window_barrier(b, 0, NULL, 0), "barrier beta");
  STEP(o, mori_symm_free(base), "free");
  return 0;
}

/* interior: MemPool hands out pointers inside blocks; both rendezvous on
 * interior pointers must report their offsets, and a word written at that
 * offset of every peer's slot must land there. */
static int interior(const mori_rank_ctx *ctx, outcome *o) {
  static const size_t off_a = 4 * KiB, off_b = 12 * KiB + 64;
  void *a = NULL, *b = NULL;
  mori_window *wa = NULL, *wb = NULL;
  size_t got_a = 0, got_b = 0;
  if (alloc_or_abort(ctx, MiB, &a, "pool", 0, o) != 0) return -1;
  if (alloc_or_abort(ctx, MiB + 4 * KiB, &b, "pool", 0, o) != 0) return -1;
  STEP(o, mori_symm_rendezvous((char *)a + off_a, "pool", ctx->rank, ctx->world, ctx->store, &wa,
                               &got_a),
       "rendezvous a");
  STEP(o, mori_symm_rendezvous((char *)b + off_b, "pool", ctx->rank, ctx->world, ctx->store, &wb,
                               &got_b),
       "rendezvous b");
  if (got_a != off_a || got_b != off_b) {
    snprintf(o->err, sizeof o->err, "offsets %zu and %zu, expected %zu and %zu", got_a, got_b,
             off_a, off_b);
    return -1;
  }
  void *const *peers = mori_window_buffer_ptrs(wa);
  uint32_t mine = 0xC0DE0000u | (uint32_t)ctx->rank, seen[64];
  for (int p = 0; p < ctx->world; p++)
    HIP_STEP(o, mori_hipMemcpy((char *)peers[p] + off_a + 4 * (size_t)ctx->rank, &mine, 4,
                               hipMemcpyHostToDevice),
             "write peer word", "hipMemcpy");
  STEP(o, mori_window_barrier(wa, 0, NULL, 0), "barrier a");
  STEP(o, mori_window_barrier(wb, 0, NULL, 0), "barrier b");
  size_t n = (size_t)(ctx->world < 64 ? ctx->world : 64);
  HIP_STEP(o, mori_hipMemcpy(seen, (char *)a + off_a, 4 * n, hipMemcpyDeviceToHost),
           "read own words", "hipMemcpy");
  for (size_t q = 0; q < n; q++)
    if (seen[q] != (0xC0DE0000u | (uint32_t)q)) {
      snprintf(o->err, sizeof o->err, "word from rank %zu reads 0x%08x", q, seen[q]);
      return -1;
    }
  STEP(o, mori_symm_free(b), "free b");
  STEP(o, mori_symm_free(a), "free a");
  return 0;
}

/* Runs a scenario's steps, then tears down everything and reports. */
static int report(const mori_rank_ctx *ctx, char *msg, size_t msglen,
                  int (*steps)(const mori_rank_ctx *, outcome *)) {
  outcome o = {""};
  int fds0 = mori_count_fds() - mori_fi_own_fds(); /* its trace file may be open already */
  if (mori_shim_select(getenv("MORI_SYMM_SHIM") ? getenv("MORI_SYMM_SHIM") : "sim") != 0)
    snprintf(o.err, sizeof o.err, "shim: %s", mori_shim_message());
  else
    (void)steps(ctx, &o);
  if (mori_symm_release_all() != 0) failed(&o, "release_all");
  mori_symm_stats st;
  mori_symm_stats_get(&st);
  long leaks = mori_shim_ledger_total();
  int fds = mori_count_fds() - fds0 - mori_fi_own_fds();
  if (leaks && getenv("MORI_FI_LEDGER_REPORT")) mori_shim_ledger_report(stderr);
  const char *fault = mori_fi_last_fault();
  snprintf(msg, msglen, FI_REPORT_FORMAT, o.err[0] ? "error" : "ok", mori_fi_injected(),
           fault ? fault : "-", leaks, fds, st.windows, st.blocks, o.err[0] ? o.err : "-");
  return o.err[0] || leaks || fds || st.windows || st.blocks;
}

/* The sweep's own specifications: basic, except that a rank whose fault
 * hit hipMemMap then leaks an fd, crashes or hangs, so a sweep of these
 * must count exactly those runs as leaks, crashes or hangs. */
static int fault_hit_map(void) {
  const char *f = mori_fi_last_fault();
  return f && strcmp(f, "hipMemMap") == 0;
}

static int leaks_an_fd(const mori_rank_ctx *ctx, outcome *o) {
  int rc = basic(ctx, o);
  if (fault_hit_map()) (void)open("/dev/null", O_RDONLY);
  return rc;
}

static int crashes(const mori_rank_ctx *ctx, outcome *o) {
  int rc = basic(ctx, o);
  if (fault_hit_map()) raise(SIGSEGV);
  return rc;
}

static int hangs(const mori_rank_ctx *ctx, outcome *o) {
  int rc = basic(ctx, o);
  while (fault_hit_map()) pause();
  return rc;
}

static int basic_rank(const mori_rank_ctx *c, char *m, size_t n) { return report(c, m, n, basic); }
static int selftest_leak_rank(const mori_rank_ctx *c, char *m, size_t n) { return report(c, m, n, leaks_an_fd); }
static int selftest_crash_rank(const mori_rank_ctx *c, char *m, size_t n) { return report(c, m, n, crashes); }
static int selftest_hang_rank(const mori_rank_ctx *c, char *m, size_t n) { return report(c, m, n, hangs); }
static int two_groups_rank(const mori_rank_ctx *c, char *m, size_t n) { return report(c, m, n, two_groups); }
static int interior_rank(const mori_rank_ctx *c, char *m, size_t n) { return report(c, m, n, interior); }

const fi_scenario fi_scenarios[] = {
    {"basic", "alloc -> rendezvous -> barrier -> free", basic_rank},
    {"two-groups", "one block in two groups (ranks reversed in the second), a barrier on each",
     two_groups_rank},
    {"interior", "MemPool-style: two blocks, rendezvous on interior pointers, offsets and data "
                 "checked",
     interior_rank},
    {"selftest-leak", "(the sweep's own test) basic; a fault at hipMemMap leaks an fd",
     selftest_leak_rank},
    {"selftest-crash", "(the sweep's own test) basic; a fault at hipMemMap crashes the rank",
     selftest_crash_rank},
    {"selftest-hang", "(the sweep's own test) basic; a fault at hipMemMap hangs the rank",
     selftest_hang_rank},
    {NULL, NULL, NULL},
};

const fi_scenario *fi_scenario_find(const char *name) {
  for (const fi_scenario *s = fi_scenarios; name && s->name; s++)
    if (strcmp(s->name, name) == 0) return s;
  return NULL;
}

struct run_args {
  const char *scenario;
  int ranks, deadline_ms;
};

static const cli_option run_options[] = {
    {"--ranks", CLI_INT, offsetof(struct run_args, ranks), 1, 1024, NULL, "N",
     "ranks (default 2)"},
    {"--deadline-ms", CLI_INT, offsetof(struct run_args, deadline_ms), 1, 3600000, NULL, "MS",
     "kill ranks still running then (default 20000)"},
    {0},
};

const cli_command fi_run_scenario_command = {
    .name = "run-scenario",
    .run = fi_cmd_run_scenario,
    .summary = "run one scenario's ranks (what a sweep starts under LD_PRELOAD and MORI_FI)",
    .options = run_options,
    .operand = "SCENARIO",
    .operand_offset = offsetof(struct run_args, scenario),
};

/* "accepted: basic, interior, ..." for messages. */
const char *fi_scenario_names(void) {
  static char names[1024];
  size_t n = (size_t)snprintf(names, sizeof names, "accepted:");
  for (const fi_scenario *s = fi_scenarios; s->name && n < sizeof names; s++)
    n += (size_t)snprintf(names + n, sizeof names - n, "%s %s", s == fi_scenarios ? "" : ",",
                          s->name);
  return names;
}

int fi_cmd_run_scenario(int argc, char **argv) {
  struct run_args a = {.ranks = 2, .deadline_ms = 20000};
  int rc = cli_parse(&fi_run_scenario_command, &a, argc, argv);
  if (rc != 0) return rc == CLI_EXIT_HELP ? 0 : rc;
  const fi_scenario *s = fi_scenario_find(a.scenario);
  if (s == NULL)
    return cli_usage_error(&fi_run_scenario_command, "'%s': unknown scenario (%s)", a.scenario,
                           fi_scenario_names());
  int ranks = a.ranks, deadline_ms = a.deadline_ms;
  char devices[16];
  snprintf(devices, sizeof devices, "%d", ranks < 8 ? 8 : ranks);
  setenv("MORI_SIM_DEVICES", devices, 0); /* every rank needs a device of its own */
  mori_rank_result *res = calloc((size_t)ranks, sizeof *res);
  if (res == NULL) return 2;
  int failures = mori_launch(ranks, s->body, NULL, deadline_ms, res);
  for (int r = 0; r < ranks; r++)
    printf("rank=%d exit=%d signal=%d hung=%d wall_ms=%.0f | %s\n", r, res[r].exit_code,
           res[r].signal, res[r].hung, res[r].wall_ms, res[r].msg);
  free(res);
  return failures ? 1 : 0;
}
