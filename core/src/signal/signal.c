/*
 * signal.c - stream-ordered signals between the ranks of a window: barrier,
 * put_signal and wait_signal as stream memory operations over the window's
 * private slot of the block's signal area (torch's own pad stays zero for
 * torch's kernels).  Every wait is on this rank's own memory; a peer is
 * only ever written to, never polled.  A call's operations go to the
 * runtime as one batch (hipStreamBatchMemOp), which costs the host about
 * what one operation costs (docs/performance.md, "What each shape costs,
 * in C", has the figures).  MORI_SYMM_MEMOP_BATCH=0 issues them one by
 * one.
 *
 * A slot is MORI_WIRE_SIGNAL_REGIONS areas of the pad's size; cell
 * (channel, rank) of an area sits at channel * world_size + rank, torch's
 * layout, so channels are bounded as torch bounds them.  phase(n) is
 * 1 << (n % 3): a cell that holds the phase of step n-1, n or n+1 of one
 * sequence tells the three apart; no value grows, nothing wraps (HIP's Gte
 * compares unsigned, CUDA's GEQ cyclically: a counter would break on one
 * of them), and no cell written by a peer is ever reset, so no write of a
 * faster peer can be lost.
 *
 *   BARRIER  cell (c, src) on dst: the phase of src's latest barrier on c.
 *            Barrier n writes phase(n) to every peer and waits until its
 *            own cells hold phase(n) or phase(n + 1) (hipStreamWaitValueAnd):
 *            a peer cannot run more than one barrier ahead (it needs this
 *            rank's barrier n to pass n).
 *   PUT      cell (c, src) on dst: the phase of src's latest put to dst.
 *   PUT_ACK  cell (c, dst) on src: the phase of dst's latest wait for src.
 *            put k: wait until PUT_ACK holds phase(k - 1) (the previous
 *            signal consumed: torch's semantics; nothing to wait for at
 *            k = 1), write phase(k) to dst's PUT.  wait j: wait until PUT
 *            holds phase(j), write phase(j) to src's PUT_ACK.  Two
 *            operations each, both waits on local cells, no local write.
 *            A put cannot run ahead of the wait for its previous signal,
 *            so a cell holds the phase of k - 1 or k.
 *   SIGNAL   cell (c, src) on dst: 1 while a captured signal of src is
 *            unconsumed.
 *   ACK      cell (c, dst) on src: 1 while src's captured signal to dst is
 *            unconsumed.  In a capture, put(dst): wait own ACK == 0, set
 *            own ACK = 1, set dst's SIGNAL = 1; wait(src): wait own SIGNAL
 *            == 1, set it 0, set src's ACK = 0.  Every cell is back at 0
 *            after a put and its wait, so a graph replays it any number of
 *            times.
 *
 * The eager calls' phases come from host counts, which a captured graph
 * would bake in and replay; inside a capture a put or wait is therefore the
 * SIGNAL/ACK form above, and a barrier a put + wait of that form to every
 * peer (torch's own barrier shape), which returns every cell to 0.  Eager
 * and captured calls use different cells: a put and the wait that consumes
 * it must both be captured or both not, as every rank must capture a
 * barrier if one does.
 *
 * Two engines do this work, each behind the interface of engine.h: the
 * memory operations above (engine_memop.c), and one small kernel per form
 * (core/kernels/signal.cu, launched by engine_kernel.c) that does the same
 * on the same cells with the same values, so ranks on different engines
 * meet.  This file plans a call both ways and chooses its engine per
 * window and form (choose: the table `automatic`, MORI_SYMM_SIGNAL_ENGINE):
 * memory operations wherever a peer shares this rank's device, where a
 * spinning kernel would wait for the other process's time slice.  It calls
 * an engine only through its struct mori__signal_engine.
 */
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum region { REGION_BARRIER, REGION_SIGNAL, REGION_ACK, REGION_PUT, REGION_PUT_ACK };
_Static_assert(REGION_PUT_ACK + 1 == MORI_WIRE_SIGNAL_REGIONS, "one region per cell kind");

/* The offset of area r of this window's slot from a pad's base. */
static size_t area(const mori_window *w, enum region r) {
  return (size_t)(1 + w->signal_slot * MORI_WIRE_SIGNAL_REGIONS + r) * w->block->signal_pad_size;
}

