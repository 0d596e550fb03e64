/*
 * demo.c - `mori-symm demo`: N forked ranks allocate, rendezvous, push an
 * all-to-all through the mapped peer slots, run barriers and signals,
 * verify every byte, tear down and count leaks.  The same rank body runs on
 * the sim shim in CI and on real GPUs through the cuda or hip shim.  With
 * --max-restarts the launcher starts a rank that dies again, and the run
 * heals around it (docs/recovery.md).
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mori/hip_shim.h"
#include "mori/symm.h"

struct demo_args {
  cli_ranks r;
  size_t size;        /* bytes per rank buffer */
  int deadline_ms;    /* the launcher kills ranks still running then */
  int exit_live;      /* end with the window live: teardown is the exit hook's */
  int cached_calls;   /* cached rendezvous calls timed */
  int barriers;       /* barriers timed */
  int max_restarts;   /* a dead rank is started again up to this often; 0: a death fails */
};

/* Byte i of the chunk rank src sends to rank dst. */
static uint8_t pattern(int src, int dst, size_t i) {
  uint64_t x = ((uint64_t)src * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)dst << 32) ^ i;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return (uint8_t)(x >> 56);
}

struct rank_report {
  double init_us, alloc_us, rendezvous_us, cached_us, barrier_us, a2a_us;
  size_t bytes_verified;
  long leaks;
  int fd_delta;
};

/* What one rank holds through its phases.  Recovering (--max-restarts):
 * every signal call is bounded, so that a dead peer is noticed (the
 * watchdog ends the wait at once when the peer's process is gone), and a
 * failure that names a dead rank is recovered from (below). */
struct rank_run {
  const mori_rank_ctx *ctx;
  const struct demo_args *a;
  void *base;
  uint8_t *host;
  mori_window *w;
  size_t chunk;       /* what this rank sends to each rank */
  char group[32];     /* w's: "demo", or "demo.<n>" after the n-th regroup */
  int timeout_ms;     /* of every signal call: 0 (unbounded) unless recovering */
  int healed;         /* deaths this rank recovered from */
  int regroups;       /* rendezvous made again under a new group name */
  int *deaths;        /* per rank, deaths seen: the life of its replacement */
  int failed_rc;      /* the MORI_E* of the window call that failed last */
  int fds0;           /* open fds once the runtime is up */
  struct rank_report rep;
};

#define TRY(expr, what)                                                              \
  do {                                                                               \
    int rc_ = (expr);                                                                \
    if (rc_ != 0) {                                                                  \
      run->failed_rc = rc_;                                                          \
      snprintf(msg, msglen, "rank %d: %s: %s", ctx->rank, what, mori_last_error());  \
      return 1;                                                                      \
    }                                                                                \
  } while (0)
#define TRY_HIP(expr, what)                                                          \
  do {                                                                               \
    hipError_t e_ = (expr);                                                          \
    if (e_ != hipSuccess) {                                                          \
      run->failed_rc = MORI_EHIP;                                                    \
      snprintf(msg, msglen, "rank %d: %s: %s", ctx->rank, what, mori_shim_message());\
      return 1;                                                                      \
    }                                                                                \
  } while (0)

/* The send area, the first half of the buffer: a chunk for every rank.
 * Filled once, before the rendezvous, so that it is whole whenever a peer
 * may look (after a heal, say). */
static int fill(struct rank_run *run, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = run->ctx;
  for (int p = 0; p < ctx->world; p++)
    for (size_t i = 0; i < run->chunk; i++)
      run->host[(size_t)p * run->chunk + i] = pattern(ctx->rank, p, i);
  TRY_HIP(mori_hipMemcpy(run->base, run->host, run->chunk * (size_t)ctx->world,
                         hipMemcpyHostToDevice),
          "fill send area");
  return 0;
}

/* Rank owner's send area at area (its own base or its slot in a window)
 * checked byte by byte against what owner filled it with. */
static int check_send_area(struct rank_run *run, int owner, const void *area, const char *when,
                           char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = run->ctx;
  size_t n = run->chunk * (size_t)ctx->world;
  TRY_HIP(mori_hipMemcpy(run->host, area, n, hipMemcpyDeviceToHost), "read a send area");
  for (size_t i = 0; i < n; i++) {
    int dst = (int)(i / run->chunk);
    uint8_t want = pattern(owner, dst, i % run->chunk);
    if (run->host[i] != want) {
      snprintf(msg, msglen, "rank %d: %s: byte %zu of rank %d's send area is 0x%02x, expected "
               "0x%02x", ctx->rank, when, i, owner, run->host[i], want);
      return 1;
    }
  }
  return 0;
}

