/*
 * scenarios.c - the rank bodies fault sweeps run, and `mori-fi
 * run-scenario S --ranks N`, which runs one of them under mori_launch and
 * prints one line per rank.  A rank stops at its first error, tears down
 * whatever is left, and reports what it leaked.
 */
#include "fi_tool.h"

#include <dirent.h>
#include <stddef.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mori/fi.h"
#include "mori/symm.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* The rendezvous a scenario's ranks meet in, in order: a rank that fails
 * tells every one it has not reached yet, as the core tells the one it
 * fails in (the abort key), so that peers stop waiting for it now rather
 * than at their timeout. */
typedef struct fi_meeting {
  const char *group;
  int reversed; /* ranks numbered the other way round in this group */
} meeting;

/* What a rank did: the first error (its step, the library's message, when
 * it came), and the last step in which the fault shim injected a fault
 * before that error, which must be the step that failed (an error that
 * surfaces in a later API call than the one that made the failing call is
 * a defect). */
typedef struct fi_outcome {
  char err[768];
  const char *step, *fault_step, *current;
  long injected_before;
  double t_err;
  const mori_rank_ctx *ctx;
  const meeting *plan; /* NULL-group terminated */
  int next_meeting;    /* the first one the library has not been told about */
  /* At the first error, once the peers were told: this rank's calls so far
   * and every rank's, "c0,c1,...": how many calls a peer needed to notice
   * is a bound no loaded machine can stretch, as it stretches time. */
  long calls;
  char seen[256];
  enum fi_twist twist;
} outcome;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void step_begin(outcome *o, const char *step) {
  o->current = step;
  o->injected_before = mori_fi_injected();
}

static void tell_the_rest(const outcome *o) {
  const mori_rank_ctx *c = o->ctx;
  for (int k = o->next_meeting; o->plan && o->plan[k].group; k++) {
    int rank = o->plan[k].reversed ? c->world - 1 - c->rank : c->rank;
    (void)mori_symm_rendezvous_abort(o->plan[k].group, rank, c->world, c->store, o->err);
  }
}

/* The selftests' trigger: the last fault hit hipMemMap. */
static int fault_hit_map(void) {
  const char *f = mori_fi_last_fault();
  return f && strcmp(f, "hipMemMap") == 0;
}

static void note_calls(outcome *o) {
  size_t n = 0;
  o->calls = o->ctx ? mori_fi_progress(o->ctx->rank) : -1;
  for (int r = 0; o->ctx && r < o->ctx->world && n + 24 < sizeof o->seen; r++)
    n += (size_t)snprintf(o->seen + n, sizeof o->seen - n, "%s%ld", r ? "," : "",
                          mori_fi_progress(r));
}

/* Ends the current step; rc != 0 means it failed with the library's
 * message (detail, if not NULL, replaces it). */
static int step_end(outcome *o, int rc, const char *detail) {
  /* the last step that met a fault before the first error: under a
   * persistent fault an earlier step may have absorbed one legitimately */
  if (o->err[0] == '\0' && mori_fi_injected() > o->injected_before) o->fault_step = o->current;
  if (rc == 0) return 0;
  if (o->err[0] == '\0') {
    snprintf(o->err, sizeof o->err, "%s: %s", o->current, detail ? detail : mori_last_error());
    o->step = o->current;
    o->t_err = now_s();
    if (o->ctx && o->ctx->store && !(o->twist == FI_TWIST_UNTOLD && fault_hit_map()))
      tell_the_rest(o);
    note_calls(o);
  }
  return -1;
}

#define STEP(o, expr, step)                                                          \
  do {                                                                               \
    step_begin((o), (step));                                                         \
    if (step_end((o), (expr) != 0, NULL) != 0) return -1;                           \
  } while (0)

/* A rendezvous: the library tells its peers if it fails there. */
#define MEET(o, expr, step)                                                          \
  do {                                                                               \
    (o)->next_meeting++;                                                             \
    STEP((o), (expr), (step));                                                       \
  } while (0)