static uint32_t *cell(const mori_window *w, int owner, enum region r, int channel, int index) {
  return (uint32_t *)((char *)w->pad_ptrs[owner] + area(w, r)) +
         (size_t)channel * (size_t)w->world_size + (size_t)index;
}

static uint32_t phase(uint64_t n) { return 1u << (n % 3); }

/* ---- the engines ---- */

/* In the order MORI_SYMM_SIGNAL_ENGINE's values are read, and the order a
 * window's failure is asked for (window_failed): the watchdog's record
 * first, then the kernels' words. */
enum engine { ENGINE_MEMOP, ENGINE_KERNEL, ENGINE_AUTO, ENGINE_INVALID };
static const struct mori__signal_engine *const engines[] = {
    [ENGINE_MEMOP] = &mori__signal_engine_memop,
    [ENGINE_KERNEL] = &mori__signal_engine_kernel,
};
#define NENGINES ((int)(sizeof engines / sizeof engines[0]))
_Static_assert(NENGINES == (int)ENGINE_AUTO, "one engine per setting but auto");

/* Every engine counts its own work. */
void mori_symm_signal_stats_get(mori_symm_signal_stats *out) {
  memset(out, 0, sizeof *out);
  for (int e = 0; e < NENGINES; e++) engines[e]->stats(out);
}

/* ---- the barrier's shape: MORI_SYMM_BARRIER ---- */

/* flat: one round, every peer written then every peer waited for (2(N-1)
 * memops per rank).  dissemination: ceil(log2 N) rounds, in round k the
 * rank writes to rank + 2^k and waits for rank - 2^k (2 ceil(log2 N)
 * memops, ceil(log2 N) latencies).  Every rank must use the same shape. */
enum shape { SHAPE_FLAT, SHAPE_DISSEMINATION, SHAPE_INVALID };
static const char *const shape_names[] = {"flat", "dissemination"};

/* The index of environment variable var's value in names[0, n): dflt when
 * it is unset or empty, n for any other value. */
static int env_choice(const char *var, const char *const *names, int n, int dflt) {
  const char *v = getenv(var);
  if (v == NULL || *v == '\0') return dflt;
  for (int i = 0; i < n; i++)
    if (strcmp(v, names[i]) == 0) return i;
  return n;
}

static enum shape barrier_shape(void) {
  return (enum shape)env_choice("MORI_SYMM_BARRIER", shape_names, SHAPE_INVALID, SHAPE_FLAT);
}

/* ---- the engine of a call: memory operations or a kernel ---- */

enum form { FORM_EAGER, FORM_CAPTURED };

/* What the automatic engine uses for each form where no peer shares this
 * rank's device.  mori-gpu-bench's signal and graph tables decide each row
 * (docs/performance.md, "Memory operations or one kernel per signal");
 * until a GPU run fills them these are the expected winners: in a graph a
 * barrier is 6(N-1) memops in one batch node where torch's is one kernel
 * node; eagerly one batch costs the host less than an empty kernel's
 * launch (the figures: docs/performance.md, "What each shape costs"). */
static const enum engine automatic[] = {[FORM_EAGER] = ENGINE_MEMOP,
                                        [FORM_CAPTURED] = ENGINE_KERNEL};

/* MORI_SYMM_SIGNAL_ENGINE=auto|memop|kernel (unset: auto): an engine's
 * name, or auto. */
static enum engine engine_setting(void) {
  const char *names[] = {[ENGINE_MEMOP] = engines[ENGINE_MEMOP]->name,
                         [ENGINE_KERNEL] = engines[ENGINE_KERNEL]->name, [ENGINE_AUTO] = "auto"};
  return (enum engine)env_choice("MORI_SYMM_SIGNAL_ENGINE", names, ENGINE_INVALID, ENGINE_AUTO);
}

/* ---- a call's plan ---- */

struct plan {
  struct mori__signal_call call; /* its operations, its kernel */
  int cap;                       /* room in call.ops */
  /* Eager calls are counted on the host (a barrier per channel, a put per
   * (channel, destination), a wait per (channel, source)): the count this
   * call advances (NULL in a capture) and to what, once every peer was
   * written to (settle() says why). */
  uint64_t *count, value;
};

