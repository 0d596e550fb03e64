/*
 * wire.c - encoders and decoders of wire format v1 (byte layout in
 * docs/wire-format.md).  Every field passes through the little-endian
 * put/get helpers below; decoders never read past `end` and keep no state
 * outside their arguments, because they are fuzz targets.
 */
#include "mori/wire.h"

#include "mori/hip_shim.h"

#include <string.h>

/* u32 magic | u16 version | u16 kind | u32 total_length */
#define HEADER_SIZE 12
#define CRC_SIZE 4
/* rank..nonce: the request fields before the two length-prefixed ones */
#define REQUEST_FIXED_SIZE 84
#define REQUEST_MIN_SIZE (HEADER_SIZE + REQUEST_FIXED_SIZE + 2 + 2 + CRC_SIZE)
#define DATAGRAM_BODY_SIZE 32

_Static_assert(HEADER_SIZE + DATAGRAM_BODY_SIZE + CRC_SIZE == MORI_WIRE_DATAGRAM_SIZE,
               "datagram layout");
_Static_assert(MORI_WIRE_DATAGRAM_SIZE + 8 == MORI_WIRE_PROOF_SIZE,
               "a challenge or an answer is a datagram and its secret");
_Static_assert(HEADER_SIZE + REQUEST_FIXED_SIZE + 2 + MORI_WIRE_SOCKET_NAME_MAX + 2 +
                       MORI_WIRE_FABRIC_SIZE + CRC_SIZE <=
                   MORI_WIRE_REQUEST_MAX,
               "a request with every optional field still fits MORI_WIRE_REQUEST_MAX");

static const struct {
  int code;
  const char *text;
} wire_errors[] = {
    {MORI_WIRE_OK, "success"},
    {MORI_WIRE_ETRUNCATED, "truncated: shorter than the header or than total_length"},
    {MORI_WIRE_EMAGIC, "bad magic: not a mori-symm message"},
    {MORI_WIRE_EVERSION, "unsupported wire version"},
    {MORI_WIRE_EKIND, "wrong message kind"},
    {MORI_WIRE_ELENGTH, "total_length disagrees with the buffer or the body"},
    {MORI_WIRE_ECRC, "CRC32C mismatch"},
    {MORI_WIRE_ERANK, "rank or world_size out of range"},
    {MORI_WIRE_ESIZE, "inconsistent alloc, buffer or signal pad sizes"},
    {MORI_WIRE_EHANDLE, "unknown handle type or fabric blob of the wrong length"},
    {MORI_WIRE_ESTRING,
     "bad socket name: too long, a character outside " MORI_WIRE_SOCKET_CHARS
     ", or present iff not posix_fd"},
    {MORI_WIRE_ETRAILING, "bytes after the last field"},
    {MORI_WIRE_ENOSPACE, "buffer too small for the encoding"},
    {MORI_WIRE_ESLOTS, "signal slot bitmap names a slot that does not exist"},
};

const char *mori_wire_strerror(int code) {
  for (size_t i = 0; i < sizeof wire_errors / sizeof wire_errors[0]; i++)
    if (wire_errors[i].code == code) return wire_errors[i].text;
  return "unknown wire error";
}

/* ---- little-endian helpers ---- */

static uint8_t *put_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  return p + 2;
}

static uint8_t *put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
  return p + 4;
}

static uint8_t *put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
  return p + 8;
}

static uint8_t *put_bytes(uint8_t *p, const void *src, size_t n) {
  if (n) memcpy(p, src, n);
  return p + n;
}

/* Length-prefixed byte string: u16 length, then the bytes. */
static uint8_t *put_blob(uint8_t *p, const void *src, size_t n) {
  return put_bytes(put_u16(p, (uint16_t)n), src, n);
}

