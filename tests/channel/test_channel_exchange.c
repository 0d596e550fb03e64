/*
 * test_channel_exchange.c - forked processes, one per rank, pass real fds
 * to each other over the fd channel: every rank ends up with every peer's
 * object and nothing else open; the private directory is made and removed
 * as promised (labels: sim).
 */
#include "harness.h"
#include "mori/channel.h"
#include "mori/error.h"
#include "mori/hip_shim.h"
#include "mori/store.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { EXCHANGE_TIMEOUT_MS = 20000, STORE_TIMEOUT_MS = 20000 };

static char *socket_dir; /* MORI_SYMM_SOCKET_DIR of every test here */

typedef struct world_plan {
  const char *store_dir;
  uint64_t seq;
  int late_rank; /* -1, or a rank that exchanges only once all others are */
} world_plan;

static int complain(int rank, const char *what) {
  fprintf(stderr, "rank %d: %s: %s\n", rank, what, mori_last_error());
  return 1;
}

/* Requests travel through the store as this binary's own struct bytes: the
 * channel is under test here, not the wire format. */
static int gather_requests(mori_store *st, mori_request *reqs, int rank, int n) {
  char key[32];
  snprintf(key, sizeof key, "req/%d", rank);
  if (st->set(st, key, &reqs[rank], sizeof reqs[rank])) return complain(rank, "set");
  for (int r = 0; r < n; r++) {
    void *v;
    size_t len;
    if (r == rank) continue;
    snprintf(key, sizeof key, "req/%d", r);
    if (st->get(st, key, &v, &len, STORE_TIMEOUT_MS)) return complain(rank, "get");
    if (len == sizeof reqs[r]) memcpy(&reqs[r], v, len);
    free(v);
    if (len != sizeof reqs[r]) return complain(rank, "request size");
  }
  return 0;
}

/* ---- the late rank's queue, seen through the seam ----
 *
 * The test defines mori_sendmsg, which the channel calls for every
 * datagram: in a rank that sends to the late rank, it counts the first
 * attempt to reach the late rank's socket in the store ("tried_late"),
 * and every send there refused for a full queue (EAGAIN), which the
 * channel must retry. */
static struct {
  char late_socket[108]; /* the late rank's socket; "" in the late rank itself */
  mori_store *store;
  int tried;
  long refused;
} late;

static int to_late_rank(const struct msghdr *msg) {
  const struct sockaddr_un *a = msg->msg_name;
  char path[sizeof late.late_socket];
  if (late.late_socket[0] == '\0' || a == NULL) return 0;
  /* the channel names a peer's socket by an fd it holds on it */
  ssize_t n = readlink(a->sun_path, path, sizeof path - 1);
  if (n < 0) return 0;
  path[n] = '\0';
  return strcmp(path, late.late_socket) == 0;
}

ssize_t mori_sendmsg(int fd, const struct msghdr *msg, int flags) {
  static ssize_t (*real)(int, const struct msghdr *, int);
  if (real == NULL) *(void **)&real = dlsym(RTLD_NEXT, "mori_sendmsg");
  ssize_t n = real(fd, msg, flags);
  int e = errno;
  if (to_late_rank(msg)) {
    if (n < 0 && e == EAGAIN) late.refused++;
    if (!late.tried++) (void)late.store->add(late.store, "tried_late", 1, NULL);
  }
  errno = e;
  return n;
}

/* Holds the late rank back until every other rank has tried to send to it
 * (their first datagram, a challenge, each): with more peers than
 * max_dgram_qlen (10 by default) waiting on its queue, some of their sends
 * must wait for room and be retried. */
static int arrive(mori_store *st, int rank, int n, int late_rank) {
  if (rank != late_rank) return 0;
  for (int64_t tried = 0; tried < n - 1;) {
    if (st->add(st, "tried_late", 0, &tried)) return complain(rank, "add");
    if (tried < n - 1 && st->wait_change(st, 1000)) return complain(rank, "wait_change");
  }
  return 0;
}

static void marker_of(char *out, size_t cap, int rank, int n, uint64_t seq) {
  snprintf(out, cap, "rank %d of %d, window %llu", rank, n, (unsigned long long)seq);
}

