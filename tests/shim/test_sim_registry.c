/*
 * test_sim_registry.c - the shim's resource registry over the sim: every
 * live resource is counted and named, a full teardown reads "0 leaks",
 * failed calls change nothing, and MORI_SHIM_REGISTRY_REPORT=1 (or its
 * first name, MORI_SHIM_LEDGER_REPORT=1) prints the report at exit.
 */
#include "sim_test.h"

static long report(char *buf, size_t len) {
  FILE *f = fmemopen(buf, len, "w");
  assert_non_null(f);
  long n = mori_shim_registry_report(f);
  fclose(f);
  return n;
}

static void registry_names_every_kind_of_live_resource(void **state) {
  struct sim_window w;
  hipMemGenericAllocationHandle_t retained = NULL;
  mori_shim_registry_counts c;
  void *dev = NULL;
  int fd = -1;
  char text[2048];
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(
      mori_hipMemExportToShareableHandle(&fd, w.handle, hipMemHandleTypePosixFileDescriptor, 0));
  assert_hip_ok(mori_hipMemRetainAllocationHandle(&retained, w.va));
  assert_hip_ok(mori_hipMalloc(&dev, 100));
  mori_shim_registry(&c);
  assert_int_equal(c.handles, 2);
  assert_int_equal(c.reservations, 1);
  assert_int_equal(c.mappings, 1);
  assert_int_equal(c.exported_fds, 1);
  assert_int_equal(c.device_allocs, 1);
  assert_int_equal(report(text, sizeof text), 6);
  assert_contains(text, "mori shim registry: 6 leaks");
  assert_contains(text, "leak: handle");
  assert_contains(text, "leak: reservation");
  assert_contains(text, "leak: mapping");
  assert_contains(text, "leak: exported fd");
  assert_contains(text, "leak: device allocation");

  assert_hip_ok(mori_hipFree(dev));
  assert_hip_ok(mori_hipMemRelease(retained));
  window_close(&w);
  assert_int_equal(mori_close(fd), 0);
  assert_int_equal(report(text, sizeof text), 0);
  assert_string_equal(text, "mori shim registry: 0 leaks\n");
}

static void imported_handles_count_until_released(void **state) {
  struct sim_window w;
  hipMemGenericAllocationHandle_t imported = NULL;
  mori_shim_registry_counts c;
  int fd = -1;
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(
      mori_hipMemExportToShareableHandle(&fd, w.handle, hipMemHandleTypePosixFileDescriptor, 0));
  assert_hip_ok(mori_hipMemImportFromShareableHandle(&imported, (void *)(intptr_t)fd,
                                                     hipMemHandleTypePosixFileDescriptor));
  mori_shim_registry(&c);
  assert_int_equal(c.handles, 2);
  assert_hip_ok(mori_hipMemRelease(imported));
  window_close(&w);
  assert_int_equal(mori_close(fd), 0);
}

static void failed_calls_leave_the_registry_unchanged(void **state) {
  hipMemAllocationProp prop = sim_prop(hipMemHandleTypePosixFileDescriptor);
  hipMemGenericAllocationHandle_t h = NULL;
  void *va = NULL;
  assert_int_equal(mori_hipMemCreate(&h, 4096, &prop, 0), hipErrorInvalidValue);
  assert_int_equal(mori_hipMemAddressReserve(&va, 4096, 0, NULL, 0), hipErrorInvalidValue);
  assert_hip_ok(mori_hipMemCreate(&h, GRAN, &prop, 0));
  assert_hip_ok(mori_hipMemAddressReserve(&va, GRAN, 0, NULL, 0));
  long before = mori_shim_registry_total();
  assert_int_equal(mori_hipMemMap(va, GRAN, 4096, h, 0), hipErrorInvalidValue);
  assert_int_equal(mori_hipMemUnmap(va, GRAN), hipErrorInvalidValue);
  assert_int_equal(mori_hipMemAddressFree(va, 2 * GRAN), hipErrorInvalidValue);
  assert_int_equal(mori_shim_registry_total(), before);
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
  assert_hip_ok(mori_hipMemRelease(h));
  assert_int_equal(mori_hipMemRelease(h), hipErrorInvalidValue);
}

/* "--leak N": a child that leaves N hipMalloc blocks behind and exits. */
static int leak_and_exit(int n) {
  void *p;
  if (mori_shim_backend() == NULL) return 2; /* brings the shim up even for n == 0 */
  for (int i = 0; i < n; i++)
    if (mori_hipMalloc(&p, 64) != hipSuccess) return 2;
  return 0;
}

/* The variable's name, and its first name, which scripts still set. */
static void report_at_exit(char *variable) {
  char out[2048];
  char *env[] = {variable, "MORI_SYMM_SHIM=sim", NULL};
  char *leak_two[] = {"--leak", "2", NULL};
  char *leak_none[] = {"--leak", "0", NULL};
  assert_int_equal(run_self(env, leak_two, out, sizeof out), 0);
  assert_contains(out, "mori shim registry: 2 leaks");
  assert_contains(out, "leak: device allocation");
  assert_int_equal(run_self(env, leak_none, out, sizeof out), 0);
  assert_contains(out, "mori shim registry: 0 leaks");
}

static void report_at_exit_lists_what_a_process_leaked(void **state) {
  report_at_exit("MORI_SHIM_REGISTRY_REPORT=1");
}

static void report_at_exit_answers_to_the_first_name_too(void **state) {
  report_at_exit("MORI_SHIM_LEDGER_REPORT=1");
}

int main(int argc, char **argv) {
  self_exe = argv[0];
  if (argc > 2 && strcmp(argv[1], "--leak") == 0) return leak_and_exit(atoi(argv[2]));
  sim_start("gfx950", NULL, NULL);
#define T(name) cmocka_unit_test_teardown(name, expect_no_leaks)
  const struct CMUnitTest tests[] = {
      T(registry_names_every_kind_of_live_resource),
      T(imported_handles_count_until_released),
      T(failed_calls_leave_the_registry_unchanged),
      T(report_at_exit_lists_what_a_process_leaked),
      T(report_at_exit_answers_to_the_first_name_too),
  };
  return cmocka_run_group_tests_name("sim_registry", tests, NULL, NULL);
}
