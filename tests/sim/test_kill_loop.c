/*
 * test_kill_loop.c - kill loops: one window of a group of 4 (and of 8)
 * ranks lives through 100 deaths.  Each iteration kills a rank chosen at
 * random at a point chosen at random (idle; just before, or inside, a
 * bounded barrier; just before, or inside, a put/wait ring; inside the
 * rendezvous of a second window; inside the heal); the victim starts its
 * replacement (this program again, exec'd: a fresh process) and dies of
 * SIGKILL, and the survivors heal the window.  It is always the group's
 * first window (seq 0), so a replacement's first rendezvous in the group
 * is the heal.  Then every rank reads every rank's data byte for byte (a
 * pattern of the rank and of how often it died), and passes barriers and
 * a put/wait ring; at the end every process (the survivors and the last
 * replacements) frees its block and finds the shim's registry at 0 and
 * its fds where they were.
 *
 * Mid-rendezvous: every rank rendezvouses a second, scratch block in a
 * group of its own, and the victim dies a random 0-2 ms after starting
 * its part (on a thread), anywhere from before its request to after the
 * window is made.  The survivors' rendezvous passes or fails naming the
 * dead rank (the keeper's notice, below); they give the scratch block
 * back, heal the window, and then every rank, the replacement with them,
 * makes the scratch window again and passes a barrier and a word of every
 * rank's through it.
 *
 * Mid-heal: the victim dies idle, and its replacement dies in its turn
 * inside the heal, at its first import of a survivor's memory (the fault
 * shim, preloaded into that process alone: MORI_FI's life= rule), when
 * the survivors have its memory mapped and wait for it at the heal's last
 * barrier.  Their heal fails, naming the replacement's process as gone,
 * and leaves the window failed for good; the keeper starts a second
 * replacement, and the survivors (each with the block it had, its data
 * untouched) and it rendezvous again under the group loop.<i>, where the
 * loop goes on (the fallback of docs/recovery.md: the heal's addresses
 * are not kept, the memory is).
 *
 * The plan is a pure function of a seed, printed at the start
 * (MORI_KILL_LOOP_SEED=N replays it; MORI_KILL_LOOP_ITERATIONS=N runs
 * fewer or more iterations), so every process of a rank knows it.
 *
 * The launcher's ranks are keepers, not workers: each starts its rank's
 * first worker and reaps every worker of its rank (a child subreaper, so
 * that a victim's orphaned replacement is its child), so that a death is
 * seen at once (the dead process is gone once reaped) and the launcher
 * sees no death: with every one of its ranks dead it would end the launch
 * and remove the store under the replacements.  A keeper tells of each
 * death as the launcher would (mori/store.h, MORI_STORE_DEATH_GROUP)
 * before it reaps the dead process, so that the notice is there before
 * anyone can heal, and the heal takes it back.
 *
 * Not here: a survivor's death while the survivors heal (two ranks lost
 * at once).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "signal_rounds.h"

#define GROUP "loop"
#define TIMEOUT_MS 10000 /* every signal call, heal and rendezvous */
#define PATTERN_WORDS 1024
#define PATTERN_AT 1024 /* words: past the rounds' word 0 and the ring's words */
#define RING_AT 1       /* the ring's word from rank r is RING_AT + r */
#define ROUNDS_CH 0
#define RING_CH 1
#define PROBE_CH 2
#define MAX_WORLD 8
#define MAX_ITERATIONS 10000
#define SCRATCH ((size_t)64 << 10)
#define REPLACEMENT_DIES "life=1 hipMemImportFromShareableHandle#1=kill"

/* Where the victim dies. */
enum point {
  P_IDLE,
  P_BEFORE_BARRIER,
  P_MID_BARRIER,
  P_BEFORE_PUT,
  P_MID_RING,
  P_MID_RENDEZVOUS,
  P_MID_HEAL,
  P__COUNT
};
static const char *const point_names[P__COUNT] = {
    "idle",         "before its barrier", "mid-barrier", "before its put",
    "mid put/wait", "mid-rendezvous",     "mid-heal"};

/* How a worker came to be: the first of its rank, a replacement that
 * joins the heal, or the second replacement of a mid-heal death, which
 * joins the survivors' new group. */
enum role { R_FIRST, R_HEAL, R_REGROUP };

/* ---- the plan ---- */

typedef struct plan {
  int world, iterations;
  unsigned long long seed;
} plan;

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static int victim_of(const plan *p, int i) {
  return (int)(mix(mix(p->seed) ^ (uint64_t)(2 * i)) % (uint64_t)p->world);
}

static int point_of(const plan *p, int i) {
  return (int)(mix(mix(p->seed) ^ (uint64_t)(2 * i + 1)) % P__COUNT);
}

