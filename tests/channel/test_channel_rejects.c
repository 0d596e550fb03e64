/*
 * test_channel_rejects.c - what rank 0 of a three-rank world accepts on its
 * fd channel and what it must refuse.  All three channels live in this
 * process; datagrams are crafted by hand and queued before the exchange
 * starts, so each case is deterministic.  The datagrams come from this
 * process, a member's: after every refusal the exchange fails, names the
 * defect, and leaves no received fd open.  A process that is no member is
 * dropped instead (labels: sim).
 */
#include "harness.h"
#include "mori/channel.h"
#include "mori/error.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

enum { WORLD = 3, VICTIM = 0, SEQ = 7, TIMEOUT_MS = 5000 };

typedef struct reject_case reject_case;

typedef struct fixture {
  mori_channel *ch[WORLD];
  mori_request reqs[WORLD];
  int fds_out[WORLD];
  int victim_obj; /* what rank 0 sends */
  const reject_case *row;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  for (int r = 0; r < WORLD; r++) {
    assert_int_equal(mori_channel_open(SEQ, &f->ch[r]), 0);
    harness_request(&f->reqs[r], r, WORLD, mori_channel_name(f->ch[r]));
  }
  f->victim_obj = harness_marker_fd("from rank 0");
  assert_true(f->victim_obj >= 0);
  f->row = *state;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  for (int r = 0; r < WORLD; r++) mori_channel_close(f->ch[r]);
  close(f->victim_obj);
  free(f);
  return 0;
}

static mori_datagram valid_datagram(const fixture *f, int sender) {
  mori_datagram d = {SEQ, (uint32_t)sender, VICTIM, f->reqs[sender].nonce,
                     f->reqs[VICTIM].nonce, MORI_DATAGRAM_FD, 0};
  return d;
}

/* Sends buf to rank 0 with nfds fresh objects attached, each marked with
 * the rank the datagram claims; our copies are closed once they are in
 * flight, so only the receiver can hold them. */
static void send_to_victim(fixture *f, const void *buf, size_t len, int nfds, int claim) {
  int objs[16];
  char marker[32];
  snprintf(marker, sizeof marker, "from rank %d", claim);
  for (int i = 0; i < nfds; i++) assert_true((objs[i] = harness_marker_fd(marker)) >= 0);
  assert_int_equal(harness_send_raw(mori_channel_name(f->ch[VICTIM]), buf, len, objs, nfds), 0);
  for (int i = 0; i < nfds; i++) close(objs[i]);
}

static void send_valid(fixture *f, int sender) {
  uint8_t buf[MORI_WIRE_DATAGRAM_SIZE];
  mori_datagram d = valid_datagram(f, sender);
  assert_int_equal(mori_wire_encode_datagram(&d, buf, sizeof buf, NULL), MORI_WIRE_OK);
  send_to_victim(f, buf, sizeof buf, 1, sender);
}

/* Ranks 1 and 2 answer rank 0's challenges (their channels that are
 * still open), so that rank 0 may send them its fd. */
static int victim_exchange(fixture *f, int timeout_ms) {
  int sockets[WORLD];
  for (int r = 0; r < WORLD; r++) sockets[r] = f->ch[r] ? mori_channel_fd(f->ch[r]) : -1;
  harness_prover *p = harness_prover_start(sockets, f->reqs, WORLD, VICTIM, SEQ);
  int rc = mori_channel_exchange(f->ch[VICTIM], f->reqs, WORLD, VICTIM, SEQ, f->victim_obj,
                                 f->fds_out, timeout_ms);
  harness_prover_stop(p);
  return rc;
}

static void assert_failed_cleanly(const fixture *f, int rc, int want, int fds_before) {
  if (rc != want)
    fail_msg("exchange returned %s, want %s: %s", mori_error_name(rc), mori_error_name(want),
             mori_last_error());
  for (int r = 0; r < WORLD; r++) assert_int_equal(f->fds_out[r], -1);
  assert_int_equal(harness_count_fds(), fds_before);
}

