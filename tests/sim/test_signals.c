/*
 * test_signals.c - specifications of barrier, put_signal and wait_signal on
 * the sim, in forked ranks: barriers order writes and reads across ranks,
 * one remote write per peer and waits on local cells only; put/wait keep
 * torch's semantics and interleave with barriers on one channel; a
 * captured barrier replays correctly any number of times; a peer that dies
 * or never signals makes the survivors fail within their timeout, naming
 * it, with everything released; and alloc does no synchronous device-wide
 * work.  ctest runs this binary with MORI_SIM_STREAMS=sync and =async (in
 * async mode each stream runs on a worker thread, as a GPU queue, so a wait
 * is only enqueued); the alloc cases need async mode and run only there.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "signal_rounds.h"

static int async_mode(void) {
  const char *m = getenv("MORI_SIM_STREAMS");
  return m != NULL && strcmp(m, "async") == 0;
}

/* Whether this run's signal calls of a form are kernels: what
 * MORI_SYMM_SIGNAL_ENGINE says, or (auto) the engine's table for ranks on
 * devices of their own, which these tests are: captured ones are. */
static int kernel_engine(int captured) {
  const char *e = getenv("MORI_SYMM_SIGNAL_ENGINE");
  if (e != NULL && strcmp(e, "kernel") == 0) return 1;
  if (e != NULL && strcmp(e, "memop") == 0) return 0;
  return captured;
}

static int ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) k++;
  return k;
}

/* ---- barriers ---- */

struct barrier_arg {
  const char *shape; /* MORI_SYMM_BARRIER */
  int rounds;
};

static int barrier_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const struct barrier_arg *a = ctx->arg;
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL;
  if (a->shape) setenv("MORI_SYMM_BARRIER", a->shape, 1);
  if (open_window(ctx, "world", &base, &w, msg, msglen)) return 1;
  mori_symm_signal_stats s0, s1;
  mori_symm_signal_stats_get(&s0);
  if (ordered_rounds(ctx, w, 3, a->rounds, msg, msglen)) return 1;
  mori_symm_signal_stats_get(&s1);
  long barriers = 2L * a->rounds;
  int dissemination = a->shape && strcmp(a->shape, "dissemination") == 0;
  /* the barrier kernel is flat: a dissemination barrier stays memops */
  int kernel = kernel_engine(0) && !dissemination;
  long writes = kernel ? 0 : dissemination ? ceil_log2(ctx->world) : ctx->world - 1;
  CHECK(s1.kernels - s0.kernels == (kernel ? barriers : 0), "%ld kernels for %ld barriers",
        s1.kernels - s0.kernels, barriers);
  CHECK(s1.remote_writes - s0.remote_writes == barriers * writes,
        "%ld remote writes for %ld barriers", s1.remote_writes - s0.remote_writes, barriers);
  CHECK(s1.local_waits - s0.local_waits == barriers * writes, "%ld waits for %ld barriers",
        s1.local_waits - s0.local_waits, barriers);
  CHECK(s1.remote_waits == 0 && s1.local_writes == s0.local_writes,
        "a barrier polled a peer (%ld) or wrote locally (%ld)", s1.remote_waits,
        s1.local_writes - s0.local_writes);
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  snprintf(msg, msglen, "per barrier: %ld remote writes, %ld local waits", writes, writes);
  return ranks_finish(fds0, msg, msglen, "barrier");
}

static void barrier_orders_every_rank_at_2_ranks(void **s) {
  struct barrier_arg a = {NULL, 100};
  ranks_run(2, barrier_rank, &a, 0);
}

static void barrier_orders_every_rank_at_5_ranks(void **s) {
  struct barrier_arg a = {NULL, 60};
  ranks_run(5, barrier_rank, &a, 0);
}

static void dissemination_barrier_orders_every_rank_at_6_ranks(void **s) {
  struct barrier_arg a = {"dissemination", 60};
  ranks_run(6, barrier_rank, &a, 0);
}

/* A barrier whose first operation failed enqueued nothing, so it counts
 * for nothing: called again, the ranks still agree on which barrier it is.
 * ctest runs this case (also) under the fault shim, one runtime call per
 * operation (MORI_SYMM_MEMOP_BATCH=0), with MORI_FI failing rank 0's
 * second hipStreamWriteValue32 once (its second barrier's write, at 2
 * ranks its only one).  tests/fault/test_fi_signals.c fails every other
 * operation of a barrier and of a put/wait. */
static int retry_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL;
  if (open_window(ctx, "retry", &base, &w, msg, msglen)) return 1;
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  int rc = mori_window_barrier(w, 0, NULL, 0);
  if (ctx->rank == 0 && getenv("MORI_FI") != NULL) {
    CHECK(rc == MORI_EHIP && strstr(mori_last_error(), "injected") != NULL,
          "expected the injected failure, got %d: %s", rc, mori_last_error());
    rc = mori_window_barrier(w, 0, NULL, 0);
  }
  CHECK(rc == 0, "barrier: %s", mori_last_error());
  if (ordered_rounds(ctx, w, 0, 20, msg, msglen)) return 1;
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "retry");
}

static void a_barrier_that_enqueued_nothing_can_be_called_again(void **s) {
  ranks_run(2, retry_rank, NULL, 0);
}

/* ---- put / wait ---- */

/* A ring: each rank writes a value into the next rank's buffer and signals
 * it, with barriers on the same channel between; the receiver must see the
 * value once its wait passed.  Two puts in a row to one peer: the second
 * waits until the first was consumed (torch's semantics). */
static int ring_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL;
  if (open_window(ctx, "ring", &base, &w, msg, msglen)) return 1;
  int next = (ctx->rank + 1) % ctx->world, prev = (ctx->rank + ctx->world - 1) % ctx->world;
  const int ch = 2;
  for (int i = 1; i <= 50; i++) {
    CHECK(put_word(w, next, 1 + ctx->rank, (uint32_t)(1000 * i + ctx->rank)) == 0, "write");
    CHECK(mori_window_put_signal(w, next, ch, NULL, 0) == 0, "put %d: %s", i, mori_last_error());
    CHECK(mori_window_barrier(w, ch, NULL, 0) == 0, "barrier %d: %s", i, mori_last_error());
    CHECK(mori_window_wait_signal(w, prev, ch, NULL, 0) == 0, "wait %d: %s", i, mori_last_error());
    CHECK(mori_hipStreamSynchronize(NULL) == hipSuccess, "sync");
    CHECK(get_word(w, ctx->rank, 1 + prev) == (uint32_t)(1000 * i + prev),
          "round %d: the word from rank %d is %u", i, prev, get_word(w, ctx->rank, 1 + prev));
    CHECK(mori_window_barrier(w, ch, NULL, 0) == 0, "barrier %d': %s", i, mori_last_error());
  }
  /* two signals queue up behind each other */
  if (ctx->rank == 0) {
    CHECK(mori_window_put_signal(w, 1, 0, NULL, 0) == 0, "put: %s", mori_last_error());
    CHECK(mori_window_put_signal(w, 1, 0, NULL, 0) == 0, "second put: %s", mori_last_error());
  } else if (ctx->rank == 1) {
    sleep_ms(20);
    CHECK(mori_window_wait_signal(w, 0, 0, NULL, 0) == 0, "wait: %s", mori_last_error());
    CHECK(mori_window_wait_signal(w, 0, 0, NULL, 0) == 0, "second wait: %s", mori_last_error());
  }
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "final barrier: %s", mori_last_error());
  CHECK(mori_hipStreamSynchronize(NULL) == hipSuccess, "sync");
  mori_symm_signal_stats st;
  mori_symm_signal_stats_get(&st);
  CHECK(st.remote_waits == 0, "%ld polls of a peer", st.remote_waits);
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "ring");
}

