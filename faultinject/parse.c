/*
 * parse.c - the pieces faultinject's readers share (parse.h): pure
 * functions of their arguments, so they go wherever the parsers go (the
 * fault shim, the tools, the tests, the fuzz harnesses).
 */
#include "parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int mori_fi__fail(const mori_fi__cursor *c, const char *at, const char *fmt, ...) {
  if (c->err == NULL || c->errlen == 0) return -1;
  size_t column = (size_t)(at - c->line_start) + 1;
  int n = c->line > 0
              ? snprintf(c->err, c->errlen, "%sline %ld column %zu: ", c->prefix, c->line, column)
              : snprintf(c->err, c->errlen, "%scolumn %zu: ", c->prefix, column);
  if (n < 0 || (size_t)n >= c->errlen) return -1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
  va_end(ap);
  return -1;
}

int mori_fi__is(const char *s, size_t n, const char *word) {
  return strlen(word) == n && memcmp(s, word, n) == 0;
}

int mori_fi__starts(const char *s, size_t n, const char *prefix) {
  size_t k = strlen(prefix);
  return n > k && memcmp(s, prefix, k) == 0;
}

int mori_fi__u64(const char *s, size_t n, uint64_t *out) {
  uint64_t v = 0;
  int hex = n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  size_t i = hex ? 2 : 0;
  if (i == n) return -1;
  for (; i < n; i++) {
    int d;
    char ch = s[i];
    if (ch >= '0' && ch <= '9') d = ch - '0';
    else if (hex && ch >= 'a' && ch <= 'f') d = ch - 'a' + 10;
    else if (hex && ch >= 'A' && ch <= 'F') d = ch - 'A' + 10;
    else return -1;
    uint64_t base = hex ? 16 : 10;
    if (v > (UINT64_MAX - (uint64_t)d) / base) return -1;
    v = v * base + (uint64_t)d;
  }
  *out = v;
  return 0;
}

void *mori_fi__grow(void *array, size_t n, size_t *cap, size_t size, size_t first) {
  if (n < *cap) return array;
  size_t ncap = *cap ? *cap * 2 : first;
  void *grown = realloc(array, ncap * size);
  if (grown != NULL) *cap = ncap;
  return grown;
}

size_t mori_fi__msg_bytes(const struct msghdr *msg) {
  size_t n = 0;
  for (size_t i = 0; i < msg->msg_iovlen; i++) n += msg->msg_iov[i].iov_len;
  return n;
}

int mori_fi__msg_fds(const struct msghdr *msg, int *fds, int max) {
  int n = 0;
  for (struct cmsghdr *c = msg->msg_controllen ? CMSG_FIRSTHDR(msg) : NULL; c != NULL;
       c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k && n < max; i++, n++)
      memcpy(&fds[n], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
  }
  return n;
}
