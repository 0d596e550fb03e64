/*
 * launch.c - fork N ranks, collect one line from each through a pipe, kill
 * what outlives the deadline.  The launch directory is made under a TMPDIR
 * no other user can change, held by its fd from the moment it exists, and
 * removed through that fd afterwards: nothing is ever reached by a path
 * that could have been swapped, and no symlink is followed.
 */
#include "launch.h"

#include "mori/error.h"
#include "mori/hip_shim.h"
#include "mori/symm.h"
#include "mori/trust.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int mori_count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (d == NULL) return -1;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the directory's own fd */
}

/* ---- the launch directory ---- */

/* Directories nested deeper than this in a launch directory are left: the
 * ranks make two levels (sockets/, a channel's directory). */
#define REMOVE_DEPTH_MAX 8

/* Everything in the directory dir, depth first and through fds only: a
 * subdirectory is opened O_NOFOLLOW relative to its parent and emptied,
 * anything else (a symlink too) is unlinked, never followed.  Passes
 * repeat while one removed something, since a directory read while its
 * entries go may skip some. */
static void empty_dir(int dir, int depth) {
  for (int removed = 1, passes = 0; removed && passes < 4; passes++) {
    int fd = fcntl(dir, F_DUPFD_CLOEXEC, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
      if (fd >= 0) close(fd);
      return;
    }
    rewinddir(d); /* the dup shares the offset of an fd read before */
    removed = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
      struct stat st;
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
          fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        continue;
      if (S_ISDIR(st.st_mode) && depth < REMOVE_DEPTH_MAX) {
        int sub = openat(dir, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0) {
          empty_dir(sub, depth + 1);
          close(sub);
        }
      }
      removed |= unlinkat(dir, e->d_name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) == 0;
    }
    closedir(d);
  }
}

/* What the launcher made: the directory, held by fd from its mkdir on. */
typedef struct launch_dir {
  int parent;        /* TMPDIR, trusted; -1 for a directory the caller gave */
  int fd;            /* the launch directory */
  char name[32];     /* its name in parent */
  char path[96];     /* what the ranks are told (they check it again) */
} launch_dir;

/* A fresh directory of ours, 0700, under the trusted directory tmp; its
 * fd is taken right after the mkdir and checked to be what mkdir made.
 * 0, or -1 with why filled. */
static int launch_dir_make(const char *tmp, launch_dir *d, char *why, size_t cap) {
  d->parent = d->fd = -1;
  if (mori_trusted_dir_open(tmp, MORI_TRUST_SHARED, "launcher: TMPDIR", &d->parent) != 0) {
    snprintf(why, cap, "%s", mori_last_error());
    return -1;
  }
  for (int tries = 0; d->fd < 0 && tries < 8; tries++) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) break;
    snprintf(d->name, sizeof d->name, "mori-launch-%012llx", (unsigned long long)(r >> 16));
    if (snprintf(d->path, sizeof d->path, "%s/%s", tmp, d->name) >= (int)sizeof d->path) {
      snprintf(why, cap, "launcher: TMPDIR %s is too long", tmp);
      return -1;
    }
    if (mkdirat(d->parent, d->name, 0700) != 0) {
      if (errno == EEXIST) continue;
      snprintf(why, cap, "launcher: mkdir(%s): %s", d->path, strerror(errno));
      return -1;
    }
    d->fd = openat(d->parent, d->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (d->fd < 0 || fstat(d->fd, &st) != 0) {
      /* made but not held: removed by its name, which takes only an empty
       * directory (AT_REMOVEDIR follows no link), in a TMPDIR only this
       * user or root can change */
      snprintf(why, cap, "launcher: %s(%s): %s", d->fd < 0 ? "openat" : "fstat", d->path,
               strerror(errno));
      (void)unlinkat(d->parent, d->name, AT_REMOVEDIR);
      return -1;
    }
    if (st.st_uid != geteuid() || fchmod(d->fd, 0700) != 0) {
      snprintf(why, cap, "launcher: %s is not the directory it made", d->path);
      return -1;
    }
  }
  if (d->fd < 0) snprintf(why, cap, "launcher: no fresh name under %s", tmp);
  return d->fd < 0 ? -1 : 0;
}

