/*
 * sim_vmm.c - the sim's device memory.  A physical allocation is a memfd, a
 * reservation is PROT_NONE address space, a mapping is the memfd mapped
 * MAP_SHARED over it, and stays PROT_NONE: as on a GPU, the host cannot
 * touch device memory.  The sim's engine (copies, fills, stream memory
 * operations) reaches it through a private alias, a second mapping of the
 * same memfd at an address only these tables know, after checking the
 * access hipMemSetAccess granted.  hipMalloc blocks are host pages behind a
 * PROT_NONE address the same way.  Processes share memory the way GPUs
 * share VMM allocations.
 */
#include "sim_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#define GRAN MORI__SIM_GRANULARITY

/* ---- tables ---- */

/* An allocation handle is a pointer to one of these, but is only ever
 * dereferenced after it was found in `allocs`.  handle_refs counts what the
 * caller holds (create or import: 1, each retain: 1); map_refs counts live
 * mappings.  The memfd stays open while either is nonzero, because HIP keeps
 * a released allocation alive while it is mapped.  A dead allocation stays
 * in the table for a while (memfd closed) so that a late release is reported
 * as a double release, not as an unknown handle. */
struct sim_alloc {
  int memfd; /* -1 once dead */
  size_t size;
  hipMemAllocationHandleType type;
  uint64_t id; /* in the memfd's name: what a fabric blob is checked against */
  int handle_refs;
  int map_refs;
  int retained_without_ref; /* quirk retain-no-ref handed this out unreferenced */
  struct sim_exported_fd {  /* quirk export-fd-lifetime checks these at release */
    int fd;
    dev_t dev;
    ino_t ino;
  } *exported;
  size_t nexported, cap_exported;
  /* quirk import-fd-lifetime: the importer's fd this handle came from,
   * checked at map and access (fd -1: none) */
  struct sim_exported_fd imported_from;
};

/* Each table of address ranges (reservations, mappings, hipMalloc blocks)
 * starts its rows with one of these, is sorted by base and holds disjoint
 * ranges, so that a lookup is a binary search: the engine translates the
 * addresses of every copy and stream memory operation. */
struct sim_range {
  uintptr_t base;
  size_t size;
};

struct sim_reservation {
  struct sim_range at;
  int unfreeable; /* quirk unmap-multi struck it */
};

struct sim_mapping {
  struct sim_range at; /* the device address: PROT_NONE to the host */
  struct sim_alloc *alloc;
  unsigned char *access; /* hipMemAccessFlags per granule: set-access may cover part */
  unsigned char *alias;  /* the engine's read-write view of the same memory */
};

/* A hipMalloc block: its device address is PROT_NONE address space, its
 * bytes are private host pages at alias. */
struct sim_block {
  struct sim_range at; /* page-rounded */
  unsigned char *alias;
  size_t bytes; /* what hipMalloc was asked for */
};

#define DEAD_KEPT 1024 /* dead allocations remembered for double-release reports */

static struct sim_alloc **allocs;
static size_t nallocs, cap_allocs, ndead;
static struct sim_reservation *reservations;
static size_t nreservations, cap_reservations;
static struct sim_mapping *mappings;
static size_t nmappings, cap_mappings;
static struct sim_block *blocks;
static size_t nblocks, cap_blocks;

void *mori__sim_grow(void *array, size_t *cap, size_t len, size_t elem) {
  if (len < *cap) return array;
  size_t n = *cap ? *cap * 2 : 16;
  void *p = realloc(array, n * elem);
  if (p != NULL) *cap = n;
  return p;
}

static hipError_t out_of_memory(const char *call, const char *what) {
  mori__shim_detail("%s: %s: %s", call, what, strerror(errno));
  return hipErrorOutOfMemory;
}

static struct sim_alloc *find_alloc(const void *handle) {
  for (size_t i = 0; i < nallocs; i++)
    if ((const void *)allocs[i] == handle) return allocs[i];
  return NULL;
}

static void forget_oldest_dead(void) {
  for (size_t i = 0; i < nallocs; i++) {
    if (allocs[i]->memfd >= 0) continue;
    free(allocs[i]);
    memmove(&allocs[i], &allocs[i + 1], (nallocs - i - 1) * sizeof allocs[0]);
    nallocs--;
    ndead--;
    return;
  }
}

size_t mori__sim_live_bytes(void) {
  size_t n = 0;
  for (size_t i = 0; i < nallocs; i++)
    if (allocs[i]->memfd >= 0) n += allocs[i]->size;
  for (size_t i = 0; i < nblocks; i++) n += blocks[i].bytes;
  return n;
}

int mori__sim_own_fds(void) {
  int n = 0;
  pthread_mutex_lock(&mori__sim_lock);
  for (size_t i = 0; i < nallocs; i++) n += allocs[i]->memfd >= 0;
  pthread_mutex_unlock(&mori__sim_lock);
  return n;
}

/* Frees the memory once nothing holds it any more. */
static void alloc_settle(struct sim_alloc *a) {
  if (a->handle_refs > 0 || a->map_refs > 0 || a->memfd < 0) return;
  close(a->memfd);
  a->memfd = -1;
  free(a->exported);
  a->exported = NULL;
  a->nexported = a->cap_exported = 0;
  if (++ndead > DEAD_KEPT) forget_oldest_dead();
}

static hipError_t alloc_add(const char *call, int memfd, size_t size,
                            hipMemAllocationHandleType type, uint64_t id,
                            hipMemGenericAllocationHandle_t *handle) {
  struct sim_alloc *a = calloc(1, sizeof *a);
  struct sim_alloc **table = mori__sim_grow(allocs, &cap_allocs, nallocs, sizeof allocs[0]);
  if (table != NULL) allocs = table;
  if (a == NULL || table == NULL) {
    free(a);
    close(memfd);
    return out_of_memory(call, "allocation table");
  }
  *a = (struct sim_alloc){.memfd = memfd, .size = size, .type = type, .id = id,
                          .handle_refs = 1, .imported_from = {.fd = -1}};
  allocs[nallocs++] = a;
  *handle = (hipMemGenericAllocationHandle_t)a;
  return hipSuccess;
}

/* The allocation behind a handle the caller still holds. */
static hipError_t live_handle(const char *call, const void *handle, struct sim_alloc **out) {
  struct sim_alloc *a = find_alloc(handle);
  if (a == NULL) return mori__sim_contract(call, RULE_UNKNOWN_HANDLE, "%p", handle);
  if (a->handle_refs == 0)
    return mori__sim_contract(call, RULE_USE_AFTER_RELEASE, "handle %p", handle);
  *out = a;
  return hipSuccess;
}

