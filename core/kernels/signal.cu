/*
 * signal.cu - the signal kernels: a window's barrier, put_signal and
 * wait_signal as one small kernel each, doing what the form's stream
 * memory operations do (core/src/signal.c: same cells, same values, same
 * order), for where one kernel node costs a graph less than several memop
 * nodes.  Every wait is bounded by timeout_ns from the kernel's start (0:
 * no bound, torch's meaning); past it the kernel writes the window's
 * failure words and gives up, never traps, so the context survives and
 * the window's next call reports the ranks that never answered.
 *
 * One source for both runtimes, with no device compiler at build time:
 * scripts/gen_signal_ptx.sh runs nvcc on it for the PTX the library
 * embeds (core/kernels/signal_ptx.h, loaded through the CUDA driver), and
 * on ROCm hiprtc compiles this text (embedded at build time) at the first
 * launch.  The interface is mori/signal_kernel.h, which the core and the
 * sim's model of these kernels read too.
 */
#include "mori/signal_kernel.h"

#if defined(__HIPCC_RTC__) || defined(__HIP__)
static __device__ unsigned load_acquire(const unsigned *p) {
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
}
static __device__ void store_release(unsigned *p, unsigned v) {
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}
/* s_memrealtime (wall_clock64) counts at 100 MHz on the gfx9 parts
 * (MI200, MI300, MI350): 10 ns a tick. */
static __device__ unsigned long long now_ns() { return wall_clock64() * 10ull; }
#else
static __device__ unsigned load_acquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
static __device__ void store_release(unsigned *p, unsigned v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
}
/* %globaltimer: nanoseconds (it ticks in steps of about a microsecond). */
static __device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#endif

static_assert(sizeof(struct mori_signal_args) == 72, "mori_signal_args: one layout everywhere");

typedef struct mori_signal_args args_t;

static __device__ unsigned *cell(const args_t &a, int owner, unsigned long long area, int index) {
  const char *base = ((char *const *)a.pads)[owner];
  return (unsigned *)(base + area) + (long long)a.channel * a.world + index;
}

/* Waits until (*c & value) != 0 (and) or *c == value; 0 once past the bound. */
static __device__ int wait_for(const unsigned *c, unsigned value, int and_mask,
                               unsigned long long t0, unsigned long long timeout) {
  for (;;) {
    unsigned v = load_acquire(c);
    if (and_mask ? (v & value) != 0 : v == value) return 1;
    if (timeout != 0 && now_ns() - t0 >= timeout) return 0;
  }
}

/* The failure words: who, then for how long, then what (status[0] last,
 * so that a reader who sees it sees the rest).  The first failure is the
 * one kept: words another call's code already holds are left alone (a
 * kernel queued behind one that gave up, which gives up in turn, would
 * name itself in place of the cause). */
static __device__ void timed_out(const args_t &a, int peer, unsigned what) {
  unsigned *status = (unsigned *)a.status;
  if (status == 0) return;
  unsigned first = load_acquire(status);
  if (first != 0 && first != a.code) return;
  store_release(status + 2 + peer, what);
  store_release(status + 1, a.timeout_ms);
  store_release(status, a.code);
}

/* The stream's earlier work is visible before a signal leaves (a memop
 * write's default memory barrier). */
static __device__ void publish() { __threadfence_system(); }

extern "C" __global__ void mori_signal_barrier(const args_t a) {
  unsigned long long t0 = now_ns();
  if (1 + (int)threadIdx.x < a.world) publish();
  for (int i = 1 + threadIdx.x; i < a.world; i += blockDim.x)
    store_release(cell(a, (a.rank + i) % a.world, a.signal_area, a.rank), a.write_value);
  for (int i = 1 + threadIdx.x; i < a.world; i += blockDim.x) {
    int src = (a.rank + a.world - i) % a.world;
    if (!wait_for(cell(a, a.rank, a.signal_area, src), a.wait_value, 1, t0, a.timeout_ns))
      timed_out(a, src, MORI_SIGNAL_NEVER_SIGNALLED);
  }
}

extern "C" __global__ void mori_signal_put(const args_t a) {
  if (threadIdx.x != 0) return;
  unsigned long long t0 = now_ns();
  if (a.wait_value != 0 &&
      !wait_for(cell(a, a.rank, a.ack_area, a.peer), a.wait_value, 1, t0, a.timeout_ns)) {
    timed_out(a, a.peer, MORI_SIGNAL_NEVER_CONSUMED);
    return;
  }
  publish();
  store_release(cell(a, a.peer, a.signal_area, a.rank), a.write_value);
}

extern "C" __global__ void mori_signal_wait(const args_t a) {
  if (threadIdx.x != 0) return;
  unsigned long long t0 = now_ns();
  if (!wait_for(cell(a, a.rank, a.signal_area, a.peer), a.wait_value, 1, t0, a.timeout_ns)) {
    timed_out(a, a.peer, MORI_SIGNAL_NEVER_SIGNALLED);
    return;
  }
  store_release(cell(a, a.peer, a.ack_area, a.rank), a.write_value);
}

/* The replay-safe forms: every cell a put and its wait touch is 0 again
 * after them, so a graph may replay them any number of times.  Each is one
 * handshake: wait until the own cell for the peer holds `from`, set it to
 * `to`, and write `to` into the peer's cell for this rank.  A put flips its
 * ACK 0 -> 1 and raises the peer's SIGNAL; a wait flips its SIGNAL 1 -> 0
 * and lowers the sender's ACK, the reset preceding (release) the
 * acknowledgement that lets the sender signal again. */
static __device__ void handshake(const args_t &a, int peer, unsigned long long own_area,
                                 unsigned long long peer_area, unsigned from, unsigned to,
                                 unsigned what, unsigned long long t0) {
  unsigned *own = cell(a, a.rank, own_area, peer);
  if (!wait_for(own, from, 0, t0, a.timeout_ns)) {
    timed_out(a, peer, what);
    return;
  }
  store_release(own, to);
  publish();
  store_release(cell(a, peer, peer_area, a.rank), to);
}

static __device__ void captured_put(const args_t &a, int dst, unsigned long long t0) {
  handshake(a, dst, a.ack_area, a.signal_area, 0, 1, MORI_SIGNAL_NEVER_CONSUMED, t0);
}

static __device__ void captured_wait(const args_t &a, int src, unsigned long long t0) {
  handshake(a, src, a.signal_area, a.ack_area, 1, 0, MORI_SIGNAL_NEVER_SIGNALLED, t0);
}

extern "C" __global__ void mori_signal_captured_put(const args_t a) {
  if (threadIdx.x == 0) captured_put(a, a.peer, now_ns());
}

extern "C" __global__ void mori_signal_captured_wait(const args_t a) {
  if (threadIdx.x == 0) captured_wait(a, a.peer, now_ns());
}

extern "C" __global__ void mori_signal_captured_barrier(const args_t a) {
  unsigned long long t0 = now_ns();
  for (int i = 1 + threadIdx.x; i < a.world; i += blockDim.x)
    captured_put(a, (a.rank + i) % a.world, t0);
  for (int i = 1 + threadIdx.x; i < a.world; i += blockDim.x)
    captured_wait(a, (a.rank + a.world - i) % a.world, t0);
}
