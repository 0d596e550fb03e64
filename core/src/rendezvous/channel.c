/*
 * channel.c - the fd channel: one AF_UNIX datagram socket per window in a
 * private 0700 directory of its own, under a socket base no other user can
 * change.  Each rank sends its exported fd to every peer with SCM_RIGHTS and
 * takes exactly one from each, checked against the sender's request; an fd
 * goes only to a socket of our uid in a directory only our uid can write,
 * and only once the process reading it has proved to be the peer's (a
 * secret sent there, echoed under the peer's kernel credentials).  Sends
 * never block, because a peer's queue holds only max_dgram_qlen datagrams:
 * sending and receiving interleave under one poll.
 */
#include "rendezvous.h"
#include "mori/channel.h"
#include "mori/error_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
/* Private directories: "mori-symm-<pid>-<host tag>-<random>". */
#define DIR_PREFIX "mori-symm-"

struct mori_channel {
  int fd;        /* the socket */
  int base;      /* the verified socket base, which holds the private directory */
  uint64_t window_seq;
  int (*abort_check)(void *ctx); /* nonzero: a peer gave up; stop waiting */
  void *abort_ctx;
  int dropped;   /* datagrams from non-members in the last exchange */
  size_t base_len; /* name[0..base_len) is the base's path */
  char dir[64];  /* the private directory's name in base */
  char name[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* base/dir/w<seq>: what peers see */
};

/* A socket name (a peer's request's, or one about to go in a request), as
 * messages show it: through the one escape (the decoder allows only
 * MORI_WIRE_SOCKET_CHARS; this holds whatever a future one lets through). */
typedef struct shown_name {
  char text[4 * MORI_WIRE_SOCKET_NAME_MAX + 48];
} shown_name;

static const char *shown(shown_name *out, const char *name) {
  return mori__escape(out->text, sizeof out->text, name, strnlen(name, MORI_WIRE_SOCKET_NAME_MAX),
                      MORI_WIRE_SOCKET_NAME_MAX);
}

/* ---- the socket base ------------------------------------------------- */

/* The first of these that is set names the base; if it cannot be trusted
 * that is an error, never a reason to try the next. */
static const char *socket_base(void) {
  static const char *const vars[] = {"MORI_SYMM_SOCKET_DIR", "XDG_RUNTIME_DIR", "TMPDIR"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return v;
  }
  return "/tmp";
}

/* 32 bits naming this host and pid namespace, so that a process judges
 * only directories whose pid means the same process to it.  Computed once
 * per process (a forked child has the same host and namespace). */
static uint32_t host_tag(void) {
  static atomic_uint cached;
  uint32_t tag = atomic_load(&cached);
  if (tag != 0) return tag;
  uint8_t id[MORI_WIRE_HOST_ID_SIZE];
  uint64_t ns = 0;
  uint32_t h = 2166136261u; /* FNV-1a */
  (void)mori__host_id(id); /* zeros if unreadable: the tag is only a name */
  int fd = mori__openat(AT_FDCWD, "/proc/self/ns/pid", O_RDONLY | O_CLOEXEC, 0);
  struct stat st;
  if (fd >= 0 && mori_fstat(fd, &st) == 0) ns = (uint64_t)st.st_ino;
  if (fd >= 0) mori_close(fd);
  for (size_t i = 0; i < sizeof id; i++) h = (h ^ id[i]) * 16777619u;
  for (int i = 0; i < 8; i++) h = (h ^ (uint8_t)(ns >> (8 * i))) * 16777619u;
  h += h == 0; /* 0 means "not computed yet" */
  atomic_store(&cached, h);
  return h;
}

/* ---- leftovers of processes that died holding a channel -------------- */

/* Removes the sockets in base/name and then the directory, if it is ours.
 * Anything but a socket in it stays, and so does the directory. */
static void remove_dead_dir(int base, const char *name, long pid) {
  int dir = mori__openat(base, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
  struct stat st;
  if (dir < 0) return;
  if (mori_fstat(dir, &st) != 0 || st.st_uid != geteuid()) {
    mori_close(dir);
    return;
  }
  char buf[2048] __attribute__((aligned(__alignof__(struct dirent64))));
  ssize_t n;
  while ((n = mori_getdents64(dir, buf, sizeof buf)) > 0)
    for (ssize_t off = 0; off < n;) {
      const struct dirent64 *e = (const struct dirent64 *)(buf + off);
      off += e->d_reclen;
      if (e->d_type == DT_SOCK) (void)mori__unlinkat(dir, e->d_name, 0);
    }
  mori_close(dir);
  int gone = mori__unlinkat(base, name, AT_REMOVEDIR) == 0;
  MORI_LOG(MORI_LOG_INFO, -1, -1, "fd channel: %s the socket directory %s of pid %ld, which is gone",
           gone ? "removed" : "could not remove", name, pid);
}

/* Once per process: every private directory in base that a process of
 * this host and pid namespace made and that process no longer exists. */
static void sweep_leftovers(int base) {
  static atomic_int swept_by;
  int me = (int)getpid();
  if (atomic_exchange(&swept_by, me) == me) return;
  uint32_t tag = host_tag();
  int dir = mori__openat(base, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (dir < 0) return;
  char buf[4096] __attribute__((aligned(__alignof__(struct dirent64))));
  ssize_t n;
  while ((n = mori_getdents64(dir, buf, sizeof buf)) > 0)
    for (ssize_t off = 0; off < n;) {
      const struct dirent64 *e = (const struct dirent64 *)(buf + off);
      long pid;
      unsigned etag;
      int used = 0;
      off += e->d_reclen;
      if (e->d_type != DT_DIR ||
          sscanf(e->d_name, DIR_PREFIX "%ld-%8x-%*16[0-9a-f]%n", &pid, &etag, &used) != 2 ||
          e->d_name[used] != '\0' || etag != tag || pid <= 0 || pid == me)
        continue;
      /* EPERM means alive (another user's): only ESRCH says gone. */
      if (mori_kill((pid_t)pid, 0) != 0 && errno == ESRCH) remove_dead_dir(base, e->d_name, pid);
    }
  mori_close(dir);
}

/* ---- open / close ---------------------------------------------------- */

/* base/<dir>, 0700 and ours, with a fresh random name. */
static int private_dir_make(mori_channel *ch, const char *base_path) {
  uint32_t tag = host_tag();
  for (int tries = 0;; tries++) {
    uint64_t name = 0;
    MORI_GUARD(mori__random64(&name, "fd channel: a private directory's name"));
    snprintf(ch->dir, sizeof ch->dir, DIR_PREFIX "%ld-%08x-%016llx", (long)getpid(), tag,
             (unsigned long long)name);
    /* 0700 whatever the umask: we must be able to bind in it */
    if (mori_mkdirat(ch->base, ch->dir, 0700) == 0) {
      if (mori_fchmodat(ch->base, ch->dir, 0700, 0) == 0) return 0;
      int rc = mori__error(MORI_EIO, "fd channel: chmod(%s/%s): %s", base_path, ch->dir,
                           strerror(errno));
      (void)mori__unlinkat(ch->base, ch->dir, AT_REMOVEDIR); /* made here: gone with the failure */
      return rc;
    }
    if (errno != EEXIST || tries == 3)
      return mori__error(MORI_EIO, "fd channel: mkdir(%s/%s): %s", base_path, ch->dir,
                         strerror(errno));
  }
}

/* Opens the private directory we just made and checks it is still what
 * mkdir made: a directory of ours that nobody else may enter. */
static int private_dir_open(const mori_channel *ch, const char *base_path, int *dir) {
  struct stat st;
  *dir = mori__openat(ch->base, ch->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (*dir < 0)
    return mori__error(MORI_EIO, "fd channel: open(%s/%s): %s", base_path, ch->dir,
                       strerror(errno));
  if (mori_fstat(*dir, &st) != 0)
    return mori__error(MORI_EIO, "fd channel: fstat(%s/%s): %s", base_path, ch->dir,
                       strerror(errno));
  if (st.st_uid != geteuid() || (st.st_mode & 077))
    return mori__error(MORI_EAUTH, "fd channel: %s/%s has owner %u mode %04o, not ours and 0700",
                       base_path, ch->dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
  return 0;
}

/* Binds through the directory fd (/proc/self/fd/N/w<seq>), so the socket
 * lands in the directory we checked whatever its path names now.  Peers
 * are told the path (name), which they verify for themselves. */
static int channel_bind(mori_channel *ch, int dir, const char *sock) {
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  int on = 1;
  const char *call = NULL;
  snprintf(addr.sun_path, sizeof addr.sun_path, "/proc/self/fd/%d/%s", dir, sock);
  ch->fd = mori_socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (ch->fd < 0)
    call = "socket";
  else if (mori_setsockopt(ch->fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0)
    call = "setsockopt(SO_PASSCRED)"; /* without it no datagram carries credentials */
  else if (mori_bind(ch->fd, (struct sockaddr *)&addr, sizeof addr) != 0)
    call = "bind";
  else if (mori_fchmodat(dir, sock, 0600, 0) != 0)
    call = "chmod"; /* peers need write permission, which a umask may have removed */
  if (call) return mori__error(MORI_EIO, "fd channel: %s(%s): %s", call, ch->name, strerror(errno));
  return 0;
}

static void channel_remove(mori_channel *ch) {
  char sock[sizeof ch->dir + 32];
  if (ch->fd >= 0) mori_close(ch->fd); /* datagrams still queued, and fds in them, go with it */
  if (ch->dir[0]) {
    snprintf(sock, sizeof sock, "%s/w%llu", ch->dir, (unsigned long long)ch->window_seq);
    (void)mori__unlinkat(ch->base, sock, 0);
    (void)mori__unlinkat(ch->base, ch->dir, AT_REMOVEDIR);
  }
  if (ch->base >= 0) mori_close(ch->base);
  free(ch);
}

int mori_channel_open(uint64_t window_seq, mori_channel **out) {
  if (!out) return mori__error(MORI_EINVAL, "mori_channel_open: out is NULL");
  *out = NULL;
  mori_channel *ch = mori_calloc(1, sizeof *ch);
  if (!ch) return mori__nomem("fd channel: %zu bytes", sizeof *ch);
  ch->fd = ch->base = -1;
  ch->window_seq = window_seq;
  const char *base_path = socket_base();
  char sock[32];
  int dir = -1;
  snprintf(sock, sizeof sock, "w%llu", (unsigned long long)window_seq);
  int rc = mori_trusted_dir_open(base_path, MORI_TRUST_CREATE | MORI_TRUST_SHARED,
                                 "fd channel", &ch->base);
  if (rc == 0) {
    sweep_leftovers(ch->base);
    rc = private_dir_make(ch, base_path);
    if (rc < 0) ch->dir[0] = '\0';
  }
  if (rc == 0) {
    ch->base_len = strlen(base_path);
    while (ch->base_len > 1 && base_path[ch->base_len - 1] == '/') ch->base_len--;
    size_t n = (size_t)snprintf(ch->name, sizeof ch->name, "%.*s/%s/%s", (int)ch->base_len,
                                base_path, ch->dir, sock);
    if (n >= sizeof ch->name)
      rc = mori__error(MORI_ERANGE,
                       "fd channel: socket path %.*s/%s/%s is longer than sun_path allows (%zu "
                       "bytes); set MORI_SYMM_SOCKET_DIR to a shorter directory",
                       (int)ch->base_len, base_path, ch->dir, sock, sizeof ch->name - 1);
  }
  if (rc == 0 && !mori_wire_socket_name_ok((const uint8_t *)ch->name, strlen(ch->name))) {
    shown_name name;
    rc = mori__error(MORI_EINVAL,
                     "fd channel: socket path %s has a character outside " MORI_WIRE_SOCKET_CHARS
                     ", which no peer would accept in a request; set MORI_SYMM_SOCKET_DIR to "
                     "a directory whose path has only those",
                     shown(&name, ch->name));
  }
  if (rc == 0) rc = private_dir_open(ch, base_path, &dir);
  if (rc == 0) rc = channel_bind(ch, dir, sock);
  if (dir >= 0) mori_close(dir);
  if (rc < 0) {
    channel_remove(ch);
    return rc;
  }
  *out = ch;
  return 0;
}

const char *mori_channel_name(const mori_channel *ch) { return ch->name; }
int mori_channel_fd(const mori_channel *ch) { return ch->fd; }
int mori_channel_dropped(const mori_channel *ch) { return ch->dropped; }

void mori_channel_close(mori_channel *ch) {
  if (ch) channel_remove(ch);
}

/* ---- exchange -------------------------------------------------------- */

typedef struct exchange {
  mori_channel *ch;
  const mori_request *reqs;
  int world_size, self;
  uint64_t window_seq;
  int my_fd;
  int *fds;      /* fds_out */
  int *dest;     /* per rank: O_PATH fd of its verified socket (-1: none) */
  const uint8_t *with; /* per rank: 1 for the peers this exchange is with (NULL: every one) */
  uint8_t *sent; /* per rank: bit 1 << type for each datagram handed to the kernel */
  uint8_t *seen; /* per rank: bit 1 << type for each accepted (mori_datagram_expect.seen) */
  uint64_t *challenge; /* per rank: the secret sent to its socket, which its answer echoes */
  uint64_t *owed;      /* per rank: the secret of its challenge, which our answer echoes */
  int to_send, to_receive; /* fd datagrams */
  int held_up;   /* a send of the last pass found its peer's queue full */
  int progress;  /* a challenge or an answer arrived: something new may be sent */
  int dropped;   /* datagrams from non-members */
  char first_drop[384];
} exchange;

#define BIT(type) (1u << (type))
/* In sent[r]: the last send to rank r found its queue full. */
#define HELD_UP 0x80u

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
  for (int r = 0; a->has_cred && r < x->world_size && owner < 0; r++)
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
  mori_datagram_expect e = {x->window_seq, x->self, x->world_size, x->reqs, x->seen, x->challenge};
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

/* The kernel's credentials are a member's: the pid and uid of some rank's
 * request (this process's other channels included).  Only the kernel can
 * say this; anything in the bytes can be copied from the store. */
/* Whether rank r is a peer of this exchange (a heal's is its replacement
 * alone). */
static int partner(const exchange *x, int r) {
  return r != x->self && (x->with == NULL || x->with[r]);
}

static int from_member(const exchange *x, const arrival *a) {
  for (int r = 0; a->has_cred && r < x->world_size; r++)
    if (x->reqs[r].pid == (uint32_t)a->cred.pid && x->reqs[r].uid == (uint32_t)a->cred.uid)
      return 1;
  return 0;
}

/* A non-member's datagram is no reason to give up on the members': it is
 * dropped and counted, and the count goes into the error if the exchange
 * fails after all. */
static void drop(exchange *x, const char *who) {
  if (x->dropped++ == 0)
    snprintf(x->first_drop, sizeof x->first_drop, "%s: %s", who, mori_last_error());
  MORI_LOG(MORI_LOG_WARN, x->self, -1, "fd channel window %llu: dropped a datagram from %s: %s",
           (unsigned long long)x->window_seq, who, mori_last_error());
}

/* 1: a datagram was taken (accepted or dropped); 0: the queue is empty;
 * < 0: a member's datagram was rejected (every fd that came with it
 * closed) or recvmsg failed. */
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
    if (!from_member(x, &a)) {
      drop(x, who);
      return 1;
    }
    mori__error_prefix("rejected datagram from %s: ", who);
    return rc;
  }
  if (!partner(x, (int)d.sender_rank)) {
    char who[96];
    describe_sender(x, &a, who, sizeof who);
    close_fds(a.fds, a.nfds);
    mori__error(MORI_EPROTO, "rank %u is not a peer of this exchange", d.sender_rank);
    drop(x, who);
    return 1;
  }
  x->seen[d.sender_rank] |= BIT(d.type);
  if (d.type == MORI_DATAGRAM_FD) {
    x->fds[d.sender_rank] = a.fds[0];
    x->to_receive--;
  } else {
    if (d.type == MORI_DATAGRAM_CHALLENGE) x->owed[d.sender_rank] = d.challenge;
    x->progress = 1; /* an answer, or an fd, may go out now */
  }
  return 1;
}

static int done(const exchange *x) { return x->to_send == 0 && x->to_receive == 0; }

/* A bounded number per call, so that a flood of datagrams to drop cannot
 * keep the loop from its deadline.  Proofs still owed to us count: every
 * fd may be in while ours wait for their answers. */
static int receive_pending(exchange *x) {
  int rc;
  for (int n = 0; n < 3 * x->world_size + 64 && !done(x) && (rc = receive_one(x)) != 0; n++)
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
  shown_name name;
  return mori__error(MORI_EIO, "rank %d%s: sendmsg to %s: %s", r, gone ? " is gone" : "",
                     shown(&name, path), strerror(err));
}

/* ---- where an fd may go ---------------------------------------------- */

/* The directory holding a peer's socket, checked as the peer's private
 * directory must be: ours, writable by us alone, every directory above it
 * trusted.  Under our own base (the usual case) only the last step is new. */
static int peer_dir_open(const exchange *x, const char *path, size_t dir_len, int *dir) {
  const mori_channel *ch = x->ch;
  char dirpath[PATH_MAX];
  snprintf(dirpath, sizeof dirpath, "%.*s", (int)dir_len, path);
  const char *rest = dirpath + ch->base_len + 1;
  if (strncmp(dirpath, ch->name, ch->base_len) != 0 || dirpath[ch->base_len] != '/' ||
      !*rest || strchr(rest, '/') || strcmp(rest, "..") == 0 || strcmp(rest, ".") == 0)
    return mori_trusted_dir_open(dirpath, 0, "fd channel", dir);
  struct stat st;
  *dir = mori__openat(ch->base, rest, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (*dir < 0)
    return mori__error(errno == ENOENT ? MORI_ENOTFOUND : MORI_EIO, "fd channel: open(%s): %s",
                       dirpath, strerror(errno));
  int rc = mori_fstat(*dir, &st) == 0
               ? mori__dir_check(&st, dirpath, 0, "fd channel")
               : mori__error(MORI_EIO, "fd channel: fstat(%s): %s", dirpath, strerror(errno));
  if (rc < 0) {
    mori_close(*dir);
    *dir = -1;
  }
  return rc;
}

/* Opens (O_PATH) the socket rank r's request names, once it is sure only
 * our uid can have bound it: a socket owned by our uid, which is the uid
 * the request claims, in a directory of ours that nobody else can write.
 * The fd is what sends go to (/proc/self/fd/N): the socket checked is the
 * socket used. */
static int resolve_peer(exchange *x, int r) {
  const mori_request *q = &x->reqs[r];
  char path[sizeof q->socket_name];
  snprintf(path, sizeof path, "%s", q->socket_name);
  shown_name name;
  const char *slash = strrchr(path, '/'), *text = shown(&name, path);
  if (!slash || slash == path || !slash[1])
    return mori__error(MORI_EINVAL, "rank %d's request has no usable socket name '%s'", r, text);
  if (q->uid != (uint32_t)geteuid())
    return mori__error(MORI_EAUTH, "rank %d's request says uid %u; this process is uid %u", r,
                       q->uid, (unsigned)geteuid());
  int dir = -1, rc = peer_dir_open(x, path, (size_t)(slash - path), &dir);
  if (rc == MORI_ENOTFOUND)
    return mori__error(MORI_EIO, "rank %d is gone: %s: %s", r, text, strerror(ENOENT));
  if (rc < 0) {
    mori__error_prefix("rank %d's socket %s: ", r, text);
    return rc;
  }
  struct stat st;
  int sock = mori__openat(dir, slash + 1, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
  int err = errno;
  mori_close(dir);
  if (sock < 0)
    return mori__error(MORI_EIO, "rank %d%s: open(%s): %s", r, err == ENOENT ? " is gone" : "",
                       text, strerror(err));
  if (mori_fstat(sock, &st) != 0)
    rc = mori__error(MORI_EIO, "rank %d: fstat(%s): %s", r, text, strerror(errno));
  else if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid())
    rc = mori__error(MORI_EAUTH, "rank %d's socket %s is a %s of uid %u, not a socket of uid %u",
                     r, text, mori__file_type(st.st_mode), (unsigned)st.st_uid,
                     (unsigned)geteuid());
  if (rc < 0) {
    mori_close(sock);
    return rc;
  }
  x->dest[r] = sock;
  return 0;
}

/* Every peer's socket, before the first fd leaves this process. */
static int resolve_peers(exchange *x) {
  for (int r = 0; r < x->world_size; r++)
    if (partner(x, r)) MORI_GUARD(resolve_peer(x, r));
  return 0;
}

/* 1: sent; 0: the peer's queue is full, retry later; < 0: failed.  Only
 * an fd datagram carries an fd; a challenge carries the secret drawn for
 * the peer's socket, an answer the secret the peer challenged ours with. */
static int send_one(exchange *x, int r, uint32_t type) {
  const mori_request *peer = &x->reqs[r];
  mori_datagram d = {x->window_seq, (uint32_t)x->self, (uint32_t)r, x->reqs[x->self].nonce,
                     peer->nonce, type,
                     type == MORI_DATAGRAM_CHALLENGE ? x->challenge[r]
                     : type == MORI_DATAGRAM_ANSWER  ? x->owed[r]
                                                     : 0};
  uint8_t buf[MORI_WIRE_PROOF_SIZE];
  size_t len;
  int wrc = mori_wire_encode_datagram(&d, buf, sizeof buf, &len);
  if (wrc != MORI_WIRE_OK)
    return mori__error(MORI_EPROTO, "encoding the datagram for rank %d: %s", r,
                       mori_wire_strerror(wrc));
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof addr.sun_path, "/proc/self/fd/%d", x->dest[r]);
  union {
    struct cmsghdr align;
    char bytes[CMSG_SPACE(sizeof(int))];
  } control;
  struct iovec iov = {buf, len};
  struct msghdr msg = {.msg_name = &addr, .msg_namelen = sizeof addr, .msg_iov = &iov,
                       .msg_iovlen = 1};
  if (type == MORI_DATAGRAM_FD) {
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof control.bytes;
    memset(&control, 0, sizeof control); /* padding too: all of it goes to the kernel */
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &x->my_fd, sizeof(int));
  }
  ssize_t n = mori_sendmsg(x->ch->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n == (ssize_t)len) return 1;
  if (n < 0 && send_should_retry(errno)) return 0;
  return send_failed(r, peer->socket_name, n < 0 ? errno : EMSGSIZE);
}

/* What goes to each peer, in this order, once what it needs came from
 * that peer: a challenge at once; the answer to its challenge; the fd only
 * after its answer proved that its socket is read by its process. */
static const struct {
  uint32_t type;
  uint8_t needs; /* seen bits */
} sends[] = {
    {MORI_DATAGRAM_CHALLENGE, 0},
    {MORI_DATAGRAM_ANSWER, BIT(MORI_DATAGRAM_CHALLENGE)},
    {MORI_DATAGRAM_FD, BIT(MORI_DATAGRAM_ANSWER)},
};

/* Each rank starts with the rank after it, so that the first datagrams of
 * all ranks do not pile into rank 0's queue. */
static int send_pending(exchange *x) {
  x->held_up = 0;
  for (int i = 1; i < x->world_size; i++) {
    int r = (x->self + i) % x->world_size;
    if (!partner(x, r)) continue;
    for (size_t k = 0; k < sizeof sends / sizeof sends[0]; k++) {
      uint32_t type = sends[k].type;
      if ((x->sent[r] & BIT(type)) || (x->seen[r] & sends[k].needs) != sends[k].needs) continue;
      int rc = send_one(x, r, type);
      if (rc < 0) return rc;
      if (rc == 0) {
        x->held_up = 1;
        x->sent[r] |= HELD_UP;
        break; /* its queue is full: the rest for it waits too */
      }
      x->sent[r] = (uint8_t)((x->sent[r] & ~HELD_UP) | BIT(type));
      if (type == MORI_DATAGRAM_FD) x->to_send--;
    }
  }
  return 0;
}

/* Per peer r: whether a timeout lists it. */
typedef int (*rank_pred)(const exchange *x, int r);
static int not_heard(const exchange *x, int r) { return !(x->seen[r] & BIT(MORI_DATAGRAM_FD)); }
static int unproven(const exchange *x, int r) {
  return !(x->seen[r] & BIT(MORI_DATAGRAM_ANSWER));
}
static int queue_full(const exchange *x, int r) { return (x->sent[r] & HELD_UP) != 0; }

/* "1, 4, 7" from the ranks r != self that pred lists; the first (-1: none). */
static int list_ranks(const exchange *x, rank_pred pred, char *out, size_t cap) {
  size_t n = 0;
  int listed = 0, missing = 0, first = -1;
  out[0] = '\0';
  for (int r = 0; r < x->world_size; r++) {
    if (!partner(x, r) || !pred(x, r)) continue;
    if (first < 0) first = r;
    if (listed++ < LIST_RANKS_MAX && n < cap)
      n += (size_t)snprintf(out + n, cap - n, "%s%d", listed > 1 ? ", " : "", r);
    else
      missing++;
  }
  if (missing && n < cap) snprintf(out + n, cap - n, " and %d more", missing);
  return first;
}

/* Names the ranks not heard from; the ranks whose sockets never showed
 * they are read by their ranks' processes, the first with its socket and
 * process (why no fd went there); and those whose queues stayed full. */
static int timeout_error(const exchange *x, int timeout_ms) {
  char heard[160], proofs[160], held[160], why[768] = "";
  shown_name name;
  list_ranks(x, not_heard, heard, sizeof heard);
  int r = list_ranks(x, unproven, proofs, sizeof proofs);
  if (r >= 0)
    snprintf(why, sizeof why,
             "; sent no fd to rank(s) %s, whose processes did not answer the challenge sent to "
             "their sockets (rank %d's socket %s: no answer from pid %u uid %u: rank %d is "
             "late, or whatever reads that socket is not its process)",
             proofs, r, shown(&name, x->reqs[r].socket_name), x->reqs[r].pid, x->reqs[r].uid, r);
  int full = list_ranks(x, queue_full, held, sizeof held) >= 0;
  return mori__error(MORI_ETIMEDOUT, "timed out after %d ms; not heard from rank(s) %s%s%s%s%s",
                     timeout_ms, x->to_receive ? heard : "(none)", why,
                     full ? "; not yet sent to rank(s) " : "", full ? held : "",
                     full ? " (their queues stayed full)" : "");
}

/* Whatever ended the exchange, the datagrams dropped on the way may be why. */
static void report_drops(const exchange *x) {
  if (x->dropped == 0) return;
  mori__error_suffix("; dropped %d datagram(s) from non-members (first: %s)", x->dropped,
                     x->first_drop);
}

/* Sends are retried every SEND_RETRY_MS while any is held up; otherwise the
 * loop sleeps in poll until a datagram arrives or time runs out. */
/* A peer that gave up publishes its abort before it closes its channel:
 * if one is there, that is why a peer is gone, and the error says so. */
static int peer_failed_first(const exchange *x, int rc) {
  if (rc < 0 && x->ch->abort_check != NULL) {
    mori__first_error gone;
    (void)mori__first_set(&gone, rc);
    int aborted = x->ch->abort_check(x->ch->abort_ctx);
    if (aborted < 0) return aborted;
    return mori__first_end(&gone, rc);
  }
  return rc;
}

static int exchange_run(exchange *x, int timeout_ms) {
  double deadline, now, checked;
  MORI_GUARD(mori__clock_us(&deadline, "the exchange"));
  checked = -1; /* the first sleep looks; then once every ABORT_CHECK_MS */
  deadline += timeout_ms * 1e3;
  MORI_GUARD(peer_failed_first(x, resolve_peers(x)));
  for (;;) {
    MORI_GUARD(peer_failed_first(x, send_pending(x)));
    x->progress = 0;
    MORI_GUARD(receive_pending(x));
    if (done(x)) return 0;
    MORI_GUARD(mori__clock_us(&now, "the exchange"));
    long long left = (long long)((deadline - now) / 1e3);
    if (left <= 0) return timeout_error(x, timeout_ms);
    if (x->progress) continue; /* answer or send the fd before sleeping */
    /* The abort check reads the store (an abort, the launcher's notices:
     * a file and a MAC each); once every ABORT_CHECK_MS, not before every
     * sleep: a datagram at a time from N peers would run it N times. */
    if (x->ch->abort_check != NULL && (checked < 0 || now - checked >= ABORT_CHECK_MS * 1e3)) {
      MORI_GUARD(x->ch->abort_check(x->ch->abort_ctx));
      checked = now;
    }
    struct pollfd p = {x->ch->fd, POLLIN, 0};
    /* With an abort check, wake up now and then to run it. */
    long long slice = x->held_up ? SEND_RETRY_MS : x->ch->abort_check ? ABORT_CHECK_MS : left;
    int wait = (int)(left > slice ? slice : left);
    if (mori_poll(&p, 1, wait) < 0 && errno != EINTR)
      return mori__error(MORI_EIO, "poll(%s): %s", x->ch->name, strerror(errno));
  }
}

static int exchange_check_args(const mori_channel *ch, const mori_request *reqs, int world_size,
                               int self, int my_fd, const int *fds_out, int timeout_ms) {
  if (!ch || !reqs || !fds_out) return mori__error(MORI_EINVAL, "NULL argument");
  if (timeout_ms < 0) return mori__error(MORI_EINVAL, "negative timeout %d", timeout_ms);
  if (world_size < 1 || world_size > MORI_WIRE_MAX_WORLD || self < 0 || self >= world_size)
    return mori__error(MORI_ERANGE, "rank %d of world %d", self, world_size);
  if (world_size > 1 && my_fd < 0) return mori__error(MORI_EINVAL, "no fd to send (%d)", my_fd);
  shown_name name;
  if (strcmp(reqs[self].socket_name, ch->name) != 0)
    return mori__error(MORI_EINVAL, "own request names socket '%s', this channel is '%s'",
                       shown(&name, reqs[self].socket_name), ch->name);
  return 0;
}

void mori_channel_set_abort_check(mori_channel *ch, int (*check)(void *ctx), void *ctx) {
  ch->abort_check = check;
  ch->abort_ctx = ctx;
}

int mori_channel_exchange(mori_channel *ch, const mori_request *reqs, int world_size, int self,
                          uint64_t window_seq, int my_fd, int *fds_out, int timeout_ms) {
  return mori_channel_exchange_with(ch, reqs, world_size, self, window_seq, my_fd, fds_out,
                                    timeout_ms, NULL);
}

int mori_channel_exchange_with(mori_channel *ch, const mori_request *reqs, int world_size,
                               int self, uint64_t window_seq, int my_fd, int *fds_out,
                               int timeout_ms, const uint8_t *with) {
  uint8_t *flags = NULL;
  int *dest = NULL;
  uint64_t *secrets = NULL;
  exchange x = {0};
  for (int r = 0; fds_out && r < world_size && r < MORI_WIRE_MAX_WORLD; r++) fds_out[r] = -1;
  int rc = exchange_check_args(ch, reqs, world_size, self, my_fd, fds_out, timeout_ms);
  if (rc < 0) goto Exit;
  flags = mori_calloc(2, (size_t)world_size);
  dest = mori_malloc((size_t)world_size * sizeof *dest);
  secrets = mori_calloc(2 * (size_t)world_size, sizeof *secrets);
  if (!flags || !dest || !secrets) {
    rc = mori__nomem("fd channel: %zu bytes",
                     (size_t)world_size * (2 + sizeof *dest + 2 * sizeof *secrets));
    goto Exit;
  }
  for (int r = 0; r < world_size; r++) dest[r] = -1;
  for (int r = 0; r < world_size && rc == 0; r++) /* a fresh challenge for each peer's socket */
    rc = mori__random64(&secrets[r], "a challenge");
  if (rc < 0) goto Exit;
  x = (exchange){.ch = ch, .reqs = reqs, .world_size = world_size, .self = self, .window_seq = window_seq,
                 .my_fd = my_fd, .fds = fds_out, .dest = dest, .sent = flags,
                 .seen = flags + world_size, .challenge = secrets, .owed = secrets + world_size,
                 .with = with, .to_send = world_size - 1, .to_receive = world_size - 1};
  if (with != NULL) {
    x.to_send = x.to_receive = 0;
    for (int r = 0; r < world_size; r++) x.to_send += partner(&x, r);
    x.to_receive = x.to_send;
  }
  rc = exchange_run(&x, timeout_ms);
  if (rc < 0) close_fds(fds_out, world_size);
  if (rc < 0) report_drops(&x);
  close_fds(dest, world_size);
  ch->dropped = x.dropped;
Exit:
  free(flags);
  free(dest);
  free(secrets);
  if (rc < 0)
    mori__error_prefix("fd channel rank %d window %llu: ", self, (unsigned long long)window_seq);
  return rc;
}