static void put_wait_interleave_with_barriers_on_one_channel(void **s) {
  ranks_run(3, ring_rank, NULL, 0);
}

/* What an eager call enqueues, counted by the core (ping-pong of rounds on
 * a channel between ranks 0 and 1, then barriers): a put is a wait on its
 * own acknowledgement cell (none for the first) and one remote write, a
 * wait one local wait and one remote write, none of them a local write
 * or a poll of a peer; and each call is one runtime call (a batch), a
 * barrier too, whatever the world.  MORI_SYMM_MEMOP_BATCH=0 gives one call
 * per operation. */
static int calls_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL;
  if (open_window(ctx, "calls", &base, &w, msg, msglen)) return 1;
  const long rounds = 20, barriers = 10;
  int peer = ctx->rank ^ 1, batch = getenv("MORI_SYMM_MEMOP_BATCH") == NULL;
  mori_symm_signal_stats s0, s1, s2;
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  mori_symm_signal_stats_get(&s0);
  for (long i = 0; i < rounds && peer < ctx->world; i++) {
    if (ctx->rank % 2 == 0) {
      CHECK(mori_window_put_signal(w, peer, 3, NULL, 0) == 0, "put: %s", mori_last_error());
      CHECK(mori_window_wait_signal(w, peer, 3, NULL, 0) == 0, "wait: %s", mori_last_error());
    } else {
      CHECK(mori_window_wait_signal(w, peer, 3, NULL, 0) == 0, "wait: %s", mori_last_error());
      CHECK(mori_window_put_signal(w, peer, 3, NULL, 0) == 0, "put: %s", mori_last_error());
    }
  }
  mori_symm_signal_stats_get(&s1);
  for (long i = 0; i < barriers; i++)
    CHECK(mori_window_barrier(w, 4, NULL, 0) == 0, "barrier: %s", mori_last_error());
  mori_symm_signal_stats_get(&s2);
  CHECK(mori_hipStreamSynchronize(NULL) == hipSuccess, "sync");
  if (kernel_engine(0)) { /* one launch per call, and no memop */
    long pairs = peer < ctx->world ? rounds : 0;
    CHECK(s1.kernels - s0.kernels == 2 * pairs && s2.kernels - s1.kernels == barriers &&
              s2.calls == s0.calls && s2.remote_writes == s0.remote_writes,
          "%ld put/wait pairs and %ld barriers: %ld and %ld kernels, %ld memop calls", pairs,
          barriers, s1.kernels - s0.kernels, s2.kernels - s1.kernels, s2.calls - s0.calls);
    CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
    return ranks_finish(fds0, msg, msglen, "calls");
  }
  if (peer < ctx->world) {
    long writes = s1.remote_writes - s0.remote_writes, local = s1.local_writes - s0.local_writes,
         waits = s1.local_waits - s0.local_waits, calls = s1.calls - s0.calls;
    CHECK(writes == 2 * rounds && waits == 2 * rounds - 1 && local == 0 &&
              s1.remote_waits == s0.remote_waits,
          "%ld put/wait pairs: %ld remote writes, %ld local waits, %ld local writes, %ld polls "
          "(want %ld, %ld, 0, 0)", rounds, writes, waits, local, s1.remote_waits - s0.remote_waits,
          2 * rounds, 2 * rounds - 1);
    long want = batch ? 2 * rounds : writes + waits;
    CHECK(calls == want, "%ld put/wait pairs took %ld runtime calls, want %ld", rounds, calls,
          want);
  }
  long bcalls = s2.calls - s1.calls, want = batch ? barriers : barriers * 2 * (ctx->world - 1);
  CHECK(bcalls == want, "%ld barriers of %d ranks took %ld runtime calls, want %ld", barriers,
        ctx->world, bcalls, want);
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "calls");
}

static void each_eager_call_is_one_batch_of_local_waits_and_remote_writes(void **s) {
  ranks_run(2, calls_rank, NULL, 0);
  ranks_run(5, calls_rank, NULL, 0);
}

/* ---- capture and replay ---- */

/* A barrier (and a put/wait ring) captured once and replayed many times
 * must synchronize on every replay, also with eager barriers on the same
 * channel in between: a form whose values were baked in at capture would
 * let ranks through at the second replay. */
