#!/bin/sh
# no_stream_numbers.sh OBJECT... - fails if an object of the torch adapter
# refers to libstdc++'s numeric stream insertion (std::ostream::operator<<
# of a number or pointer, std::ostream::_M_insert<T>): on the GPU host a
# number inserted into a std::ostream inside the extension crashed the
# process, so the adapter formats its messages with printf's rules
# (docs/torch.md, "Messages").  Strings may still be streamed.
set -u
pattern='std::ostream::operator<<\((bool|short|unsigned short|int|unsigned int|long|unsigned long|long long|unsigned long long|float|double|long double|void const\*|decltype\(nullptr\))\)|std::ostream& std::ostream::_M_insert<'
status=0
for obj in "$@"; do
  if ! syms=$(nm -C -u "$obj" 2>/dev/null); then
    echo "no_stream_numbers: cannot read $obj" >&2
    status=1
    continue
  fi
  hits=$(printf '%s\n' "$syms" | grep -E "$pattern")
  if [ -n "$hits" ]; then
    echo "FAIL $obj formats numbers through std::ostream:" >&2
    printf '%s\n' "$hits" >&2
    status=1
  fi
done
[ $status -eq 0 ] && echo "no_stream_numbers: $# object(s), no numeric stream insertion"
exit $status
