/*
 * shim.c - the exported mori_hip* entry points and what all backends share:
 * backend selection, the thread-local last error and detail message, and the
 * ledger of live runtime resources.
 *
 * Every entry point has the same shape: bring the backend up, call its table
 * entry, record what was acquired or released, store the result as the
 * thread's last error.  Nothing here knows which runtime is underneath.
 */
#include "shim_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- error names ---- */

#define MORI_ERROR_ROW(e) {e, #e},
static const struct {
  hipError_t code;
  const char *name;
} error_names[] = {MORI_HIP_ERROR_LIST(MORI_ERROR_ROW)};
#undef MORI_ERROR_ROW

const char *mori_hipGetErrorName(hipError_t err) {
  static __thread char buf[32];
  for (size_t i = 0; i < sizeof error_names / sizeof error_names[0]; i++)
    if (error_names[i].code == err) return error_names[i].name;
  snprintf(buf, sizeof buf, "hipError(%d)", (int)err);
  return buf;
}

/* ---- thread-local state ---- */

static __thread hipError_t last_error = hipSuccess;
static __thread char detail[1536];
static __thread int detail_set;

void mori__shim_detail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  detail_set = 1;
}

const char *mori_shim_message(void) { return detail; }

/* ---- backend selection ---- */

static const struct mori__shim_backend *const backends[] = {
    &mori__shim_sim, &mori__shim_cuda, &mori__shim_hip};

static pthread_mutex_t select_lock = PTHREAD_MUTEX_INITIALIZER;
/* Written once, under select_lock; read by every call without it. */
static const struct mori__shim_backend *active;
static char select_failure[1536]; /* under select_lock */

static const struct mori__shim_backend *find_backend(const char *name) {
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
    if (strcmp(backends[i]->name, name) == 0) return backends[i];
  return NULL;
}

static void ledger_report_at_exit(void);

/* Tries each candidate in turn; auto means the GPU runtimes, never sim:
 * running a torch process on the emulator by accident would be a silent
 * fallback. */
static int bring_up(const char *name) {
  char why[1024] = "";
  const char *auto_order[] = {"hip", "cuda"};
  if (name == NULL || *name == '\0') name = "auto";
  if (strcmp(name, "auto") == 0) {
    char all[1200] = "";
    for (size_t i = 0; i < 2; i++) {
      const struct mori__shim_backend *b = find_backend(auto_order[i]);
      why[0] = '\0';
      if (b->init(why, sizeof why) == 0) {
        __atomic_store_n(&active, b, __ATOMIC_RELEASE);
        return 0;
      }
      size_t n = strlen(all);
      snprintf(all + n, sizeof all - n, "%s%s: %s", n ? "; " : "", b->name, why);
    }
    snprintf(select_failure, sizeof select_failure,
             "no GPU runtime found (%s); set MORI_SYMM_SHIM=sim for the emulator", all);
    return -1;
  }
  const struct mori__shim_backend *b = find_backend(name);
  if (b == NULL) {
    snprintf(select_failure, sizeof select_failure,
             "unknown shim backend '%s' (expected auto, sim, cuda or hip)", name);
    return -1;
  }
  if (b->init(why, sizeof why) != 0) {
    snprintf(select_failure, sizeof select_failure, "shim backend %s not available: %s",
             b->name, why);
    return -1;
  }
  __atomic_store_n(&active, b, __ATOMIC_RELEASE);
  return 0;
}

int mori_shim_select(const char *name) {
  int rc = 0;
  pthread_mutex_lock(&select_lock);
  if (active != NULL) {
    if (name != NULL && strcmp(name, "auto") != 0 && strcmp(name, active->name) != 0) {
      snprintf(select_failure, sizeof select_failure,
               "shim backend %s already active; cannot switch to %s", active->name, name);
      rc = -1;
    }
  } else {
    rc = bring_up(name);
    if (rc == 0 && getenv("MORI_SHIM_LEDGER_REPORT") &&
        strcmp(getenv("MORI_SHIM_LEDGER_REPORT"), "1") == 0)
      atexit(ledger_report_at_exit);
  }
  if (rc != 0) mori__shim_detail("%s", select_failure);
  pthread_mutex_unlock(&select_lock);
  return rc;
}