/* ---- acceptance: the baseline every refusal below departs from ---- */

/* What rank 0 sent to a peer: one datagram naming sender 0 and that peer,
 * carrying rank 0's object. */
static void assert_peer_received_victim_fd(const fixture *f, int peer) {
  uint8_t buf[128];
  union {
    struct cmsghdr align;
    char bytes[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(4 * sizeof(int))];
  } control; /* the peer's socket has SO_PASSCRED: credentials come first */
  struct iovec iov = {buf, sizeof buf};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.bytes,
                       .msg_controllen = sizeof control.bytes};
  ssize_t n = recvmsg(mori_channel_fd(f->ch[peer]), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  assert_int_equal(n, MORI_WIRE_DATAGRAM_SIZE);
  mori_datagram d;
  assert_int_equal(mori_wire_decode_datagram(buf, (size_t)n, &d), MORI_WIRE_OK);
  assert_true(d.window_seq == SEQ && d.sender_rank == VICTIM && d.receiver_rank == (uint32_t)peer);
  assert_true(d.sender_nonce == f->reqs[VICTIM].nonce && d.receiver_nonce == f->reqs[peer].nonce);
  int fd = -1;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int)))
      memcpy(&fd, CMSG_DATA(c), sizeof fd);
  assert_true(fd >= 0);
  assert_true(harness_fd_has_marker(fd, "from rank 0"));
  close(fd);
}

static void exchange_accepts_well_formed_datagrams_in_any_order(void **state) {
  fixture *f = *state;
  send_valid(f, 2);
  send_valid(f, 1);
  int before = harness_count_fds();
  int rc = victim_exchange(f, TIMEOUT_MS);
  if (rc != 0) fail_msg("%s", mori_last_error());
  assert_int_equal(f->fds_out[VICTIM], -1);
  for (int r = 1; r < WORLD; r++) {
    char marker[32];
    snprintf(marker, sizeof marker, "from rank %d", r);
    assert_true(harness_fd_has_marker(f->fds_out[r], marker));
    assert_true(fcntl(f->fds_out[r], F_GETFD) & FD_CLOEXEC);
    close(f->fds_out[r]);
    assert_peer_received_victim_fd(f, r);
  }
  assert_int_equal(harness_count_fds(), before);
}

static void exchange_in_a_world_of_one_sends_and_receives_nothing(void **state) {
  fixture *f = *state;
  int fd = 5;
  assert_int_equal(mori_channel_exchange(f->ch[0], f->reqs, 1, 0, SEQ, f->victim_obj, &fd, 0), 0);
  assert_int_equal(fd, -1);
}

static void exchange_refuses_requests_naming_another_socket_as_its_own(void **state) {
  fixture *f = *state;
  snprintf(f->reqs[VICTIM].socket_name, sizeof f->reqs[VICTIM].socket_name, "%s",
           mori_channel_name(f->ch[1]));
  assert_int_equal(victim_exchange(f, TIMEOUT_MS), MORI_EINVAL);
}

/* ---- refusals, one row each: a valid datagram from rank 1, altered ---- */

struct reject_case {
  const char *name;
  int claim, to;          /* sender_rank and receiver_rank written */
  int seq_delta;
  uint64_t sender_nonce_xor, receiver_nonce_xor;
  size_t len;             /* bytes sent (0: the encoding as is; more: zero padded) */
  int corrupt_at;         /* byte flipped after encoding (-1: none) */
  int nfds, copies;
  int rc;
  const char *says;       /* part of mori_last_error() */
};

#define ROW(name_, ...)                                                                     \
  {.name = #name_, .claim = 1, .to = VICTIM, .corrupt_at = -1, .nfds = 1, .copies = 1,      \
   __VA_ARGS__}