/* A runtime call the scenario makes itself (copies of test data). */
static int hip_step(outcome *o, hipError_t e, const char *call) {
  char detail[640];
  if (e != hipSuccess)
    snprintf(detail, sizeof detail, "%s failed: %s (%d): %s", call, mori_hipGetErrorName(e),
             (int)e, mori_shim_message());
  return step_end(o, e != hipSuccess, detail);
}

#define HIP_STEP(o, expr, step, call)                                                \
  do {                                                                               \
    step_begin((o), (step));                                                         \
    if (hip_step((o), (expr), (call)) != 0) return -1;                               \
  } while (0)

/* A failure the scenario finds itself (data that does not read back). */
static int check_failed(outcome *o, const char *step, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int check_failed(outcome *o, const char *step, const char *fmt, ...) {
  char detail[640];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  step_begin(o, step);
  return step_end(o, -1, detail);
}

/* The step before which a rank has no store to tell its peers through. */
int fi_step_untold(const char *step) {
  return strcmp(step, "shim") == 0 || strcmp(step, "store_open") == 0;
}

/* Steps whose waits are GPU stream waits: a peer that failed cannot end
 * them early (no store abort reaches a stream), so a peer waiting there
 * fails by its wait's timeout, by design. */
int fi_step_waits_on_gpu(const char *step) {
  return strncmp(step, "barrier", 7) == 0 || strncmp(step, "signals_", 8) == 0;
}

/* basic: alloc -> rendezvous -> barrier -> free */
static const meeting basic_plan[] = {{"world", 0}, {NULL, 0}};
static int basic(const mori_rank_ctx *ctx, outcome *o) {
  void *base = NULL;
  mori_window *w = NULL;
  step_begin(o, "alloc");
  int rc = mori_symm_alloc(MiB, ctx->rank, &base);
  if (o->twist == FI_TWIST_LATE && fault_hit_map()) rc = 0; /* the error is dropped here */
  if (step_end(o, rc, NULL) != 0) return -1;
  MEET(o, mori_symm_rendezvous(base, "world", ctx->rank, ctx->world, ctx->store, &w, NULL),
       "rendezvous");
  STEP(o, mori_window_barrier(w, 0, NULL, 0), "barrier");
  STEP(o, mori_symm_free(base), "free");
  return 0;
}

/* two-groups: one block in two groups, ranks numbered the other way round
 * in the second */
static const meeting two_groups_plan[] = {{"alpha", 0}, {"beta", 1}, {NULL, 0}};
static int two_groups(const mori_rank_ctx *ctx, outcome *o) {
  void *base = NULL;
  mori_window *a = NULL, *b = NULL;
  STEP(o, mori_symm_alloc(MiB, ctx->rank, &base), "alloc");
  MEET(o, mori_symm_rendezvous(base, "alpha", ctx->rank, ctx->world, ctx->store, &a, NULL),
       "rendezvous_alpha");
  MEET(o, mori_symm_rendezvous(base, "beta", ctx->world - 1 - ctx->rank, ctx->world, ctx->store,
                               &b, NULL),
       "rendezvous_beta");
  STEP(o, mori_window_barrier(a, 0, NULL, 0), "barrier_alpha");
  STEP(o, mori_window_barrier(b, 0, NULL, 0), "barrier_beta");
  STEP(o, mori_symm_free(base), "free");
  return 0;
}

/* interior: MemPool hands out pointers inside blocks; both rendezvous on
 * interior pointers must report their offsets, and a word written at that
 * offset of every peer's slot must land there.  The blocks are allocated
 * on a stream (the default one), as the torch adapter allocates on torch's
 * current stream: their zeroing's event is part of the sweep. */
static const meeting interior_plan[] = {{"pool", 0}, {"pool", 0}, {NULL, 0}};
static int interior(const mori_rank_ctx *ctx, outcome *o) {
  static const size_t off_a = 4 * KiB, off_b = 12 * KiB + 64;
  void *a = NULL, *b = NULL;
  mori_window *wa = NULL, *wb = NULL;
  size_t got_a = 0, got_b = 0;
  STEP(o, mori_symm_alloc_on_stream(MiB, ctx->rank, NULL, &a), "alloc_a");
  STEP(o, mori_symm_alloc_on_stream(MiB + 4 * KiB, ctx->rank, NULL, &b), "alloc_b");
  MEET(o, mori_symm_rendezvous((char *)a + off_a, "pool", ctx->rank, ctx->world, ctx->store, &wa,
                               &got_a),
       "rendezvous_a");
  MEET(o, mori_symm_rendezvous((char *)b + off_b, "pool", ctx->rank, ctx->world, ctx->store, &wb,
                               &got_b),
       "rendezvous_b");
  if (got_a != off_a || got_b != off_b)
    return check_failed(o, "offsets", "offsets %zu and %zu, expected %zu and %zu", got_a, got_b,
                        off_a, off_b);
  void *const *peers = mori_window_buffer_ptrs(wa);
  uint32_t mine = 0xC0DE0000u | (uint32_t)ctx->rank, seen[64];
  for (int p = 0; p < ctx->world; p++)
    HIP_STEP(o, mori_hipMemcpy((char *)peers[p] + off_a + 4 * (size_t)ctx->rank, &mine, 4,
                               hipMemcpyHostToDevice),
             "write_peer_word", "hipMemcpy");
  STEP(o, mori_window_barrier(wa, 0, NULL, 0), "barrier_a");
  STEP(o, mori_window_barrier(wb, 0, NULL, 60000), "barrier_b"); /* bounded: the watchdog's */
  size_t n = (size_t)(ctx->world < 64 ? ctx->world : 64);
  HIP_STEP(o, mori_hipMemcpy(seen, (char *)a + off_a, 4 * n, hipMemcpyDeviceToHost),
           "read_own_words", "hipMemcpy");
  for (size_t q = 0; q < n; q++)
    if (seen[q] != (0xC0DE0000u | (uint32_t)q))
      return check_failed(o, "read_own_words", "word from rank %zu reads 0x%08x", q, seen[q]);
  STEP(o, mori_symm_free(b), "free_b");
  STEP(o, mori_symm_free(a), "free_a");
  return 0;
}

/* cycles: what `mori-symm cycles` does, twice: alloc -> rendezvous ->
 * barrier -> free, with the device memory in use read (hipMemGetInfo)
 * before and after; none of it may stay in use.  A process that keeps
 * warm takes its first block back at the second alloc, and gives what it
 * keeps back with release_all before the second read. */
static const meeting cycles_plan[] = {{"cycles", 0}, {"cycles", 0}, {NULL, 0}};
static int cycles(const mori_rank_ctx *ctx, outcome *o) {
  size_t free_before = 0, free_after = 0, total = 0;
  HIP_STEP(o, mori_hipMemGetInfo(&free_before, &total), "memory_before", "hipMemGetInfo");
  for (int i = 0; i < 2; i++) {
    void *base = NULL;
    mori_window *w = NULL;
    STEP(o, mori_symm_alloc(MiB, ctx->rank, &base), "alloc");
    MEET(o, mori_symm_rendezvous(base, "cycles", ctx->rank, ctx->world, ctx->store, &w, NULL),
         "rendezvous");
    STEP(o, mori_window_barrier(w, 0, NULL, 0), "barrier");
    STEP(o, mori_symm_free(base), "free");
  }
  if (mori_symm_keep_warm()) STEP(o, mori_symm_release_all(), "release_warm");
  HIP_STEP(o, mori_hipMemGetInfo(&free_after, &total), "memory_after", "hipMemGetInfo");
  if (free_after < free_before)
    return check_failed(o, "memory_after", "%zu bytes of device memory still in use",
                        free_before - free_after);
  return 0;
}

/* signals: every signal form, eager and captured into a graph (the sim's
 * capture) and replayed: a barrier, a put/wait ring, a captured barrier
 * and ring replayed twice, a barrier.  The automatic engine runs the
 * captured calls as kernels; MORI_SYMM_SIGNAL_ENGINE=kernel or memop puts
 * every call on one engine. */
static const meeting signals_plan[] = {{"signals", 0}, {NULL, 0}};
static int signals(const mori_rank_ctx *ctx, outcome *o) {
  void *base = NULL;
  mori_window *w = NULL;
  hipStream_t s = NULL;
  mori_sim_graph *g = NULL;
  int next = (ctx->rank + 1) % ctx->world, prev = (ctx->rank + ctx->world - 1) % ctx->world;
  STEP(o, mori_symm_alloc(MiB, ctx->rank, &base), "alloc");
  MEET(o, mori_symm_rendezvous(base, "signals", ctx->rank, ctx->world, ctx->store, &w, NULL),
       "rendezvous");
  STEP(o, mori_window_barrier(w, 0, NULL, 0), "barrier");
  STEP(o,
       mori_window_put_signal(w, next, 1, NULL, 0) || mori_window_wait_signal(w, prev, 1, NULL, 0),
       "signals_ring");
  HIP_STEP(o, mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking), "stream",
           "hipStreamCreateWithFlags");
  HIP_STEP(o, mori_sim_begin_capture(s), "capture", "mori_sim_begin_capture");
  STEP(o, mori_window_barrier(w, 2, s, 0) || mori_window_put_signal(w, next, 3, s, 0) ||
              mori_window_wait_signal(w, prev, 3, s, 0),
       "signals_captured");
  HIP_STEP(o, mori_sim_end_capture(s, &g), "capture_end", "mori_sim_end_capture");
  for (int i = 0; i < 2; i++) {
    HIP_STEP(o, mori_sim_graph_launch(g, s), "signals_replay", "mori_sim_graph_launch");
    HIP_STEP(o, mori_hipStreamSynchronize(s), "signals_replay", "hipStreamSynchronize");
  }
  mori_sim_graph_destroy(g);
  HIP_STEP(o, mori_hipStreamDestroy(s), "stream_destroy", "hipStreamDestroy");
  STEP(o, mori_window_barrier(w, 0, NULL, 0), "barrier_after");
  STEP(o, mori_symm_free(base), "free");
  return 0;
}

