#!/usr/bin/env bash
# ci.sh - the fuzzing half of CI: builds the libFuzzer configuration (clang,
# ASan+UBSan) in build-fuzz and the AFL++ one (afl-clang-fast, ASan+UBSan)
# in build-afl, and runs their ctest entries: each corpus replayed under the
# sanitizers, a bounded libFuzzer run per target, and a bounded AFL++ run
# per target (fuzz/run-afl.sh).
#
#   bash fuzz/ci.sh [ctest arguments...]
#
# MORI_FUZZ_SECONDS sets the length of each libFuzzer run (default 20: six
# targets on two cores take about a minute), MORI_AFL_SECONDS each AFL++
# run (default 10: about 35 s on two cores).  -Werror stays off here: these
# builds look for crashes, and warnings are the gcc build's business.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DMORI_FUZZ_LIBFUZZER=ON \
  -DMORI_BUILD_TESTS=OFF -DMORI_WERROR=OFF -DMORI_FUZZ_SECONDS="${MORI_FUZZ_SECONDS:-20}"
cmake --build build-fuzz -j "$jobs" --target mori_fuzz_all
# AFL++'s compiler is noisy: AFL_QUIET keeps its banner out of the log.
cmake -S . -B build-afl -G Ninja -DCMAKE_C_COMPILER=afl-clang-fast -DMORI_FUZZ_AFL=ON \
  -DMORI_BUILD_TESTS=OFF -DMORI_WERROR=OFF -DMORI_AFL_SECONDS="${MORI_AFL_SECONDS:-10}"
AFL_QUIET=1 cmake --build build-afl -j "$jobs" --target mori_fuzz_all
# With --build-only the tests are left to the main suite (fuzz.libfuzzer_suite,
# fuzz.afl_suite).
[ "${1:-}" = "--build-only" ] && exit 0
ctest --test-dir build-fuzz/fuzz --output-on-failure -j "$jobs" "$@"
ctest --test-dir build-afl/fuzz --output-on-failure -j "$jobs" "$@"
