/*
 * real_abi_check.c - the rows of mori/hip_abi_facts.h that HIP 5.2.3 shares
 * with 6.2 and later, checked at compile time against Debian's real
 * <hip/hip_runtime_api.h> (built with -D__HIP_PLATFORM_AMD__): every enum
 * value, size, offset and handle type.  The shim's mirror is built from the
 * same rows, so it agrees with the real header wherever 5.2.3 can say.  The
 * program only says that it was built; a wrong row fails the build.
 */
#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>
#include <stddef.h>
#include <stdio.h>

#include "mori/hip_abi_facts.h"

#if defined(__x86_64__)

#define VALUE(name, value) \
  _Static_assert((name) == (value), "HIP's header: " #name " is not " #value);
#define SIZE(type, bytes) \
  _Static_assert(sizeof(type) == (bytes), "HIP's header: sizeof(" #type ") is not " #bytes);
#define OFFSET(type, member, offset)                 \
  _Static_assert(offsetof(type, member) == (offset), \
                 "HIP's header: offsetof(" #type ", " #member ") is not " #offset);
/* The same incomplete struct: a HIP program's handle is the shim's type. */
#define HANDLE(name, tag)                                          \
  _Static_assert(__builtin_types_compatible_p(name, struct tag *), \
                 "HIP's header: " #name " is not struct " #tag " *");

MORI_HIP_SHARED_ENUMS(VALUE)
MORI_HIP_SHARED_SIZES(SIZE)
MORI_HIP_SHARED_OFFSETS(OFFSET)
MORI_HIP_SHARED_HANDLES(HANDLE)

/* What a row counts, for the line the test prints. */
#define COUNT1(...) +1
enum {
  ROWS = MORI_HIP_SHARED_ENUMS(COUNT1) MORI_HIP_SHARED_SIZES(COUNT1)
      MORI_HIP_SHARED_OFFSETS(COUNT1) MORI_HIP_SHARED_HANDLES(COUNT1)
};

int main(void) {
  printf("hip_abi_facts.h: %d shared rows hold against HIP %d.%d.%d's header\n", ROWS,
         HIP_VERSION_MAJOR, HIP_VERSION_MINOR, HIP_VERSION_PATCH);
  return 0;
}

#else

int main(void) {
  printf("hip_abi_facts.h: the facts are for x86_64; not checked on this target\n");
  return 77;
}

#endif
