/*
 * replay.c - a recorded trace replayed in one process against the sim
 * backend, contract checker on, under one profile and quirk set: the first
 * call that succeeded in the trace but breaks a rule here is the answer.
 * Peers are absent, so what came from them is stood in for: an imported
 * handle is a fresh allocation of the size the trace maps it at.
 */
#include "fi_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIM_GRANULARITY ((size_t)2 << 20)

/* ---- symbols bound to this process's values ---- */

typedef struct binding {
  char sym;
  long id;
  uintptr_t value;
  size_t size;
  int own_fd; /* 'f': an fd this process exported (value), not a peer's */
} binding;

typedef struct replay {
  const mori_fi_trace *t;
  size_t at; /* the record being replayed */
  binding *b;
  size_t nb, cap;
  int device;
  /* host buffers standing in for addresses outside the VMM: pinned
   * (hipHostMalloc), since the run's may have been, and a device operation
   * on host memory needs that */
  void *scratch[2];
  struct {
    char kind; /* what the current call made: 'h', 'r', 'd', 'f' (0: nothing) */
    uintptr_t value;
    size_t size;
  } made;
  char why[512];    /* a trace this replay cannot follow */
} replay;

static binding *find(replay *r, char sym, long id) {
  for (size_t i = r->nb; i-- > 0;)
    if (r->b[i].sym == sym && r->b[i].id == id) return &r->b[i];
  return NULL;
}

static int bind_sym(replay *r, char sym, long id, uintptr_t value, size_t size, int own_fd) {
  binding *old = find(r, sym, id);
  if (old) {
    *old = (binding){sym, id, value, size, own_fd};
    return 0;
  }
  if (r->nb == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 64;
    binding *b = realloc(r->b, cap * sizeof *b);
    if (b == NULL) return -1;
    r->b = b;
    r->cap = cap;
  }
  r->b[r->nb++] = (binding){sym, id, value, size, own_fd};
  return 0;
}

static void unbind(replay *r, char sym, long id) {
  binding *b = find(r, sym, id);
  if (b) *b = r->b[--r->nb];
}

static const mori_fi_trace_rec *rec(replay *r) { return &r->t->recs[r->at]; }
static const mori_fi_value *arg(replay *r, int i) { return &rec(r)->args[i]; }

/* A handle the trace never made is passed as a value the sim cannot know,
 * so the replay fails where the recorded call would have. */
static hipMemGenericAllocationHandle_t handle(replay *r, const mori_fi_value *v) {
  if (v->kind != MORI_FI_V_SYMBOL) return NULL;
  binding *b = find(r, 'h', v->id);
  return (hipMemGenericAllocationHandle_t)(b ? b->value : (uintptr_t)0xdead0000000ull + (uintptr_t)v->id);
}

static void scratch_free(replay *r, int slot) {
  if (r->scratch[slot]) (void)mori_hipHostFree(r->scratch[slot]);
  r->scratch[slot] = NULL;
}

/* An address: a reservation or device allocation plus offset, or a host
 * scratch buffer of `size` bytes.  The size bytes from it must lie inside
 * what the trace made (a damaged trace would have the sim write wherever
 * it points).  -1 with r->why naming the line if the trace names a range
 * it never made, or one outside it. */
