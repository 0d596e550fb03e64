/*
 * test_heal.c - a window heals: rank DEAD of four dies after a barrier and
 * a captured graph; a new process takes its place (this program again,
 * exec'd with --replacement, so that it holds nothing of the dead one) and
 * rendezvouses as rank DEAD does; each survivor heals its window with
 * mori_window_heal.  Afterwards, on every survivor: the pointer tables are
 * the ones it had, its own data and the live peers' data are as they were,
 * the replacement's data is at the dead rank's slot, eager barriers and a
 * put/wait ring pass among all four, and the graph captured before the
 * death replays; at the end the shim's registry is at 0 everywhere.
 *
 * Also: a heal of a live rank is refused (its process is there) and
 * changes nothing.
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "life_pattern.h"
#include "signal_rounds.h"

#define WORLD 4
#define DEAD 2
#define CH 1


static int replay(const mori_rank_ctx *ctx, mori_window *w, hipStream_t s, mori_sim_graph *g,
                  char *msg, size_t msglen);

/* What every rank does once the window is whole again: rounds of eager
 * barriers, a put/wait ring, and the graph (NULL: none) replayed. */
static int after_heal(const mori_rank_ctx *ctx, mori_window *w, hipStream_t s, mori_sim_graph *g,
                      char *msg, size_t msglen) {
  for (int p = 0; p < WORLD; p++) {
    int d = life_pattern_differs(mori_window_buffer_ptrs(w)[p], p, p == DEAD ? 1 : 0);
    CHECK(d == 0, "rank %d's data after the heal: word %d differs", p, d - 1);
  }
  if (ordered_rounds(ctx, w, 0, 20, msg, msglen)) return 1;
  int next = (ctx->rank + 1) % WORLD, prev = (ctx->rank + WORLD - 1) % WORLD;
  for (int i = 1; i <= 5; i++) {
    CHECK(put_word(w, next, 1 + ctx->rank, (uint32_t)(100 * i + ctx->rank)) == 0, "write");
    CHECK(mori_window_put_signal(w, next, 2, NULL, 10000) == 0, "put %d: %s", i, mori_last_error());
    CHECK(mori_window_wait_signal(w, prev, 2, NULL, 10000) == 0, "wait %d: %s", i,
          mori_last_error());
    CHECK(mori_hipStreamSynchronize(NULL) == hipSuccess, "sync");
    CHECK(get_word(w, ctx->rank, 1 + prev) == (uint32_t)(100 * i + prev), "ring %d: %u", i,
          get_word(w, ctx->rank, 1 + prev));
    CHECK(mori_window_barrier(w, 2, NULL, 10000) == 0, "ring barrier: %s", mori_last_error());
  }
  return g != NULL ? replay(ctx, w, s, g, msg, msglen) : 0;
}

/* The graph of a bounded barrier, a put to the next rank and a wait for
 * the previous one, all on CH. */
static int capture(const mori_rank_ctx *ctx, mori_window *w, hipStream_t s, mori_sim_graph **g,
                   char *msg, size_t msglen) {
  int next = (ctx->rank + 1) % WORLD, prev = (ctx->rank + WORLD - 1) % WORLD;
  CHECK(mori_sim_begin_capture(s) == hipSuccess, "capture: %s", mori_shim_message());
  CHECK(mori_window_barrier(w, CH, s, 1000) == 0, "captured barrier: %s", mori_last_error());
  CHECK(mori_window_put_signal(w, next, CH, s, 0) == 0, "captured put: %s", mori_last_error());
  CHECK(mori_window_wait_signal(w, prev, CH, s, 0) == 0, "captured wait: %s", mori_last_error());
  CHECK(mori_sim_end_capture(s, g) == hipSuccess, "end capture: %s", mori_shim_message());
  return 0;
}

/* Every rank replays its graph: the survivors the one captured before
 * the death, the replacement its own, captured after the heal. */
