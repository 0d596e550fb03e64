/*
 * fi_tool.h - the commands of the mori-fi tool: run-scenario (one scenario's
 * ranks, under the fault shim) and sweep (every call of every rank, failed
 * in turn, each in a fresh run-scenario process).
 */
#ifndef MORI_FI_TOOL_H
#define MORI_FI_TOOL_H

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

/* What a scenario rank reports, one line: the sweep reads these fields. */
#define FI_REPORT_FORMAT                                                             \
  "status=%s injected=%ld fault=%s leaks=%ld fds=%+d windows=%ld blocks=%ld err=%s"

#endif
