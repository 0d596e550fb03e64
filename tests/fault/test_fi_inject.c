/*
 * test_fi_inject.c - the fault shim's call rules, run under
 * LD_PRELOAD=libmori_faultinject.so: which call fails, for how long, on
 * which rank, what the error says, what hipGetLastError reports, what
 * count= and record= write, and that a malformed MORI_FI stops the program.
 */
#include "fault_harness.h"
#include "read_all.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <time.h>
#include <sys/mman.h>
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
  /* out of memory is no answer to the probe: each allocation fails there */
  assert_non_null(strstr(res[1].msg, "ok=000 injected=3 "));
  assert_non_null(strstr(res[1].msg, "hipMemCreate failed: hipErrorOutOfMemory (2)"));
  assert_non_null(strstr(res[2].msg, "ok=111 injected=0 "));
}

/* The last error and the detail message follow the injected call as the
 * shim's own would: the detail describes the last call that failed, so it
 * stays over a call that succeeds and goes with one that fails. */
static int last_error_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  char buf[64];
  if (mori_shim_select("sim") != 0) return 1;
  hipError_t first = mori_hipMemset(buf, 0, sizeof buf);
  int injected_msg = strstr(mori_shim_message(), "injected by MORI_FI") != NULL;
  hipError_t last = mori_hipGetLastError(), again = mori_hipGetLastError();
  int dev = 0;
  hipError_t next = mori_hipGetDevice(&dev);
  int msg_after = strstr(mori_shim_message(), "injected") != NULL;
  hipError_t bad = mori_hipSetDevice(1 << 20);
  int msg_replaced = strstr(mori_shim_message(), "injected") == NULL;
  (void)mori_hipGetLastError();
  snprintf(msg, msglen,
           "first=%d injected_msg=%d last=%d again=%d next=%d msg_after=%d bad=%d replaced=%d",
           first, injected_msg, last, again, next, msg_after, bad != hipSuccess, msg_replaced);
  return 0;
}

static void get_last_error_reports_the_injected_error_once(void **s) {
  (void)s;
  mori_rank_result res[1];
  fh_run("hipMemset#1=hipErrorUnknown", 1, last_error_rank, NULL, res, -1);
  assert_string_equal(res[0].msg, "first=999 injected_msg=1 last=999 again=0 next=0 msg_after=1 "
                                  "bad=1 replaced=1");
}

/* An allocation on a stream leaves every wait to the stream: no call of
 * it blocks the host on device work (torch issue 181086: the allocation
 * path does no synchronous device-wide work; the pads' zeroing is waited
 * for by the block's first rendezvous instead). */
static int alloc_sync_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  static const int waits[] = {MORI_FI_CALL_hipStreamSynchronize, MORI_FI_CALL_hipDeviceSynchronize,
                              MORI_FI_CALL_hipEventSynchronize, MORI_FI_CALL_hipMemcpy,
                              MORI_FI_CALL_hipMemset};
  int fds0 = mori_count_fds() - mori_fi_own_fds();
  void *warm = NULL, *p = NULL;
  hipStream_t stream = NULL;
  mori_fi_counts before, after;
  mori_window *w = NULL;
  if (mori_shim_select("sim") != 0) return 1;
  int rc = mori_symm_alloc(MiB, ctx->rank, &warm); /* the probe and the private stream */
  if (rc == 0) rc = mori_hipStreamCreateWithFlags(&stream, hipStreamNonBlocking) == hipSuccess ? 0 : -1;
  if (rc == 0) rc = mori_fi_counts_get(&before);
  if (rc == 0) rc = mori_symm_alloc_on_stream(MiB, ctx->rank, stream, &p);
  if (rc == 0) rc = mori_fi_counts_get(&after);
  long n = 0;
  for (size_t i = 0; rc == 0 && i < sizeof waits / sizeof waits[0]; i++)
    n += after.calls[waits[i]] - before.calls[waits[i]];
  /* and the pads are zero by the time peers can signal */
  if (rc == 0) rc = mori_symm_rendezvous(p, "g", ctx->rank, ctx->world, ctx->store, &w, NULL);
  if (rc == 0) rc = mori_window_barrier(w, 0, stream, 0);
  if (rc == 0) rc = mori_hipStreamSynchronize(stream) == hipSuccess ? 0 : -1;
  if (rc == 0) rc = mori_symm_free(p);
  if (rc == 0) rc = mori_symm_free(warm);
  if (stream) (void)mori_hipStreamDestroy(stream);
  char extra[64];
  snprintf(extra, sizeof extra, "waits=%ld", n);
  return fh_report(msg, msglen, fds0, rc, extra);
}

