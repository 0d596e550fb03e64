/*
 * test_fi_kernels.c - the signal kernels readied under the fault shim
 * (LD_PRELOAD=libmori_faultinject.so), MORI_SYMM_SIGNAL_ENGINE=kernel: what
 * a readying that fails partway leaves.  Modules are in no registry and the
 * failure words are pinned memory any user may have left dirty, so each
 * case checks what no leak count sees: a module whose entry was not found
 * is unloaded at once, and failure words that could not be zeroed are
 * given back; the next call readies the kernels and the ranks go on in
 * step.
 */
#include "mori/fi.h"
#include "signal_rounds.h"

/* This rank's next calls under rule (the fault shim's counts start again
 * from zero). */
static int arm(const mori_rank_ctx *ctx, const char *rule, char *msg, size_t msglen) {
  char err[256];
  CHECK(mori_fi_control(rule, err, sizeof err) == 0, "MORI_FI '%s': %s", rule, err);
  return 0;
}

static long calls(int call) {
  mori_fi_counts c;
  return mori_fi_counts_get(&c) == 0 ? c.calls[call] : -1;
}

/* ---- a module whose entry was not found ---- */

/* The rendezvous readies the kernels: the module loads, its first entry is
 * not found.  The module must be unloaded then (a load for each unload
 * since the rule), and the next call loads it again and runs. */
static int lookup_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL;
  char err[256];
  if (arm(ctx, "hipModuleGetFunction#1=hipErrorNotFound", msg, msglen)) return 1;
  if (open_window(ctx, "lookup", &base, &w, msg, msglen)) return 1;
  long refused = mori_fi_injected(), loads = calls(MORI_FI_CALL_hipModuleLoadData),
       unloads = calls(MORI_FI_CALL_hipModuleUnload);
  (void)mori_fi_control("", err, sizeof err);
  CHECK(refused == 1, "the rendezvous looked up no entry to refuse (%ld refused)", refused);
  CHECK(loads == 1 && unloads == 1,
        "a module whose entry was not found is left loaded: %ld load(s), %ld unload(s)", loads,
        unloads);
  if (ordered_rounds(ctx, w, 0, 2, msg, msglen)) return 1;
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "module unloaded");
}

static void a_module_whose_entry_is_not_found_is_unloaded(void **s) {
  ranks_run(2, lookup_rank, NULL, 0);
}

/* ---- failure words that could not be zeroed ---- */

/* The rendezvous's readying cannot zero the words (hipMemsetAsync
 * refused): a WARN, and the block given back.  The first barrier, forced
 * to the kernel, readies them again and cannot wait for the zeroing
 * (hipStreamSynchronize refused): the call fails naming it and sends
 * nothing, the block given back again.  The next barrier readies them. */
static int zeroing_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = mori_count_fds();
  void *base = NULL;
  mori_window *w = NULL;
  char err[256];
  CHECK(mori_shim_select("sim") == 0, "%s", mori_shim_message());
  CHECK(mori_symm_alloc(MiB, ctx->rank, &base) == 0, "alloc: %s", mori_last_error());
  if (arm(ctx, "hipMemsetAsync#1=hipErrorInvalidValue", msg, msglen)) return 1;
  CHECK(mori_symm_rendezvous(base, "zeroing", ctx->rank, ctx->world, ctx->store, &w, NULL) == 0,
        "rendezvous: %s", mori_last_error());
  CHECK(mori_fi_injected() == 1, "the rendezvous zeroed no failure words to refuse");
  CHECK(calls(MORI_FI_CALL_hipHostFree) == 1,
        "failure words that could not be zeroed were not given back: %ld hipHostFree",
        calls(MORI_FI_CALL_hipHostFree));
  if (arm(ctx, "hipStreamSynchronize#1=hipErrorLaunchFailure", msg, msglen)) return 1;
  int rc = mori_window_barrier(w, 0, NULL, 0);
  long freed = calls(MORI_FI_CALL_hipHostFree);
  (void)mori_fi_control("", err, sizeof err);
  CHECK(rc == MORI_EHIP &&
            strstr(mori_last_error(), "barrier: the signal kernels: hipStreamSynchronize (the "
                                      "kernels' failure words) failed: ") != NULL,
        "a barrier whose failure words cannot be zeroed: %d: %s", rc, mori_last_error());
  CHECK(freed == 1, "failure words not waited for were not given back: %ld hipHostFree", freed);
  if (ordered_rounds(ctx, w, 0, 2, msg, msglen)) return 1;
  CHECK(mori_symm_free(base) == 0, "free: %s", mori_last_error());
  return ranks_finish(fds0, msg, msglen, "words given back");
}

static void failure_words_that_cannot_be_zeroed_are_given_back(void **s) {
  ranks_run(2, zeroing_rank, NULL, 0);
}

int main(int argc, char **argv) {
  if (!mori_fi_loaded()) {
    fprintf(stderr, "test_fi_kernels needs LD_PRELOAD=libmori_faultinject.so\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_module_whose_entry_is_not_found_is_unloaded),
      cmocka_unit_test(failure_words_that_cannot_be_zeroed_are_given_back),
  };
  return mori_run_tests(argc, argv, tests);
}
