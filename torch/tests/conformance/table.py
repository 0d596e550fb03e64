"""table.py - the conformance results as markdown, for docs/torch.md: one
row per check (built-in result, MORI result), what each check asserts, and
the control-path timings of both backends from the same run.

    python torch/tests/conformance/table.py results.json
"""

from __future__ import annotations

import json
import statistics
import sys

BACKENDS = ("builtin", "mori")
TITLES = {"builtin": "built-in (CUDA)", "mori": "MORI"}


def cell(r: dict | None) -> str:
    if r is None:
        return "not run"
    status, msg = r.get("status", "?"), " ".join(str(r.get("message", "")).split())
    if status == "pass":
        return "pass"
    if status == "skip":
        return f"skip: {msg[:90]}"
    return f"**{status.upper()}**: {msg[:140]}".replace("|", "\\|")


def render_table(results: dict) -> str:
    meta = results.get("meta", {})
    rows = [f"Conformance on {meta.get('gpus', '?')} GPU(s), torch {meta.get('torch', '?')}, "
            f"host {meta.get('host', '?')}, {meta.get('seconds', '?')} s in all.", "",
            "| check | world | " + " | ".join(TITLES[b] for b in BACKENDS) + " |",
            "|---|---|" + "---|" * len(BACKENDS)]
    for c in results["checks"]:
        cells = [cell(results["backends"][b]["results"].get(c["name"])) for b in BACKENDS]
        rows.append(f"| `{c['name']}` | {c['world']} | " + " | ".join(cells) + " |")
    rows += ["", "What each check asserts (after torch's test_symmetric_memory.py):", ""]
    rows += [f"- `{c['name']}`: {c['doc']}" for c in results["checks"]]
    return "\n".join(rows) + "\n"


def _ranks(timings: list | None, key: str) -> list:
    if not timings:
        return []
    return [t[key] for t in timings if isinstance(t, dict) and isinstance(t.get(key), (int, float))]


# (label, key, how ranks combine): a collective's latency is its slowest rank's.
METRICS = (
    ("first alloc in a fresh process (symm_mem.empty 1 MiB), ms", "first_alloc_ms", max),
    ("first rendezvous in a fresh process, ms", "first_rendezvous_ms", max),
    ("second new rendezvous, ms", "second_rendezvous_ms", max),
    ("cached rendezvous from Python, us/call", "cached_rendezvous_us", statistics.median),
    ("alloc 1 MiB (empty_strided_p2p, synchronized), median ms", "alloc_1mib_ms",
     statistics.median),
)


def render_timings(results: dict) -> str:
    rows = ["| metric | " + " | ".join(TITLES[b] for b in BACKENDS) + " | MORI / built-in |",
            "|---|" + "---:|" * (len(BACKENDS) + 1)]
    for label, key, combine in METRICS:
        vals = {b: _ranks(results["backends"][b].get("timings"), key) for b in BACKENDS}
        shown = {b: combine(v) if v else None for b, v in vals.items()}
        ratio = (f"{shown['mori'] / shown['builtin']:.2f}"
                 if shown["mori"] is not None and shown["builtin"] else "-")
        rows.append(f"| {label} | " + " | ".join(
            f"{shown[b]:.3f}" if shown[b] is not None else "-" for b in BACKENDS) + f" | {ratio} |")
    timings = results["backends"]["mori"].get("timings") or []
    phases = [t.get("mori_first_rendezvous_phases_us") for t in timings if isinstance(t, dict)]
    for r, ph in enumerate(phases):
        if ph:
            rows.append("")
            rows.append(f"MORI first rendezvous, rank {r} (us): total {ph['total_us']:.0f} = "
                        f"resolve group {ph['resolve_us']:.0f} + core {ph['core_us']:.0f} "
                        f"(publish {ph['publish_us']:.0f}, peers' requests {ph['requests_us']:.0f}, "
                        f"exchange/import/map {ph['map_us']:.0f}, mapped barrier "
                        f"{ph['mapped_barrier_us']:.0f}, after {ph['tail_us']:.0f}; store waits "
                        f"{ph['store_wait_us']:.0f} in {ph['store_calls']} calls)")
    for b in BACKENDS:
        t = results["backends"][b].get("timings") or []
        errs = [x["error"] for x in t if isinstance(x, dict) and "error" in x]
        if errs:
            rows.append(f"\n{TITLES[b]} timings failed: {errs[0]}")
    return "\n".join(rows) + "\n"


def differences(results: dict) -> list:
    """Checks that pass on torch's backend and not on MORI's."""
    out = []
    for c in results["checks"]:
        b = results["backends"]["builtin"]["results"].get(c["name"]) or {}
        m = results["backends"]["mori"]["results"].get(c["name"]) or {}
        if b.get("status") == "pass" and m.get("status") != "pass":
            out.append(c["name"])
    return out


def summary(results: dict) -> str:
    parts = []
    for b in BACKENDS:
        counts: dict = {}
        for r in results["backends"][b]["results"].values():
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        parts.append(f"{TITLES[b]}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    diff = differences(results)
    errs = results["backends"]["mori"].get("cuda_errors", [])
    return (f"conformance: {'; '.join(parts)}; MORI differs from the built-in on {len(diff)}"
            f"{': ' + ', '.join(diff) if diff else ''}; CUDA errors in MORI's logs: {len(errs)}")


if __name__ == "__main__":
    data = json.loads(open(sys.argv[1]).read())
    print(render_table(data))
    print(render_timings(data))
    print(summary(data))