/* Rows override ROW()'s defaults on purpose. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const reject_case reject_cases[] = {
    ROW(rejects_a_duplicate_datagram, .copies = 2, .rc = MORI_EPROTO, .says = "duplicate"),
    ROW(rejects_a_stale_window_sequence, .seq_delta = -1, .rc = MORI_EPROTO, .says = "stale"),
    ROW(rejects_a_datagram_of_a_later_window, .seq_delta = 1, .rc = MORI_EPROTO,
        .says = "window sequence"),
    ROW(rejects_a_wrong_receiver_nonce, .receiver_nonce_xor = 1, .rc = MORI_EAUTH,
        .says = "nonce"),
    ROW(rejects_a_wrong_sender_nonce, .sender_nonce_xor = 1u << 31, .rc = MORI_EAUTH,
        .says = "nonce"),
    ROW(rejects_a_datagram_addressed_to_another_rank, .to = 2, .rc = MORI_EPROTO,
        .says = "addressed"),
    ROW(rejects_a_datagram_claiming_the_receiver_s_own_rank, .claim = VICTIM,
        .rc = MORI_EPROTO, .says = "rank 0"),
    ROW(rejects_a_datagram_claiming_a_rank_outside_the_world, .claim = 5, .rc = MORI_EPROTO,
        .says = "rank 5"),
    ROW(rejects_a_truncated_datagram, .len = 40, .rc = MORI_EPROTO, .says = "truncated"),
    ROW(rejects_a_datagram_with_trailing_bytes, .len = MORI_WIRE_DATAGRAM_SIZE + 8,
        .rc = MORI_EPROTO, .says = "datagram of 56 bytes"),
    ROW(rejects_a_datagram_larger_than_the_receive_buffer, .len = 4096, .rc = MORI_EPROTO,
        .says = "oversized"),
    ROW(rejects_bytes_that_are_not_a_mori_datagram, .corrupt_at = 0, .rc = MORI_EPROTO,
        .says = "magic"),
    ROW(rejects_a_datagram_with_a_bad_crc, .corrupt_at = 20, .rc = MORI_EPROTO,
        .says = "CRC32C"),
    ROW(rejects_a_datagram_without_an_fd, .nfds = 0, .rc = MORI_EPROTO, .says = "0 fds"),
    ROW(rejects_a_datagram_with_two_fds, .nfds = 2, .rc = MORI_EPROTO, .says = "2 fds"),
    ROW(rejects_a_datagram_with_more_fds_than_fit, .nfds = 12, .rc = MORI_EPROTO,
        .says = "control data truncated"),
};
#pragma GCC diagnostic pop

static void exchange_refuses(void **state) {
  fixture *f = *state;
  const reject_case *c = f->row;
  uint8_t buf[4096] = {0};
  mori_datagram d = valid_datagram(f, 1);
  d.sender_rank = (uint32_t)c->claim;
  d.receiver_rank = (uint32_t)c->to;
  d.window_seq = (uint64_t)((int64_t)d.window_seq + c->seq_delta);
  d.sender_nonce ^= c->sender_nonce_xor;
  d.receiver_nonce ^= c->receiver_nonce_xor;
  assert_int_equal(mori_wire_encode_datagram(&d, buf, sizeof buf, NULL), MORI_WIRE_OK);
  if (c->corrupt_at >= 0) buf[c->corrupt_at] ^= 0x5a;
  for (int i = 0; i < c->copies; i++)
    send_to_victim(f, buf, c->len ? c->len : MORI_WIRE_DATAGRAM_SIZE, c->nfds, c->claim);
  int before = harness_count_fds();
  int rc = victim_exchange(f, TIMEOUT_MS);
  assert_failed_cleanly(f, rc, c->rc, before);
  const char *msg = mori_last_error();
  if (!strstr(msg, c->says) || !strstr(msg, "rejected datagram from pid"))
    fail_msg("message does not name the sender and '%s': %s", c->says, msg);
}

/* ---- a process outside the world, a silent peer, a vanished peer ---- */

