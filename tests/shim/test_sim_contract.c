/*
 * test_sim_contract.c - every HIP VMM contract rule the sim enforces, broken
 * on purpose: the call fails and mori_shim_message() names the rule.  Also
 * the lifetimes the contract implies (release while mapped, retain).
 */
#include "sim_test.h"

#include <fcntl.h>

static hipMemGenericAllocationHandle_t create(size_t size, hipMemAllocationHandleType type) {
  hipMemAllocationProp prop = sim_prop(type);
  hipMemGenericAllocationHandle_t h = NULL;
  assert_hip_ok(mori_hipMemCreate(&h, size, &prop, 0));
  return h;
}

static void *reserve(size_t size) {
  void *va = NULL;
  assert_hip_ok(mori_hipMemAddressReserve(&va, size, 0, NULL, 0));
  return va;
}

/* ---- hipMemCreate ---- */

static void create_rejects_size_that_is_not_a_granularity_multiple(void **state) {
  hipMemAllocationProp prop = sim_prop(hipMemHandleTypePosixFileDescriptor);
  hipMemGenericAllocationHandle_t h = NULL;
  assert_fails_with(mori_hipMemCreate(&h, GRAN + 4096, &prop, 0), hipErrorInvalidValue,
                    "hipMemCreate: contract: size must be a nonzero multiple of the granularity");
  assert_fails_with(mori_hipMemCreate(&h, 0, &prop, 0), hipErrorInvalidValue,
                    "hipMemCreate: contract: size must be a nonzero multiple");
}

static void create_rejects_nonzero_flags(void **state) {
  hipMemAllocationProp prop = sim_prop(hipMemHandleTypePosixFileDescriptor);
  hipMemGenericAllocationHandle_t h = NULL;
  assert_fails_with(mori_hipMemCreate(&h, GRAN, &prop, 1), hipErrorInvalidValue,
                    "hipMemCreate: contract: flags must be 0 (got 1)");
}

static void create_rejects_device_out_of_range(void **state) {
  hipMemAllocationProp prop = sim_prop(hipMemHandleTypePosixFileDescriptor);
  hipMemGenericAllocationHandle_t h = NULL;
  prop.location.id = 8;
  assert_fails_with(mori_hipMemCreate(&h, GRAN, &prop, 0), hipErrorInvalidValue,
                    "hipMemCreate: contract: location must be a device in range");
}

static void create_rejects_handle_types_other_than_fd_and_fabric(void **state) {
  hipMemAllocationProp prop = sim_prop(hipMemHandleTypeWin32);
  hipMemGenericAllocationHandle_t h = NULL;
  assert_fails_with(mori_hipMemCreate(&h, GRAN, &prop, 0), hipErrorInvalidValue,
                    "hipMemCreate: contract: handle type must be POSIX fd or fabric");
}

static void create_rejects_missing_prop_and_invalid_allocation_type(void **state) {
  hipMemAllocationProp prop = sim_prop(hipMemHandleTypePosixFileDescriptor);
  hipMemGenericAllocationHandle_t h = NULL;
  assert_fails_with(mori_hipMemCreate(&h, GRAN, NULL, 0), hipErrorInvalidValue,
                    "hipMemCreate: contract: a required argument is NULL");
  prop.type = hipMemAllocationTypeInvalid;
  assert_fails_with(mori_hipMemCreate(&h, GRAN, &prop, 0), hipErrorInvalidValue,
                    "contract: allocation type must be pinned or uncached");
}

/* ---- hipMemAddressReserve / hipMemAddressFree ---- */

static void reserve_rejects_nonzero_flags(void **state) {
  void *va = NULL;
  assert_fails_with(mori_hipMemAddressReserve(&va, GRAN, 0, NULL, 1), hipErrorInvalidValue,
                    "hipMemAddressReserve: contract: flags must be 0");
}

static void reserve_rejects_size_that_is_not_a_granularity_multiple(void **state) {
  void *va = NULL;
  assert_fails_with(mori_hipMemAddressReserve(&va, GRAN / 2, 0, NULL, 0), hipErrorInvalidValue,
                    "hipMemAddressReserve: contract: size must be a nonzero multiple");
}

