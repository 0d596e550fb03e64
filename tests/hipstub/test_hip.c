/*
 * test_hip.c - the shim's hip backend over libamdhip64_standin.so:
 * the whole VMM lifecycle across two processes, the fd import ABI of the
 * ROCm version the runtime claims (MORI_STANDIN_HIP_VERSION), errors and
 * the runtime's sticky error.  ctest runs it once per side of ROCm 7.1.
 */
#include "hipstub_test.h"

#include <dlfcn.h>
#include <fcntl.h>

#define FD_BY_VALUE_SINCE 70100000

static int claimed_version(void) {
  const char *v = getenv("MORI_STANDIN_HIP_VERSION");
  return v != NULL && *v != '\0' ? atoi(v) : FD_BY_VALUE_SINCE;
}

/* ---- tests ---- */

/* Loading ahead opens the runtime and resolves its symbols, and calls
 * nothing in it, not even hipRuntimeGetVersion (which may bring ROCm
 * up): the stand-in counts every call it answers.  The bring-up then
 * judges the version and starts it. */
static void loading_ahead_resolves_the_runtime_and_calls_nothing(void **state) {
  assert_int_equal(mori_shim_load("hip"), 0);
  void *lib = dlopen(getenv("MORI_SYMM_HIP_LIB"), RTLD_NOW | RTLD_NOLOAD);
  assert_non_null(lib);
  long (*calls)(void) = (long (*)(void))dlsym(lib, "hipStandinCalls");
  assert_non_null(calls);
  dlclose(lib); /* the shim still holds it */
  assert_int_equal(calls(), 0);
  assert_string_equal(mori_shim_backend(), "hip");
  assert_true(calls() >= 2); /* hipRuntimeGetVersion, hipInit, ... */
}

static void backend_reports_the_version_the_runtime_claims(void **state) {
  int version = 0;
  assert_string_equal(mori_shim_backend(), "hip");
  assert_int_equal(mori_hipRuntimeGetVersion(&version), hipSuccess);
  assert_int_equal(version, claimed_version());
  assert_int_equal(mori_shim_runtime_version(), claimed_version());
}

static void posix_fd_window_is_shared_with_another_process_and_torn_down_without_leaks(
    void **state) {
  hipstub_share_posix_window();
}

/* Runs an import of fd with stderr captured into err. */
static hipError_t import_capturing_stderr(int fd, hipMemGenericAllocationHandle_t *h, char *err,
                                          size_t errlen) {
  FILE *tmp = tmpfile();
  assert_non_null(tmp);
  fflush(stderr);
  int saved = dup(2);
  assert_true(saved >= 0);
  assert_true(dup2(fileno(tmp), 2) >= 0);
  hipError_t e =
      mori_hipMemImportFromShareableHandle(h, (void *)(intptr_t)fd, hipMemHandleTypePosixFileDescriptor);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  size_t n = fread(err, 1, errlen - 1, tmp);
  err[n] = '\0';
  fclose(tmp);
  return e;
}

/* The backend decided the ABI from the version at bring-up; a runtime that
 * now claims the other side of 7.1 must reject the call, loudly. */
static void import_under_the_other_rocm_abi_fails_loudly(void **state) {
  size_t size = hipstub_granularity(hipMemHandleTypePosixFileDescriptor);
  hipMemAllocationProp prop = hipstub_prop(hipMemHandleTypePosixFileDescriptor, 0);
  hipMemGenericAllocationHandle_t h = NULL, imported = NULL;
  char err[512], version[16];
  int fd = -1;
  int other = claimed_version() >= FD_BY_VALUE_SINCE ? 60400000 : FD_BY_VALUE_SINCE;

  assert_int_equal(mori_hipMemCreate(&h, size, &prop, 0), hipSuccess);
  assert_int_equal(mori_hipMemExportToShareableHandle(&fd, h, hipMemHandleTypePosixFileDescriptor,
                                                      0),
                   hipSuccess);
  long handles_before = mori_shim_registry_total();

  snprintf(version, sizeof version, "%d", claimed_version());
  char other_version[16];
  snprintf(other_version, sizeof other_version, "%d", other);
  setenv("MORI_STANDIN_HIP_VERSION", other_version, 1);
  hipError_t e = import_capturing_stderr(fd, &imported, err, sizeof err);
  setenv("MORI_STANDIN_HIP_VERSION", version, 1);

  assert_int_equal(e, hipErrorInvalidValue);
  assert_string_equal(mori_shim_message(),
                      "hipMemImportFromShareableHandle: hipErrorInvalidValue (1)");
  assert_contains(err, "standin: import ABI mismatch");
  assert_int_equal(mori_shim_registry_total(), handles_before);

  /* The same call under the version the backend saw works. */
  e = import_capturing_stderr(fd, &imported, err, sizeof err);
  assert_int_equal(e, hipSuccess);
  assert_string_equal(err, "");
  assert_int_equal(mori_hipMemRelease(imported), hipSuccess);
  assert_int_equal(mori_hipMemRelease(h), hipSuccess);
  assert_int_equal(mori_close(fd), 0);
  assert_int_equal(mori_shim_registry_total(), 0);
}

/* fd 0 by value would be a null osHandle, which ROCm >= 7.1 rejects; by
 * pointer (older ROCm) it is an fd like any other. */
static void fd_zero_imports_only_where_it_travels_by_pointer(void **state) {
  size_t size = hipstub_granularity(hipMemHandleTypePosixFileDescriptor);
  hipMemAllocationProp prop = hipstub_prop(hipMemHandleTypePosixFileDescriptor, 0);
  hipMemGenericAllocationHandle_t h = NULL, imported = NULL;
  int fd = -1;

  assert_int_equal(mori_hipMemCreate(&h, size, &prop, 0), hipSuccess);
  assert_int_equal(mori_hipMemExportToShareableHandle(&fd, h, hipMemHandleTypePosixFileDescriptor,
                                                      0),
                   hipSuccess);
  int saved_stdin = dup(0);
  assert_true(saved_stdin >= 0);
  assert_true(dup2(fd, 0) == 0);
  hipError_t e = mori_hipMemImportFromShareableHandle(&imported, (void *)(intptr_t)0,
                                                      hipMemHandleTypePosixFileDescriptor);
  dup2(saved_stdin, 0);
  close(saved_stdin);

  if (claimed_version() >= FD_BY_VALUE_SINCE) {
    assert_int_equal(e, hipErrorInvalidValue);
    assert_contains(mori_shim_message(), "hipMemImportFromShareableHandle: fd 0");
  } else {
    assert_int_equal(e, hipSuccess);
    assert_int_equal(mori_hipMemRelease(imported), hipSuccess);
  }
  assert_int_equal(mori_hipMemRelease(h), hipSuccess);
  assert_int_equal(mori_close(fd), 0);
  assert_int_equal(mori_shim_registry_total(), 0);
}

static void failing_call_returns_the_runtime_error_and_names_the_call(void **state) {
  size_t size = hipstub_granularity(hipMemHandleTypePosixFileDescriptor);
  hipMemAllocationProp prop = hipstub_prop(hipMemHandleTypePosixFileDescriptor, 0);
  hipMemGenericAllocationHandle_t h = NULL;
  void *va = NULL;

  assert_int_equal(mori_hipMemCreate(&h, size, &prop, 0), hipSuccess);
  assert_int_equal(mori_hipMemAddressReserve(&va, size, 0, NULL, 0), hipSuccess);
  /* HIP's contract: the map offset must be 0. */
  assert_int_equal(mori_hipMemMap(va, size, 4096, h, 0), hipErrorInvalidValue);
  assert_string_equal(mori_shim_message(), "hipMemMap: hipErrorInvalidValue (1)");
  assert_int_equal(mori_hipGetLastError(), hipErrorInvalidValue);
  assert_int_equal(mori_hipGetLastError(), hipSuccess);

  assert_int_equal(mori_hipSetDevice(1 << 20), hipErrorInvalidDevice);
  assert_string_equal(mori_shim_message(), "hipSetDevice: hipErrorInvalidDevice (101)");

  /* A failed call acquired nothing: the ledger holds what succeeded. */
  mori_shim_registry_counts c;
  mori_shim_registry(&c);
  assert_int_equal(c.handles, 1);
  assert_int_equal(c.reservations, 1);
  assert_int_equal(c.mappings, 0);
  assert_int_equal(mori_hipMemAddressFree(va, size), hipSuccess);
  assert_int_equal(mori_hipMemRelease(h), hipSuccess);
  assert_int_equal(mori_hipMemRelease(h), hipErrorInvalidValue);
  assert_string_equal(mori_shim_message(), "hipMemRelease: hipErrorInvalidValue (1)");
  assert_int_equal(mori_shim_registry_total(), 0);
}