/* Mid-rendezvous: how long the victim's rendezvous runs before it dies. */
static int delay_us(const plan *p, int i) {
  return (int)(mix(mix(p->seed) ^ (uint64_t)i ^ 0x5ca1ab1eull) % 2000);
}

/* How many of rank's processes died in iteration i: two mid-heal (the
 * victim, then its first replacement). */
static int deaths_in(const plan *p, int rank, int i) {
  return victim_of(p, i) != rank ? 0 : point_of(p, i) == P_MID_HEAL ? 2 : 1;
}

/* How often rank had died once iteration i's death was healed. */
static int life_after(const plan *p, int rank, int i) {
  int n = 0;
  for (int j = 0; j <= i; j++) n += deaths_in(p, rank, j);
  return n;
}

/* The group of the loop's window in iteration i: loop, or loop.<j> after
 * the heal of iteration j's death failed (mid-heal) and the ranks made
 * the window again. */
static void group_at(const plan *p, int i, char *out, size_t cap) {
  int last = -1;
  for (int j = 0; j < i; j++)
    if (point_of(p, j) == P_MID_HEAL) last = j;
  if (last < 0) snprintf(out, cap, GROUP);
  else snprintf(out, cap, GROUP ".%d", last);
}

static int lowest_survivor(const plan *p, int i) { return victim_of(p, i) == 0 ? 1 : 0; }

/* ---- the data ---- */

static uint32_t pattern(int rank, int life, int i) {
  return 0x6b000000u ^ (uint32_t)(life << 16) ^ (uint32_t)(rank << 12) ^ (uint32_t)i;
}

static int fill(void *base, int rank, int life) {
  uint32_t words[PATTERN_WORDS];
  for (int i = 0; i < PATTERN_WORDS; i++) words[i] = pattern(rank, life, i);
  return mori_symm_memcpy((uint32_t *)base + PATTERN_AT, words, sizeof words);
}

/* 0 if p holds rank's pattern of that life, byte for byte; else the first
 * word that differs, plus one (-1: the copy failed). */
static int differs(const void *p, int rank, int life) {
  uint32_t got[PATTERN_WORDS], want[PATTERN_WORDS];
  if (mori_symm_memcpy(got, (const uint32_t *)p + PATTERN_AT, sizeof got) != 0) return -1;
  for (int i = 0; i < PATTERN_WORDS; i++) want[i] = pattern(rank, life, i);
  if (memcmp(got, want, sizeof got) == 0) return 0;
  for (int i = 0;; i++)
    if (got[i] != want[i]) return i + 1;
}

/* ---- a worker: one process of a rank ---- */

typedef struct worker {
  mori_rank_ctx ctx;
  plan plan;
  int first; /* the iteration whose death this process replaces; -1: none */
  int role;  /* enum role */
  char exe[4096];
  void *base;
  mori_window *w;
  hipStream_t s;
} worker;

/* This program again, as rank's worker from iteration first on, in the
 * role given: a fresh process (exec), whoever starts it.  The replacement
 * that is to die inside the heal gets the fault shim and its rule, no
 * other process. */
static pid_t start_worker(const worker *wk, int rank, int first, int role) {
  char r[16], world[16], seed[32], n[16], f[16], ro[16];
  snprintf(r, sizeof r, "%d", rank);
  snprintf(world, sizeof world, "%d", wk->plan.world);
  snprintf(seed, sizeof seed, "%llu", wk->plan.seed);
  snprintf(n, sizeof n, "%d", wk->plan.iterations);
  snprintf(f, sizeof f, "%d", first);
  snprintf(ro, sizeof ro, "%d", role);
  pid_t pid = fork();
  if (pid == 0) {
    unsetenv("LD_PRELOAD");
    unsetenv("MORI_FI");
    if (role == R_HEAL && point_of(&wk->plan, first) == P_MID_HEAL) {
      setenv("LD_PRELOAD", MORI_FI_LIB, 1);
      setenv("MORI_FI", REPLACEMENT_DIES, 1);
      setenv("MORI_LAUNCH_LIFE", "1", 1);
    }
    execl(wk->exe, "test_kill_loop", "--worker", wk->ctx.store_dir, wk->ctx.incarnation, r,
          world, seed, n, f, ro, (char *)NULL);
    _exit(127);
  }
  return pid;
}

/* A put/wait ring on RING_CH: this rank's word into the next rank's
 * buffer, a put to it, a wait for the previous one. */
static int ring_step(worker *wk, uint32_t value) {
  int world = wk->plan.world, r = wk->ctx.rank;
  int next = (r + 1) % world, prev = (r + world - 1) % world;
  if (put_word(wk->w, next, RING_AT + r, value) != 0) return MORI_EHIP;
  int rc = mori_window_put_signal(wk->w, next, RING_CH, wk->s, TIMEOUT_MS);
  return rc != 0 ? rc : mori_window_wait_signal(wk->w, prev, RING_CH, wk->s, TIMEOUT_MS);
}

