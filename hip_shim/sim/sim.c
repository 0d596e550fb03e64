/*
 * sim.c - the sim backend's table: profiles and quirks read from the
 * environment at init, the contract rules' wording, and the checks of the
 * calls that are not VMM (devices, copies, stream memory operations).
 * Device memory (the VMM emulator, hipMalloc) and the engine that moves
 * its bytes are sim_vmm.c; streams and events are sim_stream.c.
 */
#include "sim_internal.h"

#include "mori/values.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- profiles: the seed's capability table, one row per MORI_SIM_ARCH ---- */

static const struct mori__sim_profile profiles[] = {
    /* arch              version   fab.create fab.export hint  CUs */
    {"gfx942", 60400000, 0, 0, 0, 80},   /* MI308X on ROCm 6.4 */
    {"gfx950", 70000000, 0, 0, 0, 256},  /* MI355X on ROCm 7.0 */
    {"gfx1250", 71400000, 1, 1, 1, 256}, /* ROCm 7.14: fabric create and export */
    {"gfx1250-rocm7.1", 70100000, 1, 0, 1, 256}, /* create works, export does not */
};
#define DEFAULT_PROFILE (&profiles[1])

/* ---- quirks: known ROCm defects, reproduced on request (docs/quirks.md) ---- */

static const struct {
  const char *name;
  enum mori__sim_quirk bit;
} quirks[] = {
    {"retain-no-ref", MORI__SIM_Q_RETAIN_NO_REF},
    {"export-fd-lifetime", MORI__SIM_Q_EXPORT_FD_LIFETIME},
    {"unmap-multi", MORI__SIM_Q_UNMAP_MULTI},
    {"memset-fabric", MORI__SIM_Q_MEMSET_FABRIC},
    {"import-fd-lifetime", MORI__SIM_Q_IMPORT_FD_LIFETIME},
    {"concurrent-vmm", MORI__SIM_Q_CONCURRENT_VMM},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

const char *mori_sim_profile_name(int i) {
  return i >= 0 && (size_t)i < COUNT(profiles) ? profiles[i].arch : NULL;
}

const char *mori_sim_quirk_name(int i) {
  return i >= 0 && (size_t)i < COUNT(quirks) ? quirks[i].name : NULL;
}

struct mori__sim_config mori__sim_config = {DEFAULT_PROFILE, 0, 8, 30000, 0};
pthread_mutex_t mori__sim_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- contract rules ---- */

static const char *const rules[RULE_COUNT] = {
    [RULE_NULL_ARGUMENT] = "a required argument is NULL or empty",
    [RULE_SIZE_GRANULARITY] = "size must be a nonzero multiple of the granularity (2 MiB)",
    [RULE_FLAGS_ZERO] = "flags must be 0",
    [RULE_MAP_OFFSET_ZERO] = "offset must be 0",
    [RULE_ALIGNMENT_POW2] = "alignment must be 0 or a power of two",
    [RULE_ADDRESS_ALIGNED] = "address must be aligned to the granularity",
    [RULE_MAP_INSIDE_RESERVATION] = "range must lie inside one reservation",
    [RULE_MAP_OVERLAP] = "range must not overlap an existing mapping",
    [RULE_MAP_LARGER_THAN_ALLOCATION] = "size must not exceed the allocation",
    [RULE_UNMAP_WHOLE_MAPPINGS] = "unmap must cover whole mappings",
    [RULE_FREE_LIVE_MAPPINGS] = "reservation still has live mappings",
    [RULE_FREE_SIZE] = "size must equal the reservation's size",
    [RULE_FREE_UNKNOWN] = "address is not the start of a reservation",
    [RULE_UNKNOWN_HANDLE] = "unknown allocation handle",
    [RULE_DOUBLE_RELEASE] = "double release",
    [RULE_USE_AFTER_RELEASE] = "use of a released handle",
    [RULE_EXPORT_TYPE] = "handle type must equal prop.requestedHandleType",
    [RULE_HANDLE_TYPE] = "handle type must be POSIX fd or fabric",
    [RULE_IMPORT_GARBAGE] = "shareable handle does not name a live sim allocation",
    [RULE_NOT_MAPPED] = "address is not mapped",
    [RULE_NO_ACCESS] = "mapped memory lacks the access this needs (hipMemSetAccess)",
    [RULE_NOT_DEVICE] = "a device operand must lie in a mapping, a hipMalloc or a hipHostMalloc "
                        "block; plain host memory is only a copy's host side",
    [RULE_ACCESS_FLAGS] = "access flags must be ProtNone, ProtRead or ProtReadWrite",
    [RULE_LOCATION] = "location must be a device in range",
    [RULE_ALLOCATION_TYPE] = "allocation type must be pinned or uncached",
    [RULE_HIPFREE_UNKNOWN] = "pointer was not returned by hipMalloc or was already freed",
    [RULE_MEMCPY_KIND] = "copy kind must be a hipMemcpyKind",
    [RULE_VALUE_ALIGNED] = "address must be 4-byte aligned",
    [RULE_WAIT_FLAGS] = "flags must be Gte, Eq, And or Nor",
    [RULE_GRANULARITY_OPTION] = "option must be Minimum or Recommended",
    [RULE_ATTRIBUTE] = "unknown device attribute",
    [RULE_UNKNOWN_STREAM] = "unknown or destroyed stream",
    [RULE_UNKNOWN_EVENT] = "unknown or destroyed event",
    [RULE_STREAM_FLAGS] = "stream flags must be hipStreamDefault or hipStreamNonBlocking",
    [RULE_CAPTURE] = "not permitted on a stream in capture (or capture misused)",
    [RULE_UNKNOWN_MODULE] = "unknown or unloaded module",
    [RULE_UNKNOWN_FUNCTION] = "not a function of a loaded module",
    [RULE_LAUNCH_SHAPE] = "the sim runs a kernel as one block (grid 1x1x1, block Nx1x1, no "
                          "shared memory)",
};

hipError_t mori__sim_contract(const char *call, enum mori__sim_rule rule, const char *fmt, ...) {
  char specifics[256] = "";
  if (fmt != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(specifics, sizeof specifics, fmt, ap);
    va_end(ap);
  }
  mori__shim_detail("%s: contract: %s%s%s%s", call, rules[rule], *specifics ? " (" : "",
                    specifics, *specifics ? ")" : "");
  return hipErrorInvalidValue;
}

/* ---- init: everything the environment decides ---- */

static int parse_arch(const char *v, struct mori__sim_config *c, char *why, size_t whylen) {
  if (v == NULL || *v == '\0') {
    c->profile = DEFAULT_PROFILE;
    return 0;
  }
  for (size_t i = 0; i < COUNT(profiles); i++)
    if (strcmp(v, profiles[i].arch) == 0) {
      c->profile = &profiles[i];
      return 0;
    }
  int n = snprintf(why, whylen, "MORI_SIM_ARCH=%s is not a sim profile (valid:", v);
  for (size_t i = 0; i < COUNT(profiles) && n >= 0 && (size_t)n < whylen; i++)
    n += snprintf(why + n, whylen - (size_t)n, "%s %s", i ? "," : "", profiles[i].arch);
  if (n >= 0 && (size_t)n < whylen) snprintf(why + n, whylen - (size_t)n, ")");
  return -1;
}

static int quirk_bit(const char *name, unsigned *bits) {
  if (strcmp(name, "all") == 0) {
    for (size_t i = 0; i < COUNT(quirks); i++) *bits |= quirks[i].bit;
    return 0;
  }
  if (*name == '\0' || strcmp(name, "none") == 0) return 0;
  for (size_t i = 0; i < COUNT(quirks); i++)
    if (strcmp(name, quirks[i].name) == 0) {
      *bits |= quirks[i].bit;
      return 0;
    }
  return -1;
}

/* Every name of the list, however long (a name longer than any quirk's is
 * unknown, shown cut). */
static int parse_quirks(const char *v, struct mori__sim_config *c, char *why, size_t whylen) {
  c->quirks = 0;
  if (v == NULL) return 0;
  for (const char *p = v + strspn(v, ", "); *p; p += strspn(p, ", ")) {
    size_t len = strcspn(p, ", ");
    char q[64];
    snprintf(q, sizeof q, "%.*s", (int)(len < sizeof q ? len : sizeof q - 1), p);
    p += len;
    if (len < sizeof q && quirk_bit(q, &c->quirks) == 0) continue;
    int n = snprintf(why, whylen, "MORI_SIM_QUIRKS: unknown quirk '%s' (valid:", q);
    for (size_t i = 0; i < COUNT(quirks) && n >= 0 && (size_t)n < whylen; i++)
      n += snprintf(why + n, whylen - (size_t)n, " %s,", quirks[i].name);
    if (n >= 0 && (size_t)n < whylen) snprintf(why + n, whylen - (size_t)n, " all)");
    return -1;
  }
  return 0;
}

/* By the strict reader (mori/values.h): "+8", " 8" and "8x" are refused. */
static int parse_long(const char *name, long lo, long hi, long dflt, long *out, char *why,
                      size_t whylen) {
  long long n;
  if (mori_env_int(name, lo, hi, dflt, &n, why, whylen) != 0) return -1;
  *out = (long)n;
  return 0;
}

/* MORI_SIM_DEVICE_BYTES: a size as the help writes it, 1 MiB to 1 PiB. */
#define DEVICE_BYTES_ENV "MORI_SIM_DEVICE_BYTES"
#define DEVICE_BYTES_DEFAULT (64LL << 30)
static int device_bytes(long long *out, char *why, size_t whylen) {
  return mori_env_size(DEVICE_BYTES_ENV, 1LL << 20, 1LL << 50, DEVICE_BYTES_DEFAULT, out, why,
                       whylen);
}

/* MORI_SIM_STREAMS: sync (operations run when enqueued) or async (a worker
 * per stream, as a GPU queue). */
static int parse_streams(const char *v, struct mori__sim_config *c, char *why, size_t whylen) {
  if (v == NULL || *v == '\0' || strcmp(v, "sync") == 0) {
    c->async_streams = 0;
    return 0;
  }
  if (strcmp(v, "async") == 0) {
    c->async_streams = 1;
    return 0;
  }
  snprintf(why, whylen, "MORI_SIM_STREAMS=%s: expected sync or async", v);
  return -1;
}

static void atfork_prepare(void) { pthread_mutex_lock(&mori__sim_lock); }
static void atfork_release(void) { pthread_mutex_unlock(&mori__sim_lock); }
static void install_atfork(void) {
  /* The tables must be consistent in a forked child (the multi-process
   * tests fork), so fork waits for the call in progress. */
  pthread_atfork(atfork_prepare, atfork_release, atfork_release);
}

static int sim_init(char *why, size_t whylen) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  struct mori__sim_config c;
  long devices;
  if (parse_arch(getenv("MORI_SIM_ARCH"), &c, why, whylen) != 0 ||
      parse_quirks(getenv("MORI_SIM_QUIRKS"), &c, why, whylen) != 0 ||
      parse_streams(getenv("MORI_SIM_STREAMS"), &c, why, whylen) != 0 ||
      parse_long("MORI_SIM_DEVICES", 1, 1024, 8, &devices, why, whylen) != 0 ||
      parse_long("MORI_SIM_WAIT_TIMEOUT_MS", 0, 86400000L, 30000, &c.wait_timeout_ms, why,
                 whylen) != 0)
    return -1;
  long long bytes;
  if (device_bytes(&bytes, why, whylen) != 0) return -1;
  c.devices = (int)devices;
  pthread_once(&once, install_atfork);
  pthread_mutex_lock(&mori__sim_lock);
  mori__sim_config = c;
  pthread_mutex_unlock(&mori__sim_lock);
  return 0;
}

