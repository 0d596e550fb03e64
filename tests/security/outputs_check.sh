#!/bin/sh
# outputs_check.sh MORI_SYMM FAULT_SHIM WORK
# The files the fault shim writes (MORI_FI_RECORD=PATH, count=PATH) follow
# no link and wait on no FIFO: another user plants a symbolic link, a FIFO
# or a hard link where a run (root's) will write, and the run must leave
# the file behind it as it was, say which name it refused and why, and not
# hang.  A name nobody planted is created 0600; an old output of ours is
# overwritten.  Prints "outputs ok: N cases" when all hold.
set -u
symm=$1 shim=$2 work=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
bad=0 cases=0
fail() { echo "outputs: $*"; bad=1; }

# run OUT DIR: a 2-rank demo under the fault shim writing OUT (record or
# count) at DIR/out.RANK; stderr to DIR/err.  Bounded: a FIFO waited on
# hangs the rank, which timeout ends (exit 124).
run() {
  if [ "$1" = record ]; then
    set -- env MORI_FI= MORI_FI_RECORD="$2/out"
  else
    set -- env MORI_FI="count=$2/out" MORI_FI_RECORD=
  fi
  timeout -k 5 30 "$@" LD_PRELOAD="$shim" MORI_SYMM_SHIM=sim "$symm" demo --ranks 2 \
    --timeout-ms 20000 >"${dir}/outlog" 2>"${dir}/err"
}

mode_of() { stat -c %a "$1"; }

for out in record count; do
  for kind in symlink fifo hardlink; do
    cases=$((cases + 1))
    dir=$work/$out-$kind
    mkdir -p "$dir"
    victim=$dir/victim
    printf 'keep\n' >"$victim"
    case $kind in
    symlink) ln -s "$victim" "$dir/out.0"; what="symbolic link" ;;
    fifo) mkfifo "$dir/out.0"; what="FIFO" ;;
    hardlink) ln "$victim" "$dir/out.0"; what="more than one link" ;;
    esac
    run "$out" "$dir"
    rc=$?
    [ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "$out over a planted $kind: the run hung (killed after 30 s)"
    [ "$(cat "$victim")" = keep ] ||
      fail "$out over a planted $kind: the file behind it was written: $(head -c 60 "$victim" | tr '\n' ' ')"
    grep -q "$dir/out.0 .*$what" "$dir/err" ||
      fail "$out over a planted $kind: no error names $dir/out.0 and '$what': $(head -c 300 "$dir/err")"
    [ -f "$dir/out.1" ] && [ "$(mode_of "$dir/out.1")" = 600 ] ||
      fail "$out: rank 1's fresh $dir/out.1 is not a file of mode 600 ($(mode_of "$dir/out.1" 2>&1))"
    echo "outputs: $out over a planted $kind: $(grep -o "$dir/out.0 .*" "$dir/err" | head -1)"
  done
  # an output of ours from an earlier run is overwritten, not refused
  cases=$((cases + 1))
  dir=$work/$out-old
  mkdir -p "$dir"
  printf 'old output\n' >"$dir/out.0"
  chmod 644 "$dir/out.0"
  run "$out" "$dir"
  ! grep -q "old output" "$dir/out.0" && [ -s "$dir/out.0" ] ||
    fail "$out: an earlier output of ours was not overwritten: $(head -c 300 "$dir/err")"
  [ "$(mode_of "$dir/out.0")" = 600 ] || fail "$out: the overwritten output is mode $(mode_of "$dir/out.0")"
done
[ $bad -eq 0 ] || { echo "outputs FAILED"; exit 1; }
echo "outputs ok: $cases cases"
