/*
 * fuzz_common.c - helpers shared by every harness and the seed generator:
 * framing, the round-trip and rejection properties of accepted messages,
 * the fixed world, a growing string and the input reader.
 */
#include "fuzz.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mori/hip_shim.h"

static void put_le(uint8_t *p, uint64_t v, int width) {
  for (int i = 0; i < width; i++) p[i] = (uint8_t)(v >> (8 * i));
}

size_t mori__fuzz_frame(uint16_t kind, const uint8_t *body, size_t body_len, uint8_t *out,
                        size_t cap) {
  size_t total = MORI_FUZZ_HEADER_SIZE + body_len + MORI_FUZZ_CRC_SIZE;
  if (total > cap || total > UINT32_MAX) return 0;
  put_le(out, MORI_WIRE_MAGIC, 4);
  put_le(out + 4, MORI_WIRE_VERSION, 2);
  put_le(out + 6, kind, 2);
  put_le(out + 8, total, 4);
  if (body_len) memcpy(out + MORI_FUZZ_HEADER_SIZE, body, body_len);
  size_t crc_at = total - MORI_FUZZ_CRC_SIZE;
  put_le(out + crc_at, mori_crc32c(0, out, crc_at), 4);
  return total;
}

void mori__fuzz_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("fuzz property broken: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  abort();
}

/* Everything a decoder may return (ENOSPACE is the encoder's alone). */
static const int decode_results[] = {
    MORI_WIRE_OK,    MORI_WIRE_ETRUNCATED, MORI_WIRE_EMAGIC,  MORI_WIRE_EVERSION,
    MORI_WIRE_EKIND, MORI_WIRE_ELENGTH,    MORI_WIRE_ECRC,    MORI_WIRE_ERANK,
    MORI_WIRE_ESIZE, MORI_WIRE_EHANDLE,    MORI_WIRE_ESTRING, MORI_WIRE_ETRAILING,
    MORI_WIRE_ESLOTS,
};

int mori__fuzz_is_decode_result(int rc) {
  for (size_t i = 0; i < sizeof decode_results / sizeof decode_results[0]; i++)
    if (decode_results[i] == rc) return strcmp(mori_wire_strerror(rc), "unknown wire error") != 0;
  return 0;
}

/* ---- properties of accepted messages ---- */

typedef int (*decode_fn)(const uint8_t *buf, size_t len, void *out);

static int decode_request(const uint8_t *buf, size_t len, void *out) {
  return mori_wire_decode_request(buf, len, out);
}

static int decode_datagram(const uint8_t *buf, size_t len, void *out) {
  return mori_wire_decode_datagram(buf, len, out);
}

/* A CRC32C detects every single-bit error, and a shorter buffer can never
 * match total_length: neither may decode.  Three bit positions per message,
 * spread by the message's own checksum, keep this cheap. */
static void check_damage_rejected(decode_fn decode, const uint8_t *x, size_t len, void *scratch,
                                  const char *what) {
  uint8_t copy[MORI_FUZZ_MSG_MAX];
  MORI_FUZZ_CHECK(len <= sizeof copy, "%s: accepted a %zu-byte message", what, len);
  int rc = decode(x, len - 1, scratch);
  MORI_FUZZ_CHECK(rc != MORI_WIRE_OK, "%s: accepted the message less its last byte", what);
  MORI_FUZZ_CHECK(mori__fuzz_is_decode_result(rc), "%s: truncated decode returned %d", what, rc);

  uint32_t seed = mori_crc32c(0, x, len);
  size_t bits = len * 8;
  for (uint32_t k = 1; k <= 3; k++) {
    size_t bit = ((size_t)seed * k + k * 977u) % bits;
    memcpy(copy, x, len);
    copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    rc = decode(copy, len, scratch);
    MORI_FUZZ_CHECK(rc != MORI_WIRE_OK, "%s: accepted the message with bit %zu flipped", what, bit);
    MORI_FUZZ_CHECK(mori__fuzz_is_decode_result(rc), "%s: bit-flipped decode returned %d", what,
                    rc);
  }
}

/* What wire.h promises of every request a decoder hands out. */
static void check_request_fields(const mori_request *r) {
  int is_fd = r->handle_type == hipMemHandleTypePosixFileDescriptor;
  MORI_FUZZ_CHECK(
      r->world_size >= 1 && r->world_size <= MORI_WIRE_MAX_WORLD && r->rank < r->world_size,
      "request: accepted rank %u of world %u", r->rank, r->world_size);
  MORI_FUZZ_CHECK(r->buffer_size <= r->signal_pad_offset && r->signal_pad_offset <= r->alloc_size,
                  "request: accepted buffer %llu, pad offset %llu, alloc %llu",
                  (unsigned long long)r->buffer_size, (unsigned long long)r->signal_pad_offset,
                  (unsigned long long)r->alloc_size);
  MORI_FUZZ_CHECK(r->signal_pad_size != 0 || r->signal_pad_offset == r->alloc_size,
                  "request: accepted no pad at offset %llu of %llu",
                  (unsigned long long)r->signal_pad_offset, (unsigned long long)r->alloc_size);
  MORI_FUZZ_CHECK(r->signal_pad_size <=
                      (r->alloc_size - r->signal_pad_offset) / MORI_WIRE_SIGNAL_AREAS,
                  "request: accepted pad %llu with %d pad areas in %llu bytes after the offset",
                  (unsigned long long)r->signal_pad_size, MORI_WIRE_SIGNAL_AREAS,
                  (unsigned long long)(r->alloc_size - r->signal_pad_offset));
  MORI_FUZZ_CHECK((r->signal_slots_used >> MORI_WIRE_SIGNAL_SLOTS) == 0,
                  "request: accepted signal slot bitmap 0x%x", r->signal_slots_used);
  MORI_FUZZ_CHECK(is_fd || r->handle_type == hipMemHandleTypeFabric,
                  "request: accepted handle type %u", r->handle_type);
  MORI_FUZZ_CHECK(memchr(r->socket_name, '\0', sizeof r->socket_name) != NULL,
                  "request: decoded socket name is not NUL-terminated");
  for (const char *c = r->socket_name; *c; c++)
    MORI_FUZZ_CHECK((unsigned char)*c >= 0x20 && *c != 0x7f,
                    "request: decoded socket name has control character 0x%02x", (unsigned char)*c);
  MORI_FUZZ_CHECK((r->socket_name[0] != '\0') == is_fd,
                  "request: socket name \"%s\" with handle type %u", r->socket_name,
                  r->handle_type);
}

