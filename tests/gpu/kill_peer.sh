#!/usr/bin/env bash
# Kill a peer on a GPU host (tests/gpu/kill_peer.py under torchrun): rank 1
# dies with SIGKILL after rendezvous; every survivor's barrier must raise
# within timeout + margin naming rank 1, the context must survive, and the
# survivor must free everything (ledger 0) and exit 0.  Runs at 2 ranks and
# at 4 ranks, about 15 s each, once per signal engine (memop, kernel): one
# rank per GPU where there are enough GPUs, else ranks share GPUs (rank r on
# GPU r mod count, overlapping devices allowed, as torch's own backend
# allows them with TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES=1).  Prints one
# line per survivor and "kill_peer: PASS" or "FAIL".
#
#   OUT (default ./gpu-results/kill_peer), PYTHON, NGPU, KILL_PEER_TIMEOUT_MS
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-$PWD/gpu-results/kill_peer}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 OUT

# shellcheck source=package.sh
. tests/gpu/package.sh
mori_package kill_peer || exit 1
NGPU=${NGPU:-$("$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)}
if [ "$NGPU" -lt 1 ]; then
  echo "kill_peer: FAIL: no GPU visible to torch"
  exit 1
fi

failed=0
# run WORLD ENGINE [VAR=VALUE...]: the engine is MORI_SYMM_SIGNAL_ENGINE's
run() {
  local world=$1 engine=$2; shift 2
  local log="$OUT/torchrun.$world.$engine.log"
  rm -f "$OUT"/kill_peer."$world"."$engine".rank*
  local gpus=$(( NGPU < world ? NGPU : world ))
  echo "=== kill_peer at $world ranks on $gpus GPU(s), signal engine $engine $*"
  local t0=$SECONDS
  timeout 180 env MORI_SYMM_SIGNAL_ENGINE="$engine" "$@" "$PY" -m torch.distributed.run --standalone --nproc_per_node="$world" \
    tests/gpu/kill_peer.py >"$log" 2>&1
  local rc=$?
  grep -h "^kill_peer:" "$log"
  # torchrun fails the job because rank 1 died; a hang or a survivor's own
  # failure must not pass as that.
  local ok=1
  if [ $rc -eq 124 ] || [ $rc -eq 0 ]; then
    echo "kill_peer: torchrun exit $rc (expected the victim's failure)"; ok=0
  fi
  if ! grep -q "exitcode *: *-9" "$log"; then
    echo "kill_peer: the torchrun report does not show rank 1 killed (SIGKILL)"; ok=0
  fi
  for ((r = 0; r < world; r++)); do
    [ $r -eq 1 ] && continue
    local f="$OUT/kill_peer.$world.$engine.rank$r"
    if [ ! -f "$f" ] || ! grep -q "^PASS" "$f"; then
      echo "kill_peer: rank $r of $world did not pass: $(cat "$f" 2>/dev/null || echo 'no result')"
      ok=0
    fi
  done
  if [ $ok = 1 ]; then
    echo "=== PASS kill_peer $world ranks, $engine ($((SECONDS - t0)) s)"
  else
    echo "=== FAIL kill_peer $world ranks, $engine ($((SECONDS - t0)) s); log: $log"
    tail -30 "$log"
    failed=1
  fi
}

# More ranks than GPUs share them: overlapping devices allowed for those.
shared() { [ "$1" -gt "$NGPU" ] && echo TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES=1; }
# both signal engines: memops (released by the watchdog) and the kernel
# (which gives up by itself)
for engine in memop kernel; do
  run 2 $engine $(shared 2)
  run 4 $engine $(shared 4)
done
if [ $failed = 0 ]; then echo "kill_peer: PASS"; else echo "kill_peer: FAIL"; fi
exit $failed
