"""bench/all2all.py - one-shot all-to-all through MORI's pointer array.

Every rank pushes chunk[peer] of its source into slot [rank] of every peer's
symmetric receive buffer with a Triton kernel that loads the peer's base
from buffer_ptrs_dev (the idiom torch's own symmetric-memory kernels use),
between two signal-pad barriers.  For reference the same exchange runs as
peer-tensor copy_ calls (the copy-engine path) and as NCCL's
all_to_all_single.  Each path is checked before it is timed; timings are
only printed.

    torchrun --standalone --nproc_per_node=2 bench/all2all.py
    python bench/all2all.py          # spawns min(2, GPUs) ranks itself

Aggregate GB/s counts the bytes that leave a device: world * (world - 1)
chunks per iteration (with one rank nothing leaves, so no rate is shown).

Checks are race-free: a receive buffer is cleared, every rank is past the
clearing before any rank writes, and it is read only after every rank's
device has finished writing (device synchronize, then a host barrier over
gloo).  Every rank learns every rank's verdict (an all_gather over gloo)
before anything else, so after a failed check all ranks report and exit
together; any other error ends its rank at once (os._exit: no barrier, no
process-group teardown that could wait on a peer) and the launcher
(torchrun or spawn) ends the rest, instead of leaving them in a collective
that never completes.

bench/compare.py imports this module for the exchange and its timing.  The
timing, the grid heuristic, the Triton copy loop and the placement are the
examples' (examples/all2all_harness.py, examples/placement.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # however it was started
sys.path.insert(1, os.path.join(os.path.dirname(HERE), "examples"))
from all2all_harness import gpu_seconds, grid_blocks, host_barrier  # noqa: E402
from placement import place  # noqa: E402
from sizes import parse_size  # noqa: E402

try:
    import triton
    import triton.language as tl
except ImportError:  # the copy_ and NCCL paths still run
    triton = None

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

BLOCK = 2048  # int32 per loop step: 16 bytes per lane over 4 warps


if triton is not None:
    from all2all_harness import copy_slice

    # Triton would specialise an int argument that happens to equal 1 or be
    # a multiple of 16 into a constant, recompiling per rank and size.
    @triton.jit(do_not_specialize=["rank", "dst_offset", "chunk_elems", "blocks_per_peer"])
    def push_all2all(src, peer_ptrs, rank, dst_offset, chunk_elems, blocks_per_peer,
                     BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        peer = pid // blocks_per_peer
        peers = peer_ptrs.to(tl.pointer_type(tl.uint64))
        dst = tl.load(peers + peer).to(tl.pointer_type(tl.int32))  # the table load
        dst += dst_offset + rank.to(tl.int64) * chunk_elems
        copy_slice(dst, src + peer.to(tl.int64) * chunk_elems, chunk_elems,
                   pid % blocks_per_peer, blocks_per_peer, BLOCK)


class CheckFailed(Exception):
    """Every rank agreed that some rank's check failed."""


def gpu_time(fn, iters: int, cpu_group, warmup: int = 3) -> float:
    """Seconds per iteration on this rank's stream (CUDA events), all ranks
    starting together (bench/compare.py times with it too)."""
    return gpu_seconds(fn, iters, cpu_group, warmup)


def expected_recv(rank: int, world: int, chunk: int, device) -> torch.Tensor:
    # rank r's source element k is k + r * 1_000_000; my slot r holds r's chunk[rank]
    idx = torch.arange(chunk, dtype=torch.int32, device=device) + rank * chunk
    return torch.cat([idx + r * 1_000_000 for r in range(world)])


