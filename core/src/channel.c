/*
 * channel.c - the fd channel: one AF_UNIX datagram socket per window in a
 * private 0700 directory.  Each rank sends its exported fd to every peer with
 * SCM_RIGHTS and takes exactly one from each, checked against the sender's
 * request.  Sends never block, because a peer's queue holds only
 * max_dgram_qlen datagrams: sending and receiving interleave under one poll.
 */
#include "internal.h"
#include "mori/channel.h"
#include "mori/error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* A datagram with more fds than this is rejected; the kernel closes any
 * that do not fit in the control buffer (and says so with MSG_CTRUNC). */
#define RECV_FDS_MAX 8
#define RECV_CONTROL_SIZE \
  (CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(RECV_FDS_MAX * sizeof(int)))
/* While a send waits for room in a peer's queue, poll wakes this often to
 * retry it: a drained queue raises no event on the sender's socket. */
#define SEND_RETRY_MS 1
#define ABORT_CHECK_MS 5
/* Rank lists in error messages stop after this many. */
#define LIST_RANKS_MAX 16

struct mori_channel {
  int fd;
  uint64_t window_seq;
  int (*abort_check)(void *ctx); /* nonzero: a peer gave up; stop waiting */
  void *abort_ctx;
  char name[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* ---- the private directory ------------------------------------------- */

/* One directory per process, made on first use.  A forked child inherits
 * this state, so it is keyed by pid: the child makes its own, and only the
 * process that made a directory removes it at exit. */
static struct {
  pthread_mutex_t lock;
  pid_t pid;
  int atexit_registered;
  char path[PATH_MAX];
} private_dir = {PTHREAD_MUTEX_INITIALIZER, 0, 0, ""};

static void private_dir_remove(void) {
  if (private_dir.pid == getpid()) rmdir(private_dir.path); /* fails unless empty: fine */
}

static const char *socket_base(void) {
  static const char *const vars[] = {"MORI_SYMM_SOCKET_DIR", "XDG_RUNTIME_DIR"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return v;
  }
  return "/tmp";
}

/* Sockets there are reachable by whoever can search the directory, so it
 * must be ours and closed to everyone else, whatever the umask did. */
static int private_dir_verify(const char *path) {
  struct stat st;
  if (chmod(path, 0700) != 0 || lstat(path, &st) != 0)
    return mori__error(MORI_EIO, "fd channel: chmod/lstat(%s): %s", path, strerror(errno));
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 07777) != 0700)
    return mori__error(MORI_EAUTH,
                       "fd channel: %s has owner %u mode %04o; expected a directory of uid %u, "
                       "mode 0700",
                       path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
                       (unsigned)geteuid());
  return 0;
}

static int private_dir_create(void) {
  char path[PATH_MAX];
  const char *base = socket_base();
  if (snprintf(path, sizeof path, "%s/mori-symm-XXXXXX", base) >= (int)sizeof path)
    return mori__error(MORI_ERANGE, "fd channel: socket directory base too long: %s", base);
  if (!mkdtemp(path))
    return mori__error(MORI_EIO, "fd channel: mkdtemp(%s): %s (set MORI_SYMM_SOCKET_DIR)", path,
                       strerror(errno));
  int rc = private_dir_verify(path);
  if (rc < 0) {
    rmdir(path);
    return rc;
  }
  snprintf(private_dir.path, sizeof private_dir.path, "%s", path);
  private_dir.pid = getpid();
  if (!private_dir.atexit_registered && atexit(private_dir_remove) == 0)
    private_dir.atexit_registered = 1;
  return 0;
}

/* Copies the directory's path into out (PATH_MAX bytes). */
static int private_dir_get(char *out) {
  int rc = 0;
  pthread_mutex_lock(&private_dir.lock);
  if (private_dir.pid != getpid()) rc = private_dir_create();
  if (rc == 0) snprintf(out, PATH_MAX, "%s", private_dir.path);
  pthread_mutex_unlock(&private_dir.lock);
  return rc;
}

