/*
 * test_teardown_route.c - the route a teardown, and a barrier, take
 * through the core's files.  The core is built a second time with
 * -finstrument-functions (libmori_core_traced: core/src and fsm/, less the
 * utilities error.c and config.c), and the calling thread's calls and
 * returns are recorded while mori_symm_free (or mori_symm_release_all)
 * runs on a block holding one window of two ranks after a watched
 * barrier, or while a second watched barrier runs on such a window.  Each
 * recorded function is mapped to its source file (dladdr, then addr2line
 * over the library's debug information), and the walk, the files the
 * running code is in, consecutive repeats merged, is printed.
 *
 * The rule it pins for a teardown: it is one unwind of the ledger, so the
 * walk calls into no file twice, apart from the driver (alloc/ledger.c,
 * which unwinds, and fsm/'s tables: fsm.c, which orders the ledger and
 * calls back into it, and lifecycle.c, the window life's and the watchdog
 * entries' setters).  release_all is checked up to its last call, which
 * releases what the process holds beyond any block (the watchdog thread,
 * the devices' events, modules and private streams).
 *
 * For a barrier: signal.c plans it and asks its engines through their
 * interface (signal/engine.h), each question a call that returns to
 * signal.c, the file the barrier returns to.  The rules: signal.c enters
 * no other file of signal/ but an engine's (engine_*.c: the watchdog is
 * the memop engine's), and apart from signal.c (and the driver) the walk
 * enters no file twice within one question: no file is entered from two
 * files, none again while it runs (a call back up), and nothing calls
 * back into signal.c.  A file asked twice by the same file (the memop
 * engine's watchdog entry, begun before the waits and ended after them)
 * is one walk down, not a walk back.  Both engines are recorded
 * (MORI_SYMM_SIGNAL_ENGINE=memop, kernel), and the automatic one.
 *
 * A rendezvous is recorded too (mori_symm_rendezvous of two ranks): no
 * file is entered while it is running already, but by the driver
 * (driver.c), which calls each step back in the file that drives the
 * machine (reentered()).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ranks.h"

#define MiB ((size_t)1 << 20)

/* ---- the recorder ---- */

enum { MAX_EVENTS = 1 << 16 };
static struct {
  void *fn;
  int enter;
} events[MAX_EVENTS];
static int nevents, overflow, recording;
static pthread_t recorder;

#define NO_TRACE __attribute__((no_instrument_function))

NO_TRACE void __cyg_profile_func_enter(void *fn, void *site);
NO_TRACE void __cyg_profile_func_exit(void *fn, void *site);

NO_TRACE static void note(void *fn, int enter) {
  if (!__atomic_load_n(&recording, __ATOMIC_ACQUIRE) || !pthread_equal(pthread_self(), recorder))
    return;
  if (nevents == MAX_EVENTS) {
    overflow = 1;
    return;
  }
  events[nevents].fn = fn;
  events[nevents++].enter = enter;
}

void __cyg_profile_func_enter(void *fn, void *site) {
  (void)site;
  note(fn, 1);
}

void __cyg_profile_func_exit(void *fn, void *site) {
  (void)site;
  note(fn, 0);
}

static void record_start(void) {
  nevents = overflow = 0;
  recorder = pthread_self();
  __atomic_store_n(&recording, 1, __ATOMIC_RELEASE);
}

static void record_stop(void) { __atomic_store_n(&recording, 0, __ATOMIC_RELEASE); }

/* ---- functions to files ---- */

enum { MAX_FNS = 512 };
static struct {
  void *fn;
  char name[96], file[64], folder[64]; /* folder: the file's, by its name ("signal") */
} fns[MAX_FNS];
static int nfns;

static int fn_index(void *fn) {
  for (int i = 0; i < nfns; i++)
    if (fns[i].fn == fn) return i;
  return -1;
}

/* The name and source file of every distinct recorded function, through
 * addr2line over the traced library (one run for all of them). */
