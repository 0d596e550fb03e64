/*
 * test_sim_faults.c - the host cannot touch device memory in the sim, as on
 * a GPU: every device address (mapped with any access or not, hipMalloc'd,
 * freed) faults on a host read or write, while the runtime's copies reach
 * what hipMemSetAccess granted.  Each probe runs in a forked child and the
 * test checks how the child ended.
 */
#include "sim_test.h"

static void read_byte(void *p) { (void)*(volatile unsigned char *)p; }
static void write_byte(void *p) { *(volatile unsigned char *)p = 1; }

static void host_memory_is_usable(void **state) {
  unsigned char host[64];
  assert_int_equal(signal_of_child(write_byte, host + 5), 0); /* the probe itself works */
  assert_int_equal(signal_of_child(read_byte, host + 63), 0);
}

static void read_write_mapping_faults_on_the_host_and_copies_reach_it(void **state) {
  struct sim_window w;
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_int_equal(signal_of_child(write_byte, w.va + 5), SIGSEGV);
  assert_int_equal(signal_of_child(read_byte, w.va + GRAN - 1), SIGSEGV);
  dev_set_byte(w.va + 5, 0x77);
  assert_int_equal(dev_byte(w.va + 5), 0x77);
  window_close(&w);
}

static void reserved_but_unmapped_memory_faults(void **state) {
  void *va = NULL;
  assert_hip_ok(mori_hipMemAddressReserve(&va, GRAN, 0, NULL, 0));
  assert_int_equal(signal_of_child(read_byte, va), SIGSEGV);
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
}

static void mapped_memory_is_refused_to_copies_until_set_access(void **state) {
  hipMemAllocationProp prop = sim_prop(hipMemHandleTypePosixFileDescriptor);
  hipMemAccessDesc rw = sim_access(hipMemAccessFlagsProtReadWrite);
  hipMemGenericAllocationHandle_t h = NULL;
  unsigned char *va = NULL, b = 1;
  assert_hip_ok(mori_hipMemCreate(&h, GRAN, &prop, 0));
  assert_hip_ok(mori_hipMemAddressReserve((void **)&va, GRAN, 0, NULL, 0));
  assert_hip_ok(mori_hipMemMap(va, GRAN, 0, h, 0));
  assert_int_equal(signal_of_child(read_byte, va), SIGSEGV);
  assert_fails_with(mori_hipMemcpy(va, &b, 1, hipMemcpyHostToDevice), hipErrorInvalidValue,
                    "mapped memory lacks the access this needs");
  assert_hip_ok(mori_hipMemSetAccess(va, GRAN, &rw, 1));
  dev_set_byte(va, 1);
  assert_int_equal(signal_of_child(write_byte, va), SIGSEGV); /* granted to the device only */
  assert_hip_ok(mori_hipMemUnmap(va, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
  assert_hip_ok(mori_hipMemRelease(h));
}

static void read_only_access_refuses_copies_into_it(void **state) {
  struct sim_window w;
  hipMemAccessDesc ro = sim_access(hipMemAccessFlagsProtRead);
  unsigned char b = 9;
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  dev_set_byte(w.va, 3);
  assert_hip_ok(mori_hipMemSetAccess(w.va, GRAN, &ro, 1));
  assert_int_equal(dev_byte(w.va), 3);
  assert_fails_with(mori_hipMemcpy(w.va, &b, 1, hipMemcpyHostToDevice), hipErrorInvalidValue,
                    "needs read-write access");
  assert_fails_with(mori_hipStreamWriteValue32(NULL, w.va, 1, 0), hipErrorInvalidValue,
                    "needs read-write access");
  assert_int_equal(signal_of_child(read_byte, w.va), SIGSEGV);
  window_close(&w);
}

static void prot_none_access_takes_access_away(void **state) {
  struct sim_window w;
  hipMemAccessDesc none = sim_access(hipMemAccessFlagsProtNone);
  unsigned char b = 0;
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(mori_hipMemSetAccess(w.va, GRAN, &none, 1));
  assert_fails_with(mori_hipMemcpy(&b, w.va, 1, hipMemcpyDeviceToHost), hipErrorInvalidValue,
                    "needs read access");
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

static void hip_malloc_memory_faults_on_the_host_before_and_after_hip_free(void **state) {
  unsigned char *p = NULL;
  assert_hip_ok(mori_hipMalloc((void **)&p, 4096));
  assert_int_equal(signal_of_child(write_byte, p), SIGSEGV);
  assert_int_equal(signal_of_child(read_byte, p + 4095), SIGSEGV);
  dev_set_byte(p + 4095, 0x42);
  assert_int_equal(dev_byte(p + 4095), 0x42);
  assert_hip_ok(mori_hipFree(p));
  assert_int_equal(signal_of_child(write_byte, p), SIGSEGV);
}

int main(void) {
  sim_start("gfx950", NULL, NULL);
#define T(name) cmocka_unit_test_teardown(name, expect_no_leaks)
  const struct CMUnitTest tests[] = {
      T(host_memory_is_usable),
      T(read_write_mapping_faults_on_the_host_and_copies_reach_it),
      T(reserved_but_unmapped_memory_faults),
      T(mapped_memory_is_refused_to_copies_until_set_access),
      T(read_only_access_refuses_copies_into_it),
      T(prot_none_access_takes_access_away),
      T(unmapped_memory_faults_again_after_unmap),
      T(hip_malloc_memory_faults_on_the_host_before_and_after_hip_free),
  };
  return cmocka_run_group_tests_name("sim_faults", tests, NULL, NULL);
}
