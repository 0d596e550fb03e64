/*
 * test_sim_faults.c - memory the contract says is untouchable really faults
 * in the sim, as it would on a GPU: each probe runs in a forked child and
 * the test checks how the child ended.
 */
#include "sim_test.h"

static void read_byte(void *p) { (void)*(volatile unsigned char *)p; }
static void write_byte(void *p) { *(volatile unsigned char *)p = 1; }

static void read_write_mapping_is_usable(void **state) {
  struct sim_window w;
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_int_equal(signal_of_child(write_byte, w.va + 5), 0); /* the probe itself works */
  assert_int_equal(signal_of_child(read_byte, w.va + GRAN - 1), 0);
  window_close(&w);
}

static void reserved_but_unmapped_memory_faults(void **state) {
  void *va = NULL;
  assert_hip_ok(mori_hipMemAddressReserve(&va, GRAN, 0, NULL, 0));
  assert_int_equal(signal_of_child(read_byte, va), SIGSEGV);
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
}

static void mapped_memory_faults_until_set_access(void **state) {
  hipMemAllocationProp prop = sim_prop(hipMemHandleTypePosixFileDescriptor);
  hipMemAccessDesc rw = sim_access(hipMemAccessFlagsProtReadWrite);
  hipMemGenericAllocationHandle_t h = NULL;
  unsigned char *va = NULL;
  assert_hip_ok(mori_hipMemCreate(&h, GRAN, &prop, 0));
  assert_hip_ok(mori_hipMemAddressReserve((void **)&va, GRAN, 0, NULL, 0));
  assert_hip_ok(mori_hipMemMap(va, GRAN, 0, h, 0));
  assert_int_equal(signal_of_child(read_byte, va), SIGSEGV);
  assert_hip_ok(mori_hipMemSetAccess(va, GRAN, &rw, 1));
  assert_int_equal(signal_of_child(write_byte, va), 0);
  assert_hip_ok(mori_hipMemUnmap(va, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
  assert_hip_ok(mori_hipMemRelease(h));
}

static void read_only_access_faults_on_write(void **state) {
  struct sim_window w;
  hipMemAccessDesc ro = sim_access(hipMemAccessFlagsProtRead);
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(mori_hipMemSetAccess(w.va, GRAN, &ro, 1));
  assert_int_equal(signal_of_child(read_byte, w.va), 0);
  assert_int_equal(signal_of_child(write_byte, w.va), SIGSEGV);
  window_close(&w);
}

static void prot_none_access_takes_access_away(void **state) {
  struct sim_window w;
  hipMemAccessDesc none = sim_access(hipMemAccessFlagsProtNone);
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(mori_hipMemSetAccess(w.va, GRAN, &none, 1));
  assert_int_equal(signal_of_child(read_byte, w.va), SIGSEGV);
  window_close(&w);
}

static void unmapped_memory_faults_again_after_unmap(void **state) {
  struct sim_window w;
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(mori_hipMemUnmap(w.va, GRAN));
  assert_int_equal(signal_of_child(read_byte, w.va), SIGSEGV);
  assert_hip_ok(mori_hipMemAddressFree(w.va, GRAN));
  assert_hip_ok(mori_hipMemRelease(w.handle));
}

static void device_memory_faults_after_hip_free(void **state) {
  void *p = NULL;
  assert_hip_ok(mori_hipMalloc(&p, 4096));
  assert_int_equal(signal_of_child(write_byte, p), 0);
  assert_hip_ok(mori_hipFree(p));
  assert_int_equal(signal_of_child(write_byte, p), SIGSEGV);
}

int main(void) {
  sim_start("gfx950", NULL, NULL);
#define T(name) cmocka_unit_test_teardown(name, expect_no_leaks)
  const struct CMUnitTest tests[] = {
      T(read_write_mapping_is_usable),
      T(reserved_but_unmapped_memory_faults),
      T(mapped_memory_faults_until_set_access),
      T(read_only_access_faults_on_write),
      T(prot_none_access_takes_access_away),
      T(unmapped_memory_faults_again_after_unmap),
      T(device_memory_faults_after_hip_free),
  };
  return cmocka_run_group_tests_name("sim_faults", tests, NULL, NULL);
}
