#!/usr/bin/env bash
# Kill and heal with torch on a GPU host (tests/gpu/heal_torch.py): HEAL_ITERS
# (default 20) times a rank of HEAL_WORLD (default 4) dies by SIGKILL, idle or
# mid-barrier, a replacement process rejoins and the survivors heal their
# window (mori_symm.heal); every rank's data, an eager barrier and a CUDA
# graph captured before the deaths are checked after each heal.  Ranks
# share GPU 0.  Prints "heal_torch: PASS ..." or "FAIL ...".
#
#   OUT (default ./gpu-results/heal_torch), PYTHON
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-$PWD/gpu-results/heal_torch}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 OUT
# shellcheck source=package.sh
. tests/gpu/package.sh
mori_package heal_torch || exit 1
"$PY" tests/gpu/heal_torch.py
