/*
 * test_codec.c - specification of wire format v1: CRC32C, the byte layout
 * of requests and datagrams (docs/wire-format.md), and the one specific
 * error each defect produces.  The test lays bytes out on its own, from the
 * documented offsets, rather than trusting the encoder under test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "mori/hip_shim.h"
#include "mori/wire.h"

#define FD_TYPE hipMemHandleTypePosixFileDescriptor
#define FABRIC_TYPE hipMemHandleTypeFabric

/* Offsets from docs/wire-format.md. */
enum {
  OFF_MAGIC = 0,
  OFF_VERSION = 4,
  OFF_KIND = 6,
  OFF_TOTAL = 8,
  OFF_RANK = 12,
  OFF_WORLD = 16,
  OFF_ALLOC = 20,
  OFF_BUFFER = 28,
  OFF_PAD_OFFSET = 36,
  OFF_PAD_SIZE = 44,
  OFF_DEVICE = 52,
  OFF_PID = 56,
  OFF_UID = 60,
  OFF_HOST = 64,
  OFF_HANDLE = 80,
  OFF_NONCE = 84,
  OFF_SLOTS = 92,
  OFF_NAME_LEN = 96,
  OFF_NAME = 98,
  HEADER = 12,
  CRC = 4
};

/* ---- the test's own little-endian layout ---- */