/* ---- devices ---- */

static __thread int current_device;

static hipError_t check_device(const char *call, int device) {
  if (device >= 0 && device < mori__sim_config.devices) return hipSuccess;
  mori__shim_detail("%s: hipErrorInvalidDevice: device %d of %d (MORI_SIM_DEVICES)", call,
                    device, mori__sim_config.devices);
  return hipErrorInvalidDevice;
}

static hipError_t sim_get_device(int *device) {
  if (device == NULL) return mori__sim_contract("hipGetDevice", RULE_NULL_ARGUMENT, "device");
  *device = current_device;
  return hipSuccess;
}

static hipError_t sim_set_device(int device) {
  hipError_t e = check_device("hipSetDevice", device);
  if (e == hipSuccess) current_device = device;
  return e;
}

static hipError_t sim_device_count(int *count) {
  if (count == NULL) return mori__sim_contract("hipGetDeviceCount", RULE_NULL_ARGUMENT, "count");
  *count = mori__sim_config.devices;
  return hipSuccess;
}

static int attr_multiprocessors(int device) { return mori__sim_config.profile->cu_count; }
static int attr_vmm(int device) { return 1; }
static int attr_pci_bus(int device) { return device; }
static int attr_pci_device(int device) { return 0; }
static int attr_fabric_hint(int device) { return mori__sim_config.profile->fabric_hint; }

