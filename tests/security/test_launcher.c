/*
 * test_launcher.c - the launcher's working directory, from the side of a
 * user who can change where it lives.  mori_launch makes its directory
 * under TMPDIR and removes it afterwards: as root, whatever that removal
 * follows, it deletes.  A TMPDIR another user could change is refused by
 * name, and the removal goes through the directory the launcher made and
 * holds, never through a path someone swapped (labels: security).
 */
#include "sec_harness.h"

#include "mori/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LAUNCH_PREFIX "mori-launch-"

typedef struct fixture {
  sec_fixture base;
  char lair[512];     /* TMPDIR of the launch */
  char victim[512];   /* root's, with precious in it */
  char precious[600];
} fixture;

static int setup(void **state) {
  sec_fixture_setup(state, sizeof(fixture), "launch");
  fixture *f = *state;
  snprintf(f->lair, sizeof f->lair, "%s/tmp", f->base.dir);
  snprintf(f->victim, sizeof f->victim, "%s/victim", f->base.dir);
  snprintf(f->precious, sizeof f->precious, "%s/precious", f->victim);
  assert_int_equal(chmod(f->base.dir, 0755), 0);
  assert_int_equal(mkdir(f->lair, 0700), 0);
  assert_int_equal(mkdir(f->victim, 0700), 0);
  FILE *p = fopen(f->precious, "w");
  assert_non_null(p);
  fputs("root's, not the launcher's\n", p);
  fclose(p);
  return 0;
}

static int teardown(void **state) {
  unsetenv("TMPDIR");
  return sec_fixture_teardown(state);
}

/* The launch directory, moved aside, and a symlink to the victim in its
 * place.  0, or the errno of what failed. */
static int swap_for_symlink(const char *dir, const char *name, const char *victim) {
  char from[1024], to[1100];
  snprintf(from, sizeof from, "%s/%s", dir, name);
  snprintf(to, sizeof to, "%s.away", from);
  if (rename(from, to) != 0 || symlink(victim, from) != 0) return errno;
  return 0;
}

/* ---- another user owns TMPDIR ---- */

typedef struct attacker {
  const char *lair, *victim;
  int ready_w, swapped_w;
} attacker;

/* As uid 64011, owner of TMPDIR: the moment a launch directory appears,
 * it is swapped for a symlink to root's victim directory. */
static int swap_the_launch_dir(void *arg) {
  const attacker *a = arg;
  int in = inotify_init1(IN_CLOEXEC);
  if (in < 0 || inotify_add_watch(in, a->lair, IN_CREATE) < 0) return 1;
  char ok = 1;
  if (write(a->ready_w, &ok, 1) != 1) return 2;
  for (;;) {
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n = read(in, buf, sizeof buf);
    if (n <= 0) return 3;
    for (ssize_t off = 0; off < n;) {
      const struct inotify_event *e = (const struct inotify_event *)(buf + off);
      off += (ssize_t)(sizeof *e + e->len);
      if (e->len == 0 || strncmp(e->name, LAUNCH_PREFIX, strlen(LAUNCH_PREFIX)) != 0 ||
          strstr(e->name, ".away"))
        continue;
      int rc = swap_for_symlink(a->lair, e->name, a->victim);
      return write(a->swapped_w, &rc, sizeof rc) == sizeof rc ? 0 : 4;
    }
  }
}

/* Before its removal, if the launch made a directory: waits until the
 * attacker swapped it, so that the removal comes after the swap (the
 * ranks refuse a store in her directory and are gone at once). */
static void wait_for_the_swap(const char *dir, const mori_rank_result *res, int world,
                              void *ctx) {
  (void)dir;
  (void)res;
  (void)world;
  struct pollfd p = {*(const int *)ctx, POLLIN, 0};
  int rc = -1;
  if (poll(&p, 1, 30000) == 1 && read(p.fd, &rc, sizeof rc) == sizeof rc && rc != 0)
    print_message("the attacker's swap failed: %s\n", strerror(rc));
}

static int nothing(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  snprintf(msg, msglen, "rank %d ran", ctx->rank);
  return 0;
}

