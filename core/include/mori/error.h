/*
 * error.h - mori-symm's error codes and the thread-local message that says
 * which call failed and why.  Functions return 0 or a negative MORI_E*; the
 * detail (the failing call, the runtime's error name and code, the peer)
 * goes to mori_last_error(), which the CLI and the torch adapter surface
 * verbatim.
 */
#ifndef MORI_ERROR_H
#define MORI_ERROR_H

#include "mori/api.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  MORI_OK = 0,
  MORI_EINVAL = -1,    /* bad argument */
  MORI_ENOMEM = -2,    /* host allocation failed */
  MORI_EHIP = -3,      /* a shim (GPU runtime) call failed */
  MORI_ETIMEDOUT = -4, /* a peer did not arrive in time */
  MORI_EPROTO = -5,    /* malformed, foreign, stale or duplicate message */
  MORI_ESTATE = -6,    /* illegal state transition or broken invariant */
  MORI_EIO = -7,       /* an OS call failed */
  MORI_EMISMATCH = -8, /* peers disagree (sizes, handle types, hosts, devices) */
  MORI_ENOTFOUND = -9, /* unknown pointer or key */
  MORI_ENOTSUP = -10,  /* not supported by this configuration */
  MORI_EAUTH = -11,    /* credentials do not match the sender's request */
  MORI_ERANGE = -12,   /* rank, channel or size out of bounds */
  MORI_EPEER = -13,    /* a peer reported that it failed */
  MORI_E__LAST = -13
};

/* "MORI_ETIMEDOUT" and a short description. */
MORI_API const char *mori_strerror(int code);
MORI_API const char *mori_error_name(int code);
/* The thread's last error message ("" if none). */
MORI_API const char *mori_last_error(void);
MORI_API void mori_clear_error(void);
/* Sets the thread's message (printf-style) and returns code: for code
 * outside the library that fails on its behalf, as a mori_store does (the
 * torch adapter's c10d::Store), so that mori_last_error() names the cause. */
MORI_API int mori_set_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
