"""examples/all2all_inline.py - a one-shot all-to-all over MORI symmetric
memory with an inline GPU kernel: torch.utils.cpp_extension.load_inline
compiles it at first run (nvcc on CUDA; on ROCm torch hipifies the same
source for hipcc), so the script is the whole example, with no build step.

Every rank pushes chunk[peer] of its source into slot [rank] of every
peer's receive buffer, between two signal-pad barriers, in two addressing
forms over the same allocation:

  ptrs  peer base = buffer_ptrs_dev[peer]       (torch's pointer array:
                                                 one table load per block)
  flat  peer base = span + peer * stride        (mori.allocator.window_info:
                                                 no table load)

each run eagerly and captured in a CUDA graph.  The kernel moves 16 bytes
per lane (uint4) and slices each chunk over blocks_per_peer blocks, the
grid being blocks_per_peer * world_size sized from the SM/CU count.  Every
byte is checked; aggregate GB/s counts only the world * (world - 1) chunks
that leave a device, per iteration of the slowest rank.

    torchrun --standalone --nproc_per_node=2 examples/all2all_inline.py --chunk-kib 256
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

import mori.allocator
from placement import coll_device, init_group, place

THREADS = 512

# One source for CUDA and ROCm: nothing CUDA-only, so torch's hipify maps it
# whole (cudaStream_t, cudaGetLastError, ...; uint4 and <<<>>> are HIP's too).
KERNELS = r"""
#include <cstdint>

constexpr int kThreads = 512;

// One block's slice of a chunk: lane i of block `part` copies vectors
// part * blockDim + i, then every parts * blockDim after it.
__device__ __forceinline__ void copy_slice(uint4* __restrict__ dst,
                                           const uint4* __restrict__ src,
                                           long long vecs, int part, int parts) {
  for (long long i = (long long)part * blockDim.x + threadIdx.x; i < vecs;
       i += (long long)parts * blockDim.x)
    dst[i] = src[i];
}

// Pointer-array form: the destination base is loaded from the table.
__global__ void __launch_bounds__(kThreads)
push_ptrs_kernel(const uint4* __restrict__ src, void* const* __restrict__ peers,
                 long long offset, int rank, long long vecs, int blocks_per_peer) {
  const int peer = blockIdx.x / blocks_per_peer;
  char* base = static_cast<char*>(peers[peer]);  // the table load
  uint4* dst = reinterpret_cast<uint4*>(base + offset) + (long long)rank * vecs;
  copy_slice(dst, src + (long long)peer * vecs, vecs, blockIdx.x % blocks_per_peer,
             blocks_per_peer);
}

// Flat form: the destination base is arithmetic on values in registers.
__global__ void __launch_bounds__(kThreads)
push_flat_kernel(const uint4* __restrict__ src, char* span, long long stride,
                 long long offset, int rank, long long vecs, int blocks_per_peer) {
  const int peer = blockIdx.x / blocks_per_peer;
  uint4* dst = reinterpret_cast<uint4*>(span + (long long)peer * stride + offset) +
               (long long)rank * vecs;
  copy_slice(dst, src + (long long)peer * vecs, vecs, blockIdx.x % blocks_per_peer,
             blocks_per_peer);
}

static void check_args(const torch::Tensor& src, int64_t offset, int64_t chunk_bytes,
                       int64_t world) {
  TORCH_CHECK(src.is_cuda() && src.is_contiguous(), "src must be a contiguous GPU tensor");
  TORCH_CHECK(src.nbytes() == (size_t)(chunk_bytes * world), "src must hold world chunks");
  TORCH_CHECK(chunk_bytes % 16 == 0 && offset % 16 == 0 &&
                  reinterpret_cast<uintptr_t>(src.data_ptr()) % 16 == 0,
              "chunks, offsets and src must be 16-byte aligned for uint4");
}

static void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, what, ": ", cudaGetErrorString(err));
}

