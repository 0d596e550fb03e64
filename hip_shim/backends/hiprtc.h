/*
 * hiprtc.h - HIP source compiled at run time with the runtime's own hiprtc
 * (hiprtc.c), for the hip backend's module loads: the library carries its
 * signal kernels as source, not as code objects for every AMD target.
 */
#ifndef MORI_SHIM_HIPRTC_H
#define MORI_SHIM_HIPRTC_H

#include <stddef.h>

/* Compiles source (named `name` in messages) for arch ("gfx90a"; NULL: the
 * current device's, hiprtc's default) into a code object, malloc'd into
 * *code / *size.  hiprtc is looked up in `runtime` first (a dlopen handle
 * of libamdhip64, which carries it up to ROCm 5; may be NULL), then in
 * libhiprtc.so.7 and .6.  0, or -1 with why saying which step failed and
 * the compiler's log. */
int mori__hiprtc_compile(void *runtime, const char *source, const char *name, const char *arch,
                         void **code, size_t *size, char *why, size_t whylen)
    __attribute__((visibility("hidden")));

#endif
