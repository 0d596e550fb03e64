/*
 * calls.c - the tables the schedule language, the trace format and the
 * sweeps share: call names, argument layouts, which calls give resources
 * back and what each call can really return when it fails (for a runtime
 * call, all of it from its row of the seam's list, hip_shim.h), the HIP
 * error names and the errno names.
 */
#include "fi_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* A row's registry column: whether the call gives a resource back. */
#define RELEASES(op, kind, key, size, when) RELEASES_##op
#define RELEASES_none 0
#define RELEASES_acquire 0
#define RELEASES_release 1
#define RELEASES_release_range 1

static const struct {
  const char *name, *spec;
  int releases;
} calls[MORI_FI_CALL__COUNT] = {
#define ROW_HIP(name, arity, params, args, registry, shim, spec, errors) \
  {#name, spec, RELEASES registry},
#define ROW_OS(ret, name, params, args) {#name, "", 0},
    MORI_SHIM_HIP_CALLS(ROW_HIP) MORI_FI_OS_CALLS(ROW_OS)
#undef ROW_HIP
#undef ROW_OS
};

/* The OS calls a trace records: those that move or end an fd. */
static const struct {
  int call;
  const char *spec;
} recorded[] = {{MORI_FI_CALL_sendmsg, "fds:F bytes:z"},
                {MORI_FI_CALL_recvmsg, "fds:F bytes:z"},
                {MORI_FI_CALL_close, "fd:f"}};

const char *mori_fi_call_name(int call) {
  return call >= 0 && call < MORI_FI_CALL__COUNT ? calls[call].name : NULL;
}

const char *mori_fi_call_spec(int call) {
  for (size_t i = 0; i < COUNT(recorded); i++)
    if (recorded[i].call == call) return recorded[i].spec;
  return call >= 0 && call < MORI_FI_CALL__COUNT ? calls[call].spec : NULL;
}

static int name_is(const char *want, const char *name, size_t len) {
  return strlen(want) == len && memcmp(want, name, len) == 0;
}

int mori_fi_call_find(const char *name, size_t len) {
  /* mori_hipMemMap and mori_openat are the exported spellings */
  if (len > 5 && memcmp(name, "mori_", 5) == 0) name += 5, len -= 5;
  for (int c = 0; c < MORI_FI_CALL__COUNT; c++)
    if (name_is(calls[c].name, name, len)) return c;
  return -1;
}

int mori_fi_call_releases(int call) {
  return call >= 0 && call < MORI_FI_CALL__COUNT && calls[call].releases;
}

/* ---- what each call can return when it fails ---- */

#define ERRORS_MAX 6

/* Runtime calls: the errors HIP documents or is known to return for each,
 * the errors column of its row (docs/fault-injection.md lists them with
 * their sources).  OS calls: the errors of the man page that can happen to
 * the core's use of the call (regular files in a private directory, AF_UNIX
 * datagram sockets). */
#define UNPAREN(...) __VA_ARGS__
static const int call_errors[MORI_FI_CALL__COUNT][ERRORS_MAX] = {
#define ERRORS_HIP(name, arity, params, args, registry, shim, spec, errors) \
  [MORI_FI_CALL_##name] = {UNPAREN errors},
    MORI_SHIM_HIP_CALLS(ERRORS_HIP)
#undef ERRORS_HIP
    [MORI_FI_CALL_socket] = {EMFILE, ENFILE, ENOBUFS, ENOMEM},
    [MORI_FI_CALL_bind] = {EADDRINUSE, EACCES, ENOSPC, ENOMEM},
    [MORI_FI_CALL_connect] = {EINTR, EAGAIN, ECONNREFUSED, ENOENT},
    [MORI_FI_CALL_setsockopt] = {ENOMEM, ENOBUFS},
    [MORI_FI_CALL_poll] = {EINTR, ENOMEM},
    [MORI_FI_CALL_sendmsg] = {EAGAIN, EINTR, ENOBUFS, ENOMEM, ECONNREFUSED, EPIPE},
    [MORI_FI_CALL_recvmsg] = {EAGAIN, EINTR, ENOMEM},
    [MORI_FI_CALL_openat] = {EINTR, EMFILE, ENFILE, ENOSPC, EACCES, ENOMEM},
    [MORI_FI_CALL_read] = {EINTR, EIO},
    [MORI_FI_CALL_write] = {EINTR, ENOSPC, EIO, EDQUOT},
    [MORI_FI_CALL_fsync] = {EIO, ENOSPC, EDQUOT},
    [MORI_FI_CALL_fstat] = {ENOMEM, EIO},
    [MORI_FI_CALL_flock] = {EINTR, ENOLCK},
    [MORI_FI_CALL_renameat] = {ENOSPC, EIO, EACCES, EDQUOT, ENOMEM},
    [MORI_FI_CALL_unlinkat] = {EIO, EACCES, EBUSY, ENOMEM},
    [MORI_FI_CALL_mkdirat] = {ENOSPC, EACCES, EDQUOT, ENOMEM},
    [MORI_FI_CALL_fchmodat] = {EIO, ENOMEM, EPERM},
    [MORI_FI_CALL_getdents64] = {EIO, ENOMEM, ENOENT},
    [MORI_FI_CALL_inotify_init1] = {EMFILE, ENFILE, ENOMEM},
    [MORI_FI_CALL_inotify_add_watch] = {ENOSPC, ENOMEM, EACCES},
    /* kill(pid, 0) answers ESRCH for a pid that is gone: an answer, not a
     * failure, so a fault is only what it cannot answer */
    [MORI_FI_CALL_kill] = {EPERM},
    [MORI_FI_CALL_malloc] = {ENOMEM},
    [MORI_FI_CALL_calloc] = {ENOMEM},
    [MORI_FI_CALL_realloc] = {ENOMEM},
    [MORI_FI_CALL_strdup] = {ENOMEM},
    /* the core reads CLOCK_MONOTONIC (and the watchdog CLOCK_REALTIME),
     * which a kernel may not offer; sleeps are only ever interrupted; the
     * kernel may have no getrandom (a seccomp filter answers ENOSYS), and
     * blocks, interruptibly, until its pool is seeded; a thread fails for
     * want of resources (pthread_create's EAGAIN, not a retry) */
    [MORI_FI_CALL_clock_gettime] = {EINVAL},
    [MORI_FI_CALL_nanosleep] = {EINTR},
    [MORI_FI_CALL_getrandom] = {ENOSYS, EINTR},
    [MORI_FI_CALL_thread_create] = {EAGAIN},
    [MORI_FI_CALL_close] = {EINTR, EIO},
};

/* A row nobody filled in still fails somehow; a test insists every row is
 * filled, so that a new call of the seam comes with its real errors. */
static const int unknown_hip[] = {hipErrorUnknown}, unknown_os[] = {EIO};

static int row_length(int call) {
  int n = 0;
  while (call >= 0 && call < MORI_FI_CALL__COUNT && n < ERRORS_MAX && call_errors[call][n] != 0)
    n++;
  return n;
}

int mori_fi__call_errors_filled(int call) { return row_length(call) > 0; }

int mori_fi_call_errors(int call, const int **errors) {
  int n = row_length(call);
  if (n > 0) {
    *errors = call_errors[call];
    return n;
  }
  *errors = mori_fi_call_is_hip(call) ? unknown_hip : unknown_os;
  return 1;
}

/* ---- HIP error names: the shim's own list (hip_shim.h) ---- */

#define MORI_ERROR_ROW(e, value) {e, #e},
static const struct {
  int code;
  const char *name;
} errors[] = {MORI_HIP_ERROR_LIST(MORI_ERROR_ROW)};
#undef MORI_ERROR_ROW

const char *mori_fi_error_name(int code) {
  for (size_t i = 0; i < COUNT(errors); i++)
    if (errors[i].code == code) return errors[i].name;
  return NULL;
}

int mori_fi_error_find(const char *name, size_t len, int *code) {
  for (size_t i = 0; i < COUNT(errors); i++)
    if (name_is(errors[i].name, name, len)) {
      *code = errors[i].code;
      return 0;
    }
  return -1;
}

/* ---- errno names ---- */

/* X(name, transient): transient errors are retried by every caller. */
#define ERRNO_LIST(X)                                                                 \
  X(EINTR, 1) X(EAGAIN, 1) X(ENOBUFS, 0) X(ENOMEM, 0) X(EMFILE, 0) X(ENFILE, 0)       \
  X(ENOSPC, 0) X(EDQUOT, 0) X(EIO, 0) X(EPIPE, 0) X(EACCES, 0) X(EADDRINUSE, 0)       \
  X(ECONNREFUSED, 0) X(ENOENT, 0) X(ENOLCK, 0) X(EBUSY, 0) X(EEXIST, 0) X(EINVAL, 0)  \
  X(EBADF, 0) X(EPERM, 0) X(EROFS, 0) X(ETIMEDOUT, 0) X(ESRCH, 0) X(ENOSYS, 0)

#define ERRNO_ROW(e, transient) {e, #e, transient},
static const struct {
  int value;
  const char *name;
  int transient;
} errnos[] = {ERRNO_LIST(ERRNO_ROW)};
#undef ERRNO_ROW

const char *mori_fi_errno_name(int e) {
  for (size_t i = 0; i < COUNT(errnos); i++)
    if (errnos[i].value == e) return errnos[i].name;
  return NULL;
}

int mori_fi_errno_find(const char *name, size_t len, int *e) {
  for (size_t i = 0; i < COUNT(errnos); i++)
    if (name_is(errnos[i].name, name, len)) {
      *e = errnos[i].value;
      return 0;
    }
  return -1;
}

int mori_fi_errno_transient(int e) {
  for (size_t i = 0; i < COUNT(errnos); i++)
    if (errnos[i].value == e) return errnos[i].transient;
  return 0;
}

int mori_fi_call_retries(int call, int error) {
  /* Where a call's error means otherwise than the errno table says: a
   * datagram socket's full queue, which the sender polls and sends again;
   * pthread_create's EAGAIN, a limit on threads reached, which a retry
   * meets again. */
  static const struct {
    int call, error, retried;
  } exceptions[] = {{MORI_FI_CALL_sendmsg, ENOBUFS, 1}, {MORI_FI_CALL_thread_create, EAGAIN, 0}};
  if (!mori_fi_call_is_os(call)) return 0;
  for (size_t i = 0; i < COUNT(exceptions); i++)
    if (exceptions[i].call == call && exceptions[i].error == error) return exceptions[i].retried;
  return mori_fi_errno_transient(error);
}

const char *mori_fi_failure_name(int call, int code, char *buf, size_t n) {
  const char *name = mori_fi_call_is_hip(call) ? mori_fi_error_name(code)
                                               : mori_fi_errno_name(code);
  if (name != NULL) return name;
  snprintf(buf, n, mori_fi_call_is_hip(call) ? "hipError(%d)" : "errno %d", code);
  return buf;
}