static int address(replay *r, const mori_fi_value *v, size_t size, int slot, void **out) {
  *out = NULL;
  if (v->kind == MORI_FI_V_NULL) return 0;
  if (v->kind == MORI_FI_V_HOST) {
    scratch_free(r, slot);
    if (mori_hipHostMalloc(&r->scratch[slot], size ? size : 1, 0) != hipSuccess) {
      r->scratch[slot] = NULL;
      snprintf(r->why, sizeof r->why, "line %ld: no host buffer of %zu bytes to stand in: %s",
               rec(r)->line, size, mori_shim_message());
      return -1;
    }
    *out = r->scratch[slot];
    return 0;
  }
  binding *b = v->kind == MORI_FI_V_SYMBOL ? find(r, v->sym, v->id) : NULL;
  if (b == NULL) {
    snprintf(r->why, sizeof r->why, "line %ld: %c%ld is used before the trace made it",
             rec(r)->line, v->sym, v->id);
    return -1;
  }
  if (v->offset > b->size || size > b->size - v->offset) {
    snprintf(r->why, sizeof r->why,
             "line %ld: %c%ld+0x%llx and %zu bytes lie outside %c%ld (%zu bytes)", rec(r)->line,
             v->sym, v->id, (unsigned long long)v->offset, size, v->sym, v->id, b->size);
    return -1;
  }
  *out = (void *)(b->value + v->offset);
  return 0;
}

static hipMemAllocationProp prop_of(const mori_fi_value *v) {
  hipMemAllocationProp p;
  memset(&p, 0, sizeof p);
  if (v->kind != MORI_FI_V_PROP) return p;
  p.type = (hipMemAllocationType)v->sub[0];
  p.requestedHandleType = (hipMemAllocationHandleType)v->sub[1];
  p.location.type = hipMemLocationTypeDevice;
  p.location.id = v->sub[2];
  return p;
}

static uint64_t num(replay *r, int i) { return (uint64_t)arg(r, i)->number; }

/* The size the trace maps handle hN at later on: what an imported peer
 * allocation must at least have. */
static size_t mapped_size(replay *r, long id) {
  for (size_t i = r->at + 1; i < r->t->n; i++) {
    const mori_fi_trace_rec *x = &r->t->recs[i];
    if (x->call == MORI_FI_CALL_hipMemMap && x->args[3].kind == MORI_FI_V_SYMBOL &&
        x->args[3].id == id)
      return (size_t)x->args[1].number;
  }
  return SIM_GRANULARITY;
}

/* ---- one row per call: run it, bind what it made ---- */

typedef hipError_t (*row_fn)(replay *r);

/* Binds the call's out=hN to what it made (h: where the call wrote it). */
static hipError_t out_handle(replay *r, hipError_t e, const hipMemGenericAllocationHandle_t *h) {
  if (e == hipSuccess) r->made.kind = 'h', r->made.value = (uintptr_t)*h;
  if (e == hipSuccess && arg(r, 0)->kind == MORI_FI_V_SYMBOL &&
      bind_sym(r, 'h', arg(r, 0)->id, (uintptr_t)*h, 0, 0) != 0)
    return hipErrorOutOfMemory;
  return e;
}

static hipError_t do_create(replay *r) {
  hipMemGenericAllocationHandle_t h = NULL;
  hipMemAllocationProp p = prop_of(arg(r, 2));
  return out_handle(r, mori_hipMemCreate(&h, (size_t)num(r, 1), &p, num(r, 3)), &h);
}

static hipError_t do_release(replay *r) { return mori_hipMemRelease(handle(r, arg(r, 0))); }

static hipError_t do_retain(replay *r) {
  hipMemGenericAllocationHandle_t h = NULL;
  void *a;
  if (address(r, arg(r, 1), 1, 0, &a) != 0) return hipErrorRuntimeOther;
  return out_handle(r, mori_hipMemRetainAllocationHandle(&h, a), &h);
}

static hipError_t do_reserve(replay *r) {
  void *p = NULL;
  hipError_t e = mori_hipMemAddressReserve(&p, (size_t)num(r, 1), (size_t)num(r, 2), NULL, num(r, 4));
  if (e == hipSuccess) r->made.kind = 'r', r->made.value = (uintptr_t)p, r->made.size = (size_t)num(r, 1);
  if (e == hipSuccess && arg(r, 0)->kind == MORI_FI_V_SYMBOL &&
      bind_sym(r, 'r', arg(r, 0)->id, (uintptr_t)p, (size_t)num(r, 1), 0) != 0)
    return hipErrorOutOfMemory;
  return e;
}

