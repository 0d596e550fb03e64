/*
 * gpu_bench.c - mori-gpu-bench: the measurements behind the signal, alloc
 * and rendezvous work of issues 13 and 22, in one run on a GPU host (2
 * ranks, on 2 GPUs or sharing one, C only): the host cost of each runtime
 * call a signal makes; every shape of barrier and put/wait considered
 * (stream memory operations, separate or batched, with and without the
 * capture query and the watchdog's events, remote poll or
 * acknowledgement; one kernel doing the same work, the library's own
 * signal kernels and one of torch's shape; eager and captured in a graph),
 * each timed back to back and gated (enqueued behind a closed gate, so
 * that the figure is the GPU's alone); each step of an allocation and of
 * its free; rendezvous cycles.  Medians over repetitions; the signal and
 * graph sections end with a summary in markdown, one table per form (the
 * same work done by each engine), as docs/performance.md keeps it.
 *
 * Graph capture and kernels are not in the shim's HIP calls the bench
 * uses: on the cuda shim they come from libcuda.so.1 directly, here only
 * (the signal kernels from the library's embedded PTX and
 * bench_kernels.cu's, launched raw); on the sim, capture from the sim's
 * capture API and no kernel, so that every memop protocol measured here
 * also runs in CI.  Every kernel wait is bounded (KERNEL_BOUND_MS) and a
 * variant whose kernel gave up fails: where the ranks share a GPU a
 * spinning kernel waits for the other process's time slice, so such
 * variants run few iterations there and the bench always ends.  A gated
 * graph is one launch of a graph of many barriers: a second launch of a
 * graph whose first has not run can block the host on CUDA (seen on an
 * H200 with graphs of separate memop nodes), and the gate would never
 * open.
 *
 *   mori-gpu-bench [--shim cuda] [--only host,alloc,signals,graph,rendezvous] [--quick]
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_kernels_ptx.h" /* torch's shape (bench_kernels.cu) */
#include "launch.h"
#include "mori/hip_shim.h"
#include "mori/signal_kernel.h"
#include "mori/symm.h"
#include "signal_ptx.h" /* the library's own kernels (core/kernels/signal.cu) */

#define MiB (1u << 20)

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  if (n <= 0) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static struct {
  const char *shim;
  int quick;
  char only[256];
  int iters, gated, reps, graph_len, graph_replays, cycles, alloc_iters;
} opt = {"cuda", 0, "", 2000, 64, 5, 30, 20, 20, 60};

static int wanted(const char *section) {
  if (opt.only[0] == '\0') return 1;
  char list[sizeof opt.only + 2];
  snprintf(list, sizeof list, ",%s,", opt.only);
  char key[64];
  snprintf(key, sizeof key, ",%s,", section);
  return strstr(list, key) != NULL;
}

