/*
 * bench_heal.c - mori-heal-bench: what a rank's death costs a survivor,
 * healed against restarted, on this host (the sim, or a GPU runtime).
 * Each repetition is one launch of N ranks with a window of the buffer
 * size; the last rank dies twice:
 *
 *   heal     it starts its replacement (a fresh process: this program
 *            again) and is killed; once the replacement is up (runtime
 *            brought up, buffer allocated, waiting for the survivors'
 *            offer) and the launcher has told of the death, each survivor
 *            times its mori_window_heal, from the call to its return;
 *   restart  the replacement starts a fresh process and is killed in its
 *            turn; each survivor times, from that start, freeing its
 *            buffer, allocating it again and the rendezvous of a new group
 *            with the fresh process, which starts, brings its runtime up
 *            and allocates meanwhile: a restart of the world.
 *
 * The store the heal is handed records when it was first written, when the
 * last request and the last "mapped" entry were found: the heal's phases.
 * Prints medians of every survivor's figures; times, never a verdict of a
 * test (docs/performance.md, "Heal against a restart").
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch.h"
#include "mori/hip_shim.h"
#include "mori/symm.h"

#define WAIT_MS 60000
#define MAX_WORLD 16

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t); /* the host's: comparable between processes */
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* ---- the store the heal is handed: when its phases end ---- */

typedef struct timing_store {
  mori_store base;
  mori_store *inner;
  int on;
  double first_set, req_found, mapped_set, mapped_found;
} timing_store;

static int ts_set(mori_store *s, const char *key, const void *value, size_t len) {
  timing_store *t = (timing_store *)s;
  int rc = t->inner->set(t->inner, key, value, len);
  if (t->on && t->first_set == 0) t->first_set = now_us();
  if (t->on && strstr(key, "/mapped/")) t->mapped_set = now_us();
  return rc;
}

static int ts_get(mori_store *s, const char *key, void **value, size_t *len, int timeout_ms) {
  timing_store *t = (timing_store *)s;
  int rc = t->inner->get(t->inner, key, value, len, timeout_ms);
  if (t->on && rc == 0 && strstr(key, "/req/")) t->req_found = now_us();
  if (t->on && rc == 0 && strstr(key, "/mapped/")) t->mapped_found = now_us();
  return rc;
}

static int ts_add(mori_store *s, const char *key, int64_t delta, int64_t *result) {
  timing_store *t = (timing_store *)s;
  return t->inner->add(t->inner, key, delta, result);
}

static int ts_remove(mori_store *s, const char *key) {
  timing_store *t = (timing_store *)s;
  return t->inner->remove(t->inner, key);
}

static int ts_wait_change(mori_store *s, int timeout_ms) {
  timing_store *t = (timing_store *)s;
  return t->inner->wait_change(t->inner, timeout_ms);
}

static void ts_destroy(mori_store *s) { (void)s; /* the launcher's store stays */ }

static void timing_wrap(timing_store *t, mori_store *inner) {
  memset(t, 0, sizeof *t);
  t->inner = inner;
  t->base = (mori_store){ts_set, ts_get, ts_add, ts_destroy, NULL, inner->incarnation, NULL};
  if (inner->wait_change) t->base.wait_change = ts_wait_change;
  if (inner->remove) t->base.remove = ts_remove;
}

/* ---- the bench's own words in the store ---- */

static int put_num(mori_store *s, const char *key, double v) {
  char text[64];
  int n = snprintf(text, sizeof text, "%.0f", v);
  return s->set(s, key, text, (size_t)n + 1);
}

/* The number under key, once it is there; -1 after WAIT_MS. */
static double get_num(mori_store *s, const char *key) {
  void *v = NULL;
  size_t len = 0;
  if (s->get(s, key, &v, &len, WAIT_MS) != 0) return -1;
  double d = strtod(v, NULL);
  free(v);
  return d;
}

/* ---- the dying rank's successors: this program again ---- */

struct config {
  int world;
  size_t size;
  int devices; /* rank r uses device r % devices (ranks share a GPU where fewer) */
};

/* Starts this program as a fresh process of the given role (a grandchild,
 * so that it outlives its parent), after noting when under t_key. */
