#!/usr/bin/env python3
"""test_check_layers.py - check_layers.py refuses what it is there to refuse.

Builds small trees in a scratch directory and runs the checker on each: an
include that goes up between core's subsystems, one between siblings, and
a cycle between top-level folders must each fail, naming the edge; the
same trees without the bad include must pass.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "check_layers.py")


def tree(files):
    root = tempfile.mkdtemp(prefix="layers-")
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)
    return root


def run(root):
    p = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


GOOD = {
    "core/src/base/base.h": "",
    "core/src/alloc/alloc.h": '#include "../base/base.h"\n',
    "core/src/signal/signal.h": '#include "../alloc/alloc.h"\n',
    "core/src/rendezvous/rendezvous.h": '#include "../signal/signal.h"\n',
    "core/src/process.c": '#include "rendezvous/rendezvous.h"\n',
    "fsm/fsm.c": "",
}

CASES = [
    ("an include up from base to alloc",
     {"core/src/base/os.c": '#include "../alloc/alloc.h"\n'},
     "core/src/base (core layer 0) depends on core/src/alloc"),
    ("an include between the sibling-ranked signal and rendezvous, upward",
     {"core/src/signal/signal.c": '#include "../rendezvous/rendezvous.h"\n'},
     "core/src/signal (core layer 2) depends on core/src/rendezvous"),
    ("a subsystem including the top",
     {"core/src/alloc/x.c": '#include "../process.c"\n'},
     "core/src/alloc (core layer 1) depends on core/src (core layer 4)"),
    ("a cycle between folders",
     {"fsm/x.c": '#include "../core/src/base/base.h"\n',
      "core/src/base/y.c": '#include "../../../fsm/fsm.c"\n'},
     "cycle: "),
]


def main():
    failures = 0
    rc, out = run(tree(GOOD))
    if rc != 0:
        print("FAIL: the good tree was refused:\n" + out)
        failures += 1
    for what, extra, expect in CASES:
        files = dict(GOOD)
        files.update(extra)
        rc, out = run(tree(files))
        if rc == 0 or expect not in out:
            print("FAIL: %s: exit %d, expected %r in:\n%s" % (what, rc, expect, out))
            failures += 1
        else:
            print("ok: %s refused" % what)
    print("%d of %d cases failed" % (failures, len(CASES) + 1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
