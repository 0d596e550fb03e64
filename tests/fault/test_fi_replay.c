/*
 * test_fi_replay.c - record and replay: a recorded run of the core replays
 * clean under every sim profile and quirk set; a trace that breaks a rule
 * is stopped at that call with the sim's rule; injected failures and peers'
 * handles replay as documented; `mori-symm replay` prints one verdict per
 * profile; the profile and quirk lists agree with the sim's own.  Run under
 * LD_PRELOAD=libmori_faultinject.so (recording needs it).
 */
#include "fault_harness.h"
#include "read_all.h"

#include <sys/wait.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static mori_fi_trace parse(const char *text) {
  mori_fi_trace t;
  char err[256];
  if (mori_trace_parse(text, strlen(text), &t, err, sizeof err) != 0) fail_msg("%s", err);
  return t;
}

static mori_fi_replay_result replay(const char *text, const char *arch, const char *quirks) {
  mori_fi_trace t = parse(text);
  mori_fi_replay_result res;
  assert_int_equal(mori_fi_replay(&t, arch, quirks, &res), 0);
  mori_trace_free(&t);
  return res;
}

/* What the sim says about a setting it does not know: the list after
 * "valid:" must be exactly the names the replay walks. */
static void sim_lists_the_same_names(const char *var, const char *(*name)(int)) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  pid_t pid = fork();
  if (pid == 0) {
    setenv(var, "no-such-name", 1);
    const char *m = mori_shim_select("sim") == 0 ? "accepted" : mori_shim_message();
    ssize_t w = write(p[1], m, strlen(m));
    _exit(w < 0);
  }
  close(p[1]);
  char buf[1024];
  test_read_fd(p[0], buf, sizeof buf);
  close(p[0]);
  waitpid(pid, NULL, 0);
  const char *valid = strstr(buf, "valid:");
  if (valid == NULL) fail_msg("%s=no-such-name: %s", var, buf);
  int listed = 0, known = 0;
  for (const char *q = valid + 6; *q;) {
    while (*q == ' ' || *q == ',') q++;
    size_t len = strcspn(q, " ,)");
    if (len == 0) break;
    int found = len == 3 && strncmp(q, "all", 3) == 0;
    for (int i = 0; name(i) != NULL && !found; i++)
      found = strlen(name(i)) == len && strncmp(name(i), q, len) == 0;
    if (!found) fail_msg("the sim knows '%.*s', the replay's list does not", (int)len, q);
    listed++;
    q += len;
  }
  while (name(known) != NULL) known++;
  assert_true(listed >= known); /* "all" may be listed on top */
}

static void profile_and_quirk_lists_agree_with_the_sim(void **s) {
  (void)s;
  sim_lists_the_same_names("MORI_SIM_ARCH", mori_sim_profile_name);
  sim_lists_the_same_names("MORI_SIM_QUIRKS", mori_sim_quirk_name);
  const char *a;
  for (int i = 0; (a = mori_sim_profile_name(i)) != NULL; i++) assert_true(replay("", a, "all").ok);
}

/* ---- a recorded run ---- */

static int lifecycle_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds() - mori_fi_own_fds(); /* its trace file may be open already */
  void *base = NULL;
  mori_window *w = NULL;
  if (mori_shim_select("sim") != 0) return 1;
  int rc = mori_symm_alloc(3 * MiB, ctx->rank, &base);
  if (rc == 0) rc = mori_symm_rendezvous((char *)base + 4096, "g", ctx->rank, ctx->world, ctx->store,
                                         &w, NULL);
  if (rc == 0) rc = mori_window_put_signal(w, (ctx->rank + 1) % ctx->world, 1, NULL, 0);
  if (rc == 0) rc = mori_window_wait_signal(w, (ctx->rank + ctx->world - 1) % ctx->world, 1, NULL, 0);
  if (rc == 0) rc = mori_window_barrier(w, 0, NULL, 0);
  if (rc == 0) rc = mori_symm_free(base);
  return fh_report(msg, msglen, fds0, rc, "");
}

