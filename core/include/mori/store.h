/*
 * store.h - the key-value store rendezvous runs over: torch's c10d::Store in
 * the adapter, a directory of files for the CLI and tests.  Every wait has a
 * timeout; nothing blocks forever.
 */
#ifndef MORI_STORE_H
#define MORI_STORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mori_store mori_store;
struct mori_store {
  /* Publishes key = value (overwrites). */
  int (*set)(mori_store *s, const char *key, const void *value, size_t len);
  /* Waits until key exists, up to timeout_ms; *value is malloc'd (caller
   * frees).  MORI_ETIMEDOUT if it never appears. */
  int (*get)(mori_store *s, const char *key, void **value, size_t *len, int timeout_ms);
  /* Atomically adds delta to the integer stored at key (absent = 0). */
  int (*add)(mori_store *s, const char *key, int64_t delta, int64_t *result);
  void (*destroy)(mori_store *s);
};

/* A store in a directory shared by the processes of one job: set writes a
 * temp file and renames it into place; add takes an flock.  dir is created
 * (0700) if missing. */
int mori_file_store_open(const char *dir, mori_store **out);

#ifdef __cplusplus
}
#endif
#endif
