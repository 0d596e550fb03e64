/*
 * test_teardown_route.c - the route a teardown takes through the core's
 * files.  The core is built a second time with -finstrument-functions
 * (libmori_core_traced: core/src and fsm/, less the utilities error.c and
 * config.c), and the calling thread's calls and returns are recorded while
 * mori_symm_free (or mori_symm_release_all) runs on a block holding one
 * window of two ranks after a watched barrier.  Each recorded function is
 * mapped to its source file (dladdr, then addr2line over the library's
 * debug information), and the walk, the files the running code is in,
 * consecutive repeats merged, is printed.
 *
 * The rule it pins: a teardown is one unwind of the ledger, so the walk
 * calls into no file twice, apart from the driver (alloc/ledger.c, which
 * unwinds, and fsm/'s tables: fsm.c, which orders the ledger and calls
 * back into it, and lifecycle.c, the window life's and the watchdog
 * entries' setters).  release_all is checked up to its last call, which
 * releases what the process holds beyond any block (the watchdog thread,
 * its events, the private streams).
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
  char name[96], file[64];
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
    const char *slash = strrchr(line, '/');
    snprintf(fns[i].file, sizeof fns[i].file, "%s", slash ? slash + 1 : line);
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

/* ---- the ranks ---- */

enum what { FREE, RELEASE_ALL };

typedef struct plan {
  enum what what;
} plan;

static int route_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const plan *pl = ctx->arg;
  void *base = NULL;
  mori_window *w = NULL;
  CHECK(mori_shim_select("sim") == 0, "%s", mori_shim_message());
  CHECK(mori_symm_alloc(MiB, ctx->rank, &base) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(base, "route", ctx->rank, ctx->world, ctx->store, &w, NULL) == 0,
        "rendezvous: %s", mori_last_error());
  /* a watched barrier: the watchdog has had an entry for this window */
  CHECK(mori_window_barrier(w, 0, NULL, 60000) == 0, "barrier: %s", mori_last_error());
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

static void run(enum what what) {
  plan pl = {what};
  ranks_run(2, route_rank, &pl, 0);
}

static void free_calls_into_no_file_twice_but_the_driver(void **state) {
  (void)state;
  run(FREE);
}

static void release_all_calls_into_no_file_twice_but_the_driver(void **state) {
  (void)state;
  run(RELEASE_ALL);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(free_calls_into_no_file_twice_but_the_driver),
      cmocka_unit_test(release_all_calls_into_no_file_twice_but_the_driver),
  };
  return mori_run_tests(argc, argv, tests);
}
