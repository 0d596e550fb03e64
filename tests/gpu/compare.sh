#!/usr/bin/env bash
# The benchmarks on a GPU host, at reduced size (tests/gpu/run.sh's
# "compare" part; about 3 minutes of GPU time at 2 ranks):
#   1. bench/all2all.py ends every rank promptly when one rank's check fails
#      and when one rank raises (nonzero exit well before the timeout);
#   2. bench/all2all.py's checks at 64 KiB and 256 KiB, 20 times per path
#      (the push-only check used to read before the peers' pushes landed);
#   3. bench/compare.py --reduced: MORI against torch's built-in backend,
#      interleaved launches; JSON, table and plot under $OUT/compare;
#   4. a profile of MORI's first rendezvous at one rank (step lines and the
#      fault shim's count= profile; figures, no verdict);
#   5. a process's first allocation (tests/gpu/first_alloc.py): figures, and
#      the driver's answer to a fabric create beside the cuda backend's;
#   6. compare.py's steps call by call under CUPTI (bench/cupti_trace.sh:
#      every driver and runtime call and device operation of each timed
#      step, both backends; figures, no verdict), where CUPTI is installed.
# Each step prints PASS or FAIL; the exit status is nonzero if any failed.
#   COMPARE_ARGS="..."   extra arguments for compare.py (e.g. --rounds 5)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/gpu-results/compare}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
NGPU=${NGPU:-$("$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)}
# Two ranks: one per GPU, or sharing the GPU where there is one.
WORLD=$((NGPU < 1 ? 0 : 2))
LAST=$((WORLD - 1))
failed=()
verdict() {  # name, 0|1, figures
  if [ "$2" = 0 ]; then echo "=== PASS $1: $3"; else echo "=== FAIL $1: $3"; failed+=("$1"); fi
}
if [ "$WORLD" -lt 1 ]; then
  echo "=== FAIL compare: no GPU visible to torch"
  exit 1
fi

# mori.allocator as tests/gpu/torch_suite.sh installs it (pip, else its
# CMake stage); installed here when this part runs alone.
mori_importable() { (cd /tmp && "$PY" -c 'import mori.allocator' >/dev/null 2>&1); }
if ! mori_importable && [ -d build-torch-stage ]; then
  export PYTHONPATH="$PWD/build-torch-stage${PYTHONPATH:+:$PYTHONPATH}"
fi
if ! mori_importable; then
  PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    "$PY" -m pip install --no-build-isolation . >"$OUT/install.log" 2>&1
fi
mori_importable || { echo "=== FAIL compare: mori.allocator cannot be imported (see $OUT/install.log)"; exit 1; }

a2a() {  # log, timeout seconds, all2all.py arguments...
  local log=$1 limit=$2; shift 2
  timeout -k 10 "$limit" "$PY" -m torch.distributed.run --standalone --nproc_per_node="$WORLD" \
    bench/all2all.py "$@" >"$log" 2>&1
}

# 1. A failure on one rank ends them all.  Before the fix a failed check
# exited one rank and left the others in a collective until the timeout.
for kind in check raise; do
  t0=$SECONDS
  a2a "$OUT/all2all_inject_$kind.log" 150 --sizes 64K --iters 2 --inject "$kind:$LAST"
  rc=$? dt=$((SECONDS - t0))
  want="injected error"
  [ "$kind" = check ] && want="check FAILED on rank(s) $LAST"
  ok=1
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] && grep -q "$want" "$OUT/all2all_inject_$kind.log" && ok=0
  verdict "all2all_failure_ends_all_ranks_$kind" $ok \
    "--inject $kind:$LAST: exit status $rc after $dt s (a hang would end at 150 s with 124)"
done

# 2. Race-free checks: every path checked 20 times at the sizes where the
# old check failed at random.
t0=$SECONDS
a2a "$OUT/all2all_checks.log" 240 --sizes 64K,256K --iters 5 --check-repeats 20
rc=$?
n_ok=$(grep -c "check ok" "$OUT/all2all_checks.log")
grep "^all2all" "$OUT/all2all_checks.log"
ok=1
[ "$rc" -eq 0 ] && ! grep -q "FAILED" "$OUT/all2all_checks.log" && [ "$n_ok" -ge 4 ] && ok=0
verdict all2all_checks_race_free $ok \
  "exit status $rc, $n_ok path/size checks ok (x20 each), $((SECONDS - t0)) s"

# 3. The side-by-side comparison, reduced.
t0=$SECONDS
# shellcheck disable=SC2086  # COMPARE_ARGS is a list of arguments
"$PY" bench/compare.py --reduced --world "$WORLD" --rounds 3 --budget-s 170 \
  --out "$OUT/compare" ${COMPARE_ARGS:-} 2>&1 | tee "$OUT/compare.log"
rc=${PIPESTATUS[0]}
verdict compare_reduced "$rc" "exit status $rc, $((SECONDS - t0)) s; table in $OUT/compare/compare.md"

# 4. Where MORI's first rendezvous spends its time, in compare.py's own
# launch at one rank: the step lines and the fault shim's profile of every
# runtime and OS call of the rank (count=: calls, total and longest us, and
# which call was the longest).  Figures only; no verdict.
FI=${LIB:-$PWD/build-gpu/lib}/libmori_faultinject.so
if [ -f "$FI" ]; then
  rm -rf "$OUT/profile"; mkdir -p "$OUT/profile"
  LD_PRELOAD="$FI" MORI_FI="count=$OUT/profile/count" MORI_SYMM_DEBUG=INFO \
    timeout -k 10 150 "$PY" bench/compare.py --world 1 --rounds 1 --only fresh --budget-s 120 \
    --out "$OUT/profile" >"$OUT/profile/compare.log" 2>&1
  echo "profile: compare.py --world 1 --only fresh, exit status $?"
  grep -h "rendezvous group" "$OUT"/profile/launch-*MORI*.log
  for f in "$OUT"/profile/count.*; do
    grep -q "^hipMemCreate " "$f" 2>/dev/null || continue
    echo "profile: the MORI rank's ten longest calls (NAME CALLS TOTAL_US MAX_US #N), $f"
    grep -v "^#" "$f" | sort -k4 -g -r | head -10
  done
else
  echo "profile: $FI is missing (build-gpu not built): no profile"
fi

# 5. A process's first allocation, MORI against the built-in, in fresh
# processes, with MORI's own figures for it, its count= profile, and the
# driver's answer to a fabric create beside the cuda backend's (which
# refuses one without asking where no IMEX channel is there to open).
t0=$SECONDS
LIBDIR=${LIB:-$PWD/build-gpu/lib}
(cd /tmp && timeout -k 10 240 "$PY" "$OLDPWD/tests/gpu/first_alloc.py" --procs 8 \
  --out "$OUT/first_alloc" ${LIBDIR:+--lib "$LIBDIR"} \
  $( [ -f "$FI" ] && echo --fi "$FI" )) 2>&1 | tee "$OUT/first_alloc.log"
rc=${PIPESTATUS[0]}
verdict first_alloc_fabric_answer_agrees_with_the_driver "$rc" \
  "exit status $rc, $((SECONDS - t0)) s; table in $OUT/first_alloc.log"

# 6. Call by call (the table docs/performance.md's "Call by call" reads).
bash bench/cupti_trace.sh "$OUT/steps" >"$OUT/steps.log" 2>&1
echo "steps: exit status $? ($(tail -1 "$OUT/steps.log"))"

echo "compare part: ${#failed[@]} failed${failed[*]:+: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