static const struct mori__shim_backend *backend(void) {
  const struct mori__shim_backend *b = __atomic_load_n(&active, __ATOMIC_ACQUIRE);
  if (b != NULL) return b;
  if (mori_shim_select(getenv("MORI_SYMM_SHIM")) != 0) return NULL;
  return __atomic_load_n(&active, __ATOMIC_ACQUIRE);
}

const char *mori_shim_backend(void) {
  const struct mori__shim_backend *b = backend();
  return b ? b->name : NULL;
}

/* ---- the ledger ---- */

enum ledger_kind { L_HANDLE, L_RESERVATION, L_MAPPING, L_EXPORTED_FD, L_DEVICE_ALLOC };
static const char *const ledger_kind_names[] = {"handle", "reservation", "mapping",
                                                "exported fd", "device allocation"};

struct ledger_entry {
  enum ledger_kind kind;
  uintptr_t key; /* handle value, address or fd */
  size_t size;
};

static pthread_mutex_t ledger_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ledger_entry *ledger;
static size_t ledger_len, ledger_cap;

static void ledger_add(enum ledger_kind kind, uintptr_t key, size_t size) {
  pthread_mutex_lock(&ledger_lock);
  if (ledger_len == ledger_cap) {
    size_t cap = ledger_cap ? ledger_cap * 2 : 64;
    struct ledger_entry *n = realloc(ledger, cap * sizeof *n);
    if (n == NULL) { /* the ledger is diagnostics: losing an entry is reported */
      pthread_mutex_unlock(&ledger_lock);
      fprintf(stderr, "mori shim: ledger out of memory; leak report incomplete\n");
      return;
    }
    ledger = n;
    ledger_cap = cap;
  }
  ledger[ledger_len++] = (struct ledger_entry){kind, key, size};
  pthread_mutex_unlock(&ledger_lock);
}

/* Removes entries of kind whose key lies in [lo, hi); at most `max` of them
 * (0: all).  Returns how many were removed. */
static size_t ledger_remove_range(enum ledger_kind kind, uintptr_t lo, uintptr_t hi, size_t max) {
  size_t removed = 0;
  pthread_mutex_lock(&ledger_lock);
  for (size_t i = ledger_len; i-- > 0;) {
    if (ledger[i].kind != kind || ledger[i].key < lo || ledger[i].key >= hi) continue;
    ledger[i] = ledger[--ledger_len];
    if (++removed == max) break;
  }
  pthread_mutex_unlock(&ledger_lock);
  return removed;
}

static void ledger_remove(enum ledger_kind kind, uintptr_t key) {
  ledger_remove_range(kind, key, key + 1, 1);
}

void mori_shim_ledger(mori_shim_ledger_counts *out) {
  long c[5] = {0};
  pthread_mutex_lock(&ledger_lock);
  for (size_t i = 0; i < ledger_len; i++) c[ledger[i].kind]++;
  pthread_mutex_unlock(&ledger_lock);
  out->handles = c[L_HANDLE];
  out->reservations = c[L_RESERVATION];
  out->mappings = c[L_MAPPING];
  out->exported_fds = c[L_EXPORTED_FD];
  out->device_allocs = c[L_DEVICE_ALLOC];
}

long mori_shim_ledger_total(void) {
  pthread_mutex_lock(&ledger_lock);
  long n = (long)ledger_len;
  pthread_mutex_unlock(&ledger_lock);
  return n;
}

int mori_shim_runtime_fds(void) {
  /* never brings a backend up: none active holds nothing */
  const struct mori__shim_backend *b = __atomic_load_n(&active, __ATOMIC_ACQUIRE);
  return b != NULL && b->own_fds != NULL ? b->own_fds() : 0;
}

long mori_shim_ledger_report(FILE *out) {
  pthread_mutex_lock(&ledger_lock);
  long n = (long)ledger_len;
  if (n == 0) {
    fprintf(out, "mori shim ledger: 0 leaks\n");
  } else {
    fprintf(out, "mori shim ledger: %ld leaks\n", n);
    for (size_t i = 0; i < ledger_len; i++) {
      const struct ledger_entry *e = &ledger[i];
      if (e->kind == L_EXPORTED_FD)
        fprintf(out, "  leak: %s %d\n", ledger_kind_names[e->kind], (int)e->key);
      else
        fprintf(out, "  leak: %s 0x%lx size %zu\n", ledger_kind_names[e->kind],
                (unsigned long)e->key, e->size);
    }
  }
  pthread_mutex_unlock(&ledger_lock);
  return n;
}

static void ledger_report_at_exit(void) { mori_shim_ledger_report(stderr); }