static void recorded_core_run_replays_clean_under_every_profile_and_quirk(void **s) {
  (void)s;
  char dir[] = "/tmp/mori-fi-replay-XXXXXX", spec[128], path[160];
  assert_non_null(mkdtemp(dir));
  snprintf(spec, sizeof spec, "record=%s/t", dir);
  mori_rank_result res[4];
  fh_run(spec, 4, lifecycle_rank, NULL, res, -1);
  fh_assert_clean(spec, res, 4, -1);
  for (int r = 0; r < 4; r++) {
    size_t len;
    snprintf(path, sizeof path, "%s/t.%d", dir, r);
    char *text = test_read_file(path, &len);
    assert_non_null(text);
    const char *a;
    for (int i = 0; (a = mori_sim_profile_name(i)) != NULL; i++) {
      int nq = 0;
      while (mori_sim_quirk_name(nq) != NULL) nq++;
      for (int q = -1; q <= nq; q++) { /* no quirk, each alone, all of them */
        const char *set = q < 0 ? "" : q < nq ? mori_sim_quirk_name(q) : "all";
        mori_fi_replay_result v = replay(text, a, set);
        if (!v.ok || v.live_at_end != 0)
          fail_msg("rank %d under %s quirks=%s: call %ld: %s (live %ld)", r, a, set,
                   v.violation_at, v.message, v.live_at_end);
      }
    }
    free(text);
    unlink(path);
  }
  rmdir(dir);
}

/* Traces recorded with the cuda shim on a host with two H200s (2 ranks,
 * the three sweep scenarios, LD_PRELOAD=libmori_faultinject.so
 * MORI_FI=record=...): nothing in them may tie them to that backend. */