/* heal: the dead rank (2 of 3 or more, 1 of 2) dies after the first
 * barrier, a replacement takes its place, and the survivors heal.  The
 * process the launcher started as that rank forks the rank's first life,
 * which dies of SIGKILL after the barrier, reaps it, and then goes on as
 * its replacement, holding nothing of the dead one's: so every rank the
 * launcher knows runs to its end and reports, the replacement too.  Only
 * the heal is swept: every process of the scenario starts with the fault
 * shim's schedule off (scenario_rank) and sets it again, its counts from
 * 0, where its part of the heal begins (a survivor's mori_window_heal,
 * the replacement's rendezvous), so that a rule's nth call is the nth of
 * the heal and what follows it: the data read through every slot, a
 * bounded barrier (the watchdog's, started over by the heal), the free. */
#define HEAL_WORDS 64
#define HEAL_DEATH_KEY "fi_heal/dead"

static int heal_dead_rank(int world) { return world > 2 ? 2 : 1; }

static void schedule_set(const char *spec) {
  char why[256];
  (void)mori_fi_control(spec, why, sizeof why); /* -1 without the fault shim: nothing to set */
}

static int heal_steps(const mori_rank_ctx *ctx, outcome *o);
static int armed_at_heal(const fi_scenario *s) { return s->steps == heal_steps; }

