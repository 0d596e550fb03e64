/*
 * ranks.c - what demo and cycles do around their forked ranks: check the
 * rank count against the device table before anything forks, and print
 * the ranks' outcome with each failure once, however many ranks gave it.
 */
#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mori/hip_shim.h"
#include "mori/symm.h"

/* ---- the device table ---- */

static int count_devices(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int n = 0;
  if (mori_shim_select(ctx->arg) != 0) {
    snprintf(msg, msglen, "%s", mori_shim_message());
    return 1;
  }
  if (mori_hipGetDeviceCount(&n) != hipSuccess) {
    snprintf(msg, msglen, "hipGetDeviceCount: %s", mori_shim_message());
    return 1;
  }
  snprintf(msg, msglen, "%d", n);
  return 0;
}

int cli_ranks_prepare(const cli_command *cmd, cli_ranks *r) {
  r->shim = cli_default_shim(r->shim);
  mori_rank_result probe;
  if (mori_launch(1, count_devices, (void *)r->shim, 60000, &probe) != 0) {
    char why[sizeof probe.msg + 64];
    snprintf(why, sizeof why, "%s", probe.msg); /* the shim's own reason */
    if (probe.hung)
      snprintf(why, sizeof why, "the child counting devices hung (killed after 60000 ms)");
    else if (probe.signal)
      snprintf(why, sizeof why, "the child counting devices died of signal %d", probe.signal);
    else if (probe.msg[0] == '\0' || atoi(probe.msg) > 0) /* counted, then failed */
      snprintf(why, sizeof why, "the child counting devices exited with status %d (its stderr "
               "says why)", probe.exit_code);
    fprintf(stderr, "%s FAILED: shim %s: %s\n", cmd->name, r->shim, why);
    return 1;
  }
  r->devices = atoi(probe.msg);
  if (r->devices < 1) {
    fprintf(stderr, "%s FAILED: shim %s reports no device\n", cmd->name, r->shim);
    return 1;
  }
  int per_device = r->per_device;
  if (per_device == 0) /* not given: one each, or as many as needed if allowed */
    per_device = mori_symm_allow_overlapping_devices() ? (r->ranks + r->devices - 1) / r->devices : 1;
  if (r->ranks > r->devices * per_device) {
    int sim = strcmp(r->shim, "sim") == 0;
    return cli_usage_error(
        cmd,
        "--ranks '%d': more ranks than the device table takes: the %s shim has %d device%s x "
        "%d rank%s per device (accepted: 1 to %d; more with --ranks-per-device%s)",
        r->ranks, r->shim, r->devices, r->devices == 1 ? "" : "s", per_device,
        per_device == 1 ? "" : "s", r->devices * per_device,
        sim ? ", or more sim devices with MORI_SIM_DEVICES, up to 1024" : "");
  }
  /* Several ranks on one device: the core accepts it only when told; the
   * ranks inherit this across the fork. */
  if (r->ranks > r->devices) mori_symm_set_allow_overlapping_devices(1);
  return 0;
}

/* ---- the report ---- */

/* The rank body's prefix ("rank 3: ") and the core's ("rank 3 ") off. */
static const char *without_prefix(const char *msg, int rank) {
  char own[32];
  for (int pass = 0; pass < 2; pass++) {
    int n = snprintf(own, sizeof own, pass == 0 ? "rank %d: " : "rank %d ", rank);
    if (strncmp(msg, own, (size_t)n) == 0) msg += n;
  }
  return msg;
}

/* A failure as every rank's copy of it reads: without the prefix, and its
 * own rank elsewhere written "rank N" (a peer's number stays). */
static void normalize(const char *msg, int rank, char *out, size_t len) {
  char own[32];
  size_t ownlen = (size_t)snprintf(own, sizeof own, "rank %d", rank), k = 0;
  for (msg = without_prefix(msg, rank); *msg && k + 1 < len;) {
    if (strncmp(msg, own, ownlen) == 0 && !(msg[ownlen] >= '0' && msg[ownlen] <= '9') &&
        k + 7 < len) {
      memcpy(out + k, "rank N", 6);
      k += 6;
      msg += ownlen;
      continue;
    }
    out[k++] = *msg++;
  }
  out[k] = '\0';
}

/* "rank 3", "ranks 0-3", "ranks 0,2,5-7". */
static void format_ranks(const int *ranks, int n, char *buf, size_t len) {
  size_t k = (size_t)snprintf(buf, len, "rank%s ", n == 1 ? "" : "s");
  for (int i = 0; i < n && k < len; i++) {
    int j = i;
    while (j + 1 < n && ranks[j + 1] == ranks[j] + 1) j++;
    if (j > i)
      k += (size_t)snprintf(buf + k, len - k, "%s%d-%d", i ? "," : "", ranks[i], ranks[j]);
    else
      k += (size_t)snprintf(buf + k, len - k, "%s%d", i ? "," : "", ranks[i]);
    i = j;
  }
}