static hipError_t do_address_free(replay *r) {
  void *a;
  if (address(r, arg(r, 0), (size_t)num(r, 1), 0, &a) != 0) return hipErrorRuntimeOther;
  return mori_hipMemAddressFree(a, (size_t)num(r, 1));
}

static hipError_t do_map(replay *r) {
  void *a;
  if (address(r, arg(r, 0), (size_t)num(r, 1), 0, &a) != 0) return hipErrorRuntimeOther;
  return mori_hipMemMap(a, (size_t)num(r, 1), (size_t)num(r, 2), handle(r, arg(r, 3)), num(r, 4));
}

static hipError_t do_unmap(replay *r) {
  void *a;
  if (address(r, arg(r, 0), (size_t)num(r, 1), 0, &a) != 0) return hipErrorRuntimeOther;
  return mori_hipMemUnmap(a, (size_t)num(r, 1));
}

static hipError_t do_set_access(replay *r) {
  void *a;
  const mori_fi_value *d = arg(r, 2);
  hipMemAccessDesc desc = {{hipMemLocationTypeDevice, d->sub[1]}, (hipMemAccessFlags)d->sub[0]};
  /* the trace records the first descriptor alone: one is all there is to pass */
  if (d->kind == MORI_FI_V_DESC && num(r, 3) > 1) {
    snprintf(r->why, sizeof r->why,
             "line %ld: count=%llu, but a trace records one access descriptor", rec(r)->line,
             (unsigned long long)num(r, 3));
    return hipErrorRuntimeOther;
  }
  if (address(r, arg(r, 0), (size_t)num(r, 1), 0, &a) != 0) return hipErrorRuntimeOther;
  return mori_hipMemSetAccess(a, (size_t)num(r, 1), d->kind == MORI_FI_V_DESC ? &desc : NULL,
                              (size_t)num(r, 3));
}

static hipError_t do_granularity(replay *r) {
  size_t g = 0;
  hipMemAllocationProp p = prop_of(arg(r, 1));
  return mori_hipMemGetAllocationGranularity(&g, arg(r, 1)->kind == MORI_FI_V_PROP ? &p : NULL,
                                             (hipMemAllocationGranularity_flags)num(r, 2));
}

static hipError_t do_export(replay *r) {
  int type = (int)num(r, 2);
  hipMemFabricHandle_t blob;
  int fd = -1;
  void *out = type == hipMemHandleTypePosixFileDescriptor ? (void *)&fd : (void *)&blob;
  hipError_t e = mori_hipMemExportToShareableHandle(out, handle(r, arg(r, 1)),
                                                    (hipMemAllocationHandleType)type, num(r, 3));
  if (e == hipSuccess && fd >= 0) r->made.kind = 'f', r->made.value = (uintptr_t)fd;
  if (e == hipSuccess && fd >= 0 && arg(r, 0)->kind == MORI_FI_V_SYMBOL &&
      bind_sym(r, 'f', arg(r, 0)->id, (uintptr_t)fd, 0, 1) != 0)
    return hipErrorOutOfMemory;
  return e;
}

/* An import of an fd this process exported is real; a peer's handle is
 * stood in for by a fresh allocation of the size the trace maps it at. */
static hipError_t do_import(replay *r) {
  const mori_fi_value *os = arg(r, 1);
  int type = (int)num(r, 2);
  hipMemGenericAllocationHandle_t h = NULL;
  binding *b = os->kind == MORI_FI_V_SYMBOL ? find(r, 'f', os->id) : NULL;
  if (b && b->own_fd)
    return out_handle(r, mori_hipMemImportFromShareableHandle(&h, (void *)b->value,
                                                              (hipMemAllocationHandleType)type),
                      &h);
  hipMemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = hipMemAllocationTypePinned;
  p.requestedHandleType = (hipMemAllocationHandleType)type;
  p.location.type = hipMemLocationTypeDevice;
  p.location.id = r->device;
  size_t size = arg(r, 0)->kind == MORI_FI_V_SYMBOL ? mapped_size(r, arg(r, 0)->id) : SIM_GRANULARITY;
  return out_handle(r, mori_hipMemCreate(&h, size, &p, 0), &h);
}

