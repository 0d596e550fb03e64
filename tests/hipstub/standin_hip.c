/*
 * standin_hip.c - libamdhip64_standin.so: a test stand-in for ROCm's
 * libamdhip64 that answers HIP's C calls with the sim backend, so the shim's
 * hip backend runs whole without a GPU.  Like HIP it keeps a per-thread last
 * error, and it holds the backend to the fd import ABI of the ROCm version
 * it claims (MORI_STANDIN_HIP_VERSION, default 70100000).
 */
#include "standin_hip.h"

#include "shim_internal.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FD_BY_VALUE_SINCE 70100000

/* hipDeviceProp_tR0600 (ROCm 6.0 headers): byte offsets of what is filled. */
#define R0600_NAME 0
#define R0600_NAME_SIZE 256
#define R0600_MULTIPROCESSOR_COUNT 388

/* The sim reports its details here; MORI_STANDIN_TRACE=1 shows them, as a
 * runtime's debug log would.  A real libamdhip64 gives the shim only codes. */
static __thread char detail[512];

void mori__shim_detail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  const char *trace = getenv("MORI_STANDIN_TRACE");
  if (trace != NULL && strcmp(trace, "1") == 0) fprintf(stderr, "standin: %s\n", detail);
}

/* ---- bring-up and the last error, as HIP keeps them ---- */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_failed;

static void init_sim(void) {
  char why[256] = "";
  if (mori__shim_sim.init(why, sizeof why) != 0) {
    init_failed = 1;
    fprintf(stderr, "standin: sim init failed: %s\n", why);
  }
}

static hipError_t ready(void) {
  pthread_once(&init_once, init_sim);
  return init_failed ? hipErrorNotInitialized : hipSuccess;
}

static __thread hipError_t last_error = hipSuccess;
static long calls; /* every call that reached done(): hipStandinCalls */

/* HIP writes every call's result into the thread's last error. */
static hipError_t done(hipError_t e) {
  __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
  last_error = e;
  return e;
}

/* Not HIP's: how many calls the stand-in answered, so that a test can
 * tell that loading the runtime called nothing in it. */
long hipStandinCalls(void);
long hipStandinCalls(void) { return __atomic_load_n(&calls, __ATOMIC_RELAXED); }

#define SIM(entry, args)                                                                   \
  do {                                                                                     \
    hipError_t e_ = ready();                                                               \
    return done(e_ != hipSuccess ? e_ : mori__shim_sim.entry args);                        \
  } while (0)

static int initialised; /* hipInit succeeded */

/* The release claimed; -1 for "error": a runtime that cannot say, whose
 * hipRuntimeGetVersion fails; "init:N", N only once hipInit has run, as a
 * runtime that answers nothing before its initialisation. */
static int claimed_version(void) {
  const char *v = getenv("MORI_STANDIN_HIP_VERSION");
  if (v != NULL && strcmp(v, "error") == 0) return -1;
  if (v != NULL && strncmp(v, "init:", 5) == 0)
    return __atomic_load_n(&initialised, __ATOMIC_ACQUIRE) ? atoi(v + 5) : -1;
  return v != NULL && *v != '\0' ? atoi(v) : STANDIN_DEFAULT_VERSION;
}

/* As ROCm's own hipInit (CLR's hip_context.cpp) answers: flags other than
 * 0 are refused with hipErrorInvalidValue (HIP 5.2's accepted any). */
hipError_t hipInit(unsigned int flags) {
  if (flags != 0) return done(hipErrorInvalidValue);
  hipError_t e = ready();
  if (e == hipSuccess) __atomic_store_n(&initialised, 1, __ATOMIC_RELEASE);
  return done(e);
}

hipError_t hipRuntimeGetVersion(int *version) {
  if (version == NULL) return done(hipErrorInvalidValue);
  if (claimed_version() < 0) return done(hipErrorNotInitialized);
  *version = claimed_version();
  return done(hipSuccess);
}

static const struct {
  hipError_t code;
  const char *name;
} names[] = {
    {hipSuccess, "hipSuccess"},
    {hipErrorInvalidValue, "hipErrorInvalidValue"},
    {hipErrorOutOfMemory, "hipErrorOutOfMemory"},
    {hipErrorNotInitialized, "hipErrorNotInitialized"},
    {hipErrorInvalidDevice, "hipErrorInvalidDevice"},
    {hipErrorMapFailed, "hipErrorMapFailed"},
    {hipErrorUnmapFailed, "hipErrorUnmapFailed"},
    {hipErrorNotMapped, "hipErrorNotMapped"},
    {hipErrorInvalidHandle, "hipErrorInvalidHandle"},
    {hipErrorNotFound, "hipErrorNotFound"},
    {hipErrorLaunchTimeOut, "hipErrorLaunchTimeOut"},
    {hipErrorNotSupported, "hipErrorNotSupported"},
};