/* ---- sorted range tables ---- */

#define RANGE(table, i, elem) ((const struct sim_range *)((const char *)(table) + (i) * (elem)))

/* The index of the first of the n ranges of table that ends after addr
 * (n if none does). */
static size_t range_index(const void *table, size_t n, size_t elem, uintptr_t addr) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const struct sim_range *r = RANGE(table, mid, elem);
    if (r->base + r->size <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The index of the range holding addr, or n. */
static size_t range_holding(const void *table, size_t n, size_t elem, uintptr_t addr) {
  size_t i = range_index(table, n, elem, addr);
  return i < n && RANGE(table, i, elem)->base <= addr ? i : n;
}

/* Puts row (which starts with its sim_range) in order; the caller made
 * room with mori__sim_grow. */
static void range_insert(void *table, size_t *n, size_t elem, const void *row) {
  size_t i = range_index(table, *n, elem, ((const struct sim_range *)row)->base);
  char *at = (char *)table + i * elem;
  memmove(at + elem, at, (*n - i) * elem);
  memcpy(at, row, elem);
  (*n)++;
}

static void range_remove(void *table, size_t *n, size_t elem, size_t i) {
  char *at = (char *)table + i * elem;
  memmove(at, at + elem, (*n - i - 1) * elem);
  (*n)--;
}

#define INDEX(t, n, addr) range_index((t), (n), sizeof *(t), (addr))
#define HOLDING(t, n, addr) range_holding((t), (n), sizeof *(t), (addr))

static struct sim_reservation *reservation_holding(uintptr_t lo, uintptr_t hi) {
  size_t i = HOLDING(reservations, nreservations, lo);
  if (i == nreservations || lo >= hi) return NULL;
  struct sim_reservation *r = &reservations[i];
  return hi <= r->at.base + r->at.size ? r : NULL;
}

static struct sim_mapping *mapping_at(uintptr_t addr) {
  size_t i = HOLDING(mappings, nmappings, addr);
  return i < nmappings ? &mappings[i] : NULL;
}

static struct sim_mapping *mapping_overlapping(uintptr_t lo, uintptr_t hi) {
  size_t i = INDEX(mappings, nmappings, lo);
  return i < nmappings && mappings[i].at.base < hi ? &mappings[i] : NULL;
}

static size_t mappings_inside(uintptr_t lo, uintptr_t hi) {
  size_t n = 0;
  for (size_t i = INDEX(mappings, nmappings, lo); i < nmappings && mappings[i].at.base < hi; i++)
    n += mappings[i].at.base >= lo;
  return n;
}

static const char *handle_type_name(hipMemAllocationHandleType t) {
  switch (t) {
  case hipMemHandleTypeNone: return "none";
  case hipMemHandleTypePosixFileDescriptor: return "posix-fd";
  case hipMemHandleTypeFabric: return "fabric";
  default: return "unsupported";
  }
}

static hipError_t check_size(const char *call, size_t size) {
  if (size == 0 || size % GRAN != 0)
    return mori__sim_contract(call, RULE_SIZE_GRANULARITY, "got %zu", size);
  return hipSuccess;
}

static hipError_t check_range(const char *call, const void *ptr, size_t size) {
  if ((uintptr_t)ptr % GRAN != 0) return mori__sim_contract(call, RULE_ADDRESS_ALIGNED, "%p", ptr);
  if (size > UINTPTR_MAX - (uintptr_t)ptr)
    return mori__sim_contract(call, RULE_SIZE_GRANULARITY, "%zu wraps the address space", size);
  return check_size(call, size);
}

static hipError_t check_location(const char *call, const hipMemLocation *loc) {
  if (loc->type != hipMemLocationTypeDevice || loc->id < 0 || loc->id >= mori__sim_config.devices)
    return mori__sim_contract(call, RULE_LOCATION, "type %d id %d, %d devices", (int)loc->type,
                              loc->id, mori__sim_config.devices);
  return hipSuccess;
}

static hipError_t check_prop(const char *call, const hipMemAllocationProp *prop) {
  if (prop == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "prop");
  if (prop->type != hipMemAllocationTypePinned && prop->type != hipMemAllocationTypeUncached)
    return mori__sim_contract(call, RULE_ALLOCATION_TYPE, "got 0x%x", (unsigned)prop->type);
  return check_location(call, &prop->location);
}

/* ---- physical allocations ---- */

static uint64_t fresh_id(void) {
  static uint64_t counter;
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
    r = (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)&r;
  return r ^ ++counter;
}

/* The memfd's name carries the id, so an importer can check what it opened
 * by reading /proc/self/fd/N: "/memfd:mori-sim:<16 hex digits> (deleted)". */
#define MEMFD_PREFIX "mori-sim:"

static hipError_t create_memfd(const char *call, size_t size, uint64_t id, int *out) {
  char name[64];
  snprintf(name, sizeof name, MEMFD_PREFIX "%016" PRIx64, id);
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return out_of_memory(call, "memfd_create");
  if (ftruncate(fd, (off_t)size) != 0) {
    hipError_t e = out_of_memory(call, "ftruncate");
    close(fd);
    return e;
  }
  *out = fd;
  return hipSuccess;
}

hipError_t mori__sim_granularity(size_t *gran, const hipMemAllocationProp *prop,
                                 hipMemAllocationGranularity_flags option) {
  static const char call[] = "hipMemGetAllocationGranularity";
  if (gran == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "granularity");
  hipError_t e = check_prop(call, prop);
  if (e != hipSuccess) return e;
  if (option != hipMemAllocationGranularityMinimum &&
      option != hipMemAllocationGranularityRecommended)
    return mori__sim_contract(call, RULE_GRANULARITY_OPTION, "got %d", (int)option);
  *gran = GRAN;
  return hipSuccess;
}

static hipError_t create_locked(hipMemGenericAllocationHandle_t *handle, size_t size,
                                const hipMemAllocationProp *prop, unsigned long long flags) {
  static const char call[] = "hipMemCreate";
  if (handle == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "handle");
  hipError_t e = check_prop(call, prop);
  if (e != hipSuccess) return e;
  if (flags != 0) return mori__sim_contract(call, RULE_FLAGS_ZERO, "got %llu", flags);
  if ((e = check_size(call, size)) != hipSuccess) return e;
  switch (prop->requestedHandleType) {
  case hipMemHandleTypeNone:
  case hipMemHandleTypePosixFileDescriptor: break;
  case hipMemHandleTypeFabric:
    if (mori__sim_config.profile->fabric_create) break;
    mori__shim_detail("%s: hipErrorNotSupported: profile %s cannot create fabric handles", call,
                      mori__sim_config.profile->arch);
    return hipErrorNotSupported;
  default:
    return mori__sim_contract(call, RULE_HANDLE_TYPE, "got 0x%x",
                              (unsigned)prop->requestedHandleType);
  }
  uint64_t id = fresh_id();
  int fd;
  if ((e = create_memfd(call, size, id, &fd)) != hipSuccess) return e;
  return alloc_add(call, fd, size, prop->requestedHandleType, id, handle);
}

/* The fd still names the file it named when it was recorded. */
static int fd_still_open(const struct sim_exported_fd *x) {
  struct stat st;
  return fcntl(x->fd, F_GETFD) != -1 && fstat(x->fd, &st) == 0 && st.st_dev == x->dev &&
         st.st_ino == x->ino;
}

/* Quirk import-fd-lifetime (rocm-systems #8304/#8440): the importer closed
 * the fd it imported from before mapping or granting access; the call then
 * fails with InvalidValue, as it did on ROCm before the fix. */
static hipError_t import_fd_closed(const char *call, const struct sim_alloc *a) {
  if (!mori__sim_quirk(MORI__SIM_Q_IMPORT_FD_LIFETIME) || a->imported_from.fd < 0 ||
      fd_still_open(&a->imported_from))
    return hipSuccess;
  mori__shim_detail("%s: quirk import-fd-lifetime: the importer closed fd %d, which the handle "
                    "was imported from, before the handle's release",
                    call, a->imported_from.fd);
  return hipErrorInvalidValue;
}

/* Quirk export-fd-lifetime: the fd number of an exported fd that no longer
 * refers to the allocation (closed, or reused for another file), or -1. */
static int closed_export(const struct sim_alloc *a) {
  for (size_t i = 0; i < a->nexported; i++)
    if (!fd_still_open(&a->exported[i])) return a->exported[i].fd;
  return -1;
}

static hipError_t release_locked(hipMemGenericAllocationHandle_t handle) {
  static const char call[] = "hipMemRelease";
  struct sim_alloc *a = find_alloc(handle);
  if (a == NULL) return mori__sim_contract(call, RULE_UNKNOWN_HANDLE, "%p", (void *)handle);
  if (a->handle_refs == 0)
    return mori__sim_contract(
        call, RULE_DOUBLE_RELEASE, "handle %p was already released%s", (void *)handle,
        a->retained_without_ref ? "; quirk retain-no-ref: hipMemRetainAllocationHandle "
                                  "took no reference, so the retained and the original "
                                  "handle were both released"
                                : "");
  int fd;
  if (a->handle_refs == 1 && mori__sim_quirk(MORI__SIM_Q_EXPORT_FD_LIFETIME) &&
      (fd = closed_export(a)) >= 0) {
    mori__shim_detail("%s: quirk export-fd-lifetime: exported fd %d was closed before the "
                      "final release; the release fails and the allocation leaks",
                      call, fd);
    return hipErrorUnknown;
  }
  a->handle_refs--;
  alloc_settle(a);
  return hipSuccess;
}

static hipError_t retain_locked(hipMemGenericAllocationHandle_t *handle, void *addr) {
  static const char call[] = "hipMemRetainAllocationHandle";
  if (handle == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "handle");
  struct sim_mapping *m = mapping_at((uintptr_t)addr);
  if (m == NULL) return mori__sim_contract(call, RULE_NOT_MAPPED, "%p", addr);
  if (mori__sim_quirk(MORI__SIM_Q_RETAIN_NO_REF))
    m->alloc->retained_without_ref = 1;
  else
    m->alloc->handle_refs++; /* may bring back a handle released while mapped, as HIP does */
  *handle = (hipMemGenericAllocationHandle_t)m->alloc;
  return hipSuccess;
}

/* ---- address space ---- */

#define RESERVE_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)

/* A granularity-aligned PROT_NONE range: the hint if it is free, otherwise
 * an over-sized mapping trimmed to the alignment. */
static void *map_aligned(size_t size, size_t align, void *hint) {
  if (hint != NULL && (uintptr_t)hint % align == 0) {
    void *p = mmap(hint, size, PROT_NONE, RESERVE_FLAGS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == hint) return p;
    if (p != MAP_FAILED) munmap(p, size); /* a kernel that took it as a plain hint */
  }
  if (size > SIZE_MAX - align) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  char *raw = mmap(NULL, size + align, PROT_NONE, RESERVE_FLAGS, -1, 0);
  if (raw == MAP_FAILED) return MAP_FAILED;
  uintptr_t base = ((uintptr_t)raw + align - 1) / align * align;
  size_t head = base - (uintptr_t)raw;
  if (head) munmap(raw, head);
  if (align - head) munmap((char *)base + size, align - head);
  return (void *)base;
}

static hipError_t reserve_locked(void **ptr, size_t size, size_t alignment, void *addr,
                                 unsigned long long flags) {
  static const char call[] = "hipMemAddressReserve";
  if (ptr == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "ptr");
  if (flags != 0) return mori__sim_contract(call, RULE_FLAGS_ZERO, "got %llu", flags);
  hipError_t e = check_size(call, size);
  if (e != hipSuccess) return e;
  if (alignment & (alignment - 1))
    return mori__sim_contract(call, RULE_ALIGNMENT_POW2, "got %zu", alignment);
  struct sim_reservation *table =
      mori__sim_grow(reservations, &cap_reservations, nreservations, sizeof reservations[0]);
  if (table == NULL) return out_of_memory(call, "reservation table");
  reservations = table;
  void *p = map_aligned(size, alignment > GRAN ? alignment : GRAN, addr);
  if (p == MAP_FAILED) return out_of_memory(call, "mmap");
  struct sim_reservation row = {{(uintptr_t)p, size}, 0};
  range_insert(reservations, &nreservations, sizeof row, &row);
  *ptr = p;
  return hipSuccess;
}

static hipError_t address_free_locked(void *ptr, size_t size) {
  static const char call[] = "hipMemAddressFree";
  size_t i = HOLDING(reservations, nreservations, (uintptr_t)ptr);
  if (i == nreservations || reservations[i].at.base != (uintptr_t)ptr)
    return mori__sim_contract(call, RULE_FREE_UNKNOWN, "%p", ptr);
  struct sim_reservation *r = &reservations[i];
  if (size != r->at.size)
    return mori__sim_contract(call, RULE_FREE_SIZE, "reserved %zu, got %zu", r->at.size, size);
  size_t live = mappings_inside(r->at.base, r->at.base + r->at.size);
  if (live) return mori__sim_contract(call, RULE_FREE_LIVE_MAPPINGS, "%zu at %p", live, ptr);
  if (r->unfreeable) {
    mori__shim_detail("%s: quirk unmap-multi: an earlier hipMemUnmap over several mappings "
                      "of the reservation at %p left it unfreeable",
                      call, ptr);
    return hipErrorInvalidValue;
  }
  munmap(ptr, size);
  range_remove(reservations, &nreservations, sizeof reservations[0], i);
  return hipSuccess;
}

/* ---- mappings ---- */

static hipError_t map_locked(void *ptr, size_t size, size_t offset,
                             hipMemGenericAllocationHandle_t handle, unsigned long long flags) {
  static const char call[] = "hipMemMap";
  if (offset != 0) return mori__sim_contract(call, RULE_MAP_OFFSET_ZERO, "got %zu", offset);
  if (flags != 0) return mori__sim_contract(call, RULE_FLAGS_ZERO, "got %llu", flags);
  hipError_t e = check_range(call, ptr, size);
  struct sim_alloc *a = NULL;
  if (e != hipSuccess || (e = live_handle(call, handle, &a)) != hipSuccess) return e;
  if (size > a->size)
    return mori__sim_contract(call, RULE_MAP_LARGER_THAN_ALLOCATION, "map %zu, allocation %zu",
                              size, a->size);
  if ((e = import_fd_closed(call, a)) != hipSuccess) return e;
  uintptr_t lo = (uintptr_t)ptr, hi = lo + size;
  if (reservation_holding(lo, hi) == NULL)
    return mori__sim_contract(call, RULE_MAP_INSIDE_RESERVATION, "[%p, +%zu)", ptr, size);
  const struct sim_mapping *old = mapping_overlapping(lo, hi);
  if (old != NULL)
    return mori__sim_contract(call, RULE_MAP_OVERLAP, "[%p, +%zu) meets the mapping at %p", ptr,
                              size, (void *)old->at.base);
  unsigned char *access = calloc(size / GRAN, 1);
  struct sim_mapping *table =
      mori__sim_grow(mappings, &cap_mappings, nmappings, sizeof mappings[0]);
  if (table != NULL) mappings = table;
  if (access == NULL || table == NULL) {
    free(access);
    return out_of_memory(call, "mapping table");
  }
  /* The device address stays PROT_NONE: the host never touches device
   * memory; the engine goes through the alias, and only where
   * hipMemSetAccess granted access. */
  void *alias = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, a->memfd, 0);
  if (alias == MAP_FAILED ||
      mmap(ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, a->memfd, 0) == MAP_FAILED) {
    mori__shim_detail("%s: mmap of the allocation at %p: %s", call, ptr, strerror(errno));
    if (alias != MAP_FAILED) munmap(alias, size);
    free(access);
    return hipErrorMapFailed;
  }
  struct sim_mapping row = {{lo, size}, a, access, alias};
  range_insert(mappings, &nmappings, sizeof row, &row);
  a->map_refs++;
  return hipSuccess;
}

