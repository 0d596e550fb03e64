/*
 * store_file.c - the store as a directory of files, one per key, for the CLI
 * and the multi-process tests.  Readers only ever see whole values: set
 * writes a private temp file and renames it over the key; add serialises
 * read-modify-write with an flock on a lock file beside the key.
 */
#include "internal.h"
#include "mori/error.h"
#include "mori/store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* An encoded key must leave room in NAME_MAX for the ".lock-" prefix. */
#define KEY_NAME_MAX 240
#define POLL_START_NS 50000L    /* first sleep of get: most keys are nearly there */
#define POLL_MAX_NS 1000000L    /* longest sleep: bounds the latency of a late key */

typedef struct file_store {
  mori_store base; /* first: the public view */
  char dir[PATH_MAX];
} file_store;

/* Temp names must not collide across threads or processes sharing dir. */
static atomic_ulong temp_counter;

/* Keys become single file names: every byte outside [A-Za-z0-9_-] (and a
 * leading '.') is written %XX, so "a/b" cannot make a subdirectory, ".." and
 * "." cannot escape or alias, and no key name starts with '.', which keeps
 * temp and lock files out of the key space. */
static int key_is_plain(unsigned char c, size_t at) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 1;
  return c == '_' || c == '-' || (c == '.' && at > 0);
}

static int encode_key(const char *key, char *out, size_t cap) {
  static const char hex[] = "0123456789ABCDEF";
  size_t n = 0;
  if (!key || !*key) return mori__error(MORI_EINVAL, "file store: empty key");
  for (size_t i = 0; key[i]; i++) {
    unsigned char c = (unsigned char)key[i];
    if (n + 4 > cap)
      return mori__error(MORI_EINVAL, "file store: key '%s' is too long (encoded > %zu bytes)",
                         key, cap - 1);
    if (key_is_plain(c, i)) {
      out[n++] = (char)c;
    } else {
      out[n++] = '%';
      out[n++] = hex[c >> 4];
      out[n++] = hex[c & 15];
    }
  }
  out[n] = '\0';
  return 0;
}

/* dir/<prefix><encoded key> */
static int key_path(const file_store *fs, const char *key, const char *prefix, char *out) {
  char name[KEY_NAME_MAX + 1];
  MORI_GUARD(encode_key(key, name, sizeof name));
  snprintf(out, PATH_MAX, "%s/%s%s", fs->dir, prefix, name);
  return 0;
}

static int write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = mori_write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Readers open either the old file or the new one, never a partial one.
 * No fsync: the store lives for one job and need not survive a crash. */
static int publish(file_store *fs, const char *key, const char *path, const void *value,
                   size_t len) {
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-%lu", fs->dir, (long)getpid(),
           atomic_fetch_add(&temp_counter, 1));
  int fd = mori_openat(AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return mori__error(MORI_EIO, "file store: set '%s': open(%s): %s", key, tmp, strerror(errno));
  const char *failed = NULL;
  if (write_all(fd, value, len) != 0) failed = "write";
  int err = errno;
  if (mori_close(fd) != 0 && !failed) failed = "close", err = errno;
  if (!failed && mori_renameat(AT_FDCWD, tmp, AT_FDCWD, path) != 0) failed = "rename", err = errno;
  if (!failed) return 0;
  mori_unlinkat(AT_FDCWD, tmp, 0);
  return mori__error(MORI_EIO, "file store: set '%s': %s(%s -> %s): %s", key, failed, tmp, path,
                     strerror(err));
}

static int fs_set(mori_store *s, const char *key, const void *value, size_t len) {
  file_store *fs = (file_store *)s;
  char path[PATH_MAX];
  MORI_GUARD(key_path(fs, key, "", path));
  if (!value && len) return mori__error(MORI_EINVAL, "file store: set '%s': NULL value", key);
  return publish(fs, key, path, value, len);
}

/* Reads a whole file into a malloc'd buffer with a NUL after the last byte
 * (not counted in len), so integer values parse in place. */
static int read_whole(int fd, const char *key, void **value, size_t *len) {
  struct stat st;
  if (mori_fstat(fd, &st) != 0)
    return mori__error(MORI_EIO, "file store: get '%s': fstat: %s", key, strerror(errno));
  size_t cap = (size_t)st.st_size, n = 0;
  char *buf = mori_malloc(cap + 1);
  if (!buf) return mori__error(MORI_ENOMEM, "file store: get '%s': %zu bytes", key, cap + 1);
  while (n < cap) {
    ssize_t r = mori_read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      free(buf);
      return mori__error(MORI_EIO, "file store: get '%s': read: %s", key, strerror(err));
    }
    if (r == 0) break; /* a file never shrinks after rename; stay safe anyway */
    n += (size_t)r;
  }
  buf[n] = '\0';
  *value = buf;
  *len = n;
  return 0;
}

static long long now_ns(void) { return (long long)(mori__now_us() * 1e3); }