static void alloc_on_a_stream_blocks_the_host_on_nothing(void **s) {
  (void)s;
  mori_rank_result res[2];
  fh_run("", 2, alloc_sync_rank, NULL, res, -1);
  fh_assert_clean("", res, 2, -1);
  for (int r = 0; r < 2; r++)
    if (strstr(res[r].msg, " waits=0 ") == NULL) fail_msg("rank %d: %s", r, res[r].msg);
}

/* What a process's first allocation on a stream asks of the runtime
 * besides the memory (issue 33: compare.py's "first alloc" was 1.15x
 * torch's): one fill of the whole block on the caller's stream and no
 * private stream of the core's; a later one no granularity query (the
 * probe keeps the granularity of the type it chose). */
static int first_alloc_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds() - mori_fi_own_fds();
  void *p = NULL, *q = NULL;
  hipStream_t stream = NULL;
  mori_fi_counts c0, c1, c2;
  if (mori_shim_select("sim") != 0) return 1;
  int rc = mori_hipSetDevice(ctx->rank) == hipSuccess ? 0 : -1;
  if (rc == 0) rc = mori_hipStreamCreateWithFlags(&stream, hipStreamNonBlocking) == hipSuccess ? 0 : -1;
  if (rc == 0) rc = mori_fi_counts_get(&c0);
  if (rc == 0) rc = mori_symm_alloc_on_stream(MiB, ctx->rank, stream, &p);
  if (rc == 0) rc = mori_fi_counts_get(&c1);
  if (rc == 0) rc = mori_symm_alloc_on_stream(MiB, ctx->rank, stream, &q);
  if (rc == 0) rc = mori_fi_counts_get(&c2);
  if (rc == 0) rc = mori_hipStreamSynchronize(stream) == hipSuccess ? 0 : -1;
  if (rc == 0) rc = mori_symm_free(p);
  if (rc == 0) rc = mori_symm_free(q);
  if (stream) (void)mori_hipStreamDestroy(stream);
  char extra[160];
#define DELTA(a, b, call) ((b).calls[MORI_FI_CALL_##call] - (a).calls[MORI_FI_CALL_##call])
  snprintf(extra, sizeof extra, "streams=%ld fills=%ld granularity_later=%ld",
           DELTA(c0, c1, hipStreamCreateWithFlags), DELTA(c0, c1, hipMemsetAsync),
           DELTA(c1, c2, hipMemGetAllocationGranularity));
#undef DELTA
  return fh_report(msg, msglen, fds0, rc, extra);
}

