/*
 * test_arena.c - the arena of the windows' device tables
 * (core/src/alloc/arena.c) on the sim, called directly: a full chunk is
 * passed over for a new one, so that no two takes overlap whatever the
 * count; runs of several slots fit where they fit; a slot given back is
 * taken again; a take larger than a
 * chunk is an allocation of its own; a pointer the arena did not hand out
 * is refused; threads taking and giving at once never hold one slot
 * together (label tsan runs that case under ThreadSanitizer too); keeping
 * warm keeps one empty chunk, and trimming gives back only empty ones.  Most of
 * this no public call reaches in a test (a chunk holds 256 windows'
 * tables, a block at most 8 windows).
 */
#include "mori_cmocka.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "mori/hip_shim.h"

#define SLOTS 256 /* of a chunk: 64 KiB of 256-byte slots */
#define TAKES (SLOTS * 2 + 7)

typedef struct take {
  uintptr_t at;
  size_t n;
} take;

static int by_address(const void *a, const void *b) {
  uintptr_t x = ((const take *)a)->at, y = ((const take *)b)->at;
  return (x > y) - (x < y);
}

/* No two of the n takes overlap. */
static void assert_disjoint(take *t, int n) {
  take *sorted = malloc((size_t)n * sizeof *sorted);
  assert_non_null(sorted);
  memcpy(sorted, t, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, by_address);
  for (int i = 1; i < n; i++)
    if (sorted[i - 1].at + sorted[i - 1].n > sorted[i].at)
      fail_msg("takes overlap: %#lx+%zu and %#lx", (unsigned long)sorted[i - 1].at,
               sorted[i - 1].n, (unsigned long)sorted[i].at);
  free(sorted);
}

/* Two chunks and more, taken slot by slot (and some runs of three slots
 * among them), then given back: every take its own memory. */
static void full_chunks_are_passed_over(void **s) {
  (void)s;
  static take t[TAKES];
  for (int i = 0; i < TAKES; i++) {
    void *p = NULL;
    t[i].n = i % 5 == 4 ? 3 * 256 - 8 : 200;
    if (mori__arena_take(0, t[i].n, &p) != 0) fail_msg("take %d: %s", i, mori_last_error());
    t[i].at = (uintptr_t)p;
  }
  assert_disjoint(t, TAKES);
  for (int i = 0; i < TAKES; i++) assert_int_equal(mori__arena_give((void *)t[i].at), hipSuccess);
}

/* A take larger than a chunk, beside a slot's: both given back. */
static void a_take_larger_than_a_chunk_is_its_own(void **s) {
  (void)s;
  take t[2] = {{0, 200}, {0, 100 * 1024}};
  for (int i = 0; i < 2; i++) {
    void *p = NULL;
    assert_int_equal(mori__arena_take(0, t[i].n, &p), 0);
    t[i].at = (uintptr_t)p;
  }
  assert_disjoint(t, 2);
  for (int i = 0; i < 2; i++) assert_int_equal(mori__arena_give((void *)t[i].at), hipSuccess);
}

/* A slot given back is free again: the next take of its size gets it
 * (the first free run of a chunk), not a slot past every one ever taken. */
static void a_slot_given_back_is_taken_again(void **s) {
  (void)s;
  void *a = NULL, *b = NULL, *c = NULL;
  assert_int_equal(mori__arena_take(0, 200, &a), 0);
  assert_int_equal(mori__arena_take(0, 200, &b), 0);
  assert_int_equal(mori__arena_give(a), hipSuccess);
  assert_int_equal(mori__arena_take(0, 200, &c), 0);
  if (c != a) fail_msg("the freed slot %p was not taken again (got %p)", a, c);
  assert_int_equal(mori__arena_give(b), hipSuccess);
  assert_int_equal(mori__arena_give(c), hipSuccess);
}

/* A pointer the arena did not hand out is refused, and changes nothing. */
static void a_foreign_pointer_is_refused(void **s) {
  (void)s;
  void *p = NULL;
  int x = 0;
  assert_int_equal(mori__arena_take(0, 64, &p), 0);
  assert_int_equal(mori__arena_give(&x), hipErrorInvalidValue);
  assert_int_equal(mori__arena_give(p), hipSuccess);
}

/* Threads that take and give slots at once, with nothing but the arena's
 * lock between them: each holds three at a time, and before giving them
 * back checks that no other thread holds one of them (a shared list under
 * the test's own lock).  Under ThreadSanitizer a take or give outside the
 * arena's lock is a reported race. */
