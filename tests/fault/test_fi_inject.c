/*
 * test_fi_inject.c - the fault shim's call rules, run under
 * LD_PRELOAD=libmori_faultinject.so: which call fails, for how long, on
 * which rank, what the error says, what hipGetLastError reports, what
 * count= and record= write, and that a malformed MORI_FI stops the program.
 */
#include "fault_harness.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

extern char **environ;

/* Three allocations in a row; the line says which succeeded and the error
 * of the first that failed. */
static int three_allocs_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds() - mori_fi_own_fds(), ok[3], first = 0;
  char err[600] = "-", extra[700];
  void *p[3] = {NULL, NULL, NULL};
  if (mori_shim_select("sim") != 0) return 1;
  for (int i = 0; i < 3; i++) {
    ok[i] = mori_symm_alloc(MiB, ctx->rank, &p[i]) == 0;
    if (!ok[i] && !first++) snprintf(err, sizeof err, "%s", mori_last_error());
  }
  snprintf(extra, sizeof extra, "ok=%d%d%d injected=%ld first_err=%s", ok[0], ok[1], ok[2],
           mori_fi_injected(), err);
  return fh_report(msg, msglen, fds0, 0, extra);
}

static void run_allocs(const char *spec, int world, mori_rank_result *res) {
  fh_run(spec, world, three_allocs_rank, NULL, res, -1);
  fh_assert_clean(spec, res, world, -1);
}

static void nth_call_fails_once_and_the_error_names_call_and_rule(void **s) {
  (void)s;
  mori_rank_result res[1];
  /* map #1 is the first allocation's; #2 the second's */
  run_allocs("hipMemMap#2=hipErrorOutOfMemory", 1, res);
  assert_non_null(strstr(res[0].msg, "ok=101 injected=1 "));
  assert_non_null(strstr(res[0].msg, "hipMemMap failed: hipErrorOutOfMemory (2)"));
  assert_non_null(strstr(res[0].msg, "injected by MORI_FI rule 'hipMemMap#2=hipErrorOutOfMemory' "
                                     "(call 2 of hipMemMap"));
}

static void persist_fails_every_call_from_the_nth_on(void **s) {
  (void)s;
  mori_rank_result res[1];
  run_allocs("hipMemMap#2=persist:hipErrorOutOfMemory", 1, res);
  assert_non_null(strstr(res[0].msg, "ok=100 injected=2 "));
}

static void global_index_counts_every_runtime_call(void **s) {
  (void)s;
  mori_rank_result res[1];
  /* whichever call is the 9th of the process fails, named by its own name */
  run_allocs("call#9=hipErrorInvalidValue", 1, res);
  assert_non_null(strstr(res[0].msg, "ok=011 injected=1 "));
  assert_non_null(strstr(res[0].msg, "global call 9, rank 0)"));
}

static void rank_rule_fails_only_that_rank(void **s) {
  (void)s;
  mori_rank_result res[3];
  run_allocs("rank=1 hipMemCreate#*=hipErrorOutOfMemory", 3, res);
  assert_non_null(strstr(res[0].msg, "ok=111 injected=0 "));
  assert_non_null(strstr(res[1].msg, "ok=000 injected=4 ")); /* the probe's create, then 3 */
  assert_non_null(strstr(res[1].msg, "hipMemCreate failed: hipErrorOutOfMemory (2)"));
  assert_non_null(strstr(res[2].msg, "ok=111 injected=0 "));
}

/* The last error and the detail message follow the injected call as the
 * shim's own would. */
static int last_error_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  char buf[64];
  if (mori_shim_select("sim") != 0) return 1;
  hipError_t first = mori_hipMemset(buf, 0, sizeof buf);
  int injected_msg = strstr(mori_shim_message(), "injected by MORI_FI") != NULL;
  hipError_t last = mori_hipGetLastError(), again = mori_hipGetLastError();
  int dev = 0;
  hipError_t next = mori_hipGetDevice(&dev);
  int msg_after = strstr(mori_shim_message(), "injected") != NULL;
  snprintf(msg, msglen, "first=%d injected_msg=%d last=%d again=%d next=%d msg_after=%d", first,
           injected_msg, last, again, next, msg_after);
  return 0;
}

static void get_last_error_reports_the_injected_error_once(void **s) {
  (void)s;
  mori_rank_result res[1];
  fh_run("hipMemset#1=hipErrorUnknown", 1, last_error_rank, NULL, res, -1);
  assert_string_equal(res[0].msg, "first=999 injected_msg=1 last=999 again=0 next=0 msg_after=0");
}

/* ---- count= and record= ---- */

