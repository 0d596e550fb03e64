"""examples/all2all_inline.py - a one-shot all-to-all over MORI symmetric
memory with an inline GPU kernel: torch.utils.cpp_extension.load_inline
compiles it at first run (nvcc on CUDA; on ROCm torch hipifies the same
source for hipcc), with no build step.  The script is the kernel and its
launch; examples/all2all_harness.py, beside it, is the rest (options,
placement, checks, timing), which all2all_triton.py shares.

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

import torch
from torch.utils.cpp_extension import load_inline

import mori.allocator  # noqa: F401  registers the "MORI" backend
from all2all_harness import grid_blocks, main

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


def pushes(ext, c, args):
    """(blocks per peer, {form: one push of every chunk}) for chunk c."""
    blocks_per_peer = args.blocks_per_peer or grid_blocks(c.chunk // 16, THREADS, c.device, c.world)

    def stream() -> int:  # the capture stream while a graph is being captured
        return torch.cuda.current_stream().cuda_stream

    return blocks_per_peer, {
        "ptrs": lambda: ext.push_ptrs(c.src, c.hdl.buffer_ptrs_dev, c.info["offset"], c.rank,
                                      c.chunk, blocks_per_peer, c.world, stream()),
        "flat": lambda: ext.push_flat(c.src, c.info["span"], c.info["stride"], c.info["offset"],
                                      c.rank, c.chunk, blocks_per_peer, c.world, stream()),
    }


def runtime() -> str:
    return "hip " + torch.version.hip if torch.version.hip else "cuda " + str(torch.version.cuda)


if __name__ == "__main__":
    main("all2all_inline", __doc__,
         "bytes per peer in KiB, comma separated, each a multiple of 16 bytes (default 256,4096)",
         runtime, pushes, build)