static void le_put(uint8_t *p, uint64_t v, int width) {
  for (int i = 0; i < width; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t le_get(const uint8_t *p, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* Rewrites total_length to len and the CRC over everything before it. */
static void reseal(uint8_t *buf, size_t len) {
  le_put(buf + OFF_TOTAL, len, 4);
  le_put(buf + len - CRC, mori_crc32c(0, buf, len - CRC), 4);
}

/* Lays out a request field by field with arbitrary blobs and `trailing`
 * zero bytes before the CRC; returns the length. */
static size_t raw_request(const mori_request *r, const void *name, size_t name_len,
                          const void *fabric, size_t fabric_len, size_t trailing, uint8_t *buf) {
  uint8_t *p = buf;
  le_put(p + OFF_MAGIC, 0x4d534d59u, 4);
  le_put(p + OFF_VERSION, 1, 2);
  le_put(p + OFF_KIND, MORI_WIRE_KIND_REQUEST, 2);
  le_put(p + OFF_RANK, r->rank, 4);
  le_put(p + OFF_WORLD, r->world_size, 4);
  le_put(p + OFF_ALLOC, r->alloc_size, 8);
  le_put(p + OFF_BUFFER, r->buffer_size, 8);
  le_put(p + OFF_PAD_OFFSET, r->signal_pad_offset, 8);
  le_put(p + OFF_PAD_SIZE, r->signal_pad_size, 8);
  le_put(p + OFF_DEVICE, (uint32_t)r->device, 4);
  le_put(p + OFF_PID, r->pid, 4);
  le_put(p + OFF_UID, r->uid, 4);
  memcpy(p + OFF_HOST, r->host_id, MORI_WIRE_HOST_ID_SIZE);
  le_put(p + OFF_HANDLE, r->handle_type, 4);
  le_put(p + OFF_NONCE, r->nonce, 8);
  le_put(p + OFF_SLOTS, r->signal_slots_used, 4);
  le_put(p + OFF_NAME_LEN, name_len, 2);
  p += OFF_NAME;
  if (name_len) memcpy(p, name, name_len);
  p += name_len;
  le_put(p, fabric_len, 2);
  if (fabric_len) memcpy(p + 2, fabric, fabric_len);
  p += 2 + fabric_len;
  memset(p, 0, trailing);
  p += trailing;
  size_t len = (size_t)(p - buf) + CRC;
  reseal(buf, len);
  return len;
}

static mori_request fd_request(void) {
  mori_request r;
  memset(&r, 0, sizeof r);
  r.rank = 2;
  r.world_size = 8;
  r.alloc_size = 4u << 20;
  r.buffer_size = 1000000;
  r.signal_pad_offset = 1000000;
  r.signal_pad_size = 9216;
  r.device = 2;
  r.pid = 4242;
  r.uid = 1001;
  for (int i = 0; i < MORI_WIRE_HOST_ID_SIZE; i++) r.host_id[i] = (uint8_t)(0xb0 + i);
  r.handle_type = FD_TYPE;
  r.nonce = 0x0123456789abcdefull;
  r.signal_slots_used = 0x05;
  strcpy(r.socket_name, "/tmp/mori-symm.x1/g0.7.2");
  return r;
}

static mori_request fabric_request(void) {
  mori_request r = fd_request();
  r.handle_type = FABRIC_TYPE;
  memset(r.socket_name, 0, sizeof r.socket_name);
  for (int i = 0; i < MORI_WIRE_FABRIC_SIZE; i++) r.fabric[i] = (uint8_t)(i * 7 + 1);
  return r;
}

static size_t raw_fd(const mori_request *r, uint8_t *buf) {
  return raw_request(r, r->socket_name, strlen(r->socket_name), NULL, 0, 0, buf);
}

static size_t raw_fabric(const mori_request *r, uint8_t *buf) {
  return raw_request(r, NULL, 0, r->fabric, MORI_WIRE_FABRIC_SIZE, 0, buf);
}

static void assert_request_equal(const mori_request *a, const mori_request *b) {
  assert_int_equal(a->rank, b->rank);
  assert_int_equal(a->world_size, b->world_size);
  assert_int_equal(a->alloc_size, b->alloc_size);
  assert_int_equal(a->buffer_size, b->buffer_size);
  assert_int_equal(a->signal_pad_offset, b->signal_pad_offset);
  assert_int_equal(a->signal_pad_size, b->signal_pad_size);
  assert_int_equal(a->device, b->device);
  assert_int_equal(a->pid, b->pid);
  assert_int_equal(a->uid, b->uid);
  assert_memory_equal(a->host_id, b->host_id, MORI_WIRE_HOST_ID_SIZE);
  assert_int_equal(a->handle_type, b->handle_type);
  assert_int_equal(a->nonce, b->nonce);
  assert_int_equal(a->signal_slots_used, b->signal_slots_used);
  assert_string_equal(a->socket_name, b->socket_name);
  assert_memory_equal(a->fabric, b->fabric, MORI_WIRE_FABRIC_SIZE);
}

/* ---- CRC32C ---- */

static uint32_t crc_bitwise(const uint8_t *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)rng_state;
}

static void crc32c_matches_the_check_value_of_123456789(void **state) {
  assert_int_equal(mori_crc32c(0, "123456789", 9), 0xE3069283u);
}

static void crc32c_of_nothing_is_zero(void **state) { assert_int_equal(mori_crc32c(0, "", 0), 0); }

static void crc32c_chains_across_split_buffers(void **state) {
  const char *s = "123456789";
  for (size_t cut = 0; cut <= 9; cut++)
    assert_int_equal(mori_crc32c(mori_crc32c(0, s, cut), s + cut, 9 - cut), 0xE3069283u);
}

static void crc32c_agrees_with_a_bit_at_a_time_crc(void **state) {
  uint8_t buf[300];
  for (int round = 0; round < 200; round++) {
    size_t n = rng() % sizeof buf;
    for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)rng();
    assert_int_equal(mori_crc32c(0, buf, n), crc_bitwise(buf, n));
  }
  for (int b = 0; b < 256; b++) {
    uint8_t one = (uint8_t)b;
    assert_int_equal(mori_crc32c(0, &one, 1), crc_bitwise(&one, 1));
  }
}

/* ---- request: layout and round trips ---- */

static void request_encoding_matches_the_documented_layout(void **state) {
  uint8_t want[MORI_WIRE_REQUEST_MAX], got[MORI_WIRE_REQUEST_MAX];
  mori_request fd = fd_request(), fab = fabric_request();
  size_t len = 0;

  size_t want_len = raw_fd(&fd, want);
  assert_int_equal(mori_wire_encode_request(&fd, got, sizeof got, &len), MORI_WIRE_OK);
  assert_int_equal(len, want_len);
  assert_int_equal(mori_wire_request_size(&fd), want_len);
  assert_memory_equal(got, want, len);
  assert_memory_equal(got, "\x59\x4d\x53\x4d\x01\x00\x01\x00", 8); /* magic, version, kind */
  assert_int_equal(le_get(got + OFF_TOTAL, 4), len);
  assert_int_equal(le_get(got + OFF_NONCE, 8), fd.nonce);
  assert_int_equal(le_get(got + OFF_NAME_LEN, 2), strlen(fd.socket_name));
  assert_int_equal(le_get(got + len - CRC, 4), mori_crc32c(0, got, len - CRC));

  want_len = raw_fabric(&fab, want);
  assert_int_equal(mori_wire_encode_request(&fab, got, sizeof got, &len), MORI_WIRE_OK);
  assert_int_equal(len, want_len);
  assert_int_equal(len, 104 + MORI_WIRE_FABRIC_SIZE);
  assert_memory_equal(got, want, len);
}

static void request_round_trips_on_the_fd_path(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  mori_request r = fd_request(), back;
  size_t len;
  assert_int_equal(mori_wire_encode_request(&r, buf, sizeof buf, &len), MORI_WIRE_OK);
  assert_int_equal(mori_wire_decode_request(buf, len, &back), MORI_WIRE_OK);
  assert_request_equal(&back, &r);
}

static void request_round_trips_on_the_fabric_path(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  mori_request r = fabric_request(), back;
  size_t len;
  assert_int_equal(mori_wire_encode_request(&r, buf, sizeof buf, &len), MORI_WIRE_OK);
  assert_int_equal(mori_wire_decode_request(buf, len, &back), MORI_WIRE_OK);
  assert_request_equal(&back, &r);
}

static void request_round_trips_at_the_field_limits(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  mori_request r = fd_request(), back;
  size_t len;
  r.world_size = MORI_WIRE_MAX_WORLD;
  r.rank = MORI_WIRE_MAX_WORLD - 1;
  r.alloc_size = UINT64_MAX;
  r.buffer_size = UINT64_MAX - MORI_WIRE_SIGNAL_AREAS;
  r.signal_pad_offset = UINT64_MAX - MORI_WIRE_SIGNAL_AREAS;
  r.signal_pad_size = 1; /* exactly fills the block: pad + every signal slot's areas */
  r.signal_slots_used = (1u << MORI_WIRE_SIGNAL_SLOTS) - 1;
  r.device = -1;
  r.pid = UINT32_MAX;
  r.uid = UINT32_MAX;
  r.nonce = UINT64_MAX;
  memset(r.socket_name, 'n', MORI_WIRE_SOCKET_NAME_MAX);
  r.socket_name[MORI_WIRE_SOCKET_NAME_MAX] = '\0';
  assert_int_equal(mori_wire_encode_request(&r, buf, sizeof buf, &len), MORI_WIRE_OK);
  assert_int_equal(mori_wire_decode_request(buf, len, &back), MORI_WIRE_OK);
  assert_request_equal(&back, &r);

  /* No signal pad: the offset sits at alloc_size. */
  r = fabric_request();
  r.signal_pad_size = 0;
  r.signal_pad_offset = r.alloc_size;
  r.buffer_size = r.alloc_size;
  assert_int_equal(mori_wire_encode_request(&r, buf, sizeof buf, &len), MORI_WIRE_OK);
  assert_int_equal(mori_wire_decode_request(buf, len, &back), MORI_WIRE_OK);
  assert_request_equal(&back, &r);
}

static void request_reencodes_to_the_same_bytes(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX], again[MORI_WIRE_REQUEST_MAX];
  mori_request reqs[2] = {fd_request(), fabric_request()}, back;
  for (int i = 0; i < 2; i++) {
    size_t len = i == 0 ? raw_fd(&reqs[i], buf) : raw_fabric(&reqs[i], buf), len2;
    assert_int_equal(mori_wire_decode_request(buf, len, &back), MORI_WIRE_OK);
    assert_int_equal(mori_wire_encode_request(&back, again, sizeof again, &len2), MORI_WIRE_OK);
    assert_int_equal(len2, len);
    assert_memory_equal(again, buf, len);
  }
}

