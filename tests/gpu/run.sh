#!/usr/bin/env bash
# The whole GPU suite and benchmark in one command, on a GPU host: builds
# mori-symm there, runs probe, demo (1 and 2 ranks), the 1000-cycle growth
# check and a recorded trace on the cuda shim, then the torch adapter suite
# and benchmark.  Every step runs even if an earlier one failed; results go
# under $OUT (or ./gpu-results): summary.txt, gpu-suite.log, traces, and a
# tarball of everything.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/gpu-results}
RES=$(mktemp -d /tmp/mori-gpu-XXXXXX)
mkdir -p "$OUT"
SHIM=${MORI_GPU_SHIM:-cuda}
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

{
  echo "host: $(hostname) gpus: $NGPU shim: $SHIM"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || true
  nvidia-smi topo -m 2>/dev/null || true
} | tee "$RES/host.txt"

step build bash -c "cmake -S . -B build-gpu -G Ninja -DMORI_BUILD_TESTS=OFF >/dev/null && ninja -C build-gpu"
BIN=build-gpu/bin
step probe $BIN/mori-symm probe --shim "$SHIM"
step demo_1_rank $BIN/mori-symm demo --shim "$SHIM" --ranks 1 --size 64M
if [ "$NGPU" -ge 2 ]; then
  step demo_2_ranks $BIN/mori-symm demo --shim "$SHIM" --ranks 2 --size 256M
  step cycles_2_ranks $BIN/mori-symm cycles --shim "$SHIM" --ranks 2 --count 1000 --size 2M
  if [ -f build-gpu/lib/libmori_faultinject.so ]; then
    step record_trace env LD_PRELOAD=$PWD/build-gpu/lib/libmori_faultinject.so \
      MORI_FI_RECORD="$RES/trace-cuda" $BIN/mori-symm demo --shim "$SHIM" --ranks 2 --size 4M
  fi
else
  step cycles_1_rank $BIN/mori-symm cycles --shim "$SHIM" --ranks 1 --count 1000 --size 2M
fi
# MORI_GPU_SKIP_TORCH=1 runs only the C suite (the torch suite takes minutes).
if [ -z "${MORI_GPU_SKIP_TORCH:-}" ] && [ -f tests/gpu/torch_suite.sh ] &&
   python3 -c 'import torch' 2>/dev/null; then
  step torch_suite env OUT="$RES/torch" bash tests/gpu/torch_suite.sh
fi

{
  echo "passed: ${passed[*]:-none}"
  echo "failed: ${failed[*]:-none}"
  grep -h -E "^(shim|device|[0-9]+ +(fabric|posix_fd|error))|probe ok|timings:|demo (ok|FAILED)|cycles (ok|FAILED)|^  rank .* ok" "$RES"/*.log 2>/dev/null
  grep -h -E "GB/s|us/call|PASSED|FAILED|passed|failed" "$RES"/torch*.log "$RES"/torch/*.log 2>/dev/null | tail -40
  echo "gpu suite: ${#passed[@]} passed, ${#failed[@]} failed"
} | tee "$RES/summary.txt"
cp "$RES/summary.txt" "$OUT/summary.txt"
cat "$RES"/*.log > "$OUT/gpu-suite.log" 2>/dev/null
cp "$RES"/trace-cuda* "$OUT/" 2>/dev/null
tar czf "$OUT/gpu-results.tar.gz" -C "$RES" . 2>/dev/null
[ ${#failed[@]} -eq 0 ]