struct scratch_run {
  worker *wk;
  void *base;
  char group[32];
};

static void *scratch_rendezvous(void *arg) {
  struct scratch_run *x = arg;
  mori_window *w = NULL;
  (void)mori_symm_rendezvous(x->base, x->group, x->wk->ctx.rank, x->wk->plan.world,
                             x->wk->ctx.store, &w, NULL);
  return NULL;
}

/* The victim: what it does of the iteration's operation, then its
 * replacement started, then SIGKILL.  Never returns. */
static void die(worker *wk, int i, int point) {
  if (point == P_MID_BARRIER) (void)mori_window_barrier(wk->w, ROUNDS_CH, wk->s, TIMEOUT_MS);
  if (point == P_MID_RING) {
    int next = (wk->ctx.rank + 1) % wk->plan.world;
    (void)put_word(wk->w, next, RING_AT + wk->ctx.rank, (uint32_t)i);
    (void)mori_window_put_signal(wk->w, next, RING_CH, wk->s, TIMEOUT_MS);
  }
  if (point == P_MID_RENDEZVOUS) {
    static struct scratch_run x;
    pthread_t t;
    x.wk = wk;
    snprintf(x.group, sizeof x.group, "scratch.%d", i);
    if (mori_symm_alloc(SCRATCH, wk->ctx.rank, &x.base) == 0 &&
        pthread_create(&t, NULL, scratch_rendezvous, &x) == 0) {
      struct timespec ts = {0, (long)delay_us(&wk->plan, i) * 1000};
      nanosleep(&ts, NULL);
    }
  }
  (void)start_worker(wk, wk->ctx.rank, i, R_HEAL);
  raise(SIGKILL);
  _exit(99); /* not reached */
}

/* Whether w is failed, without waiting on anyone: every signal call
 * fails at once on a failed window, and a put to this rank and its wait
 * need no peer. */
static int probe(worker *wk) {
  int rc = mori_window_put_signal(wk->w, wk->ctx.rank, PROBE_CH, wk->s, TIMEOUT_MS);
  if (rc == 0) rc = mori_window_wait_signal(wk->w, wk->ctx.rank, PROBE_CH, wk->s, TIMEOUT_MS);
  if (mori_hipStreamSynchronize(wk->s) != hipSuccess && rc == 0) rc = MORI_EHIP;
  return rc;
}

/* A survivor: the iteration's operation among all, while the victim dies
 * before or inside it.  Before: the operations that wait for the victim
 * fail (every barrier; the wait of the victim's next rank in the ring),
 * naming its process as gone, and the others pass; inside: they may pass
 * (the victim's part was done) or fail so.  A call may return before its
 * waits are over (a stream run by a worker thread): the failure then
 * shows in the window, which the probe reads. */
static void count_failure(worker *wk, int i, char *msg, size_t msglen);

/* A survivor mid-rendezvous: the scratch window passes, or fails naming
 * the dead rank; either way its block is given back at once. */
static int survive_rendezvous(worker *wk, int i, int victim, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = &wk->ctx;
  char group[32], dead[64];
  void *base = NULL;
  mori_window *w = NULL;
  snprintf(group, sizeof group, "scratch.%d", i);
  snprintf(dead, sizeof dead, "rank %d ", victim);
  CHECK(mori_symm_alloc(SCRATCH, wk->ctx.rank, &base) == 0, "scratch alloc: %s",
        mori_last_error());
  int rc = mori_symm_rendezvous(base, group, wk->ctx.rank, wk->plan.world, wk->ctx.store, &w, NULL);
  /* MORI_EPEER on the keeper's notice, MORI_EIO on the dead rank's socket
   * found closed before it */
  CHECK(rc == 0 || ((rc == MORI_EPEER || rc == MORI_EIO) && strstr(mori_last_error(), dead)),
        "iteration %d: the scratch rendezvous while rank %d died in it: %s", i, victim,
        mori_last_error());
  CHECK(mori_symm_free(base) == 0, "scratch free: %s", mori_last_error());
  if (rc != 0) count_failure(wk, i, msg, msglen);
  return 0;
}