/* ---- request: framing defects ---- */

static void request_truncated_at_every_length_is_etruncated(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  mori_request r = fd_request(), out;
  size_t len = raw_fd(&r, buf);
  for (size_t n = 0; n < len; n++)
    assert_int_equal(mori_wire_decode_request(buf, n, &out), MORI_WIRE_ETRUNCATED);
  r = fabric_request();
  len = raw_fabric(&r, buf);
  for (size_t n = 0; n < len; n++)
    assert_int_equal(mori_wire_decode_request(buf, n, &out), MORI_WIRE_ETRUNCATED);
}

/* What flipping one bit at offset i must produce: the header fields each
 * have their own error; anything else, body or CRC, breaks the CRC. */
static void assert_flip_error(size_t i, int rc) {
  if (i < OFF_VERSION)
    assert_int_equal(rc, MORI_WIRE_EMAGIC);
  else if (i < OFF_KIND)
    assert_int_equal(rc, MORI_WIRE_EVERSION);
  else if (i < OFF_TOTAL)
    assert_int_equal(rc, MORI_WIRE_EKIND);
  else if (i < HEADER)
    assert_true(rc == MORI_WIRE_ELENGTH || rc == MORI_WIRE_ETRUNCATED);
  else
    assert_int_equal(rc, MORI_WIRE_ECRC);
}

static void request_bit_flip_anywhere_gives_its_specific_error(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  mori_request reqs[2] = {fd_request(), fabric_request()}, out;
  for (int k = 0; k < 2; k++) {
    size_t len = k == 0 ? raw_fd(&reqs[k], buf) : raw_fabric(&reqs[k], buf);
    for (size_t i = 0; i < len; i++)
      for (int bit = 0; bit < 8; bit++) {
        buf[i] ^= (uint8_t)(1u << bit);
        assert_flip_error(i, mori_wire_decode_request(buf, len, &out));
        buf[i] ^= (uint8_t)(1u << bit);
      }
    assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_OK);
  }
}

static void request_length_disagreeing_with_the_buffer_is_elength(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX + 8];
  mori_request r = fd_request(), out;
  size_t len = raw_fd(&r, buf);
  buf[len] = 0;
  /* One extra byte after a well-formed message. */
  assert_int_equal(mori_wire_decode_request(buf, len + 1, &out), MORI_WIRE_ELENGTH);
  /* Claimed lengths outside [smallest request, MORI_WIRE_REQUEST_MAX]. */
  le_put(buf + OFF_TOTAL, MORI_WIRE_REQUEST_MAX + 1, 4);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ELENGTH);
  le_put(buf + OFF_TOTAL, 0xffffffffu, 4);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ELENGTH);
  le_put(buf + OFF_TOTAL, 99, 4);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ELENGTH);
  le_put(buf + OFF_TOTAL, 0, 4);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ELENGTH);
}

static void request_decoder_rejects_a_datagram_as_ekind(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  mori_request r = fd_request(), out;
  size_t len = raw_fd(&r, buf);
  le_put(buf + OFF_KIND, MORI_WIRE_KIND_DATAGRAM, 2);
  reseal(buf, len);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_EKIND);
  le_put(buf + OFF_KIND, 0, 2);
  reseal(buf, len);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_EKIND);
}

static void request_header_errors_come_in_the_documented_order(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  mori_request r = fd_request(), out;
  size_t len = raw_fd(&r, buf);
  /* Every header field broken, and the CRC: magic is reported first. */
  buf[OFF_MAGIC] ^= 1;
  buf[OFF_VERSION] ^= 1;
  buf[OFF_KIND] ^= 4;
  le_put(buf + OFF_TOTAL, 4000, 4);
  buf[len - 1] ^= 1;
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_EMAGIC);
  buf[OFF_MAGIC] ^= 1;
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_EVERSION);
  buf[OFF_VERSION] ^= 1;
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_EKIND);
  buf[OFF_KIND] ^= 4;
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ELENGTH);
  le_put(buf + OFF_TOTAL, len, 4);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ECRC);
  buf[len - 1] ^= 1;
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_OK);
}

/* ---- request: field defects, each sealed with a valid CRC ---- */

typedef struct field_case {
  const char *what;
  void (*mutate)(mori_request *r);
  int want;
} field_case;

