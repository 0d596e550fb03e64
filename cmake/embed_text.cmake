# Writes a C header that defines one NUL-terminated char array NAME holding
# the text of INPUTS (a ;-list, concatenated), each line equal to DROP left
# out: how the library carries the signal kernels' HIP source for hiprtc
# without a device compiler at build time.
#   cmake -DOUT=h -DNAME=sym -DINPUTS="a;b" -DDROP=line -P embed_text.cmake
set(text "")
foreach(f ${INPUTS})
  file(READ ${f} t)
  string(APPEND text "${t}")
endforeach()
if(DROP)
  string(REPLACE "${DROP}\n" "" text "${text}")
endif()
string(HEX "${text}" hex)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n  " bytes "${bytes}")
file(WRITE ${OUT} "/* Generated at build time by cmake/embed_text.cmake from ${INPUTS}. */\n"
     "static const char ${NAME}[] = {\n  ${bytes}0x00};\n")
