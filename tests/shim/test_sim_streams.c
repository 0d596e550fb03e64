/*
 * test_sim_streams.c - the sim's streams, events and capture.  Run with
 * "async" (MORI_SIM_STREAMS=async: a worker per stream, as a GPU queue) and
 * with "sync" (operations run when enqueued); each mode has its own cases.
 * Nothing here depends on timing except through waits that must end.
 */
#include "sim_test.h"

#include <pthread.h>
#include <time.h>

static struct sim_window w;
/* The test reads and writes the words as a peer would, by stream
 * operations on a stream of its own (non-blocking: no synchronous copy's
 * wait for the blocking streams stands in its way), never by a host
 * dereference, which faults. */
static hipStream_t side;

static int open_window(void **state) {
  window_open(&w, GRAN, hipMemHandleTypePosixFileDescriptor);
  assert_hip_ok(mori_hipStreamCreateWithFlags(&side, hipStreamNonBlocking));
  assert_hip_ok(mori_hipMemsetAsync(w.va, 0, 4096, side));
  assert_hip_ok(mori_hipStreamSynchronize(side));
  return 0;
}

static int close_window(void **state) {
  assert_hip_ok(mori_hipDeviceSynchronize());
  assert_hip_ok(mori_hipStreamDestroy(side));
  window_close(&w);
  return expect_no_leaks(state);
}

static uint32_t *word(int i) { return (uint32_t *)w.va + i; }

static uint32_t load(int i) {
  uint32_t v = 0xdeadbeef;
  assert_hip_ok(mori_hipMemcpyAsync(&v, word(i), 4, hipMemcpyDeviceToHost, side));
  assert_hip_ok(mori_hipStreamSynchronize(side));
  return v;
}

