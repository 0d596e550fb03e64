/*
 * trace.c - the shim-call trace format: one line per call,
 *   <index|-> <call> key=value ... rc=<result> [injected]
 * with handles, addresses and fds written as symbols (h3, r2+0x200000,
 * fd4) so that nothing in a trace depends on the process or the backend
 * that wrote it.  The parser is pure and reports line and column.
 */
#include "fi_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

/* ---- value names ---- */

typedef struct named {
  int value;
  const char *name;
} named;

static const named handle_types[] = {{hipMemHandleTypeNone, "none"},
                                     {hipMemHandleTypePosixFileDescriptor, "posix_fd"},
                                     {hipMemHandleTypeWin32, "win32"},
                                     {hipMemHandleTypeWin32Kmt, "win32_kmt"},
                                     {hipMemHandleTypeFabric, "fabric"}};
static const named alloc_types[] = {{hipMemAllocationTypeInvalid, "invalid"},
                                    {hipMemAllocationTypePinned, "pinned"},
                                    {hipMemAllocationTypeUncached, "uncached"}};
static const named access_flags[] = {{hipMemAccessFlagsProtNone, "none"},
                                     {hipMemAccessFlagsProtRead, "r"},
                                     {hipMemAccessFlagsProtReadWrite, "rw"}};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *name_of(const named *t, size_t n, int v) {
  for (size_t i = 0; i < n; i++)
    if (t[i].value == v) return t[i].name;
  return NULL;
}

static int find_name(const named *t, size_t n, const char *s, size_t len, int *v) {
  for (size_t i = 0; i < n; i++)
    if (mori_fi__is(s, len, t[i].name)) {
      *v = t[i].value;
      return 0;
    }
  return -1;
}

const char *mori_fi__handle_type_name(int v) { return name_of(handle_types, COUNT(handle_types), v); }
const char *mori_fi__alloc_type_name(int v) { return name_of(alloc_types, COUNT(alloc_types), v); }
const char *mori_fi__access_name(int v) { return name_of(access_flags, COUNT(access_flags), v); }
int mori_fi__handle_type_find(const char *s, size_t n, int *v) {
  return find_name(handle_types, COUNT(handle_types), s, n, v);
}
int mori_fi__alloc_type_find(const char *s, size_t n, int *v) {
  return find_name(alloc_types, COUNT(alloc_types), s, n, v);
}
int mori_fi__access_find(const char *s, size_t n, int *v) {
  return find_name(access_flags, COUNT(access_flags), s, n, v);
}

int mori_fi__spec_params(int call, mori_fi__param *out) {
  const char *s = mori_fi_call_spec(call);
  int n = 0;
  while (s && *s && n < MORI_FI_TRACE_ARGS) {
    const char *colon = strchr(s, ':');
    if (colon == NULL) break;
    size_t klen = (size_t)(colon - s);
    if (klen >= sizeof out[n].key) klen = sizeof out[n].key - 1;
    memcpy(out[n].key, s, klen);
    out[n].key[klen] = '\0';
    out[n].kind = colon[1];
    n++;
    s = colon + 2;
    while (*s == ' ') s++;
  }
  return n;
}

/* ---- the parser ---- */

/* Lines count from 1: messages say "line L column C: ...". */
typedef mori_fi__cursor cursor;

/* A token: bytes up to a space or the end of the line. */
typedef struct token {
  const char *s;
  size_t n;
} token;

static token next_token(cursor *c) {
  while (c->p < c->end && *c->p == ' ') c->p++;
  token t = {c->p, 0};
  while (c->p < c->end && *c->p != ' ' && *c->p != '\n') c->p++;
  t.n = (size_t)(c->p - t.s);
  return t;
}

static int parse_i64(const char *s, size_t n, int64_t *out) {
  uint64_t v;
  int neg = n > 0 && s[0] == '-';
  if (mori_fi__u64(s + neg, n - (size_t)neg, &v) != 0 || v > (uint64_t)INT64_MAX) return -1;
  *out = neg ? -(int64_t)v : (int64_t)v;
  return 0;
}

