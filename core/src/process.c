/*
 * process.c - what the process holds as a whole, above every subsystem:
 * release_all tears down every block (alloc/), then gives back what the
 * process keeps beyond any block: the watchdog and the kernels' modules
 * (signal/), what keeping warm kept (alloc/: a freed block, an exported
 * fd and a device-table chunk per device), the devices' private streams
 * (base/).
 */
#include "rendezvous/rendezvous.h"

/* Every block, freed or not, whatever references remain: at exit nothing
 * would ever release them. */
int mori_symm_release_all(void) {
  int rc = mori__blocks_release_all();
  mori__signal_release_all();
  /* what keeping warm kept (mori_symm_keep_warm), once no block holds a
   * slot of a chunk or an export of its own */
  int kept = mori__kept_blocks_release_all();
  if (rc == 0) rc = kept;
  mori__exports_release_all();
  hipError_t e = mori__arena_trim();
  if (e != hipSuccess && rc == 0) rc = mori__hip_error("hipFree (a device-table chunk kept warm)", e);
  mori__device_release_all();
  return rc;
}

long mori_symm_warm(void) {
  return mori__kept_blocks() + mori__exports_kept() + mori__arena_kept();
}