/* ---- open / close ---------------------------------------------------- */

static atomic_ulong channel_counter;

/* <dir>/w<seq>-<random>: the directory names the process, seq the window,
 * and the random part keeps a reopened window's socket distinct from a
 * stale one that a slow peer may still address. */
static int channel_path(uint64_t window_seq, char *out, size_t cap) {
  char dir[PATH_MAX];
  uint64_t rnd;
  MORI_GUARD(private_dir_get(dir));
  if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
    return mori__error(MORI_EIO, "fd channel: getrandom: %s", strerror(errno));
  rnd ^= atomic_fetch_add(&channel_counter, 1);
  int n = snprintf(out, cap, "%s/w%llu-%016llx", dir, (unsigned long long)window_seq,
                   (unsigned long long)rnd);
  if (n < 0 || (size_t)n >= cap)
    return mori__error(MORI_ERANGE,
                       "fd channel: socket path %s/w%llu-... is longer than sun_path allows "
                       "(%zu bytes); set MORI_SYMM_SOCKET_DIR to a shorter directory",
                       dir, (unsigned long long)window_seq, cap - 1);
  return 0;
}

int mori_channel_open(uint64_t window_seq, mori_channel **out) {
  if (!out) return mori__error(MORI_EINVAL, "mori_channel_open: out is NULL");
  *out = NULL;
  mori_channel *ch = mori_calloc(1, sizeof *ch);
  if (!ch) return mori__error(MORI_ENOMEM, "fd channel: %zu bytes", sizeof *ch);
  ch->fd = -1;
  ch->window_seq = window_seq;
  int rc = channel_path(window_seq, ch->name, sizeof ch->name);
  if (rc < 0) goto fail;
  int on = 1;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  memcpy(addr.sun_path, ch->name, strlen(ch->name) + 1);
  const char *call = NULL;
  ch->fd = mori_socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (ch->fd < 0)
    call = "socket";
  else if (mori_setsockopt(ch->fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0)
    call = "setsockopt(SO_PASSCRED)"; /* without it no datagram carries credentials */
  else if (mori_bind(ch->fd, (struct sockaddr *)&addr, sizeof addr) != 0)
    call = "bind";
  else if (chmod(ch->name, 0600) != 0)
    call = "chmod"; /* peers need write permission, which a umask may have removed */
  if (call) {
    rc = mori__error(MORI_EIO, "fd channel: %s(%s): %s", call, ch->name, strerror(errno));
    goto fail;
  }
  *out = ch;
  return 0;
fail:
  if (ch->fd >= 0) {
    mori_close(ch->fd);
    mori_unlinkat(AT_FDCWD, ch->name, 0); /* the path is ours alone: nothing else can have bound it */
  }
  free(ch);
  return rc;
}

const char *mori_channel_name(const mori_channel *ch) { return ch->name; }
int mori_channel_fd(const mori_channel *ch) { return ch->fd; }

void mori_channel_close(mori_channel *ch) {
  if (!ch) return;
  mori_close(ch->fd); /* datagrams still queued, and fds in them, go with it */
  mori_unlinkat(AT_FDCWD, ch->name, 0);
  free(ch);
}

/* ---- exchange -------------------------------------------------------- */

typedef struct exchange {
  mori_channel *ch;
  const mori_request *reqs;
  int world, self;
  uint64_t window_seq;
  int my_fd;
  int *fds;      /* fds_out */
  uint8_t *sent; /* per rank: datagram handed to the kernel */
  uint8_t *seen; /* per rank: datagram accepted (mori_datagram_expect.seen) */
  int to_send, to_receive;
} exchange;

/* What one recvmsg delivered besides the bytes. */
typedef struct arrival {
  int has_cred;
  struct ucred cred;
  int nfds;
  int fds[RECV_CONTROL_SIZE / sizeof(int)]; /* as many as the buffer could carry */
} arrival;

static void close_fds(int *fds, int n) {
  for (int i = 0; i < n; i++)
    if (fds[i] >= 0) {
      mori_close(fds[i]);
      fds[i] = -1;
    }
}

/* Whose process sent it, as far as the credentials tell; the rank it
 * claims is named by the check that rejected it. */
static void describe_sender(const exchange *x, const arrival *a, char *out, size_t cap) {
  int owner = -1;
  for (int r = 0; a->has_cred && r < x->world && owner < 0; r++)
    if (x->reqs[r].pid == (uint32_t)a->cred.pid) owner = r;
  if (!a->has_cred)
    snprintf(out, cap, "a sender without credentials");
  else if (owner < 0)
    snprintf(out, cap, "pid %ld (no rank of this world)", (long)a->cred.pid);
  else
    snprintf(out, cap, "pid %ld (rank %d's process)", (long)a->cred.pid, owner);
}

/* The datagram itself and its credentials; the checks that need the world
 * are mori_validate_datagram's. */
static int check_arrival(const exchange *x, const uint8_t *buf, ssize_t n, int msg_flags,
                         const arrival *a, mori_datagram *d) {
  if (msg_flags & MSG_TRUNC)
    return mori__error(MORI_EPROTO, "oversized datagram (%zd bytes; a datagram is %d)", n,
                       MORI_WIRE_DATAGRAM_SIZE);
  if (msg_flags & MSG_CTRUNC)
    return mori__error(MORI_EPROTO, "control data truncated (more than %d fds attached)",
                       RECV_FDS_MAX);
  int wrc = mori_wire_decode_datagram(buf, (size_t)n, d);
  if (wrc != MORI_WIRE_OK)
    return mori__error(MORI_EPROTO, "undecodable datagram of %zd bytes: %s", n,
                       mori_wire_strerror(wrc));
  if (!a->has_cred) return mori__error(MORI_EAUTH, "no SCM_CREDENTIALS with the datagram");
  mori_datagram_expect e = {x->window_seq, x->self, x->world, x->reqs, x->seen};
  return mori_validate_datagram(d, a->cred.pid, a->cred.uid, a->nfds, &e);
}

static void collect_control(struct msghdr *msg, arrival *a) {
  for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level != SOL_SOCKET) continue;
    if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof a->cred)) {
      memcpy(&a->cred, CMSG_DATA(c), sizeof a->cred);
      a->has_cred = 1;
    } else if (c->cmsg_type == SCM_RIGHTS) {
      size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k && a->nfds < (int)(sizeof a->fds / sizeof a->fds[0]); i++)
        memcpy(&a->fds[a->nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
    }
  }
}