/* Walks [lo, hi) as a sequence of whole mappings; returns how many, or a
 * contract error if a byte is unmapped or a mapping sticks out. */
static hipError_t whole_mappings(const char *call, uintptr_t lo, uintptr_t hi, size_t *count) {
  *count = 0;
  for (uintptr_t at = lo; at < hi; (*count)++) {
    const struct sim_mapping *m = mapping_at(at);
    if (m == NULL) return mori__sim_contract(call, RULE_NOT_MAPPED, "%p", (void *)at);
    if (m->at.base < lo || m->at.base + m->at.size > hi)
      return mori__sim_contract(call, RULE_UNMAP_WHOLE_MAPPINGS,
                                "[%p, +%zu) cuts the mapping [%p, +%zu)", (void *)lo,
                                (size_t)(hi - lo), (void *)m->at.base, m->at.size);
    at = m->at.base + m->at.size;
  }
  return hipSuccess;
}

static void drop_mapping(struct sim_mapping *m) {
  struct sim_alloc *a = m->alloc;
  munmap(m->alias, m->at.size);
  free(m->access);
  range_remove(mappings, &nmappings, sizeof *m, (size_t)(m - mappings));
  a->map_refs--;
  alloc_settle(a);
}

static hipError_t unmap_locked(void *ptr, size_t size) {
  static const char call[] = "hipMemUnmap";
  size_t count;
  uintptr_t lo = (uintptr_t)ptr, hi = lo + size;
  hipError_t e = check_range(call, ptr, size);
  if (e != hipSuccess) return e;
  /* Reservations can sit back to back; one unmap stays inside one of them. */
  struct sim_reservation *r = reservation_holding(lo, hi);
  if (r == NULL)
    return mori__sim_contract(call, RULE_MAP_INSIDE_RESERVATION, "[%p, +%zu)", ptr, size);
  if ((e = whole_mappings(call, lo, hi, &count)) != hipSuccess) return e;
  if (count > 1 && mori__sim_quirk(MORI__SIM_Q_UNMAP_MULTI)) {
    r->unfreeable = 1;
    mori__shim_detail("%s: quirk unmap-multi: one unmap over %zu mappings fails and leaves "
                      "the reservation unfreeable; unmap each mapping on its own",
                      call, count);
    return hipErrorUnmapFailed;
  }
  /* Back to reserved-but-unmapped: PROT_NONE anonymous, still ours. */
  if (mmap(ptr, size, PROT_NONE, RESERVE_FLAGS | MAP_FIXED, -1, 0) == MAP_FAILED) {
    mori__shim_detail("%s: mmap over [%p, +%zu): %s", call, ptr, size, strerror(errno));
    return hipErrorUnmapFailed;
  }
  for (struct sim_mapping *m; (m = mapping_overlapping(lo, hi)) != NULL;) drop_mapping(m);
  return hipSuccess;
}

