/*
 * harness.c - helpers of the store and channel tests (see harness.h).  Plain
 * libc: the tests reach around the library with these, so they must not
 * depend on it.
 */
#include "harness.h"

#include "mori/hip_shim.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

int harness_count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1;
}

char *harness_tmpdir(const char *tag) {
  const char *base = getenv("TMPDIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/mori-test-%s-XXXXXX", base && *base ? base : "/tmp", tag);
  return mkdtemp(path) ? strdup(path) : NULL;
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  return remove(path);
}

void harness_remove_tree(const char *dir) { nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS); }

int harness_run_ranks(int n, int (*fn)(int rank, int n, void *arg), void *arg) {
  pid_t pids[256];
  int failed = 0;
  if (n > 256) return n;
  fflush(NULL); /* or each child flushes the parent's buffered output again */
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    if (pids[r] == 0) exit(fn(r, n, arg) == 0 ? 0 : 1); /* exit: atexit hooks must run */
    if (pids[r] < 0) failed++;
  }
  for (int r = 0; r < n; r++) {
    int status;
    if (pids[r] > 0 &&
        (waitpid(pids[r], &status, 0) != pids[r] || !WIFEXITED(status) || WEXITSTATUS(status)))
      failed++;
  }
  return failed;
}

uint64_t harness_random64(void) {
  uint64_t v = 0;
  while (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
  }
  return v;
}

void harness_request(mori_request *r, int rank, int world, const char *socket_name) {
  memset(r, 0, sizeof *r);
  r->rank = (uint32_t)rank;
  r->world_size = (uint32_t)world;
  r->alloc_size = 2u << 20;
  r->buffer_size = 1u << 20;
  r->signal_pad_offset = r->alloc_size;
  r->device = rank;
  r->pid = (uint32_t)getpid();
  r->uid = (uint32_t)geteuid();
  r->handle_type = hipMemHandleTypePosixFileDescriptor;
  r->nonce = harness_random64();
  snprintf(r->socket_name, sizeof r->socket_name, "%s", socket_name);
}

int harness_marker_fd(const char *marker) {
  int fd = memfd_create("mori-test-marker", MFD_CLOEXEC);
  size_t len = strlen(marker) + 1;
  if (fd >= 0 && pwrite(fd, marker, len, 0) != (ssize_t)len) {
    close(fd);
    fd = -1;
  }
  return fd;
}

int harness_fd_has_marker(int fd, const char *marker) {
  char buf[256] = {0};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  return n == (ssize_t)strlen(marker) + 1 && strcmp(buf, marker) == 0;
}

int harness_send_raw(const char *path, const void *buf, size_t len, const int *fds, int nfds) {
  union {
    struct cmsghdr align;
    char bytes[CMSG_SPACE(16 * sizeof(int))];
  } control;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  struct iovec iov = {(void *)buf, len};
  struct msghdr msg = {.msg_name = &addr, .msg_namelen = sizeof addr, .msg_iov = &iov,
                       .msg_iovlen = 1};
  if (nfds > 16) return -EINVAL;
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
  if (nfds > 0) {
    msg.msg_control = control.bytes;
    msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
    memset(&control, 0, sizeof control);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
    memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
  }
  int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -errno;
  int rc = sendmsg(s, &msg, MSG_DONTWAIT) == (ssize_t)len ? 0 : -errno;
  close(s);
  return rc;
}

/* ---- the proof, played for in-process peers ---- */

enum { PROVER_MAX = 16 };

struct harness_prover {
  pthread_t thread;
  int stop[2]; /* a byte on stop[1] ends the thread */
  int sockets[PROVER_MAX];
  const mori_request *reqs;
  int world, victim;
  uint64_t seq;
};

/* Reads the challenge on rank r's socket and answers it; 1 once done. */
static int answer_one(const harness_prover *p, int r) {
  uint8_t buf[128];
  ssize_t n = recv(p->sockets[r], buf, sizeof buf, MSG_DONTWAIT);
  mori_datagram d;
  if (n < 0 || mori_wire_decode_datagram(buf, (size_t)n, &d) != MORI_WIRE_OK ||
      d.type != MORI_DATAGRAM_CHALLENGE)
    return n >= 0; /* not a challenge: read, and done with this socket all the same */
  mori_datagram a = {p->seq, (uint32_t)r, (uint32_t)p->victim, p->reqs[r].nonce,
                     p->reqs[p->victim].nonce, MORI_DATAGRAM_ANSWER, d.challenge};
  size_t len = 0;
  if (mori_wire_encode_datagram(&a, buf, sizeof buf, &len) == MORI_WIRE_OK)
    (void)harness_send_raw(p->reqs[p->victim].socket_name, buf, len, NULL, 0);
  return 1;
}

static void *prover_main(void *arg) {
  harness_prover *p = arg;
  int pending = 0;
  for (int r = 0; r < p->world; r++) pending += p->sockets[r] >= 0;
  while (pending > 0) {
    struct pollfd fds[PROVER_MAX + 1];
    int who[PROVER_MAX + 1], n = 0;
    fds[n] = (struct pollfd){p->stop[0], POLLIN, 0};
    who[n++] = -1;
    for (int r = 0; r < p->world; r++)
      if (p->sockets[r] >= 0) {
        fds[n] = (struct pollfd){p->sockets[r], POLLIN, 0};
        who[n++] = r;
      }
    if (poll(fds, (nfds_t)n, -1) < 0 && errno != EINTR) break;
    if (fds[0].revents) break;
    for (int i = 1; i < n; i++)
      if ((fds[i].revents & POLLIN) && answer_one(p, who[i])) {
        p->sockets[who[i]] = -1;
        pending--;
      }
  }
  return NULL;
}

harness_prover *harness_prover_start(const int *sockets, const mori_request *reqs, int world,
                                     int victim, uint64_t seq) {
  harness_prover *p = calloc(1, sizeof *p);
  if (p == NULL || world > PROVER_MAX || pipe(p->stop) != 0) abort();
  for (int r = 0; r < world; r++) p->sockets[r] = r == victim ? -1 : sockets[r];
  p->reqs = reqs;
  p->world = world;
  p->victim = victim;
  p->seq = seq;
  if (pthread_create(&p->thread, NULL, prover_main, p) != 0) abort();
  return p;
}

void harness_prover_stop(harness_prover *p) {
  char byte = 1;
  if (write(p->stop[1], &byte, 1) != 1) abort();
  pthread_join(p->thread, NULL);
  close(p->stop[0]);
  close(p->stop[1]);
  free(p);
}
