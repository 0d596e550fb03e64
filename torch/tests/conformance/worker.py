"""worker.py - one rank of a conformance world: selects the backend (torch's
built-in by default, "MORI" with import mori.allocator + set_backend), runs
the named checks in order with a gloo barrier between them, and keeps its
state in a JSON file that the driver (run.py) reads while it runs: which
check is running since when (so a hang is seen), and every result so far
(so a world that dies still reports).  A check after which the CUDA context
is unusable ends the process (exit 2); the driver starts a new world after it.

    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \\
    python worker.py --backend mori --kind main --checks a,b --state s.json
"""

from __future__ import annotations

import faulthandler

# A crash (SIGSEGV, SIGABRT, a C++ terminate) prints every thread's Python
# stack into this rank's log before the process dies; run.py also sets
# PYTHONFAULTHANDLER=1 and TORCH_SHOW_CPP_STACKTRACES=1.
faulthandler.enable(all_threads=True)

import argparse  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from datetime import timedelta  # noqa: E402

MiB = 1 << 20
START_BUDGET_S = 240    # interpreter, torch, NCCL and the backend
BARRIER_BUDGET_S = 300  # waiting for the slowest rank's check (a check's own budget is less)
PROBE_BUDGET_S = 30     # the synchronize that tells whether the context survived


class State:
    """This rank's file: written whole and renamed into place, so the driver
    never reads half of it."""

    def __init__(self, path: str):
        self.path = path
        self.data = {"pid": os.getpid(), "results": {}, "timings": None, "running": None,
                     "since": time.time(), "budget": START_BUDGET_S, "done": False, "notes": []}
        self.flush()

    def flush(self) -> None:
        tmp = f"{self.path}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f)
        os.replace(tmp, self.path)

    def running(self, label: str, budget: float) -> None:
        self.data.update(running=label, since=time.time(), budget=budget)
        self.flush()

    def result(self, name: str, res: dict) -> None:
        self.data["results"][name] = res
        self.data["running"] = None
        self.flush()

    def note(self, text: str) -> None:
        self.data["notes"].append(text)
        self.flush()


def run_one(chk, ctx, skip_type) -> dict:
    ctx.info = {}
    t0 = time.perf_counter()
    status, message, tb = "pass", "", ""
    try:
        chk.fn(ctx)
    except skip_type as e:
        status, message = "skip", str(e)
    except Exception as e:  # noqa: BLE001 - every failure is a result
        status, message, tb = "fail", f"{type(e).__name__}: {e}", traceback.format_exc()
    return {"status": status, "message": message[:2000], "traceback": tb[-4000:],
            "seconds": round(time.perf_counter() - t0, 3), "info": ctx.info}


def context_usable(torch, device) -> bool:
    try:
        torch.cuda.synchronize()
        return torch.ones(1, device=device).add_(1).item() == 2
    except Exception:  # noqa: BLE001
        return False


