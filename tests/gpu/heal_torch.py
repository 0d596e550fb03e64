"""Kill and heal with torch, on a GPU host: python3 tests/gpu/heal_torch.py.

The parent starts WORLD rank processes (this script with --rank) that share
a FileStore and a group set with set_group_info; each allocates a MORI
symmetric tensor, fills it with a pattern of its rank and life, rendezvouses
and captures a CUDA graph of a barrier.  Then, ITERS times: the ranks pass
an eager barrier and replay their graph; the iteration's victim kills itself
with SIGKILL (mid-barrier on odd iterations: after its barrier was enqueued);
the parent starts its replacement (MORI_SYMM_REPLACEMENT=1), which
allocates, fills its own pattern, rendezvouses (joining the heal) and
captures its graph; every survivor calls mori_symm.heal(group, victim).
After each heal every rank checks: its handle's buffer_ptrs unchanged (the
survivors), every rank's data byte for byte, an eager barrier and a graph
replay among all.  At the end each process frees everything and checks the
shim's ledger at 0.  Prints "heal_torch: PASS iterations=N heal_ms=..." or
FAIL with the first problem; results under $OUT.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

WORLD = int(os.environ.get("HEAL_WORLD", "4"))
ITERS = int(os.environ.get("HEAL_ITERS", "20"))
SIZE = 1 << 20
GROUP = "heal"
TIMEOUT = 60.0


def pattern(torch, rank: int, life: int, device):
    n = SIZE
    base = torch.arange(n, dtype=torch.int32, device=device) % 251
    return ((base + 7 * rank + 13 * life) % 256).to(torch.uint8)


def rank_main(rank: int, life: int, store_dir: str, out: str) -> int:
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    import mori.allocator  # noqa: F401  (registers MORI)
    import mori_symm

    torch.cuda.set_device(0)
    device = torch.device("cuda", 0)
    store = dist.FileStore(os.path.join(store_dir, "store"), -1)
    torch._C._distributed_c10d._SymmetricMemory.set_group_info(GROUP, rank, WORLD, store)
    symm_mem.set_backend("MORI")
    if life > 0:
        mori_symm.set_replacement(True)
    store.set(f"life/{rank}", str(life))

    t = symm_mem.empty(SIZE, dtype=torch.uint8, device=device)
    t.copy_(pattern(torch, rank, life, device))
    torch.cuda.synchronize()
    hdl = symm_mem.rendezvous(t, GROUP)
    ptrs = list(hdl.buffer_ptrs)
    stream = torch.cuda.Stream()
    hdl.barrier(channel=0, timeout_ms=10000)  # readies the signals outside a capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        hdl.barrier(channel=1, timeout_ms=10000)
    torch.cuda.synchronize()

    def lives():
        return [int(store.get(f"life/{p}")) for p in range(WORLD)]

    def check(tag: str) -> str | None:
        if rank != int(store.get("victim")) and list(hdl.buffer_ptrs) != ptrs:
            return f"{tag}: buffer_ptrs moved"
        hdl.barrier(channel=0, timeout_ms=10000)
        torch.cuda.synchronize()
        for p, lp in enumerate(lives()):
            peer = hdl.get_buffer(p, (SIZE,), torch.uint8)
            if not torch.equal(peer, pattern(torch, p, lp, device)):
                return f"{tag}: rank {p}'s data (life {lp}) differs"
        graph.replay()
        torch.cuda.synchronize()
        hdl.barrier(channel=0, timeout_ms=10000)
        torch.cuda.synchronize()
        return None

    problem = None
    start = int(store.get(f"start/{rank}/{life}")) if life > 0 else 0
    heal_ms = []
    if life > 0:  # the check after the heal that brought this process in
        try:
            problem = check(f"iteration {start - 1} (replacement)")
        except RuntimeError as e:
            problem = f"iteration {start - 1} (replacement): {e}"
        if problem is None:
            store.add(f"done/{start - 1}", 1)
    for i in range(start, ITERS if problem is None else start):
        victim = int(store.get(f"victim/{i}"))
        store.set("victim", str(victim))
        hdl.barrier(channel=0, timeout_ms=10000)
        torch.cuda.synchronize()
        if rank == victim:
            if i % 2:
                hdl.barrier(channel=2, timeout_ms=10000)  # enqueued; nobody answers
            os.kill(os.getpid(), signal.SIGKILL)
        t0 = time.monotonic()
        try:
            n = mori_symm.heal(GROUP, victim)
        except RuntimeError as e:
            problem = f"iteration {i}: heal: {e}"
            break
        heal_ms.append((time.monotonic() - t0) * 1e3)
        if n != 1:
            problem = f"iteration {i}: heal healed {n} windows, expected 1"
        # the replacement's first barrier, before its capture
        hdl.barrier(channel=0, timeout_ms=10000)
        torch.cuda.synchronize()
        if problem is None:
            try:
                problem = check(f"iteration {i}")
            except RuntimeError as e:
                problem = f"iteration {i}: {e}"
        if problem:
            break
        store.add(f"done/{i}", 1)
    del graph, hdl, t
    torch.cuda.synchronize()
    mori_symm.release_all()
    ledger = mori_symm.stats()["ledger_total"]
    if problem is None and ledger != 0:
        problem = f"ledger_total {ledger} after release_all"
    result = {"rank": rank, "life": life, "problem": problem, "heal_ms": heal_ms}
    with open(os.path.join(out, f"rank{rank}.life{life}.json"), "w") as f:
        json.dump(result, f)
    os._exit(0 if problem is None else 1)


def parent() -> int:
    out = os.environ.get("OUT", os.path.join(os.getcwd(), "gpu-results", "heal_torch"))
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES="1",
               NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
               NVSHMEM_DISABLE_NVLS="1")
    import torch.distributed as dist

    store_dir = tempfile.mkdtemp(prefix="heal_torch.")
    store = dist.FileStore(os.path.join(store_dir, "store"), -1)
    victims = [(i % (WORLD - 1)) + 1 if i % 4 else 0 for i in range(ITERS)]
    for i, v in enumerate(victims):
        store.set(f"victim/{i}", str(v))

    def start(rank: int, life: int):
        e = dict(env)
        if life > 0:
            e["MORI_SYMM_REPLACEMENT"] = "1"
        return subprocess.Popen([sys.executable, __file__, "--rank", str(rank), "--life",
                                 str(life), "--dir", store_dir, "--out", out], env=e)

    procs = {r: start(r, 0) for r in range(WORLD)}
    lives = {r: 0 for r in range(WORLD)}
    t_start = time.monotonic()
    failed = None
    for i, v in enumerate(victims):
        deadline = time.monotonic() + TIMEOUT
        while procs[v].poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if procs[v].returncode != -signal.SIGKILL:
            failed = f"iteration {i}: rank {v} did not die by SIGKILL ({procs[v].returncode})"
            break
        lives[v] += 1
        store.set(f"start/{v}/{lives[v]}", str(i + 1))
        procs[v] = start(v, lives[v])
        # the next iteration starts once every rank finished this one
        while True:
            try:
                if store.add(f"done/{i}", 0) >= WORLD:
                    break
            except Exception:  # noqa: BLE001
                pass
            if time.monotonic() > deadline + TIMEOUT or any(
                    p.poll() not in (None, 0) for r, p in procs.items()):
                failed = failed or f"iteration {i}: the ranks did not all finish it"
                break
            time.sleep(0.01)
        if failed:
            break
    for p in procs.values():
        try:
            p.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            p.kill()
            failed = failed or "a rank hung at the end"
    results = []
    for name in sorted(os.listdir(out)):
        if name.endswith(".json"):
            with open(os.path.join(out, name)) as f:
                results.append(json.load(f))
    problems = [r["problem"] for r in results if r["problem"]]
    heal_ms = sorted(x for r in results for x in r["heal_ms"])
    median = heal_ms[len(heal_ms) // 2] if heal_ms else -1
    bad_exit = [r for r, p in procs.items() if p.returncode != 0]
    if failed or problems or bad_exit:
        print(f"heal_torch: FAIL {failed or ''} {problems[:4]} exits={bad_exit}", flush=True)
        return 1
    print(f"heal_torch: PASS world={WORLD} iterations={ITERS} heals={len(heal_ms)} "
          f"heal_ms_median={median:.1f} heal_ms_max={heal_ms[-1]:.1f} "
          f"wall_s={time.monotonic() - t_start:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    if "--rank" in sys.argv:
        a = sys.argv
        sys.exit(rank_main(int(a[a.index("--rank") + 1]), int(a[a.index("--life") + 1]),
                           a[a.index("--dir") + 1], a[a.index("--out") + 1]))
    sys.exit(parent())
