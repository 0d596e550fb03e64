# How every test area registers tests that must not vanish or pass empty
# (included by tests/CMakeLists.txt before any area).

# A cmocka program built on tests/common/mori_cmocka.h exits 77 when a case
# skipped and none failed: ctest reports that as a skip, not a pass.
set(MORI_TEST_SKIPPED 77)
function(mori_cmocka_skips)
  set_tests_properties(${ARGN} PROPERTIES SKIP_RETURN_CODE ${MORI_TEST_SKIPPED})
endfunction()

find_program(MORI_VALGRIND valgrind)
if(NOT MORI_VALGRIND AND NOT (MORI_ASAN OR MORI_FUZZ_LIBFUZZER OR MORI_FUZZ_AFL))
  message(WARNING "valgrind not found: the valgrind tests will fail until it is installed")
endif()
set(MORI_VALGRIND_OPTIONS --tool=memcheck --trace-children=yes --error-exitcode=99
    --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite)

# mori_valgrind_test(NAME TARGET t TIMEOUT s COMMAND ... [ENVIRONMENT ...]
#                    [FAIL_REGULAR_EXPRESSION re] [SKIP_RETURN_CODE])
# Registers NAME (label valgrind) running COMMAND under memcheck.  Without
# valgrind, or without TARGET in this build, the test still exists and
# fails saying why: CI must not pass by leaving it out.  Sanitizer and
# fuzzing builds register none (ASan and memcheck exclude each other).
function(mori_valgrind_test name)
  cmake_parse_arguments(VG "SKIP_RETURN_CODE" "TIMEOUT;TARGET"
                        "COMMAND;ENVIRONMENT;FAIL_REGULAR_EXPRESSION" ${ARGN})
  if(MORI_ASAN OR MORI_FUZZ_LIBFUZZER OR MORI_FUZZ_AFL)
    return()
  endif()
  if(NOT MORI_VALGRIND)
    set(why "valgrind is not installed: apt-get install valgrind")
    add_test(NAME ${name} COMMAND sh -c "echo '${name}: ${why}' >&2; exit 1")
  elseif(NOT TARGET ${VG_TARGET})
    set(why "target ${VG_TARGET} is not part of this build")
    add_test(NAME ${name} COMMAND sh -c "echo '${name}: ${why}' >&2; exit 1")
  else()
    add_test(NAME ${name} COMMAND ${MORI_VALGRIND} ${MORI_VALGRIND_OPTIONS} ${VG_COMMAND})
  endif()
  set_tests_properties(${name} PROPERTIES LABELS valgrind TIMEOUT ${VG_TIMEOUT})
  if(VG_ENVIRONMENT)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${VG_ENVIRONMENT}")
  endif()
  if(VG_FAIL_REGULAR_EXPRESSION)
    set_tests_properties(${name} PROPERTIES
                         FAIL_REGULAR_EXPRESSION "${VG_FAIL_REGULAR_EXPRESSION}")
  endif()
  if(VG_SKIP_RETURN_CODE AND MORI_VALGRIND AND TARGET ${VG_TARGET})
    mori_cmocka_skips(${name})
  endif()
endfunction()
