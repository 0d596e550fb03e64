/*
 * backend_cuda.c - placeholder slot for the cuda backend: selecting it fails
 * with a clear error until the backend is built.
 */
#include "shim_internal.h"

static int cuda_init(char *why, size_t whylen) {
  snprintf(why, whylen, "the cuda backend is not built in this version of mori-symm");
  return -1;
}

const struct mori__shim_backend mori__shim_cuda = {.name = "cuda", .init = cuda_init};
