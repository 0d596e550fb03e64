/*
 * sweep.c - `mori-fi sweep`: SQLite's fault loop over a multi-process
 * scenario.  A first run counts every rank's calls of every function of the
 * seam (runtime, sockets, store I/O, allocation); then each call of each
 * rank is failed in turn (transient, persistent, or killed) with an error
 * that call can really return, each in a fresh run-scenario process
 * started with LD_PRELOAD and MORI_FI, and each run is judged with nothing
 * excused: see judge().
 */
#include "fi_tool.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mori/fi.h"
#include "mori/symm.h"

extern char **environ;

enum { MODE_TRANSIENT = 1, MODE_PERSISTENT = 2, MODE_KILL = 4 };
static const struct {
  const char *name;
  int bit;
} modes[] = {{"transient", MODE_TRANSIENT}, {"persistent", MODE_PERSISTENT}, {"kill", MODE_KILL}};

/* The classes of call sites a sweep can choose from (--classes). */
enum { CLASS_GPU, CLASS_SOCKET, CLASS_STORE, CLASS_ALLOC, CLASS_TIME, CLASS__COUNT };
static const char *const class_names[CLASS__COUNT] = {"gpu", "socket", "store", "alloc", "time"};
static const struct {
  int call, cls;
} os_classes[] = {
    {MORI_FI_CALL_socket, CLASS_SOCKET},   {MORI_FI_CALL_bind, CLASS_SOCKET},
    {MORI_FI_CALL_connect, CLASS_SOCKET},  {MORI_FI_CALL_setsockopt, CLASS_SOCKET},
    {MORI_FI_CALL_poll, CLASS_SOCKET},     {MORI_FI_CALL_sendmsg, CLASS_SOCKET},
    {MORI_FI_CALL_recvmsg, CLASS_SOCKET},  {MORI_FI_CALL_close, CLASS_SOCKET},
    {MORI_FI_CALL_openat, CLASS_STORE},    {MORI_FI_CALL_read, CLASS_STORE},
    {MORI_FI_CALL_write, CLASS_STORE},     {MORI_FI_CALL_fsync, CLASS_STORE},
    {MORI_FI_CALL_fstat, CLASS_STORE},     {MORI_FI_CALL_flock, CLASS_STORE},
    {MORI_FI_CALL_renameat, CLASS_STORE},  {MORI_FI_CALL_unlinkat, CLASS_STORE},
    {MORI_FI_CALL_mkdirat, CLASS_STORE},   {MORI_FI_CALL_fchmodat, CLASS_STORE},
    {MORI_FI_CALL_getdents64, CLASS_STORE}, {MORI_FI_CALL_inotify_init1, CLASS_STORE},
    {MORI_FI_CALL_inotify_add_watch, CLASS_STORE}, {MORI_FI_CALL_kill, CLASS_SOCKET},
    {MORI_FI_CALL_malloc, CLASS_ALLOC},
    {MORI_FI_CALL_calloc, CLASS_ALLOC},    {MORI_FI_CALL_realloc, CLASS_ALLOC},
    {MORI_FI_CALL_strdup, CLASS_ALLOC},
    {MORI_FI_CALL_clock_gettime, CLASS_TIME}, {MORI_FI_CALL_nanosleep, CLASS_TIME},
    {MORI_FI_CALL_getrandom, CLASS_TIME},  {MORI_FI_CALL_thread_create, CLASS_TIME},
};

static int class_of(int call) {
  for (size_t i = 0; i < sizeof os_classes / sizeof os_classes[0]; i++)
    if (os_classes[i].call == call) return os_classes[i].cls;
  return mori_fi_call_is_hip(call) ? CLASS_GPU : CLASS_STORE; /* a new OS row: I/O */
}

typedef struct options {
  const fi_scenario *scenario;
  int ranks, modes, classes, jobs, stall_ms, deadline_ms, verbose, every_error;
  long peer_calls;
  long max_per_call;
  char preload[PATH_MAX], self[PATH_MAX], dir[64];
} options;

/* One injection: a rank, the nth call of one function there, a mode and
 * the error it fails with. */
typedef struct site {
  int rank, mode, call, error;
  long nth;
  int waits; /* peers will wait out a timeout: the run mostly sleeps */
} site;

/* What the runs found.  Every field but runs, injected and absorbed is a
 * failure of the sweep. */
typedef struct tally {
  long runs, injected, absorbed, untold, answered;
  long crashes, hangs, leaks, unnamed, late, peers, broken, unretried;
  long by_class[CLASS__COUNT], injected_by_class[CLASS__COUNT];
  double peer_max_ms;
  long peer_max_calls;
  long shown;
} tally;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- starting a runner ---- */

typedef struct runner {
  pid_t pid;
  int fd;
  site s;
  char *out;
  size_t len, cap;
  double started;
} runner;

