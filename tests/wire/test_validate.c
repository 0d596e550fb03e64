/*
 * test_validate.c - specification of the rendezvous checks: a gathered
 * world of requests is accepted only when the ranks agree and can reach
 * each other, and an fd datagram only when it comes from the process its
 * request names, for this window, once.  Every rejection names the ranks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mori/error.h"
#include "mori/protocol.h"
#include "mori/hip_shim.h"
#include "mori/symm.h"

#define FD_TYPE hipMemHandleTypePosixFileDescriptor
#define FABRIC_TYPE hipMemHandleTypeFabric
#define WORLD 4

static mori_request reqs[MORI_WIRE_MAX_WORLD];

/* One host, one device per rank, fd handles, distinct pids and nonces. */
static void make_world(int world, uint32_t handle_type) {
  memset(reqs, 0, sizeof reqs);
  for (int i = 0; i < world; i++) {
    mori_request *r = &reqs[i];
    r->rank = (uint32_t)i;
    r->world_size = (uint32_t)world;
    r->alloc_size = 2097152;
    r->buffer_size = 65536;
    r->signal_pad_offset = 65536;
    r->signal_pad_size = 9216;
    r->device = i % 8;
    r->pid = 5000 + (uint32_t)i;
    r->uid = 1001;
    memset(r->host_id, 0x42, MORI_WIRE_HOST_ID_SIZE);
    r->host_id[0] = (uint8_t)(i / 8); /* eight devices a host */
    r->host_id[1] = (uint8_t)(i / 8 >> 8);
    r->handle_type = handle_type;
    r->nonce = 0xabc0000000000000ull + (uint64_t)i * 7919;
    if (handle_type == FD_TYPE) snprintf(r->socket_name, sizeof r->socket_name, "/run/s.%d", i);
  }
}

static void assert_error_mentions(const char *a, const char *b) {
  const char *msg = mori_last_error();
  if (!strstr(msg, a) || (b && !strstr(msg, b)))
    fail_msg("message \"%s\" does not mention \"%s\" and \"%s\"", msg, a, b ? b : "");
}

/* ---- the world ---- */

static void validate_world_accepts_one_host_with_fd_handles(void **state) {
  mori_world_info info;
  make_world(WORLD, FD_TYPE);
  assert_int_equal(mori_validate_world(reqs, WORLD, 1, &info), 0);
  assert_int_equal(info.handle_type, FD_TYPE);
  assert_true(info.same_host);
  assert_true(info.world_within_direct_access);
  assert_int_equal(info.alloc_size, 2097152);
}

static void validate_world_accepts_a_single_rank(void **state) {
  mori_world_info info;
  make_world(1, FD_TYPE);
  assert_int_equal(mori_validate_world(reqs, 1, 0, &info), 0);
  assert_true(info.same_host);
}

static void validate_world_accepts_fabric_across_hosts_reusing_device_numbers(void **state) {
  mori_world_info info;
  make_world(16, FABRIC_TYPE); /* two hosts, devices 0..7 on each */
  assert_int_equal(mori_validate_world(reqs, 16, 9, &info), 0);
  assert_int_equal(info.handle_type, FABRIC_TYPE);
  assert_false(info.same_host);
  assert_true(info.world_within_direct_access);
}

static void validate_world_reports_same_host_for_fabric_on_one_host(void **state) {
  mori_world_info info;
  make_world(8, FABRIC_TYPE);
  assert_int_equal(mori_validate_world(reqs, 8, 0, &info), 0);
  assert_true(info.same_host);
  assert_true(info.world_within_direct_access);
}

static void validate_world_names_rank_and_values_of_an_alloc_size_mismatch(void **state) {
  mori_world_info info;
  make_world(WORLD, FD_TYPE);
  reqs[3].alloc_size = 4194304;
  assert_int_equal(mori_validate_world(reqs, WORLD, 0, &info), MORI_EMISMATCH);
  assert_string_equal(mori_last_error(),
                      "rendezvous: rank 3 alloc_size 4194304 differs from rank 0's 2097152");
}