static int survive(worker *wk, int i, int victim, int point, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = &wk->ctx;
  if (point == P_MID_RENDEZVOUS) return survive_rendezvous(wk, i, victim, msg, msglen);
  if (point == P_MID_HEAL) point = P_IDLE; /* the victim dies idle; its replacement in the heal */
  int waits_on_victim = point == P_BEFORE_BARRIER || point == P_MID_BARRIER ||
                        (ctx->rank + wk->plan.world - 1) % wk->plan.world == victim;
  int must_fail = waits_on_victim && (point == P_BEFORE_BARRIER || point == P_BEFORE_PUT);
  int may_fail = waits_on_victim && point != P_IDLE;
  int rc = 0;
  if (point == P_BEFORE_BARRIER || point == P_MID_BARRIER)
    rc = mori_window_barrier(wk->w, ROUNDS_CH, wk->s, TIMEOUT_MS);
  else if (point == P_BEFORE_PUT || point == P_MID_RING)
    rc = ring_step(wk, (uint32_t)i);
  CHECK(mori_hipStreamSynchronize(wk->s) == hipSuccess, "iteration %d: sync: %s", i,
        mori_shim_message());
  if (rc == 0) rc = probe(wk);
  char gone[64];
  snprintf(gone, sizeof gone, "rank %d's process", victim);
  CHECK(rc == 0 ? !must_fail : may_fail && strstr(mori_last_error(), gone) != NULL,
        "iteration %d: the %s %s while rank %d died %s: %s", i,
        point <= P_MID_BARRIER ? "barrier" : "ring", rc == 0 ? "passed" : "failed", victim,
        point_names[point], rc == 0 ? "" : mori_last_error());
  if (rc != 0) count_failure(wk, i, msg, msglen);
  return 0;
}

/* Counted by keeper 0: how often the deaths inside bite. */
static void count_failure(worker *wk, int i, char *msg, size_t msglen) {
  char key[64];
  (void)msg, (void)msglen;
  snprintf(key, sizeof key, "kill_loop/failed/%d/%d", i, wk->ctx.rank);
  (void)wk->ctx.store->set(wk->ctx.store, key, "1", 2);
}

/* The survivors' heal, asked again while the victim's process is not gone
 * from the host yet (its keeper reaps it at once). */
static int regroup(worker *wk, int i, char *msg, size_t msglen);

static int heal(worker *wk, int i, int victim, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = &wk->ctx;
  double until = now_ms() + TIMEOUT_MS;
  int rc;
  while ((rc = mori_window_heal(wk->w, victim, ctx->store)) == MORI_ESTATE &&
         strstr(mori_last_error(), "is alive") != NULL && now_ms() < until)
    sleep_ms(2);
  if (point_of(&wk->plan, i) != P_MID_HEAL) {
    CHECK(rc == 0, "iteration %d: heal of rank %d: %s", i, victim, mori_last_error());
    return 0;
  }
  /* its own finding, or a peer's abort that relays it (a chain of them
   * may cut the first finding's words short) */
  char gone[64];
  snprintf(gone, sizeof gone, "rank %d's replacement (pid ", victim);
  CHECK(rc == MORI_EPEER && (strstr(mori_last_error(), gone) != NULL ||
                             strstr(mori_last_error(), ": a peer failed while this rank waited "
                                                       "for mapped: rank ") != NULL),
        "iteration %d: the heal of rank %d, whose replacement died in it, %s: %s", i, victim,
        rc == 0 ? "passed" : "failed", rc == 0 ? "" : mori_last_error());
  CHECK(probe(wk) != 0, "iteration %d: the window whose heal failed still signals", i);
  return regroup(wk, i, msg, msglen);
}

/* After a failed heal: the lowest survivor takes back the keeper's notice
 * of the death (a wait of the new group for the dead rank would end on
 * it) and says so; then every rank, the second replacement with them,
 * rendezvouses the block it has under loop.<i>. */
static int regroup(worker *wk, int i, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = &wk->ctx;
  int victim = victim_of(&wk->plan, i);
  char key[192], group[32];
  if (ctx->rank == lowest_survivor(&wk->plan, i)) {
    snprintf(key, sizeof key, "mori_symm/" MORI_STORE_DEATH_GROUP "/%d/%d/%s/0/abort/0",
             ctx->world, victim, ctx->incarnation);
    if (ctx->store->remove) (void)ctx->store->remove(ctx->store, key);
    snprintf(key, sizeof key, "kill_loop/regroup/%d", i);
    CHECK(ctx->store->set(ctx->store, key, "1", 2) == 0, "store: %s", mori_last_error());
  }
  void *v = NULL;
  size_t n = 0;
  snprintf(key, sizeof key, "kill_loop/regroup/%d", i);
  CHECK(ctx->store->get(ctx->store, key, &v, &n, TIMEOUT_MS) == 0,
        "iteration %d: no word of the regroup: %s", i, mori_last_error());
  free(v);
  group_at(&wk->plan, i + 1, group, sizeof group);
  mori_symm_set_replacement(0); /* a new group: nothing in it to heal */
  CHECK(mori_symm_rendezvous(wk->base, group, ctx->rank, ctx->world, ctx->store, &wk->w, NULL) ==
            0,
        "iteration %d: the rendezvous of %s after the failed heal: %s", i, group,
        mori_last_error());
  return 0;
}

