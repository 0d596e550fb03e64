#!/usr/bin/env bash
# The seed's examples on a GPU host (tests/gpu/run.sh's "examples" part):
# examples/all2all_inline.py (an inline kernel through load_inline) and
# examples/all2all_triton.py, each at 2 ranks in both addressing forms
# (pointer array and flat span + peer * stride) and as a CUDA graph, at
# 256 KiB and 4 MiB per peer: every byte checked, aggregate GB/s printed.
# About 1-2 minutes of GPU time, most of it the first compile of the inline
# kernel (for the visible GPU's architecture only).  Each example prints
# PASS or FAIL; the exit status is nonzero if either failed.
#   EXAMPLES_CHUNK_KIB=256,4096   chunk sizes per peer
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/gpu-results/examples}
PY=${PYTHON:-python3}
CHUNKS=${EXAMPLES_CHUNK_KIB:-256,4096}
mkdir -p "$OUT"
NGPU=${NGPU:-$("$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)}
# Two ranks: one per GPU, or sharing the GPU where there is one.
WORLD=$((NGPU < 1 ? 0 : 2))
[ "$WORLD" -ge 1 ] || { echo "=== FAIL examples: no GPU visible to torch"; exit 1; }

# mori.allocator as tests/gpu/torch_suite.sh installs it; installed here
# when this part runs alone.
mori_importable() { (cd /tmp && "$PY" -c 'import mori.allocator' >/dev/null 2>&1); }
if ! mori_importable && [ -d build-torch-stage ]; then
  export PYTHONPATH="$PWD/build-torch-stage${PYTHONPATH:+:$PYTHONPATH}"
fi
if ! mori_importable; then
  PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    "$PY" -m pip install --no-build-isolation . >"$OUT/install.log" 2>&1
fi
mori_importable || { echo "=== FAIL examples: mori.allocator cannot be imported ($OUT/install.log)"; exit 1; }

# The inline kernel is compiled for the visible GPU only, into a cache of
# its own (outside $OUT: objects are not results).
if [ -z "${TORCH_CUDA_ARCH_LIST:-}" ]; then
  TORCH_CUDA_ARCH_LIST=$("$PY" -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability(0)) if torch.version.cuda else None' 2>/dev/null)
  [ -n "$TORCH_CUDA_ARCH_LIST" ] && [ "$TORCH_CUDA_ARCH_LIST" != None ] && export TORCH_CUDA_ARCH_LIST
fi
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/mori-torch-extensions}
"$PY" -c 'import torch, sys; print("examples: torch", torch.__version__, "cuda", torch.version.cuda, "hip", torch.version.hip)'
command -v nvcc >/dev/null 2>&1 || [ -n "${CUDA_HOME:-}" ] || echo "examples: note: no nvcc on PATH and no CUDA_HOME (load_inline needs one on CUDA)"

failed=()
for example in inline triton; do
  log="$OUT/all2all_$example.log"
  t0=$SECONDS
  timeout -k 10 300 "$PY" -m torch.distributed.run --standalone --nproc_per_node="$WORLD" \
    "examples/all2all_$example.py" --chunk-kib "$CHUNKS" >"$log" 2>&1
  rc=$?
  grep -E "^all2all_$example" "$log"
  if [ $rc -eq 0 ] && grep -q "^all2all_$example: PASS" "$log"; then
    echo "=== PASS examples $example: $WORLD ranks, chunks $CHUNKS KiB, ptrs and flat, eager and graph ($((SECONDS - t0)) s)"
  else
    echo "=== FAIL examples $example: exit status $rc ($((SECONDS - t0)) s); the log's tail:"
    tail -25 "$log"
    failed+=("$example")
  fi
done
echo "examples: ${#failed[@]} failed${failed:+ (${failed[*]})}"
[ ${#failed[@]} -eq 0 ]