class Exchange:
    """One size's buffers and every way of running the all-to-all over them.

    paths maps a name to (fn, out): out is the tensor the path fills, None
    for the barriers alone.  Names: push_barriers (the real operation: the
    push between two barriers), push_only, copy_engine, nccl, barriers."""

    def __init__(self, size: int, rank: int, world: int, device, group: str,
                 nccl: bool = True):
        import torch.distributed._symmetric_memory as symm_mem

        self.size, self.rank, self.world = size, rank, world
        self.chunk = chunk = size // 4
        self.recv = symm_mem.empty(world * chunk, dtype=torch.int32, device=device)
        self.hdl = symm_mem.rendezvous(self.recv, group)
        self.src = (torch.arange(world * chunk, dtype=torch.int32, device=device)
                    + rank * 1_000_000)
        self.want = expected_recv(rank, world, chunk, device)
        self.blocks_per_peer = grid_blocks(chunk, BLOCK, device, world)
        self.nccl_out = torch.empty_like(self.src)
        self.paths = {}
        if triton is not None:
            self.paths["push_barriers"] = (self.push_barriers, self.recv)
            self.paths["push_only"] = (self.push_only, self.recv)
        self.paths["copy_engine"] = (self.copy_engine, self.recv)
        if nccl:
            self.paths["nccl"] = (self.nccl, self.nccl_out)
        self.paths["barriers"] = (self.barriers, None)

    @property
    def moved(self) -> int:
        """Bytes that leave a device per iteration, all ranks together."""
        return self.world * (self.world - 1) * self.size

    def push_only(self) -> None:
        grid = (self.world * self.blocks_per_peer,)
        push_all2all[grid](self.src, self.hdl.buffer_ptrs_dev, self.rank, self.hdl.offset // 4,
                           self.chunk, self.blocks_per_peer, BLOCK=BLOCK, num_warps=4)

    def push_barriers(self) -> None:
        self.hdl.barrier(channel=0)  # every receive slot is free
        self.push_only()
        self.hdl.barrier(channel=0)  # every push has landed

    def barriers(self) -> None:
        self.hdl.barrier(channel=0)
        self.hdl.barrier(channel=0)

    def copy_engine(self) -> None:
        hdl, chunk = self.hdl, self.chunk
        hdl.barrier(channel=0)
        for peer in range(self.world):
            slot = hdl.get_buffer(peer, (chunk,), torch.int32,
                                  storage_offset=hdl.offset // 4 + self.rank * chunk)
            slot.copy_(self.src[peer * chunk:(peer + 1) * chunk])
        hdl.barrier(channel=0)

    def nccl(self) -> None:
        dist.all_to_all_single(self.nccl_out, self.src)

    def check(self, name: str, cpu_group) -> bool:
        """Runs path name once and compares what this rank received."""
        fn, out = self.paths[name]
        host_barrier(cpu_group)  # nobody still writes into out (an earlier timed loop)
        out.fill_(-1)
        host_barrier(cpu_group)  # every out is cleared before any rank writes
        fn()
        host_barrier(cpu_group)  # every rank's writes have landed
        return bool(torch.equal(out, self.want))


def bench_size(size: int, rank: int, world: int, device, group: str, cpu_group, args) -> None:
    ex = Exchange(size, rank, world, device, group, nccl=not args.no_nccl)
    if args.inject == ("raise", rank):
        raise RuntimeError(f"rank {rank}: injected error (--inject raise:{rank})")
    if args.inject == ("check", rank):
        ex.want[0] += 1  # this rank's checks see wrong data
    for name, (fn, out) in ex.paths.items():
        ok = True
        if out is not None:
            for _ in range(args.check_repeats):
                ok = ex.check(name, cpu_group) and ok
        verdicts = [None] * world
        dist.all_gather_object(verdicts, ok, group=cpu_group)
        bad = [r for r, v in enumerate(verdicts) if not v]
        dt = gpu_time(fn, args.iters, cpu_group) if not bad else float("nan")
        if rank == 0:
            rate = (f"{ex.moved / dt / 1e9:8.1f} GB/s aggregate" if ex.moved and not bad
                    else "   (1 rank: no traffic)" if not ex.moved else "")
            what = "check ok" if out is not None and not bad else ""
            if bad:
                what = f"check FAILED on rank(s) {','.join(map(str, bad))}"
            took = f"{dt * 1e6:9.1f}" if not bad else f"{'-':>9s}"
            print(f"all2all {name:14s} {size >> 10:6d} KiB/peer x {world} ranks: "
                  f"{took} us/iter {rate}  {what}", flush=True)
        if bad:
            if not ok:
                print(f"rank {rank}: {name} delivered wrong data at {size} bytes/peer",
                      flush=True)
            raise CheckFailed(f"{name} at {size} bytes/peer failed on rank(s) {bad}")
    host_barrier(cpu_group)  # no rank frees while a peer still writes into it
    del ex


def run(rank: int, world: int, args) -> None:
    device, backend = place(rank, world)
    if backend == "nccl":
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
        cpu_group = dist.new_group(backend="gloo")
    else:
        # Ranks share GPUs (place() told MORI that devices overlap): no
        # NCCL reference path.
        dist.init_process_group("gloo", rank=rank, world_size=world)
        cpu_group = dist.group.WORLD
        args.no_nccl = True
    import torch.distributed._symmetric_memory as symm_mem
    import mori.allocator

    symm_mem.set_backend("MORI")
    group = dist.group.WORLD.group_name
    if rank == 0:
        print(f"all2all: {world} rank(s), shim {mori.allocator.shim_backend()}, "
              f"{torch.cuda.get_device_name(device)}", flush=True)
        if triton is None:
            print("all2all: triton is not installed; the Triton path is skipped", flush=True)
    try:
        for size in args.sizes:
            bench_size(size, rank, world, device, group, cpu_group, args)
    except CheckFailed as e:
        # Every rank agreed, so every rank is here: end them all now.
        print(f"all2all FAILED (rank {rank}): {e}", flush=True)
        os._exit(1)
    except BaseException:
        # Peers may be waiting in any collective: do not join them.
        traceback.print_exc()
        print(f"all2all FAILED (rank {rank}): error above; ending this rank", flush=True)
        sys.stderr.flush()
        os._exit(1)
    host_barrier(cpu_group)
    dist.destroy_process_group()


def spawned(rank: int, world: int, port: int, args) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    run(rank, world, args)


def parse_inject(text: str):
    kind, _, rank = text.partition(":")
    if kind not in ("check", "raise") or not rank.isdigit():
        raise argparse.ArgumentTypeError("expected check:RANK or raise:RANK")
    return kind, int(rank)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="256K,1M,4M,16M",
                   help="bytes per peer, comma separated (default 256K,1M,4M,16M)")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--check-repeats", type=int, default=1,
                   help="run each path's check this many times before timing it")
    p.add_argument("--no-nccl", action="store_true", help="skip the NCCL reference")
    p.add_argument("--inject", type=parse_inject, default=None,
                   help="check:RANK makes RANK's checks fail; raise:RANK makes RANK raise "
                        "(tests that a failure ends every rank promptly)")
    args = p.parse_args()
    args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    if "RANK" in os.environ:  # torchrun
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    world = 2  # sharing the GPU where there is one
    mp.spawn(spawned, args=(world, port, args), nprocs=world)


if __name__ == "__main__":
    main()