static uint64_t load_le(const uint8_t *p, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* The getters return 0, or -1 leaving *src unmoved when fewer than the
 * wanted bytes remain before end. */
static int get_uint(const uint8_t **src, const uint8_t *end, int width, uint64_t *v) {
  if (end - *src < width) return -1;
  *v = load_le(*src, width);
  *src += width;
  return 0;
}

static int get_u16(const uint8_t **src, const uint8_t *end, uint16_t *v) {
  uint64_t x;
  if (get_uint(src, end, 2, &x)) return -1;
  *v = (uint16_t)x;
  return 0;
}

static int get_u32(const uint8_t **src, const uint8_t *end, uint32_t *v) {
  uint64_t x;
  if (get_uint(src, end, 4, &x)) return -1;
  *v = (uint32_t)x;
  return 0;
}

static int get_u64(const uint8_t **src, const uint8_t *end, uint64_t *v) {
  return get_uint(src, end, 8, v);
}

/* Points *bytes at the next n bytes without copying them. */
static int get_bytes(const uint8_t **src, const uint8_t *end, size_t n, const uint8_t **bytes) {
  if ((size_t)(end - *src) < n) return -1;
  *bytes = *src;
  *src += n;
  return 0;
}

static int get_blob(const uint8_t **src, const uint8_t *end, const uint8_t **bytes, uint16_t *n) {
  const uint8_t *p = *src;
  if (get_u16(&p, end, n) || get_bytes(&p, end, *n, bytes)) return -1;
  *src = p;
  return 0;
}

/* ---- framing: header and CRC, shared by both kinds ---- */

static uint8_t *put_header(uint8_t *p, uint16_t kind, size_t total_length) {
  p = put_u32(p, MORI_WIRE_MAGIC);
  p = put_u16(p, MORI_WIRE_VERSION);
  p = put_u16(p, kind);
  return put_u32(p, (uint32_t)total_length);
}

static void put_crc(uint8_t *buf, uint8_t *p) {
  put_u32(p, mori_crc32c(0, buf, (size_t)(p - buf)));
}

/* Checks the frame in the documented order (header truncation, magic,
 * version, kind, length, CRC) and returns the body as [*body, *body_end).
 * A total_length outside [min_total, max_total] is a length error even when
 * the buffer is shorter, so a huge claimed length never reads as truncation. */
static int decode_frame(const uint8_t *buf, size_t len, uint16_t kind, size_t min_total,
                        size_t max_total, const uint8_t **body, const uint8_t **body_end) {
  const uint8_t *p = buf, *end = buf + len;
  uint32_t magic, total;
  uint16_t version, got_kind;

  if (get_u32(&p, end, &magic) || get_u16(&p, end, &version) || get_u16(&p, end, &got_kind) ||
      get_u32(&p, end, &total))
    return MORI_WIRE_ETRUNCATED;
  if (magic != MORI_WIRE_MAGIC) return MORI_WIRE_EMAGIC;
  if (version != MORI_WIRE_VERSION) return MORI_WIRE_EVERSION;
  if (got_kind != kind) return MORI_WIRE_EKIND;
  if (total < min_total || total > max_total) return MORI_WIRE_ELENGTH;
  if (total > len) return MORI_WIRE_ETRUNCATED;
  if (total < len) return MORI_WIRE_ELENGTH;

  /* min_total covers header and CRC, and total == len: the CRC is in bounds. */
  const uint8_t *crc_at = buf + total - CRC_SIZE;
  if (load_le(crc_at, CRC_SIZE) != mori_crc32c(0, buf, total - CRC_SIZE)) return MORI_WIRE_ECRC;
  *body = p;
  *body_end = crc_at;
  return MORI_WIRE_OK;
}

/* ---- request ---- */

/* Field checks shared by encoder and decoder, in their fixed order: an
 * encoder that emits only what the decoder accepts keeps both canonical. */
/* A socket name is a path of the conservative set MORI_WIRE_SOCKET_CHARS:
 * no control, no byte from 0x80 (C1, 8-bit CSI, UTF-8), no space, quote,
 * backslash or glob character reaches the messages that name it. */
int mori_wire_socket_name_char_ok(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c != '\0' && strchr("/._+,=@~-", c) != NULL);
}

int mori_wire_socket_name_ok(const uint8_t *name, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (!mori_wire_socket_name_char_ok(name[i])) return 0;
  return 1;
}

