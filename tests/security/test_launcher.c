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
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
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

/* ---- the launch directory made but not held ---- */

/* The launcher's own calls are libc's (tools stay outside the seam): this
 * program interposes openat and fstat, and fails those of a launch
 * directory while `refuse` names the call.  Nothing is forked then: the
 * launch fails before any rank. */
static const char *refuse; /* "openat", "fstat" or NULL */

static int is_launch_dir_name(const char *path) {
  return strncmp(path, LAUNCH_PREFIX, sizeof LAUNCH_PREFIX - 1) == 0 && !strchr(path, '/');
}

int openat(int dir, const char *path, int flags, ...) {
  static int (*real)(int, const char *, int, ...);
  va_list ap;
  va_start(ap, flags);
  int mode = flags & (O_CREAT | O_TMPFILE) ? va_arg(ap, int) : 0;
  va_end(ap);
  if (real == NULL) *(void **)&real = dlsym(RTLD_NEXT, "openat");
  if (refuse && strcmp(refuse, "openat") == 0 && is_launch_dir_name(path)) {
    errno = EACCES;
    return -1;
  }
  return real(dir, path, flags, mode);
}

int fstat(int fd, struct stat *st) {
  static int (*real)(int, struct stat *);
  if (real == NULL) *(void **)&real = dlsym(RTLD_NEXT, "fstat");
  if (refuse && strcmp(refuse, "fstat") == 0) {
    char link[64], target[1024];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    const char *base = n > 0 ? (target[n] = '\0', strrchr(target, '/')) : NULL;
    if (base && is_launch_dir_name(base + 1)) {
      errno = EIO;
      return -1;
    }
  }
  return real(fd, st);
}

/* The directory was made: whichever call then fails, it goes again, and
 * the launch fails naming the call. */
static void a_launch_dir_made_but_not_held_is_removed(void **s) {
  fixture *f = *s;
  static const char *const calls[] = {"openat", "fstat"};
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
    mori_rank_result res[2];
    setenv("TMPDIR", f->lair, 1);
    refuse = calls[i];
    int failed = mori_launch(2, nothing, NULL, 60000, res);
    refuse = NULL;
    unsetenv("TMPDIR");
    print_message("%s refused: %s\n", calls[i], res[0].msg);
    if (sec_count_entries(f->lair) != 0)
      fail_msg("%s of the launch directory refused: the directory was left in TMPDIR %s (%s)",
               calls[i], f->lair, res[0].msg);
    if (failed != 2 || !strstr(res[0].msg, calls[i]) || !strstr(res[0].msg, f->lair))
      fail_msg("%s of the launch directory refused: the launch did not fail naming the call and "
               "the directory: %s",
               calls[i], res[0].msg);
  }
}

/* ---- the directory mori_launch_at is given ---- */

/* mori_launch_at's directory is the job's store itself, not a TMPDIR to
 * make one in: it must be this user's alone.  A root-owned, sticky,
 * world-writable directory (/tmp) is refused: anyone could plant keys in
 * it.  As root, one made like /tmp is tried first: a wrong acceptance
 * then runs its ranks there, not in /tmp. */
static void a_store_dir_root_owns_and_anyone_may_write_is_refused(void **s) {
  fixture *f = *s;
  char like_tmp[600];
  const char *dirs[2] = {NULL, "/tmp"};
  if (sec_is_root()) {
    snprintf(like_tmp, sizeof like_tmp, "%s/like-tmp", f->base.dir);
    assert_int_equal(mkdir(like_tmp, 0700), 0);
    assert_int_equal(chmod(like_tmp, 01777), 0);
    dirs[0] = like_tmp;
  }
  for (int i = 0; i < 2; i++) {
    if (dirs[i] == NULL) continue;
    struct stat st;
    assert_int_equal(stat(dirs[i], &st), 0);
    assert_true(st.st_uid == 0 && (st.st_mode & 01777) == 01777);
    mori_rank_result res[2];
    int failed = mori_launch_at(dirs[i], 2, nothing, NULL, 60000, res);
    print_message("%s: %s\n", dirs[i], res[0].msg);
    if (failed != 2 || res[0].exit_code != 127 || !strstr(res[0].msg, dirs[i]))
      fail_msg("mori_launch_at(%s), root's, sticky and world-writable, was not refused naming "
               "it: %d rank(s) failed, rank 0: %s",
               dirs[i], failed, res[0].msg);
  }
  if (dirs[0] != NULL && sec_count_entries(dirs[0]) != 0)
    fail_msg("the refused %s is not left as it was", dirs[0]);
}

/* ---- stdin closed ---- */

/* A launcher started with stdin closed: fd 0 is the first free one, so its
 * directory's fds may be 0, which is an fd like any other: the launch
 * works, its directory is emptied and removed, and fd 0 is closed again. */
static void a_launch_with_stdin_closed_works_and_leaves_nothing(void **s) {
  fixture *f = *s;
  mori_rank_result res[2];
  int saved = dup(0);
  assert_true(saved >= 0);
  setenv("TMPDIR", f->lair, 1);
  close(0);
  int failed = mori_launch(2, nothing, NULL, 60000, res);
  int zero_open = fcntl(0, F_GETFD) != -1;
  (void)dup2(saved, 0);
  close(saved);
  unsetenv("TMPDIR");
  if (failed != 0) fail_msg("with stdin closed, the launch failed: %s", res[0].msg);
  if (sec_count_entries(f->lair) != 0)
    fail_msg("with stdin closed, the launch left its directory in TMPDIR %s", f->lair);
  if (zero_open) fail_msg("with stdin closed, the launch left fd 0 open");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          a_tmpdir_another_user_owns_is_refused_and_nothing_of_root_s_is_deleted, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          the_removal_never_follows_a_symlink_swapped_in_for_the_launch_dir, setup, teardown),
      cmocka_unit_test_setup_teardown(a_launch_dir_made_but_not_held_is_removed, setup, teardown),
      cmocka_unit_test_setup_teardown(a_store_dir_root_owns_and_anyone_may_write_is_refused, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(a_launch_with_stdin_closed_works_and_leaves_nothing, setup,
                                      teardown),
  };
  return mori_run_tests(argc, argv, tests);
}
