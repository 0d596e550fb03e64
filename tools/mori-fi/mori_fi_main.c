/*
 * mori_fi_main.c - the mori-fi tool: exhaustive fault injection over the
 * scenarios of scenarios.c (sweep), and the runner a sweep starts under
 * the fault shim for each injection (run-scenario).  Grammar and help come
 * from tools/args/args.c, as for mori-symm.
 */
#include "fi_tool.h"

#include "env_table.h"
#include "mori/symm.h"

static const cli_command *const commands[] = {&fi_sweep_command, &fi_run_scenario_command,
                                              NULL};

static const cli_topic *const topics[] = {&mori_env_help_topic, NULL};

static const cli_tool tool = {
    .name = "mori-fi",
    .version = MORI_SYMM_VERSION_STRING,
    .library_version = mori_symm_version,
    .version_details = cli_print_runtimes,
    .summary = "fault injection for mori-symm: fail every shim call of a scenario in turn",
    .commands = commands,
    .topics = topics,
    .details = "environment: MORI_FI_PRELOAD=PATH names the fault shim (default:\n"
               "libmori_faultinject.so beside libmori_core.so); `mori-fi help env` lists every\n"
               "variable, MORI_FI and MORI_FI_RECORD among them (docs/fault-injection.md).\n",
};

int main(int argc, char **argv) {
  (void)mori_symm_log_level(); /* a bad MORI_SYMM_DEBUG is reported once, not per rank */
  return cli_main(&tool, argc, argv);
}
