/*
 * hiprtc.c - HIP source to a code object with the runtime's hiprtc, found
 * at run time like the runtime itself: ROCm 5 carries hiprtc inside
 * libamdhip64, ROCm 6 and 7 in libhiprtc.so.N beside it.  No device
 * compiler is needed to build mori-symm; the ROCm that runs it compiles
 * the signal kernels once per process (tests/kernels checks the source
 * with Debian's hiprtc for a gfx target, no GPU needed).
 */
#include "hiprtc.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct hiprtc_program *hiprtc_program; /* hiprtcProgram */

static const char *const libraries[] = {"libhiprtc.so.7", "libhiprtc.so.6"};

/* hiprtc's calls (they return hiprtcResult, 0 on success); one table, as
 * the backends bind theirs. */
struct hiprtc {
  int (*create)(hiprtc_program *, const char *, const char *, int, const char **, const char **);
  int (*compile)(hiprtc_program, int, const char **);
  int (*log_size)(hiprtc_program, size_t *);
  int (*log)(hiprtc_program, char *);
  int (*code_size)(hiprtc_program, size_t *);
  int (*code)(hiprtc_program, char *);
  int (*destroy)(hiprtc_program *);
  const char *(*error_string)(int);
};

static const struct {
  const char *name;
  size_t offset;
} symbols[] = {
    {"hiprtcCreateProgram", offsetof(struct hiprtc, create)},
    {"hiprtcCompileProgram", offsetof(struct hiprtc, compile)},
    {"hiprtcGetProgramLogSize", offsetof(struct hiprtc, log_size)},
    {"hiprtcGetProgramLog", offsetof(struct hiprtc, log)},
    {"hiprtcGetCodeSize", offsetof(struct hiprtc, code_size)},
    {"hiprtcGetCode", offsetof(struct hiprtc, code)},
    {"hiprtcDestroyProgram", offsetof(struct hiprtc, destroy)},
    {"hiprtcGetErrorString", offsetof(struct hiprtc, error_string)},
};

static int bind_calls(void *lib, struct hiprtc *h) {
  for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
    void *fn = lib ? dlsym(lib, symbols[i].name) : NULL;
    if (fn == NULL) return -1;
    memcpy((char *)h + symbols[i].offset, &fn, sizeof fn);
  }
  return 0;
}

static int find(void *runtime, struct hiprtc *h, char *why, size_t whylen) {
  if (runtime != NULL && bind_calls(runtime, h) == 0) return 0;
  for (size_t i = 0; i < sizeof libraries / sizeof libraries[0]; i++) {
    void *lib = dlopen(libraries[i], RTLD_NOW | RTLD_LOCAL);
    /* it stays loaded: the process compiles with it again */
    if (lib != NULL && bind_calls(lib, h) == 0) return 0;
    if (lib != NULL) dlclose(lib);
  }
  snprintf(why, whylen, "hiprtc: not in the HIP runtime, nor in %s or %s", libraries[0],
           libraries[1]);
  return -1;
}

static void failed(const struct hiprtc *h, hiprtc_program p, const char *step, int rc,
                   char *why, size_t whylen) {
  int n = snprintf(why, whylen, "%s: %s (%d)", step, h->error_string(rc), rc);
  size_t len = 0;
  if (p == NULL || n < 0 || (size_t)n >= whylen || h->log_size(p, &len) != 0 || len <= 1) return;
  char *log = malloc(len + 1);
  if (log == NULL || h->log(p, log) != 0) {
    free(log);
    return;
  }
  log[len] = '\0';
  snprintf(why + n, whylen - (size_t)n, "; log: %s", log);
  free(log);
}

int mori__hiprtc_compile(void *runtime, const char *source, const char *name, const char *arch,
                         void **code, size_t *size, char *why, size_t whylen) {
  struct hiprtc h;
  hiprtc_program p = NULL;
  char opt[64];
  const char *opts[1] = {opt};
  int rc;
  *code = NULL;
  *size = 0;
  if (find(runtime, &h, why, whylen) != 0) return -1;
  if ((rc = h.create(&p, source, name, 0, NULL, NULL)) != 0) {
    failed(&h, NULL, "hiprtcCreateProgram", rc, why, whylen);
    return -1;
  }
  snprintf(opt, sizeof opt, "--offload-arch=%s", arch ? arch : "");
  if ((rc = h.compile(p, arch ? 1 : 0, opts)) != 0) {
    failed(&h, p, "hiprtcCompileProgram", rc, why, whylen);
  } else if ((rc = h.code_size(p, size)) != 0 || *size == 0) {
    failed(&h, p, "hiprtcGetCodeSize", rc, why, whylen);
    rc = rc ? rc : -1;
  } else if ((*code = malloc(*size)) == NULL) {
    snprintf(why, whylen, "hiprtc: no memory for a code object of %zu bytes", *size);
    rc = -1;
  } else if ((rc = h.code(p, *code)) != 0) {
    failed(&h, p, "hiprtcGetCode", rc, why, whylen);
  }
  (void)h.destroy(&p);
  if (rc == 0) return 0;
  free(*code);
  *code = NULL;
  *size = 0;
  return -1;
}
