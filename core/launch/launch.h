/*
 * launch.h - runs one function as N forked ranks sharing a file store, with
 * a deadline: what the demo, the multi-process tests and the fault sweeps
 * all need.  A rank that hangs past the deadline is killed and reported as a
 * hang, never waited for.
 */
#ifndef MORI_LAUNCH_H
#define MORI_LAUNCH_H

#include <stddef.h>

#include "mori/store.h"

typedef struct mori_rank_ctx {
  int rank, world;
  mori_store *store;
  const char *store_dir;
  void *arg;
} mori_rank_ctx;

/* Returns 0 on success; msg (one line) goes back to the parent. */
typedef int (*mori_rank_fn)(const mori_rank_ctx *ctx, char *msg, size_t msglen);

typedef struct mori_rank_result {
  int exited;      /* 1 if the process exited by itself */
  int exit_code;   /* its exit status (0: fn returned 0) */
  int signal;      /* the signal that killed it, 0 if none */
  int hung;        /* killed by the launcher at the deadline */
  double wall_ms;
  char msg[1024];
} mori_rank_result;

/* Forks world ranks running fn, each with its own file store handle on one
 * fresh temporary directory ($TMPDIR, else /dev/shm, else /tmp) carrying
 * this launch's incarnation; waits up to deadline_ms for all.  results has
 * world entries.  Returns the number of ranks that did not succeed. */
int mori_launch(int world, mori_rank_fn fn, void *arg, int deadline_ms,
                mori_rank_result *results);

/* The same over an existing store directory, which is kept afterwards (a
 * store that outlives a run: reruns, leftovers of killed ranks).  Sockets
 * go under <dir>/sockets. */
int mori_launch_at(const char *dir, int world, mori_rank_fn fn, void *arg, int deadline_ms,
                   mori_rank_result *results);

/* Number of open fds of this process (for leak checks). */
int mori_count_fds(void);

#endif
