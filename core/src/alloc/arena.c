/*
 * arena.c - the device pointer tables every window makes, carved out of
 * chunks of device memory the arena keeps per device: a window's
 * rendezvous and its teardown then call hipMalloc and hipFree only when no
 * chunk of its device has room, or when the last slot of one goes.
 *
 * Why: each of those calls costs tens of microseconds on a GPU (the
 * measured figures are in docs/performance.md), paid by every rendezvous
 * and every free of a rendezvoused block, where torch's own backend takes
 * its tables from its caching allocator.  Why a chunk goes with its last
 * slot: a process that holds no window holds no runtime memory, so the
 * registry reads 0 after the last free, as before; unless the process
 * keeps warm (mori_symm_keep_warm, the torch adapter's choice): then one
 * empty chunk per device stays for the next rendezvous, until
 * mori_symm_release_all (mori__arena_trim) or the exit.
 */
#include "alloc.h"

#include <stdlib.h>
#include <string.h>

enum { SLOT = 256, CHUNK = 64 * 1024, CHUNK_SLOTS = CHUNK / SLOT };

typedef struct chunk {
  struct chunk *next;
  char *base;
  size_t size;     /* CHUNK, or one allocation's own size (larger than a chunk) */
  int device;
  int whole;       /* one allocation larger than a chunk: no slots */
  int dying;       /* empty, and its release failed once: taken by nobody, tried again */
  int used;        /* slots taken (whole: 1) */
  unsigned short len[CHUNK_SLOTS]; /* at a taken run's first slot: its length */
  unsigned char taken[CHUNK_SLOTS];
} chunk;

static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static chunk *chunks;

/* A forked child has none of the parent's runtime memory (base/device.c
 * starts it from nothing too); the parent's chunk structs are left to it. */
static void atfork_child(void) {
  pthread_mutex_init(&arena_lock, NULL);
  chunks = NULL;
}

static void install_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

/* First fit of k free slots in c; -1 if none. */
static int find_run(const chunk *c, int k) {
  for (int i = 0, run = 0; i < CHUNK_SLOTS; i++) {
    run = c->taken[i] ? 0 : run + 1;
    if (run == k) return i - k + 1;
  }
  return -1;
}

static void take_run(chunk *c, int at, int k) {
  memset(&c->taken[at], 1, (size_t)k);
  c->len[at] = (unsigned short)k;
  c->used += k;
}

/* Under arena_lock: a new chunk of size bytes on the current device, at
 * the head of the list. */
static int new_chunk(int device, size_t size, int whole, chunk **out) {
  chunk *c = mori_calloc(1, sizeof *c);
  if (c == NULL) return mori__nomem("arena");
  void *base = NULL;
  hipError_t e = mori_hipMalloc(&base, size);
  if (e != hipSuccess) {
    free(c);
    return mori__hip_error("hipMalloc", e);
  }
  c->base = base;
  c->size = size;
  c->device = device;
  c->whole = whole;
  c->next = chunks;
  chunks = c;
  *out = c;
  return 0;
}

int mori__arena_take(int device, size_t n, void **p) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, install_atfork);
  int rc = 0;
  size_t k = (n + SLOT - 1) / SLOT;
  chunk *c = NULL;
  pthread_mutex_lock(&arena_lock);
  if (n > CHUNK) {
    rc = new_chunk(device, n, 1, &c);
    if (rc == 0) c->used = 1;
    *p = rc == 0 ? c->base : NULL;
    pthread_mutex_unlock(&arena_lock);
    return rc;
  }
  int at = -1;
  for (c = chunks; c != NULL; c = c->next)
    if (c->device == device && !c->whole && !c->dying && (at = find_run(c, (int)k)) >= 0) break;
  if (c == NULL && (rc = new_chunk(device, CHUNK, 0, &c)) == 0) at = 0;
  if (rc == 0) {
    take_run(c, at, (int)k);
    *p = c->base + (size_t)at * SLOT;
  }
  pthread_mutex_unlock(&arena_lock);
  return rc;
}

/* Under arena_lock: the chunk holding p, and the link that points to it. */
static chunk **holder(const void *p) {
  for (chunk **l = &chunks; *l != NULL; l = &(*l)->next) {
    const char *b = (*l)->base;
    if ((const char *)p >= b && (const char *)p < b + (*l)->size) return l;
  }
  return NULL;
}

/* The last slot of *l went: its memory goes back to the runtime.  A
 * release the runtime refuses leaves the chunk dying, so that giving the
 * same pointer back again (the ledger tries a failed release once more)
 * tries the release again. */
static hipError_t release_chunk(chunk **l) {
  chunk *c = *l;
  hipError_t e = mori_hipFree(c->base);
  if (e != hipSuccess) {
    c->dying = 1;
    return e;
  }
  *l = c->next;
  free(c);
  return hipSuccess;
}

/* Under arena_lock: whether c, which just became empty, stays for the next
 * window of its device: keeping warm, and no other empty chunk of that
 * device stays already. */
static int keep_empty(const chunk *c) {
  if (c->whole || c->dying || !mori_symm_keep_warm()) return 0;
  for (const chunk *o = chunks; o != NULL; o = o->next)
    if (o != c && o->device == c->device && !o->whole && o->used == 0) return 0;
  return 1;
}

hipError_t mori__arena_give(void *p) {
  pthread_mutex_lock(&arena_lock);
  chunk **l = holder(p);
  hipError_t e = hipErrorInvalidValue; /* not the arena's: as the runtime's free would say */
  if (l != NULL && (*l)->dying) {
    e = release_chunk(l);
  } else if (l != NULL && (*l)->whole && p == (*l)->base) {
    (*l)->used = 0;
    e = release_chunk(l);
  } else if (l != NULL && ((char *)p - (*l)->base) % SLOT == 0) {
    chunk *c = *l;
    int at = (int)(((char *)p - c->base) / SLOT), k = c->len[at];
    if (c->taken[at] && k > 0) {
      memset(&c->taken[at], 0, (size_t)k);
      c->len[at] = 0;
      c->used -= k;
      e = c->used == 0 && !keep_empty(c) ? release_chunk(l) : hipSuccess;
    }
  }
  pthread_mutex_unlock(&arena_lock);
  return e;
}

/* Every empty chunk back to the runtime (the ones kept warm): a refused
 * hipFree is tried once more at once, as the ledger tries a release (a
 * runtime that refuses one transiently must not make us leak the chunk);
 * the first failure is returned, and a chunk refused twice stays, dying. */
hipError_t mori__arena_trim(void) {
  hipError_t first = hipSuccess;
  pthread_mutex_lock(&arena_lock);
  for (chunk **l = &chunks; *l != NULL;) {
    chunk *c = *l;
    if (c->used != 0 || c->whole) {
      l = &c->next;
      continue;
    }
    hipError_t e = release_chunk(l);
    if (e != hipSuccess) e = release_chunk(l);
    if (e != hipSuccess) {
      if (first == hipSuccess) first = e;
      l = &c->next; /* still listed, dying */
    }
  }
  pthread_mutex_unlock(&arena_lock);
  return first;
}

long mori__arena_kept(void) {
  long n = 0;
  pthread_mutex_lock(&arena_lock);
  for (const chunk *c = chunks; c != NULL; c = c->next) n += c->used == 0 && !c->whole;
  pthread_mutex_unlock(&arena_lock);
  return n;
}