/* Every peer's data, read through the window. */
static int check_peers(struct rank_run *run, const char *when, char *msg, size_t msglen) {
  void *const *peers = mori_window_buffer_ptrs(run->w);
  for (int p = 0; p < run->ctx->world; p++)
    if (p != run->ctx->rank && check_send_area(run, p, peers[p], when, msg, msglen)) return 1;
  return 0;
}

/* ---- the phases: each starts and ends with every rank in step ---- */

/* A signal call's rc; recovering, the call is also waited for at once:
 * under async streams a wait the watchdog released fails no call of its
 * own, only the window's next one, which then comes at once. */
static int settled(const struct rank_run *run, int rc) {
  if (rc != 0 || run->timeout_ms == 0) return rc;
  return mori_hipDeviceSynchronize() == hipSuccess ? 0 : MORI_EHIP;
}

static int exchange(struct rank_run *run, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = run->ctx;
  int world = ctx->world, me = ctx->rank;
  size_t half = run->a->size / 2, chunk = run->chunk;
  void *const *peers = mori_window_buffer_ptrs(run->w);
  uint8_t *host = run->host;
  TRY(settled(run, mori_window_barrier(run->w, 0, NULL, run->timeout_ms)),
      "barrier before all-to-all");
  double t0 = cli_now_us();
  for (int i = 0; i < world; i++) {
    int p = (me + i) % world; /* stagger so ranks do not all hit one peer */
    char *dst = (char *)peers[p] + half + (size_t)me * chunk;
    TRY_HIP(mori_hipMemcpy(dst, (char *)run->base + (size_t)p * chunk, chunk,
                           hipMemcpyDeviceToDevice),
            "push chunk to peer");
  }
  TRY_HIP(mori_hipDeviceSynchronize(), "synchronize after push");
  run->rep.a2a_us = cli_now_us() - t0;
  TRY(settled(run, mori_window_barrier(run->w, 0, NULL, run->timeout_ms)),
      "barrier after all-to-all");
  TRY_HIP(mori_hipDeviceSynchronize(), "synchronize after barrier");
  /* Recovering, one more: it fails if a death released the one before,
   * whose peers' chunks may then be missing. */
  if (run->timeout_ms > 0)
    TRY(settled(run, mori_window_barrier(run->w, 0, NULL, run->timeout_ms)),
        "barrier before the check");
  TRY_HIP(mori_hipMemcpy(host, (char *)run->base + half, chunk * (size_t)world,
                         hipMemcpyDeviceToHost),
          "read receive area");
  for (int q = 0; q < world; q++)
    for (size_t i = 0; i < chunk; i++)
      if (host[(size_t)q * chunk + i] != pattern(q, me, i)) {
        snprintf(msg, msglen, "rank %d: byte %zu of the chunk from rank %d is 0x%02x, expected 0x%02x",
                 me, i, q, host[(size_t)q * chunk + i], pattern(q, me, i));
        return 1;
      }
  run->rep.bytes_verified = chunk * (size_t)world;
  return 0;
}

static int signals(struct rank_run *run, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = run->ctx;
  mori_window *w = run->w;
  int n = run->a->barriers, t = run->timeout_ms;
  int next = (ctx->rank + 1) % ctx->world, prev = (ctx->rank + ctx->world - 1) % ctx->world;
  TRY(settled(run, mori_window_put_signal(w, next, 1, NULL, t)), "put_signal to next rank");
  TRY(settled(run, mori_window_wait_signal(w, prev, 1, NULL, t)),
      "wait_signal from previous rank");
  double t0 = cli_now_us();
  for (int i = 0; i < n; i++) TRY(settled(run, mori_window_barrier(w, 2, NULL, t)), "barrier");
  TRY_HIP(mori_hipDeviceSynchronize(), "synchronize after barriers");
  run->rep.barrier_us = (cli_now_us() - t0) / n;
  return 0;
}

static int end_line(struct rank_run *run, char *msg, size_t msglen);

/* Teardown is local; no rank may unmap while a peer still writes. */
static int final_barrier(struct rank_run *run, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = run->ctx;
  TRY(settled(run, mori_window_barrier(run->w, 0, NULL, run->timeout_ms)), "final barrier");
  TRY_HIP(mori_hipDeviceSynchronize(), "synchronize before teardown");
  return run->a->max_restarts > 0 ? end_line(run, msg, msglen) : 0;
}

static const struct {
  const char *name;
  int (*run)(struct rank_run *run, char *msg, size_t msglen);
} phases[] = {{"exchange", exchange}, {"signals", signals}, {"final barrier", final_barrier}};
enum { PHASES = sizeof phases / sizeof phases[0] };

