/*
 * test_messages.c - what reaches a rank's error from the store and its
 * peers, from the side of whoever writes into the store: text another
 * process planted arrives escaped and bounded, a join answered with another
 * run's id is named as ids that differ, and a leader whose peers all gave
 * up learns of it as they do; and from the side of a rank that writes it:
 * an abort's cause longer than its buffer is published cut at it (labels:
 * security).
 */
#include "sec_harness.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

enum { WORLD = 2 };

/* An id of another run: 32 hex digits, as the leader draws them. */
static const char other_id[] = "0ddba11c0ffee0000000000000000042";

typedef struct scene {
  char *dir;        /* the job's store */
  int signal[2];    /* rank 1 -> rank 0: rank 1 has its answer */
} scene;

static void scene_open(scene *sc, const char *tag) {
  sc->dir = sec_tmpdir(tag);
  assert_non_null(sc->dir);
  assert_int_equal(pipe(sc->signal), 0);
}

static void scene_close(scene *sc) {
  close(sc->signal[0]);
  close(sc->signal[1]);
  sec_remove_tree(sc->dir);
  free(sc->dir);
}

/* ---- text planted in the store ---- */

static char planted[3200];

/* Just before rank 1's request goes out, another process plants the
 * abort of this very rendezvous, full of terminal control sequences and
 * long, and the request goes out 50 ms later.  A rendezvous reads the
 * aborts at its first wait and then every 5 ms: rank 0, waiting for the
 * request meanwhile, reads the abort there, and rank 1 at its first wait
 * in the exchange, where rank 0 no longer answers.  (Planted after the
 * request, it could come after both ranks' last look, whose rendezvous
 * then pass: an abort no peer wrote ends no wait that is over.) */
static void plant_an_abort(const char *key, char kind, void *ctx) {
  const scene *sc = ctx;
  char abort_key[512];
  if (kind != 's' || !strstr(key, "/req/1")) return;
  sec_key_sibling(key, "abort", 0, abort_key, sizeof abort_key);
  mori_store *s = sec_store_client(sc->dir);
  if (s == NULL) return;
  (void)s->set(s, abort_key, planted, strlen(planted));
  s->destroy(s);
  struct timespec ts = {0, 50 * 1000 * 1000};
  nanosleep(&ts, NULL);
}

