/*
 * sim_kernel.c - the sim's modules, kernels and mapped host memory: what
 * the signal kernels (core/kernels/signal.cu) do, modelled by entry name,
 * so that every path of the core's kernel engine runs in CI.
 *
 * A module load or a pinned allocation while a stream captures is refused,
 * as a capture of global mode (the runtimes' default, torch's) refuses
 * them.  A module is the image's texts, copied (the runtimes copy it too); a
 * function is a row of the model table, found only if its name is an
 * entry of every text the image carries, so a kernel renamed in the
 * source is caught here.  A launch checks what the runtimes check (a known
 * function, one block, the one parameter) and enqueues the model with a
 * copy of its argument, as a GPU queue runs a kernel: in stream order,
 * into the graph while the stream captures.  The model does the kernel's
 * protocol on the same cells, through the sim's engine as a memop is; a wait
 * past the kernel's bound (timeout_ns) writes the failure words and ends
 * the kernel, as the kernel does.  A kernel with no bound would spin
 * forever on a GPU; here it fails the stream with hipErrorLaunchTimeOut
 * after MORI_SIM_WAIT_TIMEOUT_MS, as an unmet memop wait does.
 */
#include "sim_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the models: one per entry, the kernel's protocol step for step ---- */

typedef struct mori_signal_args args_t;

/* One launch's run: its argument, its deadline, where a failure is told. */
struct run {
  const args_t *a;
  struct timespec start;
  char *why;
  size_t whylen;
};

static long elapsed_ms(const struct timespec *since) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - since->tv_sec) * 1000L + (now.tv_nsec - since->tv_nsec) / 1000000L;
}

static const char launch_call[] = "hipModuleLaunchKernel";

/* The engine's word for the cell (channel, index) of owner's area, its
 * base read from the window's device table of pad bases: every access goes
 * through the sim's engine (sim_vmm.c), never a host dereference of a
 * device address, and one the memory does not allow is the stream's
 * failure, as a fault is on a GPU. */
static hipError_t cell(struct run *r, int owner, unsigned long long area, int index, int write,
                       uint32_t **out) {
  const args_t *a = r->a;
  char *const *pads = (char *const *)(uintptr_t)a->pads;
  char *base = NULL;
  if (owner < 0 || owner >= a->world || index < 0 || index >= a->world) {
    snprintf(r->why, r->whylen, "kernel: hipErrorIllegalAddress: rank %d / %d of a world of %d",
             owner, index, a->world);
    return hipErrorIllegalAddress;
  }
  hipError_t e = mori__sim_copy(launch_call, &base, &pads[owner], sizeof base, MORI__SIM_HOST_DST,
                                r->why, r->whylen);
  if (e != hipSuccess) return e;
  uint32_t *c = (uint32_t *)(base + area) + (size_t)a->channel * (size_t)a->world + (size_t)index;
  return mori__sim_word(launch_call, c, write, out, r->why, r->whylen);
}

static hipError_t store(struct run *r, int owner, unsigned long long area, int index, uint32_t v) {
  uint32_t *c = NULL;
  hipError_t e = cell(r, owner, area, index, 1, &c);
  if (e == hipSuccess) __atomic_store_n(c, v, __ATOMIC_RELEASE);
  return e;
}

/* status[2 + peer], status[1], then status[0], as the kernel writes them,
 * unless status[0] holds another call's code (the first failure is kept). */
static hipError_t timed_out(struct run *r, int peer, unsigned what) {
  uint32_t *s = (uint32_t *)(uintptr_t)r->a->status, *w = NULL;
  hipError_t e = hipSuccess;
  if (s == NULL) return hipSuccess;
  if ((e = mori__sim_word(launch_call, s, 0, &w, r->why, r->whylen)) != hipSuccess) return e;
  uint32_t first = __atomic_load_n(w, __ATOMIC_ACQUIRE);
  if (first != 0 && first != r->a->code) return hipSuccess;
  uint32_t *at[3] = {s + 2 + peer, s + 1, s};
  uint32_t v[3] = {what, r->a->timeout_ms, r->a->code};
  for (int i = 0; i < 3 && e == hipSuccess; i++)
    if ((e = mori__sim_word(launch_call, at[i], 1, &w, r->why, r->whylen)) == hipSuccess)
      __atomic_store_n(w, v[i], __ATOMIC_RELEASE);
  return e;
}

/* Waits for the cell (flags: hipStreamWaitValueAnd or Eq); *met = 0 when
 * the kernel's bound passed (the failure words are written then). */
