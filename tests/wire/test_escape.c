/*
 * test_escape.c - mori__escape, the one escape for text another process
 * wrote: each class of byte it must not let through (C0, DEL, C1 raw and as
 * UTF-8, invalid UTF-8, bidirectional controls, the backslash), the text
 * it keeps, and its bounds.
 */
#include "mori_cmocka.h"

#include <stdint.h>
#include <string.h>

#include "mori/error_internal.h"

static const char *esc(const char *in, size_t len) {
  static char out[512];
  return mori__escape(out, sizeof out, in, len, 400);
}
#define ESC(lit) esc(lit, sizeof lit - 1)

static void c0_controls_are_escaped(void **s) {
  (void)s;
  assert_string_equal(ESC("a\x01\x1b[2J\r\n\t\a"), "a\\x01\\x1b[2J\\x0d\\x0a\\x09\\x07");
  assert_string_equal(esc("a\0b", 3), "a\\x00b");
}

static void del_is_escaped(void **s) {
  (void)s;
  assert_string_equal(ESC("x\x7fy"), "x\\x7fy");
}

static void c1_controls_raw_and_as_utf8_are_escaped(void **s) {
  (void)s;
  /* 8-bit CSI, as a terminal reads it, and every other C1 byte */
  assert_string_equal(ESC("\x9b" "2J\x9bH"), "\\x9b2J\\x9bH");
  assert_string_equal(ESC("\x80\x85\x9f"), "\\x80\\x85\\x9f");
  /* U+009B, U+0085 in UTF-8 */
  assert_string_equal(ESC("\xc2\x9b" "2J \xc2\x85"), "\\xc2\\x9b2J \\xc2\\x85");
}

static void invalid_utf8_is_escaped_byte_by_byte(void **s) {
  (void)s;
  assert_string_equal(ESC("\xff\xfe"), "\\xff\\xfe");
  assert_string_equal(ESC("\xc0\xaf"), "\\xc0\\xaf");         /* overlong '/' */
  assert_string_equal(ESC("\xe0\x80\xaf"), "\\xe0\\x80\\xaf"); /* overlong, 3 bytes */
  assert_string_equal(ESC("\xed\xa0\x80"), "\\xed\\xa0\\x80"); /* a surrogate */
  assert_string_equal(ESC("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80"); /* past U+10FFFF */
  assert_string_equal(ESC("a\xe2\x82"), "a\\xe2\\x82");       /* cut short */
  assert_string_equal(ESC("\xe2(b"), "\\xe2(b");              /* not continued */
}

static void bidirectional_and_line_controls_are_escaped(void **s) {
  (void)s;
  assert_string_equal(ESC("a\xe2\x80\xaez"), "a\\xe2\\x80\\xaez"); /* U+202E */
  assert_string_equal(ESC("\xe2\x81\xa6"), "\\xe2\\x81\\xa6");     /* U+2066 */
  assert_string_equal(ESC("\xe2\x80\xa8"), "\\xe2\\x80\\xa8");     /* U+2028 */
}

static void the_backslash_is_escaped(void **s) {
  (void)s;
  /* a peer's text "\x1b" must not read as an escaped ESC */
  assert_string_equal(ESC("\\x1b"), "\\\\x1b");
  assert_string_equal(ESC("a\\\x1b"), "a\\\\\\x1b");
}

static void valid_utf8_text_is_kept(void **s) {
  (void)s;
  assert_string_equal(ESC("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 /tmp/x-y_z.1"),
                      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 /tmp/x-y_z.1");
}

static void output_is_bounded_and_never_cut_inside_an_escape(void **s) {
  (void)s;
  char in[3000], out[128];
  memset(in, '\x9b', sizeof in);
  mori__escape(out, sizeof out, in, sizeof in, 400);
  assert_true(strlen(out) < sizeof out);
  assert_non_null(strstr(out, "... (3000 bytes)"));
  /* whole escapes only before the tail */
  const char *tail = strstr(out, "...");
  assert_int_equal((tail - out) % 4, 0);
  /* max: at most max bytes of the input are shown */
  mori__escape(out, sizeof out, "abcdef", 6, 3);
  assert_string_equal(out, "abc... (6 bytes)");
  /* a character is kept whole or not at all */
  char euro[64];
  for (int i = 0; i < 63; i += 3) memcpy(in + i, "\xe2\x82\xac", 3);
  mori__escape(euro, sizeof euro, in, 63, 63);
  tail = strstr(euro, "...");
  assert_non_null(tail);
  assert_int_equal((tail - euro) % 3, 0);
  /* a cap of 1 holds the NUL alone */
  mori__escape(euro, 1, "abc", 3, 3);
  assert_string_equal(euro, "");
}

/* The text is cut where the room its longest tail ("... (N bytes)", N of
 * 20 digits) leaves ends, not a character sooner: that tail and the NUL end
 * the buffer exactly. */
static void a_cut_text_keeps_all_the_room_its_longest_tail_leaves(void **s) {
  (void)s;
  char in[64], out[48];
  memset(in, 'a', sizeof in);
  mori__escape(out, sizeof out, in, SIZE_MAX, sizeof in);
  assert_string_equal(out, "aaaaaaaaaaaaaaa... (18446744073709551615 bytes)");
  assert_int_equal(strlen(out), sizeof out - 1);
}

/* A buffer of no room gets nothing written, not even its terminator. */
static void no_room_writes_nothing(void **s) {
  (void)s;
  char out[8];
  memset(out, 'z', sizeof out);
  assert_ptr_equal(mori__escape(out, 0, "abc", 3, 3), out);
  for (size_t i = 0; i < sizeof out; i++) assert_int_equal(out[i], 'z');
}

/* What a group name must be: text a terminal shows as itself, which is
 * what the escape would leave as it is. */
static void plain_text_is_what_the_escape_keeps(void **s) {
  (void)s;
  static const char *const refused[] = {"a\x7f", "a\x1b[2J", "\x9b", "\xc2\x9b", "a\\b",
                                        "\xff", "\t"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    assert_false(mori__text_is_plain(refused[i], strlen(refused[i])));
  static const char *const kept[] = {"group-0", "~/.a_b=c,d@e+f", "gr\xc3\xbcppe", " "};
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
    assert_true(mori__text_is_plain(kept[i], strlen(kept[i])));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(c0_controls_are_escaped),
      cmocka_unit_test(del_is_escaped),
      cmocka_unit_test(c1_controls_raw_and_as_utf8_are_escaped),
      cmocka_unit_test(invalid_utf8_is_escaped_byte_by_byte),
      cmocka_unit_test(bidirectional_and_line_controls_are_escaped),
      cmocka_unit_test(the_backslash_is_escaped),
      cmocka_unit_test(valid_utf8_text_is_kept),
      cmocka_unit_test(output_is_bounded_and_never_cut_inside_an_escape),
      cmocka_unit_test(a_cut_text_keeps_all_the_room_its_longest_tail_leaves),
      cmocka_unit_test(plain_text_is_what_the_escape_keeps),
      cmocka_unit_test(no_room_writes_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