static void world_zero(mori_request *r) { r->world_size = 0, r->rank = 0; }
static void world_too_big(mori_request *r) { r->world_size = MORI_WIRE_MAX_WORLD + 1; }
static void rank_is_world(mori_request *r) { r->rank = r->world_size; }
static void alloc_zero(mori_request *r) {
  r->alloc_size = r->buffer_size = r->signal_pad_offset = r->signal_pad_size = 0;
}
static void buffer_past_pad(mori_request *r) { r->buffer_size = r->signal_pad_offset + 1; }
static void pad_offset_past_alloc(mori_request *r) {
  r->signal_pad_size = 0, r->signal_pad_offset = r->alloc_size + 1;
}
static void counters_past_alloc(mori_request *r) {
  r->signal_pad_size = (r->alloc_size - r->signal_pad_offset) / MORI_WIRE_SIGNAL_AREAS + 1;
}
static void pad_doubling_overflows(mori_request *r) { r->signal_pad_size = 1ull << 63; }
static void slot_past_the_last(mori_request *r) {
  r->signal_slots_used = 1u << MORI_WIRE_SIGNAL_SLOTS;
}
static void no_pad_offset_not_alloc(mori_request *r) {
  r->signal_pad_size = 0, r->signal_pad_offset = r->alloc_size - 1;
}
static void handle_none(mori_request *r) { r->handle_type = hipMemHandleTypeNone; }
static void handle_win32(mori_request *r) { r->handle_type = hipMemHandleTypeWin32; }
static void handle_both(mori_request *r) { r->handle_type = FD_TYPE | FABRIC_TYPE; }
static void rank_beats_size(mori_request *r) { r->rank = r->world_size, r->alloc_size = 0; }
static void size_beats_handle(mori_request *r) { r->alloc_size = 0, r->handle_type = 0; }

static const field_case field_cases[] = {
    {"world_size 0", world_zero, MORI_WIRE_ERANK},
    {"world_size above MAX_WORLD", world_too_big, MORI_WIRE_ERANK},
    {"rank == world_size", rank_is_world, MORI_WIRE_ERANK},
    {"alloc_size 0", alloc_zero, MORI_WIRE_ESIZE},
    {"buffer past the signal pad offset", buffer_past_pad, MORI_WIRE_ESIZE},
    {"signal pad offset past alloc_size", pad_offset_past_alloc, MORI_WIRE_ESIZE},
    {"counter area past alloc_size", counters_past_alloc, MORI_WIRE_ESIZE},
    {"2 * signal_pad_size overflows", pad_doubling_overflows, MORI_WIRE_ESIZE},
    {"signal slot past the last", slot_past_the_last, MORI_WIRE_ESLOTS},
    {"no pad but offset != alloc_size", no_pad_offset_not_alloc, MORI_WIRE_ESIZE},
    {"handle type none", handle_none, MORI_WIRE_EHANDLE},
    {"handle type win32", handle_win32, MORI_WIRE_EHANDLE},
    {"handle type fd|fabric mask", handle_both, MORI_WIRE_EHANDLE},
    {"rank checked before sizes", rank_beats_size, MORI_WIRE_ERANK},
    {"sizes checked before handle", size_beats_handle, MORI_WIRE_ESIZE},
};

static void request_field_defects_give_their_specific_error(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  mori_request out;
  for (size_t i = 0; i < sizeof field_cases / sizeof field_cases[0]; i++) {
    mori_request r = fd_request();
    field_cases[i].mutate(&r);
    size_t len = raw_fd(&r, buf);
    print_message("  %s\n", field_cases[i].what);
    assert_int_equal(mori_wire_decode_request(buf, len, &out), field_cases[i].want);
    /* The encoder refuses to write what the decoder rejects. */
    assert_int_equal(mori_wire_encode_request(&r, buf, sizeof buf, &len), field_cases[i].want);
  }
}

static void request_blob_lengths_must_match_the_handle_type(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX], blob[MORI_WIRE_FABRIC_SIZE + 1] = {0};
  mori_request fd = fd_request(), fab = fabric_request(), out;
  size_t n = strlen(fd.socket_name);

  size_t len = raw_request(&fd, fd.socket_name, n, blob, MORI_WIRE_FABRIC_SIZE, 0, buf);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_EHANDLE);
  len = raw_request(&fab, NULL, 0, NULL, 0, 0, buf);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_EHANDLE);
  len = raw_request(&fab, NULL, 0, blob, MORI_WIRE_FABRIC_SIZE - 1, 0, buf);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_EHANDLE);
  len = raw_request(&fab, NULL, 0, blob, MORI_WIRE_FABRIC_SIZE + 1, 0, buf);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_EHANDLE);
}

