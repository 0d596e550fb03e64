/*
 * test_fi_schedule.c - specifications of the MORI_FI schedule language
 * (mori_fi_parse) and of the tables it shares with the trace format: every
 * rule form of docs/fault-injection.md parses to what it says, every
 * defect is rejected with the column where it starts, and the HIP error
 * names agree with the shim's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "fi_internal.h"
#include "mori/fi.h"

static mori_fi_schedule parse_ok(const char *spec) {
  mori_fi_schedule s;
  char err[256] = "";
  int rc = mori_fi_parse(spec, strlen(spec), &s, err, sizeof err);
  if (rc != 0) print_error("'%s': %s\n", spec, err);
  assert_int_equal(rc, 0);
  return s;
}

/* The message for a malformed spec, which must be rejected. */
static const char *parse_err(const char *spec) {
  static char err[256];
  mori_fi_schedule s;
  int rc = mori_fi_parse(spec, strlen(spec), &s, err, sizeof err);
  assert_int_equal(rc, -1);
  assert_null(s.rules);
  assert_int_equal(s.n, 0);
  return err;
}

static void nth_call_of_a_function_fails_once(void **state) {
  (void)state;
  mori_fi_schedule s = parse_ok("hipMemMap#3=hipErrorOutOfMemory");
  assert_int_equal(s.n, 1);
  const mori_fi_rule *r = &s.rules[0];
  assert_int_equal(r->rank, -1);
  assert_int_equal(r->target, MORI_FI_T_CALL);
  assert_int_equal(r->call, MORI_FI_CALL_hipMemMap);
  assert_int_equal(r->nth, 3);
  assert_int_equal(r->persist, 0);
  assert_int_equal(r->action, MORI_FI_A_FAIL);
  assert_int_equal(r->error, hipErrorOutOfMemory);
  assert_string_equal(r->text, "hipMemMap#3=hipErrorOutOfMemory");
  assert_int_equal(r->column, 1);
  mori_fi_schedule_free(&s);
}

static void hash_star_persists_from_the_first_call(void **state) {
  (void)state;
  mori_fi_schedule s = parse_ok("hipMemUnmap#*=persist:hipErrorUnknown");
  assert_int_equal(s.rules[0].nth, 1);
  assert_int_equal(s.rules[0].persist, 1);
  assert_int_equal(s.rules[0].error, hipErrorUnknown);
  mori_fi_schedule_free(&s);
  s = parse_ok("hipMemUnmap#*=hipErrorUnknown"); /* '*' alone already means every call */
  assert_int_equal(s.rules[0].persist, 1);
  mori_fi_schedule_free(&s);
}

static void global_index_rule_takes_persist_and_numbers(void **state) {
  (void)state;
  mori_fi_schedule s = parse_ok("call#17=hipErrorInvalidValue; call#5=persist:999");
  assert_int_equal(s.n, 2);
  assert_int_equal(s.rules[0].target, MORI_FI_T_GLOBAL);
  assert_int_equal(s.rules[0].nth, 17);
  assert_int_equal(s.rules[0].error, hipErrorInvalidValue);
  assert_int_equal(s.rules[1].persist, 1);
  assert_int_equal(s.rules[1].error, 999);
  assert_int_equal(s.rules[1].column, 31);
  mori_fi_schedule_free(&s);
}

static void rank_prefix_limits_a_rule_to_one_rank(void **state) {
  (void)state;
  mori_fi_schedule s =
      parse_ok("rank=2 hipMemImportFromShareableHandle#1=kill;rank=0\tsend=drop#2");
  assert_int_equal(s.rules[0].rank, 2);
  assert_int_equal(s.rules[0].action, MORI_FI_A_KILL);
  assert_int_equal(s.rules[0].call, MORI_FI_CALL_hipMemImportFromShareableHandle);
  assert_int_equal(s.rules[1].rank, 0);
  assert_int_equal(s.rules[1].target, MORI_FI_T_SEND);
  assert_int_equal(s.rules[1].action, MORI_FI_A_DROP);
  assert_int_equal(s.rules[1].nth, 2);
  mori_fi_schedule_free(&s);
}