static int plan_add(struct plan *p, struct mori__signal_op op) {
  struct mori__signal_call *c = &p->call;
  if (c->nops == p->cap) {
    int cap = p->cap ? 2 * p->cap : 16;
    struct mori__signal_op *grown = mori_realloc(c->ops, (size_t)cap * sizeof *grown);
    if (grown == NULL) return mori__nomem("signals");
    c->ops = grown;
    p->cap = cap;
  }
  c->ops[c->nops++] = op;
  return 0;
}

static int add_write(struct plan *p, const mori_window *w, int owner, enum region r, int channel,
                     int index, uint32_t value) {
  return plan_add(p, (struct mori__signal_op){MORI__OP_WRITE, cell(w, owner, r, channel, index),
                                              value, 0, 0, owner, -1, NULL});
}

static int add_wait(struct plan *p, const mori_window *w, enum region r, int channel, int peer,
                    unsigned flags, uint32_t value, uint32_t release, const char *what) {
  return plan_add(p, (struct mori__signal_op){MORI__OP_WAIT, cell(w, w->rank, r, channel, peer),
                                              value, release, flags, w->rank, peer, what});
}

static const char never_signalled[] = "never signalled";
static const char never_consumed[] = "never consumed the previous signal";

static void plan_count(struct plan *p, uint64_t *count, uint64_t value) {
  p->count = count;
  p->value = value;
}

/* The kernel doing the plan's work: entry, and its argument but for what
 * the launch fills (the tables, the failure words, the bound). */
static void plan_kernel(struct plan *p, const mori_window *w, enum mori__kentry entry, int channel,
                        int peer, enum region signal, enum region ack, uint32_t wait_value,
                        uint32_t write_value) {
  struct mori_signal_args *k = &p->call.k;
  p->call.entry = entry;
  k->signal_area = area(w, signal);
  k->ack_area = area(w, ack);
  k->world = w->world_size;
  k->rank = w->rank;
  k->peer = peer;
  k->channel = channel;
  k->wait_value = wait_value;
  k->write_value = write_value;
}

/* put k (eager): the previous signal consumed, then phase(k) to dst. */
static int plan_put(struct plan *p, mori_window *w, int dst, int channel) {
  uint64_t *puts = &w->signals->puts[(size_t)channel * (size_t)w->world_size + (size_t)dst];
  uint64_t k = __atomic_load_n(puts, __ATOMIC_RELAXED) + 1;
  plan_count(p, puts, k);
  plan_kernel(p, w, MORI__K_mori_signal_put, channel, dst, REGION_PUT, REGION_PUT_ACK,
              k > 1 ? phase(k - 1) : 0, phase(k));
  if (k > 1)
    MORI_GUARD(add_wait(p, w, REGION_PUT_ACK, channel, dst, hipStreamWaitValueAnd, phase(k - 1),
                        phase(k - 1), never_consumed));
  return add_write(p, w, dst, REGION_PUT, channel, w->rank, phase(k));
}

/* wait j (eager): signal j, then its acknowledgement to src. */
static int plan_wait(struct plan *p, mori_window *w, int src, int channel) {
  uint64_t *waits = &w->signals->waits[(size_t)channel * (size_t)w->world_size + (size_t)src];
  uint64_t j = __atomic_load_n(waits, __ATOMIC_RELAXED) + 1;
  plan_count(p, waits, j);
  plan_kernel(p, w, MORI__K_mori_signal_wait, channel, src, REGION_PUT, REGION_PUT_ACK, phase(j),
              phase(j));
  MORI_GUARD(add_wait(p, w, REGION_PUT, channel, src, hipStreamWaitValueAnd, phase(j), phase(j),
                      never_signalled));
  return add_write(p, w, src, REGION_PUT_ACK, channel, w->rank, phase(j));
}

/* In a capture: the replay-safe forms, every cell back at 0 after a pair. */
static int add_captured_put(struct plan *p, const mori_window *w, int dst, int channel) {
  MORI_GUARD(add_wait(p, w, REGION_ACK, channel, dst, hipStreamWaitValueEq, 0, 0, never_consumed));
  MORI_GUARD(add_write(p, w, w->rank, REGION_ACK, channel, dst, 1));
  return add_write(p, w, dst, REGION_SIGNAL, channel, w->rank, 1);
}

static int add_captured_wait(struct plan *p, const mori_window *w, int src, int channel) {
  MORI_GUARD(add_wait(p, w, REGION_SIGNAL, channel, src, hipStreamWaitValueEq, 1, 1,
                      never_signalled));
  MORI_GUARD(add_write(p, w, w->rank, REGION_SIGNAL, channel, src, 0));
  return add_write(p, w, src, REGION_ACK, channel, w->rank, 0);
}

