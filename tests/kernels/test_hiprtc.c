/*
 * test_hiprtc.c - the signal kernels' HIP source, as the library embeds it,
 * compiles with a real hiprtc through the hip backend's own compile step
 * (hip_shim/backends/hiprtc.c): Debian's ROCm 5.2 runtime carries hiprtc
 * inside libamdhip64.so.5 and compiles for a gfx target with no GPU present.  The
 * code object must hold every entry the core launches by name.  Without
 * libamdhip64.so.5 (scripts/deps.sh installs it) the test fails saying so.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hiprtc.h"
#include "mori/signal_kernel.h"
#include "signal_hip_source.h"

/* gfx90a (MI200): a target ROCm 5.2's compiler knows (its hiprtc aborts the
 * process on gfx942, which it predates). */
#define ARCH "gfx90a"

#define NAME_OF(name, what) #name,
static const char *const entries[] = {MORI_SIGNAL_KERNELS(NAME_OF)};
#undef NAME_OF

/* Compiles source with Debian's runtime's hiprtc through the backend's step. */
static int compile(const char *source, const char *name, void **code, size_t *size, char *why,
                   size_t whylen) {
  void *runtime = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
  if (runtime == NULL) fail_msg("libamdhip64.so.5 (Debian's libamdhip64-5): %s", dlerror());
  return mori__hiprtc_compile(runtime, source, name, ARCH, code, size, why, whylen);
}

static void hip_source_compiles_and_holds_every_entry(void **s) {
  (void)s;
  void *code = NULL;
  size_t size = 0;
  char why[4096] = "";
  if (compile(mori__signal_hip_source, "signal.cu", &code, &size, why, sizeof why) != 0)
    fail_msg("hiprtc, %s: %s", ARCH, why);
  assert_true(size > 0);
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
    if (memmem(code, size, entries[i], strlen(entries[i])) == NULL)
      fail_msg("the code object (%zu bytes) has no entry %s", size, entries[i]);
  free(code);
}

/* A source that does not compile fails naming the step and the log. */
static void a_broken_source_fails_with_the_compiler_log(void **s) {
  (void)s;
  void *code = NULL;
  size_t size = 0;
  char why[4096] = "";
  assert_int_equal(compile("extern \"C\" __global__ void k() { undeclared(); }\n", "broken.cu",
                           &code, &size, why, sizeof why),
                   -1);
  assert_null(code);
  assert_non_null(strstr(why, "hiprtcCompileProgram: "));
  assert_non_null(strstr(why, "undeclared"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hip_source_compiles_and_holds_every_entry),
      cmocka_unit_test(a_broken_source_fails_with_the_compiler_log),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