/* life=N after rank=: the rule fires in that life of the rank alone. */
static void life_prefix_names_the_life_a_rule_fires_in(void **state) {
  (void)state;
  mori_fi_schedule s = parse_ok("rank=2 life=1 hipMemImportFromShareableHandle#1=kill;"
                                "life=0 hipMemMap#2=hipErrorUnknown;hipMemMap#3=kill");
  assert_int_equal(s.rules[0].rank, 2);
  assert_int_equal(s.rules[0].life, 1);
  assert_int_equal(s.rules[0].call, MORI_FI_CALL_hipMemImportFromShareableHandle);
  assert_int_equal(s.rules[1].rank, -1);
  assert_int_equal(s.rules[1].life, 0);
  assert_int_equal(s.rules[2].life, -1);
  mori_fi_schedule_free(&s);
}

static void mori_prefixed_names_are_the_same_function(void **state) {
  (void)state;
  mori_fi_schedule s = parse_ok("mori_hipMemCreate#1=hipErrorOutOfMemory");
  assert_int_equal(s.rules[0].call, MORI_FI_CALL_hipMemCreate);
  mori_fi_schedule_free(&s);
}

static void datagram_rules_parse_with_their_defaults(void **state) {
  (void)state;
  mori_fi_schedule s = parse_ok("recv=reorder:seed=7;recv=order:2,0,1;recv=duplicate#1;"
                                "recv=duplicate;send=truncate#1;send=forge");
  assert_int_equal(s.n, 6);
  assert_int_equal(s.rules[0].action, MORI_FI_A_REORDER);
  assert_int_equal(s.rules[0].seed, 7);
  assert_int_equal(s.rules[1].action, MORI_FI_A_ORDER);
  assert_int_equal(s.rules[1].norder, 3);
  assert_int_equal(s.rules[1].order[0], 2);
  assert_int_equal(s.rules[1].order[2], 1);
  assert_int_equal(s.rules[2].action, MORI_FI_A_DUPLICATE);
  assert_int_equal(s.rules[3].nth, 1); /* no #N: the first */
  assert_int_equal(s.rules[4].action, MORI_FI_A_TRUNCATE);
  assert_int_equal(s.rules[5].action, MORI_FI_A_FORGE);
  assert_int_equal(s.rules[5].nth, 1);
  mori_fi_schedule_free(&s);
}

static void count_and_record_take_the_rest_of_the_rule_as_a_path(void **state) {
  (void)state;
  mori_fi_schedule s = parse_ok("count=/tmp/with space/c  ;record=t.trace");
  assert_int_equal(s.rules[0].target, MORI_FI_T_COUNT);
  assert_string_equal(s.rules[0].path, "/tmp/with space/c");
  assert_int_equal(s.rules[1].target, MORI_FI_T_RECORD);
  assert_string_equal(s.rules[1].path, "t.trace");
  mori_fi_schedule_free(&s);
}

static void empty_rules_and_blanks_are_no_rules(void **state) {
  (void)state;
  mori_fi_schedule s = parse_ok("");
  assert_int_equal(s.n, 0);
  s = parse_ok(" ;; \t;");
  assert_int_equal(s.n, 0);
  mori_fi_schedule_free(&s);
}

static void unknown_error_name_is_rejected_naming_its_column(void **state) {
  (void)state;
  assert_string_equal(parse_err("hipFree#10=hipErrorBogus"),
                      "MORI_FI: column 12: unknown error name 'hipErrorBogus'");
}

