# check_dot_doc.cmake - fails when a generated block of a markdown file is
# not exactly what mori-fsm-dot prints from the transition table; with
# -DUPDATE=1 rewrites the block instead.  By default the block is the
# ```dot fence and the tool runs without arguments; -DARGS, -DOPEN and
# -DCLOSE name another (the steps table: --steps between two comments).
# -DNAME and -DREGEN name the tool and the target that rewrites the block
# in the message (tests/env checks docs/environment.md with it too).
#   cmake -DTOOL=<mori-fsm-dot> -DDOC=<file.md> [-DARGS=..] [-DOPEN=.. -DCLOSE=..]
#         [-DNAME=.. -DREGEN=..] [-DUPDATE=1] -P check_dot_doc.cmake
if(NOT TOOL OR NOT DOC)
  message(FATAL_ERROR "usage: cmake -DTOOL=<mori-fsm-dot> -DDOC=<file.md> [-DUPDATE=1] -P ${CMAKE_SCRIPT_MODE_FILE}")
endif()
if(NOT DEFINED OPEN)
  set(OPEN "```dot")
  set(CLOSE "```")
endif()
set(what "${OPEN}")
if(NOT DEFINED NAME)
  set(NAME mori-fsm-dot)
  set(REGEN "ninja fsm-dot-doc")
endif()

execute_process(COMMAND "${TOOL}" ${ARGS} OUTPUT_VARIABLE generated RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${TOOL} exited with ${rc}")
endif()

file(READ "${DOC}" doc)
set(fence_open "${OPEN}\n")
string(FIND "${doc}" "${fence_open}" start)
if(start EQUAL -1)
  message(FATAL_ERROR "${DOC}: no ${what} block")
endif()
string(LENGTH "${fence_open}" open_len)
math(EXPR body "${start} + ${open_len}")
string(SUBSTRING "${doc}" ${body} -1 rest)
string(FIND "${rest}" "${CLOSE}" end)
if(end EQUAL -1)
  message(FATAL_ERROR "${DOC}: the ${what} block is not closed")
endif()
string(SUBSTRING "${rest}" 0 ${end} block)

if("${block}" STREQUAL "${generated}")
  return()
endif()
if(UPDATE)
  string(SUBSTRING "${doc}" 0 ${body} head)
  string(SUBSTRING "${rest}" ${end} -1 tail)
  file(WRITE "${DOC}" "${head}${generated}${tail}")
  message(STATUS "${DOC}: ${what} block regenerated")
  return()
endif()
message(FATAL_ERROR "${DOC}: the ${what} block differs from ${NAME}'s output; "
        "regenerate it with `${REGEN}`")