/* environ plus our settings (ours win; defaults only where unset). */
static char **runner_env(const options *o, const char *spec) {
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + 9, sizeof *env);
  if (env == NULL) return NULL;
  size_t k = 0;
  static const char *const ours[] = {"LD_PRELOAD=", "MORI_FI=", "MORI_FI_RECORD=", NULL};
  for (size_t i = 0; i < n; i++) {
    int skip = 0;
    for (const char *const *p = ours; *p; p++) skip |= strncmp(environ[i], *p, strlen(*p)) == 0;
    if (!skip) env[k++] = strdup(environ[i]);
  }
  /* TMPDIR: the launch directory (store files, sockets) on tmpfs, where
   * creating and removing thousands of them costs least */
  static const char *const defaults[][2] = {{"MORI_SYMM_SHIM", "sim"},
                                            {"MORI_SYMM_TIMEOUT_MS", "2000"},
                                            {"MORI_SIM_WAIT_TIMEOUT_MS", "1000"},
                                            {"TMPDIR", "/dev/shm"}};
  for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
    if (getenv(defaults[i][0]) == NULL &&
        (strcmp(defaults[i][0], "TMPDIR") != 0 || access(defaults[i][1], W_OK) == 0)) {
      char *kv = malloc(strlen(defaults[i][0]) + strlen(defaults[i][1]) + 2);
      if (kv) sprintf(kv, "%s=%s", defaults[i][0], defaults[i][1]);
      env[k++] = kv;
    }
  char *pre = malloc(strlen(o->preload) + 16), *fi = malloc(strlen(spec) + 16);
  if (pre) sprintf(pre, "LD_PRELOAD=%s", o->preload);
  if (fi) sprintf(fi, "MORI_FI=%s", spec);
  env[k++] = pre;
  env[k++] = fi;
  for (size_t i = 0; i < k; i++)
    if (env[i] == NULL) env[i] = strdup("MORI_FI_UNSET=1"); /* keep the array whole */
  return env;
}

static void free_env(char **env) {
  for (size_t i = 0; env && env[i]; i++) free(env[i]);
  free(env);
}

static int runner_start(const options *o, const char *spec, runner *r) {
  char ranks[16], stall[16], deadline[16];
  snprintf(ranks, sizeof ranks, "%d", o->ranks);
  snprintf(stall, sizeof stall, "%d", o->stall_ms);
  snprintf(deadline, sizeof deadline, "%d", o->deadline_ms);
  char *argv[] = {"mori-fi", "run-scenario", (char *)o->scenario->name, "--ranks", ranks,
                  "--stall-ms", stall, "--deadline-ms", deadline, NULL};
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_adddup2(&fa, p[1], 2);
  char **env = runner_env(o, spec);
  int rc = env ? posix_spawn(&r->pid, o->self, &fa, NULL, argv, env) : ENOMEM;
  posix_spawn_file_actions_destroy(&fa);
  free_env(env);
  close(p[1]);
  if (rc != 0) {
    close(p[0]);
    errno = rc;
    return -1;
  }
  r->fd = p[0];
  r->len = 0;
  r->started = now_s();
  return 0;
}

/* Reads what is there; 1 when the runner's output is complete. */
static int runner_read(runner *r) {
  if (r->len + 4096 > r->cap) {
    char *n = realloc(r->out, r->cap = r->cap * 2 + 16384);
    if (n == NULL) return 1;
    r->out = n;
  }
  ssize_t k = read(r->fd, r->out + r->len, r->cap - r->len - 1);
  if (k > 0) {
    r->len += (size_t)k;
    return 0;
  }
  if (k < 0 && errno == EINTR) return 0;
  r->out[r->len] = '\0';
  return 1;
}

/* ---- reading a run's report ---- */

typedef struct rank_line {
  int seen, report, exit, signal, hung;
  long injected, leaks, refused, windows, blocks, calls;
  int fds;
  double t_err;
  char status[16], fault[64], step[64], fault_step[64], calls_seen[256];
  const char *err;
} rank_line;

/* The value after " key=" in line, or NULL: every key must be there. */
static const char *value_of(const char *line, const char *key) {
  size_t n = strlen(key);
  for (const char *p = strstr(line, key); p; p = strstr(p + 1, key))
    if ((p == line || p[-1] == ' ') && p[n] == '=') return p + n + 1;
  return NULL;
}

static int long_of(const char *line, const char *key, long *out) {
  const char *v = value_of(line, key);
  char *end;
  if (v == NULL) return -1;
  errno = 0;
  *out = strtol(v, &end, 10);
  return end == v || errno || (*end != ' ' && *end != '\0') ? -1 : 0;
}

static int word_of(const char *line, const char *key, char *out, size_t cap) {
  const char *v = value_of(line, key);
  size_t n = v ? strcspn(v, " ") : 0;
  if (v == NULL || n == 0 || n >= cap) return -1;
  memcpy(out, v, n);
  out[n] = '\0';
  return 0;
}

/* The report after " | ": 0 if every field is there and reads. */
static int parse_report(const char *rep, rank_line *l) {
  long fds;
  char t[64], *end;
  if (word_of(rep, "status", l->status, sizeof l->status) || long_of(rep, "injected", &l->injected) ||
      word_of(rep, "fault", l->fault, sizeof l->fault) || long_of(rep, "leaks", &l->leaks) ||
      long_of(rep, "refused", &l->refused) || long_of(rep, "fds", &fds) ||
      long_of(rep, "windows", &l->windows) || long_of(rep, "blocks", &l->blocks) ||
      word_of(rep, "step", l->step, sizeof l->step) ||
      word_of(rep, "fault_step", l->fault_step, sizeof l->fault_step) ||
      word_of(rep, "t_err", t, sizeof t) || long_of(rep, "calls", &l->calls) ||
      word_of(rep, "seen", l->calls_seen, sizeof l->calls_seen) || value_of(rep, "err") == NULL)
    return -1;
  l->t_err = strtod(t, &end);
  if (*end != '\0' || (strcmp(l->status, "ok") != 0 && strcmp(l->status, "error") != 0))
    return -1;
  l->fds = (int)fds;
  l->err = value_of(rep, "err");
  return 0;
}