/* ---- recovery (--max-restarts): a dead rank's replacement joins ----
 *
 * The launcher starts a dead rank again (mori_launch_with), as life n of
 * that rank, with MORI_SYMM_REPLACEMENT=1.  The survivors see the death in
 * the call that failed, and the lowest of them publishes in the store the
 * plan the replacement follows, at demo/<launch>/plan/<rank>/<life>:
 *   heal <group> <phase> ...  the window lives on: every survivor heals it
 *                             (mori_window_heal) once the dead process is
 *                             gone, the replacement's rendezvous in <group>
 *                             joins the heal, and all redo <phase>;
 *   join <group> 0 ...        the death came mid-rendezvous, before any
 *                             window: all rendezvous again under a new
 *                             group name, the replacement as a fresh rank,
 *                             and start over from the first phase;
 * then the survivors' count of regroups and of each rank's deaths, which
 * the replacement takes as its own. */
#define SIGNAL_TIMEOUT_MS 10000 /* a signal call's bound while recovering */
#define HEAL_POLL_MS 10         /* between heals refused while the dead is still there */

/* The rank whose death text tells of: the watchdog's "rank K's process
 * (pid P) is gone", or the launcher's notice "rank K <words>, says the
 * launcher"; -1 for none. */
static int dead_rank_in(const char *text, int world) {
  const char *marks[] = {"'s process (pid ", ", says the launcher"};
  for (int m = 0; m < 2; m++) {
    const char *at = strstr(text, marks[m]), *r = NULL;
    for (const char *p = text; at && (p = strstr(p, "rank ")) != NULL && p < at; p++) r = p;
    char *end = NULL;
    long k = r ? strtol(r + 5, &end, 10) : -1;
    if (r && end != r + 5 && k >= 0 && k < world &&
        (m == 1 || end == at)) /* the process: its rank comes right before */
      return (int)k;
  }
  return -1;
}

/* The rank a failed call (its rc, its message) says died, when this rank
 * recovers from deaths; -1 when it does not, or no death is named. */
static int dead_peer(const struct rank_run *run, int rc, const char *text) {
  if (run->a->max_restarts <= 0 || (rc != MORI_EPEER && rc != MORI_ETIMEDOUT)) return -1;
  int k = dead_rank_in(text, run->ctx->world);
  return k == run->ctx->rank ? -1 : k;
}

static void demo_key(const struct rank_run *run, char *key, size_t cap, const char *what, int a,
                     int b) {
  const char *launch = run->ctx->store->incarnation ? run->ctx->store->incarnation : "-";
  snprintf(key, cap, "demo/%s/%s/%d/%d", launch, what, a, b);
}

/* The value at key, waited for (the rendezvous timeout), as text. */
static int store_text(const struct rank_run *run, const char *key, char *out, size_t cap,
                      char *msg, size_t msglen) {
  void *v = NULL;
  size_t n = 0;
  mori_store *s = run->ctx->store;
  if (s->get(s, key, &v, &n, mori_symm_timeout_ms()) != 0) {
    snprintf(msg, msglen, "rank %d: recovery: nothing at %s within %d ms", run->ctx->rank, key,
             mori_symm_timeout_ms());
    return 1;
  }
  snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), (char *)v);
  free(v);
  return 0;
}

static int store_mark(const struct rank_run *run, const char *key, char *msg, size_t msglen) {
  mori_store *s = run->ctx->store;
  if (s->set(s, key, "1", 1) == 0) return 0;
  snprintf(msg, msglen, "rank %d: recovery: set %s: %s", run->ctx->rank, key, mori_last_error());
  return 1;
}

/* The launcher's notice of rank r's death (mori/store.h,
 * MORI_STORE_DEATH_GROUP): the abort entry of its group's rendezvous 0. */
static void notice_key(const struct rank_run *run, int r, char *key, size_t cap) {
  snprintf(key, cap, "mori_symm/" MORI_STORE_DEATH_GROUP "/%d/%d/%s/0/abort/0", run->ctx->world,
           r, run->ctx->incarnation);
}

/* 1 if key is in the store now (its value unread: a sealed notice's
 * presence is all that is asked of it). */
static int store_has(const struct rank_run *run, const char *key, int timeout_ms) {
  void *v = NULL;
  size_t n = 0;
  mori_store *s = run->ctx->store;
  int rc = s->get(s, key, &v, &n, timeout_ms);
  free(v);
  return rc == 0;
}

/* While recovering, the run ends at a line in the store, where a peer's
 * death is seen even with no signal call left to fail it (under async
 * streams a wait the watchdog released shows at the next call only): each
 * rank marks its arrival (end/<rank>/0), waits for every peer's or for
 * the launcher's notice of its death, and marks that it passed
 * (end/<rank>/1: a replacement started after that has nothing to join). */
