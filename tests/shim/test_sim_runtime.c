/*
 * test_sim_runtime.c - the sim's calls outside the VMM set: devices and
 * attributes, hipMalloc/hipFree, copies, the last error, init from the
 * environment, a cross-thread stream wait, and concurrent use of the tables.
 */
#include "sim_test.h"

#include <pthread.h>

/* ---- init and devices ---- */

static void default_profile_is_gfx950_with_eight_devices(void **state) {
  int version = 0, count = 0, hint = -1;
  assert_hip_ok(mori_hipRuntimeGetVersion(&version));
  assert_int_equal(version, 70000000);
  assert_int_equal(mori_shim_runtime_version(), 70000000);
  assert_hip_ok(mori_hipGetDeviceCount(&count));
  assert_int_equal(count, 8);
  assert_hip_ok(mori_hipDeviceGetAttribute(&hint, moriDeviceAttributeFabricHandleSupported, 0));
  assert_int_equal(hint, 0);
  assert_string_equal(mori_shim_backend(), "sim");
}

static void set_device_is_range_checked(void **state) {
  int d = -1;
  assert_hip_ok(mori_hipSetDevice(7));
  assert_hip_ok(mori_hipGetDevice(&d));
  assert_int_equal(d, 7);
  assert_fails_with(mori_hipSetDevice(8), hipErrorInvalidDevice, "hipSetDevice");
  assert_fails_with(mori_hipSetDevice(-1), hipErrorInvalidDevice, "device -1 of 8");
  assert_hip_ok(mori_hipGetDevice(&d));
  assert_int_equal(d, 7); /* a failed set leaves the device alone */
  assert_hip_ok(mori_hipSetDevice(0));
}

static void *set_device_three(void *out) {
  if (mori_hipSetDevice(3) != hipSuccess || mori_hipGetDevice(out) != hipSuccess) *(int *)out = -1;
  return NULL;
}