/* What the runner found on disk once every rank was gone. */
typedef struct fs_line {
  long leftovers; /* -1: no fs line, a broken report */
} fs_line;

/* Fills lines[] from the runner's output (split in place); returns the
 * ranks seen. */
static int parse_ranks(char *out, rank_line *lines, int ranks, fs_line *fs) {
  int seen = 0;
  fs->leftovers = -1;
  for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
    int r, ex, sig, hung, used = 0;
    if (sscanf(line, "fs leftovers=%ld", &fs->leftovers) == 1) continue;
    if (sscanf(line, "rank=%d exit=%d signal=%d hung=%d %n", &r, &ex, &sig, &hung, &used) != 4 ||
        r < 0 || r >= ranks || lines[r].seen)
      continue;
    rank_line *l = &lines[r];
    *l = (rank_line){.seen = 1, .exit = ex, .signal = sig, .hung = hung};
    const char *bar = strstr(line + used, "| ");
    l->report = bar && parse_report(bar + 2, l) == 0;
    seen++;
  }
  return seen;
}

/* name as a word of text: "openat" in "openat(/x): ...", not "open" in it. */
static int names_word(const char *text, const char *name) {
  size_t n = strlen(name);
  for (const char *p = strstr(text, name); p; p = strstr(p + 1, name)) {
    int before = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
    int after = !(isalnum((unsigned char)p[n]) || p[n] == '_');
    if (before && after) return 1;
  }
  return 0;
}

/* Messages spell the seam's *at() calls as their plain forms ("open(%s)"
 * for openat on a directory fd), and thread_create as the libc call it
 * adapts: one table of those spellings. */
static const struct {
  const char *call, *plain;
} plain_forms[] = {{"openat", "open"},   {"renameat", "rename"},       {"unlinkat", "unlink"},
                   {"mkdirat", "mkdir"}, {"fchmodat", "chmod"}, {"thread_create", "pthread_create"}};

/* The error names the call (or its plain form). */
static int names(const char *text, const char *call) {
  if (names_word(text, call)) return 1;
  for (size_t i = 0; i < sizeof plain_forms / sizeof plain_forms[0]; i++)
    if (strcmp(call, plain_forms[i].call) == 0 && names_word(text, plain_forms[i].plain)) return 1;
  return 0;
}

/* ---- judging a run ---- */

/* Each finding of one run: the tally's failure counters, by name. */
typedef struct finding {
  int crash, hang, leak, unnamed, late, peer, broken, unretried;
  char why[160];
} finding;

static void found(finding *f, int *flag, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void found(finding *f, int *flag, const char *fmt, ...) {
  if (f->why[0] == '\0') {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->why, sizeof f->why, fmt, ap);
    va_end(ap);
  }
  *flag = 1;
}

/* A rank that ran to its end: nothing of it may be left but what the
 * runtime refused to release in persistent mode (each refused resource
 * still counted: leaks must equal refused); a transient refusal must have
 * been retried. */
static void judge_leaks(const site *s, int k, const rank_line *l, finding *f) {
  if (l->windows || l->blocks)
    found(f, &f->leak, "rank %d keeps %ld windows, %ld blocks", k, l->windows, l->blocks);
  if (l->fds)
    found(f, &f->leak, "rank %d leaked %+d fds", k, l->fds);
  if (l->leaks != l->refused)
    found(f, &f->leak, "rank %d: %ld ledger entries live, %ld of them refused by the runtime", k,
          l->leaks, l->refused);
  else if (l->refused && (k != s->rank || s->mode != MODE_PERSISTENT))
    found(f, &f->leak, "rank %d: %ld refused releases never retried", k, l->refused);
}

/* A fault the handle-type probe took as an answer ("no fabric here": the
 * runtime's NotSupported, or InvalidValue from a release that does not
 * know the handle type): the allocation succeeds with POSIX fds, and the
 * rendezvous, where the peers that were answered otherwise meet it, fails
 * on the mismatch, naming the probe's call.  The one case where an error
 * rightly surfaces later; any other error must fail the allocation. */
static int answered(const site *s, const rank_line *l) {
  return (s->error == hipErrorNotSupported || s->error == hipErrorInvalidValue) &&
         mori_fi_call_is_hip(s->call) && strncmp(l->fault_step, "alloc", 5) == 0 &&
         strncmp(l->step, "rendezvous", 10) == 0 && strstr(l->err, "probe of device") != NULL &&
         names(l->err, l->fault);
}

/* The faulted rank: an error that names the injected call, from the step
 * (API call) that made it; and no error at all for a fault the core must
 * retry (EINTR, EAGAIN; ENOBUFS from sendmsg) when it happens once. */