static int (*const attributes[])(int) = {
    [moriDeviceAttributeMultiprocessorCount] = attr_multiprocessors,
    [moriDeviceAttributeVirtualMemoryManagementSupported] = attr_vmm,
    [moriDeviceAttributePciBusId] = attr_pci_bus,
    [moriDeviceAttributePciDeviceId] = attr_pci_device,
    [moriDeviceAttributeFabricHandleSupported] = attr_fabric_hint,
};

static hipError_t sim_device_attribute(int *value, hipDeviceAttribute_t attr, int device) {
  static const char call[] = "hipDeviceGetAttribute";
  if (value == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "value");
  if ((unsigned)attr >= COUNT(attributes) || attributes[attr] == NULL)
    return mori__sim_contract(call, RULE_ATTRIBUTE, "%d", (int)attr);
  hipError_t e = check_device(call, device);
  if (e == hipSuccess) *value = attributes[attr](device);
  return e;
}

static hipError_t sim_runtime_version(int *version) {
  if (version == NULL)
    return mori__sim_contract("hipRuntimeGetVersion", RULE_NULL_ARGUMENT, "version");
  *version = mori__sim_config.profile->runtime_version;
  return hipSuccess;
}

/* ---- copies ---- */

/* Which operands of a copy of this kind may be plain host memory: the
 * host side its kind names, either under hipMemcpyDefault (the pointer
 * says, as HIP infers it).  A valid kind. */
