# shellcheck shell=bash disable=SC2154 # the options come from mutate.sh
# scripts/mutate.sh --diff: the mechanical mutants of a change (sourced by
# mutate.sh, which parsed the options).  One scratch tree and one build
# directory for every mutant: a mutant rebuilds its file and relinks its
# library (executables are not relinked against a changed shared library).
near_map=$root/tests/mutants/nearest.tsv
equivalent=$root/tests/mutants/equivalent.tsv
if [ -z "$scratch" ]; then
  scratch=$(mktemp -d /tmp/mori-mutate-XXXXXX)
  trap 'rm -rf "$scratch"' EXIT
fi
src=$scratch/src
build=$scratch/build
# A kept scratch tree of the same revision, left unmutated, is used again
# as it is (its build is up to date); any other is made afresh.
if [ -n "$rev" ] && [ -f "$scratch/clean" ] && [ "$(cat "$scratch/clean")" = "$(git rev-parse "$rev")" ]; then
  :
elif [ -n "$rev" ]; then
  rm -rf "$src" "$scratch/clean"
  mkdir -p "$src"
  git archive "$rev" | tar -xmf - -C "$src" || { echo "mutate: no tree for $rev" >&2; exit 2; }
else
  rm -rf "$src" "$scratch/clean"
  mkdir -p "$src"
  git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xmf - -C "$src"
fi
echo "mutate: scratch $src (${rev:-working tree}), mutants of git diff $diff_base${rev:+..$rev}"

gen=(python3 "$root/scripts/mutgen.py")
sel=(--sample "$sample" --seed "$seed")
if [ -n "$rerun" ]; then
  awk -F'\t' '$5 == "survived"' "$rerun" >"$scratch/keys"
  sel=(--keys "$scratch/keys")
elif [ -n "$keys" ]; then
  sel=(--keys "$keys")
fi
"${gen[@]}" list --base "$diff_base" ${rev:+--rev "$rev"} --root "$src" --equivalent "$equivalent" \
  "${sel[@]}" >"$scratch/mutants.tsv" || exit 2
total=$(grep -vc '^#' "$scratch/mutants.tsv")
if [ "$dry" = 1 ]; then
  cut -f1-5,7 "$scratch/mutants.tsv"
  exit 0
fi

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=$src CCACHE_NOHASHDIR=1
fi
build_all() { timeout $((cap * 10)) nice cmake --build "$build" -j "$jobs" >"$1" 2>&1; }
if ! cmake -S "$src" -B "$build" -G Ninja -DMORI_WERROR=OFF -DCMAKE_LINK_DEPENDS_NO_SHARED=ON \
       "${launcher[@]}" >"$scratch/configure.log" 2>&1 || ! build_all "$scratch/build.log"; then
  echo "mutate: the unmutated tree does not build ($scratch/build.log)" >&2
  exit 2
fi
[ -n "$rev" ] && git rev-parse "$rev" >"$scratch/clean"

