/*
 * hipstub_test.h - what the hipstub tests share: cmocka, allocation
 * properties, fd passing over SCM_RIGHTS through the shim's socket calls,
 * checks usable in a forked child (where cmocka's asserts are not), and the
 * cross-process window scenario of hipstub_test.c.
 */
#ifndef MORI_HIPSTUB_TEST_H
#define MORI_HIPSTUB_TEST_H

#include "mori_cmocka.h"

#include "fd_pass.h"
#include "mori/hip_shim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static inline hipMemAllocationProp hipstub_prop(hipMemAllocationHandleType type, int device) {
  hipMemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = hipMemAllocationTypePinned;
  p.requestedHandleType = type;
  p.location.type = hipMemLocationTypeDevice;
  p.location.id = device;
  return p;
}

static inline hipMemAccessDesc hipstub_rw(int device) {
  hipMemAccessDesc d;
  memset(&d, 0, sizeof d);
  d.location.type = hipMemLocationTypeDevice;
  d.location.id = device;
  d.flags = hipMemAccessFlagsProtReadWrite;
  return d;
}

/* The recommended granularity for type on device 0 (asserted nonzero). */
size_t hipstub_granularity(hipMemAllocationHandleType type);
void hipstub_fill_pattern(unsigned char *buf, size_t n, unsigned seed);
/* The whole POSIX-fd lifecycle across two processes (hipstub_test.c). */
void hipstub_share_posix_window(void);
/* A fabric window shared with another process, which reads back the first
 * bytes (at most 4096) of seed's pattern (hipstub_test.c). */
void hipstub_share_fabric_window(size_t bytes, unsigned seed);

/* A child process reports a failed check by its exit status (the line) and
 * a line on stderr; the parent asserts the status is 0. */
#define CHILD_CHECK(cond)                                                                  \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "child: %s:%d: %s failed (shim: %s)\n", __FILE__, __LINE__, #cond,   \
              mori_shim_message());                                                       \
      _exit(__LINE__ % 250 + 1);                                                           \
    }                                                                                      \
  } while (0)

/* Waits for pid and asserts that it exited with status 0. */
static inline void hipstub_assert_child_ok(pid_t pid) {
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

static inline int hipstub_contains(const char *haystack, const char *needle) {
  return haystack != NULL && strstr(haystack, needle) != NULL;
}

#define assert_contains(haystack, needle)                                                  \
  do {                                                                                     \
    const char *h_ = (haystack);                                                           \
    if (!hipstub_contains(h_, (needle)))                                                   \
      fail_msg("expected \"%s\" in \"%s\"", (needle), h_ ? h_ : "(null)");                 \
  } while (0)

#define assert_not_contains(haystack, needle)                                              \
  do {                                                                                     \
    const char *h_ = (haystack);                                                           \
    if (hipstub_contains(h_, (needle)))                                                    \
      fail_msg("did not expect \"%s\" in \"%s\"", (needle), h_);                           \
  } while (0)

#endif