/* Peers are us on the fabric path too, where no socket's owner is checked:
 * the requests are the only place another uid can show. */
static void validate_world_refuses_a_fabric_peer_of_another_uid(void **state) {
  mori_world_info info;
  make_world(WORLD, FABRIC_TYPE);
  reqs[2].uid = 1002;
  assert_int_not_equal(mori_validate_world(reqs, WORLD, 0, &info), 0);
  assert_error_mentions("rank 2's request says uid 1002", "same user");
}

static void validate_world_rejects_each_size_disagreement(void **state) {
  static const struct {
    const char *field;
    size_t offset;
  } fields[] = {
      {"alloc_size", offsetof(mori_request, alloc_size)},
      {"buffer_size", offsetof(mori_request, buffer_size)},
      {"signal_pad_offset", offsetof(mori_request, signal_pad_offset)},
      {"signal_pad_size", offsetof(mori_request, signal_pad_size)},
  };
  mori_world_info info;
  for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
    make_world(WORLD, FD_TYPE);
    uint64_t v = 12345;
    memcpy((char *)&reqs[2] + fields[f].offset, &v, sizeof v);
    assert_int_equal(mori_validate_world(reqs, WORLD, 0, &info), MORI_EMISMATCH);
    assert_error_mentions("rank 2 ", fields[f].field);
    assert_error_mentions("12345", "rank 0's");
  }
}

static void validate_world_rejects_mixed_handle_types(void **state) {
  mori_world_info info;
  make_world(WORLD, FD_TYPE);
  reqs[1].handle_type = FABRIC_TYPE;
  assert_int_equal(mori_validate_world(reqs, WORLD, 0, &info), MORI_EMISMATCH);
  assert_string_equal(mori_last_error(),
                      "rendezvous: rank 1 handle type fabric differs from rank 0's posix_fd");
}

static void validate_world_rejects_an_unknown_handle_type(void **state) {
  mori_world_info info;
  make_world(WORLD, 2);
  assert_int_equal(mori_validate_world(reqs, WORLD, 0, &info), MORI_EPROTO);
  assert_error_mentions("handle type 2", NULL);
}

static void validate_world_rejects_fd_handles_across_hosts(void **state) {
  mori_world_info info;
  make_world(WORLD, FD_TYPE);
  reqs[2].host_id[5] ^= 1;
  reqs[3].host_id[5] ^= 1;
  assert_int_equal(mori_validate_world(reqs, WORLD, 0, &info), MORI_EMISMATCH);
  assert_string_equal(mori_last_error(),
                      "group spans hosts (rank 2 on another host than rank 0) but handle type is "
                      "posix_fd: needs fabric handles");
}

static void validate_world_rejects_fd_handles_across_hosts_naming_the_peer_self_cannot_reach(
    void **state) {
  mori_world_info info;
  make_world(WORLD, FD_TYPE);
  reqs[3].host_id[5] ^= 1; /* rank 3 alone on a second host */
  assert_int_equal(mori_validate_world(reqs, WORLD, 3, &info), MORI_EMISMATCH);
  assert_string_equal(mori_last_error(),
                      "group spans hosts (rank 0 on another host than rank 3) but handle type is "
                      "posix_fd: needs fabric handles");
}

/* torch's meaning of world_within_direct_access(): every peer's memory is
 * mapped for load/store on this rank's device.  From every rank's point of
 * view, over host layouts and handle types: a world either is within
 * direct access and is accepted saying so, or is refused. */
