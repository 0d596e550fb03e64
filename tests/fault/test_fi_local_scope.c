/*
 * test_fi_local_scope.c - the fault shim in front of a core that was
 * loaded into a local scope at run time, as Python loads the torch
 * extension and its libmori_core.so / libmori_hip_shim.so.  The core's
 * calls reach the preloaded wrappers first (the global scope is searched
 * first), and the wrappers must find the shim behind them although
 * dlsym(RTLD_NEXT) does not see a local scope.  Run under LD_PRELOAD with
 * MORI_FI failing the first hipMemCreate:
 *
 *   test_fi_local_scope path/to/libmori_core.so
 *
 * The first allocation must fail with the injected error (the wrapper was
 * in front), the second must succeed (it forwarded to the shim).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define FAIL(...)                 \
  do {                            \
    fprintf(stderr, __VA_ARGS__); \
    fputc('\n', stderr);          \
    return 1;                     \
  } while (0)

int main(int argc, char **argv) {
  if (argc != 2) FAIL("usage: %s LIBMORI_CORE", argv[0]);
  void *core = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (core == NULL) FAIL("dlopen(%s): %s", argv[1], dlerror());
  int (*select)(const char *) = (int (*)(const char *))dlsym(core, "mori_shim_select");
  int (*alloc)(size_t, int, void **) = (int (*)(size_t, int, void **))dlsym(core, "mori_symm_alloc");
  int (*release)(void *) = (int (*)(void *))dlsym(core, "mori_symm_free");
  const char *(*last)(void) = (const char *(*)(void))dlsym(core, "mori_last_error");
  if (!select || !alloc || !release || !last) FAIL("a symbol of the core is missing: %s", dlerror());
  if (dlsym(RTLD_DEFAULT, "mori_symm_alloc") != NULL)
    FAIL("the core is in the global scope: this test needs it local");
  if (select("sim") != 0) FAIL("mori_shim_select(sim) failed");
  void *p = NULL;
  if (alloc(1 << 20, 0, &p) == 0) FAIL("the first alloc succeeded: no fault shim in front");
  if (strstr(last(), "hipMemCreate") == NULL || strstr(last(), "OutOfMemory") == NULL)
    FAIL("the first alloc failed otherwise than injected: %s", last());
  printf("first alloc: %s\n", last());
  if (alloc(1 << 20, 0, &p) != 0) FAIL("the second alloc failed: %s", last());
  if (release(p) != 0) FAIL("free: %s", last());
  printf("local scope: ok\n");
  return 0;
}
