/*
 * test_trusted_paths.c - the store root and the socket base are used only
 * if no other user can change any directory on the way to them: each
 * component must belong to us or to root, not be writable by group or
 * others (unless root-owned and sticky, like /tmp), and not be a symlink;
 * a path that fails gets an error naming it and why, never a fallback.
 * Once open, the store works on its directory fd: renaming a parent away
 * cannot redirect it (labels: security).
 */
#include "sec_harness.h"

#include "mori/channel.h"
#include "mori/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct fixture {
  sec_fixture base;
  char *dir;
  char path[512]; /* what the case hands to the library */
} fixture;

static int setup(void **state) {
  sec_fixture_setup(state, sizeof(fixture), "paths");
  fixture *f = *state;
  f->dir = f->base.dir;
  return 0;
}

static int teardown(void **state) {
  unsetenv("MORI_SYMM_SOCKET_DIR");
  return sec_fixture_teardown(state);
}

/* dir/<name>, made with mode and owner (chown needs root). */
static void make_dir(fixture *f, const char *name, mode_t mode, uid_t owner) {
  snprintf(f->path, sizeof f->path, "%s/%s", f->dir, name);
  assert_int_equal(mkdir(f->path, 0700), 0);
  if (owner != geteuid()) assert_int_equal(chown(f->path, owner, owner), 0);
  assert_int_equal(chmod(f->path, mode), 0);
}

/* ---- the two users of a trusted path ---- */

typedef int (*open_fn)(const char *path);

static int open_store(const char *path) {
  mori_store *s = NULL;
  int rc = mori_file_store_open(path, &s);
  if (s) s->destroy(s);
  return rc;
}

static int open_channel(const char *path) {
  mori_channel *ch = NULL;
  setenv("MORI_SYMM_SOCKET_DIR", path, 1);
  int rc = mori_channel_open(1, &ch);
  mori_channel_close(ch);
  return rc;
}

static const struct user {
  const char *name;
  open_fn open;
} users[] = {{"store root", open_store}, {"socket base", open_channel}};

static void assert_refused(const char *path, const char *who_says, const char *why) {
  for (size_t i = 0; i < sizeof users / sizeof users[0]; i++) {
    int rc = users[i].open(path);
    const char *m = mori_last_error();
    print_message("%s %s: %s\n", users[i].name, path, rc ? m : "accepted");
    if (rc == 0) fail_msg("%s %s accepted (%s)", users[i].name, path, why);
    if (!strstr(m, who_says) || !strstr(m, why))
      fail_msg("%s: the error does not name %s and '%s': %s", users[i].name, who_says, why, m);
  }
}

static void assert_accepted(const char *path) {
  for (size_t i = 0; i < sizeof users / sizeof users[0]; i++)
    if (users[i].open(path) != 0)
      fail_msg("%s %s refused: %s", users[i].name, path, mori_last_error());
}

/* ---- refusals ---- */

static void a_directory_another_user_owns_is_refused(void **state) {
  SEC_NEED_ROOT("chown to another uid");
  fixture *f = *state;
  make_dir(f, "theirs", 0700, SEC_OTHER_UID);
  assert_refused(f->path, f->path, "uid 64011");
}

static void a_directory_others_can_write_is_refused(void **state) {
  fixture *f = *state;
  make_dir(f, "open", 0777, geteuid());
  assert_refused(f->path, f->path, "0777");
}

static void a_directory_its_group_can_write_is_refused(void **state) {
  fixture *f = *state;
  make_dir(f, "group", 0770, geteuid());
  assert_refused(f->path, f->path, "0770");
}

static void a_symlink_to_our_own_directory_is_refused(void **state) {
  fixture *f = *state;
  make_dir(f, "real", 0700, geteuid());
  char link[600];
  snprintf(link, sizeof link, "%s/link", f->dir);
  assert_int_equal(symlink(f->path, link), 0);
  assert_refused(link, link, "symlink");
}

/* dir/link -> dir/real, and the path through it: dir/link/leaf.  Only the
 * last component of a path was ever opened with O_NOFOLLOW by name; a
 * parent component must be refused as a symlink too. */
static void a_symlink_in_a_parent_component_is_refused(void **state) {
  fixture *f = *state;
  make_dir(f, "real", 0700, geteuid());
  char leaf[600], link[600];
  snprintf(leaf, sizeof leaf, "%s/leaf", f->path);
  assert_int_equal(mkdir(leaf, 0700), 0);
  snprintf(link, sizeof link, "%s/link", f->dir);
  assert_int_equal(symlink(f->path, link), 0);
  snprintf(f->path, sizeof f->path, "%s/leaf", link);
  assert_refused(f->path, link, "symlink");
}

/* dir/parent (mode, owner) holding ours/ (0700, ours): whoever can change
 * the parent could rename ours/ away and put theirs in its place. */
static void assert_refused_under_parent(fixture *f, mode_t mode, uid_t owner, const char *why) {
  make_dir(f, "parent", mode, owner);
  char parent[600], child[700];
  snprintf(parent, sizeof parent, "%s", f->path);
  snprintf(child, sizeof child, "%s/ours", parent);
  assert_int_equal(mkdir(child, 0700), 0);
  assert_refused(child, parent, why);
}

