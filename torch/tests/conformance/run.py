"""run.py - the conformance suite's driver: runs every check of checks.py on
torch's built-in backend and on MORI, in worlds of worker processes
(worker.py), and writes results.json, table.md and timings.md under --out.

One world per backend runs every "main" check in order (so set_backend and
process start-up are paid once); the two run one after the other, since
they also measure the control path.  Then, all at once: the "overlap" world
of each backend (4 ranks on 2 GPUs) and one world per "alone" check and
backend (checks that may poison the CUDA context or hang).  A world that
hangs (a rank over its check's budget) or dies is killed, its check is
recorded as such, and a new world takes the checks after it.

    python torch/tests/conformance/run.py --out results/conformance

Needs 1+ GPUs (2 for the intended layout), torch, and the mori package
importable.  Figures are recorded, never asserted; test_conformance.py
reads results.json.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKER = HERE / "worker.py"
BACKENDS = ("builtin", "mori")
STARTUP_BUDGET_S = 240
DONE_GRACE_S = 60       # after a rank reported done, its exit (destroy_process_group) may take this
DEAD_PEER_GRACE_S = 10  # after a rank died, the others get this long before the world is killed
MAX_WORLDS = 12         # per sequence: worlds started after failures, at most
CUDA_ERROR = re.compile(r"CUDA error|illegal memory access|unspecified launch failure|"
                        r"illegal instruction|misaligned address|hipError[A-Z]\w+|"
                        r"teardown at exit failed|device-side assert")

_next_port = [20000 + os.getpid() % 20000]


def free_port() -> int:
    while True:
        port = _next_port[0]
        _next_port[0] = 20000 + (port - 20000 + 7) % 40000
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue


@dataclass
class Spec:
    backend: str
    kind: str           # "main", "overlap", "alone"
    nranks: int
    checks: list        # names, in order
    timings: bool = False
    env: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        tail = self.checks[0] if self.kind == "alone" else self.kind
        return f"{self.backend}.{tail}"


def merge_ranks(per_rank: list) -> dict:
    """One check's result from every rank's."""
    statuses = [r["status"] for r in per_rank]
    msgs = [f"rank {i}: {r['message']}" for i, r in enumerate(per_rank) if r["message"]]
    if all(s == "pass" for s in statuses):
        status = "pass"
    elif all(s == "skip" for s in statuses):
        status = "skip"
        msgs = [per_rank[0]["message"]]
    elif "fail" in statuses:
        status = "fail"
    else:
        status = "fail"
        msgs.insert(0, f"ranks disagree: {statuses}")
    return {"status": status, "message": "; ".join(msgs)[:3000],
            "seconds": max(r["seconds"] for r in per_rank),
            "info": [r.get("info", {}) for r in per_rank],
            "traceback": next((r["traceback"] for r in per_rank if r.get("traceback")), "")}


class World:
    def __init__(self, spec: Spec, checks: list, index: int, out: Path, timings: bool,
                 budgets: dict):
        self.spec, self.checks, self.index, self.budgets = spec, checks, index, budgets
        self.name = f"{spec.label}.w{index}"
        self.states = [out / "state" / f"{self.name}.r{r}.json" for r in range(spec.nranks)]
        self.logs = [out / "logs" / f"{self.name}.r{r}.log" for r in range(spec.nranks)]
        self.killed = ""
        self.hung = ""  # the label a rank overran its budget in, if that is why it was killed
        self.started = time.time()
        self.first_exit = None
        port = free_port()
        self.procs = []
        for r in range(spec.nranks):
            env = dict(os.environ)
            for k in ("TORCH_SYMMMEM", "TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"):
                env.pop(k, None)
            env.update(RANK=str(r), WORLD_SIZE=str(spec.nranks), LOCAL_RANK=str(r),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PYTHONUNBUFFERED="1",
                       NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
                       NVSHMEM_DISABLE_NVLS="1", PYTHONFAULTHANDLER="1",
                       TORCH_SHOW_CPP_STACKTRACES="1", TORCH_DISABLE_ADDR2LINE="1")
            env.update(spec.env)
            cmd = [sys.executable, str(WORKER), "--backend", spec.backend, "--kind", spec.kind,
                   "--checks", ",".join(checks), "--state", str(self.states[r])]
            if timings:
                cmd.append("--timings")
            log = open(self.logs[r], "w")
            self.procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True, cwd=str(HERE)))
            log.close()

    def read(self, r: int) -> dict | None:
        try:
            return json.loads(self.states[r].read_text())
        except (OSError, ValueError):
            return None

    def kill(self, why: str) -> None:
        if not self.killed:
            self.killed = why
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            p.wait()

    def poll(self) -> bool:
        """True once every rank has exited (or the world was killed)."""
        now = time.time()
        codes = [p.poll() for p in self.procs]
        if all(c is not None for c in codes):
            return True
        for r, p in enumerate(self.procs):
            if codes[r] is not None:
                continue
            st = self.read(r)
            if st is None:
                if now - self.started > STARTUP_BUDGET_S:
                    self.kill(f"rank {r} did not start within {STARTUP_BUDGET_S} s")
                    return True
                continue
            if st.get("done") and now - st["since"] > DONE_GRACE_S:
                p.kill()
                continue
            label, since, budget = st.get("running"), st.get("since", now), st.get("budget", 0)
            if label and now - since > budget:
                self.hung = label
                self.kill(f"rank {r} spent over {budget:.0f} s in {label}")
                return True
        if any(c is not None and c != 0 for c in codes):
            self.first_exit = self.first_exit or now
            if now - self.first_exit > DEAD_PEER_GRACE_S:
                dead = [r for r, c in enumerate(codes) if c not in (None, 0)]
                self.kill(f"rank(s) {dead} exited ({[codes[r] for r in dead]}); the others hung")
                return True
        return False

    def exit_codes(self) -> list:
        return [p.returncode for p in self.procs]


class Sequence:
    """A spec's checks through as many worlds as failures need."""

    def __init__(self, spec: Spec, out: Path, budgets: dict):
        self.spec, self.out, self.budgets = spec, out, budgets
        self.remaining = list(spec.checks)
        self.results: dict = {}
        self.timings = None
        self.worlds: list = []
        self.notes: list = []
        self.world = None
        self.done = False

    def start(self) -> None:
        if not self.remaining or len(self.worlds) >= MAX_WORLDS:
            for name in self.remaining:
                self.results[name] = {"status": "not run", "message": "too many worlds failed"}
            self.done = True
            return
        timings = self.spec.timings and not self.worlds
        self.world = World(self.spec, self.remaining, len(self.worlds), self.out, timings,
                           self.budgets)

    def poll(self) -> None:
        if self.done:
            return
        if self.world is None:
            self.start()
            return
        if not self.world.poll():
            return
        self.collect(self.world)
        self.world = None
        if not self.remaining:
            self.done = True

    def give_up(self, why: str) -> None:
        if self.done:
            return
        if self.world is not None:
            self.world.kill(why)
            self.collect(self.world)
            self.world = None
        for name in self.remaining:
            self.results.setdefault(name, {"status": "not run", "message": why, "seconds": None,
                                           "info": [], "traceback": ""})
        self.remaining = []
        self.done = True

    def collect(self, w: World) -> None:
        states = [w.read(r) or {} for r in range(len(w.procs))]
        codes = w.exit_codes()
        why = w.killed or f"exit codes {codes}"
        self.worlds.append({"name": w.name, "checks": w.checks, "exit_codes": codes,
                            "killed": w.killed, "logs": [str(p) for p in w.logs],
                            "notes": [st.get("notes", []) for st in states]})
        done = sum(1 for n in w.checks if all(st.get("results", {}).get(n) for st in states))
        print(f"conformance: world {w.name} ended after {time.time() - w.started:.0f} s, "
              f"{done}/{len(w.checks)} checks done, exit codes {codes}"
              f"{'; ' + w.killed if w.killed else ''}", flush=True)
        if self.timings is None and any(st.get("timings") is not None for st in states):
            self.timings = [st.get("timings") for st in states]
        if any(st.get("running") == "__timings__" for st in states) and not any(
                st.get("results") for st in states):
            # The figures hung or crashed: record it and run the checks anyway.
            self.timings = [{"error": f"the measurement did not finish: {why}"}]
            return
        progressed = False
        for i, name in enumerate(w.checks):
            per_rank = [st.get("results", {}).get(name) for st in states]
            if all(per_rank):
                self.results[name] = merge_ranks(per_rank)
                progressed = True
                continue
            started = any(per_rank) or any(st.get("running") == name for st in states)
            if not started:
                if progressed:  # it broke between checks: the next world starts here
                    self.remaining = w.checks[i:]
                    return
                for rest in w.checks[i:]:  # it never got going: another would not either
                    self.results[rest] = {"status": "not run", "message":
                                          f"world {w.name} ended before this check ({why}); "
                                          "see its logs", "seconds": None, "info": [],
                                          "traceback": ""}
                self.remaining = []
                return
            if w.hung == name:
                status = "hang"
            elif any(r and r["status"] == "fail" for r in per_rank):
                status = "fail"
            elif w.killed and not w.hung and all(c is not None and c < 0 for c in codes):
                status = "not run"  # stopped from outside (the suite's deadline)
            else:
                status = "crash"
            msgs = [f"rank {r}: {x['message']}" for r, x in enumerate(per_rank)
                    if x and x["message"]]
            missing = [r for r, x in enumerate(per_rank) if not x]
            msgs.append(f"rank(s) {missing} did not finish it ({why})")
            self.results[name] = {"status": status, "message": "; ".join(msgs)[:3000],
                                  "seconds": None, "info": [],
                                  "traceback": next((x["traceback"] for x in per_rank
                                                     if x and x.get("traceback")), "")}
            self.remaining = w.checks[i + 1:]
            return
        self.remaining = []