static void a_first_alloc_on_a_stream_fills_once_on_it(void **s) {
  (void)s;
  mori_rank_result res[1];
  fh_run("", 1, first_alloc_rank, NULL, res, -1);
  fh_assert_clean("", res, 1, -1);
  if (strstr(res[0].msg, " streams=0 fills=1 granularity_later=0") == NULL)
    fail_msg("%s", res[0].msg);
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
    char *count = test_read_file(path, &len);
    assert_non_null(count);
    /* the count file is written at exit, after the atexit teardown: at least
     * as many calls as the rank had made when it reported */
    long global = strtol(strstr(count, "global ") + 7, NULL, 10);
    assert_true(global >= calls && calls > 20);
    assert_non_null(strstr(count, "hipMemImportFromShareableHandle 2 "));
    /* from each of 2 peers: its challenge, its answer and its fd */
    assert_non_null(strstr(count, "datagrams_received 6\n"));
    /* each function's line: calls, then the microseconds its forwarded
     * calls took in all and the longest one */
    double all_us = 0;
    int timed = 0;
    for (char *save = NULL, *l = strtok_r(count, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
      char name[64];
      long n;
      double total, longest;
      long nth;
      int k = sscanf(l, "%63s %ld %lf %lf #%ld", name, &n, &total, &longest, &nth);
      if (mori_fi_call_find(name, strlen(name)) < 0) continue;
      assert_int_equal(k, 5);
      assert_true(total >= longest && longest >= 0 && longest * (double)n >= total - 0.2);
      assert_true(nth >= 1 && nth <= n);
      all_us += total;
      timed++;
    }
    assert_true(timed > 5 && all_us > 1.0);
    snprintf(path, sizeof path, "%s/t.%d", dir, r);
    char *text = test_read_file(path, &len), err[256];
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
    assert_non_null(strstr(text, "- recvmsg fds=fd"));
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

/* ---- OS calls of the seam ---- */

/* Calls the seam's OS functions directly under a schedule set inside the
 * rank (which also resets the counts the launcher's store made). */
static int os_calls_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  (void)ctx;
  char err[256];
  if (mori_fi_control("malloc#2=ENOMEM;openat#1=EMFILE;write#1=persist:ENOSPC;close#1=EIO",
                      err, sizeof err) != 0)
    return snprintf(msg, msglen, "control: %s", err), 1;
  void *a = mori_malloc(8);
  errno = 0;
  void *b = mori_malloc(8);
  int b_errno = errno;
  void *c = mori_malloc(8);
  int fd1 = mori_openat(AT_FDCWD, "/dev/null", O_WRONLY | O_CLOEXEC, 0), fd1_errno = errno;
  int fd2 = mori_openat(AT_FDCWD, "/dev/null", O_WRONLY | O_CLOEXEC, 0);
  ssize_t w1 = mori_write(fd2, "x", 1), w2 = mori_write(fd2, "x", 1);
  int w_errno = errno;
  int closed = mori_close(fd2), close_errno = errno;
  int gone = fcntl(fd2, F_GETFD) == -1 && errno == EBADF; /* Linux closed it anyway */
  int named = strstr(mori_shim_message(), "close: EIO (5): injected by MORI_FI rule "
                                           "'close#1=EIO' (call 1 of close, rank") != NULL;
  hipError_t last = mori_hipGetLastError(); /* OS faults are no runtime error */
  snprintf(msg, msglen,
           "a=%d b=%d/%s c=%d fd1=%d/%s fd2=%d w=%zd,%zd/%s close=%d/%s gone=%d named=%d "
           "last=%d injected=%ld",
           a != NULL, b != NULL, mori_fi_errno_name(b_errno), c != NULL, fd1,
           mori_fi_errno_name(fd1_errno), fd2 >= 0, w1, w2, mori_fi_errno_name(w_errno), closed,
           mori_fi_errno_name(close_errno), gone, named, (int)last, mori_fi_injected());
  free(a);
  free(c);
  (void)mori_fi_control("", err, sizeof err);
  return 0;
}

static void os_calls_fail_the_way_libc_does(void **s) {
  (void)s;
  mori_rank_result res[1];
  fh_run("", 1, os_calls_rank, NULL, res, -1);
  assert_string_equal(res[0].msg, "a=1 b=0/ENOMEM c=1 fd1=-1/EMFILE fd2=1 w=-1,-1/ENOSPC "
                                  "close=-1/EIO gone=1 named=1 last=0 injected=5");
}

/* Allocations freed at once, under a fault of a releasing call: one, or
 * as many as ctx->arg says (an int). */
static int alloc_free_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds(), n = ctx->arg ? *(const int *)ctx->arg : 1, rc = 0;
  void *p[4] = {NULL};
  if (mori_shim_select("sim") != 0 || n > 4) return 1;
  for (int i = 0; i < n && rc == 0; i++) rc = mori_symm_alloc(MiB, ctx->rank, &p[i]);
  for (int i = 0; i < n; i++) {
    int r = p[i] ? mori_symm_free(p[i]) : 0;
    if (rc == 0) rc = r;
  }
  char extra[64];
  snprintf(extra, sizeof extra, "refused=%ld runtime_fds=%d", mori_fi_refused(),
           mori_shim_runtime_fds());
  fds0 += mori_shim_runtime_fds(); /* what the runtime keeps for refused resources */
  return fh_report(msg, msglen, fds0, rc, extra);
}

