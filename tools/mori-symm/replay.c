/*
 * replay.c - `mori-symm replay TRACE [--profile ARCH[,QUIRK...]]`:
 * replays one rank's recorded trace under one sim profile, or under every
 * profile with no quirk, each quirk alone and all of them, and says per
 * profile "ok (N calls)" or the first violation.
 */
#include "mori/fi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

struct replay_args {
  const char *trace, *profile;
};

static const cli_option replay_options[] = {
    {"--profile", CLI_TEXT, offsetof(struct replay_args, profile), 0, 0, NULL, "ARCH[,QUIRK...]",
     "one sim profile: gfx942, gfx950, gfx1250 or gfx1250-rocm7.1, and MORI_SIM_QUIRKS names "
     "or all (default: every profile with no quirk, each quirk alone and all)"},
    {0},
};

static int run_replay(int argc, char **argv);

const cli_command cli_replay_command = {
    .name = "replay",
    .run = run_replay,
    .summary = "replay one rank's shim trace (MORI_FI_RECORD) on the sim under every profile "
               "and quirk; the first contract violation of each",
    .options = replay_options,
    .operand = "TRACE",
    .operand_offset = offsetof(struct replay_args, trace),
};

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

/* name is one of the sim's names (list(0), list(1), ...), or "all" where
 * all_too: the first len bytes of name. */
static int known(const char *(*list)(int), const char *name, size_t len, int all_too) {
  const char *n;
  if (all_too && len == 3 && strncmp(name, "all", 3) == 0) return 1;
  for (int i = 0; (n = list(i)) != NULL; i++)
    if (strlen(n) == len && strncmp(n, name, len) == 0) return 1;
  return 0;
}

/* --profile ARCH[,QUIRK...] names the sim's profiles and quirks, or it is
 * a bad value (exit 2), said before the trace is read.  Returns 0, or the
 * usage error's status. */
static int check_profile(const char *profile) {
  const char *comma = strchr(profile, ','), *q;
  size_t n = comma ? (size_t)(comma - profile) : strlen(profile);
  char accepted[512] = "";
  int bad_arch = !known(mori_sim_profile_name, profile, n, 0);
  const char *bad = bad_arch ? profile : NULL;
  size_t bad_len = n;
  for (q = comma; bad == NULL && q != NULL; q = strchr(q + 1, ',')) {
    const char *next = strchr(q + 1, ',');
    size_t len = next ? (size_t)(next - q - 1) : strlen(q + 1);
    if (!known(mori_sim_quirk_name, q + 1, len, 1)) bad = q + 1, bad_len = len;
  }
  if (bad == NULL) return 0;
  const char *(*list)(int) = bad_arch ? mori_sim_profile_name : mori_sim_quirk_name;
  for (int i = 0; list(i) != NULL; i++) {
    size_t used = strlen(accepted);
    snprintf(accepted + used, sizeof accepted - used, "%s%s", i ? ", " : "", list(i));
  }
  return cli_usage_error(&cli_replay_command, "--profile '%s': unknown sim %s '%.*s' (accepted: "
                         "%s%s)", profile, bad_arch ? "profile" : "quirk", (int)bad_len, bad,
                         accepted, bad_arch ? ", then ,QUIRK..." : " or all");
}

static int run_replay(int argc, char **argv) {
  struct replay_args args = {NULL, NULL};
  int rc = cli_parse(&cli_replay_command, &args, argc, argv);
  if (rc != 0) return rc == CLI_EXIT_HELP ? 0 : rc;
  const char *path = args.trace, *profile = args.profile;
  if (profile != NULL && (rc = check_profile(profile)) != 0) return rc;
  size_t len;
  char *text = read_file(path, &len), err[256];
  if (text == NULL)
    return cli_usage_error(&cli_replay_command, "cannot read '%s': %s", path,
                           strerror(errno));
  mori_fi_trace t;
  rc = mori_trace_parse(text, len, &t, err, sizeof err);
  free(text);
  if (rc != 0) return cli_usage_error(&cli_replay_command, "'%s': %s", path, err);
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
    const char *a, *q;
    for (int i = 0; (a = mori_sim_profile_name(i)) != NULL; i++) {
      bad += one(&t, a, "");
      for (int k = 0; (q = mori_sim_quirk_name(k)) != NULL; k++, runs++) bad += one(&t, a, q);
      bad += one(&t, a, "all");
      runs += 2;
      fflush(stdout);
    }
  }
  printf("replay: %d profiles, %d ok, %d with violations\n", runs, runs - bad, bad);
  mori_trace_free(&t);
  return bad ? 1 : 0;
}
