#!/bin/sh
# bench/cupti_trace.c's output file, built against tests/bench/cupti_stub:
# a new file is written; a link left at the name (to a file of someone
# else's) is refused and its target left as it was, as is a file already
# there.  Usage: cupti_trace_output.sh STUB_BINARY WORKDIR
set -u
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work/out" || exit 1
fail() { echo "cupti_trace output: FAIL: $*"; exit 1; }
# a fresh name: written
CUPTI_TRACE_DIR="$work/out" "$bin" | grep -q "InitializeInjection -> 1" || fail "a new file was not opened"
ls "$work/out"/trace-*.tsv >/dev/null 2>&1 || fail "no trace file written"
# a link at the name the process will use (its pid: the shell execs it)
echo secret >"$work/target"
sh -c 'ln -s "$1/target" "$1/out/trace-$$.tsv"; exec env CUPTI_TRACE_DIR="$1/out" "$2"' sh "$work" "$bin" \
  >"$work/link.log" 2>&1
grep -q "InitializeInjection -> 0" "$work/link.log" || fail "a link at the name was opened: $(cat "$work/link.log")"
[ "$(cat "$work/target")" = secret ] || fail "the link's target was written"
echo "cupti_trace output: ok"
