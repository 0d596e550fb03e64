/*
 * bench_report.c - the parent's reading of a bench-sim rank's report,
 * apart so that tests/cli can feed it reports of its own: every column of
 * a repeated step (its counts and its wall time alike) is divided by the
 * repetitions, so that bench-sim's table is per operation throughout.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_bench_parse(const char *msg, const char *const *names, const int *repeated,
                    size_t nsteps, int ncounts, int reps, double *out, int *seam) {
  const char *p = strstr(msg, "counts");
  if (p == NULL) return -1;
  p += 6;
  for (size_t s = 0; s < nsteps; s++) {
    char key[64];
    int len = snprintf(key, sizeof key, " %s:", names[s]);
    if (strncmp(p, key, (size_t)len) != 0) return -1;
    p += len;
    double per = repeated[s] ? reps : 1;
    for (int m = 0; m <= ncounts; m++) { /* ncounts counts, then the wall time */
      char *end;
      double v = strtod(p, &end);
      if (end == p || (m < ncounts && *end != ',')) return -1;
      out[s * (size_t)(ncounts + 1) + (size_t)m] = v / per;
      p = end + (m < ncounts);
    }
  }
  return sscanf(p, " seam=%d", seam) == 1 ? 0 : -1;
}
