"""torch's contract, checked side by side: every check of checks.py ran on
torch's built-in backend and on MORI in the same run (run.py); here each
(check, backend) is one test.  torch's backend is the oracle: where it
passes and MORI does not, MORI is wrong.  A check torch's backend fails is
reported (xfail) on both, never counted against MORI.  Multicast-only checks
skip on both with the reason."""

from __future__ import annotations

import importlib
import os

import pytest

torch = pytest.importorskip("torch")

# conftest.py puts this directory on sys.path; MORI_CONFORMANCE_CHECKS names
# another check module (the harness's own tests).
checks = importlib.import_module(os.environ.get("MORI_CONFORMANCE_CHECKS", "checks"))

BACKENDS = ("builtin", "mori")


def _result(conformance: dict, backend: str, name: str) -> dict:
    r = conformance["backends"][backend]["results"].get(name)
    if r is None:
        pytest.fail(f"{name} has no result on {backend}: was it selected with --only?")
    return r


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", [c.name for c in checks.CHECKS])
def test_conformance(conformance: dict, name: str, backend: str) -> None:
    r = _result(conformance, backend, name)
    if r["status"] == "pass":
        return
    if r["status"] == "skip":
        pytest.skip(r["message"])
    what = f"{r['status']}: {r['message']}\n{r.get('traceback', '')}"
    if backend == "builtin":
        pytest.xfail(f"torch's built-in backend does not pass it ({what})")
    oracle = _result(conformance, "builtin", name)
    if oracle["status"] != "pass":
        pytest.xfail(f"torch's built-in backend does not pass it either ({oracle['status']}); "
                     f"MORI: {what}")
    pytest.fail(f"MORI differs from torch's built-in backend, which passes: {what}")


def test_mori_logs_have_no_cuda_error(conformance: dict) -> None:
    errors = conformance["backends"]["mori"].get("cuda_errors", [])
    assert not errors, "CUDA errors in MORI's worlds:\n" + "\n".join(errors[:20])