/* Once the window is whole again after a death mid-rendezvous: every
 * rank makes the scratch window again, writes a word of its own there
 * and reads every rank's after a barrier, and gives it back. */
static int scratch_again(worker *wk, int i, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = &wk->ctx;
  char group[32];
  void *base = NULL;
  mori_window *w = NULL;
  snprintf(group, sizeof group, "scratch.%d.again", i);
  mori_symm_set_replacement(0);
  CHECK(mori_symm_alloc(SCRATCH, ctx->rank, &base) == 0, "scratch alloc: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(base, group, ctx->rank, ctx->world, ctx->store, &w, NULL) == 0,
        "iteration %d: the scratch window again: %s", i, mori_last_error());
  uint32_t v = 0x5c000000u | (uint32_t)(i << 8) | (uint32_t)ctx->rank;
  CHECK(put_word(w, ctx->rank, 0, v) == 0, "write: %s", mori_shim_message());
  CHECK(mori_window_barrier(w, 0, wk->s, TIMEOUT_MS) == 0, "iteration %d: scratch barrier: %s", i,
        mori_last_error());
  CHECK(mori_hipStreamSynchronize(wk->s) == hipSuccess, "sync: %s", mori_shim_message());
  for (int p = 0; p < ctx->world; p++) {
    uint32_t want = 0x5c000000u | (uint32_t)(i << 8) | (uint32_t)p;
    CHECK(get_word(w, p, 0) == want, "iteration %d: rank %d's scratch word is %#x", i, p,
          get_word(w, p, 0));
  }
  CHECK(mori_window_barrier(w, 0, wk->s, TIMEOUT_MS) == 0, "iteration %d: scratch barrier': %s",
        i, mori_last_error());
  CHECK(mori_hipStreamSynchronize(wk->s) == hipSuccess, "sync: %s", mori_shim_message());
  CHECK(mori_symm_free(base) == 0, "scratch free: %s", mori_last_error());
  return 0;
}

/* Once the window is whole: every rank's data, byte for byte; two rounds
 * of barriers ordering a word of every rank; a ring. */
static int after_heal(worker *wk, int i, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = &wk->ctx;
  int world = wk->plan.world, prev = (ctx->rank + world - 1) % world;
  for (int p = 0; p < world; p++) {
    int d = differs(mori_window_buffer_ptrs(wk->w)[p], p, life_after(&wk->plan, p, i));
    CHECK(d == 0, "iteration %d: rank %d's data: word %d differs", i, p, d - 1);
  }
  for (int k = 1; k <= 2; k++) {
    uint32_t v = (uint32_t)(i << 4 | k);
    CHECK(put_word(wk->w, ctx->rank, 0, v) == 0, "write: %s", mori_shim_message());
    CHECK(mori_window_barrier(wk->w, ROUNDS_CH, wk->s, TIMEOUT_MS) == 0,
          "iteration %d: barrier %d: %s", i, k, mori_last_error());
    CHECK(mori_hipStreamSynchronize(wk->s) == hipSuccess, "sync: %s", mori_shim_message());
    for (int p = 0; p < world; p++)
      CHECK(get_word(wk->w, p, 0) == v, "iteration %d round %d: rank %d's word is %#x", i, k, p,
            get_word(wk->w, p, 0));
    CHECK(mori_window_barrier(wk->w, ROUNDS_CH, wk->s, TIMEOUT_MS) == 0,
          "iteration %d: barrier %d': %s", i, k, mori_last_error());
    CHECK(mori_hipStreamSynchronize(wk->s) == hipSuccess, "sync: %s", mori_shim_message());
  }
  uint32_t v = 0x10000u + (uint32_t)i;
  CHECK(ring_step(wk, v) == 0, "iteration %d: ring: %s", i, mori_last_error());
  CHECK(mori_hipStreamSynchronize(wk->s) == hipSuccess, "sync: %s", mori_shim_message());
  CHECK(get_word(wk->w, ctx->rank, RING_AT + prev) == v, "iteration %d: ring word from %d is %#x",
        i, prev, get_word(wk->w, ctx->rank, RING_AT + prev));
  CHECK(mori_window_barrier(wk->w, ROUNDS_CH, wk->s, TIMEOUT_MS) == 0,
        "iteration %d: last barrier: %s", i, mori_last_error());
  CHECK(mori_hipStreamSynchronize(wk->s) == hipSuccess, "sync: %s", mori_shim_message());
  return 0;
}