static int replay_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL;
  hipStream_t s = NULL;
  mori_sim_graph *g = NULL;
  if (open_window(ctx, "replay", &base, &w, msg, msglen)) return 1;
  int next = (ctx->rank + 1) % ctx->world, prev = (ctx->rank + ctx->world - 1) % ctx->world;
  const int ch = 1;
  CHECK(mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking) == hipSuccess, "stream");
  /* a warm-up before the capture, as torch's users do: the window's first
   * eager call readies its kernels (nothing of that may run in a capture) */
  CHECK(mori_window_barrier(w, 0, s, 0) == 0, "barrier: %s", mori_last_error());
  mori_symm_signal_stats s0, s1;
  mori_symm_signal_stats_get(&s0);
  CHECK(mori_sim_begin_capture(s) == hipSuccess, "capture: %s", mori_shim_message());
  CHECK(mori_window_barrier(w, ch, s, 1000) == 0, "captured barrier: %s", mori_last_error());
  CHECK(mori_window_put_signal(w, next, ch, s, 0) == 0, "captured put: %s", mori_last_error());
  CHECK(mori_window_wait_signal(w, prev, ch, s, 0) == 0, "captured wait: %s", mori_last_error());
  CHECK(mori_sim_end_capture(s, &g) == hipSuccess, "end capture: %s", mori_shim_message());
  mori_symm_signal_stats_get(&s1);
  CHECK(s1.captured - s0.captured == 3 && s1.watched == s0.watched,
        "captured %ld calls, watched %ld", s1.captured - s0.captured, s1.watched - s0.watched);
  /* as memops, the captured barrier is a put and a wait per peer: 6(N-1)
   * memops, plus 3 + 3 for the put and the wait, none a poll of a peer; as
   * kernels, one node each and no memop */
  long each = kernel_engine(1) ? 0 : 2L * (ctx->world - 1) + 2;
  CHECK(s1.kernels - s0.kernels == (kernel_engine(1) ? 3 : 0), "%ld kernels captured",
        s1.kernels - s0.kernels);
  CHECK(s1.remote_writes - s0.remote_writes == each && s1.local_writes - s0.local_writes == each &&
            s1.local_waits - s0.local_waits == each && s1.remote_waits == 0,
        "captured memops: %ld remote writes, %ld local writes, %ld waits, %ld polls",
        s1.remote_writes - s0.remote_writes, s1.local_writes - s0.local_writes,
        s1.local_waits - s0.local_waits, s1.remote_waits);
  for (int i = 1; i <= 40; i++) {
    if (ctx->rank == 0 && i % 8 == 0) sleep_ms(10);
    CHECK(put_word(w, ctx->rank, 0, (uint32_t)i) == 0, "write");
    CHECK(mori_sim_graph_launch(g, s) == hipSuccess, "replay %d: %s", i, mori_shim_message());
    CHECK(mori_hipStreamSynchronize(s) == hipSuccess, "sync: %s", mori_shim_message());
    for (int p = 0; p < ctx->world; p++)
      CHECK(get_word(w, p, 0) == (uint32_t)i, "replay %d: rank %d's word is %u", i, p,
            get_word(w, p, 0));
    CHECK(mori_window_barrier(w, ch, s, 0) == 0, "eager barrier %d: %s", i, mori_last_error());
    CHECK(mori_hipStreamSynchronize(s) == hipSuccess, "sync");
  }
  CHECK(mori_hipStreamSynchronize(s) == hipSuccess, "sync");
  mori_sim_graph_destroy(g);
  CHECK(mori_hipStreamDestroy(s) == hipSuccess, "stream destroy");
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "replay");
}

static void captured_barrier_and_signals_replay_correctly(void **s) {
  ranks_run(3, replay_rank, NULL, 0);
  ranks_run(2, replay_rank, NULL, 0);
}

/* ---- the engine: memops or a kernel ---- */

/* How many kernels one eager and one captured barrier launch, under
 * MORI_SYMM_SIGNAL_ENGINE=engine (NULL: unset), on a window whose ranks
 * have a device each or share device 0. */
static long readying_calls; /* counted by the interposed calls below */

static long readying(void) { return __atomic_load_n(&readying_calls, __ATOMIC_RELAXED); }

static int engine_counts(const mori_rank_ctx *ctx, const char *engine, int shared, long *eager,
                         long *captured, char *msg, size_t msglen) {
  void *base = NULL;
  mori_window *w = NULL;
  hipStream_t s = NULL;
  mori_sim_graph *g = NULL;
  char group[32];
  snprintf(group, sizeof group, "engine%s%d", engine ? engine : "", shared);
  if (engine) setenv("MORI_SYMM_SIGNAL_ENGINE", engine, 1);
  else unsetenv("MORI_SYMM_SIGNAL_ENGINE");
  mori_symm_set_allow_overlapping_devices(shared);
  CHECK(mori_symm_alloc(MiB, shared ? 0 : ctx->rank, &base) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(base, group, ctx->rank, ctx->world, ctx->store, &w, NULL) == 0,
        "rendezvous: %s", mori_last_error());
  CHECK(mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking) == hipSuccess, "stream");
  long ready0 = readying();
  mori_symm_signal_stats s0, s1, s2;
  mori_symm_signal_stats_get(&s0);
  CHECK(mori_window_barrier(w, 0, s, 0) == 0, "barrier: %s", mori_last_error());
  mori_symm_signal_stats_get(&s1);
  CHECK(mori_sim_begin_capture(s) == hipSuccess, "capture: %s", mori_shim_message());
  CHECK(mori_window_barrier(w, 1, s, 0) == 0, "captured barrier: %s", mori_last_error());
  CHECK(mori_sim_end_capture(s, &g) == hipSuccess, "end capture: %s", mori_shim_message());
  mori_symm_signal_stats_get(&s2);
  CHECK(mori_sim_graph_launch(g, s) == hipSuccess, "replay: %s", mori_shim_message());
  CHECK(mori_hipStreamSynchronize(s) == hipSuccess, "sync: %s", mori_shim_message());
  /* the rendezvous readied what the calls use: a signal call that loads a
   * module or allocates pinned memory may wait for the device, behind a
   * stream its caller opens only after the call */
  CHECK(readying() == ready0, "the signal calls made %ld module load(s) or pinned allocation(s)",
        readying() - ready0);
  mori_sim_graph_destroy(g);
  CHECK(mori_hipStreamDestroy(s) == hipSuccess, "stream destroy");
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  *eager = s1.kernels - s0.kernels;
  *captured = s2.kernels - s1.kernels;
  return 0;
}

/* The automatic engine: captured calls are a kernel and eager ones memops
 * where every rank has a device of its own (signal.c's table), memops
 * wherever a peer shares the device (a spinning kernel there waits for the
 * other process's time slice); MORI_SYMM_SIGNAL_ENGINE overrides it, and
 * a value it does not know is refused naming it. */
