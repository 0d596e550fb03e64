/*
 * config.c - process-wide settings (signal pad, timeout, teardown,
 * overlapping devices), read from the environment and overridable by the
 * API, and the log sink:
 * MORI_SYMM_DEBUG=WARN|INFO|TRACE, every line prefixed with rank and window.
 * Any thread may read or set them: each is one atomic word.
 */
#include "base.h"
#include "mori/values.h"
#include "mori/version.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_size_t signal_pad_size = MORI_SYMM_DEFAULT_SIGNAL_PAD;
static atomic_int timeout_ms = -1;

void mori_symm_set_signal_pad_size(size_t bytes) {
  /* Cells are 32-bit; keep the pad a multiple of 16 like torch's. */
  atomic_store(&signal_pad_size, mori__round_up(bytes, 16));
}

size_t mori_symm_signal_pad_size(void) { return atomic_load(&signal_pad_size); }

void mori_symm_set_timeout_ms(int ms) { atomic_store(&timeout_ms, ms > 0 ? ms : -1); }

/* MORI_SYMM_TIMEOUT_MS by the strict reader: digits, 1 ms to a day. */
#define TIMEOUT_ENV "MORI_SYMM_TIMEOUT_MS"
#define TIMEOUT_DEFAULT 30000
#define TIMEOUT_MAX 86400000

int mori__timeout_env_check(void) {
  if (atomic_load(&timeout_ms) > 0) return 0; /* the API's timeout: the variable is not read */
  char why[256];
  long long v;
  if (mori_env_int(TIMEOUT_ENV, 1, TIMEOUT_MAX, TIMEOUT_DEFAULT, &v, why, sizeof why) != 0)
    return mori__error(MORI_EINVAL, "%s", why);
  return 0;
}

/* The library's switches take 0 or 1 (unset or empty: the default); any
 * other value fails the rendezvous naming it rather than reading as one
 * of the two ("true" and "yes" allowed nothing, "false" tore down). */
static const char *const switches[] = {"MORI_SYMM_TEARDOWN", "MORI_SYMM_ALLOW_OVERLAPPING_DEVICES",
                                       "MORI_SYMM_MEMOP_BATCH", "MORI_SYMM_REPLACEMENT",
                                       "MORI_SYMM_KEEP_WARM"};

int mori__env_switches_check(void) {
  for (size_t i = 0; i < sizeof switches / sizeof switches[0]; i++) {
    const char *v = getenv(switches[i]);
    if (v != NULL && *v != '\0' && strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
      char shown[4 * 32 + 48];
      return mori__error(MORI_EINVAL, "%s=%s: expected 0 or 1", switches[i],
                         mori__escape(shown, sizeof shown, v, strlen(v), 32));
    }
  }
  return 0;
}

/* A value the strict reader refuses fails the rendezvous that reads it
 * (mori__timeout_env_check); anything that asks only for the number gets
 * the default rather than a guess. */
int mori_symm_timeout_ms(void) {
  int set = atomic_load(&timeout_ms);
  if (set > 0) return set;
  char why[256];
  long long v;
  if (mori_env_int(TIMEOUT_ENV, 1, TIMEOUT_MAX, TIMEOUT_DEFAULT, &v, why, sizeof why) != 0)
    return TIMEOUT_DEFAULT;
  return (int)v;
}

/* -1: not set through the API, so the environment decides.  Atomic: the
 * torch adapter sets it from torch's own variable before a rendezvous that
 * another thread may be validating. */
static atomic_int allow_overlapping = -1;

void mori_symm_set_allow_overlapping_devices(int allow) {
  atomic_store(&allow_overlapping, allow < 0 ? -1 : allow != 0);
}

/* Read at every call, as torch reads TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES
 * at every rendezvous; only "1" allows, as in torch's check_env. */
int mori_symm_allow_overlapping_devices(void) {
  int v = atomic_load(&allow_overlapping);
  if (v >= 0) return v;
  const char *s = getenv("MORI_SYMM_ALLOW_OVERLAPPING_DEVICES");
  return s != NULL && strcmp(s, "1") == 0;
}

/* -1: the environment decides (MORI_SYMM_KEEP_WARM=1), read at each
 * decision; the torch adapter sets 1 unless the variable is set. */
static atomic_int keep_warm = -1;

void mori_symm_set_keep_warm(int keep) { atomic_store(&keep_warm, keep < 0 ? -1 : keep != 0); }

int mori_symm_keep_warm(void) {
  int v = atomic_load(&keep_warm);
  if (v >= 0) return v;
  const char *s = getenv("MORI_SYMM_KEEP_WARM");
  return s != NULL && strcmp(s, "1") == 0;
}

int mori_symm_teardown_enabled(void) {
  const char *s = getenv("MORI_SYMM_TEARDOWN");
  return !(s && strcmp(s, "0") == 0);
}

static const struct {
  const char *name;
  int level;
} log_levels[] = {{"WARN", MORI_LOG_WARN}, {"INFO", MORI_LOG_INFO}, {"TRACE", MORI_LOG_TRACE}};

