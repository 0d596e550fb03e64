/*
 * hipstub_test.c - the scenario every real-runtime backend must pass: a
 * POSIX-fd window created here, its fd carried by SCM_RIGHTS to another
 * process that imports, maps, reads, writes and signals, and both sides
 * torn down to an empty ledger; and the same for a fabric window, its blob
 * carried as plain bytes, where the backend's runtime can export one.
 */
#include "hipstub_test.h"

#define PATTERN_BYTES 4096

size_t hipstub_granularity(hipMemAllocationHandleType type) {
  hipMemAllocationProp prop = hipstub_prop(type, 0);
  size_t gran = 0;
  assert_int_equal(
      mori_hipMemGetAllocationGranularity(&gran, &prop, hipMemAllocationGranularityRecommended),
      hipSuccess);
  assert_true(gran > 0);
  return gran;
}

void hipstub_fill_pattern(unsigned char *buf, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(i * 131u + seed);
}

/* The importing process: no cmocka here, only CHILD_CHECK. */
static void child_import_and_reply(int sock, size_t size) {
  hipMemGenericAllocationHandle_t h = NULL;
  hipMemAccessDesc rw = hipstub_rw(0);
  unsigned char got[PATTERN_BYTES], want[PATTERN_BYTES];
  void *va = NULL;
  int fd = test_recv_fd(sock);
  CHILD_CHECK(fd > 0);
  /* The shim's convention whatever the runtime: the fd by value. */
  CHILD_CHECK(mori_hipMemImportFromShareableHandle(&h, (void *)(intptr_t)fd,
                                                   hipMemHandleTypePosixFileDescriptor) ==
              hipSuccess);
  CHILD_CHECK(mori_hipMemAddressReserve(&va, size, 0, NULL, 0) == hipSuccess);
  CHILD_CHECK(mori_hipMemMap(va, size, 0, h, 0) == hipSuccess);
  CHILD_CHECK(mori_hipMemSetAccess(va, size, &rw, 1) == hipSuccess);
  CHILD_CHECK(mori_hipMemcpy(got, va, sizeof got, hipMemcpyDeviceToHost) == hipSuccess);
  hipstub_fill_pattern(want, sizeof want, 7);
  CHILD_CHECK(memcmp(got, want, sizeof got) == 0);
  hipstub_fill_pattern(want, sizeof want, 99);
  CHILD_CHECK(mori_hipMemcpy((char *)va + size / 2, want, sizeof want, hipMemcpyHostToDevice) ==
              hipSuccess);
  CHILD_CHECK(mori_hipStreamWriteValue32(NULL, (char *)va + size - 4, 1, 0) == hipSuccess);
  CHILD_CHECK(mori_hipStreamSynchronize(NULL) == hipSuccess);
  CHILD_CHECK(mori_hipMemUnmap(va, size) == hipSuccess);
  CHILD_CHECK(mori_hipMemAddressFree(va, size) == hipSuccess);
  CHILD_CHECK(mori_hipMemRelease(h) == hipSuccess);
  CHILD_CHECK(close(fd) == 0);
  CHILD_CHECK(mori_shim_registry_total() == 0);
  _exit(0);
}

void hipstub_share_posix_window(void) {
  size_t size = hipstub_granularity(hipMemHandleTypePosixFileDescriptor);
  hipMemAllocationProp prop = hipstub_prop(hipMemHandleTypePosixFileDescriptor, 0);
  hipMemAccessDesc rw = hipstub_rw(0);
  hipMemGenericAllocationHandle_t h = NULL;
  unsigned char buf[PATTERN_BYTES], want[PATTERN_BYTES];
  void *va = NULL;
  int sv[2], fd = -1;

  /* The importer starts before anything exists, as a peer rank would. */
  assert_int_equal(mori_shim_registry_total(), 0);
  assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(sv[0]);
    child_import_and_reply(sv[1], size);
  }
  close(sv[1]);

  assert_int_equal(mori_hipMemCreate(&h, size, &prop, 0), hipSuccess);
  assert_int_equal(mori_hipMemAddressReserve(&va, size, 0, NULL, 0), hipSuccess);
  assert_int_equal(mori_hipMemMap(va, size, 0, h, 0), hipSuccess);
  assert_int_equal(mori_hipMemSetAccess(va, size, &rw, 1), hipSuccess);
  assert_int_equal(mori_hipMemset(va, 0, size), hipSuccess);
  hipstub_fill_pattern(buf, sizeof buf, 7);
  assert_int_equal(mori_hipMemcpy(va, buf, sizeof buf, hipMemcpyHostToDevice), hipSuccess);
  assert_int_equal(mori_hipMemExportToShareableHandle(&fd, h, hipMemHandleTypePosixFileDescriptor,
                                                      0),
                   hipSuccess);
  assert_true(fd >= 0);
  assert_int_equal(test_send_fd(sv[0], fd), 0);
  hipstub_assert_child_ok(pid);
  close(sv[0]);

  /* What the other process wrote is here, through the same memory. */
  assert_int_equal(mori_hipStreamWaitValue32(NULL, (char *)va + size - 4, 1,
                                             hipStreamWaitValueGte, 0xFFFFFFFFu),
                   hipSuccess);
  assert_int_equal(mori_hipMemcpy(buf, (char *)va + size / 2, sizeof buf, hipMemcpyDeviceToHost),
                   hipSuccess);
  hipstub_fill_pattern(want, sizeof want, 99);
  assert_memory_equal(buf, want, sizeof buf);

  /* Teardown in the design's order: the exported fd closes last. */
  assert_int_equal(mori_hipMemUnmap(va, size), hipSuccess);
  assert_int_equal(mori_hipMemAddressFree(va, size), hipSuccess);
  assert_int_equal(mori_hipMemRelease(h), hipSuccess);
  assert_int_equal(mori_close(fd), 0);
  assert_int_equal(mori_shim_registry_total(), 0);
}

