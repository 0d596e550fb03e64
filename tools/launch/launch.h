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
  const char *incarnation; /* this launch's id (the store's incarnation) */
  /* Which process of this rank this is: 0 for the first, n for its n-th
   * restart (mori_launch_with, max_restarts), which runs with
   * MORI_SYMM_REPLACEMENT=1 in its environment. */
  int life;
} mori_rank_ctx;

/* Returns 0 on success; msg (one line) goes back to the parent. */
typedef int (*mori_rank_fn)(const mori_rank_ctx *ctx, char *msg, size_t msglen);

typedef struct mori_rank_result {
  int pid;         /* the rank's process */
  int exited;      /* 1 if the process exited by itself */
  int exit_code;   /* its exit status (0: fn returned 0) */
  int signal;      /* the signal that killed it, 0 if none */
  int hung;        /* killed by the launcher: its progress stood still, or the deadline */
  double wall_ms;
  char msg[1024];
  int restarts;    /* processes started in place of this rank's dead ones; the
                    * fields above are its last life's */
} mori_rank_result;

/* Forks world ranks running fn, each with its own file store handle on one
 * fresh temporary directory ($TMPDIR, else /dev/shm, else /tmp) carrying
 * this launch's incarnation; waits up to deadline_ms for all.  results has
 * world entries.  Returns the number of ranks that did not succeed.
 * A rank that dies while others still run (a signal, a failing exit, a
 * hang the watch ended) is told of in the store at once, so that the
 * survivors' rendezvous waits for it end with MORI_EPEER naming it
 * (mori/store.h, MORI_STORE_DEATH_GROUP).
 * SIGINT or SIGTERM during a launch goes on to the ranks; once they are
 * gone and the directory removed, the caller gets it (docs/security.md). */
int mori_launch(int world, mori_rank_fn fn, void *arg, int deadline_ms,
                mori_rank_result *results);

/* The same over an existing store directory, which is kept afterwards (a
 * store that outlives a run: reruns, leftovers of killed ranks), without
 * the launch's notices of dead ranks.  Sockets go under <dir>/sockets. */
int mori_launch_at(const char *dir, int world, mori_rank_fn fn, void *arg, int deadline_ms,
                   mori_rank_result *results);

/* How mori_launch_watched tells a hung rank from a slow one: by progress,
 * not by a guess of how long the work takes on a loaded machine. */
typedef struct mori_launch_watch {
  /* A count that moves whenever the rank does work (the fault shim counts
   * every call of the seam); -1 when unknown.  NULL: no progress watch. */
  long (*progress)(int rank, void *ctx);
  void *ctx;
  /* A rank whose count stood still this long is hung and killed. */
  int stall_ms;
  /* Called once every rank is gone, before the launch directory is
   * removed: a check of what the ranks left behind.  May be NULL. */
  void (*inspect)(const char *dir, const mori_rank_result *results, int world, void *ctx);
  /* 1: ctx->store is NULL and the rank opens the store over
   * ctx->store_dir itself (with ctx->incarnation), so that a failure there is the rank's to
   * report (fault sweeps fail the store's calls too). */
  int store_in_rank;
  /* The clock stall_ms is measured on, in ms, read as each rank is looked
   * at; NULL: the monotonic clock.  A test gives a clock of its own (one
   * that moves with the launcher's looks) to tell a stuck rank from a
   * slow one without waiting out either. */
  double (*clock_ms)(void *ctx);
} mori_launch_watch;

/* mori_launch, with deadline_ms only as the last resort against a rank
 * that keeps making progress forever. */
int mori_launch_watched(int world, mori_rank_fn fn, void *arg, int deadline_ms,
                        const mori_launch_watch *watch, mori_rank_result *results);

/* What a launch may do besides mori_launch's: everything 0 or NULL is
 * mori_launch itself. */
typedef struct mori_launch_opts {
  int deadline_ms;
  const mori_launch_watch *watch; /* NULL: none (mori_launch_watched) */
  /* Up to this many times in the launch, a rank that dies while others
   * still run (a signal, a failing exit, a hang the watch ended) is
   * started again: after its death notice is in the store, a new process
   * runs fn for the same rank, with ctx->life one more and
   * MORI_SYMM_REPLACEMENT=1, so that it can take the dead one's place in
   * a heal (mori_window_heal, docs/recovery.md).  Never once the launch is
   * being torn down (SIGINT or SIGTERM sent on) or past the deadline.
   * 0: no restarts. */
  int max_restarts;
} mori_launch_opts;

/* mori_launch_watched with restarts: the launch opts says (not NULL). */
int mori_launch_with(int world, mori_rank_fn fn, void *arg, const mori_launch_opts *opts,
                     mori_rank_result *results);

/* Number of open fds of this process (for leak checks). */
int mori_count_fds(void);

#endif