static int resolve(char *msg, size_t msglen) {
  nfns = 0;
  for (int i = 0; i < nevents; i++) {
    if (fn_index(events[i].fn) >= 0) continue;
    if (nfns == MAX_FNS) return snprintf(msg, msglen, "more than %d functions", MAX_FNS), 1;
    fns[nfns++].fn = events[i].fn;
  }
  if (nfns == 0) return snprintf(msg, msglen, "nothing recorded"), 1;
  Dl_info info;
  if (dladdr(fns[0].fn, &info) == 0 || info.dli_fname == NULL)
    return snprintf(msg, msglen, "dladdr found no object for %p", fns[0].fn), 1;
  char cmd[64 + 24 * MAX_FNS];
  int len = snprintf(cmd, sizeof cmd, "addr2line -f -e '%s'", info.dli_fname);
  for (int i = 0; i < nfns; i++)
    len += snprintf(cmd + len, sizeof cmd - (size_t)len, " 0x%lx",
                    (unsigned long)((char *)fns[i].fn - (char *)info.dli_fbase));
  FILE *p = popen(cmd, "r");
  if (p == NULL) return snprintf(msg, msglen, "cannot run addr2line"), 1;
  char line[512];
  int i = 0;
  for (; i < nfns && fgets(fns[i].name, sizeof fns[i].name, p) != NULL &&
         fgets(line, sizeof line, p) != NULL;
       i++) {
    fns[i].name[strcspn(fns[i].name, "\n")] = '\0';
    line[strcspn(line, ":\n")] = '\0';
    char *slash = strrchr(line, '/');
    snprintf(fns[i].file, sizeof fns[i].file, "%s", slash ? slash + 1 : line);
    if (slash != NULL) *slash = '\0';
    const char *up = slash ? strrchr(line, '/') : NULL;
    snprintf(fns[i].folder, sizeof fns[i].folder, "%s", up ? up + 1 : "");
  }
  int status = pclose(p);
  if (i < nfns || status != 0)
    return snprintf(msg, msglen, "addr2line answered %d of %d (status %d)", i, nfns, status), 1;
  return 0;
}

/* ---- the walk ---- */

static int is_driver(const char *file) {
  return strcmp(file, "ledger.c") == 0 || strcmp(file, "fsm.c") == 0 ||
         strcmp(file, "lifecycle.c") == 0;
}

/* The walk: the file of the running function after every call and return
 * ("api" outside the core), consecutive repeats merged, up to the call of
 * the function named `stop` (NULL: to the end).  *reentries counts the
 * calls into a file (not the driver) that the walk had entered by an
 * earlier call, and names them in `which`. */
static void walk(const char *stop, char *out, size_t n, int *reentries, char *which, size_t wn) {
  const char *stack[256], *seq[4096];
  const char *entered[64];
  int depth = 0, nseq = 0, nentered = 0;
  size_t len = 0, wlen = 0;
  *reentries = 0;
  out[0] = which[0] = '\0';
  seq[nseq++] = "api";
  for (int i = 0; i < nevents; i++) {
    int f = fn_index(events[i].fn);
    const char *file = fns[f].file;
    const char *caller = depth > 0 ? stack[depth - 1] : "api";
    if (stop != NULL && events[i].enter && strcmp(fns[f].name, stop) == 0) break;
    if (events[i].enter) {
      if (depth < 256) stack[depth] = file;
      depth++;
      if (strcmp(file, caller) != 0 && !is_driver(file)) {
        int seen = 0;
        for (int k = 0; k < nentered; k++) seen |= strcmp(entered[k], file) == 0;
        if (seen) {
          ++*reentries;
          wlen += (size_t)snprintf(which + wlen, wlen < wn ? wn - wlen : 0, "%s%s",
                                   wlen ? ", " : "", file);
        } else if (nentered < 64) {
          entered[nentered++] = file;
        }
      }
    } else if (depth > 0) {
      depth--;
    }
    const char *now = depth > 0 ? stack[depth - 1] : "api";
    if (nseq < 4096 && strcmp(seq[nseq - 1], now) != 0) seq[nseq++] = now;
  }
  for (int i = 0; i < nseq && len < n; i++)
    len += (size_t)snprintf(out + len, n - len, "%s%s", i ? " -> " : "", seq[i]);
}

/* The barrier's rules.  signal.c (the hub, the file the barrier returns
 * to) asks the other files of its folder only as engines (engine_*.c,
 * through their interface): the watchdog is the memop engine's.  Every
 * call the hub makes starts a question; within one, each file (not the
 * driver) has one caller file and is entered only while it is not
 * running already.  *backs counts the calls that break either rule, named
 * "caller -> file" in `which`. */