#define TRY_HIP(expr)                                                                    \
  do {                                                                                   \
    hipError_t e_ = (expr);                                                              \
    if (e_ != hipSuccess) {                                                              \
      snprintf(msg, msglen, "rank %d line %d: %s: %s", ctx->rank, __LINE__, #expr,      \
               mori_shim_message());                                                     \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)
#define TRY(expr)                                                                        \
  do {                                                                                   \
    if ((expr) != 0) {                                                                   \
      snprintf(msg, msglen, "rank %d line %d: %s: %s", ctx->rank, __LINE__, #expr,      \
               mori_last_error());                                                       \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

/* ---- what the shim lacks: batches, writes without a barrier, graphs ---- */

enum { OP_WRITE, OP_WAIT };
struct mop {
  int kind;
  uint32_t *addr;
  uint32_t value;
  unsigned flags; /* wait: hipStreamWaitValue* */
};

static struct {
  int cuda;
  int (*begin)(void *stream, int mode);
  int (*end)(void *stream, void **graph);
  int (*instantiate)(void **exec, void *graph, unsigned long long flags);
  int (*launch)(void *exec, void *stream);
  int (*exec_destroy)(void *exec);
  int (*graph_destroy)(void *graph);
  int (*module_load)(void **module, const void *image);
  int (*module_function)(void **fn, void *module, const char *name);
  int (*launch_kernel)(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                       unsigned bz, unsigned shared, void *stream, void **params, void **extra);
  void *noop; /* an empty kernel, JIT-compiled from the PTX below */
  void *kernel[16]; /* the signal kernels, by enum kernel */
} cu;

/* The empty kernel: what a Triton launch costs a graph or a stream, less
 * its work, so that a barrier's cost after a kernel shows. */
static const char noop_ptx[] = ".version 7.0\n.target sm_70\n.address_size 64\n"
                               ".visible .entry mori_noop()\n{\n\tret;\n}\n";

/* On the cuda shim: the driver's entry points the shim does not wrap.  The
 * shim made the device's context current on this thread already. */
static int ext_open(void) {
  if (strcmp(opt.shim, "cuda") != 0) return 0;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == NULL) return -1;
  const struct {
    const char *name, *alt;
    void **fn;
  } syms[] = {
      {"cuStreamBeginCapture_v2", "cuStreamBeginCapture", (void **)&cu.begin},
      {"cuStreamEndCapture", NULL, (void **)&cu.end},
      {"cuGraphInstantiateWithFlags", NULL, (void **)&cu.instantiate},
      {"cuGraphLaunch", NULL, (void **)&cu.launch},
      {"cuGraphExecDestroy", NULL, (void **)&cu.exec_destroy},
      {"cuGraphDestroy", NULL, (void **)&cu.graph_destroy},
      {"cuModuleLoadData", NULL, (void **)&cu.module_load},
      {"cuModuleGetFunction", NULL, (void **)&cu.module_function},
      {"cuLaunchKernel", NULL, (void **)&cu.launch_kernel},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    *syms[i].fn = dlsym(lib, syms[i].name);
    if (*syms[i].fn == NULL && syms[i].alt) *syms[i].fn = dlsym(lib, syms[i].alt);
    if (*syms[i].fn == NULL) return -1;
  }
  cu.cuda = 1;
  return 0;
}

static int one_op(hipStream_t s, const struct mop *m) {
  if (m->kind == OP_WAIT)
    return mori_hipStreamWaitValue32(s, m->addr, m->value, m->flags, 0xffffffffu);
  return mori_hipStreamWriteValue32(s, m->addr, m->value, 0);
}

/* One call for n operations: the shim's batch (the runtime's own where it
 * has one, else one call per operation). */
static int batch_ops(hipStream_t s, const struct mop *ops, int n) {
  hipStreamBatchMemOpParams b[16];
  memset(b, 0, sizeof b);
  for (int i = 0; i < n; i++) {
    b[i].operation = ops[i].kind == OP_WAIT ? hipStreamMemOpWaitValue32 : hipStreamMemOpWriteValue32;
    b[i].waitValue.address = ops[i].addr;
    b[i].waitValue.value = ops[i].value;
    b[i].waitValue.flags = ops[i].kind == OP_WAIT ? ops[i].flags : 0;
  }
  return mori_hipStreamBatchMemOp(s, (unsigned)n, b, 0);
}

static int noop_kernel(hipStream_t s) {
  if (cu.noop == NULL) {
    void *module = NULL;
    if (cu.module_load(&module, noop_ptx) != 0 ||
        cu.module_function(&cu.noop, module, "mori_noop") != 0)
      return -1;
  }
  return cu.launch_kernel(cu.noop, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
}

/* The signal kernels, raw: the library's (its embedded PTX, as it loads
 * it) and torch's shape (bench_kernels.cu), launched straight through the
 * driver, one block each, so that a kernel node is timed against the
 * memop nodes doing the same work. */
enum kernel {
  K_BARRIER, K_PUT, K_WAIT, K_CAPTURED_BARRIER, K_CAPTURED_PUT, K_CAPTURED_WAIT,
  K_TORCH_BARRIER, K_TORCH_PUT, K_TORCH_WAIT, K__COUNT
};
static const struct {
  const char *name;
  int torch; /* in bench_kernels.cu's module */
} kernels[K__COUNT] = {
    {"mori_signal_barrier", 0},         {"mori_signal_put", 0},
    {"mori_signal_wait", 0},            {"mori_signal_captured_barrier", 0},
    {"mori_signal_captured_put", 0},    {"mori_signal_captured_wait", 0},
    {"torch_shape_barrier", 1},         {"torch_shape_put", 1},
    {"torch_shape_wait", 1},
};

static int kernels_load(void) {
  void *ours = NULL, *torch = NULL;
  if (cu.module_load(&ours, mori__signal_ptx) != 0 ||
      cu.module_load(&torch, bench_kernels_ptx) != 0)
    return -1;
  for (int k = 0; k < K__COUNT; k++)
    if (cu.module_function(&cu.kernel[k], kernels[k].torch ? torch : ours, kernels[k].name) != 0)
      return -1;
  return 0;
}

/* Graphs: a CUDA graph (relaxed capture), or the sim's recorded operations. */
static int graph_begin(hipStream_t s) {
  return cu.cuda ? cu.begin(s, 2 /* CU_STREAM_CAPTURE_MODE_RELAXED */) : (int)mori_sim_begin_capture(s);
}

static int graph_end(hipStream_t s, void **exec) {
  if (!cu.cuda) return mori_sim_end_capture(s, (mori_sim_graph **)exec);
  void *g = NULL;
  int rc = cu.end(s, &g);
  if (rc == 0) rc = cu.instantiate(exec, g, 0);
  if (g != NULL) cu.graph_destroy(g);
  return rc;
}

static int graph_launch(void *exec, hipStream_t s) {
  return cu.cuda ? cu.launch(exec, s) : (int)mori_sim_graph_launch(exec, s);
}

static void graph_destroy(void *exec) {
  if (cu.cuda) cu.exec_destroy(exec);
  else mori_sim_graph_destroy(exec);
}

/* ---- the store as a meeting point ---- */

static int meet(const mori_rank_ctx *ctx, const char *tag) {
  char key[192];
  snprintf(key, sizeof key, "bench/%s/meet/%s/%d", ctx->incarnation ? ctx->incarnation : "-",
           tag, ctx->rank);
  if (ctx->store->set(ctx->store, key, "1", 1) != 0) return -1;
  for (int r = 0; r < ctx->world; r++) {
    if (r == ctx->rank) continue;
    void *v = NULL;
    size_t n = 0;
    snprintf(key, sizeof key, "bench/%s/meet/%s/%d", ctx->incarnation ? ctx->incarnation : "-",
             tag, r);
    if (ctx->store->get(ctx->store, key, &v, &n, 60000) != 0) return -1;
    free(v);
  }
  return 0;
}

static int post(const mori_rank_ctx *ctx, const char *tag, int rank, const char *text) {
  char key[192];
  snprintf(key, sizeof key, "bench/%s/post/%s/%d", ctx->incarnation ? ctx->incarnation : "-",
           tag, rank);
  return ctx->store->set(ctx->store, key, text, strlen(text) + 1);
}

static int fetch(const mori_rank_ctx *ctx, const char *tag, int rank, char *out, size_t n,
                 int timeout_ms) {
  char key[192];
  void *v = NULL;
  size_t len = 0;
  snprintf(key, sizeof key, "bench/%s/post/%s/%d", ctx->incarnation ? ctx->incarnation : "-",
           tag, rank);
  if (ctx->store->get(ctx->store, key, &v, &len, timeout_ms) != 0) return -1;
  snprintf(out, n, "%.*s", (int)len, (char *)v);
  free(v);
  return 0;
}

static int sim_sync_streams(void) {
  const char *m = getenv("MORI_SIM_STREAMS");
  return strcmp(opt.shim, "sim") == 0 && (m == NULL || strcmp(m, "async") != 0);
}

/* ---- signals: the variants ---- */

/* Cell indexes in a variant's own 32 cells of the torch pad (MORI's
 * signals use their private area, so the pad is free here). */
enum { CELL_S = 0, CELL_A = 1, CELL_B = 2, CELL_C = 3, GATE_CELL = 2000 };

struct bctx {
  const mori_rank_ctx *ctx;
  int rank, peer;
  hipStream_t s, gs;
  mori_window *w;
  uint32_t *own, *remote;       /* this variant's cells: mine, and the peer's through its slot */
  uint32_t *gate_own, *gate_peer;
  uint32_t gate_round;
  long base;                    /* iterations enqueued so far (counters keep counting) */
  int batch, capq;
  int slot;                     /* this variant's 32 cells of the pad */
  void *pads_dev;               /* the window's device table of pad bases */
  uint32_t *status;             /* the kernels' failure words (device memory) */
  int shared;                   /* the ranks share a GPU */
  double b2b_us, gated_us;      /* rank 0's figures, for the summary */
};

typedef int (*step_fn)(struct bctx *c, long i);

static uint32_t phase(long n) { return 1u << (n % 3); }

#define W(p, v) (struct mop){OP_WRITE, (p), (v), 0}
#define WAIT(p, f, v) (struct mop){OP_WAIT, (p), (v), (f)}

/* One call's operations: batched into one runtime call, or one call each;
 * with the capture query first where the variant asks. */
static int call(struct bctx *c, const struct mop *ops, int n) {
  if (c->capq) {
    hipStreamCaptureStatus st;
    if (mori_hipStreamIsCapturing(c->s, &st) != hipSuccess) return -1;
  }
  if (c->batch) return batch_ops(c->s, ops, n);
  for (int i = 0; i < n; i++)
    if (one_op(c->s, &ops[i]) != 0) return -1;
  return 0;
}

/* barrier n: phase bits, one remote write, one local wait (AND) */
static int b_phase(struct bctx *c, long i) {
  long n = i + 1;
  struct mop o[] = {W(c->remote + CELL_B, phase(n)),
                    WAIT(c->own + CELL_B, hipStreamWaitValueAnd, phase(n) | phase(n + 1))};
  return call(c, o, 2);
}

/* a counter: remote write n, local wait >= n */
static int b_geq(struct bctx *c, long i) {
  uint32_t n = (uint32_t)(i + 1);
  struct mop o[] = {W(c->remote + CELL_B, n), WAIT(c->own + CELL_B, hipStreamWaitValueGte, n)};
  return call(c, o, 2);
}

/* the mailbox of before: poll the peer's cell empty, fill it, wait for
 * mine, empty it */
static int b_mailbox(struct bctx *c, long i) {
  struct mop o[] = {WAIT(c->remote + CELL_B, hipStreamWaitValueEq, 0), W(c->remote + CELL_B, 1),
                    WAIT(c->own + CELL_B, hipStreamWaitValueEq, 1), W(c->own + CELL_B, 0)};
  return call(c, o, 4);
}

/* replay-safe with a root: rank 0 waits for the other's arrival, resets
 * its cell and releases; the other arrives, waits for the release and
 * resets.  Each reset precedes (in stream order) what lets the peer write
 * that cell again, so nothing is lost and every cell ends at 0. */
static int b_central(struct bctx *c, long i) {
  if (c->rank == 0) {
    struct mop o[] = {WAIT(c->own + CELL_C, hipStreamWaitValueEq, 1), W(c->own + CELL_C, 0),
                      W(c->remote + CELL_C, 1)};
    return call(c, o, 3);
  }
  struct mop o[] = {W(c->remote + CELL_C, 1), WAIT(c->own + CELL_C, hipStreamWaitValueEq, 1),
                    W(c->own + CELL_C, 0)};
  return call(c, o, 3);
}

/* put and wait with acknowledgement cells (the captured put/wait, and the
 * captured barrier as put + wait) */
static int put_ack(struct bctx *c) {
  struct mop o[] = {WAIT(c->own + CELL_A, hipStreamWaitValueEq, 0), W(c->own + CELL_A, 1),
                    W(c->remote + CELL_S, 1)};
  return call(c, o, 3);
}

static int wait_ack(struct bctx *c) {
  struct mop o[] = {WAIT(c->own + CELL_S, hipStreamWaitValueEq, 1), W(c->own + CELL_S, 0),
                    W(c->remote + CELL_A, 0)};
  return call(c, o, 3);
}

static int b_ack(struct bctx *c, long i) { return put_ack(c) || wait_ack(c); }

/* the same six operations in one call */
static int b_ack_one_call(struct bctx *c, long i) {
  struct mop o[] = {WAIT(c->own + CELL_A, hipStreamWaitValueEq, 0), W(c->own + CELL_A, 1),
                    W(c->remote + CELL_S, 1),
                    WAIT(c->own + CELL_S, hipStreamWaitValueEq, 1), W(c->own + CELL_S, 0),
                    W(c->remote + CELL_A, 0)};
  return call(c, o, 6);
}

/* put/wait of the mailbox of before (a remote poll) */
static int put_mailbox(struct bctx *c) {
  struct mop o[] = {WAIT(c->remote + CELL_S, hipStreamWaitValueEq, 0), W(c->remote + CELL_S, 1)};
  return call(c, o, 2);
}

static int wait_mailbox(struct bctx *c) {
  struct mop o[] = {WAIT(c->own + CELL_S, hipStreamWaitValueEq, 1), W(c->own + CELL_S, 0)};
  return call(c, o, 2);
}

/* put/wait by counts: put k waits for the ack of k-1 (own cell), writes k;
 * wait j waits for signal j (own cell), acks j.  No poll of a peer, no
 * local write, two operations each. */
static int put_count(struct bctx *c, long k) {
  struct mop o[] = {WAIT(c->own + CELL_A, hipStreamWaitValueGte, (uint32_t)(k - 1)),
                    W(c->remote + CELL_S, (uint32_t)k)};
  return k > 1 ? call(c, o, 2) : call(c, o + 1, 1);
}

static int wait_count(struct bctx *c, long j) {
  struct mop o[] = {WAIT(c->own + CELL_S, hipStreamWaitValueGte, (uint32_t)j),
                    W(c->remote + CELL_A, (uint32_t)j)};
  return call(c, o, 2);
}

/* the floor: a put is one remote write, a wait one local wait */
static int put_floor(struct bctx *c, long k) {
  struct mop o[] = {W(c->remote + CELL_S, (uint32_t)k)};
  return call(c, o, 1);
}

static int wait_floor(struct bctx *c, long j) {
  struct mop o[] = {WAIT(c->own + CELL_S, hipStreamWaitValueGte, (uint32_t)j)};
  return call(c, o, 1);
}

/* Ping-pong: rank 0 puts then waits, rank 1 waits then puts (compare.py's
 * put_wait_rtt). */
static int pp_ack(struct bctx *c, long i) {
  return c->rank == 0 ? (put_ack(c) || wait_ack(c)) : (wait_ack(c) || put_ack(c));
}

static int pp_mailbox(struct bctx *c, long i) {
  return c->rank == 0 ? (put_mailbox(c) || wait_mailbox(c)) : (wait_mailbox(c) || put_mailbox(c));
}

static int pp_count(struct bctx *c, long i) {
  long k = i + 1;
  return c->rank == 0 ? (put_count(c, k) || wait_count(c, k))
                      : (wait_count(c, k) || put_count(c, k));
}

static int pp_floor(struct bctx *c, long i) {
  long k = i + 1;
  return c->rank == 0 ? (put_floor(c, k) || wait_floor(c, k))
                      : (wait_floor(c, k) || put_floor(c, k));
}

/* ---- the signal kernels as steps ---- */

/* Cell offsets in a variant's 32: barrier cells, signal cells, ack cells
 * (cell channel * world + rank of each, channel 0). */
enum { AREA_B = 0, AREA_S = 8, AREA_A = 16 };
/* Every kernel wait gives up after this (writing the failure words, which
 * fail the variant): on a GPU shared by the ranks a spinning kernel waits
 * for the other's time slice, and the bench must end. */
#define KERNEL_BOUND_MS 2000u
#define STATUS_WORDS MORI_SIGNAL_STATUS_WORDS(8) /* the bench runs 2 ranks */

static struct mori_signal_args kargs(const struct bctx *c, int sig, int ack) {
  struct mori_signal_args a;
  memset(&a, 0, sizeof a);
  a.pads = (uintptr_t)c->pads_dev;
  a.status = (uintptr_t)c->status;
  a.timeout_ns = KERNEL_BOUND_MS * 1000000ull;
  a.timeout_ms = KERNEL_BOUND_MS;
  a.signal_area = (uint64_t)(32 * c->slot + sig) * 4;
  a.ack_area = (uint64_t)(32 * c->slot + ack) * 4;
  a.world = c->ctx->world;
  a.rank = c->rank;
  a.peer = c->peer;
  a.code = MORI_SIGNAL_CODE(2, 0);
  return a;
}

static int launch_kernel(struct bctx *c, enum kernel k, struct mori_signal_args a) {
  void *params[] = {&a};
  return cu.launch_kernel(cu.kernel[k], 1, 1, 1, MORI_SIGNAL_THREADS, 1, 1, 0, c->s, params, NULL);
}

/* the library's eager kernels: barrier n, put k, wait j (phases) */
static int k_barrier(struct bctx *c, long i) {
  long n = i + 1;
  struct mori_signal_args a = kargs(c, AREA_B, AREA_B);
  a.write_value = phase(n);
  a.wait_value = phase(n) | phase(n + 1);
  return launch_kernel(c, K_BARRIER, a);
}

static int k_put(struct bctx *c, long k) {
  struct mori_signal_args a = kargs(c, AREA_S, AREA_A);
  a.wait_value = k > 1 ? phase(k - 1) : 0;
  a.write_value = phase(k);
  return launch_kernel(c, K_PUT, a);
}

static int k_wait(struct bctx *c, long j) {
  struct mori_signal_args a = kargs(c, AREA_S, AREA_A);
  a.wait_value = a.write_value = phase(j);
  return launch_kernel(c, K_WAIT, a);
}

static int pp_kernel(struct bctx *c, long i) {
  long k = i + 1;
  return c->rank == 0 ? (k_put(c, k) || k_wait(c, k)) : (k_wait(c, k) || k_put(c, k));
}

/* the library's captured kernels (replay-safe), and torch's shape */
static int k_plain(struct bctx *c, enum kernel k, int sig, int ack) {
  return launch_kernel(c, k, kargs(c, sig, ack));
}
static int k_captured_barrier(struct bctx *c, long i) {
  return k_plain(c, K_CAPTURED_BARRIER, AREA_S, AREA_A);
}
static int k_captured_put(struct bctx *c) { return k_plain(c, K_CAPTURED_PUT, AREA_S, AREA_A); }
static int k_captured_wait(struct bctx *c) { return k_plain(c, K_CAPTURED_WAIT, AREA_S, AREA_A); }
static int pp_captured_kernel(struct bctx *c, long i) {
  return c->rank == 0 ? (k_captured_put(c) || k_captured_wait(c))
                      : (k_captured_wait(c) || k_captured_put(c));
}
static int t_barrier(struct bctx *c, long i) { return k_plain(c, K_TORCH_BARRIER, AREA_B, AREA_B); }
static int t_put(struct bctx *c) { return k_plain(c, K_TORCH_PUT, AREA_S, AREA_S); }
static int t_wait(struct bctx *c) { return k_plain(c, K_TORCH_WAIT, AREA_S, AREA_S); }
static int pp_torch(struct bctx *c, long i) {
  return c->rank == 0 ? (t_put(c) || t_wait(c)) : (t_wait(c) || t_put(c));
}

/* The library's own calls. */
static int core_barrier(struct bctx *c, long i) { return mori_window_barrier(c->w, 0, c->s, 0); }
/* a kernel, then a barrier: a Triton kernel's place in an all-to-all */
static int kernel_core_barrier(struct bctx *c, long i) {
  return noop_kernel(c->s) || core_barrier(c, i);
}
static int kernel_phase(struct bctx *c, long i) { return noop_kernel(c->s) || b_phase(c, i); }
static int kernel_central(struct bctx *c, long i) { return noop_kernel(c->s) || b_central(c, i); }
static int kernel_only(struct bctx *c, long i) { return noop_kernel(c->s); }
static int core_barrier_wd(struct bctx *c, long i) {
  return mori_window_barrier(c->w, 0, c->s, 30000);
}

static int core_pp_timeout(struct bctx *c, int timeout_ms) {
  if (c->rank == 0)
    return mori_window_put_signal(c->w, c->peer, 1, c->s, timeout_ms) ||
           mori_window_wait_signal(c->w, c->peer, 1, c->s, timeout_ms);
  return mori_window_wait_signal(c->w, c->peer, 1, c->s, timeout_ms) ||
         mori_window_put_signal(c->w, c->peer, 1, c->s, timeout_ms);
}

static int core_pp(struct bctx *c, long i) { return core_pp_timeout(c, 0); }
static int core_pp_wd(struct bctx *c, long i) { return core_pp_timeout(c, 30000); }

enum vkind { V_EAGER, V_GRAPH };
/* The summary tables (the same work done by each engine): which one a
 * variant is a row of. */
enum form {
  F_NONE, F_CAPTURED_BARRIER, F_CAPTURED_PUTWAIT, F_EAGER_BARRIER, F_EAGER_PUTWAIT, F__COUNT
};
static const char *const form_titles[F__COUNT] = {
    NULL, "captured barrier, replayed in a graph (us per barrier)",
    "captured put + wait round trip, replayed in a graph (us per round trip)",
    "eager barrier (us per barrier)", "eager put + wait round trip (us per round trip)"};

struct variant {
  const char *name;
  step_fn step;
  int batch, capq;
  enum vkind kind;
  int needs_cuda; /* a kernel launched through libcuda itself: cuda only */
  const char *what;
  int null_stream; /* on the legacy default stream (torch's default) */
  int separate;    /* the library with MORI_SYMM_MEMOP_BATCH=0 */
  int spins;       /* a kernel that spins on a peer: few iterations where the GPU is shared */
  enum form form;  /* its row in the summary */
  const char *row;
  const char *engine; /* the library's MORI_SYMM_SIGNAL_ENGINE (NULL: as the environment says) */
};

static const struct variant variants[] = {
    {"barrier.core", core_barrier, 0, 0, V_EAGER, 0, "mori_window_barrier (phases, flat)", 0, 0,
     0, F_EAGER_BARRIER, "library, automatic engine: mori_window_barrier", NULL},
    {"barrier.core_kernel", core_barrier, 0, 0, V_EAGER, 0,
     "mori_window_barrier, MORI_SYMM_SIGNAL_ENGINE=kernel", 0, 0, 1, F_EAGER_BARRIER,
     "library, MORI_SYMM_SIGNAL_ENGINE=kernel", "kernel"},
    {"barrier.core_kernel_timeout", core_barrier_wd, 0, 0, V_EAGER, 0,
     "the same, timeout 30 s (the kernel's own bound, no watchdog)", 0, 0, 1, F_NONE, NULL,
     "kernel"},
    {"barrier.core_timeout", core_barrier_wd, 0, 0, V_EAGER, 0,
     "mori_window_barrier, timeout 30 s (watchdog events)", 0, 0, 0, F_NONE, NULL, NULL},
    {"barrier.core_separate", core_barrier, 0, 0, V_EAGER, 0,
     "mori_window_barrier, MORI_SYMM_MEMOP_BATCH=0", 0, 1, 0, F_NONE, NULL, NULL},
    {"barrier.kernel", kernel_only, 0, 0, V_EAGER, 1, "an empty kernel (no barrier)", 0, 0, 0,
     F_NONE, NULL, NULL},
    {"barrier.kernel_core", kernel_core_barrier, 0, 0, V_EAGER, 1,
     "an empty kernel, then mori_window_barrier", 0, 0, 0, F_NONE, NULL, NULL},
    {"barrier.core_null", core_barrier, 0, 0, V_EAGER, 0,
     "mori_window_barrier on the legacy default stream", 1, 0, 0, F_NONE, NULL, NULL},
    {"barrier.phase", b_phase, 0, 0, V_EAGER, 0, "write + wait AND, 2 calls", 0, 0, 0,
     F_EAGER_BARRIER, "memops: write + wait, 2 calls", NULL},
    {"barrier.phase_capq", b_phase, 0, 1, V_EAGER, 0, "the same + hipStreamIsCapturing", 0, 0, 0,
     F_NONE, NULL, NULL},
    {"barrier.phase_batch", b_phase, 1, 0, V_EAGER, 0, "write + wait AND, 1 batch", 0, 0, 0,
     F_EAGER_BARRIER, "memops: write + wait, 1 batch", NULL},
    {"barrier.kernel_ours", k_barrier, 0, 0, V_EAGER, 1,
     "the library's barrier kernel (phases), 1 launch", 0, 0, 1, F_EAGER_BARRIER,
     "one kernel: the library's mori_signal_barrier", NULL},
    {"barrier.torch_shape", t_barrier, 0, 0, V_EAGER, 1,
     "a kernel of torch's shape (CAS 0->1, 1->0), 1 launch", 0, 0, 1, F_EAGER_BARRIER,
     "one kernel of torch's shape (CAS 0->1 / 1->0)", NULL},
    {"barrier.geq", b_geq, 0, 0, V_EAGER, 0, "counter: write + wait GEQ", 0, 0, 0, F_NONE, NULL,
     NULL},
    {"barrier.mailbox", b_mailbox, 0, 0, V_EAGER, 0, "remote poll, 4 memops", 0, 0, 0, F_NONE,
     NULL, NULL},
    {"barrier.central", b_central, 0, 0, V_EAGER, 0, "root: 3 memops, replay-safe", 0, 0, 0,
     F_NONE, NULL, NULL},
    {"barrier.central_batch", b_central, 1, 0, V_EAGER, 0, "the same, 1 batch", 0, 0, 0, F_NONE,
     NULL, NULL},
    {"barrier.ack", b_ack, 0, 0, V_EAGER, 0, "put + wait with acks, 6 memops", 0, 0, 0, F_NONE,
     NULL, NULL},
    {"barrier.ack_batch", b_ack_one_call, 1, 0, V_EAGER, 0, "the same, 1 batch", 0, 0, 0, F_NONE,
     NULL, NULL},
    {"putwait.core", core_pp, 0, 0, V_EAGER, 0, "mori_window_put/wait_signal", 0, 0, 0,
     F_EAGER_PUTWAIT, "library, automatic engine: mori_window_put_signal + wait_signal", NULL},
    {"putwait.core_kernel", core_pp, 0, 0, V_EAGER, 0,
     "mori_window_put/wait_signal, MORI_SYMM_SIGNAL_ENGINE=kernel", 0, 0, 1, F_EAGER_PUTWAIT,
     "library, MORI_SYMM_SIGNAL_ENGINE=kernel", "kernel"},
    {"putwait.core_timeout", core_pp_wd, 0, 0, V_EAGER, 0, "the same, timeout 30 s", 0, 0, 0,
     F_NONE, NULL, NULL},
    {"putwait.core_separate", core_pp, 0, 0, V_EAGER, 0,
     "the same, MORI_SYMM_MEMOP_BATCH=0", 0, 1, 0, F_NONE, NULL, NULL},
    {"putwait.core_null", core_pp, 0, 0, V_EAGER, 0, "the same on the legacy default stream", 1,
     0, 0, F_NONE, NULL, NULL},
    {"putwait.ack", pp_ack, 0, 0, V_EAGER, 0, "acks: 3 + 3 memops", 0, 0, 0, F_NONE, NULL, NULL},
    {"putwait.ack_batch", pp_ack, 1, 0, V_EAGER, 0, "acks: 1 batch per call", 0, 0, 0, F_NONE,
     NULL, NULL},
    {"putwait.mailbox", pp_mailbox, 0, 0, V_EAGER, 0, "remote poll: 2 + 2 memops", 0, 0, 0,
     F_NONE, NULL, NULL},
    {"putwait.count", pp_count, 0, 0, V_EAGER, 0, "counts: 2 + 2 memops, no poll", 0, 0, 0,
     F_EAGER_PUTWAIT, "memops: 2 + 2, a call each", NULL},
    {"putwait.count_capq", pp_count, 0, 1, V_EAGER, 0, "counts + hipStreamIsCapturing", 0, 0, 0,
     F_NONE, NULL, NULL},
    {"putwait.count_batch", pp_count, 1, 0, V_EAGER, 0, "counts: 1 batch per call", 0, 0, 0,
     F_EAGER_PUTWAIT, "memops: 2 + 2, 1 batch per call", NULL},
    {"putwait.kernel_ours", pp_kernel, 0, 0, V_EAGER, 1,
     "the library's put and wait kernels (phases), 1 launch per call", 0, 0, 1, F_EAGER_PUTWAIT,
     "one kernel per call: the library's mori_signal_put / _wait", NULL},
    {"putwait.torch_shape", pp_torch, 0, 0, V_EAGER, 1,
     "kernels of torch's shape, 1 launch per call", 0, 0, 1, F_EAGER_PUTWAIT,
     "one kernel per call of torch's shape", NULL},
    {"putwait.floor", pp_floor, 0, 0, V_EAGER, 0, "1 + 1 memops (no consumption)", 0, 0, 0,
     F_NONE, NULL, NULL},
    {"graph.core", core_barrier, 0, 0, V_GRAPH, 0, "mori_window_barrier captured", 0, 0, 0,
     F_CAPTURED_BARRIER, "library, automatic engine: mori_window_barrier captured", NULL},
    {"graph.core_memop", core_barrier, 0, 0, V_GRAPH, 0,
     "mori_window_barrier captured, MORI_SYMM_SIGNAL_ENGINE=memop", 0, 0, 0, F_CAPTURED_BARRIER,
     "library, MORI_SYMM_SIGNAL_ENGINE=memop", "memop"},
    {"graph.kernel", kernel_only, 0, 0, V_GRAPH, 1, "an empty kernel (no barrier)", 0, 0, 0,
     F_NONE, NULL, NULL},
    {"graph.kernel_core", kernel_core_barrier, 0, 0, V_GRAPH, 1,
     "an empty kernel, then mori_window_barrier", 0, 0, 0, F_NONE, NULL, NULL},
    {"graph.kernel_central", kernel_central, 0, 0, V_GRAPH, 1, "an empty kernel, then root", 0, 0,
     0, F_NONE, NULL, NULL},
    {"graph.kernel_phase", kernel_phase, 0, 0, V_GRAPH, 1, "an empty kernel, then phases", 0, 0,
     0, F_NONE, NULL, NULL},
    {"graph.ack", b_ack, 0, 0, V_GRAPH, 0, "put + wait with acks, 6 memops", 0, 0, 0,
     F_CAPTURED_BARRIER, "memop nodes: put + wait with acks, 6 nodes", NULL},
    {"graph.ack_batch", b_ack_one_call, 1, 0, V_GRAPH, 0, "the same, 1 batch node", 0, 0, 0,
     F_CAPTURED_BARRIER, "memop nodes: the same 6 operations, 1 batch node", NULL},
    {"graph.kernel_ours", k_captured_barrier, 0, 0, V_GRAPH, 1,
     "the library's captured barrier kernel, 1 node", 0, 0, 1, F_CAPTURED_BARRIER,
     "one kernel node: the library's mori_signal_captured_barrier", NULL},
    {"graph.torch_shape", t_barrier, 0, 0, V_GRAPH, 1, "a kernel of torch's shape, 1 node", 0, 0,
     1, F_CAPTURED_BARRIER, "one kernel node of torch's shape (CAS 0->1 / 1->0)", NULL},
    {"graph.mailbox", b_mailbox, 0, 0, V_GRAPH, 0, "remote poll, 4 memops", 0, 0, 0, F_NONE, NULL,
     NULL},
    {"graph.mailbox_batch", b_mailbox, 1, 0, V_GRAPH, 0, "the same, 1 batch node", 0, 0, 0,
     F_NONE, NULL, NULL},
    {"graph.central", b_central, 0, 0, V_GRAPH, 0, "root, 3 memops", 0, 0, 0, F_NONE, NULL, NULL},
    {"graph.central_batch", b_central, 1, 0, V_GRAPH, 0, "root, 1 batch node", 0, 0, 0, F_NONE,
     NULL, NULL},
    {"graph.phase", b_phase, 0, 0, V_GRAPH, 0, "phases (not replay-safe: a bound)", 0, 0, 0,
     F_NONE, NULL, NULL},
    {"graph.phase_batch", b_phase, 1, 0, V_GRAPH, 0, "phases, 1 batch node", 0, 0, 0, F_NONE,
     NULL, NULL},
    {"graph.pw_core", core_pp, 0, 0, V_GRAPH, 0, "mori_window_put/wait_signal captured", 0, 0, 0,
     F_CAPTURED_PUTWAIT, "library, automatic engine: put_signal + wait_signal captured", NULL},
    {"graph.pw_core_memop", core_pp, 0, 0, V_GRAPH, 0,
     "mori_window_put/wait_signal captured, MORI_SYMM_SIGNAL_ENGINE=memop", 0, 0, 0,
     F_CAPTURED_PUTWAIT, "library, MORI_SYMM_SIGNAL_ENGINE=memop", "memop"},
    {"graph.pw_ack", pp_ack, 0, 0, V_GRAPH, 0, "put/wait with acks, 3 + 3 memop nodes", 0, 0, 0,
     F_CAPTURED_PUTWAIT, "memop nodes: 3 + 3", NULL},
    {"graph.pw_ack_batch", pp_ack, 1, 0, V_GRAPH, 0, "the same, 1 batch node per call", 0, 0, 0,
     F_CAPTURED_PUTWAIT, "memop nodes: 1 batch node per call", NULL},
    {"graph.pw_kernel_ours", pp_captured_kernel, 0, 0, V_GRAPH, 1,
     "the library's captured put and wait kernels, 1 node per call", 0, 0, 1, F_CAPTURED_PUTWAIT,
     "one kernel node per call: the library's mori_signal_captured_put / _wait", NULL},
    {"graph.pw_torch_shape", pp_torch, 0, 0, V_GRAPH, 1,
     "kernels of torch's shape, 1 node per call", 0, 0, 1, F_CAPTURED_PUTWAIT,
     "one kernel node per call of torch's shape", NULL},
};
#define NVARIANTS ((int)(sizeof variants / sizeof variants[0]))
/* each variant has 32 cells of the pad below GATE_CELL, and a row of figures[] */
_Static_assert(sizeof variants / sizeof variants[0] <= 60, "one pad slot per variant");

/* ---- the gate: work enqueued behind it runs only once rank 0 opens it ---- */

static int gate_close(struct bctx *c) {
  c->gate_round++;
  return mori_hipStreamWaitValue32(c->s, c->gate_own, c->gate_round, hipStreamWaitValueGte,
                                   0xffffffffu);
}

struct opener {
  struct bctx *c;
  volatile int enqueued; /* rank 0's own work is in */
  double opened_us;
  int rc;
};

/* Rank 0's helper: once both ranks enqueued (or 5 s passed: an enqueue
 * that blocks on a full queue must not deadlock the run), open both gates
 * from the side stream, peer's through its slot. */
static void *open_gates(void *arg) {
  struct opener *o = arg;
  struct bctx *c = o->c;
  char text[16];
  (void)mori_hipSetDevice(c->ctx->rank);
  double t0 = now_us();
  while (!__atomic_load_n(&o->enqueued, __ATOMIC_ACQUIRE) && now_us() - t0 < 5e6) usleep(50);
  char tag[32];
  snprintf(tag, sizeof tag, "enq%u", c->gate_round);
  (void)fetch(c->ctx, tag, 1, text, sizeof text, 5000);
  o->opened_us = now_us();
  o->rc = mori_hipStreamWriteValue32(c->gs, c->gate_peer, c->gate_round, 0) ||
          mori_hipStreamWriteValue32(c->gs, c->gate_own, c->gate_round, 0);
  return NULL;
}

/* ---- timing ---- */

struct figures {
  double enq_us, total_us, gpu_us;
};

/* Back to back: enqueue iters iterations, then synchronize. */
static int time_b2b(struct bctx *c, step_fn step, int iters, const char *tag, double *enq,
                    double *total) {
  if (meet(c->ctx, tag) != 0) return -1;
  double t0 = now_us();
  for (int i = 0; i < iters; i++)
    if (step(c, c->base + i) != 0) return -1;
  double t1 = now_us();
  if (mori_hipStreamSynchronize(c->s) != hipSuccess) return -1;
  double t2 = now_us();
  c->base += iters;
  *enq = (t1 - t0) / iters;
  *total = (t2 - t0) / iters;
  return 0;
}

/* Gated: work (enqueue(c, arg)) behind a closed gate; rank 0 opens it for
 * both ranks at once and measures the GPU's time alone, from the opening
 * to the stream's end, in *us. */
static int time_gated(struct bctx *c, int (*enqueue)(struct bctx *c, void *arg), void *arg,
                      double *us) {
  char tag[32];
  struct opener o = {c, 0, 0, 0};
  pthread_t th;
  snprintf(tag, sizeof tag, "gate%u", c->gate_round + 1);
  if (meet(c->ctx, tag) != 0 || gate_close(c) != hipSuccess) return -1;
  if (c->rank == 0 && pthread_create(&th, NULL, open_gates, &o) != 0) return -1;
  int rc = enqueue(c, arg);
  if (c->rank == 0) {
    __atomic_store_n(&o.enqueued, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
  } else {
    snprintf(tag, sizeof tag, "enq%u", c->gate_round);
    rc |= post(c->ctx, tag, 1, "1");
  }
  if (mori_hipStreamSynchronize(c->s) != hipSuccess) return -1;
  *us = now_us() - o.opened_us;
  return rc || o.rc;
}

struct steps {
  step_fn step;
  int iters;
};

static int enqueue_steps(struct bctx *c, void *arg) {
  const struct steps *w = arg;
  for (int i = 0; i < w->iters; i++)
    if (w->step(c, c->base + i) != 0) return -1;
  c->base += w->iters;
  return 0;
}

/* ---- one signal variant, on 2 ranks ---- */

static int setup(const mori_rank_ctx *ctx, struct bctx *c, void **base, int slot, char *msg,
                 size_t msglen) {
  int ndev = 0;
  if (mori_shim_select(opt.shim) != 0) {
    snprintf(msg, msglen, "rank %d: %s", ctx->rank, mori_shim_message());
    return 1;
  }
  TRY_HIP(mori_hipGetDeviceCount(&ndev));
  int dev = ctx->rank % ndev;
  TRY_HIP(mori_hipSetDevice(dev));
  /* More ranks than devices: they share (rank r on device r mod count). */
  if (ctx->world > ndev) mori_symm_set_allow_overlapping_devices(1);
  if (ext_open() != 0) {
    snprintf(msg, msglen, "rank %d: libcuda.so.1's extra entry points: %s", ctx->rank, dlerror());
    return 1;
  }
  if (cu.cuda && cu.kernel[0] == NULL && kernels_load() != 0) {
    snprintf(msg, msglen, "rank %d: loading the signal kernels' PTX failed", ctx->rank);
    return 1;
  }
  memset(c, 0, sizeof *c);
  c->ctx = ctx;
  c->rank = ctx->rank;
  c->peer = (ctx->rank + 1) % ctx->world;
  c->shared = ctx->world > ndev;
  c->slot = slot;
  TRY_HIP(mori_hipStreamCreateWithFlags(&c->s, hipStreamNonBlocking));
  TRY_HIP(mori_hipStreamCreateWithFlags(&c->gs, hipStreamNonBlocking));
  TRY(mori_symm_alloc(64 * 1024, dev, base));
  TRY(mori_symm_rendezvous(*base, "bench", ctx->rank, ctx->world, ctx->store, &c->w, NULL));
  uint32_t *mine = mori_window_signal_pad_ptrs(c->w)[ctx->rank];
  uint32_t *theirs = mori_window_signal_pad_ptrs(c->w)[c->peer];
  c->own = mine + 32 * slot;
  c->remote = theirs + 32 * slot;
  c->pads_dev = mori_window_signal_pad_ptrs_dev(c->w);
  size_t status_bytes = STATUS_WORDS * sizeof(uint32_t);
  TRY_HIP(mori_hipMalloc((void **)&c->status, status_bytes));
  TRY_HIP(mori_hipMemset(c->status, 0, status_bytes));
  c->gate_own = mine + GATE_CELL;
  c->gate_peer = theirs + GATE_CELL;
  return 0;
}

/* Whether a kernel's wait gave up (the variant's figures are void then). */
static int kernel_timed_out(const mori_rank_ctx *ctx, struct bctx *c, char *msg, size_t msglen) {
  uint32_t st[STATUS_WORDS] = {0};
  TRY_HIP(mori_hipMemcpy(st, c->status, sizeof st, hipMemcpyDeviceToHost));
  if (st[0] == 0) return 0;
  snprintf(msg, msglen, "rank %d: a kernel's wait for rank %d gave up after %u ms", ctx->rank,
           c->peer, st[1]);
  return 1;
}

static int teardown(const mori_rank_ctx *ctx, struct bctx *c, void *base, char *msg,
                    size_t msglen) {
  TRY_HIP(mori_hipStreamSynchronize(c->s));
  if (kernel_timed_out(ctx, c, msg, msglen)) return 1;
  TRY_HIP(mori_hipFree(c->status));
  TRY(meet(ctx, "end"));
  TRY(mori_symm_free(base));
  if (c->s != NULL) TRY_HIP(mori_hipStreamDestroy(c->s));
  TRY_HIP(mori_hipStreamDestroy(c->gs));
  TRY(mori_symm_release_all());
  return 0;
}

static void report(const mori_rank_ctx *ctx, const struct variant *v, const char *mode,
                   double r0a, double r0b, double r1a, double r1b, int have_r1) {
  if (ctx->rank != 0) return;
  if (have_r1)
    printf("%-24s %-7s %9.2f %9.2f %9.2f %9.2f   %s\n", v->name, mode, r0a, r0b, r1a, r1b,
           v->what);
  else
    printf("%-24s %-7s %9s %9.2f %9s %9s   %s\n", v->name, mode, "", r0b, "", "", v->what);
  fflush(stdout);
}

/* Back to back and gated medians of one eager variant. */
/* Iterations where the ranks share a GPU and the variant's kernels spin on
 * each other: each then waits for the other process's time slice
 * (milliseconds), so a few tell as much. */
static int scaled(const struct bctx *c, const struct variant *v, int n, int floor) {
  if (!(v->spins && c->shared)) return n;
  return n / 50 > floor ? n / 50 : floor;
}

/* Back to back and gated medians of one eager variant. */
static int run_eager(const mori_rank_ctx *ctx, struct bctx *c, const struct variant *v,
                     char *msg, size_t msglen) {
  double enq[16], tot[16], gpu[16];
  int reps = opt.reps > 16 ? 16 : opt.reps, iters = scaled(c, v, opt.iters, 8);
  int gated = scaled(c, v, opt.gated, 4);
  double e, t;
  TRY(time_b2b(c, v->step, iters / 10 + 1, "warm", &e, &t));
  for (int r = 0; r < reps; r++) {
    char tag[32];
    snprintf(tag, sizeof tag, "b2b%d", r);
    TRY(time_b2b(c, v->step, iters, tag, &enq[r], &tot[r]));
  }
  char mine[64], theirs[64] = "0 0";
  snprintf(mine, sizeof mine, "%.4f %.4f", median(enq, reps), median(tot, reps));
  if (ctx->rank == 1) TRY(post(ctx, "b2b", 1, mine));
  else TRY(fetch(ctx, "b2b", 1, theirs, sizeof theirs, 60000));
  double r1e = 0, r1t = 0;
  sscanf(theirs, "%lf %lf", &r1e, &r1t);
  c->b2b_us = median(tot, reps);
  report(ctx, v, "b2b", median(enq, reps), c->b2b_us, r1e, r1t, 1);
  if (sim_sync_streams()) return 0; /* a wait there runs in the call: no gate */
  struct steps w = {v->step, gated};
  for (int r = 0; r < reps; r++) {
    TRY(time_gated(c, enqueue_steps, &w, &gpu[r]));
    gpu[r] /= gated;
  }
  c->gated_us = median(gpu, reps);
  report(ctx, v, "gated", 0, c->gated_us, 0, 0, 0);
  return 0;
}

static int capture(struct bctx *c, const struct variant *v, int len, void **exec) {
  if (graph_begin(c->s) != 0) return -1;
  for (int i = 0; i < len; i++)
    if (v->step(c, i) != 0) return -1;
  return graph_end(c->s, exec);
}

static int enqueue_once(struct bctx *c, void *exec) { return graph_launch(exec, c->s); }

/* A graph of graph_len iterations replayed back to back; and gated, one
 * launch of a graph of graph_len x graph_replays iterations. */
static int run_graph(const mori_rank_ctx *ctx, struct bctx *c, const struct variant *v,
                     char *msg, size_t msglen) {
  void *exec = NULL, *long_exec = NULL;
  int len = opt.graph_len - opt.graph_len % 3; /* phases: a multiple of 3 replays right */
  /* an eager call first, as a warm-up before a capture: it readies the
   * window's kernels (nothing of that may run in a capture); a channel of
   * its own, so no variant's cells move */
  TRY(mori_window_barrier(c->w, 31, c->s, 0));
  TRY_HIP(mori_hipStreamSynchronize(c->s));
  TRY(meet(ctx, "capture"));
  TRY(capture(c, v, len, &exec));
  double tot[16], gpu[16];
  int reps = opt.reps > 16 ? 16 : opt.reps, replays = scaled(c, v, opt.graph_replays, 1);
  for (int r = 0; r < reps + 1; r++) { /* the first is the warm-up */
    char tag[32];
    snprintf(tag, sizeof tag, "g%d", r);
    TRY(meet(ctx, tag));
    double t0 = now_us();
    for (int k = 0; k < replays; k++) TRY(graph_launch(exec, c->s));
    TRY_HIP(mori_hipStreamSynchronize(c->s));
    if (r > 0) tot[r - 1] = (now_us() - t0) / (replays * len);
  }
  c->b2b_us = median(tot, reps);
  report(ctx, v, "b2b", 0, c->b2b_us, 0, 0, 0);
  graph_destroy(exec);
  if (!sim_sync_streams()) {
    /* at most 4 x len iterations: one launch of a graph of thousands of
     * separate memop nodes behind a closed gate never returned to the host
     * where the ranks shared an H200 (the gate, opened after it, stayed
     * closed), as a second launch does on two */
    int n = len * (replays < 4 ? replays : 4);
    TRY(meet(ctx, "capture-long"));
    TRY(capture(c, v, n, &long_exec));
    for (int r = 0; r < reps; r++) {
      TRY(time_gated(c, enqueue_once, long_exec, &gpu[r]));
      gpu[r] /= n;
    }
    c->gated_us = median(gpu, reps);
    report(ctx, v, "gated", 0, c->gated_us, 0, 0, 0);
    graph_destroy(long_exec);
  }
  return 0;
}

static int signal_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const struct variant *v = ctx->arg;
  struct bctx c;
  void *base = NULL;
  if (setup(ctx, &c, &base, (int)(v - variants) % 60, msg, msglen)) return 1;
  c.batch = v->batch;
  c.capq = v->capq;
  if (v->separate) setenv("MORI_SYMM_MEMOP_BATCH", "0", 1);
  if (v->engine) setenv("MORI_SYMM_SIGNAL_ENGINE", v->engine, 1);
  if (v->null_stream) { /* the gate is opened from the side stream all the same */
    (void)mori_hipStreamDestroy(c.s);
    c.s = NULL;
  }
  int rc = v->kind == V_GRAPH ? run_graph(ctx, &c, v, msg, msglen)
                              : run_eager(ctx, &c, v, msg, msglen);
  if (rc == 0) rc = teardown(ctx, &c, base, msg, msglen);
  if (rc == 0) snprintf(msg, msglen, "ok b2b=%.4f gated=%.4f", c.b2b_us, c.gated_us);
  return rc;
}

/* ---- host: what each call costs the caller ---- */

struct host_bench {
  const char *name;
  int (*call)(struct bctx *c, int i);
};

static uint32_t *host_cell;
static hipEvent_t host_event;

static int h_set_device(struct bctx *c, int i) { return mori_hipSetDevice(0); }
static int h_is_capturing(struct bctx *c, int i) {
  hipStreamCaptureStatus st;
  return mori_hipStreamIsCapturing(c->s, &st);
}
static int h_write(struct bctx *c, int i) {
  return mori_hipStreamWriteValue32(c->s, host_cell, (uint32_t)i, 0);
}
static int h_wait_geq(struct bctx *c, int i) {
  return mori_hipStreamWaitValue32(c->s, host_cell, 0, hipStreamWaitValueGte, 0xffffffffu);
}
static int h_wait_and(struct bctx *c, int i) {
  return mori_hipStreamWaitValue32(c->s, host_cell + 1, 1, hipStreamWaitValueAnd, 0xffffffffu);
}
static int h_batch2(struct bctx *c, int i) {
  struct mop o[] = {W(host_cell + 2, (uint32_t)i), WAIT(host_cell, hipStreamWaitValueGte, 0)};
  return batch_ops(c->s, o, 2);
}
static int h_batch6(struct bctx *c, int i) {
  struct mop o[] = {W(host_cell + 2, (uint32_t)i), WAIT(host_cell, hipStreamWaitValueGte, 0),
                    W(host_cell + 3, (uint32_t)i), WAIT(host_cell, hipStreamWaitValueGte, 0),
                    W(host_cell + 4, (uint32_t)i), WAIT(host_cell, hipStreamWaitValueGte, 0)};
  return batch_ops(c->s, o, 6);
}
static int h_event_record(struct bctx *c, int i) { return mori_hipEventRecord(host_event, c->s); }
static int h_core_barrier_world1(struct bctx *c, int i) {
  return mori_window_barrier(c->w, 0, c->s, 0);
}
static int h_core_barrier_world1_timeout(struct bctx *c, int i) {
  return mori_window_barrier(c->w, 0, c->s, 30000);
}

static const struct host_bench host_benches[] = {
    {"hipSetDevice", h_set_device},
    {"hipStreamIsCapturing", h_is_capturing},
    {"hipStreamWriteValue32", h_write},
    {"hipStreamWaitValue32 GEQ", h_wait_geq},
    {"hipStreamWaitValue32 AND", h_wait_and},
    {"batch of 2 (1 call)", h_batch2},
    {"batch of 6 (1 call)", h_batch6},
    {"hipEventRecord", h_event_record},
    {"barrier, world of 1 (core only)", h_core_barrier_world1},
    {"the same, timeout 30 s", h_core_barrier_world1_timeout},
};

static int host_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  struct bctx c;
  void *base = NULL;
  if (setup(ctx, &c, &base, 0, msg, msglen)) return 1;
  host_cell = mori_window_signal_pad_ptrs(c.w)[0];
  uint32_t one = 1; /* what the AND wait looks for: every wait here is met */
  TRY_HIP(mori_hipMemcpy(host_cell + 1, &one, sizeof one, hipMemcpyHostToDevice));
  TRY_HIP(mori_hipEventCreateWithFlags(&host_event, hipEventDisableTiming));
  printf("\n== host: microseconds per call, the stream held behind a gate (median of %d x 100)\n",
         opt.reps * 2);
  for (size_t b = 0; b < sizeof host_benches / sizeof host_benches[0]; b++) {
    double per[32];
    int rounds = opt.reps * 2 > 32 ? 32 : opt.reps * 2;
    for (int r = 0; r < rounds; r++) {
      uint32_t round = ++c.gate_round;
      int gated = !sim_sync_streams();
      if (gated)
        TRY_HIP(mori_hipStreamWaitValue32(c.s, c.gate_own, round, hipStreamWaitValueGte,
                                          0xffffffffu));
      double t0 = now_us();
      for (int i = 0; i < 100; i++)
        if (host_benches[b].call(&c, i) != 0) {
          snprintf(msg, msglen, "%s: %s / %s", host_benches[b].name, mori_shim_message(),
                   mori_last_error());
          return 1;
        }
      per[r] = (now_us() - t0) / 100;
      if (gated) TRY_HIP(mori_hipStreamWriteValue32(c.gs, c.gate_own, round, 0));
      TRY_HIP(mori_hipStreamSynchronize(c.s));
    }
    printf("  %-36s %8.3f us\n", host_benches[b].name, median(per, rounds));
    fflush(stdout);
  }
  TRY_HIP(mori_hipEventDestroy(host_event));
  if (teardown(ctx, &c, base, msg, msglen)) return 1;
  snprintf(msg, msglen, "ok");
  return 0;
}

/* ---- alloc and free, step by step (one rank) ---- */

enum {
  A_ALLOC, A_FREE, A_ALLOC_STREAM, A_FREE_STREAM, A_ALLOC_RDV1, A_RDV1, A_FREE_RDV1,
  A_CREATE, A_RESERVE, A_MAP, A_ACCESS, A_ZERO, A_EXPORT, A_UNMAP, A_ADDRFREE, A_RELEASE,
  A_CLOSE_AFTER, A_EXPORT_FRESH, A_CLOSE_BEFORE, A_RELEASE_AFTER_CLOSE, A_DEVSYNC, A_STREAMSYNC,
  A__COUNT
};
static const char *const alloc_names[A__COUNT] = {
    "mori_symm_alloc (1 MiB)", "mori_symm_free", "mori_symm_alloc_on_stream",
    "mori_symm_free (after the stream)", "mori_symm_alloc (to rendezvous)", "rendezvous, world of 1 (export)",
    "mori_symm_free (window, fd)", "raw: hipMemCreate (2 MiB)", "raw: hipMemAddressReserve",
    "raw: hipMemMap", "raw: hipMemSetAccess", "raw: hipMemsetAsync + stream sync",
    "raw: export fd (mapped)", "raw: hipMemUnmap", "raw: hipMemAddressFree",
    "raw: hipMemRelease (fd still open)", "raw: close(fd) after the release",
    "raw: export fd (fresh handle)", "raw: close(fd) before the release",
    "raw: hipMemRelease (fd closed)", "hipDeviceSynchronize (idle)", "hipStreamSynchronize (idle)"};

#define TIMED(slot, expr)                                                                \
  do {                                                                                   \
    double t_ = now_us();                                                                \
    if ((expr) != 0) {                                                                   \
      snprintf(msg, msglen, "%s: %s / %s", alloc_names[slot], mori_shim_message(),      \
               mori_last_error());                                                       \
      return 1;                                                                          \
    }                                                                                    \
    v[slot][at] = now_us() - t_;                                                         \
  } while (0)

static int alloc_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  static double v[A__COUNT][512];
  int n = opt.alloc_iters > 500 ? 500 : opt.alloc_iters, ndev = 0;
  double first_alloc = 0;
  if (mori_shim_select(opt.shim) != 0) {
    snprintf(msg, msglen, "%s", mori_shim_message());
    return 1;
  }
  TRY_HIP(mori_hipGetDeviceCount(&ndev));
  TRY_HIP(mori_hipSetDevice(0));
  hipStream_t s;
  TRY_HIP(mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  hipMemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = hipMemAllocationTypePinned;
  prop.requestedHandleType = hipMemHandleTypePosixFileDescriptor;
  prop.location.type = hipMemLocationTypeDevice;
  size_t gran = 0;
  TRY_HIP(mori_hipMemGetAllocationGranularity(&gran, &prop,
                                              hipMemAllocationGranularityRecommended));
  hipMemAccessDesc access = {{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtReadWrite};
  for (int it = -1; it < n; it++) {
    int w = it < 0, at = w ? 0 : it; /* the first round warms up, its alloc timed apart */
    void *p = NULL;
    mori_window *win = NULL;
    double t0 = now_us();
    TIMED(A_ALLOC, mori_symm_alloc(MiB, 0, &p));
    if (w) first_alloc = now_us() - t0;
    TIMED(A_FREE, mori_symm_free(p));
    TIMED(A_ALLOC_STREAM, mori_symm_alloc_on_stream(MiB, 0, s, &p));
    TRY_HIP(mori_hipStreamSynchronize(s));
    TIMED(A_FREE_STREAM, mori_symm_free(p));
    TIMED(A_ALLOC_RDV1, mori_symm_alloc(MiB, 0, &p));
    TIMED(A_RDV1, mori_symm_rendezvous(p, "one", 0, 1, ctx->store, &win, NULL));
    TIMED(A_FREE_RDV1, mori_symm_free(p));
    hipMemGenericAllocationHandle_t h;
    void *va = NULL;
    int fd = -1;
    TIMED(A_CREATE, mori_hipMemCreate(&h, gran, &prop, 0));
    TIMED(A_RESERVE, mori_hipMemAddressReserve(&va, gran, gran, NULL, 0));
    TIMED(A_MAP, mori_hipMemMap(va, gran, 0, h, 0));
    TIMED(A_ACCESS, mori_hipMemSetAccess(va, gran, &access, 1));
    TIMED(A_ZERO, mori_hipMemsetAsync(va, 0, gran, s) || mori_hipStreamSynchronize(s));
    TIMED(A_EXPORT, mori_hipMemExportToShareableHandle(&fd, h, hipMemHandleTypePosixFileDescriptor,
                                                       0));
    TIMED(A_UNMAP, mori_hipMemUnmap(va, gran));
    TIMED(A_ADDRFREE, mori_hipMemAddressFree(va, gran));
    TIMED(A_RELEASE, mori_hipMemRelease(h));
    TIMED(A_CLOSE_AFTER, mori_close(fd));
    TRY_HIP(mori_hipMemCreate(&h, gran, &prop, 0));
    TIMED(A_EXPORT_FRESH, mori_hipMemExportToShareableHandle(&fd, h,
                                                             hipMemHandleTypePosixFileDescriptor,
                                                             0));
    TIMED(A_CLOSE_BEFORE, mori_close(fd));
    TIMED(A_RELEASE_AFTER_CLOSE, mori_hipMemRelease(h));
    TIMED(A_DEVSYNC, mori_hipDeviceSynchronize());
    TIMED(A_STREAMSYNC, mori_hipStreamSynchronize(s));
  }
  printf("\n== alloc and free on device 0 (of %d), granule %zu: us, median and min of %d "
         "(the first alloc of the process: %.0f us)\n", ndev, gran, n, first_alloc);
  for (int a = 0; a < A__COUNT; a++) {
    double lo = v[a][0];
    for (int i = 1; i < n; i++) lo = v[a][i] < lo ? v[a][i] : lo;
    printf("  %-40s %9.1f %9.1f\n", alloc_names[a], median(v[a], n), lo);
  }
  fflush(stdout);
  TRY_HIP(mori_hipStreamDestroy(s));
  TRY(mori_symm_release_all());
  snprintf(msg, msglen, "ok leaks=%ld", mori_shim_registry_total());
  return mori_shim_registry_total() != 0;
}

/* ---- rendezvous cycles on 2 ranks (MORI_SYMM_DEBUG=INFO prints the steps) ---- */

static int rendezvous_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  double rdv[64], fr[64], al[64];
  int n = opt.cycles > 64 ? 64 : opt.cycles, ndev = 0;
  if (mori_shim_select(opt.shim) != 0) {
    snprintf(msg, msglen, "%s", mori_shim_message());
    return 1;
  }
  TRY_HIP(mori_hipGetDeviceCount(&ndev));
  int dev = ctx->rank % ndev;
  if (ctx->world > ndev) mori_symm_set_allow_overlapping_devices(1); /* ranks share */
  void *warm = NULL;
  TRY(mori_symm_alloc(1, dev, &warm)); /* the runtime comes up outside the figures */
  TRY(mori_symm_free(warm));
  for (int i = 0; i < n; i++) {
    void *p = NULL;
    mori_window *w = NULL;
    char tag[32];
    double t0 = now_us();
    TRY(mori_symm_alloc(MiB, dev, &p));
    al[i] = now_us() - t0;
    snprintf(tag, sizeof tag, "rdv%d", i);
    TRY(meet(ctx, tag));
    t0 = now_us();
    TRY(mori_symm_rendezvous(p, "cycle", ctx->rank, ctx->world, ctx->store, &w, NULL));
    rdv[i] = now_us() - t0;
    TRY(mori_window_barrier(w, 0, NULL, 0));
    TRY_HIP(mori_hipDeviceSynchronize());
    snprintf(tag, sizeof tag, "free%d", i);
    TRY(meet(ctx, tag));
    t0 = now_us();
    TRY(mori_symm_free(p));
    fr[i] = now_us() - t0;
  }
  double first = rdv[0];
  char mine[128], theirs[128] = "0 0 0 0";
  snprintf(mine, sizeof mine, "%.1f %.1f %.1f %.1f", first, median(rdv + 1, n - 1),
           median(al, n), median(fr, n));
  if (ctx->rank == 1) TRY(post(ctx, "rdv", 1, mine));
  else TRY(fetch(ctx, "rdv", 1, theirs, sizeof theirs, 60000));
  if (ctx->rank == 0) {
    printf("\n== rendezvous cycles, 2 ranks, 1 MiB, us: the first rendezvous, then medians of "
           "%d: rendezvous, alloc, free (window, fd)\n  rank 0: %s\n  rank 1: %s\n", n - 1, mine,
           theirs);
    fflush(stdout);
  }
  TRY(mori_symm_release_all());
  snprintf(msg, msglen, "ok");
  return 0;
}

/* ---- a rendezvous's runtime calls, raw: per-slot against whole-span access ---- */

enum {
  M_RESERVE, M_MAP, M_ACCESS_SLOTS, M_ACCESS_SPAN, M_UNMAP, M_FREE, M_EXPORT, M_IMPORT,
  M_CLOSE, M_RELEASE_IMPORTED, M_TABLE, M__COUNT
};
static const char *const map_names[M__COUNT] = {
    "hipMemAddressReserve (world x stride)", "hipMemMap, every slot",
    "hipMemSetAccess, one call per slot", "hipMemSetAccess, one call over the span",
    "hipMemUnmap, every slot", "hipMemAddressFree", "export fd (own block)",
    "import that fd (own process)", "close(fd)", "hipMemRelease of the import",
    "hipMalloc + hipMemcpy of a table + hipFree"};

/* After a rendezvous, the own and the peer's handles (retained through
 * their mappings) are mapped again into spans of our own, so that each
 * call of the MAP and GRANT steps is timed alone, and GRANT's per-slot
 * calls against one call over the whole span. */
static int raw_map_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  static double v[M__COUNT][64];
  int n = opt.cycles > 64 ? 64 : opt.cycles, ndev = 0, world = ctx->world;
  if (mori_shim_select(opt.shim) != 0) {
    snprintf(msg, msglen, "%s", mori_shim_message());
    return 1;
  }
  TRY_HIP(mori_hipGetDeviceCount(&ndev));
  int dev = ctx->rank % ndev;
  if (world > ndev) mori_symm_set_allow_overlapping_devices(1); /* ranks share */
  TRY_HIP(mori_hipSetDevice(dev));
  void *p = NULL;
  mori_window *w = NULL;
  TRY(mori_symm_alloc(MiB, dev, &p));
  TRY(mori_symm_rendezvous(p, "raw", ctx->rank, world, ctx->store, &w, NULL));
  size_t stride = 0;
  char *span0 = mori_window_span(w, &stride);
  hipMemGenericAllocationHandle_t h[2];
  for (int k = 0; k < world && k < 2; k++)
    TRY_HIP(mori_hipMemRetainAllocationHandle(&h[k], span0 + (size_t)k * stride));
  hipMemAccessDesc access = {{hipMemLocationTypeDevice, dev}, hipMemAccessFlagsProtReadWrite};
  int at = 0;
  for (int it = -1; it < n; it++, at = it < 0 ? 0 : it) {
    for (int whole = 0; whole < 2; whole++) {
      char *span = NULL;
      double t = now_us();
      TRY_HIP(mori_hipMemAddressReserve((void **)&span, stride * (size_t)world, stride, NULL, 0));
      v[M_RESERVE][at] = now_us() - t;
      t = now_us();
      for (int k = 0; k < world; k++)
        TRY_HIP(mori_hipMemMap(span + (size_t)k * stride, stride, 0, h[k], 0));
      v[M_MAP][at] = now_us() - t;
      t = now_us();
      if (whole)
        TRY_HIP(mori_hipMemSetAccess(span, stride * (size_t)world, &access, 1));
      else
        for (int k = 0; k < world; k++)
          TRY_HIP(mori_hipMemSetAccess(span + (size_t)k * stride, stride, &access, 1));
      v[whole ? M_ACCESS_SPAN : M_ACCESS_SLOTS][at] = now_us() - t;
      t = now_us();
      for (int k = 0; k < world; k++) TRY_HIP(mori_hipMemUnmap(span + (size_t)k * stride, stride));
      v[M_UNMAP][at] = now_us() - t;
      t = now_us();
      TRY_HIP(mori_hipMemAddressFree(span, stride * (size_t)world));
      v[M_FREE][at] = now_us() - t;
    }
    int fd = -1;
    hipMemGenericAllocationHandle_t imp;
    double t = now_us();
    TRY_HIP(mori_hipMemExportToShareableHandle(&fd, h[ctx->rank], hipMemHandleTypePosixFileDescriptor,
                                               0));
    v[M_EXPORT][at] = now_us() - t;
    t = now_us();
    hipError_t e = mori_hipMemImportFromShareableHandle(&imp, (void *)(intptr_t)fd,
                                                        hipMemHandleTypePosixFileDescriptor);
    v[M_IMPORT][at] = now_us() - t;
    if (e == hipSuccess) {
      t = now_us();
      TRY_HIP(mori_hipMemRelease(imp));
      v[M_RELEASE_IMPORTED][at] = now_us() - t;
    }
    t = now_us();
    TRY(mori_close(fd));
    v[M_CLOSE][at] = now_us() - t;
    void *table = NULL;
    void *host[8] = {0};
    t = now_us();
    TRY_HIP(mori_hipMalloc(&table, sizeof host));
    TRY_HIP(mori_hipMemcpy(table, host, sizeof host, hipMemcpyHostToDevice));
    TRY_HIP(mori_hipFree(table));
    v[M_TABLE][at] = now_us() - t;
  }
  for (int k = 0; k < world && k < 2; k++) TRY_HIP(mori_hipMemRelease(h[k]));
  TRY(meet(ctx, "raw-end"));
  TRY(mori_symm_free(p));
  if (ctx->rank == 0) {
    printf("\n== a rendezvous's runtime calls, raw, on rank 0 (%d ranks, stride %zu): us, median "
           "and min of %d\n", world, stride, n);
    for (int m = 0; m < M__COUNT; m++) {
      double lo = v[m][0];
      for (int i = 1; i < n; i++) lo = v[m][i] < lo ? v[m][i] : lo;
      printf("  %-40s %9.1f %9.1f\n", map_names[m], median(v[m], n), lo);
    }
    fflush(stdout);
  }
  TRY(mori_symm_release_all());
  snprintf(msg, msglen, "ok leaks=%ld", mori_shim_registry_total());
  return mori_shim_registry_total() != 0;
}

/* ---- the sections ---- */

/* Rank 0's figures of each variant, for the summary (-1: not measured). */
static struct {
  double b2b, gated;
} figures[64];

static int launch(const char *what, int world, mori_rank_fn fn, void *arg, char *msg0,
                  size_t msg0len) {
  mori_rank_result res[2];
  memset(res, 0, sizeof res);
  int failed = mori_launch(world, fn, arg, opt.quick ? 60000 : 20000, res);
  for (int r = 0; r < world && failed; r++)
    if (res[r].exit_code || res[r].signal || res[r].hung)
      printf("  %s: rank %d FAILED (exit %d signal %d hung %d): %s\n", what, r, res[r].exit_code,
             res[r].signal, res[r].hung, res[r].msg);
  fflush(stdout);
  if (msg0 != NULL) snprintf(msg0, msg0len, "%s", failed ? "" : res[0].msg);
  return failed;
}

static void cell_text(char *out, size_t n, double us) {
  if (us < 0) snprintf(out, n, "-");
  else if (us == 0) snprintf(out, n, "n/a");
  else snprintf(out, n, "%.2f", us);
}

/* The same work done by each engine, one table per form, as markdown (the
 * layout docs/performance.md keeps). */
static void summary(void) {
  printf("\n== summary (markdown): rank 0, us; b2b: back to back, the total per iteration; "
         "gated: the GPU alone; -: not run (a kernel needs the cuda shim) or failed\n");
  for (int f = 1; f < F__COUNT; f++) {
    printf("\n| %s | b2b | gated |\n|---|---:|---:|\n", form_titles[f]);
    for (int k = 0; k < NVARIANTS; k++) {
      if (variants[k].form != (enum form)f) continue;
      char b[32], g[32];
      cell_text(b, sizeof b, figures[k].b2b);
      cell_text(g, sizeof g, figures[k].gated);
      printf("| %s | %s | %s |\n", variants[k].row, b, g);
    }
  }
  fflush(stdout);
}

static int usage(void) {
  fprintf(stderr,
          "usage: mori-gpu-bench [--shim cuda|sim|hip] [--only host,alloc,signals,graph,"
          "rendezvous] [--quick]\n");
  return 2;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--shim") == 0 && i + 1 < argc) opt.shim = argv[++i];
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      snprintf(opt.only, sizeof opt.only, "%s", argv[++i]);
    else if (strcmp(argv[i], "--quick") == 0) opt.quick = 1;
    else return usage();
  }
  if (opt.quick) {
    opt.iters = 40;
    opt.gated = 8;
    opt.reps = 2;
    opt.graph_len = 6;
    opt.graph_replays = 2;
    opt.cycles = 3;
    opt.alloc_iters = 3;
  }
  int failed = 0, summarize = 0;
  for (int k = 0; k < NVARIANTS; k++) figures[k].b2b = figures[k].gated = -1;
  printf("mori-gpu-bench: shim %s, 2 ranks (rank r on device r)%s\n", opt.shim,
         opt.quick ? ", quick" : "");
  fflush(stdout);
  if (wanted("alloc")) failed += launch("alloc", 1, alloc_rank, NULL, NULL, 0);
  if (wanted("host")) failed += launch("host", 1, host_rank, NULL, NULL, 0);
  if (wanted("rendezvous")) {
    failed += launch("rendezvous", 2, rendezvous_rank, NULL, NULL, 0);
    failed += launch("raw map", 2, raw_map_rank, NULL, NULL, 0);
  }
  for (int g = 0; g < 2; g++) {
    if (!wanted(g == 0 ? "signals" : "graph")) continue;
    printf("\n== %s: us per iteration (barrier, or put+wait round trip); b2b: rank 0 enqueue, "
           "rank 0 total, rank 1 enqueue, rank 1 total (%d iterations, median of %d); gated: "
           "the GPU alone, rank 0 (%d iterations%s)\n",
           g == 0 ? "signals" : "graph (captured barriers replayed)",
           g == 0 ? opt.iters : opt.graph_len * opt.graph_replays, opt.reps,
           g == 0 ? opt.gated : opt.graph_len * (opt.graph_replays < 4 ? opt.graph_replays : 4),
           sim_sync_streams() ? "; none on the sim's sync streams" : "");
    fflush(stdout);
    for (int k = 0; k < NVARIANTS; k++) {
      const struct variant *v = &variants[k];
      if ((v->kind == V_GRAPH) != (g == 1)) continue;
      if (v->needs_cuda && strcmp(opt.shim, "cuda") != 0) continue;
      char m[128];
      failed += launch(v->name, 2, signal_rank, (void *)v, m, sizeof m);
      if (sscanf(m, "ok b2b=%lf gated=%lf", &figures[k].b2b, &figures[k].gated) != 2)
        figures[k].b2b = figures[k].gated = -1;
    }
    summarize = 1;
  }
  if (summarize) summary();
  printf("\nmori-gpu-bench %s: %d failed\n", failed ? "FAILED" : "ok", failed);
  return failed != 0;
}