/* ---- entry points ---- */

static hipError_t leave(const char *call, hipError_t e) {
  last_error = e;
  if (e != hipSuccess && !detail_set)
    mori__shim_detail("%s: %s (%d)", call, mori_hipGetErrorName(e), (int)e);
  return e;
}

/* No backend: the thread's detail already holds select's reason (the
 * shared select_failure may be rewritten by another thread meanwhile). */
static hipError_t no_backend(const char *call) {
  char why[sizeof detail];
  snprintf(why, sizeof why, "%s", detail);
  mori__shim_detail("%s: %s", call, why);
  return leave(call, hipErrorRuntimeOther);
}

/* Brings the backend up and checks that it implements the call. */
#define ENTER(call, entry)                                                          \
  const struct mori__shim_backend *B = backend();                                   \
  detail_set = 0;                                                                   \
  if (B == NULL) return no_backend(call);                                           \
  if (B->entry == NULL) {                                                           \
    mori__shim_detail("%s: not implemented by the %s backend", call, B->name);      \
    return leave(call, hipErrorNotSupported);                                       \
  }

/* One VMM call at a time per process: on ROCm, an import on one thread
 * while another thread maps or grants access makes hipMemSetAccess fail with
 * hipErrorInvalidValue (mori #476; sim quirk concurrent-vmm).  The core runs
 * rendezvous of different blocks on different threads at once, so the seam
 * serialises the VMM calls themselves, each for the length of the runtime
 * call only; no wait on a peer, the store or a stream happens under it. */
static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
#define VMM_LOCKED(stmt)                                                            \
  do {                                                                              \
    pthread_mutex_lock(&vmm_lock);                                                  \
    stmt;                                                                           \
    pthread_mutex_unlock(&vmm_lock);                                                \
  } while (0)

hipError_t mori_hipMemCreate(hipMemGenericAllocationHandle_t *handle, size_t size,
                             const hipMemAllocationProp *prop, unsigned long long flags) {
  ENTER("hipMemCreate", mem_create);
  hipError_t e;
  VMM_LOCKED(e = B->mem_create(handle, size, prop, flags));
  if (e == hipSuccess) ledger_add(L_HANDLE, (uintptr_t)*handle, size);
  return leave("hipMemCreate", e);
}

hipError_t mori_hipMemRelease(hipMemGenericAllocationHandle_t handle) {
  ENTER("hipMemRelease", mem_release);
  hipError_t e;
  VMM_LOCKED(e = B->mem_release(handle));
  if (e == hipSuccess) ledger_remove(L_HANDLE, (uintptr_t)handle);
  return leave("hipMemRelease", e);
}

hipError_t mori_hipMemRetainAllocationHandle(hipMemGenericAllocationHandle_t *handle,
                                             void *addr) {
  ENTER("hipMemRetainAllocationHandle", mem_retain);
  hipError_t e;
  VMM_LOCKED(e = B->mem_retain(handle, addr));
  if (e == hipSuccess) ledger_add(L_HANDLE, (uintptr_t)*handle, 0);
  return leave("hipMemRetainAllocationHandle", e);
}

hipError_t mori_hipMemAddressReserve(void **ptr, size_t size, size_t alignment, void *addr,
                                     unsigned long long flags) {
  ENTER("hipMemAddressReserve", address_reserve);
  hipError_t e;
  VMM_LOCKED(e = B->address_reserve(ptr, size, alignment, addr, flags));
  if (e == hipSuccess) ledger_add(L_RESERVATION, (uintptr_t)*ptr, size);
  return leave("hipMemAddressReserve", e);
}

hipError_t mori_hipMemAddressFree(void *ptr, size_t size) {
  ENTER("hipMemAddressFree", address_free);
  hipError_t e;
  VMM_LOCKED(e = B->address_free(ptr, size));
  if (e == hipSuccess) ledger_remove(L_RESERVATION, (uintptr_t)ptr);
  return leave("hipMemAddressFree", e);
}

hipError_t mori_hipMemMap(void *ptr, size_t size, size_t offset,
                          hipMemGenericAllocationHandle_t handle, unsigned long long flags) {
  ENTER("hipMemMap", mem_map);
  hipError_t e;
  VMM_LOCKED(e = B->mem_map(ptr, size, offset, handle, flags));
  if (e == hipSuccess) ledger_add(L_MAPPING, (uintptr_t)ptr, size);
  return leave("hipMemMap", e);
}

