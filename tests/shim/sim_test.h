/*
 * sim_test.h - helpers shared by the sim backend's tests: bring the sim up
 * from a chosen environment, assert a call failed with the rule named, build
 * a mapped window, and run code in a child process.
 */
#ifndef MORI_SIM_TEST_H
#define MORI_SIM_TEST_H

#include "mori_cmocka.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mori/hip_shim.h"

#define GRAN ((size_t)2 << 20)

/* Selects the sim with a fixed environment, so a developer's own MORI_SIM_*
 * settings cannot change what a test sees.  NULL unsets a variable. */
static inline void sim_start(const char *arch, const char *quirks, const char *timeout_ms) {
  const char *names[] = {"MORI_SIM_ARCH", "MORI_SIM_QUIRKS", "MORI_SIM_WAIT_TIMEOUT_MS"};
  const char *values[] = {arch, quirks, timeout_ms};
  for (int i = 0; i < 3; i++) {
    if (values[i] != NULL)
      setenv(names[i], values[i], 1);
    else
      unsetenv(names[i]);
  }
  unsetenv("MORI_SIM_DEVICES");
  unsetenv("MORI_SHIM_REGISTRY_REPORT");
  unsetenv("MORI_SHIM_LEDGER_REPORT");
  if (mori_shim_select("sim") != 0) {
    fprintf(stderr, "cannot start the sim: %s\n", mori_shim_message());
    exit(1);
  }
}

