#!/usr/bin/env bash
# Mutation testing: plants each bug of tests/mutants/mutants.tsv in a scratch
# copy of the tree, builds it, runs the tests that should catch it, and
# prints a table (mutant -> the test that killed it, or survived) and the
# score.  Not in CI: each mutant is a build plus its tests (docs/
# fault-injection.md, "Mutation testing", has the last table).
#
#   scripts/mutate.sh [--list FILE] [--keep DIR] [NAME_REGEX]
#
# A row of the list is: name, file, sed expression, ctest arguments,
# rationale, separated by tabs (lines starting with # are comments).  The
# sed expression must change its file: a row whose anchor is gone is
# reported "stale" (refresh it), not counted.  A mutant that does not build
# is reported "no build" and not counted either.
#
# The mechanical mode needs no rows: every mutant of a fixed set of rules
# (scripts/mutgen.py says which) on the lines a change touches:
#
#   scripts/mutate.sh --diff BASE[..REV] [--rev REV] [--sample N] [--seed S]
#                     [--rerun REPORT | --keys FILE] [--timeout SECONDS]
#                     [--report FILE] [--keep DIR] [--dry-run]
#
# --rev REV mutates and tests REV's tree (git archive), not the working
# tree; --sample N takes N mutants drawn with --seed S (default 1) from all
# of them, run in the order drawn (a run cut short after k is the sample of
# k); --rerun REPORT takes the survivors of an earlier report again, --keys
# FILE the mutants whose keys start its lines.  The tests nearest the file
# (tests/mutants/nearest.tsv) run first, then, for a survivor, the wider
# set; each test is capped at --timeout seconds (default 90), a mutant's
# tests at four times that.  Equivalent mutants
# (tests/mutants/equivalent.tsv) are listed, not run, and not counted.
set -uo pipefail
set -f # ctest arguments are regular expressions, never globs
cd "$(dirname "$0")/.."
root=$PWD
list=tests/mutants/mutants.tsv
scratch=""
filter=""
diff_base="" rev="" sample=0 seed=1 keys="" rerun="" cap=90 report_out="" dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --list) list=$2; shift 2 ;;
    --keep) scratch=$2; shift 2 ;;
    --diff) diff_base=$2; shift 2 ;;
    --rev) rev=$2; shift 2 ;;
    --sample) sample=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --keys) keys=$2; shift 2 ;;
    --rerun) rerun=$2; shift 2 ;;
    --timeout) cap=$2; shift 2 ;;
    --report) report_out=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) filter=$1; shift ;;
  esac
done
jobs=$(nproc 2>/dev/null || echo 2)
case "$diff_base" in *..*) rev=${rev:-${diff_base#*..}}; diff_base=${diff_base%%..*} ;; esac
[ -n "$rev" ] && [ -z "$diff_base" ] && { echo "mutate: --rev needs --diff BASE" >&2; exit 2; }
if [ -n "$diff_base" ]; then
  # shellcheck source=scripts/mutate_diff.sh
  . "$root/scripts/mutate_diff.sh"
  exit $?
fi
[ -r "$list" ] || { echo "mutate: no list $list" >&2; exit 2; }

# One scratch tree (the working tree, tracked and untracked files, no build
# outputs) and one build directory for every mutant: each mutant rebuilds
# only what its file touches.
if [ -z "$scratch" ]; then
  scratch=$(mktemp -d /tmp/mori-mutate-XXXXXX)
  trap 'rm -rf "$scratch"' EXIT
fi
# a fresh copy (files gone from the tree go from the copy too), its times
# now, so that a kept build directory rebuilds whatever differs
rm -rf "$scratch/src"
mkdir -p "$scratch/src"
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xmf - -C "$scratch/src"
src=$scratch/src
build=$scratch/build
echo "mutate: scratch $src, list $list"
if ! cmake -S "$src" -B "$build" -G Ninja -DMORI_WERROR=OFF >"$scratch/configure.log" 2>&1 ||
   ! cmake --build "$build" -j "$jobs" >"$scratch/build.log" 2>&1; then
  echo "mutate: the unmutated tree does not build ($scratch/build.log)" >&2
  exit 2
fi

cp "$list" "$scratch/list.tsv" # the list may change while this runs
killed=0 survived=0 stale=0 nobuild=0 n=0
report=$scratch/report.tsv
: >"$report"
printf '%-34s %-9s %s\n' MUTANT RESULT "KILLED BY (first failing test)"
while IFS=$'\t' read -r name file expr tests why; do
  case "$name" in ''|'#'*) continue ;; esac
  if [ -n "$filter" ] && ! [[ $name =~ $filter ]]; then continue; fi
  n=$((n + 1))
  cp "$src/$file" "$scratch/original"
  sed -i -e "$expr" "$src/$file"
  if cmp -s "$src/$file" "$scratch/original"; then
    result=stale by="anchor not found in $file"
    stale=$((stale + 1))
  elif ! cmake --build "$build" -j "$jobs" >"$scratch/$name.build.log" 2>&1; then
    result="no build" by="$scratch/$name.build.log"
    nobuild=$((nobuild + 1))
  else
    # shellcheck disable=SC2086 # the row's ctest arguments are words
    ctest --test-dir "$build" --stop-on-failure -j "$jobs" $tests >"$scratch/$name.test.log" 2>&1
    failed=$(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) (.*)$/\1/p' "$scratch/$name.test.log" |
             head -3 | tr '\n' ' ')
    if grep -q "No tests were found" "$scratch/$name.test.log"; then
      result=stale by="no test matches: $tests"
      stale=$((stale + 1))
    elif [ -n "$failed" ]; then
      result=killed by=$failed
      killed=$((killed + 1))
    else
      result=SURVIVED by="($tests)"
      survived=$((survived + 1))
    fi
  fi
  cp "$scratch/original" "$src/$file"
  touch "$src/$file" # the next build sees the file changed back
  printf '%-34s %-9s %s\n' "$name" "$result" "$by"
  printf '%s\t%s\t%s\t%s\n' "$name" "$result" "$by" "$why" >>"$report"
done <"$scratch/list.tsv"
cmake --build "$build" -j "$jobs" >/dev/null 2>&1

counted=$((killed + survived))
score=0
[ $counted -gt 0 ] && score=$((100 * killed / counted))
echo "mutate: $n mutants: $killed killed, $survived survived, $stale stale, $nobuild did not build; score $score% ($killed/$counted)"
cp "$report" "$root/build/mutate-report.tsv" 2>/dev/null && echo "mutate: table in build/mutate-report.tsv"
[ "$survived" -eq 0 ] && [ "$stale" -eq 0 ] && [ "$nobuild" -eq 0 ]
