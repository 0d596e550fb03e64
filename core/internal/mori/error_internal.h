/*
 * error_internal.h - how the library and its in-tree tools and tests set
 * the thread's error: the public codes and message (mori/error.h) plus the
 * helpers that name a failed runtime call, a failed host allocation, and
 * the context of a message.  Not installed: it speaks HIP's types.
 */
#ifndef MORI_ERROR_INTERNAL_H
#define MORI_ERROR_INTERNAL_H

#include "mori/error.h"
#include "mori/hip_shim.h"
#include "mori/text.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the message and returns code. */
int mori__error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A failed shim call; the message names the call, the HIP error and the
 * shim's detail.  Returns MORI_EHIP. */
int mori__hip_error(const char *call, hipError_t err);
/* A host allocation of the seam (mori_malloc ...) just returned NULL; the
 * message says what for, and the seam's detail names the call ("calloc:
 * Cannot allocate memory").  Returns MORI_ENOMEM. */
int mori__nomem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prefixes the current message with context ("rank 2 window 7: "). */
void mori__error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Appends to the current message (" (while ...)"). */
void mori__error_suffix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The room of the thread's message, terminating NUL included. */
#define MORI_ERROR_MESSAGE_MAX 1024

/* The failure to report from steps that may each fail after another (a
 * teardown's, a rollback's) or from a cleanup after a failure (an abort
 * being published): the first one, whose message names the call that went
 * wrong first and must not be overwritten by the later ones.  Zeroed
 * ({0}) before mori__first_keep; mori__first_set fills it whole. */
typedef struct mori__first_error {
  int rc;   /* its code (0 for a message kept with mori__first_set(f, 0)) */
  int kept; /* message holds one */
  char message[MORI_ERROR_MESSAGE_MAX];
} mori__first_error;
/* If rc != 0 and f kept nothing yet: keeps rc and the thread's message.
 * Returns rc. */
int mori__first_keep(mori__first_error *f, int rc);
/* Keeps rc and the thread's message as they are now, whatever f held: a
 * failure already reported (the cause of the cleanup that follows) or a
 * call's message that a cleanup must leave as it was.  Returns rc. */
int mori__first_set(mori__first_error *f, int rc);
/* The end of the steps: if f kept one, its message is the thread's again
 * and its code is returned; otherwise rc, the message as it is. */
int mori__first_end(const mori__first_error *f, int rc);
/* mori__escape, mori__text_is_plain: the one escape (mori/text.h). */

#define MORI_GUARD(expr)                                                             \
  do {                                                                               \
    int mori__rc = (expr);                                                           \
    if (mori__rc < 0) return mori__rc;                                               \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif
