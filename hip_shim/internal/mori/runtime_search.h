/*
 * runtime_search.h - the file names the GPU backends search for their
 * runtime, in order: one list that the hip and cuda backends open, the
 * tools' default shim follows (mori_shim_runtime_find) and the environment
 * table (docs/environment.md) prints.  No type, no function: a row is a
 * string literal.
 */
#ifndef MORI_RUNTIME_SEARCH_H
#define MORI_RUNTIME_SEARCH_H

/* Newest first: ROCm 7 and 6, Debian's HIP 5 (libamdhip64-5), and the
 * unversioned name, which is all some installs have.  A runtime too old is
 * still found, so that its refusal can say what is installed.  Before the
 * list: the runtime already loaded in the process; instead of it:
 * MORI_SYMM_HIP_LIB. */
#define MORI_HIP_SONAMES(X)                                                                  \
  X("libamdhip64.so.7") X("libamdhip64.so.6") X("libamdhip64.so.5") X("libamdhip64.so")

/* The CUDA driver; MORI_SYMM_CUDA_LIB instead of it. */
#define MORI_CUDA_SONAMES(X) X("libcuda.so.1")

/* The lists as text: "libamdhip64.so.7, libamdhip64.so.6, ..., " (each
 * name and a comma). */
#define MORI_SONAME_TEXT(name) name ", "
#define MORI_SONAME_ROW(name) name,

#endif
