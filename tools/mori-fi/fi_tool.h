/*
 * fi_tool.h - the commands of the mori-fi tool: run-scenario (one scenario's
 * ranks, under the fault shim) and sweep (every call of every rank, failed
 * in turn, each in a fresh run-scenario process).
 */
#ifndef MORI_FI_TOOL_H
#define MORI_FI_TOOL_H

#include "args.h"
#include "launch.h"

struct fi_outcome;
struct fi_meeting;

/* The sweep's own specifications: what a selftest scenario does wrong when
 * its fault hits hipMemMap, which the sweep must count as exactly that. */
enum fi_twist {
  FI_TWIST_NONE,
  FI_TWIST_LEAK,    /* leaks an fd */
  FI_TWIST_CRASH,   /* dies of SIGSEGV */
  FI_TWIST_HANG,    /* stops making calls */
  FI_TWIST_UNNAMED, /* reports an error that names no call */
  FI_TWIST_BROKEN,  /* reports a line without its refused= field */
  FI_TWIST_UNTOLD,  /* fails its allocation without telling its peers */
  FI_TWIST_LATE     /* ignores its allocation's failure and fails later */
};

typedef struct fi_scenario {
  const char *name, *help;
  int (*steps)(const mori_rank_ctx *ctx, struct fi_outcome *o);
  const struct fi_meeting *plan; /* its rendezvous, in order */
  enum fi_twist twist;
} fi_scenario;

/* NULL-terminated by name. */
extern const fi_scenario fi_scenarios[];
const fi_scenario *fi_scenario_find(const char *name);

int fi_cmd_run_scenario(int argc, char **argv);
int fi_cmd_sweep(int argc, char **argv);

/* The commands of mori-fi, with their option tables (args.h). */
extern const cli_command fi_sweep_command;
extern const cli_command fi_run_scenario_command;
/* "accepted: basic, interior, ..." */
const char *fi_scenario_names(void);

/* What a scenario rank reports, one line: the sweep reads every field and
 * counts a line that lacks one as a broken report.  step: the step that
 * failed first; fault_step: the last step in which a fault was injected
 * before that; t_err: CLOCK_MONOTONIC seconds when the first error came;
 * calls: this rank's calls of the seam then; seen: every rank's calls
 * then, after this rank told its peers ("-" if it did not fail). */
#define FI_REPORT_FORMAT                                                             \
  "status=%s injected=%ld fault=%s leaks=%ld refused=%ld fds=%+d windows=%ld blocks=%ld " \
  "step=%s fault_step=%s t_err=%.6f calls=%ld seen=%s err=%s"

/* 1 for a step that waits on GPU streams (barriers): no store abort can
 * end such a wait early. */
int fi_step_waits_on_gpu(const char *step);
/* 1 for a step a rank takes before it has a store: failing there, it
 * cannot tell its peers, which then wait out their timeout. */
int fi_step_untold(const char *step);

#endif