hipError_t mori_hipMemUnmap(void *ptr, size_t size) {
  ENTER("hipMemUnmap", mem_unmap);
  hipError_t e;
  VMM_LOCKED(e = B->mem_unmap(ptr, size));
  if (e == hipSuccess)
    ledger_remove_range(L_MAPPING, (uintptr_t)ptr, (uintptr_t)ptr + size, 0);
  return leave("hipMemUnmap", e);
}

hipError_t mori_hipMemSetAccess(void *ptr, size_t size, const hipMemAccessDesc *desc,
                                size_t count) {
  ENTER("hipMemSetAccess", set_access);
  hipError_t e;
  VMM_LOCKED(e = B->set_access(ptr, size, desc, count));
  return leave("hipMemSetAccess", e);
}

hipError_t mori_hipMemGetAllocationGranularity(size_t *granularity,
                                               const hipMemAllocationProp *prop,
                                               hipMemAllocationGranularity_flags option) {
  ENTER("hipMemGetAllocationGranularity", granularity);
  return leave("hipMemGetAllocationGranularity", B->granularity(granularity, prop, option));
}

hipError_t mori_hipMemExportToShareableHandle(void *shareableHandle,
                                              hipMemGenericAllocationHandle_t handle,
                                              hipMemAllocationHandleType handleType,
                                              unsigned long long flags) {
  ENTER("hipMemExportToShareableHandle", export_handle);
  hipError_t e;
  VMM_LOCKED(e = B->export_handle(shareableHandle, handle, handleType, flags));
  if (e == hipSuccess && handleType == hipMemHandleTypePosixFileDescriptor)
    ledger_add(L_EXPORTED_FD, (uintptr_t)*(int *)shareableHandle, 0);
  return leave("hipMemExportToShareableHandle", e);
}

hipError_t mori_hipMemImportFromShareableHandle(hipMemGenericAllocationHandle_t *handle,
                                                void *osHandle,
                                                hipMemAllocationHandleType shHandleType) {
  ENTER("hipMemImportFromShareableHandle", import_handle);
  hipError_t e;
  VMM_LOCKED(e = B->import_handle(handle, osHandle, shHandleType));
  if (e == hipSuccess) ledger_add(L_HANDLE, (uintptr_t)*handle, 0);
  return leave("hipMemImportFromShareableHandle", e);
}

hipError_t mori_hipMalloc(void **ptr, size_t size) {
  ENTER("hipMalloc", malloc_);
  hipError_t e = B->malloc_(ptr, size);
  if (e == hipSuccess && *ptr != NULL) ledger_add(L_DEVICE_ALLOC, (uintptr_t)*ptr, size);
  return leave("hipMalloc", e);
}

hipError_t mori_hipFree(void *ptr) {
  ENTER("hipFree", free_);
  hipError_t e = B->free_(ptr);
  if (e == hipSuccess && ptr != NULL) ledger_remove(L_DEVICE_ALLOC, (uintptr_t)ptr);
  return leave("hipFree", e);
}

hipError_t mori_hipMemcpy(void *dst, const void *src, size_t size, hipMemcpyKind kind) {
  ENTER("hipMemcpy", memcpy_);
  return leave("hipMemcpy", B->memcpy_(dst, src, size, kind));
}

hipError_t mori_hipMemset(void *dst, int value, size_t size) {
  ENTER("hipMemset", memset_);
  return leave("hipMemset", B->memset_(dst, value, size));
}

hipError_t mori_hipGetDevice(int *device) {
  ENTER("hipGetDevice", get_device);
  return leave("hipGetDevice", B->get_device(device));
}

hipError_t mori_hipSetDevice(int device) {
  ENTER("hipSetDevice", set_device);
  return leave("hipSetDevice", B->set_device(device));
}

hipError_t mori_hipGetDeviceCount(int *count) {
  ENTER("hipGetDeviceCount", device_count);
  return leave("hipGetDeviceCount", B->device_count(count));
}

hipError_t mori_hipMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  ENTER("hipMemGetInfo", mem_get_info);
  return leave("hipMemGetInfo", B->mem_get_info(free_bytes, total_bytes));
}

hipError_t mori_hipDeviceSynchronize(void) {
  ENTER("hipDeviceSynchronize", device_sync);
  return leave("hipDeviceSynchronize", B->device_sync());
}

