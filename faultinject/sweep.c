/*
 * sweep.c - `mori-fi sweep`: SQLite's fault loop over a multi-process
 * scenario.  A first run records every rank's calls; then every call index
 * of every rank is failed in turn (transient, persistent, or killed), each
 * in a fresh run-scenario process started with LD_PRELOAD and MORI_FI, and
 * each run is judged: the failing rank named the call, no rank hung or
 * crashed, nothing leaked.
 */
#include "fi_tool.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
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

typedef struct options {
  const fi_scenario *scenario;
  int ranks, modes, jobs, deadline_ms, verbose;
  char preload[PATH_MAX], self[PATH_MAX], dir[64];
} options;

/* One injection: a rank, one of its call indexes, a mode. */
typedef struct site {
  int rank, mode, call; /* call: what the baseline made at that index */
  long index;
  int waits;            /* peers will wait out a timeout: the run mostly sleeps */
} site;

typedef struct tally {
  long runs, injected, crashes, hangs, leaks, misreported, absorbed, shown;
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
  char ranks[16], deadline[16];
  snprintf(ranks, sizeof ranks, "%d", o->ranks);
  snprintf(deadline, sizeof deadline, "%d", o->deadline_ms);
  char *argv[] = {"mori-fi", "run-scenario", (char *)o->scenario->name, "--ranks", ranks,
                  "--deadline-ms", deadline, NULL};
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

/* ---- judging a run ---- */

typedef struct rank_line {
  int seen, exit, signal, hung, injected;
  long leaks, windows, blocks;
  int fds;
  char status[16], fault[64];
  const char *err;
} rank_line;

static long field(const char *line, const char *key) {
  const char *p = strstr(line, key);
  return p ? strtol(p + strlen(key), NULL, 10) : 0;
}

static int parse_ranks(char *out, rank_line *lines, int ranks) {
  int seen = 0;
  for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
    int r, ex, sig, hung;
    if (sscanf(line, "rank=%d exit=%d signal=%d hung=%d", &r, &ex, &sig, &hung) != 4 || r < 0 ||
        r >= ranks)
      continue;
    rank_line *l = &lines[r];
    *l = (rank_line){1, ex, sig, hung, (int)field(line, " injected="), field(line, " leaks="),
                     field(line, " windows="), field(line, " blocks="), (int)field(line, " fds="),
                     "", "", NULL};
    sscanf(strstr(line, "status=") ? strstr(line, "status=") : "status=none", "status=%15s",
           l->status);
    sscanf(strstr(line, " fault=") ? strstr(line, " fault=") : " fault=-", " fault=%63s", l->fault);
    l->err = strstr(line, " err=") ? strstr(line, " err=") + 5 : "";
    seen++;
  }
  return seen;
}

/* The injected rank may keep what a failed release held, and everything
 * once every call from the failing one on fails; all else must be 0.  The
 * call is the one the fault hit, which differs from the baseline's when an
 * earlier failure took the rank down another path. */
static int leak_excused(const site *s, int rank, int fault_call) {
  return rank == s->rank && (s->mode != MODE_TRANSIENT || mori_fi_call_releases(fault_call));
}

static const char *mode_name(int mode) {
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
    if (modes[i].bit == mode) return modes[i].name;
  return "?";
}

static void show(const options *o, tally *t, const site *s, const char *what, const char *out) {
  if (t->shown++ >= 5 && !o->verbose) return;
  printf("sweep: FAIL %s: rank %d call %ld (%s) %s\n", what, s->rank, s->index,
         mori_fi_call_name(s->call) ? mori_fi_call_name(s->call) : "?", mode_name(s->mode));
  printf("%s", out);
  fflush(stdout);
}

static void judge(const options *o, runner *r, int status, tally *t) {
  const site *s = &r->s;
  char *copy = strdup(r->out ? r->out : "");
  rank_line *lines = calloc((size_t)o->ranks, sizeof *lines);
  int crash = 0, hang = 0, leak = 0, misreport = 0, injected = 0;
  int seen = copy && lines ? parse_ranks(copy, lines, o->ranks) : 0;
  t->runs++;
  if (!WIFEXITED(status) || seen != o->ranks) crash = 1; /* the runner itself broke */
  for (int k = 0; k < o->ranks && seen == o->ranks; k++) {
    const rank_line *l = &lines[k];
    int killed = s->mode == MODE_KILL && k == s->rank && l->signal == SIGKILL;
    hang |= l->hung;
    crash |= l->signal && !killed;
    if (k == s->rank) injected = killed || l->injected > 0;
    if (killed || l->hung || l->signal) continue;
    int fault = mori_fi_call_find(l->fault, strlen(l->fault));
    leak |= l->windows != 0 || l->blocks != 0;
    leak |= (l->leaks != 0 || l->fds != 0) && !leak_excused(s, k, fault);
    /* a rank that failed before it reached the site was never injected */
    if (k != s->rank || l->injected == 0) continue;
    if (strcmp(l->status, "ok") == 0) t->absorbed++;
    else if (!strstr(l->err, "injected") && !strstr(l->err, mori_fi_call_name(fault)))
      misreport = 1;
  }
  t->injected += injected;
  t->crashes += crash;
  t->hangs += hang;
  t->leaks += leak;
  t->misreported += misreport;
  if (crash || hang || leak || misreport)
    show(o, t, s, crash ? "crash" : hang ? "hang" : leak ? "leak" : "error does not name the call",
         r->out ? r->out : "");
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

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
  *len = buf ? fread(buf, 1, (size_t)n, f) : 0;
  if (buf) buf[*len] = '\0';
  fclose(f);
  return buf;
}

