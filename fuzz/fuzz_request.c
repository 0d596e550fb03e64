/*
 * fuzz_request.c - fuzz target for the wire v1 request decoder.  Any byte
 * string must decode to a request or to one documented error, and every
 * accepted request must re-encode to the same bytes.
 *
 * Input: one mode byte, then the payload.  Mode bit 0 clear: the payload is
 * the message as received.  Set: the payload is a request body, framed here
 * with a valid header, total_length and CRC32C, so that mutations reach the
 * field checks instead of dying at the checksum.
 */
#include "fuzz.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static uint8_t framed[MORI_FUZZ_MSG_MAX];
  if (size == 0) return 0;
  const uint8_t *msg = data + 1;
  size_t len = size - 1;
  if (data[0] & 1) {
    len = mori__fuzz_frame(MORI_WIRE_KIND_REQUEST, msg, len, framed, sizeof framed);
    if (len == 0) return 0;
    msg = framed;
  }

  mori_request r;
  int rc = mori_wire_decode_request(msg, len, &r);
  MORI_FUZZ_CHECK(mori__fuzz_is_decode_result(rc), "request decoder returned %d", rc);
  if (rc == MORI_WIRE_OK) mori__fuzz_check_request(&r, msg, len);
  return 0;
}
