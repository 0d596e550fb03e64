"""bench/all2all.py - one-shot all-to-all through MORI's pointer array.

Every rank pushes chunk[peer] of its source into slot [rank] of every peer's
symmetric receive buffer with a Triton kernel that loads the peer's base
from buffer_ptrs_dev (the idiom torch's own symmetric-memory kernels use),
between two signal-pad barriers.  For reference the same exchange runs as
peer-tensor copy_ calls (the copy-engine path) and as NCCL's
all_to_all_single.  Each result is checked once; timings are only printed.

    torchrun --standalone --nproc_per_node=2 bench/all2all.py
    python bench/all2all.py          # spawns min(2, GPUs) ranks itself

Aggregate GB/s counts the bytes that leave a device: world * (world - 1)
chunks per iteration (with one rank nothing leaves, so no rate is shown).
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist

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
    # Triton would specialise an int argument that happens to equal 1 or be
    # a multiple of 16 into a constant, recompiling per rank and size.
    @triton.jit(do_not_specialize=["rank", "dst_offset", "chunk_elems", "blocks_per_peer"])
    def push_all2all(src, peer_ptrs, rank, dst_offset, chunk_elems, blocks_per_peer,
                     BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        peer = pid // blocks_per_peer
        part = pid % blocks_per_peer
        peers = peer_ptrs.to(tl.pointer_type(tl.uint64))
        dst = tl.load(peers + peer).to(tl.pointer_type(tl.int32))  # the table load
        dst += dst_offset + rank.to(tl.int64) * chunk_elems
        src_chunk = src + peer.to(tl.int64) * chunk_elems
        per_part = tl.cdiv(chunk_elems, blocks_per_peer)
        start = part * per_part
        end = tl.minimum(start + per_part, chunk_elems)
        for off in range(start, end, BLOCK):
            idx = off + tl.arange(0, BLOCK)
            mask = idx < end
            tl.store(dst + idx, tl.load(src_chunk + idx, mask=mask), mask=mask)


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def timed(fn, iters: int, warmup: int = 3) -> float:
    """Seconds per iteration, by CUDA events on the current stream."""
    for _ in range(warmup):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    dist.barrier()
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / 1e3 / iters


def expected_recv(rank: int, world: int, chunk: int, device) -> torch.Tensor:
    # rank r's source element k is k + r * 1_000_000; my slot r holds r's chunk[rank]
    idx = torch.arange(chunk, dtype=torch.int32, device=device) + rank * chunk
    return torch.cat([idx + r * 1_000_000 for r in range(world)])


def bench_size(size: int, rank: int, world: int, device, group: str, args) -> None:
    import torch.distributed._symmetric_memory as symm_mem

    chunk = size // 4
    recv = symm_mem.empty(world * chunk, dtype=torch.int32, device=device)
    hdl = symm_mem.rendezvous(recv, group)
    src = torch.arange(world * chunk, dtype=torch.int32, device=device) + rank * 1_000_000
    want = expected_recv(rank, world, chunk, device)
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    blocks_per_peer = max(1, min(-(-chunk // BLOCK), 2 * sms // world))
    grid = (world * blocks_per_peer,)

    def push_only():
        push_all2all[grid](src, hdl.buffer_ptrs_dev, rank, hdl.offset // 4, chunk,
                           blocks_per_peer, BLOCK=BLOCK, num_warps=4)

    def triton_push():
        hdl.barrier(channel=0)  # every receive slot is free
        push_only()
        hdl.barrier(channel=0)  # every push has landed

    def barriers_only():
        hdl.barrier(channel=0)
        hdl.barrier(channel=0)

    def copy_engine():
        hdl.barrier(channel=0)
        for peer in range(world):
            slot = hdl.get_buffer(peer, (chunk,), torch.int32,
                                  storage_offset=hdl.offset // 4 + rank * chunk)
            slot.copy_(src[peer * chunk:(peer + 1) * chunk])
        hdl.barrier(channel=0)

    nccl_out = torch.empty_like(src)

    def nccl():
        dist.all_to_all_single(nccl_out, src)

    # push alone (back to back, no barrier) separates the copy rate from the
    # cost of the two stream-memop barriers, timed on their own last.
    paths = ([("triton push", triton_push, recv), ("push only", push_only, recv)]
             if triton is not None else [])
    paths.append(("copy_ (CE)", copy_engine, recv))
    if not args.no_nccl:
        paths.append(("nccl a2a", nccl, nccl_out))
    dist.barrier()
    dt = timed(barriers_only, args.iters)
    if rank == 0:
        print(f"all2all {'2 barriers':12s} {size >> 10:6d} KiB/peer x {world} ranks: "
              f"{dt * 1e6:9.1f} us/iter (signal-pad barriers alone)", flush=True)
    for name, fn, out in paths:
        out.zero_()
        torch.cuda.synchronize()
        dist.barrier()
        fn()
        torch.cuda.synchronize()
        ok = bool(torch.equal(out, want))
        dt = timed(fn, args.iters)
        moved = world * (world - 1) * size
        rate = f"{moved / dt / 1e9:8.1f} GB/s aggregate" if moved else "   (1 rank: no traffic)"
        if rank == 0:
            print(f"all2all {name:12s} {size >> 10:6d} KiB/peer x {world} ranks: "
                  f"{dt * 1e6:9.1f} us/iter {rate}  check {'ok' if ok else 'FAILED'}",
                  flush=True)
        if not ok:
            raise SystemExit(f"rank {rank}: {name} delivered wrong data at {size} bytes/peer")
    del hdl, recv


def run(rank: int, world: int, args) -> None:
    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
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
            bench_size(size, rank, world, device, group, args)
    finally:
        dist.barrier()
        dist.destroy_process_group()


def spawned(rank: int, world: int, port: int, args) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    run(rank, world, args)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="256K,1M,4M,16M",
                   help="bytes per peer, comma separated (default 256K,1M,4M,16M)")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--no-nccl", action="store_true", help="skip the NCCL reference")
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
    world = min(2, torch.cuda.device_count())
    mp.spawn(spawned, args=(world, port, args), nprocs=world)


if __name__ == "__main__":
    main()