static void start_fresh(const mori_rank_ctx *ctx, const struct config *c, const char *role,
                        const char *t_key) {
  char world[16], size[32], rank[16], devices[16];
  snprintf(world, sizeof world, "%d", c->world);
  snprintf(devices, sizeof devices, "%d", c->devices);
  snprintf(size, sizeof size, "%zu", c->size);
  snprintf(rank, sizeof rank, "%d", ctx->rank);
  fflush(NULL);
  (void)put_num(ctx->store, t_key, now_us());
  pid_t pid = fork();
  if (pid == 0) {
    if (fork() != 0) _exit(0);
    execl("/proc/self/exe", "mori-heal-bench", "--child", role, ctx->store_dir, ctx->incarnation,
          world, size, rank, devices, (char *)NULL);
    _exit(127);
  }
  if (pid > 0) waitpid(pid, NULL, 0);
}

/* Every rank's last act on a window: a barrier of the whole world. */
static int whole(mori_window *w) {
  if (mori_window_barrier(w, 0, NULL, 30000) != 0) return -1;
  return mori_hipStreamSynchronize(NULL) == hipSuccess ? 0 : -1;
}

/* The replacement: up (runtime, buffer), then the heal's rendezvous; once
 * the world passed a barrier, it dies in its turn, starting the fresh
 * process of the restart. */
static int replacement(const mori_rank_ctx *ctx, const struct config *c, char *err, size_t cap) {
  void *base = NULL;
  mori_window *w = NULL;
  int rc = mori_symm_alloc(c->size, ctx->rank % c->devices, &base);
  if (rc == 0) rc = put_num(ctx->store, "bench/up/heal", now_us());
  mori_symm_set_replacement(1);
  if (rc == 0) rc = mori_symm_rendezvous(base, "heal", ctx->rank, c->world, ctx->store, &w, NULL);
  if (rc == 0) rc = whole(w);
  if (rc != 0) return snprintf(err, cap, "replacement: %s", mori_last_error()), 1;
  start_fresh(ctx, c, "fresh", "bench/t/restart");
  raise(SIGKILL);
  return 1;
}

/* The restart's fresh process: up, then the new group's rendezvous. */
static int fresh(const mori_rank_ctx *ctx, const struct config *c, char *err, size_t cap) {
  void *base = NULL;
  mori_window *w = NULL;
  int rc = mori_symm_alloc(c->size, ctx->rank % c->devices, &base);
  if (rc == 0) rc = put_num(ctx->store, "bench/up/restart", now_us());
  if (rc == 0) rc = mori_symm_rendezvous(base, "restart", ctx->rank, c->world, ctx->store, &w, NULL);
  if (rc == 0) rc = whole(w);
  if (rc == 0) rc = mori_symm_free(base);
  if (rc != 0) snprintf(err, cap, "fresh: %s", mori_last_error());
  (void)mori_symm_release_all();
  return rc != 0;
}

static int child_main(char **argv) {
  mori_store *store = NULL;
  struct config c = {atoi(argv[4]), strtoull(argv[5], NULL, 10), atoi(argv[7])};
  char err[900] = "ok";
  if (mori_file_store_open(argv[2], &store) != 0) return 2;
  store->incarnation = argv[3];
  mori_rank_ctx ctx = {.rank = atoi(argv[6]), .world = c.world, .store = store,
                       .store_dir = argv[2], .incarnation = argv[3]};
  int failed = strcmp(argv[1], "fresh") == 0 ? fresh(&ctx, &c, err, sizeof err)
                                              : replacement(&ctx, &c, err, sizeof err);
  (void)store->set(store, "bench/verdict", err, strlen(err) + 1);
  store->destroy(store);
  return failed;
}

/* ---- a survivor ---- */

typedef struct figures {
  double heal, lose_bind, rejoin, exchange_map, resync, cleanup;
  double restart, go, free_alloc, rendezvous, start;
} figures;

/* Waits until the dead rank is gone and told of (so that the heal finds
 * and clears the launcher's notice), then times the heal. */
static int time_heal(const mori_rank_ctx *ctx, mori_window *w, figures *f) {
  char mark[512];
  void *v = NULL;
  size_t len = 0;
  int dead = ctx->world - 1;
  if (get_num(ctx->store, "bench/up/heal") < 0) return -1;
  snprintf(mark, sizeof mark, "mori_symm/" MORI_STORE_DEATH_GROUP "/%d/%s/0/abort/0", ctx->world,
           ctx->incarnation);
  if (ctx->store->get(ctx->store, mark, &v, &len, WAIT_MS) == 0) free(v);
  pid_t pid = (pid_t)get_num(ctx->store, "bench/pid");
  for (int i = 0; i < 10000 && kill(pid, 0) == 0; i++) usleep(1000);
  timing_store t;
  timing_wrap(&t, ctx->store);
  t.on = 1;
  double t0 = now_us();
  int rc = mori_window_heal(w, dead, &t.base);
  double t1 = now_us();
  if (rc != 0) return rc;
  f->heal = t1 - t0;
  f->lose_bind = t.first_set - t0;
  f->rejoin = t.req_found - t.first_set;
  f->exchange_map = t.mapped_set - t.req_found;
  f->resync = t.mapped_found - t.mapped_set;
  f->cleanup = t1 - t.mapped_found;
  return whole(w);
}