void mori__fuzz_check_request(const mori_request *r, const uint8_t *x, size_t len) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  size_t out_len = 0;
  check_request_fields(r);
  int rc = mori_wire_encode_request(r, buf, sizeof buf, &out_len);
  MORI_FUZZ_CHECK(rc == MORI_WIRE_OK, "request: re-encoding an accepted request failed: %s",
                  mori_wire_strerror(rc));
  MORI_FUZZ_CHECK(out_len == len && memcmp(buf, x, len) == 0,
                  "request: encode(decode(x)) differs from x (%zu vs %zu bytes)", out_len, len);
  MORI_FUZZ_CHECK(mori_wire_request_size(r) == len, "request: mori_wire_request_size %zu, not %zu",
                  mori_wire_request_size(r), len);
  rc = mori_wire_encode_request(r, buf, len - 1, &out_len);
  MORI_FUZZ_CHECK(rc == MORI_WIRE_ENOSPACE, "request: encode into %zu bytes returned %d", len - 1,
                  rc);
  mori_request scratch;
  check_damage_rejected(decode_request, x, len, &scratch, "request");
}

void mori__fuzz_check_datagram(const mori_datagram *d, const uint8_t *x, size_t len) {
  uint8_t buf[MORI_WIRE_PROOF_SIZE];
  size_t out_len = 0;
  int rc = mori_wire_encode_datagram(d, buf, sizeof buf, &out_len);
  MORI_FUZZ_CHECK(rc == MORI_WIRE_OK, "datagram: re-encoding an accepted datagram failed: %s",
                  mori_wire_strerror(rc));
  MORI_FUZZ_CHECK(out_len == len && memcmp(buf, x, len) == 0,
                  "datagram: encode(decode(x)) differs from x (%zu vs %zu bytes)", out_len, len);
  rc = mori_wire_encode_datagram(d, buf, len - 1, &out_len);
  MORI_FUZZ_CHECK(rc == MORI_WIRE_ENOSPACE, "datagram: encode into %zu bytes returned %d", len - 1,
                  rc);
  mori_datagram scratch;
  check_damage_rejected(decode_datagram, x, len, &scratch, "datagram");
}

/* ---- the fixed world ---- */

void mori__fuzz_world_request(int rank, int world, uint32_t handle_type, mori_request *r) {
  static const uint8_t host[MORI_WIRE_HOST_ID_SIZE] = "mori-fuzz-host-0";
  memset(r, 0, sizeof *r);
  r->rank = (uint32_t)rank;
  r->world_size = (uint32_t)world;
  r->alloc_size = 2u << 20;
  r->buffer_size = 1u << 20;
  r->signal_pad_offset = 1u << 20;
  r->signal_pad_size = 9216;
  r->device = rank;
  r->pid = 4000u + (uint32_t)rank;
  r->uid = MORI_FUZZ_UID;
  memcpy(r->host_id, host, sizeof host);
  r->handle_type = handle_type;
  r->nonce = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1);
  if (handle_type == hipMemHandleTypePosixFileDescriptor)
    snprintf(r->socket_name, sizeof r->socket_name, "/tmp/mori-symm-fuzz/g0/%d.sock", rank);
  else
    for (int i = 0; i < MORI_WIRE_FABRIC_SIZE; i++) r->fabric[i] = (uint8_t)(rank * 64 + i);
}

uint64_t mori__fuzz_challenge(int rank) { return 0x5ec2e7c4a11e0000ull + (uint64_t)rank; }

uint16_t mori__fuzz_datagram_kind(uint8_t mode) {
  return (uint16_t)(MORI_WIRE_KIND_DATAGRAM + (mode >> 1 & 3) % MORI_DATAGRAM__TYPES);
}

/* ---- text ---- */

void mori__fuzz_put(mori__fuzz_text *t, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int k = vsnprintf(t->s ? t->s + t->n : NULL, t->cap - t->n, fmt, ap);
    va_end(ap);
    MORI_FUZZ_CHECK(k >= 0, "vsnprintf failed");
    if (t->s && (size_t)k < t->cap - t->n) {
      t->n += (size_t)k;
      return;
    }
    t->cap = 2 * t->cap + (size_t)k + 64;
    t->s = realloc(t->s, t->cap);
    MORI_FUZZ_CHECK(t->s != NULL, "out of memory");
  }
}

/* ---- reader ---- */

uint8_t mori__fuzz_u8(mori__fuzz_reader *in) { return in->p < in->end ? *in->p++ : 0; }

uint16_t mori__fuzz_u16(mori__fuzz_reader *in) {
  uint16_t lo = mori__fuzz_u8(in);
  return (uint16_t)(lo | (uint16_t)(mori__fuzz_u8(in) << 8));
}

size_t mori__fuzz_left(const mori__fuzz_reader *in) { return (size_t)(in->end - in->p); }