/* A release the runtime fails once is tried again: the caller hears of the
 * failure, nothing leaks.  (Before, the unmap's failure left the mapping
 * and, through it, the reservation live.) */
static void a_release_that_fails_once_is_retried_and_reported(void **s) {
  (void)s;
  mori_rank_result res[1];
  fh_run("hipMemUnmap#1=hipErrorUnmapFailed", 1, alloc_free_rank, NULL, res, -1);
  assert_non_null(strstr(res[0].msg, "rc=-3 "));
  assert_non_null(strstr(res[0].msg, " leaks=0 fds=0 windows=0 blocks=0 refused=0 "));
  assert_non_null(strstr(res[0].msg, "hipMemUnmap failed: hipErrorUnmapFailed"));
}

/* What the runtime refuses for good stays live, and is counted as refused:
 * every live ledger entry is one whose release was tried. */
/* Two blocks' releases refused for good: four refusals (each block's
 * mapping and reservation), none merged with another block's. */
static void refusals_of_two_blocks_are_counted_apart(void **s) {
  (void)s;
  mori_rank_result res[1];
  static int two = 2;
  fh_run("hipMemUnmap#*=hipErrorUnmapFailed", 1, alloc_free_rank, &two, res, -1);
  assert_non_null(strstr(res[0].msg, " leaks=4 fds=0 windows=0 blocks=0 refused=4 "));
}

static void a_release_refused_for_good_is_counted_as_refused(void **s) {
  (void)s;
  mori_rank_result res[1];
  fh_run("hipMemUnmap#*=hipErrorUnmapFailed", 1, alloc_free_rank, NULL, res, -1);
  /* the mapping, and the reservation that cannot be freed while mapped */
  assert_non_null(strstr(res[0].msg, " leaks=2 fds=0 windows=0 blocks=0 refused=2 "));
  /* the sim keeps the memfd of the mapped allocation */
  assert_non_null(strstr(res[0].msg, " runtime_fds=1 "));
}

/* A step that fails, and whose rollback fails too: the error leads with
 * the step's failure, the one to act on, and names the rollback's after
 * it (its consequence).  The unmap fails once and is tried again, so
 * nothing leaks. */
static void a_failed_step_whose_rollback_also_fails_leads_with_its_cause(void **s) {
  (void)s;
  mori_rank_result res[1];
  const char *spec = "hipMemSetAccess#1=hipErrorInvalidValue; hipMemUnmap#1=hipErrorUnmapFailed";
  fh_run(spec, 1, alloc_free_rank, NULL, res, -1);
  print_message("%s\n", res[0].msg);
  fh_assert_clean(spec, res, 1, -1);
  const char *err = fh_err(res[0].msg), *cause = strstr(err, "hipMemSetAccess failed"),
             *also = strstr(err, "rollback also failed"),
             *unmap = strstr(err, "hipMemUnmap failed");
  if (strstr(res[0].msg, "rc=0 ") || !cause || !also || !unmap || cause > also || also > unmap)
    fail_msg("the error does not lead with hipMemSetAccess's failure, then the rollback's "
             "hipMemUnmap: %s",
             res[0].msg);
}

/* Two blocks, then release_all: the line's all_err is its error. */
static int release_all_of_two_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds() - mori_fi_own_fds();
  void *p[2] = {NULL, NULL};
  char extra[800] = "all=- all_err=-";
  if (mori_shim_select("sim") != 0) return 1;
  int rc = mori_symm_alloc(MiB, ctx->rank, &p[0]);
  if (rc == 0) rc = mori_symm_alloc(MiB, ctx->rank, &p[1]);
  if (rc == 0) {
    int all = mori_symm_release_all();
    snprintf(extra, sizeof extra, "all=%d all_err=%s", all, all ? mori_last_error() : "-");
  }
  return fh_report(msg, msglen, fds0, rc, extra);
}