static int engine_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  long eager = -1, captured = -1;
  CHECK(mori_shim_select("sim") == 0, "%s", mori_shim_message());
  static const struct {
    const char *engine;
    int shared;
    long eager, captured;
  } rows[] = {
      {NULL, 0, 0, 1}, {"auto", 0, 0, 1}, {NULL, 1, 0, 0},
      {"memop", 0, 0, 0}, {"kernel", 0, 1, 1}, {"kernel", 1, 1, 1},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    if (engine_counts(ctx, rows[i].engine, rows[i].shared, &eager, &captured, msg, msglen))
      return 1;
    CHECK(eager == rows[i].eager && captured == rows[i].captured,
          "MORI_SYMM_SIGNAL_ENGINE=%s, %s device: %ld eager and %ld captured kernels, want %ld "
          "and %ld", rows[i].engine ? rows[i].engine : "(unset)",
          rows[i].shared ? "a shared" : "its own", eager, captured, rows[i].eager,
          rows[i].captured);
  }
  void *base = NULL;
  mori_window *w = NULL;
  /* a window captured before any eager call: the rendezvous readied its
   * kernels (a module load or a pinned allocation is refused in a capture,
   * and may wait for the device), so the automatic engine captures the
   * kernel, and a forced kernel too */
  hipStream_t st = NULL;
  mori_sim_graph *g = NULL;
  mori_symm_signal_stats k0, k1;
  unsetenv("MORI_SYMM_SIGNAL_ENGINE");
  if (open_window(ctx, "engine-first-captured", &base, &w, msg, msglen)) return 1;
  CHECK(mori_hipStreamCreateWithFlags(&st, hipStreamNonBlocking) == hipSuccess, "stream");
  mori_symm_signal_stats_get(&k0);
  CHECK(mori_sim_begin_capture(st) == hipSuccess, "capture: %s", mori_shim_message());
  CHECK(mori_window_barrier(w, 0, st, 0) == 0, "captured barrier: %s", mori_last_error());
  setenv("MORI_SYMM_SIGNAL_ENGINE", "kernel", 1);
  int forced = mori_window_barrier(w, 1, st, 0);
  unsetenv("MORI_SYMM_SIGNAL_ENGINE");
  CHECK(mori_sim_end_capture(st, &g) == hipSuccess, "end capture: %s", mori_shim_message());
  mori_symm_signal_stats_get(&k1);
  CHECK(k1.kernels - k0.kernels == 2, "%ld kernels captured before any eager call, want 2",
        k1.kernels - k0.kernels);
  CHECK(forced == 0, "a forced kernel in a capture before any eager call: %d: %s", forced,
        mori_last_error());
  mori_sim_graph_destroy(g);
  CHECK(mori_hipStreamDestroy(st) == hipSuccess, "stream destroy");
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  setenv("MORI_SYMM_SIGNAL_ENGINE", "fastest", 1);
  if (open_window(ctx, "engine-bad", &base, &w, msg, msglen)) return 1;
  int rc = mori_window_barrier(w, 0, NULL, 0);
  CHECK(rc == MORI_EINVAL && strstr(mori_last_error(), "MORI_SYMM_SIGNAL_ENGINE=fastest") != NULL,
        "an unknown engine: %d: %s", rc, mori_last_error());
  unsetenv("MORI_SYMM_SIGNAL_ENGINE");
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "engine");
}

static void the_engine_follows_the_form_the_device_and_the_setting(void **s) {
  ranks_run(2, engine_rank, NULL, 0);
}

/* ---- bounded waits ---- */

struct death_arg {
  uint64_t dead;      /* ranks that exit after the first barrier */
  const char *op;     /* what the survivors call with a timeout */
  int timeout_ms;
  const char *expect; /* in the survivors' error */
};

/* The survivors' call either fails itself (sync mode: the wait ran in the
 * call) or is enqueued; then the stream is released by the watchdog, once
 * it sees the dead ranks' processes gone, and the next call fails with
 * MORI_ETIMEDOUT naming the absent ranks. */
static int death_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const struct death_arg *a = ctx->arg;
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL;
  if (open_window(ctx, "bounded", &base, &w, msg, msglen)) return 1;
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_hipStreamSynchronize(NULL) == hipSuccess, "sync");
  if (a->dead >> ctx->rank & 1) _exit(3);
  int peer = (ctx->rank + 1) % ctx->world, ch = 5;
  double t0 = now_ms();
  int rc;
  if (strcmp(a->op, "barrier") == 0) {
    rc = mori_window_barrier(w, ch, NULL, a->timeout_ms);
  } else if (strcmp(a->op, "wait_signal") == 0) {
    rc = mori_window_wait_signal(w, peer, ch, NULL, a->timeout_ms);
  } else {
    rc = mori_window_put_signal(w, peer, ch, NULL, a->timeout_ms);
    if (rc == 0) rc = mori_window_put_signal(w, peer, ch, NULL, a->timeout_ms);
  }
  if (rc == 0) {
    CHECK(async_mode(), "the call passed although its peer is absent");
    /* the watchdog releases the stream; the context lives on */
    CHECK(mori_hipStreamSynchronize(NULL) == hipSuccess, "sync: %s", mori_shim_message());
    rc = mori_window_barrier(w, ch, NULL, a->timeout_ms);
  }
  double elapsed = now_ms() - t0;
  CHECK(rc == MORI_ETIMEDOUT, "expected MORI_ETIMEDOUT, got %d: %s", rc, mori_last_error());
  CHECK(strstr(mori_last_error(), a->expect) != NULL, "the error does not say \"%s\": %s",
        a->expect, mori_last_error());
  CHECK(strstr(mori_last_error(), "channel 5") != NULL, "no channel: %s", mori_last_error());
  /* Memops: once the dead ranks' processes are gone (reaped), the
   * watchdog says so at once, without waiting out the deadline (a silent
   * rank that lives is caught by the deadline only: silent_rank).  A
   * kernel gives up at its own deadline. */
  int gone = strstr(mori_last_error(), "'s process (pid ") != NULL &&
             strstr(mori_last_error(), ") is gone") != NULL;
  CHECK(!kernel_engine(0) || !gone, "a kernel's wait named a gone process: %s", mori_last_error());
  /* before the launcher reaps the dead rank (a zombie is still there, as
   * under ThreadSanitizer's pace), only the deadline ends the wait */
  CHECK(gone || elapsed >= a->timeout_ms, "failed after %.0f ms, before its %d ms: %s", elapsed,
        a->timeout_ms, mori_last_error());
  /* the window stays failed */
  CHECK(mori_window_wait_signal(w, peer, 0, NULL, 0) == MORI_ETIMEDOUT, "later call");
  mori_symm_signal_stats st;
  mori_symm_signal_stats_get(&st);
  CHECK(st.expired >= 1, "no deadline fired");
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  char what[64];
  snprintf(what, sizeof what, "failed after %.0f ms (timeout %d)", elapsed, a->timeout_ms);
  return ranks_finish(fds0, msg, msglen, what);
}

/* A rank that stays alive but never signals: only its own end. */
static int silent_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL;
  if (open_window(ctx, "bounded", &base, &w, msg, msglen)) return 1;
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_hipStreamSynchronize(NULL) == hipSuccess, "sync");
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "silent");
}

static int death_or_silence(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const struct death_arg *a = ctx->arg;
  return ctx->rank == 1 && a->dead == 0 ? silent_rank(ctx, msg, msglen)
                                        : death_rank(ctx, msg, msglen);
}

static void barrier_with_a_dead_peer_fails_in_bounded_time_naming_it(void **s) {
  struct death_arg a = {1u << 1, "barrier", 400, "rank(s) 1 never signalled"};
  ranks_run(2, death_rank, &a, a.dead);
}

static void barrier_with_two_dead_peers_of_four_names_both(void **s) {
  struct death_arg a = {(1u << 2) | (1u << 3), "barrier", 400, "rank(s) 2, 3 never signalled"};
  ranks_run(4, death_rank, &a, a.dead);
}

static void wait_signal_without_a_put_fails_after_its_timeout(void **s) {
  struct death_arg a = {0, "wait_signal", 300, "rank(s) 1 never signalled"};
  ranks_run(2, death_or_silence, &a, 0);
}