/* Each rank's calls, in order, from the baseline's trace. */
static int learn_calls(const options *o, int **calls, long *ncalls) {
  for (int r = 0; r < o->ranks; r++) {
    char path[PATH_MAX], err[256];
    size_t len;
    snprintf(path, sizeof path, "%s/trace.%d", o->dir, r);
    char *text = slurp(path, &len);
    mori_fi_trace t;
    if (text == NULL || mori_trace_parse(text, len, &t, err, sizeof err) != 0) {
      printf("sweep: baseline trace %s: %s\n", path, text ? err : strerror(errno));
      free(text);
      return -1;
    }
    free(text);
    ncalls[r] = 0;
    calls[r] = malloc((t.n + 1) * sizeof **calls);
    for (size_t i = 0; calls[r] && i < t.n; i++)
      if (t.recs[i].index > 0) calls[r][ncalls[r]++] = t.recs[i].call;
    mori_trace_free(&t);
    if (calls[r] == NULL) return -1;
  }
  return 0;
}

static int baseline(const options *o, int **calls, long *ncalls) {
  char spec[256];
  runner r = {0};
  int status = 0;
  snprintf(spec, sizeof spec, "count=%s/count;record=%s/trace", o->dir, o->dir);
  if (run_sync(o, spec, &r, &status) != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    printf("sweep: the baseline run (no fault) failed:\n%s", r.out ? r.out : "");
    free(r.out);
    return -1;
  }
  free(r.out);
  if (learn_calls(o, calls, ncalls) != 0) return -1;
  for (int k = 0; k < o->ranks; k++) {
    char path[PATH_MAX];
    size_t len;
    snprintf(path, sizeof path, "%s/count.%d", o->dir, k);
    char *text = slurp(path, &len);
    long global = text ? field(text, "global ") : -1;
    free(text);
    if (global != ncalls[k]) {
      printf("sweep: rank %d: count says %ld runtime calls, the trace %ld\n", k, global, ncalls[k]);
      return -1;
    }
  }
  return 0;
}

/* ---- the loop ---- */

static void spec_for(const site *s, char *spec, size_t n) {
  snprintf(spec, n, "rank=%d call#%ld=%s", s->rank, s->index,
           s->mode == MODE_KILL ? "kill"
           : s->mode == MODE_PERSISTENT ? "persist:hipErrorUnknown" : "hipErrorUnknown");
}

static void progress(const options *o, const tally *t, long total, double t0) {
  printf("sweep: %ld/%ld runs, injected %ld, crashes %ld, hangs %ld, leaks %ld, absorbed %ld "
         "(%.1f s)\n",
         t->runs, total, t->injected, t->crashes, t->hangs, t->leaks, t->absorbed, now_s() - t0);
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
  double t0 = now_s(), limit = o->deadline_ms / 1000.0 + 10;
  if (slots == NULL || pfd == NULL) return -1;
  while (done < total) {
    for (int j = 0; j < live && next < total && busy(slots, live) < o->jobs; j++) {
      if (slots[j].pid) continue;
      char spec[128];
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
      if (!finished && now_s() - r->started > limit) {
        kill(r->pid, SIGKILL); /* a runner past its own deadline: a hang */
        finished = 1;
      }
      if (!finished) continue;
      int status = 0;
      close(r->fd);
      waitpid(r->pid, &status, 0);
      r->pid = 0;
      if (o->verbose && now_s() - r->started > (getenv("MORI_FI_SLOW_S") ? atof(getenv("MORI_FI_SLOW_S")) : 0.5))
        printf("sweep: slow run %.2f s: rank %d call %ld (%s) %s\n", now_s() - r->started,
               r->s.rank, r->s.index, mori_fi_call_name(r->s.call), mode_name(r->s.mode));
      judge(o, r, status, t);
      if (++done % 50 == 0) progress(o, t, total, t0);
    }
  }
  for (int j = 0; j < live; j++) free(slots[j].out);
  free(slots);
  free(pfd);
  return 0;
}

/* ---- the command ---- */

struct sweep_args {
  const char *scenario, *modes;
  int ranks, jobs, deadline_ms, verbose, list;
};