/* 1: a datagram was taken; 0: the queue is empty; < 0: it was rejected
 * (every fd that came with it closed) or recvmsg failed. */
static int receive_one(exchange *x) {
  uint8_t buf[2 * MORI_WIRE_DATAGRAM_SIZE]; /* room to see an oversized one */
  union {
    struct cmsghdr align;
    char bytes[RECV_CONTROL_SIZE];
  } control;
  struct iovec iov = {buf, sizeof buf};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.bytes,
                       .msg_controllen = sizeof control.bytes};
  ssize_t n;
  while ((n = mori_recvmsg(x->ch->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC)) < 0 &&
         errno == EINTR) {
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  if (n < 0) return mori__error(MORI_EIO, "recvmsg(%s): %s", x->ch->name, strerror(errno));
  arrival a = {0};
  mori_datagram d;
  collect_control(&msg, &a);
  int rc = check_arrival(x, buf, n, msg.msg_flags, &a, &d);
  if (rc < 0) {
    char who[96];
    describe_sender(x, &a, who, sizeof who);
    close_fds(a.fds, a.nfds);
    mori__error_prefix("rejected datagram from %s: ", who);
    return rc;
  }
  x->fds[d.sender_rank] = a.fds[0];
  x->seen[d.sender_rank] = 1;
  x->to_receive--;
  return 1;
}