/* The teardowns of both blocks fail (each unmap once, tried again, so
 * nothing leaks): release_all reports the first failure, the first
 * block's, as every unwind does, not the last one's. */
static void release_all_of_two_failing_blocks_reports_the_first_failure(void **s) {
  (void)s;
  mori_rank_result res[1];
  const char *spec = "hipMemUnmap#1=hipErrorUnmapFailed; hipMemUnmap#3=hipErrorInvalidValue";
  fh_run(spec, 1, release_all_of_two_rank, NULL, res, -1);
  print_message("%s\n", res[0].msg);
  fh_assert_clean(spec, res, 1, -1);
  const char *m = res[0].msg;
  if (strstr(m, "rc=0 ") == NULL || fh_num(m, "all") == 0 ||
      strstr(m, "hipErrorUnmapFailed") == NULL || strstr(m, "(call 1 of hipMemUnmap") == NULL ||
      strstr(m, "(call 3 of hipMemUnmap") != NULL)
    fail_msg("release_all does not report the first block's failure (call 1 of hipMemUnmap) "
             "alone: %s",
             m);
}

/* A block and its window (a world of one), then the block's free, whose
 * teardown unwinds the window's ledger and then the block's. */
static int rendezvous_then_free_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds() - mori_fi_own_fds();
  void *p = NULL;
  mori_window *w = NULL;
  const char *step = "alloc";
  char extra[64];
  if (mori_shim_select("sim") != 0) return 1;
  int rc = mori_symm_alloc(MiB, ctx->rank, &p);
  if (rc == 0)
    step = "rendezvous",
    rc = mori_symm_rendezvous(p, "g", ctx->rank, ctx->world, ctx->store, &w, NULL);
  if (rc == 0) step = "free", rc = mori_symm_free(p);
  snprintf(extra, sizeof extra, "step=%s", step);
  return fh_report(msg, msglen, fds0, rc, extra);
}

/* A teardown that fails twice reports the first failure, not the later
 * one (each release is tried again, so nothing leaks): its device
 * synchronize, then its window (the slot's unmap, the first hipMemUnmap);
 * its window, then its block (the handle's release, the one
 * hipMemRelease). */
static void a_teardown_that_fails_twice_reports_its_first_failure(void **s) {
  (void)s;
  static const char *const cases[][3] = {
      {"hipDeviceSynchronize#1=hipErrorInvalidValue; hipMemUnmap#1=hipErrorUnmapFailed",
       "(call 1 of hipDeviceSynchronize", "hipMemUnmap"},
      {"hipMemUnmap#1=hipErrorUnmapFailed; hipMemRelease#1=hipErrorInvalidValue",
       "(call 1 of hipMemUnmap", "hipMemRelease"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mori_rank_result res[1];
    const char *spec = cases[i][0];
    fh_run(spec, 1, rendezvous_then_free_rank, NULL, res, -1);
    print_message("%s\n", res[0].msg);
    fh_assert_clean(spec, res, 1, -1);
    const char *m = res[0].msg;
    if (strstr(m, "step=free") == NULL || strstr(m, "rc=0 ") != NULL ||
        strstr(m, cases[i][1]) == NULL || strstr(m, cases[i][2]) != NULL)
      fail_msg("%s: the free does not report its first failure %s) alone: %s", spec,
               cases[i][1], m);
  }
}

/* A block zeroed on a stream, then (arg non-NULL) a rendezvous and a
 * barrier on that stream, then its free. */
static int zeroed_on_a_stream_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds() - mori_fi_own_fds();
  hipStream_t stream = NULL;
  void *p = NULL;
  mori_window *w = NULL;
  const char *step = "stream";
  char extra[128];
  if (mori_shim_select("sim") != 0) return 1;
  int rc = mori_hipStreamCreateWithFlags(&stream, hipStreamNonBlocking) == hipSuccess ? 0 : -1;
  if (rc == 0) step = "alloc", rc = mori_symm_alloc_on_stream(MiB, ctx->rank, stream, &p);
  if (rc == 0 && ctx->arg)
    step = "rendezvous",
    rc = mori_symm_rendezvous(p, "g", ctx->rank, ctx->world, ctx->store, &w, NULL);
  if (rc == 0 && ctx->arg) step = "barrier", rc = mori_window_barrier(w, 0, stream, 0);
  if (rc == 0) step = "sync", rc = mori_hipStreamSynchronize(stream) == hipSuccess ? 0 : -1;
  if (rc == 0) step = "free", rc = mori_symm_free(p);
  if (stream != NULL) (void)mori_hipStreamDestroy(stream);
  snprintf(extra, sizeof extra, "step=%s injected=%ld refused=%ld", rc ? step : "-",
           mori_fi_injected(), mori_fi_refused());
  return fh_report(msg, msglen, fds0, rc, extra);
}

