/*
 * preload_record.c - MORI_FI_RECORD: one trace line per shim call, with
 * every handle, reservation, device allocation, stream and fd renamed to a
 * symbol (h3, r2+0x200000, d1, s1, fd4) in the order they appear, so a
 * trace says nothing about the process or the backend that wrote it.
 */
#include "preload.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "parse.h"

/* ---- symbols ---- */

typedef struct sym {
  char kind; /* h r d s f */
  long id;
  uintptr_t value;
  size_t size; /* r and d: the range [value, value + size) */
  int live;
} sym;

static sym *syms;
static size_t nsyms, cap_syms;
static long next_id[128];

static sym *sym_add(char kind, uintptr_t value, size_t size) {
  sym *s = mori_fi__grow(syms, nsyms, &cap_syms, sizeof *s, 256);
  if (s == NULL) return NULL;
  syms = s;
  syms[nsyms] = (sym){kind, ++next_id[(unsigned char)kind], value, size, 1};
  return &syms[nsyms++];
}

/* The newest symbol of kind naming value (live only, if asked). */
static sym *sym_exact(char kind, uintptr_t value, int live_only) {
  for (size_t i = nsyms; i-- > 0;)
    if (syms[i].kind == kind && syms[i].value == value && (syms[i].live || !live_only))
      return &syms[i];
  return NULL;
}

static sym *sym_covering(char kind, uintptr_t addr) {
  for (size_t i = nsyms; i-- > 0;)
    if (syms[i].kind == kind && syms[i].live && addr >= syms[i].value &&
        addr - syms[i].value < (syms[i].size ? syms[i].size : 1))
      return &syms[i];
  return NULL;
}

/* ---- the line being written ---- */

typedef struct line {
  char buf[1024];
  size_t n;
} line;

