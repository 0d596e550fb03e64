/*
 * gpu_common.c - library loading, all-or-nothing symbol resolution and
 * error translation for the cuda and hip backends, written once for both.
 */
#include "gpu_common.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Appends to a fixed buffer; what does not fit is cut, never overrun. */
static void __attribute__((format(printf, 3, 4)))
append(char *buf, size_t len, const char *fmt, ...) {
  size_t n = strnlen(buf, len);
  va_list ap;
  if (n + 1 >= len) return;
  va_start(ap, fmt);
  vsnprintf(buf + n, len - n, fmt, ap);
  va_end(ap);
}

void *mori__gpu_open(const char *env, const char *const *sonames, size_t nsonames,
                     const char **opened, char *why, size_t whylen) {
  const char *path = getenv(env);
  void *lib;
  why[0] = '\0';
  /* An explicit path is the user's decision: no fallback to the sonames. */
  if (path != NULL && *path != '\0') {
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) snprintf(why, whylen, "%s=%s: %s", env, path, dlerror());
    *opened = path;
    return lib;
  }
  for (size_t i = 0; i < nsonames; i++) {
    lib = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
    *opened = sonames[i];
    if (lib != NULL) return lib;
    append(why, whylen, "%s%s", why[0] ? "; " : "", dlerror());
  }
  return NULL;
}

int mori__gpu_resolve(void *lib, const char *libname, const struct mori__gpu_symbol *syms,
                      size_t nsyms, char *why, size_t whylen) {
  size_t missing = 0;
  why[0] = '\0';
  for (size_t i = 0; i < nsyms; i++) {
    *syms[i].slot = dlsym(lib, syms[i].name);
    if (*syms[i].slot != NULL) continue;
    if (missing++ == 0)
      append(why, whylen, "%s: missing symbols %s", libname, syms[i].name);
    else
      append(why, whylen, ", %s", syms[i].name);
  }
  if (missing == 0) return 0;
  for (size_t i = 0; i < nsyms; i++) *syms[i].slot = NULL;
  /* A list longer than the buffer is cut after a whole name; the count
   * says how long it was. */
  char tail[64];
  snprintf(tail, sizeof tail, " (%zu of %zu missing)", missing, nsyms);
  size_t n = strnlen(why, whylen), t = strlen(tail);
  if (n + t + 1 > whylen && whylen > t + 6) {
    n = whylen - t - 6;
    while (n > 0 && why[n] != ',') n--;
    memcpy(why + n, ", ...", 6);
    n += 5;
  }
  if (n + t + 1 <= whylen) memcpy(why + n, tail, t + 1);
  return -1;
}

hipError_t mori__gpu_map_error(const struct mori__gpu_error *table, size_t n, int code) {
  for (size_t i = 0; i < n; i++)
    if (table[i].code == code) return table[i].hip;
  return hipErrorUnknown;
}

hipError_t mori__gpu_fail(const char *call, const char *name, int code, hipError_t hip) {
  if (name != NULL)
    mori__shim_detail("%s: %s (%d)", call, name, code);
  else
    mori__shim_detail("%s: error %d", call, code);
  return hip;
}