/* Each defect and the column it must be reported at. */
static void every_defect_names_its_column(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    int column;
    const char *says;
  } bad[] = {
      {"hipMemMapp#1=hipErrorUnknown", 1, "unknown function 'hipMemMapp'"},
      {"hipMemMap#0=hipErrorUnknown", 11, "count from 1"},
      {"hipMemMap#x=hipErrorUnknown", 11, "a call number"},
      {"hipMemMap#1hipErrorUnknown", 12, "expected '='"},
      {"hipMemMap#1=hipSuccess", 13, "not an error"},
      {"hipMemMap#1=0", 13, "not an error"},
      {"hipMemMap#1=persist:kill", 21, "kill cannot persist"},
      {"hipMemMap=hipErrorUnknown", 1, "unknown setting 'hipMemMap'"},
      {"mori_sendmsg#1=hipErrorUnknown", 16, "unknown errno name 'hipErrorUnknown'"},
      {"hipMemMap#1=EIO", 13, "unknown error name 'EIO'"},
      {"openat#1=0", 10, "not an errno"},
      {"malloc#1=4096", 10, "larger than"},
      {"close#1=", 9, "an errno name"},
      {"rank=1hipMemMap#1=kill", 7, "expected a space"},
      {"rank=x hipMemMap#1=kill", 6, "a rank"},
      {"rank=4096 call#1=kill", 6, "larger than"},
      {"life=1hipMemMap#1=kill", 7, "expected a space"},
      {"rank=1 life=x hipMemMap#1=kill", 13, "a life"},
      {"call#1=kill x", 13, "expected ';'"},
      {"recv=order:1,2,1", 16, "appears twice"},
      {"recv=order:", 12, "a sender rank"},
      {"recv=shuffle", 6, "expected reorder"},
      {"recv=reorder:seed=", 19, "a seed"},
      {"send=lose#1", 6, "expected drop"},
      {"send=drop#0", 11, "count from 1"},
      {"count=   ;call#1=kill", 7, "expected a path"},
      {"call#99999999999=kill", 6, "larger than"},
      {"%", 1, "expected FUNCTION#N="},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char want[64];
    snprintf(want, sizeof want, "MORI_FI: column %d: ", bad[i].column);
    const char *err = parse_err(bad[i].spec);
    if (strncmp(err, want, strlen(want)) != 0 || strstr(err, bad[i].says) == NULL)
      fail_msg("'%s' gave \"%s\"; want \"%s...%s\"", bad[i].spec, err, want, bad[i].says);
  }
}

/* Random and mutated inputs never crash the parser, and every outcome is
 * well-formed: rules that make sense, or an error with a column in range.
 * (The fuzz harness does this at depth; this keeps a fixed sample in CI.) */
static void any_bytes_parse_or_fail_with_a_column(void **state) {
  (void)state;
  static const char *const seeds[] = {"rank=3 hipMemMap#3=persist:hipErrorOutOfMemory",
                                      "recv=order:4,1,0;send=forge#2;count=/x",
                                      "call#17=kill; recv=reorder:seed=99"};
  static const char alphabet[] = "hipMemMap#=*;:,0123456789 rankcllsedforgpist\t\x01\xff";
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int iter = 0; iter < 20000; iter++) {
    char buf[96];
    const char *seed = seeds[iter % 3];
    size_t n = strlen(seed);
    memcpy(buf, seed, n);
    for (int m = 0; m < 1 + iter % 4; m++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      size_t at = (size_t)(x % (n + 1));
      if (x >> 60 & 1 && n < sizeof buf - 1) { /* insert */
        memmove(buf + at + 1, buf + at, n - at);
        buf[at] = alphabet[(x >> 32) % (sizeof alphabet - 1)];
        n++;
      } else if (at < n) { /* replace */
        buf[at] = alphabet[(x >> 32) % (sizeof alphabet - 1)];
      }
    }
    mori_fi_schedule s;
    char err[256];
    if (mori_fi_parse(buf, n, &s, err, sizeof err) == 0) {
      for (size_t i = 0; i < s.n; i++) {
        const mori_fi_rule *r = &s.rules[i];
        assert_true(r->column >= 1 && r->column <= n);
        assert_true(r->action == MORI_FI_A_PATH ? r->path != NULL : r->nth >= 1);
        assert_true(r->target != MORI_FI_T_CALL ||
                    (r->call >= 0 && r->call < MORI_FI_CALL__COUNT));
      }
      mori_fi_schedule_free(&s);
    } else {
      size_t column = 0;
      assert_int_equal(sscanf(err, "MORI_FI: column %zu:", &column), 1);
      assert_true(column >= 1 && column <= n + 1);
    }
  }
}

static void error_names_agree_with_the_shims_table(void **state) {
  (void)state;
  for (int code = 0; code < 2000; code++) {
    const char *ours = mori_fi_error_name(code), *shim = mori_hipGetErrorName((hipError_t)code);
    if (ours == NULL) {
      /* the shim spells codes it has no name for as hipError(<n>) */
      char want[32];
      snprintf(want, sizeof want, "hipError(%d)", code);
      assert_string_equal(shim, want);
      continue;
    }
    assert_string_equal(ours, shim);
    int back = -1;
    assert_int_equal(mori_fi_error_find(ours, strlen(ours), &back), 0);
    assert_int_equal(back, code);
  }
}

