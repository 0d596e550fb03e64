"""What is MORI's own under torch, beyond torch's contract (which
conformance/ checks side by side with torch's built-in backend): the shim
torch's build selects, the flat span that window_info() exposes, the core's
counters (one window per block, cached rendezvous), the window reference a
handle holds, frees and allocations on other threads while a rendezvous
waits, and teardown (release_all, and at exit with 0 leaks).

Each test runs its body in WORLD fresh processes (2 on a 2-GPU host, 1 on a
single GPU), started with torch.multiprocessing spawn over an NCCL group; a
failing rank's traceback fails the test.  Run on a GPU host by
tests/gpu/torch_suite.sh, never in CI.  Figures are printed, never asserted.
"""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys
import textwrap
import threading
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


def _p2p():
    from torch._C._distributed_c10d import _SymmetricMemory
    return _SymmetricMemory


# ---- bodies (module level: spawn pickles them by name) ---------------------

def _shim_of_the_build(rank, world, device, group):
    symm_mem, mori = _symm(), _mori()
    assert symm_mem.get_backend(device) == "MORI"
    expected = os.environ.get("MORI_SYMM_SHIM") or ("hip" if torch.version.hip else "cuda")
    assert mori.shim_backend() == expected


def _flat_span(rank, world, device, group):
    symm_mem, mori = _symm(), _mori()
    t = symm_mem.empty(1 << 20, dtype=torch.uint8, device=device)
    hdl = symm_mem.rendezvous(t, group)
    info = mori.window_info(hdl)
    span, stride = info["span"], info["stride"]
    assert stride >= hdl.buffer_size
    # Peers are slots of one span; the own entry is the tensor's own address
    # (torch's contract), and the own slot maps the same memory again.
    for r in range(world):
        want = t.data_ptr() - hdl.offset if r == rank else span + r * stride
        assert hdl.buffer_ptrs[r] == want, (r, hdl.buffer_ptrs[r], want)
    t.fill_(rank + 1)
    torch.cuda.synchronize()

    class Slot:  # the own slot of the span, through torch alone
        __cuda_array_interface__ = {"shape": (16,), "typestr": "|u1",
                                    "data": (span + rank * stride, False), "version": 3}

    slot = torch.as_tensor(Slot(), device=device)
    assert slot.eq(rank + 1).all().item(), "the own slot of the span is not the tensor's memory"
    assert info["handle_type"] in ("fabric", "posix_fd")


def _mempool_tensors_share_one_window(rank, world, device, group):
    symm_mem, mori = _symm(), _mori()
    pool = torch.cuda.MemPool(symm_mem.get_mempool_allocator(device))
    with torch.cuda.use_mem_pool(pool):
        a = torch.full((1024,), float(rank + 1), device=device)
        b = torch.full((1024,), float(10 * (rank + 1)), device=device)
    before = mori.stats()["rendezvous"]
    ha = symm_mem.rendezvous(a, group)
    hb = symm_mem.rendezvous(b, group)
    same_block = mori.window_info(ha)["span"] == mori.window_info(hb)["span"]
    # one block, one window: a single collective rendezvous
    assert mori.stats()["rendezvous"] - before == (1 if same_block else 2)
    print(f"rank {rank}: MemPool tensors in one block: {same_block}", flush=True)
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


def _held(mori):
    """What the runtime holds for this process's blocks and windows: the
    registry less what keeping warm keeps for the next rendezvous."""
    s = mori.stats()
    return s["ledger_total"] - s["warm"]


def _handle_holds_the_window(rank, world, device, group):
    mori = _mori()
    before = _held(mori)
    t = _p2p().empty_strided_p2p((1 << 20,), (1,), torch.uint8, device, group)
    hdl = _p2p().rendezvous(t)
    held = _held(mori)
    assert held > before
    del t
    gc.collect()
    # torch freed the tensor; the handle's reference keeps every resource
    assert _held(mori) == held
    assert mori.window_info(hdl)["live"] is True
    hdl.barrier(channel=0)
    torch.cuda.synchronize()
    dist.barrier()
    del hdl
    gc.collect()
    torch.cuda.synchronize()
    dist.barrier()
    # the last owner let go: the block and its window are released
    after = _held(mori)
    print(f"rank {rank}: ledger {before} -> {held} with a handle -> {after} after it", flush=True)
    assert after == before, (before, held, after)


