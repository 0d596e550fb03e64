#!/usr/bin/env python3
"""The labels README.md names for the whole suite, the labels scripts/test.sh
says it runs, and the labels the tests carry (ctest --print-labels of a
build tree) are one list.  `gpu` is left out of the comparison: only a
host with an NVIDIA driver configures a test with it (tests/gpu/run.sh
runs the GPU suite).

    labels_match.py SOURCE_DIR BUILD_DIR CTEST
"""
import re
import subprocess
import sys

ONLY_ON_GPU_HOSTS = {"gpu"}


def listed(text, pattern, where):
    m = re.search(pattern, text, re.S)
    if not m:
        sys.exit(f"labels: {where} names no label list (looked for {pattern!r})")
    body = re.sub(r"\s*#\s*", " ", m.group(1))
    return {w.strip() for w in body.split(",") if w.strip()}


def main():
    src, build, ctest = sys.argv[1:4]
    readme = listed(open(f"{src}/README.md").read(), r"Run the whole test suite \(([^;)]*)[;)]",
                    "README.md")
    script = listed(open(f"{src}/scripts/test.sh").read(), r"every ctest\s*#?\s*label \(([^)]*)\)",
                    "scripts/test.sh")
    out = subprocess.run([ctest, "--test-dir", build, "--print-labels"], capture_output=True,
                         text=True, check=True).stdout
    carried = set(out.split("All Labels:", 1)[1].split()) - ONLY_ON_GPU_HOSTS
    bad = False
    for name, labels in (("README.md", readme), ("scripts/test.sh", script)):
        missing, extra = sorted(carried - labels), sorted(labels - carried)
        if missing or extra:
            bad = True
            print(f"labels: {name} lists {', '.join(sorted(labels))}; the tests carry "
                  f"{', '.join(sorted(carried))} (missing: {', '.join(missing) or '-'}; "
                  f"no test carries: {', '.join(extra) or '-'})")
    if bad:
        sys.exit(1)
    print(f"labels ok: {', '.join(sorted(carried))}")


main()