static int fs_get(mori_store *s, const char *key, void **value, size_t *len, int timeout_ms) {
  file_store *fs = (file_store *)s;
  char path[PATH_MAX];
  if (!value || !len || timeout_ms < 0)
    return mori__error(MORI_EINVAL, "file store: get '%s': bad argument", key ? key : "");
  MORI_GUARD(key_path(fs, key, "", path));
  long long deadline = now_ns() + (long long)timeout_ms * 1000000LL;
  long sleep_ns = POLL_START_NS;
  for (;;) {
    int fd = mori_openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
    if (fd >= 0) {
      int rc = read_whole(fd, key, value, len);
      mori_close(fd);
      return rc;
    }
    if (errno != ENOENT)
      return mori__error(MORI_EIO, "file store: get '%s': open(%s): %s", key, path,
                         strerror(errno));
    long long left = deadline - now_ns();
    if (left <= 0)
      return mori__error(MORI_ETIMEDOUT, "file store: key '%s' not set within %d ms (in %s)",
                         key, timeout_ms, fs->dir);
    struct timespec ts = {0, left < sleep_ns ? (long)left : sleep_ns};
    nanosleep(&ts, NULL);
    if (sleep_ns < POLL_MAX_NS) sleep_ns = sleep_ns * 2 > POLL_MAX_NS ? POLL_MAX_NS : sleep_ns * 2;
  }
}

/* The value of an add key is a decimal integer, as in torch's stores. */
static int parse_counter(const char *key, const char *text, size_t len, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (len == 0 || end != text + len || errno == ERANGE)
    return mori__error(MORI_EINVAL, "file store: add '%s': stored value is not an integer", key);
  *out = v;
  return 0;
}

static int read_counter(const char *key, const char *path, int64_t *out) {
  int fd = mori_openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0 && errno == ENOENT) {
    *out = 0;
    return 0;
  }
  if (fd < 0)
    return mori__error(MORI_EIO, "file store: add '%s': open(%s): %s", key, path,
                       strerror(errno));
  void *buf;
  size_t len;
  int rc = read_whole(fd, key, &buf, &len);
  mori_close(fd);
  if (rc < 0) return rc;
  rc = parse_counter(key, buf, len, out);
  free(buf);
  return rc;
}

/* Under the lock: read, add, publish.  Called with the lock held. */
static int add_locked(file_store *fs, const char *key, const char *path, int64_t delta,
                      int64_t *result) {
  int64_t v = 0;
  char text[32];
  MORI_GUARD(read_counter(key, path, &v));
  if (__builtin_add_overflow(v, delta, &v))
    return mori__error(MORI_ERANGE, "file store: add '%s': %lld overflows", key,
                       (long long)delta);
  int n = snprintf(text, sizeof text, "%lld", (long long)v);
  MORI_GUARD(publish(fs, key, path, text, (size_t)n));
  if (result) *result = v;
  return 0;
}

static int fs_add(mori_store *s, const char *key, int64_t delta, int64_t *result) {
  file_store *fs = (file_store *)s;
  char path[PATH_MAX], lock[PATH_MAX];
  MORI_GUARD(key_path(fs, key, "", path));
  MORI_GUARD(key_path(fs, key, ".lock-", lock));
  int fd = mori_openat(AT_FDCWD, lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return mori__error(MORI_EIO, "file store: add '%s': open(%s): %s", key, lock,
                       strerror(errno));
  int rc;
  while ((rc = mori_flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
  }
  if (rc != 0)
    rc = mori__error(MORI_EIO, "file store: add '%s': flock(%s): %s", key, lock, strerror(errno));
  else
    rc = add_locked(fs, key, path, delta, result);
  mori_close(fd); /* drops the lock */
  return rc;
}

static void fs_destroy(mori_store *s) { free(s); }

/* mkdir -p, each new level 0700. */
static int make_dirs(const char *dir) {
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
    return mori__error(MORI_EINVAL, "file store: directory name too long: %s", dir);
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char c = *p;
    *p = '\0';
    if (mori_mkdirat(AT_FDCWD, path, 0700) != 0 && errno != EEXIST)
      return mori__error(MORI_EIO, "file store: mkdir(%s): %s", path, strerror(errno));
    if (c == '\0') break;
    *p = c;
  }
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return mori__error(MORI_EIO, "file store: %s is not a directory", dir);
  return 0;
}

int mori_file_store_open(const char *dir, mori_store **out) {
  if (!dir || !*dir || !out) return mori__error(MORI_EINVAL, "file store: no directory given");
  *out = NULL;
  MORI_GUARD(make_dirs(dir));
  file_store *fs = mori_calloc(1, sizeof *fs);
  if (!fs) return mori__error(MORI_ENOMEM, "file store: %zu bytes", sizeof *fs);
  if (snprintf(fs->dir, sizeof fs->dir, "%s", dir) > PATH_MAX - NAME_MAX - 2) {
    free(fs);
    return mori__error(MORI_EINVAL, "file store: directory name too long: %s", dir);
  }
  fs->base = (mori_store){fs_set, fs_get, fs_add, fs_destroy};
  *out = &fs->base;
  return 0;
}
