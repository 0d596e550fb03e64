"""examples/placement.py - where a rank of the examples runs: its GPU and
its process group's backend (imported by the examples beside it; torchrun
puts a script's own folder on the import path).

Ranks beyond the GPU count share GPUs (rank r on GPU r mod count).  NCCL
refuses two ranks on one GPU, so they use gloo, and MORI is told that
devices overlap, as torch's own backend is
(TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES).
"""

import os

import torch
import torch.distributed as dist


def place(rank: int, world: int):
    """Sets this rank's GPU and returns (device, backend)."""
    ngpu = torch.cuda.device_count()
    local = int(os.environ.get("LOCAL_RANK", rank))
    device = torch.device("cuda", local % ngpu)
    torch.cuda.set_device(device)
    if int(os.environ.get("LOCAL_WORLD_SIZE", world)) <= ngpu:
        return device, "nccl"
    os.environ.setdefault("TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES", "1")
    return device, "gloo"


def init_group(device, backend: str) -> None:
    """The default process group on the backend place() chose."""
    dist.init_process_group(backend, device_id=device if backend == "nccl" else None)


def init(rank: int, world: int):
    """place(), then the process group; returns the device."""
    device, backend = place(rank, world)
    init_group(device, backend)
    return device


def coll_device(device):
    """Where a host-side reduction's tensor lives: gloo reduces CPU tensors."""
    return device if dist.get_backend() == "nccl" else "cpu"
