/*
 * test_peers.c - peers are us.  A request naming another uid, or a socket
 * that another user (or anyone at all) could have put there, gets no fd:
 * the rendezvous fails before anything is sent.  Datagrams from processes
 * that are not members are dropped and counted; the exchange still
 * completes, and if it fails for another reason its error reports them
 * (labels: security).
 */
#include "sec_harness.h"

#include "../channel/harness.h"
#include "mori/channel.h"
#include "mori/error.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- a man in the store: rank 0 reads a rank 1 request it did not send ---- */

/* A process of uid reading a socket at path, counting the fds it receives
 * until stopped and looking into each for a secret (as another user would
 * read a rank's memory through its fd); both come back through a pipe.
 * activated: root binds the socket and hands it to the process, which then
 * runs as uid (socket activation: the socket is root's, its reader not). */
typedef struct listener {
  pid_t pid;
  int stop_w, count_r;
  char path[108];
} listener;

typedef struct heard {
  int fds;       /* fds received */
  int secrets;   /* of them, fds whose object holds the secret */
  int datagrams; /* datagrams received, with an fd or without (a challenge) */
} heard;

/* Whether the object behind fd holds secret anywhere. */
static int object_holds(int fd, const char *secret) {
  struct stat st;
  if (!secret || fstat(fd, &st) != 0 || st.st_size <= 0) return 0;
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return 0;
  int found = memmem(p, (size_t)st.st_size, secret, strlen(secret)) != NULL;
  munmap(p, (size_t)st.st_size);
  return found;
}

static void listen_child(uid_t uid, int activated, const char *path, const char *secret,
                         int ready_w, int stop_r, int count_w) {
  if (!activated) sec_drop_to(uid);
  int s = socket(AF_UNIX, SOCK_DGRAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 || chmod(path, 0777) != 0) _exit(121);
  if (activated) sec_drop_to(uid);
  char ok = 1;
  if (write(ready_w, &ok, 1) != 1) _exit(122);
  heard h = {0, 0, 0};
  struct pollfd p[2] = {{s, POLLIN, 0}, {stop_r, POLLIN, 0}};
  while (poll(p, 2, -1) > 0 && !(p[1].revents & (POLLIN | POLLHUP))) {
    char buf[256];
    union {
      struct cmsghdr align;
      char bytes[CMSG_SPACE(8 * sizeof(int))];
    } control;
    struct iovec iov = {buf, sizeof buf};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.bytes,
                         .msg_controllen = sizeof control.bytes};
    if (recvmsg(s, &msg, MSG_DONTWAIT) < 0) continue;
    h.datagrams++;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
          int fd;
          memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
          h.fds++;
          h.secrets += object_holds(fd, secret);
          close(fd);
        }
  }
  _exit(write(count_w, &h, sizeof h) == sizeof h ? 0 : 123);
}

static listener listener_start_as(uid_t uid, int activated, const char *path, const char *secret) {
  listener l = {0};
  int ready[2], stop[2], count[2];
  assert_int_equal(pipe(ready), 0);
  assert_int_equal(pipe(stop), 0);
  assert_int_equal(pipe(count), 0);
  snprintf(l.path, sizeof l.path, "%s", path);
  fflush(NULL);
  l.pid = fork();
  if (l.pid == 0) {
    close(ready[0]);
    close(stop[1]);
    close(count[0]);
    listen_child(uid, activated, path, secret, ready[1], stop[0], count[1]);
  }
  close(ready[1]);
  close(stop[0]);
  close(count[1]);
  char ok = 0;
  if (read(ready[0], &ok, 1) != 1) fail_msg("the listener at %s did not start", path);
  close(ready[0]);
  l.stop_w = stop[1];
  l.count_r = count[0];
  return l;
}

static listener listener_start(uid_t uid, const char *path) {
  return listener_start_as(uid, 0, path, NULL);
}

/* What it heard. */
static heard listener_heard(listener *l) {
  heard h = {-1, -1, -1};
  close(l->stop_w);
  if (read(l->count_r, &h, sizeof h) != sizeof h) h.fds = h.secrets = h.datagrams = -1;
  close(l->count_r);
  waitpid(l->pid, NULL, 0);
  return h;
}

/* How many fds it was sent. */
static int listener_stop(listener *l) { return listener_heard(l).fds; }

