/*
 * schedule.c - the MORI_FI schedule language: a pure parser from a byte
 * string to a list of rules.  Every defect is reported with the column
 * where it starts, so a long schedule in an environment variable can be
 * fixed without guessing.
 */
#include "mori/fi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

#define RANK_MAX 4095 /* the wire format's largest world, less one */
#define LIFE_MAX 1000000 /* restarts of one rank */

/* A schedule is one line: its messages say "MORI_FI: column C: ...". */
typedef mori_fi__cursor cursor;

static int is_space(char ch) { return ch == ' ' || ch == '\t'; }
static int is_word(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '-';
}

static void skip_space(cursor *c) {
  while (c->p < c->end && is_space(*c->p)) c->p++;
}

/* Consumes lit if the input continues with it. */
static int take(cursor *c, const char *lit) {
  size_t n = strlen(lit);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0) return 0;
  c->p += n;
  return 1;
}

static size_t word_len(const cursor *c) {
  size_t n = 0;
  while (c->p + n < c->end && is_word(c->p[n])) n++;
  return n;
}

/* What a message shows of the input at p: the word there, or its byte. */
static void shown(const cursor *c, char *out, size_t cap) {
  size_t n = word_len(c);
  if (c->p >= c->end) snprintf(out, cap, "end of input");
  else if (n == 0 && (unsigned char)*c->p >= 0x20 && (unsigned char)*c->p < 0x7f)
    snprintf(out, cap, "'%c'", *c->p);
  else if (n == 0) snprintf(out, cap, "byte 0x%02x", (unsigned char)*c->p);
  else snprintf(out, cap, "'%.*s'", (int)(n < 40 ? n : 40), c->p);
}

/* A decimal number up to max. */
static int number(cursor *c, uint64_t max, uint64_t *out, const char *what) {
  const char *at = c->p;
  size_t n = 0;
  uint64_t v;
  while (at + n < c->end && at[n] >= '0' && at[n] <= '9') n++;
  if (n == 0) {
    char got[64];
    shown(c, got, sizeof got);
    return mori_fi__fail(c, at, "expected %s (a number), got %s", what, got);
  }
  if (mori_fi__u64(at, n, &v) != 0 || v > max)
    return mori_fi__fail(c, at, "%s is larger than %llu", what, (unsigned long long)max);
  c->p = at + n;
  *out = v;
  return 0;
}

static int expect(cursor *c, const char *lit, const char *after) {
  if (take(c, lit)) return 0;
  char got[64];
  shown(c, got, sizeof got);
  return mori_fi__fail(c, c->p, "expected '%s' after %s, got %s", lit, after, got);
}

/* "#N", "#*" or (when optional) nothing, which means the first. */
static int nth(cursor *c, mori_fi_rule *r, int optional) {
  if (!take(c, "#")) {
    if (optional) {
      r->nth = 1;
      return 0;
    }
    return expect(c, "#", "the function name");
  }
  if (take(c, "*")) {
    r->nth = 1;
    r->persist = 1;
    return 0;
  }
  const char *at = c->p;
  uint64_t v;
  if (number(c, 1000000000, &v, "a call number") != 0) return -1;
  if (v == 0) return mori_fi__fail(c, at, "call numbers count from 1");
  r->nth = (long)v;
  return 0;
}

/* "[persist:](kill | ERROR)": a HIP error for a runtime call (and for
 * call#N), an errno for an OS call; by name or number either way. */
static int fault(cursor *c, mori_fi_rule *r) {
  int os = r->target == MORI_FI_T_CALL && mori_fi_call_is_os(r->call);
  if (take(c, "persist:")) r->persist = 1;
  const char *at = c->p;
  size_t n = word_len(c);
  if (mori_fi__is(c->p, n, "kill")) {
    if (r->persist)
      return mori_fi__fail(c, at, "kill cannot persist: the process dies at the first call");
    c->p += n;
    r->action = MORI_FI_A_KILL;
    return 0;
  }
  r->action = MORI_FI_A_FAIL;
  int found = os ? mori_fi_errno_find(c->p, n, &r->error) : mori_fi_error_find(c->p, n, &r->error);
  if (n > 0 && *c->p >= '0' && *c->p <= '9') {
    uint64_t v;
    if (number(c, os ? 4095 : 0x7fffffff, &v, os ? "an errno number" : "an error number") != 0)
      return -1;
    r->error = (int)v;
  } else if (n == 0 || found != 0) {
    char got[64];
    shown(c, got, sizeof got);
    if (n == 0)
      return mori_fi__fail(c, at, "expected kill or %s, got %s",
                           os ? "an errno name" : "a HIP error name", got);
    if (os)
      return mori_fi__fail(c, at, "unknown errno name %s (%s is an OS call: it fails with an "
                           "errno such as EIO)", got, mori_fi_call_name(r->call));
    return mori_fi__fail(c, at, "unknown error name %s", got);
  } else {
    c->p += n;
  }
  if (r->error == 0)
    return mori_fi__fail(c, at, os ? "0 is not an errno to inject"
                                   : "hipSuccess (0) is not an error to inject");
  return 0;
}

