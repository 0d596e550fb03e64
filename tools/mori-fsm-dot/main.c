/*
 * main.c - mori-fsm-dot: prints the state diagram (Graphviz DOT) or, with
 * --steps, --states, --resources, --life or --watch, that markdown table,
 * each generated from fsm.h's lists.  docs/state-machine.md embeds them
 * all and tests fail when they differ.
 */
#include "mori/fsm.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc == 1)
    mori_fsm_write_dot(stdout);
  else if (argc > 2 || strncmp(argv[1], "--", 2) != 0 ||
           mori_fsm_write_table(stdout, argv[1] + 2) != 0) {
    fprintf(stderr, "usage: mori-fsm-dot [--steps|--states|--resources|--life|--watch]\n");
    return 2;
  }
  return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
