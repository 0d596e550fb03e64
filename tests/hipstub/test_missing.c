/*
 * test_missing.c - bringing up a real-runtime backend from a library that
 * is not one fails once, with one message naming every missing symbol, and
 * leaves no backend behind (so each case here starts from nothing).
 */
#include "hipstub_test.h"

#define HIP_SYMBOLS 45  /* entry points the hip backend resolves */
#define CUDA_SYMBOLS 45 /* entry points the cuda backend resolves */

static const char *select_with(const char *backend, const char *env, const char *lib) {
  assert_int_equal(setenv(env, lib, 1), 0);
  assert_int_equal(mori_shim_select(backend), -1);
  return mori_shim_message();
}

static void libc_as_hip_runtime_lists_every_missing_symbol(void **state) {
  const char *msg = select_with("hip", "MORI_SYMM_HIP_LIB", "libc.so.6");
  assert_contains(msg, "shim backend hip not available: libc.so.6: missing symbols hipInit, "
                       "hipRuntimeGetVersion, hipGetErrorName, ");
  char count[64];
  snprintf(count, sizeof count, "(%d of %d missing)", HIP_SYMBOLS, HIP_SYMBOLS);
  assert_contains(msg, count);
}

static void partial_hip_runtime_lists_exactly_the_missing_symbols(void **state) {
  const char *partial = getenv("MORI_TEST_HIP_PARTIAL");
  assert_non_null(partial);
  const char *msg = select_with("hip", "MORI_SYMM_HIP_LIB", partial);
  char want[1024];
  snprintf(want, sizeof want,
           "%s: missing symbols hipMemExportToShareableHandle, hipMemImportFromShareableHandle, "
           "hipStreamWaitValue32 (3 of %d missing)",
           partial, HIP_SYMBOLS);
  assert_contains(msg, want);
  assert_not_contains(msg, "hipMemCreate");
}

static void unloadable_hip_runtime_path_is_named(void **state) {
  const char *msg = select_with("hip", "MORI_SYMM_HIP_LIB", "/nonexistent/libamdhip64.so");
  assert_contains(msg, "MORI_SYMM_HIP_LIB=/nonexistent/libamdhip64.so: ");
}

/* With no backend up, every call fails with the bring-up's reason. */
static void calls_after_a_failed_bring_up_fail_with_its_reason(void **state) {
  hipMemGenericAllocationHandle_t h = NULL;
  hipMemAllocationProp prop = hipstub_prop(hipMemHandleTypePosixFileDescriptor, 0);
  assert_int_equal(setenv("MORI_SYMM_HIP_LIB", "libc.so.6", 1), 0);
  assert_int_equal(setenv("MORI_SYMM_SHIM", "hip", 1), 0);
  assert_int_equal(mori_hipMemCreate(&h, 2 << 20, &prop, 0), hipErrorRuntimeOther);
  assert_contains(mori_shim_message(), "hipMemCreate: shim backend hip not available: ");
  assert_contains(mori_shim_message(), "missing symbols hipInit");
  assert_null(mori_shim_backend());
}

static void libc_as_cuda_driver_lists_every_missing_symbol(void **state) {
  const char *msg = select_with("cuda", "MORI_SYMM_CUDA_LIB", "libc.so.6");
  assert_contains(msg, "shim backend cuda not available: libc.so.6: missing symbols cuInit, "
                       "cuDriverGetVersion, cuGetErrorName, ");
  char count[64];
  snprintf(count, sizeof count, "(%d of %d missing)", CUDA_SYMBOLS, CUDA_SYMBOLS);
  assert_contains(msg, count);
}

/* The toolkit's driver stub exports what a real libcuda.so.1 does but
 * fails cuInit: every versioned name the backend asks for resolves. */
static void cuda_driver_stub_resolves_every_symbol_and_fails_at_cuinit(void **state) {
  const char *stub = getenv("MORI_TEST_CUDA_STUB");
  if (stub == NULL) skip();
  const char *msg = select_with("cuda", "MORI_SYMM_CUDA_LIB", stub);
  assert_not_contains(msg, "missing");
  assert_contains(msg, "shim backend cuda not available: cuInit: ");
  assert_contains(msg, "(34)"); /* CUDA_ERROR_STUB_LIBRARY */
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(libc_as_hip_runtime_lists_every_missing_symbol),
      cmocka_unit_test(partial_hip_runtime_lists_exactly_the_missing_symbols),
      cmocka_unit_test(unloadable_hip_runtime_path_is_named),
      cmocka_unit_test(calls_after_a_failed_bring_up_fail_with_its_reason),
      cmocka_unit_test(libc_as_cuda_driver_lists_every_missing_symbol),
      cmocka_unit_test(cuda_driver_stub_resolves_every_symbol_and_fails_at_cuinit),
  };
  return mori_run_tests(argc, argv, tests);
}