static void validate_world_direct_access_is_every_peer_reachable_from_each_rank(void **state) {
  static const struct {
    const char *layout;
    uint32_t handle_type;
    int hosts; /* ranks spread round-robin over this many hosts */
    int accepted, same_host;
  } cases[] = {
      {"fd, one host", FD_TYPE, 1, 1, 1},
      {"fd, two hosts", FD_TYPE, 2, 0, 0},
      {"fabric, one host", FABRIC_TYPE, 1, 1, 1},
      {"fabric, two hosts", FABRIC_TYPE, 2, 1, 0},
      {"fabric, four hosts", FABRIC_TYPE, 4, 1, 0},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int self = 0; self < WORLD; self++) {
      mori_world_info info;
      make_world(WORLD, cases[c].handle_type);
      for (int r = 0; r < WORLD; r++) reqs[r].host_id[7] = (uint8_t)(r % cases[c].hosts);
      memset(&info, 0xa5, sizeof info);
      int rc = mori_validate_world(reqs, WORLD, self, &info);
      if (!cases[c].accepted) {
        if (rc != MORI_EMISMATCH) fail_msg("%s, self %d: rc %d", cases[c].layout, self, rc);
        assert_error_mentions("another host than rank", "needs fabric handles");
        continue;
      }
      if (rc != 0) fail_msg("%s, self %d: %s", cases[c].layout, self, mori_last_error());
      if (info.world_within_direct_access != 1 || info.same_host != cases[c].same_host)
        fail_msg("%s, self %d: direct access %d, same host %d", cases[c].layout, self,
                 info.world_within_direct_access, info.same_host);
    }
}

static void validate_world_rejects_two_ranks_on_one_device(void **state) {
  mori_world_info info;
  make_world(WORLD, FD_TYPE);
  reqs[3].device = reqs[1].device;
  assert_int_equal(mori_validate_world(reqs, WORLD, 0, &info), MORI_EMISMATCH);
  assert_string_equal(mori_last_error(),
                      "rendezvous: ranks 1 and 3 both use device 1 on one host "
                      "(MORI_SYMM_ALLOW_OVERLAPPING_DEVICES=1 allows it, as "
                      "TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES=1 does under torch)");
}

/* torch's test_allow_overlapping_devices: every rank on device 0, each with
 * its own allocation.  Allowed by the API, or by the environment when the
 * API leaves it open; only "1" allows, as torch's check_env reads it. */
static void validate_world_accepts_ranks_sharing_a_device_when_overlapping_is_allowed(
    void **state) {
  mori_world_info info;
  make_world(WORLD, FD_TYPE);
  for (int r = 0; r < WORLD; r++) reqs[r].device = 0;
  mori_symm_set_allow_overlapping_devices(1);
  assert_int_equal(mori_validate_world(reqs, WORLD, 2, &info), 0);
  assert_true(info.world_within_direct_access);
  mori_symm_set_allow_overlapping_devices(-1);
  setenv("MORI_SYMM_ALLOW_OVERLAPPING_DEVICES", "1", 1);
  assert_int_equal(mori_validate_world(reqs, WORLD, 2, &info), 0);
  setenv("MORI_SYMM_ALLOW_OVERLAPPING_DEVICES", "true", 1);
  assert_int_equal(mori_validate_world(reqs, WORLD, 2, &info), MORI_EMISMATCH);
  setenv("MORI_SYMM_ALLOW_OVERLAPPING_DEVICES", "1", 1);
  mori_symm_set_allow_overlapping_devices(0); /* the API wins over the environment */
  assert_int_equal(mori_validate_world(reqs, WORLD, 2, &info), MORI_EMISMATCH);
  assert_error_mentions("both use device 0", "OVERLAPPING_DEVICES=1");
  mori_symm_set_allow_overlapping_devices(-1);
  unsetenv("MORI_SYMM_ALLOW_OVERLAPPING_DEVICES");
  /* Overlapping devices do not excuse a repeated nonce. */
  mori_symm_set_allow_overlapping_devices(1);
  reqs[1].nonce = reqs[3].nonce;
  assert_int_equal(mori_validate_world(reqs, WORLD, 0, &info), MORI_EPROTO);
  mori_symm_set_allow_overlapping_devices(-1);
}

