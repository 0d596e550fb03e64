#!/usr/bin/env bash
# The whole GPU suite and benchmark in one command, on a GPU host: builds
# mori-symm there, runs probe, demo, the cycles growth check and a recorded
# trace on the cuda shim, the >= 4-rank runs on overlapping devices, the
# torch adapter suite (conformance on both backends, pytest), the kill-a-peer
# test, the examples and the side-by-side benchmark.  Every step runs even if
# an earlier one failed; a step whose script is missing or that skips counts
# as not passed.  Results go under $OUT (or ./gpu-results): summary.txt,
# gpu-suite.log, and steps/ (each step's log and each part's own files).
#
#   MORI_GPU_PARTS="c bench scale torch compare kill heal examples"   (the default: all,
#   run in this order)
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/gpu-results}
# Each step writes under $OUT/steps as it goes, so a run cut short (a time
# limit) still leaves what it did.
RES=$OUT/steps
rm -rf "$RES"
mkdir -p "$RES"
SHIM=${MORI_GPU_SHIM:-cuda}
PARTS=" ${MORI_GPU_PARTS:-c bench scale torch kill heal examples compare} "
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$NGPU" -ge 1 ] || NGPU=$(rocm-smi --showid 2>/dev/null | grep -c '^GPU') || true
failed=()
passed=()
step() {
  local name=$1; shift
  echo "=== $name: $*"
  local t0=$SECONDS
  if "$@" 2>&1 | tee "$RES/$name.log"; then
    passed+=("$name")
    echo "=== PASS $name ($((SECONDS - t0)) s)"
  else
    failed+=("$name")
    echo "=== FAIL $name ($((SECONDS - t0)) s)"
  fi
}
part() { [[ "$PARTS" == *" $1 "* ]]; }
# A part's script: missing is a failure, not a silent pass.
script() {
  local name=$1 path=$2; shift 2
  if [ -f "$path" ]; then
    step "$name" env OUT="$RES/$name" BIN="$PWD/build-gpu/bin" LIB="$PWD/build-gpu/lib" \
      SHIM="$SHIM" NGPU="$NGPU" bash "$path" "$@"
  else
    echo "=== FAIL $name: $path is missing"; failed+=("$name")
  fi
}

{
  echo "host: $(hostname) gpus: $NGPU shim: $SHIM parts:$PARTS"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || true
  nvidia-smi topo -m 2>/dev/null || true
} | tee "$RES/host.txt"

step build bash -c "cmake -S . -B build-gpu -G Ninja -DMORI_BUILD_TESTS=OFF -DMORI_WERROR=OFF >/dev/null && ninja -C build-gpu"
BIN=build-gpu/bin
if part c; then
  # the PTX the library embeds was made from the kernels' source as it is,
  # and this host's nvcc makes it again (where it is the release that made it)
  step ptx_check bash scripts/gen_signal_ptx.sh --check
  step probe $BIN/mori-symm probe --shim "$SHIM"
  step demo_1_rank $BIN/mori-symm demo --shim "$SHIM" --ranks 1 --size 64M
  # Two ranks: one per GPU where there are two, sharing the GPU where there
  # is one (MORI supports ranks sharing a device; --ranks-per-device says so).
  PER=$(( NGPU >= 2 ? 1 : 2 ))
  step demo_2_ranks $BIN/mori-symm demo --shim "$SHIM" --ranks 2 --ranks-per-device $PER --size 256M
  step cycles_2_ranks $BIN/mori-symm cycles --shim "$SHIM" --ranks 2 --ranks-per-device $PER \
    --count 300 --size 2M
  step cycles_1_rank $BIN/mori-symm cycles --shim "$SHIM" --ranks 1 --count 300 --size 2M
  if [ -f build-gpu/lib/libmori_faultinject.so ]; then
    step record_trace env LD_PRELOAD=$PWD/build-gpu/lib/libmori_faultinject.so \
      MORI_FI_RECORD="$RES/trace-cuda" $BIN/mori-symm demo --shim "$SHIM" --ranks 2 \
      --ranks-per-device $PER --size 4M
  else
    echo "=== FAIL record_trace: build-gpu/lib/libmori_faultinject.so was not built"
    failed+=(record_trace)
  fi
fi
part bench && script bench tests/gpu/bench.sh
# A survivor's heal against a restart of the world on this host's shim, the
# ranks sharing the GPUs (docs/performance.md, "Heal against a restart").
part heal && step heal_bench env MORI_SYMM_ALLOW_OVERLAPPING_DEVICES=1 $BIN/mori-heal-bench \
  --shim "$SHIM" --devices "$NGPU" --ranks "${MORI_HEAL_RANKS:-2,4,8}" --mib 1,64 \
  --reps "${MORI_HEAL_REPS:-5}"
part scale && script scale tests/gpu/scale.sh
torch_ok=0
python3 -c 'import torch' 2>/dev/null && torch_ok=1
for p in torch compare kill heal examples; do
  part $p || continue
  if [ $torch_ok = 0 ]; then echo "=== FAIL $p: no torch in this environment"; failed+=("$p"); continue; fi
  case $p in
    torch) script torch_suite tests/gpu/torch_suite.sh ;;
    kill) script kill_peer tests/gpu/kill_peer.sh ;;
    heal) script heal_torch tests/gpu/heal_torch.sh ;;
    examples) script examples tests/gpu/examples.sh ;;
    compare) script compare tests/gpu/compare.sh ;;
  esac
done

{
  echo "passed: ${passed[*]:-none}"
  echo "failed: ${failed[*]:-none}"
  grep -h -E "^(shim|device|[0-9]+ +(fabric|posix_fd|error))|probe ok|timings:|demo (ok|FAILED)|cycles (ok|FAILED)|^  rank .* ok|GB/s|ratio|PASS|FAIL|SKIP|time to error|growth|^ +[248] +(1|64) +[0-9.]+ +[0-9.]+ +[0-9.]+|^target " "$RES"/*.log 2>/dev/null | tail -150
  echo "gpu suite: ${#passed[@]} passed, ${#failed[@]} failed"
} | tee "$RES/summary.txt"
cp "$RES/summary.txt" "$OUT/summary.txt"
cat "$RES"/*.log > "$OUT/gpu-suite.log" 2>/dev/null
[ ${#failed[@]} -eq 0 ]