/* A process outside the world is no member: its datagram is dropped (its
 * fd closed) and counted, and the exchange waits on for the real rank 1,
 * naming the drop when it times out. */
static void exchange_drops_a_datagram_from_a_process_outside_the_world(void **state) {
  fixture *f = *state;
  send_valid(f, 2); /* a genuine peer's fd, taken first, must be closed too */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    /* Everything right but the sender: it knows rank 1's nonces and path. */
    uint8_t buf[MORI_WIRE_DATAGRAM_SIZE];
    mori_datagram d = valid_datagram(f, 1);
    int obj = harness_marker_fd("forged");
    mori_wire_encode_datagram(&d, buf, sizeof buf, NULL);
    _exit(harness_send_raw(mori_channel_name(f->ch[VICTIM]), buf, sizeof buf, &obj, 1) ? 1 : 0);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  int before = harness_count_fds();
  assert_failed_cleanly(f, victim_exchange(f, 100), MORI_ETIMEDOUT, before);
  assert_int_equal(mori_channel_dropped(f->ch[VICTIM]), 1);
  char who[64];
  snprintf(who, sizeof who, "pid %ld (no rank of this world)", (long)pid);
  if (!strstr(mori_last_error(), who) || !strstr(mori_last_error(), "dropped 1"))
    fail_msg("does not report the drop from %s: %s", who, mori_last_error());
}

static void exchange_times_out_naming_the_rank_never_heard_from(void **state) {
  fixture *f = *state;
  send_valid(f, 1);
  int before = harness_count_fds();
  assert_failed_cleanly(f, victim_exchange(f, 100), MORI_ETIMEDOUT, before);
  if (!strstr(mori_last_error(), "not heard from rank(s) 2")) fail_msg("%s", mori_last_error());
  assert_null(strstr(mori_last_error(), "rank(s) 1"));
}

static void exchange_fails_naming_a_peer_whose_socket_is_gone(void **state) {
  fixture *f = *state;
  char path[128];
  snprintf(path, sizeof path, "%s", mori_channel_name(f->ch[2]));
  mori_channel_close(f->ch[2]);
  f->ch[2] = NULL;
  send_valid(f, 1);
  int before = harness_count_fds();
  assert_failed_cleanly(f, victim_exchange(f, TIMEOUT_MS), MORI_EIO, before);
  if (!strstr(mori_last_error(), "rank 2") || !strstr(mori_last_error(), path))
    fail_msg("does not name rank 2 at %s: %s", path, mori_last_error());
}

int main(void) {
  char *sockets = harness_tmpdir("sock");
  setenv("MORI_SYMM_SOCKET_DIR", sockets, 1);
  enum { NREJECT = sizeof reject_cases / sizeof reject_cases[0] };
  struct CMUnitTest tests[NREJECT + 6] = {
      cmocka_unit_test_setup_teardown(exchange_accepts_well_formed_datagrams_in_any_order,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(exchange_in_a_world_of_one_sends_and_receives_nothing,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(exchange_refuses_requests_naming_another_socket_as_its_own,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          exchange_drops_a_datagram_from_a_process_outside_the_world, setup, teardown),
      cmocka_unit_test_setup_teardown(exchange_times_out_naming_the_rank_never_heard_from,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(exchange_fails_naming_a_peer_whose_socket_is_gone, setup,
                                      teardown),
  };
  for (int i = 0; i < NREJECT; i++)
    tests[6 + i] = (struct CMUnitTest){reject_cases[i].name, exchange_refuses, setup, teardown,
                                       (void *)&reject_cases[i]};
  int failed = _cmocka_run_group_tests("channel_rejects", tests, NREJECT + 6, NULL, NULL);
  harness_remove_tree(sockets); /* this process's own private directory is inside */
  free(sockets);
  return failed;
}
