/*
 * test_cuda.c - the shim's cuda backend over libcuda_standin.so: the whole
 * VMM lifecycle across two processes, primary contexts per thread, the
 * translation of HIP's types and values to CUDA's, and CUresult errors
 * mapped to hipError_t with the CUDA name kept in the message.
 */
#include "hipstub_test.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#define SIM_DEVICES 8 /* the sim's default MORI_SIM_DEVICES */

static int imex_domain(void) {
  const char *v = getenv("MORI_STANDIN_CUDA_IMEX");
  return v != NULL && strcmp(v, "1") == 0;
}

/* A driver entry point, called directly to look behind the backend. */
static void *driver_symbol(const char *name) {
  void *lib = dlopen(getenv("MORI_SYMM_CUDA_LIB"), RTLD_NOW | RTLD_NOLOAD);
  assert_non_null(lib);
  void *sym = dlsym(lib, name);
  assert_non_null(sym);
  dlclose(lib); /* the shim still holds it */
  return sym;
}

/* Loading ahead resolves the driver and calls nothing in it: the
 * stand-in, like the driver, answers every call but cuInit's few with
 * CUDA_ERROR_NOT_INITIALIZED until cuInit; the bring-up after it then
 * starts the driver.  A name that is no backend is refused, named; once a
 * backend is up, a load is a no-op. */
static void loading_ahead_resolves_the_driver_and_calls_nothing(void **state) {
  typedef int (*count_fn)(int *); /* CUresult cuDeviceGetCount(int *) */
  int n = -1;
  assert_int_equal(mori_shim_load("cuda"), 0);
  assert_int_equal(mori_shim_load("cuda"), 0); /* loaded once */
  count_fn count = (count_fn)driver_symbol("cuDeviceGetCount");
  assert_int_equal(count(&n), 3); /* CUDA_ERROR_NOT_INITIALIZED */
  assert_int_equal(mori_shim_load("nope"), -1);
  assert_non_null(strstr(mori_shim_message(), "unknown shim backend 'nope'"));
  assert_string_equal(mori_shim_backend(), "cuda");
  assert_int_equal(count(&n), 0);
  assert_int_equal(n, SIM_DEVICES);
  assert_int_equal(mori_shim_load("nope"), 0); /* a backend is up: nothing to load */
}

static void backend_is_cuda_and_reports_the_driver_version(void **state) {
  int version = 0;
  assert_string_equal(mori_shim_backend(), "cuda");
  assert_int_equal(mori_hipRuntimeGetVersion(&version), hipSuccess);
  assert_int_equal(version, 13000);
}

static void posix_fd_window_is_shared_with_another_process_and_torn_down_without_leaks(
    void **state) {
  hipstub_share_posix_window();
}

/* ---- fabric: NOT_PERMITTED without IMEX, as on the H200 host ---- */

/* Whether the folder the backend looks in for IMEX channels
 * (MORI_SYMM_IMEX_CHANNELS: the tests' fixtures, imex-one with channel0 and
 * the empty imex-none) holds one. */
static int imex_channel_fixture(void) {
  const char *dir = getenv("MORI_SYMM_IMEX_CHANNELS");
  char path[512];
  if (dir == NULL) return 0;
  snprintf(path, sizeof path, "%s/channel0", dir);
  return access(path, R_OK | W_OK) == 0;
}

