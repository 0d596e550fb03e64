/*
 * shim.c - the exported mori_hip* entry points and what all backends share:
 * backend selection, the thread-local last error and detail message, and the
 * resource registry (the live runtime resources).  The OS half of the seam
 * is os.c.
 *
 * Every entry point has the same shape: bring the backend up, call its table
 * entry, record what was acquired or released, store the result as the
 * thread's last error.  Nothing here knows which runtime is underneath: a
 * backend is reached through its table (shim_internal.h) alone.
 */
#include "shim_internal.h"

#include "mori/text.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

/* ---- error names ---- */

#define MORI_ERROR_ROW(e, value) {e, #e},
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

/* The one refusal of a name that is no backend, for select, find and load. */
static void say_unknown_backend(char *buf, size_t len, const char *name) {
  snprintf(buf, len, "unknown shim backend '%s' (expected auto, sim, cuda or hip)", name);
}

static void registry_report_at_exit(void);

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
    say_unknown_backend(select_failure, sizeof select_failure, name);
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

int mori_shim_load(const char *name) {
  char why[1024] = "";
  int rc = 0;
  pthread_mutex_lock(&select_lock);
  const struct mori__shim_backend *b = name != NULL ? find_backend(name) : NULL;
  if (active == NULL && name != NULL && strcmp(name, "auto") != 0) {
    if (b == NULL) {
      say_unknown_backend(why, sizeof why, name);
      rc = -1;
    } else if (b->load != NULL && b->load(why, sizeof why) != 0) {
      rc = -1;
    }
  }
  if (rc != 0) mori__shim_detail("shim backend %s not loaded: %s", name, why);
  pthread_mutex_unlock(&select_lock);
  return rc;
}

const char *mori_shim_backend_name(int i) {
  return i >= 0 && (size_t)i < sizeof backends / sizeof backends[0] ? backends[i]->name : NULL;
}

/* auto's candidates in bring_up's order; the verdict is the first found
 * and accepted, else a refusal if any (each named), else none found. */
int mori_shim_runtime_find(const char *name, char *why, size_t whylen) {
  static const char *const auto_order[] = {"hip", "cuda"};
  const char *one[] = {name};
  const char *const *names = one;
  size_t n = 1, used = 0;
  char reason[1024];
  int verdict = 0;
  if (whylen > 0) why[0] = '\0';
  if (name == NULL || *name == '\0' || strcmp(name, "auto") == 0) {
    names = auto_order;
    n = sizeof auto_order / sizeof auto_order[0];
  }
  for (size_t i = 0; i < n; i++) {
    const struct mori__shim_backend *b = find_backend(names[i]);
    if (b == NULL) {
      say_unknown_backend(why, whylen, names[i]);
      return -1;
    }
    reason[0] = '\0';
    int rc = b->find ? b->find(reason, sizeof reason) : 1;
    if (rc == 1) {
      snprintf(why, whylen, "%s: %s", b->name, b->find ? reason : "the emulator");
      return 1;
    }
    if (rc < 0) verdict = -1;
    if (rc < 0 || (verdict == 0 && n == 1)) {
      int k = snprintf(why + used, whylen > used ? whylen - used : 0, "%s%s: %s",
                       used ? "; " : "", b->name, reason);
      if (k > 0) used += (size_t)k < whylen - used ? (size_t)k : whylen - used - 1;
    }
  }
  return verdict;
}

/* MORI_FI is read by libmori_faultinject.so alone: set in a process the
 * fault shim was not preloaded into, it would do nothing, silently.  Every
 * such process loads this library, so its loading says so, once per
 * program (a forked rank inherits the parent's having said it). */
__attribute__((constructor)) static void warn_fault_schedule_unread(void) {
  const char *fi = getenv("MORI_FI");
  if (fi == NULL || *fi == '\0' || dlsym(RTLD_DEFAULT, "mori_fi_preload_configure") != NULL)
    return;
  fprintf(stderr, "[mori-symm WARN] MORI_FI is set but libmori_faultinject.so is not loaded: "
                  "no fault will be injected (LD_PRELOAD the fault shim, or run under mori-fi)\n");
}

