#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds, runs every ctest
# label (unit, sim, fault, fuzz, valgrind, security, rocm, tsan, venv);
# ctest's summary line closes it.  Arguments go to ctest (e.g. -L sim); a
# selection that matches no test fails.  Only the trees the selection needs
# are built: the main tree always, the libFuzzer and AFL++ trees (fuzz/ci.sh)
# when it holds fuzz.libfuzzer_suite or fuzz.afl_suite, the TSan tree
# (tests/tsan/ci.sh) when it holds tsan.suite; with no arguments, all.
# MORI_TEST_BUILD_DIR (default build) and MORI_TEST_NO_BUILD=1 (run what is
# already built, build nothing) serve the suite's own checks.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MORI_TEST_BUILD_DIR:-build}
jobs=$(nproc 2>/dev/null || echo 2)
# The names of the tests the arguments select (ctest -N lists, runs nothing).
selected() { ctest --test-dir "$build" -N "$@" | sed -n 's/^ *Test *#[0-9]*: //p'; }
if [ -z "${MORI_TEST_NO_BUILD:-}" ]; then
  bash scripts/deps.sh
  cmake -S . -B "$build" -G Ninja
  tests=$(selected "$@")
  cmake --build "$build" -j "$jobs"
  if grep -qxE 'fuzz\.(libfuzzer|afl)_suite' <<<"$tests"; then
    bash fuzz/ci.sh --build-only   # libFuzzer and AFL++ trees; run by fuzz.libfuzzer_suite, fuzz.afl_suite
  fi
  if grep -qx 'tsan\.suite' <<<"$tests"; then
    bash tests/tsan/ci.sh --build-only   # clang + ThreadSanitizer tree; run by tsan.suite
  fi
fi
ctest --test-dir "$build" --output-on-failure --no-tests=error -j "$jobs" "$@"
