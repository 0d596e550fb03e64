/*
 * process.c - what the process holds as a whole, above every subsystem:
 * release_all tears down every block (alloc/), then gives back what the
 * process keeps beyond any block: the watchdog and the kernels' modules
 * (signal/), the devices' private streams (base/).
 */
#include "rendezvous/rendezvous.h"

/* Every block, freed or not, whatever references remain: at exit nothing
 * would ever release them. */
int mori_symm_release_all(void) {
  int rc = mori__blocks_release_all();
  mori__signal_release_all();
  mori__device_release_all();
  return rc;
}
