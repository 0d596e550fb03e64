"""bench/compare.py - MORI against torch's built-in symmetric-memory backend.

One command on a GPU host measures the same things on both backends:
torch's built-in one (never selected: no set_backend call, so torch's
default "CUDA") and MORI (import mori.allocator; set_backend("MORI")).
set_backend holds for a whole process, so every measurement round is a
fresh launch of WORLD rank processes, and launches alternate: built-in,
MORI, built-in, MORI ... (--rounds of each).  For each metric it prints
min and median per backend and the ratio of the medians, and writes

    OUT/compare.json   every sample, per rank, with errors and checks
    OUT/compare.md     the table (docs/performance.md takes it)
    OUT/compare.png    the plot, when matplotlib is installed
    OUT/launch-*.log   each rank's output, per launch

    python bench/compare.py --out results/compare            # full
    python bench/compare.py --reduced --out "$OUT/compare"    # tests/gpu/compare.sh

What fails stays local: each metric's result or error goes into the JSON.
A metric that raises is recorded and the launch goes on; a launch that
crashes or stops making progress (a hang) is ended, with every rank and
their children, and relaunched with the metrics after the one it was in.
One metric failing never loses the others.

python3 bench/compare.py --selftest checks the statistics, the table and
the launcher (crash, hang, relaunch) without torch or a GPU; ctest runs it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

from sizes import parse_size, size_label

BUILTIN, MORI = "CUDA", "MORI"  # torch's name for its built-in backend
MIB = 1 << 20

# ---- what is measured ------------------------------------------------------

# key: (unit, better, target ratio MORI/built-in or None, what it is).
# A key "name@SIZE" takes the row of "name".  Ranks report seconds; the
# value of a time is the slowest rank's, in the unit; a GB/s value counts
# the bytes that leave a device (world * (world - 1) * SIZE per iteration)
# over the slowest rank's time.
METRICS = {
    "alloc_first_ms": ("ms", "lower", None, "first alloc in a fresh process (1 MiB)"),
    "rendezvous_first_ms": ("ms", "lower", 1.0, "first rendezvous in a fresh process"),
    "first_use_ms": ("ms", "lower", 1.0, "first alloc + first rendezvous, fresh process"),
    "alloc_ms": ("ms", "lower", 1.0, "alloc 1 MiB, warm (to the end of its device work)"),
    "alloc_host_ms": ("ms", "lower", 1.0, "alloc 1 MiB, warm (until the call returns)"),
    "rendezvous_warm_ms": ("ms", "lower", None, "first rendezvous of a new block, warm process"),
    "free_ms": ("ms", "lower", None, "free of a rendezvoused 1 MiB block"),
    "cycle_ms": ("ms", "lower", None, "alloc + rendezvous + barrier + free"),
    "rendezvous_cached_us": ("us", "lower", 1.1, "cached rendezvous from Python"),
    "barrier_us": ("us", "lower", 0.7, "barrier, back to back (GPU time)"),
    "put_wait_rtt_us": ("us", "lower", 1.0, "put_signal + wait_signal round trip"),
    "one_shot_all_reduce_us": ("us", "lower", None, "one_shot_all_reduce, 1 MiB fp32"),
    "a2a_push_barriers": ("GB/s", "higher", None, "push all-to-all with its two barriers"),
    "a2a_push_only": ("GB/s", "higher", None, "push all-to-all alone (no barrier)"),
    "a2a_copy_engine": ("GB/s", "higher", None, "copy_ to peers between two barriers"),
    "nccl_a2a": ("GB/s", "higher", None, "NCCL all_to_all_single"),
    "a2a_push_barriers_graph": ("GB/s", "higher", None, "push + 2 barriers, CUDA graph"),
    "nccl_a2a_graph": ("GB/s", "higher", None, "NCCL all_to_all_single, CUDA graph"),
}

A2A_PATHS = {"push_barriers": "a2a_push_barriers", "push_only": "a2a_push_only",
             "copy_engine": "a2a_copy_engine", "nccl": "nccl_a2a"}
GRAPH_PATHS = {"push_barriers": "a2a_push_barriers_graph", "nccl": "nccl_a2a_graph"}

# Groups run in this order in every launch; "fresh" must be first (it is the
# process's first symmetric allocation), graphs last (a failed capture can
# spoil the context, which costs a relaunch).
FIXED_GROUPS = ["fresh", "cycle", "cached", "barrier", "put_wait", "one_shot"]
FULL_SIZES = "64K,256K,1M,4M,16M,64M"
REDUCED_SIZES = "256K,4M,16M"
REDUCED_GRAPH_SIZES = "256K,4M"


def spec(key: str):
    return METRICS[key.split("@")[0]]


def group_keys(group: str) -> list[str]:
    """The keys a group reports (an error in the group stands for each)."""
    name, _, size = group.partition("@")
    fixed = {"fresh": ["alloc_first_ms", "rendezvous_first_ms", "first_use_ms"],
             "cycle": ["alloc_ms", "alloc_host_ms", "rendezvous_warm_ms", "free_ms", "cycle_ms"],
             "cached": ["rendezvous_cached_us"], "barrier": ["barrier_us"],
             "put_wait": ["put_wait_rtt_us"], "one_shot": ["one_shot_all_reduce_us"]}
    if name in fixed:
        return fixed[name]
    paths = A2A_PATHS if name == "a2a" else GRAPH_PATHS
    return [f"{key}@{size}" for key in paths.values()]


# Groups that need a peer: at one rank they would report nothing (no pair
# to signal, no byte that leaves the device).
NEEDS_A_PEER = ("put_wait", "a2a", "graph")


def plan_groups(sizes: list[int], graph_sizes: list[int], only: list[str] | None,
                world: int = 2) -> list[str]:
    groups = (FIXED_GROUPS + [f"a2a@{size_label(s)}" for s in sizes]
              + [f"graph@{size_label(s)}" for s in graph_sizes])
    if only:
        groups = [g for g in groups if g.split("@")[0] in only or g in only]
    if world < 2:
        groups = [g for g in groups if g.split("@")[0] not in NEEDS_A_PEER]
    return groups


def to_unit(key: str, seconds: float, world: int) -> float:
    unit = spec(key)[0]
    if unit == "ms":
        return seconds * 1e3
    if unit == "us":
        return seconds * 1e6
    moved = world * (world - 1) * parse_size(key.split("@")[1])
    return moved / seconds / 1e9 if seconds > 0 else float("nan")


def combine(per_rank: list[dict], world: int) -> dict:
    """Rank reports -> one record: the slowest rank's time in the metric's
    unit, every rank's check, every rank's error (named by rank)."""
    values, checks, errors, raw = {}, {}, {}, {}
    for rank, rep in enumerate(per_rank):
        if not rep:
            continue
        for key, sec in rep.get("seconds", {}).items():
            raw.setdefault(key, [None] * len(per_rank))[rank] = sec
        for name, ok in rep.get("checks", {}).items():
            failed_ranks = checks.setdefault(name, [])
            if not ok:
                failed_ranks.append(rank)
        for key, msg in rep.get("errors", {}).items():
            errors.setdefault(key, f"rank {rank}: {msg}")
    for key, secs in raw.items():
        known = [s for s in secs if s is not None]
        if known:
            values[key] = to_unit(key, max(known), world)
    return {"values": values, "seconds": raw,
            "checks": {n: {"ok": not bad, "failed_ranks": bad} for n, bad in checks.items()},
            "errors": errors}


# ---- statistics, table, plot (no torch) ----------------------------------

def summarize(results: dict) -> dict:
    """Per key and backend: samples, min, median; the ratio of the medians
    (MORI / built-in) and the verdict against the target."""
    out = {}
    for key, by_backend in results["samples"].items():
        unit, better, target, what = spec(key)
        row = {"unit": unit, "better": better, "target": target, "what": what, "backends": {}}
        for backend in (BUILTIN, MORI):
            samples = by_backend.get(backend, [])
            vals = [s["value"] for s in samples
                    if s.get("value") is not None and not math.isnan(s["value"])]
            errs = [s["error"] for s in samples if s.get("error")]
            row["backends"][backend] = {
                "n": len(vals), "values": vals,
                "min": min(vals) if vals else None,
                "median": statistics.median(vals) if vals else None,
                "errors": errs}
        a, b = row["backends"][BUILTIN]["median"], row["backends"][MORI]["median"]
        row["ratio"] = b / a if a and b is not None else None
        if row["ratio"] is None:
            row["verdict"] = "no data"
        elif target is None:
            row["verdict"] = ""
        else:
            met = row["ratio"] <= target if better == "lower" else row["ratio"] >= target
            row["verdict"] = "met" if met else "NOT met"
        out[key] = row
    return out


def key_order(key: str):
    base, _, size = key.partition("@")
    names = list(METRICS)
    return (parse_size(size) if size else -1, names.index(base) if base in names else 99)


def fmt(v) -> str:
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def table(summary: dict, meta: dict) -> str:
    lines = [
        f"Measured {meta.get('date', '?')} on {meta.get('host', '?')}: {meta.get('world', '?')} "
        f"ranks, {meta.get('device', '?')}; torch {meta.get('torch', '?')}, "
        f"triton {meta.get('triton', '?')}; {meta.get('rounds', '?')} launches per backend, "
        f"interleaved, store served by {meta.get('store', '?')}; min / median over launches.",
        "",
        "| metric | unit | built-in min | built-in median | MORI min | MORI median "
        "| MORI / built-in | target | |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for key in sorted(summary, key=key_order):
        row = summary[key]
        a, b = row["backends"][BUILTIN], row["backends"][MORI]
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        target = "" if row["target"] is None else (
            f"<= {row['target']}" if row["better"] == "lower" else f">= {row['target']}")
        note = row["verdict"]
        if not a["n"] or not b["n"]:
            err = (a["errors"] or b["errors"] or ["no sample"])[0]
            note = f"{note}: {err[:80]}" if note else err[:80]
        lines.append(f"| {key} | {row['unit']} | {fmt(a['min'])} | {fmt(a['median'])} | "
                     f"{fmt(b['min'])} | {fmt(b['median'])} | {ratio} | {target} | {note} |")
    return "\n".join(lines) + "\n"


def plot(summary: dict, meta: dict, path: str) -> str | None:
    """The all-to-all rates against size, and the latency ratios; None when
    matplotlib is missing (the JSON and the table carry everything)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5.5))
    styles = {BUILTIN: "--", MORI: "-"}
    sizes = set()
    for i, base in enumerate(("a2a_push_barriers", "a2a_push_only", "a2a_copy_engine",
                              "nccl_a2a", "a2a_push_barriers_graph", "nccl_a2a_graph")):
        keys = sorted((k for k in summary if k.split("@")[0] == base), key=key_order)
        # NCCL is the same library in both launches: one line, the built-in's.
        for backend in (BUILTIN,) if base.startswith("nccl") else (BUILTIN, MORI):
            pts = [(parse_size(k.split("@")[1]), summary[k]["backends"][backend]["median"])
                   for k in keys]
            pts = [(x, y) for x, y in pts if y is not None]
            sizes.update(x for x, _ in pts)
            if pts:
                name = {BUILTIN: "built-in", MORI: "MORI"}[backend]
                left.plot([x for x, _ in pts], [y for _, y in pts], styles[backend], marker="o",
                          color=f"C{i}", label=base if base.startswith("nccl") else
                          f"{base} ({name})")
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    if sizes:
        left.set_xticks(sorted(sizes), [size_label(x) for x in sorted(sizes)])
    left.set_xlabel("bytes per peer")
    left.set_ylabel("aggregate GB/s (bytes leaving a device)")
    left.set_title(f"all-to-all, {meta.get('world', '?')} ranks, median "
                   "(dashed: built-in, solid: MORI)")
    left.legend(fontsize=7)
    left.grid(True, alpha=0.3)
    lat = [k for k in sorted(summary, key=key_order)
           if summary[k]["unit"] in ("ms", "us") and summary[k]["ratio"] is not None]
    colors = {"met": "tab:green", "NOT met": "tab:red"}
    right.barh(range(len(lat)), [summary[k]["ratio"] for k in lat],
               color=[colors.get(summary[k]["verdict"], "tab:gray") for k in lat])
    for i, k in enumerate(lat):
        if summary[k]["target"] is not None:
            right.plot([summary[k]["target"]] * 2, [i - 0.4, i + 0.4], "k-", lw=2)
    right.axvline(1.0, color="k", lw=0.8, ls=":")
    right.set_yticks(range(len(lat)), lat, fontsize=8)
    right.set_xlabel("MORI / built-in, median (< 1: MORI faster; black tick: target)")
    right.set_title("latencies (green: target met, red: not met)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---- the launcher ---------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_store(port: int, world: int, timeout_s: float):
    """The launch's TCPStore, hosted by this driver as torchrun's agent
    hosts it: every rank is a client (TORCHELASTIC_USE_AGENT_STORE), so no
    rank serves the store from inside the process being timed.  Lives until
    the launch ends (the returned object is dropped)."""
    import datetime

    from torch.distributed import TCPStore

    return TCPStore("127.0.0.1", port, world, True, datetime.timedelta(seconds=timeout_s),
                    wait_for_workers=False)


def fake_store(port: int, _world: int, _timeout_s: float):
    """The selftest's stand-in for host_store: a listening socket the
    stand-in ranks connect to."""
    return socket.create_server(("127.0.0.1", port))


def read_events(path: str) -> list[dict]:
    events = []
    try:
        with open(path) as f:
            for line in f:
                if line.endswith("\n"):
                    try:
                        events.append(json.loads(line))
                    except ValueError:
                        pass
    except FileNotFoundError:
        pass
    return events


def kill_launch(procs) -> None:
    """Each rank leads its own session: its whole process group goes,
    including children that outlive a rank which exited."""
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for p in procs:
        p.wait()


def tail(path: str, n: int = 1500) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def launch(args, backend: str, groups: list[str], tag: str, log) -> dict:
    """One launch: WORLD rank processes run groups in order.  Returns the
    events rank 0 wrote, how the launch ended and the group it ended in."""
    result = os.path.join(args.out, f"events-{tag}.jsonl")
    if os.path.exists(result):  # an earlier run's: progress is measured on this file
        os.unlink(result)
    port = free_port()
    procs, logs = [], []
    # --store agent: this driver serves the store, every rank is its client
    # (as under torchrun); rank0: rank 0 serves it (a plain env:// launch).
    store = args.store_host(port, args.world, args.startup_timeout) \
        if args.store == "agent" else None
    agent = {"TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": "0"} \
        if store is not None else {}
    for rank in range(args.world):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(args.world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PYTHONUNBUFFERED="1",
                   **agent)
        if store is None:
            env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        cmd = args.rank_cmd + ["--rank-main", "--backend", backend, "--groups", ",".join(groups),
                               "--events", result, "--world", str(args.world),
                               "--iters", str(args.iters),
                               "--group-timeout", str(args.group_timeout)]
        if args.reduced:
            cmd.append("--reduced")
        logs.append(os.path.join(args.out, f"launch-{tag}-rank{rank}.log"))
        with open(logs[-1], "w") as out:
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                          start_new_session=True))
    t0 = last = time.monotonic()
    size, ended, how = -1, None, None
    while ended is None:
        time.sleep(args.poll_s)
        now = time.monotonic()
        try:
            grown = os.path.getsize(result)
        except OSError:
            grown = -1
        if grown != size:
            size, last = grown, now
        codes = [p.poll() for p in procs]
        failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        limit = args.startup_timeout if size <= 0 else args.group_timeout
        if failed:
            ended, how = "crash", f"rank {failed[0][0]} exited with status {failed[0][1]}"
        elif all(c == 0 for c in codes):
            ended = "ok"
        elif now - last > limit:
            ended, how = "hang", f"no progress for {now - last:.0f} s"
    kill_launch(procs)  # the ranks still waiting on a dead peer, and their children
    if hasattr(store, "close"):
        store.close()
    del store  # a TCPStore's server stops with its last reference
    events = read_events(result)
    started = [e["group"] for e in events if e.get("event") == "start"]
    done = {e["group"] for e in events if e.get("event") == "done"}
    current = started[-1] if started and started[-1] not in done else None
    info = {"tag": tag, "backend": backend, "groups": groups, "ended": ended, "why": how,
            "current": current, "wall_s": round(time.monotonic() - t0, 1), "events": events,
            "log_tail": {} if ended == "ok" else {f"rank{r}": tail(p) for r, p in enumerate(logs)}}
    log(f"launch {tag} {backend}: {ended}{': ' + how if how else ''}"
        f"{' in ' + current if current else ''} ({info['wall_s']} s, "
        f"{len(done)}/{len(groups)} groups)")
    return info