static int end_line(struct rank_run *run, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = run->ctx;
  char key[192];
  demo_key(run, key, sizeof key, "end", ctx->rank, 0);
  if (store_mark(run, key, msg, msglen)) return 1;
  for (int r = 0; r < ctx->world; r++) {
    if (r == ctx->rank) continue;
    char notice[192];
    demo_key(run, key, sizeof key, "end", r, 0);
    notice_key(run, r, notice, sizeof notice);
    for (double t0 = cli_now_us(); !store_has(run, key, HEAL_POLL_MS);) {
      if (store_has(run, notice, 0)) {
        run->failed_rc = MORI_EPEER;
        snprintf(msg, msglen, "rank %d: end line: rank %d died, says the launcher", ctx->rank, r);
        return 1;
      }
      if (cli_now_us() - t0 > mori_symm_timeout_ms() * 1e3) {
        snprintf(msg, msglen, "rank %d: end line: rank %d did not come within %d ms", ctx->rank,
                 r, mori_symm_timeout_ms());
        return 1;
      }
    }
  }
  demo_key(run, key, sizeof key, "end", ctx->rank, 1);
  return store_mark(run, key, msg, msglen);
}

/* The replacement's wait for its plan at key, which ends early where
 * every other rank passed the end line: its predecessor died after its
 * work, and nobody is left to join. */
static int wait_plan(const struct rank_run *run, const char *key, char *plan, size_t cap,
                     char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = run->ctx;
  for (double t0 = cli_now_us();;) {
    void *v = NULL;
    size_t n = 0;
    if (ctx->store->get(ctx->store, key, &v, &n, 10 * HEAL_POLL_MS) == 0) {
      snprintf(plan, cap, "%.*s", (int)(n < cap ? n : cap - 1), (char *)v);
      free(v);
      return 0;
    }
    int passed = 0;
    for (int r = 0; r < ctx->world; r++) {
      char end[192];
      demo_key(run, end, sizeof end, "end", r, 1);
      passed += r != ctx->rank && store_has(run, end, 0);
    }
    if (passed == ctx->world - 1) {
      snprintf(msg, msglen, "rank %d: life %d: its peers had passed the end line: its "
               "predecessor died after its work, with nothing left to join", ctx->rank, ctx->life);
      return 1;
    }
    if (cli_now_us() - t0 > mori_symm_timeout_ms() * 1e3) {
      snprintf(msg, msglen, "rank %d: recovery: nothing at %s within %d ms", ctx->rank, key,
               mori_symm_timeout_ms());
      return 1;
    }
  }
}

/* The survivor that speaks for all: the lowest live rank. */
static int leads(const struct rank_run *run, int dead) {
  return run->ctx->rank == (dead == 0 ? 1 : 0);
}