static hipError_t do_malloc(replay *r) {
  void *p = NULL;
  hipError_t e = mori_hipMalloc(&p, (size_t)num(r, 1));
  if (e == hipSuccess) r->made.kind = 'd', r->made.value = (uintptr_t)p;
  if (e == hipSuccess && p && arg(r, 0)->kind == MORI_FI_V_SYMBOL &&
      bind_sym(r, 'd', arg(r, 0)->id, (uintptr_t)p, (size_t)num(r, 1), 0) != 0)
    return hipErrorOutOfMemory;
  return e;
}

static hipError_t do_free(replay *r) {
  void *a;
  if (address(r, arg(r, 0), 1, 0, &a) != 0) return hipErrorRuntimeOther;
  return mori_hipFree(a);
}

static hipError_t do_memcpy(replay *r) {
  void *dst, *src;
  size_t n = (size_t)num(r, 2);
  if (address(r, arg(r, 0), n, 0, &dst) != 0 || address(r, arg(r, 1), n, 1, &src) != 0)
    return hipErrorRuntimeOther;
  return mori_hipMemcpy(dst, src, n, (hipMemcpyKind)num(r, 3));
}

static hipError_t do_memset(replay *r) {
  void *dst;
  size_t n = (size_t)num(r, 2);
  if (address(r, arg(r, 0), n, 0, &dst) != 0) return hipErrorRuntimeOther;
  return mori_hipMemset(dst, (int)arg(r, 1)->number, n);
}

static hipError_t do_get_device(replay *r) { int d; return mori_hipGetDevice(&d); }

static hipError_t do_set_device(replay *r) {
  hipError_t e = mori_hipSetDevice((int)arg(r, 0)->number);
  if (e == hipSuccess) r->device = (int)arg(r, 0)->number;
  return e;
}

static hipError_t do_device_count(replay *r) { int n; return mori_hipGetDeviceCount(&n); }
static hipError_t do_mem_get_info(replay *r) {
  size_t free_bytes, total_bytes;
  return mori_hipMemGetInfo(&free_bytes, &total_bytes);
}
static hipError_t do_device_sync(replay *r) { return mori_hipDeviceSynchronize(); }
static hipError_t do_stream_sync(replay *r) { return mori_hipStreamSynchronize(NULL); }

static hipError_t do_write_value(replay *r) {
  void *a;
  if (address(r, arg(r, 1), 4, 0, &a) != 0) return hipErrorRuntimeOther;
  return mori_hipStreamWriteValue32(NULL, a, (uint32_t)num(r, 2), (unsigned)num(r, 3));
}

static hipError_t do_wait_value(replay *r) {
  void *a;
  if (address(r, arg(r, 1), 4, 0, &a) != 0) return hipErrorRuntimeOther;
  return mori_hipStreamWaitValue32(NULL, a, (uint32_t)num(r, 2), (unsigned)num(r, 3),
                                   (uint32_t)num(r, 4));
}

static hipError_t do_attribute(replay *r) {
  int v;
  return mori_hipDeviceGetAttribute(&v, (hipDeviceAttribute_t)num(r, 0), (int)arg(r, 1)->number);
}

static hipError_t do_last_error(replay *r) { return mori_hipGetLastError(); }
static hipError_t do_version(replay *r) { int v; return mori_hipRuntimeGetVersion(&v); }

/* Streams and events are not named in a trace: the replay makes scratch
 * ones where the call needs one, and runs stream work on the default
 * stream. */
static hipError_t do_stream_create(replay *r) {
  hipStream_t s = NULL;
  hipError_t e = mori_hipStreamCreateWithFlags(&s, (unsigned)num(r, 0));
  if (e == hipSuccess) (void)mori_hipStreamDestroy(s);
  return e;
}