static hipError_t check_access_desc(const char *call, const hipMemAccessDesc *d) {
  hipError_t e = check_location(call, &d->location);
  if (e != hipSuccess) return e;
  if (d->flags != hipMemAccessFlagsProtNone && d->flags != hipMemAccessFlagsProtRead &&
      d->flags != hipMemAccessFlagsProtReadWrite)
    return mori__sim_contract(call, RULE_ACCESS_FLAGS, "got %d", (int)d->flags);
  return hipSuccess;
}

/* All devices share one view, so the widest access any descriptor grants
 * is what the granules get.  Only the engine reads the grant (the host has
 * no access to grant: the device address stays PROT_NONE). */
static hipError_t set_access_locked(void *ptr, size_t size, const hipMemAccessDesc *desc,
                                    size_t count) {
  static const char call[] = "hipMemSetAccess";
  if (desc == NULL || count == 0)
    return mori__sim_contract(call, RULE_NULL_ARGUMENT, "desc %p, count %zu", (void *)desc, count);
  hipError_t e = check_range(call, ptr, size);
  if (e != hipSuccess) return e;
  hipMemAccessFlags flags = hipMemAccessFlagsProtNone;
  for (size_t i = 0; i < count; i++) {
    if ((e = check_access_desc(call, &desc[i])) != hipSuccess) return e;
    if (desc[i].flags > flags) flags = desc[i].flags;
  }
  uintptr_t lo = (uintptr_t)ptr, hi = lo + size;
  for (uintptr_t at = lo; at < hi; at += GRAN) {
    const struct sim_mapping *m = mapping_at(at);
    if (m == NULL) return mori__sim_contract(call, RULE_NOT_MAPPED, "%p", (void *)at);
    if ((e = import_fd_closed(call, m->alloc)) != hipSuccess) return e;
  }
  for (uintptr_t at = lo; at < hi; at += GRAN) {
    struct sim_mapping *m = mapping_at(at);
    m->access[(at - m->at.base) / GRAN] = (unsigned char)flags;
  }
  return hipSuccess;
}

