"""The first allocation of a fresh process, MORI against torch's built-in
backend, on a GPU host (issue 33: compare.py's "first alloc").

Each of --procs rounds starts one fresh process per backend (the order
alternating), which brings torch's context up, then times three
allocations of 1 MiB through torch's own entry point (empty_strided_p2p,
as compare.py does), each to the end of its device work.  A last MORI
process runs with MORI_SYMM_DEBUG=INFO: the adapter's and the core's own
figures for that first allocation (the shim's bring-up, the handle-type
probe, each step).  With nsys on the PATH, one more process per backend
runs under it and the runtime and driver calls inside the first
allocation (an NVTX range) are listed with their times: the built-in's
calls beside MORI's.

    python3 tests/gpu/first_alloc.py [--procs N] [--out DIR]

Prints a table of medians; writes first_alloc.json (and the nsys reports)
under --out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time

BACKENDS = ("CUDA", "MORI")
MIB = 1 << 20


def child(backend: str, nvtx: bool) -> None:
    import torch
    import torch.distributed._symmetric_memory as symm_mem
    from torch._C._distributed_c10d import _SymmetricMemory

    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    if backend == "MORI":
        import mori.allocator  # noqa: F401  (registers "MORI")
    symm_mem.set_backend(backend)
    torch.zeros(1, device=device).add_(1)  # the context is up before any timing
    torch.cuda.synchronize()
    keep, times = [], []
    for i in range(3):
        torch.cuda.synchronize()
        if nvtx and i == 0:
            torch.cuda.nvtx.range_push("first_alloc")
        t0 = time.perf_counter()
        keep.append(_SymmetricMemory.empty_strided_p2p((MIB,), (1,), torch.uint8, device))
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
        if nvtx and i == 0:
            torch.cuda.nvtx.range_pop()
    print(json.dumps({"backend": backend, "ms": times}), flush=True)
    keep.clear()


def run_child(backend: str, env_extra: dict | None = None, prefix: list | None = None):
    env = dict(os.environ, **(env_extra or {}))
    cmd = (prefix or []) + [sys.executable, os.path.abspath(__file__), "--child", backend]
    if prefix:
        cmd.append("--nvtx")
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("{")), None)
    if p.returncode != 0 or line is None:
        raise RuntimeError(f"{backend}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    return json.loads(line), p.stderr


def nsys_calls(path: str) -> list[tuple[str, float]]:
    """(name, us) of every CUDA runtime/driver call inside the first_alloc
    NVTX range, in order."""
    db = sqlite3.connect(path)
    cur = db.cursor()
    tables = {r[0] for r in cur.execute("select name from sqlite_master where type='table'")}
    cols = [r[1] for r in cur.execute("pragma table_info(NVTX_EVENTS)")]
    text = "coalesce(text, (select value from StringIds where id = textId))" \
        if "textId" in cols else "text"
    rng = cur.execute(f"select start, end from NVTX_EVENTS where {text} = 'first_alloc'").fetchone()
    if rng is None:
        return []
    out = []
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        if table not in tables:
            continue
        for start, end, name in cur.execute(
                f"select r.start, r.end, s.value from {table} r join StringIds s on s.id = r.nameId "
                "where r.start >= ? and r.end <= ? order by r.start", rng):
            out.append((start, name, (end - start) / 1e3))
    out.sort()
    total = (rng[1] - rng[0]) / 1e3
    return [(n, us) for _, n, us in out] + [("(the NVTX range)", total)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child")
    ap.add_argument("--nvtx", action="store_true")
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--out", default=os.environ.get("OUT", "first-alloc"))
    a = ap.parse_args()
    if a.child:
        child(a.child, a.nvtx)
        return 0
    os.makedirs(a.out, exist_ok=True)
    res = {b: [] for b in BACKENDS}
    for i in range(a.procs):
        order = BACKENDS if i % 2 == 0 else BACKENDS[::-1]
        for b in order:
            r, _ = run_child(b)
            res[b].append(r["ms"])
            print(f"round {i + 1}/{a.procs} {b}: " + " ".join(f"{v:.3f}" for v in r["ms"]) + " ms",
                  flush=True)
    med = {b: [statistics.median(x[k] for x in res[b]) for k in range(3)] for b in BACKENDS}
    print(f"\n| alloc (ms, median of {a.procs} processes) | built-in | MORI | MORI / built-in |")
    print("|---|---:|---:|---:|")
    for k, what in enumerate(("first", "second", "third")):
        print(f"| {what} | {med['CUDA'][k]:.3f} | {med['MORI'][k]:.3f} | "
              f"{med['MORI'][k] / med['CUDA'][k]:.2f} |")
    _, err = run_child("MORI", {"MORI_SYMM_DEBUG": "INFO"})
    info = [ln for ln in err.splitlines() if "INFO" in ln and ("alloc" in ln or "probe" in ln
                                                            or "shim" in ln)]
    print("\nMORI's own figures for a first allocation (MORI_SYMM_DEBUG=INFO):")
    for ln in info:
        print("  " + ln)
    report = {"median_ms": med, "runs_ms": res, "mori_info": info}
    nsys = shutil.which("nsys")
    if nsys is None:
        print("\nnsys: not on the PATH; no call list")
    for b in BACKENDS if nsys else ():
        rep = os.path.join(a.out, f"first_alloc_{b}")
        try:
            run_child(b, prefix=[nsys, "profile", "-t", "cuda,nvtx", "--force-overwrite", "true",
                                 "--export", "sqlite", "-o", rep])
            calls = nsys_calls(rep + ".sqlite")
        except Exception as e:  # noqa: BLE001  (a profile that fails is reported, not fatal)
            print(f"\nnsys {b}: {type(e).__name__}: {str(e)[-800:]}")
            continue
        report[f"nsys_{b}"] = calls
        print(f"\n{b}: the calls inside the first allocation (nsys, us):")
        for name, us in calls:
            print(f"  {us:10.1f}  {name}")
    with open(os.path.join(a.out, "first_alloc.json"), "w") as f:
        json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
