/*
 * test_bringup.c - which libamdhip64 the hip backend binds, and which ROCm
 * it refuses and how it says so (tests/rocm does both against Debian's real
 * HIP 5.2.3).  In a torch process on ROCm the runtime is already loaded,
 * under a soname, a future version or a wheel's bundled name; binding any
 * other copy would put a second HIP runtime in the process.  ctest runs one
 * configuration per process (the backend comes up once), with copies of
 * the stand-in named as ROCm installs and torch wheels name the runtime:
 *   MORI_TEST_LOAD_HIP    a runtime to load first, as torch does
 *   MORI_TEST_EXPECT_HIP  the file the backend must bind
 *   LD_LIBRARY_PATH       where a plain dlopen of the sonames would look
 */
#include "hipstub_test.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>

struct loaded {
  int count;
  char path[PATH_MAX];
};

static int count_runtime(struct dl_phdr_info *info, size_t size, void *data) {
  struct loaded *l = data;
  const char *base = strrchr(info->dlpi_name, '/');
  base = base ? base + 1 : info->dlpi_name;
  if (strncmp(base, "libamdhip64", 11) == 0) {
    l->count++;
    snprintf(l->path, sizeof l->path, "%s", info->dlpi_name);
  }
  return 0;
}

static void binds_the_runtime_already_in_the_process(void **state) {
  const char *load = getenv("MORI_TEST_LOAD_HIP"), *want = getenv("MORI_TEST_EXPECT_HIP");
  assert_non_null(want);
  if (load != NULL) assert_non_null(dlopen(load, RTLD_NOW | RTLD_GLOBAL));
  if (mori_shim_select("hip") != 0) fail_msg("select hip: %s", mori_shim_message());

  struct loaded l = {0};
  dl_iterate_phdr(count_runtime, &l);
  char got[PATH_MAX], expected[PATH_MAX];
  assert_non_null(realpath(l.path, got));
  assert_non_null(realpath(want, expected));
  if (l.count != 1 || strcmp(got, expected) != 0)
    fail_msg("%d HIP runtime(s) in the process, the last %s; expected only %s", l.count, got,
             expected);

  /* And it is a working runtime: one granule through the whole cycle. */
  hipMemAllocationProp prop = hipstub_prop(hipMemHandleTypePosixFileDescriptor, 0);
  hipMemGenericAllocationHandle_t h = NULL;
  size_t gran = hipstub_granularity(hipMemHandleTypePosixFileDescriptor);
  assert_int_equal(mori_hipMemCreate(&h, gran, &prop, 0), hipSuccess);
  assert_int_equal(mori_hipMemRelease(h), hipSuccess);
  assert_int_equal(mori_shim_registry_total(), 0);
}

/* MORI_STANDIN_HIP_VERSION is the release the runtime claims: one message
 * names it, the file and the minimum, and nothing else is said. */
static void rocm_older_than_6_2_is_refused_at_bring_up(void **state) {
  assert_int_equal(mori_shim_select("hip"), -1);
  int v = atoi(getenv("MORI_STANDIN_HIP_VERSION"));
  char want[PATH_MAX + 256];
  snprintf(want, sizeof want,
           "shim backend hip not available: found HIP %d.%d.0 (%s, hipRuntimeGetVersion %d); "
           "mori-symm needs HIP >= 6.2 (ROCm 6.2)",
           v / 10000000, v / 100000 % 100, getenv("MORI_SYMM_HIP_LIB"), v);
  assert_string_equal(mori_shim_message(), want);
  assert_null(mori_shim_backend());
}

/* A runtime whose hipRuntimeGetVersion fails is judged by its own file name
 * (libamdhip64.so.6.1.60100 behind the .so.6 link), before any symbol. */
static void rocm_version_from_the_file_name_where_the_runtime_cannot_tell(void **state) {
  char real[PATH_MAX], want[PATH_MAX + 256];
  assert_non_null(realpath(getenv("MORI_SYMM_HIP_LIB"), real));
  assert_int_equal(mori_shim_select("hip"), -1);
  snprintf(want, sizeof want,
           "shim backend hip not available: found HIP 6.1.60100 (%s, from its file name; "
           "hipRuntimeGetVersion: hipErrorNotInitialized (3)); mori-symm needs HIP >= 6.2 "
           "(ROCm 6.2)",
           real);
  assert_string_equal(mori_shim_message(), want);
  assert_null(mori_shim_backend());
}

/* A runtime that answers its version only once hipInit ran, under a file
 * name that carries none (a wheel's libamdhip64.so): nothing judges it
 * before the symbols, so the version it gives after hipInit must be judged
 * (MORI_STANDIN_HIP_VERSION=init:N, N older than 6.2). */
static void a_runtime_answering_only_after_init_is_judged_then(void **state) {
  const char *v = getenv("MORI_STANDIN_HIP_VERSION");
  assert_true(v != NULL && strncmp(v, "init:", 5) == 0);
  int version = atoi(v + 5);
  char want[PATH_MAX + 256];
  if (mori_shim_select("hip") == 0)
    fail_msg("HIP %d.%d, which answers its version only after hipInit, was accepted",
             version / 10000000, version / 100000 % 100);
  snprintf(want, sizeof want,
           "shim backend hip not available: found HIP %d.%d.0 (%s, hipRuntimeGetVersion %d); "
           "mori-symm needs HIP >= 6.2 (ROCm 6.2)",
           version / 10000000, version / 100000 % 100, getenv("MORI_SYMM_HIP_LIB"), version);
  assert_string_equal(mori_shim_message(), want);
  assert_null(mori_shim_backend());
}

/* A file name of two version fields (libamdhip64.so.6.1, no patch) still
 * tells the release: 6.1, refused before any symbol. */
static void rocm_version_from_a_file_name_of_two_fields(void **state) {
  char real[PATH_MAX], want[PATH_MAX + 256];
  assert_non_null(realpath(getenv("MORI_SYMM_HIP_LIB"), real));
  const char *base = strrchr(real, '/');
  assert_string_equal(base ? base + 1 : real, "libamdhip64.so.6.1");
  assert_int_equal(mori_shim_select("hip"), -1);
  snprintf(want, sizeof want,
           "shim backend hip not available: found HIP 6.1.0 (%s, from its file name; "
           "hipRuntimeGetVersion: hipErrorNotInitialized (3)); mori-symm needs HIP >= 6.2 "
           "(ROCm 6.2)",
           real);
  assert_string_equal(mori_shim_message(), want);
  assert_null(mori_shim_backend());
}

static void rocm_6_2_and_later_are_accepted(void **state) {
  if (mori_shim_select("hip") != 0) fail_msg("select hip: %s", mori_shim_message());
  int version = 0;
  assert_int_equal(mori_hipRuntimeGetVersion(&version), hipSuccess);
  assert_int_equal(version, atoi(getenv("MORI_STANDIN_HIP_VERSION")));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(binds_the_runtime_already_in_the_process),
      cmocka_unit_test(rocm_older_than_6_2_is_refused_at_bring_up),
      cmocka_unit_test(rocm_version_from_the_file_name_where_the_runtime_cannot_tell),
      cmocka_unit_test(a_runtime_answering_only_after_init_is_judged_then),
      cmocka_unit_test(rocm_version_from_a_file_name_of_two_fields),
      cmocka_unit_test(rocm_6_2_and_later_are_accepted),
  };
  return mori_run_tests(argc, argv, tests);
}