static uint32_t heal_pattern(int rank, int life, int i) {
  return 0x4ea10000u ^ (uint32_t)(life << 14) ^ (uint32_t)(rank << 8) ^ (uint32_t)i;
}

static hipError_t heal_fill(void *base, int rank, int life) {
  uint32_t words[HEAL_WORDS];
  for (int i = 0; i < HEAL_WORDS; i++) words[i] = heal_pattern(rank, life, i);
  return mori_hipMemcpy(base, words, sizeof words, hipMemcpyHostToDevice);
}

/* Every rank's words through its slot: the replacement's (life 1) at the
 * dead rank's. */
static int heal_check_data(outcome *o, mori_window *w, int world, int dead) {
  for (int p = 0; p < world; p++) {
    uint32_t words[HEAL_WORDS];
    HIP_STEP(o, mori_hipMemcpy(words, mori_window_buffer_ptrs(w)[p], sizeof words,
                               hipMemcpyDeviceToHost),
             "check_data", "hipMemcpy");
    for (int i = 0; i < HEAL_WORDS; i++)
      if (words[i] != heal_pattern(p, p == dead, i))
        return check_failed(o, "check_data", "rank %d's word %d reads 0x%08x", p, i, words[i]);
  }
  return 0;
}

/* What every rank does once its window is whole again. */
static int heal_after(const mori_rank_ctx *ctx, outcome *o, void *base, mori_window *w) {
  if (heal_check_data(o, w, ctx->world, heal_dead_rank(ctx->world))) return -1;
  STEP(o, mori_window_barrier(w, 0, NULL, 60000), "barrier_healed");
  STEP(o, mori_symm_free(base), "free");
  return 0;
}

