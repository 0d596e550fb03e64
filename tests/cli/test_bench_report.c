/*
 * test_bench_report.c - bench-sim's table is per operation in every
 * column: the parent divides a repeated step's counts and its wall time by
 * the repetitions (the wall time was once the total over --reps under a
 * heading that said "per operation").
 */
#include "mori_cmocka.h"

#include "cli.h"

static const char *const names[] = {"alloc", "cached"};
static const int repeated[] = {0, 1};

static void a_repeated_step_is_per_operation_in_every_column(void **state) {
  (void)state;
  double out[2][3];
  int seam = -1;
  assert_int_equal(cli_bench_parse("counts alloc:4,6,120 cached:2000,0,5000 seam=1", names,
                                   repeated, 2, 2, 1000, &out[0][0], &seam),
                   0);
  assert_int_equal(seam, 1);
  /* a step run once: as reported */
  assert_true(out[0][0] == 4 && out[0][1] == 6 && out[0][2] == 120);
  /* 1000 reps: 2 store ops, 0 polls and 5 us each */
  assert_true(out[1][0] == 2 && out[1][1] == 0);
  assert_true(out[1][2] == 5);
}

static void a_report_of_another_shape_is_refused(void **state) {
  (void)state;
  double out[2][3];
  int seam = 0;
  static const char *const bad[] = {
      "alloc:4,6,120 cached:2000,0,5000 seam=1",        /* no "counts" */
      "counts alloc:4,6,120 seam=1",                    /* a step missing */
      "counts alloc:4,6 cached:2000,0,5000 seam=1",     /* a column missing */
      "counts alloc:4,6,120 cached:2000,0,5000",        /* no seam */
      "counts cached:2000,0,5000 alloc:4,6,120 seam=1", /* steps out of order */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(cli_bench_parse(bad[i], names, repeated, 2, 2, 10, &out[0][0], &seam), -1);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_repeated_step_is_per_operation_in_every_column),
      cmocka_unit_test(a_report_of_another_shape_is_refused),
  };
  return mori_run_tests(argc, argv, tests);
}
