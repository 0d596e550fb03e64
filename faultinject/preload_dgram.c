/*
 * preload_dgram.c - datagram faults on the fd channel's sendmsg and
 * recvmsg.  Receiving under a recv= rule drains the socket into a
 * queue and hands datagrams back in the order the rule says (a seeded
 * shuffle, or by sender rank), duplicating one if asked; sending can drop,
 * truncate or forge (send once more from a forked process, whose pid no
 * rank of the world has).  The rules number and shape the datagrams that
 * carry an fd; the challenges and answers of the channel's proof pass in
 * the order they came, so that an order names the fds' arrival.
 */
#include "preload.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mori/wire.h"
#include "parse.h"

#define HELD_BYTES 4096 /* far more than any datagram of the channel */
#define HELD_FDS 64

typedef struct held {
  uint8_t data[HELD_BYTES];
  size_t len;       /* the datagram's real length (may exceed what is kept) */
  int flags;        /* MSG_TRUNC / MSG_CTRUNC as the kernel reported them */
  int has_cred;
  struct ucred cred;
  int nfds;
  int fds[HELD_FDS];
  int sender;       /* decoded sender rank, -1 if undecodable */
  int proof;        /* a challenge or an answer (no rule shapes it) */
  struct sockaddr_storage name;
  socklen_t namelen;
} held;

typedef struct rqueue {
  int fd;
  held **q;
  size_t n, cap;
  int order_pos;    /* recv=order: next position of the order to deliver */
  uint64_t prng;    /* recv=reorder */
} rqueue;

static rqueue *queues;
static size_t nqueues, cap_queues;

/* ---- queues ---- */

static rqueue *queue_for(int fd, const mori_fi_rule *order) {
  for (size_t i = 0; i < nqueues; i++)
    if (queues[i].fd == fd) return &queues[i];
  rqueue *q = mori_fi__grow(queues, nqueues, &cap_queues, sizeof *q, 8);
  if (q == NULL) return NULL;
  queues = q;
  uint64_t seed = order && order->action == MORI_FI_A_REORDER ? order->seed : 0;
  queues[nqueues] = (rqueue){fd, NULL, 0, 0, 0, seed * 0x9E3779B97F4A7C15ull + 1};
  return &queues[nqueues++];
}

static void held_close(held *h) {
  for (int i = 0; i < h->nfds; i++) close(h->fds[i]);
  free(h);
}

void fi__dgram_forget(int fd) {
  pthread_mutex_lock(&fi__lock);
  for (size_t i = 0; i < nqueues; i++) {
    if (queues[i].fd != fd) continue;
    for (size_t k = 0; k < queues[i].n; k++) held_close(queues[i].q[k]);
    free(queues[i].q);
    queues[i] = queues[--nqueues];
    break;
  }
  pthread_mutex_unlock(&fi__lock);
}

void fi__dgram_reset(void) {
  for (size_t i = 0; i < nqueues; i++) {
    for (size_t k = 0; k < queues[i].n; k++) free(queues[i].q[k]);
    free(queues[i].q);
  }
  free(queues);
  queues = NULL;
  nqueues = cap_queues = 0;
}

static int push(rqueue *q, held *h) {
  held **a = mori_fi__grow(q->q, q->n, &q->cap, sizeof *a, 8);
  if (a == NULL) return -1;
  q->q = a;
  q->q[q->n++] = h;
  return 0;
}

static held *take(rqueue *q, size_t i) {
  held *h = q->q[i];
  memmove(&q->q[i], &q->q[i + 1], (q->n - i - 1) * sizeof q->q[0]);
  q->n--;
  return h;
}

/* The sender rank the datagram claims, through the core's own decoder
 * (its hidden copy in this library: the core exports only its public API),
 * and whether it is a challenge or an answer. */
static int sender_of(held *h) {
  mori_datagram d;
  if (h->len > HELD_BYTES || mori_wire_decode_datagram(h->data, h->len, &d) != 0) return -1;
  h->proof = d.type != MORI_DATAGRAM_FD;
  return (int)d.sender_rank;
}