/* alloc -> fill -> rendezvous -> barrier: the group before the death. */
static int heal_first_life(const mori_rank_ctx *ctx, outcome *o, void **base, mori_window **w) {
  STEP(o, mori_symm_alloc(MiB, ctx->rank, base), "alloc");
  HIP_STEP(o, heal_fill(*base, ctx->rank, 0), "fill", "hipMemcpy");
  MEET(o, mori_symm_rendezvous(*base, "heal", ctx->rank, ctx->world, ctx->store, w, NULL),
       "rendezvous");
  STEP(o, mori_window_barrier(*w, 0, NULL, 0), "barrier");
  return 0;
}

/* The death is in the store only once the dead process was reaped, so
 * the heal should find it gone; one that still says the rank is alive is
 * asked again for about a second, as a job would. */
static int heal_window(const mori_rank_ctx *ctx, mori_window *w, int dead) {
  int rc = MORI_ESTATE;
  for (int i = 0; i < 100 && rc == MORI_ESTATE; i++) {
    rc = mori_window_heal(w, dead, ctx->store);
    if (rc != MORI_ESTATE || strstr(mori_last_error(), "is alive") == NULL) break;
    struct timespec nap = {0, 10 * 1000000L};
    nanosleep(&nap, NULL);
  }
  return rc;
}

/* A heal that failed once it began (its error names its step) leaves the
 * window failed for good: a signal call is refused at once, with the
 * heal's error.  One that failed before (it had nothing to give back)
 * changed nothing. */
static int heal_left_window(mori_window *w, const char *heal_error, char *detail, size_t n) {
  snprintf(detail, n, "%s", heal_error);
  if (strstr(heal_error, "heal step ") == NULL) return 0;
  int rc = mori_window_barrier(w, 0, NULL, 1000);
  if (rc == MORI_ESTATE && strstr(mori_last_error(), "heal of rank") != NULL) return 0;
  snprintf(detail, n, "the failed heal left the window usable: a barrier returned %d (%.200s), "
           "not the heal's failure", rc, rc ? mori_last_error() : "passed");
  (void)mori_hipStreamSynchronize(NULL);
  return -1;
}

static int heal_survivor(const mori_rank_ctx *ctx, outcome *o) {
  void *base = NULL, *v = NULL;
  mori_window *w = NULL;
  size_t len = 0;
  char detail[640] = "";
  if (heal_first_life(ctx, o, &base, &w)) return -1;
  STEP(o, ctx->store->get(ctx->store, HEAL_DEATH_KEY, &v, &len, mori_symm_timeout_ms()),
       "await_death");
  free(v);
  schedule_set(getenv("MORI_FI"));
  step_begin(o, "heal");
  int rc = heal_window(ctx, w, heal_dead_rank(ctx->world));
  if (rc != 0) (void)heal_left_window(w, mori_last_error(), detail, sizeof detail);
  if (step_end(o, rc, detail) != 0) {
    (void)mori_symm_free(base); /* the failed window goes at free; the leak check judges it */
    return -1;
  }
  return heal_after(ctx, o, base, w);
}

/* The dead rank's first life, in a child: never returns. */
static void heal_die(const mori_rank_ctx *ctx, outcome *o) {
  void *base = NULL;
  mori_window *w = NULL;
  if (heal_first_life(ctx, o, &base, &w) == 0) raise(SIGKILL);
  _exit(3); /* its steps ran with the schedule off: a defect, which the replacement reports */
}

