#!/usr/bin/env bash
# The C measurements of one GPU run (no torch): mori-gpu-bench's signal
# shapes, graphs, alloc and free steps, per-call host costs and rendezvous
# cycles, the rendezvous cycles again with MORI_SYMM_DEBUG=INFO (each step
# of each rendezvous, alloc, export and teardown timed), and the C demo's
# first rendezvous at 2 ranks three times with its steps.  Everything goes
# under $OUT; stdout gets the tables and the step lines of the demos.
#
#   BIN=build-gpu/bin SHIM=cuda OUT=... bash tests/gpu/bench.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build-gpu/bin}
SHIM=${SHIM:-cuda}
OUT=${OUT:-$PWD/gpu-results/bench}
mkdir -p "$OUT"
rc=0
"$BIN/mori-gpu-bench" --shim "$SHIM" --only signals,graph,alloc,host 2>&1 | tee "$OUT/bench.log"
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
MORI_SYMM_DEBUG=INFO "$BIN/mori-gpu-bench" --shim "$SHIM" --only rendezvous \
  >"$OUT/rendezvous.log" 2>"$OUT/rendezvous-info.log" || rc=1
cat "$OUT/rendezvous.log"
grep -E "rendezvous group|torn down|exported" "$OUT/rendezvous-info.log" | head -12
for i in 1 2 3; do
  MORI_SYMM_DEBUG=INFO "$BIN/mori-symm" demo --shim "$SHIM" --ranks 2 --size 256M \
    >"$OUT/demo-$i.log" 2>&1 || rc=1
  grep -E "rendezvous group demo|^timings|demo (ok|FAILED)" "$OUT/demo-$i.log"
done
echo "bench: $([ $rc = 0 ] && echo PASS || echo FAIL)"
exit $rc
