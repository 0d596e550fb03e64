/*
 * mori-env-doc - the table of environment variables (env_table.c) as
 * docs/environment.md embeds it (--markdown, the default) or as the names
 * tests/env checks the code against (--names).
 */
#include <stdio.h>
#include <string.h>

#include "env_table.h"

int main(int argc, char **argv) {
  if (argc > 2 || (argc == 2 && strcmp(argv[1], "--markdown") != 0 &&
                   strcmp(argv[1], "--names") != 0)) {
    fprintf(stderr, "usage: mori-env-doc [--markdown|--names]\n");
    return 2;
  }
  if (argc == 2 && strcmp(argv[1], "--names") == 0)
    mori_env_print_names(stdout);
  else
    mori_env_print_markdown(stdout);
  return 0;
}