def new_results(args, groups) -> dict:
    return {"meta": {"world": args.world, "rounds": args.rounds, "groups": groups,
                     "reduced": args.reduced, "date": time.strftime("%Y-%m-%d %H:%M"),
                     "host": socket.gethostname()},
            "launches": [], "samples": {}, "checks": [], "errors": []}


def record_done(results, backend: str, rnd: int, event: dict) -> None:
    values, errors = event.get("values", {}), event.get("errors", {})
    for key in group_keys(event["group"]):
        err = errors.get(key) or errors.get("*")
        if err is None and values.get(key) is None:
            err = "no rank reported it"
        sample = {"round": rnd, "value": values.get(key), "error": err,
                  "per_rank_s": event.get("seconds", {}).get(key)}
        results["samples"].setdefault(key, {}).setdefault(backend, []).append(sample)
    for name, check in event.get("checks", {}).items():
        results["checks"].append(dict(check, name=name, backend=backend, round=rnd))


def record_failed(results, backend: str, rnd: int, group: str, error: str) -> None:
    results["errors"].append({"backend": backend, "round": rnd, "group": group, "error": error})
    for key in group_keys(group):
        results["samples"].setdefault(key, {}).setdefault(backend, []).append(
            {"round": rnd, "value": None, "error": error, "per_rank_s": None})


