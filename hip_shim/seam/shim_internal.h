/*
 * shim_internal.h - the backend table behind libmori_hip_shim.so.
 *
 * The seam (this folder) owns what every backend shares: shim.c the backend
 * selection, the thread-local last error and detail message and the
 * resource registry; os.c the OS calls.  A backend (sim/, backends/)
 * supplies only the runtime calls, as one table, in the manner of SQLite's
 * aSyscall[]; the seam reaches a backend through its table alone.  A backend
 * entry returns a hipError_t and, on failure, may call mori__shim_detail()
 * to say what its runtime said.
 */
#ifndef MORI_SHIM_INTERNAL_H
#define MORI_SHIM_INTERNAL_H

#include "mori/hip_shim.h"

/* One entry per row of MORI_SHIM_HIP_CALLS, named as the call.  An entry
 * may be NULL: the call then fails with hipErrorNotSupported naming the
 * backend, except hipStreamBatchMemOp (NULL, or answering
 * hipErrorNotSupported: the shim issues the operations one by one) and
 * hipGetLastError (the runtime's own, which returns and clears its sticky
 * error; NULL where the runtime keeps none).  hipMemImportFromShareableHandle
 * takes osHandle in the shim's convention (fd by value; fabric by pointer). */
struct mori__shim_backend {
  const char *name;
  /* Bring the runtime up.  0 on success; otherwise nonzero with the reason
   * written to why (e.g. "libcuda.so.1: cannot open shared object file"). */
  int (*init)(char *why, size_t whylen);
  /* Find the runtime without bringing it up (mori_shim_runtime_find): 1
   * found and accepted (why: its file), 0 none there, -1 found and refused
   * or named by the user and not loadable (why says which); NULL: always
   * there (the sim). */
  int (*find)(char *why, size_t whylen);
  /* Load the runtime library and resolve every entry point, calling none
   * of them (mori_shim_load); init then does only what is left.  NULL:
   * nothing to load ahead (the sim).  0, or nonzero with why. */
  int (*load)(char *why, size_t whylen);
#define MORI__SHIM_ENTRY(name, arity, params, args, registry, shim, spec, errors) \
  hipError_t(*name) params;
  MORI_SHIM_HIP_CALLS(MORI__SHIM_ENTRY)
#undef MORI__SHIM_ENTRY
  /* fds the backend itself holds for resources still live (the sim: one
   * memfd per live allocation); may be NULL (none it can name). */
  int (*own_fds)(void);
  /* Stream capture and replay behind mori_sim_* (test controls, not HIP
   * calls).  A backend fills all four or none: NULL, the mori_sim_* calls
   * fail with hipErrorNotSupported naming the active backend.  Only the sim
   * captures. */
  hipError_t (*begin_capture)(hipStream_t stream);
  hipError_t (*end_capture)(hipStream_t stream, mori_sim_graph **graph);
  hipError_t (*graph_launch)(const mori_sim_graph *graph, hipStream_t stream);
  void (*graph_destroy)(mori_sim_graph *graph);
};

extern const struct mori__shim_backend mori__shim_sim;
extern const struct mori__shim_backend mori__shim_cuda;
extern const struct mori__shim_backend mori__shim_hip;

/* Sets the thread-local detail message of the current call (printf-style). */
void mori__shim_detail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
