/*
 * sec_harness.h - what the security tests share: running code as another
 * user, scratch directories that tests may chown and chmod, ranks launched
 * over a store that outlives the launch, and a store decorator that plays a
 * rank's store operations (kill the rank at its k-th one, rewrite what it
 * reads, fill the filesystem after a publication).
 */
#ifndef MORI_SEC_HARNESS_H
#define MORI_SEC_HARNESS_H

#include "mori_cmocka.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "launch.h"
#include "mori/store.h"
#include "mori/symm.h"
#include "mori/wire.h"

/* Unprivileged uids with no passwd entry: root can become them without
 * useradd, and nothing on the host belongs to them. */
enum { SEC_OTHER_UID = 64011, SEC_THIRD_UID = 64012 };

int sec_is_root(void);
/* Skips the case (reported to ctest as a skip, never a pass) unless root. */
#define SEC_NEED_ROOT(why)                                                  \
  do {                                                                      \
    if (!sec_is_root()) {                                                   \
      print_message("[  SKIP    ] needs root (%s); this process is uid %u\n", \
                    (why), (unsigned)geteuid());                            \
      skip();                                                               \
    }                                                                       \
  } while (0)

/* A fresh 0700 directory under /tmp (malloc'd), and its removal. */
char *sec_tmpdir(const char *tag);
void sec_remove_tree(const char *dir);

/* The first fields of every case's fixture: a scratch directory, and the
 * case's initial state (CMUnitTest.initial_state). */
typedef struct sec_fixture {
  char *dir;
  const void *arg;
} sec_fixture;
/* cmocka setup and teardown of a fixture of size bytes that starts with a
 * sec_fixture; the directory is named after tag. */
int sec_fixture_setup(void **state, size_t size, const char *tag);
int sec_fixture_teardown(void **state);
/* Entries in dir, "." and ".." aside (-1 if it cannot be read). */
int sec_count_entries(const char *dir);

/* In a forked child: drops to uid (gid = uid, no supplementary groups);
 * exits 120 if it cannot. */
void sec_drop_to(uid_t uid);

/* Forks; the child drops to uid (and gid = uid, no supplementary groups)
 * when uid differs from ours, runs fn and exits with its return value.
 * Returns that exit status, or 128 + the signal that ended the child. */
int sec_run_as(uid_t uid, int (*fn)(void *arg), void *arg);

/* Runs fn in a child with an alarm of alarm_s seconds and an address-space
 * limit of as_mib MiB (0: none); returns as sec_run_as (SIGALRM: 128 + 14).
 * What would hang or balloon does so in the child only. */
int sec_run_bounded(int (*fn)(void *arg), void *arg, int alarm_s, size_t as_mib);

/* Sets RLIMIT_NOFILE so that exactly spare more fds can be opened. */
void sec_limit_fds(size_t spare);

/* ---- ranks over a store that outlives a run ---- */

/* How one rank of sec_rank_rendezvous behaves. */
typedef struct sec_rank_plan {
  size_t size;           /* bytes to allocate (0: 1 MiB) */
  int kill_at_op;        /* SIGKILL at this store operation (1-based; 0: never) */
  const char *kill_at_key; /* SIGKILL at the first operation on a key containing this */
  char kill_on;          /* ... of this kind: 's' set (the default), 'g' get */
  int delay_first_op_ms; /* sleep before the first store operation */
  /* Called with every value a get returns; may replace it (malloc'd). */
  void (*rewrite)(const char *key, void **value, size_t *len, void *ctx);
  void *rewrite_ctx;
  /* Called after every set that succeeded. */
  void (*after_set)(const char *key, void *ctx);
  void *after_set_ctx;
  /* Called before every store operation ('s' set, 'g' get, 'a' add). */
  void (*before_op)(const char *key, char kind, void *ctx);
  void *before_op_ctx;
  size_t nofile_headroom; /* > 0: RLIMIT_NOFILE leaves this - 1 fds to open in rendezvous */
  const char *secret;     /* written at the start of the buffer before rendezvous */
  const char *socket_dir; /* MORI_SYMM_SOCKET_DIR of this rank (NULL: the launcher's) */
  int timeout_ms;         /* this rank's rendezvous timeout (0: the plan's) */
} sec_rank_plan;

typedef struct sec_plan {
  int timeout_ms;         /* rendezvous timeout (0: 400) */
  int deadline_ms;        /* the launch's, past which a rank is a hang (0: 20 timeouts + 10 s) */
  int in_band;            /* hide the launcher's incarnation: ranks agree one in-band */
  /* MORI_SYMM_JOB_SECRET of every rank; NULL: none, so that a case plays
   * the store's defences without a job secret (the launcher's is unset) */
  const char *job_secret;
  sec_rank_plan rank[4];
} sec_plan;

/* A mori_rank_fn: alloc, rendezvous over group "g" through the decorated
 * store, write into every peer's slot and read the own slot back, barrier,
 * free, release everything.  Its line: "rc=.. rdv=.. ops=.. fds=..
 * leaks=.. bad=.. err=..." (rdv: what rendezvous itself returned). */
int sec_rank_rendezvous(const mori_rank_ctx *ctx, char *msg, size_t msglen);

/* mori_launch_at(dir, ...) of sec_rank_rendezvous with plan; fails the test
 * if a rank hung (it must fail within its timeout instead) or died of a
 * signal other than SIGKILL. */
void sec_launch(const char *dir, int world, const sec_plan *plan, mori_rank_result *res);

/* A second client of the store in dir (malloc'd by the library; destroy
 * it), as another process writing into the job's store would be. */
mori_store *sec_store_client(const char *dir);
/* key with its last two components replaced by what/rank
 * ("mori_symm/g/<id>/0/req/1" -> ".../abort/0"); out has cap bytes. */
void sec_key_sibling(const char *key, const char *what, int rank, char *out, size_t cap);

/* The value of " key=" in a rank's line (-1 if absent), and its error. */
long sec_num(const char *line, const char *key);
const char *sec_err(const char *line);

#endif
