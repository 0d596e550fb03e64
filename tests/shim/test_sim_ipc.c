/*
 * test_sim_ipc.c - the sim across processes: an allocation exported in this
 * process is imported and mapped by a fresh one (this program exec'd again),
 * by POSIX fd over SCM_RIGHTS or by fabric blob over a pipe; data and stream
 * memory operations cross in both directions.  Profile gfx1250 (fabric).
 */
#include "fd_pass.h"
#include "sim_test.h"

#include <errno.h>
#include <sys/socket.h>

#define WINDOW (2 * GRAN) /* granule 0: the exporter writes; granule 1: the importer */

static unsigned char pattern(size_t i, int seed) { return (unsigned char)(i * 131 + seed); }

/* Device memory is written and read by copies: the host cannot touch it. */
static hipError_t fill(unsigned char *dev, size_t n, int seed) {
  unsigned char *host = malloc(n);
  if (host == NULL) return hipErrorOutOfMemory;
  for (size_t i = 0; i < n; i++) host[i] = pattern(i, seed);
  hipError_t e = mori_hipMemcpy(dev, host, n, hipMemcpyHostToDevice);
  free(host);
  return e;
}

/* Index of the first byte of dev that differs from the pattern, or n (0
 * if it cannot be read back). */
static size_t first_mismatch(const unsigned char *dev, size_t n, int seed) {
  unsigned char *host = malloc(n);
  size_t i = 0;
  if (host != NULL && mori_hipMemcpy(host, dev, n, hipMemcpyDeviceToHost) == hipSuccess)
    while (i < n && host[i] == pattern(i, seed)) i++;
  free(host);
  return i;
}

static uint32_t word_of(const uint32_t *dev) {
  uint32_t v = 0xdeadbeef;
  assert_hip_ok(mori_hipMemcpy(&v, dev, 4, hipMemcpyDeviceToHost));
  return v;
}

/* ---- the importing process ("--import fd|fabric <channel> [handshake]") ---- */

#define CHILD_CHECK(cond, ...)                                                             \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      printf(__VA_ARGS__);                                                                 \
      printf(" [%s]\n", mori_shim_message());                                              \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

static hipError_t import_from(const char *how, int chan, hipMemGenericAllocationHandle_t *h) {
  if (strcmp(how, "fabric") == 0) {
    hipMemFabricHandle_t blob;
    if (read(chan, &blob, sizeof blob) != (ssize_t)sizeof blob) return hipErrorInvalidValue;
    return mori_hipMemImportFromShareableHandle(h, &blob, hipMemHandleTypeFabric);
  }
  int fd = test_recv_fd(chan);
  if (fd < 0) return hipErrorInvalidValue;
  hipError_t e = mori_hipMemImportFromShareableHandle(h, (void *)(intptr_t)fd,
                                                      hipMemHandleTypePosixFileDescriptor);
  close(fd); /* a received fd is ours to close; the import keeps its own */
  return e;
}

/* Handshake over the shared words at the start of granule 1: the importer
 * says it is ready, waits for the exporter's go, then answers. */
static int handshake(uint32_t *words) {
  CHILD_CHECK(mori_hipStreamWriteValue32(NULL, &words[0], 1, 0) == hipSuccess, "write ready");
  CHILD_CHECK(mori_hipStreamWaitValue32(NULL, &words[1], 7, hipStreamWaitValueGte, ~0u) ==
                  hipSuccess, "wait go");
  CHILD_CHECK(mori_hipStreamWriteValue32(NULL, &words[2], 8, 0) == hipSuccess, "write answer");
  return 0;
}

static int importer(const char *how, int chan, int with_handshake) {
  hipMemGenericAllocationHandle_t h = NULL;
  hipMemAccessDesc rw = sim_access(hipMemAccessFlagsProtReadWrite);
  unsigned char *va = NULL;
  CHILD_CHECK(mori_shim_select("sim") == 0, "select");
  CHILD_CHECK(import_from(how, chan, &h) == hipSuccess, "import %s", how);
  CHILD_CHECK(mori_hipMemAddressReserve((void **)&va, WINDOW, 0, NULL, 0) == hipSuccess, "reserve");
  CHILD_CHECK(mori_hipMemMap(va, WINDOW, 0, h, 0) == hipSuccess, "map");
  CHILD_CHECK(mori_hipMemSetAccess(va, WINDOW, &rw, 1) == hipSuccess, "set access");
  size_t bad = first_mismatch(va, GRAN, 1);
  CHILD_CHECK(bad == GRAN, "exporter's data differs at byte %zu", bad);
  if (with_handshake && handshake((uint32_t *)(va + GRAN)) != 0) return 1;
  if (!with_handshake)
    CHILD_CHECK(fill(va + GRAN, GRAN, 2) == hipSuccess, "write the importer's data");
  CHILD_CHECK(mori_hipMemUnmap(va, WINDOW) == hipSuccess, "unmap");
  CHILD_CHECK(mori_hipMemAddressFree(va, WINDOW) == hipSuccess, "address free");
  CHILD_CHECK(mori_hipMemRelease(h) == hipSuccess, "release");
  CHILD_CHECK(mori_shim_registry_report(stdout) == 0, "importer leaked");
  return 0;
}

/* "--export-fabric <pipe>": exports a fabric blob, sends it, exits at once. */
static int exporter_that_exits(int chan) {
  hipMemAllocationProp prop = sim_prop(hipMemHandleTypeFabric);
  hipMemGenericAllocationHandle_t h = NULL;
  hipMemFabricHandle_t blob;
  CHILD_CHECK(mori_shim_select("sim") == 0, "select");
  CHILD_CHECK(mori_hipMemCreate(&h, GRAN, &prop, 0) == hipSuccess, "create");
  CHILD_CHECK(mori_hipMemExportToShareableHandle(&blob, h, hipMemHandleTypeFabric, 0) == hipSuccess,
              "export");
  CHILD_CHECK(write(chan, &blob, sizeof blob) == (ssize_t)sizeof blob, "write blob");
  return 0;
}

/* ---- the exporting side: the tests ---- */

static struct self_child spawn_importer(const char *how, int chan, int with_handshake) {
  char chan_arg[16];
  snprintf(chan_arg, sizeof chan_arg, "%d", chan);
  char *args[] = {"--import", (char *)how, chan_arg, with_handshake ? "handshake" : NULL, NULL};
  return self_spawn(NULL, args);
}

static void expect_child_success(struct self_child c) {
  char out[4096];
  int rc = self_reap(c, out, sizeof out);
  if (rc != 0) fail_msg("importer exited %d: %s", rc, out);
  assert_contains(out, "mori shim registry: 0 leaks");
}