static void request_socket_name_defects_are_estring(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX], blob[MORI_WIRE_FABRIC_SIZE] = {0};
  char name[MORI_WIRE_SOCKET_NAME_MAX + 1];
  mori_request fd = fd_request(), fab = fabric_request(), out;
  size_t len;

  memset(name, 'a', sizeof name); /* one byte over the limit */
  len = raw_request(&fd, name, sizeof name, NULL, 0, 0, buf);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ESTRING);
  len = raw_request(&fd, "a\0b", 3, NULL, 0, 0, buf);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ESTRING);
  len = raw_request(&fd, "\0", 1, NULL, 0, 0, buf);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ESTRING);
  len = raw_request(&fd, NULL, 0, NULL, 0, 0, buf); /* fd path needs a socket */
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ESTRING);
  len = raw_request(&fab, "s", 1, blob, sizeof blob, 0, buf); /* fabric has none */
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ESTRING);
  /* a control character would reach the messages that name the socket */
  len = raw_request(&fd, "/tmp/\x1b[2J", 9, NULL, 0, 0, buf);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ESTRING);
  len = raw_request(&fd, "/tmp/a\rb", 8, NULL, 0, 0, buf);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ESTRING);
  len = raw_request(&fd, "/tmp/\x7f", 6, NULL, 0, 0, buf);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ESTRING);
  /* nor 8-bit CSI (0x9b), which rewrites a terminal's line as ESC [ does */
  len = raw_request(&fd, "/tmp/\x9b" "2K\x9b" "1A", 11, NULL, 0, 0, buf);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ESTRING);
  /* only [A-Za-z0-9/._+,=@~-]: no space, no UTF-8, no shell or glob character */
  static const char *const outside[] = {"/tmp/a b", "/tmp/caf\xc3\xa9", "/tmp/a\\b", "/tmp/a:b",
                                        "/tmp/a*b", "/tmp/$x", "/tmp/a'b", "/tmp/\xff"};
  for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
    len = raw_request(&fd, outside[i], strlen(outside[i]), NULL, 0, 0, buf);
    if (mori_wire_decode_request(buf, len, &out) != MORI_WIRE_ESTRING)
      fail_msg("socket name %zu (%s) was not refused", i, outside[i]);
  }
  static const char every_allowed[] =
      "/ABCDEFGHIJKLMNOPQRSTUVWXYZ/abcdefghijklmnopqrstuvwxyz/0123456789/._+,=@~-";
  len = raw_request(&fd, every_allowed, sizeof every_allowed - 1, NULL, 0, 0, buf);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_OK);
  assert_string_equal(out.socket_name, every_allowed);

  /* The encoder refuses the same. */
  memset(fd.socket_name, 0, sizeof fd.socket_name);
  assert_int_equal(mori_wire_encode_request(&fd, buf, sizeof buf, &len), MORI_WIRE_ESTRING);
  memset(fd.socket_name, 'a', sizeof fd.socket_name); /* no NUL at all */
  assert_int_equal(mori_wire_encode_request(&fd, buf, sizeof buf, &len), MORI_WIRE_ESTRING);
  strcpy(fab.socket_name, "s");
  assert_int_equal(mori_wire_encode_request(&fab, buf, sizeof buf, &len), MORI_WIRE_ESTRING);
  strcpy(fd.socket_name, "/tmp/\x1b");
  assert_int_equal(mori_wire_encode_request(&fd, buf, sizeof buf, &len), MORI_WIRE_ESTRING);
}

static void request_bytes_after_the_last_field_are_etrailing(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  mori_request fd = fd_request(), fab = fabric_request(), out;
  size_t n = strlen(fd.socket_name);
  for (size_t extra = 1; extra < 8; extra++) {
    size_t len = raw_request(&fd, fd.socket_name, n, NULL, 0, extra, buf);
    assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ETRAILING);
    len = raw_request(&fab, NULL, 0, fab.fabric, MORI_WIRE_FABRIC_SIZE, extra, buf);
    assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ETRAILING);
  }
  /* A field defect is reported before the trailing bytes. */
  fd.rank = fd.world_size;
  size_t len = raw_request(&fd, fd.socket_name, n, NULL, 0, 3, buf);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ERANK);
}

static void request_blob_running_past_the_body_is_elength(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  mori_request fd = fd_request(), out;
  size_t len = raw_fd(&fd, buf);
  size_t n = strlen(fd.socket_name);
  /* Name length claims the fabric length field and the CRC too. */
  le_put(buf + OFF_NAME_LEN, n + 3, 2);
  reseal(buf, len);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ELENGTH);
  le_put(buf + OFF_NAME_LEN, 0xffff, 2);
  reseal(buf, len);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ELENGTH);
  /* Fabric length past the end. */
  len = raw_fd(&fd, buf);
  le_put(buf + OFF_NAME + n, 1, 2);
  reseal(buf, len);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ELENGTH);
}

/* Substitute every value at every body byte, reseal, decode: the result is
 * a field error or a request that re-encodes to exactly those bytes. */
static void request_any_sealed_byte_substitution_decodes_canonically(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX], again[MORI_WIRE_REQUEST_MAX];
  mori_request reqs[2] = {fd_request(), fabric_request()}, out;
  int accepted = 0, rejected = 0;
  for (int k = 0; k < 2; k++) {
    size_t len = k == 0 ? raw_fd(&reqs[k], buf) : raw_fabric(&reqs[k], buf);
    for (size_t i = HEADER; i < len - CRC; i++) {
      uint8_t keep = buf[i];
      for (int v = 0; v < 256; v++) {
        buf[i] = (uint8_t)v;
        reseal(buf, len);
        int rc = mori_wire_decode_request(buf, len, &out);
        if (rc == MORI_WIRE_OK) {
          size_t len2;
          assert_int_equal(mori_wire_encode_request(&out, again, sizeof again, &len2), 0);
          assert_int_equal(len2, len);
          assert_memory_equal(again, buf, len);
          accepted++;
        } else {
          assert_true(rc == MORI_WIRE_ELENGTH || rc == MORI_WIRE_ERANK || rc == MORI_WIRE_ESIZE ||
                      rc == MORI_WIRE_EHANDLE || rc == MORI_WIRE_ESTRING ||
                      rc == MORI_WIRE_ETRAILING || rc == MORI_WIRE_ESLOTS);
          rejected++;
        }
      }
      buf[i] = keep;
    }
  }
  assert_true(accepted > 0 && rejected > 0);
}