static held *copy_dup(const held *h) {
  held *c = malloc(sizeof *c);
  if (c == NULL) return NULL;
  *c = *h;
  for (int i = 0; i < c->nfds; i++) c->fds[i] = fcntl(h->fds[i], F_DUPFD_CLOEXEC, 0);
  return c;
}

static void collect(struct msghdr *m, held *h) {
  for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR(m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
        c->cmsg_len >= CMSG_LEN(sizeof h->cred)) {
      memcpy(&h->cred, CMSG_DATA(c), sizeof h->cred);
      h->has_cred = 1;
    }
  h->nfds = mori_fi__msg_fds(m, h->fds, HELD_FDS);
}

/* Takes everything the socket holds now into q.  Returns 0, or the errno
 * of a receive that failed other than for an empty queue. */
static int drain(rqueue *q) {
  for (;;) {
    held *h = calloc(1, sizeof *h);
    union {
      struct cmsghdr align;
      char bytes[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(HELD_FDS * sizeof(int))];
    } control;
    if (h == NULL) return ENOMEM;
    struct iovec iov = {h->data, sizeof h->data};
    struct msghdr m = {.msg_name = &h->name, .msg_namelen = sizeof h->name, .msg_iov = &iov,
                       .msg_iovlen = 1, .msg_control = control.bytes,
                       .msg_controllen = sizeof control.bytes};
    ssize_t n = fi__real.recvmsg(q->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
    if (n < 0) {
      int e = errno;
      free(h);
      return e == EAGAIN || e == EWOULDBLOCK || e == EINTR ? 0 : e;
    }
    h->len = (size_t)n;
    h->flags = m.msg_flags & (MSG_TRUNC | MSG_CTRUNC);
    h->namelen = m.msg_namelen;
    collect(&m, h);
    h->sender = sender_of(h);
    fi__p.dgrams_received++;
    long number = h->proof ? 0 : ++fi__p.fd_dgrams_received;
    held *dup = number && fi__rule(MORI_FI_T_RECV, 1u << MORI_FI_A_DUPLICATE, number) ? copy_dup(h)
                                                                                       : NULL;
    if (push(q, h) != 0) {
      held_close(h);
      return ENOMEM;
    }
    if (dup != NULL && push(q, dup) != 0) held_close(dup);
    else if (dup != NULL) {
      fi__p.injected++;
      fi__p.last_fault = MORI_FI_CALL_recvmsg;
    }
  }
}

static int order_position(const mori_fi_rule *r, int sender) {
  for (int i = 0; r && i < r->norder; i++)
    if (r->order[i] == sender) return i;
  return -1;
}

/* Which queued datagram goes out now; -1: none may yet. */
static long choose(rqueue *q, const mori_fi_rule *order) {
  if (q->n == 0) return -1;
  if (order == NULL) return 0;
  if (order->action == MORI_FI_A_REORDER) {
    q->prng ^= q->prng >> 12; /* xorshift64*: deterministic from the seed */
    q->prng ^= q->prng << 25;
    q->prng ^= q->prng >> 27;
    return (long)((q->prng * 0x2545F4914F6CDD1Dull >> 11) % q->n);
  }
  /* recv=order: proofs, senders outside the order, and repeats of senders
   * already delivered, pass at once; the next sender of the order passes
   * when it is here; the rest wait for it. */
  for (size_t i = 0; i < q->n; i++) {
    if (q->q[i]->proof) return (long)i;
    int pos = order_position(order, q->q[i]->sender);
    if (pos < 0 || pos <= q->order_pos) {
      if (pos == q->order_pos) q->order_pos++;
      return (long)i;
    }
  }
  return -1;
}

/* Hands h to the caller as recvmsg would have. */
static ssize_t deliver(held *h, struct msghdr *msg, int flags) {
  size_t kept = h->len < HELD_BYTES ? h->len : HELD_BYTES, copied = 0, room = 0;
  for (size_t i = 0; i < msg->msg_iovlen; i++) {
    size_t k = kept - copied < msg->msg_iov[i].iov_len ? kept - copied : msg->msg_iov[i].iov_len;
    memcpy(msg->msg_iov[i].iov_base, h->data + copied, k);
    copied += k;
    room += msg->msg_iov[i].iov_len;
  }
  msg->msg_flags = h->flags | (h->len > room ? MSG_TRUNC : 0);
  if (msg->msg_name != NULL) {
    socklen_t n = h->namelen < msg->msg_namelen ? h->namelen : msg->msg_namelen;
    memcpy(msg->msg_name, &h->name, n);
    msg->msg_namelen = h->namelen;
  }
  char *ctl = msg->msg_control;
  size_t cap = msg->msg_control ? msg->msg_controllen : 0, used = 0;
  if (h->has_cred && CMSG_SPACE(sizeof h->cred) <= cap) {
    struct cmsghdr *c = (struct cmsghdr *)ctl;
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_CREDENTIALS;
    c->cmsg_len = CMSG_LEN(sizeof h->cred);
    memcpy(CMSG_DATA(c), &h->cred, sizeof h->cred);
    used = CMSG_SPACE(sizeof h->cred);
  } else if (h->has_cred) {
    msg->msg_flags |= MSG_CTRUNC;
  }
  int fit = 0;
  if (h->nfds > 0 && cap >= used + CMSG_LEN(sizeof(int))) {
    fit = (int)((cap - used - CMSG_LEN(0)) / sizeof(int));
    if (fit > h->nfds) fit = h->nfds;
    struct cmsghdr *c = (struct cmsghdr *)(ctl + used);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)fit * sizeof(int));
    memcpy(CMSG_DATA(c), h->fds, (size_t)fit * sizeof(int));
    used += CMSG_SPACE((size_t)fit * sizeof(int));
  }
  for (int i = fit; i < h->nfds; i++) { /* as the kernel does with fds that do not fit */
    close(h->fds[i]);
    msg->msg_flags |= MSG_CTRUNC;
  }
  msg->msg_controllen = used;
  size_t len = h->len;
  free(h);
  return (ssize_t)(flags & MSG_TRUNC ? len : copied);
}