static void current_device_is_per_thread(void **state) {
  pthread_t t;
  int theirs = -1, mine = -1;
  assert_hip_ok(mori_hipSetDevice(1));
  assert_int_equal(pthread_create(&t, NULL, set_device_three, &theirs), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_hip_ok(mori_hipGetDevice(&mine));
  assert_int_equal(theirs, 3);
  assert_int_equal(mine, 1);
  assert_hip_ok(mori_hipSetDevice(0));
}

static void attributes_report_vmm_pci_bus_and_compute_units(void **state) {
  int v = -1;
  assert_hip_ok(
      mori_hipDeviceGetAttribute(&v, moriDeviceAttributeVirtualMemoryManagementSupported, 5));
  assert_int_equal(v, 1);
  assert_hip_ok(mori_hipDeviceGetAttribute(&v, moriDeviceAttributePciBusId, 5));
  assert_int_equal(v, 5);
  assert_hip_ok(mori_hipDeviceGetAttribute(&v, moriDeviceAttributeMultiprocessorCount, 0));
  assert_int_equal(v, 256);
  assert_fails_with(mori_hipDeviceGetAttribute(&v, moriDeviceAttributePciBusId, 8),
                    hipErrorInvalidDevice, "hipDeviceGetAttribute");
  assert_fails_with(mori_hipDeviceGetAttribute(&v, (hipDeviceAttribute_t)77, 0),
                    hipErrorInvalidValue, "contract: unknown device attribute");
}

static void granularity_is_two_mib_minimum_and_recommended(void **state) {
  hipMemAllocationProp prop = sim_prop(hipMemHandleTypePosixFileDescriptor);
  size_t g = 0;
  assert_hip_ok(mori_hipMemGetAllocationGranularity(&g, &prop, hipMemAllocationGranularityMinimum));
  assert_int_equal(g, GRAN);
  g = 0;
  assert_hip_ok(
      mori_hipMemGetAllocationGranularity(&g, &prop, hipMemAllocationGranularityRecommended));
  assert_int_equal(g, GRAN);
  assert_fails_with(
      mori_hipMemGetAllocationGranularity(&g, &prop, (hipMemAllocationGranularity_flags)5),
      hipErrorInvalidValue, "contract: option must be Minimum or Recommended");
}

static void get_last_error_returns_the_last_result_once(void **state) {
  int d;
  (void)mori_hipGetLastError(); /* whatever an earlier test left */
  assert_int_equal(mori_hipGetLastError(), hipSuccess);
  assert_int_equal(mori_hipSetDevice(99), hipErrorInvalidDevice);
  assert_int_equal(mori_hipGetLastError(), hipErrorInvalidDevice);
  assert_int_equal(mori_hipGetLastError(), hipSuccess);
  assert_int_equal(mori_hipSetDevice(99), hipErrorInvalidDevice);
  assert_hip_ok(mori_hipGetDevice(&d)); /* as HIP: a later success overwrites it */
  assert_int_equal(mori_hipGetLastError(), hipSuccess);
}

/* "--select": the child of the init tests; prints what select said. */
static int select_and_report(void) {
  int rc = mori_shim_select("sim"), devices = 0, version = 0;
  if (rc != 0) {
    printf("select=%d message=%s\n", rc, mori_shim_message());
    return 3;
  }
  mori_hipGetDeviceCount(&devices);
  mori_hipRuntimeGetVersion(&version);
  printf("select=0 devices=%d version=%d\n", devices, version);
  return 0;
}

static void init_rejects_an_unknown_profile_listing_the_valid_ones(void **state) {
  char out[1024];
  char *env[] = {"MORI_SIM_ARCH=gfx9999", NULL};
  char *args[] = {"--select", NULL};
  assert_int_equal(run_self(env, args, out, sizeof out), 3);
  assert_contains(out, "MORI_SIM_ARCH=gfx9999 is not a sim profile");
  assert_contains(out, "valid: gfx942, gfx950, gfx1250, gfx1250-rocm7.1");
}

static void init_rejects_an_unknown_quirk_naming_it(void **state) {
  char out[1024];
  char *env[] = {"MORI_SIM_QUIRKS=retain-no-ref,teleport", NULL};
  char *args[] = {"--select", NULL};
  assert_int_equal(run_self(env, args, out, sizeof out), 3);
  assert_contains(out, "unknown quirk 'teleport'");
  assert_contains(out, "memset-fabric");
}

static void init_rejects_a_device_count_that_is_not_a_number(void **state) {
  char out[1024];
  char *env[] = {"MORI_SIM_DEVICES=eight", NULL};
  char *args[] = {"--select", NULL};
  assert_int_equal(run_self(env, args, out, sizeof out), 3);
  assert_contains(out, "MORI_SIM_DEVICES=eight");
}

static void init_takes_devices_profile_and_quirks_from_the_environment(void **state) {
  char out[1024];
  char *env[] = {"MORI_SIM_DEVICES=2", "MORI_SIM_ARCH=gfx1250", "MORI_SIM_QUIRKS=all", NULL};
  char *args[] = {"--select", NULL};
  assert_int_equal(run_self(env, args, out, sizeof out), 0);
  assert_contains(out, "select=0 devices=2 version=71400000");
}

/* ---- hipMalloc / copies ---- */

static void malloc_gives_memory_that_copies_reach_and_free_returns(void **state) {
  unsigned char *p = NULL;
  assert_hip_ok(mori_hipMalloc((void **)&p, 10000));
  assert_non_null(p);
  dev_set_byte(p, 1);
  dev_set_byte(p + 9999, 2);
  assert_int_equal(dev_byte(p), 1);
  assert_int_equal(dev_byte(p + 9999), 2);
  assert_hip_ok(mori_hipFree(p));
  assert_hip_ok(mori_hipFree(NULL));
}

static void free_rejects_pointers_not_from_malloc(void **state) {
  int local;
  void *p = NULL, *va = NULL;
  assert_fails_with(mori_hipFree(&local), hipErrorInvalidValue,
                    "hipFree: contract: pointer was not returned by hipMalloc");
  assert_hip_ok(mori_hipMalloc(&p, 64));
  assert_hip_ok(mori_hipFree(p));
  assert_fails_with(mori_hipFree(p), hipErrorInvalidValue, "was already freed");
  assert_hip_ok(mori_hipMemAddressReserve(&va, GRAN, 0, NULL, 0));
  assert_fails_with(mori_hipFree(va), hipErrorInvalidValue, "is VMM address space");
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
}

static void memcpy_moves_data_between_host_malloc_and_mapped_memory(void **state) {
  struct sim_window w;
  unsigned char host[256], back[256], *dev = NULL;
  for (int i = 0; i < 256; i++) host[i] = (unsigned char)(i ^ 0x5c);
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(mori_hipMalloc((void **)&dev, sizeof host));
  assert_hip_ok(mori_hipMemcpy(dev, host, sizeof host, hipMemcpyHostToDevice));
  assert_hip_ok(mori_hipMemcpy(w.va + GRAN - 256, dev, sizeof host, hipMemcpyDeviceToDevice));
  assert_hip_ok(mori_hipMemcpy(back, w.va + GRAN - 256, sizeof back, hipMemcpyDefault));
  assert_memory_equal(back, host, sizeof host);
  assert_hip_ok(mori_hipFree(dev));
  window_close(&w);
}

/* A copy over two mappings side by side in one reservation reaches both
 * allocations; one that runs into a granule without write access is
 * refused and moves nothing. */
static void memcpy_across_two_mappings_reaches_both_allocations(void **state) {
  hipMemAllocationProp prop = sim_prop(hipMemHandleTypePosixFileDescriptor);
  hipMemAccessDesc rw = sim_access(hipMemAccessFlagsProtReadWrite);
  hipMemAccessDesc ro = sim_access(hipMemAccessFlagsProtRead);
  hipMemGenericAllocationHandle_t a = NULL, b = NULL;
  unsigned char *va = NULL, host[4096], back[4096];
  for (size_t i = 0; i < sizeof host; i++) host[i] = (unsigned char)(i * 13 + 1);
  assert_hip_ok(mori_hipMemCreate(&a, GRAN, &prop, 0));
  assert_hip_ok(mori_hipMemCreate(&b, GRAN, &prop, 0));
  assert_hip_ok(mori_hipMemAddressReserve((void **)&va, 2 * GRAN, 0, NULL, 0));
  assert_hip_ok(mori_hipMemMap(va, GRAN, 0, a, 0));
  assert_hip_ok(mori_hipMemMap(va + GRAN, GRAN, 0, b, 0));
  assert_hip_ok(mori_hipMemSetAccess(va, 2 * GRAN, &rw, 1));
  unsigned char *across = va + GRAN - sizeof host / 2;
  dev_write(across, host, sizeof host);
  dev_read(back, across, sizeof back);
  assert_memory_equal(back, host, sizeof host);
  struct sim_window wb; /* b mapped again on its own: its start came from the copy */
  window_map(&wb, b, GRAN);
  dev_read(back, wb.va, sizeof host / 2);
  assert_memory_equal(back, host + sizeof host / 2, sizeof host / 2);
  assert_hip_ok(mori_hipMemUnmap(wb.va, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(wb.va, GRAN));
  assert_hip_ok(mori_hipMemSetAccess(va + GRAN, GRAN, &ro, 1));
  memset(back, 0, sizeof back);
  assert_fails_with(mori_hipMemcpy(across, back, sizeof back, hipMemcpyHostToDevice),
                    hipErrorInvalidValue, "needs read-write access");
  dev_read(back, across, sizeof back);
  assert_memory_equal(back, host, sizeof host); /* the refused copy wrote nothing */
  assert_hip_ok(mori_hipMemUnmap(va, GRAN));
  assert_hip_ok(mori_hipMemUnmap(va + GRAN, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(va, 2 * GRAN));
  assert_hip_ok(mori_hipMemRelease(a));
  assert_hip_ok(mori_hipMemRelease(b));
}

static void memcpy_rejects_null_pointers_and_unknown_kinds(void **state) {
  char a[8] = {0};
  assert_fails_with(mori_hipMemcpy(NULL, a, 8, hipMemcpyHostToHost), hipErrorInvalidValue,
                    "hipMemcpy: contract: a required argument is NULL");
  assert_fails_with(mori_hipMemcpy(a, NULL, 8, hipMemcpyHostToHost), hipErrorInvalidValue,
                    "a required argument is NULL");
  assert_fails_with(mori_hipMemcpy(a, a + 4, 4, (hipMemcpyKind)9), hipErrorInvalidValue,
                    "contract: copy kind must be a hipMemcpyKind");
}

static void memcpy_into_reserved_but_unmapped_memory_fails_instead_of_faulting(void **state) {
  char src[64] = {1};
  void *va = NULL;
  assert_hip_ok(mori_hipMemAddressReserve(&va, GRAN, 0, NULL, 0));
  assert_fails_with(mori_hipMemcpy(va, src, sizeof src, hipMemcpyHostToDevice),
                    hipErrorInvalidValue, "hipMemcpy: contract: address is not mapped");
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
}

static void memcpy_needs_the_access_set_on_the_mapping(void **state) {
  hipMemAllocationProp prop = sim_prop(hipMemHandleTypePosixFileDescriptor);
  hipMemAccessDesc ro = sim_access(hipMemAccessFlagsProtRead);
  hipMemGenericAllocationHandle_t h = NULL;
  unsigned char *va = NULL, buf[16] = {0};
  assert_hip_ok(mori_hipMemCreate(&h, GRAN, &prop, 0));
  assert_hip_ok(mori_hipMemAddressReserve((void **)&va, GRAN, 0, NULL, 0));
  assert_hip_ok(mori_hipMemMap(va, GRAN, 0, h, 0));
  assert_fails_with(mori_hipMemcpy(buf, va, sizeof buf, hipMemcpyDeviceToHost),
                    hipErrorInvalidValue, "contract: mapped memory lacks the access this needs");
  assert_hip_ok(mori_hipMemSetAccess(va, GRAN, &ro, 1));
  assert_hip_ok(mori_hipMemcpy(buf, va, sizeof buf, hipMemcpyDeviceToHost));
  assert_fails_with(mori_hipMemcpy(va, buf, sizeof buf, hipMemcpyHostToDevice),
                    hipErrorInvalidValue, "needs read-write access");
  assert_hip_ok(mori_hipMemUnmap(va, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
  assert_hip_ok(mori_hipMemRelease(h));
}

static void memset_fills_mapped_memory_and_refuses_unmapped(void **state) {
  struct sim_window w;
  window_open(&w, 2 * GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(mori_hipMemset(w.va + 10, 0xee, GRAN));
  assert_int_equal(dev_byte(w.va + 9), 0);
  assert_int_equal(dev_byte(w.va + 10), 0xee);
  assert_int_equal(dev_byte(w.va + GRAN + 9), 0xee);
  assert_int_equal(dev_byte(w.va + GRAN + 10), 0);
  assert_hip_ok(mori_hipMemUnmap(w.va, w.size));
  assert_fails_with(mori_hipMemset(w.va, 0, 16), hipErrorInvalidValue,
                    "hipMemset: contract: address is not mapped");
  assert_hip_ok(mori_hipMemAddressFree(w.va, w.size));
  assert_hip_ok(mori_hipMemRelease(w.handle));
}

/* Zeroing whole pages punches a hole in the memfd: the bytes must still read
 * back as zeros, through this mapping and through a second one, while the
 * partial pages at either end are written. */
static void memset_zero_clears_dirty_pages_seen_through_every_mapping(void **state) {
  struct sim_window w;
  window_open(&w, 2 * GRAN, hipMemHandleTypePosixFileDescriptor);
  dev_fill(w.va, 0x5a, w.size);
  assert_hip_ok(mori_hipMemset(w.va + 100, 0, w.size - 200));
  void *second = NULL;
  assert_hip_ok(mori_hipMemAddressReserve(&second, w.size, 0, NULL, 0));
  assert_hip_ok(mori_hipMemMap(second, w.size, 0, w.handle, 0));
  hipMemAccessDesc rw = {{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtReadWrite};
  assert_hip_ok(mori_hipMemSetAccess(second, w.size, &rw, 1));
  const unsigned char *views[] = {w.va, second};
  unsigned char *back = malloc(w.size);
  assert_non_null(back);
  for (int v = 0; v < 2; v++) {
    dev_read(back, views[v], w.size);
    for (size_t i = 0; i < w.size; i += 97)
      assert_int_equal(back[i], i < 100 || i >= w.size - 100 ? 0x5a : 0);
  }
  assert_int_equal(back[99], 0x5a);
  assert_int_equal(back[100], 0);
  assert_int_equal(back[w.size - 101], 0);
  assert_int_equal(back[w.size - 100], 0x5a);
  free(back);
  assert_hip_ok(mori_hipMemUnmap(second, w.size));
  assert_hip_ok(mori_hipMemAddressFree(second, w.size));
  assert_hip_ok(mori_hipMemUnmap(w.va, w.size));
  assert_hip_ok(mori_hipMemAddressFree(w.va, w.size));
  assert_hip_ok(mori_hipMemRelease(w.handle));
}

/* ---- a stream wait released by another thread ---- */

struct handoff {
  uint32_t *flags; /* [0]: main -> worker, [1]: worker -> main */
  hipError_t worker;
};

static void *echo_flag(void *arg) {
  struct handoff *h = arg;
  h->worker = mori_hipStreamWaitValue32(NULL, &h->flags[0], 1, hipStreamWaitValueEq, ~0u);
  if (h->worker == hipSuccess) h->worker = mori_hipStreamWriteValue32(NULL, &h->flags[1], 2, 0);
  return NULL;
}

static void stream_wait_returns_once_another_thread_writes(void **state) {
  struct sim_window w;
  pthread_t t;
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  struct handoff h = {(uint32_t *)w.va, hipErrorUnknown};
  assert_int_equal(pthread_create(&t, NULL, echo_flag, &h), 0);
  assert_hip_ok(mori_hipStreamWriteValue32(NULL, &h.flags[0], 1, 0));
  assert_hip_ok(mori_hipStreamWaitValue32(NULL, &h.flags[1], 2, hipStreamWaitValueGte, ~0u));
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(h.worker, hipSuccess);
  window_close(&w);
}

/* ---- the tables under concurrent use ---- */

static void *churn(void *arg) {
  hipError_t *result = arg;
  for (int i = 0; i < 40 && *result == hipSuccess; i++) {
    hipMemAllocationProp prop = sim_prop(hipMemHandleTypePosixFileDescriptor);
    hipMemAccessDesc rw = sim_access(hipMemAccessFlagsProtReadWrite);
    hipMemGenericAllocationHandle_t h = NULL;
    unsigned char *va = NULL;
    hipError_t e = mori_hipMemCreate(&h, GRAN, &prop, 0);
    if (e == hipSuccess) e = mori_hipMemAddressReserve((void **)&va, GRAN, 0, NULL, 0);
    if (e == hipSuccess) e = mori_hipMemMap(va, GRAN, 0, h, 0);
    if (e == hipSuccess) e = mori_hipMemSetAccess(va, GRAN, &rw, 1);
    if (e == hipSuccess) e = mori_hipMemset(va + i, i, 1);
    if (e == hipSuccess) e = mori_hipMemUnmap(va, GRAN);
    if (e == hipSuccess) e = mori_hipMemAddressFree(va, GRAN);
    if (e == hipSuccess) e = mori_hipMemRelease(h);
    *result = e;
  }
  return NULL;
}

static void concurrent_lifecycles_on_two_threads_leave_nothing_behind(void **state) {
  pthread_t t[2];
  hipError_t r[2] = {hipSuccess, hipSuccess};
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, churn, &r[i]), 0);
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
  assert_int_equal(r[0], hipSuccess);
  assert_int_equal(r[1], hipSuccess);
}

/* ---- what each backend finds, without bringing it up ---- */

/* mori_shim_runtime_find: the sim is always there; a name that is no
 * backend is refused; a MORI_SYMM_HIP_LIB or MORI_SYMM_CUDA_LIB that does
 * not load is a refusal naming it, and auto names each; where ctest points
 * MORI_SYMM_HIP_LIB at the HIP stand-in (7.1.0), hip finds it and says
 * its version.  The active backend stays the sim. */
static void runtime_find_says_found_refused_or_absent(void **state) {
  char why[1100], *hip = getenv("MORI_SYMM_HIP_LIB"), *cuda = getenv("MORI_SYMM_CUDA_LIB");
  hip = hip ? strdup(hip) : NULL;
  cuda = cuda ? strdup(cuda) : NULL;
  if (hip != NULL && *hip != '\0') {
    assert_int_equal(mori_shim_runtime_find("hip", why, sizeof why), 1);
    assert_contains(why, "hip: HIP 7.1.0 (");
    assert_contains(why, "libamdhip64_standin.so)");
  }
  assert_int_equal(mori_shim_runtime_find("sim", why, sizeof why), 1);
  assert_string_equal(why, "sim: the emulator");
  assert_int_equal(mori_shim_runtime_find("nosuch", why, sizeof why), -1);
  assert_contains(why, "unknown shim backend 'nosuch'");
  setenv("MORI_SYMM_HIP_LIB", "/nonexistent/libamdhip64.so.7", 1);
  setenv("MORI_SYMM_CUDA_LIB", "/nonexistent/libcuda.so.1", 1);
  assert_int_equal(mori_shim_runtime_find("hip", why, sizeof why), -1);
  assert_contains(why, "hip: MORI_SYMM_HIP_LIB=/nonexistent/libamdhip64.so.7: ");
  assert_int_equal(mori_shim_runtime_find("auto", why, sizeof why), -1);
  assert_contains(why, "hip: MORI_SYMM_HIP_LIB=/nonexistent/libamdhip64.so.7: ");
  assert_contains(why, "; cuda: MORI_SYMM_CUDA_LIB=/nonexistent/libcuda.so.1: ");
  if (hip) setenv("MORI_SYMM_HIP_LIB", hip, 1); else unsetenv("MORI_SYMM_HIP_LIB");
  if (cuda) setenv("MORI_SYMM_CUDA_LIB", cuda, 1); else unsetenv("MORI_SYMM_CUDA_LIB");
  free(hip);
  free(cuda);
  assert_string_equal(mori_shim_backend(), "sim");
}

int main(int argc, char **argv) {
  self_exe = argv[0];
  if (argc > 1 && strcmp(argv[1], "--select") == 0) return select_and_report();
  sim_start(NULL, NULL, NULL); /* the defaults: gfx950, no quirks, 30 s waits */
#define T(name) cmocka_unit_test_teardown(name, expect_no_leaks)
  const struct CMUnitTest tests[] = {
      T(default_profile_is_gfx950_with_eight_devices),
      T(set_device_is_range_checked),
      T(current_device_is_per_thread),
      T(attributes_report_vmm_pci_bus_and_compute_units),
      T(granularity_is_two_mib_minimum_and_recommended),
      T(get_last_error_returns_the_last_result_once),
      T(init_rejects_an_unknown_profile_listing_the_valid_ones),
      T(init_rejects_an_unknown_quirk_naming_it),
      T(init_rejects_a_device_count_that_is_not_a_number),
      T(init_takes_devices_profile_and_quirks_from_the_environment),
      T(malloc_gives_memory_that_copies_reach_and_free_returns),
      T(free_rejects_pointers_not_from_malloc),
      T(memcpy_moves_data_between_host_malloc_and_mapped_memory),
      T(memcpy_across_two_mappings_reaches_both_allocations),
      T(memcpy_rejects_null_pointers_and_unknown_kinds),
      T(memcpy_into_reserved_but_unmapped_memory_fails_instead_of_faulting),
      T(memcpy_needs_the_access_set_on_the_mapping),
      T(memset_fills_mapped_memory_and_refuses_unmapped),
      T(memset_zero_clears_dirty_pages_seen_through_every_mapping),
      T(stream_wait_returns_once_another_thread_writes),
      T(concurrent_lifecycles_on_two_threads_leave_nothing_behind),
      T(runtime_find_says_found_refused_or_absent),
  };
  return cmocka_run_group_tests_name("sim_runtime", tests, NULL, NULL);
}
