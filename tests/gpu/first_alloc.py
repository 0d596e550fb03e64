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

    python3 tests/gpu/first_alloc.py [--procs N] [--out DIR] [--fi LIBFAULTINJECT] [--lib LIBDIR]

With --lib, first the driver's own answer to a fabric cuMemCreate beside
the cuda backend's (which refuses one without asking the driver where no
IMEX channel is there to open): they must agree, else the exit status is 1.

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

        symm_mem.set_backend(backend)  # the built-in is the default
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


def fabric_oracle(libdir: str) -> int:
    """The driver's own answer to a fabric cuMemCreate beside the cuda
    backend's, which refuses one without asking when no IMEX channel is
    there to open: they must agree (CUDA_ERROR_NOT_PERMITTED, 800)."""
    import ctypes as C

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    # hipMemAllocationProp's layout, which CUmemAllocationProp shares (32 bytes)
    from alloc_steps import Location, Prop

    fabric = Prop(type=1, requestedHandleType=8, location=Location(1, 0))  # pinned, fabric, dev 0
    cu = C.CDLL("libcuda.so.1")
    dev, ctx, gran, h = C.c_int(0), C.c_void_p(), C.c_size_t(0), C.c_ulonglong(0)
    for rc in (cu.cuInit(0), cu.cuDeviceGet(C.byref(dev), 0),
               cu.cuDevicePrimaryCtxRetain(C.byref(ctx), dev), cu.cuCtxSetCurrent(ctx),
               cu.cuMemGetAllocationGranularity(C.byref(gran), C.byref(fabric), 0)):
        if rc != 0:
            print(f"fabric oracle: driver bring-up failed: {rc}")
            return 1
    t0 = time.perf_counter()
    driver = cu.cuMemCreate(C.byref(h), gran, C.byref(fabric), C.c_ulonglong(0))
    dt = (time.perf_counter() - t0) * 1e6
    if driver == 0:
        cu.cuMemRelease(h)
    shim = C.CDLL(os.path.join(libdir, "libmori_hip_shim.so"))
    shim.mori_shim_message.restype = C.c_char_p
    if shim.mori_shim_select(b"cuda") != 0:
        print(f"fabric oracle: the cuda backend does not come up: {shim.mori_shim_message()}")
        return 1
    hh = C.c_void_p()
    t0 = time.perf_counter()
    backend = shim.mori_hipMemCreate(C.byref(hh), gran, C.byref(fabric), C.c_ulonglong(0))
    bt = (time.perf_counter() - t0) * 1e6
    msg = shim.mori_shim_message().decode() if backend != 0 else "created"
    if backend == 0:
        shim.mori_hipMemRelease(hh)
    unasked = "without asking the driver" in msg
    agree = (driver == 800) if unasked else ((driver == 0) == (backend == 0))
    print(f"fabric oracle: driver cuMemCreate(FABRIC) -> {driver} in {dt:.0f} us; cuda backend "
          f"-> {backend} in {bt:.0f} us ({msg}); {'agree' if agree else 'DISAGREE'}")
    return 0 if agree else 1


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
    ap.add_argument("--fi", help="libmori_faultinject.so: a count= profile of one MORI process")
    ap.add_argument("--lib", help="the build's lib folder (libmori_hip_shim.so): the driver's "
                    "answer to a fabric create beside the cuda backend's")
    a = ap.parse_args()
    if a.child == "oracle":
        return fabric_oracle(a.lib)
    if a.child:
        child(a.child, a.nvtx)
        return 0
    os.makedirs(a.out, exist_ok=True)
    oracle_rc = 0
    if a.lib:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "oracle",
                            "--lib", a.lib], capture_output=True, text=True, timeout=120)
        print((p.stdout + p.stderr).strip(), flush=True)
        oracle_rc = p.returncode
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
    if a.fi:
        # The fault shim's count= profile of one MORI process: per runtime
        # and OS call, its calls, total and longest us, and which call was
        # the longest (#1: the first allocation's).
        prof = os.path.join(a.out, "count")
        run_child("MORI", {"LD_PRELOAD": a.fi, "MORI_FI": f"count={prof}"})
        rows = []
        for name in sorted(os.listdir(a.out)):
            if name.startswith("count."):
                with open(os.path.join(a.out, name)) as f:
                    rows = [ln.split() for ln in f if ln.strip() and not ln.startswith("#")]
        rows = [r for r in rows if len(r) >= 4]
        rows.sort(key=lambda r: -float(r[2]))
        print("\nMORI process, the fault shim's count= profile (NAME CALLS TOTAL_US MAX_US #N):")
        for r in rows[:25]:
            print("  " + " ".join(r))
        report["mori_count"] = rows
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
    return oracle_rc


if __name__ == "__main__":
    sys.exit(main())
