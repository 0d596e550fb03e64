/*
 * trust.c - directories no other user can change: the store root, the
 * socket base and a peer's socket directory.  A path is walked from "/" one
 * component at a time with openat(O_DIRECTORY | O_NOFOLLOW), and each
 * directory is judged on the fd we hold (OpenSSH's StrictModes, on fds), so
 * the answer is about the directory in hand, not about a path that could
 * be swapped afterwards.  Callers then use the fd with *at() calls only.
 */
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
  mode_t type;
  const char *name;
} file_types[] = {
    {S_IFREG, "regular file"}, {S_IFDIR, "directory"},      {S_IFLNK, "symlink"},
    {S_IFIFO, "FIFO"},         {S_IFSOCK, "socket"},        {S_IFCHR, "character device"},
    {S_IFBLK, "block device"},
};

const char *mori__file_type(mode_t mode) {
  for (size_t i = 0; i < sizeof file_types / sizeof file_types[0]; i++)
    if ((mode & S_IFMT) == file_types[i].type) return file_types[i].name;
  return "file of unknown type";
}

/* ---- what makes a directory trusted ---- */

/* shared: root may own it, and a root-owned sticky directory (/tmp) may be
 * writable by everyone: nobody can rename or remove what we put there. */
static int owner_ok(const struct stat *st, int shared) {
  return st->st_uid == geteuid() || (shared && st->st_uid == 0);
}

static int writers_ok(const struct stat *st, int shared) {
  return !(st->st_mode & (S_IWGRP | S_IWOTH)) ||
         (shared && st->st_uid == 0 && (st->st_mode & S_ISVTX));
}

int mori__dir_check(const struct stat *st, const char *path, int shared, const char *who) {
  if (!S_ISDIR(st->st_mode))
    return mori__error(MORI_EAUTH, "%s: %s is a %s, not a directory", who, path,
                       mori__file_type(st->st_mode));
  if (!owner_ok(st, shared))
    return mori__error(MORI_EAUTH,
                       "%s: %s is owned by uid %u: only uid %u (this process)%s may own it", who,
                       path, (unsigned)st->st_uid, (unsigned)geteuid(), shared ? " or root" : "");
  if (!writers_ok(st, shared))
    return mori__error(MORI_EAUTH,
                       "%s: %s is writable by group or others (mode %04o), who could change what "
                       "is in it; %s",
                       who, path, (unsigned)(st->st_mode & 07777),
                       shared ? "only a root-owned sticky directory such as /tmp may be"
                              : "this one must be writable by its owner only");
  return 0;
}

/* ---- the walk ---- */

/* Why openat(dir, name, O_DIRECTORY | O_NOFOLLOW) failed with err. */
static int open_failed(int dir, const char *name, const char *path, int err, const char *who) {
  if (err == ENOTDIR || err == ELOOP) {
    struct stat st;
    int probe = mori__openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
    int known = probe >= 0 && mori_fstat(probe, &st) == 0;
    if (probe >= 0) mori_close(probe);
    if (known)
      return mori__error(MORI_EAUTH, "%s: %s is a %s, not a directory", who, path,
                         mori__file_type(st.st_mode));
  }
  return mori__error(err == ENOENT ? MORI_ENOTFOUND : MORI_EIO, "%s: open(%s): %s", who, path,
                     strerror(err));
}

/* Opens the next component under dir (created 0700 if missing, allowed
 * and the last: a missing parent is refused, never made) and checks it.
 * *fd is the new directory; dir is left open. */
static int step(int dir, const char *name, const char *path, int final, int flags,
                const char *who, int *fd) {
  int oflags = (final ? O_RDONLY : O_PATH) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  int next = mori__openat(dir, name, oflags, 0);
  if (next < 0 && errno == ENOENT && final && (flags & MORI_TRUST_CREATE)) {
    if (mori_mkdirat(dir, name, 0700) == 0)
      (void)mori_fchmodat(dir, name, 0700, 0); /* whatever the umask took away */
    else if (errno != EEXIST)
      return mori__error(MORI_EIO, "%s: mkdir(%s): %s", who, path, strerror(errno));
    next = mori__openat(dir, name, oflags, 0);
  }
  if (next < 0 && errno == ENOENT && !final && (flags & MORI_TRUST_CREATE))
    return mori__error(MORI_ENOTFOUND, "%s: %s does not exist (only the last level of a path "
                       "is created)", who, path);
  if (next < 0) return open_failed(dir, name, path, errno, who);
  struct stat st;
  int rc = mori_fstat(next, &st) == 0
               ? mori__dir_check(&st, path, !final || (flags & MORI_TRUST_SHARED), who)
               : mori__error(MORI_EIO, "%s: fstat(%s): %s", who, path, strerror(errno));
  if (rc < 0) {
    mori_close(next);
    return rc;
  }
  *fd = next;
  return 0;
}

int mori_trusted_dir_open(const char *path, int flags, const char *who, int *out) {
  char walked[PATH_MAX], name[NAME_MAX + 1];
  *out = -1;
  if (path == NULL || path[0] != '/')
    return mori__error(MORI_EINVAL, "%s: '%s' is not an absolute path", who, path ? path : "");
  if (strlen(path) >= sizeof walked)
    return mori__error(MORI_ERANGE, "%s: path too long: %s", who, path);
  int dir = mori__openat(AT_FDCWD, "/", O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
  if (dir < 0) return mori__error(MORI_EIO, "%s: open(/): %s", who, strerror(errno));
  struct stat st;
  int rc = mori_fstat(dir, &st) == 0 ? mori__dir_check(&st, "/", 1, who)
                                     : mori__error(MORI_EIO, "%s: fstat(/): %s", who, strerror(errno));
  size_t n = 0;
  for (const char *p = path; rc == 0 && *p;) {
    while (*p == '/') p++;
    size_t len = strcspn(p, "/");
    if (len == 0) break;
    if (len > NAME_MAX) {
      rc = mori__error(MORI_ERANGE, "%s: component too long in %s", who, path);
      break;
    }
    memcpy(name, p, len);
    name[len] = '\0';
    p += len;
    n += (size_t)snprintf(walked + n, sizeof walked - n, "/%s", name);
    if (strcmp(name, ".") == 0) continue;
    int final = p[strspn(p, "/")] == '\0';
    int next = -1;
    rc = step(dir, name, walked, final, flags, who, &next);
    if (rc == 0) {
      mori_close(dir);
      dir = next;
    }
  }
  if (rc == 0 && n == 0) { /* "/" itself: a directory to read, not a path */
    mori_close(dir);
    dir = mori__openat(AT_FDCWD, "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (dir < 0) rc = mori__error(MORI_EIO, "%s: open(/): %s", who, strerror(errno));
  }
  if (rc < 0) {
    if (dir >= 0) mori_close(dir);
    return rc;
  }
  *out = dir;
  return 0;
}
