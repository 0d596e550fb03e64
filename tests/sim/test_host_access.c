/*
 * test_host_access.c - on the sim, as on a GPU, the host cannot touch
 * device memory.  Every address a rank gets (its own block, each peer's
 * slot in the span, the signal pads, and the device pointer tables the
 * rendezvous keeps in hipMalloc memory) kills a forked child that reads or
 * writes it from the host with SIGSEGV, while the runtime's copies and
 * stream operations reach the same bytes.  ctest runs it with the sim's
 * streams run when enqueued (sync) and on worker threads (async).
 */
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ranks.h"

#define MiB (1u << 20)

/* How a forked child that touches p from the host ends: the signal that
 * killed it, or 0 if it returned. */
static int host_touch_signal(void *p, int write) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none); /* the crash is the expected outcome: no core file */
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    if (write)
      *(volatile unsigned char *)p = 0x5a;
    else
      (void)*(volatile unsigned char *)p;
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

struct target {
  const char *what;
  void *p;
};

/* Every kind of device address a rank of a 2-rank window holds. */
static int targets_of(const mori_rank_ctx *ctx, mori_window *w, void *base,
                      struct target *t) {
  int peer = 1 - ctx->rank, n = 0;
  size_t stride = 0;
  unsigned char *span = mori_window_span(w, &stride);
  t[n++] = (struct target){"its own block", base};
  t[n++] = (struct target){"its own block's last byte",
                           (unsigned char *)base + mori_window_buffer_size(w) - 1};
  t[n++] = (struct target){"its own slot in the span", span + (size_t)ctx->rank * stride};
  t[n++] = (struct target){"the peer's slot", mori_window_buffer_ptrs(w)[peer]};
  t[n++] = (struct target){"its own signal pad", mori_window_signal_pad_ptrs(w)[ctx->rank]};
  t[n++] = (struct target){"the peer's signal pad", mori_window_signal_pad_ptrs(w)[peer]};
  t[n++] = (struct target){"the device table of buffer pointers", mori_window_buffer_ptrs_dev(w)};
  t[n++] = (struct target){"the device table of signal pads", mori_window_signal_pad_ptrs_dev(w)};
  return n;
}

static int open_window(const mori_rank_ctx *ctx, void **base, mori_window **w, char *msg,
                       size_t msglen) {
  CHECK(mori_shim_select("sim") == 0, "%s", mori_shim_message());
  CHECK(mori_symm_alloc(MiB, ctx->rank, base) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(*base, "world", ctx->rank, ctx->world, ctx->store, w, NULL) == 0,
        "rendezvous: %s", mori_last_error());
  return 0;
}

static int host_access_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL;
  struct target t[8];
  if (open_window(ctx, &base, &w, msg, msglen)) return 1;
  int n = targets_of(ctx, w, base, t);
  for (int i = 0; i < n; i++)
    for (int write = 0; write <= 1; write++) {
      int sig = host_touch_signal(t[i].p, write);
      CHECK(sig == SIGSEGV, "a host %s of %s (%p) %s", write ? "write" : "read", t[i].what,
            t[i].p, sig == 0 ? "succeeded: the host reached device memory" : "did not die of SIGSEGV");
    }
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "host access");
}

static void a_host_read_or_write_of_any_device_pointer_dies(void **s) {
  ranks_run(2, host_access_rank, NULL, 0);
}

/* The same addresses through the runtime: each rank copies a pattern into
 * the peer's slot, a barrier, and the own block holds the peer's pattern;
 * the device tables read back by copy equal the host arrays. */
static int copies_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds(), peer = 1 - ctx->rank;
  void *base = NULL;
  mori_window *w = NULL;
  unsigned char out[4096], in[4096];
  void *dev[2];
  if (open_window(ctx, &base, &w, msg, msglen)) return 1;
  for (size_t i = 0; i < sizeof out; i++) out[i] = (unsigned char)(i * 7 + ctx->rank);
  CHECK(mori_hipMemcpy(mori_window_buffer_ptrs(w)[peer], out, sizeof out,
                       hipMemcpyHostToDevice) == hipSuccess, "copy to the peer: %s",
        mori_shim_message());
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_hipStreamSynchronize(NULL) == hipSuccess, "sync: %s", mori_shim_message());
  CHECK(mori_hipMemcpy(in, base, sizeof in, hipMemcpyDeviceToHost) == hipSuccess,
        "copy from the own block: %s", mori_shim_message());
  for (size_t i = 0; i < sizeof in; i++)
    CHECK(in[i] == (unsigned char)(i * 7 + peer), "byte %zu is 0x%02x, not the peer's 0x%02x", i,
          in[i], (unsigned char)(i * 7 + peer));
  CHECK(mori_hipMemcpy(dev, mori_window_buffer_ptrs_dev(w), sizeof dev,
                       hipMemcpyDeviceToHost) == hipSuccess, "copy of the device table: %s",
        mori_shim_message());
  for (int r = 0; r < 2; r++)
    CHECK(dev[r] == mori_window_buffer_ptrs(w)[r], "device table entry %d is %p, host array %p",
          r, dev[r], mori_window_buffer_ptrs(w)[r]);
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_hipStreamSynchronize(NULL) == hipSuccess, "sync: %s", mori_shim_message());
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "copies");
}

