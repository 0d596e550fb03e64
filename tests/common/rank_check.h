/*
 * rank_check.h - the check of a rank function (mori_rank_fn): on failure
 * it writes "rank R line L: <why>" into the rank's message and returns 1,
 * which the launcher reports for that rank.  Needs ctx, msg and msglen in
 * scope.  And a rank's wait for another rank's step: a key in the store.
 */
#ifndef MORI_RANK_CHECK_H
#define MORI_RANK_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "mori/store.h"

#define CHECK(cond, ...)                                                             \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      int n_ = snprintf(msg, msglen, "rank %d line %d: ", ctx->rank, __LINE__);      \
      snprintf(msg + n_, msglen - (size_t)n_, __VA_ARGS__);                          \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

/* Waits (up to 60 s) for key in the store: another rank's or thread's step
 * done.  0 once it is there, else the store's error. */
static inline int await_key(mori_store *s, const char *key) {
  void *v = NULL;
  size_t len = 0;
  int rc = s->get(s, key, &v, &len, 60000);
  free(v);
  return rc;
}

#endif
