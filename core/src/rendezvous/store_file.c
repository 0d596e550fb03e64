/*
 * store_file.c - the store as a directory of files, one per key, for the CLI
 * and the multi-process tests.  The directory is verified once (trust.c)
 * and then used only through its fd.  Readers only ever see whole values:
 * set writes a private temp file and renames it over the key; add
 * serialises read-modify-write with an flock on a lock file beside the key.
 * Nothing in the directory is believed: an entry is read only if it is a
 * regular file no larger than any valid value.  Waits sleep on inotify.
 */
#include "rendezvous.h"
#include "mori/error_internal.h"
#include "mori/sha256.h"
#include "mori/store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A key's file name must leave room in NAME_MAX for the ".lock-" prefix. */
#define KEY_NAME_MAX 240
/* An encoding longer than KEY_NAME_MAX is named by its first bytes (for
 * whoever lists the directory), '~' (never in an encoding: it would be
 * %7E) and the key's SHA-256 in hex: KEY_NAME_MAX bytes in all. */
#define KEY_DIGEST_HEX (2 * MORI_SHA256_SIZE)
#define KEY_SHOWN (KEY_NAME_MAX - 1 - KEY_DIGEST_HEX)
/* Without inotify, get sleeps between attempts, doubling from the first
 * (most keys are nearly there) up to the longest (a late key's latency). */
#define POLL_START_US 50.0
#define POLL_MAX_US 1000.0
/* With inotify, a wait still wakes this often: an event can be lost when
 * the kernel's queue overflows, and a store on a network filesystem sees
 * no events for other hosts' writes. */
#define WATCH_SLICE_MS 4

typedef struct file_store {
  mori_store base; /* first: the public view */
  int dir;         /* the verified directory; every access is relative to it */
  int watch;       /* inotify on dir (renames into it); -1: sleep between attempts */
  char path[PATH_MAX]; /* for messages */
} file_store;

/* Temp names must not collide across threads or processes sharing dir. */
static atomic_ulong temp_counter;

/* Keys become single file names: every byte outside [A-Za-z0-9_-] (and a
 * leading '.') is written %XX, so "a/b" cannot make a subdirectory, ".." and
 * "." cannot escape or alias, and no key name starts with '.', which keeps
 * temp and lock files out of the key space.  An encoding too long for a
 * file name is shortened by a digest of the whole key, after a '~' that no
 * encoding holds: two keys share a name only if SHA-256 collides. */
static int key_is_plain(unsigned char c, size_t at) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 1;
  return c == '_' || c == '-' || (c == '.' && at > 0);
}

/* key's encoding into enc (3 * MORI_STORE_KEY_MAX + 1 bytes); its length. */
static size_t key_encode(const char *key, char *enc) {
  static const char hex[] = "0123456789ABCDEF";
  size_t n = 0;
  for (size_t i = 0; key[i]; i++) {
    unsigned char c = (unsigned char)key[i];
    if (key_is_plain(c, i)) {
      enc[n++] = (char)c;
    } else {
      enc[n++] = '%';
      enc[n++] = hex[c >> 4];
      enc[n++] = hex[c & 15];
    }
  }
  enc[n] = '\0';
  return n;
}

/* <prefix><key's name> into out, whose cap leaves KEY_NAME_MAX bytes for
 * the name after the prefix (and its NUL).  Any key of 1 to
 * MORI_STORE_KEY_MAX bytes has one; a longer key is refused. */