static void assert_escaped_and_bounded(int rank, const char *line) {
  const char *err = sec_err(line);
  for (const char *p = err; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      fail_msg("rank %d's error carries control character 0x%02x at byte %d: %s", rank,
               (unsigned char)*p, (int)(p - err), err);
  if (!strstr(err, "\\x1b]0;owned\\x07"))
    fail_msg("rank %d's error does not show the planted escape sequence: %s", rank, err);
  if (strlen(err) >= 1024 || !strstr(err, "bytes)"))
    fail_msg("rank %d's error is not bounded (%zu bytes): %s", rank, strlen(err), err);
}

static void an_abort_planted_with_control_characters_arrives_escaped_and_bounded(void **s) {
  (void)s;
  scene sc;
  scene_open(&sc, "text");
  size_t n = (size_t)snprintf(planted, sizeof planted, "\x1b]0;owned\x07\x1b[2J\r\n\x7f ");
  memset(planted + n, 'A', sizeof planted - n - 1);
  planted[sizeof planted - 1] = '\0';
  sec_plan plan = {0};
  plan.rank[1].before_op = plant_an_abort;
  plan.rank[1].before_op_ctx = &sc;
  mori_rank_result res[WORLD];
  sec_launch(sc.dir, WORLD, &plan, res);
  for (int r = 0; r < WORLD; r++) {
    print_message("rank %d: %.200s...\n", r, sec_err(res[r].msg));
    if (sec_num(res[r].msg, "rc") == 0) fail_msg("rank %d succeeded: %s", r, res[r].msg);
    assert_escaped_and_bounded(r, res[r].msg);
    /* the wait the abort ended comes first (fd datagrams or req, as the
     * abort was seen), then the peer's cause */
    static const char lead[] = "a peer failed while this rank waited for ";
    const char *err = sec_err(res[r].msg), *wait = strstr(err, lead),
               *cause = strstr(err, "\\x1b]0;owned");
    if (!wait || !cause || cause < wait + sizeof lead + 2 || memcmp(cause - 2, ": ", 2) != 0 ||
        memchr(wait, '\\', (size_t)(cause - wait)) != NULL)
      fail_msg("rank %d's error does not name its wait, then the peer's cause: %.300s", r, err);
  }
  scene_close(&sc);
}

/* ---- a join answered with another run's id ---- */

/* The value at key in the store, NUL-terminated (malloc'd; NULL if none). */
static char *store_get(const char *dir, const char *key) {
  mori_store *s = sec_store_client(dir);
  void *v = NULL;
  size_t len = 0;
  if (s == NULL) return NULL;
  if (s->get(s, key, &v, &len, 0) != 0) v = NULL;
  s->destroy(s);
  return v; /* the file store ends every value with a NUL */
}

static void store_set(const char *dir, const char *key, const char *value) {
  mori_store *s = sec_store_client(dir);
  if (s == NULL) return;
  (void)s->set(s, key, value, strlen(value));
  s->destroy(s);
}

/* Rank 1's join is out: another process reads its nonce and answers it
 * first, with another run's id. */
static void answer_the_join_first(const char *key, void *ctx) {
  const scene *sc = ctx;
  char answer[512];
  if (!strstr(key, "/join/1")) return;
  char *nonce = store_get(sc->dir, key);
  if (nonce == NULL) return;
  snprintf(answer, sizeof answer, "%.*s/incarnation/1/%s",
           (int)(strstr(key, "/join/1") - key), key, nonce);
  store_set(sc->dir, answer, other_id);
  free(nonce);
}

/* Rank 1 took its answer: rank 0 may lead now (and overwrite it). */
static void tell_rank_0(const char *key, void **value, size_t *len, void *ctx) {
  const scene *sc = ctx;
  (void)value;
  (void)len;
  char byte = 1;
  if (strstr(key, "/incarnation/1/") && write(sc->signal[1], &byte, 1) != 1) abort();
}

/* Rank 0 starts only once rank 1 has taken the other id. */
static void wait_for_rank_1(const char *key, char kind, void *ctx) {
  static int waited;
  const scene *sc = ctx;
  (void)key;
  (void)kind;
  char byte;
  struct pollfd p = {sc->signal[0], POLLIN, 0};
  if (!waited++ && (poll(&p, 1, 30000) != 1 || read(p.fd, &byte, 1) != 1))
    fprintf(stderr, "rank 0: rank 1 never took its answer\n");
}

/* Two ranks agreeing in-band, the plan filled by plan_it over a scene of
 * its own: rank `names` must say that the ids differ, and name the other. */
static void assert_the_ids_are_named(void (*plan_it)(sec_plan *plan, scene *sc), int names) {
  scene sc;
  scene_open(&sc, "ids");
  sec_plan plan = {.timeout_ms = 1000, .in_band = 1};
  plan_it(&plan, &sc);
  mori_rank_result res[WORLD];
  sec_launch(sc.dir, WORLD, &plan, res);
  scene_close(&sc);
  print_message("rank %d: %s\n", 1 - names, sec_err(res[1 - names].msg));
  const char *err = sec_err(res[names].msg);
  print_message("rank %d: %s\n", names, err);
  if (!strstr(err, "incarnations differ") || !strstr(err, other_id))
    fail_msg("rank %d's error does not say the ids differ and name %s: %s", names, other_id, err);
}

/* Another process answered rank 1's join before the leader did: rank 1
 * took that id, and the leader's answer replaced it in the store. */
static void answered_first(sec_plan *plan, scene *sc) {
  plan->rank[1].after_set = answer_the_join_first;
  plan->rank[1].after_set_ctx = sc;
  plan->rank[1].rewrite = tell_rank_0;
  plan->rank[1].rewrite_ctx = sc;
  plan->rank[0].before_op = wait_for_rank_1;
  plan->rank[0].before_op_ctx = sc;
}

static void a_join_answered_first_with_another_id_says_the_ids_differ(void **s) {
  (void)s;
  assert_the_ids_are_named(answered_first, 1);
}

/* The leader answered rank 1's join; another process then overwrote the
 * answer with another run's id, which rank 1 took. */
static void replace_the_answer(const char *key, void **value, size_t *len, void *ctx) {
  const scene *sc = ctx;
  if (!strstr(key, "/incarnation/1/")) return;
  store_set(sc->dir, key, other_id);
  free(*value);
  *value = strdup(other_id);
  *len = strlen(other_id);
}

static void answered_again(sec_plan *plan, scene *sc) {
  plan->rank[1].rewrite = replace_the_answer;
  plan->rank[1].rewrite_ctx = sc;
}

static void a_join_answered_again_with_another_id_says_the_ids_differ(void **s) {
  (void)s;
  assert_the_ids_are_named(answered_again, 0);
}

/* ---- a join answered with no id ---- */

/* What rank 1 reads as the answer to its join, as another process wrote
 * it: text that is no id.  Rank 1 must refuse it (MORI_EPROTO, naming the
 * answer's key), not take it as the incarnation its keys would carry. */
static const char *malformed;

static void malform_the_answer(const char *key, void **value, size_t *len, void *ctx) {
  (void)ctx;
  if (!strstr(key, "/incarnation/1/")) return;
  free(*value);
  *value = strdup(malformed);
  *len = strlen(malformed);
}

static void a_join_answered_with_no_id_is_refused(void **s) {
  (void)s;
  static const char *const answers[] = {
      "0DDBA11C0FFEE0000000000000000042",  /* capitals */
      "0ddba11c0ffee00000000000/../../x",  /* 32 characters, some no hex digit */
      "0ddba11c0ffee000000000000000042",   /* 31 hex digits */
      "0ddba11c0ffee00000000000000000042", /* 33 */
  };
  for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
    scene sc;
    scene_open(&sc, "noid");
    malformed = answers[i];
    sec_plan plan = {.timeout_ms = 1000, .in_band = 1};
    plan.rank[1].rewrite = malform_the_answer;
    mori_rank_result res[WORLD];
    sec_launch(sc.dir, WORLD, &plan, res);
    scene_close(&sc);
    const char *err = sec_err(res[1].msg);
    print_message("answered '%s': rank 1: %s\n", answers[i], err);
    if (sec_num(res[1].msg, "rdv") != MORI_EPROTO ||
        !strstr(err, "rendezvous: the answer to this rank's join (mori_symm/g/incarnation/1/") ||
        !strstr(err, ") is no id"))
      fail_msg("rank 1 took '%s' as the answer to its join: %s", answers[i], res[1].msg);
  }
}