static void fabric_handle_needs_an_imex_domain(void **state) {
  if (!imex_channel_fixture()) {
    /* No channel: refused as the driver refuses, without asking it (the
     * stand-in under MORI_STANDIN_CUDA_IMEX=1 would have created it). */
    size_t size = hipstub_granularity(hipMemHandleTypeFabric);
    hipMemAllocationProp prop = hipstub_prop(hipMemHandleTypeFabric, 0);
    hipMemGenericAllocationHandle_t h = NULL;
    assert_int_equal(mori_hipMemCreate(&h, size, &prop, 0), hipErrorNotSupported);
    assert_non_null(strstr(mori_shim_message(), "a fabric handle needs an IMEX channel and "));
    assert_non_null(strstr(mori_shim_message(), "without asking the driver"));
    assert_int_equal(mori_shim_registry_total(), 0);
    /* and a POSIX fd handle is not the channel's business */
    hipstub_share_posix_window();
    return;
  }
  if (imex_domain()) {
    hipstub_share_fabric_window(256, 5);
    return;
  }
  size_t size = hipstub_granularity(hipMemHandleTypeFabric);
  hipMemAllocationProp prop = hipstub_prop(hipMemHandleTypeFabric, 0);
  hipMemGenericAllocationHandle_t h = NULL;
  assert_int_equal(mori_hipMemCreate(&h, size, &prop, 0), hipErrorNotSupported);
  assert_string_equal(mori_shim_message(), "cuMemCreate: CUDA_ERROR_NOT_PERMITTED (800)");
  assert_int_equal(mori_shim_registry_total(), 0);
}

/* ---- contexts ---- */

typedef unsigned int (*cu_alloc_fn)(unsigned long long *ptr, size_t size);
typedef unsigned int (*cu_ctx_get_fn)(void **ctx);
typedef unsigned int (*cu_ctx_retain_fn)(void **ctx, int device);

struct thread_result {
  unsigned int raw_alloc_without_context;
  hipError_t malloc_result, free_result, set_device_result;
  int device;
  void *current, *primary2;
};

static void *fresh_thread(void *arg) {
  struct thread_result *r = arg;
  cu_alloc_fn alloc;
  cu_ctx_get_fn get_current;
  cu_ctx_retain_fn retain;
  unsigned long long raw = 0;
  void *p = NULL;
  *(void **)&alloc = driver_symbol("cuMemAlloc_v2");
  *(void **)&get_current = driver_symbol("cuCtxGetCurrent");
  *(void **)&retain = driver_symbol("cuDevicePrimaryCtxRetain");
  /* The driver refuses a context-bound call on a thread with none... */
  r->raw_alloc_without_context = alloc(&raw, 64);
  /* ...so the backend must make one current itself. */
  r->malloc_result = mori_hipMalloc(&p, 64);
  r->free_result = mori_hipFree(p);
  r->set_device_result = mori_hipSetDevice(2);
  (void)mori_hipGetDevice(&r->device);
  (void)get_current(&r->current);
  (void)retain(&r->primary2, 2);
  return NULL;
}

