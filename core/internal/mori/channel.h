/*
 * channel.h - the fd channel: AF_UNIX datagram sockets with SCM_RIGHTS and
 * SO_PASSCRED in a private 0700 directory, for the POSIX fd handle path.
 * A socket is bound before the request naming it is published, so a peer
 * never finds it missing.  All socket I/O goes through mori_sendmsg /
 * mori_recvmsg so datagram faults are injectable.
 */
#ifndef MORI_CHANNEL_H
#define MORI_CHANNEL_H

#include "mori/protocol.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mori_channel mori_channel;

/* Binds a fresh socket in a private directory of its own (0700, named
 * mori-symm-<pid>-<host tag>-<random>) under the socket base: the first
 * of MORI_SYMM_SOCKET_DIR, XDG_RUNTIME_DIR, TMPDIR that is set, else /tmp.
 * The base must be a directory no other user can change (ours, or root's
 * and sticky like /tmp; every directory above it trusted too), checked on
 * its fd; a base that fails is an error naming it, never a reason to try
 * the next.  The first open in a process removes what dead processes of
 * this host left in the base (their sockets and directories). */
int mori_channel_open(uint64_t window_seq, mori_channel **out);
/* The socket's path, as peers are told it in the request. */
const char *mori_channel_name(const mori_channel *ch);
int mori_channel_fd(const mori_channel *ch);
/* Datagrams from non-members dropped by the last exchange. */
int mori_channel_dropped(const mori_channel *ch);

/* Sends my_fd to every other rank and receives one fd from each, in any
 * arrival order, interleaving sends and receives (a peer's queue may be
 * full) with poll, until all are done or timeout_ms passes.  fds_out[r] is
 * the fd from rank r (-1 for self).  Before anything is sent, every peer's
 * socket is checked: a socket of our euid (which its request must claim
 * too) in a directory of ours nobody else can write; sends go to the
 * socket checked.  The fd goes to a peer only after the peer's process
 * has proved that it reads that socket: a secret challenged to the socket
 * must come back in an answer whose kernel credentials are the pid and uid
 * of the peer's request (and this rank answers its peers' challenges the
 * same way).  Every datagram is checked with mori_validate_datagram:
 * one whose kernel credentials are no member's (pid and uid of a request)
 * is dropped and counted, whatever it says; a member's that fails a check
 * fails the exchange.  On any error every fd received so far is closed and
 * the error names the peer and the defect (for a timeout: the ranks not
 * heard from), and the non-members' datagrams dropped, if any. */
int mori_channel_exchange(mori_channel *ch, const mori_request *reqs, int world_size, int self,
                          uint64_t window_seq, int my_fd, int *fds_out, int timeout_ms);

/* mori_channel_exchange with the peers r where with[r] is 1 only (NULL:
 * every one): a heal's survivor sends its fd to the replacement and
 * receives the replacement's.  A member's datagram from outside them is
 * dropped and counted, as a non-member's is. */
int mori_channel_exchange_with(mori_channel *ch, const mori_request *reqs, int world_size,
                               int self, uint64_t window_seq, int my_fd, int *fds_out,
                               int timeout_ms, const uint8_t *with);

/* While exchanging, check() is called every few milliseconds; a negative
 * return (with its message set) ends the exchange with that error: how a
 * peer's published abort stops this rank from waiting out its timeout. */
void mori_channel_set_abort_check(mori_channel *ch, int (*check)(void *ctx), void *ctx);

/* Closes the socket and removes it and its private directory. */
void mori_channel_close(mori_channel *ch);

#ifdef __cplusplus
}
#endif
#endif