ssize_t fi__dgram_recvmsg(int fd, struct msghdr *msg, int flags) {
  pthread_mutex_lock(&fi__lock);
  unsigned shaping = 1u << MORI_FI_A_REORDER | 1u << MORI_FI_A_ORDER;
  const mori_fi_rule *order = fi__rule(MORI_FI_T_RECV, shaping, 0);
  const mori_fi_rule *any = fi__rule(MORI_FI_T_RECV, shaping | 1u << MORI_FI_A_DUPLICATE, 0);
  ssize_t rc;
  int e = 0;
  if (any == NULL) {
    pthread_mutex_unlock(&fi__lock);
    rc = fi__real.recvmsg(fd, msg, flags);
    e = errno;
    pthread_mutex_lock(&fi__lock);
    if (rc >= 0) fi__p.dgrams_received++;
  } else {
    rqueue *q = queue_for(fd, order);
    int drained = q ? drain(q) : ENOMEM;
    long pick = q ? choose(q, order) : -1;
    if (pick >= 0) {
      held *h = take(q, (size_t)pick);
      if (!h->proof &&
          fi__p.ndelivered < (int)(sizeof fi__p.delivered / sizeof fi__p.delivered[0]))
        fi__p.delivered[fi__p.ndelivered++] = h->sender;
      rc = deliver(h, msg, flags);
    } else {
      rc = -1;
      e = drained ? drained : EAGAIN;
    }
  }
  fi__record_msg(MORI_FI_CALL_recvmsg, msg, rc, 0);
  pthread_mutex_unlock(&fi__lock);
  errno = e;
  return rc;
}

/* ---- sending ---- */

/* The datagram once more, from a child: the receiver's SO_PASSCRED then
 * names a pid that no rank has. */
