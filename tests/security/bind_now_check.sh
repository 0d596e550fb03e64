#!/bin/sh
# bind_now_check.sh DIR...
# Every shared library of ours under DIR (libmori_*.so*, the torch
# extension _mori*.so) is linked with full RELRO: BIND_NOW in its dynamic
# section (every symbol bound at load, none at a first call) and a
# GNU_RELRO segment (the GOT read-only once bound).  Prints each library
# that lacks either; "bind_now ok: N libraries" when none does.
set -eu
command -v readelf >/dev/null || { echo "bind_now: readelf is missing (binutils)"; exit 1; }
n=0
bad=0
for dir in "$@"; do
  [ -d "$dir" ] || { echo "bind_now: $dir is not a directory"; exit 1; }
  for f in $(find "$dir" -type f \( -name 'libmori_*.so*' -o -name '_mori*.so' \) | sort); do
    n=$((n + 1))
    if ! readelf -d "$f" | grep -Eq '\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*NOW'; then
      echo "bind_now: $f: no BIND_NOW (symbols bound lazily, at first call)"
      bad=$((bad + 1))
    fi
    if ! readelf -lW "$f" | grep -q GNU_RELRO; then
      echo "bind_now: $f: no GNU_RELRO segment"
      bad=$((bad + 1))
    fi
  done
done
if [ "$n" -eq 0 ]; then
  echo "bind_now FAILED: no library of ours under $*"
  exit 1
fi
if [ "$bad" -gt 0 ]; then
  echo "bind_now FAILED: $bad finding(s) in $n libraries"
  exit 1
fi
echo "bind_now ok: $n libraries with BIND_NOW and GNU_RELRO"
