/*
 * backend_hip.c - placeholder slot for the hip backend: selecting it fails
 * with a clear error until the backend is built.
 */
#include "shim_internal.h"

static int hip_init(char *why, size_t whylen) {
  snprintf(why, whylen, "the hip backend is not built in this version of mori-symm");
  return -1;
}

const struct mori__shim_backend mori__shim_hip = {.name = "hip", .init = hip_init};
