/*
 * os.c - what every use of the seam's OS calls in the core needs: an open
 * that an interrupting signal does not fail (EINTR is retried), and a
 * removal of a file of ours that one transient failure does not leave
 * behind.  The seam itself stays a plain forwarder (hip_shim.h).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>

int mori__openat(int dirfd, const char *path, int flags, mode_t mode) {
  int fd;
  while ((fd = mori_openat(dirfd, path, flags, mode)) < 0 && errno == EINTR) {
  }
  return fd;
}

int mori__unlinkat(int dirfd, const char *path, int flags) {
  if (mori_unlinkat(dirfd, path, flags) == 0 || errno == ENOENT) return 0;
  return mori_unlinkat(dirfd, path, flags) == 0 || errno == ENOENT ? 0 : -1;
}