static void put_signal_never_consumed_fails_after_its_timeout(void **s) {
  struct death_arg a = {0, "put_signal", 300, "rank(s) 1 never consumed the previous signal"};
  ranks_run(2, death_or_silence, &a, 0);
}

/* A window failed twice keeps its first failure: rank 0 waits, bounded,
 * for signals rank 1 never puts, on channel 2 (1 s), then on channel 1
 * (100 ms), each on a stream of its own; channel 1's wait expires first
 * and fails the window, channel 2's fails it again later.  The next call
 * reports the first.  A thread makes channel 2's call (the sim's sync
 * streams run it in the call), and channel 1's comes once channel 2's is
 * under way: its memory operations watched, or its kernel launched (the
 * test counts the launches, below).  Memory operations fail the window
 * through the watchdog, kernels through their failure words. */
static long kernel_launches; /* counted by the interposed call below */

hipError_t mori_hipModuleLaunchKernel(hipFunction_t f, unsigned int gx, unsigned int gy,
                                      unsigned int gz, unsigned int bx, unsigned int by,
                                      unsigned int bz, unsigned int shared, hipStream_t stream,
                                      void **params, void **extra) {
  static hipError_t (*real)(hipFunction_t, unsigned int, unsigned int, unsigned int,
                            unsigned int, unsigned int, unsigned int, unsigned int, hipStream_t,
                            void **, void **);
  if (real == NULL) *(void **)&real = dlsym(RTLD_NEXT, "mori_hipModuleLaunchKernel");
  __atomic_fetch_add(&kernel_launches, 1, __ATOMIC_RELAXED);
  return real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
}

struct bounded_wait {
  mori_window *w;
  hipStream_t s;
  int channel, timeout_ms;
  int rc;        /* what the call returned (-1: not yet) */
  char err[512]; /* and its error */
};

static void *bounded_wait_from_rank_1(void *arg) {
  struct bounded_wait *b = arg;
  b->rc = mori_window_wait_signal(b->w, 1, b->channel, b->s, b->timeout_ms);
  snprintf(b->err, sizeof b->err, "%s", b->rc ? mori_last_error() : "-");
  return NULL;
}

/* Calls of this process under way: watched by the watchdog, or kernels. */
static long under_way(void) {
  mori_symm_signal_stats st;
  mori_symm_signal_stats_get(&st);
  return kernel_engine(0) ? __atomic_load_n(&kernel_launches, __ATOMIC_RELAXED) : st.watched;
}

static int failed_twice_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL;
  if (open_window(ctx, "twice", &base, &w, msg, msglen)) return 1;
  if (ctx->rank == 0) {
    struct bounded_wait later = {w, NULL, 2, 1000, -1, ""}, first = {w, NULL, 1, 100, -1, ""};
    long before = under_way();
    pthread_t t;
    CHECK(mori_hipStreamCreateWithFlags(&later.s, hipStreamNonBlocking) == hipSuccess &&
              mori_hipStreamCreateWithFlags(&first.s, hipStreamNonBlocking) == hipSuccess,
          "streams: %s", mori_shim_message());
    CHECK(pthread_create(&t, NULL, bounded_wait_from_rank_1, &later) == 0, "pthread_create");
    for (double until = now_ms() + 20000; under_way() == before && now_ms() < until;)
      sched_yield();
    CHECK(under_way() > before, "channel 2's wait never got under way (its call: %d, %s)",
          later.rc, later.err);
    bounded_wait_from_rank_1(&first);
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
    /* both waits gave up (the watchdog fails a window before it releases
     * the waits) */
    CHECK(mori_hipStreamSynchronize(later.s) == hipSuccess &&
              mori_hipStreamSynchronize(first.s) == hipSuccess,
          "sync: %s", mori_shim_message());
    int rc = mori_window_barrier(w, 0, NULL, 0);
    char err[700];
    snprintf(err, sizeof err, "%s", mori_last_error());
    CHECK(ctx->store->set(ctx->store, "reported", "1", 1) == 0, "set: %s", mori_last_error());
    CHECK(rc == MORI_ETIMEDOUT &&
              strstr(err, "barrier: wait_signal on channel 1: rank(s) 1 never signalled within "
                          "100 ms") != NULL,
          "the window does not report its first failure (channel 1's, within 100 ms): %d: %s",
          rc, err);
    CHECK(mori_hipStreamDestroy(later.s) == hipSuccess &&
              mori_hipStreamDestroy(first.s) == hipSuccess,
          "stream destroy");
  } else {
    CHECK(await_key(ctx->store, "reported") == 0, "rank 0 never reported: %s", mori_last_error());
  }
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "failed twice");
}

static void a_window_failed_twice_reports_its_first_failure(void **s) {
  ranks_run(2, failed_twice_rank, NULL, 0);
}

/* A late peer within the timeout is no failure: rank 1 signals only once
 * rank 0's stream has reached its bounded barrier (an event recorded just
 * before it has passed; in sync mode the barrier runs in the call, so rank
 * 0 says so before it).  (A stream held past the timeout, whose deadline
 * runs from when the stream reaches the waits, is the fault tests' to
 * show: they move the clock instead of waiting, test_fi_clock.c.) */
static int late_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL;
  hipStream_t s = NULL;
  hipEvent_t reached = NULL;
  if (open_window(ctx, "late", &base, &w, msg, msglen)) return 1;
  CHECK(mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking) == hipSuccess &&
            mori_hipEventCreateWithFlags(&reached, hipEventDisableTiming) == hipSuccess,
        "stream and event: %s", mori_shim_message());
  mori_symm_signal_stats s0, s1;
  mori_symm_signal_stats_get(&s0);
  if (ctx->rank == 0) {
    CHECK(mori_hipEventRecord(reached, s) == hipSuccess, "record: %s", mori_shim_message());
    if (!async_mode()) CHECK(ctx->store->set(ctx->store, "waiting", "1", 1) == 0, "set");
    CHECK(mori_window_barrier(w, 0, s, 30000) == 0, "late barrier: %s", mori_last_error());
    if (async_mode()) {
      CHECK(mori_hipEventSynchronize(reached) == hipSuccess, "event: %s", mori_shim_message());
      CHECK(ctx->store->set(ctx->store, "waiting", "1", 1) == 0, "set: %s", mori_last_error());
    }
  } else {
    void *v = NULL;
    size_t n = 0;
    CHECK(ctx->store->get(ctx->store, "waiting", &v, &n, 60000) == 0, "rank 0 never waited: %s",
          mori_last_error());
    free(v);
    CHECK(mori_window_barrier(w, 0, s, 30000) == 0, "late barrier: %s", mori_last_error());
  }
  CHECK(mori_hipStreamSynchronize(s) == hipSuccess, "sync: %s", mori_shim_message());
  CHECK(mori_window_barrier(w, 2, s, 0) == 0, "after: %s", mori_last_error());
  CHECK(mori_hipStreamSynchronize(s) == hipSuccess, "sync");
  mori_symm_signal_stats_get(&s1);
  CHECK(s1.expired == s0.expired, "%ld deadlines fired", s1.expired - s0.expired);
  /* a kernel bounds its own waits: the watchdog watches memops only */
  long timed = kernel_engine(0) ? 0 : 1;
  CHECK(s1.watched - s0.watched == timed, "%ld calls watched, %ld had a timeout",
        s1.watched - s0.watched, timed);
  CHECK(mori_hipEventDestroy(reached) == hipSuccess && mori_hipStreamDestroy(s) == hipSuccess,
        "destroy");
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "late");
}