/* ---- sharing ---- */

/* Fabric handle: 64 bytes naming the exporter's memfd, opened by the
 * importer through /proc/<pid>/fd/<fd> (same user, same host).  Explicit
 * little-endian fields:
 *   0 magic "MORISIMF" | 8 version u32 | 12 pid u32 | 16 fd u32 | 20 uid u32
 *  24 size u64 | 32 id u64 | 40..63 zero */
static const unsigned char fabric_magic[8] = {'M', 'O', 'R', 'I', 'S', 'I', 'M', 'F'};
enum { FABRIC_VERSION = 1, FABRIC_USED = 40 };

static void put_le(unsigned char *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n; i-- > 0;) v = v << 8 | p[i];
  return v;
}

static void fabric_encode(unsigned char *blob, const struct sim_alloc *a) {
  memset(blob, 0, MORI_HIP_FABRIC_HANDLE_SIZE);
  memcpy(blob, fabric_magic, sizeof fabric_magic);
  put_le(blob + 8, FABRIC_VERSION, 4);
  put_le(blob + 12, (uint64_t)getpid(), 4);
  put_le(blob + 16, (uint64_t)a->memfd, 4);
  put_le(blob + 20, (uint64_t)getuid(), 4);
  put_le(blob + 24, a->size, 8);
  put_le(blob + 32, a->id, 8);
}

static hipError_t record_export(const char *call, struct sim_alloc *a, int fd) {
  struct stat st;
  struct sim_exported_fd *table =
      mori__sim_grow(a->exported, &a->cap_exported, a->nexported, sizeof a->exported[0]);
  if (table == NULL || fstat(fd, &st) != 0) {
    hipError_t e = out_of_memory(call, "exported fd table");
    close(fd);
    return e;
  }
  a->exported = table;
  a->exported[a->nexported++] = (struct sim_exported_fd){fd, st.st_dev, st.st_ino};
  return hipSuccess;
}

static hipError_t export_locked(void *shareable, hipMemGenericAllocationHandle_t handle,
                                hipMemAllocationHandleType type, unsigned long long flags) {
  static const char call[] = "hipMemExportToShareableHandle";
  if (shareable == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "shareableHandle");
  if (flags != 0) return mori__sim_contract(call, RULE_FLAGS_ZERO, "got %llu", flags);
  struct sim_alloc *a = NULL;
  hipError_t e = live_handle(call, handle, &a);
  if (e != hipSuccess) return e;
  if (type != a->type)
    return mori__sim_contract(call, RULE_EXPORT_TYPE, "created %s, exporting %s",
                              handle_type_name(a->type), handle_type_name(type));
  if (type == hipMemHandleTypeFabric) {
    if (!mori__sim_config.profile->fabric_export) {
      mori__shim_detail("%s: hipErrorNotSupported: profile %s creates fabric handles but "
                        "cannot export them",
                        call, mori__sim_config.profile->arch);
      return hipErrorNotSupported;
    }
    fabric_encode(shareable, a);
    return hipSuccess;
  }
  if (type != hipMemHandleTypePosixFileDescriptor)
    return mori__sim_contract(call, RULE_HANDLE_TYPE, "cannot export %s", handle_type_name(type));
  int fd = fcntl(a->memfd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return out_of_memory(call, "dup");
  if ((e = record_export(call, a, fd)) != hipSuccess) return e;
  *(int *)shareable = fd;
  return hipSuccess;
}

/* The id from a sim memfd's name, or -1 if fd is not one. */
static int memfd_id(int fd, uint64_t *id) {
  char link[64], target[128];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n < 0) return -1;
  target[n] = '\0';
  const char *prefix = "/memfd:" MEMFD_PREFIX;
  if (strncmp(target, prefix, strlen(prefix)) != 0) return -1;
  char *end;
  *id = strtoull(target + strlen(prefix), &end, 16);
  return end == target + strlen(prefix) + 16 ? 0 : -1;
}

/* Takes ownership of fd: adds it as an imported allocation or closes it. */
static hipError_t adopt(const char *call, int fd, hipMemAllocationHandleType type,
                        const uint64_t *want_id, uint64_t want_size,
                        hipMemGenericAllocationHandle_t *handle) {
  struct stat st;
  uint64_t id;
  const char *why = NULL;
  if (memfd_id(fd, &id) != 0)
    why = "not a sim allocation";
  else if (fstat(fd, &st) != 0 || st.st_size <= 0 || (size_t)st.st_size % GRAN != 0)
    why = "size is not a granularity multiple";
  else if (want_id != NULL && (id != *want_id || (uint64_t)st.st_size != want_size))
    why = "names a different allocation than the fabric handle";
  if (why != NULL) {
    close(fd);
    return mori__sim_contract(call, RULE_IMPORT_GARBAGE, "%s", why);
  }
  return alloc_add(call, fd, (size_t)st.st_size, type, id, handle);
}

