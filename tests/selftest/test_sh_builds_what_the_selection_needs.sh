#!/usr/bin/env bash
# What scripts/test.sh builds for a selection: the main tree always, the
# libFuzzer and AFL++ trees only when the selection holds their suites,
# the TSan tree only when it holds tsan.suite; and the selection reaches
# ctest.  cmake, dpkg and ctest's runs are stand-ins that log what they
# were asked (ctest -N, which only lists, is the real one), so nothing is
# built or run: the check takes seconds.
#
#   test_sh_builds_what_the_selection_needs.sh SOURCE_DIR BUILD_DIR CTEST
set -euo pipefail
src=$1 build=$2 real_ctest=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/mori-test-sh-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"
cat >"$work/bin/cmake" <<'STUB'
#!/bin/sh
echo "cmake $*" >>"$MORI_STUB_LOG"
STUB
cat >"$work/bin/dpkg" <<'STUB'
#!/bin/sh
exit 0
STUB
cat >"$work/bin/ctest" <<STUB
#!/bin/sh
for a in "\$@"; do [ "\$a" = -N ] && exec "$real_ctest" "\$@"; done
echo "ctest \$*" >>"\$MORI_STUB_LOG"
STUB
chmod +x "$work/bin/"*

failed=0
# case: the arguments, then the trees wanted among build-fuzz build-afl build-tsan
check() {
  local want=$1; shift
  local log="$work/log" got=""
  : >"$log"
  if ! MORI_STUB_LOG="$log" MORI_TEST_BUILD_DIR="$build" PATH="$work/bin:$PATH" \
      bash "$src/scripts/test.sh" "$@" >"$work/out" 2>&1; then
    echo "FAILED: scripts/test.sh $*: exit status $?"; sed 's/^/  /' "$work/out"; failed=1; return
  fi
  for tree in build-fuzz build-afl build-tsan; do
    grep -q -- "--build $tree\b" "$log" && got="$got $tree"
  done
  grep -q -- "--build $build\b" "$log" || got="$got (no main tree)"
  if [ "${got# }" != "$want" ]; then
    echo "FAILED: scripts/test.sh $* built the main tree and [${got# }], want [$want]"
    failed=1
  fi
  local last
  last=$(grep '^ctest ' "$log" | tail -1)
  if [[ "$last" != "ctest --test-dir $build "*"$*" ]]; then
    echo "FAILED: scripts/test.sh $*: ctest did not get the selection:"; sed 's/^/  /' "$log"
    failed=1
  fi
  echo "scripts/test.sh $*: main tree${got:+ and${got}}"
}
check "build-fuzz build-afl build-tsan"
check "" -L unit
check "" -L sim
check "build-fuzz build-afl" -L fuzz
check "build-tsan" -L tsan
check "build-fuzz build-afl" -R '^fuzz\.afl_suite$'
check "" -L unit -LE fuzz
[ $failed -eq 0 ] && echo "test.sh builds what the selection needs: ok"
exit $failed
