"""bench/nsys_steps.py - what each timed step of compare.py calls, from an
nsys profile, for both backends side by side.

compare.py with COMPARE_NVTX=1 names each timed step an NVTX range
"BACKEND:step" (fresh: first_alloc, first_rendezvous; cycle: alloc,
rendezvous, barrier, free).  Profile a run and export it to SQLite:

    COMPARE_NVTX=1 nsys profile -t cuda,nvtx -s none --cpuctxsw=none \\
        --export=sqlite -o /tmp/cmp python3 bench/compare.py --only fresh,cycle ...
    python3 bench/nsys_steps.py /tmp/cmp.sqlite [--timeline STEP:N]

For each backend and step it prints, over every range of that name (any
rank, any launch): the range's median length, then per CUDA API call made
by the range's thread inside it (runtime and driver alike) the calls per
range and the median time per range, then the device work of the range's
process that started inside it (memsets, kernels, copies): its median
device time and how long after the range began it started.  --timeline
STEP:N lists the Nth range of STEP (e.g. alloc:3) of each backend event
by event, with every process's device work beside it.

Without nsys, bench/cupti_trace.c records the same (its header says how)
and this reads the directory of its files in place of the SQLite file.

python3 bench/nsys_steps.py --selftest reads both inputs made up in a
temporary folder (ctest runs it).  Only the standard library; the schema's columns are looked up, not
assumed, so an nsys that names a column differently fails by name.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
from collections import defaultdict


def columns(db, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def tables(db) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def pid_of(global_id: int) -> int:
    return (global_id >> 24) & 0xFFFFFF


def load(path: str):
    db = sqlite3.connect(path)
    have = tables(db)
    strings = dict(db.execute("SELECT id, value FROM StringIds"))
    # NVTX push/pop ranges: text inline, or registered (textId)
    ncols = columns(db, "NVTX_EVENTS")
    text = "COALESCE(text, '')" if "textId" not in ncols else "text"
    q = f"SELECT start, end, {text}, globalTid" + (", textId" if "textId" in ncols else "")
    ranges = []
    for row in db.execute(q + " FROM NVTX_EVENTS WHERE end IS NOT NULL"):
        name = row[2] or (strings.get(row[4], "") if len(row) > 4 and row[4] is not None else "")
        if ":" in name:
            ranges.append((row[0], row[1], name, row[3]))
    api = defaultdict(list)  # globalTid -> [(start, end, name)]
    for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        if t in have:
            for s, e, n, tid in db.execute(f"SELECT start, end, nameId, globalTid FROM {t}"):
                api[tid].append((s, e, strings.get(n, str(n))))
    dev = defaultdict(list)  # pid -> [(start, end, what)]
    kinds = {"CUPTI_ACTIVITY_KIND_MEMSET": "memset", "CUPTI_ACTIVITY_KIND_MEMCPY": "memcpy",
             "CUPTI_ACTIVITY_KIND_KERNEL": "kernel"}
    for t, what in kinds.items():
        if t not in have:
            continue
        cols = columns(db, t)
        pidcol = "globalPid" if "globalPid" in cols else None
        if pidcol is None:
            sys.exit(f"nsys_steps: {t} has no globalPid column: {sorted(cols)}")
        extra = ", shortName" if "shortName" in cols else (", bytes" if "bytes" in cols else "")
        for row in db.execute(f"SELECT start, end, {pidcol}{extra} FROM {t}"):
            label = what
            if extra == ", shortName":
                label = f"kernel {strings.get(row[3], row[3])}"
            elif extra == ", bytes":
                label = f"{what} {row[3]} B"
            dev[pid_of(row[2])].append((row[0], row[1], label))
    for v in list(api.values()) + list(dev.values()):
        v.sort()
    return ranges, api, dev


def load_cupti(path: str):
    """bench/cupti_trace.c's trace-PID.tsv files in PATH.  A range's API
    calls are its process's (any thread), keyed as the range is."""
    import glob
    import os

    ranges, api, dev = [], defaultdict(list), defaultdict(list)
    files = sorted(glob.glob(os.path.join(path, "trace-*.tsv")))
    if not files:
        sys.exit(f"nsys_steps: no trace-*.tsv in {path}")
    for f in files:
        pid = int(os.path.basename(f)[6:-4])
        key = pid << 24
        open_ranges = defaultdict(list)
        with open(f) as fh:
            for line in fh:
                x = line.rstrip("\n").split("\t")
                if x[0] == "A" and len(x) >= 6:
                    api[key].append((int(x[1]), int(x[2]), x[5]))
                elif x[0] in "MCK" and len(x) >= 3:
                    what = {"M": "memset", "C": "memcpy", "K": "kernel"}[x[0]]
                    dev[pid].append((int(x[1]), int(x[2]), what + (f" {x[3]} B" if len(x) > 3
                                                                   else " -")))
                elif x[0] == "R" and len(x) >= 5:
                    if x[3] == "B":
                        open_ranges[x[4]].append(int(x[1]))
                    elif open_ranges[x[4]]:
                        ranges.append((open_ranges[x[4]].pop(), int(x[1]), x[4], key))
    for v in list(api.values()) + list(dev.values()):
        v.sort()
    return ranges, api, dev