static hipError_t import_fabric(const char *call, const unsigned char *blob,
                                hipMemGenericAllocationHandle_t *handle) {
  static const unsigned char zero[MORI_HIP_FABRIC_HANDLE_SIZE - FABRIC_USED];
  if (memcmp(blob, fabric_magic, sizeof fabric_magic) != 0 ||
      get_le(blob + 8, 4) != FABRIC_VERSION || memcmp(blob + FABRIC_USED, zero, sizeof zero))
    return mori__sim_contract(call, RULE_IMPORT_GARBAGE, "not a sim fabric handle");
  unsigned pid = (unsigned)get_le(blob + 12, 4), efd = (unsigned)get_le(blob + 16, 4);
  uint64_t id = get_le(blob + 32, 8);
  if (get_le(blob + 20, 4) != (uint64_t)getuid())
    return mori__sim_contract(call, RULE_IMPORT_GARBAGE, "exported by uid %u",
                              (unsigned)get_le(blob + 20, 4));
  char path[64];
  snprintf(path, sizeof path, "/proc/%u/fd/%u", pid, efd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return mori__sim_contract(call, RULE_IMPORT_GARBAGE, "open %s: %s (exporter gone or "
                              "allocation released)", path, strerror(errno));
  return adopt(call, fd, hipMemHandleTypeFabric, &id, get_le(blob + 24, 8), handle);
}

/* osHandle follows the shim's convention: fd by value, fabric by pointer.
 * The caller keeps its fd; the import holds a dup of it. */
static hipError_t import_locked(hipMemGenericAllocationHandle_t *handle, void *osHandle,
                                hipMemAllocationHandleType type) {
  static const char call[] = "hipMemImportFromShareableHandle";
  if (handle == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "handle");
  if (osHandle == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "osHandle");
  if (type == hipMemHandleTypeFabric) return import_fabric(call, osHandle, handle);
  if (type != hipMemHandleTypePosixFileDescriptor)
    return mori__sim_contract(call, RULE_HANDLE_TYPE, "cannot import %s", handle_type_name(type));
  intptr_t fd = (intptr_t)osHandle;
  int own = fd < 0 || fd > INT_MAX ? -1 : fcntl((int)fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0)
    return mori__sim_contract(call, RULE_IMPORT_GARBAGE, "fd %" PRIdPTR " is not open", fd);
  struct stat st;
  hipError_t e = adopt(call, own, type, NULL, 0, handle);
  if (e == hipSuccess && fstat((int)fd, &st) == 0) /* for quirk import-fd-lifetime */
    ((struct sim_alloc *)*handle)->imported_from =
        (struct sim_exported_fd){(int)fd, st.st_dev, st.st_ino};
  return e;
}

/* ---- hipMalloc blocks ---- */

static size_t page_round(size_t n) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (n + page - 1) / page * page;
}