static void late_peer_within_the_timeout_is_no_failure(void **s) {
  ranks_run(2, late_rank, NULL, 0);
}

/* ---- alloc (one process) ---- */

/* A blocking stream held by a wait on host memory: what a synchronous
 * device-wide call would have to wait for.  The gate is pinned host memory
 * (hipHostMalloc: a stream operation reaches no other host memory), which
 * the host may write; device memory is reached only by the runtime's
 * copies and stream operations (the sim faults on a host access, as a GPU
 * does), on a non-blocking stream of the test's own where a synchronous
 * copy would wait for the held stream. */
struct held {
  hipStream_t s;
  hipEvent_t after;
  uint32_t *gate;
};

static void hold(struct held *h) {
  assert_int_equal(mori_hipHostMalloc((void **)&h->gate, 64, 0), hipSuccess);
  memset(h->gate, 0, 64);
  assert_int_equal(mori_hipStreamCreateWithFlags(&h->s, hipStreamDefault), hipSuccess);
  assert_int_equal(mori_hipEventCreateWithFlags(&h->after, 0), hipSuccess);
  assert_int_equal(mori_hipStreamWaitValue32(h->s, h->gate, 1, hipStreamWaitValueEq, ~0u),
                   hipSuccess);
  assert_int_equal(mori_hipEventRecord(h->after, h->s), hipSuccess);
}

/* n bytes at dev set to value on a non-blocking stream, waited for. */
static void fill_aside(void *dev, int value, size_t n) {
  hipStream_t aside = NULL;
  assert_int_equal(mori_hipStreamCreateWithFlags(&aside, hipStreamNonBlocking), hipSuccess);
  assert_int_equal(mori_hipMemsetAsync(dev, value, n, aside), hipSuccess);
  assert_int_equal(mori_hipStreamSynchronize(aside), hipSuccess);
  assert_int_equal(mori_hipStreamDestroy(aside), hipSuccess);
}

/* The first of n bytes at dev (read by a copy) that is not value, or -1. */
static int first_byte_not(const void *dev, int value, size_t n) {
  unsigned char *host = malloc(n);
  assert_non_null(host);
  assert_int_equal(mori_hipMemcpy(host, dev, n, hipMemcpyDeviceToHost), hipSuccess);
  int at = -1;
  for (size_t i = 0; i < n && at < 0; i++)
    if (host[i] != (unsigned char)value) at = (int)i;
  free(host);
  return at;
}

static void let_go(struct held *h) {
  __atomic_store_n(h->gate, 1, __ATOMIC_RELEASE);
  assert_int_equal(mori_hipStreamSynchronize(h->s), hipSuccess);
  assert_int_equal(mori_hipEventDestroy(h->after), hipSuccess);
  assert_int_equal(mori_hipStreamDestroy(h->s), hipSuccess);
  assert_int_equal(mori_hipHostFree(h->gate), hipSuccess);
}

static void alloc_waits_for_no_other_stream(void **s) {
  assert_true(async_mode()); /* registered for async mode only */
  struct held h;
  void *p = NULL;
  hold(&h);
  assert_int_equal(mori_symm_alloc(MiB, 0, &p), 0);
  /* the held stream has not moved: alloc did not wait for it */
  assert_int_equal(mori_hipEventQuery(h.after), hipErrorNotReady);
  let_go(&h);
  assert_int_equal(mori_symm_free(p), 0);
}

static void alloc_on_stream_zeroes_in_that_stream_s_order(void **s) {
  assert_true(async_mode());
  struct held h;
  void *p = NULL;
  hold(&h);
  assert_int_equal(mori_symm_alloc_on_stream(MiB, 0, h.s, &p), 0);
  assert_int_equal(mori_hipEventQuery(h.after), hipErrorNotReady);
  /* written before the stream reached the zeroing: the zeroing wins */
  fill_aside(p, 0xab, 4096);
  let_go(&h);
  int at = first_byte_not(p, 0, 4096);
  if (at >= 0) fail_msg("byte %d is not 0 after the stream ran", at);
  assert_int_equal(mori_symm_free(p), 0);
}

/* An allocation on a stream being captured into a graph zeroes outside
 * the capture and before it returns: a zeroing recorded into the graph
 * would run at every replay, over the data.  (Before, the sim refused the
 * zeroing's event in the capture and the allocation failed; on a GPU the
 * memset went into the graph.) */
static void alloc_on_a_capturing_stream_zeroes_outside_the_capture(void **s) {
  hipStream_t cs = NULL;
  mori_sim_graph *g = NULL;
  void *p = NULL;
  assert_int_equal(mori_hipStreamCreateWithFlags(&cs, hipStreamNonBlocking), hipSuccess);
  assert_int_equal(mori_sim_begin_capture(cs), hipSuccess);
  if (mori_symm_alloc_on_stream(MiB, 0, cs, &p) != 0) fail_msg("alloc: %s", mori_last_error());
  assert_int_equal(mori_sim_end_capture(cs, &g), hipSuccess);
  fill_aside(p, 0x5a, 4096); /* the caller's data, after the allocation */
  assert_int_equal(mori_sim_graph_launch(g, cs), hipSuccess);
  assert_int_equal(mori_hipStreamSynchronize(cs), hipSuccess);
  int at = first_byte_not(p, 0x5a, 4096);
  if (at >= 0) fail_msg("byte %d is not 0x5a after the graph's replay: the zeroing was captured",
                        at);
  mori_sim_graph_destroy(g);
  assert_int_equal(mori_symm_free(p), 0);
  assert_int_equal(mori_hipStreamDestroy(cs), hipSuccess);
}

/* ---- the seam, interposed: where the core waits ----
 * The test defines the two runtime calls in which the core waits for work
 * queued behind a held stream (teardown's device synchronize, the first
 * rendezvous's wait for a block's zeroing): a thread opens the gate once
 * the core waits there, or once the call under test returned without
 * waiting, never after a guessed delay. */