/* ---- a leader whose peers all gave up ---- */

/* Every rank fails at BIND (its socket base is one anyone may write), the
 * leader too, and agreeing an id in-band is needed for the aborts: the
 * leader must end once each peer has the id (it published its abort), not
 * wait for requests that will never come.  With a timeout of 120 s, a
 * leader that waits it out is a hang by the launch's deadline. */
static void a_leader_whose_peers_all_failed_at_bind_ends_on_their_aborts(void **s) {
  (void)s;
  enum { RANKS = 3 };
  char *dir = sec_tmpdir("bind");
  char open_dir[600];
  snprintf(open_dir, sizeof open_dir, "%s/open", dir);
  assert_int_equal(mkdir(open_dir, 0700), 0);
  assert_int_equal(chmod(open_dir, 0777), 0);
  sec_plan plan = {.timeout_ms = 120000, .deadline_ms = 30000, .in_band = 1};
  for (int r = 0; r < RANKS; r++) plan.rank[r].socket_dir = open_dir;
  mori_rank_result res[RANKS];
  sec_launch(dir, RANKS, &plan, res);
  for (int r = 0; r < RANKS; r++) {
    print_message("rank %d (%.0f ms): %s\n", r, res[r].wall_ms, sec_err(res[r].msg));
    if (!strstr(sec_err(res[r].msg), "step BIND"))
      fail_msg("rank %d did not fail at BIND: %s", r, res[r].msg);
  }
  sec_remove_tree(dir);
  free(dir);
}

/* ---- text this rank publishes ---- */

/* An abort's text is bounded by its buffer: a cause longer than that is
 * published cut at it, every byte the cause's ("rank 0: " and the why),
 * never with the length the whole text would have had (the bytes past
 * the buffer would reach the store, and every peer's error). */
static void an_abort_longer_than_its_buffer_is_published_cut_at_it(void **s) {
  (void)s;
  static const char key[] = "mori_symm/long-cause/cut/0/abort/0"; /* the group's first seq */
  char *dir = sec_tmpdir("cut");
  mori_store *st = NULL;
  char why[2000], whole[2100];
  memset(why, 'w', sizeof why - 1);
  why[sizeof why - 1] = '\0';
  size_t n = (size_t)snprintf(whole, sizeof whole, "rank 0: %s", why);
  assert_non_null(dir);
  assert_int_equal(mori_file_store_open(dir, &st), 0);
  st->incarnation = "cut";
  if (mori_symm_rendezvous_abort("long-cause", 0, 1, st, why) != 0)
    fail_msg("rendezvous_abort: %s", mori_last_error());
  void *v = NULL;
  size_t len = 0, same = 0;
  if (st->get(st, key, &v, &len, 0) != 0) fail_msg("no abort under %s: %s", key, mori_last_error());
  while (same < len && same < n && ((const char *)v)[same] == whole[same]) same++;
  print_message("abort: %zu bytes published of a text of %zu\n", len, n);
  if (len >= n || same != len)
    fail_msg("the abort under %s is %zu bytes, of which the first %zu are the cause's (a text "
             "of %zu bytes, to be cut at its buffer)",
             key, len, same, n);
  free(v);
  st->destroy(st);
  sec_remove_tree(dir);
  free(dir);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(an_abort_planted_with_control_characters_arrives_escaped_and_bounded),
      cmocka_unit_test(a_join_answered_first_with_another_id_says_the_ids_differ),
      cmocka_unit_test(a_join_answered_again_with_another_id_says_the_ids_differ),
      cmocka_unit_test(a_join_answered_with_no_id_is_refused),
      cmocka_unit_test(a_leader_whose_peers_all_failed_at_bind_ends_on_their_aborts),
      cmocka_unit_test(an_abort_longer_than_its_buffer_is_published_cut_at_it),
  };
  return mori_run_tests(argc, argv, tests);
}
