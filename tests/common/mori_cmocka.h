/*
 * mori_cmocka.h - cmocka with skips that ctest can see.  cmocka's exit
 * status counts failures only, so a skipped case passes silently; here a
 * run in which a case skipped and none failed exits MORI_TEST_SKIPPED,
 * which the test's registration turns into a ctest skip (SKIP_RETURN_CODE,
 * tests/common/mori_tests.cmake).  Include it instead of <cmocka.h>, and
 * return mori_run_tests(argc, argv, tests) from main.
 */
#ifndef MORI_CMOCKA_H
#define MORI_CMOCKA_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define MORI_TEST_SKIPPED 77

static int mori__test_skips __attribute__((unused));

/* Counts the skip before cmocka's own, which jumps out of the case. */
#undef skip
#define skip()                       \
  do {                               \
    mori__test_skips++;              \
    _skip(__FILE__, __LINE__);       \
  } while (0)

/* `--only PATTERN` runs the matching cases, `--except PATTERN` the others
 * (cmocka's wildcards), so that one program can be registered as several
 * ctest tests: a case that skips on this host then skips alone. */
static inline int mori__run_tests(int argc, char **argv, const struct CMUnitTest *tests,
                                  size_t count, const char *group) {
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--only") == 0) cmocka_set_test_filter(argv[i + 1]);
    else if (strcmp(argv[i], "--except") == 0) cmocka_set_skip_filter(argv[i + 1]);
  }
  int failed = _cmocka_run_group_tests(group, tests, count, NULL, NULL);
  return failed ? failed : mori__test_skips ? MORI_TEST_SKIPPED : 0;
}
#define mori_run_tests(argc, argv, tests) \
  mori__run_tests((argc), (argv), (tests), sizeof(tests) / sizeof((tests)[0]), #tests)

#endif
