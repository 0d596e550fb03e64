/*
 * text.c - the one escape for every byte another process wrote
 * (mori/text.h): at the bottom, so that the shim (a runtime's file name),
 * the core (store text, socket names, a peer's error) and the tools show
 * foreign text the same way.
 */
#include "mori/text.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The length of the UTF-8 sequence at s (n bytes left) if it is one a
 * terminal shows as text: well formed (shortest form, no surrogate, at most
 * U+10FFFF) and neither a C1 control (U+0080-U+009F) nor a character that
 * reorders or breaks the line it is in (bidirectional controls, U+2028,
 * U+2029); else 0. */
static size_t utf8_text(const unsigned char *s, size_t n) {
  size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
  if (len == 0 || s[0] > 0xf4 || n < len) return 0;
  uint32_t cp = s[0] & (0x7f >> len);
  for (size_t k = 1; k < len; k++) {
    if ((s[k] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[k] & 0x3f);
  }
  static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  if (cp <= 0x9f || (cp >= 0x200e && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
      (cp >= 0x2066 && cp <= 0x2069))
    return 0;
  return len;
}

const char *mori__escape(char *out, size_t cap, const void *text, size_t len, size_t max) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *s = text;
  size_t n = 0, i = 0;
  size_t room = cap > 32 ? cap - 32 : cap; /* what is left keeps the "... (N bytes)" */
  if (cap == 0) return out;
  if (max > len) max = len;
  while (i < max) {
    unsigned char c = s[i];
    size_t take = c >= 0x20 && c < 0x7f ? 1 : c >= 0x80 ? utf8_text(s + i, max - i) : 0;
    size_t width = c == '\\' ? 2 : take ? take : 4;
    if (n + width >= room) break;
    if (c == '\\') {
      out[n++] = '\\';
      out[n++] = '\\';
    } else if (take) {
      memcpy(out + n, s + i, take);
      n += take;
    } else {
      out[n++] = '\\';
      out[n++] = 'x';
      out[n++] = hex[c >> 4];
      out[n++] = hex[c & 15];
    }
    i += take ? take : 1;
  }
  out[n] = '\0';
  if (i < len) snprintf(out + n, cap - n, "... (%zu bytes)", len);
  return out;
}

int mori__text_is_plain(const void *text, size_t len) {
  const unsigned char *s = text;
  for (size_t i = 0; i < len;) {
    size_t take = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\' ? 1
                  : s[i] >= 0x80                             ? utf8_text(s + i, len - i)
                                                             : 0;
    if (take == 0) return 0;
    i += take;
  }
  return 1;
}