/* As HIP: never NULL; codes it has no name for read as unknown. */
const char *hipGetErrorName(hipError_t error) {
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].code == error) return names[i].name;
  return "hipErrorUnknown";
}

hipError_t hipGetLastError(void) {
  hipError_t e = last_error;
  last_error = hipSuccess;
  return e;
}

/* ---- VMM ---- */

hipError_t hipMemCreate(hipMemGenericAllocationHandle_t *handle, size_t size,
                        const hipMemAllocationProp *prop, unsigned long long flags) {
  SIM(hipMemCreate, (handle, size, prop, flags));
}

hipError_t hipMemRelease(hipMemGenericAllocationHandle_t handle) { SIM(hipMemRelease, (handle)); }

hipError_t hipMemRetainAllocationHandle(hipMemGenericAllocationHandle_t *handle, void *addr) {
  SIM(hipMemRetainAllocationHandle, (handle, addr));
}

hipError_t hipMemAddressReserve(void **ptr, size_t size, size_t alignment, void *addr,
                                unsigned long long flags) {
  SIM(hipMemAddressReserve, (ptr, size, alignment, addr, flags));
}

hipError_t hipMemAddressFree(void *ptr, size_t size) { SIM(hipMemAddressFree, (ptr, size)); }

hipError_t hipMemMap(void *ptr, size_t size, size_t offset, hipMemGenericAllocationHandle_t handle,
                     unsigned long long flags) {
  SIM(hipMemMap, (ptr, size, offset, handle, flags));
}

hipError_t hipMemUnmap(void *ptr, size_t size) { SIM(hipMemUnmap, (ptr, size)); }

hipError_t hipMemSetAccess(void *ptr, size_t size, const hipMemAccessDesc *desc, size_t count) {
  SIM(hipMemSetAccess, (ptr, size, desc, count));
}

hipError_t hipMemGetAllocationGranularity(size_t *granularity, const hipMemAllocationProp *prop,
                                          hipMemAllocationGranularity_flags option) {
  SIM(hipMemGetAllocationGranularity, (granularity, prop, option));
}

hipError_t hipMemExportToShareableHandle(void *shareableHandle,
                                         hipMemGenericAllocationHandle_t handle,
                                         hipMemAllocationHandleType handleType,
                                         unsigned long long flags) {
  SIM(hipMemExportToShareableHandle, (shareableHandle, handle, handleType, flags));
}

static int is_open_fd(intptr_t v) { return v >= 0 && v <= INT_MAX && fcntl((int)v, F_GETFD) != -1; }

/* A caller on the wrong side of the ROCm 7.1 change must fail loudly, not
 * import some other file: the test of the backend's run-time decision. */
static hipError_t abi_mismatch(int version, const char *takes, const void *osHandle) {
  fprintf(stderr, "standin: import ABI mismatch: ROCm %d takes %s; osHandle %p is not one\n",
          version, takes, osHandle);
  return hipErrorInvalidValue;
}

/* Unwraps osHandle per the claimed version into the sim's fd by value. */
static hipError_t fd_from_os_handle(void **osHandle) {
  int version = claimed_version();
  if (*osHandle == NULL) return hipErrorInvalidValue; /* HIP rejects a null osHandle */
  if (version >= FD_BY_VALUE_SINCE)
    return is_open_fd((intptr_t)*osHandle) ? hipSuccess
                                           : abi_mismatch(version, "the fd by value", *osHandle);
  /* A pointer is never in the first pages; small values are fds passed by
   * value by mistake, and must not be dereferenced. */
  if ((uintptr_t)*osHandle < 65536 || !is_open_fd(*(const int *)*osHandle))
    return abi_mismatch(version, "a pointer to the fd", *osHandle);
  *osHandle = (void *)(intptr_t) * (const int *)*osHandle;
  return hipSuccess;
}

/* The sim takes the fd by value, where fd 0 would read as NULL; a pointer
 * era runtime accepts fd 0, so it is handed on as a higher duplicate (the
 * sim keeps its own duplicate of whatever it imports). */
static hipError_t import_fd(hipMemGenericAllocationHandle_t *handle, int fd) {
  int tmp = fd == 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 1) : fd;
  if (tmp < 0) return hipErrorOutOfMemory;
  hipError_t e = mori__shim_sim.hipMemImportFromShareableHandle(handle, (void *)(intptr_t)tmp,
                                              hipMemHandleTypePosixFileDescriptor);
  if (tmp != fd) close(tmp);
  return e;
}

