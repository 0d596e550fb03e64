/*
 * test_first_error.c - mori__first_error, the first failure of several
 * steps kept whole: a later failure never overwrites it, a success keeps
 * nothing, a cause kept with mori__first_set comes back whatever its code,
 * and a message as long as the thread's room comes back byte for byte.
 */
#include "mori_cmocka.h"

#include <string.h>

#include "mori/error_internal.h"

static void a_later_failure_does_not_overwrite_the_first(void **s) {
  (void)s;
  mori__first_error first = {0};
  assert_int_equal(mori__first_keep(&first, mori__error(MORI_EHIP, "step 1: hipMemUnmap failed")),
                   MORI_EHIP);
  assert_int_equal(mori__first_keep(&first, mori__error(MORI_EIO, "step 2: close failed")),
                   MORI_EIO);
  assert_int_equal(mori__first_keep(&first, mori__error(MORI_ESTATE, "step 3: broken")),
                   MORI_ESTATE);
  assert_int_equal(mori__first_end(&first, MORI_EPROTO), MORI_EHIP);
  assert_string_equal(mori_last_error(), "step 1: hipMemUnmap failed");
}

static void a_success_keeps_nothing(void **s) {
  (void)s;
  mori__first_error first = {0};
  mori__error(MORI_OK, "an old message");
  assert_int_equal(mori__first_keep(&first, 0), 0);
  /* the first failure may come after a success */
  assert_int_equal(mori__first_keep(&first, mori__error(MORI_EIO, "the failure")), MORI_EIO);
  mori__error(MORI_OK, "later");
  assert_int_equal(mori__first_end(&first, 0), MORI_EIO);
  assert_string_equal(mori_last_error(), "the failure");
}

static void with_nothing_kept_the_end_is_its_argument_and_the_message_stays(void **s) {
  (void)s;
  mori__first_error first = {0};
  (void)mori__first_keep(&first, 0);
  mori__error(MORI_EIO, "the last step's own message");
  assert_int_equal(mori__first_end(&first, MORI_EIO), MORI_EIO);
  assert_string_equal(mori_last_error(), "the last step's own message");
  assert_int_equal(mori__first_end(&first, 0), 0);
}

static void a_cause_set_wins_over_the_cleanup_and_comes_back_with_its_code(void **s) {
  (void)s;
  mori__first_error cause;
  mori__error(MORI_EMISMATCH, "rank 1 differs");
  assert_int_equal(mori__first_set(&cause, MORI_EMISMATCH), MORI_EMISMATCH);
  (void)mori__first_keep(&cause, mori__error(MORI_EIO, "publishing the abort failed"));
  assert_int_equal(mori__first_end(&cause, 0), MORI_EMISMATCH);
  assert_string_equal(mori_last_error(), "rank 1 differs");
}

static void a_message_set_with_code_zero_comes_back_too(void **s) {
  (void)s;
  mori__first_error call;
  mori_clear_error();
  (void)mori__first_set(&call, MORI_OK); /* an empty message is a message */
  mori__error(MORI_EHIP, "a teardown that only goes to the log");
  assert_int_equal(mori__first_end(&call, MORI_EHIP), MORI_OK);
  assert_string_equal(mori_last_error(), "");
}

static void a_set_replaces_what_was_kept(void **s) {
  (void)s;
  mori__first_error f = {0};
  (void)mori__first_keep(&f, mori__error(MORI_EIO, "first"));
  (void)mori__first_set(&f, mori__error(MORI_EPEER, "set over it"));
  assert_int_equal(mori__first_end(&f, 0), MORI_EPEER);
  assert_string_equal(mori_last_error(), "set over it");
}

static void a_message_of_the_whole_room_comes_back_whole(void **s) {
  (void)s;
  static char longest[MORI_ERROR_MESSAGE_MAX];
  memset(longest, 'x', sizeof longest - 1);
  longest[sizeof longest - 1] = '\0';
  mori__first_error first = {0};
  (void)mori__first_keep(&first, mori__error(MORI_EIO, "%s", longest));
  assert_int_equal(strlen(mori_last_error()), sizeof longest - 1);
  mori__error(MORI_EHIP, "short");
  assert_int_equal(mori__first_end(&first, 0), MORI_EIO);
  assert_string_equal(mori_last_error(), longest);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_later_failure_does_not_overwrite_the_first),
      cmocka_unit_test(a_success_keeps_nothing),
      cmocka_unit_test(with_nothing_kept_the_end_is_its_argument_and_the_message_stays),
      cmocka_unit_test(a_cause_set_wins_over_the_cleanup_and_comes_back_with_its_code),
      cmocka_unit_test(a_message_set_with_code_zero_comes_back_too),
      cmocka_unit_test(a_set_replaces_what_was_kept),
      cmocka_unit_test(a_message_of_the_whole_room_comes_back_whole),
  };
  return mori_run_tests(argc, argv, tests);
}