/* Empties the launch directory through its fd, and removes it from its
 * parent only while its name is still the directory held: a name swapped
 * meanwhile (for a symlink, say) is not the launcher's. */
static void launch_dir_remove(launch_dir *d) {
  struct stat held, named;
  if (d->fd >= 0) empty_dir(d->fd, 0);
  if (d->fd >= 0 && d->parent >= 0 && fstat(d->fd, &held) == 0 &&
      fstatat(d->parent, d->name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
      named.st_dev == held.st_dev && named.st_ino == held.st_ino)
    (void)unlinkat(d->parent, d->name, AT_REMOVEDIR);
  if (d->fd >= 0) close(d->fd);
  if (d->parent >= 0) close(d->parent);
  d->fd = d->parent = -1;
}

/* The job's secret (docs/security.md): 256 bits from the kernel through
 * the seam, as 64 hex digits, which every rank of this launch reads from
 * MORI_SYMM_JOB_SECRET and which never reaches the store.  "" where this
 * build cannot seal (no libcrypto).  0, or -1 with why filled. */
static int draw_secret(char out[65], char *why, size_t cap) {
  uint8_t bytes[32];
  out[0] = '\0';
#ifdef MORI_SYMM_HAVE_LIBCRYPTO
  for (size_t got = 0; got < sizeof bytes;) {
    ssize_t n = mori_getrandom(bytes + got, sizeof bytes - got, 0);
    if (n <= 0 && errno == EINTR) continue;
    if (n <= 0) {
      snprintf(why, cap, "launcher: getrandom (the job secret): %s",
               n < 0 ? strerror(errno) : "no bytes");
      return -1;
    }
    got += (size_t)n;
  }
  for (size_t i = 0; i < sizeof bytes; i++) snprintf(out + 2 * i, 3, "%02x", bytes[i]);
#else
  (void)bytes;
  (void)why;
  (void)cap;
#endif
  return 0;
}

static void run_child(int rank, int world, int life, mori_rank_fn fn, void *arg,
                      const char *dir, const char *incarnation, const char *secret, int wfd,
                      int store_in_rank) {
  char msg[1024] = "", rank_text[16];
  mori_store *store = NULL;
  snprintf(rank_text, sizeof rank_text, "%d", rank);
  setenv("MORI_RANK", rank_text, 1); /* the fault shim reads its rank here */
  /* A restarted rank takes its dead predecessor's place (mori_window_heal);
   * the fault shim fires its rules in a rank's first life only. */
  if (life > 0) setenv("MORI_SYMM_REPLACEMENT", "1", 1);
  char lives[16];
  snprintf(lives, sizeof lives, "%d", life);
  setenv("MORI_LAUNCH_LIFE", lives, 1); /* the fault shim's life=N */
  /* Sockets under the launch directory, which is removed whatever happens
   * to the rank (a rank that dies cannot remove its own). */
  char sockets[4096];
  snprintf(sockets, sizeof sockets, "%s/sockets", dir);
  setenv("MORI_SYMM_SOCKET_DIR", sockets, 1);
  if (secret[0]) setenv("MORI_SYMM_JOB_SECRET", secret, 1); /* this launch's: the job's */
  int rc = store_in_rank ? 0 : mori_file_store_open(dir, &store);
  if (rc != 0) {
    snprintf(msg, sizeof msg, "file store %s: error %d", dir, rc);
  } else {
    if (store) store->incarnation = incarnation; /* this launch's, fresh: no in-band agreement */
    mori_rank_ctx ctx = {rank, world, store, dir, arg, incarnation, life};
    rc = fn(&ctx, msg, sizeof msg);
    if (store) store->destroy(store);
  }
  size_t n = strnlen(msg, sizeof msg - 1);
  msg[n] = '\n';
  ssize_t w = write(wfd, msg, n + 1);
  (void)w;
  /* wfd stays open: the parent sees EOF only when this process is gone,
   * after the atexit teardown, so a hang there is still a hang. */
  fflush(NULL);
  exit(rc == 0 ? 0 : 1);
}

/* Kills rank r now if its progress stood still for the watch's stall_ms. */
static void watch_rank(const mori_launch_watch *w, int r, pid_t pid, long *last, double *moved,
                       double now, mori_rank_result *res) {
  long p = w->progress(r, w->ctx);
  if (p < 0 || p != last[r]) {
    last[r] = p;
    moved[r] = now;
    return;
  }
  if (now - moved[r] < w->stall_ms || res->hung) return;
  kill(pid, SIGKILL); /* its pipe reaches EOF; the wait below sees the kill */
  res->hung = 1;
}

/* ---- signals: SIGINT and SIGTERM go on to the ranks ---- */

/* A launch holds SIGINT and SIGTERM from its start to its end.  One that
 * comes (Ctrl-C, kill -TERM) is sent on to every rank still running, the
 * ranks are waited for (SIGKILL for any still there FORWARD_GRACE_MS
 * later), the launch directory is removed, and only then does the launcher
 * get the signal, under the disposition it had before the launch: a shell
 * sees it die of the signal, and nothing of the run is left.  A signal
 * ignored before the launch stays ignored.  Ranks start with the
 * dispositions from before, and die with the launcher should it be killed
 * outright (PR_SET_PDEATHSIG).  One launch at a time per process. */
#define FORWARD_GRACE_MS 2000

static const int held_signals[] = {SIGINT, SIGTERM};
enum { HELD_SIGNALS = sizeof held_signals / sizeof held_signals[0] };
static struct sigaction signals_before[HELD_SIGNALS];
static volatile sig_atomic_t signal_caught; /* the signal held, 0: none */

static void on_held_signal(int sig) { signal_caught = sig; }

static void signals_hold(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_held_signal;
  sa.sa_flags = SA_RESTART; /* waitpid goes on; poll returns EINTR, and looks */
  sigemptyset(&sa.sa_mask);
  signal_caught = 0;
  for (int i = 0; i < HELD_SIGNALS; i++) {
    sigaction(held_signals[i], NULL, &signals_before[i]);
    if (signals_before[i].sa_handler != SIG_IGN) sigaction(held_signals[i], &sa, NULL);
  }
}

static void signals_restore(void) {
  for (int i = 0; i < HELD_SIGNALS; i++) sigaction(held_signals[i], &signals_before[i], NULL);
}

/* At the launch's end, once nothing of it is left: the dispositions from
 * before, and the signal that came meanwhile, delivered under them. */
static void signals_release(void) {
  int sig = signal_caught;
  signal_caught = 0;
  signals_restore();
  if (sig) raise(sig);
}

/* In a rank, first thing: the launcher's dispositions from before, and
 * death with the launcher (checked after the prctl: it may be gone). */
static void rank_signals(pid_t launcher) {
  signals_restore();
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher) _exit(1);
}