hipError_t hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t *handle,
                                           void *osHandle,
                                           hipMemAllocationHandleType shHandleType) {
  hipError_t e = ready();
  if (e != hipSuccess || shHandleType != hipMemHandleTypePosixFileDescriptor)
    return done(e != hipSuccess ? e
                                : mori__shim_sim.hipMemImportFromShareableHandle(handle, osHandle, shHandleType));
  e = fd_from_os_handle(&osHandle);
  return done(e != hipSuccess ? e : import_fd(handle, (int)(intptr_t)osHandle));
}

/* ---- memory, devices, streams ---- */

hipError_t hipMalloc(void **ptr, size_t size) { SIM(hipMalloc, (ptr, size)); }
hipError_t hipFree(void *ptr) { SIM(hipFree, (ptr)); }

hipError_t hipMemcpy(void *dst, const void *src, size_t size, hipMemcpyKind kind) {
  SIM(hipMemcpy, (dst, src, size, kind));
}

hipError_t hipMemset(void *dst, int value, size_t size) { SIM(hipMemset, (dst, value, size)); }
hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  SIM(hipMemGetInfo, (free_bytes, total_bytes));
}
hipError_t hipGetDevice(int *device) { SIM(hipGetDevice, (device)); }
hipError_t hipSetDevice(int device) { SIM(hipSetDevice, (device)); }
hipError_t hipGetDeviceCount(int *count) { SIM(hipGetDeviceCount, (count)); }
hipError_t hipDeviceSynchronize(void) { SIM(hipDeviceSynchronize, ()); }
hipError_t hipStreamSynchronize(hipStream_t stream) { SIM(hipStreamSynchronize, (stream)); }

hipError_t hipStreamWriteValue32(hipStream_t stream, void *ptr, uint32_t value,
                                 unsigned int flags) {
  SIM(hipStreamWriteValue32, (stream, ptr, value, flags));
}

hipError_t hipStreamWaitValue32(hipStream_t stream, void *ptr, uint32_t value, unsigned int flags,
                                uint32_t mask) {
  SIM(hipStreamWaitValue32, (stream, ptr, value, flags, mask));
}

hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags) {
  SIM(hipStreamCreateWithFlags, (stream, flags));
}
hipError_t hipStreamDestroy(hipStream_t stream) { SIM(hipStreamDestroy, (stream)); }
hipError_t hipStreamIsCapturing(hipStream_t stream, hipStreamCaptureStatus *status) {
  SIM(hipStreamIsCapturing, (stream, status));
}
hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned int flags) {
  SIM(hipEventCreateWithFlags, (event, flags));
}
hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
  SIM(hipEventRecord, (event, stream));
}
hipError_t hipEventQuery(hipEvent_t event) { SIM(hipEventQuery, (event)); }
hipError_t hipEventSynchronize(hipEvent_t event) { SIM(hipEventSynchronize, (event)); }
hipError_t hipEventDestroy(hipEvent_t event) { SIM(hipEventDestroy, (event)); }
hipError_t hipMemsetAsync(void *dst, int value, size_t size, hipStream_t stream) {
  SIM(hipMemsetAsync, (dst, value, size, stream));
}
hipError_t hipMemcpyAsync(void *dst, const void *src, size_t size, hipMemcpyKind kind,
                          hipStream_t stream) {
  SIM(hipMemcpyAsync, (dst, src, size, kind, stream));
}

/* Fills the name and the multiprocessor count, the fields the backend
 * reads, at their R0600 offsets; the rest of the caller's struct is left. */
hipError_t hipGetDevicePropertiesR0600(void *props, int device) {
  int count = 0;
  hipError_t e = ready();
  if (e == hipSuccess && props == NULL) e = hipErrorInvalidValue;
  if (e == hipSuccess)
    e = mori__shim_sim.hipDeviceGetAttribute(&count, moriDeviceAttributeMultiprocessorCount, device);
  if (e != hipSuccess) return done(e);
  unsigned char *p = props;
  memset(p, 0, R0600_MULTIPROCESSOR_COUNT + sizeof count);
  snprintf((char *)p + R0600_NAME, R0600_NAME_SIZE, "mori-symm standin %d", device);
  memcpy(p + R0600_MULTIPROCESSOR_COUNT, &count, sizeof count);
  return done(hipSuccess);
}

hipError_t hipDeviceGetPCIBusId(char *pciBusId, int len, int device) {
  int bus = 0, dev = 0;
  hipError_t e = ready();
  if (e == hipSuccess && (pciBusId == NULL || len <= 0)) e = hipErrorInvalidValue;
  if (e == hipSuccess) e = mori__shim_sim.hipDeviceGetAttribute(&bus, moriDeviceAttributePciBusId, device);
  if (e == hipSuccess)
    e = mori__shim_sim.hipDeviceGetAttribute(&dev, moriDeviceAttributePciDeviceId, device);
  if (e == hipSuccess && snprintf(pciBusId, (size_t)len, "0000:%02x:%02x.0", bus, dev) >= len)
    e = hipErrorInvalidValue;
  return done(e);
}

