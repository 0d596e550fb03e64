/*
 * protocol.c - what rendezvous checks in what other processes sent: the
 * gathered world of requests, and each fd datagram against the request of
 * the rank it claims.  Pure functions over decoded data; every rejection
 * names the field, the ranks and the values.
 */
#include "mori/protocol.h"

#include "mori/error_internal.h"
#include "mori/hip_shim.h"
#include "mori/symm.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const struct {
  uint32_t type;
  const char *name;
} handle_types[] = {
    {hipMemHandleTypePosixFileDescriptor, "posix_fd"},
    {hipMemHandleTypeFabric, "fabric"},
};

static const char *handle_type_name(uint32_t type) {
  for (size_t i = 0; i < sizeof handle_types / sizeof handle_types[0]; i++)
    if (handle_types[i].type == type) return handle_types[i].name;
  return "unknown";
}

/* ---- the world ---- */

/* Size fields every rank must agree on, compared against rank 0's. */
static const struct {
  const char *name;
  size_t offset;
} agreed_sizes[] = {
    {"alloc_size", offsetof(mori_request, alloc_size)},
    {"buffer_size", offsetof(mori_request, buffer_size)},
    {"signal_pad_offset", offsetof(mori_request, signal_pad_offset)},
    {"signal_pad_size", offsetof(mori_request, signal_pad_size)},
};

static uint64_t size_field(const mori_request *r, size_t offset) {
  uint64_t v;
  memcpy(&v, (const char *)r + offset, sizeof v);
  return v;
}

static int check_identity(const mori_request *reqs, int world_size) {
  for (int i = 0; i < world_size; i++) {
    if (reqs[i].rank != (uint32_t)i)
      return mori__error(MORI_EPROTO, "rendezvous: the request gathered for rank %d claims rank %u",
                         i, reqs[i].rank);
    if (reqs[i].world_size != (uint32_t)world_size)
      return mori__error(MORI_EMISMATCH,
                         "rendezvous: rank %d world_size %u differs from the group's %d", i,
                         reqs[i].world_size, world_size);
  }
  return 0;
}

/* Peers are us: an fd goes only to a process of our own uid, so a request
 * naming another uid (whoever wrote it into the store) ends the
 * rendezvous before any fd is sent.  The own request carries our euid. */
static int check_same_user(const mori_request *reqs, int world_size, int self) {
  for (int i = 0; i < world_size; i++)
    if (reqs[i].uid != reqs[self].uid)
      return mori__error(MORI_EAUTH,
                         "rendezvous: rank %d's request says uid %u, but this process (rank %d) "
                         "is uid %u: every peer must be the same user",
                         i, reqs[i].uid, self, reqs[self].uid);
  return 0;
}

static int check_agreement(const mori_request *reqs, int world_size) {
  for (int i = 1; i < world_size; i++) {
    for (size_t f = 0; f < sizeof agreed_sizes / sizeof agreed_sizes[0]; f++) {
      uint64_t mine = size_field(&reqs[i], agreed_sizes[f].offset);
      uint64_t first = size_field(&reqs[0], agreed_sizes[f].offset);
      if (mine != first)
        return mori__error(MORI_EMISMATCH, "rendezvous: rank %d %s %llu differs from rank 0's %llu",
                           i, agreed_sizes[f].name, (unsigned long long)mine,
                           (unsigned long long)first);
    }
    if (reqs[i].handle_type != reqs[0].handle_type)
      return mori__error(
          MORI_EMISMATCH, "rendezvous: rank %d handle type %s differs from rank 0's %s", i,
          handle_type_name(reqs[i].handle_type), handle_type_name(reqs[0].handle_type));
  }
  uint32_t type = reqs[0].handle_type;
  if (type != hipMemHandleTypePosixFileDescriptor && type != hipMemHandleTypeFabric)
    return mori__error(MORI_EPROTO, "rendezvous: handle type %u is neither posix_fd nor fabric",
                       type);
  return 0;
}

static int first_other_host(const mori_request *reqs, int world_size, int self) {
  for (int i = 0; i < world_size; i++)
    if (memcmp(reqs[i].host_id, reqs[self].host_id, MORI_WIRE_HOST_ID_SIZE) != 0) return i;
  return -1;
}

/* Direct access, as torch's backends mean it: every peer's memory is mapped
 * for load/store on this rank's device.  NVSHMEM computes it per peer
 * (nvshmem_ptr() is null for a peer behind the network), NIXL's RDMA peers
 * never are, and the CUDA backend maps every peer or fails, so it answers
 * true.  A peer on this rank's host is reachable through an fd or a fabric
 * handle; a peer on another host only through a fabric handle (one
 * scale-up fabric).  MORI has no network path: a world that is not within
 * direct access is refused, never formed with holes.  Returns the first
 * rank this rank cannot reach, or -1. */
