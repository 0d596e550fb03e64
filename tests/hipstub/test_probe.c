/*
 * test_probe.c - the handle-type probe's raw outcomes through the hip
 * backend, for each sim arch profile (MORI_SIM_ARCH, passed through the
 * stand-in runtime to its sim): fabric create and export succeed or fail
 * with the HIP error, named by call, and a fabric blob imports elsewhere.
 */
#include "hipstub_test.h"

#define PATTERN_BYTES 4096

/* The seed's capability table, as the sim profiles reproduce it. */
static const struct expectation {
  const char *arch;
  hipError_t fabric_create;
  hipError_t fabric_export; /* only where create succeeds */
  int multiprocessors;
} expectations[] = {
    {"gfx942", hipErrorNotSupported, hipErrorNotSupported, 80},
    {"gfx950", hipErrorNotSupported, hipErrorNotSupported, 256},
    {"gfx1250", hipSuccess, hipSuccess, 256},
    {"gfx1250-rocm7.1", hipSuccess, hipErrorNotSupported, 256},
};

static const struct expectation *expected(void) {
  const char *arch = getenv("MORI_SIM_ARCH");
  for (size_t i = 0; arch != NULL && i < sizeof expectations / sizeof expectations[0]; i++)
    if (strcmp(arch, expectations[i].arch) == 0) return &expectations[i];
  fail_msg("MORI_SIM_ARCH=%s has no expectation row", arch ? arch : "(unset)");
  return NULL;
}

static void fabric_create_and_export_follow_the_arch_profile(void **state) {
  const struct expectation *x = expected();
  hipMemAllocationProp prop = hipstub_prop(hipMemHandleTypeFabric, 0);
  hipMemGenericAllocationHandle_t h = NULL;
  hipMemFabricHandle_t blob;
  size_t gran = hipstub_granularity(hipMemHandleTypeFabric);

  hipError_t e = mori_hipMemCreate(&h, gran, &prop, 0);
  assert_int_equal(e, x->fabric_create);
  if (e != hipSuccess) {
    assert_string_equal(mori_shim_message(), "hipMemCreate: hipErrorNotSupported (801)");
  } else {
    memset(&blob, 0, sizeof blob);
    e = mori_hipMemExportToShareableHandle(&blob, h, hipMemHandleTypeFabric, 0);
    assert_int_equal(e, x->fabric_export);
    if (e != hipSuccess)
      assert_string_equal(mori_shim_message(),
                          "hipMemExportToShareableHandle: hipErrorNotSupported (801)");
    assert_int_equal(mori_hipMemRelease(h), hipSuccess);
  }
  /* The probe clears the sticky error whatever happened. */
  (void)mori_hipGetLastError();
  assert_int_equal(mori_hipGetLastError(), hipSuccess);
  assert_int_equal(mori_shim_registry_total(), 0);
}

static void fabric_blob_imports_in_another_process_where_export_works(void **state) {
  const struct expectation *x = expected();
  if (x->fabric_create != hipSuccess || x->fabric_export != hipSuccess) skip();
  hipstub_share_fabric_window(PATTERN_BYTES, 3);
}

/* Read from hipDeviceProp_tR0600, not from a shifting attribute number. */
static void multiprocessor_count_follows_the_arch_profile(void **state) {
  int value = -1;
  assert_int_equal(mori_hipDeviceGetAttribute(&value, moriDeviceAttributeMultiprocessorCount, 0),
                   hipSuccess);
  assert_int_equal(value, expected()->multiprocessors);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fabric_create_and_export_follow_the_arch_profile),
      cmocka_unit_test(fabric_blob_imports_in_another_process_where_export_works),
      cmocka_unit_test(multiprocessor_count_follows_the_arch_profile),
  };
  return mori_run_tests(argc, argv, tests);
}
