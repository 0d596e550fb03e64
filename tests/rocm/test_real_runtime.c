/*
 * test_real_runtime.c - the hip backend's bring-up against Debian's real
 * libamdhip64.so.5 (HIP 5.2.3): refused in one message that names the
 * version the runtime reports, its file and the minimum, with no word about
 * symbols; and whichever runtime is already in the process is the one
 * judged or bound, and the only libamdhip64 mapped after the bring-up.
 * ctest runs one configuration per process (the backend comes up once):
 *   MORI_TEST_EXPECT_HIP     the file the backend must judge or bind
 *   MORI_TEST_EXPECT_MAPPED  how many libamdhip64 files /proc/self/maps may
 *                            hold afterwards (each of them that file)
 *   LD_PRELOAD, LD_LIBRARY_PATH  what is loaded first, where a search looks
 * The expected version is that of Debian's <hip/hip_version.h>, which comes
 * with the runtime.
 */
#include "mori_cmocka.h"

#include "mori/hip_shim.h"

#include <hip/hip_version.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The distinct libamdhip64 files mapped into this process; path receives
 * the last one's real path. */
static int mapped_runtimes(char *path, size_t len) {
  char line[PATH_MAX + 256], seen[8][PATH_MAX];
  int n = 0;
  FILE *maps = fopen("/proc/self/maps", "r");
  assert_non_null(maps);
  while (fgets(line, sizeof line, maps) != NULL) {
    char *file = strchr(line, '/'), real[PATH_MAX];
    if (file == NULL) continue;
    file[strcspn(file, "\n")] = '\0';
    const char *base = strrchr(file, '/') + 1;
    if (strncmp(base, "libamdhip64", 11) != 0 || realpath(file, real) == NULL) continue;
    int known = 0;
    for (int i = 0; i < n; i++) known |= strcmp(seen[i], real) == 0;
    if (known || n == 8) continue;
    snprintf(seen[n++], PATH_MAX, "%s", real);
    snprintf(path, len, "%s", real);
  }
  fclose(maps);
  return n;
}

static void real_path_of(const char *env, char *real) {
  const char *path = getenv(env);
  if (path == NULL) fail_msg("%s is not set", env);
  if (realpath(path, real) == NULL) fail_msg("%s=%s: no such file", env, path);
}

/* At most MORI_TEST_EXPECT_MAPPED (exactly, when set to a positive count)
 * runtimes are mapped, and each is the expected file. */
static void check_mapped(const char *expected) {
  const char *want = getenv("MORI_TEST_EXPECT_MAPPED");
  char last[PATH_MAX] = "";
  int n = mapped_runtimes(last, sizeof last);
  if (want == NULL) fail_msg("MORI_TEST_EXPECT_MAPPED is not set");
  if (n != atoi(want))
    fail_msg("%d libamdhip64 mapped after the bring-up (the last %s); expected %s, %s", n, last,
             want, expected);
  if (n > 0 && strcmp(last, expected) != 0)
    fail_msg("the runtime mapped is %s; expected %s", last, expected);
}

/* Debian's runtime must be what this process can see: a test that passed
 * without it would prove nothing. */
static void the_real_runtime_is_older_than_6_2(void) {
  if (HIP_VERSION >= 60200000)
    fail_msg("the installed HIP %d.%d.%d is not older than 6.2: these tests need Debian's "
             "libamdhip64-5 (HIP 5.2.3)",
             HIP_VERSION_MAJOR, HIP_VERSION_MINOR, HIP_VERSION_PATCH);
}

static void real_hip_5_2_is_refused_in_one_message_naming_it(void **state) {
  char expected[PATH_MAX], named[PATH_MAX], want_tail[256], prefix[128];
  the_real_runtime_is_older_than_6_2();
  real_path_of("MORI_TEST_EXPECT_HIP", expected);

  assert_int_equal(mori_shim_select("hip"), -1);
  assert_null(mori_shim_backend());
  const char *msg = mori_shim_message();
  /* shim backend hip not available: found HIP 5.2.21153 (FILE,
   * hipRuntimeGetVersion 50221153); mori-symm needs HIP >= 6.2 (ROCm 6.2) */
  snprintf(prefix, sizeof prefix, "shim backend hip not available: found HIP %d.%d.%d (",
           HIP_VERSION_MAJOR, HIP_VERSION_MINOR, HIP_VERSION_PATCH);
  snprintf(want_tail, sizeof want_tail,
           ", hipRuntimeGetVersion %d); mori-symm needs HIP >= 6.2 (ROCm 6.2)", HIP_VERSION);
  size_t plen = strlen(prefix), tlen = strlen(want_tail), mlen = strlen(msg);
  if (strncmp(msg, prefix, plen) != 0 || mlen < plen + tlen ||
      strcmp(msg + mlen - tlen, want_tail) != 0)
    fail_msg("unexpected message: %s\nexpected: %s<file>%s", msg, prefix, want_tail);
  snprintf(named, sizeof named, "%.*s", (int)(mlen - plen - tlen), msg + plen);
  char named_real[PATH_MAX];
  if (realpath(named, named_real) == NULL || strcmp(named_real, expected) != 0)
    fail_msg("the message names %s; expected %s", named, expected);
  check_mapped(expected);
}

/* The stand-in (a 7.1 runtime over the sim) preloaded while the real 5.2.3
 * is on the default path: the loaded one is bound, and it works. */
static void preloaded_runtime_is_bound_and_no_other(void **state) {
  char expected[PATH_MAX];
  real_path_of("MORI_TEST_EXPECT_HIP", expected);
  if (mori_shim_select("hip") != 0) fail_msg("select hip: %s", mori_shim_message());
  int count = 0;
  assert_int_equal(mori_hipGetDeviceCount(&count), hipSuccess);
  assert_true(count > 0);
  check_mapped(expected);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(real_hip_5_2_is_refused_in_one_message_naming_it),
      cmocka_unit_test(preloaded_runtime_is_bound_and_no_other),
  };
  return mori_run_tests(argc, argv, tests);
}