static void validate_world_finds_a_shared_device_far_apart_in_a_large_world(void **state) {
  mori_world_info info;
  make_world(MORI_WIRE_MAX_WORLD, FABRIC_TYPE);
  assert_int_equal(mori_validate_world(reqs, MORI_WIRE_MAX_WORLD, 7, &info), 0);
  memcpy(reqs[4095].host_id, reqs[0].host_id, MORI_WIRE_HOST_ID_SIZE);
  reqs[4095].device = 0;
  assert_int_equal(mori_validate_world(reqs, MORI_WIRE_MAX_WORLD, 7, &info), MORI_EMISMATCH);
  assert_error_mentions("ranks 0 and 4095", "device 0");
}

static void validate_world_rejects_a_repeated_nonce(void **state) {
  mori_world_info info;
  make_world(WORLD, FD_TYPE);
  reqs[2].nonce = reqs[0].nonce;
  assert_int_equal(mori_validate_world(reqs, WORLD, 1, &info), MORI_EPROTO);
  assert_error_mentions("ranks 0 and 2", "nonce");
}

static void validate_world_rejects_a_request_under_another_ranks_key(void **state) {
  mori_world_info info;
  make_world(WORLD, FD_TYPE);
  reqs[2].rank = 1;
  assert_int_equal(mori_validate_world(reqs, WORLD, 0, &info), MORI_EPROTO);
  assert_string_equal(mori_last_error(),
                      "rendezvous: the request gathered for rank 2 claims rank 1");
}

static void validate_world_rejects_a_rank_with_another_world_size(void **state) {
  mori_world_info info;
  make_world(WORLD, FD_TYPE);
  reqs[3].world_size = WORLD + 1;
  assert_int_equal(mori_validate_world(reqs, WORLD, 0, &info), MORI_EMISMATCH);
  assert_error_mentions("rank 3 world_size 5", "group's 4");
}

static void validate_world_rejects_bad_arguments(void **state) {
  mori_world_info info;
  make_world(WORLD, FD_TYPE);
  assert_int_equal(mori_validate_world(reqs, WORLD, WORLD, &info), MORI_EINVAL);
  assert_int_equal(mori_validate_world(reqs, WORLD, -1, &info), MORI_EINVAL);
  assert_int_equal(mori_validate_world(reqs, 0, 0, &info), MORI_EINVAL);
  assert_int_equal(mori_validate_world(reqs, MORI_WIRE_MAX_WORLD + 1, 0, &info), MORI_EINVAL);
  assert_int_equal(mori_validate_world(NULL, WORLD, 0, &info), MORI_EINVAL);
  assert_int_equal(mori_validate_world(reqs, WORLD, 0, NULL), MORI_EINVAL);
}

/* ---- fd datagrams: this is rank 1 of 4, window 7 ---- */

#define SELF 1
#define SEQ 7

static uint8_t seen[WORLD];
/* What this rank challenged each peer's socket with. */
static const uint64_t challenges[WORLD] = {0xc0, 0xc1, 0xc2, 0xc3};

static mori_datagram_expect expect(void) {
  mori_datagram_expect x = {SEQ, SELF, WORLD, reqs, seen, challenges};
  return x;
}

static mori_datagram from(uint32_t sender) {
  mori_datagram d = {SEQ, sender, SELF, reqs[sender].nonce, reqs[SELF].nonce, MORI_DATAGRAM_FD, 0};
  return d;
}

static int setup_datagrams(void **state) {
  make_world(WORLD, FD_TYPE);
  memset(seen, 0, sizeof seen);
  return 0;
}

static int check(const mori_datagram *d, int nfds) {
  mori_datagram_expect x = expect();
  uint32_t s = d->sender_rank < WORLD ? d->sender_rank : 0;
  return mori_validate_datagram(d, (pid_t)reqs[s].pid, (uid_t)reqs[s].uid, nfds, &x);
}

static void validate_datagram_accepts_each_peer_once(void **state) {
  for (uint32_t s = 0; s < WORLD; s++) {
    if (s == SELF) continue;
    mori_datagram d = from(s);
    assert_int_equal(check(&d, 1), 0);
    seen[s] = 1;
    assert_int_equal(check(&d, 1), MORI_EPROTO);
    assert_error_mentions("duplicate", "rank");
  }
}