static hipError_t do_stream_destroy(replay *r) { return hipSuccess; }

static hipError_t do_is_capturing(replay *r) {
  hipStreamCaptureStatus s;
  return mori_hipStreamIsCapturing(NULL, &s);
}

static hipError_t do_event(replay *r) {
  hipEvent_t ev = NULL;
  hipError_t e = mori_hipEventCreateWithFlags(&ev, hipEventDisableTiming);
  if (e != hipSuccess) return e;
  if (rec(r)->call == MORI_FI_CALL_hipEventRecord) e = mori_hipEventRecord(ev, NULL);
  (void)mori_hipEventDestroy(ev);
  return e;
}

static hipError_t do_memset_async(replay *r) {
  void *dst;
  size_t n = (size_t)num(r, 2);
  if (address(r, arg(r, 0), n, 0, &dst) != 0) return hipErrorRuntimeOther;
  return mori_hipMemsetAsync(dst, (int)arg(r, 1)->number, n, NULL);
}

static hipError_t do_memcpy_async(replay *r) {
  void *dst, *src;
  size_t n = (size_t)num(r, 2);
  if (address(r, arg(r, 0), n, 0, &dst) != 0 || address(r, arg(r, 1), n, 1, &src) != 0)
    return hipErrorRuntimeOther;
  return mori_hipMemcpyAsync(dst, src, n, (hipMemcpyKind)num(r, 3), NULL);
}

/* What the trace does not hold, the replay takes as done, as it takes a
 * wait as signalled: a batch's operations (a list the format has no word
 * for); a module's image, a kernel's name and its parameters (so its
 * load, lookup, launch and unload); the host memory a kernel reports
 * into (never named in a later line). */
static hipError_t do_taken_as_done(replay *r) { return hipSuccess; }

static const row_fn rows[MORI_FI_CALL__HIP_COUNT] = {
    [MORI_FI_CALL_hipMemCreate] = do_create,
    [MORI_FI_CALL_hipMemRelease] = do_release,
    [MORI_FI_CALL_hipMemRetainAllocationHandle] = do_retain,
    [MORI_FI_CALL_hipMemAddressReserve] = do_reserve,
    [MORI_FI_CALL_hipMemAddressFree] = do_address_free,
    [MORI_FI_CALL_hipMemMap] = do_map,
    [MORI_FI_CALL_hipMemUnmap] = do_unmap,
    [MORI_FI_CALL_hipMemSetAccess] = do_set_access,
    [MORI_FI_CALL_hipMemGetAllocationGranularity] = do_granularity,
    [MORI_FI_CALL_hipMemExportToShareableHandle] = do_export,
    [MORI_FI_CALL_hipMemImportFromShareableHandle] = do_import,
    [MORI_FI_CALL_hipMalloc] = do_malloc,
    [MORI_FI_CALL_hipFree] = do_free,
    [MORI_FI_CALL_hipMemcpy] = do_memcpy,
    [MORI_FI_CALL_hipMemset] = do_memset,
    [MORI_FI_CALL_hipGetDevice] = do_get_device,
    [MORI_FI_CALL_hipSetDevice] = do_set_device,
    [MORI_FI_CALL_hipGetDeviceCount] = do_device_count,
    [MORI_FI_CALL_hipMemGetInfo] = do_mem_get_info,
    [MORI_FI_CALL_hipDeviceSynchronize] = do_device_sync,
    [MORI_FI_CALL_hipStreamSynchronize] = do_stream_sync,
    [MORI_FI_CALL_hipStreamWriteValue32] = do_write_value,
    [MORI_FI_CALL_hipStreamWaitValue32] = do_wait_value,
    [MORI_FI_CALL_hipDeviceGetAttribute] = do_attribute,
    [MORI_FI_CALL_hipGetLastError] = do_last_error,
    [MORI_FI_CALL_hipRuntimeGetVersion] = do_version,
    [MORI_FI_CALL_hipStreamCreateWithFlags] = do_stream_create,
    [MORI_FI_CALL_hipStreamDestroy] = do_stream_destroy,
    [MORI_FI_CALL_hipStreamIsCapturing] = do_is_capturing,
    [MORI_FI_CALL_hipEventCreateWithFlags] = do_event,
    [MORI_FI_CALL_hipEventRecord] = do_event,
    [MORI_FI_CALL_hipEventQuery] = do_event,
    [MORI_FI_CALL_hipEventSynchronize] = do_event,
    [MORI_FI_CALL_hipEventDestroy] = do_event,
    [MORI_FI_CALL_hipMemsetAsync] = do_memset_async,
    [MORI_FI_CALL_hipMemcpyAsync] = do_memcpy_async,
    [MORI_FI_CALL_hipStreamBatchMemOp] = do_taken_as_done,
    [MORI_FI_CALL_hipModuleLoadData] = do_taken_as_done,
    [MORI_FI_CALL_hipModuleGetFunction] = do_taken_as_done,
    [MORI_FI_CALL_hipModuleLaunchKernel] = do_taken_as_done,
    [MORI_FI_CALL_hipModuleUnload] = do_taken_as_done,
    [MORI_FI_CALL_hipHostMalloc] = do_taken_as_done,
    [MORI_FI_CALL_hipHostFree] = do_taken_as_done,
};