/* Every peer's object, no fd for self, every fd close-on-exec. */
static int check_received(int *fds, int rank, int n, uint64_t seq) {
  int bad = 0;
  for (int r = 0; r < n; r++) {
    char marker[64];
    marker_of(marker, sizeof marker, r, n, seq);
    if (r == rank) {
      bad |= fds[r] != -1;
      continue;
    }
    bad |= !harness_fd_has_marker(fds[r], marker);
    bad |= !(fcntl(fds[r], F_GETFD) & FD_CLOEXEC);
    close(fds[r]);
  }
  if (bad) fprintf(stderr, "rank %d: a received fd is not its sender's object\n", rank);
  return bad;
}

static int rank_main(int rank, int n, void *arg) {
  const world_plan *p = arg;
  mori_store *st = NULL;
  mori_channel *ch = NULL;
  mori_request *reqs = calloc((size_t)n, sizeof *reqs);
  int *fds = calloc((size_t)n, sizeof *fds);
  int obj = -1, rc = 1, fds_before = harness_count_fds();
  char marker[64];
  if (mori_file_store_open(p->store_dir, &st) || mori_channel_open(p->seq, &ch)) {
    complain(rank, "open");
    goto out;
  }
  harness_request(&reqs[rank], rank, n, mori_channel_name(ch));
  marker_of(marker, sizeof marker, rank, n, p->seq);
  obj = harness_marker_fd(marker);
  if (gather_requests(st, reqs, rank, n)) goto out;
  late.store = st;
  if (p->late_rank >= 0 && p->late_rank != rank)
    snprintf(late.late_socket, sizeof late.late_socket, "%s", reqs[p->late_rank].socket_name);
  if (arrive(st, rank, n, p->late_rank)) goto out;
  if (mori_channel_exchange(ch, reqs, n, rank, p->seq, obj, fds, EXCHANGE_TIMEOUT_MS)) {
    complain(rank, "exchange");
    goto out;
  }
  rc = check_received(fds, rank, n, p->seq);
  /* what the late rank's full queue refused, each send retried since */
  if (rc == 0 && late.refused > 0 && st->add(st, "refused_late", late.refused, NULL))
    rc = complain(rank, "add");
out:
  if (obj >= 0) close(obj);
  mori_channel_close(ch);
  if (st) st->destroy(st);
  free(reqs);
  free(fds);
  if (rc == 0 && harness_count_fds() != fds_before) {
    fprintf(stderr, "rank %d: %d fds open before, %d after\n", rank, fds_before,
            harness_count_fds());
    rc = 1;
  }
  return rc;
}

/* The sends the late rank's full queue refused (a store counter the ranks
 * add to); -1 for a world without a late rank. */
static long run_world(int n, int late_rank) {
  char *store = harness_tmpdir("store");
  world_plan plan = {store, 0x100000000ull + (uint64_t)n, late_rank};
  int failed = harness_run_ranks(n, rank_main, &plan);
  mori_store *st = NULL;
  int64_t refused = -1;
  if (late_rank >= 0 && mori_file_store_open(store, &st) == 0) {
    if (st->add(st, "refused_late", 0, &refused) != 0) refused = -1;
    st->destroy(st);
  }
  harness_remove_tree(store);
  free(store);
  assert_int_equal(failed, 0);
  return (long)refused;
}

/* /proc/sys/net/unix/max_dgram_qlen: how many datagrams a socket's queue
 * holds. */
static int dgram_qlen(void) {
  FILE *f = fopen("/proc/sys/net/unix/max_dgram_qlen", "r");
  int q = -1;
  if (f != NULL && fscanf(f, "%d", &q) != 1) q = -1;
  if (f != NULL) fclose(f);
  return q;
}

#define WORLD_TEST(n)                                                                       \
  static void exchange_passes_every_fd_between_##n##_forked_ranks(void **state) {           \
    run_world(n, -1);                                                                       \
  }
WORLD_TEST(2)
WORLD_TEST(3)
WORLD_TEST(4)
WORLD_TEST(8)
WORLD_TEST(16)

/* 15 peers send to a rank that is not reading yet: its queue holds
 * max_dgram_qlen of their challenges, every other send is refused, and
 * the exchange still completes, each refused send retried. */
static void exchange_completes_when_a_late_rank_s_queue_overflows(void **state) {
  enum { WORLD = 16 };
  int qlen = dgram_qlen();
  if (qlen < 1 || qlen >= WORLD - 1)
    fail_msg("max_dgram_qlen is %d: %d peers cannot overflow a queue", qlen, WORLD - 1);
  long refused = run_world(WORLD, 0);
  if (refused < WORLD - 1 - qlen)
    fail_msg("%ld sends refused by the late rank's full queue (at least %d: %d peers, a queue "
             "of %d)", refused, WORLD - 1 - qlen, WORLD - 1, qlen);
}