static int parse_int(const char *s, size_t n, int *out) {
  int64_t v;
  if (parse_i64(s, n, &v) != 0 || v < -2147483647 - 1 || v > 0x7fffffff) return -1;
  *out = (int)v;
  return 0;
}

/* "<letter(s)><digits>[+0x<hex>]" for one of the symbol letters allowed. */
static int parse_symbol(const char *s, size_t n, const char *letters, int offset_ok,
                        mori_fi_value *v) {
  if (n == 0) return -1;
  size_t pre = n >= 2 && s[0] == 'f' && s[1] == 'd' ? 2 : 1;
  char sym = pre == 2 ? 'f' : s[0];
  /* sym == 0 first: strchr() finds the terminator of any string. */
  if (n <= pre || sym == '\0' || strchr(letters, sym) == NULL || (pre == 1 && sym == 'f'))
    return -1;
  size_t digits = pre;
  while (digits < n && s[digits] >= '0' && s[digits] <= '9') digits++;
  uint64_t id, off = 0;
  if (digits == pre || mori_fi__u64(s + pre, digits - pre, &id) != 0 || id > 0x7fffffff) return -1;
  if (digits < n) {
    if (!offset_ok || s[digits] != '+' ||
        mori_fi__u64(s + digits + 1, n - digits - 1, &off) != 0)
      return -1;
  }
  v->kind = MORI_FI_V_SYMBOL;
  v->sym = sym;
  v->id = (long)id;
  v->offset = off;
  return 0;
}

static int parse_named(const char *s, size_t n, int (*find)(const char *, size_t, int *),
                       int *out) {
  return find(s, n, out) == 0 || parse_int(s, n, out) == 0 ? 0 : -1;
}

/* "a/b/c" split at '/' into at most max parts. */
static int split(const char *s, size_t n, token *parts, int max) {
  int k = 0;
  const char *start = s;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && s[i] != '/') continue;
    if (k == max) return -1;
    parts[k++] = (token){start, (size_t)(s + i - start)};
    start = s + i + 1;
  }
  return k;
}

static int parse_fds(const char *s, size_t n, mori_fi_value *v) {
  v->kind = MORI_FI_V_FDS;
  v->nfds = 0;
  if (n == 4 && memcmp(s, "none", 4) == 0) return 0;
  const char *start = s;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && s[i] != ',') continue;
    mori_fi_value one;
    if (v->nfds == MORI_FI_TRACE_FDS ||
        parse_symbol(start, (size_t)(s + i - start), "f", 0, &one) != 0)
      return -1;
    v->fds[v->nfds++] = one.id;
    start = s + i + 1;
  }
  v->kind = MORI_FI_V_FDS;
  return 0;
}