static void put(line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(line *l, const char *fmt, ...) {
  if (l->n >= sizeof l->buf) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(l->buf + l->n, sizeof l->buf - l->n, fmt, ap);
  va_end(ap);
  if (k > 0) l->n = l->n + (size_t)k < sizeof l->buf ? l->n + (size_t)k : sizeof l->buf - 1;
}

static void put_named(line *l, const char *name, long v) {
  if (name) put(l, "%s", name);
  else put(l, "%ld", v);
}

static void put_address(line *l, const void *p) {
  uintptr_t a = (uintptr_t)p;
  sym *s;
  if (p == NULL) put(l, "0");
  else if ((s = sym_covering('r', a)) != NULL || (s = sym_covering('d', a)) != NULL)
    a == s->value ? put(l, "%c%ld", s->kind, s->id)
                  : put(l, "%c%ld+0x%lx", s->kind, s->id, (unsigned long)(a - s->value));
  else put(l, "host");
}

/* How put_fd names an fd: only a known one, a known one or a new symbol,
 * or always a new symbol (the call just made the fd: any symbol still live
 * for its number belongs to an fd closed behind the shim's back). */
enum { FD_KNOWN, FD_KNOWN_OR_NEW, FD_FRESH };

static void put_fd(line *l, int fd, int mode) {
  sym *s = sym_exact('f', (uintptr_t)(unsigned)fd, 1);
  if (s && mode == FD_FRESH) s->live = 0;
  if (mode == FD_FRESH || (s == NULL && mode == FD_KNOWN_OR_NEW))
    s = sym_add('f', (uintptr_t)(unsigned)fd, 0);
  if (s) put(l, "fd%ld", s->id);
  else put(l, "other");
}

static void put_symbol_out(line *l, char kind, uintptr_t value, size_t size, int ok) {
  sym *s = ok && value ? sym_add(kind, value, size) : NULL;
  if (s) put(l, "%c%ld", kind, s->id);
  else put(l, "0");
}

/* ---- reading the packed arguments ---- */

static uint64_t arg_u64(const fi_arg *a) {
  switch (a->size) {
  case 1: return *(const uint8_t *)a->p;
  case 2: return *(const uint16_t *)a->p;
  case 4: return *(const uint32_t *)a->p;
  default: return *(const uint64_t *)a->p;
  }
}

static int64_t arg_i64(const fi_arg *a) {
  switch (a->size) {
  case 1: return *(const int8_t *)a->p;
  case 2: return *(const int16_t *)a->p;
  case 4: return *(const int32_t *)a->p;
  default: return *(const int64_t *)a->p;
  }
}

static void *arg_ptr(const fi_arg *a) { return *(void *const *)a->p; }

/* The position of the first parameter of kind in the row, or -1. */
static int param_of(const mori_fi__param *ps, int n, char kind) {
  for (int i = 0; i < n; i++)
    if (ps[i].kind == kind) return i;
  return -1;
}

static void put_prop(line *l, const hipMemAllocationProp *p) {
  if (p == NULL) {
    put(l, "0");
    return;
  }
  put_named(l, mori_fi__alloc_type_name((int)p->type), (long)p->type);
  put(l, "/");
  put_named(l, mori_fi__handle_type_name((int)p->requestedHandleType), (long)p->requestedHandleType);
  put(l, "/%d", p->location.id);
}

static void put_desc(line *l, const hipMemAccessDesc *d, size_t count) {
  if (d == NULL || count == 0) {
    put(l, "0");
    return;
  }
  put_named(l, mori_fi__access_name((int)d->flags), (long)d->flags);
  put(l, "/%d", d->location.id);
}

/* One parameter, after the call returned rc. */
static void put_param(line *l, const mori_fi__param *ps, int np, int i, const fi_arg *argv,
                      hipError_t rc) {
  const fi_arg *a = &argv[i];
  int ok = rc == hipSuccess, zi = param_of(ps, np, 'z'), ti = param_of(ps, np, 't');
  size_t size = zi >= 0 ? (size_t)arg_u64(&argv[zi]) : 0;
  int type = ti >= 0 ? (int)arg_i64(&argv[ti]) : 0;
  void *p = a->size == sizeof(void *) ? arg_ptr(a) : NULL;
  switch (ps[i].kind) {
  case 'H': put_symbol_out(l, 'h', ok && p ? (uintptr_t) * (void **)p : 0, 0, ok); break;
  case 'R': put_symbol_out(l, 'r', ok && p ? (uintptr_t) * (void **)p : 0, size, ok); break;
  case 'M': put_symbol_out(l, 'd', ok && p ? (uintptr_t) * (void **)p : 0, size, ok); break;
  case 'h': {
    sym *s = p ? sym_exact('h', (uintptr_t)p, 0) : NULL;
    if (p == NULL) put(l, "0");
    else put(l, "h%ld", s ? s->id : sym_add('h', (uintptr_t)p, 0)->id);
    break;
  }
  case 'a': put_address(l, p); break;
  case 'z': case 'u': put(l, "0x%llx", (unsigned long long)arg_u64(a)); break;
  case 'i': put(l, "%lld", (long long)arg_i64(a)); break;
  case 'Z': put(l, "0x%llx", ok && p ? (unsigned long long)*(size_t *)p : 0ull); break;
  case 'P': put_prop(l, p); break;
  case 'D': put_desc(l, p, i + 1 < np ? (size_t)arg_u64(&argv[i + 1]) : 0); break;
  case 't': put_named(l, mori_fi__handle_type_name(type), type); break;
  case 'X':
    if (!ok || p == NULL) put(l, "0");
    else if (type == hipMemHandleTypePosixFileDescriptor) put_fd(l, *(int *)p, FD_FRESH);
    else put(l, "fabric");
    break;
  case 'O':
    if (p == NULL && type != hipMemHandleTypePosixFileDescriptor) put(l, "0");
    else if (type == hipMemHandleTypePosixFileDescriptor) put_fd(l, (int)(intptr_t)p, FD_KNOWN);
    else put(l, "fabric");
    break;
  case 's': {
    sym *s = p ? sym_exact('s', (uintptr_t)p, 0) : NULL;
    if (p == NULL) put(l, "0");
    else put(l, "s%ld", s ? s->id : sym_add('s', (uintptr_t)p, 0)->id);
    break;
  }
  default: break;
  }
}

/* What a successful call ended: reservations, allocations. */
static void retire(int call, const fi_arg *argv) {
  sym *s = NULL;
  if (call == MORI_FI_CALL_hipMemAddressFree) s = sym_exact('r', (uintptr_t)arg_ptr(&argv[0]), 1);
  if (call == MORI_FI_CALL_hipFree) s = sym_exact('d', (uintptr_t)arg_ptr(&argv[0]), 1);
  if (s) s->live = 0;
}

/* ---- the trace file ---- */

static int open_trace(void) {
  if (fi__p.record_fd >= 0) return 0;
  if (fi__p.record_path == NULL) return -1;
  char path[4096];
  if (fi__rank() >= 0) snprintf(path, sizeof path, "%s.%d", fi__p.record_path, fi__rank());
  else snprintf(path, sizeof path, "%s.pid%ld", fi__p.record_path, (long)getpid());
  char why[4200];
  fi__p.record_fd = mori_fi__create_output(path, why, sizeof why);
  if (fi__p.record_fd < 0) {
    fprintf(stderr, "MORI_FI: record: %s\n", why);
    fi__p.record_path = NULL;
    return -1;
  }
  char head[128];
  int n = snprintf(head, sizeof head, "# mori-fi trace v1\n# rank %d\n", fi__rank());
  if (write(fi__p.record_fd, head, (size_t)n) != n) return -1;
  return 0;
}

/* One write per line: a process killed mid-run leaves whole lines. */
static void emit(line *l) {
  put(l, "\n");
  if (l->buf[l->n - 1] != '\n') l->buf[l->n - 1] = '\n';
  ssize_t w = write(fi__p.record_fd, l->buf, l->n);
  (void)w;
}

void fi__record_hip(int call, long index, const fi_arg *argv, hipError_t rc, int injected) {
  if (open_trace() != 0) return;
  mori_fi__param ps[MORI_FI_TRACE_ARGS];
  int np = mori_fi__spec_params(call, ps);
  line l = {.n = 0};
  put(&l, "%ld %s", index, mori_fi_call_name(call));
  for (int i = 0; i < np; i++) {
    if (ps[i].kind == '-') continue;
    put(&l, " %s=", ps[i].key);
    put_param(&l, ps, np, i, argv, rc);
  }
  const char *name = mori_fi_error_name(rc);
  if (name) put(&l, " rc=%s", name);
  else put(&l, " rc=%d", (int)rc);
  if (injected) put(&l, " injected");
  if (rc == hipSuccess) retire(call, argv);
  emit(&l);
}

/* Socket calls: recorded when a datagram moved (or failed for good);
 * polls that found the queue empty are timing, not behaviour. */
void fi__record_msg(int call, const struct msghdr *msg, ssize_t rc, int injected) {
  if (rc < 0 || open_trace() != 0) return;
  line l = {.n = 0};
  int fds[MORI_FI_TRACE_FDS];
  int nfds = mori_fi__msg_fds(msg, fds, MORI_FI_TRACE_FDS);
  put(&l, "- %s fds=", mori_fi_call_name(call));
  for (int i = 0; i < nfds; i++) {
    if (i) put(&l, ",");
    put_fd(&l, fds[i], call == MORI_FI_CALL_recvmsg ? FD_FRESH : FD_KNOWN_OR_NEW);
  }
  if (nfds == 0) put(&l, "none");
  put(&l, " bytes=0x%zx rc=%zd%s",
      call == MORI_FI_CALL_recvmsg ? (size_t)rc : mori_fi__msg_bytes(msg), rc,
      injected ? " injected" : "");
  emit(&l);
}

void fi__record_close(int fd, int rc) {
  if (open_trace() != 0) return;
  line l = {.n = 0};
  put(&l, "- close fd=");
  sym *s = sym_exact('f', (uintptr_t)(unsigned)fd, 1);
  if (s) put(&l, "fd%ld", s->id);
  else put(&l, "other");
  put(&l, " rc=%d", rc);
  if (s && rc == 0) s->live = 0;
  emit(&l);
}

void fi__record_reset(void) {
  free(syms);
  syms = NULL;
  nsyms = cap_syms = 0;
  memset(next_id, 0, sizeof next_id);
  if (fi__p.record_fd >= 0) close(fi__p.record_fd);
  fi__p.record_fd = -1;
}