static void request_decode_failure_leaves_the_output_untouched(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX], pattern[sizeof(mori_request)];
  mori_request r = fd_request(), out;
  size_t len = raw_fd(&r, buf);
  buf[OFF_NONCE] ^= 1; /* CRC now wrong */
  memset(pattern, 0xa5, sizeof pattern);
  memcpy(&out, pattern, sizeof out);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ECRC);
  assert_memory_equal(&out, pattern, sizeof out);
  r.rank = r.world_size;
  len = raw_fd(&r, buf);
  assert_int_equal(mori_wire_decode_request(buf, len, &out), MORI_WIRE_ERANK);
  assert_memory_equal(&out, pattern, sizeof out);
}

static void request_encoder_needs_room_for_the_whole_message(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  mori_request r = fd_request();
  size_t need = mori_wire_request_size(&r), len = 12345;
  assert_int_equal(mori_wire_encode_request(&r, buf, need - 1, &len), MORI_WIRE_ENOSPACE);
  assert_int_equal(len, 12345);
  assert_int_equal(mori_wire_encode_request(&r, buf, need, &len), MORI_WIRE_OK);
  assert_int_equal(len, need);
}

/* Arbitrary bytes, some behind a valid header and CRC: the decoder returns
 * one of its codes and nothing else. */
static void request_decoder_survives_random_input(void **state) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX + 64];
  mori_request out;
  for (int round = 0; round < 20000; round++) {
    size_t len = rng() % sizeof buf;
    for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)rng();
    if (round % 2 && len >= 16 && len <= MORI_WIRE_REQUEST_MAX) {
      memcpy(buf, "\x59\x4d\x53\x4d\x01\x00\x01\x00", 8);
      reseal(buf, len);
    }
    int rc = mori_wire_decode_request(buf, len, &out);
    assert_true(rc <= MORI_WIRE_OK && rc > MORI_WIRE_ENOSPACE);
  }
}

/* ---- datagram ---- */

static const uint8_t golden_datagram[MORI_WIRE_DATAGRAM_SIZE] = {
    0x59, 0x4d, 0x53, 0x4d, 0x01, 0x00, 0x02, 0x00, 0x30, 0x00, 0x00, 0x00, 0x08, 0x07, 0x06, 0x05,
    0x04, 0x03, 0x02, 0x01, 0x02, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x88, 0x77, 0x66, 0x55,
    0x44, 0x33, 0x22, 0x11, 0x00, 0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x10, 0x90, 0x1e, 0x68,
};

static const mori_datagram golden = {0x0102030405060708ull, 2, 5, 0x1122334455667788ull,
                                     0x99aabbccddeeff00ull, MORI_DATAGRAM_FD, 0};

static void datagram_encoding_matches_the_documented_bytes(void **state) {
  uint8_t buf[64];
  size_t len;
  assert_int_equal(mori_wire_encode_datagram(&golden, buf, sizeof buf, &len), MORI_WIRE_OK);
  assert_int_equal(len, MORI_WIRE_DATAGRAM_SIZE);
  assert_memory_equal(buf, golden_datagram, len);
}

static void datagram_round_trips(void **state) {
  mori_datagram d;
  assert_int_equal(mori_wire_decode_datagram(golden_datagram, sizeof golden_datagram, &d), 0);
  assert_int_equal(d.window_seq, golden.window_seq);
  assert_int_equal(d.sender_rank, golden.sender_rank);
  assert_int_equal(d.receiver_rank, golden.receiver_rank);
  assert_int_equal(d.sender_nonce, golden.sender_nonce);
  assert_int_equal(d.receiver_nonce, golden.receiver_nonce);
}

static void datagram_truncated_at_every_length_is_etruncated(void **state) {
  mori_datagram d;
  for (size_t n = 0; n < MORI_WIRE_DATAGRAM_SIZE; n++)
    assert_int_equal(mori_wire_decode_datagram(golden_datagram, n, &d), MORI_WIRE_ETRUNCATED);
}

/* A kind flipped into another type's (challenge 3 is fd 2 with bit 0 set)
 * names a message of another length: ELENGTH, as a flipped length would. */
static void datagram_bit_flip_anywhere_gives_its_specific_error(void **state) {
  uint8_t buf[MORI_WIRE_DATAGRAM_SIZE];
  mori_datagram d;
  memcpy(buf, golden_datagram, sizeof buf);
  for (size_t i = 0; i < sizeof buf; i++)
    for (int bit = 0; bit < 8; bit++) {
      buf[i] ^= (uint8_t)(1u << bit);
      int rc = mori_wire_decode_datagram(buf, sizeof buf, &d);
      uint8_t kind = buf[OFF_KIND];
      if (i == OFF_KIND && (kind == MORI_WIRE_KIND_CHALLENGE || kind == MORI_WIRE_KIND_ANSWER))
        assert_int_equal(rc, MORI_WIRE_ELENGTH);
      else
        assert_flip_error(i, rc);
      buf[i] ^= (uint8_t)(1u << bit);
    }
}

