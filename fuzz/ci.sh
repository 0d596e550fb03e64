#!/usr/bin/env bash
# ci.sh - the fuzzing half of CI: builds the libFuzzer configuration (clang,
# ASan+UBSan) in build-fuzz and runs its ctest entries: each corpus replayed
# under the sanitizers, then a bounded libFuzzer run per target.
#
#   bash fuzz/ci.sh [ctest arguments...]
#
# MORI_FUZZ_SECONDS sets the length of each run (default 20: six targets on
# two cores take about a minute).  -Werror stays off here: this build looks
# for crashes, and warnings are the gcc build's business.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DMORI_FUZZ_LIBFUZZER=ON \
  -DMORI_BUILD_TESTS=OFF -DMORI_WERROR=OFF -DMORI_FUZZ_SECONDS="${MORI_FUZZ_SECONDS:-20}"
cmake --build build-fuzz -j "$jobs" --target mori_fuzz_all
# With --build-only the tests are left to the main suite (fuzz.libfuzzer_suite).
[ "${1:-}" = "--build-only" ] && exit 0
ctest --test-dir build-fuzz/fuzz --output-on-failure -j "$jobs" "$@"