def measure(ctx, symm_mem, backend: str) -> dict:
    """The control-path figures, first thing in a fresh process: first
    allocation, first rendezvous (both ranks start it together), a second
    new rendezvous, cached rendezvous from Python, and the allocation of
    1 MiB (median, synchronized)."""
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import _SymmetricMemory

    out: dict = {}
    dist.barrier(group=ctx.ctrl)
    t0 = time.perf_counter()
    t = symm_mem.empty(MiB, dtype=torch.uint8, device=ctx.device)
    torch.cuda.synchronize()
    out["first_alloc_ms"] = (time.perf_counter() - t0) * 1e3
    dist.barrier(group=ctx.ctrl)
    t0 = time.perf_counter()
    symm_mem.rendezvous(t, ctx.group_name)
    out["first_rendezvous_ms"] = (time.perf_counter() - t0) * 1e3
    if backend == "mori":
        import mori.allocator
        out["mori_first_rendezvous_phases_us"] = mori.allocator.last_rendezvous()
    t2 = symm_mem.empty(MiB, dtype=torch.uint8, device=ctx.device)
    torch.cuda.synchronize()
    dist.barrier(group=ctx.ctrl)
    t0 = time.perf_counter()
    symm_mem.rendezvous(t2, ctx.group_name)
    out["second_rendezvous_ms"] = (time.perf_counter() - t0) * 1e3
    if backend == "mori":
        out["mori_second_rendezvous_phases_us"] = mori.allocator.last_rendezvous()
    batches = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(2000):
            symm_mem.rendezvous(t, ctx.group_name)
        batches.append((time.perf_counter() - t0) / 2000 * 1e6)
    out["cached_rendezvous_us"] = statistics.median(batches)
    out["cached_rendezvous_us_batches"] = batches
    samples, keep = [], []
    for _ in range(30):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        keep.append(_SymmetricMemory.empty_strided_p2p((MiB,), (1,), torch.uint8, ctx.device,
                                                       group_name=ctx.group_name))
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) * 1e3)
    del keep
    out["alloc_1mib_ms"] = statistics.median(samples)
    out["alloc_1mib_ms_min"] = min(samples)
    torch.cuda.synchronize()
    dist.barrier(group=ctx.ctrl)
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--backend", choices=("builtin", "mori"), required=True)
    p.add_argument("--kind", choices=("main", "overlap", "alone"), required=True)
    p.add_argument("--checks", required=True, help="comma-separated check names, in order")
    p.add_argument("--state", required=True, help="this rank's state file")
    p.add_argument("--timings", action="store_true", help="measure the control path first")
    args = p.parse_args()
    state = State(args.state)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    started = time.perf_counter()

    import torch
    import torch.distributed as dist

    ngpu = torch.cuda.device_count()
    device = torch.device("cuda", rank % ngpu)
    torch.cuda.set_device(device)
    nccl = args.kind != "overlap" and ngpu >= world  # NCCL refuses two ranks on one GPU
    if nccl:
        dist.init_process_group("nccl", device_id=device, timeout=timedelta(seconds=300))
    else:
        dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    ctrl = dist.new_group(backend="gloo", timeout=timedelta(seconds=900))

    import torch.distributed._symmetric_memory as symm_mem
    if args.backend == "mori":
        t0 = time.perf_counter()
        importlib.import_module("mori.allocator")  # registers "MORI"
        symm_mem.set_backend("MORI")
        state.note(f"import mori.allocator + set_backend: {(time.perf_counter() - t0) * 1e3:.1f} ms")

    checks = importlib.import_module(os.environ.get("MORI_CONFORMANCE_CHECKS", "checks"))
    ctx = checks.Ctx(args.backend, args.kind, rank, world, device, dist.group.WORLD, ctrl, nccl)
    state.note(f"world ready after {time.perf_counter() - started:.1f} s")
    if args.timings:
        state.running("__timings__", 120)
        try:
            state.data["timings"] = measure(ctx, symm_mem, args.backend)
        except Exception as e:  # noqa: BLE001
            state.data["timings"] = {"error": f"{type(e).__name__}: {e}"}
        state.data["running"] = None
        state.flush()

    for name in [n for n in args.checks.split(",") if n]:
        chk = checks.by_name(name)
        state.running("__barrier__", BARRIER_BUDGET_S)
        dist.barrier(group=ctrl)
        state.running(name, chk.budget_s)
        res = run_one(chk, ctx, checks.Skip)
        state.result(name, res)
        if ctx.ends_process:
            # The check may have left the CUDA context unusable (torch's
            # negative tests leave the same way): no probe, no teardown.
            print(f"[conformance rank {rank}] {name}: {res['status']}, leaving as the check "
                  "asked", file=sys.stderr, flush=True)
            sys.stderr.flush()
            os._exit(0)
        if res["status"] == "fail":
            print(f"[conformance rank {rank}] {name} failed:\n{res['traceback']}", file=sys.stderr,
                  flush=True)
            state.running("__probe__", PROBE_BUDGET_S)
            if not context_usable(torch, device):
                state.note(f"the CUDA context is unusable after {name}; this world ends")
                state.data["running"] = None
                state.flush()
                os._exit(2)
            state.data["running"] = None
            state.flush()

    state.running("__barrier__", BARRIER_BUDGET_S)
    dist.barrier(group=ctrl)
    state.data.update(done=True, running=None)
    state.flush()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
