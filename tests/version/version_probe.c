/*
 * version_probe.c - the version a program sees of mori-symm: the macros of
 * the installed header mori/version.h and mori_symm_version() of the
 * library it runs with.  tests/version/agree.py compares them with every
 * other place the version shows.
 */
#include <stdio.h>

#include "mori/symm.h"

int main(void) {
  printf("macros %d.%d.%d\n", MORI_SYMM_VERSION_MAJOR, MORI_SYMM_VERSION_MINOR,
         MORI_SYMM_VERSION_PATCH);
  printf("string %s\n", MORI_SYMM_VERSION_STRING);
  printf("library %s\n", mori_symm_version());
  return 0;
}
