#!/bin/sh
# runpath_check.sh DIR...
# No ELF file under DIR (the build tree, an installed prefix) has an empty
# or relative RUNPATH or RPATH entry: the loader reads an empty entry
# (CMake's ':' padding) and a relative one as directories of the current
# working directory, so a library planted where root runs a tool would be
# loaded.  Absolute directories and $ORIGIN-based ones are accepted.
# Prints each offending file with its entry; "runpath ok: N ELF files" when
# there is none.
set -eu
command -v readelf >/dev/null || { echo "runpath: readelf is missing (binutils)"; exit 1; }
files=0
list=$(mktemp)
trap 'rm -f "$list" "$list.bad"' EXIT
: >"$list.bad"
for dir in "$@"; do
  [ -d "$dir" ] || { echo "runpath: $dir is not a directory"; exit 1; }
  find "$dir" -type f -size +63c >>"$list"
done
while IFS= read -r f; do
  # ELF files only: the magic 7f 45 4c 46
  [ "$(head -c 4 "$f" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] || continue
  files=$((files + 1))
  paths=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]$/\1 \2/p')
  [ -n "$paths" ] || continue
  # each entry, split at ':' with empty ones kept (a leading or trailing ':'
  # is one): absolute or $ORIGIN-based, else named
  echo "$paths" | awk -v f="$f" '{
    tag = $1; value = substr($0, length(tag) + 2)
    n = split(value, e, ":"); empty = 0
    for (i = 1; i <= n; i++) {
      if (e[i] == "") empty++
      else if (e[i] !~ /^\// && e[i] !~ /^\$(ORIGIN|\{ORIGIN\})(\/|$)/)
        print "runpath: " f ": " tag " entry \"" e[i] "\" is relative (to the current directory)"
    }
    if (empty) print "runpath: " f ": " tag " \"" value "\" has " empty " empty entr" (empty > 1 ? "ies" : "y") " (the current directory)"
  }' >>"$list.bad"
done <"$list"
if [ -s "$list.bad" ]; then
  cat "$list.bad"
  rm -f "$list.bad"
  echo "runpath FAILED: $files ELF files checked"
  exit 1
fi
rm -f "$list.bad"
echo "runpath ok: $files ELF files, no empty or relative RUNPATH/RPATH entry"