static int heal_replacement(const mori_rank_ctx *ctx, outcome *o) {
  void *base = NULL;
  mori_window *w = NULL;
  int status = 0;
  pid_t first = fork();
  if (first == 0) heal_die(ctx, o);
  if (first < 0 || waitpid(first, &status, 0) != first || !WIFSIGNALED(status) ||
      WTERMSIG(status) != SIGKILL)
    return check_failed(o, "first_life", "the rank's first life did not die of SIGKILL "
                        "(status %#x): it failed before the death", status);
  STEP(o, ctx->store->set(ctx->store, HEAL_DEATH_KEY, "1", 2), "tell_death");
  mori_symm_set_replacement(1);
  STEP(o, mori_symm_alloc(MiB, ctx->rank, &base), "alloc");
  HIP_STEP(o, heal_fill(base, ctx->rank, 1), "fill", "hipMemcpy");
  schedule_set(getenv("MORI_FI"));
  MEET(o, mori_symm_rendezvous(base, "heal", ctx->rank, ctx->world, ctx->store, &w, NULL),
       "rendezvous_replacement");
  return heal_after(ctx, o, base, w);
}

static const meeting heal_plan[] = {{"heal", 0}, {NULL, 0}};
static int heal_steps(const mori_rank_ctx *ctx, outcome *o) {
  if (ctx->world < 2) return check_failed(o, "heal", "a heal needs 2 ranks or more");
  return ctx->rank == heal_dead_rank(ctx->world) ? heal_replacement(ctx, o)
                                                 : heal_survivor(ctx, o);
}

/* Whatever the steps left (a rank that failed keeps its blocks): the
 * library's own teardown, a step of its own. */
#define STEP_TEARDOWN(o)                                                             \
  do {                                                                               \
    step_begin((o), "release_all");                                                  \
    (void)step_end((o), mori_symm_release_all() != 0, NULL);                         \
  } while (0)

/* What a selftest does wrong once its steps are over. */
static void twist_after_steps(enum fi_twist twist) {
  if (!fault_hit_map()) return;
  if (twist == FI_TWIST_LEAK) (void)open("/dev/null", O_RDONLY);
  if (twist == FI_TWIST_CRASH) raise(SIGSEGV);
  while (twist == FI_TWIST_HANG) pause();
}

/* Removes " key=value" from a report line (selftest-broken). */
static void drop_field(char *msg, const char *key) {
  char *field = strstr(msg, key), *next = field ? strchr(field + 1, ' ') : NULL;
  if (next) memmove(field, next, strlen(next) + 1);
}

/* One rank of the scenario ctx->arg: its steps, then everything torn down,
 * then one report line (FI_REPORT_FORMAT). */
static int scenario_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const fi_scenario *s = ctx->arg;
  int fds0 = mori_count_fds() - mori_fi_own_fds(); /* its trace file may be open already */
  mori_rank_ctx own = *ctx; /* the launcher left the store to us (store_in_rank) */
  outcome o = {.err = "", .ctx = &own, .plan = s->plan, .calls = -1, .twist = s->twist};
  if (armed_at_heal(s)) schedule_set(""); /* until the heal */
  step_begin(&o, "shim");
  int rc = mori_shim_select(getenv("MORI_SYMM_SHIM") ? getenv("MORI_SYMM_SHIM") : "sim");
  rc = step_end(&o, rc, mori_shim_message());
  if (rc == 0) {
    step_begin(&o, "store_open");
    rc = step_end(&o, mori_file_store_open(ctx->store_dir, &own.store), NULL);
    if (rc == 0) own.store->incarnation = ctx->incarnation;
  }
  if (rc == 0) (void)s->steps(&own, &o);
  twist_after_steps(s->twist);
  STEP_TEARDOWN(&o);
  if (own.store) own.store->destroy(own.store);
  mori_symm_stats st;
  mori_symm_stats_get(&st);
  long leaks = mori_shim_registry_total(), refused = mori_fi_refused();
  int fds = mori_count_fds() - mori_fi_own_fds() - fds0 - mori_shim_runtime_fds();
  if (leaks && getenv("MORI_FI_LEDGER_REPORT")) mori_shim_registry_report(stderr);
  const char *fault = mori_fi_last_fault();
  if (s->twist == FI_TWIST_UNNAMED && fault_hit_map() && o.err[0])
    snprintf(o.err, sizeof o.err, "something failed");
  snprintf(msg, msglen, FI_REPORT_FORMAT, o.err[0] ? "error" : "ok", mori_fi_injected(),
           fault ? fault : "-", leaks, refused, fds, st.windows, st.blocks,
           o.step ? o.step : "-", o.fault_step ? o.fault_step : "-", o.t_err, o.calls,
           o.seen[0] ? o.seen : "-", o.err[0] ? o.err : "-");
  if (s->twist == FI_TWIST_BROKEN && fault_hit_map()) drop_field(msg, " refused=");
  return o.err[0] || leaks || fds || st.windows || st.blocks;
}

