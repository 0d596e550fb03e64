/*
 * hip_abi.h - the facts of ROCm's binary interface that the hip backend
 * relies on beyond the types of mori/hip_shim.h: how hipRuntimeGetVersion
 * encodes a release, the releases where behaviour changes, and the frozen
 * prefix of hipDeviceProp_tR0600.  tests/hipstub/hip_abi_check.c asserts
 * them at compile time.
 */
#ifndef MORI_HIP_ABI_H
#define MORI_HIP_ABI_H

#include <stddef.h>

/* hipRuntimeGetVersion: major * 10^7 + minor * 10^5 + patch. */
#define MORI_HIP_VERSION(major, minor, patch) \
  ((major) * 10000000 + (minor) * 100000 + (patch))
#define MORI_HIP_MAJOR(version) ((version) / 10000000)
#define MORI_HIP_MINOR(version) ((version) / 100000 % 100)
#define MORI_HIP_PATCH(version) ((version) % 100000)

/* ROCm 6.0 and 6.1 return hipErrorNotSupported from hipMemCreate with a
 * shareable handle type and from export/import (granularity still
 * succeeds), so a window cannot be shared before 6.2. */
#define MORI_HIP_SHARING_SINCE MORI_HIP_VERSION(6, 2, 0)

/* hipMemImportFromShareableHandle takes a POSIX fd by value from ROCm 7.1
 * and a pointer to it before. */
#define MORI_HIP_FD_BY_VALUE_SINCE MORI_HIP_VERSION(7, 1, 0)

/* The prefix of hipDeviceProp_tR0600, whose layout the R0600 symbol name
 * freezes: read through hipGetDevicePropertiesR0600 instead of
 * hipDeviceGetAttribute, whose attribute numbers shift between releases. */
struct mori__hip_props_r0600 {
  char name[256];
  unsigned char uuid[16];
  char luid[8];
  unsigned int luidDeviceNodeMask;
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  size_t memPitch;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int clockRate;
  size_t totalConstMem;
  int major;
  int minor;
  size_t textureAlignment;
  size_t texturePitchAlignment;
  int deviceOverlap;
  int multiProcessorCount;
};
#define MORI_HIP_PROPS_R0600_MP_OFFSET 388
#define MORI_HIP_PROPS_R0600_SIZE 1472 /* the whole struct, ROCm 6.2 to 7.x */
/* What the backend passes to hipGetDevicePropertiesR0600: room for the whole
 * struct and for fields a later release may append. */
#define MORI_HIP_PROPS_BYTES 8192

#endif
