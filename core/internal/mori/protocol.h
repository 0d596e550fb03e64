/*
 * protocol.h - the checks rendezvous makes on what other processes sent:
 * the gathered world of requests, and each fd datagram against the request
 * of the rank it claims to come from.  Pure functions over decoded data, so
 * they are fuzz targets; each failure names the defect and the ranks.
 */
#ifndef MORI_PROTOCOL_H
#define MORI_PROTOCOL_H

#include "mori/wire.h"
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mori_world_info {
  uint32_t handle_type;          /* the one type every rank exported */
  int same_host;                 /* all host ids equal */
  int world_within_direct_access;/* every peer mapped for load/store (torch's meaning) */
  int shared_device;             /* a peer on self's host uses self's device */
  uint64_t alloc_size;           /* the stride of the span */
} mori_world_info;

/* Checks reqs[0..world_size) gathered by rank self: each reqs[i].rank == i and
 * world_size == world_size; every uid equal to self's (MORI_EAUTH: peers must
 * be the same user); equal alloc/buffer/pad sizes; one handle type;
 * distinct devices among ranks of one host, unless
 * mori_symm_allow_overlapping_devices(); every peer within direct access of
 * self (on self's host, or through fabric handles: a group spanning hosts
 * without them is an error naming a rank self cannot reach); distinct
 * nonces.  Returns 0 and fills info, or MORI_EMISMATCH / MORI_EPROTO with
 * mori_last_error() naming the field and ranks. */
int mori_validate_world(const mori_request *reqs, int world_size, int self, mori_world_info *info);

/* What the receiver knows when a datagram arrives. */
typedef struct mori_datagram_expect {
  uint64_t window_seq;
  int self_rank;
  int world_size;
  const mori_request *reqs;   /* the validated world */
  const uint8_t *seen;        /* per rank: bit 1 << type for each type already taken */
  const uint64_t *challenges; /* per rank: the secret challenged to its socket, which
                                 its answer must echo (NULL: none was sent) */
} mori_datagram_expect;

/* Checks a decoded datagram and the SO_PASSCRED credentials it came with:
 * sender in range and not self, receiver is self, sequence current, one fd
 * attached to an fd datagram and none to a challenge or an answer (nfds),
 * both nonces match the requests, pid and uid equal the sender's request,
 * an answer echoes the challenge sent to the sender's socket, not a
 * duplicate of its type.  0, or MORI_EPROTO (stale, duplicate, malformed)
 * / MORI_EAUTH (credentials, nonce or echo) with a message. */
int mori_validate_datagram(const mori_datagram *d, pid_t pid, uid_t uid, int nfds,
                           const mori_datagram_expect *x);

#ifdef __cplusplus
}
#endif
#endif