static int replay(const mori_rank_ctx *ctx, mori_window *w, hipStream_t s, mori_sim_graph *g,
                  char *msg, size_t msglen) {
  for (int i = 1; i <= 10; i++) {
    CHECK(put_word(w, ctx->rank, 0, (uint32_t)(1000 + i)) == 0, "write");
    CHECK(mori_sim_graph_launch(g, s) == hipSuccess, "replay %d: %s", i, mori_shim_message());
    CHECK(mori_hipStreamSynchronize(s) == hipSuccess, "sync: %s", mori_shim_message());
    for (int p = 0; p < WORLD; p++)
      CHECK(get_word(w, p, 0) == (uint32_t)(1000 + i), "replay %d: rank %d's word is %u", i, p,
            get_word(w, p, 0));
    CHECK(mori_window_barrier(w, CH, s, 10000) == 0, "eager barrier %d: %s", i, mori_last_error());
    CHECK(mori_hipStreamSynchronize(s) == hipSuccess, "sync");
  }
  return 0;
}

/* The replacement: a fresh process, rank DEAD of the same group. */
static int replacement_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL;
  hipStream_t s = NULL;
  mori_sim_graph *g = NULL;
  CHECK(mori_shim_select("sim") == 0, "%s", mori_shim_message());
  CHECK(mori_symm_alloc(MiB, ctx->rank, &base) == 0, "alloc: %s", mori_last_error());
  CHECK(life_pattern_fill(base, ctx->rank, 1) == 0, "fill: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(base, "job", ctx->rank, WORLD, ctx->store, &w, NULL) == 0,
        "replacement's rendezvous: %s", mori_last_error());
  if (after_heal(ctx, w, NULL, NULL, msg, msglen)) return 1;
  CHECK(mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking) == hipSuccess, "stream");
  if (capture(ctx, w, s, &g, msg, msglen) || replay(ctx, w, s, g, msg, msglen)) return 1;
  mori_sim_graph_destroy(g);
  CHECK(mori_hipStreamDestroy(s) == hipSuccess, "stream destroy");
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "replacement");
}

/* Started by the dying rank: this program again, as a fresh process. */
static int replacement_main(const char *dir, const char *incarnation) {
  char msg[1024] = "";
  mori_store *store = NULL;
  setenv("MORI_SYMM_REPLACEMENT", "1", 1);
  if (mori_file_store_open(dir, &store) != 0) return 2;
  store->incarnation = incarnation;
  mori_rank_ctx ctx = {DEAD, WORLD, store, dir, NULL, incarnation, 1};
  int rc = replacement_rank(&ctx, msg, sizeof msg);
  (void)store->set(store, "test_heal/replacement", msg, strlen(msg) + 1);
  store->destroy(store);
  return rc;
}

/* A replacement that cannot get its buffer: it says so through the
 * public abort, before its rendezvous could learn the heal's keys. */
static int gives_up_main(const char *dir, const char *incarnation) {
  mori_store *store = NULL;
  setenv("MORI_SYMM_REPLACEMENT", "1", 1);
  if (mori_file_store_open(dir, &store) != 0) return 2;
  store->incarnation = incarnation;
  int rc = mori_symm_rendezvous_abort("job", DEAD, WORLD, store, "no memory for its buffer");
  store->destroy(store);
  return rc != 0;
}

/* This program's path, read at its start: under valgrind /proc/self/exe
 * names valgrind's tool, while the path read through it is ours (valgrind
 * answers that readlink), and an exec of it is traced like the rest. */
static char self_exe[4096] = "/proc/self/exe";

static void start_replacement(const mori_rank_ctx *ctx, const char *how) {
  pid_t pid = fork();
  if (pid == 0) {
    /* a grandchild: the replacement outlives the rank that started it */
    if (fork() != 0) _exit(0);
    execl(self_exe, "test_heal", how, ctx->store_dir, ctx->incarnation, (char *)NULL);
    _exit(127);
  }
  if (pid > 0) waitpid(pid, NULL, 0);
}