def drive(args, groups: list[str], log=print) -> dict:
    """Rounds of launches, built-in then MORI in each; a launch that dies or
    hangs is relaunched with the groups after the one it was in."""
    results = new_results(args, groups)
    t_start = time.monotonic()
    for rnd in range(args.rounds):
        for backend in args.backends:
            pending, attempt = list(groups), 0
            while pending:
                if time.monotonic() - t_start > args.budget_s:
                    for g in pending:
                        record_failed(results, backend, rnd, g,
                                      f"not run: the {args.budget_s:.0f} s budget was spent")
                    break
                info = launch(args, backend, pending, f"r{rnd}-{backend}-a{attempt}", log)
                results["launches"].append({k: v for k, v in info.items() if k != "events"})
                finished = []
                for e in info["events"]:
                    if e.get("event") == "meta":
                        results["meta"].update({k: v for k, v in e.items()
                                                if k not in ("event", "backend_active")})
                        results["meta"].setdefault("backend_active", {})[backend] = \
                            e.get("backend_active")
                    elif e.get("event") == "done":
                        record_done(results, backend, rnd, e)
                        finished.append(e["group"])
                if info["ended"] == "ok":
                    for g in pending:  # a rank that ended early without saying why
                        if g not in finished:
                            record_failed(results, backend, rnd, g, "launch ended without it")
                    break
                why = f"launch {info['ended']}: {info['why']}"
                if info["current"] is None and not finished:
                    # It never got to a group.  A crash may be passing (a port
                    # taken between choosing and binding it): once more; a
                    # hang at startup would cost its whole timeout again.
                    if info["ended"] == "crash" and attempt == 0:
                        attempt += 1
                        continue
                    for g in pending:
                        record_failed(results, backend, rnd, g, why + " (before any group)")
                    break
                lost = info["current"]
                if lost is not None:
                    record_failed(results, backend, rnd, lost, f"{why} during this group")
                after = pending.index(lost) + 1 if lost else len(finished)
                pending = [g for g in pending[after:] if g not in finished]
                attempt += 1
                if attempt >= args.attempts and pending:
                    for g in pending:
                        record_failed(results, backend, rnd, g,
                                      f"not run: {args.attempts} launches failed ({why})")
                    break
    results["meta"]["wall_s"] = round(time.monotonic() - t_start, 1)
    return results