/* What rank 0 is made to read as rank 1's request. */
typedef struct tamper {
  uint32_t uid; /* 0: leave it */
  int set_uid;
  const char *socket_name;
} tamper;

static void tamper_request(const char *key, void **value, size_t *len, void *ctx) {
  const tamper *t = ctx;
  mori_request q;
  (void)key;
  if (mori_wire_decode_request(*value, *len, &q) != MORI_WIRE_OK || q.rank != 1) return;
  if (t->set_uid) q.uid = t->uid;
  if (t->socket_name) snprintf(q.socket_name, sizeof q.socket_name, "%s", t->socket_name);
  uint8_t *buf = malloc(MORI_WIRE_REQUEST_MAX);
  size_t n = 0;
  assert_int_equal(mori_wire_encode_request(&q, buf, MORI_WIRE_REQUEST_MAX, &n), MORI_WIRE_OK);
  free(*value);
  *value = buf;
  *len = n;
}

typedef struct scene {
  char *dir;      /* the job's store */
  char *lair;     /* the attacker's, with evil/ in it */
  char evil[256];
  char socket[300];
} scene;

/* evil/ owned by owner with mode, in a directory everyone may search. */
static void scene_open(scene *sc, uid_t owner, mode_t mode) {
  sc->dir = sec_tmpdir("peers");
  sc->lair = sec_tmpdir("lair");
  assert_non_null(sc->dir);
  assert_non_null(sc->lair);
  assert_int_equal(chmod(sc->lair, 0755), 0);
  snprintf(sc->evil, sizeof sc->evil, "%s/evil", sc->lair);
  snprintf(sc->socket, sizeof sc->socket, "%s/s", sc->evil);
  assert_int_equal(mkdir(sc->evil, 0700), 0);
  if (owner != geteuid()) assert_int_equal(chown(sc->evil, owner, owner), 0);
  assert_int_equal(chmod(sc->evil, mode), 0);
}

static void scene_close(scene *sc) {
  sec_remove_tree(sc->dir);
  sec_remove_tree(sc->lair);
  free(sc->dir);
  free(sc->lair);
}

/* Runs the two ranks with rank 0 reading the tampered request; the
 * listener at the named socket must receive nothing, and rank 0 must fail
 * saying why. */
static void assert_no_fd_reaches(scene *sc, uid_t listener_uid, tamper *t, const char *says) {
  listener l = listener_start(listener_uid, sc->socket);
  sec_plan plan = {.timeout_ms = 1500};
  plan.rank[0].rewrite = tamper_request;
  plan.rank[0].rewrite_ctx = t;
  mori_rank_result res[2];
  sec_launch(sc->dir, 2, &plan, res);
  int got = listener_stop(&l);
  print_message("rank 0: %s\n", sec_err(res[0].msg));
  if (got != 0) fail_msg("the socket at %s was sent %d fd(s)", sc->socket, got);
  if (sec_num(res[0].msg, "rc") == 0) fail_msg("rank 0 succeeded: %s", res[0].msg);
  if (!strstr(sec_err(res[0].msg), says))
    fail_msg("rank 0's error does not say '%s': %s", says, res[0].msg);
}

static void a_request_naming_another_uid_gets_no_fd(void **s) {
  (void)s;
  scene sc;
  uid_t other = sec_is_root() ? SEC_OTHER_UID : geteuid() + 1;
  uid_t listener_uid = sec_is_root() ? SEC_OTHER_UID : geteuid();
  scene_open(&sc, listener_uid, 0700);
  tamper t = {(uint32_t)other, 1, sc.socket};
  assert_no_fd_reaches(&sc, listener_uid, &t, "uid");
  scene_close(&sc);
}

static void a_request_with_our_uid_naming_another_user_s_socket_gets_no_fd(void **s) {
  (void)s;
  SEC_NEED_ROOT("a socket bound by another uid");
  scene sc;
  scene_open(&sc, SEC_OTHER_UID, 0700);
  tamper t = {0, 0, sc.socket};
  assert_no_fd_reaches(&sc, SEC_OTHER_UID, &t, "uid 64011");
  scene_close(&sc);
}

static void a_request_naming_a_socket_anyone_could_have_bound_gets_no_fd(void **s) {
  (void)s;
  scene sc;
  scene_open(&sc, geteuid(), 0777);
  tamper t = {0, 0, sc.socket};
  assert_no_fd_reaches(&sc, geteuid(), &t, "writable");
  scene_close(&sc);
}