hipError_t mori_hipStreamSynchronize(hipStream_t stream) {
  ENTER("hipStreamSynchronize", stream_sync);
  return leave("hipStreamSynchronize", B->stream_sync(stream));
}

hipError_t mori_hipStreamWriteValue32(hipStream_t stream, void *ptr, uint32_t value,
                                      unsigned int flags) {
  ENTER("hipStreamWriteValue32", write_value32);
  return leave("hipStreamWriteValue32", B->write_value32(stream, ptr, value, flags));
}

hipError_t mori_hipStreamWaitValue32(hipStream_t stream, void *ptr, uint32_t value,
                                     unsigned int flags, uint32_t mask) {
  ENTER("hipStreamWaitValue32", wait_value32);
  return leave("hipStreamWaitValue32", B->wait_value32(stream, ptr, value, flags, mask));
}

/* The contract both runtimes state: 1..255 operations, flags 0; the shim
 * takes the 32-bit ones. */
static hipError_t batch_contract(unsigned int count, const hipStreamBatchMemOpParams *ops,
                                 unsigned int flags) {
  if (ops == NULL || count == 0 || count > MORI_HIP_BATCH_MAX || flags != 0) {
    mori__shim_detail("hipStreamBatchMemOp: %u operations at %p, flags 0x%x (1..%d, non-null, "
                      "flags 0)", count, (const void *)ops, flags, MORI_HIP_BATCH_MAX);
    return hipErrorInvalidValue;
  }
  for (unsigned int i = 0; i < count; i++)
    if (ops[i].operation != hipStreamMemOpWaitValue32 &&
        ops[i].operation != hipStreamMemOpWriteValue32) {
      mori__shim_detail("hipStreamBatchMemOp: operation %u is of type 0x%x (the shim takes "
                        "32-bit waits and writes)", i, (unsigned)ops[i].operation);
      return hipErrorNotSupported;
    }
  return hipSuccess;
}

hipError_t mori_hipStreamBatchMemOp(hipStream_t stream, unsigned int count,
                                    hipStreamBatchMemOpParams *paramArray, unsigned int flags) {
  ENTER("hipStreamBatchMemOp", write_value32);
  hipError_t e = batch_contract(count, paramArray, flags);
  if (e != hipSuccess) return leave("hipStreamBatchMemOp", e);
  if (B->batch_mem_op != NULL &&
      (e = B->batch_mem_op(stream, count, paramArray, flags)) != hipErrorNotSupported)
    return leave("hipStreamBatchMemOp", e);
  /* No batch call in this runtime: one call per operation, in order. */
  detail_set = 0;
  e = hipSuccess;
  for (unsigned int i = 0; i < count && e == hipSuccess; i++) {
    const hipStreamBatchMemOpParams *op = &paramArray[i];
    e = op->operation == hipStreamMemOpWaitValue32
            ? B->wait_value32(stream, op->waitValue.address, op->waitValue.value,
                              op->waitValue.flags, 0xffffffffu)
            : B->write_value32(stream, op->writeValue.address, op->writeValue.value,
                               op->writeValue.flags);
  }
  return leave("hipStreamBatchMemOp", e);
}

hipError_t mori_hipDeviceGetAttribute(int *value, hipDeviceAttribute_t attr, int device) {
  ENTER("hipDeviceGetAttribute", device_attribute);
  return leave("hipDeviceGetAttribute", B->device_attribute(value, attr, device));
}

hipError_t mori_hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags) {
  ENTER("hipStreamCreateWithFlags", stream_create);
  return leave("hipStreamCreateWithFlags", B->stream_create(stream, flags));
}

hipError_t mori_hipStreamDestroy(hipStream_t stream) {
  ENTER("hipStreamDestroy", stream_destroy);
  return leave("hipStreamDestroy", B->stream_destroy(stream));
}

hipError_t mori_hipStreamIsCapturing(hipStream_t stream, hipStreamCaptureStatus *status) {
  ENTER("hipStreamIsCapturing", stream_is_capturing);
  return leave("hipStreamIsCapturing", B->stream_is_capturing(stream, status));
}

hipError_t mori_hipEventCreateWithFlags(hipEvent_t *event, unsigned int flags) {
  ENTER("hipEventCreateWithFlags", event_create);
  return leave("hipEventCreateWithFlags", B->event_create(event, flags));
}