def inside(events, s, e):
    return [x for x in events if x[0] >= s and x[0] < e]


def median(v):
    return statistics.median(v) if v else 0.0


def summary(ranges, api, dev) -> None:
    by = defaultdict(list)
    for r in ranges:
        by[r[2]].append(r)
    backends = sorted({n.split(":", 1)[0] for n in by})
    steps = []
    for n in by:
        st = n.split(":", 1)[1]
        if st not in steps:
            steps.append(st)
    for st in steps:
        print(f"\n## {st}\n")
        print("| what | " + " | ".join(f"{b}: calls | {b}: us" for b in backends) + " |")
        print("|---|" + "---:|---:|" * len(backends))
        rows = defaultdict(dict)
        order = []
        for b in backends:
            rs = by.get(f"{b}:{st}", [])
            if not rs:
                continue
            rows["(range)"][b] = (len(rs), median([(r[1] - r[0]) / 1e3 for r in rs]))
            per = defaultdict(lambda: [[0, 0.0] for _ in rs])
            dper = defaultdict(lambda: [[0, 0.0, []] for _ in rs])
            for i, (s, e, _n, tid) in enumerate(rs):
                for (a, z, name) in inside(api.get(tid, []), s, e):
                    per[name][i][0] += 1
                    per[name][i][1] += (z - a) / 1e3
                for (a, z, what) in inside(dev.get(pid_of(tid), []), s, e):
                    key = "device: " + what.split(" ")[0]
                    dper[key][i][0] += 1
                    dper[key][i][1] += (z - a) / 1e3
                    dper[key][i][2].append((a - s) / 1e3)
            for name, v in sorted(per.items(), key=lambda kv: -median([x[1] for x in kv[1]])):
                rows[name][b] = (median([x[0] for x in v]), median([x[1] for x in v]))
                if name not in order:
                    order.append(name)
            for name, v in dper.items():
                rows[name][b] = (median([x[0] for x in v]), median([x[1] for x in v]))
                starts = [min(x[2]) for x in v if x[2]]
                rows[name + " (starts after, us)"][b] = (len(starts), median(starts))
                for k in (name, name + " (starts after, us)"):
                    if k not in order:
                        order.append(k)
        for name in ["(range)"] + order:
            cells = []
            for b in backends:
                c = rows[name].get(b)
                cells.append(f"{c[0]:g} | {c[1]:.1f}" if c else "- | -")
            print(f"| {name} | " + " | ".join(cells) + " |")


def timeline(ranges, api, dev, spec: str) -> None:
    st, n = spec.rsplit(":", 1)
    n = int(n)
    by = defaultdict(list)
    for r in ranges:
        if r[2].split(":", 1)[1] == st:
            by[r[2].split(":", 1)[0]].append(r)
    for b, rs in sorted(by.items()):
        rs.sort()
        # the nth range of each rank: ranks of one launch end up adjacent
        pick = [r for r in rs[2 * n: 2 * n + 2]]
        print(f"\n## timeline {b}:{st} #{n}\n")
        for s, e, name, tid in pick:
            print(f"- rank thread {tid & 0xFFFFFF} pid {pid_of(tid)}: {name} {(e - s) / 1e3:.1f} us")
            for (a, z, what) in inside(api.get(tid, []), s, e):
                print(f"    +{(a - s) / 1e3:8.1f} {(z - a) / 1e3:8.1f}  api {what}")
            for pid, evs in dev.items():
                for (a, z, what) in inside(evs, s - 0, e):
                    print(f"    +{(a - s) / 1e3:8.1f} {(z - a) / 1e3:8.1f}  device pid {pid}"
                          f"{' (own)' if pid == pid_of(tid) else ''}: {what}")


