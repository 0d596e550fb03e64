/*
 * fault_harness.h - what the multi-process fault tests share: run N ranks
 * under a MORI_FI schedule (set in this process through the fault shim's
 * control call and inherited by the forked ranks), and read back the one
 * line each rank reports as key=value fields.
 */
#ifndef MORI_FAULT_HARNESS_H
#define MORI_FAULT_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "launch.h"
#include "mori/fi.h"
#include "mori/symm.h"

/* The value of " key=" in a rank's line as a number (0 if absent). */
static inline long fh_num(const char *line, const char *key) {
  char k[64];
  size_t n = (size_t)snprintf(k, sizeof k, " %s=", key);
  const char *p = strncmp(line, k + 1, n - 1) == 0 ? line : strstr(line, k);
  if (p && p != line) p++;
  return p ? strtol(p + n - 1, NULL, 10) : 0;
}

/* The rest of the line after " err=". */
static inline const char *fh_err(const char *line) {
  const char *p = strstr(line, " err=");
  return p ? p + 5 : "";
}

/* Runs world ranks of fn under spec; results has world entries.  Fails the
 * test if the fault shim is not loaded or spec does not parse, or if any
 * rank hung or died of a signal other than expect_killed's SIGKILL. */
static inline void fh_run(const char *spec, int world, mori_rank_fn fn, void *arg,
                          mori_rank_result *results, int expect_killed) {
  char err[256];
  if (mori_fi_control(spec, err, sizeof err) != 0) fail_msg("MORI_FI '%s': %s", spec, err);
  mori_launch(world, fn, arg, 30000, results);
  (void)mori_fi_control("", err, sizeof err);
  for (int r = 0; r < world; r++) {
    int killed = r == expect_killed && results[r].signal == 9;
    if (results[r].hung || (results[r].signal && !killed))
      fail_msg("'%s': rank %d hung %d signal %d: %s", spec, r, results[r].hung, results[r].signal,
               results[r].msg);
  }
}

/* Every survivor released everything: no ledger entry, no fd, no window,
 * no block. */
static inline void fh_assert_clean(const char *spec, const mori_rank_result *results, int world,
                                   int skip) {
  for (int r = 0; r < world; r++) {
    const char *m = results[r].msg;
    if (r == skip) continue;
    if (strstr(m, " leaks=0 ") == NULL || strstr(m, " fds=0 ") == NULL ||
        strstr(m, " windows=0 ") == NULL || strstr(m, " blocks=0 ") == NULL)
      fail_msg("'%s': rank %d left something behind: %s", spec, r, m);
  }
}

/* Tears down, then writes the standard fields and the error (if any). */
static inline int fh_report(char *msg, size_t msglen, int fds0, int rc, const char *extra) {
  char err[700];
  snprintf(err, sizeof err, "%s", rc ? mori_last_error() : "-");
  int rel = mori_symm_release_all();
  mori_symm_stats st;
  mori_symm_stats_get(&st);
  long leaks = mori_shim_registry_total();
  int fds = mori_count_fds() - fds0 - mori_fi_own_fds();
  snprintf(msg, msglen, "rc=%d release=%d leaks=%ld fds=%d windows=%ld blocks=%ld %s err=%s", rc,
           rel, leaks, fds, st.windows, st.blocks, extra ? extra : "", err);
  return rc != 0 || rel != 0 || leaks != 0 || fds != 0;
}

#endif
