"""Kill a peer, on real GPUs: run with torchrun (tests/gpu/kill_peer.sh does).

Every rank allocates a MORI symmetric tensor, rendezvouses and passes a
barrier; then rank 1 kills itself with SIGKILL.  Each survivor calls
barrier(channel=1, timeout_ms=T): the watchdog must release the survivor's
stream once it sees rank 1's process gone (memops; a kernel gives up at T
by itself), within T + a margin, the CUDA context must live on
(torch.cuda.synchronize() returns), and the next signal call must raise
within T + a margin, naming rank 1 and the channel.  The survivor then
frees everything (mori.allocator.stats()["ledger_total"] == 0) and exits 0
from its error handler.  Each survivor writes one line to
$OUT/kill_peer.<world>.<engine>.rank<r>: "PASS ..." or "FAIL ...".

MORI_SYMM_SIGNAL_ENGINE (auto, memop or kernel; unset: auto) picks the
signal engine: with memops the watchdog releases the survivor's stream at
T; with the kernel engine the barrier kernel gives up at T by itself and
leaves the window's failure words, which the next call reads.

torchrun stops the other workers (SIGTERM) once it sees rank 1 die; the
survivors ignore SIGTERM from then on, so they finish and report.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import torch
import torch.distributed as dist

TIMEOUT_MS = int(os.environ.get("KILL_PEER_TIMEOUT_MS", "2000"))
MARGIN_MS = int(os.environ.get("KILL_PEER_MARGIN_MS", "3000"))
VICTIM = 1


def main() -> int:
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    out = os.environ.get("OUT", ".")
    ngpu = torch.cuda.device_count()
    device = torch.device("cuda", rank % ngpu)
    torch.cuda.set_device(device)
    # gloo: no GPU collective is left pending when a peer dies.
    dist.init_process_group("gloo")
    import torch.distributed._symmetric_memory as symm_mem

    import mori.allocator

    symm_mem.set_backend("MORI")
    group = dist.group.WORLD.group_name
    t = symm_mem.empty(1 << 20, dtype=torch.uint8, device=device)
    hdl = symm_mem.rendezvous(t, group)
    hdl.barrier(channel=0)
    torch.cuda.synchronize()
    # torchrun's SIGTERM comes once it sees the victim die: ignored from
    # before the victim can die.  The victim never signals on channel 1,
    # so nothing waits for its death.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    dist.barrier()  # everyone is past rendezvous and one barrier
    if rank == VICTIM:
        os.kill(os.getpid(), signal.SIGKILL)

    engine = os.environ.get("MORI_SYMM_SIGNAL_ENGINE") or "auto"
    result = os.path.join(out, f"kill_peer.{world}.{engine}.rank{rank}")
    t0 = time.monotonic()
    error = None
    released_ms = None
    try:
        hdl.barrier(channel=1, timeout_ms=TIMEOUT_MS)  # enqueued: the stream waits
        torch.cuda.synchronize()  # returns once the wait was released (or gave up)
        released_ms = (time.monotonic() - t0) * 1e3
        hdl.barrier(channel=1, timeout_ms=TIMEOUT_MS)  # the window is failed: raises
    except RuntimeError as e:
        error = str(e)
    elapsed_ms = (time.monotonic() - t0) * 1e3

    problems = []
    if error is None:
        problems.append("no error although rank 1 is dead")
    else:
        for needle in ("rank(s) 1 ", "never signalled", "channel 1"):
            if needle not in error:
                problems.append(f"the error does not say {needle!r}")
    # Memops: the watchdog sees rank 1's process gone and ends the wait at
    # once ("... is gone"); a kernel gives up at its own deadline.
    low = TIMEOUT_MS if engine == "kernel" else 0
    if not low <= elapsed_ms <= TIMEOUT_MS + MARGIN_MS:
        problems.append(f"error after {elapsed_ms:.0f} ms, outside [{low}, "
                        f"{TIMEOUT_MS + MARGIN_MS}] ms")
    try:
        torch.cuda.synchronize()  # the context survived
        del hdl, t
        mori.allocator.release_all()
        ledger = mori.allocator.stats()["ledger_total"]
    except Exception as e:  # noqa: BLE001  (report every way it can go wrong)
        problems.append(f"teardown: {e}")
        ledger = -1
    if ledger != 0:
        problems.append(f"ledger_total {ledger} after release_all")

    verdict = "FAIL " + "; ".join(problems) if problems else "PASS"
    line = (f"{verdict} world={world} engine={engine} rank={rank} "
            f"time_to_error_ms={elapsed_ms:.0f} "
            f"released_ms={released_ms if released_ms is None else round(released_ms)} "
            f"timeout_ms={TIMEOUT_MS} ledger_total={ledger} "
            f"error={error!r}")
    print(f"kill_peer: {line}", flush=True)
    with open(result, "w") as f:
        f.write(line + "\n")
    # Exit from the error handler, without the process group's teardown
    # (its dead member would make that wait).
    os._exit(0 if not problems else 1)


if __name__ == "__main__":
    sys.exit(main())