/* MORI_SHIM_REGISTRY_REPORT=1, or its older name MORI_SHIM_LEDGER_REPORT=1
 * (scripts still set it).  Another value than 0 or 1 is said once, named,
 * rather than read as "no report" in silence. */
static int report_at_exit(void) {
  static const char *const names[] = {"MORI_SHIM_REGISTRY_REPORT", "MORI_SHIM_LEDGER_REPORT"};
  static atomic_int said;
  int on = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *v = getenv(names[i]);
    if (v != NULL && strcmp(v, "1") == 0) on = 1;
    if (v != NULL && *v != '\0' && strcmp(v, "0") != 0 && strcmp(v, "1") != 0 &&
        atomic_exchange(&said, 1) == 0) {
      char shown[4 * 32 + 48];
      fprintf(stderr, "[mori-symm WARN] %s=%s: expected 0 or 1; no registry report\n", names[i],
              mori__escape(shown, sizeof shown, v, strlen(v), 32));
    }
  }
  return on;
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
    if (rc == 0 && report_at_exit()) atexit(registry_report_at_exit);
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

/* ---- the resource registry ---- */

/* Every live runtime resource made through the shim, whatever the backend,
 * so that "0 leaks" is checkable on a GPU as on the emulator.  (The core's
 * per-window list of what a window holds is its ledger, fsm/; this is the
 * shim's own.)  Which call adds or removes what is the registry column of
 * MORI_SHIM_HIP_CALLS. */
enum registry_kind {
  KIND_HANDLE,
  KIND_RESERVATION,
  KIND_MAPPING,
  KIND_EXPORTED_FD,
  KIND_DEVICE_ALLOC,
  KIND_HOST_ALLOC,
  KIND__COUNT
};
static const char *const kind_names[KIND__COUNT] = {
    "handle", "reservation", "mapping", "exported fd", "device allocation", "host allocation"};