/* From the fresh process's start: free, allocate, rendezvous again. */
static int time_restart(const mori_rank_ctx *ctx, const struct config *c, void **base,
                        figures *f) {
  mori_window *w = NULL;
  double t_start = get_num(ctx->store, "bench/t/restart");
  if (t_start < 0) return -1;
  double t0 = now_us();
  int rc = mori_symm_free(*base);
  *base = NULL;
  if (rc == 0) rc = mori_symm_alloc(c->size, ctx->rank % c->devices, base);
  double t1 = now_us();
  if (rc == 0) rc = mori_symm_rendezvous(*base, "restart", ctx->rank, c->world, ctx->store, &w, NULL);
  double t2 = now_us();
  if (rc != 0) return rc;
  f->restart = t2 - t_start;
  f->go = t0 - t_start;
  f->free_alloc = t1 - t0;
  f->rendezvous = t2 - t1;
  return whole(w);
}

static int bench_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const struct config *c = ctx->arg;
  void *base = NULL;
  mori_window *w = NULL;
  figures f = {0};
  int rc = mori_symm_alloc(c->size, ctx->rank % c->devices, &base);
  if (rc == 0) rc = mori_symm_rendezvous(base, "heal", ctx->rank, c->world, ctx->store, &w, NULL);
  if (rc == 0) rc = whole(w);
  if (rc == 0 && ctx->rank == ctx->world - 1) {
    (void)put_num(ctx->store, "bench/pid", getpid());
    start_fresh(ctx, c, "replacement", "bench/t/heal");
    raise(SIGKILL);
  }
  if (rc == 0) rc = time_heal(ctx, w, &f);
  if (rc == 0) rc = time_restart(ctx, c, &base, &f);
  if (rc != 0) {
    snprintf(msg, msglen, "rank %d: %s", ctx->rank, mori_last_error());
    return 1;
  }
  void *v = NULL;
  size_t len = 0;
  if (ctx->store->get(ctx->store, "bench/verdict", &v, &len, WAIT_MS) != 0 ||
      strcmp(v, "ok") != 0) {
    snprintf(msg, msglen, "rank %d: the dead rank's successors: %s", ctx->rank,
             v ? (char *)v : "said nothing");
    free(v);
    return 1;
  }
  free(v);
  f.start = get_num(ctx->store, "bench/up/heal") - get_num(ctx->store, "bench/t/heal");
  rc = mori_symm_free(base) || mori_symm_release_all();
  snprintf(msg, msglen,
           "heal=%.0f lose_bind=%.0f rejoin=%.0f exchange_map=%.0f resync=%.0f cleanup=%.0f "
           "restart=%.0f go=%.0f free_alloc=%.0f rendezvous=%.0f start=%.0f",
           f.heal, f.lose_bind, f.rejoin, f.exchange_map, f.resync, f.cleanup, f.restart, f.go,
           f.free_alloc, f.rendezvous, f.start);
  return rc;
}

/* ---- the parent: repetitions, medians, the table ---- */

static const char *const fields[] = {"heal",    "lose_bind", "rejoin",     "exchange_map",
                                     "resync",  "cleanup",   "restart",    "go",
                                     "free_alloc", "rendezvous", "start"};
enum { F_HEAL, F_LOSE_BIND, F_REJOIN, F_EXCHANGE_MAP, F_RESYNC, F_CLEANUP, F_RESTART, F_GO,
       F_FREE_ALLOC, F_RENDEZVOUS, F_START, F_COUNT };

