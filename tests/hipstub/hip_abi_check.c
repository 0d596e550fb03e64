/*
 * hip_abi_check.c - the HIP ABI facts that Debian's HIP 5.2.3 header cannot
 * show (x86_64, ROCm >= 6.2): what changed or appeared after 5.2, the frozen
 * hipDeviceProp_tR0600 prefix and the version encoding, each restated with
 * its source and checked at compile time against the mirror of
 * mori/hip_shim.h and hip_abi.h.  The program only says that it was built;
 * a wrong fact fails the build.
 */
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>

#include "hip_abi.h"
#include "mori/hip_shim.h"

#if defined(__x86_64__)

#define ABI(cond) _Static_assert(cond, #cond)

/* The facts HIP 5.2.3 shares with 6.2+ are checked against Debian's real
 * header (tests/rocm/real_abi_check.c).  What follows is what 5.2.3 cannot
 * show: each fact restated here, with its source, so that a wrong row of
 * mori/hip_abi_facts.h (from which the mirror is built) fails the build. */

/* The shim's own attribute enum crosses the seam as 4 bytes, as HIP's do. */
ABI(sizeof(hipDeviceAttribute_t) == 4);

/* hipMemAllocationProp as ROCm >= 6.2 lays it out (hip_runtime_api.h of
 * 6.2 and later: type, requestedHandleType, location, win32HandleMetaData,
 * allocFlags {compressionType, gpuDirectRDMACapable, usage}); 5.2.3's began
 * with compressionType and had no allocFlags. */
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

/* Uncached allocations: declared after 5.2 (not in 5.2.3's header). */
ABI(hipMemAllocationTypeUncached == 0x40000000);

/* Fabric handles: hipMemHandleTypeFabric is declared from ROCm 7.14; the
 * value and the 64-byte handle are the ABI before that. */
ABI(hipMemHandleTypeFabric == 8);
ABI(sizeof(hipMemFabricHandle_t) == 64);

/* hipStreamBatchMemOp (later ROCm; not in 5.2.3): CUDA's numbers and its
 * 48-byte entry. */
ABI(hipStreamMemOpWaitValue32 == 1);
ABI(hipStreamMemOpWriteValue32 == 2);
ABI(hipStreamMemOpFlushRemoteWrites == 3);
ABI(hipStreamMemOpWaitValue64 == 4);
ABI(hipStreamMemOpWriteValue64 == 5);
ABI(hipStreamMemOpBarrier == 6);
ABI(sizeof(hipStreamBatchMemOpParams) == 48);
ABI(offsetof(hipStreamBatchMemOpParams, waitValue.address) == 8);
ABI(offsetof(hipStreamBatchMemOpParams, waitValue.value) == 16);
ABI(offsetof(hipStreamBatchMemOpParams, waitValue.flags) == 24);

/* hipDeviceProp_tR0600 (ROCm 6.0 and later; 5.2.3 has only the older
 * hipDeviceProp_t): the R0600 symbol name freezes its layout. */
ABI(offsetof(struct mori__hip_props_r0600, multiProcessorCount) ==
    MORI_HIP_PROPS_R0600_MP_OFFSET);
ABI(MORI_HIP_PROPS_R0600_MP_OFFSET == 388);
ABI(MORI_HIP_PROPS_R0600_SIZE == 1472);
ABI(MORI_HIP_PROPS_BYTES >= MORI_HIP_PROPS_R0600_SIZE);

/* hipRuntimeGetVersion = major * 10^7 + minor * 10^5 + patch (5.2.3 reports
 * 50221153), and the releases where behaviour changes: sharing from 6.2,
 * the fd of hipMemImportFromShareableHandle by value from 7.1. */
ABI(MORI_HIP_VERSION(7, 1, 0) == 70100000);
ABI(MORI_HIP_VERSION(6, 2, 0) == 60200000);
ABI(MORI_HIP_VERSION(6, 4, 43482) == 60443482);
ABI(MORI_HIP_VERSION(5, 2, 21153) == 50221153);
ABI(MORI_HIP_MAJOR(50221153) == 5 && MORI_HIP_MINOR(50221153) == 2 &&
    MORI_HIP_PATCH(50221153) == 21153);
ABI(MORI_HIP_FD_BY_VALUE_SINCE == 70100000);
ABI(MORI_HIP_SHARING_SINCE == 60200000);

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
