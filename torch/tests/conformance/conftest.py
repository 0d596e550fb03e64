"""The conformance results, produced once per pytest session: read from
$MORI_CONFORMANCE_RESULTS if it names a results.json, otherwise run.py runs
the worlds now, writing under $MORI_CONFORMANCE_OUT (default: a temporary
directory), within $MORI_CONFORMANCE_DEADLINE seconds (default 480)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


@pytest.fixture(scope="session")
def conformance() -> dict:
    given = os.environ.get("MORI_CONFORMANCE_RESULTS")
    if given and Path(given).is_file():
        return json.loads(Path(given).read_text())
    out = Path(os.environ.get("MORI_CONFORMANCE_OUT") or tempfile.mkdtemp(prefix="mori-conf-"))
    deadline = os.environ.get("MORI_CONFORMANCE_DEADLINE", "480")
    proc = subprocess.run([sys.executable, str(HERE / "run.py"), "--out", str(out),
                           "--deadline", deadline])
    results = out / "results.json"
    if proc.returncode != 0 or not results.is_file():
        pytest.fail(f"run.py exited {proc.returncode} without {results}")
    return json.loads(results.read_text())