/* A socket of another user in a directory of ours nobody else can write
 * (root put it there and gave it away): the directory passes, so only the
 * check of the socket's own owner stands between it and the fd. */
static void a_socket_of_another_user_in_our_private_directory_gets_no_fd(void **s) {
  (void)s;
  SEC_NEED_ROOT("a socket owned by another uid");
  scene sc;
  scene_open(&sc, geteuid(), 0700);
  listener l = listener_start_as(SEC_OTHER_UID, 1, sc.socket, NULL);
  assert_int_equal(chown(sc.socket, SEC_OTHER_UID, SEC_OTHER_UID), 0);
  tamper t = {0, 0, sc.socket};
  sec_plan plan = {.timeout_ms = 1500};
  plan.rank[0].rewrite = tamper_request;
  plan.rank[0].rewrite_ctx = &t;
  mori_rank_result res[2];
  sec_launch(sc.dir, 2, &plan, res);
  int got = listener_stop(&l);
  print_message("rank 0: %s\n", sec_err(res[0].msg));
  if (got != 0) fail_msg("the socket at %s was sent %d fd(s)", sc.socket, got);
  if (!strstr(sec_err(res[0].msg), "is a socket of uid 64011"))
    fail_msg("rank 0's error does not say the socket is uid 64011's: %s", res[0].msg);
  scene_close(&sc);
}

/* Socket activation turned against a rank: root binds a socket in a
 * directory of root's and hands its reading end to a process of another
 * user.  The socket, its directory and the uid the request claims are all
 * ours (root's): only the process reading it is not.  That user publishes
 * a request for rank 1 naming the socket (through a store any local user
 * can write, as torch's TCPStore is), and must get no fd: rank 0 fails,
 * naming rank 1, the socket and why, and her process reads nothing of
 * rank 0's memory. */
static void a_socket_of_ours_read_by_another_user_s_process_gets_no_fd(void **s) {
  (void)s;
  SEC_NEED_ROOT("a root-owned socket read by a process of another uid");
  static const char secret[] = "rank 0's memory: 5ec2e7-0f-rank-0";
  scene sc;
  scene_open(&sc, geteuid(), 0755); /* root's, like /run/<service>/ */
  listener l = listener_start_as(SEC_OTHER_UID, 1, sc.socket, secret);
  tamper t = {0, 0, sc.socket}; /* our uid, rank 1's pid: only the socket is hers */
  sec_plan plan = {.timeout_ms = 1500};
  plan.rank[0].rewrite = tamper_request;
  plan.rank[0].rewrite_ctx = &t;
  plan.rank[0].secret = secret;
  /* Rank 1 waits for rank 0's fd as long as rank 0 waits for the answer:
   * under load its deadline came first (3 runs of 8 beside two fault
   * sweeps), and rank 0 then reported rank 1's failure, not its own. */
  plan.rank[1].timeout_ms = 3 * plan.timeout_ms;
  mori_rank_result res[2];
  sec_launch(sc.dir, 2, &plan, res);
  heard h = listener_heard(&l);
  print_message("rank 0: %s\n", sec_err(res[0].msg));
  if (h.fds != 0)
    fail_msg("the process of uid %d reading %s was sent %d fd(s) and read rank 0's memory "
             "through %d of them",
             SEC_OTHER_UID, sc.socket, h.fds, h.secrets);
  const char *err = sec_err(res[0].msg);
  if (sec_num(res[0].msg, "rc") == 0) fail_msg("rank 0 succeeded: %s", res[0].msg);
  if (!strstr(err, "rank 1") || !strstr(err, sc.socket) || !strstr(err, "challenge"))
    fail_msg("rank 0's error does not name rank 1, %s and the unanswered challenge: %s",
             sc.socket, err);
  scene_close(&sc);
}

/* A socket named deeper under rank 0's own socket base (base/a/evil/s):
 * only a private directory right in the base (base/<dir>, the usual case)
 * is judged alone, as the last step of a walk already made.  Deeper, every
 * component is walked: base/a is a link to a directory elsewhere, and
 * opened through it evil/ is ours and private, so judged by its last
 * directory alone the socket would pass.  It gets nothing, not even a
 * challenge, and rank 0 says the link is why. */
