/*
 * test_sim_wait.c - stream memory operations: HIP's four wait conditions
 * with masks, the bounded wait that ends in hipErrorLaunchTimeOut, and the
 * checks on the word's address.  MORI_SIM_WAIT_TIMEOUT_MS=0 here, so a wait
 * whose condition is false times out at once and no test depends on timing.
 */
#include "sim_test.h"

static struct sim_window w;

static int open_window(void **state) {
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  return 0;
}

static int close_window(void **state) {
  window_close(&w);
  return expect_no_leaks(state);
}

/* HIP: Gte (*p & mask) >= v; Eq (*p & mask) == v; And ((*p & mask) & v) != 0;
 * Nor ~((*p & mask) | (v & mask)) != 0. */
static const struct {
  unsigned flags;
  uint32_t word, value, mask;
  int met;
} conditions[] = {
    {hipStreamWaitValueGte, 5, 5, ~0u, 1},
    {hipStreamWaitValueGte, 4, 5, ~0u, 0},
    {hipStreamWaitValueGte, 0x105, 6, 0xff, 0}, /* the mask hides the high bit */
    {hipStreamWaitValueGte, 0xffffffffu, 1, ~0u, 1}, /* unsigned, not CUDA's cyclic compare */
    {hipStreamWaitValueEq, 7, 7, ~0u, 1},
    {hipStreamWaitValueEq, 0x107, 7, 0xff, 1},
    {hipStreamWaitValueEq, 8, 7, ~0u, 0},
    {hipStreamWaitValueAnd, 0xa, 0x2, ~0u, 1},
    {hipStreamWaitValueAnd, 0x8, 0x2, ~0u, 0},
    {hipStreamWaitValueAnd, 0x100, 0x100, 0xff, 0},
    {hipStreamWaitValueNor, 0, 0, ~0u, 1},
    {hipStreamWaitValueNor, 0xffffffffu, 0, ~0u, 0},
    {hipStreamWaitValueNor, 0xffff0000u, 0x0000ffffu, ~0u, 0},
    {hipStreamWaitValueNor, 0xffffffffu, 0, 0xff, 1}, /* bits outside the mask count as 0 */
    {hipStreamWaitValueNor, 0xff, 0xffffff00u, 0xff, 1}, /* the mask applies to the value too */
};

static void wait_conditions_follow_hip_with_masks(void **state) {
  uint32_t *word = (uint32_t *)w.va;
  for (size_t i = 0; i < sizeof conditions / sizeof conditions[0]; i++) {
    assert_hip_ok(mori_hipStreamWriteValue32(NULL, word, conditions[i].word, 0));
    hipError_t e = mori_hipStreamWaitValue32(NULL, word, conditions[i].value, conditions[i].flags,
                                             conditions[i].mask);
    if (e != (conditions[i].met ? hipSuccess : hipErrorLaunchTimeOut))
      fail_msg("row %zu: flags %u word 0x%x value 0x%x mask 0x%x gave %s", i, conditions[i].flags,
               conditions[i].word, conditions[i].value, conditions[i].mask,
               mori_hipGetErrorName(e));
  }
}

static void write_value_stores_the_word_a_copy_reads(void **state) {
  uint32_t *word = (uint32_t *)(w.va + 64), v = 0;
  assert_hip_ok(mori_hipStreamWriteValue32(NULL, word, 0xdeadbeef, 0));
  dev_read(&v, word, 4);
  assert_int_equal(v, 0xdeadbeef);
}

static void timed_out_wait_reports_launch_timeout_with_the_condition(void **state) {
  uint32_t *word = (uint32_t *)(w.va + 128);
  assert_hip_ok(mori_hipStreamWriteValue32(NULL, word, 3, 0));
  assert_fails_with(mori_hipStreamWaitValue32(NULL, word, 4, hipStreamWaitValueGte, ~0u),
                    hipErrorLaunchTimeOut, "hipStreamWaitValue32: hipErrorLaunchTimeOut");
  assert_contains(mori_shim_message(), ">= 0x4 still false after 0 ms (last value 0x3");
  assert_contains(mori_shim_message(), "MORI_SIM_WAIT_TIMEOUT_MS");
  assert_int_equal(mori_hipGetLastError(), hipErrorLaunchTimeOut);
}

static void memops_reject_bad_addresses_and_flags(void **state) {
  assert_fails_with(mori_hipStreamWriteValue32(NULL, NULL, 1, 0), hipErrorInvalidValue,
                    "hipStreamWriteValue32: contract: a required argument is NULL");
  assert_fails_with(mori_hipStreamWriteValue32(NULL, w.va + 2, 1, 0), hipErrorInvalidValue,
                    "contract: address must be 4-byte aligned");
  assert_fails_with(mori_hipStreamWriteValue32(NULL, w.va, 1, 4), hipErrorInvalidValue,
                    "hipStreamWriteValue32: contract: flags must be 0");
  assert_fails_with(mori_hipStreamWaitValue32(NULL, w.va, 1, 4, ~0u), hipErrorInvalidValue,
                    "hipStreamWaitValue32: contract: flags must be Gte, Eq, And or Nor");
  assert_fails_with(mori_hipStreamWaitValue32(NULL, w.va + 1, 1, 0, ~0u), hipErrorInvalidValue,
                    "address must be 4-byte aligned");
}

static void memops_on_memory_without_access_fail_instead_of_faulting(void **state) {
  hipMemAccessDesc ro = sim_access(hipMemAccessFlagsProtRead);
  void *va = NULL;
  assert_hip_ok(mori_hipMemAddressReserve(&va, GRAN, 0, NULL, 0));
  assert_fails_with(mori_hipStreamWaitValue32(NULL, va, 0, hipStreamWaitValueGte, ~0u),
                    hipErrorInvalidValue, "hipStreamWaitValue32: contract: address is not mapped");
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
  assert_hip_ok(mori_hipMemSetAccess(w.va, GRAN, &ro, 1));
  assert_fails_with(mori_hipStreamWriteValue32(NULL, w.va, 1, 0), hipErrorInvalidValue,
                    "needs read-write access");
  assert_hip_ok(mori_hipStreamWaitValue32(NULL, w.va, 0, hipStreamWaitValueGte, ~0u));
}

int main(void) {
  sim_start("gfx950", NULL, "0");
#define T(name) cmocka_unit_test_setup_teardown(name, open_window, close_window)
  const struct CMUnitTest tests[] = {
      T(wait_conditions_follow_hip_with_masks),
      T(write_value_stores_the_word_a_copy_reads),
      T(timed_out_wait_reports_launch_timeout_with_the_condition),
      T(memops_reject_bad_addresses_and_flags),
      T(memops_on_memory_without_access_fail_instead_of_faulting),
  };
  return cmocka_run_group_tests_name("sim_wait", tests, NULL, NULL);
}