const fi_scenario fi_scenarios[] = {
    {"basic", "alloc -> rendezvous -> barrier -> free", basic, basic_plan, FI_TWIST_NONE},
    {"two-groups", "one block in two groups (ranks reversed in the second), a barrier on each",
     two_groups, two_groups_plan, FI_TWIST_NONE},
    {"interior", "MemPool-style: two blocks allocated on a stream, rendezvous on interior "
                 "pointers, offsets and data checked",
     interior, interior_plan, FI_TWIST_NONE},
    {"cycles", "alloc -> rendezvous -> barrier -> free twice, the device memory in use read "
               "(hipMemGetInfo) before and after",
     cycles, cycles_plan, FI_TWIST_NONE},
    {"signals", "a barrier, a put/wait ring, both captured (sim) and replayed twice, a barrier: "
                "the kernel engine for captured calls (MORI_SYMM_SIGNAL_ENGINE picks one for all)",
     signals, signals_plan, FI_TWIST_NONE},
    {"heal", "rank 2 dies after the first barrier, a replacement rejoins, the survivors heal; "
             "only the heal's calls and what follows it are swept",
     heal_steps, heal_plan, FI_TWIST_NONE},
    {"selftest-leak", "(the sweep's own test) basic; a fault at hipMemMap leaks an fd", basic,
     basic_plan, FI_TWIST_LEAK},
    {"selftest-crash", "(the sweep's own test) basic; a fault at hipMemMap crashes the rank",
     basic, basic_plan, FI_TWIST_CRASH},
    {"selftest-hang", "(the sweep's own test) basic; a fault at hipMemMap hangs the rank", basic,
     basic_plan, FI_TWIST_HANG},
    {"selftest-unnamed", "(the sweep's own test) basic; a fault at hipMemMap is reported unnamed",
     basic, basic_plan, FI_TWIST_UNNAMED},
    {"selftest-broken", "(the sweep's own test) basic; a fault at hipMemMap breaks the report",
     basic, basic_plan, FI_TWIST_BROKEN},
    {"selftest-untold", "(the sweep's own test) basic; a fault at hipMemMap in alloc is not told",
     basic, basic_plan, FI_TWIST_UNTOLD},
    {"selftest-late", "(the sweep's own test) basic; a fault at hipMemMap in alloc is ignored",
     basic, basic_plan, FI_TWIST_LATE},
    {NULL, NULL, NULL, NULL, FI_TWIST_NONE},
};

const fi_scenario *fi_scenario_find(const char *name) {
  for (const fi_scenario *s = fi_scenarios; name && s->name; s++)
    if (strcmp(s->name, name) == 0) return s;
  return NULL;
}

/* ---- run-scenario ---- */

static long rank_progress(int rank, void *ctx) {
  (void)ctx;
  return mori_fi_progress(rank);
}

/* What the ranks left on disk.  A rank that ran to its end removes its
 * socket directory and every temporary store file it made; only a rank
 * that was killed may leave them (the kernel reclaims its fds and memory,
 * not its files).  Store keys and lock files stay by design. */
typedef struct leftovers {
  int n;
  char names[512];
} leftovers;

static void leftover(leftovers *l, const char *what) {
  size_t k = strlen(l->names);
  if (l->n++ < 8) snprintf(l->names + k, sizeof l->names - k, " %s", what);
}

/* A rank that did not run to its end (killed, crashed, hung) cleaned up
 * nothing; whatever it left is already counted against it. */
static int died(const mori_rank_result *r) { return r->signal != 0 || r->hung; }

static int killed_pid(const mori_rank_result *res, int world, long pid) {
  for (int r = 0; r < world; r++)
    if (res[r].pid == pid && died(&res[r])) return 1;
  return 0;
}

