/*
 * os.c - what every use of the seam's OS calls in the core needs: an open
 * that an interrupting signal does not fail (EINTR is retried), and a
 * removal of a file of ours that one transient failure does not leave
 * behind.  The seam itself stays a plain forwarder (hip_shim.h).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

/* ---- the process's fd table, grown once at load ----
 *
 * Linux grows a process's fd table when an fd past its size is taken (at
 * 64, 256, 512, 1024 ... slots), and in a multi-threaded process the
 * growth waits for an RCU grace period: 8-40 ms on a 2-core machine, in
 * whichever call takes that fd (docs/performance.md).  A rendezvous opens
 * several fds (the trusted walk, the channel's directory and socket, the
 * fds it receives) in a process that a GPU runtime has filled with fds and
 * threads, so that wait landed in a rendezvous's BIND.  At load the table
 * is grown once to MORI_FD_TABLE_SLOTS slots (fewer if the soft
 * RLIMIT_NOFILE is lower): free in a single-threaded process, one grace
 * period otherwise, before any call of the library is timed.  Not through
 * the seam: a hint with no failure to report, whose calls would only shift
 * the fault shim's call numbers (the table stays as it was if it fails). */
enum { MORI_FD_TABLE_SLOTS = 4096 };

__attribute__((constructor)) static void grow_fd_table(void) {
  struct rlimit rl;
  long want = MORI_FD_TABLE_SLOTS;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      (long)rl.rlim_cur < want)
    want = (long)rl.rlim_cur;
  int fd = want > 1 ? open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (fd < 0) return;
  int high = fcntl(fd, F_DUPFD_CLOEXEC, (int)(want - 1));
  if (high >= 0) close(high);
  close(fd);
}

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
