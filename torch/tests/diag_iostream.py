"""diag_iostream.py - one process set up as a conformance rank is when its
checks run (an NCCL group of one, the MORI backend, an allocation and a
rendezvous), inserting a number into a std::ostream inside mori_symm._C at each
stage (mori_symm._C._stream_probe).  The adapter itself never does that any
more (docs/torch.md, "Messages"); this records whether the hazard that
made it crash is present on this host.  Prints "stream probe ok" after the
last stage; a crash leaves faulthandler's stack and the stage it reached.

    python torch/tests/diag_iostream.py      (tests/gpu/torch_suite.sh, step iostream)
"""

from __future__ import annotations

import faulthandler
import os
import re
import socket
import subprocess
import sys

faulthandler.enable()


# libstdc++'s number insertion, its locale and num_put's facet id: a library
# other than libstdc++.so.6 that exports them carries a second copy.
STREAM_SYMBOLS = ("_ZNSo9_M_insertIlEERSoT_", "_ZNSt6locale7classicEv",
                  "_ZNSt7num_putIcSt19ostreambuf_iteratorIcSt11char_traitsIcEEE2idE")


def exporters() -> list[str]:
    """The libraries mapped in this process that export any of
    STREAM_SYMBOLS, read with nm -D."""
    libs = sorted({line.split()[-1] for line in open("/proc/self/maps")
                   if line.rstrip().endswith(".so") or ".so." in line.split()[-1]})
    found = []
    for lib in libs:
        if not lib.startswith("/"):
            continue
        try:
            text = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True,
                                  text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        hits = [s for s in STREAM_SYMBOLS if re.search(rf"\b{s}\b", text)]
        if hits:
            found.append(f"{lib}: {', '.join(hits)}")
    return found


def probe(stage: str) -> None:
    from mori_symm import _C
    print(f"probing after {stage} ...", flush=True)
    assert _C._stream_probe(42) == "42"


def main() -> int:
    import torch
    import torch.distributed as dist
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
    import mori.allocator  # noqa: F401
    probe("import mori.allocator")
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    import torch.distributed._symmetric_memory as symm_mem
    symm_mem.set_backend("MORI")
    probe("init_process_group and set_backend")
    t = symm_mem.empty(1024, device=device)
    symm_mem.rendezvous(t, dist.group.WORLD.group_name)
    print("libraries exporting libstdc++'s stream and locale symbols:", flush=True)
    for line in exporters():
        print(f"  {line}", flush=True)
    probe("an allocation and a rendezvous")
    print("stream probe ok", flush=True)
    del t
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