static int plan_captured_put(struct plan *p, const mori_window *w, int dst, int channel) {
  plan_kernel(p, w, MORI__K_mori_signal_captured_put, channel, dst, REGION_SIGNAL, REGION_ACK, 0,
              0);
  return add_captured_put(p, w, dst, channel);
}

static int plan_captured_wait(struct plan *p, const mori_window *w, int src, int channel) {
  plan_kernel(p, w, MORI__K_mori_signal_captured_wait, channel, src, REGION_SIGNAL, REGION_ACK, 0,
              0);
  return add_captured_wait(p, w, src, channel);
}

/* In a capture: put to every peer, then wait for every peer. */
static int plan_captured_barrier(struct plan *p, const mori_window *w, int channel) {
  plan_kernel(p, w, MORI__K_mori_signal_captured_barrier, channel, w->rank, REGION_SIGNAL,
              REGION_ACK, 0, 0);
  for (int i = 1; i < w->world_size; i++)
    MORI_GUARD(add_captured_put(p, w, (w->rank + i) % w->world_size, channel));
  for (int i = 1; i < w->world_size; i++)
    MORI_GUARD(add_captured_wait(p, w, (w->rank + w->world_size - i) % w->world_size, channel));
  return 0;
}

static int plan_barrier(struct plan *p, mori_window *w, int channel, enum shape shape) {
  uint64_t n = __atomic_load_n(&w->signals->barriers[channel], __ATOMIC_RELAXED) + 1;
  plan_count(p, &w->signals->barriers[channel], n);
  uint32_t mine = phase(n), accept = phase(n) | phase(n + 1);
  int world_size = w->world_size, rank = w->rank;
  plan_kernel(p, w, MORI__K_mori_signal_barrier, channel, rank, REGION_BARRIER, REGION_BARRIER,
              accept, mine);
  if (shape == SHAPE_FLAT) {
    for (int i = 1; i < world_size; i++)
      MORI_GUARD(add_write(p, w, (rank + i) % world_size, REGION_BARRIER, channel, rank, mine));
    for (int i = 1; i < world_size; i++)
      MORI_GUARD(add_wait(p, w, REGION_BARRIER, channel, (rank + world_size - i) % world_size,
                          hipStreamWaitValueAnd, accept, mine, never_signalled));
    return 0;
  }
  for (int d = 1; d < world_size; d *= 2) {
    MORI_GUARD(add_write(p, w, (rank + d) % world_size, REGION_BARRIER, channel, rank, mine));
    MORI_GUARD(add_wait(p, w, REGION_BARRIER, channel, (rank + world_size - d) % world_size,
                        hipStreamWaitValueAnd, accept, mine, never_signalled));
  }
  return 0;
}

/* ---- a call ---- */

/* A call's count advances when all of it was enqueued.  One that failed
 * before any of its signals left counts for nothing: called again, it is
 * the same call (a wait it enqueued is met again).  One that failed after
 * some had left leaves the window failed for good (its engine fails it:
 * engine.h, run): its peers saw it (all of it, or some of them), but this
 * rank did not enqueue all of its waits, so no count is right.  Counted as
 * done, the call would let this rank run ahead of a barrier it never
 * waited in, two barriers ahead of a slow peer, whose cells then hold a
 * phase the three-phase scheme takes for the wrong barrier; counted as not
 * done, its next barrier reuses a phase its peers passed. */
static void settle(const struct plan *p, int rc) {
  if (p->count == NULL) return; /* captured: nothing counts */
  if (rc == 0) __atomic_store_n(p->count, p->value, __ATOMIC_RELAXED);
}

/* The engine a form of call uses on w by the setting (auto: memory
 * operations where a peer shares this rank's device, the form's row of
 * `automatic` elsewhere). */
static enum engine engine_of(const mori_window *w, enum engine setting, int captured) {
  if (setting != ENGINE_AUTO) return setting;
  return w->shared_device ? ENGINE_MEMOP : automatic[captured ? FORM_CAPTURED : FORM_EAGER];
}

