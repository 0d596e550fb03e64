/*
 * test_fi_trace.c - specifications of the trace format (mori_trace_parse):
 * what a recorded line means, symbols instead of addresses, and defects
 * rejected with their line and column.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mori/fi.h"

static const char example[] =
    "# mori-fi trace v1\n"
    "# rank 2\n"
    "1 hipSetDevice device=2 rc=hipSuccess\n"
    "2 hipMemCreate out=h1 size=0x200000 prop=pinned/posix_fd/2 flags=0x0 rc=hipSuccess\n"
    "3 hipMemAddressReserve out=r1 size=0x400000 align=0x200000 hint=0 flags=0x0 rc=hipSuccess\n"
    "4 hipMemMap addr=r1+0x200000 size=0x200000 offset=0x0 handle=h1 flags=0x0 rc=hipSuccess\n"
    "5 hipMemSetAccess addr=r1+0x200000 size=0x200000 desc=rw/2 count=0x1 rc=hipSuccess\n"
    "6 hipMemExportToShareableHandle out=fd1 handle=h1 type=posix_fd flags=0x0 rc=hipSuccess\n"
    "- sendmsg fds=fd1 bytes=0x30 rc=48\n"
    "- recvmsg fds=fd2 bytes=0x30 rc=48\n"
    "7 hipMemImportFromShareableHandle out=h2 os=fd2 type=posix_fd rc=hipSuccess\n"
    "8 hipMemcpy dst=d1+0x10 src=host size=0x20 kind=0x1 rc=hipSuccess\n"
    "9 hipMemUnmap addr=r1 size=0x400000 rc=hipErrorUnmapFailed injected\n"
    "10 hipStreamWaitValue32 stream=s1 addr=r1+0x2400 value=0x1 flags=0x1 mask=0xffffffff "
    "rc=hipSuccess\n"
    "- close fd=other rc=0\n"
    "11 hipGetDevice rc=hipSuccess\n";

static mori_fi_trace parse_ok(const char *text) {
  mori_fi_trace t;
  char err[256] = "";
  int rc = mori_trace_parse(text, strlen(text), &t, err, sizeof err);
  if (rc != 0) print_error("%s\n", err);
  assert_int_equal(rc, 0);
  return t;
}

static void recorded_lines_parse_into_calls_and_symbols(void **state) {
  (void)state;
  mori_fi_trace t = parse_ok(example);
  assert_int_equal(t.rank, 2);
  assert_int_equal(t.n, 14);
  const mori_fi_trace_rec *r = &t.recs[1];
  assert_int_equal(r->index, 2);
  assert_int_equal(r->call, MORI_FI_CALL_hipMemCreate);
  assert_int_equal(r->nargs, 4);
  assert_int_equal(r->args[0].kind, MORI_FI_V_SYMBOL);
  assert_int_equal(r->args[0].sym, 'h');
  assert_int_equal(r->args[0].id, 1);
  assert_int_equal(r->args[1].number, 0x200000);
  assert_int_equal(r->args[2].kind, MORI_FI_V_PROP);
  assert_int_equal(r->args[2].sub[0], hipMemAllocationTypePinned);
  assert_int_equal(r->args[2].sub[1], hipMemHandleTypePosixFileDescriptor);
  assert_int_equal(r->args[2].sub[2], 2);
  assert_int_equal(r->rc, hipSuccess);
  r = &t.recs[3]; /* the map */
  assert_int_equal(r->args[0].sym, 'r');
  assert_int_equal(r->args[0].offset, 0x200000);
  assert_int_equal(r->args[3].sym, 'h');
  r = &t.recs[4];
  assert_int_equal(r->args[2].kind, MORI_FI_V_DESC);
  assert_int_equal(r->args[2].sub[0], hipMemAccessFlagsProtReadWrite);
  r = &t.recs[6];
  assert_int_equal(r->index, -1);
  assert_int_equal(r->call, MORI_FI_CALL_sendmsg);
  assert_int_equal(r->args[0].kind, MORI_FI_V_FDS);
  assert_int_equal(r->args[0].nfds, 1);
  assert_int_equal(r->args[0].fds[0], 1);
  assert_int_equal(r->rc, 48);
  r = &t.recs[9];
  assert_int_equal(r->args[0].sym, 'd');
  assert_int_equal(r->args[1].kind, MORI_FI_V_HOST);
  r = &t.recs[10];
  assert_int_equal(r->rc, hipErrorUnmapFailed);
  assert_int_equal(r->injected, 1);
  assert_int_equal(t.recs[12].args[0].kind, MORI_FI_V_OTHER);
  assert_int_equal(t.recs[13].nargs, 0); /* hipGetDevice's output is not recorded */
  assert_int_equal(t.recs[13].line, 16);
  mori_trace_free(&t);
}