static int first_unreachable(const mori_request *reqs, int world_size, int self) {
  if (reqs[self].handle_type == hipMemHandleTypeFabric) return -1;
  return first_other_host(reqs, world_size, self);
}

/* Duplicates are found by sorting (host, device) and nonce keys: worlds go
 * up to MORI_WIRE_MAX_WORLD, where comparing every pair would be slow.
 * Ties sort by rank, so the pair reported is deterministic. */
typedef struct rank_key {
  uint8_t host_id[MORI_WIRE_HOST_ID_SIZE];
  int32_t device;
  uint64_t nonce;
  int rank;
} rank_key;

#define CMP(a, b) (((a) > (b)) - ((a) < (b)))

static int same_device(const rank_key *a, const rank_key *b) {
  return a->device == b->device && memcmp(a->host_id, b->host_id, MORI_WIRE_HOST_ID_SIZE) == 0;
}

static int cmp_device(const void *pa, const void *pb) {
  const rank_key *a = pa, *b = pb;
  int c = memcmp(a->host_id, b->host_id, MORI_WIRE_HOST_ID_SIZE);
  if (c == 0) c = CMP(a->device, b->device);
  return c ? c : CMP(a->rank, b->rank);
}

static int cmp_nonce(const void *pa, const void *pb) {
  const rank_key *a = pa, *b = pb;
  int c = CMP(a->nonce, b->nonce);
  return c ? c : CMP(a->rank, b->rank);
}

/* Devices must be distinct per host unless overlapping devices are allowed
 * (torch's TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES): then several ranks
 * share a device, each with its own allocation, as in torch's test of it. */
static int check_distinct(const mori_request *reqs, int world_size) {
  rank_key *keys = mori_malloc((size_t)world_size * sizeof *keys);
  if (!keys) return mori__nomem("rendezvous: %d rank keys", world_size);
  for (int i = 0; i < world_size; i++) {
    memcpy(keys[i].host_id, reqs[i].host_id, MORI_WIRE_HOST_ID_SIZE);
    keys[i].device = reqs[i].device;
    keys[i].nonce = reqs[i].nonce;
    keys[i].rank = i;
  }
  int rc = 0;
  if (!mori_symm_allow_overlapping_devices()) {
    qsort(keys, (size_t)world_size, sizeof *keys, cmp_device);
    for (int i = 1; i < world_size && rc == 0; i++)
      if (same_device(&keys[i - 1], &keys[i]))
        rc = mori__error(MORI_EMISMATCH,
                         "rendezvous: ranks %d and %d both use device %d on one host "
                         "(MORI_SYMM_ALLOW_OVERLAPPING_DEVICES=1 allows it, as "
                         "TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES=1 does under torch)",
                         keys[i - 1].rank, keys[i].rank, (int)keys[i].device);
  }
  if (rc == 0) qsort(keys, (size_t)world_size, sizeof *keys, cmp_nonce);
  for (int i = 1; i < world_size && rc == 0; i++)
    if (keys[i - 1].nonce == keys[i].nonce)
      rc = mori__error(MORI_EPROTO, "rendezvous: ranks %d and %d sent the same nonce %#llx",
                       keys[i - 1].rank, keys[i].rank, (unsigned long long)keys[i].nonce);
  free(keys);
  return rc;
}

int mori_validate_world(const mori_request *reqs, int world_size, int self,
                        mori_world_info *info) {
  if (!reqs || !info || world_size < 1 || world_size > MORI_WIRE_MAX_WORLD || self < 0 ||
      self >= world_size)
    return mori__error(MORI_EINVAL, "mori_validate_world: world %d, self %d", world_size, self);
  MORI_GUARD(check_identity(reqs, world_size));
  MORI_GUARD(check_same_user(reqs, world_size, self));
  MORI_GUARD(check_agreement(reqs, world_size));

  /* The fd path is host-local: fds travel over AF_UNIX sockets. */
  int unreachable = first_unreachable(reqs, world_size, self);
  if (unreachable >= 0)
    return mori__error(MORI_EMISMATCH,
                       "group spans hosts (rank %d on another host than rank %d) but handle type "
                       "is posix_fd: needs fabric handles",
                       unreachable, self);
  MORI_GUARD(check_distinct(reqs, world_size));

  info->handle_type = reqs[0].handle_type;
  info->same_host = first_other_host(reqs, world_size, self) < 0;
  info->world_within_direct_access = unreachable < 0;
  info->shared_device = 0;
  for (int i = 0; i < world_size; i++)
    info->shared_device |= i != self && reqs[i].device == reqs[self].device &&
                           memcmp(reqs[i].host_id, reqs[self].host_id, MORI_WIRE_HOST_ID_SIZE) == 0;
  info->alloc_size = reqs[0].alloc_size;
  return 0;
}

/* ---- fd datagrams ---- */