static void store(int i, uint32_t v) {
  assert_hip_ok(mori_hipStreamWriteValue32(side, word(i), v, 0));
  assert_hip_ok(mori_hipStreamSynchronize(side));
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* Writes `value` into word `index` after `delay_ms`, from another thread:
 * the peer that signals. */
struct later {
  int index, delay_ms;
  uint32_t value;
  pthread_t thread;
};

static void *later_main(void *arg) {
  struct later *l = arg;
  sleep_ms(l->delay_ms);
  store(l->index, l->value);
  return NULL;
}

static void later_start(struct later *l) {
  assert_int_equal(pthread_create(&l->thread, NULL, later_main, l), 0);
}

/* ---- async ---- */

static void async_wait_is_enqueued_and_blocks_only_its_stream(void **state) {
  hipStream_t s = NULL, other = NULL;
  hipEvent_t ev = NULL;
  assert_hip_ok(mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  assert_hip_ok(mori_hipStreamCreateWithFlags(&other, hipStreamNonBlocking));
  assert_hip_ok(mori_hipEventCreateWithFlags(&ev, hipEventDisableTiming));
  /* returns at once although word 0 is 0 */
  assert_hip_ok(mori_hipStreamWaitValue32(s, word(0), 1, hipStreamWaitValueEq, ~0u));
  assert_hip_ok(mori_hipStreamWriteValue32(s, word(1), 7, 0));
  assert_hip_ok(mori_hipEventRecord(ev, s));
  assert_int_equal(mori_hipEventQuery(ev), hipErrorNotReady);
  /* another stream runs past the stuck one */
  assert_hip_ok(mori_hipStreamWriteValue32(other, word(2), 9, 0));
  assert_hip_ok(mori_hipStreamSynchronize(other));
  assert_int_equal(load(2), 9);
  assert_int_equal(load(1), 0); /* behind the wait */
  struct later l = {.index = 0, .delay_ms = 20, .value = 1};
  later_start(&l);
  assert_hip_ok(mori_hipEventSynchronize(ev));
  assert_int_equal(load(1), 7);
  assert_hip_ok(mori_hipEventQuery(ev));
  pthread_join(l.thread, NULL);
  assert_hip_ok(mori_hipEventDestroy(ev));
  assert_hip_ok(mori_hipStreamDestroy(s));
  assert_hip_ok(mori_hipStreamDestroy(other));
}

/* A synchronous copy waits for blocking streams (the legacy default
 * stream's rule) but not for non-blocking ones. */
static void async_synchronous_copy_waits_for_blocking_streams_only(void **state) {
  hipStream_t blocking = NULL, nonblocking = NULL;
  uint32_t v = 0;
  assert_hip_ok(mori_hipStreamCreateWithFlags(&blocking, hipStreamDefault));
  assert_hip_ok(mori_hipStreamCreateWithFlags(&nonblocking, hipStreamNonBlocking));
  assert_hip_ok(mori_hipStreamWaitValue32(nonblocking, word(0), 1, hipStreamWaitValueEq, ~0u));
  assert_hip_ok(mori_hipMemcpy(&v, word(3), 4, hipMemcpyDeviceToHost)); /* not stuck */
  assert_hip_ok(mori_hipStreamWaitValue32(blocking, word(4), 1, hipStreamWaitValueEq, ~0u));
  assert_hip_ok(mori_hipStreamWriteValue32(blocking, word(5), 5, 0));
  struct later l = {.index = 4, .delay_ms = 20, .value = 1};
  later_start(&l);
  assert_hip_ok(mori_hipMemcpy(&v, word(5), 4, hipMemcpyDeviceToHost));
  assert_int_equal(v, 5); /* the copy ran after the blocking stream's write */
  pthread_join(l.thread, NULL);
  store(0, 1);
  assert_hip_ok(mori_hipStreamSynchronize(nonblocking));
  assert_hip_ok(mori_hipStreamDestroy(blocking));
  assert_hip_ok(mori_hipStreamDestroy(nonblocking));
}

static void async_fill_and_copy_run_in_stream_order(void **state) {
  hipStream_t s = NULL;
  uint32_t host[4] = {1, 2, 3, 4}, back[4] = {0};
  assert_hip_ok(mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  assert_hip_ok(mori_hipStreamWaitValue32(s, word(0), 1, hipStreamWaitValueEq, ~0u));
  assert_hip_ok(mori_hipMemsetAsync(w.va + 64, 0xab, 16, s));
  assert_hip_ok(mori_hipMemcpyAsync(w.va + 64, host, 8, hipMemcpyHostToDevice, s));
  sleep_ms(5);
  assert_int_equal(load(16), 0); /* nothing ran past the wait */
  store(0, 1);
  assert_hip_ok(mori_hipStreamSynchronize(s));
  assert_hip_ok(mori_hipMemcpyAsync(back, w.va + 64, sizeof back, hipMemcpyDeviceToHost, side));
  assert_hip_ok(mori_hipStreamSynchronize(side));
  assert_int_equal(back[0], 1);
  assert_int_equal(back[1], 2);
  assert_int_equal(back[2], 0xabababab);
  assert_int_equal(back[3], 0xabababab);
  assert_hip_ok(mori_hipStreamDestroy(s));
}

/* A wait past MORI_SIM_WAIT_TIMEOUT_MS leaves the stream failed, as a GPU
 * fault would: its later work is skipped and synchronizing reports it. */
static void async_wait_past_the_bound_fails_the_stream(void **state) {
  hipStream_t s = NULL;
  assert_hip_ok(mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  assert_hip_ok(mori_hipStreamWaitValue32(s, word(6), 3, hipStreamWaitValueGte, ~0u));
  assert_hip_ok(mori_hipStreamWriteValue32(s, word(7), 1, 0));
  assert_fails_with(mori_hipStreamSynchronize(s), hipErrorLaunchTimeOut,
                    ">= 0x3 still false after 200 ms");
  assert_int_equal(load(7), 0);
  assert_hip_ok(mori_hipStreamDestroy(s));
}

static void destroyed_stream_finishes_its_work(void **state) {
  hipStream_t s = NULL;
  assert_hip_ok(mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  assert_hip_ok(mori_hipStreamWaitValue32(s, word(8), 1, hipStreamWaitValueEq, ~0u));
  assert_hip_ok(mori_hipStreamWriteValue32(s, word(9), 4, 0));
  assert_hip_ok(mori_hipStreamDestroy(s));
  assert_fails_with(mori_hipStreamSynchronize(s), hipErrorInvalidValue,
                    "unknown or destroyed stream");
  store(8, 1);
  assert_hip_ok(mori_hipDeviceSynchronize());
  assert_int_equal(load(9), 4);
}

/* ---- both modes ---- */

/* A captured sequence is recorded, not run; every launch runs it again with
 * the values of capture time, as a graph replay does. */
static void capture_records_and_launch_replays_baked_values(void **state) {
  hipStream_t s = NULL;
  hipStreamCaptureStatus st = hipStreamCaptureStatusActive;
  mori_sim_graph *g = NULL;
  assert_hip_ok(mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  assert_hip_ok(mori_hipStreamIsCapturing(s, &st));
  assert_int_equal(st, hipStreamCaptureStatusNone);
  assert_hip_ok(mori_sim_begin_capture(s));
  assert_hip_ok(mori_hipStreamIsCapturing(s, &st));
  assert_int_equal(st, hipStreamCaptureStatusActive);
  assert_hip_ok(mori_hipStreamWaitValue32(s, word(10), 1, hipStreamWaitValueEq, ~0u));
  assert_hip_ok(mori_hipStreamWriteValue32(s, word(10), 0, 0));
  assert_hip_ok(mori_hipStreamWriteValue32(s, word(11), 5, 0));
  hipEvent_t ev = NULL;
  assert_hip_ok(mori_hipEventCreateWithFlags(&ev, 0));
  assert_fails_with(mori_hipEventRecord(ev, s), hipErrorInvalidValue, "capture");
  assert_fails_with(mori_hipStreamSynchronize(s), hipErrorInvalidValue, "capture");
  assert_hip_ok(mori_sim_end_capture(s, &g));
  assert_int_equal(load(11), 0); /* nothing ran */
  for (int i = 0; i < 3; i++) {
    store(11, 0);
    store(10, 1);
    assert_hip_ok(mori_sim_graph_launch(g, s));
    assert_hip_ok(mori_hipStreamSynchronize(s));
    assert_int_equal(load(11), 5);
    assert_int_equal(load(10), 0);
  }
  mori_sim_graph_destroy(g);
  assert_hip_ok(mori_hipEventDestroy(ev));
  assert_fails_with(mori_sim_begin_capture(NULL), hipErrorInvalidValue,
                    "legacy default stream cannot capture");
  assert_hip_ok(mori_hipStreamDestroy(s));
}

static void streams_and_events_reject_unknown_handles_and_flags(void **state) {
  hipStream_t s = NULL;
  hipEvent_t ev = NULL;
  assert_fails_with(mori_hipStreamCreateWithFlags(&s, 4), hipErrorInvalidValue,
                    "stream flags must be");
  assert_fails_with(mori_hipStreamSynchronize((hipStream_t)&s), hipErrorInvalidValue,
                    "unknown or destroyed stream");
  assert_fails_with(mori_hipEventQuery((hipEvent_t)&ev), hipErrorInvalidValue,
                    "unknown or destroyed event");
  assert_fails_with(mori_hipStreamDestroy(NULL), hipErrorInvalidValue, "default stream");
  assert_hip_ok(mori_hipEventCreateWithFlags(&ev, hipEventDisableTiming));
  assert_hip_ok(mori_hipEventQuery(ev)); /* never recorded: complete */
  assert_hip_ok(mori_hipEventRecord(ev, NULL));
  assert_hip_ok(mori_hipEventSynchronize(ev));
  assert_hip_ok(mori_hipEventDestroy(ev));
  assert_fails_with(mori_hipEventDestroy(ev), hipErrorInvalidValue, "unknown or destroyed event");
}

static hipStreamBatchMemOpParams batch_op(hipStreamBatchMemOpType type, int index,
                                          uint32_t value, unsigned flags) {
  hipStreamBatchMemOpParams op;
  memset(&op, 0, sizeof op);
  op.operation = type;
  op.waitValue.address = word(index);
  op.waitValue.value = value;
  op.waitValue.flags = flags;
  return op;
}

/* A batch runs its operations in array order on its stream, as separate
 * calls would (the sim has no batch of its own: the shim issues them one
 * by one), and is recorded in a capture like them; the contract both
 * runtimes state (1..255 operations, flags 0) and the shim's (32-bit waits
 * and writes) are checked first. */
static void batch_runs_in_array_order_and_is_captured(void **state) {
  hipStream_t s = NULL;
  mori_sim_graph *g = NULL;
  hipStreamBatchMemOpParams ops[3] = {batch_op(hipStreamMemOpWaitValue32, 14, 1, hipStreamWaitValueEq),
                                      batch_op(hipStreamMemOpWriteValue32, 14, 0, 0),
                                      batch_op(hipStreamMemOpWriteValue32, 15, 7, 0)};
  assert_hip_ok(mori_hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  store(14, 1);
  assert_hip_ok(mori_hipStreamBatchMemOp(s, 3, ops, 0));
  assert_hip_ok(mori_hipStreamSynchronize(s));
  assert_int_equal(load(14), 0);
  assert_int_equal(load(15), 7);
  assert_hip_ok(mori_sim_begin_capture(s));
  assert_hip_ok(mori_hipStreamBatchMemOp(s, 3, ops, 0));
  assert_hip_ok(mori_sim_end_capture(s, &g));
  store(15, 0);
  for (int i = 0; i < 2; i++) {
    store(14, 1);
    assert_hip_ok(mori_sim_graph_launch(g, s));
    assert_hip_ok(mori_hipStreamSynchronize(s));
    assert_int_equal(load(15), 7);
    store(15, 0);
  }
  mori_sim_graph_destroy(g);
  assert_fails_with(mori_hipStreamBatchMemOp(s, 0, ops, 0), hipErrorInvalidValue, "1..255");
  assert_fails_with(mori_hipStreamBatchMemOp(s, 256, ops, 0), hipErrorInvalidValue, "1..255");
  assert_fails_with(mori_hipStreamBatchMemOp(s, 3, NULL, 0), hipErrorInvalidValue, "1..255");
  assert_fails_with(mori_hipStreamBatchMemOp(s, 3, ops, 1), hipErrorInvalidValue, "flags 0");
  ops[1].operation = hipStreamMemOpWriteValue64;
  assert_fails_with(mori_hipStreamBatchMemOp(s, 3, ops, 0), hipErrorNotSupported,
                    "operation 1 is of type 0x5");
  assert_hip_ok(mori_hipStreamDestroy(s));
}

/* In sync mode a wait runs in the caller: the bound ends it there. */
static void sync_wait_runs_in_the_caller(void **state) {
  struct later l = {.index = 12, .delay_ms = 20, .value = 2};
  later_start(&l);
  assert_hip_ok(mori_hipStreamWaitValue32(NULL, word(12), 2, hipStreamWaitValueEq, ~0u));
  pthread_join(l.thread, NULL);
  assert_fails_with(mori_hipStreamWaitValue32(NULL, word(13), 2, hipStreamWaitValueEq, ~0u),
                    hipErrorLaunchTimeOut, "== 0x2 still false after 200 ms");
  hipEvent_t ev = NULL;
  assert_hip_ok(mori_hipEventCreateWithFlags(&ev, 0));
  assert_hip_ok(mori_hipEventRecord(ev, NULL));
  assert_hip_ok(mori_hipEventQuery(ev));
  assert_hip_ok(mori_hipEventDestroy(ev));
}

int main(int argc, char **argv) {
  int async = argc > 1 && strcmp(argv[1], "async") == 0;
  setenv("MORI_SIM_STREAMS", async ? "async" : "sync", 1);
  sim_start("gfx950", NULL, "200");
#define T(name) cmocka_unit_test_setup_teardown(name, open_window, close_window)
  const struct CMUnitTest async_tests[] = {
      T(async_wait_is_enqueued_and_blocks_only_its_stream),
      T(async_synchronous_copy_waits_for_blocking_streams_only),
      T(async_fill_and_copy_run_in_stream_order),
      T(async_wait_past_the_bound_fails_the_stream),
      T(destroyed_stream_finishes_its_work),
      T(capture_records_and_launch_replays_baked_values),
      T(batch_runs_in_array_order_and_is_captured),
      T(streams_and_events_reject_unknown_handles_and_flags),
  };
  const struct CMUnitTest sync_tests[] = {
      T(sync_wait_runs_in_the_caller),
      T(capture_records_and_launch_replays_baked_values),
      T(batch_runs_in_array_order_and_is_captured),
      T(streams_and_events_reject_unknown_handles_and_flags),
  };
  return async ? cmocka_run_group_tests_name("sim_streams_async", async_tests, NULL, NULL)
               : cmocka_run_group_tests_name("sim_streams_sync", sync_tests, NULL, NULL);
}