static int order_list(cursor *c, mori_fi_rule *r) {
  do {
    const char *at = c->p;
    uint64_t v;
    if (r->norder == MORI_FI_ORDER_MAX)
      return mori_fi__fail(c, at, "an order lists at most %d ranks", MORI_FI_ORDER_MAX);
    if (number(c, RANK_MAX, &v, "a sender rank") != 0) return -1;
    for (int i = 0; i < r->norder; i++)
      if (r->order[i] == (int)v)
        return mori_fi__fail(c, at, "rank %d appears twice in the order", (int)v);
    r->order[r->norder++] = (int)v;
  } while (take(c, ","));
  return 0;
}

static int recv_rule(cursor *c, mori_fi_rule *r) {
  r->target = MORI_FI_T_RECV;
  r->nth = 1;
  if (take(c, "reorder:")) {
    uint64_t seed;
    r->action = MORI_FI_A_REORDER;
    if (expect(c, "seed=", "reorder:") != 0 || number(c, UINT64_MAX, &seed, "a seed") != 0)
      return -1;
    r->seed = seed;
    return 0;
  }
  if (take(c, "order:")) {
    r->action = MORI_FI_A_ORDER;
    return order_list(c, r);
  }
  if (take(c, "duplicate")) {
    r->action = MORI_FI_A_DUPLICATE;
    return nth(c, r, 1);
  }
  char got[64];
  shown(c, got, sizeof got);
  return mori_fi__fail(c, c->p, "expected reorder:seed=N, order:R,R,... or duplicate[#N] after "
                       "recv=, got %s", got);
}

static int send_rule(cursor *c, mori_fi_rule *r) {
  static const struct {
    const char *word;
    mori_fi_action action;
  } words[] = {{"drop", MORI_FI_A_DROP}, {"truncate", MORI_FI_A_TRUNCATE}, {"forge", MORI_FI_A_FORGE}};
  r->target = MORI_FI_T_SEND;
  size_t n = word_len(c);
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (mori_fi__is(c->p, n, words[i].word)) {
      c->p += n;
      r->action = words[i].action;
      return nth(c, r, 1);
    }
  char got[64];
  shown(c, got, sizeof got);
  return mori_fi__fail(c, c->p, "expected drop, truncate or forge after send=, got %s", got);
}

/* The rest of the rule, up to ';', trailing blanks trimmed. */
static int path_rule(cursor *c, mori_fi_rule *r, mori_fi_target target) {
  const char *at = c->p, *stop = c->p;
  while (stop < c->end && *stop != ';') stop++;
  const char *last = stop;
  while (last > at && is_space(last[-1])) last--;
  if (last == at) return mori_fi__fail(c, at, "expected a path");
  for (const char *q = at; q < last; q++)
    if (*q == '\0') return mori_fi__fail(c, q, "a path cannot hold a NUL byte");
  r->target = target;
  r->action = MORI_FI_A_PATH;
  r->path = malloc((size_t)(last - at) + 1);
  if (r->path == NULL) return mori_fi__fail(c, at, "out of memory");
  memcpy(r->path, at, (size_t)(last - at));
  r->path[last - at] = '\0';
  c->p = last;
  return 0;
}

static int call_rule(cursor *c, mori_fi_rule *r, const char *name, size_t n) {
  if (mori_fi__is(name, n, "call")) {
    r->target = MORI_FI_T_GLOBAL;
  } else {
    r->target = MORI_FI_T_CALL;
    r->call = mori_fi_call_find(name, n);
    if (r->call < 0)
      return mori_fi__fail(c, name, "unknown function '%.*s'", (int)(n < 60 ? n : 60), name);
  }
  if (nth(c, r, 0) != 0 || expect(c, "=", "the call number") != 0) return -1;
  return fault(c, r);
}