static hipError_t await(struct run *r, unsigned long long area, int peer, uint32_t value,
                        unsigned flags, unsigned what, int *met) {
  uint32_t *c = NULL, last = 0;
  const args_t *a = r->a;
  hipError_t e = cell(r, a->rank, area, peer, 0, &c);
  if (e != hipSuccess) return e;
  /* the kernel's bound runs from its start; a millisecond more, as the
   * spin counts whole ones */
  long bound = a->timeout_ns
                   ? (long)((a->timeout_ns + 999999) / 1000000) + 1 - elapsed_ms(&r->start)
                   : mori__sim_config.wait_timeout_ms;
  *met = mori__sim_spin(c, value, flags, 0xffffffffu, bound < 0 ? 0 : bound, &last) == 0;
  if (*met) return hipSuccess;
  if (a->timeout_ns) return timed_out(r, peer, what);
  snprintf(r->why, r->whylen,
           "kernel: hipErrorLaunchTimeOut: a wait for rank %d (cell %p, last value 0x%x) still "
           "unmet after %ld ms and the kernel has no bound (MORI_SIM_WAIT_TIMEOUT_MS)",
           peer, (void *)c, last, mori__sim_config.wait_timeout_ms);
  return hipErrorLaunchTimeOut;
}

static hipError_t model_barrier(struct run *r) {
  const args_t *a = r->a;
  hipError_t e = hipSuccess;
  int met;
  for (int i = 1; i < a->world && e == hipSuccess; i++)
    e = store(r, (a->rank + i) % a->world, a->signal_area, a->rank, a->write_value);
  for (int i = 1; i < a->world && e == hipSuccess; i++)
    e = await(r, a->signal_area, (a->rank + a->world - i) % a->world, a->wait_value,
              hipStreamWaitValueAnd, MORI_SIGNAL_NEVER_SIGNALLED, &met);
  return e;
}

static hipError_t model_put(struct run *r) {
  const args_t *a = r->a;
  int met = 1;
  hipError_t e = a->wait_value == 0 ? hipSuccess
                                    : await(r, a->ack_area, a->peer, a->wait_value,
                                            hipStreamWaitValueAnd, MORI_SIGNAL_NEVER_CONSUMED, &met);
  return e != hipSuccess || !met ? e : store(r, a->peer, a->signal_area, a->rank, a->write_value);
}

static hipError_t model_wait(struct run *r) {
  const args_t *a = r->a;
  int met;
  hipError_t e = await(r, a->signal_area, a->peer, a->wait_value, hipStreamWaitValueAnd,
                       MORI_SIGNAL_NEVER_SIGNALLED, &met);
  return e != hipSuccess || !met ? e : store(r, a->peer, a->ack_area, a->rank, a->write_value);
}

/* Own cell for peer from -> to, then `to` into peer's cell for this rank. */
static hipError_t handshake(struct run *r, int peer, unsigned long long own_area,
                            unsigned long long peer_area, uint32_t from, uint32_t to,
                            unsigned what) {
  int met;
  hipError_t e = await(r, own_area, peer, from, hipStreamWaitValueEq, what, &met);
  if (e != hipSuccess || !met) return e;
  if ((e = store(r, r->a->rank, own_area, peer, to)) != hipSuccess) return e;
  return store(r, peer, peer_area, r->a->rank, to);
}

static hipError_t captured_put(struct run *r, int dst) {
  return handshake(r, dst, r->a->ack_area, r->a->signal_area, 0, 1, MORI_SIGNAL_NEVER_CONSUMED);
}

static hipError_t captured_wait(struct run *r, int src) {
  return handshake(r, src, r->a->signal_area, r->a->ack_area, 1, 0, MORI_SIGNAL_NEVER_SIGNALLED);
}

static hipError_t model_captured_put(struct run *r) { return captured_put(r, r->a->peer); }
static hipError_t model_captured_wait(struct run *r) { return captured_wait(r, r->a->peer); }

static hipError_t model_captured_barrier(struct run *r) {
  const args_t *a = r->a;
  hipError_t e = hipSuccess;
  for (int i = 1; i < a->world && e == hipSuccess; i++) e = captured_put(r, (a->rank + i) % a->world);
  for (int i = 1; i < a->world && e == hipSuccess; i++)
    e = captured_wait(r, (a->rank + a->world - i) % a->world);
  return e;
}

/* The table: every entry of mori/signal_kernel.h has its model (the
 * initializer fails to compile for an entry without one). */