static void questions(const char *hub, int *backs, char *which, size_t wn) {
  int stack[256], depth = 0, n = 0;
  const char *file_of[64], *caller_of[64], *hub_folder = "";
  size_t wlen = 0;
  *backs = 0;
  which[0] = '\0';
  for (int i = 0; i < nevents; i++) {
    int f = fn_index(events[i].fn);
    const char *file = fns[f].file, *caller = "api";
    if (depth > 0) caller = fns[stack[depth <= 256 ? depth - 1 : 255]].file;
    if (!events[i].enter) {
      depth -= depth > 0;
      continue;
    }
    if (strcmp(file, hub) == 0) hub_folder = fns[f].folder;
    if (strcmp(file, caller) != 0 && !is_driver(file)) {
      int asked = strcmp(caller, hub) == 0, back = 0, k = 0;
      if (asked) n = 0; /* a new question */
      back |= asked && strcmp(fns[f].folder, hub_folder) == 0 && strncmp(file, "engine_", 7) != 0;
      for (int d = 0; d < depth && d < 256; d++) back |= strcmp(fns[stack[d]].file, file) == 0;
      while (k < n && strcmp(file_of[k], file) != 0) k++;
      if (k < n) back |= strcmp(caller_of[k], caller) != 0;
      else if (n < 64) file_of[n] = file, caller_of[n++] = caller;
      if (back) {
        ++*backs;
        wlen += (size_t)snprintf(which + wlen, wlen < wn ? wn - wlen : 0, "%s%s -> %s",
                                 wlen ? ", " : "", caller, file);
      }
    }
    if (depth < 256) stack[depth] = f;
    depth++;
  }
}

/* The rendezvous's rule: no file is entered while it is running already,
 * but the driver (driver.c, and fsm/'s tables), which runs a machine's
 * steps by calling back into the file that called it: rendezvous.c for
 * the window, block.c for the block's export inside the window's ATTACH.
 * *backs counts the calls that break it, named "caller -> file" in
 * `which`. */
static void reentered(int *backs, char *which, size_t wn) {
  int stack[256], depth = 0;
  size_t wlen = 0;
  *backs = 0;
  which[0] = '\0';
  for (int i = 0; i < nevents; i++) {
    int f = fn_index(events[i].fn);
    const char *file = fns[f].file, *caller = "api";
    if (depth > 0) caller = fns[stack[depth <= 256 ? depth - 1 : 255]].file;
    if (!events[i].enter) {
      depth -= depth > 0;
      continue;
    }
    /* the file that called the driver running now: its steps' file */
    const char *driven = NULL;
    if (strcmp(caller, "driver.c") == 0)
      for (int d = depth - 1; d > 0 && d < 256 && driven == NULL; d--)
        if (strcmp(fns[stack[d]].file, "driver.c") != 0) driven = fns[stack[d]].file;
    if (strcmp(file, caller) != 0 && !is_driver(file) && strcmp(file, "driver.c") != 0 &&
        !(driven != NULL && strcmp(file, driven) == 0)) {
      int back = 0;
      for (int d = 0; d < depth && d < 256; d++) back |= strcmp(fns[stack[d]].file, file) == 0;
      if (back) {
        ++*backs;
        wlen += (size_t)snprintf(which + wlen, wlen < wn ? wn - wlen : 0, "%s%s -> %s",
                                 wlen ? ", " : "", caller, file);
      }
    }
    if (depth < 256) stack[depth] = f;
    depth++;
  }
}

/* ---- the ranks ---- */

enum what { FREE, RELEASE_ALL, BARRIER, RENDEZVOUS };

typedef struct plan {
  enum what what;
  const char *engine; /* BARRIER: MORI_SYMM_SIGNAL_ENGINE */
} plan;

/* A second watched barrier on w, recorded; its route printed and held to
 * the barrier's rule.  The kernel engine must have launched one kernel
 * for it, the memory operations none. */
static int barrier_route(const mori_rank_ctx *ctx, const plan *pl, mori_window *w, char *msg,
                         size_t msglen) {
  mori_symm_signal_stats before, after;
  mori_symm_signal_stats_get(&before);
  record_start();
  int rc = mori_window_barrier(w, 0, NULL, 60000);
  record_stop();
  CHECK(rc == 0, "barrier: %s", mori_last_error());
  mori_symm_signal_stats_get(&after);
  long want = strcmp(pl->engine, "kernel") == 0;
  CHECK(after.kernels - before.kernels == want, "MORI_SYMM_SIGNAL_ENGINE=%s: %ld kernels, want %ld",
        pl->engine, after.kernels - before.kernels, want);
  CHECK(!overflow, "more than %d calls recorded", MAX_EVENTS);
  if (resolve(msg, msglen) != 0) return 1;
  char route[4096], which[512], unused[512];
  int backs = 0, reentries = 0;
  walk(NULL, route, sizeof route, &reentries, unused, sizeof unused);
  printf("rank %d barrier (%s) route: %s\n", ctx->rank, pl->engine, route);
  fflush(stdout);
  questions("signal.c", &backs, which, sizeof which);
  CHECK(backs == 0, "%d calls break the route's rules (%s); route: %s", backs, which, route);
  return 0;
}