static int body(cursor *c, mori_fi_rule *r) {
  const char *name = c->p;
  size_t n = word_len(c);
  c->p += n;
  if (n > 0 && c->p < c->end && *c->p == '=') {
    c->p++;
    if (mori_fi__is(name, n, "recv")) return recv_rule(c, r);
    if (mori_fi__is(name, n, "send")) return send_rule(c, r);
    if (mori_fi__is(name, n, "count")) return path_rule(c, r, MORI_FI_T_COUNT);
    if (mori_fi__is(name, n, "record")) return path_rule(c, r, MORI_FI_T_RECORD);
    return mori_fi__fail(c, name,
                         "unknown setting '%.*s' (expected recv=, send=, count= or record=)",
                         (int)(n < 60 ? n : 60), name);
  }
  if (n > 0 && c->p < c->end && *c->p == '#') return call_rule(c, r, name, n);
  c->p = name;
  char got[64];
  shown(c, got, sizeof got);
  return mori_fi__fail(c, name,
                       "expected FUNCTION#N=, call#N=, recv=, send=, count= or record=, got %s",
                       got);
}

/* A rule's prefix NAME=N and its space (rank=, life=): 1 with *out set if
 * it is there, 0 if not, -1 (the error said) if it is malformed. */
static int prefix(cursor *c, const char *name, uint64_t max, const char *what, int *out) {
  uint64_t v;
  if (!take(c, name)) return 0;
  if (number(c, max, &v, what) != 0) return -1;
  *out = (int)v;
  if (c->p >= c->end || !is_space(*c->p)) {
    char got[64];
    shown(c, got, sizeof got);
    return mori_fi__fail(c, c->p, "expected a space after %s%d, got %s", name, *out, got);
  }
  skip_space(c);
  return 1;
}

static int rule(cursor *c, mori_fi_rule *r) {
  const char *start = c->p;
  memset(r, 0, sizeof *r);
  r->rank = -1;
  r->life = -1;
  r->column = (size_t)(start - c->line_start) + 1;
  if (prefix(c, "rank=", RANK_MAX, "a rank", &r->rank) < 0 ||
      prefix(c, "life=", LIFE_MAX, "a life", &r->life) < 0)
    return -1;
  if (body(c, r) != 0) return -1;
  size_t n = (size_t)(c->p - start);
  if (n >= sizeof r->text) n = sizeof r->text - 1;
  memcpy(r->text, start, n);
  r->text[n] = '\0';
  return 0;
}

static int push(mori_fi_schedule *s, size_t *cap, const mori_fi_rule *r) {
  mori_fi_rule *rules = mori_fi__grow(s->rules, s->n, cap, sizeof *rules, 4);
  if (rules == NULL) return -1;
  s->rules = rules;
  s->rules[s->n++] = *r;
  return 0;
}

int mori_fi_parse(const char *spec, size_t len, mori_fi_schedule *out, char *err,
                  size_t errlen) {
  cursor c = {.p = spec, .end = spec + len, .line_start = spec, .prefix = "MORI_FI: ",
              .err = err, .errlen = errlen};
  size_t cap = 0;
  memset(out, 0, sizeof *out);
  if (err && errlen) err[0] = '\0';
  if (spec == NULL && len > 0) return mori_fi__fail(&c, spec, "no input");
  for (;;) {
    skip_space(&c);
    if (c.p == c.end) return 0;
    if (*c.p == ';') {
      c.p++;
      continue;
    }
    mori_fi_rule r;
    if (rule(&c, &r) != 0 || push(out, &cap, &r) != 0) {
      free(r.path); /* a failed rule allocated none; a failed push still owns it */
      if (err && errlen && err[0] == '\0') mori_fi__fail(&c, c.p, "out of memory");
      mori_fi_schedule_free(out);
      return -1;
    }
    skip_space(&c);
    if (c.p < c.end && *c.p != ';') {
      char got[64];
      shown(&c, got, sizeof got);
      mori_fi__fail(&c, c.p, "expected ';' or the end after the rule, got %s", got);
      mori_fi_schedule_free(out);
      return -1;
    }
  }
}

void mori_fi_schedule_free(mori_fi_schedule *s) {
  for (size_t i = 0; i < s->n; i++) free(s->rules[i].path);
  free(s->rules);
  s->rules = NULL;
  s->n = 0;
}