hipError_t mori_hipEventRecord(hipEvent_t event, hipStream_t stream) {
  ENTER("hipEventRecord", event_record);
  return leave("hipEventRecord", B->event_record(event, stream));
}

hipError_t mori_hipEventQuery(hipEvent_t event) {
  ENTER("hipEventQuery", event_query);
  return leave("hipEventQuery", B->event_query(event));
}

hipError_t mori_hipEventSynchronize(hipEvent_t event) {
  ENTER("hipEventSynchronize", event_sync);
  return leave("hipEventSynchronize", B->event_sync(event));
}

hipError_t mori_hipEventDestroy(hipEvent_t event) {
  ENTER("hipEventDestroy", event_destroy);
  return leave("hipEventDestroy", B->event_destroy(event));
}

hipError_t mori_hipMemsetAsync(void *dst, int value, size_t size, hipStream_t stream) {
  ENTER("hipMemsetAsync", memset_async);
  return leave("hipMemsetAsync", B->memset_async(dst, value, size, stream));
}

hipError_t mori_hipMemcpyAsync(void *dst, const void *src, size_t size, hipMemcpyKind kind,
                               hipStream_t stream) {
  ENTER("hipMemcpyAsync", memcpy_async);
  return leave("hipMemcpyAsync", B->memcpy_async(dst, src, size, kind, stream));
}

hipError_t mori_hipRuntimeGetVersion(int *version) {
  ENTER("hipRuntimeGetVersion", runtime_version);
  return leave("hipRuntimeGetVersion", B->runtime_version(version));
}

/* Returns the thread's last result and resets it, as HIP does; also clears
 * the runtime's own sticky error so that a failed probe leaves none. */
hipError_t mori_hipGetLastError(void) {
  hipError_t e = last_error;
  const struct mori__shim_backend *b = backend();
  if (b != NULL && b->clear_last_error != NULL) (void)b->clear_last_error();
  last_error = hipSuccess;
  return e;
}

int mori_shim_runtime_version(void) {
  int v = 0;
  const struct mori__shim_backend *b = backend();
  if (b == NULL || b->runtime_version(&v) != hipSuccess) return 0;
  return v;
}

/* ---- sim only: capture and replay ---- */

/* The sim's capture calls are test controls, not HIP calls: they pass no
 * fault shim and need the sim to be the active backend. */
static int sim_active(const char *call) {
  const struct mori__shim_backend *b = backend();
  detail_set = 0;
  if (b == &mori__shim_sim) return 1;
  mori__shim_detail("%s: only the sim backend captures streams (active: %s)", call,
                    b ? b->name : "none");
  return 0;
}

hipError_t mori_sim_begin_capture(hipStream_t stream) {
  if (!sim_active("mori_sim_begin_capture")) return hipErrorNotSupported;
  return leave("mori_sim_begin_capture", mori__sim_begin_capture(stream));
}

hipError_t mori_sim_end_capture(hipStream_t stream, mori_sim_graph **graph) {
  if (!sim_active("mori_sim_end_capture")) return hipErrorNotSupported;
  return leave("mori_sim_end_capture", mori__sim_end_capture(stream, graph));
}

hipError_t mori_sim_graph_launch(const mori_sim_graph *graph, hipStream_t stream) {
  if (!sim_active("mori_sim_graph_launch")) return hipErrorNotSupported;
  return leave("mori_sim_graph_launch", mori__sim_graph_launch(graph, stream));
}

void mori_sim_graph_destroy(mori_sim_graph *graph) { mori__sim_graph_destroy(graph); }

/* ---- the OS calls ---- */

/* A failed OS call leaves its detail as a failed runtime call does
 * ("calloc: Cannot allocate memory (ENOMEM 12)"), so an error built after
 * it can name the call (errno is kept). */
static void os_failed(const char *name) {
  int e = errno;
  mori__shim_detail("%s: %s (errno %d)", name, strerror(e), e);
  errno = e;
}

#define MORI_SHIM_OS_FORWARD(ret, name, params, args) \
  ret mori_##name params {                             \
    ret r_ = name args;                                \
    if (r_ == MORI_SHIM_OS_FAILURE(ret)) os_failed(#name); \
    return r_;                                         \
  }
MORI_SHIM_OS_CALLS(MORI_SHIM_OS_FORWARD)
#undef MORI_SHIM_OS_FORWARD

int mori_close(int fd) {
  ledger_remove(L_EXPORTED_FD, (uintptr_t)(unsigned)fd);
  return close(fd);
}
