#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds, runs every ctest
# label (unit, sim, fault, fuzz, valgrind, tsan); ctest's summary line closes it.
# Arguments go to ctest (e.g. -L sim); a selection that matches no test
# fails.  MORI_TEST_BUILD_DIR (default build) and MORI_TEST_NO_BUILD=1 (run
# what is already built) serve the suite's own checks.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MORI_TEST_BUILD_DIR:-build}
jobs=$(nproc 2>/dev/null || echo 2)
if [ -z "${MORI_TEST_NO_BUILD:-}" ]; then
  bash scripts/deps.sh
  cmake -S . -B "$build" -G Ninja
  cmake --build "$build" -j "$jobs"
  bash fuzz/ci.sh --build-only   # libFuzzer and AFL++ trees; run by fuzz.libfuzzer_suite, fuzz.afl_suite
  bash tests/tsan/ci.sh --build-only   # clang + ThreadSanitizer tree; run by tsan.suite
fi
ctest --test-dir "$build" --output-on-failure --no-tests=error -j "$jobs" "$@"