static int iteration(worker *wk, int i, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = &wk->ctx;
  int victim = victim_of(&wk->plan, i), point = point_of(&wk->plan, i);
  double t0 = now_ms();
  if (ctx->rank == victim) die(wk, i, point);
  if (survive(wk, i, victim, point, msg, msglen) || heal(wk, i, victim, msg, msglen) ||
      after_heal(wk, i, msg, msglen) ||
      (point == P_MID_RENDEZVOUS && scratch_again(wk, i, msg, msglen)))
    return 1;
  if (ctx->rank == lowest_survivor(&wk->plan, i)) {
    char key[64], ms[32];
    snprintf(key, sizeof key, "kill_loop/time/%d", i);
    int n = snprintf(ms, sizeof ms, "%.3f", now_ms() - t0);
    CHECK(ctx->store->set(ctx->store, key, ms, (size_t)n + 1) == 0, "store: %s",
          mori_last_error());
  }
  return 0;
}

static int worker_run(worker *wk, int fds0, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = &wk->ctx;
  int life = wk->first < 0 ? 0 : life_after(&wk->plan, ctx->rank, wk->first);
  CHECK(mori_shim_select("sim") == 0, "%s", mori_shim_message());
  char group[32];
  mori_symm_set_timeout_ms(TIMEOUT_MS);
  CHECK(mori_symm_alloc(MiB, ctx->rank, &wk->base) == 0, "alloc: %s", mori_last_error());
  CHECK(fill(wk->base, ctx->rank, life) == 0, "fill: %s", mori_last_error());
  CHECK(mori_hipStreamCreateWithFlags(&wk->s, hipStreamNonBlocking) == hipSuccess, "stream: %s",
        mori_shim_message());
  if (wk->role == R_REGROUP) {
    /* the survivors' heal failed: their new group, once they say so */
    if (regroup(wk, wk->first, msg, msglen)) return 1;
  } else {
    group_at(&wk->plan, wk->first < 0 ? 0 : wk->first, group, sizeof group);
    mori_symm_set_replacement(wk->role == R_HEAL);
    CHECK(mori_symm_rendezvous(wk->base, group, ctx->rank, ctx->world, ctx->store, &wk->w,
                               NULL) == 0,
          "%s (life %d, from iteration %d): %s",
          wk->first < 0 ? "rendezvous" : "heal as replacement", life, wk->first,
          mori_last_error());
    mori_symm_set_replacement(0);
  }
  int i = 0;
  if (wk->first >= 0) {
    if (after_heal(wk, wk->first, msg, msglen)) return 1;
    if (point_of(&wk->plan, wk->first) == P_MID_RENDEZVOUS &&
        scratch_again(wk, wk->first, msg, msglen))
      return 1;
    i = wk->first + 1;
  }
  for (; i < wk->plan.iterations; i++)
    if (iteration(wk, i, msg, msglen)) return 1;
  CHECK(mori_hipStreamDestroy(wk->s) == hipSuccess, "stream destroy: %s", mori_shim_message());
  CHECK(mori_symm_free(wk->base) == 0, "free: %s", mori_last_error());
  char what[64];
  snprintf(what, sizeof what, "rank %d life %d", ctx->rank, life);
  return ranks_finish(fds0, msg, msglen, what);
}

static int number(const char *s, unsigned long long max, unsigned long long *out) {
  char *end;
  errno = 0;
  *out = strtoull(s, &end, 0);
  return end == s || *end != '\0' || errno != 0 || *out > max ? -1 : 0;
}

/* --worker DIR INCARNATION RANK WORLD SEED ITERATIONS FIRST ROLE: one
 * process of a rank; its verdict goes to the store for its keeper. */
static int worker_main(char **argv) {
  worker wk = {.first = -1};
  unsigned long long rank, world, n, first = 0, role = 0;
  if (number(argv[2], MAX_WORLD - 1, &rank) || number(argv[3], MAX_WORLD, &world) ||
      number(argv[4], ~0ull, &wk.plan.seed) || number(argv[5], MAX_ITERATIONS, &n) ||
      (strcmp(argv[6], "-1") != 0 && number(argv[6], MAX_ITERATIONS, &first)) ||
      number(argv[7], R_REGROUP, &role))
    return 2;
  wk.role = (int)role;
  wk.plan.world = (int)world;
  wk.plan.iterations = (int)n;
  wk.first = strcmp(argv[6], "-1") == 0 ? -1 : (int)first;
  ssize_t len = readlink("/proc/self/exe", wk.exe, sizeof wk.exe - 1);
  if (len <= 0) return 2;
  wk.exe[len] = '\0';
  mori_store *store = NULL;
  if (mori_file_store_open(argv[0], &store) != 0) return 2;
  store->incarnation = argv[1];
  wk.ctx = (mori_rank_ctx){.rank = (int)rank, .world = (int)world, .store = store,
                           .store_dir = argv[0], .incarnation = argv[1]};
  char msg[1024] = "", key[64];
  int rc = worker_run(&wk, mori_count_fds(), msg, sizeof msg);
  snprintf(key, sizeof key, "kill_loop/verdict/%d", (int)rank);
  (void)store->set(store, key, msg, strlen(msg) + 1);
  store->destroy(store);
  return rc;
}