static void the_runtime_s_copies_reach_the_same_pointers(void **s) {
  ranks_run(2, copies_rank, NULL, 0);
}

/* The same through the public API (symm.h, "Moving data"), which a C
 * program without HIP's headers calls: a fill and a copy into the peer's
 * slot, a barrier, the own block read back; then the stream-ordered forms
 * on the default stream, synchronised; and a refused copy or fill is an
 * error naming the runtime call and the sim's rule. */
static int public_copies_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds(), peer = 1 - ctx->rank;
  void *base = NULL;
  mori_window *w = NULL;
  unsigned char out[4096], in[2 * 4096];
  if (open_window(ctx, &base, &w, msg, msglen)) return 1;
  unsigned char *peer_slot = mori_window_buffer_ptrs(w)[peer];
  for (size_t i = 0; i < sizeof out; i++) out[i] = (unsigned char)(i * 5 + ctx->rank);
  CHECK(mori_symm_memset(peer_slot, 0x77, sizeof in) == 0, "memset: %s", mori_last_error());
  CHECK(mori_symm_memcpy(peer_slot, out, sizeof out) == 0, "memcpy: %s", mori_last_error());
  CHECK(mori_window_barrier(w, 0, NULL, 0) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_symm_synchronize(NULL) == 0, "synchronize: %s", mori_last_error());
  CHECK(mori_symm_memcpy(in, base, sizeof in) == 0, "memcpy back: %s", mori_last_error());
  for (size_t i = 0; i < sizeof in; i++) {
    unsigned char want = i < sizeof out ? (unsigned char)(i * 5 + peer) : 0x77;
    CHECK(in[i] == want, "byte %zu is 0x%02x, not 0x%02x", i, in[i], want);
  }
  CHECK(mori_window_barrier(w, 1, NULL, 0) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_symm_memset_async(peer_slot, 0x11, sizeof out, NULL) == 0, "memset_async: %s",
        mori_last_error());
  CHECK(mori_symm_memcpy_async(peer_slot + sizeof out, out, sizeof out, NULL) == 0,
        "memcpy_async: %s", mori_last_error());
  CHECK(mori_window_barrier(w, 2, NULL, 0) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_symm_synchronize(NULL) == 0, "synchronize: %s", mori_last_error());
  CHECK(mori_symm_memcpy(in, base, sizeof in) == 0, "memcpy back: %s", mori_last_error());
  for (size_t i = 0; i < sizeof in; i++) {
    unsigned char want = i < sizeof out ? 0x11 : (unsigned char)((i - sizeof out) * 5 + peer);
    CHECK(in[i] == want, "async: byte %zu is 0x%02x, not 0x%02x", i, in[i], want);
  }
  CHECK(mori_symm_memcpy(in, NULL, 16) == MORI_EHIP &&
            strstr(mori_last_error(), "hipMemcpy failed: hipErrorInvalidValue") != NULL,
        "a copy from NULL: '%s'", mori_last_error());
  CHECK(mori_symm_memset_async(NULL, 0, 16, NULL) == MORI_EHIP &&
            strstr(mori_last_error(), "hipMemsetAsync failed: hipErrorInvalidValue") != NULL,
        "a fill of NULL: '%s'", mori_last_error());
  CHECK(mori_window_barrier(w, 3, NULL, 0) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_symm_synchronize(NULL) == 0, "synchronize: %s", mori_last_error());
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "public copies");
}

static void the_public_copies_and_fills_move_data_on_the_sim(void **s) {
  ranks_run(2, public_copies_rank, NULL, 0);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_host_read_or_write_of_any_device_pointer_dies),
      cmocka_unit_test(the_runtime_s_copies_reach_the_same_pointers),
      cmocka_unit_test(the_public_copies_and_fills_move_data_on_the_sim),
  };
  setenv("MORI_SYMM_SHIM", "sim", 1);
  return mori_run_tests(argc, argv, tests);
}