/* The engine of a call.  An eager dissemination barrier stays memory
 * operations whatever the setting (the barrier kernel is flat; every rank
 * has the same MORI_SYMM_BARRIER).  The kernels are made ready (the
 * kernel engine's prepare) by the rendezvous (ready_kernels) wherever a form may use them, not in a
 * stream-ordered call: a module load or a pinned allocation may wait for
 * the device, and a stream the caller holds behind a gate it opens after
 * the call would never let it (the host hangs); neither is
 * permitted in a CUDA capture of global mode (torch's).  The automatic
 * engine keeps memory operations where they are not ready: on a runtime
 * that cannot load them at all (base/device.c logs why, once), and after a
 * failure to ready them, tried again at the window's next call outside a
 * capture (the engines meet on the same cells, so a rank may differ from
 * its peers).  A forced kernel readies them where it is and fails the call
 * if it cannot. */
static int choose(mori_window *w, enum mori__call what, int captured, enum shape shape,
                  enum engine *out) {
  const char *name = mori__call_names[what];
  const struct mori__signal_engine *kernel = engines[ENGINE_KERNEL];
  enum engine setting = engine_setting(), e;
  int forced = setting == ENGINE_KERNEL, unsupported = 0, rc = 0;
  if (setting == ENGINE_INVALID)
    return mori__error(MORI_EINVAL,
                       "%s: MORI_SYMM_SIGNAL_ENGINE=%s: expected auto, memop or kernel", name,
                       getenv("MORI_SYMM_SIGNAL_ENGINE"));
  e = engine_of(w, setting, captured);
  if (e == ENGINE_KERNEL && what == MORI__CALL_BARRIER && !captured &&
      shape == SHAPE_DISSEMINATION)
    e = ENGINE_MEMOP;
  int wanted = e == ENGINE_KERNEL || engine_of(w, setting, 1) == ENGINE_KERNEL ||
               engine_of(w, setting, 0) == ENGINE_KERNEL;
  int ready = -1; /* not asked yet */
  if (wanted && (forced || !captured) && !(ready = kernel->ready(w))) {
    rc = kernel->prepare(w, &unsupported);
    ready = kernel->ready(w);
  }
  if (rc != 0 && forced) {
    mori__error_prefix("%s: the signal kernels: ", name);
    return rc;
  }
  if (e == ENGINE_KERNEL && !(ready >= 0 ? ready : kernel->ready(w))) e = ENGINE_MEMOP;
  *out = e;
  return 0;
}

/* A window failed for good, as any engine found it (the memory
 * operations': by the watchdog, or by a call that failed after some of
 * its signals had left; the kernels': by a kernel that gave up). */
static int window_failed(const mori_window *w, const char *op) {
  for (int e = 0; e < NENGINES; e++) MORI_GUARD(engines[e]->failed(w, op));
  return 0;
}

static int check_signal(const mori_window *w, const char *op, int peer, int channel) {
  if (w->block->signal_pad_size == 0)
    return mori__error(MORI_ENOTSUP, "%s: the signal pad is disabled (size 0)", op);
  if (peer < 0 || peer >= w->world_size)
    return mori__error(MORI_ERANGE, "%s: rank %d out of range [0, %d)", op, peer, w->world_size);
  if (channel < 0 || channel >= w->max_channels)
    return mori__error(MORI_ERANGE, "%s: channel %d out of range [0, %d)", op, channel,
                       w->max_channels);
  return window_failed(w, op);
}

static int signal_call(mori_window *w, enum mori__call what, int peer, int channel,
                       void *stream_arg, int timeout_ms) {
  const char *name = mori__call_names[what];
  struct plan p;
  memset(&p, 0, sizeof p);
  p.call.what = what;
  p.call.channel = channel;
  p.call.timeout_ms = timeout_ms;
  p.call.stream = (hipStream_t)stream_arg;
  enum engine engine = ENGINE_MEMOP;
  int captured = 0,
      rc = check_signal(w, name, what == MORI__CALL_BARRIER ? w->rank : peer, channel);
  enum shape shape = barrier_shape();
  if (rc == 0 && what == MORI__CALL_BARRIER && shape == SHAPE_INVALID)
    rc = mori__error(MORI_EINVAL, "barrier: MORI_SYMM_BARRIER=%s: expected flat or dissemination",
                     getenv("MORI_SYMM_BARRIER"));
  if (rc == 0) rc = mori__stream_capturing(p.call.stream, &captured);
  if (rc == 0) rc = choose(w, what, captured, shape, &engine);
  p.call.captured = captured;
  if (rc == 0) {
    if (what == MORI__CALL_PUT)
      rc = captured ? plan_captured_put(&p, w, peer, channel) : plan_put(&p, w, peer, channel);
    else if (what == MORI__CALL_WAIT)
      rc = captured ? plan_captured_wait(&p, w, peer, channel) : plan_wait(&p, w, peer, channel);
    else if (captured)
      rc = plan_captured_barrier(&p, w, channel);
    else
      rc = plan_barrier(&p, w, channel, shape);
  }
  if (rc == 0) {
    rc = engines[engine]->run(w, &p.call);
    settle(&p, rc);
  }
  free(p.call.ops);
  /* Where the waits ran in this call (the sim's sync mode), an expiry is
   * known now. */
  return rc != 0 ? rc : window_failed(w, name);
}