static void describe_failure(mori_rank_result *x, int rank, int deadline_ms) {
  char ok[32];
  int oklen = snprintf(ok, sizeof ok, "rank %d ok ", rank);
  if (x->hung)
    snprintf(x->msg, sizeof x->msg, "rank %d: hung: killed at the %d ms deadline", rank,
             deadline_ms);
  else if (x->signal)
    snprintf(x->msg, sizeof x->msg, "rank %d: died of signal %d (%s)", rank, x->signal,
             strsignal(x->signal));
  else if (x->msg[0] == '\0')
    snprintf(x->msg, sizeof x->msg, "rank %d: exited with status %d and no report", rank,
             x->exit_code);
  else if (strncmp(x->msg, ok, (size_t)oklen) == 0) /* its exit hooks failed */
    snprintf(x->msg, sizeof x->msg,
             "rank %d: exited with status %d after reporting ok: an exit hook failed (its "
             "stderr says why)",
             rank, x->exit_code);
}

/* Whether a failure is a peer's, reported: the core says "a peer failed
 * while this rank waited for ...", then the peer's reason (MORI_EPEER). */
static int reports_a_peer(const char *text) { return strstr(text, "a peer failed") != NULL; }

int cli_ranks_report(const cli_command *cmd, int ranks, mori_rank_result *res, int deadline_ms) {
  enum { LEN = sizeof res->msg };
  int failed = 0;
  int *group = calloc((size_t)ranks, sizeof *group);
  char *done = calloc((size_t)ranks, 1), *norm = calloc((size_t)ranks, LEN);
  if (group == NULL || done == NULL || norm == NULL) {
    free(group);
    free(done);
    free(norm);
    fprintf(stderr, "%s FAILED: out of host memory for the report\n", cmd->name);
    return ranks;
  }
  for (int r = 0; r < ranks; r++) {
    mori_rank_result *x = &res[r];
    if (!(x->hung || x->signal || x->exit_code)) {
      printf("  %s\n", x->msg);
      done[r] = 1;
      continue;
    }
    describe_failure(x, r, deadline_ms);
    normalize(x->msg, r, norm + (size_t)r * LEN, LEN);
    failed++;
  }
  fflush(stdout);
  /* Each distinct failure once, a cause before its consequences: a rank's
   * own failure before a peer's that it reports (MORI_EPEER), then the
   * rarer first, since the ranks that fail because a peer did outnumber
   * the one that failed first, then by rank. */
  int *leader = group; /* leader[r]: the first rank with r's failure */
  for (int r = 0; r < ranks; r++) {
    leader[r] = r;
    for (int q = 0; q < r && !done[r]; q++)
      if (!done[q] && leader[q] == q &&
          strcmp(norm + (size_t)q * LEN, norm + (size_t)r * LEN) == 0) {
        leader[r] = q;
        break;
      }
  }
  for (int printed = 0; printed < failed;) {
    int best = -1, best_n = 0;
    /* the smallest group left of a rank's own failure, else of any */
    for (int pass = 0; pass < 2 && best < 0; pass++)
      for (int r = 0; r < ranks; r++) {
        if (done[r] || leader[r] != r) continue;
        if (pass == 0 && reports_a_peer(norm + (size_t)r * LEN)) continue;
        int n = 0;
        for (int q = r; q < ranks; q++) n += !done[q] && leader[q] == r;
        if (best < 0 || n < best_n) {
          best = r;
          best_n = n;
        }
      }
    int members[64], shown = 0;
    for (int q = best; q < ranks; q++)
      if (!done[q] && leader[q] == best) {
        if (shown < 64) members[shown++] = q;
        done[q] = 1;
      }
    char who[256];
    format_ranks(members, shown, who, sizeof who);
    if (best_n > shown) snprintf(who + strlen(who), sizeof who - strlen(who), " (of %d)", best_n);
    /* A rank alone keeps its own number. */
    const char *text = best_n == 1 ? without_prefix(res[best].msg, best)
                                   : norm + (size_t)best * LEN;
    if (printed == 0)
      fprintf(stderr, "%s FAILED: %s: %s\n", cmd->name, who, text);
    else
      fprintf(stderr, "  and %s: %s\n", who, text);
    printed += best_n;
  }
  free(group);
  free(done);
  free(norm);
  return failed;
}