static int key_name(const char *key, const char *prefix, char *out, size_t cap) {
  char enc[3 * MORI_STORE_KEY_MAX + 1];
  uint8_t digest[MORI_SHA256_SIZE];
  if (!key || !*key) return mori__error(MORI_EINVAL, "file store: empty key");
  size_t bytes = strnlen(key, MORI_STORE_KEY_MAX + 1);
  if (bytes > MORI_STORE_KEY_MAX)
    return mori__error(MORI_EINVAL,
                       "file store: key '%.80s...' is %zu bytes, more than any store takes "
                       "(MORI_STORE_KEY_MAX, %d)",
                       key, strlen(key), MORI_STORE_KEY_MAX);
  size_t n = key_encode(key, enc);
  if (n <= KEY_NAME_MAX) {
    snprintf(out, cap, "%s%s", prefix, enc);
    return 0;
  }
  mori__sha256(key, bytes, digest);
  int k = snprintf(out, cap, "%s%.*s~", prefix, KEY_SHOWN, enc);
  for (int i = 0; i < MORI_SHA256_SIZE; i++)
    k += snprintf(out + k, cap - (size_t)k, "%02x", digest[i]);
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
static int publish(file_store *fs, const char *key, const char *name, const void *value,
                   size_t len) {
  char tmp[64];
  snprintf(tmp, sizeof tmp, ".tmp-%ld-%lu", (long)getpid(), atomic_fetch_add(&temp_counter, 1));
  int fd = mori__openat(fs->dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return mori__error(MORI_EIO, "file store: set '%s': open(%s/%s): %s", key, fs->path, tmp,
                       strerror(errno));
  const char *failed = NULL;
  if (write_all(fd, value, len) != 0) failed = "write";
  int err = errno;
  /* the fd is closed either way; EINTR only interrupted the flush of a
   * file that rename is about to publish whole or not at all */
  if (mori_close(fd) != 0 && errno != EINTR && !failed) failed = "close", err = errno;
  if (!failed && mori_renameat(fs->dir, tmp, fs->dir, name) != 0) failed = "rename", err = errno;
  if (!failed) return 0;
  mori__unlinkat(fs->dir, tmp, 0);
  return mori__error(MORI_EIO, "file store: set '%s': %s(%s/%s -> %s): %s", key, failed,
                     fs->path, tmp, name, strerror(err));
}

static int fs_set(mori_store *s, const char *key, const void *value, size_t len) {
  file_store *fs = (file_store *)s;
  char name[KEY_NAME_MAX + 1];
  MORI_GUARD(key_name(key, "", name, sizeof name));
  if (!value && len) return mori__error(MORI_EINVAL, "file store: set '%s': NULL value", key);
  if (len > MORI_STORE_VALUE_MAX)
    return mori__error(MORI_ERANGE, "file store: set '%s': %zu bytes, more than any entry (%d)",
                       key, len, MORI_STORE_VALUE_MAX);
  return publish(fs, key, name, value, len);
}

/* ---- reading an entry that anyone of our uid could have planted ---- */

/* 1 if name is absent; 0 with *fd open on it; < 0 if it is there but is
 * no entry (a symlink, a socket ...).  O_NONBLOCK: opening a FIFO must
 * not wait for a writer; O_NOCTTY: a terminal must not become ours. */
static int open_entry(file_store *fs, const char *op, const char *key, const char *name,
                      int flags, int *fd) {
  *fd = mori__openat(fs->dir, name, flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
  if (*fd >= 0) return 0;
  if (errno == ENOENT) return 1;
  if (errno == ELOOP)
    return mori__error(MORI_EPROTO, "file store: %s '%s': %s/%s is a symlink, not a regular file",
                       op, key, fs->path, name);
  if (errno == ENXIO || errno == EISDIR)
    return mori__error(MORI_EPROTO, "file store: %s '%s': %s/%s is not a regular file (open: %s)",
                       op, key, fs->path, name, strerror(errno));
  return mori__error(MORI_EIO, "file store: %s '%s': open(%s/%s): %s", op, key, fs->path, name,
                     strerror(errno));
}

/* What fstat says of an opened entry: a regular file of at most
 * MORI_STORE_VALUE_MAX bytes, or an error naming what it is instead. */
static int check_entry(file_store *fs, int fd, const char *op, const char *key, const char *name,
                       struct stat *st) {
  if (mori_fstat(fd, st) != 0)
    return mori__error(MORI_EIO, "file store: %s '%s': fstat(%s/%s): %s", op, key, fs->path, name,
                       strerror(errno));
  if (!S_ISREG(st->st_mode))
    return mori__error(MORI_EPROTO, "file store: %s '%s': %s/%s is a %s, not a regular file", op,
                       key, fs->path, name, mori__file_type(st->st_mode));
  if (st->st_size > MORI_STORE_VALUE_MAX)
    return mori__error(MORI_EPROTO,
                       "file store: %s '%s': %s/%s is %lld bytes, more than any entry (%d)", op,
                       key, fs->path, name, (long long)st->st_size, MORI_STORE_VALUE_MAX);
  return 0;
}

/* The whole entry into a malloc'd buffer with a NUL after the last byte
 * (not counted in len), so that integer values parse in place. */
static int read_entry(file_store *fs, int fd, const char *op, const char *key, const char *name,
                      void **value, size_t *len) {
  struct stat st;
  MORI_GUARD(check_entry(fs, fd, op, key, name, &st));
  size_t cap = (size_t)st.st_size, n = 0;
  char *buf = mori_malloc(cap + 1);
  if (!buf) return mori__nomem("file store: %s '%s': %zu bytes", op, key, cap + 1);
  while (n < cap) { /* never past the size fstat gave, whatever is appended */
    ssize_t r = mori_read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      free(buf);
      return mori__error(MORI_EIO, "file store: %s '%s': read: %s", op, key, strerror(err));
    }
    if (r == 0) break; /* a published file never shrinks; stay safe anyway */
    n += (size_t)r;
  }
  buf[n] = '\0';
  *value = buf;
  *len = n;
  return 0;
}

/* 1 if absent; 0 with the value; < 0 on error. */
static int try_get(file_store *fs, const char *op, const char *key, const char *name,
                   void **value, size_t *len) {
  int fd, rc = open_entry(fs, op, key, name, O_RDONLY, &fd);
  if (rc != 0) return rc;
  rc = read_entry(fs, fd, op, key, name, value, len);
  mori_close(fd);
  return rc;
}

/* ---- waiting ---- */

/* Empties the inotify queue: what changed does not matter, only that
 * something did (the caller looks again). */
static void drain_watch(file_store *fs) {
  char events[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
  while (mori_read(fs->watch, events, sizeof events) > 0) {
  }
}

static int wait_for_event(file_store *fs, int timeout_ms) {
  struct pollfd p = {fs->watch, POLLIN, 0};
  if (mori_poll(&p, 1, timeout_ms) < 0 && errno != EINTR)
    return mori__error(MORI_EIO, "file store: poll(inotify on %s): %s", fs->path, strerror(errno));
  drain_watch(fs);
  return 0;
}

static int fs_wait_change(mori_store *s, int timeout_ms) {
  file_store *fs = (file_store *)s;
  if (timeout_ms < 0) timeout_ms = 0;
  if (fs->watch >= 0)
    return wait_for_event(fs, timeout_ms < WATCH_SLICE_MS ? timeout_ms : WATCH_SLICE_MS);
  return mori__nap_us(timeout_ms < 1 ? timeout_ms * 1e3 : 1e3, "file store: wait");
}

static int fs_get(mori_store *s, const char *key, void **value, size_t *len, int timeout_ms) {
  file_store *fs = (file_store *)s;
  char name[KEY_NAME_MAX + 1], what[KEY_NAME_MAX + 32];
  if (!value || !len || timeout_ms < 0)
    return mori__error(MORI_EINVAL, "file store: get '%s': bad argument", key ? key : "");
  MORI_GUARD(key_name(key, "", name, sizeof name));
  snprintf(what, sizeof what, "file store: get '%s'", key);
  double deadline = -1, now = 0, sleep_us = POLL_START_US;
  /* The watch was set up when the store was opened, so a rename after a
   * failed attempt is always an event that ends the next wait.  The clock
   * is read only once a first attempt failed: most keys are there. */
  for (;;) {
    int rc = try_get(fs, "get", key, name, value, len);
    if (rc <= 0) return rc;
    if (timeout_ms > 0) MORI_GUARD(mori__clock_us(&now, what));
    if (deadline < 0) deadline = timeout_ms > 0 ? now + timeout_ms * 1e3 : 0;
    double left = timeout_ms > 0 ? deadline - now : 0;
    if (left <= 0)
      return mori__error(MORI_ETIMEDOUT, "file store: key '%s' not set within %d ms (in %s)",
                         key, timeout_ms, fs->path);
    if (fs->watch >= 0) {
      int ms = left < WATCH_SLICE_MS * 1e3 ? (int)((left + 999) / 1e3) : WATCH_SLICE_MS;
      MORI_GUARD(wait_for_event(fs, ms));
      continue;
    }
    MORI_GUARD(mori__nap_us(left < sleep_us ? left : sleep_us, what));
    sleep_us = sleep_us * 2 > POLL_MAX_US ? POLL_MAX_US : sleep_us * 2;
  }
}

/* ---- add ---- */

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

/* Under the lock: read, add, publish. */
static int add_locked(file_store *fs, const char *key, const char *name, int64_t delta,
                      int64_t *result) {
  int64_t v = 0;
  char text[32];
  void *buf = NULL;
  size_t len = 0;
  int rc = try_get(fs, "add", key, name, &buf, &len);
  if (rc < 0) return rc;
  if (rc == 0) {
    rc = parse_counter(key, buf, len, &v);
    free(buf);
    if (rc < 0) return rc;
  }
  if (__builtin_add_overflow(v, delta, &v))
    return mori__error(MORI_ERANGE, "file store: add '%s': %lld overflows", key,
                       (long long)delta);
  int n = snprintf(text, sizeof text, "%lld", (long long)v);
  MORI_GUARD(publish(fs, key, name, text, (size_t)n));
  if (result) *result = v;
  return 0;
}

static int fs_add(mori_store *s, const char *key, int64_t delta, int64_t *result) {
  file_store *fs = (file_store *)s;
  char name[KEY_NAME_MAX + 1], lock[KEY_NAME_MAX + 8];
  MORI_GUARD(key_name(key, "", name, sizeof name));
  MORI_GUARD(key_name(key, ".lock-", lock, sizeof lock));
  int fd, rc = open_entry(fs, "add", key, lock, O_RDWR | O_CREAT, &fd);
  if (rc == 1) rc = mori__error(MORI_EIO, "file store: add '%s': %s vanished", key, lock);
  if (rc != 0) return rc;
  struct stat st;
  rc = check_entry(fs, fd, "add", key, lock, &st);
  int locked;
  while (rc == 0 && (locked = mori_flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
  }
  if (rc == 0 && locked != 0)
    rc = mori__error(MORI_EIO, "file store: add '%s': flock(%s/%s): %s", key, fs->path, lock,
                     strerror(errno));
  if (rc == 0) rc = add_locked(fs, key, name, delta, result);
  mori_close(fd); /* drops the lock */
  return rc;
}

/* ---- remove ---- */

/* The key's entry and the lock file an add made beside it; an entry
 * already gone is no failure. */
static int fs_remove(mori_store *s, const char *key) {
  file_store *fs = (file_store *)s;
  char name[KEY_NAME_MAX + 1], lock[KEY_NAME_MAX + 8];
  MORI_GUARD(key_name(key, "", name, sizeof name));
  MORI_GUARD(key_name(key, ".lock-", lock, sizeof lock));
  const char *failed = mori__unlinkat(fs->dir, name, 0) != 0   ? name
                       : mori__unlinkat(fs->dir, lock, 0) != 0 ? lock
                                                                 : NULL;
  if (failed == NULL) return 0;
  return mori__error(MORI_EIO, "file store: remove '%s': unlinkat(%s/%s): %s", key, fs->path,
                     failed, strerror(errno));
}

/* ---- open / destroy ---- */

static void fs_destroy(mori_store *s) {
  file_store *fs = (file_store *)s;
  if (fs->watch >= 0) mori_close(fs->watch);
  mori_close(fs->dir);
  free(fs);
}

/* inotify on the directory we hold (named through /proc/self/fd, so the
 * watch is on the verified directory, not on whatever its path names
 * now).  Without it (no inotify, no /proc, out of watches) gets sleep
 * between attempts instead: slower, still bounded. */
static void watch_open(file_store *fs) {
  char self[64];
  fs->watch = mori_inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fs->watch < 0) {
    MORI_LOG(MORI_LOG_INFO, -1, -1, "file store %s: inotify_init1: %s; polling instead", fs->path,
             strerror(errno));
    return;
  }
  snprintf(self, sizeof self, "/proc/self/fd/%d", fs->dir);
  if (mori_inotify_add_watch(fs->watch, self, IN_MOVED_TO) < 0) {
    MORI_LOG(MORI_LOG_INFO, -1, -1, "file store %s: inotify_add_watch: %s; polling instead",
             fs->path, strerror(errno));
    mori_close(fs->watch);
    fs->watch = -1;
  }
}

int mori_file_store_open(const char *dir, mori_store **out) {
  if (!dir || !*dir || !out) return mori__error(MORI_EINVAL, "file store: no directory given");
  *out = NULL;
  if (strlen(dir) >= PATH_MAX - NAME_MAX - 2)
    return mori__error(MORI_EINVAL, "file store: directory name too long: %s", dir);
  file_store *fs = mori_calloc(1, sizeof *fs);
  if (!fs) return mori__nomem("file store: %zu bytes", sizeof *fs);
  int rc = mori_trusted_dir_open(dir, MORI_TRUST_CREATE, "file store", &fs->dir);
  if (rc < 0) {
    free(fs);
    return rc;
  }
  snprintf(fs->path, sizeof fs->path, "%s", dir);
  watch_open(fs);
  fs->base = (mori_store){fs_set, fs_get, fs_add, fs_destroy, fs_wait_change, NULL, fs_remove};
  *out = &fs->base;
  mori__seal_warm(); /* its entries will be sealed: libcrypto's start, now */
  return 0;
}
