/*
 * bench_kernels.cu - what mori-gpu-bench times beside the library's own
 * signal kernels: a barrier, a put and a wait of torch's shape, as torch's
 * built-in backend describes its kernels (one block; thread t signals and
 * then awaits peer t; a put is a compare-and-swap 0 -> 1 on the peer's cell
 * pads[peer] + world * channel + rank, a wait a compare-and-swap 1 -> 0 on
 * its own cell for the peer), written here from that description.  They
 * are the shape, not torch's kernels: torch's own are measured by
 * bench/compare.py.  Unlike torch's, a wait past its bound writes the
 * failure words and ends instead of trapping, so that a bench on a shared
 * GPU (whose kernels wait for each other's time slices) always ends.
 *
 * They take the library's argument (mori/signal_kernel.h): pads, status,
 * timeout_ns, world, rank, peer, channel, and signal_area as the offset of
 * the cells from each pad base.  PTX: scripts/gen_signal_ptx.sh.
 */
#include "mori/signal_kernel.h"

typedef struct mori_signal_args args_t;

static __device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

static __device__ unsigned *cell(const args_t &a, int owner, int index) {
  const char *base = ((char *const *)a.pads)[owner];
  return (unsigned *)(base + a.signal_area) + (long long)a.channel * a.world + index;
}

static __device__ void timed_out(const args_t &a, int peer, unsigned what) {
  volatile unsigned *status = (volatile unsigned *)a.status;
  if (status == 0) return;
  status[2 + peer] = what;
  status[1] = a.timeout_ms;
  __threadfence_system();
  status[0] = a.code;
}

/* CAS from -> to on c until it takes; 0 once past the bound. */
static __device__ int cas_until(unsigned *c, unsigned from, unsigned to, unsigned long long t0,
                                unsigned long long timeout) {
  while (atomicCAS_system(c, from, to) != from)
    if (timeout != 0 && now_ns() - t0 >= timeout) return 0;
  return 1;
}

static __device__ void put(const args_t &a, int dst, unsigned long long t0) {
  __threadfence_system();
  if (!cas_until(cell(a, dst, a.rank), 0, 1, t0, a.timeout_ns))
    timed_out(a, dst, MORI_SIGNAL_NEVER_CONSUMED);
}

static __device__ void wait(const args_t &a, int src, unsigned long long t0) {
  if (!cas_until(cell(a, a.rank, src), 1, 0, t0, a.timeout_ns))
    timed_out(a, src, MORI_SIGNAL_NEVER_SIGNALLED);
  __threadfence_system();
}

extern "C" __global__ void torch_shape_barrier(const args_t a) {
  unsigned long long t0 = now_ns();
  int t = threadIdx.x;
  if (t >= a.world || t == a.rank) return;
  put(a, t, t0);
  wait(a, t, t0);
}

extern "C" __global__ void torch_shape_put(const args_t a) {
  if (threadIdx.x == 0) put(a, a.peer, now_ns());
}

extern "C" __global__ void torch_shape_wait(const args_t a) {
  if (threadIdx.x == 0) wait(a, a.peer, now_ns());
}
