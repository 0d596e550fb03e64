#!/bin/sh
# headers_compile.sh PREFIX CC CXX WORK
# Every header installed under PREFIX/include, alone, all together, and
# each beside the real <hip/hip_runtime_api.h> in both orders, as C99
# -pedantic, C11 and C++17, with -Wall -Wextra -Werror: an installed header
# that defines a HIP or CUDA name, or needs more than C99, fails here.  The
# list is what the install put there, so a new public header cannot escape.
# HIP's header comes from Debian's libamdhip64-dev (scripts/deps.sh): where
# it is missing the test fails; it does not skip.
set -eu
prefix=$1 cc=$2 cxx=$3 work=$4
hip_flags=-D__HIP_PLATFORM_AMD__
rm -rf "$work" && mkdir -p "$work"
printf '#include <hip/hip_runtime_api.h>\nint main(void) { return 0; }\n' >"$work/hip.c"
if ! "$cc" $hip_flags -fsyntax-only "$work/hip.c" 2>"$work/hip.err"; then
  echo "headers: the real <hip/hip_runtime_api.h> does not compile here ($(head -1 "$work/hip.err"));"
  echo "headers: install Debian's libamdhip64-dev (scripts/deps.sh installs it)"
  exit 1
fi
headers=$(cd "$prefix/include" && find . -name '*.h' | sed 's|^\./||' | sort)
[ -n "$headers" ] || { echo "headers: nothing installed under $prefix/include"; exit 1; }
all=$(printf '%s\n' $headers | sed 's|.*|#include <&>|')
failed=0 n=0
# compile NAME LANG TEXT FLAGS...: TEXT as a source file, compiled
compile() {
  name=$1 lang=$2
  src="$work/$name.$lang"
  printf '%s\nint main(void) { return 0; }\n' "$3" >"$src"
  shift 3
  if [ "$lang" = c ]; then comp=$cc; else comp=$cxx; fi
  n=$((n + 1))
  if ! "$comp" "$@" -Wall -Wextra -Werror $hip_flags -I"$prefix/include" -fsyntax-only "$src" \
       >"$work/$name.$lang.log" 2>&1; then
    echo "headers: FAIL $name ($lang $*):"
    sed 's/^/  /' "$work/$name.$lang.log" | head -20
    failed=$((failed + 1))
  fi
}
for std in "c -std=c99 -pedantic" "c -std=c11" "cpp -std=c++17"; do
  set -- $std
  lang=$1
  shift
  tag=$(echo "$1" | sed 's/-std=//')
  for h in $headers ALL; do
    base=$(echo "$h" | tr '/.' '__')
    if [ "$h" = ALL ]; then inc=$all; else inc="#include <$h>"; fi
    hip='#include <hip/hip_runtime_api.h>'
    compile "${base}_alone_$tag" "$lang" "$inc" "$@"
    compile "${base}_after_hip_$tag" "$lang" "$hip
$inc" "$@"
    compile "${base}_before_hip_$tag" "$lang" "$inc
$hip" "$@"
  done
done
if [ "$failed" -ne 0 ]; then
  echo "headers: $failed of $n compilations failed"
  exit 1
fi
echo "headers: $(echo "$headers" | wc -l) installed headers ($(echo $headers)), $n compilations: alone, together, beside <hip/hip_runtime_api.h> in both orders, as C99 -pedantic, C11 and C++17"
