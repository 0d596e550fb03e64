"""The conformance checks: one per behaviour torch 2.11's own
test/distributed/test_symmetric_memory.py asserts of a SymmetricMemory
backend, written afresh for this suite.  Each runs on every rank of a world
of worker processes (worker.py) against whichever backend the world
selected, so that torch's built-in backend is the oracle for MORI.

A check is a function of a Ctx; it passes by returning, fails by raising
(AssertionError or anything else) and skips by raising Skip.  Checks run one
after another in one process, so each makes its own allocations and leaves
no state behind (restores settings it changes, zeroes pads it dirtied).

Worlds: "main" (2 ranks, one per GPU, NCCL), "overlap" (4 ranks on 2 GPUs
with TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES=1, gloo, since NCCL refuses
two ranks on one GPU) and "alone" (a world of its own: the check may poison
the CUDA context, as a timeout does on torch's backend, or hang).
"""

from __future__ import annotations

import gc
import itertools
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch._C._distributed_c10d import _SymmetricMemory

MiB = 1 << 20


class Skip(Exception):
    """Raised by a check that does not apply (with the reason)."""


@dataclass
class Check:
    name: str
    fn: Callable[["Ctx"], None]
    doc: str
    world: str = "main"
    budget_s: float = 60.0
    multicast: bool = False


CHECKS: list[Check] = []


def check(name: str, doc: str, world: str = "main", budget_s: float = 60.0,
          multicast: bool = False):
    def register(fn):
        CHECKS.append(Check(name, fn, doc, world, budget_s, multicast))
        return fn
    return register


def by_name(name: str) -> Check:
    for c in CHECKS:
        if c.name == name:
            return c
    raise KeyError(name)


@dataclass
class Ctx:
    backend: str           # "builtin" or "mori"
    kind: str              # the world: "main", "overlap", "alone"
    rank: int
    world: int
    device: torch.device
    group: Any             # the default process group
    ctrl: Any              # a gloo group for the harness's own barriers
    nccl: bool = True      # the default group is NCCL (False: gloo, ranks share GPUs)
    info: dict = field(default_factory=dict)
    # A check that may leave the CUDA context unusable sets ends_process: the
    # worker records its result and leaves with os._exit, as torch's own
    # negative tests do, before anything (a handle's destructor, teardown)
    # can touch the dead context.  What it puts in keep lives until then.
    ends_process: bool = False
    keep: list = field(default_factory=list)

    @property
    def group_name(self) -> str:
        return self.group.group_name

    @property
    def peer(self) -> int:
        return (self.rank + 1) % self.world

    @property
    def src(self) -> int:
        return (self.rank - 1) % self.world

    def sync(self) -> None:
        """This rank's GPU work done, then every rank here."""
        torch.cuda.synchronize()
        dist.barrier(group=self.ctrl)

    def note(self, **kv) -> None:
        """Figures a check reports (they go into the results, never asserted)."""
        self.info.update(kv)

    def gather(self, t: torch.Tensor) -> torch.Tensor:
        """Every rank's t, stacked: [world, *t.shape], on this device.  NCCL
        where it can; gloo over float32 copies where ranks share GPUs (NCCL
        refuses two ranks on one GPU)."""
        if not self.nccl:
            cpu = t.detach().float().cpu().contiguous()
            out = [torch.empty_like(cpu) for _ in range(self.world)]
            dist.all_gather(out, cpu, group=self.group)
            return torch.stack(out).to(device=self.device, dtype=t.dtype)
        out = torch.empty((self.world, *t.shape), dtype=t.dtype, device=t.device)
        dist.all_gather_into_tensor(out, t.contiguous(), group=self.group)
        return out


# ---- helpers ---------------------------------------------------------------

def raises(fn: Callable[[], Any], pattern: str | None = None) -> str:
    """fn() must raise RuntimeError; returns its message.  pattern, if given,
    is torch's current wording, recorded by the caller, never required."""
    try:
        fn()
    except RuntimeError as e:
        return str(e)
    raise AssertionError(f"expected a RuntimeError{' like ' + repr(pattern) if pattern else ''}")


def matches(message: str, pattern: str) -> bool:
    return re.search(pattern, message) is not None


class _DeviceWords:
    """A raw device array seen through __cuda_array_interface__, so torch
    itself reads it: nothing of the backend is involved."""

    def __init__(self, ptr: int, n: int):
        self.__cuda_array_interface__ = {
            # read-only False: torch refuses read-only device memory
            "shape": (n,), "typestr": "<i8", "data": (ptr, False), "version": 3, "strides": None}


def read_device_words(ptr: int, n: int, device: torch.device) -> list[int]:
    return torch.as_tensor(_DeviceWords(ptr, n), device=device).tolist()


def free_device_bytes(c: Ctx) -> int:
    gc.collect()
    c.sync()
    return torch.cuda.mem_get_info(c.device)[0]


def mem_pool(device: torch.device, split: bool = False):
    """torch's symmetric MemPool: get_mem_pool (no_split) where torch has it;
    split=True (several tensors per block) is a pool over the same allocator."""
    if not split and hasattr(symm_mem, "get_mem_pool"):
        return symm_mem.get_mem_pool(device)
    return torch.cuda.MemPool(symm_mem.get_mempool_allocator(device))


def alloc_args(c: Ctx):
    return ((64, 64), (64, 1), torch.float32, c.device)