/* One value of the given kind; -1 if it is not one. */
static int parse_value(char kind, const char *s, size_t n, mori_fi_value *v) {
  memset(v, 0, sizeof *v);
  if (mori_fi__is(s, n, "0") && strchr("HhRMaPDXOs", kind)) {
    v->kind = MORI_FI_V_NULL;
    return 0;
  }
  switch (kind) {
  case 'H': case 'h': return parse_symbol(s, n, "h", 0, v);
  case 'R': return parse_symbol(s, n, "r", 0, v);
  case 'M': return parse_symbol(s, n, "d", 0, v);
  case 's': return parse_symbol(s, n, "s", 0, v);
  case 'a':
    if (mori_fi__is(s, n, "host")) { v->kind = MORI_FI_V_HOST; return 0; }
    return parse_symbol(s, n, "rd", 1, v);
  case 'z': case 'u': case 'Z': {
    uint64_t u;
    if (mori_fi__u64(s, n, &u) != 0 || u > (uint64_t)INT64_MAX) return -1;
    v->kind = MORI_FI_V_NUMBER;
    v->number = (int64_t)u;
    return 0;
  }
  case 'i': v->kind = MORI_FI_V_NUMBER; return parse_i64(s, n, &v->number);
  case 't': {
    int t;
    if (parse_named(s, n, mori_fi__handle_type_find, &t) != 0) return -1;
    v->kind = MORI_FI_V_NUMBER;
    v->number = t;
    return 0;
  }
  case 'P': {
    token p[3];
    if (split(s, n, p, 3) != 3 || parse_named(p[0].s, p[0].n, mori_fi__alloc_type_find, &v->sub[0]) ||
        parse_named(p[1].s, p[1].n, mori_fi__handle_type_find, &v->sub[1]) ||
        parse_int(p[2].s, p[2].n, &v->sub[2]))
      return -1;
    v->kind = MORI_FI_V_PROP;
    return 0;
  }
  case 'D': {
    token p[2];
    if (split(s, n, p, 2) != 2 || parse_named(p[0].s, p[0].n, mori_fi__access_find, &v->sub[0]) ||
        parse_int(p[1].s, p[1].n, &v->sub[1]))
      return -1;
    v->kind = MORI_FI_V_DESC;
    return 0;
  }
  case 'X': case 'O': case 'f':
    if (mori_fi__is(s, n, "fabric") && kind != 'f') { v->kind = MORI_FI_V_FABRIC; return 0; }
    if (mori_fi__is(s, n, "other") && kind != 'X') { v->kind = MORI_FI_V_OTHER; return 0; }
    return parse_symbol(s, n, "f", 0, v);
  case 'F': return parse_fds(s, n, v);
  default: return -1;
  }
}

static const char *kind_help(char kind) {
  switch (kind) {
  case 'H': case 'h': return "a handle (hN or 0)";
  case 'R': return "a reservation (rN or 0)";
  case 'M': return "a device allocation (dN or 0)";
  case 'a': return "an address (rN+0xOFF, dN+0xOFF, host or 0)";
  case 'i': return "an integer";
  case 't': return "a handle type (posix_fd, fabric, none or a number)";
  case 'P': return "a prop (alloctype/handletype/device)";
  case 'D': return "an access descriptor (access/device)";
  case 'X': return "an exported handle (fdN or fabric)";
  case 'O': return "an imported handle (fdN, fabric or other)";
  case 's': return "a stream (sN or 0)";
  case 'F': return "fds (fdN,... or none)";
  case 'f': return "an fd (fdN or other)";
  default: return "a number";
  }
}

static int parse_arg(cursor *c, const mori_fi__param *p, mori_fi_value *v) {
  token t = next_token(c);
  size_t klen = strlen(p->key);
  if (!mori_fi__starts(t.s, t.n, p->key) || t.s[klen] != '=')
    return mori_fi__fail(c, t.s, "expected %s=..., got '%.*s'", p->key,
                         (int)(t.n < 40 ? t.n : 40), t.s);
  if (parse_value(p->kind, t.s + klen + 1, t.n - klen - 1, v) != 0)
    return mori_fi__fail(c, t.s + klen + 1, "%s: expected %s, got '%.*s'", p->key,
                         kind_help(p->kind), (int)(t.n - klen - 1 < 40 ? t.n - klen - 1 : 40),
                         t.s + klen + 1);
  return 0;
}

static int parse_rc(cursor *c, mori_fi_trace_rec *r) {
  token t = next_token(c);
  if (!mori_fi__starts(t.s, t.n, "rc="))
    return mori_fi__fail(c, t.s, "expected rc=..., got '%.*s'", (int)(t.n < 40 ? t.n : 40), t.s);
  const char *s = t.s + 3;
  size_t n = t.n - 3;
  int code;
  int64_t v;
  if (mori_fi_call_is_hip(r->call) && mori_fi_error_find(s, n, &code) == 0) r->rc = code;
  else if (parse_i64(s, n, &v) == 0 && v >= -2147483647 - 1 && v <= 0x7fffffff) r->rc = (long)v;
  else
    return mori_fi__fail(c, s, "rc: expected a HIP error name or a number, got '%.*s'",
                         (int)(n < 40 ? n : 40), s);
  for (;;) {
    t = next_token(c);
    if (t.n == 0) return 0;
    if (mori_fi__is(t.s, t.n, "injected")) r->injected = 1;
    else if (!mori_fi__starts(t.s, t.n, "errno="))
      return mori_fi__fail(c, t.s, "unexpected '%.*s' after rc", (int)(t.n < 40 ? t.n : 40), t.s);
  }
}