/* The replacement's word in the store (its main writes "ok ..." or why
 * it failed): 0 and the word in msg if it is "ok", else 1. */
static int replacement_said_ok(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  void *v = NULL;
  size_t len = 0;
  CHECK(ctx->store->get(ctx->store, "test_heal/replacement", &v, &len, 60000) == 0,
        "the replacement said nothing: %s", mori_last_error());
  int ok = len > 3 && memcmp(v, "ok ", 3) == 0;
  snprintf(msg, msglen, "replacement: %.900s", (char *)v);
  free(v);
  return ok ? 0 : 1;
}

/* A survivor's heal, asked again while the dead rank's process is there. */
static int heal_when_gone(mori_window *w, mori_store *store) {
  int rc = MORI_ESTATE;
  for (int i = 0; i < 1000 && rc == MORI_ESTATE; i++) {
    rc = mori_window_heal(w, DEAD, store);
    if (rc == MORI_ESTATE && strstr(mori_last_error(), "is alive") != NULL) sleep_ms(10);
    else break;
  }
  return rc;
}

static int heal_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL;
  hipStream_t s = NULL;
  mori_sim_graph *g = NULL;
  if (open_window(ctx, "job", &base, &w, msg, msglen)) return 1;
  CHECK(life_pattern_fill(base, ctx->rank, 0) == 0, "fill: %s", mori_last_error());
  CHECK(mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking) == hipSuccess, "stream");
  CHECK(mori_window_barrier(w, 0, s, 10000) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_hipStreamSynchronize(s) == hipSuccess, "sync");
  if (capture(ctx, w, s, &g, msg, msglen)) return 1;
  void *ptrs[WORLD], *pads[WORLD], *ptrs_dev = mori_window_buffer_ptrs_dev(w);
  memcpy(ptrs, mori_window_buffer_ptrs(w), sizeof ptrs);
  memcpy(pads, mori_window_signal_pad_ptrs(w), sizeof pads);
  /* The even ranks hand the span out, so their own slot of it is mapped
   * (FLATTEN) before the death: a heal keeps it where it is. */
  size_t stride = 0;
  char *span = ctx->rank % 2 == 0 ? mori_window_span(w, &stride) : NULL;
  CHECK(ctx->rank % 2 || span != NULL, "span: %s", mori_last_error());
  CHECK(mori_window_barrier(w, 0, s, 10000) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_hipStreamSynchronize(s) == hipSuccess, "sync");
  if (ctx->rank == DEAD) {
    start_replacement(ctx, "--replacement");
    raise(SIGKILL);
  }

  /* A live rank cannot be replaced, and trying changes nothing. */
  int live = (ctx->rank + 1) % WORLD == DEAD ? (ctx->rank + 2) % WORLD : (ctx->rank + 1) % WORLD;
  CHECK(mori_window_heal(w, live, ctx->store) == MORI_ESTATE &&
            strstr(mori_last_error(), "is alive") != NULL,
        "heal of live rank %d: %s", live, mori_last_error());

  /* The survivors heal once the dead rank's process is gone. */
  int rc = heal_when_gone(w, ctx->store);
  CHECK(rc == 0, "heal: %s", mori_last_error());
  CHECK(memcmp(ptrs, mori_window_buffer_ptrs(w), sizeof ptrs) == 0 &&
            memcmp(pads, mori_window_signal_pad_ptrs(w), sizeof pads) == 0 &&
            ptrs_dev == mori_window_buffer_ptrs_dev(w),
        "the pointer tables moved");
  CHECK(life_pattern_differs(base, ctx->rank, 0) == 0, "own data changed by the heal");
  if (span != NULL) {
    size_t again = 0;
    CHECK(mori_window_span(w, &again) == span && again == stride, "the span moved");
    CHECK(life_pattern_differs(span + (size_t)ctx->rank * stride, ctx->rank, 0) == 0,
          "the own slot of the span does not read the own data after the heal");
  }
  if (after_heal(ctx, w, s, g, msg, msglen)) return 1;
  mori_sim_graph_destroy(g);
  CHECK(mori_hipStreamDestroy(s) == hipSuccess, "stream destroy");
  /* the replacement's verdict */
  if (replacement_said_ok(ctx, msg, msglen)) return 1;
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "heal");
}