int mori__log_level(void) {
  static atomic_int level = -1; /* threads racing to read it compute one value */
  int l = atomic_load(&level);
  if (l >= 0) return l;
  const char *s = getenv("MORI_SYMM_DEBUG");
  l = 0;
  for (size_t i = 0; s && i < sizeof log_levels / sizeof log_levels[0]; i++)
    if (strcasecmp(s, log_levels[i].name) == 0) l = log_levels[i].level;
  /* A misspelt level would otherwise leave the user without logs, silently;
   * the thread that stores the verdict first reports it, so once. */
  if (atomic_exchange(&level, l) == -1 && l == 0 && s != NULL && *s != '\0')
    fprintf(stderr, "mori-symm: MORI_SYMM_DEBUG=%s is not a level (WARN, INFO or TRACE): "
                    "logging stays off\n", s);
  return l;
}

int mori_symm_log_level(void) { return mori__log_level(); }

/* The first INFO or TRACE line of a process names the version first, as
 * NCCL_DEBUG=INFO's first line does; a forked rank is a process of its
 * own, so the mark is the pid that said it. */
static void say_version_once(int level) {
  static atomic_int said_by;
  int pid = (int)getpid();
  if (level < MORI_LOG_INFO || atomic_exchange(&said_by, pid) == pid) return;
  fprintf(stderr, "[mori-symm INFO] mori-symm %s (libmori_core.so, pid %d)\n",
          mori_symm_version(), pid);
}

/* One line: "[mori-symm LEVEL <subject>] message". */
static void vlog(int level, const char *subject, const char *fmt, va_list ap) {
  char line[1024];
  say_version_once(level);
  int n = snprintf(line, sizeof line, "[mori-symm %s%s%s] ", log_levels[level - 1].name,
                   subject[0] ? " " : "", subject);
  vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  fprintf(stderr, "%s\n", line);
}

void mori__log(int level, int rank, long window, const char *fmt, ...) {
  char subject[64] = "";
  if (rank >= 0 && window >= 0) snprintf(subject, sizeof subject, "rank %d window %ld", rank, window);
  else if (rank >= 0) snprintf(subject, sizeof subject, "rank %d", rank);
  va_list ap;
  va_start(ap, fmt);
  vlog(level, subject, fmt, ap);
  va_end(ap);
}

/* A lifecycle in a state its table forbids is a bug in the core: said on
 * stderr whatever the log level ("[mori-symm WARN BUG] ..."), then abort(),
 * as libuv's asserts on a handle's flags do; going on would act on memory
 * whose owner the state no longer names. */
void mori__bug(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(MORI_LOG_WARN, "BUG", fmt, ap);
  va_end(ap);
  abort();
}

void mori__log_device(int level, int device, const char *fmt, ...) {
  char subject[32];
  snprintf(subject, sizeof subject, "device %d", device);
  va_list ap;
  va_start(ap, fmt);
  vlog(level, subject, fmt, ap);
  va_end(ap);
}

size_t mori__round_up(size_t n, size_t to) { return to ? (n + to - 1) / to * to : n; }

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* 32 hex digits of either case, or a UUID (dashes after the 8th, 12th,
 * 16th and 20th digit), and nothing else. */
static int host_id_parse(const char *text, uint8_t out[MORI_WIRE_HOST_ID_SIZE]) {
  size_t k = 0, n = strlen(text);
  int uuid = n == 36;
  if (n != 32 && !uuid) return -1;
  for (size_t i = 0; i < n; i++) {
    if (uuid && (i == 8 || i == 13 || i == 18 || i == 23)) {
      if (text[i] != '-') return -1;
      continue;
    }
    int v = hexval((unsigned char)text[i]);
    if (v < 0) return -1;
    out[k / 2] |= (uint8_t)(k % 2 ? v : v << 4);
    k++;
  }
  return 0;
}

/* A host id that silently read as zeros would make peers on one host look
 * like hosts apart, so a failure to read it is an error of its own. */
int mori__host_id(uint8_t out[MORI_WIRE_HOST_ID_SIZE]) {
  static const char path[] = "/proc/sys/kernel/random/boot_id";
  char text[64] = "";
  memset(out, 0, MORI_WIRE_HOST_ID_SIZE);
  const char *forced = getenv("MORI_SYMM_HOST_ID"); /* tests: pretend another host */
  if (forced && *forced == '\0') forced = NULL;
  if (forced) {
    snprintf(text, sizeof text, "%s", forced);
  } else {
    int fd;
    ssize_t n;
    fd = mori__openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return mori__error(MORI_EIO, "host id: openat(%s): %s", path, strerror(errno));
    while ((n = mori_read(fd, text, sizeof text - 1)) < 0 && errno == EINTR) {
    }
    int err = errno;
    mori_close(fd);
    if (n <= 0)
      return mori__error(MORI_EIO, "host id: read(%s): %s", path,
                         n < 0 ? strerror(err) : "empty file");
    text[n] = '\0';
  }
  size_t len = strlen(text);
  if (!forced && len > 0 && text[len - 1] == '\n') text[--len] = '\0';
  if (host_id_parse(text, out) != 0) {
    char shown[4 * 64 + 48];
    mori__escape(shown, sizeof shown, text, len, 64);
    memset(out, 0, MORI_WIRE_HOST_ID_SIZE);
    return forced ? mori__error(MORI_EINVAL,
                                "host id: MORI_SYMM_HOST_ID=%s: not a host id (accepted: 32 hex "
                                "digits, or a UUID 8-4-4-4-12 as the boot id is written)",
                                shown)
                  : mori__error(MORI_EIO, "host id: %s holds '%s', not a UUID", path, shown);
  }
  return 0;
}

const char *mori_symm_version(void) { return MORI_SYMM_VERSION_STRING; }
