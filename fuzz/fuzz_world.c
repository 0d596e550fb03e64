/*
 * fuzz_world.c - fuzz target for mori_validate_world over requests that
 * came through the decoder.  A model of the checks protocol.h documents
 * decides, independently of protocol.c, whether the world must be accepted,
 * and what the world info must say when it is.
 *
 * Input: mode byte, self byte, then chunks of u16 little-endian length and
 * that many bytes, one request each.  Mode bit 0: each chunk is a request
 * body, framed here with a valid header and CRC.  Bit 1 (framed only):
 * rank and world_size are overwritten with the chunk's index and the chunk
 * count, so that mutations reach the agreement and distinctness checks.
 */
#include "fuzz.h"

#include <string.h>

#include "mori/error.h"
#include "mori/hip_shim.h"
#include "mori/protocol.h"

#define MAX_RANKS 64

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Splits the input into chunks; returns how many (at most MAX_RANKS). */
static int split(mori__fuzz_reader *in, const uint8_t *chunk[], size_t chunk_len[]) {
  int n = 0;
  while (n < MAX_RANKS && mori__fuzz_left(in) >= 2) {
    size_t want = mori__fuzz_u16(in), left = mori__fuzz_left(in);
    chunk_len[n] = want < left ? want : left;
    chunk[n++] = in->p;
    in->p += chunk_len[n - 1];
  }
  return n;
}

/* Decodes chunk i into r; returns the decoder's result. */
static int decode_chunk(uint8_t mode, int i, int n, const uint8_t *chunk, size_t len,
                        mori_request *r) {
  static uint8_t body[MORI_FUZZ_MSG_MAX], framed[MORI_FUZZ_MSG_MAX];
  const uint8_t *msg = chunk;
  if (mode & 1) {
    if (len > sizeof body) return MORI_WIRE_ELENGTH;
    memcpy(body, chunk, len);
    if ((mode & 2) && len >= 8) {
      put_u32(body, (uint32_t)i);
      put_u32(body + 4, (uint32_t)n);
    }
    len = mori__fuzz_frame(MORI_WIRE_KIND_REQUEST, body, len, framed, sizeof framed);
    if (len == 0) return MORI_WIRE_ELENGTH;
    msg = framed;
  }
  int rc = mori_wire_decode_request(msg, len, r);
  MORI_FUZZ_CHECK(mori__fuzz_is_decode_result(rc), "request decoder returned %d", rc);
  if (rc == MORI_WIRE_OK) mori__fuzz_check_request(r, msg, len);
  return rc;
}

static int same_host(const mori_request *a, const mori_request *b) {
  return memcmp(a->host_id, b->host_id, MORI_WIRE_HOST_ID_SIZE) == 0;
}

/* The documented checks, pair by pair (worlds here are small).  Returns 1
 * if the world is valid; *all_one_host says whether every host id equals
 * rank 0's. */
static int model_accepts(const mori_request *q, int n, int self, int *all_one_host) {
  int ok = 1;
  *all_one_host = 1;
  for (int i = 0; i < n; i++) {
    ok &= q[i].rank == (uint32_t)i && q[i].world_size == (uint32_t)n;
    ok &= q[i].uid == q[self].uid; /* peers are the same user */
    ok &= q[i].alloc_size == q[0].alloc_size && q[i].buffer_size == q[0].buffer_size &&
          q[i].signal_pad_offset == q[0].signal_pad_offset &&
          q[i].signal_pad_size == q[0].signal_pad_size && q[i].handle_type == q[0].handle_type;
    *all_one_host &= same_host(&q[i], &q[0]);
    for (int j = i + 1; j < n; j++) {
      ok &= !(same_host(&q[i], &q[j]) && q[i].device == q[j].device);
      ok &= q[i].nonce != q[j].nonce;
    }
  }
  if (!*all_one_host && q[0].handle_type == hipMemHandleTypePosixFileDescriptor) ok = 0;
  return ok;
}

static void check_world(const mori_request *q, int n, int self) {
  mori_world_info info;
  memset(&info, 0xa5, sizeof info);
  mori_clear_error();
  int rc = mori_validate_world(q, n, self, &info);
  int one_host, want = model_accepts(q, n, self, &one_host);
  if (!want) {
    MORI_FUZZ_CHECK(rc != 0, "world of %d ranks accepted, but it breaks a documented check", n);
    MORI_FUZZ_CHECK(rc == MORI_EMISMATCH || rc == MORI_EPROTO || rc == MORI_EAUTH,
                    "world rejected with %d", rc);
    MORI_FUZZ_CHECK(mori_last_error()[0] != '\0', "world rejected with no message");
    return;
  }
  MORI_FUZZ_CHECK(rc == 0, "valid world of %d ranks rejected (%d): %s", n, rc, mori_last_error());
  int fabric = q[0].handle_type == hipMemHandleTypeFabric;
  MORI_FUZZ_CHECK(info.handle_type == q[0].handle_type, "world info: handle type %u, not %u",
                  info.handle_type, q[0].handle_type);
  MORI_FUZZ_CHECK(info.same_host == one_host, "world info: same_host %d, not %d", info.same_host,
                  one_host);
  MORI_FUZZ_CHECK(info.alloc_size == q[0].alloc_size, "world info: alloc_size %llu, not %llu",
                  (unsigned long long)info.alloc_size, (unsigned long long)q[0].alloc_size);
  MORI_FUZZ_CHECK(info.world_within_direct_access == (one_host || fabric),
                  "world info: world_within_direct_access %d with same_host %d, fabric %d",
                  info.world_within_direct_access, one_host, fabric);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mori_request reqs[MAX_RANKS];
  const uint8_t *chunk[MAX_RANKS];
  size_t chunk_len[MAX_RANKS];
  mori__fuzz_reader in = {data, data + size};
  uint8_t mode = mori__fuzz_u8(&in), self = mori__fuzz_u8(&in);

  int n = split(&in, chunk, chunk_len);
  if (n == 0) return 0;
  for (int i = 0; i < n; i++)
    if (decode_chunk(mode, i, n, chunk[i], chunk_len[i], &reqs[i]) != MORI_WIRE_OK) return 0;
  check_world(reqs, n, self % n);
  return 0;
}
