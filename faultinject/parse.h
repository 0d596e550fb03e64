/*
 * parse.h - what the readers of faultinject/ are built of: a cursor that
 * reports a defect by its line and column, exact words and key prefixes,
 * unsigned numbers that never read past their end, and the growth of the
 * arrays they fill.  The schedule (schedule.c) and trace (trace.c) parsers
 * read with them; the fault shim grows its datagram queues and trace
 * symbols with them and reads a socket message's bytes and fds with them
 * on both sides (preload_dgram.c, preload_record.c).
 */
#ifndef MORI_FI_PARSE_H
#define MORI_FI_PARSE_H

#include <stddef.h>
#include <stdint.h>

struct msghdr;

/* Where a parser is, and where its defects are reported.  A schedule is one
 * line (line 0: its messages name the column alone); a trace counts lines
 * from 1. */
typedef struct mori_fi__cursor {
  const char *p, *end;
  const char *line_start; /* columns count from here */
  long line;
  const char *prefix;     /* what every message starts with ("MORI_FI: ", "") */
  char *err;
  size_t errlen;
} mori_fi__cursor;

/* Writes "<prefix>[line L ]column C: <message>", C being at's column, into
 * the cursor's err (if it has one).  Returns -1, what a parser returns for
 * a defect. */
int mori_fi__fail(const mori_fi__cursor *c, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* 1 if [s, s + n) is word exactly. */
int mori_fi__is(const char *s, size_t n, const char *word);

/* 1 if [s, s + n) starts with prefix and goes on past it ("rc=" and its
 * value, "# rank " and its number). */
int mori_fi__starts(const char *s, size_t n, const char *prefix);

/* An unsigned decimal, or 0x hex, filling all of [s, s + n).  0, or -1 if
 * it is not one or does not fit in 64 bits. */
int mori_fi__u64(const char *s, size_t n, uint64_t *out);

/* Room for one more element in array, which holds n of *cap elements of
 * size bytes each: a full array doubles (an empty one gets first).
 * Returns the array to use from now on, or NULL (out of memory) with the
 * array and *cap as they were. */
void *mori_fi__grow(void *array, size_t n, size_t *cap, size_t size, size_t first);

/* The bytes msg's iovecs hold. */
size_t mori_fi__msg_bytes(const struct msghdr *msg);

/* The fds msg's SCM_RIGHTS messages carry, in order, at most max of them
 * copied to fds (the rest are neither copied nor closed); returns how many. */
int mori_fi__msg_fds(const struct msghdr *msg, int *fds, int max);

#endif
