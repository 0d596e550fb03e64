/*
 * copy.c - the host's copies and fills (symm.h, "Moving data"): the
 * runtime's hipMemcpy and hipMemset families through the seam, so that a
 * program moves data the same way on every backend, the sim included,
 * without HIP's headers and with errors in the library's form.
 */
#include "alloc.h"

int mori_symm_memcpy(void *dst, const void *src, size_t bytes) {
  MORI_HIP("hipMemcpy", mori_hipMemcpy(dst, src, bytes, hipMemcpyDefault));
  return 0;
}

int mori_symm_memset(void *dst, int value, size_t bytes) {
  MORI_HIP("hipMemset", mori_hipMemset(dst, value, bytes));
  return 0;
}

int mori_symm_memcpy_async(void *dst, const void *src, size_t bytes, mori_stream stream) {
  MORI_HIP("hipMemcpyAsync",
           mori_hipMemcpyAsync(dst, src, bytes, hipMemcpyDefault, (hipStream_t)stream));
  return 0;
}

int mori_symm_memset_async(void *dst, int value, size_t bytes, mori_stream stream) {
  MORI_HIP("hipMemsetAsync", mori_hipMemsetAsync(dst, value, bytes, (hipStream_t)stream));
  return 0;
}

int mori_symm_synchronize(mori_stream stream) {
  MORI_HIP("hipStreamSynchronize", mori_hipStreamSynchronize((hipStream_t)stream));
  return 0;
}
