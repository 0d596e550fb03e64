#!/usr/bin/env bash
# >= 4 ranks on real VMM memory, several ranks per GPU (the seed's teardown
# crash was at >= 4 ranks): the demo at 4 and 8 ranks; cycles at 4 and 8
# ranks x 300 with teardown on (no growth of fds, the shim's resource registry or device
# memory); exit with live windows (the exit hook tears down, each rank
# checks the resource registry after it); a shim trace of the 8-rank run, teardown
# included, replayed against every sim profile and quirk.  Each step prints
# PASS or FAIL; the last line is the verdict.  About 1 minute on 2 x H200.
#
# Called by tests/gpu/run.sh with OUT, BIN, LIB, SHIM, NGPU; alone:
#   bash tests/gpu/scale.sh   (builds nothing: BIN defaults to build-gpu/bin)
# SCALE_CYCLES (default 300) and SCALE_SIZE (the demo's, default 64M) are
# for the script's own run on the sim (ctest gpu_scripts.scale_on_the_sim).
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-$PWD/build-gpu/bin}
LIB=${LIB:-$PWD/build-gpu/lib}
SHIM=${SHIM:-cuda}
OUT=${OUT:-$PWD/gpu-results/scale}
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | wc -l)}
[ "${NGPU:-0}" -ge 1 ] 2>/dev/null || NGPU=1
CYCLES=${SCALE_CYCLES:-300}
SIZE=${SCALE_SIZE:-64M}
mkdir -p "$OUT"
export MORI_SYMM_TEARDOWN=1 NCCL_NVLS_ENABLE=0
passed=()
failed=()
step() {
  local name=$1; shift
  echo "=== scale $name: $*"
  local t0=$SECONDS
  local rc=0
  if declare -F "$1" >/dev/null; then "$@" >"$OUT/$name.log" 2>"$OUT/$name.err" || rc=$?
  else timeout 240 "$@" >"$OUT/$name.log" 2>"$OUT/$name.err" || rc=$?; fi
  cat "$OUT/$name.log"; cat "$OUT/$name.err" >&2
  if [ $rc -eq 0 ]; then
    passed+=("$name"); echo "=== PASS scale $name ($((SECONDS - t0)) s)"
  else
    failed+=("$name"); echo "=== FAIL scale $name ($((SECONDS - t0)) s, exit $rc)"
  fi
}
per_device() { echo $(( ($1 + NGPU - 1) / NGPU )); }
ranks_args() { echo "--shim $SHIM --ranks $1 --ranks-per-device $(per_device "$1")"; }

echo "scale: $NGPU GPU(s), shim $SHIM, 4 and 8 ranks ($(per_device 4) and $(per_device 8) per GPU)"
for n in 4 8; do
  # shellcheck disable=SC2046
  step "demo_${n}_ranks" "$BIN/mori-symm" demo $(ranks_args $n) --size "$SIZE"
done
for n in 4 8; do
  # shellcheck disable=SC2046
  step "cycles_${n}_ranks" "$BIN/mori-symm" cycles $(ranks_args $n) --count "$CYCLES" --size 2M
done
# shellcheck disable=SC2046
step exit_live_8_ranks "$BIN/mori-symm" demo $(ranks_args 8) --size 16M --exit-live

# The 8-rank run under the recording fault shim (nothing injected), then
# every rank's trace against the sim's contract under every profile/quirk.
rm -f "$OUT"/trace-8-ranks.*
# shellcheck disable=SC2046
step record_8_ranks env LD_PRELOAD="$LIB/libmori_faultinject.so" \
  MORI_FI_RECORD="$OUT/trace-8-ranks" "$BIN/mori-symm" demo $(ranks_args 8) --size 16M
# Each rank's trace, trace-8-ranks.<rank>; the launcher's own (its walk of
# TMPDIR goes through the seam) is trace-8-ranks.pid<pid>, no rank's.
replay_all() {
  local bad=0 n=0
  for t in "$OUT"/trace-8-ranks.[0-9]*; do
    [ -f "$t" ] || continue
    n=$((n + 1))
    "$BIN/mori-symm" replay "$t" || bad=$((bad + 1))
  done
  echo "replayed $n rank traces: $((n - bad)) ok under every profile, $bad with violations"
  [ "$n" -eq 8 ] && [ "$bad" -eq 0 ]
}
step replay_8_ranks replay_all

echo "--- scale figures"
grep -h -E "^demo: |^timings:|demo (ok|FAILED)|^cycles: |cycles (ok|FAILED)|fd_growth=|live=|^replay: |replayed " \
  "$OUT"/*.log 2>/dev/null
grep -h -E "FAILED|violation|exit hook|hung|signal" "$OUT"/*.err 2>/dev/null | head -20
echo "scale: ${#passed[@]} passed (${passed[*]:-none}), ${#failed[@]} failed (${failed[*]:-none})"
if [ ${#failed[@]} -eq 0 ]; then echo "scale: PASS"; else echo "scale: FAIL"; exit 1; fi
