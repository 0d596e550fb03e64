/*
 * mori-env-doc - the table of environment variables (env_table.c) as
 * docs/environment.md embeds it (--markdown, the default) or as the names
 * tests/env checks the code against (--names); and the hip backend's search
 * order, one name a line (--search), which tests/docs finds in the docs.
 */
#include <stdio.h>
#include <string.h>

#include "env_table.h"
#include "mori/runtime_search.h"

int main(int argc, char **argv) {
  static const char *const search[] = {MORI_HIP_SONAMES(MORI_SONAME_ROW)};
  if (argc > 2 || (argc == 2 && strcmp(argv[1], "--markdown") != 0 &&
                   strcmp(argv[1], "--names") != 0 && strcmp(argv[1], "--search") != 0)) {
    fprintf(stderr, "usage: mori-env-doc [--markdown|--names|--search]\n");
    return 2;
  }
  if (argc == 2 && strcmp(argv[1], "--search") == 0)
    for (size_t i = 0; i < sizeof search / sizeof search[0]; i++) printf("%s\n", search[i]);
  else if (argc == 2 && strcmp(argv[1], "--names") == 0)
    mori_env_print_names(stdout);
  else
    mori_env_print_markdown(stdout);
  return 0;
}