# The ctest arguments of the longest prefix of tests/mutants/nearest.tsv
# that path starts with ("*": the wider set).
nearest() {
  awk -F'\t' -v p="$1" '
    /^#/ || NF < 2 { next }
    $1 == "*" { if (p == "*") { print $2; exit } next }
    p != "*" && index(p, $1) == 1 && length($1) > best { best = length($1); args = $2 }
    END { if (p != "*" && best) print args }' "$near_map"
}
# Tests failing on the unmutated tree kill nothing: left out of every run.
broken=""
with_broken() { # ctest arguments, with the broken tests excluded
  local out=() e=0 w
  for w in "$@"; do
    if [ "$e" = 1 ] && [ -n "$broken" ]; then w="($w)|^($broken)\$"; fi
    e=0
    [ "$w" = -E ] && e=1
    out+=("$w")
  done
  if [ -n "$broken" ] && ! printf '%s\n' "$@" | grep -qx -- -E; then out+=(-E "^($broken)\$"); fi
  printf '%s\n' "${out[@]}"
}
# A mutant may leave ranks running (a hung child whose parent the timeout
# killed): every process still running a program of the scratch build is
# ended before the next mutant.
ours() { # the processes running a program of the scratch build
  local p e
  for p in /proc/[0-9]*; do
    e=$(readlink "$p/exe" 2>/dev/null) || continue
    case "$e" in "$build"/*) echo "${p#/proc/}" ;; esac
  done
}
reap() {
  local p
  for p in $(ours); do kill -9 "$p" 2>/dev/null; done
}
# A mutant that forks without end would starve the machine's other users:
# each test run has a session of its own, and past this many processes in
# it the whole session is killed and the mutant counts as killed (the
# suite would see it fail).
max_procs=200
# run_tests LOG ARGS...: sets verdict (killed, timeout, pass, none) and by
run_tests() {
  local log=$1
  shift
  local args
  mapfile -t args < <(with_broken "$@")
  setsid timeout $((cap * 4)) nice ctest --test-dir "$build" --stop-on-failure -j "$jobs" \
    --timeout "$cap" "${args[@]}" >"$log" 2>&1 &
  local sid=$! rc n runaway=0
  while kill -0 "$sid" 2>/dev/null; do
    n=$(pgrep -c -s "$sid")
    if [ "$n" -gt "$max_procs" ]; then
      runaway=$n
      pkill -9 -s "$sid"
      pkill -9 -s "$sid"
    fi
    sleep 0.2
  done
  wait "$sid"
  rc=$?
  pkill -9 -s "$sid"
  reap
  if [ "$runaway" -gt 0 ]; then
    verdict=killed by="runaway: $runaway processes"
    return
  fi
  by=$(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) (\(.*\))$/\1 (\2)/p' "$log" | head -1)
  if grep -q "No tests were found" "$log"; then
    verdict=none
  elif [ $rc -eq 124 ] || [[ $by == *"(Timeout)" ]]; then
    verdict=timeout by=${by:-"ctest past ${cap}s"}
  elif [ -n "$by" ] || [ $rc -ne 0 ]; then
    verdict=killed by=${by:-"ctest rc $rc"}
  else
    verdict=pass
  fi
}

mapfile -t files < <(grep -v '^#' "$scratch/mutants.tsv" | cut -f2 | sort -u)
# the verdict on the unmutated tree is kept with a kept scratch tree of a
# revision: a run again with the same files need not look again
checked=$scratch/broken.$(printf '%s\n' "${rev:+$(git rev-parse "$rev")}" "${files[@]}" | cksum | cut -d' ' -f1)
[ -n "$rev" ] && [ -f "$checked" ] && broken=$(cat "$checked") && files=() &&
  echo "mutate: $total mutants; the tests they use were checked before ($checked)"
[ ${#files[@]} -gt 0 ] && echo "mutate: $total mutants; checking the tests they use on the unmutated tree"
for f in ${files[@]:+"*"} "${files[@]}"; do
  a=$(nearest "$f")
  [ -n "$a" ] || continue
  # shellcheck disable=SC2086 # the map's ctest arguments are words
  ctest --test-dir "$build" -j "$jobs" --timeout "$cap" $a >"$scratch/baseline.log" 2>&1
  for t in $(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) (.*)$/\1/p' "$scratch/baseline.log" |
             sed 's/[.+]/\\&/g'); do
    case "|$broken|" in *"|$t|"*) ;; *) broken=${broken:+$broken|}$t ;; esac
  done
done
[ -n "$rev" ] && printf '%s' "$broken" >"$checked"
[ -n "$broken" ] && echo "mutate: failing before any mutant, left out: $broken"

report=$scratch/report.tsv
printf '# key\tfile\tline\trule\tresult\tby\tmutated line\n' >"$report"
declare -A k_area s_area
killed=0 survived=0 nobuild=0 timedout=0 equiv=0 stale=0 n=0
start=$(date +%s)
while IFS=$'\t' read -r key file line rule why _before after; do
  case "$key" in ''|'#'*) continue ;; esac
  n=$((n + 1))
  t0=$(date +%s)
  area=${file%%/*}
  by=""
  if [ "$why" != - ]; then
    result=equivalent by=$why
    equiv=$((equiv + 1))
  else
    cp "$src/$file" "$scratch/original"
    rm -f "$scratch/clean.$$"
    [ -f "$scratch/clean" ] && mv "$scratch/clean" "$scratch/clean.$$"
    if ! "${gen[@]}" apply "$scratch/mutants.tsv" "$key" "$src" 2>"$scratch/apply.log"; then
      result=stale by=$(cat "$scratch/apply.log")
      stale=$((stale + 1))
    elif ! build_all "$scratch/$key.build.log"; then
      result="no-build" by="$scratch/$key.build.log"
      nobuild=$((nobuild + 1))
    else
      # shellcheck disable=SC2046 # the map's ctest arguments are words
      run_tests "$scratch/$key.near.log" $(nearest "$file")
      if [ "$verdict" = pass ] || [ "$verdict" = none ]; then
        # shellcheck disable=SC2046
        run_tests "$scratch/$key.wide.log" $(nearest "*")
      fi
      case $verdict in
        killed) result=killed killed=$((killed + 1)) k_area[$area]=$((${k_area[$area]:-0} + 1)) ;;
        timeout) result=timeout timedout=$((timedout + 1)) k_area[$area]=$((${k_area[$area]:-0} + 1)) ;;
        *) result=survived by="" survived=$((survived + 1)) s_area[$area]=$((${s_area[$area]:-0} + 1)) ;;
      esac
    fi
    cp "$scratch/original" "$src/$file"
    touch "$src/$file" # the next build sees the file changed back
    [ -f "$scratch/clean.$$" ] && mv "$scratch/clean.$$" "$scratch/clean"
  fi
  printf '[%d/%d] %-8s %s:%s %s (%ds) %s\n' "$n" "$total" "$result" "$file" "$line" "$rule" \
    $(($(date +%s) - t0)) "$by"
  [ "$result" = survived ] && printf '           %s\n' "$(printf '%s' "$after" | sed 's/\\t/\t/g; s/\\\\/\\/g' | sed 's/^[[:space:]]*//')"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$key" "$file" "$line" "$rule" "$result" "$by" "$after" >>"$report"
done <"$scratch/mutants.tsv"
build_all /dev/null

counted=$((killed + timedout + survived))
score=0
[ $counted -gt 0 ] && score=$((1000 * (killed + timedout) / counted))
for a in $(printf '%s\n' "${!k_area[@]}" "${!s_area[@]}" | sort -u); do
  k=${k_area[$a]:-0} s=${s_area[$a]:-0}
  printf 'mutate: %-12s %3d killed %3d survived  %d%%\n' "$a/" "$k" "$s" $((100 * k / (k + s)))
done
echo "mutate: $n mutants (of git diff $diff_base${rev:+..$rev}${sel[*]:+, ${sel[*]}}): $killed killed, $timedout timed out, $survived survived, $nobuild did not build, $equiv equivalent, $stale stale; score $((score / 10)).$((score % 10))% ($((killed + timedout))/$counted) in $(($(date +%s) - start)) s"
copy=${report_out:-$scratch/../mutate-diff-report.tsv}
cp "$report" "$copy" && echo "mutate: table in $copy"
[ "$survived" -eq 0 ]
