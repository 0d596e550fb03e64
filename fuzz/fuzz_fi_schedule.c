/*
 * fuzz_fi_schedule.c - fuzz target for mori_fi_parse, the MORI_FI fault
 * schedule parser.  Any byte string must parse or fail with a message that
 * names a column inside the input; every parsed schedule must hold only
 * well-formed rules, and writing it back out in the canonical spelling
 * must parse to the same rules.
 *
 * Input: the schedule text itself (not NUL-terminated).
 */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mori/fi.h"

#define RANK_MAX 4095 /* ranks and orders name ranks of the wire format's largest world */

/* Which actions each target takes. */
static const struct {
  mori_fi_target target;
  unsigned actions; /* bit per mori_fi_action */
} legal[] = {
    {MORI_FI_T_CALL, 1u << MORI_FI_A_FAIL | 1u << MORI_FI_A_KILL},
    {MORI_FI_T_GLOBAL, 1u << MORI_FI_A_FAIL | 1u << MORI_FI_A_KILL},
    {MORI_FI_T_RECV, 1u << MORI_FI_A_REORDER | 1u << MORI_FI_A_ORDER | 1u << MORI_FI_A_DUPLICATE},
    {MORI_FI_T_SEND, 1u << MORI_FI_A_DROP | 1u << MORI_FI_A_TRUNCATE | 1u << MORI_FI_A_FORGE},
    {MORI_FI_T_COUNT, 1u << MORI_FI_A_PATH},
    {MORI_FI_T_RECORD, 1u << MORI_FI_A_PATH},
};

static void check_rule(const mori_fi_rule *r, size_t len) {
  unsigned actions = 0;
  for (size_t i = 0; i < sizeof legal / sizeof legal[0]; i++)
    if (legal[i].target == r->target) actions = legal[i].actions;
  MORI_FUZZ_CHECK(actions & (1u << r->action), "rule \"%s\": target %d with action %d", r->text,
                  (int)r->target, (int)r->action);
  MORI_FUZZ_CHECK(r->rank >= -1 && r->rank <= RANK_MAX, "rule \"%s\": rank %d", r->text, r->rank);
  int is_path = r->action == MORI_FI_A_PATH;
  MORI_FUZZ_CHECK(is_path || r->nth >= 1, "rule \"%s\": call number %ld", r->text, r->nth);
  MORI_FUZZ_CHECK(r->target != MORI_FI_T_CALL || mori_fi_call_is_hip(r->call) ||
                      mori_fi_call_is_os(r->call),
                  "rule \"%s\": function %d is not a call of the seam", r->text, r->call);
  /* an OS call fails with an errno (at most 4095, as the kernel's), a
   * runtime call with a hipError_t */
  MORI_FUZZ_CHECK(r->action != MORI_FI_A_FAIL || r->target != MORI_FI_T_CALL ||
                      !mori_fi_call_is_os(r->call) || (r->error > 0 && r->error <= 4095),
                  "rule \"%s\": errno %d", r->text, r->error);
  MORI_FUZZ_CHECK(r->action != MORI_FI_A_FAIL || r->error != 0, "rule \"%s\": injects hipSuccess",
                  r->text);
  MORI_FUZZ_CHECK(r->action != MORI_FI_A_KILL || !r->persist, "rule \"%s\": a kill that persists",
                  r->text);
  MORI_FUZZ_CHECK(r->norder >= 0 && r->norder <= MORI_FI_ORDER_MAX &&
                      (r->action == MORI_FI_A_ORDER) == (r->norder > 0),
                  "rule \"%s\": %d ranks in the order", r->text, r->norder);
  for (int i = 0; i < r->norder; i++) {
    MORI_FUZZ_CHECK(r->order[i] >= 0 && r->order[i] <= RANK_MAX, "rule \"%s\": order names %d",
                    r->text, r->order[i]);
    for (int j = 0; j < i; j++)
      MORI_FUZZ_CHECK(r->order[i] != r->order[j], "rule \"%s\": rank %d twice in the order",
                      r->text, r->order[i]);
  }
  MORI_FUZZ_CHECK((r->path != NULL) == is_path, "rule \"%s\": path %p", r->text, (void *)r->path);
  if (is_path)
    MORI_FUZZ_CHECK(r->path[0] != '\0' && !strchr(r->path, ';'),
                    "rule \"%s\": path \"%s\" is empty or spans rules", r->text, r->path);
  MORI_FUZZ_CHECK(memchr(r->text, '\0', sizeof r->text) != NULL, "rule text not terminated");
  MORI_FUZZ_CHECK(r->column >= 1 && r->column <= len, "rule \"%s\": column %zu of %zu", r->text,
                  r->column, len);
}

/* ---- the canonical spelling ---- */

static const char *const send_words[] = {
    [MORI_FI_A_DROP] = "drop", [MORI_FI_A_TRUNCATE] = "truncate", [MORI_FI_A_FORGE] = "forge"};

