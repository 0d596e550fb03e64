#!/bin/sh
# env_check.sh MORI_SYMM STANDIN_HIP WORK FAULT_SHIM
# Every numeric, sized or enumerated variable of the env table is read by
# the one strict reader (mori/values.h): set to garbage, the program fails
# with an error naming the variable, the value and what is accepted, and a
# value as the help writes it is taken.  The HIP version in a runtime's
# file name is read the same way (no sign, no wrap), and a refusal shows
# the file's path escaped.  STANDIN_HIP is the stand-in libamdhip64
# (tests/hipstub) copied under the names tried.  "env ok: N cases" when all
# hold.
set -u
symm=$1 standin=$2 work=$3 fault_shim=$4
rm -rf "$work" && mkdir -p "$work" || exit 1
bad=0 cases=0
fail() { echo "env: $*"; bad=1; }
out=$work/out

# refused VAR VALUE COMMAND EXPECTED: COMMAND (probe or demo) fails and
# says "VAR=VALUE: ..." with EXPECTED (a grep -E pattern) after it.
refused() {
  var=$1 value=$2 cmd=$3 expect=$4
  cases=$((cases + 1))
  run "$var" "$value" "$cmd"
  rc=$?
  [ $rc -ne 0 ] || fail "$var='$value' was taken ($cmd exited 0): $(head -c 300 "$out")"
  grep -qF "$var=$(printf '%s' "$value" | tr -c '[:print:]' '?')" "$out" && grep -qE "$expect" "$out" ||
    fail "$var='$value': no error naming it with /$expect/: $(head -c 400 "$out")"
  echo "env: $var='$value': $(grep -oE "$var=.*" "$out" | head -1 | cut -c1-200)"
}

# taken VAR VALUE COMMAND: COMMAND succeeds with it.
taken() {
  cases=$((cases + 1))
  run "$1" "$2" "$3" || fail "$1='$2' was refused: $(head -c 400 "$out")"
}

run() {
  case $3 in
  probe) set -- env "$1=$2" "$symm" probe --shim sim ;;
  demo) set -- env "$1=$2" "$symm" demo --ranks 2 --size 64K ;;
  esac
  timeout -k 5 60 env MORI_SYMM_SHIM=sim "$@" >"$out" 2>&1
}

refused MORI_SYMM_TIMEOUT_MS 30s demo "not a whole number \(accepted: 1 to 86400000\)"
refused MORI_SYMM_TIMEOUT_MS 4294968296 demo "out of range \(accepted: 1 to 86400000\)"
refused MORI_SYMM_TIMEOUT_MS abc demo "not a whole number"
refused MORI_SYMM_TIMEOUT_MS 0 demo "out of range"
refused MORI_SYMM_TIMEOUT_MS " 500" demo "not a whole number"
taken MORI_SYMM_TIMEOUT_MS 30000 demo
refused MORI_SIM_DEVICES +8 probe "not a whole number \(accepted: 1 to 1024\)"
refused MORI_SIM_DEVICES " 8" probe "not a whole number"
refused MORI_SIM_DEVICES 8x probe "not a whole number"
refused MORI_SIM_DEVICES 2000 probe "out of range"
refused MORI_SIM_WAIT_TIMEOUT_MS 5s probe "not a whole number"
refused MORI_SIM_DEVICE_BYTES -1 probe "not a size"
refused MORI_SIM_DEVICE_BYTES "16 GB" probe "unknown unit ' GB'"
refused MORI_SIM_DEVICE_BYTES 0x10 probe "unknown unit 'x10'"
refused MORI_SIM_DEVICE_BYTES 99999999999999999999 probe "out of range"
taken MORI_SIM_DEVICE_BYTES "16 GiB" probe
taken MORI_SIM_DEVICE_BYTES 8G probe
# a list longer than any buffer: the unknown name at its end is seen
long=$(printf 'none,%.0s' $(seq 60))bogus
cases=$((cases + 1))
run MORI_SIM_QUIRKS "$long" probe && fail "MORI_SIM_QUIRKS of ${#long} bytes ending in 'bogus' was taken"
grep -q "unknown quirk 'bogus'" "$out" || fail "MORI_SIM_QUIRKS: 'bogus' at byte 300 not named: $(head -c 300 "$out")"
refused MORI_SIM_ARCH gfx999 probe "not a sim profile"
refused MORI_SIM_STREAMS fast probe "expected sync or async"
refused MORI_SYMM_HOST_ID xyz demo "not a host id \(accepted: 32 hex digits"
refused MORI_SYMM_HOST_ID 0123456789abcdef0123456789abcdeg demo "not a host id"
taken MORI_SYMM_HOST_ID ABCDEF0123456789ABCDEF0123456789 demo
taken MORI_SYMM_HOST_ID 01234567-89ab-cdef-0123-456789abcdef demo
refused MORI_SYMM_TEARDOWN false demo "expected 0 or 1"
refused MORI_SYMM_ALLOW_OVERLAPPING_DEVICES true demo "expected 0 or 1"
refused MORI_SYMM_MEMOP_BATCH off demo "expected 0 or 1"
taken MORI_SYMM_MEMOP_BATCH 0 demo
refused MORI_SYMM_KEEP_WARM yes demo "expected 0 or 1"
taken MORI_SYMM_KEEP_WARM 1 demo

