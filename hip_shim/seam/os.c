/*
 * os.c - the OS half of the seam: one exported mori_<name> per row of
 * MORI_SHIM_OS_CALLS (hip_shim.h), each a plain forwarder to libc, so that
 * the fault shim can fail any OS call of the core as it fails a runtime call
 * (SQLite's aSyscall[] is the model).  mori_close, which also updates the
 * resource registry, is in shim.c beside it.
 */
#include "shim_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <unistd.h>

/* A failed OS call leaves its detail as a failed runtime call does
 * ("calloc: Cannot allocate memory (ENOMEM 12)"), so an error built after
 * it can name the call (errno is kept). */
static void os_failed(const char *name) {
  int e = errno;
  mori__shim_detail("%s: %s (errno %d)", name, strerror(e), e);
  errno = e;
}

/* pthread_create fails as the seam's rows do: -1 and errno. */
static int thread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                         void *arg) {
  int e = pthread_create(thread, attr, start, arg);
  if (e == 0) return 0;
  errno = e;
  return -1;
}

#define MORI_SHIM_OS_FORWARD(ret, name, params, args) \
  ret mori_##name params {                             \
    ret r_ = name args;                                \
    if (r_ == MORI_SHIM_OS_FAILURE(ret)) os_failed(#name); \
    return r_;                                         \
  }
MORI_SHIM_OS_CALLS(MORI_SHIM_OS_FORWARD)
#undef MORI_SHIM_OS_FORWARD
