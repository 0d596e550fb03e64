/*
 * text.h - the one escape for text another process wrote, shared by every
 * layer (hip_shim/seam/text.c, linked hidden into the shim, the core and the
 * tools with the strict reader of mori/values.h).
 */
#ifndef MORI_TEXT_H
#define MORI_TEXT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The one escape for every byte another process wrote (store text, socket
 * names, group names echoed back, a peer's error text), fit for a message
 * or a log line: C0 controls, DEL, C1 controls (raw 0x80-0x9f and
 * U+0080-U+009F), every byte of invalid UTF-8 (overlong, surrogate, cut
 * short, past U+10FFFF) and the bidirectional and line-breaking controls
 * are written \xNN, the backslash itself \\, so nothing reaches a terminal
 * as a control and a peer's "\x1b" never reads as an escaped ESC; valid
 * UTF-8 text is kept.  At most max bytes of it are shown, never cut inside
 * an escape or a character, then "... (N bytes)".  out (cap bytes) always
 * ends with a NUL; returns out. */
const char *mori__escape(char *out, size_t cap, const void *text, size_t len, size_t max);
/* 1 if mori__escape would show the len bytes of text as they are (no
 * byte it escapes, no backslash); 0 otherwise. */
int mori__text_is_plain(const void *text, size_t len);

#ifdef __cplusplus
}
#endif
#endif
