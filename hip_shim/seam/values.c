/*
 * values.c - strict numbers and sizes (mori/values.h): a value is taken
 * whole or refused with what would be accepted; nothing is guessed (no
 * atoi, no strtol's leading space, sign or base prefix, no trailing
 * garbage, no wrap).
 */
#include "mori/values.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 19 digits hold any long long; a 20th could wrap the number around. */
#define DIGITS_MAX 19

/* The digits at *p (advanced past them) as v; how many, or -1 past 19. */
static int digits_of(const char **p, unsigned long long *v) {
  int n = 0;
  *v = 0;
  for (; **p >= '0' && **p <= '9'; (*p)++) {
    if (++n > DIGITS_MAX) return -1;
    *v = *v * 10 + (unsigned)(**p - '0');
  }
  return n;
}

int mori_value_int(const char *text, long long min, long long max, long long *out, char *why,
                   size_t whylen) {
  const char *p = text;
  int negative = *p == '-'; /* a sign is read, then refused by the range */
  p += negative;
  unsigned long long v;
  int n = digits_of(&p, &v);
  if (n == 0 || (n > 0 && *p != '\0')) {
    snprintf(why, whylen, "not a whole number (accepted: %lld to %lld)", min, max);
    return -1;
  }
  /* v < 10^19 fits in an unsigned long long; LLONG_MAX + 1 is LLONG_MIN's size */
  if (n < 0 || v > (unsigned long long)LLONG_MAX + (unsigned)negative) {
    snprintf(why, whylen, "out of range (accepted: %lld to %lld)", min, max);
    return -1;
  }
  long long x = negative ? (long long)(0 - v) : (long long)v;
  if (x < min || x > max) {
    snprintf(why, whylen, "out of range (accepted: %lld to %lld)", min, max);
    return -1;
  }
  *out = x;
  return 0;
}

/* One spelling per unit: the suffixes a size may carry, and nothing else.
 * The spaced ones are how mori_value_format_size writes a size ("16 GiB",
 * "1 byte"), so that a size copied from a help text or a message is taken. */
static const struct {
  const char *suffix;
  long long scale;
} size_units[] = {
    {"", 1},
    {"K", 1LL << 10}, {"M", 1LL << 20}, {"G", 1LL << 30},
    {"KiB", 1LL << 10}, {"MiB", 1LL << 20}, {"GiB", 1LL << 30},
    {" byte", 1}, {" bytes", 1},
    {" KiB", 1LL << 10}, {" MiB", 1LL << 20}, {" GiB", 1LL << 30},
};
#define SIZE_UNITS_TEXT "a whole number of bytes, optionally with K, M, G, KiB, MiB or GiB"

void mori_value_format_size(long long n, char *buf, size_t len) {
  static const struct {
    const char *name;
    long long scale;
  } units[] = {{"GiB", 1LL << 30}, {"MiB", 1LL << 20}, {"KiB", 1LL << 10}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (n != 0 && n % units[i].scale == 0) {
      snprintf(buf, len, "%lld %s", n / units[i].scale, units[i].name);
      return;
    }
  snprintf(buf, len, "%lld byte%s", n, n == 1 ? "" : "s");
}

int mori_value_size(const char *text, long long min, long long max, long long *out, char *why,
                    size_t whylen) {
  char lo[32], hi[32];
  mori_value_format_size(min, lo, sizeof lo);
  mori_value_format_size(max, hi, sizeof hi);
  const char *p = text;
  unsigned long long v;
  int n = digits_of(&p, &v);
  if (n < 0) {
    snprintf(why, whylen, "out of range (accepted: %s to %s)", lo, hi);
    return -1;
  }
  if (n == 0) {
    snprintf(why, whylen, "not a size (accepted: " SIZE_UNITS_TEXT ", %s to %s)", lo, hi);
    return -1;
  }
  for (size_t i = 0; i < sizeof size_units / sizeof size_units[0]; i++) {
    if (strcmp(p, size_units[i].suffix) != 0) continue;
    long long scale = size_units[i].scale;
    if (v > (unsigned long long)(LLONG_MAX / scale) || (long long)v * scale < min ||
        (long long)v * scale > max) {
      snprintf(why, whylen, "out of range (accepted: %s to %s)", lo, hi);
      return -1;
    }
    *out = (long long)v * scale;
    return 0;
  }
  snprintf(why, whylen, "unknown unit '%s' (accepted: " SIZE_UNITS_TEXT ", %s to %s)", p, lo,
           hi);
  return -1;
}

typedef int (*parser)(const char *, long long, long long, long long *, char *, size_t);

static int env_value(parser parse, const char *name, long long min, long long max,
                     long long dflt, long long *out, char *why, size_t whylen) {
  const char *v = getenv(name);
  if (v == NULL || *v == '\0') {
    *out = dflt;
    return 0;
  }
  char detail[160];
  if (parse(v, min, max, out, detail, sizeof detail) == 0) return 0;
  /* the value as the user set it, bounded; control bytes shown as '?' */
  char shown[72];
  size_t n = 0;
  for (; v[n] && n < sizeof shown - 4; n++)
    shown[n] = (unsigned char)v[n] < 0x20 || (unsigned char)v[n] >= 0x7f ? '?' : v[n];
  snprintf(shown + n, sizeof shown - n, "%s", v[n] ? "..." : "");
  snprintf(why, whylen, "%s=%s: %s", name, shown, detail);
  return -1;
}

int mori_env_int(const char *name, long long min, long long max, long long dflt, long long *out,
                 char *why, size_t whylen) {
  return env_value(mori_value_int, name, min, max, dflt, out, why, whylen);
}

int mori_env_size(const char *name, long long min, long long max, long long dflt, long long *out,
                  char *why, size_t whylen) {
  return env_value(mori_value_size, name, min, max, dflt, out, why, whylen);
}

int mori_value_version(const char *text, const long long max[3], int field[3], char *why,
                       size_t whylen) {
  const char *p = text;
  int n = 0;
  field[0] = field[1] = field[2] = 0;
  while (n < 3) {
    char one[24], detail[96];
    size_t len = strcspn(p, ".");
    long long v;
    if (len >= sizeof one) len = sizeof one - 1; /* the reader refuses what is cut */
    memcpy(one, p, len);
    one[len] = '\0';
    if (mori_value_int(one, 0, max[n], &v, detail, sizeof detail) != 0 ||
        strcspn(p, ".") != len) {
      snprintf(why, whylen, "version field %d '%s': %s", n + 1, one,
               strcspn(p, ".") != len ? "too long" : detail);
      return -1;
    }
    field[n++] = (int)v;
    p += len;
    if (*p == '\0') break;
    p++; /* the '.' */
  }
  if (n < 2 || *p != '\0') {
    snprintf(why, whylen, "not MAJOR.MINOR[.PATCH]");
    return -1;
  }
  return 0;
}