static void a_request_naming_a_socket_behind_a_link_in_our_socket_base_gets_nothing(void **s) {
  (void)s;
  scene sc;
  scene_open(&sc, geteuid(), 0700);
  char *base = sec_tmpdir("base");
  assert_non_null(base);
  char link[256], named[300];
  snprintf(link, sizeof link, "%s/a", base);
  snprintf(named, sizeof named, "%s/a/evil/s", base);
  assert_int_equal(symlink(sc.lair, link), 0);
  listener l = listener_start(geteuid(), sc.socket);
  tamper t = {0, 0, named};
  sec_plan plan = {.timeout_ms = 1500};
  plan.rank[0].rewrite = tamper_request;
  plan.rank[0].rewrite_ctx = &t;
  plan.rank[0].socket_dir = base;
  mori_rank_result res[2];
  sec_launch(sc.dir, 2, &plan, res);
  heard h = listener_heard(&l);
  const char *err = sec_err(res[0].msg);
  print_message("rank 0: %s\n", err);
  if (h.datagrams != 0)
    fail_msg("the socket at %s (reached as %s) was sent %d datagram(s), %d fd(s): rank 0: %s",
             sc.socket, named, h.datagrams, h.fds, res[0].msg);
  if (sec_num(res[0].msg, "rc") == 0) fail_msg("rank 0 succeeded: %s", res[0].msg);
  if (!strstr(err, link) || !strstr(err, "is a symlink, not a directory"))
    fail_msg("rank 0's error does not say %s is a link: %s", link, res[0].msg);
  sec_remove_tree(base);
  free(base);
  scene_close(&sc);
}

/* ---- non-members on the fd channel ---- */

enum { WORLD = 3, VICTIM = 0, SEQ = 11 };

typedef struct channels {
  char *sockets;
  mori_channel *ch[WORLD];
  mori_request reqs[WORLD];
  int fds_out[WORLD];
  int my_obj;
} channels;

static void channels_open(channels *c) {
  memset(c, 0, sizeof *c);
  c->sockets = sec_tmpdir("chan");
  assert_non_null(c->sockets);
  setenv("MORI_SYMM_SOCKET_DIR", c->sockets, 1);
  for (int r = 0; r < WORLD; r++) {
    if (mori_channel_open(SEQ, &c->ch[r]) != 0) fail_msg("channel_open: %s", mori_last_error());
    harness_request(&c->reqs[r], r, WORLD, mori_channel_name(c->ch[r]));
  }
  c->my_obj = harness_marker_fd("from rank 0");
}

static void channels_close(channels *c) {
  for (int r = 0; r < WORLD; r++) mori_channel_close(c->ch[r]);
  close(c->my_obj);
  sec_remove_tree(c->sockets);
  free(c->sockets);
  unsetenv("MORI_SYMM_SOCKET_DIR");
}

/* The victim's exchange, ranks 1 and 2 answering its challenges. */
static int victim_exchange(channels *c, int timeout_ms) {
  int sockets[WORLD];
  for (int r = 0; r < WORLD; r++) sockets[r] = mori_channel_fd(c->ch[r]);
  harness_prover *p = harness_prover_start(sockets, c->reqs, WORLD, VICTIM, SEQ);
  int rc = mori_channel_exchange(c->ch[VICTIM], c->reqs, WORLD, VICTIM, SEQ, c->my_obj,
                                 c->fds_out, timeout_ms);
  harness_prover_stop(p);
  return rc;
}

static void send_as(const channels *c, int sender, const char *marker, int garbage) {
  uint8_t buf[MORI_WIRE_DATAGRAM_SIZE];
  mori_datagram d = {SEQ, (uint32_t)sender, VICTIM, c->reqs[sender].nonce, c->reqs[VICTIM].nonce,
                     MORI_DATAGRAM_FD, 0};
  assert_int_equal(mori_wire_encode_datagram(&d, buf, sizeof buf, NULL), MORI_WIRE_OK);
  if (garbage) memset(buf, 0x5a, sizeof buf);
  int obj = harness_marker_fd(marker);
  assert_int_equal(harness_send_raw(mori_channel_name(c->ch[VICTIM]), buf, sizeof buf, &obj, 1), 0);
  close(obj);
}

/* From a forked child: a pid no rank has, everything else right (it knows
 * rank 1's nonces and the path), and then garbage. */