static void datagram_with_any_other_length_is_elength(void **state) {
  uint8_t buf[MORI_WIRE_DATAGRAM_SIZE + 4] = {0};
  mori_datagram d;
  memcpy(buf, golden_datagram, MORI_WIRE_DATAGRAM_SIZE);
  assert_int_equal(mori_wire_decode_datagram(buf, sizeof buf, &d), MORI_WIRE_ELENGTH);
  /* Sealed at 52 bytes: well-formed framing, wrong size for a datagram. */
  reseal(buf, sizeof buf);
  assert_int_equal(mori_wire_decode_datagram(buf, sizeof buf, &d), MORI_WIRE_ELENGTH);
  reseal(buf, MORI_WIRE_DATAGRAM_SIZE - 4);
  assert_int_equal(mori_wire_decode_datagram(buf, MORI_WIRE_DATAGRAM_SIZE - 4, &d),
                   MORI_WIRE_ELENGTH);
}

static void datagram_decoder_rejects_a_request_as_ekind(void **state) {
  uint8_t buf[MORI_WIRE_DATAGRAM_SIZE];
  mori_datagram d;
  memcpy(buf, golden_datagram, sizeof buf);
  le_put(buf + OFF_KIND, MORI_WIRE_KIND_REQUEST, 2);
  reseal(buf, sizeof buf);
  assert_int_equal(mori_wire_decode_datagram(buf, sizeof buf, &d), MORI_WIRE_EKIND);
}

static void datagram_ranks_beyond_max_world_are_erank(void **state) {
  uint8_t buf[MORI_WIRE_DATAGRAM_SIZE];
  mori_datagram d = golden;
  size_t len;
  for (int which = 0; which < 2; which++) {
    memcpy(buf, golden_datagram, sizeof buf);
    le_put(buf + 20 + 4 * which, MORI_WIRE_MAX_WORLD, 4); /* sender, then receiver */
    reseal(buf, sizeof buf);
    assert_int_equal(mori_wire_decode_datagram(buf, sizeof buf, &d), MORI_WIRE_ERANK);
    le_put(buf + 20 + 4 * which, MORI_WIRE_MAX_WORLD - 1, 4);
    reseal(buf, sizeof buf);
    assert_int_equal(mori_wire_decode_datagram(buf, sizeof buf, &d), MORI_WIRE_OK);
  }
  d = golden;
  d.receiver_rank = MORI_WIRE_MAX_WORLD;
  assert_int_equal(mori_wire_encode_datagram(&d, buf, sizeof buf, &len), MORI_WIRE_ERANK);
}

static void datagram_encoder_needs_48_bytes(void **state) {
  uint8_t buf[MORI_WIRE_DATAGRAM_SIZE];
  size_t len;
  assert_int_equal(mori_wire_encode_datagram(&golden, buf, sizeof buf - 1, &len),
                   MORI_WIRE_ENOSPACE);
}

/* ---- the proof's challenge and answer ---- */

/* The golden datagram as an answer echoing 0x0f1e2d3c4b5a6978: kind 4,
 * 56 bytes, the secret after the common body. */
static const uint8_t golden_answer[MORI_WIRE_PROOF_SIZE] = {
    0x59, 0x4d, 0x53, 0x4d, 0x01, 0x00, 0x04, 0x00, 0x38, 0x00, 0x00, 0x00, 0x08, 0x07,
    0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0x02, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
    0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00, 0xff, 0xee, 0xdd, 0xcc, 0xbb,
    0xaa, 0x99, 0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0x0f, 0x8d, 0x03, 0x1e, 0x73,
};

static mori_datagram answer(void) {
  mori_datagram d = golden;
  d.type = MORI_DATAGRAM_ANSWER;
  d.challenge = 0x0f1e2d3c4b5a6978ull;
  return d;
}

static void sealed_answer(uint8_t *buf) { memcpy(buf, golden_answer, MORI_WIRE_PROOF_SIZE); }

static void answer_encoding_is_the_datagram_and_its_secret(void **state) {
  uint8_t buf[64];
  size_t len;
  mori_datagram d = answer();
  assert_int_equal(mori_wire_encode_datagram(&d, buf, sizeof buf, &len), MORI_WIRE_OK);
  assert_int_equal(len, MORI_WIRE_PROOF_SIZE);
  assert_memory_equal(buf, golden_answer, len);
  /* everything before the secret is the fd datagram's body */
  assert_memory_equal(buf + 12, golden_datagram + 12, 32);
}

static void challenge_and_answer_round_trip(void **state) {
  for (uint32_t type = MORI_DATAGRAM_CHALLENGE; type <= MORI_DATAGRAM_ANSWER; type++) {
    uint8_t buf[64];
    size_t len;
    mori_datagram d = answer(), out;
    d.type = type;
    assert_int_equal(mori_wire_encode_datagram(&d, buf, sizeof buf, &len), MORI_WIRE_OK);
    assert_int_equal(buf[OFF_KIND], type == MORI_DATAGRAM_ANSWER ? MORI_WIRE_KIND_ANSWER
                                                                 : MORI_WIRE_KIND_CHALLENGE);
    assert_int_equal(mori_wire_decode_datagram(buf, len, &out), MORI_WIRE_OK);
    assert_int_equal(out.type, type);
    assert_int_equal(out.challenge, d.challenge);
    assert_int_equal(out.sender_nonce, d.sender_nonce);
    assert_int_equal(mori_wire_encode_datagram(&d, buf, len - 1, &len), MORI_WIRE_ENOSPACE);
  }
}

/* An fd datagram carries no secret on the wire: one decoded says 0. */
static void an_fd_datagram_decodes_with_no_secret(void **state) {
  mori_datagram d;
  memset(&d, 0xa5, sizeof d);
  assert_int_equal(mori_wire_decode_datagram(golden_datagram, sizeof golden_datagram, &d), 0);
  assert_int_equal(d.type, MORI_DATAGRAM_FD);
  assert_int_equal(d.challenge, 0);
}

