#!/bin/sh
# The installed package as a user meets it.  install_check.sh STEP PREFIX ...
#   tree BUILD                 cmake --install BUILD into a fresh PREFIX
#   pkg-config SRC WORK        cc + `pkg-config --cflags --libs mori-symm`, run
#   find-package SRC WORK      a CMake project with find_package(mori_symm), run
#   tools                      PREFIX/bin/mori-symm and mori-fi, from the prefix
#   example-pkg-config WORK    the installed example (share/doc/mori_symm/examples),
#                              built with pkg-config as its comment says, run
#   example-find-package WORK  the same through its CMakeLists.txt (find_package), run
set -eu
step=$1 prefix=$2
shift 2
case $step in
tree)
  rm -rf "$prefix"
  cmake --install "$1" --prefix "$prefix" >/dev/null
  for f in lib/libmori_core.so lib/libmori_hip_shim.so lib/libmori_faultinject.so \
           include/mori/symm.h include/mori/shim.h include/mori/api.h include/mori/error.h \
           include/mori/store.h include/mori/version.h bin/mori-symm bin/mori-fi \
           lib/pkgconfig/mori-symm.pc lib/cmake/mori_symm/mori_symmConfig.cmake \
           lib/cmake/mori_symm/mori_symmConfigVersion.cmake share/doc/mori_symm/LICENSE \
           share/doc/mori_symm/CHANGELOG.md; do
    [ -e "$prefix/$f" ] || { echo "missing from the install: $f"; exit 1; }
  done
  # the internal headers stay in the tree (the seam's HIP types, the wire
  # format, the fd channel, the protocol checks, fault injection)
  for f in hip_shim.h error_internal.h wire.h channel.h protocol.h fi.h fi_calls.h fsm.h; do
    [ ! -e "$prefix/include/mori/$f" ] || { echo "installed but internal: include/mori/$f"; exit 1; }
  done
  # the Python package is component "python", never in the C package
  for f in mori mori_symm; do
    [ ! -e "$prefix/$f" ] || { echo "the C package installed the Python package's $f/"; exit 1; }
  done
  echo "installed into $prefix: $(find "$prefix" -type f | wc -l) files"
  ;;
pkg-config)
  src=$1 work=$2
  rm -rf "$work" && mkdir -p "$work"
  export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
  flags=$(pkg-config --cflags --libs mori-symm)
  echo "pkg-config: $(pkg-config --modversion mori-symm): $flags"
  grep -qx "License: MIT" "$prefix/lib/pkgconfig/mori-symm.pc" ||
    { echo "pkg-config: mori-symm.pc names no License: MIT"; exit 1; }
  # plain paths: the prefix itself, never a way through lib/pkgconfig/..
  libdir=$(pkg-config --variable=libdir mori-symm)
  [ "$libdir" = "$prefix/lib" ] || { echo "pkg-config: libdir is $libdir, not $prefix/lib"; exit 1; }
  case " $flags " in
  *"/../"*|*"//"*) echo "pkg-config: the flags hold an unnormalised path: $flags"; exit 1 ;;
  esac
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror "$src/consumer.c" -o "$work/consumer" \
     $(pkg-config --cflags --libs mori-symm)
  LD_LIBRARY_PATH="$prefix/lib" "$work/consumer"
  ;;
find-package)
  src=$1 work=$2
  rm -rf "$work"
  cmake -S "$src" -B "$work" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$work" >/dev/null
  "$work/consumer"   # the imported targets' location is in its build RPATH
  ;;
tools)
  "$prefix/bin/mori-symm" --help | grep -q "usage: mori-symm demo"
  "$prefix/bin/mori-fi" --help | grep -q "usage: mori-fi sweep"
  "$prefix/bin/mori-symm" demo --ranks 2 --size 64K --shim sim | tail -1
  "$prefix/bin/mori-symm" fsm --dot | head -1
  # mori-fi finds the installed fault shim beside the installed libmori_core.so.
  env -u MORI_FI_PRELOAD "$prefix/bin/mori-fi" sweep --scenario basic --ranks 1 \
    --modes transient --jobs 1 | tail -1
  ;;
example-pkg-config)
  work=$1 src="$prefix/share/doc/mori_symm/examples"
  [ -f "$src/two_ranks.c" ] || { echo "example: $src/two_ranks.c is not installed"; exit 1; }
  rm -rf "$work" && mkdir -p "$work"
  export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror "$src/two_ranks.c" -o "$work/two_ranks" \
     $(pkg-config --cflags --libs mori-symm)
  LD_LIBRARY_PATH="$prefix/lib" "$work/two_ranks"
  ;;
example-find-package)
  work=$1 src="$prefix/share/doc/mori_symm/examples"
  [ -f "$src/CMakeLists.txt" ] || { echo "example: $src/CMakeLists.txt is not installed"; exit 1; }
  rm -rf "$work"
  cmake -S "$src" -B "$work" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >/dev/null
  cmake --build "$work" >/dev/null
  "$work/two_ranks"
  ;;
*) echo "unknown step $step"; exit 2 ;;
esac