void push_ptrs(torch::Tensor src, int64_t peers, int64_t offset, int64_t rank,
               int64_t chunk_bytes, int64_t blocks_per_peer, int64_t world, int64_t stream) {
  check_args(src, offset, chunk_bytes, world);
  push_ptrs_kernel<<<(unsigned)(blocks_per_peer * world), kThreads, 0,
                     reinterpret_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint4*>(src.data_ptr()), reinterpret_cast<void* const*>(peers), offset,
      (int)rank, chunk_bytes / 16, (int)blocks_per_peer);
  check_launch("push_ptrs_kernel");
}

void push_flat(torch::Tensor src, int64_t span, int64_t stride, int64_t offset, int64_t rank,
               int64_t chunk_bytes, int64_t blocks_per_peer, int64_t world, int64_t stream) {
  check_args(src, offset, chunk_bytes, world);
  push_flat_kernel<<<(unsigned)(blocks_per_peer * world), kThreads, 0,
                     reinterpret_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint4*>(src.data_ptr()), reinterpret_cast<char*>(span), stride, offset,
      (int)rank, chunk_bytes / 16, (int)blocks_per_peer);
  check_launch("push_flat_kernel");
}
"""

DECLARATIONS = r"""
void push_ptrs(torch::Tensor src, int64_t peers, int64_t offset, int64_t rank,
               int64_t chunk_bytes, int64_t blocks_per_peer, int64_t world, int64_t stream);
void push_flat(torch::Tensor src, int64_t span, int64_t stride, int64_t offset, int64_t rank,
               int64_t chunk_bytes, int64_t blocks_per_peer, int64_t world, int64_t stream);
"""


def build():
    """The extension, compiled once per source into torch's extension cache
    (ranks started together wait on its lock while the first compiles)."""
    return load_inline(name="mori_all2all_inline", cpp_sources=DECLARATIONS,
                       cuda_sources=KERNELS, functions=["push_ptrs", "push_flat"],
                       extra_cuda_cflags=["-O3"])


def chunk_of(src: int, dst: int, elems: int, world: int, device) -> torch.Tensor:
    """What rank src sends rank dst: distinct for every (src, dst, index)."""
    start = (src * world + dst) * elems
    idx = torch.arange(elems, dtype=torch.int64, device=device) + start
    return idx.bitwise_and_(0x7FFFFFFF).to(torch.int32)


def agree(ok: bool, device) -> bool:
    """True on every rank only if it is true on every rank."""
    flag = torch.tensor([0 if ok else 1], dtype=torch.int32, device=coll_device(device))
    dist.all_reduce(flag)
    return int(flag.item()) == 0


def slowest(seconds: float, device) -> float:
    t = torch.tensor([seconds], dtype=torch.float64, device=coll_device(device))
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def gpu_seconds(fn, iters: int) -> float:
    """Seconds per call of fn on the current stream (CUDA events)."""
    fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    dist.barrier()
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / 1e3 / iters


def captured(fn, per_graph: int) -> torch.cuda.CUDAGraph:
    """fn captured per_graph times in one CUDA graph (warmed up off the
    default stream first, as capture wants)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    dist.barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(per_graph):
            fn()
    torch.cuda.synchronize()
    dist.barrier()
    return graph


