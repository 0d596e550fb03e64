/*
 * fi_tool.h - the commands of the mori-fi tool: run-scenario (one scenario's
 * ranks, under the fault shim) and sweep (every call of every rank, failed
 * in turn, each in a fresh run-scenario process).
 */
#ifndef MORI_FI_TOOL_H
#define MORI_FI_TOOL_H

#include "args.h"
#include "launch.h"

typedef struct fi_scenario {
  const char *name, *help;
  mori_rank_fn body;
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

/* What a scenario rank reports, one line: the sweep reads these fields. */
#define FI_REPORT_FORMAT                                                             \
  "status=%s injected=%ld fault=%s leaks=%ld fds=%+d windows=%ld blocks=%ld err=%s"

#endif