static unsigned host_sides(hipMemcpyKind kind) {
  static const unsigned sides[] = {
      [hipMemcpyHostToHost] = MORI__SIM_HOST_DST | MORI__SIM_HOST_SRC,
      [hipMemcpyHostToDevice] = MORI__SIM_HOST_SRC,
      [hipMemcpyDeviceToHost] = MORI__SIM_HOST_DST,
      [hipMemcpyDeviceToDevice] = 0,
      [hipMemcpyDefault] = MORI__SIM_HOST_DST | MORI__SIM_HOST_SRC,
  };
  return sides[kind];
}

static hipError_t memcpy_locked(void *dst, const void *src, size_t size, hipMemcpyKind kind) {
  static const char call[] = "hipMemcpy";
  if ((unsigned)kind > hipMemcpyDefault)
    return mori__sim_contract(call, RULE_MEMCPY_KIND, "got %d", (int)kind);
  if (size == 0) return hipSuccess;
  if (dst == NULL || src == NULL)
    return mori__sim_contract(call, RULE_NULL_ARGUMENT, "dst %p, src %p", dst, src);
  unsigned host = host_sides(kind);
  hipError_t e = mori__sim_check_access(call, dst, size, 1, !!(host & MORI__SIM_HOST_DST));
  if (e == hipSuccess)
    e = mori__sim_check_access(call, src, size, 0, !!(host & MORI__SIM_HOST_SRC));
  return e;
}

static hipError_t memset_locked(void *dst, size_t size) {
  static const char call[] = "hipMemset";
  if (size == 0) return hipSuccess;
  if (dst == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "dst");
  if (mori__sim_quirk(MORI__SIM_Q_MEMSET_FABRIC) && mori__sim_touches_fabric(dst, size)) {
    mori__shim_detail("%s: quirk memset-fabric: hipErrorOutOfMemory on memory of a fabric "
                      "allocation; zero it with hipMemcpy",
                      call);
    return hipErrorOutOfMemory;
  }
  return mori__sim_check_access(call, dst, size, 1, 0);
}

