"""examples/all2all_torch.py - an all-to-all written with the torch API on
the MORI backend, nothing but torch calls after `import mori.allocator`.

Each rank writes one chunk into every peer's symmetric buffer with plain
tensor copies, then a signal-pad barrier makes them visible.

    torchrun --standalone --nproc_per_node=2 examples/all2all_torch.py
"""

import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

import mori.allocator  # noqa: F401  registers the "MORI" backend
from placement import init

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
device = init(rank, world)  # its GPU, and the process group (examples/placement.py)
group = dist.group.WORLD.group_name

symm_mem.set_backend("MORI")
chunk = 1 << 20
recv = symm_mem.empty(world * chunk, dtype=torch.float32, device=device)
hdl = symm_mem.rendezvous(recv, group)  # collective: every rank, same order
send = torch.arange(world * chunk, dtype=torch.float32, device=device) + 1000 * rank

hdl.barrier(channel=0)  # every peer's receive buffer is ready
for peer in range(world):
    # slot [rank] of peer's buffer, as a tensor on this device
    slot = hdl.get_buffer(peer, (chunk,), torch.float32, storage_offset=rank * chunk)
    slot.copy_(send[peer * chunk:(peer + 1) * chunk])
hdl.barrier(channel=0)  # every chunk has landed

for src in range(world):
    got = recv[src * chunk:(src + 1) * chunk]
    want = torch.arange(chunk, dtype=torch.float32, device=device) + rank * chunk + 1000 * src
    assert torch.equal(got, want), f"rank {rank}: wrong chunk from rank {src}"
print(f"rank {rank}: all-to-all of {world} x {chunk * 4 >> 10} KiB through MORI ok "
      f"({mori.allocator.window_info(hdl)['handle_type']} handles)")
dist.destroy_process_group()
