/*
 * test_root_cause.c - when a rendezvous fails and publishing the abort
 * fails too (a full filesystem, no fds left), the error returned is the
 * original failure, the abort's failure appended, never substituted
 * (labels: security).
 */
#include "sec_harness.h"

#include "mori/error.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

/* The original cause must come first: any mention of the abort comes after
 * it, as the appended part. */
static void assert_cause_first(const char *line, const char *cause, int rank) {
  const char *err = sec_err(line);
  const char *c = strstr(err, cause), *a = strstr(err, "abort");
  if (!c) fail_msg("rank %d: the error does not name the cause '%s': %s", rank, cause, err);
  if (a && a < c) fail_msg("rank %d: the abort's failure replaced the cause: %s", rank, err);
}

/* After its request is published, the rank runs out of fds: the next
 * store read fails, and so does the abort that follows. */
static void limit_after_request(const char *key, void *ctx) {
  if (strstr(key, "/req/")) sec_limit_fds(*(const size_t *)ctx);
}

/* RLIMIT_NOFILE leaves rank 0 of two 0..8 fds to open when it calls
 * rendezvous, then 0..2 from the moment its request is out: whichever call
 * runs out first is the cause named, and where the abort cannot be
 * published either, that is appended. */
static void no_fds_left_names_the_call_that_ran_out_first(void **s) {
  (void)s;
  char *dir = sec_tmpdir("nofile");
  assert_non_null(dir);
  int failures = 0, appended = 0;
  for (size_t run = 1; run <= 12; run++) {
    sec_plan plan = {.timeout_ms = 300};
    size_t spare = run - 10;
    if (run <= 9) {
      plan.rank[0].nofile_headroom = run;
    } else {
      plan.rank[0].after_set = limit_after_request;
      plan.rank[0].after_set_ctx = &spare;
    }
    mori_rank_result res[2];
    sec_launch(dir, 2, &plan, res);
    const char *m = res[0].msg;
    if (sec_num(m, "rc") == 0) continue;
    failures++;
    print_message("%zu fds to spare %s: %s\n", run <= 9 ? run - 1 : spare,
                  run <= 9 ? "at rendezvous" : "after the request", sec_err(m));
    if (sec_num(m, "fds") != 0 || sec_num(m, "leaks") != 0)
      fail_msg("run %zu: leaked: %s", run, m);
    assert_cause_first(m, "Too many open files", 0);
    const char *abort_part = strstr(sec_err(m), "abort");
    if (abort_part && !strstr(abort_part, "Too many open files"))
      fail_msg("run %zu: the abort's own failure is not appended: %s", run, m);
    appended += abort_part != NULL;
  }
  assert_true(failures > 0);
  assert_true(appended > 0); /* the case this is about: both failed */
  sec_remove_tree(dir);
  free(dir);
}

/* ---- a full filesystem ---- */

static const char *filler_dir;

/* Once a rank has read a peer's request, every request is published: fill
 * the filesystem so that the abort publication that follows fails. */
static void fill_after_a_request(const char *key, void **value, size_t *len, void *ctx) {
  (void)value;
  (void)len;
  (void)ctx;
  if (!strstr(key, "req")) return;
  char path[600];
  snprintf(path, sizeof path, "%s/filler-%d", filler_dir, (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  static char block[4096];
  while (fd >= 0 && write(fd, block, sizeof block) > 0) {
  }
  while (fd >= 0 && write(fd, block, 1) > 0) {
  }
  if (fd >= 0) close(fd);
}

static void a_full_filesystem_keeps_the_original_failure_first(void **s) {
  (void)s;
  SEC_NEED_ROOT("mounting a small tmpfs");
  char *dir = sec_tmpdir("enospc");
  assert_non_null(dir);
  if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
      mount("tmpfs", dir, "tmpfs", 0, "size=256k,mode=0700") != 0) {
    print_message("[  SKIP    ] cannot mount a tmpfs here: %s\n", strerror(errno));
    skip();
  }
  filler_dir = dir;
  sec_plan plan = {.timeout_ms = 2000};
  plan.rank[1].size = 3u << 20; /* the original failure: sizes differ */
  for (int r = 0; r < 2; r++) plan.rank[r].rewrite = fill_after_a_request;
  mori_rank_result res[2];
  sec_launch(dir, 2, &plan, res);
  for (int r = 0; r < 2; r++) {
    const char *m = res[r].msg;
    print_message("rank %d: %s\n", r, sec_err(m));
    if (sec_num(m, "rc") != MORI_EMISMATCH)
      fail_msg("rank %d: want %s, got: %s", r, mori_error_name(MORI_EMISMATCH), m);
    assert_cause_first(m, "differs", r);
    if (!strstr(sec_err(m), "No space left on device"))
      fail_msg("rank %d: the abort's failure (ENOSPC) is not appended: %s", r, m);
  }
  umount2(dir, MNT_DETACH);
  sec_remove_tree(dir);
  free(dir);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(no_fds_left_names_the_call_that_ran_out_first),
      cmocka_unit_test(a_full_filesystem_keeps_the_original_failure_first),
  };
  return mori_run_tests(argc, argv, tests);
}