def run_sequences(seqs: list, deadline: float) -> None:
    """Polls seqs until all are done or the suite's deadline passes; then
    what still runs is killed and what is left is recorded as not run."""
    while not all(s.done for s in seqs):
        if time.time() > deadline:
            for s in seqs:
                s.give_up("the suite's deadline (--deadline) passed")
            return
        for s in seqs:
            s.poll()
        time.sleep(0.2)


def scan_logs(worlds: list) -> list:
    hits = []
    for w in worlds:
        for log in w["logs"]:
            try:
                for n, line in enumerate(Path(log).read_text(errors="replace").splitlines(), 1):
                    if CUDA_ERROR.search(line):
                        hits.append(f"{Path(log).name}:{n}: {line.strip()[:200]}")
            except OSError:
                pass
    return hits


def check_module():
    """checks.py; MORI_CONFORMANCE_CHECKS names another (the harness's own tests)."""
    return importlib.import_module(os.environ.get("MORI_CONFORMANCE_CHECKS", "checks"))


def plan(ngpu: int, only: set | None) -> list:
    """[[sequences run one after the other], [sequences run together]]."""
    C = check_module()
    pick = (lambda c: only is None or c.name in only)
    main = [c.name for c in C.CHECKS if c.world == "main" and pick(c)]
    overlap = [c.name for c in C.CHECKS if c.world == "overlap" and pick(c)]
    alone = [c.name for c in C.CHECKS if c.world == "alone" and pick(c)]
    two = 2
    share = {} if ngpu >= two else {"TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES": "1"}
    first, together = [], []
    for b in BACKENDS:
        if main:
            first.append(Spec(b, "main", two, main, timings=True, env=share))
    for b in BACKENDS:
        if overlap:
            together.append(Spec(b, "overlap", 4, overlap,
                                 env={"TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES": "1"}))
        for name in alone:
            together.append(Spec(b, "alone", two, [name], env=share))
    return [first, together]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", default="conformance-results")
    p.add_argument("--only", default="", help="comma-separated check names (default: all)")
    p.add_argument("--deadline", type=float, default=480,
                   help="seconds for the whole suite; what is left then is not run (GPU time "
                        "is scarce: a run that goes wrong stops instead of retrying for long)")
    args = p.parse_args()
    sys.path.insert(0, str(HERE))
    C = check_module()
    import table
    import torch

    out = Path(args.out).resolve()
    for d in (out, out / "state", out / "logs"):
        d.mkdir(parents=True, exist_ok=True)
    ngpu = torch.cuda.device_count()
    if ngpu == 0:
        print("conformance: no GPU visible to torch", file=sys.stderr)
        return 2
    only = set(x for x in args.only.split(",") if x) or None
    budgets = {c.name: c.budget_s for c in C.CHECKS}
    t0 = time.time()
    first, together = plan(ngpu, only)
    done = []
    deadline = t0 + args.deadline
    for spec in first:
        seq = Sequence(spec, out, budgets)
        run_sequences([seq], deadline)
        done.append(seq)
    seqs = [Sequence(spec, out, budgets) for spec in together]
    run_sequences(seqs, deadline)
    done += seqs

    results = {
        "meta": {"torch": torch.__version__, "cuda": torch.version.cuda, "hip": torch.version.hip,
                 "gpus": ngpu, "host": socket.gethostname(),
                 "seconds": round(time.time() - t0, 1)},
        "checks": [{"name": c.name, "doc": c.doc, "world": c.world, "multicast": c.multicast}
                   for c in C.CHECKS if only is None or c.name in only],
        "backends": {b: {"results": {}, "timings": None, "worlds": [], "cuda_errors": []}
                     for b in BACKENDS},
    }
    for seq in done:
        entry = results["backends"][seq.spec.backend]
        entry["results"].update(seq.results)
        entry["worlds"] += seq.worlds
        if seq.timings is not None:
            entry["timings"] = seq.timings
    for b in BACKENDS:
        entry = results["backends"][b]
        # torch's backend traps in the timeout checks on purpose; MORI must not.
        worlds = entry["worlds"] if b == "mori" else [w for w in entry["worlds"]
                                                      if "timeout" not in w["name"]]
        entry["cuda_errors"] = scan_logs(worlds)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "table.md").write_text(table.render_table(results))
    (out / "timings.md").write_text(table.render_timings(results))
    print(table.render_table(results))
    print(table.render_timings(results))
    print(table.summary(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