/* A window of the world, a barrier passed, and rank DEAD starts its
 * replacement (how: the replacement's part) and dies: 0 on a survivor. */
static int open_then_lose_dead(const mori_rank_ctx *ctx, const char *how, void **base,
                               mori_window **w, char *msg, size_t msglen) {
  mori_symm_set_timeout_ms(10000);
  if (open_window(ctx, "job", base, w, msg, msglen)) return 1;
  CHECK(mori_window_barrier(*w, 0, NULL, 10000) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_hipStreamSynchronize(NULL) == hipSuccess, "sync");
  if (ctx->rank == DEAD) {
    start_replacement(ctx, how);
    raise(SIGKILL);
  }
  return 0;
}

/* ---- a leader whose offer fails ---- */

/* The store as it is, but its set of one key fails: the leader's group
 * offer, so that its heal fails before the replacement knows any key of
 * the heal but where a failed heal's word goes. */
typedef struct failing_store {
  mori_store base;
  mori_store *inner;
  const char *bad_key;
} failing_store;

static int fs_set(mori_store *s, const char *key, const void *value, size_t len) {
  failing_store *f = (failing_store *)s;
  if (strcmp(key, f->bad_key) == 0) return MORI_EIO;
  return f->inner->set(f->inner, key, value, len);
}
static int fs_get(mori_store *s, const char *key, void **value, size_t *len, int timeout_ms) {
  failing_store *f = (failing_store *)s;
  return f->inner->get(f->inner, key, value, len, timeout_ms);
}
static int fs_add(mori_store *s, const char *key, int64_t delta, int64_t *result) {
  failing_store *f = (failing_store *)s;
  return f->inner->add(f->inner, key, delta, result);
}
static int fs_remove(mori_store *s, const char *key) {
  failing_store *f = (failing_store *)s;
  return f->inner->remove(f->inner, key);
}
static void fs_destroy(mori_store *s) { (void)s; }

/* The replacement of a heal whose offer failed: its rendezvous ends on the
 * leader's word, MORI_EPEER, well before its timeout. */
static int refused_main(const char *dir, const char *incarnation) {
  char msg[1024] = "ok ";
  mori_store *store = NULL;
  void *base = NULL;
  mori_window *w = NULL;
  setenv("MORI_SYMM_REPLACEMENT", "1", 1);
  if (mori_file_store_open(dir, &store) != 0) return 2;
  store->incarnation = incarnation;
  mori_symm_set_timeout_ms(10000);
  int rc = mori_shim_select("sim") == 0 ? mori_symm_alloc(MiB, DEAD, &base) : -1;
  if (rc == 0) rc = mori_symm_rendezvous(base, "job", DEAD, WORLD, store, &w, NULL);
  /* The leader's words, read from it or relayed by another survivor whose
   * heal they ended (whichever the replacement finds first). */
  if (rc != MORI_EPEER || !strstr(mori_last_error(), "heal of rank 2 failed: rank ") ||
      !strstr(mori_last_error(), "rank 0: heal step offer: "))
    snprintf(msg, sizeof msg, "the replacement's rendezvous: %d: %.900s", rc, mori_last_error());
  if (base) (void)mori_symm_free(base);
  (void)store->set(store, "test_heal/replacement", msg, strlen(msg) + 1);
  store->destroy(store);
  return 0;
}

static int failed_offer_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL;
  if (open_then_lose_dead(ctx, "--refused", &base, &w, msg, msglen)) return 1;
  char bad[128];
  snprintf(bad, sizeof bad, "mori_symm/job/heal/%d", DEAD);
  failing_store f = {{fs_set, fs_get, fs_add, fs_destroy, NULL, ctx->store->incarnation,
                      fs_remove},
                     ctx->store, bad};
  int rc = heal_when_gone(w, ctx->rank == 0 ? &f.base : ctx->store);
  CHECK(rc == (ctx->rank == 0 ? MORI_EIO : MORI_EPEER), "heal with a failed offer: %d: %s", rc,
        mori_last_error());
  if (ctx->rank == 0) {
    if (replacement_said_ok(ctx, msg, msglen)) return 1;
  }
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "failed offer");
}