def write_outputs(results: dict, out: str, log=print) -> dict:
    summary = summarize(results)
    results["summary"] = summary
    md = table(summary, results["meta"])
    bad_checks = [c for c in results["checks"] if not c["ok"]]
    if bad_checks:
        md += "\nFailed checks: " + "; ".join(
            f"{c['name']} ({c['backend']}, round {c['round']}, ranks {c['failed_ranks']})"
            for c in bad_checks) + "\n"
    with open(os.path.join(out, "compare.md"), "w") as f:
        f.write(md)
    png = plot(summary, results["meta"], os.path.join(out, "compare.png"))
    results["meta"]["plot"] = png or "not drawn: matplotlib is not installed"
    with open(os.path.join(out, "compare.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    log(md)
    log(f"compare: wrote {out}/compare.json, compare.md, "
        f"{'compare.png' if png else 'no plot (matplotlib missing)'}")
    return summary


def verdict(results: dict) -> tuple[bool, list[str], list[str]]:
    """Complete = every key measured on both backends and every check ok
    (the targets are figures to read, not the verdict of the run).  Also
    the errors of rounds that other rounds made up for, as warnings."""
    problems, warnings = [], []
    for key, row in results["summary"].items():
        for backend in (BUILTIN, MORI):
            b = row["backends"][backend]
            if not b["n"] and b["errors"] and all(
                    e.split(": ", 1)[-1].startswith(NOT_PLANNED) or e.startswith(NOT_PLANNED)
                    for e in b["errors"]):
                warnings.append(f"{key}: not run ({b['errors'][0][:120]})")
            elif not b["n"]:
                problems.append(f"{key}: no {backend} sample ({(b['errors'] or ['?'])[0][:120]})")
            elif b["errors"]:
                warnings.append(f"{key}: {len(b['errors'])} {backend} round(s) failed "
                                f"({b['errors'][0][:120]})")
    problems += [f"check {c['name']} failed ({c['backend']}, round {c['round']})"
                 for c in results["checks"] if not c["ok"]]
    return not problems, problems, warnings


# ---- the rank side (torch from here on) -------------------------------------

class Emitter:
    """Rank 0's events, one JSON line each, flushed as they happen: the
    driver's measure of progress and the record of what finished."""

    def __init__(self, path: str, rank: int):
        self.f = open(path, "a") if rank == 0 else None

    def __call__(self, **event) -> None:
        if self.f is not None:
            self.f.write(json.dumps(event, default=str) + "\n")
            self.f.flush()
            os.fsync(self.f.fileno())


class Rank:
    """What every group needs: the process group, a gloo group for host-side
    agreement, the device, and the symmetric-memory API."""

    def __init__(self, args):
        import datetime

        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.rank, self.world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        self.args, self.keep = args, []
        self.nvtx = os.environ.get("COMPARE_NVTX") == "1"
        self.cupti = None
        if os.environ.get("COMPARE_CUPTI"):
            import ctypes

            self.cupti = ctypes.CDLL(os.environ["COMPARE_CUPTI"])
        ngpu = torch.cuda.device_count()
        self.device = torch.device("cuda", self.rank % ngpu)
        torch.cuda.set_device(self.device)
        # NCCL takes one GPU per rank; more ranks than GPUs share devices
        # (barrier growth), without the NCCL rows.
        self.nccl = self.world <= ngpu
        if not self.nccl:
            os.environ.setdefault("TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES", "1")
        timeout = datetime.timedelta(seconds=args.group_timeout)
        dist.init_process_group("nccl" if self.nccl else "gloo", rank=self.rank,
                                world_size=self.world, timeout=timeout,
                                device_id=self.device if self.nccl else None)
        self.cpu = dist.new_group(backend="gloo", timeout=timeout) if self.nccl else None
        self.group = dist.group.WORLD.group_name
        import torch.distributed._symmetric_memory as symm_mem
        from torch._C._distributed_c10d import _SymmetricMemory

        self.symm_mem, self.p2p = symm_mem, _SymmetricMemory
        import all2all  # bench/all2all.py: the exchange, and how both scripts time

        self.a2a = all2all
        if args.backend == MORI:
            import mori.allocator  # registers "MORI"

            self.mori = mori.allocator
            symm_mem.set_backend(MORI)
        else:
            self.mori = None
        torch.zeros(1, device=self.device).add_(1)  # the context is up before any timing
        self.host_barrier()

    def host_barrier(self) -> None:
        self.a2a.host_barrier(self.cpu)

    def alloc(self, nbytes: int):
        # The allocator itself, not torch's pool in front of symm_mem.empty.
        return self.p2p.empty_strided_p2p((nbytes,), (1,), self.torch.uint8, self.device)

    def gpu_time(self, fn, iters: int, warmup: int = 3) -> float:
        return self.a2a.gpu_time(fn, iters, self.cpu, warmup)

    def timed(self, fn, name: str = ""):
        """(result, host seconds to the end of its device work)."""
        self.torch.cuda.synchronize()
        self.mark(name)
        t0 = time.perf_counter()
        out = fn()
        self.torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        self.unmark(name)
        return out, dt

    # With COMPARE_NVTX=1 each timed step is an NVTX range named
    # "BACKEND:step", for a profiler's timeline (nsys -t cuda,nvtx); with
    # COMPARE_CUPTI=LIB, a range of bench/cupti_trace.c's.  Off, nothing
    # is called.  bench/nsys_steps.py reads either.
    def mark(self, name: str, begin: int = 1) -> None:
        if not name:
            return
        if self.nvtx:
            if begin:
                self.torch.cuda.nvtx.range_push(f"{self.args.backend}:{name}")
            else:
                self.torch.cuda.nvtx.range_pop()
        if self.cupti is not None:
            self.cupti.cupti_trace_mark(f"{self.args.backend}:{name}".encode(), begin)

    def unmark(self, name: str) -> None:
        self.mark(name, 0)

    def healthy(self) -> bool:
        try:
            self.torch.cuda.synchronize()
            return self.torch.ones(1, device=self.device).add_(1).item() == 2
        except Exception:  # noqa: BLE001  (a spoiled context raises anything)
            return False

    def meta(self) -> dict:
        torch = self.torch
        try:
            import triton
            triton_version = triton.__version__
        except ImportError:
            triton_version = "not installed"
        m = {"torch": torch.__version__, "cuda": torch.version.cuda, "hip": torch.version.hip,
             "triton": triton_version, "device": torch.cuda.get_device_name(self.device),
             "gpus": torch.cuda.device_count(), "nccl_rows": self.nccl,
             "backend_active": self.symm_mem.get_backend(self.device),
             "store": store_kind()}
        if self.mori is not None:
            m["mori_shim"] = self.mori.shim_backend()
        return m


def store_kind() -> str:
    """Who serves this launch's store: "agent" (the driver) or "rank0"."""
    return "agent" if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" else "rank0"


def g_fresh(R: Rank, _size):
    t, alloc_s = R.timed(lambda: R.alloc(MIB), "first_alloc")
    R.host_barrier()  # every peer has its block: the rendezvous alone is timed
    hdl, rdv_s = R.timed(lambda: R.symm_mem.rendezvous(t, R.group), "first_rendezvous")
    R.keep.append((t, hdl))
    # Their sum too: work a backend moves between the two still counts.
    return {"alloc_first_ms": alloc_s, "rendezvous_first_ms": rdv_s,
            "first_use_ms": alloc_s + rdv_s}, {}


def g_cycle(R: Rank, _size):
    parts = {"alloc_ms": [], "alloc_host_ms": [], "rendezvous_warm_ms": [], "free_ms": [],
             "cycle_ms": []}
    for _ in range(R.args.cycles):
        R.host_barrier()
        R.mark("alloc")
        t0 = time.perf_counter()
        t = R.alloc(MIB)
        h = time.perf_counter() - t0  # synchronous work shows here, stream work below
        R.torch.cuda.synchronize()
        a = time.perf_counter() - t0
        R.unmark("alloc")
        R.host_barrier()
        hdl, r = R.timed(lambda: R.symm_mem.rendezvous(t, R.group), "rendezvous")
        _, b = R.timed(lambda: hdl.barrier(channel=0), "barrier")
        R.host_barrier()  # no peer still signals into this block
        holder = [t, hdl]
        del t, hdl
        _, f = R.timed(holder.clear, "free")
        for key, v in (("alloc_ms", a), ("alloc_host_ms", h), ("rendezvous_warm_ms", r),
                       ("free_ms", f), ("cycle_ms", a + r + b + f)):
            parts[key].append(v)
    return {k: statistics.median(v) for k, v in parts.items()}, {}


def g_cached(R: Rank, _size):
    t = R.alloc(4096)
    R.symm_mem.rendezvous(t, R.group)
    n = R.args.cached_calls
    t0 = time.perf_counter()
    for _ in range(n):
        R.symm_mem.rendezvous(t, R.group)
    dt = (time.perf_counter() - t0) / n
    R.keep.append(t)
    return {"rendezvous_cached_us": dt}, {}


def g_barrier(R: Rank, _size):
    t = R.alloc(4096)
    hdl = R.symm_mem.rendezvous(t, R.group)
    R.keep.append((t, hdl))
    return {"barrier_us": R.gpu_time(lambda: hdl.barrier(channel=0), R.args.signal_iters)}, {}


def g_put_wait(R: Rank, _size):
    t = R.alloc(4096)
    hdl = R.symm_mem.rendezvous(t, R.group)
    R.keep.append((t, hdl))
    peer = R.rank ^ 1  # pairs (0,1), (2,3) ...; an odd last rank sits out
    if peer >= R.world:
        R.host_barrier()  # gpu_time's barrier, to stay in step with the pairs
        return {}, {}

    def ping():
        hdl.put_signal(peer, channel=0)
        hdl.wait_signal(peer, channel=0)

    def pong():
        hdl.wait_signal(peer, channel=0)
        hdl.put_signal(peer, channel=0)

    fn = ping if R.rank % 2 == 0 else pong
    return {"put_wait_rtt_us": R.gpu_time(fn, R.args.signal_iters)}, {}


def g_one_shot(R: Rank, _size):
    torch = R.torch
    numel = MIB // 4
    inp = R.p2p.empty_strided_p2p((numel,), (1,), torch.float32, R.device)
    R.symm_mem.rendezvous(inp, R.group)
    base = torch.arange(numel, device=R.device, dtype=torch.float32) % 13
    inp.copy_(base + R.rank)  # small integers: every summation order is exact
    want = base * R.world + sum(range(R.world))
    R.host_barrier()
    out = torch.ops.symm_mem.one_shot_all_reduce(inp, "sum", R.group)
    checks = {"one_shot_all_reduce": bool(torch.equal(out, want))}
    sec = R.gpu_time(lambda: torch.ops.symm_mem.one_shot_all_reduce(inp, "sum", R.group),
                     R.args.iters)
    R.keep.append(inp)
    return {"one_shot_all_reduce_us": sec}, checks


# An error that starts so is a row this host cannot run by design (NCCL
# refuses ranks that share a device), which verdict() does not count as a
# problem; any other missing row is one.
NOT_PLANNED = "not planned here: "


def unavailable(R: "Rank", path: str) -> str:
    if path == "nccl" and not R.nccl:
        return NOT_PLANNED + "NCCL refuses ranks sharing a device (gloo runs the process group)"
    return "not available here (triton missing)"


def _exchange(R: Rank, size: int):
    return R.a2a.Exchange(size, R.rank, R.world, R.device, R.group, nccl=R.nccl)


def g_a2a(R: Rank, size: int):
    ex = _exchange(R, size)
    label = size_label(size)
    seconds, checks, errors = {}, {}, {}
    for path, base in A2A_PATHS.items():
        key = f"{base}@{label}"
        if path not in ex.paths:
            errors[key] = unavailable(R, path)
            continue
        fn, _ = ex.paths[path]
        try:
            checks[key] = ex.check(path, R.cpu)
            seconds[key] = R.gpu_time(fn, R.args.iters)
        except Exception as e:  # noqa: BLE001  (recorded; the other paths go on)
            errors[key] = f"{type(e).__name__}: {e}"
    R.host_barrier()  # no rank frees while a peer still writes into it
    del ex
    return seconds, checks, errors


def graph_time(R: Rank, fn, per_graph: int):
    """Seconds per fn with fn captured per_graph times in one CUDA graph
    (the launch cost removed), and the graph."""
    torch = R.torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the default stream, as capture wants
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    R.host_barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(per_graph):
            fn()
    R.host_barrier()
    return R.gpu_time(graph.replay, R.args.graph_replays, warmup=1) / per_graph, graph


def g_graph(R: Rank, size: int):
    ex = _exchange(R, size)
    label = size_label(size)
    seconds, checks, errors = {}, {}, {}
    for path, base in GRAPH_PATHS.items():
        key = f"{base}@{label}"
        if path not in ex.paths:
            errors[key] = unavailable(R, path)
            continue
        fn, out = ex.paths[path]
        try:
            seconds[key], graph = graph_time(R, fn, R.args.per_graph)
            R.host_barrier()
            out.fill_(-1)
            R.host_barrier()
            graph.replay()  # its last iteration leaves the full exchange in out
            R.host_barrier()
            checks[key] = bool(R.torch.equal(out, ex.want))
            del graph
        except Exception as e:  # noqa: BLE001
            errors[key] = f"{type(e).__name__}: {e}"
    R.host_barrier()
    del ex
    return seconds, checks, errors


GROUP_FNS = {"fresh": g_fresh, "cycle": g_cycle, "cached": g_cached, "barrier": g_barrier,
             "put_wait": g_put_wait, "one_shot": g_one_shot, "a2a": g_a2a, "graph": g_graph}


def rank_main(args) -> None:
    """One rank of one launch: the groups in order, each one's result (or
    error) agreed by all ranks and written by rank 0 as it finishes."""
    rank = int(os.environ["RANK"])
    emit = Emitter(args.events, rank)
    for k, v in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}.items():
        os.environ.setdefault(k, v)
    R = Rank(args)
    meta_sent = False
    for group in args.groups.split(","):
        name, _, size = group.partition("@")
        emit(event="start", group=group, t=time.time())
        report = {"seconds": {}, "checks": {}, "errors": {}}
        try:
            res = GROUP_FNS[name](R, parse_size(size) if size else None)
            report["seconds"], report["checks"] = res[0], res[1]
            if len(res) > 2:
                report["errors"] = res[2]
        except Exception as e:  # noqa: BLE001  (the group's error, in the JSON)
            report["errors"] = {"*": f"{type(e).__name__}: {e}"}
            traceback.print_exc()
        ok = R.healthy()
        reports = [None] * R.world
        R.dist.all_gather_object(reports, (report, ok), group=R.cpu)
        if rank == 0:
            if not meta_sent and ok:
                emit(event="meta", **R.meta())
                meta_sent = True
            done = combine([r for r, _ in reports], R.world)
            emit(event="done", group=group, t=time.time(), **done)
        # No rank starts the next group before rank 0 has recorded this one,
        # so the driver blames a crash on the group it happened in.
        R.dist.barrier(group=R.cpu)
        if not all(h for _, h in reports):
            # A spoiled context fails whatever follows: the driver relaunches.
            print(f"rank {rank}: the device is unusable after {group}; ending the launch",
                  flush=True)
            os._exit(3)
    R.host_barrier()
    R.keep.clear()  # freed while the runtime is whole, not at interpreter exit
    R.host_barrier()
    R.dist.destroy_process_group()


# ---- the selftest's stand-in rank (no torch) --------------------------------

def fake_rank_main(args) -> None:
    """Speaks rank_main's protocol with made-up numbers.  COMPARE_FAKE holds
    faults: BACKEND:ROUND:GROUP:crash|hang|raise|startup, comma separated
    (ROUND as in the events file's tag)."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    emit = Emitter(args.events, rank)
    tag = os.path.basename(args.events)  # events-r{round}-{backend}-a{attempt}.jsonl
    rnd = tag.split("-")[1][1:]
    faults = {}
    for f in filter(None, os.environ.get("COMPARE_FAKE", "").split(",")):
        b, r, g, kind = f.split(":")
        faults[(b, r, g)] = kind
    if faults.get((args.backend, rnd, "*")) == "startup":
        sys.exit(5)
    store = store_kind()
    if store == "agent":  # as torch's client would: the driver must be listening
        try:
            socket.create_connection(("127.0.0.1", int(os.environ["MASTER_PORT"])), 5).close()
            store += ":connected"
        except OSError as e:
            store += f":{e}"
    if rank == 0:  # a child of a rank, which the launcher must end too
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        with open(os.path.join(os.path.dirname(args.events), "children"), "a") as f:
            f.write(f"{child.pid}\n")
        emit(event="meta", backend_active=args.backend, device="fake", store=store)
    scale = 1.0 if args.backend == BUILTIN else 0.5
    for group in args.groups.split(","):
        emit(event="start", group=group, t=time.time())
        kind = faults.get((args.backend, rnd, group))
        if kind == "crash" and rank == world - 1:
            # Real ranks move in step (a host barrier after each group);
            # this one dies once rank 0 is in the group too.
            deadline = time.monotonic() + 60
            while not any(e.get("event") == "start" and e.get("group") == group
                          for e in read_events(args.events)) and time.monotonic() < deadline:
                time.sleep(0.02)
            sys.exit(3)
        if kind in ("crash", "hang"):
            time.sleep(600)  # a peer waiting in a collective that never completes
        reps = []
        for r in range(world):
            seconds = {k: (1e-3 if spec(k)[0] == "ms" else 1e-6 if spec(k)[0] == "us" else 1e-3)
                       * scale * (1 + 0.1 * r) for k in group_keys(group)}
            errors = {"*": "RuntimeError: raised"} if kind == "raise" else {}
            reps.append({"seconds": {} if errors else seconds, "checks": {}, "errors": errors})
        emit(event="done", group=group, t=time.time(), **combine(reps, world))


# ---- selftest --------------------------------------------------------------

def selftest() -> int:
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(what)
        print(f"  {'ok  ' if cond else 'FAIL'} {what}", flush=True)

    sizes = [parse_size(x) for x in FULL_SIZES.split(",")]
    expect(sizes[0] == 64 << 10 and sizes[-1] == 64 << 20 and parse_size("4MiB") == 4 << 20,
           "sizes parse (64K, 64M, 4MiB)")
    expect([size_label(x) for x in sizes] == FULL_SIZES.split(",") and size_label(1000) == "1000",
           "sizes print back as written")

    # combine: the slowest rank, converted; checks and errors by rank
    c = combine([{"seconds": {"barrier_us": 8e-6, "a2a_push_only@1M": 1e-3},
                  "checks": {"x": True}},
                 {"seconds": {"barrier_us": 9e-6, "a2a_push_only@1M": 2e-3},
                  "checks": {"x": False}, "errors": {"y": "boom"}}], 2)
    expect(abs(c["values"]["barrier_us"] - 9.0) < 1e-9, "combine takes the slowest rank's time")
    expect(abs(c["values"]["a2a_push_only@1M"] - 2 * MIB / 2e-3 / 1e9) < 1e-9,
           "GB/s counts world*(world-1)*size bytes over the slowest time")
    expect(c["checks"]["x"] == {"ok": False, "failed_ranks": [1]}, "a check fails by rank")
    expect(c["errors"]["y"] == "rank 1: boom", "errors name their rank")

    # summarize: min, median, ratio of medians, verdict against the target
    res = {"samples": {
        "barrier_us": {BUILTIN: [{"value": v} for v in (7.0, 7.2, 7.4)],
                       MORI: [{"value": v} for v in (4.0, 4.9, 5.0)]},
        "put_wait_rtt_us": {BUILTIN: [{"value": 14.0}], MORI: [{"value": 21.0}]},
        "nccl_a2a@16M": {BUILTIN: [{"value": 400.0}],
                         MORI: [{"value": None, "error": "launch hang"}]}},
        "meta": {"world": 2}}
    s = summarize(res)
    expect(s["barrier_us"]["backends"][MORI]["min"] == 4.0, "min per backend")
    expect(s["barrier_us"]["backends"][BUILTIN]["median"] == 7.2, "median per backend")
    expect(abs(s["barrier_us"]["ratio"] - 4.9 / 7.2) < 1e-9, "ratio of medians MORI/built-in")
    expect(s["barrier_us"]["verdict"] == "met", "barrier 0.68x meets <= 0.7")
    expect(s["put_wait_rtt_us"]["verdict"] == "NOT met", "put/wait 1.5x misses <= 1.0")
    expect(s["nccl_a2a@16M"]["verdict"] == "no data", "a missing backend is 'no data'")
    md = table(s, res["meta"])
    expect("| barrier_us | us | 7.00 | 7.20 | 4.00 | 4.90 | 0.68 | <= 0.7 | met |" in md,
           "the table row of a met target")
    expect("launch hang" in md, "the table names a missing sample's error")
    expect(md.index("barrier_us") < md.index("nccl_a2a@16M"), "latencies before sizes")
    # a row this host cannot run by design is no problem; any other gap is
    shared = {"summary": {"nccl_a2a@4M": {"backends": {
        b: {"n": 0, "errors": ["rank 0: " + NOT_PLANNED + "NCCL refuses ranks sharing a device"]}
        for b in (BUILTIN, MORI)}}}, "checks": []}
    ok, problems, warnings = verdict(shared)
    expect(ok and not problems and len(warnings) == 2,
           f"a row not planned here is a warning, not a problem ({problems})")
    shared["summary"]["nccl_a2a@4M"]["backends"][MORI]["errors"] = ["rank 0: launch hang"]
    expect(not verdict(shared)[0], "a row missing for another reason is a problem")

    # the launcher, with stand-in ranks: order, crash, hang, relaunch, startup
    with tempfile.TemporaryDirectory() as out:
        ns = argparse.Namespace(
            out=out, world=2, rounds=2, backends=[BUILTIN, MORI], iters=1, reduced=True,
            rank_cmd=[sys.executable, os.path.abspath(__file__), "--fake"], attempts=3,
            budget_s=300.0, startup_timeout=60.0, group_timeout=5.0, poll_s=0.05,
            store="agent", store_host=fake_store)
        groups = plan_groups([256 << 10], [], None)
        alone = plan_groups([256 << 10], [256 << 10], None, world=1)
        expect("put_wait" not in alone and not any(g.startswith(("a2a", "graph")) for g in alone)
               and "barrier" in alone and "fresh" in alone,
               f"one rank runs no group that needs a peer ({','.join(alone)})")
        os.environ["COMPARE_FAKE"] = (f"{BUILTIN}:1:barrier:crash,{MORI}:0:put_wait:hang,"
                                      f"{MORI}:1:cached:raise")
        t0 = time.monotonic()
        r = drive(ns, groups, log=lambda m: print("   ", m, flush=True))
        wall = time.monotonic() - t0
        del os.environ["COMPARE_FAKE"]
        expect(r["meta"].get("store") == "agent:connected",
               "the ranks are clients of the driver's store (TORCHELASTIC_USE_AGENT_STORE), "
               f"got {r['meta'].get('store')}")
        order = [(la["tag"].split("-")[0], la["backend"]) for la in r["launches"]]
        expect([b for _, b in order][:2] == [BUILTIN, MORI] and order[0][0] == "r0",
               "launches interleave: built-in, then MORI, round by round")
        firsts = [(t, b) for t, b in dict.fromkeys(order)]
        expect(firsts == [("r0", BUILTIN), ("r0", MORI), ("r1", BUILTIN), ("r1", MORI)],
               "A B A B")
        s = summarize(r)
        b_cuda = r["samples"]["barrier_us"][BUILTIN]
        expect(len(b_cuda) == 2 and b_cuda[1]["value"] is None and "crash" in b_cuda[1]["error"],
               "a crash is recorded against the group it happened in")
        pw = r["samples"]["put_wait_rtt_us"][MORI]
        expect(pw[0]["value"] is None and "hang" in pw[0]["error"],
               "a hang (no progress) is recorded against its group")
        expect(s["one_shot_all_reduce_us"]["backends"][MORI]["n"] == 2 and
               s["one_shot_all_reduce_us"]["backends"][BUILTIN]["n"] == 2,
               "the groups after a crash or a hang are measured in a relaunch")
        fresh = r["samples"]["alloc_first_ms"][MORI]
        expect(len(fresh) == 2 and all(x["value"] is not None for x in fresh),
               "a relaunch does not measure 'fresh' again")
        expect(s["rendezvous_cached_us"]["backends"][MORI]["n"] == 1 and
               "raised" in s["rendezvous_cached_us"]["backends"][MORI]["errors"][0],
               "a group that raises costs only itself, without a relaunch")
        expect(len(r["launches"]) == 6, f"6 launches (4 + 2 relaunches), got {len(r['launches'])}")
        expect(abs(s["barrier_us"]["ratio"] - 0.5) < 1e-9, "the ratio of the stand-in's numbers")
        children = [la for la in r["launches"] if la["ended"] != "ok"]
        expect(all(la["wall_s"] < 30 for la in children),
               "a crashed launch ends promptly, a hung one at its timeout")
        with open(os.path.join(out, "children")) as f:
            pids = [int(line) for line in f]

        def alive(pid):
            try:  # a zombie no one has reaped yet is dead too
                with open(f"/proc/{pid}/stat") as f:
                    return f.read().rsplit(")", 1)[1].split()[0] != "Z"
            except (FileNotFoundError, ProcessLookupError):
                return False

        deadline = time.monotonic() + 10  # SIGKILL is delivered, not awaited
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = [p for p in pids if alive(p)]
        expect(len(pids) == 6 and not alive,
               f"every rank's children end with its launch ({len(pids)} started, "
               f"{len(alive)} alive)")
        ok, problems, warnings = verdict(dict(r, summary=s))
        expect(ok and not problems and any("put_wait_rtt_us" in w for w in warnings),
               "a round another round made up for is a warning, not a gap")
        print(f"    (launcher part: {wall:.1f} s)")

        os.environ["COMPARE_FAKE"] = f"{MORI}:0:*:startup"
        ns.rounds = 1
        r = drive(ns, groups, log=lambda m: print("   ", m, flush=True))
        del os.environ["COMPARE_FAKE"]
        mori_launches = [la for la in r["launches"] if la["backend"] == MORI]
        expect(len(mori_launches) == 2 and all(
            x["error"] and "before any group" in x["error"]
            for x in r["samples"]["barrier_us"][MORI]),
            "a launch that crashes before any group is tried once more, then every group "
            "says why")
        summary = write_outputs(r, out, log=lambda m: None)
        with open(os.path.join(out, "compare.json")) as f:
            saved = json.load(f)
        expect("summary" in saved and os.path.exists(os.path.join(out, "compare.md")),
               "JSON and table written")
        try:
            import matplotlib  # noqa: F401
            expect(os.path.getsize(os.path.join(out, "compare.png")) > 10000, "the plot drawn")
        except ImportError:
            expect(saved["meta"]["plot"].startswith("not drawn"),
                   "without matplotlib the JSON says the plot was not drawn")
        expect(summary["barrier_us"]["backends"][BUILTIN]["n"] == 1, "one round: one sample")
        ok, problems, _ = verdict(r)
        expect(not ok and any("barrier_us: no MORI sample" in p for p in problems),
               "the run's verdict names each metric with no sample")

    print(f"compare selftest: {'FAILED ' + str(len(failures)) if failures else 'ok'}")
    return 1 if failures else 0


# ---- command line ----------------------------------------------------------

def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="compare-results", help="output directory")
    p.add_argument("--world", type=int, default=0, help="ranks per launch (default min(2, GPUs))")
    p.add_argument("--rounds", type=int, default=3, help="launches per backend (>= 3)")
    p.add_argument("--reduced", action="store_true",
                   help=f"fewer sizes ({REDUCED_SIZES}; graphs {REDUCED_GRAPH_SIZES}) and "
                        "iterations, for tests/gpu/compare.sh")
    p.add_argument("--sizes", help=f"bytes per peer for the all-to-all (default {FULL_SIZES})")
    p.add_argument("--graph-sizes", help="sizes for the CUDA-graph all-to-all (default: --sizes)")
    p.add_argument("--only", help="groups to run: fresh,cycle,cached,barrier,put_wait,one_shot,"
                                  "a2a,graph (default all)")
    p.add_argument("--iters", type=int, default=0, help="timed iterations (default 50; reduced 20)")
    p.add_argument("--budget-s", type=float, default=3600.0,
                   help="stop launching after this many seconds (the rest is recorded as not run)")
    p.add_argument("--startup-timeout", type=float, default=240.0,
                   help="seconds a launch may take to start its first group")
    p.add_argument("--group-timeout", type=float, default=150.0,
                   help="seconds without progress after which a launch counts as hung")
    p.add_argument("--attempts", type=int, default=3, help="launches per round and backend")
    p.add_argument("--store", choices=["agent", "rank0"], default="agent",
                   help="who serves each launch's TCPStore: this driver, every rank a client, "
                        "as torchrun's agent does (default); or rank 0 (a plain env:// launch)")
    p.add_argument("--selftest", action="store_true", help="check this script without torch")
    # internal: one rank of a launch (real or the selftest's stand-in)
    p.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--fake", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--backend", help=argparse.SUPPRESS)
    p.add_argument("--groups", help=argparse.SUPPRESS)
    p.add_argument("--events", help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.selftest:
        return selftest()
    if args.rank_main:
        if args.fake:
            fake_rank_main(args)
            return 0
        args.cycles = 8 if args.reduced else 20
        args.cached_calls = 1000 if args.reduced else 5000
        args.signal_iters = 300 if args.reduced else 1000
        args.per_graph = 10
        args.graph_replays = 5 if args.reduced else 20
        rank_main(args)
        return 0

    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    args.iters = args.iters or (20 if args.reduced else 50)
    sizes = [parse_size(s) for s in (args.sizes or (REDUCED_SIZES if args.reduced
                                                    else FULL_SIZES)).split(",")]
    graph_text = args.graph_sizes or (REDUCED_GRAPH_SIZES if args.reduced and not args.sizes
                                      else None)
    graph_sizes = [parse_size(s) for s in graph_text.split(",")] if graph_text else sizes
    if not args.world:
        import torch  # the driver only counts GPUs; ranks bring CUDA up

        args.world = min(2, torch.cuda.device_count())
    if args.world < 1:
        print("compare FAILED: no GPU visible", flush=True)
        return 1
    only = args.only.split(",") if args.only else None
    groups = plan_groups(sizes, graph_sizes, only, args.world)
    dropped = [g for g in plan_groups(sizes, graph_sizes, only) if g not in groups]
    if dropped:
        print(f"compare: at {args.world} rank(s) these need a peer and are not run: "
              f"{','.join(dropped)}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    args.backends = [BUILTIN, MORI]
    args.rank_cmd = [sys.executable, os.path.abspath(__file__)]
    args.store_host = host_store
    args.poll_s = 0.2
    logf = open(os.path.join(args.out, "compare.log"), "a")

    def log(msg: str) -> None:
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    log(f"compare: {args.world} ranks, {args.rounds} rounds of {' then '.join(args.backends)}, "
        f"groups {','.join(groups)}")
    results = drive(args, groups, log)
    results["meta"]["command"] = " ".join(sys.argv)
    try:
        results["meta"]["commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
            cwd=os.path.dirname(os.path.abspath(__file__)), timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    write_outputs(results, args.out, log)
    ok, problems, warnings = verdict(results)
    for line in warnings:
        log(f"  warning: {line}")
    for line in problems:
        log(f"  missing: {line}")
    log(f"compare {'ok' if ok else 'INCOMPLETE'}: {len(results['summary'])} metrics, "
        f"{len(problems)} problem(s), {results['meta']['wall_s']} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
