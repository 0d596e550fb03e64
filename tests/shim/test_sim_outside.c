/*
 * test_sim_outside.c - the sim refuses a device operation on memory no
 * mapping, hipMalloc or hipHostMalloc block holds, as HIP does: one byte
 * past a mapping, a reservation plus a large offset, a range that straddles
 * out of a mapping or across a hole.  Each is refused at the call with
 * hipErrorInvalidValue (HIP validates a device operand against its
 * allocations), and host memory placed right there is never written.  Plain
 * host memory stays a copy's host side.
 */
#include "sim_test.h"

#include <sys/mman.h>

#define VICTIM 0x5a
#define PAGE 4096

/* A mapping of one granule whose reservation ends where a page of host
 * memory begins: the byte one past the mapping is host memory of this
 * process, which a device operation there must never reach. */
struct scene {
  struct sim_window w;
  unsigned char *victim; /* PAGE bytes right after the reservation */
};

static void scene_open(struct scene *s) {
  unsigned char *raw = mmap(NULL, 4 * GRAN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(raw != MAP_FAILED);
  unsigned char *base = (unsigned char *)(((uintptr_t)raw + GRAN - 1) / GRAN * GRAN);
  assert_int_equal(munmap(raw, 4 * GRAN), 0);
  s->victim = mmap(base + GRAN, PAGE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  assert_ptr_equal(s->victim, base + GRAN);
  memset(s->victim, VICTIM, PAGE);
  hipMemAllocationProp prop = sim_prop(hipMemHandleTypePosixFileDescriptor);
  hipMemGenericAllocationHandle_t h = NULL;
  hipMemAccessDesc rw = sim_access(hipMemAccessFlagsProtReadWrite);
  void *va = NULL;
  assert_hip_ok(mori_hipMemCreate(&h, GRAN, &prop, 0));
  assert_hip_ok(mori_hipMemAddressReserve(&va, GRAN, 0, base, 0));
  assert_ptr_equal(va, base);
  assert_hip_ok(mori_hipMemMap(va, GRAN, 0, h, 0));
  assert_hip_ok(mori_hipMemSetAccess(va, GRAN, &rw, 1));
  s->w = (struct sim_window){h, va, GRAN};
}

static void assert_victim_untouched(const unsigned char *victim, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (victim[i] != VICTIM)
      fail_msg("host byte %zu at %p is 0x%02x: a device operation wrote host memory", i,
               (const void *)(victim + i), victim[i]);
}

static void scene_close(struct scene *s) {
  assert_hip_ok(mori_hipMemUnmap(s->w.va, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(s->w.va, GRAN));
  assert_hip_ok(mori_hipMemRelease(s->w.handle));
  munmap(s->victim, PAGE);
}

#define NOT_DEVICE "no device memory"

static void one_byte_past_a_mapping_is_refused_and_nothing_written(void **state) {
  struct scene s;
  unsigned char src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  scene_open(&s);
  unsigned char *past = s.w.va + GRAN;
  assert_fails_with(mori_hipMemset(past, 0xee, 1), hipErrorInvalidValue, NOT_DEVICE);
  assert_fails_with(mori_hipMemsetAsync(past, 0xee, 1, NULL), hipErrorInvalidValue, NOT_DEVICE);
  assert_fails_with(mori_hipMemcpy(past, src, 1, hipMemcpyHostToDevice), hipErrorInvalidValue,
                    NOT_DEVICE);
  assert_fails_with(mori_hipMemcpy(past, s.w.va, 1, hipMemcpyDeviceToDevice),
                    hipErrorInvalidValue, NOT_DEVICE);
  assert_fails_with(mori_hipMemcpyAsync(past, src, 8, hipMemcpyHostToDevice, NULL),
                    hipErrorInvalidValue, NOT_DEVICE);
  assert_fails_with(mori_hipStreamWriteValue32(NULL, past, 7, 0), hipErrorInvalidValue,
                    NOT_DEVICE);
  /* ... and read: a device source there is refused too */
  assert_fails_with(mori_hipMemcpy(src, past, 1, hipMemcpyDeviceToHost), hipErrorInvalidValue,
                    NOT_DEVICE);
  assert_hip_ok(mori_hipStreamSynchronize(NULL));
  assert_victim_untouched(s.victim, PAGE);
  scene_close(&s);
}

/* Starting inside the mapping and running out of it: the operand is
 * device memory, and all of it must be. */
static void a_range_running_out_of_a_mapping_is_refused_and_nothing_written(void **state) {
  struct scene s;
  unsigned char src[16], back[8];
  memset(src, 0x11, sizeof src);
  scene_open(&s);
  unsigned char *last = s.w.va + GRAN - 8;
  assert_hip_ok(mori_hipMemset(last, 0x22, 8));
  assert_fails_with(mori_hipMemset(last, 0xee, 16), hipErrorInvalidValue, NOT_DEVICE);
  assert_fails_with(mori_hipMemcpy(last, src, 16, hipMemcpyHostToDevice), hipErrorInvalidValue,
                    NOT_DEVICE);
  assert_fails_with(mori_hipMemcpy(last, src, 16, hipMemcpyDefault), hipErrorInvalidValue,
                    NOT_DEVICE);
  assert_hip_ok(mori_hipMemcpy(back, last, 8, hipMemcpyDeviceToHost));
  for (int i = 0; i < 8; i++) assert_int_equal(back[i], 0x22); /* the mapping's part neither */
  assert_victim_untouched(s.victim, PAGE);
  scene_close(&s);
}

static void a_reservation_plus_a_large_offset_is_refused_and_nothing_written(void **state) {
  struct scene s;
  unsigned char src[8] = {0};
  scene_open(&s);
  unsigned char *far = s.w.va + ((size_t)1 << 36);
  unsigned char *victim = mmap(far, PAGE, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (victim != far) {
    scene_close(&s);
    skip(); /* that address is taken here */
  }
  memset(victim, VICTIM, PAGE);
  assert_fails_with(mori_hipMemset(far, 0xee, PAGE), hipErrorInvalidValue, NOT_DEVICE);
  assert_fails_with(mori_hipMemcpy(far, src, 8, hipMemcpyHostToDevice), hipErrorInvalidValue,
                    NOT_DEVICE);
  assert_fails_with(mori_hipMemcpy(far, s.w.va, 8, hipMemcpyDeviceToDevice),
                    hipErrorInvalidValue, NOT_DEVICE);
  assert_fails_with(mori_hipStreamWriteValue32(NULL, far, 7, 0), hipErrorInvalidValue,
                    NOT_DEVICE);
  assert_hip_ok(mori_hipStreamSynchronize(NULL));
  assert_victim_untouched(victim, PAGE);
  munmap(victim, PAGE);
  scene_close(&s);
}

/* Two mappings with a hole between them in one reservation. */
static void a_range_across_a_hole_between_two_mappings_is_refused(void **state) {
  hipMemAllocationProp prop = sim_prop(hipMemHandleTypePosixFileDescriptor);
  hipMemGenericAllocationHandle_t a = NULL, b = NULL;
  hipMemAccessDesc rw = sim_access(hipMemAccessFlagsProtReadWrite);
  unsigned char *va = NULL, back[4];
  assert_hip_ok(mori_hipMemCreate(&a, GRAN, &prop, 0));
  assert_hip_ok(mori_hipMemCreate(&b, GRAN, &prop, 0));
  assert_hip_ok(mori_hipMemAddressReserve((void **)&va, 3 * GRAN, 0, NULL, 0));
  assert_hip_ok(mori_hipMemMap(va, GRAN, 0, a, 0));
  assert_hip_ok(mori_hipMemMap(va + 2 * GRAN, GRAN, 0, b, 0));
  assert_hip_ok(mori_hipMemSetAccess(va, GRAN, &rw, 1));
  assert_hip_ok(mori_hipMemSetAccess(va + 2 * GRAN, GRAN, &rw, 1));
  assert_hip_ok(mori_hipMemset(va + GRAN - 4, 0x33, 4));
  assert_fails_with(mori_hipMemset(va + GRAN - 4, 0xee, GRAN + 8), hipErrorInvalidValue,
                    "is reserved but not mapped");
  assert_fails_with(mori_hipMemcpy(va + GRAN - 4, va + 2 * GRAN, GRAN + 8,
                                   hipMemcpyDeviceToDevice),
                    hipErrorInvalidValue, "is reserved but not mapped");
  assert_hip_ok(mori_hipMemcpy(back, va + GRAN - 4, 4, hipMemcpyDeviceToHost));
  for (int i = 0; i < 4; i++) assert_int_equal(back[i], 0x33);
  assert_hip_ok(mori_hipMemUnmap(va, GRAN));
  assert_hip_ok(mori_hipMemUnmap(va + 2 * GRAN, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(va, 3 * GRAN));
  assert_hip_ok(mori_hipMemRelease(a));
  assert_hip_ok(mori_hipMemRelease(b));
}

/* A fill or a memory operation on plain host memory is refused (it is
 * no device memory); pinned host memory (hipHostMalloc) is device
 * memory; and plain host memory is a copy's host side. */
static void plain_host_memory_is_only_a_copy_s_host_side(void **state) {
  struct scene s;
  unsigned char host[64], back[64];
  uint32_t *pinned = NULL;
  memset(host, VICTIM, sizeof host);
  scene_open(&s);
  assert_fails_with(mori_hipMemset(host, 0xee, sizeof host), hipErrorInvalidValue, NOT_DEVICE);
  assert_fails_with(mori_hipStreamWriteValue32(NULL, host, 7, 0), hipErrorInvalidValue,
                    NOT_DEVICE);
  assert_fails_with(mori_hipMemcpy(host, s.w.va, 8, hipMemcpyDeviceToDevice),
                    hipErrorInvalidValue, NOT_DEVICE);
  assert_victim_untouched(host, sizeof host);
  assert_hip_ok(mori_hipHostMalloc((void **)&pinned, 64, hipHostMallocMapped));
  assert_hip_ok(mori_hipMemset(pinned, 0, 64));
  assert_hip_ok(mori_hipStreamWriteValue32(NULL, pinned + 1, 7, 0));
  assert_hip_ok(mori_hipStreamSynchronize(NULL));
  assert_int_equal(pinned[1], 7);
  assert_fails_with(mori_hipMemset(pinned, 0, 65), hipErrorInvalidValue, NOT_DEVICE);
  assert_hip_ok(mori_hipHostFree(pinned));
  for (size_t i = 0; i < sizeof host; i++) host[i] = (unsigned char)i;
  assert_hip_ok(mori_hipMemcpy(s.w.va, host, sizeof host, hipMemcpyHostToDevice));
  assert_hip_ok(mori_hipMemcpy(back, s.w.va, sizeof back, hipMemcpyDefault));
  assert_memory_equal(back, host, sizeof host);
  memset(back, 0, sizeof back);
  assert_hip_ok(mori_hipMemcpy(back, host, sizeof back, hipMemcpyHostToHost));
  assert_memory_equal(back, host, sizeof host);
  scene_close(&s);
}

int main(void) {
  sim_start("gfx950", "", "2000");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(one_byte_past_a_mapping_is_refused_and_nothing_written),
      cmocka_unit_test(a_range_running_out_of_a_mapping_is_refused_and_nothing_written),
      cmocka_unit_test(a_reservation_plus_a_large_offset_is_refused_and_nothing_written),
      cmocka_unit_test(a_range_across_a_hole_between_two_mappings_is_refused),
      cmocka_unit_test(plain_host_memory_is_only_a_copy_s_host_side),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