static hipError_t malloc_locked(void **ptr, size_t size) {
  static const char call[] = "hipMalloc";
  if (ptr == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "ptr");
  *ptr = NULL;
  if (size == 0) return hipSuccess; /* as HIP: no memory, a NULL pointer, success */
  struct sim_block *table = mori__sim_grow(blocks, &cap_blocks, nblocks, sizeof blocks[0]);
  if (table == NULL) return out_of_memory(call, "block table");
  blocks = table;
  size_t len = page_round(size);
  void *alias = size > SIZE_MAX / 2 ? MAP_FAILED
                                    : mmap(NULL, len, PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void *p = alias == MAP_FAILED ? MAP_FAILED : mmap(NULL, len, PROT_NONE, RESERVE_FLAGS, -1, 0);
  if (p == MAP_FAILED) {
    if (alias != MAP_FAILED) munmap(alias, len);
    mori__shim_detail("%s: mmap of %zu bytes: %s", call, size, strerror(errno));
    return hipErrorOutOfMemory;
  }
  struct sim_block row = {{(uintptr_t)p, len}, alias, size};
  range_insert(blocks, &nblocks, sizeof row, &row);
  *ptr = p;
  return hipSuccess;
}

/* Both mappings go, so a use after hipFree faults for the host and the
 * engine alike. */
static hipError_t free_locked(void *ptr) {
  if (ptr == NULL) return hipSuccess;
  size_t i = HOLDING(blocks, nblocks, (uintptr_t)ptr);
  if (i == nblocks || blocks[i].at.base != (uintptr_t)ptr)
    return mori__sim_contract("hipFree", RULE_HIPFREE_UNKNOWN, "%p%s", ptr,
                              mori__sim_in_reservation(ptr, 1) ? " is VMM address space" : "");
  munmap(ptr, blocks[i].at.size);
  munmap(blocks[i].alias, blocks[i].at.size);
  range_remove(blocks, &nblocks, sizeof blocks[0], i);
  return hipSuccess;
}

/* ---- the engine's view of device memory ---- */

/* Where the engine reaches the bytes from an address on: host, and how
 * many of them lie there in a row (len); is_host: plain host memory, not
 * device memory. */
struct view {
  unsigned char *host;
  size_t len;
  int is_host;
};

enum reach { REACH_OK, REACH_NOT_MAPPED, REACH_NO_ACCESS, REACH_NOT_DEVICE, REACH_INTO_DEVICE };

/* What an operand's bytes may be: device memory only; device memory or,
 * for a copy's host side, plain host memory (its first byte decides); or,
 * once a host operand's first bytes were host memory, host memory only. */
enum side { SIDE_DEVICE, SIDE_EITHER, SIDE_HOST };

/* The view of the n > 0 bytes from addr (*fault: the first byte refused).
 * Device memory: in VMM address space, mapped with the access the operation
 * needs; a hipMalloc block's bytes are its alias; a hipHostMalloc block's
 * are its own.  Any other byte is plain host memory, reached as it is up to
 * the next device range, and only where side allows it: HIP refuses a
 * device operand none of its allocations holds, and a GPU has no path to
 * pageable host memory.  Two binary searches, a third inside a reservation;
 * a walk of the hipHostMalloc blocks outside them.  Lock held. */
static enum reach view_at(uintptr_t addr, size_t n, int need_write, enum side side,
                          struct view *v, uintptr_t *fault) {
  size_t r = INDEX(reservations, nreservations, addr), b = INDEX(blocks, nblocks, addr);
  *fault = addr;
  int in_reservation = r < nreservations && reservations[r].at.base <= addr;
  if ((in_reservation || (b < nblocks && blocks[b].at.base <= addr)) && side == SIDE_HOST)
    return REACH_INTO_DEVICE;
  if (in_reservation) {
    const struct sim_mapping *m = mapping_at(addr);
    if (m == NULL) return REACH_NOT_MAPPED;
    size_t off = addr - m->at.base, len = m->at.size - off < n ? m->at.size - off : n;
    for (size_t g = off / GRAN; g <= (off + len - 1) / GRAN; g++) {
      unsigned char access = m->access[g];
      if (access == hipMemAccessFlagsProtNone ||
          (need_write && access != hipMemAccessFlagsProtReadWrite)) {
        if (g > off / GRAN) *fault = m->at.base + g * GRAN;
        return REACH_NO_ACCESS;
      }
    }
    *v = (struct view){m->alias + off, len, 0};
    return REACH_OK;
  }
  if (b < nblocks && blocks[b].at.base <= addr) {
    size_t off = addr - blocks[b].at.base, rest = blocks[b].at.size - off;
    *v = (struct view){blocks[b].alias + off, rest < n ? rest : n, 0};
    return REACH_OK;
  }
  uintptr_t next = UINTPTR_MAX;
  if (r < nreservations) next = reservations[r].at.base;
  if (b < nblocks && blocks[b].at.base < next) next = blocks[b].at.base;
  size_t len = next - addr < n ? next - addr : n;
  size_t pinned = side == SIDE_HOST ? 0 : mori__sim_host_block_rest(addr);
  if (pinned > 0) {
    *v = (struct view){(unsigned char *)addr, pinned < len ? pinned : len, 0};
    return REACH_OK;
  }
  if (side == SIDE_DEVICE) return REACH_NOT_DEVICE;
  *v = (struct view){(unsigned char *)addr, len, 1};
  return REACH_OK;
}

/* The side the rest of an operand must be on, after a view of its bytes. */
static enum side side_after(const struct view *v) { return v->is_host ? SIDE_HOST : SIDE_DEVICE; }

/* A range that would wrap the address space ends at its top. */
static size_t clamp(uintptr_t addr, size_t n) {
  return n > UINTPTR_MAX - addr ? UINTPTR_MAX - addr : n;
}

hipError_t mori__sim_check_access(const char *call, const void *p, size_t n, int need_write,
                                  int host_ok) {
  uintptr_t at = (uintptr_t)p, fault = 0;
  struct view v;
  enum side side = host_ok ? SIDE_EITHER : SIDE_DEVICE;
  for (n = clamp(at, n); n > 0; at += v.len, n -= v.len, side = side_after(&v)) {
    switch (view_at(at, n, need_write, side, &v, &fault)) {
    case REACH_OK: break;
    case REACH_NOT_MAPPED:
      return mori__sim_contract(call, RULE_NOT_MAPPED, "%p is reserved but not mapped",
                                (void *)fault);
    case REACH_NO_ACCESS:
      return mori__sim_contract(call, RULE_NO_ACCESS, "%p needs %s access", (void *)fault,
                                need_write ? "read-write" : "read");
    case REACH_NOT_DEVICE:
      return mori__sim_contract(call, RULE_NOT_DEVICE,
                                "%p is no device memory: no mapping, hipMalloc or hipHostMalloc "
                                "block holds it",
                                (void *)fault);
    case REACH_INTO_DEVICE:
      return mori__sim_contract(call, RULE_NOT_DEVICE,
                                "the host memory from %p runs into device address space at %p",
                                p, (void *)fault);
    }
  }
  return hipSuccess;
}

int mori__sim_touches_fabric(const void *p, size_t n) {
  uintptr_t lo = (uintptr_t)p, hi = lo + clamp(lo, n);
  for (size_t i = INDEX(mappings, nmappings, lo); i < nmappings && mappings[i].at.base < hi; i++)
    if (mappings[i].alloc->type == hipMemHandleTypeFabric) return 1;
  return 0;
}

int mori__sim_in_reservation(const void *p, size_t n) {
  uintptr_t lo = (uintptr_t)p, hi = lo + clamp(lo, n);
  size_t i = INDEX(reservations, nreservations, lo);
  return i < nreservations && reservations[i].at.base < hi;
}

/* ---- the engine: bytes move through the views, outside the lock ---- */

/* The engine runs what the checks passed when it was enqueued; memory
 * unmapped or access taken away since is what a GPU reports as a memory
 * access fault.  The detail goes to why: a stream's worker has no caller. */
static hipError_t fault_at(const char *call, enum reach r, uintptr_t fault, char *why,
                           size_t whylen) {
  static const char *const what[] = {
      [REACH_NOT_MAPPED] = "unmapped after the operation was enqueued",
      [REACH_NO_ACCESS] = "access taken away after the operation was enqueued",
      [REACH_NOT_DEVICE] = "no device memory there",
      [REACH_INTO_DEVICE] = "host memory running into device address space",
  };
  snprintf(why, whylen, "%s: hipErrorIllegalAddress: memory access fault at %p (%s)", call,
           (void *)fault, what[r]);
  return hipErrorIllegalAddress;
}

/* Views of dst (written, on side *to_side) and src (read, on *from_side,
 * unless from is NULL) from one look at the tables; the sides the rest of
 * each must be on follow. */
static hipError_t engine_views(const char *call, uintptr_t dst, uintptr_t src, size_t n,
                               struct view *to, enum side *to_side, struct view *from,
                               enum side *from_side, char *why, size_t whylen) {
  uintptr_t fault = 0;
  pthread_mutex_lock(&mori__sim_lock);
  enum reach r = view_at(dst, n, 1, *to_side, to, &fault);
  if (r == REACH_OK && from != NULL) r = view_at(src, n, 0, *from_side, from, &fault);
  pthread_mutex_unlock(&mori__sim_lock);
  if (r != REACH_OK) return fault_at(call, r, fault, why, whylen);
  *to_side = side_after(to);
  if (from != NULL) *from_side = side_after(from);
  return hipSuccess;
}

hipError_t mori__sim_copy(const char *call, void *dst, const void *src, size_t n, unsigned host,
                          char *why, size_t whylen) {
  uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
  enum side to_side = host & MORI__SIM_HOST_DST ? SIDE_EITHER : SIDE_DEVICE;
  enum side from_side = host & MORI__SIM_HOST_SRC ? SIDE_EITHER : SIDE_DEVICE;
  n = clamp(d, clamp(s, n));
  while (n > 0) {
    struct view to, from;
    hipError_t e = engine_views(call, d, s, n, &to, &to_side, &from, &from_side, why, whylen);
    if (e != hipSuccess) return e;
    size_t k = to.len < from.len ? to.len : from.len;
    memmove(to.host, from.host, k);
    d += k;
    s += k;
    n -= k;
  }
  return hipSuccess;
}

/* Zeroing whole pages of a shared memfd mapping punches a hole instead of
 * writing: the pages read back as zeros and stop using memory.  Most of a
 * fault sweep's time was the zeroing of fresh 2 MiB blocks page by page. */
static void fill_view(const struct view *v, int value) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), at = (uintptr_t)v->host;
  uintptr_t lo = (at + page - 1) & ~(page - 1), hi = (at + v->len) & ~(page - 1);
  if (value != 0 || hi <= lo || madvise((void *)lo, hi - lo, MADV_REMOVE) != 0) {
    memset(v->host, value, v->len); /* private memory (hipMalloc) or a partial page */
    return;
  }
  memset(v->host, 0, lo - at);
  memset((void *)hi, 0, at + v->len - hi);
}

