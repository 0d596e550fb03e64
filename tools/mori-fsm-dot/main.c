/*
 * main.c - mori-fsm-dot: prints the state diagram (Graphviz DOT)
 * or, with --steps, the table of steps (markdown), both generated from the
 * transition table.  docs/state-machine.md embeds both and tests fail when
 * they differ.
 */
#include "mori/fsm.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--steps") == 0)
    mori_fsm_write_steps(stdout);
  else if (argc > 1) {
    fprintf(stderr, "usage: mori-fsm-dot [--steps]\n");
    return 2;
  } else
    mori_fsm_write_dot(stdout);
  return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