def selftest() -> int:
    """Both inputs, made up here: two backends' alloc ranges with their
    calls and device work; the table and the timeline must read them back."""
    import contextlib
    import io
    import os
    import tempfile

    def check(out: str, want: list[str]) -> None:
        for w in want:
            if w not in out:
                sys.exit(f"nsys_steps selftest: FAIL: {w!r} not in:\n{out}")

    want = ["| (range) | 2 | 300.0 | 2 | 400.0 |", "| cuMemCreate | 1 | 49.0 | 1 | 49.0 |",
            "| cudaDeviceSynchronize | 1 | 230.0 | 1 | 330.0 |",
            "| device: memset (starts after, us) | 2 | 100.0 | 2 | 200.0 |",
            "| cuEventRecord | - | - | 1 | 2.0 |", "api cuMemCreate", "(own): memset 2097152 B"]
    with tempfile.TemporaryDirectory() as d:
        db = sqlite3.connect(os.path.join(d, "t.sqlite"))
        db.execute("create table StringIds(id integer, value text)")
        db.execute("create table NVTX_EVENTS(start int, end int, text text, globalTid int, "
                   "textId int)")
        db.execute("create table CUPTI_ACTIVITY_KIND_RUNTIME(start int, end int, nameId int, "
                   "globalTid int)")
        db.execute("create table CUPTI_ACTIVITY_KIND_MEMSET(start int, end int, globalPid int, "
                   "bytes int)")
        db.executemany("insert into StringIds values(?,?)",
                       [(1, "cuMemCreate"), (2, "cudaDeviceSynchronize"), (3, "cuEventRecord")])
        lines = defaultdict(list)
        for b, pid, extra in (("CUDA", 100, 0), ("MORI", 200, 100000)):
            tid = (pid << 24) | pid
            for i in range(2):
                s = i * 10**6 + pid * 10
                db.execute("insert into NVTX_EVENTS values(?,?,?,?,NULL)",
                           (s, s + 300000 + extra, f"{b}:alloc", tid))
                calls = [(s + 1000, s + 50000, 1), (s + 60000, s + 290000 + extra, 2)]
                if b == "MORI":
                    calls.append((s + 50500, s + 52500, 3))
                for a, z, n in calls:
                    db.execute("insert into CUPTI_ACTIVITY_KIND_RUNTIME values(?,?,?,?)",
                               (a, z, n, tid))
                    name = {1: "cuMemCreate", 2: "cudaDeviceSynchronize", 3: "cuEventRecord"}[n]
                    lines[pid].append(f"A\t{a}\t{z}\t{pid}\tD\t{name}")
                m = (s + 100000 + extra, s + 107000 + extra)
                db.execute("insert into CUPTI_ACTIVITY_KIND_MEMSET values(?,?,?,?)",
                           (m[0], m[1], pid << 24, 2097152))
                lines[pid] += [f"R\t{s}\t{pid}\tB\t{b}:alloc",
                               f"M\t{m[0]}\t{m[1]}\t2097152",
                               f"R\t{s + 300000 + extra}\t{pid}\tE\t{b}:alloc"]
        db.commit()
        db.close()
        for pid, ls in lines.items():
            with open(os.path.join(d, f"trace-{pid}.tsv"), "w") as f:
                f.write("\n".join(ls) + "\n")
        for src in (os.path.join(d, "t.sqlite"), d):
            out = io.StringIO()
            ranges, api, dev = (load_cupti if os.path.isdir(src) else load)(src)
            with contextlib.redirect_stdout(out):
                summary(ranges, api, dev)
                timeline(ranges, api, dev, "alloc:0")
            check(out.getvalue(), want)
    print("nsys_steps selftest: ok")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--selftest"]:
        return selftest()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sqlite", help="nsys's SQLite export, or a directory of cupti_trace.c's files")
    p.add_argument("--timeline", action="append", default=[], help="STEP:N, e.g. alloc:3")
    a = p.parse_args()
    import os

    ranges, api, dev = (load_cupti if os.path.isdir(a.sqlite) else load)(a.sqlite)
    if not ranges:
        print("nsys_steps: no BACKEND:step NVTX ranges (was COMPARE_NVTX=1 set?)", file=sys.stderr)
        return 1
    summary(ranges, api, dev)
    for t in a.timeline:
        timeline(ranges, api, dev, t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
