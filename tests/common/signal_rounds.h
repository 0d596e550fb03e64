/*
 * signal_rounds.h - what the tests of signals share: a window on a fresh
 * block of the rank's device, a word of a rank's buffer written and read
 * through the runtime (the host never touches device memory), and rounds
 * of barriers that order every rank's write before every peer's read.
 */
#ifndef MORI_TEST_SIGNAL_ROUNDS_H
#define MORI_TEST_SIGNAL_ROUNDS_H

#include <string.h>
#include <time.h>

#include "ranks.h"

#define MiB (1u << 20)

static inline void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static inline double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* A window on a fresh 1 MiB block of this rank's device. */
static inline int open_window(const mori_rank_ctx *ctx, const char *group, void **base,
                              mori_window **w, char *msg, size_t msglen) {
  CHECK(mori_shim_select("sim") == 0, "%s", mori_shim_message());
  CHECK(mori_symm_alloc(MiB, ctx->rank, base) == 0, "alloc: %s", mori_last_error());
  CHECK(mori_symm_rendezvous(*base, group, ctx->rank, ctx->world, ctx->store, w, NULL) == 0,
        "rendezvous: %s", mori_last_error());
  return 0;
}

static inline int put_word(mori_window *w, int owner, int index, uint32_t v) {
  uint32_t *p = (uint32_t *)mori_window_buffer_ptrs(w)[owner] + index;
  return mori_hipMemcpy(p, &v, 4, hipMemcpyHostToDevice) == hipSuccess ? 0 : -1;
}

static inline uint32_t get_word(mori_window *w, int owner, int index) {
  uint32_t v = 0xdeadbeef;
  (void)mori_hipMemcpy(&v, (uint32_t *)mori_window_buffer_ptrs(w)[owner] + index, 4,
                       hipMemcpyDeviceToHost);
  return v;
}

/* Round i: every rank writes i into its own word, passes a barrier, and
 * must then read i from every peer; a second barrier keeps the next round's
 * write behind every read.  Rank 0 is late now and then, so a barrier that
 * lets anyone through early is seen. */
static inline int ordered_rounds(const mori_rank_ctx *ctx, mori_window *w, int ch, int rounds,
                                 char *msg, size_t msglen) {
  for (int i = 1; i <= rounds; i++) {
    if (ctx->rank == 0 && i % 16 == 0) sleep_ms(5);
    CHECK(put_word(w, ctx->rank, 0, (uint32_t)i) == 0, "write: %s", mori_shim_message());
    CHECK(mori_window_barrier(w, ch, NULL, 0) == 0, "barrier %d: %s", i, mori_last_error());
    CHECK(mori_hipStreamSynchronize(NULL) == hipSuccess, "sync: %s", mori_shim_message());
    for (int p = 0; p < ctx->world; p++)
      CHECK(get_word(w, p, 0) == (uint32_t)i, "round %d: rank %d's word is %u", i, p,
            get_word(w, p, 0));
    CHECK(mori_window_barrier(w, ch, NULL, 0) == 0, "barrier %d': %s", i, mori_last_error());
  }
  return 0;
}

#endif
