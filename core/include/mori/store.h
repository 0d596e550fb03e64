/*
 * store.h - the key-value store rendezvous runs over: torch's c10d::Store in
 * the adapter, a directory of files for the CLI and tests.  Every wait has a
 * timeout; nothing blocks forever.
 */
#ifndef MORI_STORE_H
#define MORI_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "mori/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* No valid rendezvous entry is longer (a request is at most
 * MORI_WIRE_REQUEST_MAX bytes, an abort message under 1 KiB): a store
 * refuses to set or return a larger value, so that a planted huge entry
 * costs neither memory nor time. */
#define MORI_STORE_VALUE_MAX 4096

/* The longest key, in bytes (NUL aside), that every store must take,
 * whatever its bytes: the longest a rendezvous builds, which leaves a
 * group name MORI_SYMM_GROUP_MAX bytes (mori/symm.h).  The file store
 * takes exactly these; torch's c10d stores take keys of any length. */
#define MORI_STORE_KEY_MAX 511

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
  /* Optional (NULL where the store cannot tell): returns once something
   * may have changed in the store, or after timeout_ms, so that one waiter
   * can watch many keys without polling each.  0 or a negative MORI_E*. */
  int (*wait_change)(mori_store *s, int timeout_ms);
  /* Optional: an id that no earlier run using this store can have had,
   * the same in every rank of this run, handed to each rank by whoever
   * launched the job (mori_launch draws one per launch).  Rendezvous keys
   * are namespaced by it.  NULL: the ranks agree on one in-band, one round
   * trip through rank 0 at a group's first rendezvous (docs/security.md). */
  const char *incarnation;
  /* Optional (NULL: keys stay): removes key; 0 if it is absent already.
   * A rendezvous removes the keys it wrote once every rank is done with
   * them (docs/security.md), never one that another call may still add to
   * or read. */
  int (*remove)(mori_store *s, const char *key);
};

/* A rank's death, as its launcher tells it.  A launcher that handed the
 * store its incarnation, on seeing rank r of its world ranks die (a
 * signal, a failing exit) while others still run, publishes through
 * mori_symm_rendezvous_abort, as rank 0 of 1 and so sealed with the job's
 * secret like every rendezvous entry, the abort of the group
 * MORI_STORE_DEATH_GROUP "/<world>/<r>" (its words: "killed by signal 9
 * (Killed)"), then that of MORI_STORE_DEATH_GROUP "/<world>" (a mark that
 * some rank died).  Every rendezvous wait over that store in a group of
 * world ranks (whose ranks are then the launch's) reads the mark once a
 * poll round and, once it is there, ends with MORI_EPEER naming the dead
 * rank it waits for and the launcher's words (mori_launch does this;
 * docs/recovery.md).  Each notice is the abort entry of its group's
 * rendezvous 0, mori_symm/<group>/<incarnation>/0/abort/0, which a launcher
 * that keeps the store removes once its ranks are gone.  Group names under
 * this prefix are the launcher's. */
#define MORI_STORE_DEATH_GROUP "mori_symm.dead"

/* A store in a directory shared by the processes of one job: set writes a
 * temp file and renames it into place; add takes an flock.  dir must be an
 * absolute path that no other user can change (docs/security.md): it and
 * every directory above it owned by this euid or root, none writable by
 * group or others unless root-owned and sticky (like /tmp), none a
 * symlink; dir itself must be ours.  dir is created 0700 if it is
 * missing, but not its parents: under a missing parent, MORI_ENOTFOUND.
 * Every later access is relative to the directory opened here, and
 * entries are read only if they are regular files of at most
 * MORI_STORE_VALUE_MAX bytes.  A key is one file: its bytes outside
 * [A-Za-z0-9_.-] written %XX; an encoding longer than a file name holds
 * becomes its first 175 bytes, '~' and the key's SHA-256 in hex. */
MORI_API int mori_file_store_open(const char *dir, mori_store **out);

/* How long a poller that has waited waited_us for something in a store
 * pauses before it looks again: an eighth of the wait so far, from 20 us
 * to 2 ms.  What comes soon is seen soon (a peer 1 ms late is seen within
 * about 0.15 ms), and a long wait costs the store few requests.  The
 * rendezvous's waits on a store without wait_change and the torch
 * adapter's polling of c10d::Store share it. */
MORI_API double mori_store_backoff_us(double waited_us);

#ifdef __cplusplus
}
#endif
#endif
