/*
 * gpu_common.h - what the two real GPU backends (cuda, hip) share: opening
 * the runtime library, resolving all of its symbols at once, and turning a
 * runtime's own error code into a hipError_t plus a detail message.
 */
#ifndef MORI_GPU_COMMON_H
#define MORI_GPU_COMMON_H

#include "shim_internal.h"

/* One symbol a backend needs.  `slot` receives the address; it is the
 * address of a function pointer, stored through void ** as dlsym's POSIX
 * contract allows. */
struct mori__gpu_symbol {
  const char *name;
  void **slot;
};
#define MORI_GPU_SYMBOL(name, field) {name, (void **)&(field)}

/* Opens the library named by environment variable `env` when it is set,
 * otherwise the first of `sonames` that loads; *opened names the one tried
 * last (for messages; it stays valid while the environment is unchanged).
 * On failure returns NULL and writes every attempt's dlerror() to why. */
void *mori__gpu_open(const char *env, const char *const *sonames, size_t nsonames,
                     const char **opened, char *why, size_t whylen);

/* Resolves every symbol of the table.  If any is missing, writes one
 * message naming all missing symbols ("<lib>: missing symbols a, b"),
 * clears every slot and returns -1: a backend is either whole or absent. */
int mori__gpu_resolve(void *lib, const char *libname, const struct mori__gpu_symbol *syms,
                      size_t nsyms, char *why, size_t whylen);

/* A runtime error code and the nearest hipError_t. */
struct mori__gpu_error {
  int code;
  hipError_t hip;
};

/* The table's hipError_t for code; hipErrorUnknown for codes not in it. */
hipError_t mori__gpu_map_error(const struct mori__gpu_error *table, size_t n, int code);

/* Records "call: NAME (code)" as the detail of the current shim call and
 * returns hip, so that a failing translation reads `return
 * mori__gpu_fail(...)`.  name may be NULL when the runtime has none. */
hipError_t mori__gpu_fail(const char *call, const char *name, int code, hipError_t hip);

#define MORI_GPU_COUNT(a) (sizeof(a) / sizeof((a)[0]))

#endif