static void call_table_names_every_call_once(void **state) {
  (void)state;
  for (int c = 0; c < MORI_FI_CALL__COUNT; c++) {
    const char *name = mori_fi_call_name(c);
    assert_non_null(name);
    assert_int_equal(mori_fi_call_find(name, strlen(name)), c);
    char prefixed[96];
    snprintf(prefixed, sizeof prefixed, "mori_%s", name);
    /* every call also goes by the name the seam exports */
    assert_int_equal(mori_fi_call_find(prefixed, strlen(prefixed)), c);
    assert_non_null(mori_fi_call_spec(c));
    assert_true(mori_fi_call_is_hip(c) != mori_fi_call_is_os(c));
  }
  assert_null(mori_fi_call_name(MORI_FI_CALL__COUNT));
  assert_int_equal(mori_fi_call_find("hipMemMa", 8), -1);
  assert_int_equal(mori_fi_call_find("mori_", 5), -1);
  /* the calls whose registry column releases, and no other */
  for (int c = 0; c < MORI_FI_CALL__COUNT; c++)
    assert_int_equal(mori_fi_call_releases(c),
                     c == MORI_FI_CALL_hipMemRelease || c == MORI_FI_CALL_hipMemAddressFree ||
                         c == MORI_FI_CALL_hipMemUnmap || c == MORI_FI_CALL_hipFree ||
                         c == MORI_FI_CALL_hipHostFree);
}

/* Every OS row of the seam (hip_shim.h) is a call the schedule can fail,
 * under the name the core's own code uses. */