static pid_t send_from_a_non_member(const channels *c) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    send_as(c, 1, "forged", 0);
    send_as(c, 1, "forged", 1);
    _exit(0);
  }
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  return pid;
}

static void datagrams_from_non_members_are_dropped_and_the_exchange_completes(void **s) {
  (void)s;
  channels c;
  channels_open(&c);
  send_from_a_non_member(&c);
  send_as(&c, 2, "from rank 2", 0);
  send_as(&c, 1, "from rank 1", 0);
  int before = harness_count_fds();
  int rc = victim_exchange(&c, 3000);
  if (rc != 0) fail_msg("exchange: %s", mori_last_error());
  assert_true(harness_fd_has_marker(c.fds_out[1], "from rank 1"));
  assert_true(harness_fd_has_marker(c.fds_out[2], "from rank 2"));
  close(c.fds_out[1]);
  close(c.fds_out[2]);
  assert_int_equal(harness_count_fds(), before); /* the forged fd was closed */
  channels_close(&c);
}

static void an_exchange_that_times_out_reports_the_non_members_it_dropped(void **s) {
  (void)s;
  channels c;
  channels_open(&c);
  pid_t pid = send_from_a_non_member(&c);
  send_as(&c, 2, "from rank 2", 0);
  int before = harness_count_fds();
  int rc = victim_exchange(&c, 200);
  const char *m = mori_last_error();
  char who[64];
  snprintf(who, sizeof who, "pid %ld", (long)pid);
  print_message("%s\n", m);
  if (rc != MORI_ETIMEDOUT) fail_msg("want MORI_ETIMEDOUT, got %s: %s", mori_error_name(rc), m);
  if (!strstr(m, "not heard from rank(s) 1") || !strstr(m, "dropped 2") || !strstr(m, who))
    fail_msg("the timeout does not report the 2 datagrams dropped from %s: %s", who, m);
  for (int r = 0; r < WORLD; r++) assert_int_equal(c.fds_out[r], -1);
  assert_int_equal(harness_count_fds(), before);
  channels_close(&c);
}

static void a_member_that_misbehaves_still_fails_the_exchange(void **s) {
  (void)s;
  channels c;
  channels_open(&c);
  send_as(&c, 1, "from rank 1", 0);
  send_as(&c, 1, "from rank 1", 0); /* a duplicate, from a member's process */
  int rc = victim_exchange(&c, 3000);
  if (rc != MORI_EPROTO || !strstr(mori_last_error(), "duplicate"))
    fail_msg("want a duplicate's MORI_EPROTO, got %s: %s", mori_error_name(rc), mori_last_error());
  channels_close(&c);
}

/* The private directory keeps other users from sending at all. */
static int send_as_other(void *arg) {
  const channels *c = arg;
  uint8_t buf[MORI_WIRE_DATAGRAM_SIZE] = {0};
  int rc = harness_send_raw(mori_channel_name(c->ch[VICTIM]), buf, sizeof buf, NULL, 0);
  return rc == -EACCES ? 0 : 1;
}

static void another_user_cannot_reach_a_channel(void **s) {
  (void)s;
  SEC_NEED_ROOT("a process of another uid");
  channels c;
  channels_open(&c);
  assert_int_equal(chmod(c.sockets, 0755), 0); /* the base may be open: the channel is not */
  assert_int_equal(sec_run_as(SEC_OTHER_UID, send_as_other, &c), 0);
  channels_close(&c);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_request_naming_another_uid_gets_no_fd),
      cmocka_unit_test(a_request_with_our_uid_naming_another_user_s_socket_gets_no_fd),
      cmocka_unit_test(a_request_naming_a_socket_anyone_could_have_bound_gets_no_fd),
      cmocka_unit_test(a_socket_of_ours_read_by_another_user_s_process_gets_no_fd),
      cmocka_unit_test(a_socket_of_another_user_in_our_private_directory_gets_no_fd),
      cmocka_unit_test(a_request_naming_a_socket_behind_a_link_in_our_socket_base_gets_nothing),
      cmocka_unit_test(datagrams_from_non_members_are_dropped_and_the_exchange_completes),
      cmocka_unit_test(an_exchange_that_times_out_reports_the_non_members_it_dropped),
      cmocka_unit_test(a_member_that_misbehaves_still_fails_the_exchange),
      cmocka_unit_test(another_user_cannot_reach_a_channel),
  };
  return mori_run_tests(argc, argv, tests);
}
