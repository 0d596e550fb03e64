#!/usr/bin/env bash
# bench/cupti_trace.sh - compare.py's timed steps, call by call, on a GPU
# host without nsys: builds bench/cupti_trace.c against the CUDA
# toolkit's CUPTI, runs compare.py's fresh and cycle groups under it (two
# launches per backend, both ranks), and writes bench/nsys_steps.py's
# table of what each step calls:
#
#   bash bench/cupti_trace.sh OUT [compare.py arguments...]
#
# OUT/steps.md (the table and the timelines of two alloc and two free
# steps), OUT/trace.tgz (every process's trace file), OUT/compare (the
# run's own table: traced, so slower than an untraced run; read ratios
# from an untraced one).  Exit status 2 where no CUPTI is installed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${1:?usage: bench/cupti_trace.sh OUT [compare.py arguments...]}
shift
PY=${PYTHON:-python3}
CUDA=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
inc=$(find "$CUDA/" "$CUDA/extras/CUPTI/include" -name cupti.h 2>/dev/null | head -1)
lib=$(find "$CUDA/" "$CUDA/extras/CUPTI/lib64" -name "libcupti.so" 2>/dev/null | head -1)
if [ -z "$inc" ] || [ -z "$lib" ]; then
  echo "cupti_trace: no CUPTI under $CUDA (cupti.h: ${inc:-none}, libcupti.so: ${lib:-none})"
  exit 2
fi
so="$OUT/libcupti_trace.so"
${CC:-cc} -O2 -shared -fPIC bench/cupti_trace.c -I"$(dirname "$inc")" -I"$CUDA/include" \
  "$lib" -Wl,-rpath,"$(dirname "$lib")" -o "$so" || { echo "cupti_trace: build failed"; exit 1; }
rm -rf "$OUT/trace" && mkdir -p "$OUT/trace"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
CUDA_INJECTION64_PATH="$so" CUPTI_TRACE_DIR="$OUT/trace" COMPARE_CUPTI="$so" \
  TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES=1 timeout -k 10 300 \
  "$PY" bench/compare.py --reduced --world 2 --rounds 2 --only fresh,cycle --budget-s 240 \
  --out "$OUT/compare" "$@" >"$OUT/compare.log" 2>&1
rc=$?
echo "cupti_trace: traced compare.py exit status $rc, $(ls "$OUT/trace" | wc -l) trace files"
"$PY" bench/nsys_steps.py "$OUT/trace" --timeline alloc:4 --timeline free:4 \
  --timeline alloc:7 --timeline free:7 >"$OUT/steps.md" || rc=1
tar -czf "$OUT/trace.tgz" -C "$OUT" trace && rm -rf "$OUT/trace"
echo "cupti_trace: table in $OUT/steps.md"
exit $rc
