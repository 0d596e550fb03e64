/*
 * version.c - what `--version` says after the versions: the shim backends
 * built in and the runtime each finds, or why not, asked of the shim
 * without bringing a runtime up (mori_shim_runtime_find).
 */
#include "args.h"

#include <string.h>

#include "mori/shim.h"

void cli_print_runtimes(FILE *out) {
  static const char *const verdicts[] = {"refused", "not found", "found"};
  fprintf(out, "backends:");
  for (int i = 0; mori_shim_backend_name(i) != NULL; i++)
    fprintf(out, "%s %s", i ? "," : "", mori_shim_backend_name(i));
  fprintf(out, "\n");
  for (int i = 0; mori_shim_backend_name(i) != NULL; i++) {
    const char *name = mori_shim_backend_name(i);
    char why[1100];
    if (strcmp(name, "sim") == 0) {
      fprintf(out, "  %-5s the emulator, no GPU: always there\n", name);
      continue;
    }
    int rc = mori_shim_runtime_find(name, why, sizeof why);
    size_t n = strlen(name);
    const char *text = strncmp(why, name, n) == 0 && strncmp(why + n, ": ", 2) == 0 ? why + n + 2
                                                                                   : why;
    fprintf(out, "  %-5s %s: %s\n", name, verdicts[rc < 0 ? 0 : rc > 0 ? 2 : 1], text);
  }
}