/* Each public call holds a temporary reference (mori__window_enter), so a
 * free on another thread defers the teardown until the call is done. */
int mori_window_put_signal(mori_window *w, int dst_rank, int channel, void *stream,
                           int timeout_ms) {
  MORI_GUARD(mori__window_enter(w, "put_signal"));
  return mori__window_leave(w, signal_call(w, MORI__CALL_PUT, dst_rank, channel, stream,
                                           timeout_ms));
}

int mori_window_wait_signal(mori_window *w, int src_rank, int channel, void *stream,
                            int timeout_ms) {
  MORI_GUARD(mori__window_enter(w, "wait_signal"));
  return mori__window_leave(w, signal_call(w, MORI__CALL_WAIT, src_rank, channel, stream,
                                           timeout_ms));
}

int mori_window_barrier(mori_window *w, int channel, void *stream, int timeout_ms) {
  MORI_GUARD(mori__window_enter(w, "barrier"));
  return mori__window_leave(w, signal_call(w, MORI__CALL_BARRIER, 0, channel, stream,
                                           timeout_ms));
}

/* ---- a window's signal state ---- */

/* At the rendezvous, once the requests said whether a peer shares the
 * device: the kernels readied if the setting lets any form use them.  A
 * failure costs only the engine: the window keeps memory operations until
 * a later call readies them (choose), and says so at WARN. */
static void ready_kernels(mori_window *w) {
  enum engine setting = engine_setting();
  if (setting == ENGINE_INVALID || (engine_of(w, setting, 0) != ENGINE_KERNEL &&
                                    engine_of(w, setting, 1) != ENGINE_KERNEL))
    return;
  int unsupported = 0;
  if (engines[ENGINE_KERNEL]->prepare(w, &unsupported) != 0 && !unsupported)
    MORI_LOG(MORI_LOG_WARN, w->rank, w->id,
             "the signal kernels are not ready (%s): memory operations until a call outside a "
             "capture readies them",
             mori_last_error());
}

int mori__signal_prepare(mori_window *w) {
  mori_block *b = w->block;
  if (b->signal_pad_size == 0 || w->signal_slot < 0) return 0;
  struct mori__signals *s = mori_calloc(1, sizeof *s);
  size_t cells = (size_t)w->max_channels * (size_t)w->world_size;
  uint64_t *barriers = mori_calloc((size_t)w->max_channels + 1, sizeof *barriers);
  uint64_t *puts = mori_calloc(cells + 1, sizeof *puts), *waits = mori_calloc(cells + 1, sizeof *waits);
  if (s == NULL || barriers == NULL || puts == NULL || waits == NULL) {
    free(s);
    free(barriers);
    free(puts);
    free(waits);
    return mori__nomem("rendezvous: signal state");
  }
  s->barriers = barriers;
  s->puts = puts;
  s->waits = waits;
  w->signals = s;
  MORI_GUARD(mori__ledger_add(&w->fsm, MORI_RES_SIGNAL_STATE, (uintptr_t)w, 0, 0));
  ready_kernels(w);
  /* A slot an earlier window used holds its phases and flags: zeroed here,
   * before the "mapped" store barrier lets any peer signal into it.  (The
   * slot bits are guarded as signal_slots_used is.) */
  uint32_t bit = 1u << w->signal_slot;
  if (!(b->signal_slots_dirty & bit)) return 0;
  hipStream_t svc = NULL;
  MORI_GUARD(mori__service_stream(b->device, &svc));
  MORI_GUARD(mori__block_zero(b, cell(w, w->rank, REGION_BARRIER, 0, 0),
                              MORI_WIRE_SIGNAL_REGIONS * b->signal_pad_size, svc));
  MORI_HIP("hipStreamSynchronize", mori_hipStreamSynchronize(svc));
  b->signal_slots_dirty &= ~bit;
  return 0;
}