/* Launches the world on fn: every rank but DEAD ends well, DEAD by SIGKILL. */
static void launch(mori_rank_fn fn) {
  mori_rank_result res[WORLD];
  memset(res, 0, sizeof res);
  (void)mori_launch(WORLD, fn, NULL, 120000, res);
  for (int r = 0; r < WORLD; r++) {
    int ok = r == DEAD ? res[r].signal == SIGKILL : (res[r].exit_code == 0 && !res[r].signal);
    if (!ok || res[r].hung)
      print_error("rank %d: exit %d signal %d hung %d: %s\n", r, res[r].exit_code, res[r].signal,
                  res[r].hung, res[r].msg);
    assert_false(res[r].hung);
    assert_true(ok);
  }
}

static void a_replacement_rejoins_and_the_survivors_keep_everything(void **state) {
  (void)state;
  launch(heal_rank);
}

/* The replacement gives up before it could learn the heal's keys: each
 * survivor's heal ends on its words (MORI_EPEER), not at the timeout
 * (MORI_ETIMEDOUT, waiting for its request), and leaves the window broken;
 * everything is given back. */
static int given_up_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL;
  if (open_then_lose_dead(ctx, "--gives-up", &base, &w, msg, msglen)) return 1;
  /* rank 0 hands the span out before the heal, the others never */
  size_t stride = 0;
  char *span = ctx->rank == 0 ? mori_window_span(w, &stride) : NULL;
  CHECK(ctx->rank != 0 || span != NULL, "span: %s", mori_last_error());
  int rc = heal_when_gone(w, ctx->store);
  CHECK(rc == MORI_EPEER && strstr(mori_last_error(), "rank 2: no memory for its buffer"),
        "heal with a replacement that gave up: %s", mori_last_error());
  CHECK(mori_window_barrier(w, 0, NULL, 10000) == MORI_ESTATE, "the broken window signals");
  /* A broken window keeps a span it handed out, and maps no own slot
   * for one it did not: the teardown gives back whatever it holds. */
  char *again = mori_window_span(w, &stride);
  if (ctx->rank == 0)
    CHECK(again == span, "the broken window's span: %p, was %p: %s", (void *)again, (void *)span,
          mori_last_error());
  else
    CHECK(again == NULL &&
              strstr(mori_last_error(), "its own slot: the window is BROKEN, and it is mapped "
                                        "only in MAPPED") != NULL,
          "the broken window mapped its own slot: %p: %s", (void *)again, mori_last_error());
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "given up");
}

static void a_replacement_that_gives_up_ends_the_heal_on_its_words(void **state) {
  (void)state;
  launch(given_up_rank);
}

/* The leader's offer fails: the survivors' heals fail on its abort, and
 * the replacement, which knows no key of the heal yet, ends on its word
 * (the failed heal's word where it looks), not at its timeout. */
static void a_failed_offer_ends_the_replacement_on_its_words(void **state) {
  (void)state;
  launch(failed_offer_rank);
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--replacement") == 0)
    return replacement_main(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "--gives-up") == 0) return gives_up_main(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "--refused") == 0) return refused_main(argv[2], argv[3]);
  ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
  if (n > 0) self_exe[n] = '\0';
  else snprintf(self_exe, sizeof self_exe, "/proc/self/exe");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_replacement_rejoins_and_the_survivors_keep_everything),
      cmocka_unit_test(a_replacement_that_gives_up_ends_the_heal_on_its_words),
      cmocka_unit_test(a_failed_offer_ends_the_replacement_on_its_words),
  };
  return mori_run_tests(argc, argv, tests);
}
