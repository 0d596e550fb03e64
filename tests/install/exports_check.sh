#!/bin/sh
# exports_check.sh PREFIX LISTS
# What each installed library exports (nm -D --defined-only of
# PREFIX/lib/<lib>) against its committed list (LISTS/<lib>.txt, '#'
# comments allowed): a private symbol that leaves a library, or a public one
# that no longer does, is a difference, and the test fails on any.
set -eu
prefix=$1 lists=$2
bad=0
for list in "$lists"/*.txt; do
  lib=$(basename "$list" .txt)
  so="$prefix/lib/$lib"
  [ -e "$so" ] || { echo "exports: $lib is not installed"; bad=1; continue; }
  nm -D --defined-only "$so" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' | sort -u >"$lib.exported"
  grep -v '^#' "$list" | sort -u >"$lib.listed"
  extra=$(comm -23 "$lib.exported" "$lib.listed")
  missing=$(comm -13 "$lib.exported" "$lib.listed")
  for s in $extra; do echo "exports: $lib exports $s, which its list does not name"; done
  for s in $missing; do echo "exports: $lib does not export $s, which its list names"; done
  if [ -n "$extra$missing" ]; then
    bad=1
  else
    echo "exports: $lib: $(wc -l <"$lib.listed") symbols, as listed"
  fi
done
exit $bad
