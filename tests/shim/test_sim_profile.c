/*
 * test_sim_profile.c <arch> - one MORI_SIM_ARCH profile against the seed's
 * capability table: whether a fabric handle can be created and exported,
 * the HIP version and the device attributes the profile reports.
 */
#include "sim_test.h"

/* The seed's table: gfx9 cannot create fabric handles; gfx1250 on ROCm 7.14
 * creates and exports them; gfx1250 on ROCm 7.1 creates but cannot export. */
static const struct expectation {
  const char *arch;
  int version;
  hipError_t fabric_create, fabric_export;
  int fabric_hint, compute_units;
} table[] = {
    {"gfx942", 60400000, hipErrorNotSupported, hipErrorNotSupported, 0, 80},
    {"gfx950", 70000000, hipErrorNotSupported, hipErrorNotSupported, 0, 256},
    {"gfx1250", 71400000, hipSuccess, hipSuccess, 1, 256},
    {"gfx1250-rocm7.1", 70100000, hipSuccess, hipErrorNotSupported, 1, 256},
};

static const struct expectation *want;

static void reports_the_profiles_hip_version(void **state) {
  int v = 0;
  assert_hip_ok(mori_hipRuntimeGetVersion(&v));
  assert_int_equal(v, want->version);
}

static void reports_the_profiles_attributes(void **state) {
  int hint = -1, cus = -1, vmm = -1;
  assert_hip_ok(mori_hipDeviceGetAttribute(&hint, moriDeviceAttributeFabricHandleSupported, 0));
  assert_hip_ok(mori_hipDeviceGetAttribute(&cus, moriDeviceAttributeMultiprocessorCount, 0));
  assert_hip_ok(
      mori_hipDeviceGetAttribute(&vmm, moriDeviceAttributeVirtualMemoryManagementSupported, 0));
  assert_int_equal(hint, want->fabric_hint);
  assert_int_equal(cus, want->compute_units);
  assert_int_equal(vmm, 1);
}

/* The core's probe: one granule created with a fabric handle type, then
 * exported; fabric is chosen only if both succeed. */
static void fabric_create_and_export_match_the_capability_table(void **state) {
  hipMemAllocationProp prop = sim_prop(hipMemHandleTypeFabric);
  hipMemGenericAllocationHandle_t h = NULL;
  hipMemFabricHandle_t blob;
  hipError_t e = mori_hipMemCreate(&h, GRAN, &prop, 0);
  assert_int_equal(e, want->fabric_create);
  if (e != hipSuccess) {
    assert_contains(mori_shim_message(), want->arch);
    assert_int_equal(mori_hipGetLastError(), hipErrorNotSupported); /* what the probe clears */
    return;
  }
  e = mori_hipMemExportToShareableHandle(&blob, h, hipMemHandleTypeFabric, 0);
  assert_int_equal(e, want->fabric_export);
  if (e != hipSuccess) assert_contains(mori_shim_message(), "cannot export");
  assert_hip_ok(mori_hipMemRelease(h));
}

static void posix_fd_handles_work_on_every_profile(void **state) {
  struct sim_window w;
  int fd = -1;
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(
      mori_hipMemExportToShareableHandle(&fd, w.handle, hipMemHandleTypePosixFileDescriptor, 0));
  window_close(&w);
  assert_int_equal(mori_close(fd), 0);
}

int main(int argc, char **argv) {
  for (size_t i = 0; argc > 1 && i < sizeof table / sizeof table[0]; i++)
    if (strcmp(argv[1], table[i].arch) == 0) want = &table[i];
  if (want == NULL) {
    fprintf(stderr, "usage: %s <arch>, an arch of the capability table\n", argv[0]);
    return 2;
  }
  sim_start(want->arch, NULL, NULL);
#define T(name) cmocka_unit_test_teardown(name, expect_no_leaks)
  const struct CMUnitTest tests[] = {
      T(reports_the_profiles_hip_version),
      T(reports_the_profiles_attributes),
      T(fabric_create_and_export_match_the_capability_table),
      T(posix_fd_handles_work_on_every_profile),
  };
  return cmocka_run_group_tests_name(want->arch, tests, NULL, NULL);
}