static void a_parent_another_user_owns_is_refused(void **state) {
  SEC_NEED_ROOT("chown to another uid");
  assert_refused_under_parent(*state, 0755, SEC_OTHER_UID, "uid 64011");
}

static void a_parent_others_can_write_is_refused(void **state) {
  assert_refused_under_parent(*state, 0777, geteuid(), "0777");
}

static void a_relative_path_is_refused(void **state) {
  (void)state;
  assert_refused("relative/dir", "relative/dir", "absolute");
}

/* MORI_SYMM_SOCKET_DIR names the base: one that fails is an error, not a
 * reason to try XDG_RUNTIME_DIR or /tmp instead. */
static void an_untrusted_socket_dir_is_no_reason_to_fall_back(void **state) {
  fixture *f = *state;
  make_dir(f, "open", 0777, geteuid());
  setenv("XDG_RUNTIME_DIR", f->dir, 1);
  int rc = open_channel(f->path);
  unsetenv("XDG_RUNTIME_DIR");
  if (rc == 0) fail_msg("channel opened under another base when %s was refused", f->path);
}

/* ---- acceptances ---- */

/* The store root and the socket base are made if missing, but only the
 * last level: a missing parent is refused by name and nothing is made (as
 * root, a typo would otherwise create directories up from "/"). */
static void the_missing_last_level_is_created_0700_and_ours_never_a_parent(void **state) {
  fixture *f = *state;
  struct stat st;
  char level1[600];
  snprintf(level1, sizeof level1, "%s/new", f->dir);
  snprintf(f->path, sizeof f->path, "%s/new/level", f->dir);
  assert_refused(f->path, level1, "only the last level of a path is created");
  if (stat(level1, &st) == 0) fail_msg("%s was created for a directory under it", level1);
  snprintf(f->path, sizeof f->path, "%s", level1);
  assert_accepted(f->path);
  assert_int_equal(stat(f->path, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0700);
  assert_int_equal(st.st_uid, geteuid());
}

static void a_directory_in_a_root_owned_sticky_directory_is_accepted(void **state) {
  (void)state;
  struct stat st;
  assert_int_equal(stat("/tmp", &st), 0);
  if (st.st_uid != 0 || !(st.st_mode & S_ISVTX)) {
    print_message("[  SKIP    ] /tmp is not root-owned and sticky here\n");
    skip();
  }
  if (open_channel("/tmp") != 0) /* the socket base may be /tmp itself */
    fail_msg("socket base /tmp refused: %s", mori_last_error());
  char own[128];
  snprintf(own, sizeof own, "/tmp/mori-sec-direct-%d", (int)getpid());
  int rc = open_store(own);
  rmdir(own);
  if (rc != 0) fail_msg("store root %s refused: %s", own, mori_last_error());
}

/* /tmp itself is shared: another user could have made any key file there. */
static void a_shared_sticky_directory_is_no_store_root(void **state) {
  (void)state;
  if (open_store("/tmp") == 0) fail_msg("/tmp accepted as a store root");
  if (!strstr(mori_last_error(), "/tmp")) fail_msg("%s", mori_last_error());
}

/* ---- the store works on its directory, not on its path ---- */

static void a_store_keeps_its_directory_when_a_parent_is_renamed(void **state) {
  fixture *f = *state;
  char parent[600], moved[600], root[700], swapped[700];
  snprintf(parent, sizeof parent, "%s/a", f->dir);
  snprintf(moved, sizeof moved, "%s/a.moved", f->dir);
  snprintf(root, sizeof root, "%s/store", parent);
  mori_store *s;
  assert_int_equal(mkdir(parent, 0700), 0);
  assert_int_equal(mori_file_store_open(root, &s), 0);
  /* Swap the path under it: a/ moves away and a new a/store appears. */
  assert_int_equal(rename(parent, moved), 0);
  assert_int_equal(mkdir(parent, 0700), 0);
  assert_int_equal(mkdir(root, 0700), 0);
  assert_int_equal(s->set(s, "k", "v", 1), 0);
  s->destroy(s);
  snprintf(swapped, sizeof swapped, "%s/store/k", moved);
  if (access(swapped, F_OK) != 0) fail_msg("the value did not land in the store's own directory");
  snprintf(swapped, sizeof swapped, "%s/k", root);
  if (access(swapped, F_OK) == 0) fail_msg("the value landed in the directory swapped in");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(a_directory_another_user_owns_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(a_directory_others_can_write_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(a_directory_its_group_can_write_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(a_symlink_to_our_own_directory_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(a_symlink_in_a_parent_component_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(a_parent_another_user_owns_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(a_parent_others_can_write_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(a_relative_path_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(an_untrusted_socket_dir_is_no_reason_to_fall_back, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          the_missing_last_level_is_created_0700_and_ours_never_a_parent, setup, teardown),
      cmocka_unit_test_setup_teardown(a_directory_in_a_root_owned_sticky_directory_is_accepted,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(a_shared_sticky_directory_is_no_store_root, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(a_store_keeps_its_directory_when_a_parent_is_renamed, setup,
                                      teardown),
  };
  return mori_run_tests(argc, argv, tests);
}