static void validate_datagram_rejects_a_foreign_pid(void **state) {
  mori_datagram d = from(2);
  mori_datagram_expect x = expect();
  reqs[2].pid = 999;
  assert_int_equal(mori_validate_datagram(&d, 1234, reqs[2].uid, 1, &x), MORI_EAUTH);
  assert_string_equal(mori_last_error(),
                      "fd datagram claims rank 2 but comes from pid 1234 (rank 2 is pid 999)");
}

static void validate_datagram_rejects_a_foreign_uid(void **state) {
  mori_datagram d = from(3);
  mori_datagram_expect x = expect();
  assert_int_equal(mori_validate_datagram(&d, reqs[3].pid, 0, 1, &x), MORI_EAUTH);
  assert_string_equal(mori_last_error(),
                      "fd datagram claims rank 3 but comes from uid 0 (rank 3 is uid 1001)");
}

static void validate_datagram_rejects_a_stale_window(void **state) {
  mori_datagram d = from(2);
  d.window_seq = SEQ - 1;
  assert_int_equal(check(&d, 1), MORI_EPROTO);
  assert_error_mentions("stale fd datagram from rank 2", "window sequence 6, expected 7");
  /* From the real sender but the last window's nonces too: still stale,
   * not a forgery. */
  d.sender_nonce ^= 1;
  d.receiver_nonce ^= 1;
  assert_int_equal(check(&d, 1), MORI_EPROTO);
  assert_error_mentions("stale", "rank 2");
}

static void validate_datagram_rejects_a_wrong_sender_nonce(void **state) {
  mori_datagram d = from(0);
  d.sender_nonce++;
  assert_int_equal(check(&d, 1), MORI_EAUTH);
  assert_error_mentions("claims rank 0", "sender nonce");
}

static void validate_datagram_rejects_a_wrong_receiver_nonce(void **state) {
  mori_datagram d = from(3);
  d.receiver_nonce = reqs[2].nonce; /* meant for another rank */
  assert_int_equal(check(&d, 1), MORI_EAUTH);
  assert_error_mentions("from rank 3", "receiver nonce");
}

static void validate_datagram_reports_a_forged_duplicate_as_forged(void **state) {
  mori_datagram d = from(2);
  mori_datagram_expect x = expect();
  seen[2] = 1;
  assert_int_equal(mori_validate_datagram(&d, 31337, reqs[2].uid, 1, &x), MORI_EAUTH);
  assert_int_equal(check(&d, 1), MORI_EPROTO);
  assert_error_mentions("duplicate fd datagram from rank 2", NULL);
}

static void validate_datagram_rejects_this_rank_as_sender(void **state) {
  mori_datagram d = from(SELF);
  assert_int_equal(check(&d, 1), MORI_EPROTO);
  assert_string_equal(mori_last_error(), "fd datagram claims rank 1, which is this rank");
}

static void validate_datagram_rejects_a_sender_outside_the_world(void **state) {
  mori_datagram d = from(0);
  d.sender_rank = WORLD;
  assert_int_equal(check(&d, 1), MORI_EPROTO);
  assert_string_equal(mori_last_error(), "fd datagram claims rank 4, outside the world of 4");
  d.sender_rank = UINT32_MAX;
  assert_int_equal(check(&d, 1), MORI_EPROTO);
  assert_error_mentions("claims rank 4294967295", "outside");
}

static void validate_datagram_rejects_one_addressed_to_another_rank(void **state) {
  mori_datagram d = from(2);
  d.receiver_rank = 3;
  assert_int_equal(check(&d, 1), MORI_EPROTO);
  assert_string_equal(mori_last_error(),
                      "fd datagram from rank 2 is addressed to rank 3, not rank 1");
}