static int parse_line(cursor *c, mori_fi_trace_rec *r) {
  memset(r, 0, sizeof *r);
  r->line = c->line;
  token t = next_token(c);
  uint64_t idx;
  if (mori_fi__is(t.s, t.n, "-")) r->index = -1;
  else if (mori_fi__u64(t.s, t.n, &idx) == 0 && idx <= 0x7fffffffffffll) r->index = (long)idx;
  else
    return mori_fi__fail(c, t.s, "expected a call index or '-', got '%.*s'",
                         (int)(t.n < 40 ? t.n : 40), t.s);
  t = next_token(c);
  r->call = mori_fi_call_find(t.s, t.n);
  if (r->call < 0 || mori_fi__starts(t.s, t.n, "mori_")) /* traces use the plain names */
    return mori_fi__fail(c, t.s, "unknown call '%.*s'", (int)(t.n < 60 ? t.n : 60), t.s);
  if (mori_fi_call_is_hip(r->call) != (r->index >= 0))
    return mori_fi__fail(c, t.s, "%s %s", mori_fi_call_name(r->call),
                         r->index >= 0 ? "is not a runtime call: its index is '-'"
                                       : "is a runtime call: it needs a call index");
  mori_fi__param params[MORI_FI_TRACE_ARGS];
  int np = mori_fi__spec_params(r->call, params);
  for (int i = 0; i < np; i++) {
    if (params[i].kind == '-') continue;
    if (parse_arg(c, &params[i], &r->args[r->nargs]) != 0) return -1;
    r->nargs++;
  }
  return parse_rc(c, r);
}

/* "# rank N" sets the trace's rank; other comments are ignored. */
static void header(cursor *c, mori_fi_trace *t) {
  const char *p = c->p;
  while (p < c->end && *p != '\n') p++;
  size_t n = (size_t)(p - c->p);
  int64_t rank;
  if (mori_fi__starts(c->p, n, "# rank ") && parse_i64(c->p + 7, n - 7, &rank) == 0 &&
      rank >= 0 && rank <= 0x7fffffff)
    t->rank = (int)rank;
  c->p = p;
}

int mori_trace_parse(const char *text, size_t len, mori_fi_trace *out, char *err,
                     size_t errlen) {
  cursor c = {.p = text, .end = text + len, .line_start = text, .line = 1, .prefix = "",
              .err = err, .errlen = errlen};
  size_t cap = 0;
  memset(out, 0, sizeof *out);
  out->rank = -1;
  if (err && errlen) err[0] = '\0';
  if (text == NULL && len > 0) return -1;
  while (c.p < c.end) {
    c.line_start = c.p;
    if (*c.p == '#') {
      header(&c, out);
    } else if (*c.p != '\n') {
      mori_fi_trace_rec *recs = mori_fi__grow(out->recs, out->n, &cap, sizeof *recs, 64);
      if (recs == NULL) {
        mori_fi__fail(&c, c.p, "out of memory");
        mori_trace_free(out);
        return -1;
      }
      out->recs = recs;
      if (parse_line(&c, &out->recs[out->n]) != 0) {
        mori_trace_free(out);
        return -1;
      }
      out->n++;
    }
    if (c.p < c.end && *c.p != '\n') {
      mori_fi__fail(&c, c.p, "unexpected byte 0x%02x", (unsigned char)*c.p);
      mori_trace_free(out);
      return -1;
    }
    if (c.p < c.end) c.p++;
    c.line++;
  }
  return 0;
}

void mori_trace_free(mori_fi_trace *t) {
  free(t->recs);
  t->recs = NULL;
  t->n = 0;
}