hipError_t mori__sim_fill(const char *call, void *dst, int value, size_t n, char *why,
                          size_t whylen) {
  uintptr_t d = (uintptr_t)dst;
  enum side side = SIDE_DEVICE;
  for (n = clamp(d, n); n > 0;) {
    struct view to;
    hipError_t e = engine_views(call, d, 0, n, &to, &side, NULL, NULL, why, whylen);
    if (e != hipSuccess) return e;
    fill_view(&to, value);
    d += to.len;
    n -= to.len;
  }
  return hipSuccess;
}

hipError_t mori__sim_word(const char *call, void *p, int need_write, uint32_t **word, char *why,
                          size_t whylen) {
  uintptr_t fault = 0;
  struct view v;
  pthread_mutex_lock(&mori__sim_lock);
  enum reach r = view_at((uintptr_t)p, 4, need_write, SIDE_DEVICE, &v, &fault);
  pthread_mutex_unlock(&mori__sim_lock);
  if (r != REACH_OK) return fault_at(call, r, fault, why, whylen);
  *word = (uint32_t *)v.host; /* 4-aligned: a word never straddles two views */
  return hipSuccess;
}

/* ---- the entry points: each holds the lock around its _locked body ---- */

#define LOCKED(expr)                                                                       \
  do {                                                                                     \
    pthread_mutex_lock(&mori__sim_lock);                                                   \
    hipError_t e_ = (expr);                                                                \
    pthread_mutex_unlock(&mori__sim_lock);                                                 \
    return e_;                                                                             \
  } while (0)

hipError_t mori__sim_mem_create(hipMemGenericAllocationHandle_t *handle, size_t size,
                                const hipMemAllocationProp *prop, unsigned long long flags) {
  LOCKED(create_locked(handle, size, prop, flags));
}

hipError_t mori__sim_mem_release(hipMemGenericAllocationHandle_t handle) {
  LOCKED(release_locked(handle));
}

hipError_t mori__sim_mem_retain(hipMemGenericAllocationHandle_t *handle, void *addr) {
  LOCKED(retain_locked(handle, addr));
}

hipError_t mori__sim_address_reserve(void **ptr, size_t size, size_t alignment, void *addr,
                                     unsigned long long flags) {
  LOCKED(reserve_locked(ptr, size, alignment, addr, flags));
}

hipError_t mori__sim_address_free(void *ptr, size_t size) {
  LOCKED(address_free_locked(ptr, size));
}

hipError_t mori__sim_mem_map(void *ptr, size_t size, size_t offset,
                             hipMemGenericAllocationHandle_t handle, unsigned long long flags) {
  LOCKED(map_locked(ptr, size, offset, handle, flags));
}

hipError_t mori__sim_mem_unmap(void *ptr, size_t size) { LOCKED(unmap_locked(ptr, size)); }

hipError_t mori__sim_malloc(void **ptr, size_t size) { LOCKED(malloc_locked(ptr, size)); }

hipError_t mori__sim_free(void *ptr) { LOCKED(free_locked(ptr)); }

/* Quirk concurrent-vmm (mori #476): on ROCm an import running on another
 * thread while a hipMemSetAccess runs makes the set-access fail with
 * hipErrorInvalidValue.  The sim keeps a count of imports in flight in the
 * process and widens each import's window, so two threads that import and
 * grant at once collide as they do there; the seam's VMM lock is what
 * keeps them apart. */
static int imports_in_flight;
static pid_t vmm_thread;  /* the last thread that called import or set-access */
static int vmm_threads;   /* 1 once a second thread did: the window opens */

static void note_vmm_thread(void) {
  pid_t me = gettid(), seen = __atomic_exchange_n(&vmm_thread, me, __ATOMIC_SEQ_CST);
  if (seen != 0 && seen != me) __atomic_store_n(&vmm_threads, 1, __ATOMIC_SEQ_CST);
}

/* Widened only in a process whose VMM calls come from several threads:
 * single-threaded runs (sweeps, replays) pay nothing for the quirk. */
static void import_window_opens(void) {
  if (!mori__sim_quirk(MORI__SIM_Q_CONCURRENT_VMM)) return;
  note_vmm_thread();
  __atomic_add_fetch(&imports_in_flight, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&vmm_threads, __ATOMIC_SEQ_CST)) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

static void import_window_closes(void) {
  if (mori__sim_quirk(MORI__SIM_Q_CONCURRENT_VMM))
    __atomic_sub_fetch(&imports_in_flight, 1, __ATOMIC_SEQ_CST);
}

hipError_t mori__sim_set_access(void *ptr, size_t size, const hipMemAccessDesc *desc,
                                size_t count) {
  if (mori__sim_quirk(MORI__SIM_Q_CONCURRENT_VMM)) note_vmm_thread();
  if (mori__sim_quirk(MORI__SIM_Q_CONCURRENT_VMM) &&
      __atomic_load_n(&imports_in_flight, __ATOMIC_SEQ_CST) > 0) {
    mori__shim_detail("hipMemSetAccess: quirk concurrent-vmm: an import runs on another thread "
                      "(ROCm needs a process-wide VMM mutex, mori #476)");
    return hipErrorInvalidValue;
  }
  LOCKED(set_access_locked(ptr, size, desc, count));
}

hipError_t mori__sim_export(void *shareable, hipMemGenericAllocationHandle_t handle,
                            hipMemAllocationHandleType type, unsigned long long flags) {
  LOCKED(export_locked(shareable, handle, type, flags));
}

hipError_t mori__sim_import(hipMemGenericAllocationHandle_t *handle, void *osHandle,
                            hipMemAllocationHandleType type) {
  import_window_opens();
  pthread_mutex_lock(&mori__sim_lock);
  hipError_t e = import_locked(handle, osHandle, type);
  pthread_mutex_unlock(&mori__sim_lock);
  import_window_closes();
  return e;
}
