/*
 * output.c - the one way the fault shim (and any tool) creates a file it
 * writes (count=PATH, MORI_FI_RECORD): no link is followed, no FIFO is
 * waited on, and an existing name is overwritten only if it is a regular
 * file of ours with one link, so a name planted by another user cannot
 * turn a run (root's included) into a write somewhere else.
 */
#include "fi_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int refuse(int fd, char *err, size_t errlen, const char *fmt, const char *path,
                  const char *why) {
  if (fd >= 0) close(fd);
  snprintf(err, errlen, fmt, path, why);
  return -1;
}

static const char *kind_of(mode_t m) {
  return S_ISLNK(m) ? "symbolic link" : S_ISFIFO(m) ? "FIFO" : S_ISSOCK(m) ? "socket"
         : S_ISDIR(m) ? "directory" : S_ISCHR(m) || S_ISBLK(m) ? "device" : "special file";
}

int mori_fi__create_output(const char *path, char *err, size_t errlen) {
  const int flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  int fd = open(path, flags | O_CREAT | O_EXCL, 0600);
  if (fd >= 0) return fd; /* new: ours, 0600, nothing else names it */
  if (errno != EEXIST)
    return refuse(-1, err, errlen, "cannot create %s: %s", path, strerror(errno));
  /* It exists: open what is there without following or waiting, then judge
   * the file opened (a name swapped in between is judged as it is). */
  fd = open(path, flags);
  if (fd < 0 && errno == ELOOP)
    return refuse(-1, err, errlen, "%s is a %s: not followed", path, "symbolic link");
  if (fd < 0 && (errno == ENXIO || errno == EISDIR)) {
    struct stat ls;
    const char *what = lstat(path, &ls) == 0 ? kind_of(ls.st_mode) : strerror(errno);
    return refuse(-1, err, errlen, "%s is a %s: not a regular file, not written", path, what);
  }
  if (fd < 0) return refuse(-1, err, errlen, "cannot open %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0)
    return refuse(fd, err, errlen, "fstat(%s): %s", path, strerror(errno));
  if (!S_ISREG(st.st_mode))
    return refuse(fd, err, errlen, "%s is a %s: not a regular file, not written", path,
                  kind_of(st.st_mode));
  if (st.st_uid != geteuid())
    return refuse(fd, err, errlen, "%s belongs to %s: not overwritten", path, "another user");
  if (st.st_nlink != 1)
    return refuse(fd, err, errlen, "%s has %s: another name links it, not overwritten", path,
                  "more than one link");
  if (fchmod(fd, 0600) != 0 || ftruncate(fd, 0) != 0)
    return refuse(fd, err, errlen, "cannot overwrite %s: %s", path, strerror(errno));
  return fd;
}