#define PUT mori__fuzz_put

/* "#N", or "#*" for a rule that persists from the first. */
static void put_nth(mori__fuzz_text *t, const mori_fi_rule *r) {
  if (r->persist && r->nth == 1)
    PUT(t, "#*");
  else
    PUT(t, "#%ld", r->nth);
}

static void put_call_rule(mori__fuzz_text *t, const mori_fi_rule *r) {
  const char *name = r->target == MORI_FI_T_CALL ? mori_fi_call_name(r->call) : "call";
  PUT(t, "%s#%ld=%s", name, r->nth, r->persist ? "persist:" : "");
  if (r->action == MORI_FI_A_KILL)
    PUT(t, "kill");
  else
    PUT(t, "%d", r->error);
}

static void put_recv_rule(mori__fuzz_text *t, const mori_fi_rule *r) {
  if (r->action == MORI_FI_A_REORDER) PUT(t, "recv=reorder:seed=%llu", (unsigned long long)r->seed);
  if (r->action == MORI_FI_A_DUPLICATE) PUT(t, "recv=duplicate"), put_nth(t, r);
  if (r->action != MORI_FI_A_ORDER) return;
  PUT(t, "recv=order:");
  for (int i = 0; i < r->norder; i++) PUT(t, "%s%d", i ? "," : "", r->order[i]);
}

static void put_rule(mori__fuzz_text *t, const mori_fi_rule *r) {
  if (r->rank >= 0) PUT(t, "rank=%d ", r->rank);
  if (r->target == MORI_FI_T_CALL || r->target == MORI_FI_T_GLOBAL)
    put_call_rule(t, r);
  else if (r->target == MORI_FI_T_RECV)
    put_recv_rule(t, r);
  else if (r->target == MORI_FI_T_SEND)
    PUT(t, "send=%s", send_words[r->action]), put_nth(t, r);
  else
    PUT(t, "%s=%s", r->target == MORI_FI_T_COUNT ? "count" : "record", r->path);
}

static int same_rule(const mori_fi_rule *a, const mori_fi_rule *b) {
  if (a->rank != b->rank || a->target != b->target || a->action != b->action || a->nth != b->nth ||
      a->persist != b->persist || a->error != b->error || a->seed != b->seed ||
      a->norder != b->norder)
    return 0;
  if (a->target == MORI_FI_T_CALL && a->call != b->call) return 0;
  if (a->norder && memcmp(a->order, b->order, (size_t)a->norder * sizeof a->order[0]) != 0)
    return 0;
  return (a->path == NULL && b->path == NULL) ||
         (a->path && b->path && strcmp(a->path, b->path) == 0);
}

static void check_canonical(const mori_fi_schedule *s) {
  mori__fuzz_text t = {NULL, 0, 0};
  PUT(&t, "%s", ""); /* an empty schedule is "", not NULL */
  for (size_t i = 0; i < s->n; i++) {
    if (i) PUT(&t, ";");
    put_rule(&t, &s->rules[i]);
  }
  mori_fi_schedule again;
  char err[256];
  int rc = mori_fi_parse(t.s, t.n, &again, err, sizeof err);
  MORI_FUZZ_CHECK(rc == 0, "the canonical spelling \"%s\" does not parse: %s", t.s, err);
  MORI_FUZZ_CHECK(again.n == s->n, "\"%s\": %zu rules, not %zu", t.s, again.n, s->n);
  for (size_t i = 0; i < s->n; i++)
    MORI_FUZZ_CHECK(same_rule(&s->rules[i], &again.rules[i]),
                    "rule %zu \"%s\" reads back differently from \"%s\"", i, s->rules[i].text, t.s);
  mori_fi_schedule_free(&again);
  free(t.s);
}

/* ---- the target ---- */

static void check_error(const mori_fi_schedule *s, const char *err, size_t len) {
  size_t column = 0;
  int used = 0;
  MORI_FUZZ_CHECK(s->rules == NULL && s->n == 0, "failed parse left %zu rules", s->n);
  MORI_FUZZ_CHECK(sscanf(err, "MORI_FI: column %zu: %n", &column, &used) == 1 && used > 0,
                  "error message \"%s\" does not name a column", err);
  MORI_FUZZ_CHECK(column >= 1 && column <= len + 1, "error names column %zu of a %zu-byte spec",
                  column, len);
  MORI_FUZZ_CHECK(err[used] != '\0', "error message \"%s\" says nothing", err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mori_fi_schedule s;
  char err[512];
  int rc = mori_fi_parse((const char *)data, size, &s, err, sizeof err);
  MORI_FUZZ_CHECK(rc == 0 || rc == -1, "mori_fi_parse returned %d", rc);
  if (rc != 0) {
    check_error(&s, err, size);
    return 0;
  }
  for (size_t i = 0; i < s.n; i++) check_rule(&s.rules[i], size);
  check_canonical(&s);
  mori_fi_schedule_free(&s);
  return 0;
}