enum { THREADS = 4, ROUNDS = 2000, HOLD = 3 };
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t held[THREADS][HOLD];

static void *take_and_give(void *arg) {
  int me = (int)(intptr_t)arg;
  for (int r = 0; r < ROUNDS; r++) {
    void *p[HOLD] = {NULL};
    for (int i = 0; i < HOLD; i++)
      if (mori__arena_take(0, 200, &p[i]) != 0) return "take failed";
    pthread_mutex_lock(&held_lock);
    const char *why = NULL;
    for (int t = 0; t < THREADS && why == NULL; t++)
      for (int i = 0; t != me && i < HOLD; i++)
        for (int j = 0; j < HOLD; j++)
          if (held[t][i] != 0 && held[t][i] == (uintptr_t)p[j]) why = "a slot held by two threads";
    for (int i = 0; i < HOLD; i++) held[me][i] = (uintptr_t)p[i];
    pthread_mutex_unlock(&held_lock);
    if (why != NULL) return (void *)why;
    pthread_mutex_lock(&held_lock);
    for (int i = 0; i < HOLD; i++) held[me][i] = 0;
    pthread_mutex_unlock(&held_lock);
    for (int i = 0; i < HOLD; i++)
      if (mori__arena_give(p[i]) != hipSuccess) return "give refused";
  }
  return NULL;
}

static void takes_and_gives_on_threads(void **s) {
  (void)s;
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++)
    assert_int_equal(pthread_create(&th[t], NULL, take_and_give, (void *)(intptr_t)t), 0);
  const char *why = NULL;
  for (int t = 0; t < THREADS; t++) {
    void *r = NULL;
    assert_int_equal(pthread_join(th[t], &r), 0);
    if (r != NULL && why == NULL) why = r;
  }
  if (why != NULL) fail_msg("%s", why);
  /* and the arena is whole: a take still gets memory */
  void *p = NULL;
  assert_int_equal(mori__arena_take(0, 200, &p), 0);
  assert_int_equal(mori__arena_give(p), hipSuccess);
}

static long device_allocs(void) {
  mori_shim_registry_counts c;
  mori_shim_registry(&c);
  return c.device_allocs;
}

/* Keeping warm: a chunk whose last slot goes stays (one per device) and is
 * taken again without a new allocation, a chunk larger than a chunk's
 * size goes at once; mori__arena_trim gives back the empty ones only,
 * never a chunk a slot of which is still taken. */
static void keeping_warm_keeps_one_empty_chunk_and_trim_gives_back_only_empty_ones(void **s) {
  (void)s;
  void *a = NULL, *whole = NULL, *again = NULL;
  long n0 = device_allocs();
  mori_symm_set_keep_warm(1);
  assert_int_equal(mori__arena_take(0, 200, &a), 0);
  assert_int_equal(mori__arena_take(0, 100 * 1024, &whole), 0);
  assert_int_equal(device_allocs(), n0 + 2);
  assert_int_equal(mori__arena_give(a), hipSuccess);
  assert_int_equal(mori__arena_give(whole), hipSuccess);
  assert_int_equal(device_allocs(), n0 + 1); /* the chunk stays, the large one went */
  assert_int_equal(mori__arena_kept(), 1);
  assert_int_equal(mori__arena_take(0, 200, &again), 0);
  assert_int_equal(device_allocs(), n0 + 1);
  assert_ptr_equal(again, a);
  assert_int_equal(mori__arena_trim(), hipSuccess); /* its slot is taken: it stays */
  assert_int_equal(device_allocs(), n0 + 1);
  assert_int_equal(mori__arena_kept(), 0);
  assert_int_equal(mori__arena_give(again), hipSuccess);
  assert_int_equal(mori__arena_trim(), hipSuccess);
  assert_int_equal(device_allocs(), n0);
  assert_int_equal(mori__arena_kept(), 0);
  mori_symm_set_keep_warm(-1);
}

int main(int argc, char **argv) {
  if (mori_shim_select("sim") != 0) {
    fprintf(stderr, "sim shim: %s\n", mori_shim_message());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(full_chunks_are_passed_over),
      cmocka_unit_test(a_take_larger_than_a_chunk_is_its_own),
      cmocka_unit_test(a_slot_given_back_is_taken_again),
      cmocka_unit_test(a_foreign_pointer_is_refused),
      cmocka_unit_test(takes_and_gives_on_threads),
      cmocka_unit_test(keeping_warm_keeps_one_empty_chunk_and_trim_gives_back_only_empty_ones),
  };
  return mori_run_tests(argc, argv, tests);
}
