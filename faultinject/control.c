/*
 * control.c - reaching a loaded libmori_faultinject.so from the program it
 * is preloaded into: through dlsym, so that the same test or tool runs with
 * and without the fault shim and can say which.
 */
#include "mori/fi.h"

#include <dlfcn.h>
#include <stdio.h>

static void *preload_symbol(const char *name) { return dlsym(RTLD_DEFAULT, name); }

int mori_fi_loaded(void) { return preload_symbol("mori_fi_preload_configure") != NULL; }

int mori_fi_control(const char *spec, char *err, size_t errlen) {
  int (*configure)(const char *, char *, size_t);
  *(void **)&configure = preload_symbol("mori_fi_preload_configure");
  if (configure == NULL) {
    if (err && errlen) snprintf(err, errlen, "libmori_faultinject.so is not loaded (LD_PRELOAD)");
    return -1;
  }
  return configure(spec, err, errlen);
}

static long count(const char *name) {
  long (*fn)(void);
  *(void **)&fn = preload_symbol(name);
  return fn ? fn() : -1;
}

static int count_int(const char *name) {
  int (*fn)(void);
  *(void **)&fn = preload_symbol(name);
  return fn ? fn() : 0;
}

long mori_fi_injected(void) { return count("mori_fi_preload_injected"); }
long mori_fi_calls(void) { return count("mori_fi_preload_calls"); }

long mori_fi_progress(int rank) {
  static long (*fn)(int);
  static int looked;
  if (!looked) { /* the launcher asks ten times a second per rank */
    *(void **)&fn = preload_symbol("mori_fi_preload_progress");
    looked = 1;
  }
  return fn ? fn(rank) : -1;
}

long mori_fi_refused(void) {
  long n = count("mori_fi_preload_refused");
  return n < 0 ? 0 : n;
}

const char *mori_fi_last_fault(void) {
  int (*fn)(void);
  *(void **)&fn = preload_symbol("mori_fi_preload_last_fault");
  return fn ? mori_fi_call_name(fn()) : NULL;
}

int mori_fi_delivered(int *senders, int max) {
  int (*fn)(int *, int);
  *(void **)&fn = preload_symbol("mori_fi_preload_delivered");
  return fn ? fn(senders, max) : -1;
}

int mori_fi_own_fds(void) { return count_int("mori_fi_preload_fds"); }

long mori_fi_clock_advance(long ms) {
  long (*fn)(long);
  *(void **)&fn = preload_symbol("mori_fi_preload_clock_advance");
  return fn && ms >= 0 ? fn(ms) : -1;
}

int mori_fi_counts_get(mori_fi_counts *out) {
  int (*fn)(mori_fi_counts *, size_t);
  *(void **)&fn = preload_symbol("mori_fi_preload_counts");
  return fn ? fn(out, sizeof *out) : -1;
}