static void judge_faulted(const site *s, const rank_line *l, tally *t, finding *f) {
  if (strcmp(l->status, "ok") == 0) {
    t->absorbed++;
    return;
  }
  if (s->mode == MODE_TRANSIENT && mori_fi_call_retries(s->call, s->error)) {
    char code[32];
    found(f, &f->unretried, "rank %d failed on a %s from %s, which it must retry", s->rank,
          mori_fi_failure_name(s->call, s->error, code, sizeof code), mori_fi_call_name(s->call));
  }
  /* A runtime call's failure reaches the error with the shim's detail, which
   * for an injected one says so: a message that only mentions the call
   * (a later call's contract error naming it) is not its report. */
  int call = mori_fi_call_find(l->fault, strlen(l->fault));
  if (call < 0 || !names(l->err, mori_fi_call_name(call)) ||
      (mori_fi_call_is_hip(call) && !strstr(l->err, "injected by MORI_FI")))
    found(f, &f->unnamed, "rank %d's error does not report the failure of %s", s->rank, l->fault);
  if (answered(s, l))
    t->answered++;
  else if (strcmp(l->step, l->fault_step) != 0)
    found(f, &f->late, "fault injected in step %s, error surfaced in step %s", l->fault_step,
          l->step);
}

/* The calls a write to the file store makes (a temporary file renamed over
 * the key): when one of them fails for good, so does the abort. */
static int store_write_call(int call) {
  static const int calls[] = {MORI_FI_CALL_openat, MORI_FI_CALL_write, MORI_FI_CALL_fsync,
                              MORI_FI_CALL_close, MORI_FI_CALL_renameat};
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
    if (calls[i] == call) return 1;
  return 0;
}

/* The faulted rank could not tell its peers: it failed before it had a
 * store, or its writes to the store or its allocations (the abort needs
 * both) fail for good. */
static int untold(const site *s, const rank_line *faulted) {
  return fi_step_untold(faulted->step) ||
         (s->mode == MODE_PERSISTENT &&
          (store_write_call(s->call) || class_of(s->call) == CLASS_ALLOC));
}

/* The kth number of "c0,c1,...", or 0. */
static long calls_of(const char *list, int k) {
  const char *p = list;
  for (int i = 0; i < k && p; i++) {
    p = strchr(p, ',');
    if (p) p++;
  }
  return p ? strtol(p, NULL, 10) : 0;
}

/* A peer of a rank that failed (not killed) fails with that rank's reason
 * (its error names the injected call), within the bound, unless it was
 * waiting on a GPU stream, which no store abort reaches, or the faulted
 * rank could not tell anyone. */
static void judge_peer(const options *o, const site *s, int k, const rank_line *l,
                       const rank_line *faulted, tally *t, finding *f) {
  if (strcmp(l->status, "ok") == 0 || s->mode == MODE_KILL || fi_step_waits_on_gpu(l->step))
    return;
  if (strcmp(faulted->status, "ok") != 0 && untold(s, faulted)) {
    t->untold++;
    return;
  }
  if (strcmp(faulted->status, "ok") != 0 && answered(s, faulted) && strstr(l->err, " differs "))
    return; /* the peer meets the mismatch itself */
  if (strcmp(faulted->status, "ok") == 0) {
    found(f, &f->peer, "rank %d failed in %s though faulted rank %d succeeded", k, l->step,
          s->rank);
    return;
  }
  double ms = (l->t_err - faulted->t_err) * 1e3;
  long calls = l->calls - calls_of(faulted->calls_seen, k);
  if (ms > t->peer_max_ms) t->peer_max_ms = ms;
  if (calls > t->peer_max_calls) t->peer_max_calls = calls;
  if (!names(l->err, faulted->fault))
    found(f, &f->peer, "rank %d failed in %s for another reason than rank %d's %s", k, l->step,
          s->rank, faulted->fault);
  else if (calls > o->peer_calls)
    found(f, &f->peer, "rank %d made %ld calls after rank %d told it (%.0f ms)", k, calls,
          s->rank, ms);
}

static void show(const options *o, tally *t, const site *s, const char *why, const char *out) {
  char code[32];
  if (t->shown++ >= 5 && !o->verbose) return;
  printf("sweep: FAIL %s: rank %d %s#%ld=%s%s\n", why, s->rank, mori_fi_call_name(s->call), s->nth,
         s->mode == MODE_PERSISTENT ? "persist:" : "",
         s->mode == MODE_KILL ? "kill" : mori_fi_failure_name(s->call, s->error, code, sizeof code));
  printf("%s", out);
  fflush(stdout);
}

/* Nothing is excused: every rank that ran to its end is checked the same
 * way, the faulted one too; only a rank the fault killed (SIGKILL) is not,
 * and then the files are (the runner's fs line).  A missing or unreadable
 * report is a failure of its own. */
