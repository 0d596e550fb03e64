#!/bin/sh
# Every option a command's help lists is one the command accepts: given
# before --help, a flag is taken and --help then stops the command; a value
# option takes "--help" as its value and may refuse it, but never as an
# unknown option.  usage: options_accepted.sh MORI_SYMM MORI_FI
status=0
checked=0
for tool in "$@"; do
  for cmd in $("$tool" --help | sed -n 's/^usage: [^ ]* \([a-z-]*\) .*/\1/p'); do
    for opt in $("$tool" help "$cmd" | sed -n 's/^  \(--[a-z-]*\).*/\1/p'); do
      out=$("$tool" "$cmd" "$opt" --help 2>&1)
      checked=$((checked + 1))
      case "$out" in
        *"unknown option"*) echo "$tool $cmd: lists $opt but refuses it: $out"; status=1 ;;
      esac
    done
  done
done
echo "$checked listed options checked"
[ "$checked" -gt 10 ] || { echo "too few options found: the help format changed?"; exit 1; }
exit $status
