/*
 * test_sim_quirks.c <MORI_SIM_QUIRKS value> - each reproduced ROCm defect,
 * on and off.  With the quirk on, the defect shows and the teardown order of
 * docs/quirks.md still works; with it off, the sim follows HIP's contract.
 * Profile gfx1250, where fabric allocations exist.
 */
#include "sim_test.h"

#include <fcntl.h>

static hipMemGenericAllocationHandle_t create(hipMemAllocationHandleType type) {
  hipMemAllocationProp prop = sim_prop(type);
  hipMemGenericAllocationHandle_t h = NULL;
  assert_hip_ok(mori_hipMemCreate(&h, GRAN, &prop, 0));
  return h;
}

static long handles_now(void) {
  mori_shim_registry_counts c;
  mori_shim_registry(&c);
  return c.handles;
}

static long reservations_now(void) {
  mori_shim_registry_counts c;
  mori_shim_registry(&c);
  return c.reservations;
}

/* ---- retain-no-ref (rocm-systems #2696) ---- */

static void retain_without_reference_turns_the_second_release_into_a_double_release(void **state) {
  struct sim_window w;
  hipMemGenericAllocationHandle_t r = NULL;
  long before = handles_now();
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(mori_hipMemRetainAllocationHandle(&r, w.va));
  assert_ptr_equal(r, w.handle);
  assert_hip_ok(mori_hipMemRelease(r));
  assert_fails_with(mori_hipMemRelease(w.handle), hipErrorInvalidValue,
                    "hipMemRelease: contract: double release");
  assert_contains(mori_shim_message(), "quirk retain-no-ref");
  assert_hip_ok(mori_hipMemUnmap(w.va, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(w.va, GRAN));
  assert_int_equal(handles_now() - before, 1); /* the ledger shows the damage */
}

static void retain_takes_a_reference_so_both_releases_succeed(void **state) {
  struct sim_window w;
  hipMemGenericAllocationHandle_t r = NULL;
  long before = handles_now();
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(mori_hipMemRetainAllocationHandle(&r, w.va));
  assert_hip_ok(mori_hipMemRelease(r));
  window_close(&w);
  assert_int_equal(handles_now(), before);
}

/* ---- export-fd-lifetime (mori #618) ---- */

static void closing_an_exported_fd_before_the_final_release_breaks_the_release(void **state) {
  hipMemGenericAllocationHandle_t h = create(hipMemHandleTypePosixFileDescriptor);
  long before = handles_now();
  int fd = -1;
  assert_hip_ok(mori_hipMemExportToShareableHandle(&fd, h, hipMemHandleTypePosixFileDescriptor, 0));
  assert_int_equal(mori_close(fd), 0);
  int other = open("/dev/null", O_RDONLY); /* may take the same number: still not our fd */
  assert_fails_with(mori_hipMemRelease(h), hipErrorUnknown, "quirk export-fd-lifetime");
  assert_contains(mori_shim_message(), "was closed before the final release");
  assert_int_equal(handles_now(), before); /* the allocation leaks */
  close(other);
}

static void closing_exported_fds_after_the_final_release_is_safe(void **state) {
  hipMemGenericAllocationHandle_t h = create(hipMemHandleTypePosixFileDescriptor);
  int fd = -1, fd2 = -1;
  assert_hip_ok(mori_hipMemExportToShareableHandle(&fd, h, hipMemHandleTypePosixFileDescriptor, 0));
  assert_hip_ok(
      mori_hipMemExportToShareableHandle(&fd2, h, hipMemHandleTypePosixFileDescriptor, 0));
  assert_hip_ok(mori_hipMemRelease(h));
  assert_int_equal(mori_close(fd), 0);
  assert_int_equal(mori_close(fd2), 0);
}

static void exported_fd_may_close_before_the_release(void **state) {
  hipMemGenericAllocationHandle_t h = create(hipMemHandleTypePosixFileDescriptor);
  long before = handles_now();
  int fd = -1;
  assert_hip_ok(mori_hipMemExportToShareableHandle(&fd, h, hipMemHandleTypePosixFileDescriptor, 0));
  assert_int_equal(mori_close(fd), 0);
  assert_hip_ok(mori_hipMemRelease(h));
  assert_int_equal(handles_now(), before - 1);
}

/* ---- unmap-multi (ROCR-Runtime #285) ---- */

struct two_mappings {
  hipMemGenericAllocationHandle_t a, b;
  unsigned char *va;
};

static struct two_mappings map_two(void) {
  struct two_mappings t = {create(hipMemHandleTypePosixFileDescriptor),
                           create(hipMemHandleTypePosixFileDescriptor), NULL};
  assert_hip_ok(mori_hipMemAddressReserve((void **)&t.va, 2 * GRAN, 0, NULL, 0));
  assert_hip_ok(mori_hipMemMap(t.va, GRAN, 0, t.a, 0));
  assert_hip_ok(mori_hipMemMap(t.va + GRAN, GRAN, 0, t.b, 0));
  return t;
}

static void release_two(struct two_mappings *t) {
  assert_hip_ok(mori_hipMemRelease(t->a));
  assert_hip_ok(mori_hipMemRelease(t->b));
}

static void one_unmap_over_two_mappings_fails_and_leaves_the_reservation_unfreeable(void **state) {
  long before = reservations_now();
  struct two_mappings t = map_two();
  assert_fails_with(mori_hipMemUnmap(t.va, 2 * GRAN), hipErrorUnmapFailed, "quirk unmap-multi");
  assert_hip_ok(mori_hipMemUnmap(t.va, GRAN));
  assert_hip_ok(mori_hipMemUnmap(t.va + GRAN, GRAN));
  assert_fails_with(mori_hipMemAddressFree(t.va, 2 * GRAN), hipErrorInvalidValue,
                    "hipMemAddressFree: quirk unmap-multi");
  release_two(&t);
  assert_int_equal(reservations_now() - before, 1);
}

static void unmapping_each_mapping_on_its_own_keeps_address_free_working(void **state) {
  long before = reservations_now();
  struct two_mappings t = map_two();
  assert_hip_ok(mori_hipMemUnmap(t.va, GRAN));
  assert_hip_ok(mori_hipMemUnmap(t.va + GRAN, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(t.va, 2 * GRAN));
  release_two(&t);
  assert_int_equal(reservations_now(), before);
}

static void one_unmap_over_two_mappings_succeeds(void **state) {
  long before = reservations_now();
  struct two_mappings t = map_two();
  assert_hip_ok(mori_hipMemUnmap(t.va, 2 * GRAN));
  assert_hip_ok(mori_hipMemAddressFree(t.va, 2 * GRAN));
  release_two(&t);
  assert_int_equal(reservations_now(), before);
}

/* ---- memset-fabric (mori cco notes, ROCm 7.15) ---- */

/* Fabric memory written full of 0xff by a copy (hipMemset may be what is
 * under test). */
static void fill_ones(unsigned char *va, unsigned char *scratch) {
  memset(scratch, 0xff, GRAN);
  dev_write(va, scratch, GRAN);
}

static void memset_on_fabric_memory_fails_and_memcpy_zeroes_it_instead(void **state) {
  struct sim_window fab, fd;
  unsigned char *zeros = calloc(1, GRAN), *back = malloc(GRAN);
  assert_non_null(zeros);
  assert_non_null(back);
  window_open(&fab, GRAN, hipMemHandleTypeFabric);
  window_open(&fd, GRAN, hipMemHandleTypePosixFileDescriptor);
  fill_ones(fab.va, back);
  assert_fails_with(mori_hipMemset(fab.va, 0, GRAN), hipErrorOutOfMemory, "quirk memset-fabric");
  assert_int_equal(dev_byte(fab.va), 0xff); /* nothing was written */
  assert_hip_ok(mori_hipMemcpy(fab.va, zeros, GRAN, hipMemcpyHostToDevice));
  dev_read(back, fab.va, GRAN);
  assert_memory_equal(back, zeros, GRAN);
  assert_hip_ok(mori_hipMemset(fd.va, 0, GRAN)); /* POSIX-fd memory is unaffected */
  window_close(&fd);
  window_close(&fab);
  free(zeros);
  free(back);
}

static void memset_on_fabric_memory_works(void **state) {
  struct sim_window fab;
  unsigned char *scratch = malloc(GRAN);
  assert_non_null(scratch);
  window_open(&fab, GRAN, hipMemHandleTypeFabric);
  fill_ones(fab.va, scratch);
  assert_hip_ok(mori_hipMemset(fab.va, 0, GRAN));
  assert_int_equal(dev_byte(fab.va), 0);
  assert_int_equal(dev_byte(fab.va + GRAN - 1), 0);
  window_close(&fab);
  free(scratch);
}

/* ---- import-fd-lifetime (rocm-systems #8304/#8440) ---- */

/* A handle imported from an fd of this process's own export: the sim's
 * import is the same whether the fd came by SCM_RIGHTS or not. */
static hipMemGenericAllocationHandle_t import_own(int *fd) {
  hipMemGenericAllocationHandle_t h = create(hipMemHandleTypePosixFileDescriptor), in = NULL;
  assert_hip_ok(mori_hipMemExportToShareableHandle(fd, h, hipMemHandleTypePosixFileDescriptor, 0));
  assert_hip_ok(mori_hipMemImportFromShareableHandle(&in, (void *)(intptr_t)*fd,
                                                     hipMemHandleTypePosixFileDescriptor));
  assert_hip_ok(mori_hipMemRelease(h)); /* the import holds the memory now */
  return in;
}

static void closing_the_received_fd_before_mapping_fails_map_and_access(void **state) {
  int fd = -1, fd2 = -1;
  unsigned char *va = NULL;
  hipMemAccessDesc rw = {{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtReadWrite};
  hipMemGenericAllocationHandle_t in = import_own(&fd), in2 = import_own(&fd2);
  assert_hip_ok(mori_hipMemAddressReserve((void **)&va, 2 * GRAN, 0, NULL, 0));
  assert_hip_ok(mori_hipMemMap(va + GRAN, GRAN, 0, in2, 0)); /* mapped while its fd is open */
  assert_int_equal(mori_close(fd), 0);
  assert_int_equal(mori_close(fd2), 0);
  int other = open("/dev/null", O_RDONLY); /* may take the same number: still not that fd */
  assert_fails_with(mori_hipMemMap(va, GRAN, 0, in, 0), hipErrorInvalidValue,
                    "quirk import-fd-lifetime");
  assert_fails_with(mori_hipMemSetAccess(va + GRAN, GRAN, &rw, 1), hipErrorInvalidValue,
                    "quirk import-fd-lifetime");
  assert_hip_ok(mori_hipMemUnmap(va + GRAN, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(va, 2 * GRAN));
  assert_hip_ok(mori_hipMemRelease(in));
  assert_hip_ok(mori_hipMemRelease(in2));
  close(other);
}

static void keeping_the_received_fd_until_the_release_works(void **state) {
  int fd = -1;
  unsigned char *va = NULL;
  hipMemAccessDesc rw = {{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtReadWrite};
  long before = handles_now();
  hipMemGenericAllocationHandle_t in = import_own(&fd);
  assert_hip_ok(mori_hipMemAddressReserve((void **)&va, GRAN, 0, NULL, 0));
  assert_hip_ok(mori_hipMemMap(va, GRAN, 0, in, 0));
  assert_hip_ok(mori_hipMemSetAccess(va, GRAN, &rw, 1));
  dev_set_byte(va, 1);
  assert_hip_ok(mori_hipMemUnmap(va, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
  assert_hip_ok(mori_hipMemRelease(in));
  assert_int_equal(mori_close(fd), 0); /* only after the release */
  assert_int_equal(handles_now(), before);
}

static void received_fd_may_close_right_after_the_import(void **state) {
  int fd = -1;
  unsigned char *va = NULL;
  hipMemAccessDesc rw = {{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtReadWrite};
  hipMemGenericAllocationHandle_t in = import_own(&fd);
  assert_int_equal(mori_close(fd), 0); /* the import holds a dup (the fixed ROCm) */
  assert_hip_ok(mori_hipMemAddressReserve((void **)&va, GRAN, 0, NULL, 0));
  assert_hip_ok(mori_hipMemMap(va, GRAN, 0, in, 0));
  assert_hip_ok(mori_hipMemSetAccess(va, GRAN, &rw, 1));
  assert_hip_ok(mori_hipMemUnmap(va, GRAN));
  assert_hip_ok(mori_hipMemAddressFree(va, GRAN));
  assert_hip_ok(mori_hipMemRelease(in));
}

/* ---- which tests run: a quirk's "on" tests when it is set, else "off" ---- */

#define CASE(fn) {#fn, fn}
static const struct quirk_case {
  const char *quirk;
  struct {
    const char *name;
    CMUnitTestFunction fn;
  } on[2], off[1];
} cases[] = {
    {"retain-no-ref",
     {CASE(retain_without_reference_turns_the_second_release_into_a_double_release)},
     {CASE(retain_takes_a_reference_so_both_releases_succeed)}},
    {"export-fd-lifetime",
     {CASE(closing_an_exported_fd_before_the_final_release_breaks_the_release),
      CASE(closing_exported_fds_after_the_final_release_is_safe)},
     {CASE(exported_fd_may_close_before_the_release)}},
    {"unmap-multi",
     {CASE(one_unmap_over_two_mappings_fails_and_leaves_the_reservation_unfreeable),
      CASE(unmapping_each_mapping_on_its_own_keeps_address_free_working)},
     {CASE(one_unmap_over_two_mappings_succeeds)}},
    {"memset-fabric",
     {CASE(memset_on_fabric_memory_fails_and_memcpy_zeroes_it_instead)},
     {CASE(memset_on_fabric_memory_works)}},
    {"import-fd-lifetime",
     {CASE(closing_the_received_fd_before_mapping_fails_map_and_access),
      CASE(keeping_the_received_fd_until_the_release_works)},
     {CASE(received_fd_may_close_right_after_the_import)}},
};

static int quirk_set(const char *setting, const char *quirk) {
  return strcmp(setting, "all") == 0 || strcmp(setting, quirk) == 0;
}

int main(int argc, char **argv) {
  struct CMUnitTest tests[16];
  size_t n = 0;
  if (argc != 2) {
    fprintf(stderr, "usage: %s none|all|<quirk>\n", argv[0]);
    return 2;
  }
  sim_start("gfx1250", argv[1], NULL);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int on = quirk_set(argv[1], cases[i].quirk);
    for (size_t j = 0; j < (on ? 2 : 1); j++) {
      const char *name = on ? cases[i].on[j].name : cases[i].off[j].name;
      if (name == NULL) continue;
      tests[n++] = (struct CMUnitTest){name, on ? cases[i].on[j].fn : cases[i].off[j].fn, NULL,
                                       NULL, NULL};
    }
  }
  return _cmocka_run_group_tests(argv[1], tests, n, NULL, NULL);
}
