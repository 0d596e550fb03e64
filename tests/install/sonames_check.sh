#!/bin/sh
# sonames_check.sh PREFIX MAJOR VERSION
# The installed libraries as the loader and the linker meet them
# (readelf -d): libmori_core.so and libmori_hip_shim.so are versioned (the
# file .so.VERSION, its SONAME .so.MAJOR as a link to it, and the
# link-time name .so pointing at the SONAME), everything installed records
# the SONAMEs as needed, and the fault shim keeps the one stable name users
# put in LD_PRELOAD.  The CMake package's targets point at the versioned
# files.
set -eu
prefix=$1 major=$2 version=$3
lib=$prefix/lib
bad=0
fail() { echo "sonames: $*"; bad=1; }
soname() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
for name in mori_core mori_hip_shim; do
  file=lib$name.so.$version
  [ -f "$lib/$file" ] && [ ! -L "$lib/$file" ] || { fail "$lib/$file is not a file"; continue; }
  so=$(soname "$lib/$file")
  [ "$so" = "lib$name.so.$major" ] || fail "$file has SONAME '$so', not lib$name.so.$major"
  [ "$(readlink "$lib/lib$name.so.$major" || true)" = "$file" ] ||
    fail "lib$name.so.$major is not a link to $file"
  [ "$(readlink "$lib/lib$name.so" || true)" = "lib$name.so.$major" ] ||
    fail "lib$name.so (the name -l$name links) is not a link to lib$name.so.$major"
  echo "sonames: $file: SONAME $so; lib$name.so.$major -> $file; lib$name.so -> lib$name.so.$major"
done
fi_so=$(soname "$lib/libmori_faultinject.so" 2>/dev/null || true)
[ -f "$lib/libmori_faultinject.so" ] && [ ! -L "$lib/libmori_faultinject.so" ] ||
  fail "libmori_faultinject.so is not a plain file (users LD_PRELOAD it by that name)"
[ "$fi_so" = libmori_faultinject.so ] || fail "libmori_faultinject.so has SONAME '$fi_so'"
ls "$lib"/libmori_faultinject.so.* >/dev/null 2>&1 && fail "the fault shim is versioned"
echo "sonames: libmori_faultinject.so: SONAME $fi_so, unversioned (LD_PRELOAD=libmori_faultinject.so)"
# who needs what: the SONAMEs, never a bare .so
for f in "$lib/libmori_core.so.$version" "$prefix/bin/mori-symm" "$prefix/bin/mori-fi"; do
  n=$(needed "$f" | grep '^libmori_' | tr '\n' ' ')
  echo "sonames: $(basename "$f") needs $n"
  case " $n " in *" libmori_core.so "*|*" libmori_hip_shim.so "*) fail "$f needs an unversioned name";; esac
done
needed "$lib/libmori_core.so.$version" | grep -qx "libmori_hip_shim.so.$major" ||
  fail "libmori_core.so.$version does not need libmori_hip_shim.so.$major"
needed "$prefix/bin/mori-symm" | grep -qx "libmori_core.so.$major" ||
  fail "mori-symm does not need libmori_core.so.$major"
# find_package(mori_symm)'s imported targets
targets=$(cat "$lib"/cmake/mori_symm/mori_symmTargets-*.cmake)
for name in mori_core mori_hip_shim; do
  echo "$targets" | grep -q "lib$name.so.$version\"" ||
    fail "the CMake package does not point at lib$name.so.$version"
  echo "$targets" | grep -q "IMPORTED_SONAME_[A-Z]* \"lib$name.so.$major\"" ||
    fail "the CMake package does not name lib$name.so.$major as SONAME"
done
[ $bad -eq 0 ] && echo "sonames ok: libmori_core.so.$major, libmori_hip_shim.so.$major, libmori_faultinject.so"
exit $bad