/* The checks hold the lock; the copy itself does not, as a DMA engine
 * would not stop other calls (the engine, sim_vmm.c, moves the bytes).  A
 * synchronous copy or fill first waits for the blocking streams' work, as
 * the legacy default stream orders it. */
static hipError_t sim_memcpy(void *dst, const void *src, size_t size, hipMemcpyKind kind) {
  pthread_mutex_lock(&mori__sim_lock);
  hipError_t e = memcpy_locked(dst, src, size, kind);
  pthread_mutex_unlock(&mori__sim_lock);
  if (e == hipSuccess) e = mori__sim_legacy_sync("hipMemcpy");
  struct mori__sim_op op = {.kind = MORI__SIM_OP_COPY, .dst = dst, .src = src, .size = size};
  if (e == hipSuccess) op.host = host_sides(kind);
  return e != hipSuccess || size == 0 ? e : mori__sim_run("hipMemcpy", &op);
}

static hipError_t sim_memset(void *dst, int value, size_t size) {
  pthread_mutex_lock(&mori__sim_lock);
  hipError_t e = memset_locked(dst, size);
  pthread_mutex_unlock(&mori__sim_lock);
  if (e == hipSuccess) e = mori__sim_legacy_sync("hipMemset");
  struct mori__sim_op op = {
      .kind = MORI__SIM_OP_FILL, .dst = dst, .value = (uint32_t)value, .size = size};
  return e != hipSuccess || size == 0 ? e : mori__sim_run("hipMemset", &op);
}

static hipError_t sim_memcpy_async(void *dst, const void *src, size_t size, hipMemcpyKind kind,
                                   hipStream_t stream) {
  pthread_mutex_lock(&mori__sim_lock);
  hipError_t e = memcpy_locked(dst, src, size, kind);
  pthread_mutex_unlock(&mori__sim_lock);
  struct mori__sim_op op = {.kind = MORI__SIM_OP_COPY, .dst = dst, .src = src, .size = size};
  if (e == hipSuccess) op.host = host_sides(kind);
  return e != hipSuccess || size == 0 ? e : mori__sim_enqueue("hipMemcpyAsync", stream, &op);
}

static hipError_t sim_memset_async(void *dst, int value, size_t size, hipStream_t stream) {
  pthread_mutex_lock(&mori__sim_lock);
  hipError_t e = memset_locked(dst, size);
  pthread_mutex_unlock(&mori__sim_lock);
  struct mori__sim_op op = {
      .kind = MORI__SIM_OP_FILL, .dst = dst, .value = (uint32_t)value, .size = size};
  return e != hipSuccess || size == 0 ? e : mori__sim_enqueue("hipMemsetAsync", stream, &op);
}

static hipError_t sim_malloc(void **ptr, size_t size) { return mori__sim_malloc(ptr, size); }

/* A device of MORI_SIM_DEVICE_BYTES (default 64 GiB) whose use is every
 * live physical allocation and hipMalloc block of this process, so growth
 * across cycles shows as it would on a GPU. */
static hipError_t sim_mem_get_info(size_t *free_bytes, size_t *total_bytes) {
  if (free_bytes == NULL || total_bytes == NULL)
    return mori__sim_contract("hipMemGetInfo", RULE_NULL_ARGUMENT, "free/total");
  long long bytes;
  char why[160];
  /* refused at bring-up (sim_init) if malformed; the default if it changed since */
  size_t total = device_bytes(&bytes, why, sizeof why) == 0 ? (size_t)bytes
                                                            : (size_t)DEVICE_BYTES_DEFAULT;
  pthread_mutex_lock(&mori__sim_lock);
  size_t used = mori__sim_live_bytes();
  pthread_mutex_unlock(&mori__sim_lock);
  *total_bytes = total;
  *free_bytes = used < total ? total - used : 0;
  return hipSuccess;
}

static hipError_t sim_free(void *ptr) { return mori__sim_free(ptr); }

/* ---- stream memory operations: checked here, run by sim_stream.c ---- */

static hipError_t check_memop(const char *call, void *ptr, int need_write) {
  if (ptr == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "ptr");
  if ((uintptr_t)ptr % 4 != 0) return mori__sim_contract(call, RULE_VALUE_ALIGNED, "%p", ptr);
  pthread_mutex_lock(&mori__sim_lock);
  hipError_t e = mori__sim_check_access(call, ptr, 4, need_write, 0);
  pthread_mutex_unlock(&mori__sim_lock);
  return e;
}