static struct {
  const char *call; /* armed: the call to watch */
  int entered;
} waited;

static void note_wait(const char *call) {
  if (waited.call != NULL && strcmp(waited.call, call) == 0)
    __atomic_store_n(&waited.entered, 1, __ATOMIC_RELEASE);
}

hipError_t mori_hipDeviceSynchronize(void) {
  static hipError_t (*real)(void);
  if (real == NULL) *(void **)&real = dlsym(RTLD_NEXT, "mori_hipDeviceSynchronize");
  note_wait("hipDeviceSynchronize");
  return real();
}

hipError_t mori_hipEventSynchronize(hipEvent_t event) {
  static hipError_t (*real)(hipEvent_t);
  if (real == NULL) *(void **)&real = dlsym(RTLD_NEXT, "mori_hipEventSynchronize");
  note_wait("hipEventSynchronize");
  return real(event);
}

/* The calls that ready the signal kernels (a module load, the pinned
 * failure words), counted: the rendezvous makes them, never a signal call,
 * which may be enqueued behind a gate its caller opens only after it
 * returns (engine_counts). */
static long readying_calls;

hipError_t mori_hipModuleLoadData(hipModule_t *module, const void *image) {
  static hipError_t (*real)(hipModule_t *, const void *);
  if (real == NULL) *(void **)&real = dlsym(RTLD_NEXT, "mori_hipModuleLoadData");
  __atomic_fetch_add(&readying_calls, 1, __ATOMIC_RELAXED);
  return real(module, image);
}

hipError_t mori_hipHostMalloc(void **ptr, size_t size, unsigned int flags) {
  static hipError_t (*real)(void **, size_t, unsigned int);
  if (real == NULL) *(void **)&real = dlsym(RTLD_NEXT, "mori_hipHostMalloc");
  __atomic_fetch_add(&readying_calls, 1, __ATOMIC_RELAXED);
  return real(ptr, size, flags);
}

struct gate_opener {
  uint32_t *gate;
  int done; /* the call under test returned */
};

/* Opens the gate once the watched call waits; a call under test that
 * returned without waiting leaves it closed, for the test to open later
 * (let_go), after what the missing wait should have come before. */
static void *open_gate_once_waited(void *arg) {
  struct gate_opener *o = arg;
  while (!__atomic_load_n(&waited.entered, __ATOMIC_ACQUIRE) &&
         !__atomic_load_n(&o->done, __ATOMIC_ACQUIRE))
    sched_yield();
  if (__atomic_load_n(&waited.entered, __ATOMIC_ACQUIRE))
    __atomic_store_n(o->gate, 1, __ATOMIC_RELEASE);
  return NULL;
}

static void watch_wait(const char *call) {
  waited.entered = 0;
  waited.call = call;
}

/* A free right after an alloc on a stream that has not yet run the
 * zeroing: the block's mapping must outlive the work queued on it (on a GPU
 * an unmap under a pending memset is an illegal address that poisons the
 * context: the 4-rank demo on two H200s died of exactly that).  The gate
 * opens once the free waits for the device. */
static void alloc_then_free_waits_for_the_work_queued_on_its_block(void **s) {
  assert_true(async_mode());
  struct held h;
  void *p = NULL;
  pthread_t opener;
  hold(&h);
  assert_int_equal(mori_symm_alloc_on_stream(MiB, 0, h.s, &p), 0);
  struct gate_opener o = {h.gate, 0};
  watch_wait("hipDeviceSynchronize");
  assert_int_equal(pthread_create(&opener, NULL, open_gate_once_waited, &o), 0);
  int rc = mori_symm_free(p);
  /* the zeroing ran before the memory went (asked before the gate can
   * open for a free that did not wait) */
  hipError_t zeroed = mori_hipEventQuery(h.after);
  __atomic_store_n(&o.done, 1, __ATOMIC_RELEASE);
  assert_int_equal(pthread_join(opener, NULL), 0);
  watch_wait(NULL);
  assert_int_equal(rc, 0);
  assert_int_equal(zeroed, hipSuccess);
  let_go(&h);
  mori_shim_registry_counts c;
  mori_shim_registry(&c);
  assert_int_equal(c.mappings + c.reservations + c.handles, 0);
}

/* The first rendezvous fills its device tables without waiting for other
 * work: a blocking stream held behind a closed gate is still held when the
 * rendezvous returns.  (A synchronous hipMemcpy of the tables, as before,
 * drained every blocking stream on the legacy default stream's terms and
 * sat behind the gate until the opener thread gave up on it.) */
static void *open_gate_after_5_s(void *arg) {
  struct gate_opener *o = arg;
  for (int i = 0; i < 500 && !__atomic_load_n(&o->done, __ATOMIC_ACQUIRE); i++) sleep_ms(10);
  __atomic_store_n(o->gate, 1, __ATOMIC_RELEASE);
  return NULL;
}

static int rendezvous_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  struct held h;
  void *base = NULL;
  mori_window *w = NULL;
  pthread_t opener;
  CHECK(mori_shim_select("sim") == 0, "%s", mori_shim_message());
  CHECK(mori_symm_alloc(MiB, ctx->rank, &base) == 0, "alloc: %s", mori_last_error());
  hold(&h);
  struct gate_opener o = {h.gate, 0};
  CHECK(pthread_create(&opener, NULL, open_gate_after_5_s, &o) == 0, "pthread_create");
  int rc = mori_symm_rendezvous(base, "world", ctx->rank, ctx->world, ctx->store, &w, NULL);
  hipError_t held = mori_hipEventQuery(h.after);
  __atomic_store_n(&o.done, 1, __ATOMIC_RELEASE);
  pthread_join(opener, NULL);
  CHECK(rc == 0, "rendezvous: %s", mori_last_error());
  CHECK(held == hipErrorNotReady, "the rendezvous waited for a held stream (%s)",
        mori_hipGetErrorName(held));
  /* the tables it returned are filled, on the device as on the host */
  void *dev[2 * 8];
  CHECK(ctx->world <= 8, "world %d", ctx->world);
  CHECK(mori_hipMemcpy(dev, mori_window_buffer_ptrs_dev(w), ctx->world * sizeof(void *),
                       hipMemcpyDeviceToHost) == hipSuccess &&
            mori_hipMemcpy(dev + ctx->world, mori_window_signal_pad_ptrs_dev(w),
                           ctx->world * sizeof(void *), hipMemcpyDeviceToHost) == hipSuccess,
        "reading the device tables: %s", mori_shim_message());
  for (int k = 0; k < ctx->world; k++)
    CHECK(dev[k] == mori_window_buffer_ptrs(w)[k] &&
              dev[ctx->world + k] == mori_window_signal_pad_ptrs(w)[k],
          "device table entry %d differs from the host's", k);
  let_go(&h);
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "rendezvous");
}

