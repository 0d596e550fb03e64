/*
 * os.c - what every use of the seam's OS calls in the core needs: an open
 * that an interrupting signal does not fail (EINTR is retried), a removal
 * of a file of ours that one transient failure does not leave behind, and
 * time (the clock, naps, randomness) with its failures named.  The seam
 * itself stays a plain forwarder (hip_shim.h).
 */
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
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

/* ---- time ---- */

int mori__clock_us(double *us, const char *what) {
  struct timespec ts;
  if (mori_clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
    return mori__error(MORI_EIO, "%s: clock_gettime(CLOCK_MONOTONIC): %s", what, strerror(errno));
  *us = (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
  return 0;
}

double mori__log_clock_us(void) {
  struct timespec ts;
  if (mori_clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return NAN;
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int mori__nap_us(double us, const char *what) {
  if (us <= 0) return 0;
  long long ns = (long long)(us * 1e3);
  struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
  /* the caller's loop looks at the time again: an interrupted nap is only
   * a shorter one */
  if (mori_nanosleep(&ts, NULL) != 0 && errno != EINTR)
    return mori__error(MORI_EIO, "%s: nanosleep: %s", what, strerror(errno));
  return 0;
}

int mori__random64(uint64_t *out, const char *what) {
  uint8_t *p = (uint8_t *)out;
  size_t got = 0;
  while (got < sizeof *out) {
    ssize_t n = mori_getrandom(p + got, sizeof *out - got, 0);
    if (n > 0) got += (size_t)n;
    else if (n == 0 || errno != EINTR)
      return mori__error(MORI_EIO, "%s: getrandom: %s", what, n ? strerror(errno) : "no bytes");
  }
  return 0;
}

/* kill(pid, 0) says whether a process is there (a zombie still is, until
 * its parent reaps it).  Not through the seam: a look every few
 * milliseconds from the watchdog's thread would make the seam's call
 * numbers, which the fault sweeps count on, depend on timing. */
int mori__process_gone(uint32_t pid) {
  return pid != 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}
