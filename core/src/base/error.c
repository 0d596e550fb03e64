/*
 * error.c - error codes, their names, and the thread-local message naming
 * the call that failed, and the first of several failures kept whole
 * (mori__first_*).  One table; no other place spells an error name.
 */
#include "mori/error_internal.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const struct {
  int code;
  const char *name, *text;
} errors[] = {
    {MORI_OK, "MORI_OK", "success"},
    {MORI_EINVAL, "MORI_EINVAL", "invalid argument"},
    {MORI_ENOMEM, "MORI_ENOMEM", "out of host memory"},
    {MORI_EHIP, "MORI_EHIP", "GPU runtime call failed"},
    {MORI_ETIMEDOUT, "MORI_ETIMEDOUT", "timed out waiting for a peer"},
    {MORI_EPROTO, "MORI_EPROTO", "protocol violation"},
    {MORI_ESTATE, "MORI_ESTATE", "illegal state transition"},
    {MORI_EIO, "MORI_EIO", "operating system call failed"},
    {MORI_EMISMATCH, "MORI_EMISMATCH", "peers disagree"},
    {MORI_ENOTFOUND, "MORI_ENOTFOUND", "not found"},
    {MORI_ENOTSUP, "MORI_ENOTSUP", "not supported"},
    {MORI_EAUTH, "MORI_EAUTH", "credentials do not match"},
    {MORI_ERANGE, "MORI_ERANGE", "out of range"},
    {MORI_EPEER, "MORI_EPEER", "a peer failed"},
};

static int find(int code) {
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].code == code) return (int)i;
  return -1;
}

const char *mori_error_name(int code) {
  int i = find(code);
  return i < 0 ? "MORI_E?" : errors[i].name;
}

const char *mori_strerror(int code) {
  int i = find(code);
  return i < 0 ? "unknown error" : errors[i].text;
}

static __thread char message[MORI_ERROR_MESSAGE_MAX];

const char *mori_last_error(void) { return message; }
void mori_clear_error(void) { message[0] = '\0'; }

int mori__error(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  return code;
}

int mori_set_error(int code, const char *fmt, ...) {
  char text[sizeof message];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  return mori__error(code, "%s", text);
}

int mori__hip_error(const char *call, hipError_t err) {
  const char *detail = mori_shim_message();
  return mori__error(MORI_EHIP, "%s failed: %s (%d)%s%s", call, mori_hipGetErrorName(err),
                     (int)err, detail && *detail ? ": " : "", detail ? detail : "");
}

int mori__nomem(const char *fmt, ...) {
  char what[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return mori__error(MORI_ENOMEM, "%s: out of host memory: %s", what, mori_shim_message());
}

void mori__error_suffix(const char *fmt, ...) {
  size_t n = strlen(message);
  va_list ap;
  va_start(ap, fmt);
  if (n < sizeof message) vsnprintf(message + n, sizeof message - n, fmt, ap);
  va_end(ap);
}

void mori__error_prefix(const char *fmt, ...) {
  char prefix[256], rest[sizeof message];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  snprintf(rest, sizeof rest, "%s", message);
  snprintf(message, sizeof message, "%s%s", prefix, rest);
}

/* ---- the first failure of several ---- */

int mori__first_keep(mori__first_error *f, int rc) {
  return rc != 0 && !f->kept ? mori__first_set(f, rc) : rc;
}

int mori__first_set(mori__first_error *f, int rc) {
  f->rc = rc;
  f->kept = 1;
  memcpy(f->message, message, sizeof message);
  return rc;
}

int mori__first_end(const mori__first_error *f, int rc) {
  if (!f->kept) return rc;
  memcpy(message, f->message, sizeof message);
  return f->rc;
}