static void forge(int fd, const struct msghdr *msg, int flags) {
  pid_t child = fork();
  if (child == 0) {
    struct timespec pause = {0, 1000000};
    for (int tries = 0; tries < 1000; tries++) {
      if (sendmsg(fd, msg, flags | MSG_DONTWAIT) >= 0 || (errno != EAGAIN && errno != EINTR))
        break;
      nanosleep(&pause, NULL);
    }
    _exit(0);
  }
  if (child > 0) waitpid(child, NULL, 0);
}

/* A copy of msg whose bytes stop at half its length. */
static ssize_t send_truncated(int fd, const struct msghdr *msg, int flags) {
  size_t total = mori_fi__msg_bytes(msg), half = total / 2, copied = 0;
  uint8_t *buf = malloc(half ? half : 1);
  if (buf == NULL) {
    errno = ENOMEM;
    return -1;
  }
  for (size_t i = 0; i < msg->msg_iovlen && copied < half; i++) {
    size_t k = half - copied < msg->msg_iov[i].iov_len ? half - copied : msg->msg_iov[i].iov_len;
    memcpy(buf + copied, msg->msg_iov[i].iov_base, k);
    copied += k;
  }
  struct iovec iov = {buf, half};
  struct msghdr cut = *msg;
  cut.msg_iov = &iov;
  cut.msg_iovlen = 1;
  ssize_t rc = fi__real.sendmsg(fd, &cut, flags);
  int e = errno;
  free(buf);
  errno = e;
  return rc < 0 ? rc : (ssize_t)total;
}

ssize_t fi__dgram_sendmsg(int fd, const struct msghdr *msg, int flags) {
  pthread_mutex_lock(&fi__lock);
  /* only a datagram with an fd attached is numbered and shaped */
  long n = msg->msg_controllen > 0 ? fi__p.fd_dgrams_sent + 1 : 0;
  unsigned actions = 1u << MORI_FI_A_DROP | 1u << MORI_FI_A_TRUNCATE | 1u << MORI_FI_A_FORGE;
  const mori_fi_rule *r = n ? fi__rule(MORI_FI_T_SEND, actions, n) : NULL;
  mori_fi_action action = r ? r->action : 0;
  /* a send retried after EAGAIN is the same datagram: forge it once */
  int do_forge = action == MORI_FI_A_FORGE && fi__p.dgram_forged != n;
  if (do_forge) fi__p.dgram_forged = n;
  pthread_mutex_unlock(&fi__lock);
  if (do_forge) forge(fd, msg, flags);
  ssize_t rc;
  if (action == MORI_FI_A_DROP) rc = (ssize_t)mori_fi__msg_bytes(msg);
  else if (action == MORI_FI_A_TRUNCATE) rc = send_truncated(fd, msg, flags);
  else rc = fi__real.sendmsg(fd, msg, flags);
  int e = errno;
  pthread_mutex_lock(&fi__lock);
  if (rc >= 0) {
    fi__p.dgrams_sent++;
    fi__p.fd_dgrams_sent += n > 0;
    if (action) {
      fi__p.injected++;
      fi__p.last_fault = MORI_FI_CALL_sendmsg;
    }
  }
  fi__record_msg(MORI_FI_CALL_sendmsg, msg, rc, action != 0);
  pthread_mutex_unlock(&fi__lock);
  errno = e;
  return rc;
}

/* The senders (decoded ranks, -1 for undecodable) of the datagrams a recv=
 * rule handed out in this process, in delivery order; returns how many. */
FI_EXPORT int mori_fi_preload_delivered(int *senders, int max);
FI_EXPORT int mori_fi_preload_delivered(int *senders, int max) {
  pthread_mutex_lock(&fi__lock);
  int n = fi__p.ndelivered < max ? fi__p.ndelivered : max;
  memcpy(senders, fi__p.delivered, (size_t)(n > 0 ? n : 0) * sizeof *senders);
  pthread_mutex_unlock(&fi__lock);
  return n;
}