/* The event after a block's zeroing on the caller's stream holds nothing a
 * later call needs: a destroy of it the runtime refuses is said (WARN)
 * and never fails what gave it back, the rendezvous that waited for the
 * zeroing or the free of a block no rendezvous waited for. */
static void a_refused_destroy_of_the_zeroing_event_fails_neither_rendezvous_nor_free(void **s) {
  (void)s;
  static int rendezvous = 1;
  const char *spec = "hipEventDestroy#1=hipErrorInvalidValue";
  for (int with = 0; with < 2; with++) {
    mori_rank_result res[2];
    fh_run(spec, 2, zeroed_on_a_stream_rank, with ? &rendezvous : NULL, res, -1);
    for (int r = 0; r < 2; r++)
      print_message("%s: rank %d: %s\n", with ? "rendezvous, then free" : "free alone", r,
                    res[r].msg);
    for (int r = 0; r < 2; r++)
      if (strstr(res[r].msg, "rc=0 release=0 ") == NULL || fh_num(res[r].msg, "injected") != 1)
        fail_msg("%s: rank %d: %s", with ? "rendezvous, then free" : "free alone", r,
                 res[r].msg);
  }
}

/* ---- progress ---- */

/* The launcher's looks at the ranks, and the watch's time, which moves 100
 * ms with each look at rank 1: a stall is counted in looks, whatever the
 * load.  Rank 0 moves in lockstep with the looks at it (the launcher waits
 * until it took in the last one) and makes a call of the seam every other
 * look, so however slowly it runs in real time it never stands still for
 * more than 200 ms of the watch's; rank 1 never calls again.  In memory
 * shared with the forked ranks. */
enum { LOOK_MS = 100, STALL_MS = 500, SLOW_CALLS = 8 };

typedef struct looks {
  long at_rank0, taken_in; /* looks at rank 0, and how many of them it took in */
  long at_rank1;           /* the watch's clock */
  int rank0_done;
} looks;

static int slow_or_stuck_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  looks *l = ctx->arg;
  for (int calls = 0; ctx->rank == 0 && calls < SLOW_CALLS;) {
    long seen = __atomic_load_n(&l->at_rank0, __ATOMIC_ACQUIRE);
    if (seen == __atomic_load_n(&l->taken_in, __ATOMIC_ACQUIRE)) {
      sched_yield();
      continue;
    }
    if (seen % 2 == 0) free(mori_malloc(8)), calls++;
    __atomic_store_n(&l->taken_in, seen, __ATOMIC_RELEASE);
  }
  if (ctx->rank == 0) __atomic_store_n(&l->rank0_done, 1, __ATOMIC_RELEASE);
  while (ctx->rank == 1) pause();
  snprintf(msg, msglen, "done");
  return 0;
}

