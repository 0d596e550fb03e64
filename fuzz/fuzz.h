/*
 * fuzz.h - what the fuzz harnesses share: the wire framing fix-up that gets
 * mutations past the CRC, the properties every accepted message must keep,
 * the fixed world the datagram harness validates against, and a byte reader.
 */
#ifndef MORI_FUZZ_H
#define MORI_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "mori/wire.h"

/* The libFuzzer entry point every harness defines; the replay runner, the
 * libFuzzer driver and AFL++'s driver all call it. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Frame of wire format v1 (wire.h): u32 magic | u16 version | u16 kind |
 * u32 total_length | body | u32 crc32c. */
#define MORI_FUZZ_HEADER_SIZE 12
#define MORI_FUZZ_CRC_SIZE 4
#define MORI_FUZZ_MSG_MAX 4096

/* Wraps body in a valid header for kind with the right total_length and
 * CRC32C, so that a mutated body reaches the field checks.  Returns the
 * message length, or 0 when it would not fit in cap. */
size_t mori__fuzz_frame(uint16_t kind, const uint8_t *body, size_t body_len, uint8_t *out,
                        size_t cap);

/* A broken property: prints the message and aborts, which every engine
 * reports as a crash and the replay runner as a failed test. */
_Noreturn void mori__fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define MORI_FUZZ_CHECK(cond, ...)             \
  do {                                         \
    if (!(cond)) mori__fuzz_fail(__VA_ARGS__); \
  } while (0)

/* 1 if rc is one of the documented results of a decoder. */
int mori__fuzz_is_decode_result(int rc);

/* Properties of an accepted message x that decoded to r/d: encode(r) == x
 * byte for byte, the encoder refuses a buffer one byte short, and x with its
 * last byte cut off or any single bit flipped is rejected. */
void mori__fuzz_check_request(const mori_request *r, const uint8_t *x, size_t len);
void mori__fuzz_check_datagram(const mori_datagram *d, const uint8_t *x, size_t len);

/* The fixed world of the datagram harness and the seed corpora: WORLD ranks
 * of one host on the POSIX-fd path, distinct pids, devices and nonces, one
 * uid; rank SELF receives, at sequence WINDOW_SEQ. */
#define MORI_FUZZ_WORLD 4
#define MORI_FUZZ_SELF 1
#define MORI_FUZZ_WINDOW_SEQ 7
#define MORI_FUZZ_UID 1000
void mori__fuzz_world_request(int rank, int world, uint32_t handle_type, mori_request *r);
/* The secret SELF challenged rank r's socket with, which r's answer echoes. */
uint64_t mori__fuzz_challenge(int rank);
/* The wire kind a datagram seed's mode byte frames its body as (bits 1-2:
 * fd, challenge, answer). */
uint16_t mori__fuzz_datagram_kind(uint8_t mode);

/* A growing, NUL-terminated string, for harnesses that write their own
 * canonical spelling of what a parser returned. */
typedef struct mori__fuzz_text {
  char *s;
  size_t n, cap;
} mori__fuzz_text;

void mori__fuzz_put(mori__fuzz_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reads an input front to back; past the end every read yields 0. */
typedef struct mori__fuzz_reader {
  const uint8_t *p, *end;
} mori__fuzz_reader;

uint8_t mori__fuzz_u8(mori__fuzz_reader *in);
uint16_t mori__fuzz_u16(mori__fuzz_reader *in);
size_t mori__fuzz_left(const mori__fuzz_reader *in);

#endif
