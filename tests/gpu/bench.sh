#!/usr/bin/env bash
# The C measurements of one GPU run (no torch), quickest and most asked
# for first: the rendezvous cycles with MORI_SYMM_DEBUG=INFO (each step of
# each rendezvous, export and teardown timed) and the MAP/GRANT calls
# alone; the C demo's first rendezvous at 2 ranks three times with its
# steps, and once under the fault shim's per-call profile; then
# mori-gpu-bench's alloc and free steps, per-call host costs,
# every signal shape and the captured ones.  Everything goes under $OUT;
# stdout gets the tables and the step lines.
#
#   BIN=build-gpu/bin SHIM=cuda OUT=... bash tests/gpu/bench.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build-gpu/bin}
SHIM=${SHIM:-cuda}
OUT=${OUT:-$PWD/gpu-results/bench}
mkdir -p "$OUT"
rc=0
# Two ranks: one per GPU, or sharing the GPU where there is one.
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | wc -l)}
PER=$(( ${NGPU:-0} >= 2 ? 1 : 2 ))
MORI_SYMM_DEBUG=INFO "$BIN/mori-gpu-bench" --shim "$SHIM" --only rendezvous \
  >"$OUT/rendezvous.log" 2>"$OUT/rendezvous-info.log" || rc=1
cat "$OUT/rendezvous.log"
grep -E "rendezvous group|torn down|exported" "$OUT/rendezvous-info.log" | head -12
for i in 1 2 3; do
  MORI_SYMM_DEBUG=INFO "$BIN/mori-symm" demo --shim "$SHIM" --ranks 2 --ranks-per-device $PER \
    --size 256M >"$OUT/demo-$i.log" 2>&1 || rc=1
  grep -E "rendezvous group demo|^timings|demo (ok|FAILED)" "$OUT/demo-$i.log"
done
# Once more under the fault shim's profile (MORI_FI=count=): where each
# rank's time in the runtime and the OS went, the longest call named
# (docs/fault-injection.md).
LIB=${LIB:-$(dirname "$BIN")/lib}
if [ -f "$LIB/libmori_faultinject.so" ]; then
  rm -f "$OUT"/profile.*
  LD_PRELOAD="$LIB/libmori_faultinject.so" MORI_FI="count=$OUT/profile" \
    "$BIN/mori-symm" demo --shim "$SHIM" --ranks 2 --ranks-per-device $PER --size 256M \
    >"$OUT/demo-profile.log" 2>&1 || rc=1
  grep -E "^timings" "$OUT/demo-profile.log"
  for f in "$OUT"/profile.*; do
    [ -f "$f" ] || continue
    echo "demo profile, rank ${f##*.} (function calls total_us longest_us #longest), top 8:"
    grep -v -E "^(global|injected|datagrams)" "$f" | sort -k3 -g -r | head -8 | sed 's/^/  /'
  done
fi
"$BIN/mori-gpu-bench" --shim "$SHIM" --only alloc,host,signals,graph 2>&1 | tee "$OUT/bench.log"
[ "${PIPESTATUS[0]}" = 0 ] || rc=1
echo "bench: $([ $rc = 0 ] && echo PASS || echo FAIL)"
exit $rc
