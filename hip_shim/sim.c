/* sim.c - placeholder until the emulator lands. */
#include "shim_internal.h"
static int sim_init(char *why, size_t whylen) {
  snprintf(why, whylen, "sim backend not yet built");
  return -1;
}
const struct mori__shim_backend mori__shim_sim = {.name = "sim", .init = sim_init};
