/*
 * test_arena.c - the arena of the windows' device tables
 * (core/src/alloc/arena.c) on the sim, called directly: a full chunk is
 * passed over for a new one, so that no two takes overlap whatever the
 * count; runs of several slots fit where they fit; a slot given back is
 * taken again; a take larger than a
 * chunk is an allocation of its own; a pointer the arena did not hand out
 * is refused.  Most of this no public call reaches in a test
 * (a chunk holds 256 windows' tables, a block at most 8 windows).
 */
#include "mori_cmocka.h"

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
  };
  return mori_run_tests(argc, argv, tests);
}