#define assert_hip_ok(expr)                                                                \
  do {                                                                                     \
    hipError_t e_ = (expr);                                                                \
    if (e_ != hipSuccess) {                                                                \
      print_error("%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #expr,                        \
                  mori_hipGetErrorName(e_), mori_shim_message());                          \
      fail();                                                                              \
    }                                                                                      \
  } while (0)

/* The call must fail with `want`, and mori_shim_message() must contain
 * `text` (the rule or quirk it broke). */
#define assert_fails_with(expr, want, text)                                                \
  do {                                                                                     \
    hipError_t e_ = (expr);                                                                \
    const char *m_ = mori_shim_message();                                                  \
    if (e_ != (want) || strstr(m_, (text)) == NULL) {                                      \
      print_error("%s:%d: %s returned %s with message \"%s\"; expected %s and \"%s\"\n",   \
                  __FILE__, __LINE__, #expr, mori_hipGetErrorName(e_), m_,                 \
                  mori_hipGetErrorName(want), (text));                                     \
      fail();                                                                              \
    }                                                                                      \
  } while (0)

#define assert_contains(haystack, needle)                                                  \
  do {                                                                                     \
    const char *h_ = (haystack);                                                           \
    if (h_ == NULL || strstr(h_, (needle)) == NULL) {                                      \
      print_error("%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,           \
                  h_ ? h_ : "(null)", (needle));                                           \
      fail();                                                                              \
    }                                                                                      \
  } while (0)

static inline hipMemAllocationProp sim_prop(hipMemAllocationHandleType type) {
  hipMemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = hipMemAllocationTypePinned;
  p.requestedHandleType = type;
  p.location.type = hipMemLocationTypeDevice;
  p.location.id = 0;
  return p;
}

static inline hipMemAccessDesc sim_access(hipMemAccessFlags flags) {
  hipMemAccessDesc d = {{hipMemLocationTypeDevice, 0}, flags};
  return d;
}

/* One allocation mapped read-write at the start of its own reservation. */
struct sim_window {
  hipMemGenericAllocationHandle_t handle;
  unsigned char *va;
  size_t size;
};

static inline void window_map(struct sim_window *w, hipMemGenericAllocationHandle_t h,
                              size_t size) {
  hipMemAccessDesc rw = sim_access(hipMemAccessFlagsProtReadWrite);
  void *va = NULL;
  w->handle = h;
  w->size = size;
  assert_hip_ok(mori_hipMemAddressReserve(&va, size, 0, NULL, 0));
  assert_hip_ok(mori_hipMemMap(va, size, 0, h, 0));
  assert_hip_ok(mori_hipMemSetAccess(va, size, &rw, 1));
  w->va = va;
}

static inline void window_open(struct sim_window *w, size_t size,
                               hipMemAllocationHandleType type) {
  hipMemAllocationProp prop = sim_prop(type);
  hipMemGenericAllocationHandle_t h = NULL;
  assert_hip_ok(mori_hipMemCreate(&h, size, &prop, 0));
  window_map(w, h, size);
}

/* Device memory is reached by the runtime's copies and fills, never by a
 * host dereference: the sim faults on those, as a GPU does. */
static inline void dev_write(void *dst, const void *src, size_t n) {
  assert_hip_ok(mori_hipMemcpy(dst, src, n, hipMemcpyHostToDevice));
}

static inline void dev_read(void *dst, const void *src, size_t n) {
  assert_hip_ok(mori_hipMemcpy(dst, src, n, hipMemcpyDeviceToHost));
}

static inline unsigned char dev_byte(const void *p) {
  unsigned char b = 0;
  dev_read(&b, p, 1);
  return b;
}

static inline void dev_set_byte(void *p, unsigned char v) { dev_write(p, &v, 1); }

static inline void dev_fill(void *p, int value, size_t n) {
  assert_hip_ok(mori_hipMemset(p, value, n));
}

/* The teardown order docs/quirks.md asks of the core. */
static inline void window_close(struct sim_window *w) {
  assert_hip_ok(mori_hipMemUnmap(w->va, w->size));
  assert_hip_ok(mori_hipMemAddressFree(w->va, w->size));
  assert_hip_ok(mori_hipMemRelease(w->handle));
}

/* Runs fn(arg) in a forked child; returns the signal that killed the child,
 * or 0 if it returned normally. */
static inline int signal_of_child(void (*fn)(void *), void *arg) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL); /* cmocka's handler would resume the harness in the child */
    signal(SIGBUS, SIG_DFL);
    fn(arg);
    _exit(0);
  }
  int status = 0;
  assert_true(pid > 0);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (WIFSIGNALED(status)) return WTERMSIG(status);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  return 0;
}

/* This program, as main's argv[0] names it (/proc/self/exe would name
 * valgrind when the test runs under it). */
static const char *self_exe = "/proc/self/exe";

/* A child running this test program again as "<self> <args...>" with extra
 * environment ("NAME=value", NULL-terminated); its stdout and stderr go to
 * a pipe read by self_reap.  Descriptors without FD_CLOEXEC pass to it. */
struct self_child {
  pid_t pid;
  int out;
};

static inline struct self_child self_spawn(char *const env[], char *const args[]) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    char *argv[16] = {(char *)"self"};
    for (int i = 0; env != NULL && env[i] != NULL; i++) putenv(env[i]);
    for (int i = 0; i < 14 && args[i] != NULL; i++) argv[i + 1] = args[i];
    dup2(p[1], 1);
    dup2(p[1], 2);
    close(p[0]);
    close(p[1]);
    execv(self_exe, argv);
    _exit(127);
  }
  assert_true(pid > 0);
  close(p[1]);
  struct self_child c = {pid, p[0]};
  return c;
}

/* Collects what the child printed into out and returns its exit status. */
static inline int self_reap(struct self_child c, char *out, size_t outlen) {
  size_t n = 0;
  char sink[256];
  for (;;) { /* read to the end, so a talkative child never blocks */
    int room = n + 1 < outlen;
    ssize_t r = read(c.out, room ? out + n : sink, room ? outlen - n - 1 : sizeof sink);
    if (r <= 0) break;
    if (room) n += (size_t)r;
  }
  out[n] = '\0';
  close(c.out);
  int status = 0;
  assert_int_equal(waitpid(c.pid, &status, 0), c.pid);
  if (!WIFEXITED(status)) fail_msg("child ended by signal %d: %s", WTERMSIG(status), out);
  return WEXITSTATUS(status);
}

static inline int run_self(char *const env[], char *const args[], char *out, size_t outlen) {
  return self_reap(self_spawn(env, args), out, outlen);
}

/* A test's teardown: nothing the test made through the shim is still live. */
static inline int expect_no_leaks(void **state) {
  (void)state;
  if (mori_shim_registry_total() != 0) {
    mori_shim_registry_report(stderr);
    fail_msg("the test left shim resources live");
  }
  return 0;
}

#endif
