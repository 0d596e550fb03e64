#!/bin/sh
# every_seam_call_is_injectable.sh LIST SHIM FAULT
#   LIST   a program printing every call of the seam's lists (seam_calls)
#   SHIM   libmori_hip_shim.so     FAULT  libmori_faultinject.so
# A call the shim exports must be a row of the lists, and every row must be
# defined by both libraries: otherwise it can be made but not injected (nor
# swept), as hipMemGetInfo once was.  What the shim exports besides its
# calls are controls, not runtime or OS calls: mori_shim_* (selection,
# messages, the resource registry), mori_sim_* (the sim's test controls),
# mori_hipGetErrorName (a name table) and mori__* (internal).
set -eu
list=$1 shim=$2 fault=$3
defined() { nm -D --defined-only "$1" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' | sort -u; }
calls=$("$list" | sort -u)
shim_syms=$(defined "$shim")
fault_syms=$(defined "$fault")
bad=0
for s in $shim_syms; do
  case $s in
  mori_shim_* | mori_sim_* | mori_hipGetErrorName | mori__*) continue ;;
  esac
  if ! printf '%s\n' "$calls" | grep -qx "$s"; then
    echo "$s: exported by $(basename "$shim") but not a row of the seam's lists: it can be made but not injected"
    bad=$((bad + 1))
  fi
done
n=0
for s in $calls; do
  n=$((n + 1))
  printf '%s\n' "$shim_syms" | grep -qx "$s" ||
    { echo "$s: a row of the seam's lists that $(basename "$shim") does not export"; bad=$((bad + 1)); }
  printf '%s\n' "$fault_syms" | grep -qx "$s" ||
    { echo "$s: a row of the seam's lists that $(basename "$fault") does not define: it can be made but not injected"; bad=$((bad + 1)); }
done
if [ "$bad" -ne 0 ]; then
  echo "seam: $bad defect(s) among $n calls"
  exit 1
fi
echo "seam: $n calls, each exported by $(basename "$shim") and injectable by $(basename "$fault")"
