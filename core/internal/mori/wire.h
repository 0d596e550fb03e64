/*
 * wire.h - wire format v1: the rendezvous request every rank publishes
 * through the store, and the datagram that carries an fd between ranks.
 *
 * Explicit little-endian field encoding (never a memcpy of a struct):
 *   u32 magic | u16 version | u16 kind | u32 total_length | body | u32 crc32c
 * The CRC32C (Castagnoli) covers every byte before it.  Decoders take
 * (buffer, length), never read past the end, and return one specific
 * MORI_WIRE_E* per defect; encode(decode(x)) == x for every accepted x.
 */
#ifndef MORI_WIRE_H
#define MORI_WIRE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MORI_WIRE_MAGIC 0x4d534d59u /* "YMSM" on the wire: bytes 59 4d 53 4d */
#define MORI_WIRE_VERSION 1
#define MORI_WIRE_KIND_REQUEST 1
#define MORI_WIRE_KIND_DATAGRAM 2  /* carries an fd */
#define MORI_WIRE_KIND_CHALLENGE 3 /* the proof that a socket's reader is a member: a secret */
#define MORI_WIRE_KIND_ANSWER 4    /* ... and the same secret back from that member */
#define MORI_WIRE_SOCKET_NAME_MAX 107 /* sun_path less the NUL */
#define MORI_WIRE_FABRIC_SIZE 64
#define MORI_WIRE_HOST_ID_SIZE 16
#define MORI_WIRE_MAX_WORLD 4096
#define MORI_WIRE_REQUEST_MAX 512     /* no valid request is longer */
/* The private signal area of a block holds this many slots, one per window
 * (group) on the block; a slot is MORI_WIRE_SIGNAL_REGIONS areas of
 * signal_pad_size bytes (barrier phases; captured signals and their
 * acknowledgements; eager signals and theirs: see core/src/signal.c).  A block holds torch's pad and then these, so
 * MORI_WIRE_SIGNAL_AREAS pads in all. */
#define MORI_WIRE_SIGNAL_SLOTS 8
#define MORI_WIRE_SIGNAL_REGIONS 5
#define MORI_WIRE_SIGNAL_AREAS (1 + MORI_WIRE_SIGNAL_SLOTS * MORI_WIRE_SIGNAL_REGIONS)

enum {
  MORI_WIRE_OK = 0,
  MORI_WIRE_ETRUNCATED = -1, /* shorter than its header or than total_length */
  MORI_WIRE_EMAGIC = -2,
  MORI_WIRE_EVERSION = -3,
  MORI_WIRE_EKIND = -4,      /* a datagram where a request was expected, or unknown */
  MORI_WIRE_ELENGTH = -5,    /* total_length disagrees with the buffer or the body */
  MORI_WIRE_ECRC = -6,
  MORI_WIRE_ERANK = -7,      /* rank >= world_size, world_size 0 or > MAX_WORLD */
  MORI_WIRE_ESIZE = -8,      /* buffer/pad/alloc sizes inconsistent */
  MORI_WIRE_EHANDLE = -9,    /* unknown handle type, or blob length wrong for it */
  MORI_WIRE_ESTRING = -10,   /* socket name too long, a byte outside MORI_WIRE_SOCKET_CHARS, or empty for fd */
  MORI_WIRE_ETRAILING = -11, /* bytes after the last field before the CRC */
  MORI_WIRE_ENOSPACE = -12,  /* encode: buffer too small */
  MORI_WIRE_ESLOTS = -13     /* signal slot bitmap names a slot past MORI_WIRE_SIGNAL_SLOTS */
};
const char *mori_wire_strerror(int code);

/* The characters a socket name may carry, as messages name them: a
 * conservative path set (no control, no byte from 0x80, no space, quote,
 * backslash, colon or glob character), so that a name another rank
 * published is plain text wherever it is shown. */
#define MORI_WIRE_SOCKET_CHARS "[A-Za-z0-9/._+,=@~-]"
int mori_wire_socket_name_char_ok(unsigned char c);
/* 1 if every one of the len bytes is of MORI_WIRE_SOCKET_CHARS. */
int mori_wire_socket_name_ok(const uint8_t *name, size_t len);

typedef struct mori_request {
  uint32_t rank, world_size;
  uint64_t alloc_size;        /* bytes of physical memory (granularity multiple) */
  uint64_t buffer_size;       /* bytes the user asked for */
  uint64_t signal_pad_offset; /* from the block base; == alloc_size when no pad */
  uint64_t signal_pad_size;   /* torch-visible pad bytes (0: none) */
  int32_t device;
  uint32_t pid, uid;
  uint8_t host_id[MORI_WIRE_HOST_ID_SIZE]; /* boot id */
  uint32_t handle_type;       /* hipMemHandleTypePosixFileDescriptor or Fabric */
  uint64_t nonce;             /* random per request; datagrams echo the receiver's */
  uint32_t signal_slots_used; /* bit s: signal slot s of this block is taken by
                                 another window (the group picks a slot free on all) */
  char socket_name[MORI_WIRE_SOCKET_NAME_MAX + 1]; /* fd path; "" for fabric */
  uint8_t fabric[MORI_WIRE_FABRIC_SIZE];           /* fabric path only */
} mori_request;

/* What a datagram of the fd channel is: the fd itself, or one half of the
 * proof that must come first, that the process reading the receiver's
 * socket is the one its request names (docs/fd-channel.md). */
enum {
  MORI_DATAGRAM_FD = 0,        /* wire kind 2, MORI_WIRE_DATAGRAM_SIZE bytes, one fd */
  MORI_DATAGRAM_CHALLENGE = 1, /* wire kind 3, MORI_WIRE_PROOF_SIZE bytes, no fd */
  MORI_DATAGRAM_ANSWER = 2,    /* wire kind 4, MORI_WIRE_PROOF_SIZE bytes, no fd */
  MORI_DATAGRAM__TYPES = 3
};

typedef struct mori_datagram {
  uint64_t window_seq;     /* the group's rendezvous sequence number */
  uint32_t sender_rank;
  uint32_t receiver_rank;
  uint64_t sender_nonce;   /* from the sender's request */
  uint64_t receiver_nonce; /* from the receiver's request */
  uint32_t type;           /* MORI_DATAGRAM_* */
  uint64_t challenge;      /* a challenge's secret, echoed by its answer; not on the
                              wire of an fd datagram (decoded as 0) */
} mori_datagram;

size_t mori_wire_request_size(const mori_request *r);
int mori_wire_encode_request(const mori_request *r, uint8_t *buf, size_t cap, size_t *len);
int mori_wire_decode_request(const uint8_t *buf, size_t len, mori_request *out);

#define MORI_WIRE_DATAGRAM_SIZE 48 /* an fd datagram */
#define MORI_WIRE_PROOF_SIZE 56    /* a challenge or an answer */
int mori_wire_encode_datagram(const mori_datagram *d, uint8_t *buf, size_t cap, size_t *len);
int mori_wire_decode_datagram(const uint8_t *buf, size_t len, mori_datagram *out);

uint32_t mori_crc32c(uint32_t crc, const void *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
