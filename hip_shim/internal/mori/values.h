/*
 * values.h - the one strict reader of numbers and sizes, for the command
 * line (tools/args) and the environment (every MORI_* variable the
 * libraries read): digits only, no sign, space or base prefix a user did
 * not write, the units the help writes, range checked without wrapping.
 * It sits at the bottom (hip_shim/) so that hip_shim, core and the tools
 * use the same one; each links its own hidden copy (mori_values_obj).
 */
#ifndef MORI_VALUES_H
#define MORI_VALUES_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A whole number min..max: an optional '-' (out of range where min >= 0), then
 * digits and nothing else.  0, or -1 with why ("not a whole number
 * (accepted: 1 to 1024)", "out of range (accepted: ...)"). */
int mori_value_int(const char *text, long long min, long long max, long long *out, char *why,
                   size_t whylen);
/* A size in bytes min..max: digits, then nothing or one unit as the help
 * writes it (K, M, G, KiB, MiB, GiB, " bytes", " GiB" ...). */
int mori_value_size(const char *text, long long min, long long max, long long *out, char *why,
                    size_t whylen);
/* Writes n as the help writes a size: "16 GiB", "3 bytes". */
void mori_value_format_size(long long n, char *buf, size_t len);

/* A version MAJOR.MINOR[.PATCH], each field digits only and at most
 * max[i] (no sign, no wrap): 0 with field[] set (PATCH 0 if absent), or -1
 * with why. */
int mori_value_version(const char *text, const long long max[3], int field[3], char *why,
                       size_t whylen);

/* The environment variable name read by mori_value_int / mori_value_size:
 * unset or empty gives dflt; a value that does not parse is -1 with why
 * naming the variable, the value and what is accepted
 * ("MORI_SIM_DEVICES=+8: not a whole number (accepted: 1 to 1024)"). */
int mori_env_int(const char *name, long long min, long long max, long long dflt, long long *out,
                 char *why, size_t whylen);
int mori_env_size(const char *name, long long min, long long max, long long dflt, long long *out,
                  char *why, size_t whylen);

#ifdef __cplusplus
}
#endif
#endif
