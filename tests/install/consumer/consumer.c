/*
 * consumer.c - a program built against an installed mori-symm, as a user
 * builds one: the public headers only (<mori/symm.h>, <mori/shim.h>).  One
 * allocation on the sim shim, freed, and the shim's resource registry back
 * at 0.
 */
#include <stdio.h>

#include <mori/shim.h>
#include <mori/symm.h>

int main(void) {
  void *p = NULL;
  if (mori_shim_select("sim") != 0) {
    fprintf(stderr, "consumer: %s\n", mori_shim_message());
    return 1;
  }
  if (mori_symm_alloc(1 << 20, 0, &p) != 0 || mori_symm_free(p) != 0) {
    fprintf(stderr, "consumer: %s\n", mori_last_error());
    return 1;
  }
  long live = mori_shim_registry_total();
  printf("consumer ok: shim %s, 1 MiB allocated and freed, registry %ld\n", mori_shim_backend(),
         live);
  return live != 0;
}
