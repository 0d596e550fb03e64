/*
 * fuzz_fi_trace.c - fuzz target for mori_trace_parse, the shim-call trace
 * parser of record and replay.  Any byte string must parse or fail with a
 * message naming a line and column inside the input; every parsed record
 * must match its call's layout, and the trace written back out in the
 * canonical spelling must parse to the same records.  A trace it takes is
 * then replayed on the sim (mori_fi_replay, a child process per trace): a
 * damaged one must be refused at one of its lines, never crash the replay.
 *
 * Input: the trace text itself (not NUL-terminated).
 */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mori/fi.h"

#define PUT mori__fuzz_put

/* A call's recorded parameters from its "key:kind ..." spec (its row's spec column),
 * those of kind '-' left out, as the format documents. */
typedef struct param {
  char key[32];
  char kind;
} param;

static int recorded_params(int call, param out[MORI_FI_TRACE_ARGS + 1]) {
  const char *s = mori_fi_call_spec(call);
  int n = 0, used = 0;
  char key[32], kind;
  while (s && sscanf(s, " %31[^:]:%c%n", key, &kind, &used) == 2) {
    s += used;
    if (kind == '-') continue;
    MORI_FUZZ_CHECK(n <= MORI_FI_TRACE_ARGS, "call %d: more parameters than a record holds", call);
    memcpy(out[n].key, key, sizeof key);
    out[n++].kind = kind;
  }
  return n;
}

static void check_value(const mori_fi_trace_rec *r, const mori_fi_value *v) {
  MORI_FUZZ_CHECK(v->kind >= MORI_FI_V_NULL && v->kind <= MORI_FI_V_FDS, "line %ld: value kind %d",
                  r->line, (int)v->kind);
  MORI_FUZZ_CHECK(v->kind != MORI_FI_V_SYMBOL || (v->sym && strchr("hrdsf", v->sym) && v->id >= 0),
                  "line %ld: symbol letter 0x%02x, number %ld", r->line, (unsigned char)v->sym,
                  v->id);
  MORI_FUZZ_CHECK(v->nfds >= 0 && v->nfds <= MORI_FI_TRACE_FDS, "line %ld: %d fds", r->line,
                  v->nfds);
}

static void check_record(const mori_fi_trace_rec *r, long prev_line) {
  param p[MORI_FI_TRACE_ARGS + 1];
  MORI_FUZZ_CHECK(mori_fi_call_name(r->call) != NULL, "line %ld: call %d", r->line, r->call);
  MORI_FUZZ_CHECK(r->line > prev_line, "record lines %ld after %ld", r->line, prev_line);
  MORI_FUZZ_CHECK((r->index >= 0) == mori_fi_call_is_hip(r->call) && r->index >= -1,
                  "line %ld: %s with index %ld", r->line, mori_fi_call_name(r->call), r->index);
  MORI_FUZZ_CHECK(r->nargs == recorded_params(r->call, p), "line %ld: %s with %d arguments",
                  r->line, mori_fi_call_name(r->call), r->nargs);
  MORI_FUZZ_CHECK(r->injected == 0 || r->injected == 1, "line %ld: injected %d", r->line,
                  r->injected);
  for (int i = 0; i < r->nargs; i++) check_value(r, &r->args[i]);
}

/* ---- the canonical spelling ---- */

static void put_value(mori__fuzz_text *t, const mori_fi_value *v) {
  switch (v->kind) {
  case MORI_FI_V_NULL: PUT(t, "0"); break;
  case MORI_FI_V_SYMBOL:
    if (v->sym == 'f')
      PUT(t, "fd%ld", v->id);
    else
      PUT(t, "%c%ld", v->sym, v->id);
    if (v->offset) PUT(t, "+0x%llx", (unsigned long long)v->offset);
    break;
  case MORI_FI_V_NUMBER: PUT(t, "%lld", (long long)v->number); break;
  case MORI_FI_V_HOST: PUT(t, "host"); break;
  case MORI_FI_V_FABRIC: PUT(t, "fabric"); break;
  case MORI_FI_V_OTHER: PUT(t, "other"); break;
  case MORI_FI_V_PROP: PUT(t, "%d/%d/%d", v->sub[0], v->sub[1], v->sub[2]); break;
  case MORI_FI_V_DESC: PUT(t, "%d/%d", v->sub[0], v->sub[1]); break;
  default:
    if (v->nfds == 0) PUT(t, "none");
    for (int i = 0; i < v->nfds; i++) PUT(t, "%sfd%ld", i ? "," : "", v->fds[i]);
    break;
  }
}