static void posix_fd_shares_memory_with_another_process(void **state) {
  struct sim_window w;
  int fd = -1, sv[2];
  window_open(&w, WINDOW, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(fill(w.va, GRAN, 1));
  assert_hip_ok(
      mori_hipMemExportToShareableHandle(&fd, w.handle, hipMemHandleTypePosixFileDescriptor, 0));
  assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
  assert_int_equal(test_send_fd(sv[0], fd), 0);
  expect_child_success(spawn_importer("fd", sv[1], 0));
  assert_int_equal(first_mismatch(w.va + GRAN, GRAN, 2), GRAN); /* the importer's writes */
  window_close(&w);
  assert_int_equal(mori_close(fd), 0);
  close(sv[0]);
  close(sv[1]);
}

static void fabric_blob_shares_memory_with_another_process(void **state) {
  struct sim_window w;
  hipMemFabricHandle_t blob;
  int p[2];
  window_open(&w, WINDOW, hipMemHandleTypeFabric);
  assert_hip_ok(fill(w.va, GRAN, 1));
  assert_hip_ok(mori_hipMemExportToShareableHandle(&blob, w.handle, hipMemHandleTypeFabric, 0));
  assert_int_equal(pipe(p), 0);
  assert_int_equal(write(p[1], &blob, sizeof blob), sizeof blob);
  expect_child_success(spawn_importer("fabric", p[0], 0));
  assert_int_equal(first_mismatch(w.va + GRAN, GRAN, 2), GRAN);
  window_close(&w);
  close(p[0]);
  close(p[1]);
}

static void stream_memops_synchronise_two_processes(void **state) {
  struct sim_window w;
  int fd = -1, sv[2];
  window_open(&w, WINDOW, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(fill(w.va, GRAN, 1));
  uint32_t *words = (uint32_t *)(w.va + GRAN);
  assert_hip_ok(
      mori_hipMemExportToShareableHandle(&fd, w.handle, hipMemHandleTypePosixFileDescriptor, 0));
  assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
  assert_int_equal(test_send_fd(sv[0], fd), 0);
  struct self_child c = spawn_importer("fd", sv[1], 1);
  assert_hip_ok(mori_hipStreamWaitValue32(NULL, &words[0], 1, hipStreamWaitValueEq, ~0u));
  assert_int_equal(word_of(&words[2]), 0); /* the importer has not answered before the go */
  assert_hip_ok(mori_hipStreamWriteValue32(NULL, &words[1], 7, 0));
  assert_hip_ok(mori_hipStreamWaitValue32(NULL, &words[2], 8, hipStreamWaitValueGte, ~0u));
  expect_child_success(c);
  window_close(&w);
  assert_int_equal(mori_close(fd), 0);
  close(sv[0]);
  close(sv[1]);
}

static void fabric_blob_of_an_exited_process_does_not_import(void **state) {
  hipMemGenericAllocationHandle_t h = NULL;
  hipMemFabricHandle_t blob;
  char out[1024], chan_arg[16];
  int p[2];
  assert_int_equal(pipe(p), 0);
  snprintf(chan_arg, sizeof chan_arg, "%d", p[1]);
  char *args[] = {"--export-fabric", chan_arg, NULL};
  assert_int_equal(run_self(NULL, args, out, sizeof out), 0);
  assert_int_equal(read(p[0], &blob, sizeof blob), sizeof blob);
  assert_fails_with(mori_hipMemImportFromShareableHandle(&h, &blob, hipMemHandleTypeFabric),
                    hipErrorInvalidValue, "exporter gone or allocation released");
  close(p[0]);
  close(p[1]);
}

static void tampered_or_released_fabric_blobs_do_not_import(void **state) {
  hipMemAllocationProp prop = sim_prop(hipMemHandleTypeFabric);
  hipMemGenericAllocationHandle_t h = NULL, imported = NULL;
  hipMemFabricHandle_t blob, forged;
  assert_hip_ok(mori_hipMemCreate(&h, GRAN, &prop, 0));
  assert_hip_ok(mori_hipMemExportToShareableHandle(&blob, h, hipMemHandleTypeFabric, 0));
  forged = blob;
  forged.data[32] ^= 1; /* the allocation id */
  assert_fails_with(
      mori_hipMemImportFromShareableHandle(&imported, &forged, hipMemHandleTypeFabric),
      hipErrorInvalidValue, "names a different allocation than the fabric handle");
  forged = blob;
  forged.data[0] ^= 1; /* the magic */
  assert_fails_with(
      mori_hipMemImportFromShareableHandle(&imported, &forged, hipMemHandleTypeFabric),
      hipErrorInvalidValue, "not a sim fabric handle");
  assert_hip_ok(mori_hipMemImportFromShareableHandle(&imported, &blob, hipMemHandleTypeFabric));
  assert_hip_ok(mori_hipMemRelease(imported));
  assert_hip_ok(mori_hipMemRelease(h));
  assert_fails_with(mori_hipMemImportFromShareableHandle(&imported, &blob, hipMemHandleTypeFabric),
                    hipErrorInvalidValue, "shareable handle does not name a live sim allocation");
}

int main(int argc, char **argv) {
  self_exe = argv[0];
  if (argc >= 4 && strcmp(argv[1], "--import") == 0)
    return importer(argv[2], atoi(argv[3]), argc > 4);
  if (argc >= 3 && strcmp(argv[1], "--export-fabric") == 0)
    return exporter_that_exits(atoi(argv[2]));
  sim_start("gfx1250", NULL, NULL); /* children inherit the profile */
#define T(name) cmocka_unit_test_teardown(name, expect_no_leaks)
  const struct CMUnitTest tests[] = {
      T(posix_fd_shares_memory_with_another_process),
      T(fabric_blob_shares_memory_with_another_process),
      T(stream_memops_synchronise_two_processes),
      T(fabric_blob_of_an_exited_process_does_not_import),
      T(tampered_or_released_fabric_blobs_do_not_import),
  };
  return cmocka_run_group_tests_name("sim_ipc", tests, NULL, NULL);
}