/* ---- a keeper: a rank of the launch ---- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int has_key(mori_store *store, const char *key) {
  void *v = NULL;
  size_t len = 0;
  int rc = store->get(store, key, &v, &len, 0);
  free(v);
  return rc == 0;
}

/* How many survivors' operations failed (naming the dead rank), by the
 * point of the death, into msg. */
static void failures(const mori_rank_ctx *ctx, const plan *p, char *msg, size_t msglen) {
  int failed[P__COUNT] = {0};
  for (int i = 0; i < p->iterations; i++)
    for (int r = 0; r < p->world; r++) {
      char key[64];
      snprintf(key, sizeof key, "kill_loop/failed/%d/%d", i, r);
      failed[point_of(p, i)] += has_key(ctx->store, key);
    }
  size_t k = strlen(msg);
  snprintf(msg + k, msglen - k, "; survivors' operations that failed naming the dead rank:");
  for (int q = P_BEFORE_BARRIER; q < P__COUNT; q++) {
    if (q == P_MID_HEAL) continue; /* every heal of those fails, by design */
    k = strlen(msg);
    snprintf(msg + k, msglen - k, "%s %d %s", q == P_BEFORE_BARRIER ? "" : ",", failed[q],
             point_names[q]);
  }
}

/* The lowest survivors' iteration times: median and max, into msg. */
static void times(const mori_rank_ctx *ctx, const plan *p, char *msg, size_t msglen) {
  double *ms = calloc((size_t)p->iterations, sizeof *ms), total = 0;
  int n = 0, slowest = 0;
  for (int i = 0; ms && i < p->iterations; i++) {
    char key[64];
    void *v = NULL;
    size_t len = 0;
    snprintf(key, sizeof key, "kill_loop/time/%d", i);
    if (ctx->store->get(ctx->store, key, &v, &len, 0) != 0) continue;
    ms[n] = strtod(v, NULL);
    total += ms[n];
    if (ms[n] > ms[slowest]) slowest = n;
    n++;
    free(v);
  }
  if (n == 0) {
    free(ms);
    return;
  }
  double max = ms[slowest];
  qsort(ms, (size_t)n, sizeof *ms, cmp_double);
  size_t k = strlen(msg);
  snprintf(msg + k, msglen - k, "; %d iterations: median %.1f ms, max %.1f ms, total %.0f ms", n,
           ms[n / 2], max, total);
  free(ms);
}

/* As the launcher tells of a death (mori/store.h): the abort of the
 * death's group, then the mark that some rank died; each the abort of its
 * group's rendezvous 0, so written, as the launcher writes it, by a fresh
 * process (a second abort of a group in one process is its rendezvous
 * 1's). */
static void tell_death(const mori_rank_ctx *ctx, const char *words) {
  pid_t pid = fork();
  if (pid == 0) {
    char group[64];
    snprintf(group, sizeof group, MORI_STORE_DEATH_GROUP "/%d/%d", ctx->world, ctx->rank);
    int rc = mori_symm_rendezvous_abort(group, 0, 1, ctx->store, words);
    snprintf(group, sizeof group, MORI_STORE_DEATH_GROUP "/%d", ctx->world);
    if (rc == 0) rc = mori_symm_rendezvous_abort(group, 0, 1, ctx->store, words);
    if (rc != 0) fprintf(stderr, "rank %d: the notice of a death: %s\n", ctx->rank,
                         mori_last_error());
    _exit(rc != 0);
  }
  if (pid > 0) (void)waitpid(pid, NULL, 0);
}

/* The iteration whose first replacement the rank's n-th death (from 1)
 * was, inside the heal; -1 if it was another. */
static int mid_heal_death(const plan *p, int rank, int n) {
  for (int j = 0, seen = 0; j < p->iterations; j++) {
    int d = deaths_in(p, rank, j);
    if (seen + d >= n) return d == 2 && n == seen + 2 ? j : -1;
    seen += d;
  }
  return -1;
}

/* Starts rank's first worker and reaps every worker of the rank until
 * none is left: each victim (SIGKILL, as often as the plan kills the
 * rank) and the last one, whose verdict it reads. */