def _lone_windows_are_kept_warm(rank, world, device, group):
    """The adapter keeps warm (MORI_SYMM_KEEP_WARM unset): after each last
    free of a process whose windows come one at a time, all that stays in
    the registry is what is kept for the next allocation and rendezvous:
    the freed block (its handle, reservation and mapping), the device-table
    chunk and (on the fd path) the exported fd.  The next allocation of the
    same size takes the block back, at the same address, zeroed over what
    the last round wrote."""
    mori = _mori()
    assert mori.stats()["warm"] == 0
    kept = None
    for i in range(3):
        t = _p2p().empty_strided_p2p((1 << 20,), (1,), torch.uint8, device, group)
        if kept is not None:
            assert t.data_ptr() == kept, (hex(t.data_ptr()), hex(kept))
            assert int(t.count_nonzero()) == 0, "a block taken back was not zeroed"
        t.fill_(i + 1)
        hdl = _p2p().rendezvous(t)
        hdl.barrier(channel=0)
        torch.cuda.synchronize()
        dist.barrier()
        kept = t.data_ptr()
        del t, hdl
        gc.collect()
        torch.cuda.synchronize()
        dist.barrier()
        s = mori.stats()
        print(f"rank {rank}: after the last free: warm {s['warm']}, registry "
              f"{s['ledger_total']}", flush=True)
        assert s["ledger_device_allocs"] == 1 and s["ledger_handles"] == 1, s
        assert s["warm"] >= 5 - (s["ledger_exported_fds"] == 0), s
        assert s["ledger_total"] == s["warm"], s


def _frees_do_not_wait_for_a_rendezvous(rank, world, device, group):
    """torch frees from storage deleters on any thread: while rank 0's
    rendezvous waits for rank 1, another thread of rank 0 allocates, frees,
    looks up and rendezvouses (cached).  Rank 1 joins only after that thread
    is done, so a free that waited for the rendezvous would deadlock (and
    fail here by its timeout) instead of finishing."""
    symm_mem, p2p = _symm(), _p2p()
    store = dist.distributed_c10d._get_default_store()
    ready = symm_mem.empty(64, device=device)
    ready_hdl = symm_mem.rendezvous(ready, group)
    pending = symm_mem.empty(1 << 20, dtype=torch.uint8, device=device)
    if rank != 0:
        store.wait(["mori_test/other_thread_done"])
        symm_mem.rendezvous(pending, group)
        return
    done, errors = threading.Event(), []

    def other_thread():
        try:
            torch.cuda.set_device(device)
            for _ in range(5):
                x = p2p.empty_strided_p2p((1 << 20,), (1,), torch.uint8, device, group)
                if hasattr(symm_mem, "is_symm_mem_tensor"):
                    assert symm_mem.is_symm_mem_tensor(x)
                del x  # torch's storage deleter: MoriAllocator::free
            assert symm_mem.rendezvous(ready, group).buffer_ptrs == ready_hdl.buffer_ptrs
            done.set()
            store.set("mori_test/other_thread_done", "1")
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    worker = threading.Thread(target=other_thread, daemon=True)
    worker.start()
    symm_mem.rendezvous(pending, group)  # waits for rank 1, which waits for the thread
    worker.join(timeout=60)
    assert not errors, errors
    assert done.is_set(), "the other thread's alloc/free/lookup waited for the rendezvous"


