/*
 * fi_internal.h - what the files of faultinject/ share beyond fi.h: the
 * names a trace gives to enum values, and the spec walker both the trace
 * writer and the trace parser use.
 */
#ifndef MORI_FI_INTERNAL_H
#define MORI_FI_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "mori/fi.h"

/* Names for hipMemAllocationHandleType, hipMemAllocationType and
 * hipMemAccessFlags in trace lines; NULL for values without one (a trace
 * then writes the number). */
const char *mori_fi__handle_type_name(int v);
const char *mori_fi__alloc_type_name(int v);
const char *mori_fi__access_name(int v);
int mori_fi__handle_type_find(const char *s, size_t n, int *v);
int mori_fi__alloc_type_find(const char *s, size_t n, int *v);
int mori_fi__access_find(const char *s, size_t n, int *v);

/* One "key:kind" of a spec. */
typedef struct mori_fi__param {
  char key[16];
  char kind;
} mori_fi__param;

/* Splits a call's spec into its parameters (all of them, '-' kinds too);
 * returns how many (at most MORI_FI_TRACE_ARGS). */
int mori_fi__spec_params(int call, mori_fi__param *out);

/* 1 if calls.c lists the errors call can return (a test checks them all). */
int mori_fi__call_errors_filled(int call);

/* Creates (or overwrites) a file the fault shim or a tool writes: mode
 * 0600, no link followed, no FIFO waited on; an existing name is
 * overwritten only if it is a regular file of this euid with one link.
 * Returns the fd (O_WRONLY, O_NONBLOCK, O_CLOEXEC), or -1 with err naming
 * the path and what is wrong with it. */
int mori_fi__create_output(const char *path, char *err, size_t errlen);

#endif