/* A call that failed in the trace but succeeded here: give back what it
 * made, so that the rest of the trace meets the state it expects. */
static void undo(replay *r) {
  switch (r->made.kind) {
  case 'h': (void)mori_hipMemRelease((hipMemGenericAllocationHandle_t)r->made.value); break;
  case 'r': (void)mori_hipMemAddressFree((void *)r->made.value, r->made.size); break;
  case 'd': (void)mori_hipFree((void *)r->made.value); break;
  case 'f': (void)mori_close((int)r->made.value); break;
  default: return;
  }
  const mori_fi_value *out = arg(r, 0);
  if (out->kind == MORI_FI_V_SYMBOL) unbind(r, out->sym, out->id);
}

/* Socket calls are the peers' business; a close matters when it closes an
 * fd this process exported (its lifetime is a known defect's trigger). */
static int replay_os(replay *r) {
  const mori_fi_trace_rec *x = rec(r);
  if (x->call != MORI_FI_CALL_close || x->args[0].kind != MORI_FI_V_SYMBOL) return 0;
  binding *b = find(r, 'f', x->args[0].id);
  if (b == NULL || !b->own_fd) return 0;
  int rc = mori_close((int)b->value);
  unbind(r, 'f', x->args[0].id);
  return rc == 0 || x->rc != 0 ? 0 : -1;
}

/* Peers are absent, so a wait for their signal cannot succeed: with
 * MORI_SIM_WAIT_TIMEOUT_MS=0 it times out at once, which stands for the
 * signal having arrived.  Contract violations still fail first. */
static int consistent(const mori_fi_trace_rec *x, hipError_t e) {
  /* hipGetLastError reports an earlier call; its own result is no verdict */
  if (x->call == MORI_FI_CALL_hipGetLastError) return 1;
  if ((x->rc == hipSuccess) == (e == hipSuccess)) return 1;
  if (x->call == MORI_FI_CALL_hipStreamWaitValue32 && e == hipErrorLaunchTimeOut) return 1;
  /* a pending event is the recorded run's timing, not a contract */
  return x->call == MORI_FI_CALL_hipEventQuery && x->rc == hipErrorNotReady;
}

