#!/usr/bin/env bash
# The main job: build mori-symm and run the demo on the sim shim (no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -G Ninja
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" --target mori-symm
./build/bin/mori-symm demo --ranks "${RANKS:-8}" --size "${SIZE:-8M}" --shim sim