static int check_request(const mori_request *r, const uint8_t *name, size_t name_len,
                         size_t fabric_len) {
  if (r->world_size == 0 || r->world_size > MORI_WIRE_MAX_WORLD || r->rank >= r->world_size)
    return MORI_WIRE_ERANK;
  if (r->alloc_size == 0 || r->buffer_size > r->signal_pad_offset ||
      r->signal_pad_offset > r->alloc_size)
    return MORI_WIRE_ESIZE;
  /* No pad: the offset is pinned to alloc_size, so there is one encoding. */
  if (r->signal_pad_size == 0 && r->signal_pad_offset != r->alloc_size) return MORI_WIRE_ESIZE;
  /* The torch pad, then the private slots' areas of the same size. */
  if (r->signal_pad_size > (r->alloc_size - r->signal_pad_offset) / MORI_WIRE_SIGNAL_AREAS)
    return MORI_WIRE_ESIZE;
  if (r->signal_slots_used >> MORI_WIRE_SIGNAL_SLOTS) return MORI_WIRE_ESLOTS;

  int is_fd = r->handle_type == hipMemHandleTypePosixFileDescriptor;
  int is_fabric = r->handle_type == hipMemHandleTypeFabric;
  if (!is_fd && !is_fabric) return MORI_WIRE_EHANDLE;
  if (fabric_len != (is_fabric ? MORI_WIRE_FABRIC_SIZE : 0)) return MORI_WIRE_EHANDLE;

  if (name_len > MORI_WIRE_SOCKET_NAME_MAX || (name_len > 0) != is_fd) return MORI_WIRE_ESTRING;
  if (!mori_wire_socket_name_ok(name, name_len)) return MORI_WIRE_ESTRING;
  return MORI_WIRE_OK;
}

static size_t fabric_len_of(const mori_request *r) {
  return r->handle_type == hipMemHandleTypeFabric ? MORI_WIRE_FABRIC_SIZE : 0;
}

size_t mori_wire_request_size(const mori_request *r) {
  size_t name_len = strnlen(r->socket_name, MORI_WIRE_SOCKET_NAME_MAX + 1);
  return HEADER_SIZE + REQUEST_FIXED_SIZE + 2 + name_len + 2 + fabric_len_of(r) + CRC_SIZE;
}

int mori_wire_encode_request(const mori_request *r, uint8_t *buf, size_t cap, size_t *len) {
  size_t name_len = strnlen(r->socket_name, MORI_WIRE_SOCKET_NAME_MAX + 1);
  size_t fabric_len = fabric_len_of(r);
  int rc = check_request(r, (const uint8_t *)r->socket_name, name_len, fabric_len);
  if (rc) return rc;
  size_t total = mori_wire_request_size(r);
  if (cap < total) return MORI_WIRE_ENOSPACE;

  uint8_t *p = put_header(buf, MORI_WIRE_KIND_REQUEST, total);
  p = put_u32(p, r->rank);
  p = put_u32(p, r->world_size);
  p = put_u64(p, r->alloc_size);
  p = put_u64(p, r->buffer_size);
  p = put_u64(p, r->signal_pad_offset);
  p = put_u64(p, r->signal_pad_size);
  p = put_u32(p, (uint32_t)r->device);
  p = put_u32(p, r->pid);
  p = put_u32(p, r->uid);
  p = put_bytes(p, r->host_id, MORI_WIRE_HOST_ID_SIZE);
  p = put_u32(p, r->handle_type);
  p = put_u64(p, r->nonce);
  p = put_u32(p, r->signal_slots_used);
  p = put_blob(p, r->socket_name, name_len);
  p = put_blob(p, r->fabric, fabric_len);
  put_crc(buf, p);
  if (len) *len = total;
  return MORI_WIRE_OK;
}

/* Structural parse of the body: any shortfall means total_length
 * disagrees with the body.  The two blobs are returned unvalidated. */
static int get_request_body(const uint8_t **src, const uint8_t *end, mori_request *r,
                            const uint8_t **name, uint16_t *name_len, const uint8_t **fabric,
                            uint16_t *fabric_len) {
  uint32_t device;
  const uint8_t *host_id;
  if (get_u32(src, end, &r->rank) || get_u32(src, end, &r->world_size) ||
      get_u64(src, end, &r->alloc_size) || get_u64(src, end, &r->buffer_size) ||
      get_u64(src, end, &r->signal_pad_offset) || get_u64(src, end, &r->signal_pad_size) ||
      get_u32(src, end, &device) || get_u32(src, end, &r->pid) || get_u32(src, end, &r->uid) ||
      get_bytes(src, end, MORI_WIRE_HOST_ID_SIZE, &host_id) || get_u32(src, end, &r->handle_type) ||
      get_u64(src, end, &r->nonce) || get_u32(src, end, &r->signal_slots_used) ||
      get_blob(src, end, name, name_len) ||
      get_blob(src, end, fabric, fabric_len))
    return MORI_WIRE_ELENGTH;
  r->device = (int32_t)device;
  memcpy(r->host_id, host_id, MORI_WIRE_HOST_ID_SIZE);
  return MORI_WIRE_OK;
}