struct mori__sim_kernel {
  const char *name;
  hipError_t (*model)(struct run *r);
};

#define MODEL_ROW(name, what) {#name, model_##name},
#define model_mori_signal_barrier model_barrier
#define model_mori_signal_put model_put
#define model_mori_signal_wait model_wait
#define model_mori_signal_captured_barrier model_captured_barrier
#define model_mori_signal_captured_put model_captured_put
#define model_mori_signal_captured_wait model_captured_wait
static const struct mori__sim_kernel kernels[] = {MORI_SIGNAL_KERNELS(MODEL_ROW)};
#undef MODEL_ROW
#define NKERNELS (sizeof kernels / sizeof kernels[0])

hipError_t mori__sim_run_kernel(const struct mori__sim_op *op, char *why, size_t whylen) {
  struct run r = {&op->args, {0, 0}, why, whylen};
  clock_gettime(CLOCK_MONOTONIC, &r.start);
  return op->kernel->model(&r);
}

/* ---- modules ---- */

struct sim_module {
  struct sim_module *next;
  char *ptx, *hip_source; /* copies; NULL where the image had none */
};

static struct sim_module *modules; /* under mori__sim_lock */

static char *copy(const char *s, int *failed) {
  char *c = s ? strdup(s) : NULL;
  if (s && !c) *failed = 1;
  return c;
}

hipError_t mori__sim_module_load(hipModule_t *module, const void *image) {
  static const char call[] = "hipModuleLoadData";
  const mori_module_image *m = image;
  if (module == NULL || m == NULL)
    return mori__sim_contract(call, RULE_NULL_ARGUMENT, module ? "image" : "module");
  if (m->ptx == NULL && m->hip_source == NULL)
    return mori__sim_contract(call, RULE_NULL_ARGUMENT, "the image carries no source");
  if (mori__sim_capturing())
    return mori__sim_contract(call, RULE_CAPTURE, "a module load while a stream captures");
  struct sim_module *mod = calloc(1, sizeof *mod);
  int failed = mod == NULL;
  if (mod) {
    mod->ptx = copy(m->ptx, &failed);
    mod->hip_source = copy(m->hip_source, &failed);
  }
  if (failed) {
    if (mod) free(mod->ptx), free(mod->hip_source), free(mod);
    mori__shim_detail("%s: %s", call, strerror(ENOMEM));
    return hipErrorOutOfMemory;
  }
  pthread_mutex_lock(&mori__sim_lock);
  mod->next = modules;
  modules = mod;
  pthread_mutex_unlock(&mori__sim_lock);
  *module = (hipModule_t)(void *)mod;
  return hipSuccess;
}

/* Under mori__sim_lock: the module of handle m, with its link. */
static struct sim_module **find_module(hipModule_t m) {
  for (struct sim_module **p = &modules; *p != NULL; p = &(*p)->next)
    if ((hipModule_t)(void *)*p == m) return p;
  return NULL;
}

hipError_t mori__sim_module_unload(hipModule_t module) {
  pthread_mutex_lock(&mori__sim_lock);
  struct sim_module **p = find_module(module), *mod = p ? *p : NULL;
  if (p) *p = mod->next;
  pthread_mutex_unlock(&mori__sim_lock);
  if (mod == NULL)
    return mori__sim_contract("hipModuleUnload", RULE_UNKNOWN_MODULE, "%p", (void *)module);
  free(mod->ptx);
  free(mod->hip_source);
  free(mod);
  return hipSuccess;
}

/* An entry is in a text as its definition: PTX's ".entry name(", the
 * source's "void name(". */
static int defines(const char *text, const char *prefix, const char *name) {
  if (text == NULL) return 1; /* a text the image does not carry */
  char needle[128];
  snprintf(needle, sizeof needle, "%s%s(", prefix, name);
  return strstr(text, needle) != NULL;
}

hipError_t mori__sim_module_function(hipFunction_t *function, hipModule_t module,
                                     const char *kname) {
  static const char call[] = "hipModuleGetFunction";
  if (function == NULL || kname == NULL)
    return mori__sim_contract(call, RULE_NULL_ARGUMENT, function ? "name" : "function");
  pthread_mutex_lock(&mori__sim_lock);
  struct sim_module **p = find_module(module);
  int in_image = p && defines((*p)->ptx, ".entry ", kname) &&
                 defines((*p)->hip_source, "void ", kname);
  pthread_mutex_unlock(&mori__sim_lock);
  if (p == NULL) return mori__sim_contract(call, RULE_UNKNOWN_MODULE, "%p", (void *)module);
  for (size_t i = 0; in_image && i < NKERNELS; i++)
    if (strcmp(kernels[i].name, kname) == 0) {
      *function = (hipFunction_t)(void *)&kernels[i];
      return hipSuccess;
    }
  mori__shim_detail("%s: %s: %s", call, kname,
                    in_image ? "the sim has no model of this kernel" : "no such entry in the image");
  return hipErrorNotFound;
}