# the shim's report switch, read at exit: said, named
for var in MORI_SHIM_REGISTRY_REPORT MORI_SHIM_LEDGER_REPORT; do
  cases=$((cases + 1))
  run "$var" yes probe
  grep -qF "$var=yes: expected 0 or 1" "$out" ||
    fail "$var='yes': nothing names it: $(head -c 300 "$out")"
  echo "env: $var='yes': $(grep -o "$var=yes: .*" "$out" | head -1)"
done

# MORI_RANK, read by the fault shim: a refused value is said, named, and
# the process has no rank (its count file is .pidN, not .8)
for value in +8 " 8" 8x 1048576; do
  cases=$((cases + 1))
  timeout -k 5 60 env MORI_SYMM_SHIM=sim LD_PRELOAD="$fault_shim" MORI_RANK="$value" \
    MORI_FI="count=$work/count" "$symm" probe --shim sim >"$out" 2>&1
  grep -qF "MORI_RANK=$value: " "$out" ||
    fail "MORI_RANK='$value': the fault shim says nothing naming it: $(head -c 300 "$out")"
  [ ! -e "$work/count.8" ] || fail "MORI_RANK='$value' was taken as rank 8"
  rm -f "$work"/count.*
  echo "env: MORI_RANK='$value': $(grep -oF "MORI_RANK=$value: " "$out" | head -1)$(grep -o "MORI_RANK=.*" "$out" | head -1 | cut -d: -f2-)"
done

# The HIP runtime's file name: a version is read strictly, and the path a
# refusal names is escaped.  The stand-in cannot tell its version
# (MORI_STANDIN_HIP_VERSION=error), so its file name decides.
hip_probe() {
  timeout -k 5 60 env MORI_SYMM_SHIM=hip MORI_SYMM_HIP_LIB="$1" MORI_STANDIN_HIP_VERSION=error \
    "$symm" probe --shim hip >"$out" 2>&1
}
for name in libamdhip64.so.4294967302.2 libamdhip64.so.+6.2 libamdhip64.so.6.-2 libamdhip64.so.6.2x; do
  cases=$((cases + 1))
  dir=$work/$name.d
  mkdir -p "$dir" && cp "$standin" "$dir/$name" && ln -s "$name" "$dir/libamdhip64.so.6"
  hip_probe "$dir/libamdhip64.so.6" &&
    fail "$name was judged a HIP that can share: $(head -c 300 "$out")"
  grep -qF "cannot read a HIP version from the file name $dir/$name" "$out" ||
    fail "$name: no refusal naming the file: $(head -c 400 "$out")"
  echo "env: $name: $(grep -o 'cannot read.*' "$out" | head -1 | cut -c1-240)"
done
cases=$((cases + 1))
dir=$(printf '%s/r\2332K\033[1A' "$work")
mkdir -p "$dir" && cp "$standin" "$dir/libamdhip64.so.5.2.0" && ln -s libamdhip64.so.5.2.0 "$dir/libamdhip64.so.5"
hip_probe "$dir/libamdhip64.so.5" && fail "HIP 5.2.0 was taken: $(head -c 300 "$out")"
grep -qF 'found HIP 5.2.0' "$out" && grep -qF 'r\x9b2K\x1b[1A/libamdhip64.so.5.2.0' "$out" ||
  fail "the refusal of HIP 5.2.0 does not show its path escaped: $(head -c 400 "$out" | od -c | head -5)"
if LC_ALL=C grep -q "$(printf '[\001-\010\016-\037\177-\377]')" "$out"; then
  fail "a raw control or 8-bit byte reached the output: $(od -c "$out" | head -8)"
fi
echo "env: HIP 5.2.0 in a path with CSI: $(grep -o 'found HIP.*' "$out" | head -1 | cut -c1-240)"

[ $bad -eq 0 ] || { echo "env FAILED"; exit 1; }
echo "env ok: $cases cases"