/* ---- modules, kernels and hiprtc: the stand-in's "code object" is the
 * source hiprtc was given, whose entries the sim models by name ---- */

hipError_t hipModuleLoadData(hipModule_t *module, const void *image) {
  mori_module_image img = {.ptx = NULL, .hip_source = image, .name = "standin"};
  if (image == NULL) return done(hipErrorInvalidValue);
  SIM(hipModuleLoadData, (module, &img));
}
hipError_t hipModuleGetFunction(hipFunction_t *function, hipModule_t module, const char *kname) {
  SIM(hipModuleGetFunction, (function, module, kname));
}
hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int gridDimX, unsigned int gridDimY,
                                 unsigned int gridDimZ, unsigned int blockDimX,
                                 unsigned int blockDimY, unsigned int blockDimZ,
                                 unsigned int sharedMemBytes, hipStream_t stream,
                                 void **kernelParams, void **extra) {
  SIM(hipModuleLaunchKernel, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                              sharedMemBytes, stream, kernelParams, extra));
}
hipError_t hipModuleUnload(hipModule_t module) { SIM(hipModuleUnload, (module)); }
hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags) {
  SIM(hipHostMalloc, (ptr, size, flags));
}
hipError_t hipHostFree(void *ptr) { SIM(hipHostFree, (ptr)); }

struct standin_hiprtc_program {
  char *source;
  int compiled;
};

enum { RTC_SUCCESS = 0, RTC_INVALID_INPUT = 3, RTC_INVALID_PROGRAM = 5, RTC_COMPILATION = 6 };

int hiprtcCreateProgram(hiprtcProgram *prog, const char *src, const char *name, int numHeaders,
                        const char **headers, const char **includeNames) {
  if (prog == NULL || src == NULL || numHeaders != 0) return RTC_INVALID_INPUT;
  hiprtcProgram p = calloc(1, sizeof *p);
  if (p == NULL || (p->source = strdup(src)) == NULL) {
    free(p);
    return RTC_INVALID_INPUT;
  }
  *prog = p;
  return RTC_SUCCESS;
}
/* MORI_STANDIN_HIPRTC_FAIL=1: the compiler refuses, with a log. */
int hiprtcCompileProgram(hiprtcProgram prog, int numOptions, const char **options) {
  const char *fail = getenv("MORI_STANDIN_HIPRTC_FAIL");
  if (prog == NULL) return RTC_INVALID_PROGRAM;
  if (fail != NULL && strcmp(fail, "1") == 0) return RTC_COMPILATION;
  prog->compiled = 1;
  return RTC_SUCCESS;
}
static const char rtc_log[] = "standin: compilation refused (MORI_STANDIN_HIPRTC_FAIL=1)";
int hiprtcGetProgramLogSize(hiprtcProgram prog, size_t *size) {
  if (prog == NULL || size == NULL) return RTC_INVALID_INPUT;
  *size = prog->compiled ? 1 : sizeof rtc_log;
  return RTC_SUCCESS;
}
int hiprtcGetProgramLog(hiprtcProgram prog, char *log) {
  if (prog == NULL || log == NULL) return RTC_INVALID_INPUT;
  strcpy(log, prog->compiled ? "" : rtc_log);
  return RTC_SUCCESS;
}
int hiprtcGetCodeSize(hiprtcProgram prog, size_t *size) {
  if (prog == NULL || size == NULL || !prog->compiled) return RTC_INVALID_PROGRAM;
  *size = strlen(prog->source) + 1;
  return RTC_SUCCESS;
}
int hiprtcGetCode(hiprtcProgram prog, char *code) {
  if (prog == NULL || code == NULL || !prog->compiled) return RTC_INVALID_PROGRAM;
  strcpy(code, prog->source);
  return RTC_SUCCESS;
}
int hiprtcDestroyProgram(hiprtcProgram *prog) {
  if (prog == NULL || *prog == NULL) return RTC_INVALID_PROGRAM;
  free((*prog)->source);
  free(*prog);
  *prog = NULL;
  return RTC_SUCCESS;
}
const char *hiprtcGetErrorString(int result) {
  return result == RTC_SUCCESS       ? "HIPRTC_SUCCESS"
         : result == RTC_COMPILATION ? "HIPRTC_ERROR_COMPILATION"
                                     : "HIPRTC_ERROR";
}
