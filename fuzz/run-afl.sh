#!/bin/sh
# run-afl.sh - runs AFL++ on one fuzz target for a fixed time and fails if
# it saved a crash (afl-fuzz itself exits 0 even then).  ctest runs it for
# every target (fuzz.afl.<target> in build-afl, fuzz.afl_suite in the
# default build); by hand:
#
#   fuzz/run-afl.sh TARGET SECONDS
#
# Needs the AFL++ build (fuzz/ci.sh --build-only makes it; docs/fuzzing.md):
#   cmake -S . -B build-afl -G Ninja -DCMAKE_C_COMPILER=afl-clang-fast \
#         -DMORI_FUZZ_AFL=ON -DMORI_BUILD_TESTS=OFF -DMORI_WERROR=OFF
#   ninja -C build-afl mori_fuzz_all
# MORI_AFL_BUILD overrides the build directory (default: build-afl at the
# repository root); findings go to MORI_AFL_OUT (default: BUILD/afl/TARGET),
# which is emptied first.
set -eu

if [ $# -ne 2 ]; then
  echo "usage: $0 TARGET SECONDS" >&2
  exit 2
fi
target=$1
seconds=$2
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MORI_AFL_BUILD:-$root/build-afl}
harness=$build/bin/mori_fuzz_$target
corpus=$root/fuzz/corpus/$target
out=${MORI_AFL_OUT:-$build/afl/$target}

if [ ! -d "$corpus" ]; then
  echo "run-afl.sh: no target '$target' (no $corpus)" >&2
  exit 2
fi
if [ ! -x "$harness" ]; then
  echo "run-afl.sh: $harness is not built: see docs/fuzzing.md" >&2
  exit 2
fi
dict=
if [ -f "$root/fuzz/dict/$target.dict" ]; then
  dict="-x $root/fuzz/dict/$target.dict"
elif [ -f "$root/fuzz/dict/wire.dict" ] && [ "$target" != fsm ]; then
  dict="-x $root/fuzz/dict/wire.dict"
fi

rm -rf "$out"
mkdir -p "$out"
# No UI on a CI log; no CPU frequency or core-dump checks on machines we do
# not own; no pinning, so that two runs can share two cores.
export AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1
export AFL_NO_AFFINITY=1
# shellcheck disable=SC2086 # $dict is an option and its argument, or nothing
afl-fuzz -V "$seconds" -t 1000 -i "$corpus" -o "$out" $dict -- "$harness" \
  >"$out/afl-fuzz.log" 2>&1 || {
  rc=$?
  tail -n 30 "$out/afl-fuzz.log" >&2
  echo "run-afl.sh: afl-fuzz failed ($rc) on $target" >&2
  exit "$rc"
}

stats=$out/default/fuzzer_stats
field() { sed -n "s/^$1 *: *//p" "$stats"; }
echo "run-afl.sh: $target: $(field execs_done) execs in $(field run_time) s" \
  "($(field execs_per_sec)/s), $(field corpus_count) paths, $(field edges_found) edges," \
  "bitmap $(field bitmap_cvg), $(field saved_crashes) crashes, $(field saved_hangs) hangs"

# afl-fuzz skips a seed that crashes the harness and fuzzes on: that is a
# crash found as much as any other.
seeds=$(sed -n "s/.*Test case '[^']*orig:\([^']*\)' results in a crash.*/\1/p" "$out/afl-fuzz.log")
if [ -n "$seeds" ]; then
  echo "run-afl.sh: $target: seeds of fuzz/corpus/$target crash the harness (afl-fuzz skipped them):" >&2
  echo "$seeds" >&2
  exit 1
fi
crashes=$(find "$out/default/crashes" -type f -name 'id:*' 2>/dev/null)
if [ -n "$crashes" ]; then
  echo "run-afl.sh: $target: AFL++ saved crashes (replay each with $harness FILE):" >&2
  echo "$crashes" >&2
  echo "run-afl.sh: fix the bug, and keep each input as a regression, named for what it was:" >&2
  echo "  cp FILE $root/fuzz/regressions/$target/<what-it-was>" >&2
  exit 1
fi
