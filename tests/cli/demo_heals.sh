#!/bin/sh
# A rank of `mori-symm demo --max-restarts 1` killed by the fault shim is
# started again by the launcher and the run heals: the survivors heal their
# window with the replacement and redo the phase the death failed (or, for
# a death mid-rendezvous, rendezvous again under a new group name), every
# byte is checked, and the demo ends ok with healed=1 and no leaks, well
# within the 30 s a wait for the dead rank would take without the watchdog
# and the launcher's notice.  The fault fires in the rank's first life only.
# usage: demo_heals.sh MORI_SYMM LIBMORI_FAULTINJECT SCHEDULE RANK
symm=$1 preload=$2 schedule=$3 rank=$4
limit_ms=15000
tmp=$(mktemp -d) || exit 1
t0=$(date +%s%N)
LD_PRELOAD=$preload MORI_FI=$schedule "$symm" demo --ranks 4 --size 256K --max-restarts 1 \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
t1=$(date +%s%N)
out=$(cat "$tmp/out") err=$(cat "$tmp/err")
rm -rf "$tmp"
wall_ms=$(((t1 - t0) / 1000000))
printf '%s\n%s\n' "$out" "$err"
echo "wall time: $wall_ms ms (MORI_FI='$schedule', MORI_SIM_STREAMS=${MORI_SIM_STREAMS:-sync})"
status=0
fail() { echo "FAIL: $*"; status=1; }
[ "$rc" -eq 0 ] || fail "exit status $rc"
case "$err" in
  *"MORI_FI: rank $rank killed at "*) ;;
  *) fail "the fault did not fire: no 'rank $rank killed' on stderr" ;;
esac
echo "$out" | grep -q "^  rank $rank ok .* leaks=0 fds=+0 healed=0 life=1$" ||
  fail "no report of rank $rank's replacement (life=1)"
echo "$out" | tail -n 1 | grep -q "^demo ok: ranks=4 bytes=524288 healed=1 leaks=0 " ||
  fail "the closing line is not 'demo ok: ranks=4 bytes=524288 healed=1 leaks=0 ...'"
[ "$wall_ms" -lt "$limit_ms" ] || fail "took $wall_ms ms, more than $limit_ms"
exit $status
