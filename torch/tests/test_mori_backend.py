"""The MORI backend under torch on real GPUs: what torch's SymmetricMemory
API and torch's own symm_mem ops must see when "MORI" is the backend.

Each test runs its body in WORLD fresh processes (2 on a 2-GPU host, 1 on a
single GPU), started with torch.multiprocessing spawn over an NCCL group;
a failing rank's traceback fails the test.  Run on a GPU host by
tests/gpu/torch_suite.sh, never in CI.  Figures are printed, never asserted.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

for _k, _v in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
               "NVSHMEM_DISABLE_NVLS": "1"}.items():
    os.environ.setdefault(_k, _v)

NGPU = torch.cuda.device_count() if torch.cuda.is_available() else 0
WORLD = min(2, NGPU)
RANK_TIMEOUT_S = 240  # a hang fails the test instead of the suite

pytestmark = pytest.mark.skipif(WORLD == 0, reason="needs a GPU")


# ---- harness -------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank, world, port, body):
    device = torch.device("cuda", rank % NGPU)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            init_method=f"tcp://127.0.0.1:{port}", device_id=device)
    try:
        import torch.distributed._symmetric_memory as symm_mem
        import mori.allocator  # noqa: F401  (registers MORI)

        symm_mem.set_backend("MORI")
        body(rank, world, device, dist.group.WORLD.group_name)
        torch.cuda.synchronize()
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_ranks(body, world: int = WORLD) -> None:
    ctx = mp.start_processes(_rank_main, args=(world, _free_port(), body), nprocs=world,
                             join=False, start_method="spawn")
    deadline = time.monotonic() + RANK_TIMEOUT_S
    while not ctx.join(timeout=5):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"ranks still running after {RANK_TIMEOUT_S} s: a hang")


def _symm():
    import torch.distributed._symmetric_memory as symm_mem
    return symm_mem


def _mori():
    import mori.allocator
    return mori.allocator


try:
    import triton
    import triton.language as tl

    @triton.jit
    def _load_u64_table(table, out, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        words = tl.load(table.to(tl.pointer_type(tl.uint64)) + offs, mask=mask)
        tl.store(out + offs, words.to(tl.int64, bitcast=True), mask=mask)
except ImportError:
    triton = None


def _read_u64_table(ptr: int, n: int, device) -> list[int]:
    """n 64-bit words at device address ptr, read by a kernel of our own (the
    pointer-array idiom of torch's Triton kernels), not through mori."""
    assert triton is not None, "the caller skips without triton"
    out = torch.zeros(n, dtype=torch.int64, device=device)
    _load_u64_table[(1,)](ptr, out, n, BLOCK=max(16, triton.next_power_of_2(n)))
    return out.tolist()


# ---- bodies (module level: spawn pickles them by name) ---------------------

def _backend_and_shim(rank, world, device, group):
    symm_mem, mori = _symm(), _mori()
    assert symm_mem.get_backend(device) == "MORI"
    expected = os.environ.get("MORI_SYMM_SHIM") or ("hip" if torch.version.hip else "cuda")
    assert mori.shim_backend() == expected
    assert mori.signal_pad_supported() is True


def _peer_read_write(rank, world, device, group):
    symm_mem = _symm()
    n = 4096
    t = symm_mem.empty(n, dtype=torch.float32, device=device)
    hdl = symm_mem.rendezvous(t, group)
    assert (hdl.rank, hdl.world_size) == (rank, world)
    t.fill_(rank + 1)
    torch.cuda.synchronize()
    dist.barrier()
    for peer in range(world):
        assert torch.all(hdl.get_buffer(peer, (n,), torch.float32) == peer + 1), peer
    dist.barrier()
    for peer in range(world):  # element [rank] of every peer's buffer
        hdl.get_buffer(peer, (n,), torch.float32)[rank] = 100 + rank
    torch.cuda.synchronize()
    dist.barrier()
    expected = torch.full((n,), float(rank + 1), device=device)
    expected[:world] = torch.arange(world, dtype=torch.float32, device=device) + 100
    assert torch.equal(t, expected)


def _pointer_tables(rank, world, device, group):
    symm_mem = _symm()
    t = symm_mem.empty(1024, dtype=torch.float32, device=device)
    hdl = symm_mem.rendezvous(t, group)
    assert len(hdl.buffer_ptrs) == world and len(hdl.signal_pad_ptrs) == world
    # slot [rank] maps this rank's own memory again, inside the flat span
    t.fill_(rank + 0.5)
    assert torch.all(hdl.get_buffer(rank, (1024,), torch.float32) == rank + 0.5)
    assert _read_u64_table(hdl.buffer_ptrs_dev, world, device) == list(hdl.buffer_ptrs)
    assert _read_u64_table(hdl.signal_pad_ptrs_dev, world, device) == list(hdl.signal_pad_ptrs)


def _flat_span(rank, world, device, group):
    symm_mem, mori = _symm(), _mori()
    t = symm_mem.empty(1 << 20, dtype=torch.uint8, device=device)
    hdl = symm_mem.rendezvous(t, group)
    info = mori.window_info(hdl)
    assert info["stride"] > 0 and info["stride"] >= hdl.buffer_size
    assert list(hdl.buffer_ptrs) == [info["span"] + r * info["stride"] for r in range(world)]
    assert info["handle_type"] in ("fabric", "posix_fd")


def _direct_access(rank, world, device, group):
    symm_mem, mori = _symm(), _mori()
    t = symm_mem.empty(1024, dtype=torch.float32, device=device)
    hdl = symm_mem.rendezvous(t, group)
    # one host, so every peer is a load/store away
    assert mori.world_within_direct_access(hdl) is True


def _signal_pad(rank, world, device, group):
    symm_mem, mori = _symm(), _mori()
    t = symm_mem.empty(1024, dtype=torch.float32, device=device)
    hdl = symm_mem.rendezvous(t, group)
    pad_bytes = symm_mem.get_signal_pad_size()
    assert mori.window_info(hdl)["signal_pad_size"] == pad_bytes
    pad = hdl.get_signal_pad(rank)
    assert pad.dtype == torch.uint32 and pad.numel() == pad_bytes // 4
    assert torch.all(pad == 0)
    dist.barrier()
    peer, src = (rank + 1) % world, (rank - 1) % world
    hdl.get_signal_pad(peer)[rank] = 7 + rank
    torch.cuda.synchronize()
    dist.barrier()
    assert pad[src].item() == 7 + src
    dist.barrier()
    pad.zero_()  # torch's kernels expect zeroed pads
    torch.cuda.synchronize()
    dist.barrier()


def _signals_order_peer_writes(rank, world, device, group):
    symm_mem = _symm()
    n = 1 << 16
    t = symm_mem.empty(n, dtype=torch.float32, device=device)
    hdl = symm_mem.rendezvous(t, group)
    t.zero_()
    torch.cuda.synchronize()
    dist.barrier()
    peer, src = (rank + 1) % world, (rank - 1) % world
    for it in range(1, 21):
        # stream order: the write lands before the signal, the read after the wait
        hdl.get_buffer(peer, (n,), torch.float32).fill_(it * 10 + rank)
        hdl.put_signal(peer, channel=1)
        hdl.wait_signal(src, channel=1)
        got = t.clone()
        hdl.barrier(channel=0)  # nobody writes again before everybody has read
        assert torch.all(got == it * 10 + src), it
    for _ in range(50):
        for channel in range(4):
            hdl.barrier(channel=channel)
    torch.cuda.synchronize()


def _signal_bounds(rank, world, device, group):
    symm_mem = _symm()
    t = symm_mem.empty(1024, dtype=torch.float32, device=device)
    hdl = symm_mem.rendezvous(t, group)
    with pytest.raises(RuntimeError, match="out of range"):
        hdl.put_signal(world, channel=0)
    with pytest.raises(RuntimeError, match="out of range"):
        hdl.wait_signal(-1, channel=0)
    with pytest.raises(RuntimeError, match="out of range"):
        hdl.barrier(channel=symm_mem.get_signal_pad_size())


def _exact_input(numel, rank, device):
    # small integers: every summation order gives the same float32 result
    return (torch.arange(numel, device=device, dtype=torch.float32) % 13) + rank


def _one_shot_all_reduce(rank, world, device, group):
    symm_mem = _symm()
    numel = 1 << 16
    inp = symm_mem.empty(numel, dtype=torch.float32, device=device)
    symm_mem.rendezvous(inp, group)
    inp.copy_(_exact_input(numel, rank, device))
    ref = inp.clone()
    dist.all_reduce(ref)
    out = torch.ops.symm_mem.one_shot_all_reduce(inp, "sum", group)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


def _two_shot_all_reduce(rank, world, device, group):
    symm_mem = _symm()
    numel = 1 << 16
    inp = symm_mem.empty(numel, dtype=torch.float32, device=device)
    symm_mem.rendezvous(inp, group)
    inp.copy_(_exact_input(numel, rank, device))
    ref = inp.clone()
    dist.all_reduce(ref)
    torch.ops.symm_mem.two_shot_all_reduce_(inp, "sum", group)
    torch.testing.assert_close(inp, ref, rtol=0, atol=0)


def _mempool_interior_pointer(rank, world, device, group):
    symm_mem, mori = _symm(), _mori()
    pool = torch.cuda.MemPool(symm_mem.get_mempool_allocator(device))
    with torch.cuda.use_mem_pool(pool):
        a = torch.full((1024,), float(rank + 1), device=device)
        b = torch.full((1024,), float(10 * (rank + 1)), device=device)
    before = mori.stats()["rendezvous"]
    ha = symm_mem.rendezvous(a, group)
    hb = symm_mem.rendezvous(b, group)
    # two tensors, one block: one window, and b sits inside it
    assert mori.stats()["rendezvous"] - before == 1
    assert mori.window_info(ha)["span"] == mori.window_info(hb)["span"]
    assert hb.offset != 0
    assert hb.offset - ha.offset == b.data_ptr() - a.data_ptr()
    torch.cuda.synchronize()
    dist.barrier()
    for peer in range(world):
        remote = hb.get_buffer(peer, (1024,), torch.float32, storage_offset=hb.offset // 4)
        assert torch.all(remote == 10 * (peer + 1)), peer
        if hasattr(hb, "get_remote_tensor"):
            assert torch.all(hb.get_remote_tensor(peer, (1024,), torch.float32) == 10 * (peer + 1))
    torch.cuda.synchronize()
    dist.barrier()
    del ha, hb, a, b, pool


def _cached_rendezvous(rank, world, device, group):
    symm_mem, mori = _symm(), _mori()
    t = symm_mem.empty(4096, dtype=torch.float32, device=device)
    symm_mem.rendezvous(t, group)
    s0 = mori.stats()
    calls = 2000
    t0 = time.perf_counter()
    for _ in range(calls):
        symm_mem.rendezvous(t, group)
    dt = time.perf_counter() - t0
    s1 = mori.stats()
    assert s1["cache_hits"] - s0["cache_hits"] == calls
    assert s1["rendezvous"] == s0["rendezvous"]
    print(f"rank {rank}: cached rendezvous {dt / calls * 1e6:.2f} us/call", flush=True)


def _foreign_tensor(rank, world, device, group):
    symm_mem = _symm()
    plain = torch.empty(1024, device=device)
    assert symm_mem.rendezvous(plain, group) is None


def _default_group_from_allocation(rank, world, device, group):
    from torch._C._distributed_c10d import _SymmetricMemory
    t = _SymmetricMemory.empty_strided_p2p((256,), (1,), torch.float32, device, group)
    hdl = _SymmetricMemory.rendezvous(t)  # no group: the allocation's
    assert hdl.world_size == world
    untold = _SymmetricMemory.empty_strided_p2p((256,), (1,), torch.float32, device)
    with pytest.raises(RuntimeError, match="neither specified"):
        _SymmetricMemory.rendezvous(untold)


def _two_groups_one_block(rank, world, device, group):
    symm_mem, mori = _symm(), _mori()
    sub = dist.new_group(list(range(world)))
    t = symm_mem.empty(1024, dtype=torch.float32, device=device)
    h_world = symm_mem.rendezvous(t, group)
    h_sub = symm_mem.rendezvous(t, sub.group_name)
    assert mori.window_info(h_world)["group"] != mori.window_info(h_sub)["group"]
    t.fill_(rank)
    torch.cuda.synchronize()
    dist.barrier()
    for peer in range(world):
        assert torch.all(h_sub.get_buffer(peer, (1024,), torch.float32) == peer)
    h_sub.barrier(channel=0)


def _free_is_local(rank, world, device, group):
    from torch._C._distributed_c10d import _SymmetricMemory
    symm_mem, mori = _symm(), _mori()
    a = _SymmetricMemory.empty_strided_p2p((1024,), (1,), torch.float32, device)
    ha = symm_mem.rendezvous(a, group)
    blocks = mori.stats()["blocks"]
    if rank == 0:
        del ha, a  # only rank 0 frees; its peers keep theirs mapped
        assert mori.stats()["blocks"] == blocks - 1
    dist.barrier()
    b = _SymmetricMemory.empty_strided_p2p((1024,), (1,), torch.float32, device)
    hb = symm_mem.rendezvous(b, group)
    b.fill_(rank + 5)
    torch.cuda.synchronize()
    dist.barrier()
    for peer in range(world):
        assert torch.all(hb.get_buffer(peer, (1024,), torch.float32) == peer + 5)


def _release_all_empties_the_ledger(rank, world, device, group):
    symm_mem, mori = _symm(), _mori()
    t = symm_mem.empty(1 << 20, dtype=torch.uint8, device=device)
    hdl = symm_mem.rendezvous(t, group)
    assert mori.stats()["ledger_total"] > 0
    torch.cuda.synchronize()
    dist.barrier()
    mori.release_all()
    s = mori.stats()
    assert (s["blocks"], s["windows"], s["ledger_total"]) == (0, 0, 0), s
    assert mori.window_info(hdl)["live"] is False
    with pytest.raises(RuntimeError, match="gone"):
        hdl.barrier(channel=0)
    del hdl, t  # torch's free of a released block is ignored
    dist.barrier()


# ---- tests ----------------------------------------------------------------

def test_set_backend_selects_mori_on_the_runtime_shim():
    run_ranks(_backend_and_shim)


def test_get_buffer_reads_and_writes_peer_memory():
    run_ranks(_peer_read_write)


def test_buffer_ptrs_dev_is_a_device_array_of_peer_pointers():
    if triton is None:
        pytest.skip("needs triton to read a raw device array")
    run_ranks(_pointer_tables)


def test_buffer_ptrs_are_slots_of_one_flat_span():
    run_ranks(_flat_span)


def test_world_within_direct_access_on_one_host():
    run_ranks(_direct_access)


def test_signal_pad_is_zeroed_torch_sized_and_peer_writable():
    run_ranks(_signal_pad)


def test_put_signal_wait_signal_and_barrier_order_peer_writes():
    run_ranks(_signals_order_peer_writes)


def test_signal_calls_reject_rank_and_channel_out_of_range():
    run_ranks(_signal_bounds)


def test_one_shot_all_reduce_matches_nccl_all_reduce():
    run_ranks(_one_shot_all_reduce)


def test_two_shot_all_reduce_matches_nccl_all_reduce():
    run_ranks(_two_shot_all_reduce)


def test_mempool_tensors_rendezvous_at_their_interior_offset():
    run_ranks(_mempool_interior_pointer)


def test_cached_rendezvous_is_a_lookup():
    run_ranks(_cached_rendezvous)


def test_rendezvous_of_a_non_symmetric_tensor_returns_none():
    run_ranks(_foreign_tensor)


def test_rendezvous_without_group_uses_the_allocation_group():
    run_ranks(_default_group_from_allocation)


def test_one_block_rendezvouses_with_two_groups():
    run_ranks(_two_groups_one_block)


def test_free_is_local_to_the_freeing_rank():
    run_ranks(_free_is_local)


def test_release_all_empties_the_shim_ledger():
    run_ranks(_release_all_empties_the_ledger)


_EXIT_SCRIPT = textwrap.dedent("""
    import os, torch, torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    import mori.allocator
    symm_mem.set_backend("MORI")
    t = symm_mem.empty(1 << 20, dtype=torch.uint8, device=device)
    hdl = symm_mem.rendezvous(t, dist.group.WORLD.group_name)
    hdl.barrier(channel=0)
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()
    print("rank", rank, "leaving with", mori.allocator.stats()["windows"], "window(s) live")
""")


def test_teardown_at_exit_leaves_no_leak_and_no_error():
    port = str(_free_port())
    procs = []
    for rank in range(WORLD):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=port, MORI_SHIM_LEDGER_REPORT="1")
        env.pop("MORI_SYMM_TEARDOWN", None)
        procs.append(subprocess.Popen([sys.executable, "-c", _EXIT_SCRIPT], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for rank, p in enumerate(procs):
        out, err = p.communicate(timeout=RANK_TIMEOUT_S)
        print(out, err, sep="\n")
        assert p.returncode == 0, f"rank {rank} exited {p.returncode}:\n{err}"
        assert "leaving with 1 window(s) live" in out
        assert "mori shim ledger: 0 leaks" in err
        assert "teardown at exit failed" not in err
