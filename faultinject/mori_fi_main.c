/*
 * mori_fi_main.c - the mori-fi tool: exhaustive fault injection over the
 * scenarios of scenarios.c (sweep), and the runner a sweep starts under
 * the fault shim for each injection (run-scenario).
 */
#include <stdio.h>
#include <string.h>

#include "fi_tool.h"

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *help;
} commands[] = {
    {"sweep", fi_cmd_sweep, "fail every call index of every rank in turn; --list: scenarios"},
    {"run-scenario", fi_cmd_run_scenario, "run one scenario's ranks (under LD_PRELOAD, MORI_FI)"},
};

int main(int argc, char **argv) {
  for (size_t i = 0; argc > 1 && i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 2, argv + 2);
  fprintf(stderr, "usage: mori-fi COMMAND [ARGS]\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(stderr, "  %-13s %s\n", commands[i].name, commands[i].help);
  return 2;
}