static int lifecycle_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds() - mori_fi_own_fds(); /* its trace file may be open already */
  void *base = NULL;
  mori_window *w = NULL;
  if (mori_shim_select("sim") != 0) return 1;
  int rc = mori_symm_alloc(MiB, ctx->rank, &base);
  if (rc == 0) rc = mori_symm_rendezvous(base, "g", ctx->rank, ctx->world, ctx->store, &w, NULL);
  if (rc == 0) rc = mori_window_barrier(w, 0, NULL, 0);
  if (rc == 0) rc = mori_symm_free(base);
  char extra[64];
  snprintf(extra, sizeof extra, "calls=%ld", mori_fi_calls());
  return fh_report(msg, msglen, fds0, rc, extra);
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  char *buf = malloc(1 << 20);
  *len = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
  if (buf) buf[*len] = '\0';
  fclose(f);
  return buf;
}

static void count_and_record_write_one_file_per_rank(void **s) {
  (void)s;
  char dir[] = "/tmp/mori-fi-test-XXXXXX", spec[256], path[512];
  assert_non_null(mkdtemp(dir));
  snprintf(spec, sizeof spec, "count=%s/c;record=%s/t", dir, dir);
  mori_rank_result res[3];
  fh_run(spec, 3, lifecycle_rank, NULL, res, -1);
  fh_assert_clean(spec, res, 3, -1);
  for (int r = 0; r < 3; r++) {
    size_t len;
    long calls = fh_num(res[r].msg, "calls");
    snprintf(path, sizeof path, "%s/c.%d", dir, r);
    char *count = slurp(path, &len);
    assert_non_null(count);
    /* the count file is written at exit, after the atexit teardown: at least
     * as many calls as the rank had made when it reported */
    long global = strtol(strstr(count, "global ") + 7, NULL, 10);
    assert_true(global >= calls && calls > 20);
    assert_non_null(strstr(count, "hipMemImportFromShareableHandle 2\n"));
    assert_non_null(strstr(count, "datagrams_received 2\n"));
    snprintf(path, sizeof path, "%s/t.%d", dir, r);
    char *text = slurp(path, &len), err[256];
    assert_non_null(text);
    mori_fi_trace t;
    if (mori_trace_parse(text, len, &t, err, sizeof err) != 0) fail_msg("%s: %s", path, err);
    assert_int_equal(t.rank, r);
    /* one line per runtime call, indexes 1..N with none missing */
    long expect = 1;
    for (size_t i = 0; i < t.n; i++)
      if (t.recs[i].index > 0) assert_int_equal(t.recs[i].index, expect++);
    assert_int_equal(expect - 1, global);
    /* nothing process-specific: handles and addresses are symbols */
    assert_null(strstr(text, "0x7f"));
    assert_non_null(strstr(text, " hipMemImportFromShareableHandle out=h"));
    assert_non_null(strstr(text, "- mori_recvmsg fds=fd"));
    mori_trace_free(&t);
    free(text);
    free(count);
    snprintf(path, sizeof path, "%s/c.%d", dir, r);
    unlink(path);
    snprintf(path, sizeof path, "%s/t.%d", dir, r);
    unlink(path);
  }
  rmdir(dir);
}

/* ---- a malformed schedule ---- */

static void malformed_mori_fi_stops_the_program_naming_the_column(void **s) {
  (void)s;
  int p[2];
  assert_int_equal(pipe(p), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 2);
  posix_spawn_file_actions_addclose(&fa, p[0]);
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + 2, sizeof *env);
  for (size_t i = 0, k = 0; i < n; i++)
    if (strncmp(environ[i], "MORI_FI=", 8) != 0) env[k++] = environ[i];
  for (n = 0; env[n]; n++) {
  }
  env[n] = "MORI_FI=hipMemMap#1=hipErrorBogus";
  char *argv[] = {"true", NULL};
  pid_t pid;
  assert_int_equal(posix_spawn(&pid, "/bin/true", &fa, NULL, argv, env), 0);
  close(p[1]);
  char out[256] = "";
  ssize_t k = read(p[0], out, sizeof out - 1);
  out[k > 0 ? k : 0] = '\0';
  close(p[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 2);
  assert_string_equal(out, "MORI_FI: column 13: unknown error name 'hipErrorBogus'\n");
}

int main(void) {
  if (!mori_fi_loaded()) {
    fprintf(stderr, "test_fi_inject needs LD_PRELOAD=libmori_faultinject.so\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(nth_call_fails_once_and_the_error_names_call_and_rule),
      cmocka_unit_test(persist_fails_every_call_from_the_nth_on),
      cmocka_unit_test(global_index_counts_every_runtime_call),
      cmocka_unit_test(rank_rule_fails_only_that_rank),
      cmocka_unit_test(get_last_error_reports_the_injected_error_once),
      cmocka_unit_test(count_and_record_write_one_file_per_rank),
      cmocka_unit_test(malformed_mori_fi_stops_the_program_naming_the_column),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
