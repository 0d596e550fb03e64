/*
 * test_launch_signals.c - a launcher interrupted mid-run (Ctrl-C, kill
 * -TERM) forwards the signal to its ranks, waits for them, removes its
 * directory and only then dies of the signal: nothing is left in TMPDIR and
 * no rank outlives it.  Each case forks a process that launches 4 ranks
 * which block; once every rank has said it runs (a pipe, no sleep), the
 * case signals that process and waits for it, bounded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch.h"

enum { RANKS = 4, BOUND_MS = 30000 };

/* A rank: says it runs (its pid, through the pipe of ctx->arg), then waits
 * to be ended; with ignore set, SIGTERM and SIGINT do not end it. */
typedef struct plan {
  int report; /* the pipe's write end */
  int ignore;
} plan;

static int blocked_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const plan *p = ctx->arg;
  if (p->ignore) {
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
  }
  int pid = (int)getpid();
  if (write(p->report, &pid, sizeof pid) != (ssize_t)sizeof pid) return 1;
  for (;;) pause();
  snprintf(msg, msglen, "unreachable");
  return 0;
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st, (void)type, (void)ftw;
  return remove(path);
}

static int entries(const char *dir, char *first, size_t cap) {
  DIR *d = opendir(dir);
  int n = 0;
  first[0] = '\0';
  for (struct dirent *e; d && (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && n++ == 0)
      snprintf(first, cap, "%s", e->d_name);
  if (d) closedir(d);
  return n;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A rank ended: no such process, or a zombie its new parent has not
 * reaped yet (a container's init may never). */
static int gone(int pid) {
  char path[64], stat[256];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(stat, 1, sizeof stat - 1, f) : 0;
  if (f) fclose(f);
  stat[n] = '\0';
  const char *state = strrchr(stat, ')');
  return kill(pid, 0) != 0 || (state && state[1] == ' ' && (state[2] == 'Z' || state[2] == 'X'));
}

/* waitpid, for at most BOUND_MS; -1 if pid is still running then. */
static int wait_bounded(pid_t pid, int *status) {
  for (double t0 = now_ms(); now_ms() - t0 < BOUND_MS;) {
    if (waitpid(pid, status, WNOHANG) == pid) return 0;
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  return -1;
}

/* Launches RANKS blocked ranks under a fresh TMPDIR from a child, sends it
 * sig once every rank runs, and checks what is left. */
static void interrupted_launch_leaves_nothing(int sig, int ignore) {
  char tmp[] = "/tmp/mori-test-launch-signals-XXXXXX", first[256];
  assert_non_null(mkdtemp(tmp));
  int p[2];
  assert_int_equal(pipe(p), 0);
  fflush(NULL);
  pid_t launcher = fork();
  if (launcher == 0) {
    close(p[0]);
    setenv("TMPDIR", tmp, 1);
    plan pl = {p[1], ignore};
    mori_rank_result res[RANKS];
    mori_launch(RANKS, blocked_rank, &pl, 3600000, res);
    _exit(3); /* the launch returned: the signal was not delivered after it */
  }
  close(p[1]);
  int pids[RANKS], got = 0;
  for (double t0 = now_ms(); got < RANKS && now_ms() - t0 < BOUND_MS;) {
    struct pollfd pf = {p[0], POLLIN, 0};
    if (poll(&pf, 1, 100) == 1 && read(p[0], &pids[got], sizeof pids[got]) == sizeof pids[got])
      got++;
  }
  close(p[0]);
  if (got < RANKS) {
    kill(launcher, SIGKILL);
    fail_msg("only %d of %d ranks started", got, RANKS);
  }
  assert_int_equal(kill(launcher, sig), 0);
  int status = 0, ended = wait_bounded(launcher, &status) == 0;
  int orphans = 0;
  for (int r = 0; r < RANKS; r++) {
    /* killed outright, the launcher cannot wait for its ranks: their
     * death comes from the kernel, moments later */
    for (double t0 = now_ms(); sig == SIGKILL && !gone(pids[r]) && now_ms() - t0 < BOUND_MS;) {
      struct timespec ts = {0, 2000000};
      nanosleep(&ts, NULL);
    }
    if (!gone(pids[r])) {
      orphans++;
      kill(pids[r], SIGKILL); /* the test leaves nothing either */
    }
  }
  if (!ended) kill(launcher, SIGKILL), waitpid(launcher, &status, 0);
  int left = entries(tmp, first, sizeof first);
  print_message("%s%s: launcher %s (status 0x%x), %d rank(s) still running, %d entr%s in "
                "TMPDIR%s%s\n",
                strsignal(sig), ignore ? " (ranks ignore it)" : "", ended ? "ended" : "hung",
                status, orphans, left, left == 1 ? "y" : "ies", left ? ": " : "", first);
  nftw(tmp, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  if (!ended) fail_msg("the launcher did not end within %d ms of %s", BOUND_MS, strsignal(sig));
  if (orphans) fail_msg("%d rank(s) outlived the launcher", orphans);
  if (left && sig != SIGKILL) fail_msg("the launcher left %d entries in TMPDIR: %s", left, first);
  if (!WIFSIGNALED(status) || WTERMSIG(status) != sig)
    fail_msg("the launcher did not die of %s (status 0x%x): a shell would not see it",
             strsignal(sig), status);
}

static void sigterm_to_the_launcher_ends_its_ranks_and_removes_its_directory(void **state) {
  (void)state;
  interrupted_launch_leaves_nothing(SIGTERM, 0);
}

static void sigint_to_the_launcher_ends_its_ranks_and_removes_its_directory(void **state) {
  (void)state;
  interrupted_launch_leaves_nothing(SIGINT, 0);
}

/* Ranks that ignore the signal are killed once the grace has passed. */
static void ranks_that_ignore_the_signal_are_killed_after_a_grace(void **state) {
  (void)state;
  interrupted_launch_leaves_nothing(SIGTERM, 1);
}

/* SIGKILL cannot be forwarded: the ranks die with the launcher all the same
 * (what it made on disk stays: nothing can remove it then). */
static void sigkill_to_the_launcher_takes_its_ranks_with_it(void **state) {
  (void)state;
  interrupted_launch_leaves_nothing(SIGKILL, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sigterm_to_the_launcher_ends_its_ranks_and_removes_its_directory),
      cmocka_unit_test(sigint_to_the_launcher_ends_its_ranks_and_removes_its_directory),
      cmocka_unit_test(ranks_that_ignore_the_signal_are_killed_after_a_grace),
      cmocka_unit_test(sigkill_to_the_launcher_takes_its_ranks_with_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