static void validate_datagram_needs_exactly_one_fd(void **state) {
  mori_datagram d = from(2);
  assert_int_equal(check(&d, 0), MORI_EPROTO);
  assert_string_equal(mori_last_error(), "fd datagram from rank 2 carries 0 fds, expected 1");
  assert_int_equal(check(&d, 2), MORI_EPROTO);
  assert_error_mentions("rank 2 carries 2 fds", NULL);
}

/* ---- the proof: challenges and answers ---- */

static mori_datagram proof(uint32_t sender, uint32_t type, uint64_t secret) {
  mori_datagram d = from(sender);
  d.type = type;
  d.challenge = secret;
  return d;
}

static void validate_answer_echoing_the_challenge_sent_to_its_socket(void **state) {
  mori_datagram d = proof(2, MORI_DATAGRAM_ANSWER, challenges[2]);
  assert_int_equal(check(&d, 0), 0);
  d.challenge = challenges[3]; /* the secret sent to another rank's socket */
  assert_int_equal(check(&d, 0), MORI_EAUTH);
  assert_string_equal(mori_last_error(),
                      "answer from rank 2 echoes 0xc3, not the challenge sent to its socket");
}

/* The pid is the proof: an answer with the right secret from a process
 * that is not rank 2's proves nothing about rank 2's socket. */
static void validate_answer_from_another_process_is_refused(void **state) {
  mori_datagram d = proof(2, MORI_DATAGRAM_ANSWER, challenges[2]);
  mori_datagram_expect x = expect();
  assert_int_equal(mori_validate_datagram(&d, 31337, reqs[2].uid, 0, &x), MORI_EAUTH);
  assert_error_mentions("answer claims rank 2 but comes from pid 31337", NULL);
  assert_int_equal(mori_validate_datagram(&d, reqs[2].pid, 4242, 0, &x), MORI_EAUTH);
  assert_error_mentions("answer claims rank 2 but comes from uid 4242", NULL);
}

static void validate_answer_when_no_challenge_was_sent_is_refused(void **state) {
  mori_datagram d = proof(2, MORI_DATAGRAM_ANSWER, 0);
  mori_datagram_expect x = expect();
  x.challenges = NULL;
  assert_int_equal(mori_validate_datagram(&d, reqs[2].pid, reqs[2].uid, 0, &x), MORI_EAUTH);
  assert_error_mentions("answer from rank 2", "no challenge");
}

static void validate_challenges_and_answers_carry_no_fd(void **state) {
  mori_datagram d = proof(3, MORI_DATAGRAM_CHALLENGE, 77);
  assert_int_equal(check(&d, 0), 0);
  assert_int_equal(check(&d, 1), MORI_EPROTO);
  assert_string_equal(mori_last_error(), "challenge from rank 3 carries 1 fds, expected 0");
  d = proof(3, MORI_DATAGRAM_ANSWER, challenges[3]);
  assert_int_equal(check(&d, 1), MORI_EPROTO);
  assert_error_mentions("answer from rank 3 carries 1 fds", NULL);
}

/* Each type once per rank: an fd taken does not make an answer a
 * duplicate, an answer taken does. */
static void validate_duplicates_are_per_type(void **state) {
  mori_datagram d = proof(0, MORI_DATAGRAM_ANSWER, challenges[0]);
  seen[0] = 1u << MORI_DATAGRAM_FD | 1u << MORI_DATAGRAM_CHALLENGE;
  assert_int_equal(check(&d, 0), 0);
  seen[0] |= 1u << MORI_DATAGRAM_ANSWER;
  assert_int_equal(check(&d, 0), MORI_EPROTO);
  assert_string_equal(mori_last_error(), "duplicate answer from rank 0");
  d = proof(0, MORI_DATAGRAM_CHALLENGE, 5);
  assert_int_equal(check(&d, 0), MORI_EPROTO);
  assert_string_equal(mori_last_error(), "duplicate challenge from rank 0");
}