static int keeper_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const plan *p = ctx->arg;
  worker wk = {.ctx = *ctx, .plan = *p};
  ssize_t len = readlink("/proc/self/exe", wk.exe, sizeof wk.exe - 1);
  CHECK(len > 0, "readlink: %s", strerror(errno));
  wk.exe[len] = '\0';
  CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0, "subreaper: %s", strerror(errno));
  CHECK(start_worker(&wk, ctx->rank, -1, R_FIRST) > 0, "fork: %s", strerror(errno));
  int killed = 0, others = 0, last = -1, status;
  for (;;) {
    siginfo_t info = {0};
    if (waitid(P_ALL, 0, &info, WEXITED | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      break; /* ECHILD: every worker of this rank is gone */
    }
    if (info.si_code == CLD_KILLED && info.si_status == SIGKILL) {
      tell_death(ctx, "killed by signal 9 (Killed)");
      /* the replacement that died in the heal: the next joins the regroup */
      int j = mid_heal_death(p, ctx->rank, ++killed);
      if (j >= 0) CHECK(start_worker(&wk, ctx->rank, j, R_REGROUP) > 0, "fork: %s",
                        strerror(errno));
    }
    if (waitpid(info.si_pid, &status, 0) != info.si_pid) continue;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) continue;
    if (WIFEXITED(status)) last = WEXITSTATUS(status);
    else others++;
  }
  void *v = NULL;
  size_t n = 0;
  char key[64];
  snprintf(key, sizeof key, "kill_loop/verdict/%d", ctx->rank);
  CHECK(ctx->store->get(ctx->store, key, &v, &n, 0) == 0, "no verdict (%d killed, %d crashed): %s",
        killed, others, mori_last_error());
  snprintf(msg, msglen, "%.900s", (char *)v);
  free(v);
  int deaths = p->iterations > 0 ? life_after(p, ctx->rank, p->iterations - 1) : 0;
  if (last != 0 || others != 0 || killed != deaths) {
    size_t k = strlen(msg);
    snprintf(msg + k, msglen - k, " (exit %d, %d killed of %d planned, %d crashed)", last, killed,
             deaths, others);
    return 1;
  }
  if (ctx->rank == 0) {
    times(ctx, p, msg, msglen);
    failures(ctx, p, msg, msglen);
  }
  return 0;
}

/* ---- the tests ---- */

static int env_number(const char *name, unsigned long long max, unsigned long long *out) {
  const char *v = getenv(name);
  return v != NULL && *v != '\0' && number(v, max, out) == 0;
}

static void kill_loop(int world) {
  plan p = {.world = world, .iterations = 100};
  unsigned long long v;
  p.seed = env_number("MORI_KILL_LOOP_SEED", ~0ull, &v)
               ? v
               : mix((uint64_t)getpid() ^ (uint64_t)now_ms() ^ (uint64_t)world << 56);
  if (env_number("MORI_KILL_LOOP_ITERATIONS", MAX_ITERATIONS, &v)) p.iterations = (int)v;
  int at[P__COUNT] = {0};
  char deaths[256] = "";
  for (int i = 0; i < p.iterations; i++) at[point_of(&p, i)]++;
  for (int q = 0; q < P__COUNT; q++) {
    size_t k = strlen(deaths);
    snprintf(deaths + k, sizeof deaths - k, "%s%s %d", q ? ", " : "", point_names[q], at[q]);
  }
  printf("kill loop: %d ranks, %d iterations, seed %llu (MORI_KILL_LOOP_SEED=%llu replays it); "
         "deaths %s\n",
         world, p.iterations, p.seed, p.seed, deaths);
  fflush(stdout);
  mori_rank_result res[MAX_WORLD];
  memset(res, 0, sizeof res);
  double t0 = now_ms();
  int failed = mori_launch(world, keeper_rank, &p, 240000, res);
  for (int r = 0; r < world; r++)
    if (res[r].hung || res[r].signal || res[r].exit_code != 0)
      print_error("rank %d: exit %d signal %d hung %d: %s\n", r, res[r].exit_code, res[r].signal,
                  res[r].hung, res[r].msg);
  printf("kill loop: %d ranks: %s; %.1f s in all\n", world, res[0].msg, (now_ms() - t0) / 1e3);
  assert_int_equal(failed, 0);
}

static void a_window_of_4_ranks_lives_through_100_deaths(void **state) {
  (void)state;
  kill_loop(4);
}

static void a_window_of_8_ranks_lives_through_100_deaths(void **state) {
  (void)state;
  kill_loop(8);
}

int main(int argc, char **argv) {
  if (argc == 10 && strcmp(argv[1], "--worker") == 0) return worker_main(argv + 2);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_window_of_4_ranks_lives_through_100_deaths),
      cmocka_unit_test(a_window_of_8_ranks_lives_through_100_deaths),
  };
  return mori_run_tests(argc, argv, tests);
}
