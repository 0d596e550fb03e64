/*
 * shim.h - the control API of libmori_hip_shim.so, the seam between
 * mori-symm and a GPU runtime: which backend is up, the detail of the last
 * failed runtime call, the resource registry (every live runtime resource
 * made through the seam, for leak checks), the runtime's version and the
 * sim's names.  It defines no HIP or CUDA name, so it compiles beside
 * <hip/hip_runtime_api.h> or <cuda.h>; the runtime calls themselves
 * (mori_hip*) are the library's, its tests' and its tools' business.
 */
#ifndef MORI_SHIM_H
#define MORI_SHIM_H

#include <stddef.h>
#include <stdio.h>

#include "mori/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "auto", "sim", "cuda" or "hip".  Must come before the first call; later
 * it succeeds only if it names the backend already active.  Returns 0, or
 * -1 with mori_shim_message() saying why (e.g. backend not built). */
MORI_API int mori_shim_select(const char *name);
/* Loads backend `name`'s runtime library ("cuda", "hip") and resolves its
 * entry points, and calls nothing in it: no hipInit, no cuInit, not even
 * hipRuntimeGetVersion (the version check stays with the bring-up),
 * nothing a later fork would inherit but the mapped library, so a program may ask
 * for it at start-up (the torch adapter does, at import) and take the
 * library's loading and symbol lookup off its first allocation.  The
 * bring-up (mori_shim_select, or the first call) then only starts the
 * runtime.  0 on success, or when a backend is already active, or for
 * "sim" and "auto" (which load nothing ahead); -1 with mori_shim_message()
 * saying why (the library or a symbol missing), which a bring-up later
 * says again, or more precisely (an old ROCm refused by its version). */
MORI_API int mori_shim_load(const char *name);
/* The backends built in ("sim", "cuda", "hip"), by index; NULL past the
 * last. */
MORI_API const char *mori_shim_backend_name(int i);
/* Whether backend `name` ("hip", "cuda", or "auto": hip, then cuda, as
 * mori_shim_select tries them; "sim" is always there) finds a runtime it
 * accepts, without bringing it up or selecting anything: the same search
 * and version check as its bring-up, no symbol resolved, no hipInit.
 * Returns 1 (why: the backend and the file), 0 none found (why: the names
 * tried, for one backend; empty for auto), or -1: one was found and
 * refused, or MORI_SYMM_HIP_LIB / MORI_SYMM_CUDA_LIB names a file that
 * does not load (why: each refusal, "hip: found HIP 5.2.21153 (FILE, ...);
 * mori-symm needs HIP >= 6.2 (ROCm 6.2)").  It loads the runtime library,
 * and HIP's version call may initialise it: a program that forks GPU
 * processes afterwards asks in a child (mori-symm's default shim does). */
MORI_API int mori_shim_runtime_find(const char *name, char *why, size_t whylen);
/* Name of the active backend, selecting it from MORI_SYMM_SHIM if needed;
 * NULL if it could not be brought up (mori_shim_message() says why). */
MORI_API const char *mori_shim_backend(void);
/* Thread-local detail of the last failed shim call: the backend's own
 * error name and code, e.g. "cuMemCreate: CUDA_ERROR_NOT_PERMITTED (800)",
 * or the sim contract rule that was violated; for an OS call of the seam,
 * its name and errno ("calloc: Cannot allocate memory (errno 12)"). */
MORI_API const char *mori_shim_message(void);

/* The resource registry: the live runtime resources made through the shim
 * in this process (physical handles, reservations, mappings, exported fds,
 * device allocations, mapped host allocations), for every backend, so "0 leaks" is checkable on
 * real GPUs too. */
typedef struct mori_shim_registry_counts {
  long handles;      /* created + imported + retained - released */
  long reservations; /* AddressReserve - AddressFree */
  long mappings;     /* Map - Unmap (per mapping) */
  long exported_fds; /* exported fds not yet closed with mori_close */
  long device_allocs;/* hipMalloc - hipFree */
  long host_allocs;  /* hipHostMalloc - hipHostFree */
} mori_shim_registry_counts;
MORI_API void mori_shim_registry(mori_shim_registry_counts *out);
MORI_API long mori_shim_registry_total(void);
/* Writes "mori shim registry: 0 leaks", or the count and one line per live
 * resource; returns the count.  MORI_SHIM_REGISTRY_REPORT=1 (or its older
 * name MORI_SHIM_LEDGER_REPORT=1) prints it to stderr at exit. */
MORI_API long mori_shim_registry_report(FILE *out);

/* fds the active backend holds itself for resources still live (the sim's
 * memfds; 0 where the backend cannot name them): a leak check that counts
 * a process's fds subtracts these, as it counts the live resources in the
 * registry.  A resource whose release the runtime refused keeps its fd. */
MORI_API int mori_shim_runtime_fds(void);

/* The runtime version the active backend reports: HIP's (e.g. 70100000) on
 * hip and sim, the CUDA driver's (e.g. 13000) on cuda; 0 if none is up. */
MORI_API int mori_shim_runtime_version(void);

/* The sim's profiles (MORI_SIM_ARCH values) and quirks (MORI_SIM_QUIRKS
 * names) by index, from the tables the sim reads them with; NULL past the
 * last.  Whichever backend is active: `mori-symm replay` walks them. */
MORI_API const char *mori_sim_profile_name(int i);
MORI_API const char *mori_sim_quirk_name(int i);

#ifdef __cplusplus
}
#endif
#endif /* MORI_SHIM_H */