static void every_os_call_of_the_seam_is_an_injection_site(void **state) {
  (void)state;
#define CHECK_ROW(ret, name, params, args)                                            \
  do {                                                                                \
    int c = mori_fi_call_find(#name, strlen(#name));                                  \
    assert_true(mori_fi_call_is_os(c));                                               \
    mori_fi_schedule s = parse_ok(#name "#2=persist:ENOMEM");                         \
    assert_int_equal(s.rules[0].call, c);                                             \
    mori_fi_schedule_free(&s);                                                        \
  } while (0);
  MORI_SHIM_OS_CALLS(CHECK_ROW)
#undef CHECK_ROW
  assert_true(mori_fi_call_is_os(MORI_FI_CALL_close));
}

static void os_call_rules_take_errno_names_and_numbers(void **state) {
  (void)state;
  mori_fi_schedule s = parse_ok("openat#3=EIO; rank=1 mori_malloc#*=ENOMEM;"
                                "sendmsg#2=persist:EAGAIN;close#1=4;write#1=kill");
  assert_int_equal(s.n, 5);
  assert_int_equal(s.rules[0].target, MORI_FI_T_CALL);
  assert_int_equal(s.rules[0].call, MORI_FI_CALL_openat);
  assert_int_equal(s.rules[0].error, EIO);
  assert_int_equal(s.rules[1].call, MORI_FI_CALL_malloc);
  assert_int_equal(s.rules[1].persist, 1);
  assert_int_equal(s.rules[1].error, ENOMEM);
  assert_int_equal(s.rules[2].error, EAGAIN);
  assert_int_equal(s.rules[2].nth, 2);
  assert_int_equal(s.rules[3].error, EINTR);
  assert_int_equal(s.rules[4].action, MORI_FI_A_KILL);
  mori_fi_schedule_free(&s);
}

/* Each call fails only with what it can really return: the realistic HIP
 * errors for a runtime call, errno values for an OS call; every row is
 * filled (a new seam call must say how it fails). */
static void every_call_has_its_own_error_set(void **state) {
  (void)state;
  for (int c = 0; c < MORI_FI_CALL__COUNT; c++) {
    const int *e;
    int n = mori_fi_call_errors(c, &e);
    if (!mori_fi__call_errors_filled(c))
      fail_msg("no errors listed for %s: add what it can return (a runtime call: the errors "
               "column of its row, hip_shim.h; an OS call: faultinject/calls.c)",
               mori_fi_call_name(c));
    assert_true(n >= 1);
    for (int i = 0; i < n; i++) {
      assert_int_not_equal(e[i], 0);
      if (mori_fi_call_is_hip(c)) assert_non_null(mori_fi_error_name(e[i]));
      else assert_non_null(mori_fi_errno_name(e[i]));
    }
  }
  /* the classes the sweeps rely on */
  static const struct {
    int call, error;
  } must[] = {{MORI_FI_CALL_hipMemCreate, hipErrorOutOfMemory},
              {MORI_FI_CALL_hipMemMap, hipErrorMapFailed},
              {MORI_FI_CALL_hipMemSetAccess, hipErrorInvalidValue},
              {MORI_FI_CALL_hipMemImportFromShareableHandle, hipErrorNotSupported},
              {MORI_FI_CALL_malloc, ENOMEM}, {MORI_FI_CALL_calloc, ENOMEM},
              {MORI_FI_CALL_recvmsg, EINTR}, {MORI_FI_CALL_sendmsg, EAGAIN},
              {MORI_FI_CALL_write, ENOSPC}, {MORI_FI_CALL_openat, EMFILE},
              {MORI_FI_CALL_sendmsg, EPIPE}, {MORI_FI_CALL_read, EIO}};
  for (size_t i = 0; i < sizeof must / sizeof must[0]; i++) {
    const int *e;
    int n = mori_fi_call_errors(must[i].call, &e), found = 0;
    for (int k = 0; k < n; k++) found |= e[k] == must[i].error;
    if (!found) fail_msg("%s does not fail with %d", mori_fi_call_name(must[i].call), must[i].error);
  }
}

static void errno_names_round_trip(void **state) {
  (void)state;
  static const int values[] = {EINTR, EAGAIN, ENOMEM, EMFILE, ENOSPC, EIO, EPIPE};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    const char *name = mori_fi_errno_name(values[i]);
    assert_non_null(name);
    assert_string_equal(name, strerrorname_np(values[i])); /* glibc's own spelling */
    int back = 0;
    assert_int_equal(mori_fi_errno_find(name, strlen(name), &back), 0);
    assert_int_equal(back, values[i]);
  }
  assert_true(mori_fi_errno_transient(EINTR) && mori_fi_errno_transient(EAGAIN));
  assert_false(mori_fi_errno_transient(EIO));
  /* what the core must retry: the transient errnos of any OS call, and a
   * datagram socket's full queue */
  assert_true(mori_fi_call_retries(MORI_FI_CALL_openat, EINTR));
  assert_true(mori_fi_call_retries(MORI_FI_CALL_sendmsg, ENOBUFS));
  assert_false(mori_fi_call_retries(MORI_FI_CALL_setsockopt, ENOBUFS));
  assert_false(mori_fi_call_retries(MORI_FI_CALL_hipMemMap, EINTR));
  /* pthread_create's EAGAIN is a limit reached, which a retry meets again */
  assert_false(mori_fi_call_retries(MORI_FI_CALL_thread_create, EAGAIN));
  assert_true(mori_fi_call_retries(MORI_FI_CALL_getrandom, EINTR));
  char buf[32];
  assert_string_equal(mori_fi_failure_name(MORI_FI_CALL_openat, EIO, buf, sizeof buf), "EIO");
  assert_string_equal(mori_fi_failure_name(MORI_FI_CALL_hipMemMap, 2, buf, sizeof buf),
                      "hipErrorOutOfMemory");
  assert_string_equal(mori_fi_failure_name(MORI_FI_CALL_openat, 4000, buf, sizeof buf),
                      "errno 4000");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(nth_call_of_a_function_fails_once),
      cmocka_unit_test(hash_star_persists_from_the_first_call),
      cmocka_unit_test(global_index_rule_takes_persist_and_numbers),
      cmocka_unit_test(rank_prefix_limits_a_rule_to_one_rank),
      cmocka_unit_test(life_prefix_names_the_life_a_rule_fires_in),
      cmocka_unit_test(mori_prefixed_names_are_the_same_function),
      cmocka_unit_test(datagram_rules_parse_with_their_defaults),
      cmocka_unit_test(count_and_record_take_the_rest_of_the_rule_as_a_path),
      cmocka_unit_test(empty_rules_and_blanks_are_no_rules),
      cmocka_unit_test(unknown_error_name_is_rejected_naming_its_column),
      cmocka_unit_test(every_defect_names_its_column),
      cmocka_unit_test(any_bytes_parse_or_fail_with_a_column),
      cmocka_unit_test(error_names_agree_with_the_shims_table),
      cmocka_unit_test(call_table_names_every_call_once),
      cmocka_unit_test(every_os_call_of_the_seam_is_an_injection_site),
      cmocka_unit_test(os_call_rules_take_errno_names_and_numbers),
      cmocka_unit_test(every_call_has_its_own_error_set),
      cmocka_unit_test(errno_names_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