/* Sends a held signal on to the ranks still running, once; 1 when the
 * grace after it is over and the launch stops waiting. */
static int forward_signal(const pid_t *pids, const struct pollfd *pfd, int world,
                          double *forwarded_at) {
  int sig = signal_caught;
  if (sig == 0) return 0;
  if (*forwarded_at < 0) {
    *forwarded_at = now_ms();
    for (int r = 0; r < world; r++)
      if (pids[r] > 0 && pfd[r].fd >= 0) kill(pids[r], sig);
  }
  return now_ms() - *forwarded_at > FORWARD_GRACE_MS;
}

/* ---- deaths: the ranks still running are told at once ---- */

/* A rank that dies while others still run (a signal, a failing exit, a
 * hang the watch ended) is told of in the job's store the moment it is
 * reaped, so that every rendezvous wait for it ends now with MORI_EPEER
 * rather than at its timeout (mori/store.h, MORI_STORE_DEATH_GROUP).  The
 * notice is the abort of the death's group, published with the core's
 * public mori_symm_rendezvous_abort, which seals it with the job's secret
 * like every other entry: the launcher links only the public API and
 * keeps the secret out of its own environment, so a child of its own,
 * given the secret as a rank is, writes it and exits.  Best effort: a
 * notice not written leaves the survivors to their timeout, as before.
 * Whatever it finds in the store, a notice can only end a wait: it is no
 * request, so nothing is imported on its word, and without this job's
 * seal it is refused (MORI_EAUTH naming its key). */