/* Each type has one length: an answer sealed at 48 bytes, or an fd
 * datagram at 56, is ELENGTH; a type outside the three is EKIND. */
static void each_datagram_type_has_its_one_length(void **state) {
  uint8_t buf[MORI_WIRE_PROOF_SIZE];
  mori_datagram d;
  sealed_answer(buf);
  le_put(buf + OFF_TOTAL, MORI_WIRE_DATAGRAM_SIZE, 4);
  reseal(buf, MORI_WIRE_DATAGRAM_SIZE);
  assert_int_equal(mori_wire_decode_datagram(buf, MORI_WIRE_DATAGRAM_SIZE, &d), MORI_WIRE_ELENGTH);
  sealed_answer(buf);
  le_put(buf + OFF_KIND, MORI_WIRE_KIND_DATAGRAM, 2);
  reseal(buf, sizeof buf);
  assert_int_equal(mori_wire_decode_datagram(buf, sizeof buf, &d), MORI_WIRE_ELENGTH);
  sealed_answer(buf);
  le_put(buf + OFF_KIND, MORI_WIRE_KIND_ANSWER + 1, 2);
  reseal(buf, sizeof buf);
  assert_int_equal(mori_wire_decode_datagram(buf, sizeof buf, &d), MORI_WIRE_EKIND);
  mori_datagram bad = answer();
  bad.type = MORI_DATAGRAM__TYPES;
  size_t len;
  assert_int_equal(mori_wire_encode_datagram(&bad, buf, sizeof buf, &len), MORI_WIRE_EKIND);
}

static void answer_truncated_at_every_length_is_etruncated(void **state) {
  uint8_t buf[MORI_WIRE_PROOF_SIZE];
  mori_datagram d;
  sealed_answer(buf);
  for (size_t n = 0; n < sizeof buf; n++)
    assert_int_equal(mori_wire_decode_datagram(buf, n, &d), MORI_WIRE_ETRUNCATED);
  assert_int_equal(mori_wire_decode_datagram(buf, sizeof buf, &d), MORI_WIRE_OK);
}

/* ---- error text ---- */

static void every_wire_error_has_its_own_text(void **state) {
  const char *unknown = mori_wire_strerror(-1000);
  for (int a = MORI_WIRE_OK; a >= MORI_WIRE_ESLOTS; a--) {
    assert_string_not_equal(mori_wire_strerror(a), unknown);
    for (int b = a - 1; b >= MORI_WIRE_ESLOTS; b--)
      assert_string_not_equal(mori_wire_strerror(a), mori_wire_strerror(b));
  }
  assert_string_equal(mori_wire_strerror(MORI_WIRE_ESLOTS - 1), unknown);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(crc32c_matches_the_check_value_of_123456789),
      cmocka_unit_test(crc32c_of_nothing_is_zero),
      cmocka_unit_test(crc32c_chains_across_split_buffers),
      cmocka_unit_test(crc32c_agrees_with_a_bit_at_a_time_crc),
      cmocka_unit_test(request_encoding_matches_the_documented_layout),
      cmocka_unit_test(request_round_trips_on_the_fd_path),
      cmocka_unit_test(request_round_trips_on_the_fabric_path),
      cmocka_unit_test(request_round_trips_at_the_field_limits),
      cmocka_unit_test(request_reencodes_to_the_same_bytes),
      cmocka_unit_test(request_truncated_at_every_length_is_etruncated),
      cmocka_unit_test(request_bit_flip_anywhere_gives_its_specific_error),
      cmocka_unit_test(request_length_disagreeing_with_the_buffer_is_elength),
      cmocka_unit_test(request_decoder_rejects_a_datagram_as_ekind),
      cmocka_unit_test(request_header_errors_come_in_the_documented_order),
      cmocka_unit_test(request_field_defects_give_their_specific_error),
      cmocka_unit_test(request_blob_lengths_must_match_the_handle_type),
      cmocka_unit_test(request_socket_name_defects_are_estring),
      cmocka_unit_test(request_bytes_after_the_last_field_are_etrailing),
      cmocka_unit_test(request_blob_running_past_the_body_is_elength),
      cmocka_unit_test(request_any_sealed_byte_substitution_decodes_canonically),
      cmocka_unit_test(request_decode_failure_leaves_the_output_untouched),
      cmocka_unit_test(request_encoder_needs_room_for_the_whole_message),
      cmocka_unit_test(request_decoder_survives_random_input),
      cmocka_unit_test(datagram_encoding_matches_the_documented_bytes),
      cmocka_unit_test(datagram_round_trips),
      cmocka_unit_test(datagram_truncated_at_every_length_is_etruncated),
      cmocka_unit_test(datagram_bit_flip_anywhere_gives_its_specific_error),
      cmocka_unit_test(datagram_with_any_other_length_is_elength),
      cmocka_unit_test(datagram_decoder_rejects_a_request_as_ekind),
      cmocka_unit_test(datagram_ranks_beyond_max_world_are_erank),
      cmocka_unit_test(datagram_encoder_needs_48_bytes),
      cmocka_unit_test(answer_encoding_is_the_datagram_and_its_secret),
      cmocka_unit_test(challenge_and_answer_round_trip),
      cmocka_unit_test(an_fd_datagram_decodes_with_no_secret),
      cmocka_unit_test(each_datagram_type_has_its_one_length),
      cmocka_unit_test(answer_truncated_at_every_length_is_etruncated),
      cmocka_unit_test(every_wire_error_has_its_own_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
