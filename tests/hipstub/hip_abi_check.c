/*
 * hip_abi_check.c - the HIP ABI that mori/hip_shim.h and hip_abi.h mirror,
 * checked at compile time against ROCm's facts (x86_64, ROCm >= 6.2),
 * without ROCm's headers: sizes, alignments, field offsets and enum values
 * of what the hip backend passes to libamdhip64.  The program only says
 * that it was built; a wrong fact fails the build.
 */
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>

#include "hip_abi.h"
#include "mori/hip_shim.h"

#if defined(__x86_64__)

#define ABI(cond) _Static_assert(cond, #cond)

/* Every enum crosses the ABI as 4 bytes. */
ABI(sizeof(hipError_t) == 4);
ABI(sizeof(hipMemAllocationType) == 4);
ABI(sizeof(hipMemAllocationHandleType) == 4);
ABI(sizeof(hipMemLocationType) == 4);
ABI(sizeof(hipMemAccessFlags) == 4);
ABI(sizeof(hipMemAllocationGranularity_flags) == 4);
ABI(sizeof(hipMemcpyKind) == 4);
ABI(sizeof(hipDeviceAttribute_t) == 4);

ABI(sizeof(hipMemAllocationProp) == 32);
ABI(alignof(hipMemAllocationProp) == 8);
ABI(offsetof(hipMemAllocationProp, type) == 0);
ABI(offsetof(hipMemAllocationProp, requestedHandleType) == 4);
ABI(offsetof(hipMemAllocationProp, location) == 8);
ABI(offsetof(hipMemAllocationProp, win32HandleMetaData) == 16);
ABI(offsetof(hipMemAllocationProp, allocFlags) == 24);
ABI(offsetof(hipMemAllocationProp, allocFlags.compressionType) == 24);
ABI(offsetof(hipMemAllocationProp, allocFlags.gpuDirectRDMACapable) == 25);
ABI(offsetof(hipMemAllocationProp, allocFlags.usage) == 26);

ABI(sizeof(hipMemLocation) == 8);
ABI(offsetof(hipMemLocation, type) == 0);
ABI(offsetof(hipMemLocation, id) == 4);

ABI(sizeof(hipMemAccessDesc) == 12);
ABI(offsetof(hipMemAccessDesc, location) == 0);
ABI(offsetof(hipMemAccessDesc, flags) == 8);

ABI(sizeof(hipMemFabricHandle_t) == 64);

ABI(offsetof(struct mori__hip_props_r0600, multiProcessorCount) ==
    MORI_HIP_PROPS_R0600_MP_OFFSET);
ABI(MORI_HIP_PROPS_R0600_MP_OFFSET == 388);
ABI(MORI_HIP_PROPS_R0600_SIZE == 1472);
ABI(MORI_HIP_PROPS_BYTES >= MORI_HIP_PROPS_R0600_SIZE);

/* hipRuntimeGetVersion = major * 10^7 + minor * 10^5 + patch. */
ABI(MORI_HIP_VERSION(7, 1, 0) == 70100000);
ABI(MORI_HIP_VERSION(6, 2, 0) == 60200000);
ABI(MORI_HIP_VERSION(6, 4, 43482) == 60443482);
ABI(MORI_HIP_FD_BY_VALUE_SINCE == 70100000);
ABI(MORI_HIP_SHARING_SINCE == 60200000);

ABI(hipStreamWaitValueGte == 0);
ABI(hipStreamWaitValueEq == 1);
ABI(hipStreamWaitValueAnd == 2);
ABI(hipStreamWaitValueNor == 3);
ABI(hipStreamMemOpWaitValue32 == 1);
ABI(hipStreamMemOpWriteValue32 == 2);
ABI(sizeof(hipStreamBatchMemOpParams) == 48);

ABI(hipMemHandleTypeNone == 0);
ABI(hipMemHandleTypePosixFileDescriptor == 1);
ABI(hipMemHandleTypeWin32 == 2);
ABI(hipMemHandleTypeWin32Kmt == 4);
ABI(hipMemHandleTypeFabric == 8);

ABI(hipMemAllocationTypePinned == 0x1);
ABI(hipMemAllocationTypeUncached == 0x40000000);
ABI(hipMemLocationTypeDevice == 1);
ABI(hipMemAccessFlagsProtNone == 0);
ABI(hipMemAccessFlagsProtRead == 1);
ABI(hipMemAccessFlagsProtReadWrite == 3);
ABI(hipMemAllocationGranularityMinimum == 0);
ABI(hipMemAllocationGranularityRecommended == 1);

ABI(hipSuccess == 0);
ABI(hipErrorInvalidValue == 1);
ABI(hipErrorOutOfMemory == 2);
ABI(hipErrorNotInitialized == 3);
ABI(hipErrorInvalidDevice == 101);
ABI(hipErrorMapFailed == 205);
ABI(hipErrorUnmapFailed == 206);
ABI(hipErrorNotMapped == 211);
ABI(hipErrorInvalidHandle == 400);
ABI(hipErrorNotFound == 500);
ABI(hipErrorNotReady == 600);
ABI(hipErrorNotSupported == 801);
ABI(hipErrorUnknown == 999);

int main(void) {
  printf("hip_shim.h ABI: x86_64 facts hold (checked at compile time)\n");
  return 0;
}

#else

int main(void) {
  printf("hip_shim.h ABI: the facts are for x86_64; not checked on this target\n");
  return 77;
}

#endif