hipError_t mori__sim_launch(hipFunction_t f, unsigned int gx, unsigned int gy, unsigned int gz,
                            unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                            hipStream_t stream, void **params, void **extra) {
  static const char call[] = "hipModuleLaunchKernel";
  const struct mori__sim_kernel *k = (const struct mori__sim_kernel *)(void *)f;
  if (k < kernels || k >= kernels + NKERNELS)
    return mori__sim_contract(call, RULE_UNKNOWN_FUNCTION, "%p", (void *)f);
  if (gx != 1 || gy != 1 || gz != 1 || bx == 0 || by != 1 || bz != 1 || shared != 0)
    return mori__sim_contract(call, RULE_LAUNCH_SHAPE, "grid %ux%ux%u, block %ux%ux%u, %u bytes",
                              gx, gy, gz, bx, by, bz, shared);
  if (params == NULL || params[0] == NULL || extra != NULL)
    return mori__sim_contract(call, RULE_NULL_ARGUMENT, "kernelParams[0] (and no extra)");
  struct mori__sim_op op = {.kind = MORI__SIM_OP_KERNEL, .kernel = k};
  memcpy(&op.args, params[0], sizeof op.args);
  return mori__sim_enqueue(call, stream, &op);
}

/* ---- mapped host memory: plain host memory here, where host and device
 * addresses are one.  A fresh block holds no zeros: pinned memory a runtime
 * hands out again may hold whatever its last user left, so whoever needs
 * zeros writes them. ---- */

#define HOST_MALLOC_FILL 0xa5

struct host_block {
  struct host_block *next;
  void *p;
  size_t size; /* what was asked for: the device may touch no byte past it */
};
static struct host_block *host_blocks; /* under mori__sim_lock */

hipError_t mori__sim_host_malloc(void **ptr, size_t size, unsigned int flags) {
  static const char call[] = "hipHostMalloc";
  if (ptr == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "ptr");
  if (flags & ~(unsigned)(hipHostMallocPortable | hipHostMallocMapped))
    return mori__sim_contract(call, RULE_FLAGS_ZERO, "flags 0x%x", flags);
  if (mori__sim_capturing())
    return mori__sim_contract(call, RULE_CAPTURE, "pinned host memory while a stream captures");
  struct host_block *b = malloc(sizeof *b);
  void *p = NULL;
  if (b == NULL || posix_memalign(&p, 4096, size ? size : 1) != 0) {
    free(b);
    mori__shim_detail("%s: %zu bytes: %s", call, size, strerror(ENOMEM));
    return hipErrorOutOfMemory;
  }
  memset(p, HOST_MALLOC_FILL, size);
  b->p = p;
  b->size = size;
  pthread_mutex_lock(&mori__sim_lock);
  b->next = host_blocks;
  host_blocks = b;
  pthread_mutex_unlock(&mori__sim_lock);
  *ptr = p;
  return hipSuccess;
}

size_t mori__sim_host_block_rest(uintptr_t addr) {
  for (const struct host_block *b = host_blocks; b != NULL; b = b->next)
    if (addr >= (uintptr_t)b->p && addr - (uintptr_t)b->p < b->size)
      return b->size - (addr - (uintptr_t)b->p);
  return 0;
}

hipError_t mori__sim_host_free(void *ptr) {
  if (ptr == NULL) return hipSuccess;
  struct host_block *b = NULL;
  pthread_mutex_lock(&mori__sim_lock);
  for (struct host_block **q = &host_blocks; *q != NULL; q = &(*q)->next)
    if ((*q)->p == ptr) {
      b = *q;
      *q = b->next;
      break;
    }
  pthread_mutex_unlock(&mori__sim_lock);
  if (b == NULL)
    return mori__sim_contract("hipHostFree", RULE_HIPFREE_UNKNOWN, "%p is no hipHostMalloc block",
                              ptr);
  free(b->p);
  free(b);
  return hipSuccess;
}
