/*
 * read_all.h - what a run wrote, read back whole: a file (a trace, a count
 * file) or the pipe a child process writes into (its messages, up to its
 * exit), for tests that check it.
 */
#ifndef MORI_TEST_READ_ALL_H
#define MORI_TEST_READ_ALL_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The file at path, NUL-terminated (up to 1 MiB less one byte), its length
 * in *len; NULL if it cannot be read.  The caller frees it. */
static inline char *test_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  *len = 0;
  if (f == NULL) return NULL;
  char *buf = malloc(1 << 20);
  *len = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
  if (buf) buf[*len] = '\0';
  fclose(f);
  return buf;
}

/* Reads fd to its end (every writer gone) or until out is full, then
 * NUL-terminates; returns how many bytes it read. */
static inline size_t test_read_fd(int fd, char *out, size_t cap) {
  size_t n = 0;
  for (ssize_t k; n < cap - 1 && (k = read(fd, out + n, cap - 1 - n)) > 0;) n += (size_t)k;
  out[n] = '\0';
  return n;
}

#endif