/* The importer of a fabric window: receives the blob as plain bytes, maps
 * the allocation it names and checks the pattern the exporter wrote. */
static void child_import_fabric(int from_parent, size_t size, size_t bytes, unsigned seed) {
  hipMemGenericAllocationHandle_t h = NULL;
  hipMemAccessDesc rw = hipstub_rw(0);
  hipMemFabricHandle_t blob;
  unsigned char got[PATTERN_BYTES], want[PATTERN_BYTES];
  void *va = NULL;
  CHILD_CHECK(bytes <= PATTERN_BYTES);
  CHILD_CHECK(read(from_parent, &blob, sizeof blob) == (ssize_t)sizeof blob);
  CHILD_CHECK(mori_hipMemImportFromShareableHandle(&h, &blob, hipMemHandleTypeFabric) ==
              hipSuccess);
  CHILD_CHECK(mori_hipMemAddressReserve(&va, size, 0, NULL, 0) == hipSuccess);
  CHILD_CHECK(mori_hipMemMap(va, size, 0, h, 0) == hipSuccess);
  CHILD_CHECK(mori_hipMemSetAccess(va, size, &rw, 1) == hipSuccess);
  CHILD_CHECK(mori_hipMemcpy(got, va, bytes, hipMemcpyDeviceToHost) == hipSuccess);
  hipstub_fill_pattern(want, bytes, seed);
  CHILD_CHECK(memcmp(got, want, bytes) == 0);
  CHILD_CHECK(mori_hipMemUnmap(va, size) == hipSuccess);
  CHILD_CHECK(mori_hipMemAddressFree(va, size) == hipSuccess);
  CHILD_CHECK(mori_hipMemRelease(h) == hipSuccess);
  CHILD_CHECK(mori_shim_registry_total() == 0);
  _exit(0);
}

void hipstub_share_fabric_window(size_t bytes, unsigned seed) {
  size_t size = hipstub_granularity(hipMemHandleTypeFabric);
  hipMemAllocationProp prop = hipstub_prop(hipMemHandleTypeFabric, 0);
  hipMemAccessDesc rw = hipstub_rw(0);
  hipMemGenericAllocationHandle_t h = NULL;
  hipMemFabricHandle_t blob;
  unsigned char buf[PATTERN_BYTES];
  void *va = NULL;
  int pipefd[2];

  assert_true(bytes <= sizeof buf);
  /* The importer starts before anything exists, as a peer rank would. */
  assert_int_equal(mori_shim_registry_total(), 0);
  assert_int_equal(pipe(pipefd), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(pipefd[1]);
    child_import_fabric(pipefd[0], size, bytes, seed);
  }
  close(pipefd[0]);

  assert_int_equal(mori_hipMemCreate(&h, size, &prop, 0), hipSuccess);
  assert_int_equal(mori_hipMemAddressReserve(&va, size, 0, NULL, 0), hipSuccess);
  assert_int_equal(mori_hipMemMap(va, size, 0, h, 0), hipSuccess);
  assert_int_equal(mori_hipMemSetAccess(va, size, &rw, 1), hipSuccess);
  hipstub_fill_pattern(buf, bytes, seed);
  assert_int_equal(mori_hipMemcpy(va, buf, bytes, hipMemcpyHostToDevice), hipSuccess);
  assert_int_equal(mori_hipMemExportToShareableHandle(&blob, h, hipMemHandleTypeFabric, 0),
                   hipSuccess);
  assert_int_equal(write(pipefd[1], &blob, sizeof blob), (ssize_t)sizeof blob);
  close(pipefd[1]);
  hipstub_assert_child_ok(pid);

  assert_int_equal(mori_hipMemUnmap(va, size), hipSuccess);
  assert_int_equal(mori_hipMemAddressFree(va, size), hipSuccess);
  assert_int_equal(mori_hipMemRelease(h), hipSuccess);
  assert_int_equal(mori_shim_registry_total(), 0);
}