/* A umask that takes the owner's write bit would leave the directory and
 * the sockets unusable if the channel did not set their modes itself (as
 * root, permissions are not enforced: the modes themselves are checked in
 * channel_directory_is_private_and_removed_at_exit). */
static void exchange_works_under_a_umask_that_denies_the_owner_write(void **state) {
  mode_t old = umask(0277);
  char *store = harness_tmpdir("store");
  umask(old);
  world_plan plan = {store, 3, -1};
  umask(0277);
  int failed = harness_run_ranks(2, rank_main, &plan);
  umask(old);
  harness_remove_tree(store);
  free(store);
  assert_int_equal(failed, 0);
}

/* ---- the private directory (each case in a fresh process) ---- */

static int run_in_child(int (*fn)(void *), void *arg) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) exit(fn(arg)); /* exit: the directory goes in an atexit hook */
  int status;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

static int dir_has_prefix(const char *path, const char *base) {
  size_t n = strlen(base);
  return strncmp(path, base, n) == 0 && strncmp(path + n, "/mori-symm-", 11) == 0 &&
         !strchr(path + n + 11, '/');
}

/* Child: two channels, opened under a umask that would leave the directory
 * unwritable and the sockets unsendable-to, then inspected; the first
 * one's directory path goes down pipe_w. */
