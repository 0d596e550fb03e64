/*
 * seam_calls.c - prints every call of the seam's lists, one exported name a
 * line (mori_hipMemMap, mori_openat, mori_close): what
 * every_seam_call_is_injectable.sh compares with the symbols the shim and
 * the fault shim define.
 */
#include <stdio.h>

#include "mori/fi.h"

int main(void) {
#define PRINT_HIP(name, arity, params, args, registry, shim, spec, errors) puts("mori_" #name);
#define PRINT_OS(ret, name, params, args) puts("mori_" #name);
  MORI_SHIM_HIP_CALLS(PRINT_HIP)
  MORI_FI_OS_CALLS(PRINT_OS)
  return 0;
}
