#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds, runs every ctest
# label (unit, sim, fault, fuzz, valgrind); ctest's summary line closes it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja
cmake --build build -j "$jobs"
bash fuzz/ci.sh --build-only   # clang + libFuzzer tree; run by fuzz.libfuzzer_suite
ctest --test-dir build --output-on-failure -j "$jobs" "$@"