static int inspect_private_dir(void *arg) {
  int pipe_w = *(int *)arg;
  mori_channel *a, *b;
  struct stat st, sa;
  umask(0277);
  if (mori_channel_open(5, &a) || mori_channel_open(5, &b)) return 1;
  char dir[PATH_MAX], dir_b[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", mori_channel_name(a));
  snprintf(dir_b, sizeof dir_b, "%s", mori_channel_name(b));
  int bad = strcmp(dirname(dir), dirname(dir_b)) == 0;          /* one directory per channel */
  bad |= strcmp(mori_channel_name(a), mori_channel_name(b)) == 0; /* distinct sockets */
  bad |= strcmp(mori_channel_name(a) + strlen(dir), "/w5") != 0;
  bad |= strlen(mori_channel_name(a)) >= sizeof(((struct sockaddr_un *)0)->sun_path);
  bad |= !dir_has_prefix(dir, socket_dir);
  bad |= stat(dir, &st) != 0 || (st.st_mode & 07777) != 0700 || st.st_uid != geteuid();
  bad |= stat(mori_channel_name(a), &sa) != 0 || !S_ISSOCK(sa.st_mode) ||
         (sa.st_mode & 07777) != 0600;
  char name[PATH_MAX];
  snprintf(name, sizeof name, "%s", mori_channel_name(a));
  mori_channel_close(a);
  mori_channel_close(b);
  bad |= access(name, F_OK) == 0; /* close unlinks the socket */
  bad |= access(dir, F_OK) == 0;  /* and removes its directory */
  if (write(pipe_w, dir, strlen(dir) + 1) < 0) bad = 1;
  return bad;
}

static void channel_directory_is_private_and_removed_at_close(void **state) {
  int fds[2];
  char dir[PATH_MAX] = "";
  assert_int_equal(pipe(fds), 0);
  assert_int_equal(run_in_child(inspect_private_dir, &fds[1]), 0);
  close(fds[1]);
  assert_true(read(fds[0], dir, sizeof dir - 1) > 0);
  close(fds[0]);
  assert_true(dir_has_prefix(dir, socket_dir));
  assert_int_not_equal(access(dir, F_OK), 0);
}

typedef struct env_case {
  const char *socket_dir, *xdg, *tmpdir; /* NULL: unset */
  const char *expect_base;
} env_case;

static int open_under_env(void *arg) {
  const env_case *c = arg;
  mori_channel *ch;
  c->socket_dir ? setenv("MORI_SYMM_SOCKET_DIR", c->socket_dir, 1)
                : unsetenv("MORI_SYMM_SOCKET_DIR");
  c->xdg ? setenv("XDG_RUNTIME_DIR", c->xdg, 1) : unsetenv("XDG_RUNTIME_DIR");
  c->tmpdir ? setenv("TMPDIR", c->tmpdir, 1) : unsetenv("TMPDIR");
  if (mori_channel_open(1, &ch)) return 1;
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", mori_channel_name(ch));
  int bad = !dir_has_prefix(dirname(dir), c->expect_base);
  mori_channel_close(ch);
  return bad;
}

static void channel_directory_follows_MORI_SYMM_SOCKET_DIR_XDG_RUNTIME_DIR_then_TMPDIR(
    void **state) {
  char *xdg = harness_tmpdir("xdg"), *tmp = harness_tmpdir("tmpdir");
  const env_case cases[] = {
      {socket_dir, xdg, tmp, socket_dir},
      {NULL, xdg, tmp, xdg},
      {"", xdg, tmp, xdg},
      {NULL, NULL, tmp, tmp},
      {NULL, "", "", "/tmp"},
      {NULL, NULL, NULL, "/tmp"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    assert_int_equal(run_in_child(open_under_env, (void *)&cases[i]), 0);
  assert_int_equal(rmdir(xdg), 0); /* empty again: the child removed its directory */
  assert_int_equal(rmdir(tmp), 0);
  free(xdg);
  free(tmp);
}

static int open_with_long_base(void *arg) {
  mori_channel *ch = NULL;
  setenv("MORI_SYMM_SOCKET_DIR", arg, 1);
  int rc = mori_channel_open(1, &ch);
  return rc == MORI_ERANGE && !ch && strstr(mori_last_error(), "sun_path") ? 0 : 1;
}

static void channel_open_refuses_a_socket_path_longer_than_sun_path(void **state) {
  char base[PATH_MAX];
  snprintf(base, sizeof base, "%s/", socket_dir);
  size_t n = strlen(base);
  memset(base + n, 'd', 100);
  base[n + 100] = '\0';
  assert_int_equal(mkdir(base, 0700), 0);
  assert_int_equal(run_in_child(open_with_long_base, base), 0);
  assert_int_equal(rmdir(base), 0); /* no directory or socket left in it */
}

/* Runs last: the forked ranks above each made a directory in socket_dir. */
static void forked_ranks_leave_no_socket_or_directory_behind(void **state) {
  DIR *d = opendir(socket_dir);
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) fail_msg("left: %s", e->d_name);
  closedir(d);
}

/* The library grows the process's fd table once, at load (core/src/base/os.c):
 * a rendezvous that takes the fd past the table's size in a multi-threaded
 * process would wait out an RCU grace period in that call.  FDSize in
 * /proc/self/status is the table's size. */
static void the_fd_table_is_grown_at_load(void **s) {
  (void)s;
  struct rlimit rl;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
  long want = rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 4096 ? (long)rl.rlim_cur : 4096;
  FILE *f = fopen("/proc/self/status", "r");
  assert_non_null(f);
  char line[256];
  long size = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "FDSize: %ld", &size) == 1) break;
  fclose(f);
  if (size < want) fail_msg("FDSize is %ld, not the %ld slots the library grows it to", size, want);
}

int main(void) {
  socket_dir = harness_tmpdir("sock");
  setenv("MORI_SYMM_SOCKET_DIR", socket_dir, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_fd_table_is_grown_at_load),
      cmocka_unit_test(exchange_passes_every_fd_between_2_forked_ranks),
      cmocka_unit_test(exchange_passes_every_fd_between_3_forked_ranks),
      cmocka_unit_test(exchange_passes_every_fd_between_4_forked_ranks),
      cmocka_unit_test(exchange_passes_every_fd_between_8_forked_ranks),
      cmocka_unit_test(exchange_passes_every_fd_between_16_forked_ranks),
      cmocka_unit_test(exchange_completes_when_a_late_rank_s_queue_overflows),
      cmocka_unit_test(exchange_works_under_a_umask_that_denies_the_owner_write),
      cmocka_unit_test(channel_directory_is_private_and_removed_at_close),
      cmocka_unit_test(
          channel_directory_follows_MORI_SYMM_SOCKET_DIR_XDG_RUNTIME_DIR_then_TMPDIR),
      cmocka_unit_test(channel_open_refuses_a_socket_path_longer_than_sun_path),
      cmocka_unit_test(forked_ranks_leave_no_socket_or_directory_behind),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  harness_remove_tree(socket_dir);
  free(socket_dir);
  return failed;
}
