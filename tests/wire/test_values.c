/*
 * test_values.c - the one strict reader (hip_shim/seam/values.c): what each
 * unit a size may carry is worth, the edges of a range, and what a
 * formatted size reads back as.  The command line's and the environment's
 * tests see only taken or refused; these pin the values taken.
 */
#include "mori_cmocka.h"

#include <limits.h>
#include <string.h>

#include "mori/values.h"

static long long size_of(const char *text, long long max) {
  long long v = -1;
  char why[256];
  int rc = mori_value_size(text, 0, max, &v, why, sizeof why);
  if (rc != 0) print_message("'%s': %s\n", text, why);
  return rc == 0 ? v : -1;
}

static void every_unit_is_worth_its_power_of_two(void **s) {
  (void)s;
  static const struct {
    const char *text;
    long long bytes;
  } cases[] = {
      {"3", 3},          {"3K", 3LL << 10},     {"3M", 3LL << 20},     {"3G", 3LL << 30},
      {"3KiB", 3LL << 10}, {"3MiB", 3LL << 20}, {"3GiB", 3LL << 30},   {"1 byte", 1},
      {"3 bytes", 3},    {"3 KiB", 3LL << 10},  {"3 MiB", 3LL << 20},  {"3 GiB", 3LL << 30},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    assert_int_equal(size_of(cases[i].text, LLONG_MAX), cases[i].bytes);
}

static void a_formatted_size_reads_back_as_itself(void **s) {
  (void)s;
  static const long long sizes[] = {1, 2, 1023, 1LL << 10, 5LL << 20, 16LL << 30};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    char text[64];
    mori_value_format_size(sizes[i], text, sizeof text);
    assert_int_equal(size_of(text, LLONG_MAX), sizes[i]);
  }
}

static void a_range_holds_its_ends_and_nothing_past_them(void **s) {
  (void)s;
  long long v = 0;
  char why[256];
  assert_int_equal(mori_value_int("1", 1, 1024, &v, why, sizeof why), 0);
  assert_int_equal(v, 1);
  assert_int_equal(mori_value_int("1024", 1, 1024, &v, why, sizeof why), 0);
  assert_int_equal(v, 1024);
  assert_int_equal(mori_value_int("0", 1, 1024, &v, why, sizeof why), -1);
  assert_int_equal(mori_value_int("1025", 1, 1024, &v, why, sizeof why), -1);
  assert_non_null(strstr(why, "1 to 1024"));
  assert_int_equal(size_of("16G", 16LL << 30), 16LL << 30);
  assert_int_equal(size_of("16777217K", 16LL << 30), -1);
  /* the contract is -1 with why, whichever check refused it */
  assert_int_equal(mori_value_size("16777217K", 0, 16LL << 30, &v, why, sizeof why), -1);
  assert_int_equal(mori_value_size("99999999999999999999", 0, 16LL << 30, &v, why, sizeof why), -1);
  assert_int_equal(mori_value_size("8X", 0, 16LL << 30, &v, why, sizeof why), -1);
  assert_int_equal(mori_value_size("", 0, 16LL << 30, &v, why, sizeof why), -1);
}

static void a_version_reads_each_field_and_defaults_the_patch(void **s) {
  (void)s;
  static const long long max[3] = {200, 200, 99999};
  int f[3] = {-1, -1, -1};
  char why[256];
  assert_int_equal(mori_value_version("6.2.41133", max, f, why, sizeof why), 0);
  assert_int_equal(f[0], 6);
  assert_int_equal(f[1], 2);
  assert_int_equal(f[2], 41133);
  assert_int_equal(mori_value_version("7.1", max, f, why, sizeof why), 0);
  assert_int_equal(f[0], 7);
  assert_int_equal(f[1], 1);
  assert_int_equal(f[2], 0);
  assert_int_equal(mori_value_version("201.0", max, f, why, sizeof why), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_unit_is_worth_its_power_of_two),
      cmocka_unit_test(a_formatted_size_reads_back_as_itself),
      cmocka_unit_test(a_range_holds_its_ends_and_nothing_past_them),
      cmocka_unit_test(a_version_reads_each_field_and_defaults_the_patch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