static void get_last_error_also_clears_the_runtime_sticky_error(void **state) {
  void *lib = dlopen(getenv("MORI_SYMM_HIP_LIB"), RTLD_NOW | RTLD_NOLOAD);
  assert_non_null(lib);
  hipError_t (*runtime_last_error)(void);
  *(void **)&runtime_last_error = dlsym(lib, "hipGetLastError");
  assert_non_null(runtime_last_error);

  /* The runtime keeps the failure until someone reads it... */
  assert_int_equal(mori_hipSetDevice(-1), hipErrorInvalidDevice);
  assert_int_equal(runtime_last_error(), hipErrorInvalidDevice);
  assert_int_equal(runtime_last_error(), hipSuccess);
  /* ...and the shim's hipGetLastError reads it there too. */
  assert_int_equal(mori_hipSetDevice(-1), hipErrorInvalidDevice);
  assert_int_equal(mori_hipGetLastError(), hipErrorInvalidDevice);
  assert_int_equal(runtime_last_error(), hipSuccess);
  dlclose(lib);
}

static void device_calls_reach_the_runtime(void **state) {
  int count = 0, device = -1, value = -1;
  assert_int_equal(mori_hipGetDeviceCount(&count), hipSuccess);
  assert_true(count >= 4);
  assert_int_equal(mori_hipSetDevice(3), hipSuccess);
  assert_int_equal(mori_hipGetDevice(&device), hipSuccess);
  assert_int_equal(device, 3);
  assert_int_equal(mori_hipSetDevice(0), hipSuccess);
  assert_int_equal(mori_hipDeviceSynchronize(), hipSuccess);

  /* The sim puts device d on PCI bus d, device 0: parsed from the bus id. */
  assert_int_equal(mori_hipDeviceGetAttribute(&value, moriDeviceAttributePciBusId, 3), hipSuccess);
  assert_int_equal(value, 3);
  assert_int_equal(mori_hipDeviceGetAttribute(&value, moriDeviceAttributePciDeviceId, 3),
                   hipSuccess);
  assert_int_equal(value, 0);
  assert_int_equal(
      mori_hipDeviceGetAttribute(&value, moriDeviceAttributeVirtualMemoryManagementSupported, 0),
      hipSuccess);
  assert_int_equal(value, 1);
  assert_int_equal(mori_hipDeviceGetAttribute(&value, moriDeviceAttributePciBusId, count),
                   hipErrorInvalidDevice);
  /* No stable ROCm attribute says it: the probe decides, not a guess. */
  assert_int_equal(mori_hipDeviceGetAttribute(&value, moriDeviceAttributeFabricHandleSupported, 0),
                   hipErrorNotSupported);
  assert_contains(mori_shim_message(), "hipDeviceGetAttribute");
}

static void device_allocation_and_memops_pass_through(void **state) {
  void *p = NULL;
  uint32_t word = 0;
  assert_int_equal(mori_hipMalloc(&p, 64), hipSuccess);
  assert_non_null(p);
  assert_int_equal(mori_hipMemset(p, 0, 64), hipSuccess);
  assert_int_equal(mori_hipStreamWriteValue32(NULL, p, 5, 0), hipSuccess);
  assert_int_equal(mori_hipStreamWaitValue32(NULL, p, 5, hipStreamWaitValueEq, 0xFFFFFFFFu),
                   hipSuccess);
  assert_int_equal(mori_hipStreamWaitValue32(NULL, p, 4, hipStreamWaitValueGte, 0xFFFFFFFFu),
                   hipSuccess);
  assert_int_equal(mori_hipMemcpy(&word, p, sizeof word, hipMemcpyDeviceToHost), hipSuccess);
  assert_int_equal(word, 5);
  mori_shim_registry_counts c;
  mori_shim_registry(&c);
  assert_int_equal(c.device_allocs, 1);
  assert_int_equal(mori_hipFree(p), hipSuccess);
  assert_int_equal(mori_shim_registry_total(), 0);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(loading_ahead_resolves_the_runtime_and_calls_nothing),
      cmocka_unit_test(backend_reports_the_version_the_runtime_claims),
      cmocka_unit_test(posix_fd_window_is_shared_with_another_process_and_torn_down_without_leaks),
      cmocka_unit_test(import_under_the_other_rocm_abi_fails_loudly),
      cmocka_unit_test(fd_zero_imports_only_where_it_travels_by_pointer),
      cmocka_unit_test(failing_call_returns_the_runtime_error_and_names_the_call),
      cmocka_unit_test(get_last_error_also_clears_the_runtime_sticky_error),
      cmocka_unit_test(device_calls_reach_the_runtime),
      cmocka_unit_test(device_allocation_and_memops_pass_through),
  };
  return mori_run_tests(argc, argv, tests);
}