def verify_symmetric_memory(hdl) -> None:
    """torch's _verify_symmetric_memory: a full-size get_buffer of rank 0,
    written by the others through their mappings, ordered by put/wait and
    barriers."""
    buf = hdl.get_buffer(0, (hdl.buffer_size // 4,), torch.float32)
    assert buf.storage_offset() == 0
    assert buf.untyped_storage().size() == hdl.buffer_size
    if hdl.rank == 0:
        hdl.wait_signal(src_rank=1)
        assert buf.eq(42).all().item(), "rank 0 does not see rank 1's 42 after wait_signal"
    else:
        buf.fill_(42)
        hdl.put_signal(dst_rank=0)
    hdl.barrier()
    if hdl.rank == 0:
        hdl.barrier()
        assert buf.eq(43).all().item(), "rank 0 does not see 43 after the barrier"
    else:
        buf.fill_(43)
        hdl.barrier()
    hdl.barrier()
    torch.cuda.synchronize()


def verify_all_reduce(c: Ctx, inp: torch.Tensor, res: torch.Tensor) -> None:
    """torch's _verify_all_reduce_result: equal on every rank, and close to
    the sum of every rank's input."""
    gathered_res = c.gather(res.reshape(-1))
    assert (gathered_res == gathered_res[0]).all().item(), "ranks disagree on the result"
    gathered_inp = c.gather(inp.reshape(-1))
    torch.testing.assert_close(gathered_inp.sum(dim=0), res.reshape(-1), rtol=1e-1, atol=1e-1)


def verify_reduce_scatter(c: Ctx, inp: torch.Tensor, res: torch.Tensor) -> None:
    gathered_res = c.gather(res).view(c.world, *res.shape)
    total = c.gather(inp).view(c.world, *inp.shape).sum(0)
    width = total.shape[-1] // c.world
    for i in range(c.world):
        torch.testing.assert_close(gathered_res[i], total[..., i * width:(i + 1) * width],
                                   rtol=1e-1, atol=1.1e-1)


def op(name: str):
    """torch.ops.symm_mem.<name>, or Skip if this torch has no such op."""
    try:
        return getattr(torch.ops.symm_mem, name)
    except (AttributeError, RuntimeError):
        raise Skip(f"torch.ops.symm_mem.{name} is not in this torch") from None


# ---- backend and settings ----------------------------------------------------

@check("backend_selection",
       "get_backend() names the backend in use; has_multicast_support(CPU, 0) is False; "
       "is_symm_mem_tensor() tells symmetric tensors from others "
       "(test_get_backend, test_has_multicast_support, test_is_symm_mem_tensor)")
def backend_selection(c: Ctx) -> None:
    from torch._C._autograd import DeviceType
    want = "MORI" if c.backend == "mori" else "CUDA"
    assert symm_mem.get_backend(c.device) == want, symm_mem.get_backend(c.device)
    assert symm_mem.get_backend("cuda") is not None
    assert _SymmetricMemory.has_multicast_support(DeviceType.CPU, 0) is False
    if hasattr(symm_mem, "is_symm_mem_tensor"):
        assert not symm_mem.is_symm_mem_tensor(torch.empty(1024))
        assert not symm_mem.is_symm_mem_tensor(torch.empty(1024, device=c.device))
        assert symm_mem.is_symm_mem_tensor(symm_mem.empty(1024, device=c.device))
    else:
        c.note(is_symm_mem_tensor="not in this torch")


@check("signal_pad_size_get_set",
       "get_signal_pad_size() is a positive int equal to _SymmetricMemory.signal_pad_size; "
       "set_signal_pad_size() changes both (test_get_signal_pad_size, test_set_signal_pad_size)")
def signal_pad_size_get_set(c: Ctx) -> None:
    if not hasattr(symm_mem, "set_signal_pad_size"):
        raise Skip("set_signal_pad_size is not in this torch")
    size = symm_mem.get_signal_pad_size()
    assert isinstance(size, int) and size > 0, size
    assert _SymmetricMemory.signal_pad_size == size
    try:
        symm_mem.set_signal_pad_size(MiB)
        assert symm_mem.get_signal_pad_size() == MiB
        assert _SymmetricMemory.signal_pad_size == MiB
    finally:
        symm_mem.set_signal_pad_size(size)
    assert symm_mem.get_signal_pad_size() == size


@check("signal_pad_size_per_allocation",
       "an allocation made after set_signal_pad_size(2x) has a 2x pad: the handle's "
       "signal_pad_size, get_signal_pad()'s numel, and the whole pad is writable "
       "(test_set_signal_pad_size_with_allocation; here through empty_strided_p2p, so that a "
       "pool cannot hand back a block allocated with the old size)")
def signal_pad_size_per_allocation(c: Ctx) -> None:
    if not hasattr(symm_mem, "set_signal_pad_size"):
        raise Skip("set_signal_pad_size is not in this torch")
    original = symm_mem.get_signal_pad_size()
    custom = original * 2
    symm_mem.set_signal_pad_size(custom)
    try:
        t = _SymmetricMemory.empty_strided_p2p((64,), (1,), torch.float32, c.device, c.group_name)
        hdl = symm_mem.rendezvous(t, group=dist.group.WORLD)
        assert hdl.signal_pad_size == custom, hdl.signal_pad_size
        pad = hdl.get_signal_pad(c.rank)
        assert pad.numel() == custom // 4, pad.numel()
        pad.fill_(0)
        pad[0] = 42
        assert pad[0].item() == 42
        pad[-1] = 7  # the last word too: the pad really is 2x
        assert pad[-1].item() == 7
        pad.zero_()
        c.sync()
        hdl.barrier()  # signals still work on a 2x pad
        torch.cuda.synchronize()
    finally:
        symm_mem.set_signal_pad_size(original)


# ---- get_buffer and pointers -------------------------------------------------

@check("get_buffer_sizes_dtypes_offsets_bounds",
       "get_buffer(rank, sizes, dtype, storage_offset) views a peer's buffer: storage offset 0 "
       "and storage size == buffer_size for the whole buffer, any dtype and element offset, the "
       "peer's data; a request past buffer_size raises (get_buffer_at_byte_offset, "
       "_verify_symmetric_memory)")
def get_buffer_checks(c: Ctx) -> None:
    t = _SymmetricMemory.empty_strided_p2p(*alloc_args(c), group_name=c.group_name)
    hdl = _SymmetricMemory.rendezvous(t)
    assert (hdl.rank, hdl.world_size) == (c.rank, c.world)
    assert hdl.buffer_size >= t.numel() * t.element_size()
    t.fill_(c.rank + 1)
    c.sync()
    whole = hdl.get_buffer(c.peer, (hdl.buffer_size // 4,), torch.float32)
    assert whole.storage_offset() == 0
    assert whole.untyped_storage().size() == hdl.buffer_size
    assert whole.device == t.device and whole.dtype == torch.float32
    assert whole[:t.numel()].eq(c.peer + 1).all().item(), "peer's data"
    half = hdl.get_buffer(c.peer, (16,), torch.bfloat16, storage_offset=8)
    assert half.dtype == torch.bfloat16 and half.numel() == 16
    assert half.data_ptr() == hdl.buffer_ptrs[c.peer] + 8 * 2
    shaped = hdl.get_buffer(c.peer, (8, 8), torch.int32, storage_offset=64)
    assert shaped.shape == (8, 8) and shaped.data_ptr() == hdl.buffer_ptrs[c.peer] + 64 * 4
    n = hdl.buffer_size // 4
    msg = raises(lambda: hdl.get_buffer(c.peer, (n + 1,), torch.float32))
    c.note(exceeds_message=matches(msg, "exceeds"))
    raises(lambda: hdl.get_buffer(c.peer, (n,), torch.float32, storage_offset=1))
    c.sync()


@check("pointer_tables_host_and_device",
       "buffer_ptrs / signal_pad_ptrs list world_size pointers; the device arrays "
       "buffer_ptrs_dev / signal_pad_ptrs_dev hold the same values; the own rank's entries are "
       "the tensor's own address (buffer_ptrs[rank] == data_ptr - offset), and get_buffer, "
       "get_remote_tensor and get_signal_pad of the own rank alias it (CUDASymmetricMemory's "
       "tables, test_get_signal_pad, test_allow_overlapping_devices)")
def pointer_tables(c: Ctx) -> None:
    t = symm_mem.empty(1024, dtype=torch.float32, device=c.device)
    hdl = symm_mem.rendezvous(t, c.group_name)
    assert len(hdl.buffer_ptrs) == c.world and len(hdl.signal_pad_ptrs) == c.world
    assert hdl.buffer_ptrs[c.rank] == t.data_ptr() - hdl.offset
    assert hdl.get_buffer(c.rank, (1024,), torch.float32,
                          storage_offset=hdl.offset // 4).data_ptr() == t.data_ptr()
    remote = getattr(hdl, "get_remote_tensor", None)
    if remote is not None:
        assert remote(c.rank, (1024,), torch.float32).data_ptr() == t.data_ptr()
    assert hdl.get_signal_pad(c.rank).data_ptr() == hdl.signal_pad_ptrs[c.rank]
    assert len(set(hdl.buffer_ptrs)) == c.world, "two ranks share a buffer pointer"
    assert read_device_words(hdl.buffer_ptrs_dev, c.world, c.device) == list(hdl.buffer_ptrs)
    assert read_device_words(hdl.signal_pad_ptrs_dev, c.world, c.device) == list(hdl.signal_pad_ptrs)
    t.fill_(c.rank + 0.5)
    c.sync()
    for r in range(c.world):
        peer = hdl.get_buffer(r, (1024,), torch.float32, storage_offset=hdl.offset // 4)
        assert peer.eq(r + 0.5).all().item(), r
    c.sync()


@check("get_signal_pad_variants_and_isolation",
       "a new allocation's pad is zero; get_signal_pad(rank) is the rank's pad (data_ptr == "
       "signal_pad_ptrs[rank]), uint32 of signal_pad_size // 4 by default; sizes, dtype and "
       "both select a view; writes to the buffer never reach the pad (test_get_signal_pad, "
       "the zeroed pad of CUDASymmetricMemoryAllocator::alloc)")
def get_signal_pad(c: Ctx) -> None:
    fresh = _SymmetricMemory.empty_strided_p2p((64,), (1,), torch.float32, c.device,
                                               group_name=c.group_name)
    assert _SymmetricMemory.rendezvous(fresh).get_signal_pad(c.rank).eq(0).all().item(), \
        "a new allocation's signal pad is not zero"
    t = symm_mem.empty(1, device=c.device)
    hdl = symm_mem.rendezvous(t, group=dist.group.WORLD)
    pad = hdl.get_signal_pad(c.rank)
    assert pad.data_ptr() == hdl.signal_pad_ptrs[hdl.rank]
    pad = hdl.get_signal_pad(c.peer)
    assert pad.dtype == torch.uint32 and pad.numel() == hdl.signal_pad_size // 4
    pad = hdl.get_signal_pad(c.peer, (8, 8))
    assert pad.dtype == torch.uint32 and pad.numel() == 64
    pad = hdl.get_signal_pad(c.peer, dtype=torch.uint64)
    assert pad.dtype == torch.uint64 and pad.numel() == hdl.signal_pad_size // 8
    pad = hdl.get_signal_pad(c.peer, (8, 8), dtype=torch.uint64)
    assert pad.dtype == torch.uint64 and pad.numel() == 64
    t = symm_mem.empty(1, device=c.device)
    hdl = symm_mem.rendezvous(t, group=dist.group.WORLD)
    own = hdl.get_signal_pad(c.rank)
    own.fill_(42)
    t.fill_(0)
    assert own.eq(42).all().item(), "a write to the buffer reached the signal pad"
    own.zero_()  # torch's kernels expect zeroed pads; the next check may reuse the block
    c.sync()


# ---- signals -----------------------------------------------------------------

@check("put_wait_barrier_on_several_channels",
       "put_signal/wait_signal order a peer's writes before the reader's reads and barrier "
       "orders every rank, on each channel independently, up to the last channel "
       "(test_get_signal_pad, _verify_symmetric_memory, test_put_wait_signal_channel_out_of_bounds)")
def signals(c: Ctx) -> None:
    n = 1 << 14
    t = symm_mem.empty(n, dtype=torch.float32, device=c.device)
    hdl = symm_mem.rendezvous(t, c.group_name)
    last = (hdl.signal_pad_size // 4) // c.world - 1
    t.zero_()
    c.sync()
    for ch in (0, 1, 5, last):
        for it in range(3):
            value = ch * 100 + it * 10
            hdl.get_buffer(c.peer, (n,), torch.float32).fill_(value + c.rank)
            hdl.put_signal(c.peer, channel=ch)
            hdl.wait_signal(c.src, channel=ch)
            got = t.clone()
            hdl.barrier(channel=ch)  # nobody writes again before everybody has read
            torch.cuda.synchronize()
            assert got.eq(value + c.src).all().item(), (ch, it, got[0].item())
    for _ in range(20):
        for ch in range(4):
            hdl.barrier(channel=ch)
    torch.cuda.synchronize()
    c.sync()


def error_of(call: Callable[[], Any]) -> tuple[str | None, str]:
    """Where call() fails and how: ("call", message) if it raises
    RuntimeError, ("synchronize", message) if the synchronize after it
    does, (None, "") if neither.  After "synchronize" the CUDA context is
    gone (torch's kernels fault or trap): the check stops there, and the
    world ends with it (c.ends_process)."""
    try:
        call()
    except RuntimeError as e:
        return "call", str(e)
    try:
        torch.cuda.synchronize()
    except RuntimeError as e:
        return "synchronize", str(e)
    return None, ""


@check("signal_channel_bounds",
       "torch's own channel bounds are refused by barrier, put_signal and wait_signal with a "
       "RuntimeError: a negative channel and a channel at signal_pad_size // 4 * world_size "
       "(torch 2.11's host check multiplies by world_size; wording 'maximum supported "
       "channel'); the last channel that fits the pad (signal_pad_size // 4 // world_size - 1) "
       "works; what a barrier on the first channel past the pad does is recorded, not judged "
       "(torch's kernels index past their pad there, MORI refuses)",
       world="alone", budget_s=30)
def signal_channel_bounds(c: Ctx) -> None:
    c.ends_process = True  # a backend that faults here leaves no context behind
    t = symm_mem.empty(64, device=c.device)
    hdl = symm_mem.rendezvous(t, group=dist.group.WORLD)
    c.keep += [t, hdl]
    fits = (hdl.signal_pad_size // 4) // c.world   # channels whose slots lie in the pad
    torch_bound = (hdl.signal_pad_size // 4) * c.world
    calls = {"barrier": lambda ch: hdl.barrier(channel=ch),
             "put_signal": lambda ch: hdl.put_signal(dst_rank=c.peer, channel=ch),
             "wait_signal": lambda ch: hdl.wait_signal(src_rank=c.src, channel=ch)}
    worded = True
    for ch in (-1, torch_bound):
        for name, call in calls.items():
            where, message = error_of(lambda: call(ch))
            if where == "synchronize":
                c.note(context_lost_at=f"{name}(channel={ch})", message=message[:200])
                return
            assert where == "call", f"{name}(channel={ch}) raised nothing"
            if ch >= 0:
                worded &= matches(message, "maximum supported channel")
    hdl.barrier(channel=fits - 1)
    hdl.put_signal(dst_rank=c.peer, channel=fits - 1)
    hdl.wait_signal(src_rank=c.src, channel=fits - 1)
    torch.cuda.synchronize()
    c.note(torch_wording=worded)
    # Past the pad but under torch's bound.  Both ranks take part, so a
    # backend that accepts it completes the barrier.
    where, message = error_of(lambda: hdl.barrier(channel=fits))
    c.note(barrier_past_the_pad=where or "accepted", past_the_pad_message=message[:200])
    if where != "synchronize":
        c.sync()


@check("signal_rank_bounds",
       "a rank outside [0, world_size) given to put_signal or wait_signal is an error: the call "
       "raises RuntimeError or the synchronize after it does (torch 2.11 checks no rank on the "
       "host for put/wait: its kernel faults on the bad index and the context is gone; MORI "
       "refuses up front, in torch's words 'must be in [0', and goes on); get_signal_pad is "
       "torch's own code for every backend and is not judged",
       world="alone", budget_s=30)
def signal_rank_bounds(c: Ctx) -> None:
    c.ends_process = True  # torch's backend leaves no context behind
    t = symm_mem.empty(64, device=c.device)
    hdl = symm_mem.rendezvous(t, group=dist.group.WORLD)
    c.keep += [t, hdl]
    worded = True
    # put_signal first: with a bad index torch's put faults at once, where
    # its wait would wait forever on a neighbouring slot.
    # get_signal_pad is torch's own code (SymmetricMemory::get_signal_pad,
    # not virtual in 2.11): it indexes get_signal_pad_ptrs() with the rank it
    # is given, whatever the backend, so it is not asked of a backend here.
    # torch's backend never reaches it anyway: its put_signal(-1) faults.
    for bad in (-1, c.world):
        for name, call in (("put_signal", lambda: hdl.put_signal(dst_rank=bad)),
                           ("wait_signal", lambda: hdl.wait_signal(src_rank=bad))):
            where, message = error_of(call)
            if where == "synchronize":
                c.note(context_lost_at=f"{name}({bad})", message=message[:200])
                return
            assert where == "call", f"{name}({bad}) raised nothing"
            worded &= matches(message, r"must be in \[0")
    hdl.put_signal(dst_rank=c.peer)  # good ranks still work after the refusals
    hdl.wait_signal(src_rank=c.src)
    torch.cuda.synchronize()
    c.note(torch_wording=worded)
    c.sync()


TIMEOUT_MS = 1000
TIMEOUT_MARGIN_S = 10.0  # past the timeout: a hang, not a slow error


def _timeout_check(c: Ctx, what: str) -> None:
    """torch's SymmMemNegativeTest: rank 0's call with timeout_ms=1000 ends in
    a RuntimeError while rank 1 only synchronizes.  torch asserts it by the
    synchronize after the call: its kernel traps, which ends the CUDA
    context, so its test leaves with os._exit.  MORI releases the stream and
    fails the window instead: the error comes from the call, the
    synchronize, or at the latest the next signal call on the handle, within
    the timeout and a margin.  Which of the three raised, how long it took
    and whether the context survived are recorded."""
    c.ends_process = True  # torch's backend cannot go on after its trap
    t = symm_mem.empty(1, device=c.device)
    hdl = symm_mem.rendezvous(t, group=dist.group.WORLD)
    c.keep += [t, hdl]
    if c.rank != 0:
        torch.cuda.synchronize()
        return
    stage, t0 = "call", time.monotonic()
    try:
        if what == "barrier":
            hdl.barrier(timeout_ms=TIMEOUT_MS)
        elif what == "put_signal":
            hdl.put_signal(dst_rank=1)  # rank 1 never consumes it: the second put waits
            hdl.put_signal(dst_rank=1, timeout_ms=TIMEOUT_MS)
        else:
            hdl.wait_signal(src_rank=1, timeout_ms=TIMEOUT_MS)
        stage = "synchronize"
        torch.cuda.synchronize()
        stage = "next call"  # one that needs no peer: a signal to this rank itself
        hdl.put_signal(dst_rank=0, channel=2)
        torch.cuda.synchronize()
    except RuntimeError as e:
        seconds = time.monotonic() - t0
        try:
            survives = torch.ones(1, device=c.device).add_(1).item() == 2
        except RuntimeError:
            survives = False
        c.note(raised_by=stage, seconds=round(seconds, 2), context_survives=survives,
               message=str(e)[:240])
        assert seconds < TIMEOUT_MS / 1e3 + TIMEOUT_MARGIN_S, \
            f"{what}: the error came after {seconds:.1f} s"
        return
    raise AssertionError(f"{what} with timeout_ms={TIMEOUT_MS}: nothing raised by the call, the "
                         "synchronize after it or the next call on the handle")


@check("barrier_timeout",
       "a barrier that a peer never joins, with timeout_ms=1000, ends in a RuntimeError within "
       "the timeout and a margin: by the synchronize after it (torch: its kernel traps and the "
       "context is gone) or by the next call on the handle (MORI: the stream is released and "
       "the context survives) (test_barrier_timeout)",
       world="alone", budget_s=25)
def barrier_timeout(c: Ctx) -> None:
    _timeout_check(c, "barrier")


@check("put_signal_timeout",
       "a put_signal to a peer that never consumes the previous one, with timeout_ms=1000, ends "
       "in a RuntimeError within the timeout and a margin, as barrier_timeout "
       "(test_put_signal_timeout)",
       world="alone", budget_s=25)
def put_signal_timeout(c: Ctx) -> None:
    _timeout_check(c, "put_signal")


@check("wait_signal_timeout",
       "a wait_signal for a signal that never comes, with timeout_ms=1000, ends in a "
       "RuntimeError within the timeout and a margin, as barrier_timeout "
       "(test_wait_signal_timeout)",
       world="alone", budget_s=25)
def wait_signal_timeout(c: Ctx) -> None:
    _timeout_check(c, "wait_signal")


# ---- rendezvous -----------------------------------------------------------------

@check("rendezvous_by_name_and_group_object",
       "rendezvous(t, group_name) and rendezvous(t, group=ProcessGroup) give the same window; "
       "without a group the allocation's group is used, and with neither rendezvous raises "
       "'neither specified'; a tensor not from symmetric memory gives None "
       "(test_empty_strided_p2p, test_subgroup, CUDASymmetricMemoryAllocator::rendezvous)")
def rendezvous_forms(c: Ctx) -> None:
    t = symm_mem.empty(64, device=c.device)
    by_object = symm_mem.rendezvous(t, group=dist.group.WORLD)
    by_name = symm_mem.rendezvous(t, c.group_name)
    assert (by_object.rank, by_object.world_size) == (c.rank, c.world)
    assert list(by_object.buffer_ptrs) == list(by_name.buffer_ptrs)
    told = _SymmetricMemory.empty_strided_p2p(*alloc_args(c), group_name=c.group_name)
    hdl = _SymmetricMemory.rendezvous(told)
    assert (hdl.rank, hdl.world_size) == (c.rank, c.world)
    untold = _SymmetricMemory.empty_strided_p2p(*alloc_args(c))
    msg = raises(lambda: _SymmetricMemory.rendezvous(untold))
    assert "neither specified" in msg, msg
    assert _SymmetricMemory.rendezvous(torch.empty((64, 64), device=c.device)) is None
    c.sync()


@check("rendezvous_is_cached",
       "after the first (collective) rendezvous of a tensor, later ones return the same window "
       "without the peers taking part: one rank alone rendezvouses 100 times "
       "(SymmetricMemory.hpp: 'Subsequent calls ... will receive the cached SymmetricMemory')")
def rendezvous_cached(c: Ctx) -> None:
    t = symm_mem.empty(4096, device=c.device)
    first = symm_mem.rendezvous(t, c.group_name)
    c.sync()
    if c.rank == 0:
        for _ in range(100):
            again = symm_mem.rendezvous(t, c.group_name)
        assert list(again.buffer_ptrs) == list(first.buffer_ptrs)
    c.sync()
    assert list(symm_mem.rendezvous(t, c.group_name).buffer_ptrs) == list(first.buffer_ptrs)


@check("subgroups_in_two_ranks",
       "one tensor rendezvouses with the world and with a second group of the same ranks, and "
       "each rank with a group of itself alone; each handle has that group's rank, size and "
       "buffers (test_subgroup, at 2 ranks)")
def subgroups_two(c: Ctx) -> None:
    same = dist.new_group(list(range(c.world)))
    alone = [dist.new_group([r]) for r in range(c.world)]  # every rank creates every group
    t = symm_mem.empty(64, device=c.device)
    h_world = symm_mem.rendezvous(t, group=dist.group.WORLD)
    h_same = symm_mem.rendezvous(t, group=same)
    h_alone = symm_mem.rendezvous(t, group=alone[c.rank])
    assert (h_same.rank, h_same.world_size) == (same.rank(), same.size())
    assert (h_alone.rank, h_alone.world_size) == (0, 1)
    t.fill_(c.rank)
    h_world.barrier()
    assert h_world.get_buffer(c.peer, (64,), torch.float32).eq(c.peer).all().item()
    h_same.barrier()
    assert h_same.get_buffer(c.peer, (64,), torch.float32).eq(c.peer).all().item()
    assert h_alone.get_buffer(0, (64,), torch.float32).eq(c.rank).all().item()
    h_alone.barrier()
    h_world.barrier()
    torch.cuda.synchronize()
    c.sync()


# ---- torch's ops --------------------------------------------------------------------

@check("one_shot_all_reduce",
       "one_shot_all_reduce (and one_shot_all_reduce_copy) equal the sum of every rank's input, "
       "float and bfloat16, 4/8192/8196 bytes, at offsets 0 and 16 (test_one_shot_all_reduce)")
def one_shot_all_reduce(c: Ctx) -> None:
    for dtype, size_bytes, copy, offset in itertools.product(
            [torch.float, torch.bfloat16], [4, 8192, 8196], [True, False], [0, 16]):
        inp = symm_mem.empty(size_bytes // dtype.itemsize + offset, dtype=dtype, device=c.device)
        symm_mem.rendezvous(inp, group=c.group_name)
        if copy:
            if not hasattr(torch.ops.symm_mem, "one_shot_all_reduce_copy"):
                c.note(one_shot_all_reduce_copy="not in this torch")
                continue
            fn = op("one_shot_all_reduce_copy")
            local = torch.randn_like(inp[offset:])
            res = fn(inp[offset:], local, "sum", c.group_name)
            verify_all_reduce(c, local, res)
        else:
            inp.normal_()
            res = op("one_shot_all_reduce")(inp[offset:], "sum", c.group_name)
            verify_all_reduce(c, inp[offset:], res)
    c.sync()


@check("two_shot_all_reduce",
       "two_shot_all_reduce_ (in place) and two_shot_all_reduce_out equal the sum of every "
       "rank's input and write nothing outside it (test_two_shot_all_reduce)")
def two_shot_all_reduce(c: Ctx) -> None:
    for dtype, size_bytes, inplace in itertools.product(
            [torch.float, torch.bfloat16], [4, 8192, 8196], [True, False]):
        t = symm_mem.empty(16384, dtype=dtype, device=c.device).fill_(0)
        symm_mem.rendezvous(t, group=c.group_name)
        shift = 8 // t.element_size()
        numel = size_bytes // t.element_size()
        res = t[shift:shift + numel]
        res.normal_()
        inp = res.clone()
        if inplace:
            op("two_shot_all_reduce_")(res, "sum", c.group_name)
            out = res
        else:
            out = torch.empty_like(inp)
            op("two_shot_all_reduce_out")(res, "sum", c.group_name, out)
        assert t[:shift].eq(0).all().item() and t[shift + numel:].eq(0).all().item(), "head/tail"
        verify_all_reduce(c, inp, out)
        c.sync()


@check("reduce_scatter_out",
       "reduce_scatter_out gives each rank its slice of the sum, splitting the first or the last "
       "dimension, and writes nothing outside its input (test_reduce_scatter)")
def reduce_scatter_out(c: Ctx) -> None:
    fn = op("reduce_scatter_out")
    for dtype, size_bytes, split_last_dim in itertools.product(
            [torch.float, torch.bfloat16], [128, 8192, 36 * 1024 * 16], [True, False]):
        t = symm_mem.empty(36 * 1024 * 16, dtype=dtype, device=c.device).fill_(0)
        symm_mem.rendezvous(t, group=c.group_name)
        shift = 8 // t.element_size()
        numel = size_bytes // t.element_size()
        res = t[shift:shift + numel].normal_()
        if split_last_dim:
            res = res.view(-1, 128 // t.element_size())
        inp = res.clone()
        out_size = list(inp.shape)
        out_size[-1] = inp.shape[-1] // c.world
        out = torch.empty(out_size, dtype=dtype, device=c.device)
        fn(res, c.group_name, split_last_dim, out)
        assert t[:shift].eq(0).all().item() and t[shift + numel:].eq(0).all().item(), "head/tail"
        verify_reduce_scatter(c, inp, out)
        c.sync()


@check("low_contention_all_gather",
       "_low_contention_all_gather of a symmetric or a plain tensor gives every rank's chunk "
       "in rank order (test_low_contention_all_gather)")
def low_contention_all_gather(c: Ctx) -> None:
    fn = op("_low_contention_all_gather")
    for symm_input in (True, False):
        if symm_input:
            t = _SymmetricMemory.empty_strided_p2p((64, 64), (64, 1), torch.float32, c.device,
                                                   group_name=c.group_name).fill_(c.rank)
        else:
            t = torch.full((64, 64), c.rank, dtype=torch.float32, device=c.device)
        res = torch.ops._c10d_functional.wait_tensor(fn(t, c.group_name))
        assert res.shape == (64 * c.world, 64), res.shape
        for r, chunk in enumerate(res.chunk(c.world)):
            assert chunk.eq(r).all().item(), r
        c.sync()


@check("low_contention_reduce_scatter",
       "_low_contention_reduce_scatter (sum, avg) of a symmetric or a plain tensor gives each "
       "rank the reduction of its chunk (test_low_contention_reduce_scatter)")
def low_contention_reduce_scatter(c: Ctx) -> None:
    fn = op("_low_contention_reduce_scatter")
    for reduce_op, symm_input in itertools.product(("sum", "avg"), (True, False)):
        if symm_input:
            t = _SymmetricMemory.empty_strided_p2p((64, 64), (64, 1), torch.float32, c.device,
                                                   group_name=c.group_name)
        else:
            t = torch.empty((64, 64), dtype=torch.float32, device=c.device)
        for r, chunk in enumerate(t.chunk(c.world)):
            chunk.fill_(r)
        res = torch.ops._c10d_functional.wait_tensor(fn(t, reduce_op, c.group_name))
        assert res.shape == (64 // c.world, 64), res.shape
        expect = c.rank * c.world if reduce_op == "sum" else c.rank
        assert res.eq(expect).all().item(), (reduce_op, symm_input, res[0, 0].item())
        c.sync()


@check("fused_all_gather_matmul",
       "fused_all_gather_matmul equals its fallback (all-gather output and every matmul, values "
       "and strides) for gather_dim 0, 1, 2 (test_fused_all_gather_matmul)")
def fused_all_gather_matmul(c: Ctx) -> None:
    fn = op("fused_all_gather_matmul")
    fallback = getattr(symm_mem, "_fused_all_gather_matmul_fallback", None)
    if fallback is None:
        raise Skip("_fused_all_gather_matmul_fallback is not in this torch")
    for gather_dim in (0, 1, 2):
        torch.manual_seed(42 + c.rank)
        shape = [8, 64, 32]
        shape[gather_dim] //= c.world
        a_shard = torch.rand(shape, device=c.device)
        bs = [torch.rand(32, 16, device=c.device) for _ in range(3)]
        ag0, mm0 = fallback(a_shard, bs, gather_dim=gather_dim, group_name=c.group_name)
        ag1, mm1 = fn(a_shard, bs, gather_dim=gather_dim, group_name=c.group_name)
        assert torch.allclose(ag0, ag1), gather_dim
        assert ag0.stride() == ag1.stride(), (ag0.stride(), ag1.stride())
        for x, y in zip(mm0, mm1):
            assert torch.allclose(x, y), gather_dim
            assert x.stride() == y.stride()
        c.sync()


@check("fused_matmul_reduce_scatter",
       "fused_matmul_reduce_scatter (avg) equals its fallback, values and strides, for "
       "scatter_dim 0, 1, 2 (test_fused_matmul_reduce_scatter)")
def fused_matmul_reduce_scatter(c: Ctx) -> None:
    fn = op("fused_matmul_reduce_scatter")
    fallback = getattr(symm_mem, "_fused_matmul_reduce_scatter_fallback", None)
    if fallback is None:
        raise Skip("_fused_matmul_reduce_scatter_fallback is not in this torch")
    for scatter_dim in (0, 1, 2):
        torch.manual_seed(42 + c.rank)
        a = torch.rand(8, 64, 1024, device=c.device)
        b = torch.rand(1024, 16, device=c.device)
        out0 = fallback(a, b, "avg", scatter_dim=scatter_dim, group_name=c.group_name)
        out1 = fn(a, b, "avg", scatter_dim=scatter_dim, group_name=c.group_name)
        assert torch.allclose(out0, out1), scatter_dim
        assert out0.stride() == out1.stride(), (out0.stride(), out1.stride())
        c.sync()


# ---- CUDA graphs ----------------------------------------------------------------------

@check("cuda_graph_capture_of_barrier",
       "a fill and a barrier captured in a CUDA graph replay correctly: after each replay every "
       "peer sees the fill, and torch's signal pad is zero again "
       "(test_stream_serialization_cuda_graph_capture, ..._cuda_graph_forked_streams)")
def graph_barrier(c: Ctx) -> None:
    t = symm_mem.empty(64, dtype=torch.float32, device=c.device)
    hdl = symm_mem.rendezvous(t, group=dist.group.WORLD)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        t.fill_(c.rank + 1.0)
        hdl.barrier(channel=0)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    counter = torch.zeros(1, dtype=torch.float32, device=c.device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        counter.add_(1.0)
        t.copy_(counter.expand(64) * 100.0 + c.rank)
        hdl.barrier(channel=0)
    for n in range(1, 5):
        graph.replay()
        torch.cuda.synchronize()
        buf = hdl.get_buffer(c.peer, (64,), torch.float32)
        assert buf.eq(n * 100.0 + c.peer).all().item(), (n, buf[0].item())
        c.sync()  # nobody replays (and overwrites) before everybody read
    pad = hdl.get_signal_pad(c.rank)
    assert pad.eq(0).all().item(), "torch's signal pad is not zero after the replays"
    c.sync()


@check("cuda_graph_capture_of_ops",
       "one_shot_all_reduce captured in a CUDA graph gives the sum of the current inputs at each "
       "replay (torch's ops under graph capture, test_fused_matmul_reduce_scatter_bfloat16_"
       "custom_reduce's graph part for the signal-pad ops)")
def graph_ops(c: Ctx) -> None:
    fn = op("one_shot_all_reduce")
    inp = symm_mem.empty(4096, dtype=torch.float32, device=c.device)
    symm_mem.rendezvous(inp, group=c.group_name)
    inp.fill_(1.0)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn(inp, "sum", c.group_name)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(s)
    c.sync()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(inp, "sum", c.group_name)
    for k in range(3):
        inp.fill_(k + c.rank)
        c.sync()
        graph.replay()
        torch.cuda.synchronize()
        want = sum(k + r for r in range(c.world))
        assert out.eq(want).all().item(), (k, out[0].item(), want)
        c.sync()


# ---- MemPool ------------------------------------------------------------------------------

@check("mempool_several_tensors_per_block",
       "tensors of one MemPool segment rendezvous at their interior offsets: one window per "
       "block (same buffer_ptrs), hdl.offset differences equal data_ptr differences, the own "
       "entry plus offset is the tensor, and get_remote_tensor / get_buffer at the offset read "
       "each peer's tensor (SymmMemPoolTest, find_block_covering)")
def mempool_interior(c: Ctx) -> None:
    pool = mem_pool(c.device, split=True)
    with torch.cuda.use_mem_pool(pool):
        a = torch.full((1024,), float(c.rank + 1), device=c.device)
        b = torch.full((1024,), float(10 * (c.rank + 1)), device=c.device)
    ha = symm_mem.rendezvous(a, c.group_name)
    hb = symm_mem.rendezvous(b, c.group_name)
    same_block = list(ha.buffer_ptrs) == list(hb.buffer_ptrs)
    c.note(same_block=same_block)
    if same_block:
        assert hb.offset - ha.offset == b.data_ptr() - a.data_ptr()
    assert hb.buffer_ptrs[c.rank] + hb.offset == b.data_ptr()
    assert ha.buffer_ptrs[c.rank] + ha.offset == a.data_ptr()
    assert hb.get_remote_tensor(c.rank, (1024,), torch.float32).data_ptr() == b.data_ptr()
    c.sync()
    for r in range(c.world):
        assert hb.get_remote_tensor(r, (1024,), torch.float32).eq(10 * (r + 1)).all().item(), r
        via = hb.get_buffer(r, (1024,), torch.float32, storage_offset=hb.offset // 4)
        assert via.eq(10 * (r + 1)).all().item(), r
        assert ha.get_remote_tensor(r, (1024,), torch.float32).eq(r + 1).all().item(), r
    c.sync()
    del ha, hb, a, b
    c.sync()


@check("mempool_recycled_block",
       "a MemPool block freed and handed out again rendezvouses and runs barrier round trips "
       "again (test_mempool_recycled_alloc_signal_pad, test_mempool_storage_reuse)")
def mempool_recycled(c: Ctx) -> None:
    pool = mem_pool(c.device)

    def round_trip():
        with torch.cuda.use_mem_pool(pool):
            t = torch.empty(1024, dtype=torch.float32, device=c.device)
        hdl = symm_mem.rendezvous(t, c.group_name)
        t.fill_(c.rank)
        hdl.barrier(timeout_ms=60000)
        for r in range(c.world):
            assert hdl.get_buffer(r, (1024,), torch.float32).eq(r).all().item(), r
        hdl.barrier(timeout_ms=60000)
        torch.cuda.synchronize()
        return t.data_ptr()

    first = round_trip()
    c.sync()
    second = round_trip()
    c.note(same_address=first == second)
    c.sync()


@check("mempool_tensor_factory_and_compute_ops",
       "tensors made by factories and by compute ops inside the symmetric MemPool feed "
       "one_shot_all_reduce (test_mempool_tensor_factory, test_mempool_compute_ops)")
def mempool_ops(c: Ctx) -> None:
    fn = op("one_shot_all_reduce")
    pool = mem_pool(c.device)
    with torch.cuda.use_mem_pool(pool):
        x = torch.arange(1024, dtype=torch.float, device=c.device)
    symm_mem.rendezvous(x, group=c.group_name)
    y = fn(x, "sum", c.group_name)
    torch.testing.assert_close(y, torch.arange(1024, dtype=torch.float, device=c.device) * c.world)
    w = torch.ones(1024, 1024, device=c.device)
    v = torch.ones(1, 1024, device=c.device)
    with torch.cuda.use_mem_pool(pool):
        z = torch.mm(v, w)
    z = fn(z, "sum", c.group_name)
    torch.testing.assert_close(z, torch.mm(v, w) * c.world)
    c.sync()


# ---- empty_strided_p2p and lifetimes ---------------------------------------------------------

@check("empty_strided_p2p_handle_outlives_tensor",
       "rendezvous(plain tensor) is None; t = empty_strided_p2p(...); hdl = rendezvous(t); "
       "del t; the handle still works: full-size get_buffer, writes through peers' mappings, "
       "put/wait and barriers (test_empty_strided_p2p)")
def empty_strided_p2p_del_tensor(c: Ctx) -> None:
    assert _SymmetricMemory.rendezvous(torch.empty((64, 64), device=c.device)) is None
    t = _SymmetricMemory.empty_strided_p2p(*alloc_args(c), group_name=c.group_name)
    hdl = _SymmetricMemory.rendezvous(t)
    del t
    gc.collect()
    verify_symmetric_memory(hdl)
    c.sync()


@check("empty_strided_p2p_alloc_id",
       "empty_strided_p2p(..., alloc_id) is persistent: a second one while the first lives "
       "raises, after del the same address comes back, and it rendezvouses and works "
       "(test_empty_strided_p2p_persistent, test_symm_mem_empty_storage_reuse)")
def empty_strided_p2p_alloc_id(c: Ctx) -> None:
    alloc_id = 4242 + len(CHECKS)  # the same on every rank, unused elsewhere in the process
    t = _SymmetricMemory.empty_strided_p2p(*alloc_args(c), group_name=c.group_name,
                                           alloc_id=alloc_id)
    ptr = t.data_ptr()
    raises(lambda: _SymmetricMemory.empty_strided_p2p(*alloc_args(c), group_name=c.group_name,
                                                      alloc_id=alloc_id))
    del t
    t = _SymmetricMemory.empty_strided_p2p(*alloc_args(c), group_name=c.group_name,
                                           alloc_id=alloc_id)
    assert t.data_ptr() == ptr
    verify_symmetric_memory(_SymmetricMemory.rendezvous(t))
    c.sync()


@check("lifetime_handle_keeps_memory",
       "del t with a live handle frees nothing: the device memory stays allocated, a kernel "
       "writes through hdl.get_buffer into the peer and put/wait/barrier run; when the handle "
       "goes too the memory returns (AllocationRef owned by the handle's peer info)")
def lifetime_handle_keeps_memory(c: Ctx) -> None:
    size = 256 * MiB
    f0 = free_device_bytes(c)
    t = _SymmetricMemory.empty_strided_p2p((size,), (1,), torch.uint8, c.device,
                                           group_name=c.group_name)
    hdl = _SymmetricMemory.rendezvous(t)
    f1 = free_device_bytes(c)
    del t
    f2 = free_device_bytes(c)
    c.note(allocated_mib=(f0 - f1) / MiB, after_del_tensor_mib=(f0 - f2) / MiB)
    assert f0 - f1 >= 0.9 * size, f"the allocation took only {(f0 - f1) / MiB:.0f} MiB"
    assert f0 - f2 >= 0.9 * size, "del t freed the memory while a handle holds it"
    n = 1024
    hdl.get_buffer(c.peer, (n,), torch.float32).fill_(c.rank + 7)  # a kernel, into the peer
    hdl.put_signal(c.peer)
    hdl.wait_signal(c.src)
    hdl.barrier()
    torch.cuda.synchronize()
    c.sync()
    own = hdl.get_buffer(c.rank, (n,), torch.float32)
    assert own.eq(c.src + 7).all().item(), own[0].item()
    del own, hdl
    f3 = free_device_bytes(c)
    c.note(after_del_handle_mib=(f0 - f3) / MiB)
    assert f0 - f3 < 0.1 * size, f"{(f0 - f3) / MiB:.0f} MiB still allocated after the last owner"


@check("lifetime_tensor_outlives_handle",
       "dropping the handle leaves the tensor usable, and a new rendezvous of it works "
       "(the reverse of test_empty_strided_p2p's order)")
def lifetime_tensor_outlives_handle(c: Ctx) -> None:
    t = _SymmetricMemory.empty_strided_p2p(*alloc_args(c), group_name=c.group_name)
    hdl = _SymmetricMemory.rendezvous(t)
    hdl.barrier()
    del hdl
    gc.collect()
    c.sync()
    t.fill_(c.rank + 3)
    again = _SymmetricMemory.rendezvous(t)
    again.barrier()
    torch.cuda.synchronize()
    for r in range(c.world):
        assert again.get_buffer(r, (64, 64), torch.float32).eq(r + 3).all().item(), r
    again.barrier()
    torch.cuda.synchronize()
    c.sync()


@check("alloc_rendezvous_free_rounds_do_not_grow",
       "200 rounds of empty_strided_p2p(1 MiB) + rendezvous + barrier + free leave device memory "
       "where it was (growth well under one allocation per round)", budget_s=120)
def rounds_no_growth(c: Ctx) -> None:
    rounds = 200
    # One round first, so that one-time costs (device tables, pools) are paid.
    t = _SymmetricMemory.empty_strided_p2p((MiB,), (1,), torch.uint8, c.device,
                                           group_name=c.group_name)
    _SymmetricMemory.rendezvous(t).barrier()
    del t
    f0 = free_device_bytes(c)
    for _ in range(rounds):
        t = _SymmetricMemory.empty_strided_p2p((MiB,), (1,), torch.uint8, c.device,
                                               group_name=c.group_name)
        hdl = _SymmetricMemory.rendezvous(t)
        hdl.barrier()
        del hdl, t
    f1 = free_device_bytes(c)
    growth = (f0 - f1) / MiB
    c.note(rounds=rounds, growth_mib=growth)
    assert growth < 64, f"device memory grew {growth:.0f} MiB over {rounds} rounds"


@check("two_gib_allocation",
       "symm_mem.empty of 2 GiB gives a tensor of 2 GiB (test_large_alloc); here it also "
       "rendezvouses and each rank reads the peer's last bytes")
def two_gib(c: Ctx) -> None:
    size = 2 * 1024**3
    t = symm_mem.empty(size, dtype=torch.uint8, device=c.device)
    assert t.numel() * t.element_size() == size
    hdl = symm_mem.rendezvous(t, c.group_name)
    t[-16:].fill_(c.rank + 1)
    c.sync()
    tail = hdl.get_buffer(c.peer, (16,), torch.uint8, storage_offset=size - 16)
    assert tail.eq(c.peer + 1).all().item()
    c.sync()
    del hdl, t, tail
    c.sync()


# ---- overlapping devices ----------------------------------------------------------------------

@check("overlapping_devices_refused_by_default",
       "every rank allocating on cuda:0 without TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES: the "
       "rendezvous raises on every rank ('overlapping devices', validate_rendezvous_requests)")
def overlapping_refused(c: Ctx) -> None:
    os.environ["TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"] = "0"
    t = _SymmetricMemory.empty_strided_p2p((64,), (1,), torch.float32, torch.device("cuda", 0),
                                           group_name=c.group_name)
    msg = raises(lambda: _SymmetricMemory.rendezvous(t))
    c.note(message=msg[:160])
    c.sync()


@check("overlapping_devices_allowed",
       "with TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES=1 every rank allocates on cuda:0 and "
       "rendezvouses: rank and world as usual, the own buffer is the tensor, the others on the "
       "same device; here each rank also reads every other's data (test_allow_overlapping_devices)")
def overlapping_allowed(c: Ctx) -> None:
    os.environ["TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"] = "1"
    try:
        # cuda:0 current while allocating, so that torch's implicit pool (which
        # serves the current device) is the one that allocates.
        with torch.cuda.device(0):
            t = symm_mem.empty(64, device="cuda:0")
        hdl = symm_mem.rendezvous(t, group=dist.group.WORLD)
        assert (hdl.rank, hdl.world_size) == (c.rank, c.world)
        for r in range(c.world):
            buf = hdl.get_buffer(r, (64,), torch.float32)
            if r == c.rank:
                assert buf.data_ptr() == t.data_ptr()
            else:
                assert buf.device == t.device
        with torch.cuda.device(0):
            t.fill_(c.rank + 1)
            torch.cuda.synchronize()
        c.sync()
        for r in range(c.world):
            assert hdl.get_buffer(r, (64,), torch.float32).eq(r + 1).all().item(), r
        c.sync()
    finally:
        os.environ["TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"] = "0"


@check("several_ranks_per_gpu",
       "4 ranks on 2 GPUs (TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES=1): one tensor per rank on "
       "its own GPU rendezvouses; every rank reads every other's data, and put/wait around the "
       "ring and barriers work between ranks of one GPU", world="overlap")
def several_ranks_per_gpu(c: Ctx) -> None:
    t = symm_mem.empty(4096, dtype=torch.float32, device=c.device)
    hdl = symm_mem.rendezvous(t, group=dist.group.WORLD)
    assert (hdl.rank, hdl.world_size) == (c.rank, c.world)
    assert hdl.buffer_ptrs[c.rank] == t.data_ptr()
    t.fill_(c.rank + 1)
    hdl.barrier()
    for r in range(c.world):
        assert hdl.get_buffer(r, (4096,), torch.float32).eq(r + 1).all().item(), r
    hdl.barrier()
    for _ in range(3):
        hdl.put_signal(c.peer, channel=1)
        hdl.wait_signal(c.src, channel=1)
    hdl.barrier()
    torch.cuda.synchronize()
    c.sync()


@check("subgroups_of_four",
       "the world and two halves: each handle has its group's rank and size and reads its "
       "group's peers (test_subgroup)", world="overlap")
def subgroups_four(c: Ctx) -> None:
    ranks = list(range(c.world))
    low = dist.new_group(ranks[:c.world // 2])
    high = dist.new_group(ranks[c.world // 2:])
    sub = low if c.rank < c.world // 2 else high
    t = symm_mem.empty(64, device=c.device)
    h_world = symm_mem.rendezvous(t, group=dist.group.WORLD)
    h_sub = symm_mem.rendezvous(t, group=sub)
    assert (h_world.world_size, h_world.rank) == (c.world, c.rank)
    assert (h_sub.world_size, h_sub.rank) == (c.world // 2, c.rank % sub.size())
    t.fill_(c.rank)
    h_world.barrier()
    peer = (c.rank + 1) % c.world
    assert h_world.get_buffer(peer, (64,), torch.float32).eq(peer).all().item()
    sub_peer = (sub.rank() + 1) % sub.size()
    want = sub_peer if c.rank < c.world // 2 else sub_peer + c.world // 2
    assert h_sub.get_buffer(sub_peer, (64,), torch.float32).eq(want).all().item()
    h_world.barrier()
    torch.cuda.synchronize()
    c.sync()


@check("collectives_at_four_ranks",
       "one_shot_all_reduce, two_shot_all_reduce_ and reduce_scatter_out at 4 ranks (two per "
       "GPU) equal the sums (SymmMemCollectiveTest, which wants 4 GPUs)", world="overlap")
def collectives_four(c: Ctx) -> None:
    one_shot(c, 8192)
    t = symm_mem.empty(16384, dtype=torch.float, device=c.device).fill_(0)
    symm_mem.rendezvous(t, group=c.group_name)
    res = t[2:2 + 2048]
    res.normal_()
    inp = res.clone()
    op("two_shot_all_reduce_")(res, "sum", c.group_name)
    verify_all_reduce(c, inp, res)
    c.sync()
    t = symm_mem.empty(8192, dtype=torch.float, device=c.device).fill_(0)
    symm_mem.rendezvous(t, group=c.group_name)
    res = t[2:2 + 2048].normal_()
    inp = res.clone()
    out = torch.empty(2048 // c.world, dtype=torch.float, device=c.device)
    op("reduce_scatter_out")(res, c.group_name, False, out)
    verify_reduce_scatter(c, inp, out)
    c.sync()


@check("rendezvous_after_strict_subgroup",
       "a subgroup leaving the last rank out rendezvouses first, then the world: keys do not "
       "depend on how many rendezvous a process made (test_rendezvous_after_strict_subgroup; "
       "torch's backend waits forever here: its one process-wide sequence counter)",
       world="overlap", budget_s=20)
def after_strict_subgroup(c: Ctx) -> None:
    sub = dist.new_group(list(range(c.world - 1)))
    t0 = symm_mem.empty(64, device=c.device)
    if c.rank < c.world - 1:
        symm_mem.rendezvous(t0, group=sub)
    t1 = symm_mem.empty(64, device=c.device)
    hdl = symm_mem.rendezvous(t1, group=dist.group.WORLD)
    assert (hdl.world_size, hdl.rank) == (c.world, c.rank)
    t1.fill_(c.rank)
    hdl.barrier()
    assert hdl.get_buffer(c.peer, (64,), torch.float32).eq(c.peer).all().item()
    hdl.barrier()
    torch.cuda.synchronize()
    c.sync()


@check("rendezvous_on_overlapping_subgroups",
       "groups {0,1} and {1,2} rendezvous one after the other; rank 1 is in both and the second "
       "group's members still agree (test_rendezvous_on_overlapping_subgroups; torch's backend "
       "waits forever here, as above)", world="overlap", budget_s=20)
def overlapping_subgroups(c: Ctx) -> None:
    ranks = list(range(c.world))
    group_a = dist.new_group(ranks[0:2])
    group_b = dist.new_group(ranks[1:3])
    t_a = symm_mem.empty(64, device=c.device)
    if c.rank in ranks[0:2]:
        symm_mem.rendezvous(t_a, group=group_a)
    t_b = symm_mem.empty(64, device=c.device)
    if c.rank in ranks[1:3]:
        t_b.fill_(c.rank)
        hdl = symm_mem.rendezvous(t_b, group=group_b)
        hdl.barrier()
        peer = (hdl.rank + 1) % hdl.world_size
        assert hdl.get_buffer(peer, (64,), torch.float32).eq(ranks[1:3][peer]).all().item()
        hdl.barrier()
        torch.cuda.synchronize()
    c.sync()


def one_shot(c: Ctx, size_bytes: int) -> None:
    inp = symm_mem.empty(size_bytes // 4, dtype=torch.float, device=c.device).normal_()
    symm_mem.rendezvous(inp, group=c.group_name)
    res = op("one_shot_all_reduce")(inp, "sum", c.group_name)
    verify_all_reduce(c, inp, res)
    c.sync()


# ---- multicast only: skipped on both, with the reason ----------------------------------------

_MULTICAST = ("the suite runs with TORCH_SYMM_MEM_DISABLE_MULTICAST=1 (multicast off in torch's "
              "backend too) and MORI has no multicast: HIP has no multicast API")


@check("multimem_all_reduce", "multimem_all_reduce_ / multimem_one_shot_all_reduce / "
       "multimem_all_gather_out (test_multimem_*)", multicast=True)
def multimem(c: Ctx) -> None:
    raise Skip(_MULTICAST)


@check("low_contention_all_gather_ce_multicast",
       "_low_contention_all_gather_ce_multicast and its graph capture (test_low_contention_"
       "all_gather_ce_multicast*)", multicast=True)
def lc_multicast(c: Ctx) -> None:
    raise Skip(_MULTICAST)


def checks_for(world: str) -> list[Check]:
    return [c for c in CHECKS if c.world == world]
