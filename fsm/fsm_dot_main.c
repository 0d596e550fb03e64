/*
 * fsm_dot_main.c - mori-fsm-dot: prints the state diagram, generated from
 * the transition table, as Graphviz DOT.  docs/state-machine.md embeds
 * this output and a test fails when the two differ.
 */
#include "mori/fsm.h"

#include <stdio.h>

int main(void) {
  mori_fsm_write_dot(stdout);
  return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
