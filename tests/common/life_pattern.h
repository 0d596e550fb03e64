/*
 * life_pattern.h - a rank's data tied to its rank and its life (0 for a
 * rank's first process, n for its n-th replacement), for the tests of the
 * heal: each buffer holds LIFE_PATTERN_WORDS words of it from word 16 on
 * (word 0 and after are the signal rounds' words), written and read back
 * through the public copies, as a C user moves data.
 */
#ifndef MORI_TEST_LIFE_PATTERN_H
#define MORI_TEST_LIFE_PATTERN_H

#include <stdint.h>

#include "mori/symm.h"

#define LIFE_PATTERN_WORDS 64
#define LIFE_PATTERN_FIRST 16

static inline uint32_t life_pattern(int rank, int life, int i) {
  return 0xa5000000u ^ (uint32_t)(life << 20) ^ (uint32_t)(rank << 12) ^ (uint32_t)i;
}

/* 0, or the copy's error. */
static inline int life_pattern_fill(void *base, int rank, int life) {
  uint32_t words[LIFE_PATTERN_WORDS];
  for (int i = 0; i < LIFE_PATTERN_WORDS; i++) words[i] = life_pattern(rank, life, i);
  return mori_symm_memcpy((uint32_t *)base + LIFE_PATTERN_FIRST, words, sizeof words);
}

/* 0, 1 + the first word of p that is not rank's pattern of life, or -1
 * if it could not be read. */
static inline int life_pattern_differs(const void *p, int rank, int life) {
  uint32_t words[LIFE_PATTERN_WORDS];
  if (mori_symm_memcpy(words, (const uint32_t *)p + LIFE_PATTERN_FIRST, sizeof words) != 0)
    return -1;
  for (int i = 0; i < LIFE_PATTERN_WORDS; i++)
    if (words[i] != life_pattern(rank, life, i)) return i + 1;
  return 0;
}

#endif
