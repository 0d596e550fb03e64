/*
 * skip_fixture.c - a cmocka program with one case that passes, one that
 * skips and one that fails, for the checks that a skip reaches ctest as a
 * skip and never hides a failure (tests/common/mori_cmocka.h).
 */
#include "mori_cmocka.h"

static void case_passes(void **state) { assert_true(1); }

static void case_skips(void **state) { skip(); }

static void case_fails(void **state) { fail_msg("this case fails on purpose"); }

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(case_passes),
      cmocka_unit_test(case_skips),
      cmocka_unit_test(case_fails),
  };
  return mori_run_tests(argc, argv, tests);
}