static int field(const char *line, const char *name, double *out) {
  char key[32];
  snprintf(key, sizeof key, "%s=", name);
  for (const char *p = strstr(line, key); p != NULL; p = strstr(p + 1, key))
    if (p == line || p[-1] == ' ') {
      *out = strtod(p + strlen(key), NULL);
      return 0;
    }
  return -1;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Every survivor's figures of reps launches; the medians in ms in med. */
static int measure(const struct config *c, int reps, double med[F_COUNT]) {
  int cap = reps * MAX_WORLD, n = 0, failed = 0;
  double *samples = calloc((size_t)cap * F_COUNT, sizeof *samples);
  mori_rank_result res[MAX_WORLD];
  if (samples == NULL) return -1;
  for (int i = 0; i < reps; i++) {
    memset(res, 0, sizeof res);
    (void)mori_launch(c->world, bench_rank, (void *)c, 120000, res);
    for (int r = 0; r < c->world - 1; r++) {
      int ok = !res[r].hung && !res[r].signal && res[r].exit_code == 0;
      for (int k = 0; ok && k < F_COUNT; k++)
        ok = field(res[r].msg, fields[k], &samples[k * cap + n]) == 0;
      if (ok) n++;
      else failed++, printf("  %d ranks, rep %d: rank %d FAILED: %s\n", c->world, i, r,
                            res[r].hung ? "hung" : res[r].msg);
    }
  }
  for (int k = 0; k < F_COUNT; k++) med[k] = median(&samples[k * cap], n) / 1e3;
  free(samples);
  return failed;
}

static int parse_list(const char *s, int *out, int max) {
  int n = 0;
  for (char *end = NULL; *s && n < max; s = *end ? end + 1 : end) {
    long v = strtol(s, &end, 10);
    if (end == s || v <= 0 || (*end && *end != ',')) return -1;
    out[n++] = (int)v;
  }
  return n;
}

static void usage(void) {
  fprintf(stderr, "usage: mori-heal-bench [--ranks 2,4,8] [--mib 1,64] [--reps 10] [--shim sim]\n"
                  "                       [--devices 8]   (rank r on device r %% devices)\n");
}

int main(int argc, char **argv) {
  if (argc == 9 && strcmp(argv[1], "--child") == 0) return child_main(argv + 1);
  int ranks[8] = {2, 4, 8}, nranks = 3, mib[8] = {1, 64}, nmib = 2, reps = 10, failed = 0, devices = 8;
  const char *shim = "sim";
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : "";
    if (strcmp(argv[i], "--ranks") == 0) nranks = parse_list(v, ranks, 8), i++;
    else if (strcmp(argv[i], "--mib") == 0) nmib = parse_list(v, mib, 8), i++;
    else if (strcmp(argv[i], "--reps") == 0) reps = atoi(v), i++;
    else if (strcmp(argv[i], "--shim") == 0) shim = v, i++;
    else if (strcmp(argv[i], "--devices") == 0) devices = atoi(v), i++;
    else return usage(), 2;
  }
  for (int i = 0; i < nranks; i++)
    if (ranks[i] < 2 || ranks[i] > 8) nranks = -1;
  if (nranks <= 0 || nmib <= 0 || reps <= 0 || devices <= 0) return usage(), 2;
  setenv("MORI_SYMM_SHIM", shim, 1);
  printf("mori-heal-bench: a survivor's heal against a restart of the world, shim %s, "
         "medians of %d reps over every survivor (ms)\n",
         shim, reps);
  printf("%5s %6s %8s %9s %7s %7s | heal: %9s %6s %12s %6s %7s | restart: %5s %10s %10s\n",
         "ranks", "MiB", "heal", "restart", "ratio", "start", "lose+bind", "rejoin",
         "exchange+map", "resync", "cleanup", "go", "free+alloc", "rendezvous");
  double ratio8[8] = {0};
  for (int m = 0; m < nmib; m++)
    for (int i = 0; i < nranks; i++) {
      struct config c = {ranks[i], (size_t)mib[m] << 20, devices};
      double d[F_COUNT];
      failed += measure(&c, reps, d) != 0;
      double ratio = d[F_RESTART] > 0 ? d[F_HEAL] / d[F_RESTART] : 0;
      if (ranks[i] == 8) ratio8[m] = ratio;
      printf("%5d %6d %8.2f %9.2f %7.3f %7.2f | heal: %9.2f %6.2f %12.2f %6.2f %7.2f | "
             "restart: %5.2f %10.2f %10.2f\n",
             c.world, mib[m], d[F_HEAL], d[F_RESTART], ratio, d[F_START], d[F_LOSE_BIND],
             d[F_REJOIN], d[F_EXCHANGE_MAP], d[F_RESYNC], d[F_CLEANUP], d[F_GO], d[F_FREE_ALLOC],
             d[F_RENDEZVOUS]);
      fflush(stdout);
    }
  for (int m = 0; m < nmib; m++)
    if (ratio8[m] > 0)
      printf("target (8 ranks, %d MiB): heal %.3f of a restart, %s (at most 0.2)\n", mib[m],
             ratio8[m], ratio8[m] <= 0.2 ? "met" : "NOT met");
  printf(failed ? "mori-heal-bench FAILED: %d configurations had a failing rank\n"
                : "mori-heal-bench ok: %d failures\n",
         failed);
  return failed != 0;
}
