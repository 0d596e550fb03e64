/*
 * harness.h - what the store and channel tests share: counting open fds,
 * scratch directories, forked ranks, hand-built requests, objects with a
 * marker in them, and hand-crafted datagrams sent past the channel.
 */
#ifndef MORI_TESTS_CHANNEL_HARNESS_H
#define MORI_TESTS_CHANNEL_HARNESS_H

#include "mori/wire.h"

#include <stddef.h>
#include <stdint.h>

/* Entries in /proc/self/fd, not counting the one used to read it. */
int harness_count_fds(void);

/* A fresh directory under $TMPDIR or /tmp (malloc'd path), and its removal
 * with everything in it. */
char *harness_tmpdir(const char *tag);
void harness_remove_tree(const char *dir);

/* Forks n processes running fn(rank, n, arg); each exits with 0 iff fn
 * returned 0.  Returns how many did not. */
int harness_run_ranks(int n, int (*fn)(int rank, int n, void *arg), void *arg);

uint64_t harness_random64(void);

/* A request as rendezvous would publish it for the fd path: this process's
 * pid and uid, a random nonce, and the channel's socket name. */
void harness_request(mori_request *r, int rank, int world, const char *socket_name);

/* An object to pass (a memfd) holding marker, and whether fd refers to an
 * object holding marker. */
int harness_marker_fd(const char *marker);
int harness_fd_has_marker(int fd, const char *marker);

/* Sends len bytes with nfds fds attached (SCM_RIGHTS) to the socket at
 * path, from a socket of its own.  0 or -errno. */
int harness_send_raw(const char *path, const void *buf, size_t len, const int *fds, int nfds);

/* Plays the proof for the peers of rank victim whose channels live in this
 * process, while victim exchanges: a thread reads the first datagram on
 * each peer's socket (sockets[r], -1 for none), which is victim's
 * challenge, and answers it to victim's socket, from this process (the
 * peers' requests carry its pid).  It reads nothing after that, so what
 * victim sends next stays queued for the test.  stop joins the thread. */
typedef struct harness_prover harness_prover;
harness_prover *harness_prover_start(const int *sockets, const mori_request *reqs, int world,
                                     int victim, uint64_t seq);
void harness_prover_stop(harness_prover *p);

#endif
