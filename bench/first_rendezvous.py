"""bench/first_rendezvous.py - the first rendezvous of a fresh process, and
the rendezvous of a second block, on one backend, under torchrun (whose
agent hosts the store, as in a training job):

    torchrun --standalone --nproc_per_node=2 bench/first_rendezvous.py CUDA
    torchrun --standalone --nproc_per_node=2 bench/first_rendezvous.py MORI

CUDA is torch's built-in backend (never selected), MORI is
set_backend("MORI").  Each rank prints its two times; alternate the
backends over several launches and compare per rank.  More ranks than GPUs
share devices (TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES=1 for both).  With
MORI_SYMM_DEBUG=INFO MORI's step lines say where the time went.
"""

import os
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch._C._distributed_c10d import _SymmetricMemory


def timed_rendezvous(dev, group: str) -> float:
    t = _SymmetricMemory.empty_strided_p2p((1 << 20,), (1,), torch.uint8, dev)
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    symm_mem.rendezvous(t, group)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def main() -> None:
    backend = sys.argv[1] if len(sys.argv) > 1 else "MORI"
    if backend not in ("CUDA", "MORI"):
        sys.exit(f"usage: {sys.argv[0]} CUDA|MORI")
    rank = int(os.environ["RANK"])
    os.environ.setdefault("TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES", "1")
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("gloo")
    if backend == "MORI":
        import mori.allocator  # noqa: F401  (registers "MORI")

        symm_mem.set_backend("MORI")
    torch.zeros(1, device=dev).add_(1)  # the context is up before any timing
    group = dist.group.WORLD.group_name
    first = timed_rendezvous(dev, group)
    second = timed_rendezvous(dev, group)
    print(f"rank {rank} {backend} first rendezvous {first:.2f} ms, second block {second:.2f} ms",
          flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
