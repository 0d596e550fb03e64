/*
 * cli_replay.c - `mori-symm replay TRACE [--profile ARCH[,QUIRK...]]`:
 * replays one rank's recorded trace under one sim profile, or under every
 * profile with no quirk, each quirk alone and all of them, and says per
 * profile "ok (N calls)" or the first violation.
 */
#include "mori/fi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void) {
  fprintf(stderr, "usage: mori-symm replay TRACE [--profile ARCH[,QUIRK...]]\n"
                  "  ARCH: gfx942, gfx950, gfx1250, gfx1250-rocm7.1; QUIRK: a MORI_SIM_QUIRKS\n"
                  "  name or all.  Without --profile: every profile and quirk set.\n");
  return 2;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  size_t cap = 0;
  *len = 0;
  if (f == NULL) return NULL;
  for (;;) {
    if (*len + 4096 > cap) {
      char *n = realloc(buf, cap = cap * 2 + 8192);
      if (n == NULL) break;
      buf = n;
    }
    size_t k = fread(buf + *len, 1, cap - *len, f);
    *len += k;
    if (k == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    return NULL;
  }
  return buf ? buf : calloc(1, 1);
}

/* Prints one profile's line; returns 1 if it found a violation. */
static int one(const mori_fi_trace *t, const char *arch, const char *quirks) {
  mori_fi_replay_result res;
  int rc = mori_fi_replay(t, arch, quirks, &res);
  printf("  %-16s quirks=%-19s ", arch, quirks && *quirks ? quirks : "none");
  if (rc != 0 || (!res.ok && res.violation_line < 0)) { /* it never got to a call */
    printf("error: %s\n", res.message);
    return 1;
  }
  if (!res.ok) {
    if (res.violation_at >= 0)
      printf("violation at call %ld (line %ld) %s\n", res.violation_at, res.violation_line,
             res.message);
    else
      printf("violation at line %ld %s\n", res.violation_line, res.message);
    return 1;
  }
  printf("ok (%ld calls", res.calls);
  if (res.divergences)
    printf("; %ld that failed in the trace succeed here", res.divergences);
  if (res.live_at_end) printf("; %ld resources left live by the trace", res.live_at_end);
  printf(")\n");
  return 0;
}

int mori_fi_cli_replay(int argc, char **argv) {
  const char *path = NULL, *profile = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc) profile = argv[++i];
    else if (argv[i][0] != '-' && path == NULL) path = argv[i];
    else return usage();
  }
  if (path == NULL) return usage();
  size_t len;
  char *text = read_file(path, &len), err[256];
  if (text == NULL) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    return 2;
  }
  mori_fi_trace t;
  int rc = mori_trace_parse(text, len, &t, err, sizeof err);
  free(text);
  if (rc != 0) {
    fprintf(stderr, "replay: %s: %s\n", path, err);
    return 2;
  }
  printf("replay %s: rank %d, %zu calls\n", path, t.rank, t.n);
  fflush(stdout);
  int runs = 0, bad = 0;
  if (profile != NULL) {
    char arch[64];
    const char *comma = strchr(profile, ',');
    size_t n = comma ? (size_t)(comma - profile) : strlen(profile);
    snprintf(arch, sizeof arch, "%.*s", (int)(n < sizeof arch ? n : sizeof arch - 1), profile);
    bad += one(&t, arch, comma ? comma + 1 : "");
    runs++;
  } else {
    for (const char *const *a = mori_fi_sim_profiles; *a; a++) {
      bad += one(&t, *a, "");
      for (const char *const *q = mori_fi_sim_quirks; *q; q++) bad += one(&t, *a, *q);
      bad += one(&t, *a, "all");
      runs += 2;
      for (const char *const *q = mori_fi_sim_quirks; *q; q++) runs++;
      fflush(stdout);
    }
  }
  printf("replay: %d profiles, %d ok, %d with violations\n", runs, runs - bad, bad);
  mori_trace_free(&t);
  return bad ? 1 : 0;
}