static void judge(const options *o, runner *r, int status, int timed_out, tally *t) {
  const site *s = &r->s;
  char *copy = strdup(r->out ? r->out : "");
  rank_line *lines = calloc((size_t)o->ranks, sizeof *lines);
  finding f = {0};
  fs_line fs = {-1};
  int seen = copy && lines ? parse_ranks(copy, lines, o->ranks, &fs) : 0;
  t->runs++;
  t->by_class[class_of(s->call)]++;
  if (timed_out)
    found(&f, &f.hang, "the runner outlived its deadline");
  else if (!WIFEXITED(status) || seen != o->ranks)
    found(&f, &f.crash, "the runner died or reported %d of %d ranks", seen, o->ranks);
  else if (fs.leftovers < 0)
    found(&f, &f.broken, "no fs line");
  else if (fs.leftovers > 0 && !(s->call == MORI_FI_CALL_unlinkat && s->mode == MODE_PERSISTENT))
    found(&f, &f.leak, "%ld files left on disk", fs.leftovers); /* transient: must be retried */
  const rank_line *faulted = seen == o->ranks ? &lines[s->rank] : NULL;
  int killed = faulted && s->mode == MODE_KILL && faulted->signal == SIGKILL && !faulted->hung;
  if (faulted && (killed || (faulted->report && faulted->injected > 0))) {
    t->injected++;
    t->injected_by_class[class_of(s->call)]++;
  }
  for (int k = 0; faulted && k < o->ranks; k++) {
    const rank_line *l = &lines[k];
    if (l->hung) found(&f, &f.hang, "rank %d made no progress for %d ms", k, o->stall_ms);
    else if (l->signal && !(killed && k == s->rank))
      found(&f, &f.crash, "rank %d died of signal %d", k, l->signal);
    if (l->hung || l->signal) continue;
    if (!l->report) {
      found(&f, &f.broken, "rank %d's report is missing or unreadable", k);
      continue;
    }
    judge_leaks(s, k, l, &f);
    if (k == s->rank && l->injected > 0) judge_faulted(s, l, t, &f);
    else if (k != s->rank && (killed || faulted->report))
      judge_peer(o, s, k, l, faulted, t, &f);
  }
  t->crashes += f.crash;
  t->hangs += f.hang;
  t->leaks += f.leak;
  t->unnamed += f.unnamed;
  t->late += f.late;
  t->peers += f.peer;
  t->broken += f.broken;
  t->unretried += f.unretried;
  if (f.why[0]) show(o, t, s, f.why, r->out ? r->out : "");
  free(copy);
  free(lines);
}

/* ---- the baseline ---- */

/* Runs spec to completion; the output in r->out. */
static int run_sync(const options *o, const char *spec, runner *r, int *status) {
  if (runner_start(o, spec, r) != 0) return -1;
  while (!runner_read(r)) {
  }
  close(r->fd);
  return waitpid(r->pid, status, 0) == r->pid ? 0 : -1;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
  size_t len = buf ? fread(buf, 1, (size_t)n, f) : 0;
  if (buf) buf[len] = '\0';
  fclose(f);
  return buf;
}

/* Each rank's count of calls of every function, from the baseline's
 * count=PATH files: the sites of the sweep. */
static int learn_counts(const options *o, long (*counts)[MORI_FI_CALL__COUNT]) {
  for (int r = 0; r < o->ranks; r++) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/count.%d", o->dir, r);
    char *text = slurp(path);
    if (text == NULL) {
      printf("sweep: baseline count %s: %s\n", path, strerror(errno));
      return -1;
    }
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
      char name[64];
      long n;
      int c;
      if (sscanf(line, "%63s %ld", name, &n) == 2 && (c = mori_fi_call_find(name, strlen(name))) >= 0)
        counts[r][c] = n;
    }
    free(text);
  }
  return 0;
}

static int baseline(const options *o, long (*counts)[MORI_FI_CALL__COUNT]) {
  char spec[256];
  runner r = {0};
  int status = 0;
  snprintf(spec, sizeof spec, "count=%s/count", o->dir);
  if (run_sync(o, spec, &r, &status) != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    printf("sweep: the baseline run (no fault) failed:\n%s", r.out ? r.out : "");
    free(r.out);
    return -1;
  }
  free(r.out);
  return learn_counts(o, counts);
}

/* ---- the loop ---- */

static void spec_for(const site *s, char *spec, size_t n) {
  char code[32];
  if (s->mode == MODE_KILL)
    snprintf(spec, n, "rank=%d %s#%ld=kill", s->rank, mori_fi_call_name(s->call), s->nth);
  else
    snprintf(spec, n, "rank=%d %s#%ld=%s%s", s->rank, mori_fi_call_name(s->call), s->nth,
             s->mode == MODE_PERSISTENT ? "persist:" : "",
             mori_fi_failure_name(s->call, s->error, code, sizeof code));
}

static void progress(const tally *t, long total, double t0) {
  printf("sweep: %ld/%ld runs, injected %ld, crashes %ld, hangs %ld, leaks %ld, unnamed %ld, "
         "late %ld, peers %ld, broken %ld, unretried %ld (%.1f s)\n",
         t->runs, total, t->injected, t->crashes, t->hangs, t->leaks, t->unnamed, t->late,
         t->peers, t->broken, t->unretried, now_s() - t0);
  fflush(stdout);
}