def run_chunk(ext, chunk: int, rank: int, world: int, device, group: str, args) -> int:
    """Both forms, eager and graph, at one chunk size; returns failed checks."""
    elems = chunk // 4
    recv = symm_mem.empty(world * elems, dtype=torch.int32, device=device)
    hdl = symm_mem.rendezvous(recv, group)
    info = mori.allocator.window_info(hdl)
    src = torch.cat([chunk_of(rank, p, elems, world, device) for p in range(world)])
    want = torch.cat([chunk_of(q, rank, elems, world, device) for q in range(world)])
    cus = torch.cuda.get_device_properties(device).multi_processor_count
    vecs = chunk // 16
    blocks_per_peer = args.blocks_per_peer or max(1, min(-(-vecs // THREADS), 2 * cus // world))

    def stream() -> int:  # the capture stream while a graph is being captured
        return torch.cuda.current_stream().cuda_stream

    pushes = {
        "ptrs": lambda: ext.push_ptrs(src, hdl.buffer_ptrs_dev, info["offset"], rank, chunk,
                                      blocks_per_peer, world, stream()),
        "flat": lambda: ext.push_flat(src, info["span"], info["stride"], info["offset"], rank,
                                      chunk, blocks_per_peer, world, stream()),
    }
    failed = 0
    moved = world * (world - 1) * chunk
    for form in args.forms:
        push = pushes[form]

        def exchange(push=push):
            hdl.barrier(channel=0)  # every receive slot is free
            push()
            hdl.barrier(channel=0)  # every chunk has landed

        # (mode, what one call runs, exchanges per call, checked): the push
        # alone is timed only (checked, it would race the peers' clearing).
        runs = [("push only", push, 1, False), ("exchange", exchange, 1, True)]
        if args.graph:
            graph = captured(exchange, args.per_graph)
            runs.append(("graph", graph.replay, args.per_graph, True))
        for mode, fn, per, checked in runs:
            ok = True
            if checked:  # clear, all cleared, one call, all landed, read
                recv.fill_(-1)
                torch.cuda.synchronize()
                dist.barrier()
                fn()
                torch.cuda.synchronize()
                dist.barrier()
                ok = bool(torch.equal(recv, want))
                if not ok:
                    bad = int((recv != want).nonzero()[0].item())
                    print(f"rank {rank}: {form} {mode}: byte {bad % elems * 4} of the chunk from "
                          f"rank {bad // elems} is 0x{int(recv[bad]) & 0xFFFFFFFF:08x}, expected "
                          f"0x{int(want[bad]) & 0xFFFFFFFF:08x}", flush=True)
                ok = agree(ok, device)
                failed += not ok
            dt = slowest(gpu_seconds(fn, max(1, args.iters // per)) / per, device)
            rate = f"{moved / dt / 1e9:9.1f} GB/s aggregate" if moved else "   (1 rank: nothing moves)"
            verdict = ("check ok" if ok else "check FAILED") if checked else "(timing only)"
            if rank == 0:
                print(f"all2all_inline {form} {mode:9s} {chunk >> 10:6d} KiB/peer x {world} ranks "
                      f"({blocks_per_peer} blocks/peer): {dt * 1e6:9.2f} us/iter {rate}  {verdict}",
                      flush=True)
        if args.graph:
            del graph
    torch.cuda.synchronize()
    dist.barrier()  # no rank frees its buffer while a peer still writes into it
    del hdl, recv
    return failed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chunk-kib", default="256,4096",
                   help="bytes per peer in KiB, comma separated, each a multiple of 16 bytes "
                        "(default 256,4096)")
    p.add_argument("--forms", default="ptrs,flat", help="ptrs, flat or both (default)")
    p.add_argument("--no-graph", dest="graph", action="store_false",
                   help="skip the CUDA-graph variant")
    p.add_argument("--iters", type=int, default=50, help="timed iterations (default 50)")
    p.add_argument("--per-graph", type=int, default=10, help="exchanges per graph (default 10)")
    p.add_argument("--blocks-per-peer", type=int, default=0,
                   help="override the grid heuristic (default: from the SM/CU count)")
    args = p.parse_args()
    args.forms = [f for f in args.forms.split(",") if f]
    chunks = [int(k) * 1024 for k in args.chunk_kib.split(",") if k]
    if not chunks or any(c <= 0 for c in chunks) or set(args.forms) - {"ptrs", "flat"}:
        p.error("--chunk-kib needs positive sizes; --forms takes ptrs and flat")

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device, backend = place(rank, world)
    if world * world * max(chunks) // 4 >= 1 << 31:
        p.error("chunks too large for distinct 31-bit check values at this world size")
    ext = build()  # before the process group: a first compile takes a while
    init_group(device, backend)
    symm_mem.set_backend("MORI")
    group = dist.group.WORLD.group_name
    if rank == 0:
        print(f"all2all_inline: {world} ranks, {torch.cuda.get_device_name(device)}, shim "
              f"{mori.allocator.shim_backend()}, "
              f"{'hip ' + torch.version.hip if torch.version.hip else 'cuda ' + str(torch.version.cuda)}",
              flush=True)
    failed = 0
    try:
        for chunk in chunks:
            failed += run_chunk(ext, chunk, rank, world, device, group, args)
    finally:
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        print(f"all2all_inline: {'PASS' if failed == 0 else 'FAIL'} "
              f"({failed} failed checks)", flush=True)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
