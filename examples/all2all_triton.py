"""examples/all2all_triton.py - a one-shot all-to-all over MORI symmetric
memory with Triton kernels (compiled at first run; the same source runs on
CUDA and on ROCm), so the script is the whole example, with no build step.

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

import argparse
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl

import mori.allocator
from placement import coll_device, init

BLOCK = 2048  # int32 per program step: 16 bytes per lane over 4 warps
NUM_WARPS = 4


@triton.jit
def _copy_slice(dst, src, elems, part, parts, BLOCK: tl.constexpr):
    """Program `part` of `parts` copies its contiguous share of one chunk."""
    per_part = tl.cdiv(elems, parts)
    start = part * per_part
    end = tl.minimum(start + per_part, elems)
    for off in range(start, end, BLOCK):
        idx = off + tl.arange(0, BLOCK)
        mask = idx < end
        tl.store(dst + idx, tl.load(src + idx, mask=mask), mask=mask)


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
    _copy_slice(dst, src + peer.to(tl.int64) * elems, elems, pid % blocks_per_peer,
                blocks_per_peer, BLOCK)


@triton.jit(do_not_specialize=["stride", "offset", "rank", "elems", "blocks_per_peer"])
def push_flat(src, span, stride, offset, rank, elems, blocks_per_peer, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    peer = pid // blocks_per_peer
    dst = (span + peer.to(tl.int64) * stride).to(tl.pointer_type(tl.int32))  # no load
    dst += offset + rank.to(tl.int64) * elems
    _copy_slice(dst, src + peer.to(tl.int64) * elems, elems, pid % blocks_per_peer,
                blocks_per_peer, BLOCK)


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
    """fn captured per_graph times in one CUDA graph (warmed up, and its
    kernels compiled, off the default stream first, as capture wants)."""
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


def run_chunk(chunk: int, rank: int, world: int, device, group: str, args) -> int:
    """Both forms, eager and graph, at one chunk size; returns failed checks."""
    elems = chunk // 4
    recv = symm_mem.empty(world * elems, dtype=torch.int32, device=device)
    hdl = symm_mem.rendezvous(recv, group)
    info = mori.allocator.window_info(hdl)
    src = torch.cat([chunk_of(rank, p, elems, world, device) for p in range(world)])
    want = torch.cat([chunk_of(q, rank, elems, world, device) for q in range(world)])
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    blocks_per_peer = args.blocks_per_peer or max(1, min(-(-elems // BLOCK), 2 * sms // world))
    grid = (blocks_per_peer * world,)
    offset = info["offset"] // 4  # bytes to int32 elements
    pushes = {
        "ptrs": lambda: push_ptrs[grid](src, hdl.buffer_ptrs_dev, offset, rank, elems,
                                        blocks_per_peer, BLOCK=BLOCK, num_warps=NUM_WARPS),
        "flat": lambda: push_flat[grid](src, info["span"], info["stride"], offset, rank, elems,
                                        blocks_per_peer, BLOCK=BLOCK, num_warps=NUM_WARPS),
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
                print(f"all2all_triton {form} {mode:9s} {chunk >> 10:6d} KiB/peer x {world} ranks "
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
                   help="bytes per peer in KiB, comma separated (default 256,4096)")
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
    device = init(rank, world)
    if world * world * max(chunks) // 4 >= 1 << 31:
        p.error("chunks too large for distinct 31-bit check values at this world size")
    symm_mem.set_backend("MORI")
    group = dist.group.WORLD.group_name
    if rank == 0:
        print(f"all2all_triton: {world} ranks, {torch.cuda.get_device_name(device)}, shim "
              f"{mori.allocator.shim_backend()}, triton {triton.__version__}", flush=True)
    failed = 0
    try:
        for chunk in chunks:
            failed += run_chunk(chunk, rank, world, device, group, args)
    finally:
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        print(f"all2all_triton: {'PASS' if failed == 0 else 'FAIL'} "
              f"({failed} failed checks)", flush=True)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