static const cli_option sweep_options[] = {
    {"--scenario", CLI_TEXT, offsetof(struct sweep_args, scenario), 0, 0, NULL, "S",
     "the scenario to sweep (required; --list names them)"},
    {"--ranks", CLI_INT, offsetof(struct sweep_args, ranks), 1, 1024, NULL, "N",
     "ranks of the scenario (default 2)"},
    {"--modes", CLI_TEXT, offsetof(struct sweep_args, modes), 0, 0, NULL, "M[,M...]",
     "transient, persistent, kill (default transient,persistent)"},
    {"--jobs", CLI_INT, offsetof(struct sweep_args, jobs), 1, 64, NULL, "J",
     "runs at once (default 2)"},
    {"--deadline-ms", CLI_INT, offsetof(struct sweep_args, deadline_ms), 1000, 3600000, NULL,
     "MS", "a run still going then is a hang (default 20000)"},
    {"--verbose", CLI_FLAG, offsetof(struct sweep_args, verbose), 0, 0, NULL, NULL,
     "print every run"},
    {"--list", CLI_FLAG, offsetof(struct sweep_args, list), 0, 0, NULL, NULL,
     "list the scenarios and exit"},
    {0},
};

const cli_command fi_sweep_command = {
    .name = "sweep",
    .run = fi_cmd_sweep,
    .summary = "fail every call index of every rank in turn, each in a fresh run; judge each",
    .options = sweep_options,
};

static int parse_modes(const char *s) {
  int bits = 0;
  char buf[128];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *save = NULL, *m = strtok_r(buf, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
    int bit = 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
      if (strcmp(m, modes[i].name) == 0) bit = modes[i].bit;
    if (bit == 0) return -1;
    bits |= bit;
  }
  return bits;
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

/* The baseline's counts and traces, and whatever else a rank left there. */
static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  char path[PATH_MAX];
  for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d) closedir(d);
  rmdir(dir);
}

static int list(void) {
  for (const fi_scenario *s = fi_scenarios; s->name; s++) printf("%-12s %s\n", s->name, s->help);
  return 0;
}

static int build_sites(const options *o, int **calls, long *ncalls, site **out, long *total) {
  long n = 0;
  for (int r = 0; r < o->ranks; r++) n += ncalls[r] * 3;
  site *s = malloc((size_t)(n ? n : 1) * sizeof *s);
  if (s == NULL) return -1;
  *total = 0;
  for (int r = 0; r < o->ranks; r++)
    for (long k = 1; k <= ncalls[r]; k++)
      for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
        if (o->modes & modes[m].bit) {
          int call = calls[r][k - 1];
          int waits = modes[m].bit == MODE_KILL || call == MORI_FI_CALL_hipStreamWaitValue32 ||
                      call == MORI_FI_CALL_hipStreamWriteValue32;
          s[(*total)++] = (site){r, modes[m].bit, call, k, waits};
        }
  *out = s;
  return 0;
}

int fi_cmd_sweep(int argc, char **argv) {
  struct sweep_args a = {.ranks = 2, .jobs = 2, .deadline_ms = 20000};
  int rc = cli_parse(&fi_sweep_command, &a, argc, argv);
  if (rc != 0) return rc == CLI_EXIT_HELP ? 0 : rc;
  if (a.list) return list();
  options o = {.ranks = a.ranks, .modes = MODE_TRANSIENT | MODE_PERSISTENT, .jobs = a.jobs,
               .deadline_ms = a.deadline_ms, .verbose = a.verbose};
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
  if (find_preload(&o) != 0) {
    fprintf(stderr, "sweep FAILED: no fault shim at %s (set MORI_FI_PRELOAD)\n", o.preload);
    return 2;
  }
  snprintf(o.dir, sizeof o.dir, "/tmp/mori-fi-sweep-XXXXXX");
  if (mkdtemp(o.dir) == NULL) return 2;
  int **calls = calloc((size_t)o.ranks, sizeof *calls);
  long *ncalls = calloc((size_t)o.ranks, sizeof *ncalls), total = 0;
  site *sites = NULL;
  tally t = {0};
  double t0 = now_s();
  rc = calls && ncalls ? baseline(&o, calls, ncalls) : -1;
  if (rc == 0) rc = build_sites(&o, calls, ncalls, &sites, &total);
  if (rc == 0) {
    long per = 0;
    for (int r = 0; r < o.ranks; r++) per += ncalls[r];
    printf("sweep: scenario %s, %d ranks, %ld call sites, %ld runs, %d jobs\n", o.scenario->name,
           o.ranks, per, total, o.jobs);
    fflush(stdout);
    rc = loop(&o, sites, total, &t);
  }
  for (int r = 0; calls && r < o.ranks; r++) free(calls[r]);
  remove_dir(o.dir);
  free(calls);
  free(ncalls);
  free(sites);
  if (rc != 0) return 2;
  if (t.misreported)
    printf("sweep: %ld runs where the failing rank's error named neither the call nor the "
           "injection\n", t.misreported);
  printf("sweep: %ld runs absorbed the fault (the rank succeeded), %.1f s\n", t.absorbed,
         now_s() - t0);
  printf("sweep: scenario=%s ranks=%d runs=%ld injected=%ld crashes=%ld hangs=%ld leaks=%ld\n",
         o.scenario->name, o.ranks, t.runs, t.injected, t.crashes, t.hangs, t.leaks);
  return t.crashes || t.hangs || t.leaks || t.misreported ? 1 : 0;
}
