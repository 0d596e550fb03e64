#!/usr/bin/env bash
# ci.sh - the ThreadSanitizer tree: builds the core, the sim shim and the
# stress tests with clang -fsanitize=thread in build-tsan, then runs them
# (ctest label tsan).  scripts/test.sh calls it with --build-only and
# leaves the run to the main suite's tsan.suite entry.
#
#   bash tests/tsan/ci.sh [--build-only | ctest arguments...]
set -euo pipefail
cd "$(dirname "$0")/../.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build-tsan -G Ninja -DCMAKE_C_COMPILER=clang -DMORI_TSAN=ON -DMORI_WERROR=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build-tsan -j "$jobs" --target test_tsan_stress test_signals mori_test_core_arena
[ "${1:-}" = "--build-only" ] && exit 0
ctest --test-dir build-tsan/tests/tsan --output-on-failure "$@"