static void reserve_rejects_alignment_that_is_not_a_power_of_two(void **state) {
  void *va = NULL;
  assert_fails_with(mori_hipMemAddressReserve(&va, GRAN, 3 * GRAN, NULL, 0),
                    hipErrorInvalidValue, "contract: alignment must be 0 or a power of two");
}

static void reserve_aligns_to_the_granularity_or_a_larger_alignment(void **state) {
  void *a = NULL, *b = NULL;
  assert_hip_ok(mori_hipMemAddressReserve(&a, GRAN, 0, NULL, 0));
  assert_hip_ok(mori_hipMemAddressReserve(&b, GRAN, 8 * GRAN, NULL, 0));
  assert_int_equal((uintptr_t)a % GRAN, 0);
  assert_int_equal((uintptr_t)b % (8 * GRAN), 0);
  assert_hip_ok(mori_hipMemAddressFree(a, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(b, GRAN));
}

static void address_free_rejects_a_reservation_with_live_mappings(void **state) {
  struct sim_window w;
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_fails_with(mori_hipMemAddressFree(w.va, w.size), hipErrorInvalidValue,
                    "hipMemAddressFree: contract: reservation still has live mappings");
  window_close(&w);
}

static void address_free_rejects_a_size_other_than_reserved(void **state) {
  void *va = reserve(2 * GRAN);
  assert_fails_with(mori_hipMemAddressFree(va, GRAN), hipErrorInvalidValue,
                    "hipMemAddressFree: contract: size must equal the reservation's size");
  assert_hip_ok(mori_hipMemAddressFree(va, 2 * GRAN));
}

static void address_free_rejects_an_address_that_starts_no_reservation(void **state) {
  unsigned char *va = reserve(2 * GRAN);
  assert_fails_with(mori_hipMemAddressFree(va + GRAN, GRAN), hipErrorInvalidValue,
                    "hipMemAddressFree: contract: address is not the start of a reservation");
  assert_hip_ok(mori_hipMemAddressFree(va, 2 * GRAN));
  assert_fails_with(mori_hipMemAddressFree(va, 2 * GRAN), hipErrorInvalidValue,
                    "address is not the start of a reservation");
}

/* ---- hipMemMap ---- */

static void map_rejects_nonzero_offset(void **state) {
  hipMemGenericAllocationHandle_t h = create(2 * GRAN, hipMemHandleTypePosixFileDescriptor);
  void *va = reserve(2 * GRAN);
  assert_fails_with(mori_hipMemMap(va, GRAN, 4096, h, 0), hipErrorInvalidValue,
                    "hipMemMap: contract: offset must be 0 (got 4096)");
  assert_hip_ok(mori_hipMemAddressFree(va, 2 * GRAN));
  assert_hip_ok(mori_hipMemRelease(h));
}

static void map_rejects_nonzero_flags(void **state) {
  hipMemGenericAllocationHandle_t h = create(GRAN, hipMemHandleTypePosixFileDescriptor);
  void *va = reserve(GRAN);
  assert_fails_with(mori_hipMemMap(va, GRAN, 0, h, 2), hipErrorInvalidValue,
                    "hipMemMap: contract: flags must be 0 (got 2)");
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
  assert_hip_ok(mori_hipMemRelease(h));
}

static void map_rejects_size_or_address_off_the_granularity(void **state) {
  hipMemGenericAllocationHandle_t h = create(GRAN, hipMemHandleTypePosixFileDescriptor);
  unsigned char *va = reserve(2 * GRAN);
  assert_fails_with(mori_hipMemMap(va, GRAN - 4096, 0, h, 0), hipErrorInvalidValue,
                    "hipMemMap: contract: size must be a nonzero multiple of the granularity");
  assert_fails_with(mori_hipMemMap(va + 4096, GRAN, 0, h, 0), hipErrorInvalidValue,
                    "hipMemMap: contract: address must be aligned to the granularity");
  assert_hip_ok(mori_hipMemAddressFree(va, 2 * GRAN));
  assert_hip_ok(mori_hipMemRelease(h));
}

static void map_rejects_a_range_outside_every_reservation(void **state) {
  hipMemGenericAllocationHandle_t h = create(2 * GRAN, hipMemHandleTypePosixFileDescriptor);
  unsigned char *va = reserve(GRAN);
  assert_fails_with(mori_hipMemMap(va, 2 * GRAN, 0, h, 0), hipErrorInvalidValue,
                    "hipMemMap: contract: range must lie inside one reservation");
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
  assert_fails_with(mori_hipMemMap(va, GRAN, 0, h, 0), hipErrorInvalidValue,
                    "hipMemMap: contract: range must lie inside one reservation");
  assert_hip_ok(mori_hipMemRelease(h));
}

static void map_rejects_a_range_over_an_existing_mapping(void **state) {
  hipMemGenericAllocationHandle_t a = create(2 * GRAN, hipMemHandleTypePosixFileDescriptor);
  hipMemGenericAllocationHandle_t b = create(GRAN, hipMemHandleTypePosixFileDescriptor);
  unsigned char *va = reserve(4 * GRAN);
  assert_hip_ok(mori_hipMemMap(va, 2 * GRAN, 0, a, 0));
  assert_fails_with(mori_hipMemMap(va + GRAN, GRAN, 0, b, 0), hipErrorInvalidValue,
                    "hipMemMap: contract: range must not overlap an existing mapping");
  assert_hip_ok(mori_hipMemMap(va + 2 * GRAN, GRAN, 0, b, 0)); /* adjacent is fine */
  assert_hip_ok(mori_hipMemUnmap(va, 2 * GRAN));
  assert_hip_ok(mori_hipMemUnmap(va + 2 * GRAN, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(va, 4 * GRAN));
  assert_hip_ok(mori_hipMemRelease(a));
  assert_hip_ok(mori_hipMemRelease(b));
}

static void map_rejects_a_size_larger_than_the_allocation(void **state) {
  hipMemGenericAllocationHandle_t h = create(GRAN, hipMemHandleTypePosixFileDescriptor);
  void *va = reserve(2 * GRAN);
  assert_fails_with(mori_hipMemMap(va, 2 * GRAN, 0, h, 0), hipErrorInvalidValue,
                    "hipMemMap: contract: size must not exceed the allocation");
  assert_hip_ok(mori_hipMemAddressFree(va, 2 * GRAN));
  assert_hip_ok(mori_hipMemRelease(h));
}

static void map_rejects_forged_handles_without_dereferencing_them(void **state) {
  long stack_word = 0;
  void *va = reserve(GRAN);
  /* Neither points at a sim allocation; reading through them would crash or
   * read garbage, so the sim must only compare them. */
  assert_fails_with(mori_hipMemMap(va, GRAN, 0, (hipMemGenericAllocationHandle_t)0x10, 0),
                    hipErrorInvalidValue, "hipMemMap: contract: unknown allocation handle");
  assert_fails_with(mori_hipMemMap(va, GRAN, 0, (hipMemGenericAllocationHandle_t)&stack_word, 0),
                    hipErrorInvalidValue, "unknown allocation handle");
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
}

static void map_rejects_a_released_handle(void **state) {
  hipMemGenericAllocationHandle_t h = create(GRAN, hipMemHandleTypePosixFileDescriptor);
  void *va = reserve(GRAN);
  assert_hip_ok(mori_hipMemRelease(h));
  assert_fails_with(mori_hipMemMap(va, GRAN, 0, h, 0), hipErrorInvalidValue,
                    "hipMemMap: contract: use of a released handle");
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
}

/* ---- hipMemUnmap ---- */

static void unmap_rejects_part_of_a_mapping(void **state) {
  struct sim_window w;
  window_open(&w, 2 * GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_fails_with(mori_hipMemUnmap(w.va, GRAN), hipErrorInvalidValue,
                    "hipMemUnmap: contract: unmap must cover whole mappings");
  assert_fails_with(mori_hipMemUnmap(w.va + GRAN, GRAN), hipErrorInvalidValue,
                    "unmap must cover whole mappings");
  dev_set_byte(w.va, 7); /* both failures left the mapping whole and usable */
  dev_set_byte(w.va + 2 * GRAN - 1, 7);
  window_close(&w);
}

static void unmap_rejects_a_range_cutting_into_the_next_mapping(void **state) {
  hipMemGenericAllocationHandle_t a = create(GRAN, hipMemHandleTypePosixFileDescriptor);
  hipMemGenericAllocationHandle_t b = create(2 * GRAN, hipMemHandleTypePosixFileDescriptor);
  unsigned char *va = reserve(3 * GRAN);
  assert_hip_ok(mori_hipMemMap(va, GRAN, 0, a, 0));
  assert_hip_ok(mori_hipMemMap(va + GRAN, 2 * GRAN, 0, b, 0));
  assert_fails_with(mori_hipMemUnmap(va, 2 * GRAN), hipErrorInvalidValue,
                    "unmap must cover whole mappings");
  assert_hip_ok(mori_hipMemUnmap(va, GRAN));
  assert_hip_ok(mori_hipMemUnmap(va + GRAN, 2 * GRAN));
  assert_hip_ok(mori_hipMemAddressFree(va, 3 * GRAN));
  assert_hip_ok(mori_hipMemRelease(a));
  assert_hip_ok(mori_hipMemRelease(b));
}

static void unmap_rejects_a_range_with_nothing_mapped(void **state) {
  void *va = reserve(GRAN);
  assert_fails_with(mori_hipMemUnmap(va, GRAN), hipErrorInvalidValue,
                    "hipMemUnmap: contract: address is not mapped");
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
}

static void unmap_stays_inside_one_reservation(void **state) {
  hipMemGenericAllocationHandle_t a = create(GRAN, hipMemHandleTypePosixFileDescriptor);
  hipMemGenericAllocationHandle_t b = create(GRAN, hipMemHandleTypePosixFileDescriptor);
  unsigned char *lo = NULL, *hi = NULL;
  /* Two back-to-back reservations: reserve two granules, free, take both halves. */
  unsigned char *span = reserve(2 * GRAN);
  assert_hip_ok(mori_hipMemAddressFree(span, 2 * GRAN));
  assert_hip_ok(mori_hipMemAddressReserve((void **)&lo, GRAN, 0, span, 0));
  assert_hip_ok(mori_hipMemAddressReserve((void **)&hi, GRAN, 0, span + GRAN, 0));
  if (lo != span || hi != span + GRAN) skip(); /* the kernel placed them apart */
  assert_hip_ok(mori_hipMemMap(lo, GRAN, 0, a, 0));
  assert_hip_ok(mori_hipMemMap(hi, GRAN, 0, b, 0));
  assert_fails_with(mori_hipMemUnmap(lo, 2 * GRAN), hipErrorInvalidValue,
                    "hipMemUnmap: contract: range must lie inside one reservation");
  assert_hip_ok(mori_hipMemUnmap(lo, GRAN));
  assert_hip_ok(mori_hipMemUnmap(hi, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(lo, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(hi, GRAN));
  assert_hip_ok(mori_hipMemRelease(a));
  assert_hip_ok(mori_hipMemRelease(b));
}

static void unmap_of_adjacent_whole_mappings_in_one_call_is_allowed(void **state) {
  hipMemGenericAllocationHandle_t a = create(GRAN, hipMemHandleTypePosixFileDescriptor);
  hipMemGenericAllocationHandle_t b = create(GRAN, hipMemHandleTypePosixFileDescriptor);
  unsigned char *va = reserve(2 * GRAN);
  mori_shim_registry_counts c;
  assert_hip_ok(mori_hipMemMap(va, GRAN, 0, a, 0));
  assert_hip_ok(mori_hipMemMap(va + GRAN, GRAN, 0, b, 0));
  assert_hip_ok(mori_hipMemUnmap(va, 2 * GRAN));
  mori_shim_registry(&c);
  assert_int_equal(c.mappings, 0);
  assert_hip_ok(mori_hipMemAddressFree(va, 2 * GRAN));
  assert_hip_ok(mori_hipMemRelease(a));
  assert_hip_ok(mori_hipMemRelease(b));
}

/* ---- hipMemRelease / hipMemRetainAllocationHandle ---- */

static void release_twice_is_reported_as_double_release(void **state) {
  hipMemGenericAllocationHandle_t h = create(GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(mori_hipMemRelease(h));
  assert_fails_with(mori_hipMemRelease(h), hipErrorInvalidValue,
                    "hipMemRelease: contract: double release");
}

static void release_rejects_a_handle_the_sim_never_made(void **state) {
  int not_a_handle = 0;
  assert_fails_with(mori_hipMemRelease((hipMemGenericAllocationHandle_t)&not_a_handle),
                    hipErrorInvalidValue, "hipMemRelease: contract: unknown allocation handle");
  assert_fails_with(mori_hipMemRelease(NULL), hipErrorInvalidValue, "unknown allocation handle");
}

static void release_while_mapped_keeps_the_memory_until_unmap(void **state) {
  struct sim_window w;
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  dev_fill(w.va, 0x5a, GRAN);
  assert_hip_ok(mori_hipMemRelease(w.handle));
  assert_int_equal(dev_byte(w.va), 0x5a); /* the mapping holds the memory */
  assert_int_equal(dev_byte(w.va + GRAN - 1), 0x5a);
  dev_set_byte(w.va + 1, 0x33);
  assert_fails_with(mori_hipMemRelease(w.handle), hipErrorInvalidValue, "double release");
  assert_hip_ok(mori_hipMemUnmap(w.va, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(w.va, GRAN));
}

static void retain_returns_the_mapped_allocation_and_takes_a_reference(void **state) {
  struct sim_window w;
  hipMemGenericAllocationHandle_t r = NULL;
  int fd = -1;
  window_open(&w, 2 * GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(mori_hipMemRetainAllocationHandle(&r, w.va + GRAN + 12));
  assert_ptr_equal(r, w.handle);
  assert_hip_ok(mori_hipMemRelease(w.handle));
  /* The retained reference keeps the handle usable. */
  assert_hip_ok(mori_hipMemExportToShareableHandle(&fd, r, hipMemHandleTypePosixFileDescriptor, 0));
  assert_int_equal(mori_close(fd), 0);
  assert_hip_ok(mori_hipMemRelease(r));
  assert_fails_with(
      mori_hipMemExportToShareableHandle(&fd, r, hipMemHandleTypePosixFileDescriptor, 0),
      hipErrorInvalidValue, "use of a released handle");
  assert_hip_ok(mori_hipMemUnmap(w.va, w.size));
  assert_hip_ok(mori_hipMemAddressFree(w.va, w.size));
}

static void retain_revives_a_handle_released_while_mapped(void **state) {
  struct sim_window w;
  hipMemGenericAllocationHandle_t r = NULL;
  int fd = -1;
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(mori_hipMemRelease(w.handle));
  assert_hip_ok(mori_hipMemRetainAllocationHandle(&r, w.va));
  assert_ptr_equal(r, w.handle);
  assert_hip_ok(mori_hipMemExportToShareableHandle(&fd, r, hipMemHandleTypePosixFileDescriptor, 0));
  window_close(&w); /* releases r, the only reference now */
  assert_int_equal(mori_close(fd), 0);
}

static void retain_rejects_an_address_that_is_not_mapped(void **state) {
  hipMemGenericAllocationHandle_t r = NULL;
  void *va = reserve(GRAN);
  assert_fails_with(mori_hipMemRetainAllocationHandle(&r, va), hipErrorInvalidValue,
                    "hipMemRetainAllocationHandle: contract: address is not mapped");
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
}

/* ---- export / import ---- */

static void export_rejects_a_type_other_than_the_requested_one(void **state) {
  hipMemGenericAllocationHandle_t fd_type = create(GRAN, hipMemHandleTypePosixFileDescriptor);
  hipMemGenericAllocationHandle_t none = create(GRAN, hipMemHandleTypeNone);
  hipMemFabricHandle_t blob;
  int fd = -1;
  assert_fails_with(mori_hipMemExportToShareableHandle(&blob, fd_type, hipMemHandleTypeFabric, 0),
                    hipErrorInvalidValue,
                    "hipMemExportToShareableHandle: contract: handle type must equal "
                    "prop.requestedHandleType");
  assert_fails_with(
      mori_hipMemExportToShareableHandle(&fd, none, hipMemHandleTypePosixFileDescriptor, 0),
      hipErrorInvalidValue, "handle type must equal prop.requestedHandleType");
  assert_hip_ok(mori_hipMemRelease(fd_type));
  assert_hip_ok(mori_hipMemRelease(none));
}

static void export_rejects_nonzero_flags_and_released_handles(void **state) {
  hipMemGenericAllocationHandle_t h = create(GRAN, hipMemHandleTypePosixFileDescriptor);
  int fd = -1;
  assert_fails_with(
      mori_hipMemExportToShareableHandle(&fd, h, hipMemHandleTypePosixFileDescriptor, 1),
      hipErrorInvalidValue, "hipMemExportToShareableHandle: contract: flags must be 0");
  assert_hip_ok(mori_hipMemRelease(h));
  assert_fails_with(
      mori_hipMemExportToShareableHandle(&fd, h, hipMemHandleTypePosixFileDescriptor, 0),
      hipErrorInvalidValue, "use of a released handle");
}

static void exported_fd_imports_as_a_new_handle_sharing_the_memory(void **state) {
  struct sim_window a, b;
  hipMemGenericAllocationHandle_t imported = NULL;
  int fd = -1;
  window_open(&a, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(
      mori_hipMemExportToShareableHandle(&fd, a.handle, hipMemHandleTypePosixFileDescriptor, 0));
  assert_true(fd >= 0);
  assert_hip_ok(mori_hipMemImportFromShareableHandle(&imported, (void *)(intptr_t)fd,
                                                     hipMemHandleTypePosixFileDescriptor));
  assert_ptr_not_equal(imported, a.handle);
  window_map(&b, imported, GRAN);
  assert_ptr_not_equal(a.va, b.va);
  dev_set_byte(a.va + 100, 0xab);
  assert_int_equal(dev_byte(b.va + 100), 0xab);
  window_close(&b);
  window_close(&a);
  assert_int_equal(mori_close(fd), 0); /* after the final release, as docs/quirks.md says */
}

static void import_keeps_the_callers_fd_which_may_close_at_once(void **state) {
  struct sim_window a, b;
  hipMemGenericAllocationHandle_t imported = NULL;
  int fd = -1;
  window_open(&a, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(
      mori_hipMemExportToShareableHandle(&fd, a.handle, hipMemHandleTypePosixFileDescriptor, 0));
  assert_hip_ok(mori_hipMemImportFromShareableHandle(&imported, (void *)(intptr_t)fd,
                                                     hipMemHandleTypePosixFileDescriptor));
  assert_true(fcntl(fd, F_GETFD) != -1); /* still the caller's */
  window_close(&a);                      /* exporter side gone entirely */
  assert_int_equal(mori_close(fd), 0);
  window_map(&b, imported, GRAN); /* the import holds its own reference */
  dev_set_byte(b.va, 1);
  window_close(&b);
}

static void import_rejects_descriptors_that_are_not_sim_allocations(void **state) {
  hipMemGenericAllocationHandle_t h = NULL;
  int devnull = open("/dev/null", O_RDWR);
  assert_true(devnull >= 0);
  assert_fails_with(mori_hipMemImportFromShareableHandle(&h, (void *)(intptr_t)devnull,
                                                         hipMemHandleTypePosixFileDescriptor),
                    hipErrorInvalidValue,
                    "hipMemImportFromShareableHandle: contract: shareable handle does not "
                    "name a live sim allocation (not a sim allocation)");
  close(devnull);
  assert_fails_with(mori_hipMemImportFromShareableHandle(&h, (void *)(intptr_t)devnull,
                                                         hipMemHandleTypePosixFileDescriptor),
                    hipErrorInvalidValue, "is not open");
  assert_fails_with(
      mori_hipMemImportFromShareableHandle(&h, NULL, hipMemHandleTypePosixFileDescriptor),
      hipErrorInvalidValue, "a required argument is NULL");
}

static void import_rejects_a_fabric_blob_that_names_nothing(void **state) {
  hipMemGenericAllocationHandle_t h = NULL;
  hipMemFabricHandle_t blob;
  for (size_t i = 0; i < sizeof blob.data; i++) blob.data[i] = (unsigned char)(i * 37 + 11);
  assert_fails_with(mori_hipMemImportFromShareableHandle(&h, &blob, hipMemHandleTypeFabric),
                    hipErrorInvalidValue, "shareable handle does not name a live sim allocation");
  assert_fails_with(mori_hipMemImportFromShareableHandle(&h, &blob, hipMemHandleTypeWin32),
                    hipErrorInvalidValue, "handle type must be POSIX fd or fabric");
}

/* ---- hipMemSetAccess ---- */

static void set_access_rejects_a_range_that_is_not_mapped(void **state) {
  hipMemAccessDesc rw = sim_access(hipMemAccessFlagsProtReadWrite);
  hipMemGenericAllocationHandle_t h = create(GRAN, hipMemHandleTypePosixFileDescriptor);
  unsigned char *va = reserve(2 * GRAN);
  assert_hip_ok(mori_hipMemMap(va, GRAN, 0, h, 0));
  assert_fails_with(mori_hipMemSetAccess(va, 2 * GRAN, &rw, 1), hipErrorInvalidValue,
                    "hipMemSetAccess: contract: address is not mapped");
  assert_hip_ok(mori_hipMemUnmap(va, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(va, 2 * GRAN));
  assert_hip_ok(mori_hipMemRelease(h));
}

static void set_access_rejects_bad_descriptors(void **state) {
  struct sim_window w;
  hipMemAccessDesc d = sim_access(hipMemAccessFlagsProtReadWrite);
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  d.flags = (hipMemAccessFlags)2;
  assert_fails_with(mori_hipMemSetAccess(w.va, GRAN, &d, 1), hipErrorInvalidValue,
                    "hipMemSetAccess: contract: access flags must be ProtNone, ProtRead or "
                    "ProtReadWrite");
  d = sim_access(hipMemAccessFlagsProtReadWrite);
  d.location.id = 99;
  assert_fails_with(mori_hipMemSetAccess(w.va, GRAN, &d, 1), hipErrorInvalidValue,
                    "location must be a device in range");
  assert_fails_with(mori_hipMemSetAccess(w.va, GRAN, &d, 0), hipErrorInvalidValue,
                    "a required argument is NULL or empty");
  window_close(&w);
}

int main(int argc, char **argv) {
  sim_start("gfx950", NULL, NULL);
#define T(name) cmocka_unit_test_teardown(name, expect_no_leaks)
  const struct CMUnitTest tests[] = {
      T(create_rejects_size_that_is_not_a_granularity_multiple),
      T(create_rejects_nonzero_flags),
      T(create_rejects_device_out_of_range),
      T(create_rejects_handle_types_other_than_fd_and_fabric),
      T(create_rejects_missing_prop_and_invalid_allocation_type),
      T(reserve_rejects_nonzero_flags),
      T(reserve_rejects_size_that_is_not_a_granularity_multiple),
      T(reserve_rejects_alignment_that_is_not_a_power_of_two),
      T(reserve_aligns_to_the_granularity_or_a_larger_alignment),
      T(address_free_rejects_a_reservation_with_live_mappings),
      T(address_free_rejects_a_size_other_than_reserved),
      T(address_free_rejects_an_address_that_starts_no_reservation),
      T(map_rejects_nonzero_offset),
      T(map_rejects_nonzero_flags),
      T(map_rejects_size_or_address_off_the_granularity),
      T(map_rejects_a_range_outside_every_reservation),
      T(map_rejects_a_range_over_an_existing_mapping),
      T(map_rejects_a_size_larger_than_the_allocation),
      T(map_rejects_forged_handles_without_dereferencing_them),
      T(map_rejects_a_released_handle),
      T(unmap_rejects_part_of_a_mapping),
      T(unmap_rejects_a_range_cutting_into_the_next_mapping),
      T(unmap_rejects_a_range_with_nothing_mapped),
      T(unmap_stays_inside_one_reservation),
      T(unmap_of_adjacent_whole_mappings_in_one_call_is_allowed),
      T(release_twice_is_reported_as_double_release),
      T(release_rejects_a_handle_the_sim_never_made),
      T(release_while_mapped_keeps_the_memory_until_unmap),
      T(retain_returns_the_mapped_allocation_and_takes_a_reference),
      T(retain_revives_a_handle_released_while_mapped),
      T(retain_rejects_an_address_that_is_not_mapped),
      T(export_rejects_a_type_other_than_the_requested_one),
      T(export_rejects_nonzero_flags_and_released_handles),
      T(exported_fd_imports_as_a_new_handle_sharing_the_memory),
      T(import_keeps_the_callers_fd_which_may_close_at_once),
      T(import_rejects_descriptors_that_are_not_sim_allocations),
      T(import_rejects_a_fabric_blob_that_names_nothing),
      T(set_access_rejects_a_range_that_is_not_mapped),
      T(set_access_rejects_bad_descriptors),
  };
  return mori_run_tests(argc, argv, tests);
}
