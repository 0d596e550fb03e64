# check_dot_doc.cmake - fails when the ```dot block of a markdown file is not
# exactly what mori-fsm-dot prints from the transition table; with
# -DUPDATE=1 rewrites the block instead.
#   cmake -DTOOL=<mori-fsm-dot> -DDOC=<file.md> [-DUPDATE=1] -P check_dot_doc.cmake
if(NOT TOOL OR NOT DOC)
  message(FATAL_ERROR "usage: cmake -DTOOL=<mori-fsm-dot> -DDOC=<file.md> [-DUPDATE=1] -P ${CMAKE_SCRIPT_MODE_FILE}")
endif()

execute_process(COMMAND "${TOOL}" OUTPUT_VARIABLE dot RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${TOOL} exited with ${rc}")
endif()

file(READ "${DOC}" doc)
set(fence_open "```dot\n")
string(FIND "${doc}" "${fence_open}" start)
if(start EQUAL -1)
  message(FATAL_ERROR "${DOC}: no ```dot block")
endif()
string(LENGTH "${fence_open}" open_len)
math(EXPR body "${start} + ${open_len}")
string(SUBSTRING "${doc}" ${body} -1 rest)
string(FIND "${rest}" "```" end)
if(end EQUAL -1)
  message(FATAL_ERROR "${DOC}: the ```dot block is not closed")
endif()
string(SUBSTRING "${rest}" 0 ${end} block)

if("${block}" STREQUAL "${dot}")
  return()
endif()
if(UPDATE)
  string(SUBSTRING "${doc}" 0 ${body} head)
  string(SUBSTRING "${rest}" ${end} -1 tail)
  file(WRITE "${DOC}" "${head}${dot}${tail}")
  message(STATUS "${DOC}: diagram regenerated")
  return()
endif()
message(FATAL_ERROR "${DOC}: the ```dot block differs from mori-fsm-dot's output; "
        "regenerate it with `ninja fsm-dot-doc`")