static void each_thread_runs_on_the_primary_context_of_its_own_device(void **state) {
  struct thread_result r;
  pthread_t t;
  int device = -1;
  memset(&r, 0, sizeof r);
  assert_int_equal(pthread_create(&t, NULL, fresh_thread, &r), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(r.raw_alloc_without_context, 201); /* CUDA_ERROR_INVALID_CONTEXT */
  assert_int_equal(r.malloc_result, hipSuccess);
  assert_int_equal(r.free_result, hipSuccess);
  assert_int_equal(r.set_device_result, hipSuccess);
  assert_int_equal(r.device, 2);
  assert_non_null(r.current);
  assert_ptr_equal(r.current, r.primary2);
  /* The device is per thread, as in HIP: this one is still on 0. */
  assert_int_equal(mori_hipGetDevice(&device), hipSuccess);
  assert_int_equal(device, 0);
  assert_int_equal(mori_shim_registry_total(), 0);
}

static void set_device_beyond_the_device_count_is_an_invalid_device(void **state) {
  int count = 0, device = -1;
  assert_int_equal(mori_hipGetDeviceCount(&count), hipSuccess);
  assert_int_equal(count, SIM_DEVICES);
  assert_int_equal(mori_hipSetDevice(count), hipErrorInvalidDevice);
  assert_string_equal(mori_shim_message(), "hipSetDevice: device 8 out of range (8 devices)");
  assert_int_equal(mori_hipGetDevice(&device), hipSuccess);
  assert_int_equal(device, 0);
}

/* ---- errors and translation ---- */

static void driver_errors_map_to_hip_errors_and_keep_the_cuda_name(void **state) {
  size_t size = hipstub_granularity(hipMemHandleTypePosixFileDescriptor);
  hipMemAllocationProp prop = hipstub_prop(hipMemHandleTypePosixFileDescriptor, 0);
  hipMemGenericAllocationHandle_t h = NULL;
  void *va = NULL;
  assert_int_equal(mori_hipMemCreate(&h, size, &prop, 0), hipSuccess);
  assert_int_equal(mori_hipMemAddressReserve(&va, size, 0, NULL, 0), hipSuccess);
  assert_int_equal(mori_hipMemMap(va, size, 4096, h, 0), hipErrorInvalidValue);
  assert_string_equal(mori_shim_message(), "cuMemMap: CUDA_ERROR_INVALID_VALUE (1)");
  assert_int_equal(mori_hipGetLastError(), hipErrorInvalidValue);
  assert_int_equal(mori_hipMemAddressFree(va, size), hipSuccess);
  assert_int_equal(mori_hipMemRelease(h), hipSuccess);
  assert_int_equal(mori_hipMemRelease(h), hipErrorInvalidValue);
  assert_string_equal(mori_shim_message(), "cuMemRelease: CUDA_ERROR_INVALID_VALUE (1)");
  assert_int_equal(mori_shim_registry_total(), 0);
}

static void hip_values_cuda_cannot_express_are_refused_before_the_driver(void **state) {
  hipMemAllocationProp prop = hipstub_prop(hipMemHandleTypePosixFileDescriptor, 0);
  hipMemGenericAllocationHandle_t h = NULL;
  size_t gran = 0;
  void *p = NULL;

  prop.type = hipMemAllocationTypeUncached;
  assert_int_equal(mori_hipMemCreate(&h, 2 << 20, &prop, 0), hipErrorInvalidValue);
  assert_string_equal(mori_shim_message(),
                      "cuMemCreate: allocation type 0x40000000 has no CUDA equivalent");
  prop = hipstub_prop((hipMemAllocationHandleType)0x10, 0);
  assert_int_equal(mori_hipMemCreate(&h, 2 << 20, &prop, 0), hipErrorInvalidValue);
  assert_string_equal(mori_shim_message(), "cuMemCreate: handle type 0x10 has no CUDA equivalent");
  prop = hipstub_prop(hipMemHandleTypePosixFileDescriptor, 0);
  assert_int_equal(mori_hipMemGetAllocationGranularity(&gran, &prop,
                                                       (hipMemAllocationGranularity_flags)7),
                   hipErrorInvalidValue);
  assert_string_equal(mori_shim_message(),
                      "cuMemGetAllocationGranularity: granularity option 0x7 has no CUDA "
                      "equivalent");

  /* CUDA compares whole words: a partial mask cannot be honoured. */
  assert_int_equal(mori_hipMalloc(&p, 64), hipSuccess);
  assert_int_equal(mori_hipStreamWaitValue32(NULL, p, 0, hipStreamWaitValueEq, 0xFFu),
                   hipErrorNotSupported);
  assert_contains(mori_shim_message(), "cuStreamWaitValue32: mask 0xff not supported");
  assert_int_equal(mori_hipFree(p), hipSuccess);
  assert_int_equal(mori_shim_registry_total(), 0);
}

/* Device ordinals travel as they are: one past the last device is the
 * driver's to refuse. */
static void locations_reach_the_driver_unchanged(void **state) {
  size_t size = hipstub_granularity(hipMemHandleTypePosixFileDescriptor);
  hipMemAllocationProp prop = hipstub_prop(hipMemHandleTypePosixFileDescriptor, SIM_DEVICES);
  hipMemAccessDesc beyond = hipstub_rw(SIM_DEVICES);
  hipMemGenericAllocationHandle_t h = NULL;
  void *va = NULL;
  assert_int_equal(mori_hipMemCreate(&h, size, &prop, 0), hipErrorInvalidValue);
  assert_string_equal(mori_shim_message(), "cuMemCreate: CUDA_ERROR_INVALID_VALUE (1)");
  prop = hipstub_prop(hipMemHandleTypePosixFileDescriptor, SIM_DEVICES - 1);
  assert_int_equal(mori_hipMemCreate(&h, size, &prop, 0), hipSuccess);
  assert_int_equal(mori_hipMemAddressReserve(&va, size, 0, NULL, 0), hipSuccess);
  assert_int_equal(mori_hipMemMap(va, size, 0, h, 0), hipSuccess);
  assert_int_equal(mori_hipMemSetAccess(va, size, &beyond, 1), hipErrorInvalidValue);
  assert_string_equal(mori_shim_message(), "cuMemSetAccess: CUDA_ERROR_INVALID_VALUE (1)");
  assert_int_equal(mori_hipMemUnmap(va, size), hipSuccess);
  assert_int_equal(mori_hipMemAddressFree(va, size), hipSuccess);
  assert_int_equal(mori_hipMemRelease(h), hipSuccess);
  assert_int_equal(mori_shim_registry_total(), 0);
}

/* The backend translates descriptors in parts; the last one here is the
 * only read-write grant, so a dropped tail would leave the window
 * read-only and the write below would fail. */
static void access_for_many_peers_is_granted_whole(void **state) {
  size_t size = hipstub_granularity(hipMemHandleTypePosixFileDescriptor);
  hipMemAllocationProp prop = hipstub_prop(hipMemHandleTypePosixFileDescriptor, 0);
  hipMemGenericAllocationHandle_t h = NULL;
  hipMemAccessDesc desc[20];
  unsigned char buf[64] = {1, 2, 3};
  void *va = NULL;
  for (int i = 0; i < 20; i++) {
    desc[i] = hipstub_rw(i % SIM_DEVICES);
    desc[i].flags = i == 19 ? hipMemAccessFlagsProtReadWrite : hipMemAccessFlagsProtRead;
  }
  assert_int_equal(mori_hipMemCreate(&h, size, &prop, 0), hipSuccess);
  assert_int_equal(mori_hipMemAddressReserve(&va, size, 0, NULL, 0), hipSuccess);
  assert_int_equal(mori_hipMemMap(va, size, 0, h, 0), hipSuccess);
  assert_int_equal(mori_hipMemSetAccess(va, size, desc, 20), hipSuccess);
  assert_int_equal(mori_hipMemcpy(va, buf, sizeof buf, hipMemcpyHostToDevice), hipSuccess);
  assert_int_equal(mori_hipMemUnmap(va, size), hipSuccess);
  assert_int_equal(mori_hipMemAddressFree(va, size), hipSuccess);
  assert_int_equal(mori_hipMemRelease(h), hipSuccess);
  assert_int_equal(mori_shim_registry_total(), 0);
}

static void attributes_translate_to_driver_attributes(void **state) {
  int value = -1;
  assert_int_equal(mori_hipDeviceGetAttribute(&value, moriDeviceAttributeMultiprocessorCount, 0),
                   hipSuccess);
  assert_int_equal(value, 256); /* the sim's default profile, gfx950 */
  assert_int_equal(mori_hipDeviceGetAttribute(&value, moriDeviceAttributePciBusId, 3), hipSuccess);
  assert_int_equal(value, 3);
  assert_int_equal(
      mori_hipDeviceGetAttribute(&value, moriDeviceAttributeVirtualMemoryManagementSupported, 0),
      hipSuccess);
  assert_int_equal(value, 1);
  /* The driver's hint, from the profile: only gfx1250 claims fabric. */
  const char *arch = getenv("MORI_SIM_ARCH");
  assert_int_equal(mori_hipDeviceGetAttribute(&value, moriDeviceAttributeFabricHandleSupported, 0),
                   hipSuccess);
  assert_int_equal(value, arch != NULL && strncmp(arch, "gfx1250", 7) == 0);
  assert_int_equal(mori_hipDeviceGetAttribute(&value, (hipDeviceAttribute_t)99, 0),
                   hipErrorInvalidValue);
  assert_string_equal(mori_shim_message(),
                      "cuDeviceGetAttribute: device attribute 0x63 has no CUDA equivalent");
  assert_int_equal(mori_hipDeviceGetAttribute(&value, moriDeviceAttributePciBusId, SIM_DEVICES),
                   hipErrorInvalidDevice);
  assert_string_equal(mori_shim_message(), "cuDeviceGet: CUDA_ERROR_INVALID_DEVICE (101)");
}

static void device_memory_copies_and_memops_run_on_the_driver(void **state) {
  void *p = NULL;
  uint32_t word = 0;
  assert_int_equal(mori_hipMalloc(&p, 64), hipSuccess);
  assert_int_equal(mori_hipMemset(p, 0xAB, 64), hipSuccess);
  assert_int_equal(mori_hipMemcpy(&word, p, sizeof word, hipMemcpyDeviceToHost), hipSuccess);
  assert_int_equal(word, 0xABABABABu);
  assert_int_equal(mori_hipStreamWriteValue32(NULL, p, 5, 0), hipSuccess);
  assert_int_equal(mori_hipStreamWaitValue32(NULL, p, 5, hipStreamWaitValueEq, 0xFFFFFFFFu),
                   hipSuccess);
  assert_int_equal(mori_hipStreamSynchronize(NULL), hipSuccess);
  assert_int_equal(mori_hipDeviceSynchronize(), hipSuccess);
  assert_int_equal(mori_hipMemcpy(&word, p, sizeof word, hipMemcpyDeviceToHost), hipSuccess);
  assert_int_equal(word, 5);
  /* a batch: the driver's call, flags translated; a wait it cannot express
   * is refused before the driver */
  hipStreamBatchMemOpParams ops[2];
  memset(ops, 0, sizeof ops);
  ops[0].operation = hipStreamMemOpWaitValue32;
  ops[0].waitValue.address = p;
  ops[0].waitValue.value = 5;
  ops[0].waitValue.flags = hipStreamWaitValueEq;
  ops[1].operation = hipStreamMemOpWriteValue32;
  ops[1].writeValue.address = p;
  ops[1].writeValue.value = 9;
  assert_int_equal(mori_hipStreamBatchMemOp(NULL, 2, ops, 0), hipSuccess);
  assert_int_equal(mori_hipStreamSynchronize(NULL), hipSuccess);
  assert_int_equal(mori_hipMemcpy(&word, p, sizeof word, hipMemcpyDeviceToHost), hipSuccess);
  assert_int_equal(word, 9);
  ops[0].waitValue.flags = 7;
  assert_int_equal(mori_hipStreamBatchMemOp(NULL, 2, ops, 0), hipErrorInvalidValue);
  assert_string_equal(mori_shim_message(), "cuStreamBatchMemOp: wait flags 0x7 has no CUDA equivalent");
  assert_int_equal(mori_hipFree(p), hipSuccess);
  assert_int_equal(mori_hipFree(NULL), hipSuccess);
  assert_int_equal(mori_shim_registry_total(), 0);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(loading_ahead_resolves_the_driver_and_calls_nothing),
      cmocka_unit_test(backend_is_cuda_and_reports_the_driver_version),
      cmocka_unit_test(posix_fd_window_is_shared_with_another_process_and_torn_down_without_leaks),
      cmocka_unit_test(fabric_handle_needs_an_imex_domain),
      cmocka_unit_test(each_thread_runs_on_the_primary_context_of_its_own_device),
      cmocka_unit_test(set_device_beyond_the_device_count_is_an_invalid_device),
      cmocka_unit_test(driver_errors_map_to_hip_errors_and_keep_the_cuda_name),
      cmocka_unit_test(hip_values_cuda_cannot_express_are_refused_before_the_driver),
      cmocka_unit_test(locations_reach_the_driver_unchanged),
      cmocka_unit_test(access_for_many_peers_is_granted_whole),
      cmocka_unit_test(attributes_translate_to_driver_attributes),
      cmocka_unit_test(device_memory_copies_and_memops_run_on_the_driver),
  };
  return mori_run_tests(argc, argv, tests);
}