static int route_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const plan *pl = ctx->arg;
  void *base = NULL;
  mori_window *w = NULL;
  if (pl->engine != NULL) setenv("MORI_SYMM_SIGNAL_ENGINE", pl->engine, 1);
  CHECK(mori_shim_select("sim") == 0, "%s", mori_shim_message());
  CHECK(mori_symm_alloc(MiB, ctx->rank, &base) == 0, "alloc: %s", mori_last_error());
  if (pl->what == RENDEZVOUS) record_start();
  int rrc = mori_symm_rendezvous(base, "route", ctx->rank, ctx->world, ctx->store, &w, NULL);
  if (pl->what == RENDEZVOUS) record_stop();
  CHECK(rrc == 0, "rendezvous: %s", mori_last_error());
  if (pl->what == RENDEZVOUS) {
    CHECK(!overflow, "more than %d calls recorded", MAX_EVENTS);
    if (resolve(msg, msglen) != 0) return 1;
    char route[4096], which[512], unused[512];
    int backs = 0, reentries = 0;
    walk(NULL, route, sizeof route, &reentries, unused, sizeof unused);
    printf("rank %d rendezvous route: %s\n", ctx->rank, route);
    fflush(stdout);
    reentered(&backs, which, sizeof which);
    CHECK(backs == 0, "%d calls enter a file already running (%s); route: %s", backs, which,
          route);
    CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
    return 0;
  }
  /* a watched barrier: the watchdog has had an entry for this window */
  CHECK(mori_window_barrier(w, 0, NULL, 60000) == 0, "barrier: %s", mori_last_error());
  if (pl->what == BARRIER) {
    if (barrier_route(ctx, pl, w, msg, msglen) != 0) return 1;
    CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
    return 0;
  }
  record_start();
  int rc = pl->what == FREE ? mori_symm_free(base) : mori_symm_release_all();
  record_stop();
  CHECK(rc == 0, "%s: %s", pl->what == FREE ? "free" : "release_all", mori_last_error());
  CHECK(!overflow, "more than %d calls recorded", MAX_EVENTS);
  if (resolve(msg, msglen) != 0) return 1;
  char route[4096], which[512];
  int reentries = 0;
  /* release_all: the process's signal objects go after every block */
  walk(pl->what == FREE ? NULL : "mori__signal_release_all", route, sizeof route, &reentries,
       which, sizeof which);
  printf("rank %d %s route: %s\n", ctx->rank, pl->what == FREE ? "free" : "release_all", route);
  fflush(stdout);
  CHECK(reentries == 0, "%d calls into a file already entered (%s); route: %s", reentries, which,
        route);
  return 0;
}

static void run(enum what what, const char *engine) {
  plan pl = {what, engine};
  ranks_run(2, route_rank, &pl, 0);
}

static void rendezvous_enters_no_running_file_but_by_its_driver(void **state) {
  (void)state;
  run(RENDEZVOUS, NULL);
}

static void free_calls_into_no_file_twice_but_the_driver(void **state) {
  (void)state;
  run(FREE, NULL);
}

static void release_all_calls_into_no_file_twice_but_the_driver(void **state) {
  (void)state;
  run(RELEASE_ALL, NULL);
}

static void memop_barrier_walks_down_from_signal_c_and_back(void **state) {
  (void)state;
  run(BARRIER, "memop");
}

static void kernel_barrier_walks_down_from_signal_c_and_back(void **state) {
  (void)state;
  run(BARRIER, "kernel");
}

static void automatic_barrier_walks_down_from_signal_c_and_back(void **state) {
  (void)state;
  run(BARRIER, "auto");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rendezvous_enters_no_running_file_but_by_its_driver),
      cmocka_unit_test(free_calls_into_no_file_twice_but_the_driver),
      cmocka_unit_test(release_all_calls_into_no_file_twice_but_the_driver),
      cmocka_unit_test(memop_barrier_walks_down_from_signal_c_and_back),
      cmocka_unit_test(kernel_barrier_walks_down_from_signal_c_and_back),
      cmocka_unit_test(automatic_barrier_walks_down_from_signal_c_and_back),
  };
  return mori_run_tests(argc, argv, tests);
}