static void a_tmpdir_another_user_owns_is_refused_and_nothing_of_root_s_is_deleted(void **s) {
  SEC_NEED_ROOT("a TMPDIR owned by another uid, and a process of that uid");
  fixture *f = *s;
  assert_int_equal(chown(f->lair, SEC_OTHER_UID, SEC_OTHER_UID), 0);
  assert_int_equal(chmod(f->lair, 0755), 0);
  int ready[2], swapped[2];
  assert_int_equal(pipe(ready), 0);
  assert_int_equal(pipe(swapped), 0);
  attacker a = {f->lair, f->victim, ready[1], swapped[1]};
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    sec_drop_to(SEC_OTHER_UID);
    _exit(swap_the_launch_dir(&a));
  }
  char ok = 0;
  assert_int_equal(read(ready[0], &ok, 1), 1);
  setenv("TMPDIR", f->lair, 1);
  mori_launch_watch watch = {.inspect = wait_for_the_swap, .ctx = &swapped[0]};
  mori_rank_result res[2];
  int failed = mori_launch_watched(2, nothing, NULL, 60000, &watch, res);
  unsetenv("TMPDIR");
  kill(pid, SIGKILL); /* it waits for a launch directory that never came */
  waitpid(pid, NULL, 0);
  for (int r = 0; r < 2; r++) print_message("rank %d: %s\n", r, res[r].msg);
  if (access(f->precious, F_OK) != 0)
    fail_msg("root's %s was deleted through the launch directory swapped for a symlink",
             f->precious);
  if (failed != 2 || !strstr(res[0].msg, f->lair) || !strstr(res[0].msg, "uid 64011"))
    fail_msg("the launch did not fail naming TMPDIR %s and its owner: %s", f->lair, res[0].msg);
  close(ready[0]);
  close(ready[1]);
  close(swapped[0]);
  close(swapped[1]);
}

/* ---- the removal goes through the directory the launcher made ---- */

/* Called before the removal: the launch directory is swapped for a
 * symlink to the victim, as only root or this user could in a TMPDIR that
 * passed the check; the removal must not follow it. */
static void swap_before_the_removal(const char *dir, const mori_rank_result *res, int world,
                                    void *ctx) {
  (void)res;
  (void)world;
  const fixture *f = ctx;
  const char *slash = strrchr(dir, '/');
  char parent[512];
  snprintf(parent, sizeof parent, "%.*s", (int)(slash - dir), dir);
  assert_int_equal(swap_for_symlink(parent, slash + 1, f->victim), 0);
}

/* Each rank leaves a file, and a symlink to the victim directory, in the
 * launch directory (one in a directory of its own), as anything of this
 * uid may: the removal takes the links, not what they point to. */
static int leave_a_file_and_a_link(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const fixture *f = ctx->arg;
  char path[1024], sub[1024];
  snprintf(path, sizeof path, "%s/left-by-rank-%d", ctx->store_dir, ctx->rank);
  FILE *p = fopen(path, "w");
  if (p) fclose(p);
  snprintf(sub, sizeof sub, "%s/rank-%d", ctx->store_dir, ctx->rank);
  snprintf(path, sizeof path, "%s/link-to-victim", sub);
  int linked = mkdir(sub, 0700) == 0 && symlink(f->victim, path) == 0;
  snprintf(msg, msglen, "left=%d linked=%d", p != NULL, linked);
  return p == NULL || !linked;
}

static void the_removal_never_follows_a_symlink_swapped_in_for_the_launch_dir(void **s) {
  fixture *f = *s;
  setenv("TMPDIR", f->lair, 1);
  mori_launch_watch watch = {.inspect = swap_before_the_removal, .ctx = f};
  mori_rank_result res[2];
  int failed = mori_launch_watched(2, leave_a_file_and_a_link, f, 60000, &watch, res);
  unsetenv("TMPDIR");
  if (failed != 0) fail_msg("launch failed: %s", res[0].msg);
  if (access(f->precious, F_OK) != 0)
    fail_msg("%s was deleted through a symlink in or swapped in for the launch directory",
             f->precious);
  /* What the launcher made went, through the directory it holds: the one
   * moved aside is empty (its name now belongs to the symlink, which is
   * not the launcher's to remove). */
  DIR *d = opendir(f->lair);
  assert_non_null(d);
  int moved = 0;
  for (struct dirent *e; (e = readdir(d));) {
    char path[1024];
    if (!strstr(e->d_name, ".away")) continue;
    snprintf(path, sizeof path, "%s/%s", f->lair, e->d_name);
    if (sec_count_entries(path) != 0)
      fail_msg("the launch directory (moved to %s) was not emptied", path);
    moved++;
  }
  closedir(d);
  assert_int_equal(moved, 1);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          a_tmpdir_another_user_owns_is_refused_and_nothing_of_root_s_is_deleted, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          the_removal_never_follows_a_symlink_swapped_in_for_the_launch_dir, setup, teardown),
  };
  return mori_run_tests(argc, argv, tests);
}