static int receive_pending(exchange *x) {
  int rc;
  while (x->to_receive > 0 && (rc = receive_one(x)) != 0)
    if (rc < 0) return rc;
  return 0;
}

/* Errors of a nonblocking send that mean "try again after a poll". */
static int send_should_retry(int err) {
  return err == EAGAIN || err == EWOULDBLOCK || err == EINTR || err == ENOBUFS;
}

/* No socket at the path: the peer closed its channel or exited, so waiting
 * for the timeout would only delay the same failure. */
static int send_failed(int r, const char *path, int err) {
  int gone = err == ENOENT || err == ECONNREFUSED;
  return mori__error(MORI_EIO, "rank %d%s: sendmsg to %s: %s", r, gone ? " is gone" : "", path,
                     strerror(err));
}

/* 1: sent; 0: the peer's queue is full, retry later; < 0: failed. */
static int send_one(exchange *x, int r) {
  const mori_request *peer = &x->reqs[r];
  mori_datagram d = {x->window_seq, (uint32_t)x->self, (uint32_t)r, x->reqs[x->self].nonce,
                     peer->nonce};
  uint8_t buf[MORI_WIRE_DATAGRAM_SIZE];
  size_t len;
  int wrc = mori_wire_encode_datagram(&d, buf, sizeof buf, &len);
  if (wrc != MORI_WIRE_OK)
    return mori__error(MORI_EPROTO, "encoding the datagram for rank %d: %s", r,
                       mori_wire_strerror(wrc));
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  size_t plen = strnlen(peer->socket_name, sizeof peer->socket_name);
  if (plen == 0 || plen >= sizeof addr.sun_path)
    return mori__error(MORI_EINVAL, "rank %d's request has no usable socket name", r);
  memcpy(addr.sun_path, peer->socket_name, plen);
  union {
    struct cmsghdr align;
    char bytes[CMSG_SPACE(sizeof(int))];
  } control;
  struct iovec iov = {buf, len};
  struct msghdr msg = {.msg_name = &addr, .msg_namelen = sizeof addr, .msg_iov = &iov,
                       .msg_iovlen = 1, .msg_control = control.bytes,
                       .msg_controllen = sizeof control.bytes};
  memset(&control, 0, sizeof control); /* padding too: all of it goes to the kernel */
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &x->my_fd, sizeof(int));
  ssize_t n = mori_sendmsg(x->ch->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n == (ssize_t)len) return 1;
  if (n < 0 && send_should_retry(errno)) return 0;
  return send_failed(r, addr.sun_path, n < 0 ? errno : EMSGSIZE);
}

/* Each rank starts with the rank after it, so that the first datagrams of
 * all ranks do not pile into rank 0's queue. */
static int send_pending(exchange *x) {
  for (int i = 1; i < x->world && x->to_send > 0; i++) {
    int r = (x->self + i) % x->world;
    if (x->sent[r]) continue;
    int rc = send_one(x, r);
    if (rc < 0) return rc;
    if (rc == 0) continue;
    x->sent[r] = 1;
    x->to_send--;
  }
  return 0;
}

/* "1, 4, 7" from the ranks r != self with flags[r] == 0. */
static void list_ranks(const exchange *x, const uint8_t *flags, char *out, size_t cap) {
  size_t n = 0;
  int listed = 0, missing = 0;
  out[0] = '\0';
  for (int r = 0; r < x->world; r++) {
    if (r == x->self || flags[r]) continue;
    if (listed++ < LIST_RANKS_MAX && n < cap)
      n += (size_t)snprintf(out + n, cap - n, "%s%d", listed > 1 ? ", " : "", r);
    else
      missing++;
  }
  if (missing && n < cap) snprintf(out + n, cap - n, " and %d more", missing);
}