static long progress_in_lockstep(int rank, void *ctx) {
  looks *l = ctx;
  if (rank == 0) {
    /* until rank 0 took in the last look (a bound against a rank gone
     * astray: it never binds a rank that runs) */
    for (long i = 0; i < 100000000 && !__atomic_load_n(&l->rank0_done, __ATOMIC_ACQUIRE) &&
                     __atomic_load_n(&l->taken_in, __ATOMIC_ACQUIRE) != l->at_rank0;
         i++)
      sched_yield();
    __atomic_add_fetch(&l->at_rank0, 1, __ATOMIC_RELEASE);
  } else {
    __atomic_add_fetch(&l->at_rank1, 1, __ATOMIC_RELEASE);
  }
  return mori_fi_progress(rank);
}

static double looks_clock(void *ctx) {
  return LOOK_MS * (double)__atomic_load_n(&((looks *)ctx)->at_rank1, __ATOMIC_ACQUIRE);
}

/* A hang is a rank whose calls stopped, however long a slow one takes: the
 * slow rank outlasts several stalls of the watch's time without being
 * taken for hung, the stuck one is killed.  (Before, the test slept 50 ms
 * between calls against a 500 ms stall on the real clock, which a loaded
 * machine can stretch past the stall.) */
static void launcher_tells_a_stuck_rank_from_a_slow_one(void **s) {
  (void)s;
  mori_rank_result res[2];
  looks *l = mmap(NULL, sizeof *l, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(l != MAP_FAILED);
  memset(l, 0, sizeof *l);
  mori_launch_watch watch = {.progress = progress_in_lockstep, .ctx = l, .stall_ms = STALL_MS,
                             .clock_ms = looks_clock};
  assert_int_equal(mori_fi_control("", NULL, 0), 0);
  mori_launch_watched(2, slow_or_stuck_rank, l, 600000, &watch, res);
  assert_int_equal(res[0].hung, 0);
  assert_string_equal(res[0].msg, "done");
  /* rank 0 took in more looks than three stalls' worth of the watch's time */
  assert_true(l->taken_in * LOOK_MS > 3 * STALL_MS);
  assert_int_equal(res[1].hung, 1);
  assert_int_equal(res[1].signal, 0);
  assert_true(mori_fi_progress(0) >= SLOW_CALLS);
  munmap(l, sizeof *l);
}

/* ---- the own slot of the span, mapped at its first hand-out ---- */

/* After the rendezvous, then after each of two mori_window_span calls:
 * the shim's live mappings, what each call returned (its error if it
 * failed), and whether the own slot then reads what the block holds. */
static int span_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds() - mori_fi_own_fds();
  char extra[900] = "", first_err[600] = "-";
  void *base = NULL;
  mori_window *w = NULL;
  mori_shim_registry_counts r[3];
  if (mori_shim_select("sim") != 0) return 1;
  int rc = mori_symm_alloc(MiB, ctx->rank, &base);
  if (rc == 0) rc = mori_symm_rendezvous(base, "world", ctx->rank, ctx->world, ctx->store, &w, NULL);
  if (rc != 0) return fh_report(msg, msglen, fds0, rc, "");
  size_t stride = 0;
  mori_shim_registry(&r[0]);
  char *span1 = mori_window_span(w, &stride);
  if (span1 == NULL) snprintf(first_err, sizeof first_err, "%s", mori_last_error());
  mori_shim_registry(&r[1]);
  char *span2 = mori_window_span(w, &stride);
  mori_shim_registry(&r[2]);
  uint32_t mark = 0x5eed0000u | (uint32_t)ctx->rank, back = 0;
  int read = span2 != NULL &&
             mori_hipMemcpy(base, &mark, 4, hipMemcpyHostToDevice) == hipSuccess &&
             mori_hipMemcpy(&back, span2 + (size_t)ctx->rank * stride, 4,
                            hipMemcpyDeviceToHost) == hipSuccess &&
             back == mark;
  /* no rank frees before every rank is done with its span */
  if (mori_window_barrier(w, 0, NULL, 0) != 0) rc = MORI_EHIP;
  snprintf(extra, sizeof extra, "mapped=%ld,%ld,%ld first=%d second=%d read=%d first_err=%s",
           r[0].mappings, r[1].mappings, r[2].mappings, span1 != NULL, span2 != NULL, read,
           first_err);
  rc = rc ? rc : mori_symm_free(base);
  return fh_report(msg, msglen, fds0, rc, extra);
}