#define NOTICE_GRACE_MS 2000 /* a notice still being written at the end */

typedef struct job {
  const char *dir, *incarnation, *secret;
  int world;
  pid_t launcher;
  const struct pollfd *pfd; /* the ranks' pipes, and the directory fds: */
  const int *held;          /* nothing a notice's child keeps */
  pid_t *notices;           /* per rank: the child writing its notice; 0: none */
  char *told;               /* per rank: a notice of its death was written */
} job;

/* The launcher's words on rank r's end (status st), or 0 for a clean one. */
static int death_words(int st, int hung, char *out, size_t cap) {
  if (hung)
    snprintf(out, cap, "hung (its progress stood still) and was killed");
  else if (WIFSIGNALED(st))
    snprintf(out, cap, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
    snprintf(out, cap, "exited with status %d", WEXITSTATUS(st));
  else
    return 0;
  return 1;
}

/* In the notice's child: the death's own group, then the job's mark. */
static void notice_child(const job *j, int r, const char *words) {
  char group[64];
  mori_store *store = NULL;
  rank_signals(j->launcher);
  for (int k = 0; k < j->world; k++) if (j->pfd[k].fd >= 0) close(j->pfd[k].fd);
  for (int k = 0; k < 2; k++) if (j->held[k] >= 0) close(j->held[k]);
  if (j->secret[0]) setenv("MORI_SYMM_JOB_SECRET", j->secret, 1);
  int rc = mori_file_store_open(j->dir, &store);
  if (rc == 0) {
    store->incarnation = j->incarnation;
    snprintf(group, sizeof group, MORI_STORE_DEATH_GROUP "/%d/%d", j->world, r);
    rc = mori_symm_rendezvous_abort(group, 0, 1, store, words);
    snprintf(group, sizeof group, MORI_STORE_DEATH_GROUP "/%d", j->world);
    if (rc == 0) rc = mori_symm_rendezvous_abort(group, 0, 1, store, words);
    store->destroy(store);
  }
  _exit(rc == 0 ? 0 : 1); /* no exit hooks: they are the launcher's */
}

static void tell_death(const job *j, int r, int st, int hung) {
  char words[128];
  if (j->world < 2 || j->notices[r] != 0 || !death_words(st, hung, words, sizeof words)) return;
  pid_t pid = fork();
  if (pid == 0) notice_child(j, r, words);
  j->notices[r] = pid > 0 ? pid : -1;
  j->told[r] |= pid > 0;
}

/* Reaps rank r's notice child, killed if it outlives the grace; 1 if it
 * wrote the notice.  Rank r may then die, and be told of, again. */
static int notice_wait(const job *j, int r) {
  int st = 0, done = 0;
  double t0 = now_ms();
  if (j->notices[r] <= 0) return 0;
  while (!(done = waitpid(j->notices[r], &st, WNOHANG) != 0) && now_ms() - t0 < NOTICE_GRACE_MS)
    (void)poll(NULL, 0, 1);
  if (!done) {
    kill(j->notices[r], SIGKILL);
    (void)waitpid(j->notices[r], &st, 0);
  }
  j->notices[r] = 0;
  return done && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* At the end: each notice's child reaped, killed if it outlives the grace
 * (its rank's peers are gone: nobody reads it any more). */
static void notices_reap(const job *j) {
  double t0 = now_ms();
  for (int r = 0; r < j->world; r++) {
    int st;
    if (j->notices[r] <= 0) continue;
    while (waitpid(j->notices[r], &st, WNOHANG) == 0) {
      if (now_ms() - t0 < NOTICE_GRACE_MS) {
        (void)poll(NULL, 0, 1);
        continue;
      }
      kill(j->notices[r], SIGKILL);
      (void)waitpid(j->notices[r], &st, 0);
      break;
    }
  }
}

/* ---- a launch: its tables, its ranks' processes, the loop ---- */

/* A launch under way: what it was asked, and per rank its process, its
 * pipe and what the loop knows of it. */
typedef struct launch {
  job j;
  mori_rank_fn fn;
  void *arg;
  const mori_launch_opts *opts;
  mori_rank_result *results;
  pid_t *pids;
  struct pollfd *pfd;
  size_t *got;    /* bytes of its line read */
  long *last;     /* the watch's progress count, */
  double *moved;  /* and when it last moved */
  int *status;    /* of a rank reaped in the loop */
  char *reaped;
  int *lives;     /* its processes started so far, less one */
  int restarts_left;
  double t0;
} launch;

static void tables_free(launch *L) {
  free(L->pids), free(L->pfd), free(L->got), free(L->last), free(L->moved), free(L->status);
  free(L->reaped), free(L->j.notices), free(L->j.told), free(L->lives);
}

static int tables_alloc(launch *L, int world) {
  size_t n = (size_t)world;
  L->pids = calloc(n, sizeof *L->pids);
  L->pfd = calloc(n, sizeof *L->pfd);
  L->got = calloc(n, sizeof *L->got);
  L->last = calloc(n, sizeof *L->last);
  L->moved = calloc(n, sizeof *L->moved);
  L->status = calloc(n, sizeof *L->status);
  L->reaped = calloc(n, 1);
  L->j.notices = calloc(n, sizeof *L->j.notices);
  L->j.told = calloc(n, 1);
  L->lives = calloc(n, sizeof *L->lives);
  L->j.pfd = L->pfd;
  if (!L->pids || !L->pfd || !L->got || !L->last || !L->moved || !L->status || !L->reaped ||
      !L->j.notices || !L->j.told || !L->lives)
    return -1;
  for (int r = 0; r < world; r++) L->pfd[r].fd = -1; /* no rank closes an fd it never had */
  return 0;
}

/* In a rank: its launcher's results array (see spawn). */
static mori_rank_result *volatile child_results; /* volatile: the store must happen */

/* Starts rank r's process of life L->lives[r] with a fresh pipe; 0, or -1
 * where no pipe or no fork could be had (nothing changed then). */
static int spawn(launch *L, int r) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid == 0) {
    const job *j = &L->j;
    int life = L->lives[r];
    rank_signals(j->launcher);
    close(p[0]);
    for (int k = 0; k < j->world; k++) if (L->pfd[k].fd >= 0) close(L->pfd[k].fd);
    for (int k = 0; k < 2; k++) if (j->held[k] >= 0) close(j->held[k]);
    /* The launcher's tables are the parent's: a rank that exits holding
     * them would leak them (valgrind's children count).  run_child never
     * returns, so the caller's pointer to results dies at the call too:
     * it is kept reachable here. */
    tables_free(L);
    child_results = L->results;
    run_child(r, j->world, life, L->fn, L->arg, j->dir, j->incarnation, j->secret, p[1],
              L->opts->watch && L->opts->watch->store_in_rank);
  }
  close(p[1]);
  L->pids[r] = pid;
  L->pfd[r].fd = p[0];
  L->pfd[r].events = POLLIN;
  L->got[r] = 0;
  L->last[r] = -1;
  L->reaped[r] = 0;
  L->results[r].pid = (int)pid;
  return 0;
}

/* Whether rank r, just reaped, is started again: it died (death_words)
 * while others still run (tell), restarts are left, no signal is being
 * sent on and the deadline is not past. */
static int may_restart(const launch *L, int r, int tell) {
  char words[128];
  return tell && L->restarts_left > 0 && signal_caught == 0 &&
         now_ms() - L->t0 < L->opts->deadline_ms &&
         death_words(L->status[r], L->results[r].hung, words, sizeof words);
}

/* Rank r again, in a new process, once the notice of its death is in the
 * store: the heal the restart serves removes that notice, and one written
 * after it would fail the healed group's waits.  Its result is its new
 * life's (restarts counted); 1 if it runs. */
static int restart(launch *L, int r) {
  mori_rank_result was = L->results[r];
  (void)notice_wait(&L->j, r);
  L->lives[r]++;
  memset(&L->results[r], 0, sizeof L->results[r]);
  if (spawn(L, r) != 0) { /* the death stands */
    L->lives[r]--;
    L->results[r] = was;
    return 0;
  }
  L->results[r].restarts = was.restarts + 1;
  L->restarts_left--;
  return 1;
}

/* Reaps each rank whose pipe closed, as soon as it can be, tells of a
 * death while tell is set (ranks still run, no signal is being sent on),
 * and starts a dead rank again where it may (*open counts it again).
 * Returns how many such ranks are not reapable yet. */
static int reap_closed(launch *L, int *open, int tell) {
  int unreaped = 0;
  for (int r = 0; r < L->j.world; r++) {
    if (L->pfd[r].fd >= 0 || L->reaped[r] || L->pids[r] <= 0) continue;
    pid_t w = waitpid(L->pids[r], &L->status[r], WNOHANG);
    if (w == 0) {
      unreaped++;
      continue;
    }
    if (w < 0) L->status[r] = 0; /* not ours to reap (SIGCHLD ignored): a clean end, as below */
    L->reaped[r] = 1;
    if (tell) tell_death(&L->j, r, L->status[r], L->results[r].hung);
    if (may_restart(L, r, tell) && restart(L, r)) ++*open;
  }
  return unreaped;
}

/* In a directory the caller keeps (mori_launch_at), the notices go with
 * the launch that wrote them, once its ranks are gone: each is the abort
 * entry of its group's rendezvous 0 under this launch's incarnation
 * (mori/store.h).  A launch's own directory goes whole. */
static void notices_remove(const job *j) {
  char key[MORI_STORE_KEY_MAX + 1];
  mori_store *store = NULL;
  int told = 0;
  for (int r = 0; r < j->world; r++) told |= j->told[r];
  if (!told || mori_file_store_open(j->dir, &store) != 0) return;
  for (int r = -1; r < j->world; r++) {
    if (r >= 0 && !j->told[r]) continue;
    if (r < 0)
      snprintf(key, sizeof key, "mori_symm/" MORI_STORE_DEATH_GROUP "/%d/%s/0/abort/0", j->world,
               j->incarnation);
    else
      snprintf(key, sizeof key, "mori_symm/" MORI_STORE_DEATH_GROUP "/%d/%d/%s/0/abort/0",
               j->world, r, j->incarnation);
    (void)store->remove(store, key);
  }
  store->destroy(store);
}

static int launch_in(const int held[2], const char *dir, int world, mori_rank_fn fn, void *arg,
                     const mori_launch_opts *opts, mori_rank_result *results);

/* A launch that could not start: every rank's result says why (nothing
 * was forked).  Returns world, the count of failed ranks. */
static int fail_all(mori_rank_result *results, int world, const char *why) {
  memset(results, 0, (size_t)world * sizeof *results);
  for (int r = 0; r < world; r++) {
    results[r].exit_code = 127; /* a failure to whoever reads only the results */
    snprintf(results[r].msg, sizeof results[r].msg, "rank %d: %s", r, why);
  }
  return world;
}

int mori_launch_with(int world, mori_rank_fn fn, void *arg, const mori_launch_opts *opts,
                     mori_rank_result *results) {
  if (opts == NULL) return fail_all(results, world, "launcher: no options (mori_launch_with)");
  /* Under $TMPDIR if set, else on the shared-memory tmpfs where there is
   * one, else /tmp: every rendezvous creates and renames files and binds
   * sockets, which costs tens of microseconds each on ext4 and a few on a
   * tmpfs (the fault sweeps' thousands of launches, the demo's timings). */
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
  launch_dir d;
  char why[sizeof results[0].msg - 16];
  signals_hold();
  if (launch_dir_make(tmp, &d, why, sizeof why) != 0) {
    launch_dir_remove(&d);
    signals_release();
    return fail_all(results, world, why);
  }
  (void)mkdirat(d.fd, "sockets", 0700);
  int held[2] = {d.fd, d.parent};
  int failed = launch_in(held, d.path, world, fn, arg, opts, results);
  const mori_launch_watch *watch = opts->watch;
  if (watch && watch->inspect) watch->inspect(d.path, results, world, watch->ctx);
  launch_dir_remove(&d);
  signals_release();
  return failed;
}

int mori_launch_watched(int world, mori_rank_fn fn, void *arg, int deadline_ms,
                        const mori_launch_watch *watch, mori_rank_result *results) {
  mori_launch_opts opts = {deadline_ms, watch, 0};
  return mori_launch_with(world, fn, arg, &opts, results);
}

int mori_launch(int world, mori_rank_fn fn, void *arg, int deadline_ms,
                mori_rank_result *results) {
  return mori_launch_watched(world, fn, arg, deadline_ms, NULL, results);
}

int mori_launch_at(const char *dir, int world, mori_rank_fn fn, void *arg, int deadline_ms,
                   mori_rank_result *results) {
  int fd = -1;
  if (mori_trusted_dir_open(dir, 0, "launcher", &fd) != 0)
    return fail_all(results, world, mori_last_error());
  (void)mkdirat(fd, "sockets", 0700);
  int held[2] = {fd, -1};
  mori_launch_opts opts = {deadline_ms, NULL, 0};
  signals_hold();
  int failed = launch_in(held, dir, world, fn, arg, &opts, results);
  close(fd);
  signals_release();
  return failed;
}

/* The ranks' pipes until every one closed or the deadline: each line
 * read, the watch's look at each rank, and the dead reaped (and told of,
 * and started again) as they go.  A rank whose pipe closed is reapable
 * within microseconds (an exiting process closes its fds just before it
 * becomes a zombie): it is looked at again after 1, 2, 4 ... 64 ms, then
 * at the usual 100 ms. */
static void run_loop(launch *L, int open) {
  const mori_launch_watch *watch = L->opts->watch;
  int world = L->j.world, watching = watch && watch->progress && watch->stall_ms > 0;
  mori_rank_result *results = L->results;
  double forwarded_at = -1;
  int rounds = 0; /* rounds with a closed rank not reapable yet */
  while (open > 0) {
    double left = L->opts->deadline_ms - (now_ms() - L->t0);
    if (left <= 0) break;
    int slice = rounds > 0 && rounds <= 7 ? 1 << (rounds - 1) : 100;
    int n = poll(L->pfd, (nfds_t)world, left > slice ? slice : (int)left + 1);
    if (n < 0 && errno != EINTR) break;
    if (forward_signal(L->pids, L->pfd, world, &forwarded_at)) break;
    for (int r = 0; r < world; r++) {
      if (L->pfd[r].fd < 0) continue;
      if (watching && L->pids[r] > 0) {
        int was_hung = results[r].hung;
        watch_rank(watch, r, L->pids[r], L->last, L->moved,
                   watch->clock_ms ? watch->clock_ms(watch->ctx) : now_ms() - L->t0, &results[r]);
        if (results[r].hung && !was_hung) results[r].wall_ms = now_ms() - L->t0;
      }
      if (!(L->pfd[r].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char *buf = results[r].msg;
      ssize_t k = read(L->pfd[r].fd, buf + L->got[r], sizeof results[r].msg - 1 - L->got[r]);
      if (k > 0) { L->got[r] += (size_t)k; continue; }
      close(L->pfd[r].fd);
      L->pfd[r].fd = -1;
      if (!results[r].hung) results[r].wall_ms = now_ms() - L->t0;
      open--;
      rounds = 0; /* a new one: looked at soon */
    }
    rounds = reap_closed(L, &open, open > 0 && forwarded_at < 0) ? rounds + 1 : 0;
  }
}

/* Each rank's end, in its result: reaped in the loop, waited for, or
 * killed as hung where its pipe is still open.  Returns how many failed. */
static int collect(launch *L) {
  int failed = 0;
  mori_rank_result *results = L->results;
  for (int r = 0; r < L->j.world; r++) {
    char *nl = strchr(results[r].msg, '\n');
    if (nl) *nl = '\0';
    int hung_pipe = L->pfd[r].fd >= 0;
    if (L->pfd[r].fd >= 0) close(L->pfd[r].fd);
    if (L->pids[r] <= 0) {
      failed++;
      results[r].exit_code = 127; /* a failure to whoever reads only the results */
      snprintf(results[r].msg, sizeof results[r].msg, "rank %d: fork failed", r);
      continue;
    }
    int st = L->status[r];
    pid_t w = L->reaped[r] ? L->pids[r] : hung_pipe ? 0 : waitpid(L->pids[r], &st, 0);
    if (w == 0) {
      kill(L->pids[r], SIGKILL);
      waitpid(L->pids[r], &st, 0);
      results[r].hung = 1;
      results[r].wall_ms = now_ms() - L->t0;
    } else if (WIFEXITED(st)) {
      results[r].exited = 1;
      results[r].exit_code = WEXITSTATUS(st);
    }
    if (!results[r].hung && WIFSIGNALED(st)) results[r].signal = WTERMSIG(st);
    if (results[r].hung || results[r].signal || results[r].exit_code) failed++;
  }
  return failed;
}

/* held: the launcher's directory fds, which no rank keeps (-1: none). */
static int launch_in(const int held[2], const char *dir, int world, mori_rank_fn fn, void *arg,
                     const mori_launch_opts *opts, mori_rank_result *results) {
  char incarnation[33];
  /* A store may outlive a launch (this one may be a rerun): every launch
   * hands its ranks an id of its own. */
  uint64_t id[2] = {0, 0};
  if (getrandom(id, sizeof id, 0) != (ssize_t)sizeof id)
    return fail_all(results, world, "launcher: getrandom failed");
  snprintf(incarnation, sizeof incarnation, "%016llx%016llx", (unsigned long long)id[0],
           (unsigned long long)id[1]);
  char secret[65], why[sizeof results[0].msg - 16];
  if (draw_secret(secret, why, sizeof why) != 0) return fail_all(results, world, why);
  launch L = {.j = {dir, incarnation, secret, world, getpid(), NULL, held, NULL, NULL},
              .fn = fn, .arg = arg, .opts = opts, .results = results,
              .restarts_left = opts->max_restarts};
  if (tables_alloc(&L, world) != 0) {
    tables_free(&L);
    return fail_all(results, world, "launcher: out of memory for its tables");
  }
  memset(results, 0, (size_t)world * sizeof *results);
  fflush(NULL);
  L.t0 = now_ms();
  int open = 0;
  for (int r = 0; r < world; r++) {
    if (spawn(&L, r) == 0) open++;
    else L.pids[r] = -1;
  }
  run_loop(&L, open);
  int failed = collect(&L);
  notices_reap(&L.j);
  if (held[1] < 0) notices_remove(&L.j); /* the caller's directory (mori_launch_at) */
  tables_free(&L);
  return failed;
}