/* What the replacement of dead follows, published by the leader. */
static int publish_plan(struct rank_run *run, int dead, const char *kind, int phase, char *msg,
                        size_t msglen) {
  int world = run->ctx->world;
  size_t cap = 64 + (size_t)world * 12;
  char key[192], *plan = malloc(cap);
  if (plan == NULL) {
    snprintf(msg, msglen, "rank %d: recovery: out of host memory", run->ctx->rank);
    return 1;
  }
  int len = snprintf(plan, cap, "%s %s %d %d", kind, run->group, phase, run->regroups);
  for (int r = 0; r < world; r++) len += snprintf(plan + len, cap - (size_t)len, " %d", run->deaths[r]);
  demo_key(run, key, sizeof key, "plan", dead, run->deaths[dead]);
  mori_store *s = run->ctx->store;
  int rc = s->set(s, key, plan, (size_t)len);
  free(plan);
  if (rc == 0) return 0;
  snprintf(msg, msglen, "rank %d: recovery: set %s: %s", run->ctx->rank, key, mori_last_error());
  return 1;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The phase the survivors of rank dead's death (its life-th) redo: the
 * earliest any of them failed in (*phase: this rank's), should the death
 * have shown to some only at a later call. */
static int agree_phase(struct rank_run *run, int dead, int life, int *phase, char *msg,
                       size_t msglen) {
  const mori_rank_ctx *ctx = run->ctx;
  char key[192], text[16];
  const char *launch = ctx->store->incarnation ? ctx->store->incarnation : "-";
  snprintf(key, sizeof key, "demo/%s/failed/%d.%d/%d", launch, dead, life, ctx->rank);
  snprintf(text, sizeof text, "%d", *phase);
  if (ctx->store->set(ctx->store, key, text, strlen(text)) != 0) {
    snprintf(msg, msglen, "rank %d: recovery: set %s: %s", ctx->rank, key, mori_last_error());
    return 1;
  }
  for (int r = 0; r < ctx->world; r++) {
    if (r == dead || r == ctx->rank) continue;
    snprintf(key, sizeof key, "demo/%s/failed/%d.%d/%d", launch, dead, life, r);
    if (store_text(run, key, text, sizeof text, msg, msglen)) return 1;
    int theirs = atoi(text);
    if (theirs >= 0 && theirs < *phase) *phase = theirs;
  }
  return 0;
}

/* A survivor's window heals after rank dead's death, which failed *phase
 * (then the phase all redo): its own data checked across the heal, every
 * peer's after it. */
static int heal(struct rank_run *run, int dead, int *phase, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = run->ctx;
  int life = ++run->deaths[dead];
  if (check_send_area(run, ctx->rank, run->base, "before the heal", msg, msglen) ||
      agree_phase(run, dead, life, phase, msg, msglen))
    return 1;
  if (leads(run, dead) && publish_plan(run, dead, "heal", *phase, msg, msglen)) return 1;
  /* A heal waits for the dead process to be gone (the launcher reaps it). */
  int rc = MORI_ESTATE;
  for (double t0 = cli_now_us(); rc == MORI_ESTATE;) {
    rc = mori_window_heal(run->w, dead, ctx->store);
    if (rc != MORI_ESTATE || strstr(mori_last_error(), "is alive") == NULL ||
        cli_now_us() - t0 > SIGNAL_TIMEOUT_MS * 1e3)
      break;
    sleep_ms(HEAL_POLL_MS);
  }
  if (rc != 0) {
    run->failed_rc = rc;
    snprintf(msg, msglen, "rank %d: %s: heal of rank %d: %s", ctx->rank, phases[*phase].name,
             dead, mori_last_error());
    return 1;
  }
  if (check_send_area(run, ctx->rank, run->base, "after the heal", msg, msglen) ||
      check_peers(run, "after the heal", msg, msglen))
    return 1;
  run->healed++;
  return 0;
}

/* The survivors of a death mid-rendezvous go on under the next group
 * name, once the replacement is there; the leader first takes back the
 * launcher's notice of the death, which would fail the new group's wait
 * for the dead rank's new request. */
static int regroup(struct rank_run *run, int dead, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = run->ctx;
  char key[192], text[64];
  int n = ++run->regroups, life = ++run->deaths[dead];
  run->healed++; /* a recovery, though no window was there to heal */
  demo_key(run, key, sizeof key, "regroup", n, ctx->rank);
  if (store_mark(run, key, msg, msglen)) return 1;
  snprintf(run->group, sizeof run->group, "demo.%d", n);
  mori_symm_set_replacement(0); /* a new group: nothing in it to heal */
  if (!leads(run, dead)) {
    demo_key(run, key, sizeof key, "plan", dead, life);
    return store_text(run, key, text, sizeof text, msg, msglen);
  }
  for (int r = 0; r < ctx->world; r++) {
    if (r == dead) demo_key(run, key, sizeof key, "life", dead, life);
    else demo_key(run, key, sizeof key, "regroup", n, r);
    if (store_text(run, key, text, sizeof text, msg, msglen)) return 1;
  }
  notice_key(run, dead, key, sizeof key);
  if (ctx->store->remove) (void)ctx->store->remove(ctx->store, key);
  return publish_plan(run, dead, "join", 0, msg, msglen);
}

/* The replacement (life > 0): says it is there, then takes the plan the
 * survivors publish; *phase is where it joins them. */
static int replacement_plan(struct rank_run *run, int *phase, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = run->ctx;
  char key[192], kind[8], group[32];
  size_t cap = 64 + (size_t)ctx->world * 12;
  char *plan = malloc(cap);
  int used = 0, ok = plan != NULL;
  demo_key(run, key, sizeof key, "life", ctx->rank, ctx->life);
  if (!ok || store_mark(run, key, msg, msglen)) {
    free(plan);
    return 1;
  }
  demo_key(run, key, sizeof key, "plan", ctx->rank, ctx->life);
  if (wait_plan(run, key, plan, cap, msg, msglen)) {
    free(plan);
    return 1;
  }
  ok = sscanf(plan, "%7s %31s %d %d%n", kind, group, phase, &run->regroups, &used) == 4 &&
       *phase >= 0 && *phase < PHASES;
  for (int r = 0, k = 0; ok && r < ctx->world; r++, used += k)
    ok = sscanf(plan + used, " %d%n", &run->deaths[r], &k) == 1;
  if (ok) {
    snprintf(run->group, sizeof run->group, "%s", group);
    mori_symm_set_replacement(strcmp(kind, "heal") == 0); /* join: a fresh rank of a new group */
  } else {
    snprintf(msg, msglen, "rank %d: recovery: the plan at %s is malformed: %.200s", ctx->rank,
             key, plan);
  }
  free(plan);
  return !ok;
}

/* The group's rendezvous, made again under the next name while a death
 * mid-rendezvous is recovered from; timed. */
static int rendezvous(struct rank_run *run, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = run->ctx;
  for (;;) {
    double t0 = cli_now_us();
    int rc = mori_symm_rendezvous(run->base, run->group, ctx->rank, ctx->world, ctx->store,
                                  &run->w, NULL);
    run->rep.rendezvous_us = cli_now_us() - t0;
    if (rc == 0) return 0;
    snprintf(msg, msglen, "rank %d: %s", ctx->rank, mori_last_error());
    int dead = dead_peer(run, rc, mori_last_error());
    if (dead < 0 || regroup(run, dead, msg, msglen)) return 1;
  }
}

/* The phases from first on; one that fails because a peer died is done
 * again once the window healed. */
static int run_phases(struct rank_run *run, int first, char *msg, size_t msglen) {
  for (int p = first; p < PHASES;) {
    run->failed_rc = 0;
    if (phases[p].run(run, msg, msglen) == 0) {
      p++;
      continue;
    }
    int dead = dead_peer(run, run->failed_rc, msg);
    if (dead < 0 || heal(run, dead, &p, msg, msglen)) return 1;
  }
  return 0;
}

/* --exit-live: the rank returns with its window live and its block
 * allocated, so the core's exit hook tears everything down.  This hook is
 * registered before the first allocation registers the core's, so it runs
 * after it (atexit is last in, first out) and fails the rank's exit status
 * if the teardown left anything in the shim's ledger. */
static int exit_rank = -1;
static void check_exit_teardown(void) {
  long live = mori_shim_registry_total();
  if (live == 0) return;
  fprintf(stderr, "rank %d: the exit teardown left %ld resources live:\n", exit_rank, live);
  mori_shim_registry_report(stderr);
  fflush(stderr);
  _exit(3);
}

/* The ranks meet at a start line (through the store, untimed) before the
 * timed rendezvous, so that its figure is what the rendezvous costs, not
 * how far apart the ranks came out of runtime bring-up. */
static int start_line(const mori_rank_ctx *ctx) {
  char key[160];
  const char *run = ctx->store->incarnation ? ctx->store->incarnation : "-";
  snprintf(key, sizeof key, "demo/%s/start/%d", run, ctx->rank);
  if (ctx->store->set(ctx->store, key, "1", 1) != 0) return -1;
  for (int r = 0; r < ctx->world; r++) {
    void *v = NULL;
    size_t n = 0;
    snprintf(key, sizeof key, "demo/%s/start/%d", run, r);
    if (r != ctx->rank && ctx->store->get(ctx->store, key, &v, &n, mori_symm_timeout_ms()) != 0)
      return -1;
    free(v);
  }
  return 0;
}

/* Up to the window: the runtime, the buffer, its send area, the start
 * line, a replacement's plan, the rendezvous. */
static int open_window(struct rank_run *run, int *phase, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = run->ctx;
  int ndev = 0;
  if (mori_shim_select(run->a->r.shim) != 0) {
    snprintf(msg, msglen, "rank %d: %s", ctx->rank, mori_shim_message());
    return 1;
  }
  TRY_HIP(mori_hipGetDeviceCount(&ndev), "hipGetDeviceCount");
  /* The first allocation brings the runtime up (contexts, driver fds):
   * time it apart, and take the fd baseline after it.  Its block is
   * larger than a block kept warm (MORI_SYMM_KEEP_WARM=1), whose memory
   * would hold fds in the baseline that release_all gives back before the
   * last count. */
  void *warm = NULL;
  double t0 = cli_now_us();
  TRY(mori_symm_alloc((size_t)MORI_SYMM_WARM_EXPORT_MAX + 1, ctx->rank % ndev, &warm),
      "warm-up alloc");
  TRY(mori_symm_free(warm), "warm-up free");
  run->rep.init_us = cli_now_us() - t0;
  run->fds0 = mori_count_fds();
  t0 = cli_now_us();
  int rc = mori_symm_alloc(run->a->size, ctx->rank % ndev, &run->base);
  run->rep.alloc_us = cli_now_us() - t0;
  if (rc == 0 && fill(run, msg, msglen) != 0) return 1;
  if (rc == 0) rc = start_line(ctx); /* a replacement's too: its peers may wait there */
  if (rc != 0) {
    snprintf(msg, msglen, "rank %d: %s", ctx->rank, mori_last_error());
    return 1;
  }
  if (ctx->life > 0 && replacement_plan(run, phase, msg, msglen) != 0) return 1;
  if (rendezvous(run, msg, msglen)) return 1;
  t0 = cli_now_us();
  for (int i = 0; i < run->a->cached_calls; i++) {
    mori_window *again = NULL;
    if (mori_symm_rendezvous((char *)run->base + 64, run->group, ctx->rank, ctx->world,
                             ctx->store, &again, NULL) != 0 || again != run->w) {
      snprintf(msg, msglen, "rank %d: cached rendezvous: %s", ctx->rank, mori_last_error());
      return 1;
    }
  }
  run->rep.cached_us = (cli_now_us() - t0) / (run->a->cached_calls ? run->a->cached_calls : 1);
  /* A replacement that joins after the exchange checks the chunks meant
   * for it where its peers keep them, with the rest of their data. */
  if (ctx->life > 0 && check_peers(run, "after joining", msg, msglen)) return 1;
  if (ctx->life > 0 && *phase > 0) run->rep.bytes_verified = run->chunk * (size_t)ctx->world;
  return 0;
}

/* " healed=N" (and " life=N" for a replacement) while recovering. */
static void recovery_words(const struct rank_run *run, char *out, size_t cap) {
  out[0] = '\0';
  if (run->a->max_restarts <= 0) return;
  int n = snprintf(out, cap, " healed=%d", run->healed);
  if (run->ctx->life > 0) snprintf(out + n, cap - (size_t)n, " life=%d", run->ctx->life);
}

static int demo_rank_run(struct rank_run *run, char *msg, size_t msglen) {
  const mori_rank_ctx *ctx = run->ctx;
  const struct demo_args *a = run->a;
  struct rank_report *rep = &run->rep;
  int phase = 0;
  char words[48];
  if (open_window(run, &phase, msg, msglen) || run_phases(run, phase, msg, msglen)) return 1;
  recovery_words(run, words, sizeof words);
  if (a->exit_live) {
    snprintf(msg, msglen,
             "rank %d ok init_us=%.0f alloc_us=%.0f rendezvous_us=%.0f cached_us=%.3f "
             "barrier_us=%.1f a2a_us=%.0f bytes=%zu live=%ld (torn down at exit)%s",
             ctx->rank, rep->init_us, rep->alloc_us, rep->rendezvous_us, rep->cached_us,
             rep->barrier_us, rep->a2a_us, rep->bytes_verified, mori_shim_registry_total(), words);
    return 0;
  }
  TRY(mori_symm_free(run->base), "free");
  TRY(mori_symm_release_all(), "release_all");
  rep->leaks = mori_shim_registry_total();
  rep->fd_delta = mori_count_fds() - run->fds0;
  if (rep->leaks != 0 || rep->fd_delta != 0) {
    /* not "ok": the launcher would read an ok line and a failed exit as a
     * failed exit hook */
    snprintf(msg, msglen, "rank %d: after free and release_all: %ld runtime resources live, %+d fds",
             ctx->rank, rep->leaks, rep->fd_delta);
    return 1;
  }
  snprintf(msg, msglen,
           "rank %d ok init_us=%.0f alloc_us=%.0f rendezvous_us=%.0f cached_us=%.3f barrier_us=%.1f "
           "a2a_us=%.0f bytes=%zu leaks=%ld fds=%+d%s",
           ctx->rank, rep->init_us, rep->alloc_us, rep->rendezvous_us, rep->cached_us,
           rep->barrier_us, rep->a2a_us, rep->bytes_verified, rep->leaks, rep->fd_delta, words);
  return 0;
}

static int demo_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const struct demo_args *a = ctx->arg;
  struct rank_run run = {.ctx = ctx, .a = a, .group = "demo",
                         .chunk = a->size / 2 / (size_t)ctx->world,
                         .timeout_ms = a->max_restarts > 0 ? SIGNAL_TIMEOUT_MS : 0};
  if (a->exit_live) {
    exit_rank = ctx->rank;
    atexit(check_exit_teardown);
  }
  run.host = malloc(a->size);
  run.deaths = calloc((size_t)ctx->world, sizeof *run.deaths);
  int rc = run.host && run.deaths ? demo_rank_run(&run, msg, msglen) : -1;
  if (rc < 0) snprintf(msg, msglen, "rank %d: out of host memory", ctx->rank);
  free(run.host);
  free(run.deaths);
  return rc != 0;
}

static double field(const char *line, const char *key) {
  const char *p = strstr(line, key);
  return p ? strtod(p + strlen(key), NULL) : 0;
}

static const cli_option demo_options[] = {
    CLI_RANKS_OPTIONS(struct demo_args, 4),
    {"--size", CLI_SIZE, offsetof(struct demo_args, size), 2, 16LL << 30, NULL, "BYTES",
     "buffer per rank, half sent, half received (default 8M; at least 2 per rank)"},
    {"--timeout-ms", CLI_INT, offsetof(struct demo_args, deadline_ms), CLI_DEADLINE_MS_MIN, CLI_DEADLINE_MS_MAX, NULL, "MS",
     "kill ranks still running after MS (default 120000)"},
    {"--exit-live", CLI_FLAG, offsetof(struct demo_args, exit_live), 0, 0, NULL, NULL,
     "end with the window live and the block allocated: the exit hook tears down, and a rank "
     "fails if that leaves anything"},
    {"--max-restarts", CLI_INT, offsetof(struct demo_args, max_restarts), 0, 64, NULL, "N",
     "start a rank that dies again, up to N times in the run: the survivors heal their window "
     "with it and redo the phase that failed (or rendezvous again under a new group name, for "
     "a death mid-rendezvous); signal calls are bounded (10 s) and the closing line counts "
     "healed= (default 0: a death fails the demo)"},
    {0},
};

static int demo_run(int argc, char **argv) {
  struct demo_args a = {.r = {.ranks = 4}, .size = 8u << 20, .deadline_ms = 120000,
                        .cached_calls = 1000, .barriers = 100};
  int rc = cli_parse(&cli_demo_command, &a, argc, argv);
  if (rc != 0) return rc == CLI_EXIT_HELP ? 0 : rc;
  if (a.size < (size_t)a.r.ranks * 2)
    return cli_usage_error(&cli_demo_command,
                           "--size '%zu' is too small for %d ranks (accepted: at least 2 bytes "
                           "per rank, %d)",
                           a.size, a.r.ranks, a.r.ranks * 2);
  rc = cli_ranks_prepare(&cli_demo_command, &a.r);
  if (rc != 0) return rc;
  /* What each rank sends and verifies, the quantity of every rank's bytes=
   * and, summed, of the closing line: the second half of its buffer, a
   * chunk from each rank (demo_rank). */
  size_t per_rank = a.size / 2 / (size_t)a.r.ranks * (size_t)a.r.ranks;
  char buffer[32];
  cli_format_size((long long)a.size, buffer, sizeof buffer);
  printf("demo: %d ranks on %d device(s), shim %s, buffers of %s: bytes=%zu per rank "
         "(a chunk to every rank, each verified)\n",
         a.r.ranks, a.r.devices, cli_shim_label(a.r.shim), buffer, per_rank);
  fflush(stdout);

  mori_rank_result *res = calloc((size_t)a.r.ranks, sizeof *res);
  if (res == NULL) {
    fprintf(stderr, "demo FAILED: out of host memory\n");
    return 1;
  }
  mori_launch_opts opts = {a.deadline_ms, NULL, a.max_restarts};
  (void)mori_launch_with(a.r.ranks, demo_rank, &a, &opts, res);
  int failed = cli_ranks_report(&cli_demo_command, a.r.ranks, res, a.deadline_ms);
  double rdv = 0, cached = 0, barrier = 0, a2a = 0, alloc = 0, init = 0;
  size_t bytes = 0;
  long leaks = 0;
  int healed = 0;
  for (int r = 0; r < a.r.ranks && failed == 0; r++) {
    const char *m = res[r].msg;
    init = init > field(m, "init_us=") ? init : field(m, "init_us=");
    alloc = alloc > field(m, " alloc_us=") ? alloc : field(m, " alloc_us=");
    rdv = rdv > field(m, "rendezvous_us=") ? rdv : field(m, "rendezvous_us=");
    cached += field(m, "cached_us=") / a.r.ranks;
    barrier += field(m, "barrier_us=") / a.r.ranks;
    a2a = a2a > field(m, "a2a_us=") ? a2a : field(m, "a2a_us=");
    bytes += (size_t)field(m, "bytes=");
    leaks += (long)field(m, "leaks=");
    healed = healed > (int)field(m, " healed=") ? healed : (int)field(m, " healed=");
  }
  if (failed == 0) {
    size_t moved = bytes / (size_t)a.r.ranks * (size_t)(a.r.ranks - 1);
    printf("timings: runtime init + first alloc/free %.0f us, alloc %.0f us, first rendezvous "
           "%.0f us, cached rendezvous %.3f us, barrier %.1f us, all-to-all %.0f us (%.2f GB/s "
           "aggregate, peers only)\n",
           init, alloc, rdv, cached, barrier, a2a, a2a > 0 ? (double)moved / a2a / 1e3 : 0.0);
    /* healed=: the most deaths one rank recovered from (--max-restarts) */
    char heals[32] = "";
    if (a.max_restarts > 0) snprintf(heals, sizeof heals, " healed=%d", healed);
    printf("demo ok: ranks=%d bytes=%zu%s leaks=%ld (bytes: %d x %zu per rank)%s%s\n", a.r.ranks,
           bytes, heals, leaks, a.r.ranks, per_rank,
           a.exit_live ? " (teardown at exit, checked by each rank)" : "",
           cli_emulator_note(a.r.shim));
  }
  free(res);
  return failed == 0 ? 0 : 1;
}

const cli_command cli_demo_command = {
    .name = "demo",
    .run = demo_run,
    .summary = "N forked ranks: alloc, rendezvous, all-to-all, barriers, verify every byte, "
               "teardown, count leaks",
    .options = demo_options,
};