static void traces_recorded_on_h200_with_the_cuda_shim_replay_clean(void **s) {
  (void)s;
  static const char *const names[] = {"basic", "two-groups", "interior"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    for (int r = 0; r < 2; r++) {
      char path[512];
      size_t len;
      snprintf(path, sizeof path, "%s/h200-cuda-%s.%d", MORI_FI_TRACES, names[i], r);
      char *text = test_read_file(path, &len);
      if (text == NULL) fail_msg("cannot read %s", path);
      assert_non_null(strstr(text, " hipMemImportFromShareableHandle out=h"));
      const char *a;
      for (int k = 0; (a = mori_sim_profile_name(k)) != NULL; k++) {
        mori_fi_replay_result v = replay(text, a, "all");
        if (!v.ok || v.live_at_end != 0)
          fail_msg("%s under %s,all: call %ld: %s (live %ld)", path, a, v.violation_at,
                   v.message, v.live_at_end);
      }
      free(text);
    }
}

/* ---- verdicts on hand-written traces ---- */

static const char map_twice[] =
    "1 hipMemCreate out=h1 size=0x200000 prop=pinned/posix_fd/0 flags=0x0 rc=hipSuccess\n"
    "2 hipMemAddressReserve out=r1 size=0x400000 align=0x0 hint=0 flags=0x0 rc=hipSuccess\n"
    "3 hipMemMap addr=r1 size=0x200000 offset=0x0 handle=h1 flags=0x0 rc=hipSuccess\n"
    "4 hipMemMap addr=r1+0x100000 size=0x200000 offset=0x0 handle=h1 flags=0x0 rc=hipSuccess\n";

static void first_violation_is_reported_with_its_index_and_the_sims_rule(void **s) {
  (void)s;
  mori_fi_replay_result v = replay(map_twice, "gfx950", "");
  assert_false(v.ok);
  assert_int_equal(v.violation_at, 4);
  assert_int_equal(v.violation_line, 4);
  assert_int_equal(v.violation_call, MORI_FI_CALL_hipMemMap);
  assert_non_null(strstr(v.message, "hipMemMap: hipErrorInvalidValue (1): hipMemMap: contract: "
                                    "address must be aligned to the granularity"));
}

static void calls_that_failed_in_the_trace_may_fail_again(void **s) {
  (void)s;
  char text[1024];
  snprintf(text, sizeof text, "%s", map_twice);
  memcpy(strrchr(text, '=') + 1, "hipErrorInvalidValue\n", 22); /* the bad map failed */
  mori_fi_replay_result v = replay(text, "gfx950", "");
  assert_true(v.ok);
  assert_int_equal(v.calls, 4);
  assert_int_equal(v.live_at_end, 3); /* the trace never released what it made */
}

static void injected_failures_are_not_replayed(void **s) {
  (void)s;
  static const char text[] =
      "1 hipMemAddressReserve out=r1 size=0x200000 align=0x0 hint=0 flags=0x0 rc=hipSuccess\n"
      "2 hipMemAddressFree addr=r1 size=0x200000 rc=hipErrorUnknown injected\n"
      "3 hipMemAddressFree addr=r1 size=0x200000 rc=hipSuccess\n";
  mori_fi_replay_result v = replay(text, "gfx950", "");
  assert_true(v.ok); /* replaying line 2 would have freed r1 twice */
  assert_int_equal(v.live_at_end, 0);
}

static void a_peers_handle_is_stood_in_for_at_the_size_it_is_mapped(void **s) {
  (void)s;
  static const char text[] =
      "- recvmsg fds=fd7 bytes=0x30 rc=48\n"
      "1 hipMemImportFromShareableHandle out=h1 os=fd7 type=posix_fd rc=hipSuccess\n"
      "2 hipMemAddressReserve out=r1 size=0x800000 align=0x0 hint=0 flags=0x0 rc=hipSuccess\n"
      "3 hipMemMap addr=r1+0x400000 size=0x400000 offset=0x0 handle=h1 flags=0x0 rc=hipSuccess\n"
      "4 hipMemSetAccess addr=r1+0x400000 size=0x400000 desc=rw/0 count=0x1 rc=hipSuccess\n"
      "5 hipStreamWaitValue32 stream=0 addr=r1+0x400000 value=0x1 flags=0x1 mask=0xffffffff "
      "rc=hipSuccess\n"
      "6 hipMemUnmap addr=r1+0x400000 size=0x400000 rc=hipSuccess\n"
      "7 hipMemAddressFree addr=r1 size=0x800000 rc=hipSuccess\n"
      "8 hipMemRelease handle=h1 rc=hipSuccess\n"
      "- close fd=fd7 rc=0\n";
  mori_fi_replay_result v = replay(text, "gfx942", "all");
  if (!v.ok) fail_msg("call %ld: %s", v.violation_at, v.message);
  assert_int_equal(v.live_at_end, 0);
  /* the wait passed because the peer that would signal is absent; the same
   * wait on memory that is not mapped is still a violation */
  char bad[2048];
  snprintf(bad, sizeof bad, "%s", text);
  memcpy(strstr(bad, "addr=r1+0x400000 value"), "addr=r1+0x000000 value", 22);
  v = replay(bad, "gfx942", "");
  assert_false(v.ok);
  assert_int_equal(v.violation_at, 5);
  assert_non_null(strstr(v.message, "contract"));
}

/* ---- damaged traces: what the replay cannot follow, it refuses by line ---- */

/* A copy whose destination the trace puts a terabyte past its reservation
 * (hipMemcpyDefault: an address no allocation holds is host memory to it). */
static const char offset_past_binding[] =
    "1 hipMemAddressReserve out=r1 size=0x200000 align=0x0 hint=0 flags=0x0 rc=hipSuccess\n"
    "2 hipMemcpy dst=r1+0x10000000000 src=host size=0x1000 kind=0x4 rc=hipSuccess\n";
/* Access set with a count of descriptors the trace does not hold (it
 * records the first alone). */
static const char count_past_descriptors[] =
    "1 hipMemCreate out=h1 size=0x200000 prop=pinned/posix_fd/0 flags=0x0 rc=hipSuccess\n"
    "2 hipMemAddressReserve out=r1 size=0x200000 align=0x0 hint=0 flags=0x0 rc=hipSuccess\n"
    "3 hipMemMap addr=r1 size=0x200000 offset=0x0 handle=h1 flags=0x0 rc=hipSuccess\n"
    "4 hipMemSetAccess addr=r1 size=0x200000 desc=rw/0 count=0x400 rc=hipSuccess\n";

static void assert_refused_at(const char *text, long line, const char *why) {
  mori_fi_replay_result v = replay(text, "gfx950", "");
  if (v.ok || v.violation_line != line || strstr(v.message, why) == NULL)
    fail_msg("ok=%d line %ld: %s (expected line %ld: %s)", v.ok, v.violation_line, v.message,
             line, why);
}

static void an_offset_past_its_binding_fails_naming_the_line(void **s) {
  (void)s;
  assert_refused_at(offset_past_binding, 2,
                    "hipMemcpy: line 2: r1+0x10000000000 and 4096 bytes lie outside r1 (2097152 "
                    "bytes)");
  /* the last byte of the binding is inside, one more is not */
  static const char edge[] =
      "1 hipMemAddressReserve out=r1 size=0x200000 align=0x0 hint=0 flags=0x0 rc=hipSuccess\n"
      "2 hipMemset dst=r1+0x1fffff value=0 size=0x2 rc=hipErrorInvalidValue\n";
  assert_refused_at(edge, 2, "line 2: r1+0x1fffff and 2 bytes lie outside r1 (2097152 bytes)");
}

static void a_count_of_descriptors_the_trace_does_not_hold_fails_naming_the_line(void **s) {
  (void)s;
  assert_refused_at(count_past_descriptors, 4,
                    "hipMemSetAccess: line 4: count=1024, but a trace records one access "
                    "descriptor");
}

/* ---- the command ---- */

static int cli(const char *text, char *const *extra, char *out, size_t cap) {
  char path[] = "/tmp/mori-fi-cli-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  int p[2];
  assert_int_equal(pipe(p), 0);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    dup2(p[1], 2);
    char *argv[6] = {(char *)MORI_SYMM_TOOL, (char *)"replay", path,
                     extra ? extra[0] : NULL, extra ? extra[1] : NULL, NULL};
    execv(MORI_SYMM_TOOL, argv);
    _exit(127);
  }
  close(p[1]);
  test_read_fd(p[0], out, cap);
  close(p[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  unlink(path);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void replay_command_gives_one_verdict_per_profile(void **s) {
  (void)s;
  static char out[16384];
  static const char ok_trace[] =
      "# rank 3\n"
      "1 hipMemAddressReserve out=r1 size=0x200000 align=0x0 hint=0 flags=0x0 rc=hipSuccess\n"
      "2 hipMemAddressFree addr=r1 size=0x200000 rc=hipSuccess\n";
  assert_int_equal(cli(ok_trace, NULL, out, sizeof out), 0);
  int lines = 0;
  for (const char *p = out; (p = strstr(p, "ok (2 calls)\n")) != NULL; p++) lines++;
  assert_int_equal(lines, 32); /* 4 profiles x (no quirk, each of 6 alone, all) */
  assert_non_null(strstr(out, "rank 3, 2 calls"));
  assert_non_null(strstr(out, "replay: 32 profiles, 32 ok, 0 with violations\n"));

  char *const one[] = {"--profile", "gfx1250,unmap-multi,export-fd-lifetime"};
  assert_int_equal(cli(map_twice, one, out, sizeof out), 1);
  assert_non_null(strstr(out, "gfx1250          quirks=unmap-multi,export-fd-lifetime "
                              "violation at call 4 (line 4) hipMemMap:"));
  assert_non_null(strstr(out, "replay: 1 profiles, 0 ok, 1 with violations\n"));

  char *const gfx950[] = {"--profile", "gfx950"};
  assert_int_equal(cli(offset_past_binding, gfx950, out, sizeof out), 1);
  assert_non_null(strstr(out, "violation at call 2 (line 2) hipMemcpy: line 2: r1+0x10000000000"));
  assert_int_equal(cli(count_past_descriptors, gfx950, out, sizeof out), 1);
  assert_non_null(strstr(out, "violation at call 4 (line 4) hipMemSetAccess: line 4: count=1024"));

  assert_int_equal(cli("1 hipMemMap addr=nowhere\n", NULL, out, sizeof out), 2);
  assert_non_null(strstr(out, "line 1 column 18: addr: expected an address"));
}

int main(void) {
  if (!mori_fi_loaded()) {
    fprintf(stderr, "test_fi_replay needs LD_PRELOAD=libmori_faultinject.so\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(profile_and_quirk_lists_agree_with_the_sim),
      cmocka_unit_test(recorded_core_run_replays_clean_under_every_profile_and_quirk),
      cmocka_unit_test(traces_recorded_on_h200_with_the_cuda_shim_replay_clean),
      cmocka_unit_test(first_violation_is_reported_with_its_index_and_the_sims_rule),
      cmocka_unit_test(calls_that_failed_in_the_trace_may_fail_again),
      cmocka_unit_test(injected_failures_are_not_replayed),
      cmocka_unit_test(a_peers_handle_is_stood_in_for_at_the_size_it_is_mapped),
      cmocka_unit_test(an_offset_past_its_binding_fails_naming_the_line),
      cmocka_unit_test(a_count_of_descriptors_the_trace_does_not_hold_fails_naming_the_line),
      cmocka_unit_test(replay_command_gives_one_verdict_per_profile),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