static void validate_datagram_rejects_bad_expectations(void **state) {
  mori_datagram d = from(2);
  mori_datagram_expect x = expect();
  x.self_rank = WORLD;
  assert_int_equal(mori_validate_datagram(&d, 1, 1, 1, &x), MORI_EINVAL);
  x = expect();
  x.seen = NULL;
  assert_int_equal(mori_validate_datagram(&d, 1, 1, 1, &x), MORI_EINVAL);
  assert_int_equal(mori_validate_datagram(&d, 1, 1, 1, NULL), MORI_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(validate_world_accepts_one_host_with_fd_handles),
      cmocka_unit_test(validate_world_accepts_a_single_rank),
      cmocka_unit_test(validate_world_accepts_fabric_across_hosts_reusing_device_numbers),
      cmocka_unit_test(validate_world_reports_same_host_for_fabric_on_one_host),
      cmocka_unit_test(validate_world_names_rank_and_values_of_an_alloc_size_mismatch),
      cmocka_unit_test(validate_world_refuses_a_fabric_peer_of_another_uid),
      cmocka_unit_test(validate_world_rejects_each_size_disagreement),
      cmocka_unit_test(validate_world_rejects_mixed_handle_types),
      cmocka_unit_test(validate_world_rejects_an_unknown_handle_type),
      cmocka_unit_test(validate_world_rejects_fd_handles_across_hosts),
      cmocka_unit_test(validate_world_rejects_fd_handles_across_hosts_naming_the_peer_self_cannot_reach),
      cmocka_unit_test(validate_world_direct_access_is_every_peer_reachable_from_each_rank),
      cmocka_unit_test(validate_world_rejects_two_ranks_on_one_device),
      cmocka_unit_test(validate_world_accepts_ranks_sharing_a_device_when_overlapping_is_allowed),
      cmocka_unit_test(validate_world_finds_a_shared_device_far_apart_in_a_large_world),
      cmocka_unit_test(validate_world_rejects_a_repeated_nonce),
      cmocka_unit_test(validate_world_rejects_a_request_under_another_ranks_key),
      cmocka_unit_test(validate_world_rejects_a_rank_with_another_world_size),
      cmocka_unit_test(validate_world_rejects_bad_arguments),
      cmocka_unit_test_setup(validate_datagram_accepts_each_peer_once, setup_datagrams),
      cmocka_unit_test_setup(validate_datagram_rejects_a_foreign_pid, setup_datagrams),
      cmocka_unit_test_setup(validate_datagram_rejects_a_foreign_uid, setup_datagrams),
      cmocka_unit_test_setup(validate_datagram_rejects_a_stale_window, setup_datagrams),
      cmocka_unit_test_setup(validate_datagram_rejects_a_wrong_sender_nonce, setup_datagrams),
      cmocka_unit_test_setup(validate_datagram_rejects_a_wrong_receiver_nonce, setup_datagrams),
      cmocka_unit_test_setup(validate_datagram_reports_a_forged_duplicate_as_forged,
                             setup_datagrams),
      cmocka_unit_test_setup(validate_datagram_rejects_this_rank_as_sender, setup_datagrams),
      cmocka_unit_test_setup(validate_datagram_rejects_a_sender_outside_the_world, setup_datagrams),
      cmocka_unit_test_setup(validate_datagram_rejects_one_addressed_to_another_rank,
                             setup_datagrams),
      cmocka_unit_test_setup(validate_datagram_needs_exactly_one_fd, setup_datagrams),
      cmocka_unit_test_setup(validate_answer_echoing_the_challenge_sent_to_its_socket,
                             setup_datagrams),
      cmocka_unit_test_setup(validate_answer_from_another_process_is_refused, setup_datagrams),
      cmocka_unit_test_setup(validate_answer_when_no_challenge_was_sent_is_refused,
                             setup_datagrams),
      cmocka_unit_test_setup(validate_challenges_and_answers_carry_no_fd, setup_datagrams),
      cmocka_unit_test_setup(validate_duplicates_are_per_type, setup_datagrams),
      cmocka_unit_test_setup(validate_datagram_rejects_bad_expectations, setup_datagrams),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
