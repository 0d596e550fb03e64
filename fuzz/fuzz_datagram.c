/*
 * fuzz_datagram.c - fuzz target for the fd datagram decoder and
 * mori_validate_datagram against a fixed, valid world.  A model of the
 * documented checks decides, independently of protocol.c, whether each
 * decoded datagram must be accepted and, if not, which kind of error it is.
 *
 * Input: mode byte (bit 0: frame the payload as a datagram body with a
 * valid header and CRC; bits 1-2: of which type, fd, challenge or answer),
 * nfds byte (bits 0-1: nfds + 1; bits 2-4: the types NOT yet taken from a
 * rank the seen mask flags), pid byte, uid byte, seen-mask byte, then the
 * payload.  The pid and uid bytes pick a credential relative to the
 * claimed sender (0: its own), or a value no rank has (bit 7 set).  The
 * challenge sent to rank r's socket is fuzz_challenge(r).
 */
#include "fuzz.h"

#include <string.h>

#include "mori/error.h"
#include "mori/hip_shim.h"
#include "mori/protocol.h"

static mori_request world[MORI_FUZZ_WORLD];
static uint64_t challenges[MORI_FUZZ_WORLD];

static void build_world(void) {
  static int built;
  if (built) return;
  for (int r = 0; r < MORI_FUZZ_WORLD; r++)
    mori__fuzz_world_request(r, MORI_FUZZ_WORLD, hipMemHandleTypePosixFileDescriptor, &world[r]);
  for (int r = 0; r < MORI_FUZZ_WORLD; r++) challenges[r] = mori__fuzz_challenge(r);
  mori_world_info info;
  int rc = mori_validate_world(world, MORI_FUZZ_WORLD, MORI_FUZZ_SELF, &info);
  MORI_FUZZ_CHECK(rc == 0, "the harness's own world is rejected: %s", mori_last_error());
  built = 1;
}

/* A credential: the pid/uid of the rank `sel` places after the claimed
 * sender, or (bit 7) a value that belongs to no rank. */
static uint32_t pick(uint8_t sel, uint32_t sender, size_t field) {
  if (sel & 0x80) return 0x7fff0000u | sel;
  const mori_request *r = &world[(sender + sel) % MORI_FUZZ_WORLD];
  uint32_t v;
  memcpy(&v, (const char *)r + field, sizeof v);
  return v;
}

/* The checks mori_validate_datagram documents, split by the error class
 * each one must produce. */
static void expect(const mori_datagram *d, uint32_t pid, uint32_t uid, int nfds,
                   const uint8_t *seen, int *proto_bad, int *auth_bad) {
  uint32_t s = d->sender_rank;
  int in_range = s < MORI_FUZZ_WORLD && s != MORI_FUZZ_SELF;
  int want_fds = d->type == MORI_DATAGRAM_FD ? 1 : 0;
  *proto_bad = !in_range || nfds != want_fds || d->receiver_rank != MORI_FUZZ_SELF ||
               d->window_seq != MORI_FUZZ_WINDOW_SEQ || (in_range && (seen[s] >> d->type & 1));
  *auth_bad = in_range &&
              (pid != world[s].pid || uid != world[s].uid || d->sender_nonce != world[s].nonce ||
               d->receiver_nonce != world[MORI_FUZZ_SELF].nonce ||
               (d->type == MORI_DATAGRAM_ANSWER && d->challenge != challenges[s]));
}

static void check_validation(const mori_datagram *d, const uint8_t ctx[4]) {
  int nfds = (int)(ctx[0] % 4) - 1;
  uint32_t claimed = d->sender_rank < MORI_FUZZ_WORLD ? d->sender_rank : 0;
  uint32_t pid = pick(ctx[1], claimed, offsetof(mori_request, pid));
  uint32_t uid = pick(ctx[2], claimed, offsetof(mori_request, uid));
  uint8_t seen[MORI_FUZZ_WORLD];
  for (int r = 0; r < MORI_FUZZ_WORLD; r++)
    seen[r] = (ctx[3] >> r) & 1 ? (uint8_t)(~(ctx[0] >> 2) & 7) : 0;

  mori_datagram_expect x = {MORI_FUZZ_WINDOW_SEQ, MORI_FUZZ_SELF, MORI_FUZZ_WORLD, world, seen,
                            challenges};
  mori_clear_error();
  int rc = mori_validate_datagram(d, (pid_t)pid, (uid_t)uid, nfds, &x);

  int proto_bad, auth_bad;
  expect(d, pid, uid, nfds, seen, &proto_bad, &auth_bad);
  if (!proto_bad && !auth_bad) {
    MORI_FUZZ_CHECK(rc == 0, "valid datagram from rank %u rejected (%d): %s", d->sender_rank, rc,
                    mori_last_error());
    return;
  }
  MORI_FUZZ_CHECK(
      rc != 0, "datagram accepted: type %u sender %u receiver %u seq %llu nfds %d pid %u uid %u",
      d->type, d->sender_rank, d->receiver_rank, (unsigned long long)d->window_seq, nfds, pid,
      uid);
  MORI_FUZZ_CHECK(rc == MORI_EPROTO || rc == MORI_EAUTH, "datagram rejected with %d", rc);
  MORI_FUZZ_CHECK(mori_last_error()[0] != '\0', "datagram rejected with no message");
  MORI_FUZZ_CHECK(proto_bad || rc == MORI_EAUTH,
                  "only credentials or nonces are wrong, but the error is %d: %s", rc,
                  mori_last_error());
  MORI_FUZZ_CHECK(auth_bad || rc == MORI_EPROTO,
                  "credentials and nonces are right, but the error is %d: %s", rc,
                  mori_last_error());
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static uint8_t framed[MORI_FUZZ_MSG_MAX];
  enum { CTX = 4 };
  if (size < 1 + CTX) return 0;
  build_world();
  const uint8_t *ctx = data + 1;
  const uint8_t *msg = data + 1 + CTX;
  size_t len = size - 1 - CTX;
  if (data[0] & 1) {
    len = mori__fuzz_frame(mori__fuzz_datagram_kind(data[0]), msg, len, framed, sizeof framed);
    if (len == 0) return 0;
    msg = framed;
  }

  mori_datagram d;
  int rc = mori_wire_decode_datagram(msg, len, &d);
  MORI_FUZZ_CHECK(mori__fuzz_is_decode_result(rc), "datagram decoder returned %d", rc);
  if (rc != MORI_WIRE_OK) return 0;
  mori__fuzz_check_datagram(&d, msg, len);
  check_validation(&d, ctx);
  return 0;
}