/* torch's cells of rank `rank` in this rank's own pad (torch's pad is the
 * first signal_pad_size bytes: per channel, one 32-bit cell per rank),
 * read back, cleared and written again while nothing signals. */
static int clear_torch_cells(mori_window *w, int rank) {
  size_t n = w->block->signal_pad_size;
  uint32_t *pad = mori_malloc(n);
  if (pad == NULL) return mori__nomem("heal: %zu bytes of torch's signal pad", n);
  int rc = 0;
  hipError_t e = mori_hipMemcpy(pad, w->pad_ptrs[w->rank], n, hipMemcpyDeviceToHost);
  if (e == hipSuccess) {
    for (size_t c = (size_t)rank; c < n / 4; c += (size_t)w->world_size) pad[c] = 0;
    e = mori_hipMemcpy(w->pad_ptrs[w->rank], pad, n, hipMemcpyHostToDevice);
  }
  if (e != hipSuccess) rc = mori__hip_error("hipMemcpy (torch's signal pad)", e);
  free(pad);
  return rc;
}

int mori__signal_heal(mori_window *w, int rank) {
  struct mori__signals *s = w->signals;
  if (s == NULL) return 0;
  for (int e = 0; e < NENGINES; e++) MORI_GUARD(engines[e]->reset(w));
  /* every count from 0 and every cell of the window's slot 0, on every
   * rank, before the heal's barrier lets anyone signal again */
  size_t cells = (size_t)w->max_channels * (size_t)w->world_size;
  memset(s->barriers, 0, ((size_t)w->max_channels + 1) * sizeof *s->barriers);
  memset(s->puts, 0, (cells + 1) * sizeof *s->puts);
  memset(s->waits, 0, (cells + 1) * sizeof *s->waits);
  hipStream_t svc = NULL;
  MORI_GUARD(mori__service_stream(w->block->device, &svc));
  MORI_GUARD(mori__block_zero(w->block, cell(w, w->rank, REGION_BARRIER, 0, 0),
                              MORI_WIRE_SIGNAL_REGIONS * w->block->signal_pad_size, svc));
  MORI_HIP("hipStreamSynchronize", mori_hipStreamSynchronize(svc));
  MORI_GUARD(clear_torch_cells(w, rank));
  s->failure[0] = '\0';
  s->failed_rc = 0;
  __atomic_store_n(&s->failed, 0, __ATOMIC_RELEASE);
  return 0;
}

/* Replaces whatever failure the window had (a heal's failure is the one
 * to report): the message first, then the flag, as the watchdog does. */
void mori__signal_fail(const mori_window *w, int rc, const char *message) {
  struct mori__signals *s = w->signals;
  if (s == NULL) return;
  __atomic_store_n(&s->failed, 0, __ATOMIC_RELEASE);
  snprintf(s->failure, sizeof s->failure, "%s", message);
  s->failed_rc = rc;
  __atomic_store_n(&s->failed, 1, __ATOMIC_RELEASE);
}

/* The signal state's release also gives back what each engine keeps for
 * w (the watchdog's entries, which read w's state; the kernels' failure
 * words), in the engines' order; the first failure is the one reported. */
static int signal_release(const mori_ledger_entry *e) {
  mori_window *w = (mori_window *)e->value;
  int rc = 0;
  for (int k = 0; k < NENGINES; k++) {
    int rk = engines[k]->release(w);
    if (rc == 0) rc = rk;
  }
  free(w->signals->barriers);
  free(w->signals->puts);
  free(w->signals->waits);
  free(w->signals);
  w->signals = NULL;
  return rc;
}

/* The ledger's row for SIGNAL_STATE, which only this file records. */
__attribute__((constructor)) static void signal_state_release_row(void) {
  mori__ledger_set_release(MORI_RES_SIGNAL_STATE, signal_release, 0, 0);
}

/* What each engine keeps for the process (the watchdog's thread); the
 * devices' modules and events go after it, with their streams
 * (mori__device_release_all). */
void mori__signal_release_all(void) {
  for (int e = 0; e < NENGINES; e++) engines[e]->release_all();
}