def _free_is_local(rank, world, device, group):
    symm_mem, mori, p2p = _symm(), _mori(), _p2p()
    a = p2p.empty_strided_p2p((1024,), (1,), torch.float32, device)
    ha = symm_mem.rendezvous(a, group)
    assert ha.world_size == world
    blocks = mori.stats()["blocks"]
    if rank == 0:
        del ha, a  # only rank 0 frees; its peers keep theirs mapped
        gc.collect()
        assert mori.stats()["blocks"] == blocks - 1
    dist.barrier()
    b = p2p.empty_strided_p2p((1024,), (1,), torch.float32, device)
    hb = symm_mem.rendezvous(b, group)
    b.fill_(rank + 5)
    torch.cuda.synchronize()
    dist.barrier()
    for peer in range(world):
        assert torch.all(hb.get_buffer(peer, (1024,), torch.float32) == peer + 5)


def _alloc_zeroes_on_the_current_stream(rank, world, device, group):
    symm_mem, p2p = _symm(), _p2p()
    held, other = torch.cuda.Stream(device), torch.cuda.Stream(device)
    # The fill kernel's first launch loads its module, which waits for the
    # whole device (lazy loading): done here, before the stream is held.
    with torch.cuda.stream(other):
        torch.empty(16, dtype=torch.uint8, device=device).fill_(7)
    other.synchronize()
    with torch.cuda.stream(held):
        torch.cuda._sleep(int(5e8))  # the current stream is busy for a while
        t = p2p.empty_strided_p2p((1 << 20,), (1,), torch.uint8, device)
    # The allocation blocked the host on no device work, and its zeroing is
    # queued on the current stream, as torch's backend zeroes: a write on
    # another stream before that stream gets there is overwritten.
    assert not held.query(), "the allocation waited for the current stream"
    with torch.cuda.stream(other):
        t.fill_(7)
    other.synchronize()
    held.synchronize()
    assert int(t.max()) == 0, "the block was zeroed before the current stream got there"
    # The first rendezvous waits for that zeroing; the block is usable after it.
    with torch.cuda.stream(held):
        torch.cuda._sleep(int(2e8))
        u = p2p.empty_strided_p2p((4096,), (1,), torch.uint8, device)
    hdl = symm_mem.rendezvous(u, group)
    u.fill_(rank + 1)
    hdl.barrier(channel=0)
    torch.cuda.synchronize()
    assert torch.all(hdl.get_buffer(rank, (4096,), torch.uint8) == rank + 1)
    del t


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
    with pytest.raises(RuntimeError, match="release_all"):
        hdl.barrier(channel=0)
    del hdl, t  # the handle holds nothing now; torch's free of a released block is ignored
    dist.barrier()


# ---- tests ----------------------------------------------------------------

def test_set_backend_uses_the_shim_of_torchs_build():
    run_ranks(_shim_of_the_build)


def test_peers_are_slots_of_one_flat_span_and_the_own_entry_is_the_tensor():
    run_ranks(_flat_span)


def test_mempool_tensors_of_one_block_share_one_window():
    run_ranks(_mempool_tensors_share_one_window)


def test_cached_rendezvous_is_a_lookup():
    run_ranks(_cached_rendezvous)


def test_a_handle_keeps_its_window_after_the_tensor_is_freed():
    run_ranks(_handle_holds_the_window)


@pytest.mark.skipif(WORLD < 2, reason="needs a peer to wait for")
def test_frees_on_another_thread_do_not_wait_for_a_rendezvous():
    run_ranks(_frees_do_not_wait_for_a_rendezvous)


@pytest.mark.skipif(os.environ.get("MORI_SYMM_KEEP_WARM", "") != "",
                    reason="MORI_SYMM_KEEP_WARM is set: the adapter leaves it to the variable")
def test_lone_windows_are_kept_warm():
    run_ranks(_lone_windows_are_kept_warm)


def test_free_is_local_to_the_freeing_rank():
    run_ranks(_free_is_local)


def test_alloc_zeroes_on_the_current_stream_without_blocking_the_host():
    run_ranks(_alloc_zeroes_on_the_current_stream)


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
        assert "mori shim registry: 0 leaks" in err
        assert "teardown at exit failed" not in err