/* A rendezvous maps every peer's slot of the span, not the own one: that
 * is a second mapping of the block, wanted only by flat-form kernels, and
 * mori_window_span maps it the first time it hands the span out (2
 * mappings after the rendezvous of 2 ranks: the block's and the peer's
 * slot; 3 after the span).  A failure there, of the map or of the grant,
 * gives back what it made, names the call, and leaves the window usable:
 * the next call maps it.  (hipMemMap #3 and hipMemSetAccess #3 are the
 * span's: the allocation's and the peer slot's come first.) */
static void the_own_slot_of_the_span_is_mapped_when_the_span_is_handed_out(void **s) {
  (void)s;
  static const struct {
    const char *spec, *rank0, *err;
  } cases[] = {
      {"", "mapped=2,3,3 first=1 second=1 read=1 first_err=-", NULL},
      {"rank=0 hipMemMap#3=hipErrorOutOfMemory", "mapped=2,2,3 first=0 second=1 read=1",
       "hipMemMap failed: hipErrorOutOfMemory"},
      {"rank=0 hipMemSetAccess#3=hipErrorInvalidValue", "mapped=2,2,3 first=0 second=1 read=1",
       "hipMemSetAccess failed: hipErrorInvalidValue"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mori_rank_result res[2];
    fh_run(cases[i].spec, 2, span_rank, NULL, res, -1);
    print_message("%s\n  %s\n", res[0].msg, res[1].msg);
    fh_assert_clean(cases[i].spec, res, 2, -1);
    for (int k = 0; k < 2; k++)
      if (strstr(res[k].msg, "rc=0 ") != res[k].msg)
        fail_msg("'%s': rank %d failed: %s", cases[i].spec, k, res[k].msg);
    if (strstr(res[0].msg, cases[i].rank0) == NULL)
      fail_msg("'%s': rank 0 did not see %s: %s", cases[i].spec, cases[i].rank0, res[0].msg);
    if (strstr(res[1].msg, "mapped=2,3,3 first=1 second=1 read=1") == NULL)
      fail_msg("'%s': rank 1: %s", cases[i].spec, res[1].msg);
    if (cases[i].err != NULL &&
        (strstr(res[0].msg, cases[i].err) == NULL ||
         strstr(res[0].msg, "mori_window_span: rank 0 group world window") == NULL))
      fail_msg("'%s': the span's error does not name the call and the window: %s",
               cases[i].spec, res[0].msg);
  }
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
  char out[256];
  test_read_fd(p[0], out, sizeof out);
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
      cmocka_unit_test(alloc_on_a_stream_blocks_the_host_on_nothing),
      cmocka_unit_test(a_first_alloc_on_a_stream_fills_once_on_it),
      cmocka_unit_test(the_own_slot_of_the_span_is_mapped_when_the_span_is_handed_out),
      cmocka_unit_test(count_and_record_write_one_file_per_rank),
      cmocka_unit_test(os_calls_fail_the_way_libc_does),
      cmocka_unit_test(a_release_that_fails_once_is_retried_and_reported),
      cmocka_unit_test(a_release_refused_for_good_is_counted_as_refused),
      cmocka_unit_test(refusals_of_two_blocks_are_counted_apart),
      cmocka_unit_test(a_failed_step_whose_rollback_also_fails_leads_with_its_cause),
      cmocka_unit_test(release_all_of_two_failing_blocks_reports_the_first_failure),
      cmocka_unit_test(a_refused_destroy_of_the_zeroing_event_fails_neither_rendezvous_nor_free),
      cmocka_unit_test(a_teardown_that_fails_twice_reports_its_first_failure),
      cmocka_unit_test(launcher_tells_a_stuck_rank_from_a_slow_one),
      cmocka_unit_test(malformed_mori_fi_stops_the_program_naming_the_column),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