/* --jobs runs may be busy at once.  A run whose peers will wait out a
 * timeout (the fault hits a signal the peers wait for, or kills the rank)
 * mostly sleeps once it got that far, so after SETUP_S it stops counting
 * against --jobs; at most LIVE_PER_JOB times --jobs runs are alive at all. */
#define SETUP_S 0.25
#define LIVE_PER_JOB 8

static int busy(const runner *slots, int n) {
  int k = 0;
  double now = now_s();
  for (int j = 0; j < n; j++)
    k += slots[j].pid && (!slots[j].s.waits || now - slots[j].started < SETUP_S);
  return k;
}

static int loop(const options *o, site *sites, long total, tally *t) {
  int live = o->jobs * LIVE_PER_JOB;
  runner *slots = calloc((size_t)live, sizeof *slots);
  struct pollfd *pfd = calloc((size_t)live, sizeof *pfd);
  long next = 0, done = 0;
  /* The runner watches its ranks' progress itself; this is only the last
   * resort against a runner that never ends, and counts as a hang. */
  double t0 = now_s(), limit = o->deadline_ms / 1000.0 + 30;
  if (slots == NULL || pfd == NULL) return -1;
  while (done < total) {
    for (int j = 0; j < live && next < total && busy(slots, live) < o->jobs; j++) {
      if (slots[j].pid) continue;
      char spec[160];
      spec_for(&sites[next], spec, sizeof spec);
      slots[j].s = sites[next++];
      if (runner_start(o, spec, &slots[j]) != 0) {
        printf("sweep: cannot start %s: %s\n", o->self, strerror(errno));
        return -1;
      }
    }
    for (int j = 0; j < live; j++)
      pfd[j] = (struct pollfd){slots[j].pid ? slots[j].fd : -1, POLLIN, 0};
    /* wake when a busy run turns waiting, too: that frees a job */
    if (poll(pfd, (nfds_t)live, 20) < 0 && errno != EINTR) return -1;
    for (int j = 0; j < live; j++) {
      runner *r = &slots[j];
      if (!r->pid) continue;
      int finished = (pfd[j].revents & (POLLIN | POLLHUP | POLLERR)) && runner_read(r);
      int timed_out = !finished && now_s() - r->started > limit;
      if (timed_out) kill(r->pid, SIGKILL);
      if (!finished && !timed_out) continue;
      int status = 0;
      close(r->fd);
      waitpid(r->pid, &status, 0);
      r->pid = 0;
      if (r->out) r->out[r->len] = '\0';
      judge(o, r, status, timed_out, t);
      if (++done % 100 == 0) progress(t, total, t0);
    }
  }
  for (int j = 0; j < live; j++) free(slots[j].out);
  free(slots);
  free(pfd);
  return 0;
}

/* ---- the sites ---- */

/* The error of the nth call of call on rank in mode: the call's errors in
 * turn over its calls and ranks, so that a sweep tries every error a call
 * can return; persistent faults never use EINTR or EAGAIN (callers retry
 * those: a persistent one is an endless retry, not a fault). */
static int errors_for(int call, int mode, int *out) {
  const int *e;
  int n = mori_fi_call_errors(call, &e), k = 0;
  for (int i = 0; i < n; i++)
    if (mode != MODE_PERSISTENT || !mori_fi_call_retries(call, e[i]))
      out[k++] = e[i];
  return k;
}

static int add_sites(const options *o, int r, int call, long nth, site *s, long *total) {
  int errs[8], n = errors_for(call, MODE_TRANSIENT, errs), waits_call =
      call == MORI_FI_CALL_hipStreamWaitValue32 || call == MORI_FI_CALL_hipStreamWriteValue32 ||
      call == MORI_FI_CALL_hipStreamBatchMemOp;
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
    int mode = modes[m].bit;
    if (!(o->modes & mode)) continue;
    n = errors_for(call, mode, errs);
    int first = (int)((nth - 1 + r) % (n ? n : 1)), count = mode == MODE_KILL || !o->every_error ? 1 : n;
    for (int i = 0; i < count && (n > 0 || mode == MODE_KILL); i++) {
      if (s) s[*total] = (site){r, mode, call, n ? errs[(first + i) % n] : 0, nth,
                                mode == MODE_KILL || waits_call};
      (*total)++;
    }
  }
  return 0;
}

static site *build_sites(const options *o, long (*counts)[MORI_FI_CALL__COUNT], long *total) {
  site *s = NULL;
  for (int pass = 0; pass < 2; pass++) { /* count, then fill */
    *total = 0;
    for (int r = 0; r < o->ranks; r++)
      for (int c = 0; c < MORI_FI_CALL__COUNT; c++) {
        if (!(o->classes & (1 << class_of(c)))) continue;
        long n = counts[r][c] < o->max_per_call ? counts[r][c] : o->max_per_call;
        for (long k = 1; k <= n; k++) add_sites(o, r, c, k, s, total);
      }
    if (pass == 0 && (s = malloc((size_t)(*total ? *total : 1) * sizeof *s)) == NULL) return NULL;
  }
  return s;
}

/* ---- the command ---- */

struct sweep_args {
  const char *scenario, *modes, *classes;
  int ranks, jobs, stall_ms, deadline_ms, verbose, list, every_error, max_per_call, peer_calls;
};

