"""examples/all2all_harness.py - what the one-shot all-to-all scripts share:
examples/all2all_inline.py and examples/all2all_triton.py bring only their
kernels (and how to launch them) and leave the rest here: the command line,
the placement and process group, the checked and timed runs of every
addressing form eagerly and as a CUDA graph, and the verdict.
bench/all2all.py takes the timing, the grid heuristic and the Triton copy
loop.  Not a script: imported from the folder of the script that runs
(torchrun puts it on the import path; bench/all2all.py adds it).
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist

from placement import coll_device, init_group, place

try:
    import triton
    import triton.language as tl
except ImportError:  # the inline example needs none; bench/all2all.py runs without it
    triton = None


if triton is not None:

    @triton.jit
    def copy_slice(dst, src, elems, part, parts, BLOCK: tl.constexpr):
        """Program `part` of `parts` copies its contiguous share of one chunk."""
        per_part = tl.cdiv(elems, parts)
        start = part * per_part
        end = tl.minimum(start + per_part, elems)
        for off in range(start, end, BLOCK):
            idx = off + tl.arange(0, BLOCK)
            mask = idx < end
            tl.store(dst + idx, tl.load(src + idx, mask=mask), mask=mask)


def grid_blocks(units: int, per_block: int, device, world: int) -> int:
    """Blocks per peer: enough for units at per_block each, at most two
    waves of the device's SMs/CUs over all peers, at least one."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(-(-units // per_block), 2 * sms // world))


def host_barrier(group=None) -> None:
    """Every rank's device work issued so far is complete on every rank."""
    torch.cuda.synchronize()
    dist.barrier(group=group)


def gpu_seconds(fn, iters: int, group=None, warmup: int = 1) -> float:
    """Seconds per call of fn on the current stream (CUDA events), all
    ranks starting together."""
    for _ in range(warmup):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    host_barrier(group)
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / 1e3 / iters


def captured(fn, per_graph: int) -> torch.cuda.CUDAGraph:
    """fn captured per_graph times in one CUDA graph (warmed up, and a JIT's
    kernels compiled, off the default stream first, as capture wants)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    host_barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(per_graph):
            fn()
    host_barrier()
    return graph


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


class Chunk:
    """One chunk size's buffers, what a script's pushes write from and to.

    chunk: bytes per peer; elems: int32 per peer; recv: the symmetric
    receive buffer (world chunks); hdl: its handle; info:
    mori.allocator.window_info(hdl); src: this rank's world chunks."""

    def __init__(self, chunk: int, rank: int, world: int, device, group: str):
        import torch.distributed._symmetric_memory as symm_mem

        import mori.allocator

        self.chunk, self.rank, self.world, self.device = chunk, rank, world, device
        self.elems = elems = chunk // 4
        self.recv = symm_mem.empty(world * elems, dtype=torch.int32, device=device)
        self.hdl = symm_mem.rendezvous(self.recv, group)
        self.info = mori.allocator.window_info(self.hdl)
        self.src = torch.cat([chunk_of(rank, p, elems, world, device) for p in range(world)])
        self.want = torch.cat([chunk_of(q, rank, elems, world, device) for q in range(world)])

    def check(self, fn, name: str) -> bool:
        """Clear, all cleared, one call of fn, all landed, read; every rank's
        verdict."""
        recv, want, elems = self.recv, self.want, self.elems
        recv.fill_(-1)
        host_barrier()
        fn()
        host_barrier()
        ok = bool(torch.equal(recv, want))
        if not ok:
            bad = int((recv != want).nonzero()[0].item())
            print(f"rank {self.rank}: {name}: byte {bad % elems * 4} of the chunk from "
                  f"rank {bad // elems} is 0x{int(recv[bad]) & 0xFFFFFFFF:08x}, expected "
                  f"0x{int(want[bad]) & 0xFFFFFFFF:08x}", flush=True)
        return agree(ok, self.device)


def run_chunk(name: str, pushes, kernels, c: Chunk, args) -> int:
    """Every form of pushes, eager and graph, at one chunk size; returns
    failed checks.  pushes(kernels, c, args) gives (blocks_per_peer,
    {form: one push of every chunk})."""
    blocks_per_peer, push_of = pushes(kernels, c, args)
    rank, world, chunk, device, hdl = c.rank, c.world, c.chunk, c.device, c.hdl
    failed = 0
    moved = world * (world - 1) * chunk
    for form in args.forms:
        push = push_of[form]

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
            if checked:
                ok = c.check(fn, f"{form} {mode}")
                failed += not ok
            dt = slowest(gpu_seconds(fn, max(1, args.iters // per)) / per, device)
            rate = f"{moved / dt / 1e9:9.1f} GB/s aggregate" if moved else "   (1 rank: nothing moves)"
            verdict = ("check ok" if ok else "check FAILED") if checked else "(timing only)"
            if rank == 0:
                print(f"{name} {form} {mode:9s} {chunk >> 10:6d} KiB/peer x {world} ranks "
                      f"({blocks_per_peer} blocks/peer): {dt * 1e6:9.2f} us/iter {rate}  {verdict}",
                      flush=True)
        if args.graph:
            del graph
    host_barrier()  # no rank frees its buffer while a peer still writes into it
    return failed


def parse_args(doc: str, chunk_help: str):
    """(parser, args, chunk sizes in bytes): the options both scripts take."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--chunk-kib", default="256,4096", help=chunk_help)
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
    return p, args, chunks


def main(name: str, doc: str, chunk_help: str, detail, pushes, build=None) -> None:
    """A script's whole run under torchrun: name prefixes its lines,
    detail() ends its first line, build() (before the process group: a
    first compile takes a while) makes the kernels pushes launches."""
    p, args, chunks = parse_args(doc, chunk_help)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device, backend = place(rank, world)
    if world * world * max(chunks) // 4 >= 1 << 31:
        p.error("chunks too large for distinct 31-bit check values at this world size")
    kernels = build() if build else None
    init_group(device, backend)
    import torch.distributed._symmetric_memory as symm_mem

    import mori.allocator

    symm_mem.set_backend("MORI")
    group = dist.group.WORLD.group_name
    if rank == 0:
        print(f"{name}: {world} ranks, {torch.cuda.get_device_name(device)}, shim "
              f"{mori.allocator.shim_backend()}, {detail()}", flush=True)
    failed = 0
    try:
        for chunk in chunks:
            c = Chunk(chunk, rank, world, device, group)
            failed += run_chunk(name, pushes, kernels, c, args)
            del c
    finally:
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        print(f"{name}: {'PASS' if failed == 0 else 'FAIL'} "
              f"({failed} failed checks)", flush=True)
    raise SystemExit(1 if failed else 0)