static int timeout_error(const exchange *x, int timeout_ms) {
  char heard[160], sent[160];
  list_ranks(x, x->seen, heard, sizeof heard);
  list_ranks(x, x->sent, sent, sizeof sent);
  return mori__error(MORI_ETIMEDOUT, "timed out after %d ms; not heard from rank(s) %s%s%s%s",
                     timeout_ms, x->to_receive ? heard : "(none)",
                     x->to_send ? "; not yet sent to rank(s) " : "", x->to_send ? sent : "",
                     x->to_send ? " (their queues stayed full)" : "");
}

static long long now_ms(void) { return (long long)(mori__now_us() / 1e3); }

/* Sends are retried every SEND_RETRY_MS while any is held up; otherwise the
 * loop sleeps in poll until a datagram arrives or time runs out. */
static int exchange_run(exchange *x, int timeout_ms) {
  long long deadline = now_ms() + timeout_ms;
  for (;;) {
    MORI_GUARD(send_pending(x));
    MORI_GUARD(receive_pending(x));
    if (x->to_send == 0 && x->to_receive == 0) return 0;
    long long left = deadline - now_ms();
    if (left <= 0) return timeout_error(x, timeout_ms);
    if (x->ch->abort_check != NULL) MORI_GUARD(x->ch->abort_check(x->ch->abort_ctx));
    struct pollfd p = {x->ch->fd, POLLIN, 0};
    /* With an abort check, wake up now and then to run it. */
    long long slice = x->to_send ? SEND_RETRY_MS : x->ch->abort_check ? ABORT_CHECK_MS : left;
    int wait = (int)(left > slice ? slice : left);
    if (mori_poll(&p, 1, wait) < 0 && errno != EINTR)
      return mori__error(MORI_EIO, "poll(%s): %s", x->ch->name, strerror(errno));
  }
}

static int exchange_check_args(const mori_channel *ch, const mori_request *reqs, int world,
                               int self, int my_fd, const int *fds_out, int timeout_ms) {
  if (!ch || !reqs || !fds_out) return mori__error(MORI_EINVAL, "NULL argument");
  if (timeout_ms < 0) return mori__error(MORI_EINVAL, "negative timeout %d", timeout_ms);
  if (world < 1 || world > MORI_WIRE_MAX_WORLD || self < 0 || self >= world)
    return mori__error(MORI_ERANGE, "rank %d of world %d", self, world);
  if (world > 1 && my_fd < 0) return mori__error(MORI_EINVAL, "no fd to send (%d)", my_fd);
  if (strcmp(reqs[self].socket_name, ch->name) != 0)
    return mori__error(MORI_EINVAL, "own request names socket '%s', this channel is '%s'",
                       reqs[self].socket_name, ch->name);
  return 0;
}

void mori_channel_set_abort_check(mori_channel *ch, int (*check)(void *ctx), void *ctx) {
  ch->abort_check = check;
  ch->abort_ctx = ctx;
}

int mori_channel_exchange(mori_channel *ch, const mori_request *reqs, int world, int self,
                          uint64_t window_seq, int my_fd, int *fds_out, int timeout_ms) {
  uint8_t *flags = NULL;
  exchange x;
  for (int r = 0; fds_out && r < world && r < MORI_WIRE_MAX_WORLD; r++) fds_out[r] = -1;
  int rc = exchange_check_args(ch, reqs, world, self, my_fd, fds_out, timeout_ms);
  if (rc < 0) goto Exit;
  flags = mori_calloc(2, (size_t)world);
  if (!flags) {
    rc = mori__error(MORI_ENOMEM, "%d bytes", 2 * world);
    goto Exit;
  }
  x = (exchange){ch, reqs, world, self, window_seq, my_fd, fds_out, flags, flags + world,
                 world - 1, world - 1};
  rc = exchange_run(&x, timeout_ms);
  if (rc < 0) close_fds(fds_out, world);
Exit:
  free(flags);
  if (rc < 0)
    mori__error_prefix("fd channel rank %d window %llu: ", self, (unsigned long long)window_seq);
  return rc;
}