int mori_wire_decode_request(const uint8_t *buf, size_t len, mori_request *out) {
  const uint8_t *src, *end, *name, *fabric;
  uint16_t name_len, fabric_len;
  mori_request r;
  int rc;

  memset(&r, 0, sizeof r);
  rc = decode_frame(buf, len, MORI_WIRE_KIND_REQUEST, REQUEST_MIN_SIZE, MORI_WIRE_REQUEST_MAX, &src,
                    &end);
  if (rc) return rc;
  rc = get_request_body(&src, end, &r, &name, &name_len, &fabric, &fabric_len);
  if (rc) return rc;
  rc = check_request(&r, name, name_len, fabric_len);
  if (rc) return rc;
  if (src != end) return MORI_WIRE_ETRAILING;

  memcpy(r.socket_name, name, name_len); /* r was zeroed: NUL-terminated */
  memcpy(r.fabric, fabric, fabric_len);
  *out = r;
  return MORI_WIRE_OK;
}

/* ---- datagram ---- */

/* Each type of datagram: its kind on the wire and its one length.  The
 * secret of a challenge or an answer follows the common body. */
static const struct {
  uint16_t kind;
  size_t size;
} datagram_types[MORI_DATAGRAM__TYPES] = {
    [MORI_DATAGRAM_FD] = {MORI_WIRE_KIND_DATAGRAM, MORI_WIRE_DATAGRAM_SIZE},
    [MORI_DATAGRAM_CHALLENGE] = {MORI_WIRE_KIND_CHALLENGE, MORI_WIRE_PROOF_SIZE},
    [MORI_DATAGRAM_ANSWER] = {MORI_WIRE_KIND_ANSWER, MORI_WIRE_PROOF_SIZE},
};

static int check_datagram(const mori_datagram *d) {
  if (d->type >= MORI_DATAGRAM__TYPES) return MORI_WIRE_EKIND;
  if (d->sender_rank >= MORI_WIRE_MAX_WORLD || d->receiver_rank >= MORI_WIRE_MAX_WORLD)
    return MORI_WIRE_ERANK;
  return MORI_WIRE_OK;
}

int mori_wire_encode_datagram(const mori_datagram *d, uint8_t *buf, size_t cap, size_t *len) {
  int rc = check_datagram(d);
  if (rc) return rc;
  size_t size = datagram_types[d->type].size;
  if (cap < size) return MORI_WIRE_ENOSPACE;

  uint8_t *p = put_header(buf, datagram_types[d->type].kind, size);
  p = put_u64(p, d->window_seq);
  p = put_u32(p, d->sender_rank);
  p = put_u32(p, d->receiver_rank);
  p = put_u64(p, d->sender_nonce);
  p = put_u64(p, d->receiver_nonce);
  if (d->type != MORI_DATAGRAM_FD) p = put_u64(p, d->challenge);
  put_crc(buf, p);
  if (len) *len = size;
  return MORI_WIRE_OK;
}

/* The type whose kind the header names; an fd datagram's if it names none
 * (the frame check then says the kind is wrong). */
static uint32_t datagram_type_of(const uint8_t *buf, size_t len) {
  uint64_t kind = len >= 8 ? load_le(buf + 6, 2) : 0;
  for (uint32_t t = 0; t < MORI_DATAGRAM__TYPES; t++)
    if (datagram_types[t].kind == kind) return t;
  return MORI_DATAGRAM_FD;
}

int mori_wire_decode_datagram(const uint8_t *buf, size_t len, mori_datagram *out) {
  const uint8_t *src, *end;
  mori_datagram d = {0};
  int rc;

  d.type = datagram_type_of(buf, len);
  size_t size = datagram_types[d.type].size;
  rc = decode_frame(buf, len, datagram_types[d.type].kind, size, size, &src, &end);
  if (rc) return rc;
  /* The frame pinned total_length to the type's size, so the body is
   * exactly as long as the reads below and they cannot fall short. */
  if (get_u64(&src, end, &d.window_seq) || get_u32(&src, end, &d.sender_rank) ||
      get_u32(&src, end, &d.receiver_rank) || get_u64(&src, end, &d.sender_nonce) ||
      get_u64(&src, end, &d.receiver_nonce) ||
      (d.type != MORI_DATAGRAM_FD && get_u64(&src, end, &d.challenge)))
    return MORI_WIRE_ELENGTH;
  rc = check_datagram(&d);
  if (rc) return rc;
  if (src != end) return MORI_WIRE_ETRAILING;
  *out = d;
  return MORI_WIRE_OK;
}