static const cli_option sweep_options[] = {
    {"--scenario", CLI_TEXT, offsetof(struct sweep_args, scenario), 0, 0, NULL, "S",
     "the scenario to sweep (required; --list names them)"},
    {"--ranks", CLI_INT, offsetof(struct sweep_args, ranks), 1, 1024, NULL, "N",
     "ranks of the scenario (default 2)"},
    {"--modes", CLI_TEXT, offsetof(struct sweep_args, modes), 0, 0, NULL, "M[,M...]",
     "transient, persistent, kill (default transient,persistent)"},
    {"--classes", CLI_TEXT, offsetof(struct sweep_args, classes), 0, 0, NULL, "C[,C...]",
     "call sites: gpu, socket, store, alloc, time (default all)"},
    {"--every-error", CLI_FLAG, offsetof(struct sweep_args, every_error), 0, 0, NULL, NULL,
     "one run per error a call can return (default: they take turns over its calls)"},
    {"--max-per-call", CLI_INT, offsetof(struct sweep_args, max_per_call), 1, 1000000000, NULL,
     "K", "only the first K calls of each function per rank (default all)"},
    {"--jobs", CLI_INT, offsetof(struct sweep_args, jobs), 1, 64, NULL, "J",
     "runs at once (default 2)"},
    {"--stall-ms", CLI_INT, offsetof(struct sweep_args, stall_ms), 100, 3600000, NULL, "MS",
     "a rank whose calls stood still this long is a hang (default 10000)"},
    {"--peer-calls", CLI_INT, offsetof(struct sweep_args, peer_calls), 1, 1000000000, NULL, "N",
     "calls a peer may make after it was told a rank failed (default 200)"},
    {"--deadline-ms", CLI_INT, offsetof(struct sweep_args, deadline_ms), CLI_DEADLINE_MS_MIN, CLI_DEADLINE_MS_MAX, NULL,
     "MS", "a run still going then, however busy, is a hang (default 600000)"},
    {"--verbose", CLI_FLAG, offsetof(struct sweep_args, verbose), 0, 0, NULL, NULL,
     "print every failing run"},
    {"--list", CLI_FLAG, offsetof(struct sweep_args, list), 0, 0, NULL, NULL,
     "list the scenarios and exit"},
    {0},
};

const cli_command fi_sweep_command = {
    .name = "sweep",
    .run = fi_cmd_sweep,
    .summary = "fail every call of every rank in turn, each in a fresh run; judge each",
    .options = sweep_options,
};

/* "a,b,c" of names[] into bits; -1 on an unknown name. */
static int parse_names(const char *s, const char *const *names, const int *bits, int n) {
  int out = 0;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *save = NULL, *m = strtok_r(buf, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
    int bit = 0;
    for (int i = 0; i < n; i++)
      if (strcmp(m, names[i]) == 0) bit = bits[i];
    if (bit == 0) return -1;
    out |= bit;
  }
  return out;
}

static int parse_modes(const char *s) {
  const char *names[3];
  int bits[3];
  for (int i = 0; i < 3; i++) names[i] = modes[i].name, bits[i] = modes[i].bit;
  return parse_names(s, names, bits, 3);
}

static int parse_classes(const char *s) {
  int bits[CLASS__COUNT];
  for (int i = 0; i < CLASS__COUNT; i++) bits[i] = 1 << i;
  return parse_names(s, class_names, bits, CLASS__COUNT);
}

/* The fault shim: MORI_FI_PRELOAD, else the one beside libmori_core.so,
 * wherever the build or the install put the libraries. */
static int find_preload(options *o) {
  const char *env = getenv("MORI_FI_PRELOAD");
  ssize_t n = readlink("/proc/self/exe", o->self, sizeof o->self - 1);
  if (n <= 0) return -1;
  o->self[n] = '\0';
  Dl_info core;
  if (env && *env) {
    snprintf(o->preload, sizeof o->preload, "%s", env);
  } else if (dladdr((void *)mori_symm_alloc, &core) != 0 && core.dli_fname != NULL) {
    const char *slash = strrchr(core.dli_fname, '/');
    snprintf(o->preload, sizeof o->preload, "%.*s/libmori_faultinject.so",
             slash ? (int)(slash - core.dli_fname) : 1, slash ? core.dli_fname : ".");
  } else {
    return -1;
  }
  return access(o->preload, R_OK);
}

static void remove_dir(const options *o) {
  char path[PATH_MAX];
  for (int r = 0; r < o->ranks; r++) {
    snprintf(path, sizeof path, "%s/count.%d", o->dir, r);
    unlink(path);
  }
  rmdir(o->dir);
}

static int list(void) {
  for (const fi_scenario *s = fi_scenarios; s->name; s++) printf("%-14s %s\n", s->name, s->help);
  return 0;
}

/* per_call: the call sites of each function over every rank (what was
 * swept, so that a sweep shows which calls of the seam it reached). */
/* Returns 1 when the sweep found anything, whose last line is then
 * "sweep FAILED: ..." on stderr, as every tool's failure; else "sweep ok: ...". */