static void every_call_layout_is_within_a_record(void **state) {
  (void)state;
  for (int c = 0; c < MORI_FI_CALL__COUNT; c++) {
    const char *spec = mori_fi_call_spec(c);
    int n = 0;
    for (const char *p = spec; (p = strchr(p, ':')) != NULL; p++) {
      assert_non_null(strchr("HhRMazuiZPDtXOsFf-", p[1]));
      n++;
    }
    assert_true(n <= MORI_FI_TRACE_ARGS);
  }
}

static void defects_are_rejected_with_line_and_column(void **state) {
  (void)state;
  static const struct {
    const char *text, *want;
  } bad[] = {
      {"1 hipMemMapp rc=hipSuccess\n", "line 1 column 3: unknown call 'hipMemMapp'"},
      {"# c\n1 hipSetDevice dev=1 rc=hipSuccess\n", "line 2 column 16: expected device="},
      {"1 hipSetDevice device=x rc=hipSuccess\n", "line 1 column 23: device: expected an integer"},
      {"1 hipSetDevice device=1\n", "line 1 column 24: expected rc="},
      {"1 hipSetDevice device=1 rc=hipErrorBogus\n", "line 1 column 28: rc: expected"},
      {"1 hipSetDevice device=1 rc=0 extra\n", "line 1 column 30: unexpected 'extra'"},
      {"- hipSetDevice device=1 rc=0\n", "line 1 column 3: hipSetDevice is a runtime call"},
      {"3 close fd=other rc=0\n", "line 1 column 3: close is not a runtime call"},
      {"x hipDeviceSynchronize rc=0\n", "line 1 column 1: expected a call index"},
      {"1 hipMemMap addr=q1 size=0x200000 offset=0x0 handle=h1 flags=0x0 rc=0\n",
       "line 1 column 18: addr: expected an address"},
      {"1 hipMemRelease handle=r1 rc=0\n", "line 1 column 24: handle: expected a handle"},
      {"1 mori_hipMemRelease handle=h1 rc=0\n", "line 1 column 3: unknown call"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    mori_fi_trace t;
    char err[256] = "";
    assert_int_equal(mori_trace_parse(bad[i].text, strlen(bad[i].text), &t, err, sizeof err), -1);
    assert_null(t.recs);
    if (strncmp(err, bad[i].want, strlen(bad[i].want)) != 0)
      fail_msg("%s gave \"%s\", want \"%s...\"", bad[i].text, err, bad[i].want);
  }
}

/* Cutting a valid trace anywhere yields a trace or an error that names a
 * line and column inside the text, never a crash. */
static void every_prefix_parses_or_fails_in_range(void **state) {
  (void)state;
  size_t len = strlen(example);
  for (size_t n = 0; n <= len; n++) {
    mori_fi_trace t;
    char err[256];
    if (mori_trace_parse(example, n, &t, err, sizeof err) == 0) {
      mori_trace_free(&t);
      continue;
    }
    long line = 0;
    size_t column = 0;
    assert_int_equal(sscanf(err, "line %ld column %zu:", &line, &column), 2);
    assert_true(line >= 1 && line <= 17 && column >= 1 && column <= n + 1);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(recorded_lines_parse_into_calls_and_symbols),
      cmocka_unit_test(every_call_layout_is_within_a_record),
      cmocka_unit_test(defects_are_rejected_with_line_and_column),
      cmocka_unit_test(every_prefix_parses_or_fails_in_range),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