struct registry_entry {
  enum registry_kind kind;
  uintptr_t key; /* handle value, address or fd */
  size_t size;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct registry_entry *registry;
static size_t registry_len, registry_cap;

static void registry_add(enum registry_kind kind, uintptr_t key, size_t size) {
  pthread_mutex_lock(&registry_lock);
  if (registry_len == registry_cap) {
    size_t cap = registry_cap ? registry_cap * 2 : 64;
    struct registry_entry *n = realloc(registry, cap * sizeof *n);
    if (n == NULL) { /* the registry is diagnostics: losing an entry is reported */
      pthread_mutex_unlock(&registry_lock);
      fprintf(stderr, "mori shim: resource registry out of memory; leak report incomplete\n");
      return;
    }
    registry = n;
    registry_cap = cap;
  }
  registry[registry_len++] = (struct registry_entry){kind, key, size};
  pthread_mutex_unlock(&registry_lock);
}

/* Removes entries of kind whose key lies in [lo, hi); at most `max` of them
 * (0: all).  Returns how many were removed. */
static size_t registry_remove_range(enum registry_kind kind, uintptr_t lo, uintptr_t hi,
                                    size_t max) {
  size_t removed = 0;
  pthread_mutex_lock(&registry_lock);
  for (size_t i = registry_len; i-- > 0;) {
    if (registry[i].kind != kind || registry[i].key < lo || registry[i].key >= hi) continue;
    registry[i] = registry[--registry_len];
    if (++removed == max) break;
  }
  pthread_mutex_unlock(&registry_lock);
  return removed;
}

static void registry_remove(enum registry_kind kind, uintptr_t key) {
  registry_remove_range(kind, key, key + 1, 1);
}

void mori_shim_registry(mori_shim_registry_counts *out) {
  long c[KIND__COUNT] = {0};
  pthread_mutex_lock(&registry_lock);
  for (size_t i = 0; i < registry_len; i++) c[registry[i].kind]++;
  pthread_mutex_unlock(&registry_lock);
  out->handles = c[KIND_HANDLE];
  out->reservations = c[KIND_RESERVATION];
  out->mappings = c[KIND_MAPPING];
  out->exported_fds = c[KIND_EXPORTED_FD];
  out->device_allocs = c[KIND_DEVICE_ALLOC];
  out->host_allocs = c[KIND_HOST_ALLOC];
}

long mori_shim_registry_total(void) {
  pthread_mutex_lock(&registry_lock);
  long n = (long)registry_len;
  pthread_mutex_unlock(&registry_lock);
  return n;
}

int mori_shim_runtime_fds(void) {
  /* never brings a backend up: none active holds nothing */
  const struct mori__shim_backend *b = __atomic_load_n(&active, __ATOMIC_ACQUIRE);
  return b != NULL && b->own_fds != NULL ? b->own_fds() : 0;
}

long mori_shim_registry_report(FILE *out) {
  pthread_mutex_lock(&registry_lock);
  long n = (long)registry_len;
  if (n == 0) {
    fprintf(out, "mori shim registry: 0 leaks\n");
  } else {
    fprintf(out, "mori shim registry: %ld leaks\n", n);
    for (size_t i = 0; i < registry_len; i++) {
      const struct registry_entry *e = &registry[i];
      if (e->kind == KIND_EXPORTED_FD)
        fprintf(out, "  leak: %s %d\n", kind_names[e->kind], (int)e->key);
      else
        fprintf(out, "  leak: %s 0x%lx size %zu\n", kind_names[e->kind],
                (unsigned long)e->key, e->size);
    }
  }
  pthread_mutex_unlock(&registry_lock);
  return n;
}

static void registry_report_at_exit(void) { mori_shim_registry_report(stderr); }

/* The OS half of the seam (os.c) only forwards; closing an fd is written
 * here because an exported fd leaves the registry when it is closed. */
int mori_close(int fd) {
  registry_remove(KIND_EXPORTED_FD, (uintptr_t)(unsigned)fd);
  return close(fd);
}

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
 * serialises the VMM calls themselves (the rows marked vmm), each for the
 * length of the runtime call only; no wait on a peer, the store or a stream
 * happens under it. */
static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
#define SHIM_LOCK_vmm() pthread_mutex_lock(&vmm_lock)
#define SHIM_UNLOCK_vmm() pthread_mutex_unlock(&vmm_lock)
#define SHIM_LOCK_plain() (void)0
#define SHIM_UNLOCK_plain() (void)0

/* The registry column of a row, once the call succeeded. */
#define SHIM_REGISTRY(op, kind, key, size, when) SHIM_REGISTRY_##op(kind, key, size, when)
#define SHIM_REGISTRY_none(kind, key, size, when) (void)0
#define SHIM_REGISTRY_acquire(kind, key, size, when) \
  if (when) registry_add(KIND_##kind, (uintptr_t)(key), (size))
#define SHIM_REGISTRY_release(kind, key, size, when) \
  if (when) registry_remove(KIND_##kind, (uintptr_t)(key))
#define SHIM_REGISTRY_release_range(kind, lo, size, when) \
  (void)registry_remove_range(KIND_##kind, (uintptr_t)(lo), (uintptr_t)(lo) + (size), 0)

/* Every row's wrapper: bring the backend up, call its entry (under the VMM
 * lock where the row says so), apply the row's registry change, store the
 * result as the thread's last error.  Rows marked own are written below. */
#define SHIM_WRAP(name, arity, params, args, registry, shim, spec, errors) \
  SHIM_WRAP_##shim(name, params, args, registry)
#define SHIM_WRAP_own(name, params, args, registry)
#define SHIM_WRAP_vmm(name, params, args, registry) SHIM_FORWARD(vmm, name, params, args, registry)
#define SHIM_WRAP_plain(name, params, args, registry) \
  SHIM_FORWARD(plain, name, params, args, registry)
#define SHIM_FORWARD(lock, name, params, args, registry) \
  hipError_t mori_##name params {                         \
    ENTER(#name, name);                                   \
    SHIM_LOCK_##lock();                                   \
    hipError_t e = B->name args;                          \
    SHIM_UNLOCK_##lock();                                 \
    if (e == hipSuccess) {                                \
      SHIM_REGISTRY registry;                             \
    }                                                     \
    return leave(#name, e);                               \
  }
MORI_SHIM_HIP_CALLS(SHIM_WRAP)

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
  ENTER("hipStreamBatchMemOp", hipStreamWriteValue32);
  hipError_t e = batch_contract(count, paramArray, flags);
  if (e != hipSuccess) return leave("hipStreamBatchMemOp", e);
  if (B->hipStreamBatchMemOp != NULL &&
      (e = B->hipStreamBatchMemOp(stream, count, paramArray, flags)) != hipErrorNotSupported)
    return leave("hipStreamBatchMemOp", e);
  /* No batch call in this runtime: one call per operation, in order. */
  detail_set = 0;
  e = hipSuccess;
  for (unsigned int i = 0; i < count && e == hipSuccess; i++) {
    const hipStreamBatchMemOpParams *op = &paramArray[i];
    e = op->operation == hipStreamMemOpWaitValue32
            ? B->hipStreamWaitValue32(stream, op->waitValue.address, op->waitValue.value,
                              op->waitValue.flags, 0xffffffffu)
            : B->hipStreamWriteValue32(stream, op->writeValue.address, op->writeValue.value,
                               op->writeValue.flags);
  }
  return leave("hipStreamBatchMemOp", e);
}

/* Returns the thread's last result and resets it, as HIP does; also clears
 * the runtime's own sticky error so that a failed probe leaves none. */
hipError_t mori_hipGetLastError(void) {
  hipError_t e = last_error;
  const struct mori__shim_backend *b = backend();
  if (b != NULL && b->hipGetLastError != NULL) (void)b->hipGetLastError();
  last_error = hipSuccess;
  return e;
}

int mori_shim_runtime_version(void) {
  int v = 0;
  const struct mori__shim_backend *b = backend();
  if (b == NULL || b->hipRuntimeGetVersion(&v) != hipSuccess) return 0;
  return v;
}

/* ---- capture and replay (the sim's) ---- */

/* The capture calls are test controls, not HIP calls: they pass no fault
 * shim and need an active backend whose table captures (only the sim's
 * does).  NULL, with the detail set, where none does; the caller answers
 * hipErrorNotSupported without touching the last error. */
static const struct mori__shim_backend *capturing_backend(const char *call) {
  const struct mori__shim_backend *b = backend();
  detail_set = 0;
  if (b != NULL && b->begin_capture != NULL && b->end_capture != NULL &&
      b->graph_launch != NULL && b->graph_destroy != NULL)
    return b;
  mori__shim_detail("%s: only the sim backend captures streams (active: %s)", call,
                    b ? b->name : "none");
  return NULL;
}

hipError_t mori_sim_begin_capture(hipStream_t stream) {
  const struct mori__shim_backend *b = capturing_backend("mori_sim_begin_capture");
  if (b == NULL) return hipErrorNotSupported;
  return leave("mori_sim_begin_capture", b->begin_capture(stream));
}

hipError_t mori_sim_end_capture(hipStream_t stream, mori_sim_graph **graph) {
  const struct mori__shim_backend *b = capturing_backend("mori_sim_end_capture");
  if (b == NULL) return hipErrorNotSupported;
  return leave("mori_sim_end_capture", b->end_capture(stream, graph));
}

hipError_t mori_sim_graph_launch(const mori_sim_graph *graph, hipStream_t stream) {
  const struct mori__shim_backend *b = capturing_backend("mori_sim_graph_launch");
  if (b == NULL) return hipErrorNotSupported;
  return leave("mori_sim_graph_launch", b->graph_launch(graph, stream));
}

/* Never brings a backend up, nor touches the last error or the detail: a
 * graph exists only once a capturing backend is active (end_capture made
 * it), so with none there is nothing to free. */
void mori_sim_graph_destroy(mori_sim_graph *graph) {
  const struct mori__shim_backend *b = __atomic_load_n(&active, __ATOMIC_ACQUIRE);
  if (b != NULL && b->graph_destroy != NULL) b->graph_destroy(graph);
}
