/*
 * test_foreign_text.c - bytes another process wrote reach an error only
 * through the one escape: a request forged in the store with 8-bit CSI
 * (0x9b) in its socket name is refused by the decoder and nothing raw
 * reaches either rank; a socket base outside the set a request may carry
 * is refused by the rank that would publish it; a group name that is not
 * plain text is refused, shown escaped (labels: security).
 */
#include "sec_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mori/error_internal.h"
#include "mori/wire.h"

enum { WORLD = 2 };

/* No C0, DEL, C1 or other byte from 0x80 in a rank's error: every one of
 * them would have reached the terminal that prints it. */
static void assert_no_raw_byte(int rank, const char *line) {
  const char *err = sec_err(line);
  for (const unsigned char *p = (const unsigned char *)err; *p; p++)
    if (*p < 0x20 || *p >= 0x7f)
      fail_msg("rank %d's error carries raw byte 0x%02x at byte %d: %s", rank, *p,
               (int)((const char *)p - err), err);
}

/* No rank succeeded, and what each says carries no raw byte. */
static void assert_every_rank_failed_escaped(const mori_rank_result *res) {
  for (int r = 0; r < WORLD; r++) {
    print_message("rank %d: %.300s\n", r, sec_err(res[r].msg));
    if (sec_num(res[r].msg, "rc") == 0) fail_msg("rank %d succeeded: %s", r, res[r].msg);
    assert_no_raw_byte(r, res[r].msg);
  }
}

/* Every store operation of this rank runs without the launcher's job
 * secret, so that a value rewritten below is taken as it is written: the
 * decoder, not the seal, is what this file pins. */
static void no_secret(const char *key, char kind, void *ctx) {
  (void)key;
  (void)kind;
  (void)ctx;
  unsetenv("MORI_SYMM_JOB_SECRET");
}

/* Rank 0 reads rank 1's request as another process rewrote it: "2K" and
 * 8-bit CSI in place of the last bytes of its socket name (erase the line,
 * as ESC [ 2 K does), the CRC made good again. */
static void forge_the_socket_name(const char *key, void **value, size_t *len, void *ctx) {
  (void)ctx;
  mori_request q;
  if (!strstr(key, "/req/1") || mori_wire_decode_request(*value, *len, &q) != MORI_WIRE_OK)
    return;
  size_t n = strlen(q.socket_name);
  uint8_t *v = *value, *name = memmem(v, *len, q.socket_name, n);
  if (name == NULL || n < 4 || *len < 8) return;
  memcpy(name + n - 3, "\x9b" "2K", 3);
  uint32_t crc = mori_crc32c(0, v, *len - 4);
  for (int i = 0; i < 4; i++) v[*len - 4 + i] = (uint8_t)(crc >> (8 * i));
}

static void a_forged_socket_name_with_8_bit_csi_gives_an_escaped_error(void **s) {
  (void)s;
  char *dir = sec_tmpdir("csi");
  assert_non_null(dir);
  sec_plan plan = {0};
  for (int r = 0; r < WORLD; r++) plan.rank[r].before_op = no_secret;
  plan.rank[0].rewrite = forge_the_socket_name;
  mori_rank_result res[WORLD];
  sec_launch(dir, WORLD, &plan, res);
  assert_every_rank_failed_escaped(res);
  if (!strstr(res[0].msg, "request from rank 1 rejected: bad socket name"))
    fail_msg("rank 0 does not refuse rank 1's forged request: %s", sec_err(res[0].msg));
  sec_remove_tree(dir);
  free(dir);
}

static void a_socket_base_outside_the_request_set_is_refused_shown_escaped(void **s) {
  (void)s;
  char *dir = sec_tmpdir("base");
  assert_non_null(dir);
  char base[512];
  snprintf(base, sizeof base, "%s/so\x9b" "cket base", dir);
  assert_int_equal(mkdir(base, 0700), 0);
  sec_plan plan = {0};
  plan.rank[1].socket_dir = base;
  mori_rank_result res[WORLD];
  sec_launch(dir, WORLD, &plan, res);
  assert_every_rank_failed_escaped(res);
  if (!strstr(res[1].msg, "so\\x9bcket base/") ||
      !strstr(res[1].msg, "has a character outside " MORI_WIRE_SOCKET_CHARS))
    fail_msg("rank 1 does not refuse its socket base by name: %s", sec_err(res[1].msg));
  sec_remove_tree(dir);
  free(dir);
}

static void a_group_name_that_is_not_plain_text_is_refused_shown_escaped(void **s) {
  (void)s;
  char *dir = sec_tmpdir("group");
  assert_non_null(dir);
  mori_store *store = sec_store_client(dir);
  assert_non_null(store);
  static const struct {
    const char *group, *shown;
  } cases[] = {{"g\x1b[2J", "g\\x1b[2J"},
               {"g\x9b" "2J", "g\\x9b2J"},
               {"g\\x1b", "g\\\\x1b"},
               {"g\xc3(", "g\\xc3("}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = mori_symm_rendezvous_abort(cases[i].group, 0, 2, store, "test");
    const char *err = mori_last_error();
    print_message("%s\n", err);
    if (rc != MORI_EINVAL || !strstr(err, cases[i].shown) || !strstr(err, "not UTF-8 text"))
      fail_msg("group %zu: rc %d, not refused shown as '%s': %s", i, rc, cases[i].shown, err);
    for (const unsigned char *p = (const unsigned char *)err; *p; p++)
      if (*p < 0x20 || *p >= 0x7f) fail_msg("group %zu: raw byte 0x%02x in %s", i, *p, err);
  }
  /* text that needs no escape is a group name like any other */
  assert_int_equal(mori_symm_rendezvous_abort("tp:0 caf\xc3\xa9", 0, 1, store, "test"), 0);
  store->destroy(store);
  sec_remove_tree(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_forged_socket_name_with_8_bit_csi_gives_an_escaped_error),
      cmocka_unit_test(a_socket_base_outside_the_request_set_is_refused_shown_escaped),
      cmocka_unit_test(a_group_name_that_is_not_plain_text_is_refused_shown_escaped),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
