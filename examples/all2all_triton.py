"""examples/all2all_triton.py - a one-shot all-to-all over MORI symmetric
memory with Triton kernels (compiled at first run; the same source runs on
CUDA and on ROCm), with no build step.  The script is the kernels and their
launch; examples/all2all_harness.py, beside it, is the rest (options,
placement, checks, timing, and the copy loop both kernels call), which
all2all_inline.py shares.

Every rank pushes chunk[peer] of its source into slot [rank] of every
peer's receive buffer, between two signal-pad barriers, in two addressing
forms over the same allocation:

  ptrs  peer base = tl.load(buffer_ptrs_dev + peer)  (torch's pointer array,
                                                      the idiom of torch's own
                                                      symmetric-memory kernels)
  flat  peer base = span + peer * stride             (mori.allocator.window_info:
                                                      no table load)

each run eagerly and captured in a CUDA graph (which also removes Triton's
launcher cost, the floor of small chunks).  Each chunk is sliced over
blocks_per_peer programs, the grid being blocks_per_peer * world_size sized
from the SM/CU count.  Every byte is checked; aggregate GB/s counts only the
world * (world - 1) chunks that leave a device, per iteration of the
slowest rank.

    torchrun --standalone --nproc_per_node=2 examples/all2all_triton.py --chunk-kib 256
"""

from __future__ import annotations

import triton
import triton.language as tl

import mori.allocator  # noqa: F401  registers the "MORI" backend
from all2all_harness import copy_slice, grid_blocks, main

BLOCK = 2048  # int32 per program step: 16 bytes per lane over 4 warps
NUM_WARPS = 4


# Ints Triton would specialise (== 1, multiples of 16) would recompile per
# rank and size: none of these is a constant of the kernel.  span and
# stride are bytes; offset and elems count int32 elements.
@triton.jit(do_not_specialize=["offset", "rank", "elems", "blocks_per_peer"])
def push_ptrs(src, peer_ptrs, offset, rank, elems, blocks_per_peer, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    peer = pid // blocks_per_peer
    peers = peer_ptrs.to(tl.pointer_type(tl.uint64))
    dst = tl.load(peers + peer).to(tl.pointer_type(tl.int32))  # the table load
    dst += offset + rank.to(tl.int64) * elems
    copy_slice(dst, src + peer.to(tl.int64) * elems, elems, pid % blocks_per_peer,
               blocks_per_peer, BLOCK)


@triton.jit(do_not_specialize=["stride", "offset", "rank", "elems", "blocks_per_peer"])
def push_flat(src, span, stride, offset, rank, elems, blocks_per_peer, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    peer = pid // blocks_per_peer
    dst = (span + peer.to(tl.int64) * stride).to(tl.pointer_type(tl.int32))  # no load
    dst += offset + rank.to(tl.int64) * elems
    copy_slice(dst, src + peer.to(tl.int64) * elems, elems, pid % blocks_per_peer,
               blocks_per_peer, BLOCK)


def pushes(_, c, args):
    """(blocks per peer, {form: one push of every chunk}) for chunk c."""
    blocks_per_peer = args.blocks_per_peer or grid_blocks(c.elems, BLOCK, c.device, c.world)
    grid = (blocks_per_peer * c.world,)
    offset = c.info["offset"] // 4  # bytes to int32 elements
    return blocks_per_peer, {
        "ptrs": lambda: push_ptrs[grid](c.src, c.hdl.buffer_ptrs_dev, offset, c.rank, c.elems,
                                        blocks_per_peer, BLOCK=BLOCK, num_warps=NUM_WARPS),
        "flat": lambda: push_flat[grid](c.src, c.info["span"], c.info["stride"], offset, c.rank,
                                        c.elems, blocks_per_peer, BLOCK=BLOCK, num_warps=NUM_WARPS),
    }


if __name__ == "__main__":
    main("all2all_triton", __doc__, "bytes per peer in KiB, comma separated (default 256,4096)",
         lambda: f"triton {triton.__version__}", pushes)
