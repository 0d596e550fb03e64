/*
 * rank_check.h - the check of a rank function (mori_rank_fn): on failure
 * it writes "rank R line L: <why>" into the rank's message and returns 1,
 * which the launcher reports for that rank.  Needs ctx, msg and msglen in
 * scope.
 */
#ifndef MORI_RANK_CHECK_H
#define MORI_RANK_CHECK_H

#include <stdio.h>

#define CHECK(cond, ...)                                                             \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      int n_ = snprintf(msg, msglen, "rank %d line %d: ", ctx->rank, __LINE__);      \
      snprintf(msg + n_, msglen - (size_t)n_, __VA_ARGS__);                          \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

#endif