/* How each type of datagram is named in messages, and the fds it carries. */
static const struct {
  const char *name;
  int nfds;
} datagram_types[MORI_DATAGRAM__TYPES] = {
    [MORI_DATAGRAM_FD] = {"fd datagram", 1},
    [MORI_DATAGRAM_CHALLENGE] = {"challenge", 0},
    [MORI_DATAGRAM_ANSWER] = {"answer", 0},
};

/* The claimed sender first (every later message names it), then shape and
 * addressing, then the sequence: a stale datagram from the real sender
 * carries last window's nonces and would otherwise read as forged. */
static int check_addressing(const mori_datagram *d, int nfds, const mori_datagram_expect *x) {
  uint32_t s = d->sender_rank, self = (uint32_t)x->self_rank;
  const char *what = datagram_types[d->type].name;
  if (s >= (uint32_t)x->world_size)
    return mori__error(MORI_EPROTO, "%s claims rank %u, outside the world of %d", what, s,
                       x->world_size);
  if (s == self)
    return mori__error(MORI_EPROTO, "%s claims rank %u, which is this rank", what, s);
  if (nfds != datagram_types[d->type].nfds)
    return mori__error(MORI_EPROTO, "%s from rank %u carries %d fds, expected %d", what, s, nfds,
                       datagram_types[d->type].nfds);
  if (d->receiver_rank != self)
    return mori__error(MORI_EPROTO, "%s from rank %u is addressed to rank %u, not rank %u", what,
                       s, d->receiver_rank, self);
  if (d->window_seq != x->window_seq)
    return mori__error(MORI_EPROTO, "stale %s from rank %u: window sequence %llu, expected %llu",
                       what, s, (unsigned long long)d->window_seq,
                       (unsigned long long)x->window_seq);
  return 0;
}

/* SO_PASSCRED credentials and both nonces against the requests. */
static int check_credentials(const mori_datagram *d, pid_t pid, uid_t uid,
                             const mori_datagram_expect *x) {
  uint32_t s = d->sender_rank, self = (uint32_t)x->self_rank;
  const mori_request *sender = &x->reqs[s], *receiver = &x->reqs[self];
  const char *what = datagram_types[d->type].name;
  if ((uint32_t)pid != sender->pid)
    return mori__error(MORI_EAUTH, "%s claims rank %u but comes from pid %ld (rank %u is pid %u)",
                       what, s, (long)pid, s, sender->pid);
  if ((uint32_t)uid != sender->uid)
    return mori__error(MORI_EAUTH,
                       "%s claims rank %u but comes from uid %lu (rank %u is uid %u)", what, s,
                       (unsigned long)uid, s, sender->uid);
  if (d->sender_nonce != sender->nonce)
    return mori__error(MORI_EAUTH,
                       "%s claims rank %u but carries sender nonce %#llx (rank %u's is %#llx)",
                       what, s, (unsigned long long)d->sender_nonce, s,
                       (unsigned long long)sender->nonce);
  if (d->receiver_nonce != receiver->nonce)
    return mori__error(MORI_EAUTH, "%s from rank %u carries receiver nonce %#llx, not rank %u's %#llx",
                       what, s, (unsigned long long)d->receiver_nonce, self,
                       (unsigned long long)receiver->nonce);
  return 0;
}

/* An answer proves that rank s's process read the challenge sent to the
 * socket its request names: only that socket was told the secret. */
static int check_echo(const mori_datagram *d, const mori_datagram_expect *x) {
  uint32_t s = d->sender_rank;
  if (d->type != MORI_DATAGRAM_ANSWER) return 0;
  if (x->challenges == NULL)
    return mori__error(MORI_EAUTH, "answer from rank %u, which was sent no challenge", s);
  if (d->challenge != x->challenges[s])
    return mori__error(MORI_EAUTH,
                       "answer from rank %u echoes %#llx, not the challenge sent to its socket",
                       s, (unsigned long long)d->challenge);
  return 0;
}

/* Duplicates are checked last, so a forged duplicate reads as forged. */
int mori_validate_datagram(const mori_datagram *d, pid_t pid, uid_t uid, int nfds,
                           const mori_datagram_expect *x) {
  if (!d || !x || !x->reqs || !x->seen || x->world_size < 1 || x->self_rank < 0 ||
      x->self_rank >= x->world_size || d->type >= MORI_DATAGRAM__TYPES)
    return mori__error(MORI_EINVAL,
                       "mori_validate_datagram: self rank %d, world %d, type %u, or no "
                       "requests/seen flags",
                       x ? x->self_rank : -1, x ? x->world_size : 0, d ? d->type : 0);
  MORI_GUARD(check_addressing(d, nfds, x));
  MORI_GUARD(check_credentials(d, pid, uid, x));
  MORI_GUARD(check_echo(d, x));
  if (x->seen[d->sender_rank] & (1u << d->type))
    return mori__error(MORI_EPROTO, "duplicate %s from rank %u", datagram_types[d->type].name,
                       d->sender_rank);
  return 0;
}