static int summary(const options *o, const tally *t, const long *per_call, long sites,
                   double t0) {
  const char *arch = getenv("MORI_SIM_ARCH"), *quirks = getenv("MORI_SIM_QUIRKS");
  printf("sweep: %ld runs absorbed the fault (the rank succeeded); %ld probes took it as an "
         "answer (the rendezvous found the mismatch); %ld peers could not be told (the faulted "
         "rank had no store); the slowest failing peer made %ld calls (%.0f ms) after it was "
         "told; %.1f s\n",
         t->absorbed, t->answered, t->untold, t->peer_max_calls, t->peer_max_ms, now_s() - t0);
  printf("sweep: profile %s, quirks %s; classes", arch && *arch ? arch : "default",
         quirks && *quirks ? quirks : "none");
  for (int c = 0; c < CLASS__COUNT; c++)
    if (o->classes & (1 << c))
      printf(" %s=%ld/%ld", class_names[c], t->injected_by_class[c], t->by_class[c]);
  printf(" (injected/runs), %ld call sites\n", sites);
  printf("sweep: calls swept (call sites):");
  for (int c = 0; c < MORI_FI_CALL__COUNT; c++)
    if (per_call[c]) printf(" %s=%ld", mori_fi_call_name(c), per_call[c]);
  printf("\n");
  int failed = t->crashes || t->hangs || t->leaks || t->unnamed || t->late || t->peers ||
               t->broken || t->unretried;
  fflush(stdout);
  fprintf(failed ? stderr : stdout,
          "sweep %s: scenario=%s ranks=%d runs=%ld injected=%ld crashes=%ld hangs=%ld leaks=%ld "
          "unnamed=%ld late=%ld peers=%ld broken=%ld unretried=%ld\n",
          failed ? "FAILED" : "ok", o->scenario->name, o->ranks, t->runs, t->injected,
          t->crashes, t->hangs, t->leaks, t->unnamed, t->late, t->peers, t->broken, t->unretried);
  return failed;
}

int fi_cmd_sweep(int argc, char **argv) {
  struct sweep_args a = {.ranks = 2, .jobs = 2, .stall_ms = 10000, .deadline_ms = 600000,
                         .max_per_call = 1000000000, .peer_calls = 200};
  int rc = cli_parse(&fi_sweep_command, &a, argc, argv);
  if (rc != 0) return rc == CLI_EXIT_HELP ? 0 : rc;
  if (a.list) return list();
  options o = {.ranks = a.ranks, .modes = MODE_TRANSIENT | MODE_PERSISTENT, .jobs = a.jobs,
               .classes = (1 << CLASS__COUNT) - 1, .stall_ms = a.stall_ms,
               .deadline_ms = a.deadline_ms, .verbose = a.verbose, .every_error = a.every_error,
               .peer_calls = a.peer_calls, .max_per_call = a.max_per_call};
  if (a.scenario == NULL)
    return cli_usage_error(&fi_sweep_command, "--scenario is required (--list names them)");
  o.scenario = fi_scenario_find(a.scenario);
  if (o.scenario == NULL)
    return cli_usage_error(&fi_sweep_command, "--scenario '%s': unknown scenario (%s)",
                           a.scenario, fi_scenario_names());
  if (a.modes != NULL && (o.modes = parse_modes(a.modes)) <= 0)
    return cli_usage_error(&fi_sweep_command,
                           "--modes '%s': unknown mode (accepted: transient, persistent, kill, "
                           "comma separated)",
                           a.modes);
  if (a.classes != NULL && (o.classes = parse_classes(a.classes)) <= 0)
    return cli_usage_error(&fi_sweep_command,
                           "--classes '%s': unknown class (accepted: gpu, socket, store, alloc, "
                           "time, comma separated)",
                           a.classes);
  if (find_preload(&o) != 0) {
    fprintf(stderr, "sweep FAILED: no fault shim at %s (set MORI_FI_PRELOAD)\n", o.preload);
    return 2;
  }
  snprintf(o.dir, sizeof o.dir, "/tmp/mori-fi-sweep-XXXXXX");
  if (mkdtemp(o.dir) == NULL) return 2;
  long (*counts)[MORI_FI_CALL__COUNT] = calloc((size_t)o.ranks, sizeof *counts), total = 0;
  site *sites = NULL;
  tally t = {0};
  double t0 = now_s();
  rc = counts ? baseline(&o, counts) : -1;
  if (rc == 0 && (sites = build_sites(&o, counts, &total)) == NULL) rc = -1;
  long nsites = 0, per_call[MORI_FI_CALL__COUNT] = {0};
  for (int r = 0; rc == 0 && r < o.ranks; r++)
    for (int c = 0; c < MORI_FI_CALL__COUNT; c++)
      if (o.classes & (1 << class_of(c))) {
        long n = counts[r][c] < o.max_per_call ? counts[r][c] : o.max_per_call;
        per_call[c] += n;
        nsites += n;
      }
  if (rc == 0) {
    printf("sweep: scenario %s, %d ranks, %ld call sites, %ld runs, %d jobs\n", o.scenario->name,
           o.ranks, nsites, total, o.jobs);
    fflush(stdout);
    rc = loop(&o, sites, total, &t);
  }
  remove_dir(&o);
  free(counts);
  free(sites);
  if (rc != 0) return 2;
  return summary(&o, &t, per_call, nsites, t0);
}