static void inspect(const char *dir, const mori_rank_result *res, int world, void *ctx) {
  leftovers *l = ctx;
  int killed = 0, dirs = 0;
  char path[4096], first_dir[300] = "";
  for (int r = 0; r < world; r++) killed += died(&res[r]);
  snprintf(path, sizeof path, "%s/sockets", dir);
  DIR *d = opendir(path);
  for (struct dirent *e; d && (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.' && dirs++ == 0) snprintf(first_dir, sizeof first_dir, "sockets/%s", e->d_name);
  if (d) closedir(d);
  if (dirs > killed) leftover(l, first_dir); /* a survivor's socket directory */
  d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
    long pid;
    if (sscanf(e->d_name, ".tmp-%ld-", &pid) == 1 && !killed_pid(res, world, pid))
      leftover(l, e->d_name);
  }
  if (d) closedir(d);
}

struct run_args {
  const char *scenario;
  int ranks, stall_ms, deadline_ms;
};

static const cli_option run_options[] = {
    {"--ranks", CLI_INT, offsetof(struct run_args, ranks), 1, 1024, NULL, "N",
     "ranks (default 2)"},
    {"--stall-ms", CLI_INT, offsetof(struct run_args, stall_ms), 100, 3600000, NULL, "MS",
     "a rank whose calls stood still this long is hung and killed (default 10000)"},
    {"--deadline-ms", CLI_INT, offsetof(struct run_args, deadline_ms), CLI_DEADLINE_MS_MIN, CLI_DEADLINE_MS_MAX, NULL, "MS",
     "kill ranks still running then, however busy (default 600000)"},
    {0},
};

const cli_command fi_run_scenario_command = {
    .name = "run-scenario",
    .run = fi_cmd_run_scenario,
    .summary = "run one scenario's ranks (what a sweep starts under LD_PRELOAD and MORI_FI)",
    .options = run_options,
    .operand = "SCENARIO",
    .operand_offset = offsetof(struct run_args, scenario),
};

/* "accepted: basic, interior, ..." for messages. */
const char *fi_scenario_names(void) {
  static char names[1024];
  size_t n = (size_t)snprintf(names, sizeof names, "accepted:");
  for (const fi_scenario *s = fi_scenarios; s->name && n < sizeof names; s++)
    n += (size_t)snprintf(names + n, sizeof names - n, "%s %s", s == fi_scenarios ? "" : ",",
                          s->name);
  return names;
}

int fi_cmd_run_scenario(int argc, char **argv) {
  struct run_args a = {.ranks = 2, .stall_ms = 10000, .deadline_ms = 600000};
  int rc = cli_parse(&fi_run_scenario_command, &a, argc, argv);
  if (rc != 0) return rc == CLI_EXIT_HELP ? 0 : rc;
  const fi_scenario *s = fi_scenario_find(a.scenario);
  if (s == NULL)
    return cli_usage_error(&fi_run_scenario_command, "'%s': unknown scenario (%s)", a.scenario,
                           fi_scenario_names());
  int ranks = a.ranks, deadline_ms = a.deadline_ms, stall_ms = a.stall_ms;
  char devices[16];
  snprintf(devices, sizeof devices, "%d", ranks < 8 ? 8 : ranks);
  setenv("MORI_SIM_DEVICES", devices, 0); /* every rank needs a device of its own */
  mori_rank_result *res = calloc((size_t)ranks, sizeof *res);
  if (res == NULL) return 2;
  leftovers l = {0, ""};
  mori_launch_watch watch = {.progress = rank_progress, .ctx = &l, .stall_ms = stall_ms,
                             .inspect = inspect, .store_in_rank = 1};
  int failures = mori_launch_watched(ranks, scenario_rank, (void *)s, deadline_ms, &watch, res);
  for (int r = 0; r < ranks; r++)
    printf("rank=%d exit=%d signal=%d hung=%d wall_ms=%.0f | %s\n", r, res[r].exit_code,
           res[r].signal, res[r].hung, res[r].wall_ms, res[r].msg);
  printf("fs leftovers=%d%s\n", l.n, l.names);
  free(res);
  return failures || l.n ? 1 : 0;
}