static void put_record(mori__fuzz_text *t, const mori_fi_trace_rec *r) {
  param p[MORI_FI_TRACE_ARGS + 1];
  recorded_params(r->call, p);
  if (r->index < 0)
    PUT(t, "- %s", mori_fi_call_name(r->call));
  else
    PUT(t, "%ld %s", r->index, mori_fi_call_name(r->call));
  for (int i = 0; i < r->nargs; i++) {
    PUT(t, " %s=", p[i].key);
    put_value(t, &r->args[i]);
  }
  PUT(t, " rc=%ld%s\n", r->rc, r->injected ? " injected" : "");
}

static int same_value(const mori_fi_value *a, const mori_fi_value *b) {
  return a->kind == b->kind && a->sym == b->sym && a->id == b->id && a->offset == b->offset &&
         a->number == b->number && memcmp(a->sub, b->sub, sizeof a->sub) == 0 &&
         a->nfds == b->nfds && memcmp(a->fds, b->fds, (size_t)a->nfds * sizeof a->fds[0]) == 0;
}

static int same_record(const mori_fi_trace_rec *a, const mori_fi_trace_rec *b) {
  if (a->index != b->index || a->call != b->call || a->nargs != b->nargs || a->rc != b->rc ||
      a->injected != b->injected)
    return 0;
  for (int i = 0; i < a->nargs; i++)
    if (!same_value(&a->args[i], &b->args[i])) return 0;
  return 1;
}

static void check_canonical(const mori_fi_trace *tr) {
  mori__fuzz_text t = {NULL, 0, 0};
  PUT(&t, "%s", ""); /* an empty trace is "", not NULL */
  if (tr->rank >= 0) PUT(&t, "# rank %d\n", tr->rank);
  for (size_t i = 0; i < tr->n; i++) put_record(&t, &tr->recs[i]);
  mori_fi_trace again;
  char err[256];
  int rc = mori_trace_parse(t.s, t.n, &again, err, sizeof err);
  MORI_FUZZ_CHECK(rc == 0, "the canonical spelling does not parse: %s\n%s", err, t.s);
  MORI_FUZZ_CHECK(again.n == tr->n && again.rank == tr->rank,
                  "%zu records of rank %d, not %zu of %d", again.n, again.rank, tr->n, tr->rank);
  for (size_t i = 0; i < tr->n; i++)
    MORI_FUZZ_CHECK(same_record(&tr->recs[i], &again.recs[i]),
                    "line %ld reads back differently:\n%s", tr->recs[i].line, t.s);
  mori_trace_free(&again);
  free(t.s);
}

/* ---- replay ---- */

/* Longer traces cost more than they find (each replay is a fork). */
#define REPLAY_RECORDS_MAX 64

static void check_replay(const mori_fi_trace *tr, long lines) {
  mori_fi_replay_result res;
  if (tr->n == 0 || tr->n > REPLAY_RECORDS_MAX) return;
  if (mori_fi_replay(tr, "gfx950", "", &res) != 0) return; /* no fork: no verdict */
  MORI_FUZZ_CHECK(strstr(res.message, "the replay died of signal") == NULL, "replay: %s",
                  res.message);
  MORI_FUZZ_CHECK(res.ok || res.violation_line < 0 ||
                      (res.violation_line >= 1 && res.violation_line <= lines),
                  "replay: a violation at line %ld of %ld: %s", res.violation_line, lines,
                  res.message);
}

/* ---- the target ---- */

static void check_error(const mori_fi_trace *tr, const char *err, const uint8_t *data,
                        size_t size) {
  long line = 0, lines = 1;
  size_t column = 0;
  int used = 0;
  for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
  MORI_FUZZ_CHECK(tr->recs == NULL && tr->n == 0, "failed parse left %zu records", tr->n);
  MORI_FUZZ_CHECK(sscanf(err, "line %ld column %zu: %n", &line, &column, &used) == 2 && used > 0,
                  "error message \"%s\" does not name a line and column", err);
  MORI_FUZZ_CHECK(line >= 1 && line <= lines && column >= 1 && column <= size + 1,
                  "error names line %ld column %zu of %ld lines, %zu bytes", line, column, lines,
                  size);
  MORI_FUZZ_CHECK(err[used] != '\0', "error message \"%s\" says nothing", err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mori_fi_trace tr;
  char err[512];
  int rc = mori_trace_parse((const char *)data, size, &tr, err, sizeof err);
  MORI_FUZZ_CHECK(rc == 0 || rc == -1, "mori_trace_parse returned %d", rc);
  if (rc != 0) {
    check_error(&tr, err, data, size);
    return 0;
  }
  MORI_FUZZ_CHECK(tr.rank >= -1, "trace of rank %d", tr.rank);
  long prev = 0;
  for (size_t i = 0; i < tr.n; prev = tr.recs[i++].line) check_record(&tr.recs[i], prev);
  check_canonical(&tr);
  long lines = 1;
  for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
  check_replay(&tr, lines);
  mori_trace_free(&tr);
  return 0;
}