static hipError_t sim_write_value32(hipStream_t stream, void *ptr, uint32_t value,
                                    unsigned int flags) {
  static const char call[] = "hipStreamWriteValue32";
  if (flags != 0) return mori__sim_contract(call, RULE_FLAGS_ZERO, "got %u", flags);
  hipError_t e = check_memop(call, ptr, 1);
  struct mori__sim_op op = {.kind = MORI__SIM_OP_WRITE, .dst = ptr, .value = value};
  return e != hipSuccess ? e : mori__sim_enqueue(call, stream, &op);
}

static hipError_t sim_wait_value32(hipStream_t stream, void *ptr, uint32_t value,
                                   unsigned int flags, uint32_t mask) {
  static const char call[] = "hipStreamWaitValue32";
  if (!mori__sim_wait_flags_valid(flags))
    return mori__sim_contract(call, RULE_WAIT_FLAGS, "got %u", flags);
  hipError_t e = check_memop(call, ptr, 0);
  struct mori__sim_op op = {
      .kind = MORI__SIM_OP_WAIT, .dst = ptr, .value = value, .flags = flags, .mask = mask};
  return e != hipSuccess ? e : mori__sim_enqueue(call, stream, &op);
}

const struct mori__shim_backend mori__shim_sim = {
    .name = "sim",
    .init = sim_init,
    .hipMemCreate = mori__sim_mem_create,
    .hipMemRelease = mori__sim_mem_release,
    .hipMemRetainAllocationHandle = mori__sim_mem_retain,
    .hipMemAddressReserve = mori__sim_address_reserve,
    .hipMemAddressFree = mori__sim_address_free,
    .hipMemMap = mori__sim_mem_map,
    .hipMemUnmap = mori__sim_mem_unmap,
    .hipMemSetAccess = mori__sim_set_access,
    .hipMemGetAllocationGranularity = mori__sim_granularity,
    .hipMemExportToShareableHandle = mori__sim_export,
    .hipMemImportFromShareableHandle = mori__sim_import,
    .hipMalloc = sim_malloc,
    .hipFree = sim_free,
    .hipMemcpy = sim_memcpy,
    .hipMemset = sim_memset,
    .hipMemGetInfo = sim_mem_get_info,
    .hipGetDevice = sim_get_device,
    .hipSetDevice = sim_set_device,
    .hipGetDeviceCount = sim_device_count,
    .hipDeviceSynchronize = mori__sim_device_sync,
    .hipStreamSynchronize = mori__sim_stream_sync,
    .hipStreamWriteValue32 = sim_write_value32,
    .hipStreamWaitValue32 = sim_wait_value32,
    .hipDeviceGetAttribute = sim_device_attribute,
    .hipStreamCreateWithFlags = mori__sim_stream_create,
    .hipStreamDestroy = mori__sim_stream_destroy,
    .hipStreamIsCapturing = mori__sim_stream_is_capturing,
    .hipEventCreateWithFlags = mori__sim_event_create,
    .hipEventRecord = mori__sim_event_record,
    .hipEventQuery = mori__sim_event_query,
    .hipEventSynchronize = mori__sim_event_sync,
    .hipEventDestroy = mori__sim_event_destroy,
    .hipMemsetAsync = sim_memset_async,
    .hipMemcpyAsync = sim_memcpy_async,
    .hipGetLastError = NULL, /* the sim keeps no sticky error of its own */
    .hipRuntimeGetVersion = sim_runtime_version,
    .hipModuleLoadData = mori__sim_module_load,
    .hipModuleGetFunction = mori__sim_module_function,
    .hipModuleLaunchKernel = mori__sim_launch,
    .hipModuleUnload = mori__sim_module_unload,
    .hipHostMalloc = mori__sim_host_malloc,
    .hipHostFree = mori__sim_host_free,
    .own_fds = mori__sim_own_fds,
    .begin_capture = mori__sim_begin_capture,
    .end_capture = mori__sim_end_capture,
    .graph_launch = mori__sim_graph_launch,
    .graph_destroy = mori__sim_graph_destroy,
};