static void violation(replay *r, mori_fi_replay_result *res, hipError_t e) {
  const mori_fi_trace_rec *x = rec(r);
  res->ok = 0;
  res->violation_at = x->index;
  res->violation_line = x->line;
  res->violation_call = x->call;
  if (r->why[0])
    snprintf(res->message, sizeof res->message, "%s: %s", mori_fi_call_name(x->call), r->why);
  else if (mori_fi_call_is_hip(x->call))
    snprintf(res->message, sizeof res->message, "%s: %s (%d): %s", mori_fi_call_name(x->call),
             mori_hipGetErrorName(e), (int)e, mori_shim_message());
  else
    snprintf(res->message, sizeof res->message, "%s: failed: %s", mori_fi_call_name(x->call),
             strerror(errno));
}

static void run(replay *r, mori_fi_replay_result *res) {
  for (r->at = 0; r->at < r->t->n; r->at++) {
    const mori_fi_trace_rec *x = rec(r);
    res->calls = (long)r->at; /* a crash is then reported at this record */
    res->violation_at = x->index;
    res->violation_line = x->line;
    if (x->injected) continue; /* the recorded program never reached the runtime */
    if (!mori_fi_call_is_hip(x->call)) {
      if (replay_os(r) == 0) continue;
      violation(r, res, hipErrorUnknown);
      return;
    }
    /* a failed import of a peer's handle depends on the peer: nothing to replay */
    if (x->call == MORI_FI_CALL_hipMemImportFromShareableHandle && x->rc != hipSuccess) continue;
    r->made.kind = 0;
    hipError_t e = rows[x->call](r);
    if (r->why[0] || !consistent(x, e)) {
      if (x->rc == hipSuccess || r->why[0]) {
        violation(r, res, e);
        return;
      }
      res->divergences++;
      undo(r);
    }
  }
  res->calls = (long)r->t->n;
  res->violation_at = res->violation_line = -1;
  scratch_free(r, 0); /* the replay's own: not what the trace left live */
  scratch_free(r, 1);
  res->live_at_end = mori_shim_registry_total();
}

static void child(const mori_fi_trace *t, const char *arch, const char *quirks,
                  mori_fi_replay_result *res) {
  replay r = {.t = t};
  setenv("MORI_SYMM_SHIM", "sim", 1);
  if (arch && *arch) setenv("MORI_SIM_ARCH", arch, 1);
  else unsetenv("MORI_SIM_ARCH");
  setenv("MORI_SIM_QUIRKS", quirks ? quirks : "", 1);
  setenv("MORI_SIM_WAIT_TIMEOUT_MS", "0", 1);
  setenv("MORI_SIM_DEVICES", "1024", 1); /* every rank's device is this process's */
  if (mori_shim_select("sim") != 0) {
    snprintf(res->message, sizeof res->message, "sim backend: %s", mori_shim_message());
    return;
  }
  res->ok = 1;
  run(&r, res);
  free(r.b);
  scratch_free(&r, 0);
  scratch_free(&r, 1);
}

int mori_fi_replay(const mori_fi_trace *t, const char *arch, const char *quirks,
                   mori_fi_replay_result *res) {
  memset(res, 0, sizeof *res);
  res->violation_at = res->violation_line = -1;
  mori_fi_replay_result *shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE,
                                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    snprintf(res->message, sizeof res->message, "mmap: %s", strerror(errno));
    return -1;
  }
  *shared = *res;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    child(t, arch, quirks, shared);
    _exit(0);
  }
  int st = 0, rc = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) {
    snprintf(res->message, sizeof res->message, "fork/wait: %s", strerror(errno));
    rc = -1;
  } else {
    *res = *shared;
    if (WIFSIGNALED(st)) {
      const mori_fi_trace_rec *x = (size_t)res->calls < t->n ? &t->recs[res->calls] : NULL;
      res->ok = 0;
      res->violation_call = x ? x->call : -1;
      snprintf(res->message, sizeof res->message, "%s: the replay died of signal %d",
               x ? mori_fi_call_name(x->call) : "end", WTERMSIG(st));
    }
  }
  munmap(shared, sizeof *shared);
  return rc;
}
