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

/* Binds a fresh socket in the process's private directory (created once,
 * 0700, under MORI_SYMM_SOCKET_DIR, else XDG_RUNTIME_DIR, else /tmp).  The
 * path is unique per (pid, seq, random). */
int mori_channel_open(uint64_t window_seq, mori_channel **out);
const char *mori_channel_name(const mori_channel *ch);
int mori_channel_fd(const mori_channel *ch);

/* Sends my_fd to every other rank and receives one fd from each, in any
 * arrival order, interleaving sends and receives (a peer's queue may be
 * full) with poll, until all are done or timeout_ms passes.  fds_out[r] is
 * the fd from rank r (-1 for self).  Every datagram is checked with
 * mori_validate_datagram; on any error every fd received so far is closed
 * and the error names the peer and the defect (for a timeout: the ranks
 * not heard from). */
int mori_channel_exchange(mori_channel *ch, const mori_request *reqs, int world, int self,
                          uint64_t window_seq, int my_fd, int *fds_out, int timeout_ms);

/* While exchanging, check() is called every few milliseconds; a negative
 * return (with its message set) ends the exchange with that error: how a
 * peer's published abort stops this rank from waiting out its timeout. */
void mori_channel_set_abort_check(mori_channel *ch, int (*check)(void *ctx), void *ctx);

/* Closes the socket and unlinks its path. */
void mori_channel_close(mori_channel *ch);

#ifdef __cplusplus
}
#endif
#endif