static void alloc_then_rendezvous_waits_for_no_other_stream(void **s) {
  assert_true(async_mode());
  ranks_run(3, rendezvous_rank, NULL, 0);
}

/* A block allocated on a stream that has not reached the buffer's zeroing
 * yet: its first rendezvous waits for that zeroing, so a peer's first
 * write, which can only come after the rendezvous, is never overwritten by
 * it.  (Before, the rendezvous returned with the zeroing still queued
 * behind the gate, the peer wrote, and the late zeroing wiped the write.) */
static int late_zeroing_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  struct held h;
  void *base = NULL;
  mori_window *w = NULL;
  hipStream_t s2 = NULL;
  pthread_t opener;
  const int peer = (ctx->rank + 1) % ctx->world, from = (ctx->rank + ctx->world - 1) % ctx->world;
  CHECK(mori_shim_select("sim") == 0, "%s", mori_shim_message());
  hold(&h);
  CHECK(mori_symm_alloc_on_stream(MiB, ctx->rank, h.s, &base) == 0, "alloc: %s", mori_last_error());
  /* the gate opens once the rendezvous waits for the zeroing */
  struct gate_opener o = {h.gate, 0};
  watch_wait("hipEventSynchronize");
  CHECK(pthread_create(&opener, NULL, open_gate_once_waited, &o) == 0, "pthread_create");
  int rc = mori_symm_rendezvous(base, "world", ctx->rank, ctx->world, ctx->store, &w, NULL);
  __atomic_store_n(&o.done, 1, __ATOMIC_RELEASE);
  CHECK(rc == 0, "rendezvous: %s", mori_last_error());
  /* the peer's first write, in s2's order before the barrier's signals */
  CHECK(mori_hipStreamCreateWithFlags(&s2, hipStreamNonBlocking) == hipSuccess, "stream");
  CHECK(mori_hipMemsetAsync(mori_window_buffer_ptrs(w)[peer], 0x10 + ctx->rank, 4096, s2) ==
            hipSuccess, "write to the peer: %s", mori_shim_message());
  CHECK(mori_window_barrier(w, 0, s2, 0) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_hipStreamSynchronize(s2) == hipSuccess, "sync: %s", mori_shim_message());
  pthread_join(opener, NULL);
  watch_wait(NULL);
  let_go(&h); /* whatever the held stream still had queued has run now */
  unsigned char own[4096];
  CHECK(mori_hipMemcpy(own, base, sizeof own, hipMemcpyDeviceToHost) == hipSuccess,
        "read the own block: %s", mori_shim_message());
  for (int i = 0; i < 4096; i++)
    CHECK(own[i] == 0x10 + from, "byte %d is 0x%x, not rank %d's 0x%x: the zeroing of the "
          "block ran after the peer's write", i, own[i], from, 0x10 + from);
  CHECK(mori_hipStreamDestroy(s2) == hipSuccess, "stream destroy");
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "late zeroing");
}

static void alloc_on_stream_then_first_rendezvous_waits_for_its_zeroing(void **s) {
  assert_true(async_mode());
  ranks_run(2, late_zeroing_rank, NULL, 0);
}

/* A block zeroed on a stream, then rendezvoused by two groups: the first
 * waits for the zeroing and gives its event back; the second has no event
 * left to wait for (a handle kept after its release would be waited on,
 * and fail as an unknown event). */
static int second_group_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  hipStream_t s = NULL;
  void *base = NULL;
  mori_window *first = NULL, *second = NULL;
  CHECK(mori_shim_select("sim") == 0, "%s", mori_shim_message());
  CHECK(mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking) == hipSuccess, "stream: %s",
        mori_shim_message());
  CHECK(mori_symm_alloc_on_stream(MiB, ctx->rank, s, &base) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(base, "first", ctx->rank, ctx->world, ctx->store, &first, NULL) == 0,
        "the first group's rendezvous: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(base, "second", ctx->rank, ctx->world, ctx->store, &second, NULL) ==
            0,
        "the second group's rendezvous: %s", mori_last_error());
  CHECK(mori_window_barrier(second, 0, s, 0) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_hipStreamSynchronize(s) == hipSuccess, "sync: %s", mori_shim_message());
  CHECK(mori_hipStreamDestroy(s) == hipSuccess, "stream destroy");
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "two groups");
}

static void a_second_group_s_rendezvous_of_a_block_zeroed_on_a_stream_waits_on_no_released_event(
    void **s) {
  ranks_run(2, second_group_rank, NULL, 0);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(barrier_orders_every_rank_at_2_ranks),
      cmocka_unit_test(barrier_orders_every_rank_at_5_ranks),
      cmocka_unit_test(dissemination_barrier_orders_every_rank_at_6_ranks),
      cmocka_unit_test(a_barrier_that_enqueued_nothing_can_be_called_again),
      cmocka_unit_test(put_wait_interleave_with_barriers_on_one_channel),
      cmocka_unit_test(each_eager_call_is_one_batch_of_local_waits_and_remote_writes),
      cmocka_unit_test(captured_barrier_and_signals_replay_correctly),
      cmocka_unit_test(the_engine_follows_the_form_the_device_and_the_setting),
      cmocka_unit_test(barrier_with_a_dead_peer_fails_in_bounded_time_naming_it),
      cmocka_unit_test(barrier_with_two_dead_peers_of_four_names_both),
      cmocka_unit_test(wait_signal_without_a_put_fails_after_its_timeout),
      cmocka_unit_test(put_signal_never_consumed_fails_after_its_timeout),
      cmocka_unit_test(a_window_failed_twice_reports_its_first_failure),
      cmocka_unit_test(late_peer_within_the_timeout_is_no_failure),
      /* forks its ranks: before the in-process cases below start the
       * sim's stream threads in this process (ThreadSanitizer refuses
       * threads in a child forked from a multi-threaded parent) */
      cmocka_unit_test(alloc_then_rendezvous_waits_for_no_other_stream),
      cmocka_unit_test(alloc_on_stream_then_first_rendezvous_waits_for_its_zeroing),
      cmocka_unit_test(
          a_second_group_s_rendezvous_of_a_block_zeroed_on_a_stream_waits_on_no_released_event),
      cmocka_unit_test(alloc_waits_for_no_other_stream),
      cmocka_unit_test(alloc_on_stream_zeroes_in_that_stream_s_order),
      cmocka_unit_test(alloc_then_free_waits_for_the_work_queued_on_its_block),
      cmocka_unit_test(alloc_on_a_capturing_stream_zeroes_outside_the_capture),
  };
  setenv("MORI_SIM_DEVICES", "16", 0);
  setenv("MORI_SYMM_SHIM", "sim", 1);
  return mori_run_tests(argc, argv, tests);
}
