/*
 * test_keys.c - store keys that cannot alias.  Every key a rendezvous
 * builds holds the group name; cut short at its buffer, two ranks' keys
 * would be one.  A group name too long for its keys is refused before any
 * store operation, over a store that takes keys of any length (torch's
 * does, so the check cannot be left to the store); the longest accepted
 * makes whole keys; and the file store's own limit on a key's encoding is
 * the one its message names (labels: security).
 */
#include "sec_harness.h"

#include "mori/error.h"
#include "mori/hip_shim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ---- a store in memory, with no limit on keys, that records them ---- */

enum { KEYS_MAX = 256 };

typedef struct entry {
  char *key;
  void *value;
  size_t len;
} entry;

typedef struct mem_store {
  mori_store base;
  entry entries[KEYS_MAX];
  int n, ops;
  char *seen[KEYS_MAX]; /* every key an operation named, in order */
  int nseen;
} mem_store;

static entry *mem_find(mem_store *m, const char *key) {
  for (int i = 0; i < m->n; i++)
    if (strcmp(m->entries[i].key, key) == 0) return &m->entries[i];
  return NULL;
}

static void mem_saw(mem_store *m, const char *key) {
  m->ops++;
  if (m->nseen < KEYS_MAX) m->seen[m->nseen++] = strdup(key);
}

static int mem_set(mori_store *s, const char *key, const void *value, size_t len) {
  mem_store *m = (mem_store *)s;
  mem_saw(m, key);
  entry *e = mem_find(m, key);
  if (e == NULL && m->n == KEYS_MAX) return MORI_ENOMEM;
  if (e == NULL) {
    e = &m->entries[m->n++];
    e->key = strdup(key);
    e->value = NULL;
  }
  free(e->value);
  e->value = malloc(len + 1);
  memcpy(e->value, value, len);
  e->len = len;
  return 0;
}

/* Nobody else writes: a key that is absent now stays so for the wait. */
static int mem_get(mori_store *s, const char *key, void **value, size_t *len, int timeout_ms) {
  mem_store *m = (mem_store *)s;
  mem_saw(m, key);
  entry *e = mem_find(m, key);
  if (e == NULL) {
    struct timespec pause = {0, (timeout_ms < 1 ? timeout_ms : 1) * 1000000L};
    nanosleep(&pause, NULL);
    return MORI_ETIMEDOUT;
  }
  *value = malloc(e->len + 1);
  memcpy(*value, e->value, e->len);
  *len = e->len;
  return 0;
}

static int mem_add(mori_store *s, const char *key, int64_t delta, int64_t *result) {
  (void)s;
  (void)key;
  (void)delta;
  (void)result;
  return MORI_ENOTSUP;
}

static void mem_destroy(mori_store *s) {
  mem_store *m = (mem_store *)s;
  for (int i = 0; i < m->n; i++) {
    free(m->entries[i].key);
    free(m->entries[i].value);
  }
  for (int i = 0; i < m->nseen; i++) free(m->seen[i]);
  free(m);
}

static mem_store *mem_store_new(const char *incarnation) {
  mem_store *m = calloc(1, sizeof *m);
  m->base = (mori_store){.set = mem_set, .get = mem_get, .add = mem_add,
                         .destroy = mem_destroy, .incarnation = incarnation};
  return m;
}

static char *group_of(size_t n) {
  char *g = malloc(n + 1);
  for (size_t i = 0; i < n; i++) g[i] = (char)('a' + i % 26);
  g[n] = '\0';
  return g;
}

/* ---- group names and their keys ---- */

static int setup(void **state) {
  (void)state;
  assert_int_equal(mori_shim_select("sim"), 0);
  mori_symm_set_timeout_ms(300);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  assert_int_equal(mori_symm_release_all(), 0);
  return 0;
}

/* Two keys the store was asked about that are one string, though the
 * rendezvous meant two (ranks 1 and 2's joins, say): the first such. */
static const char *aliased(const mem_store *m) {
  for (int i = 0; i < m->nseen; i++)
    for (int j = i + 1; j < m->nseen; j++)
      if (strcmp(m->seen[i], m->seen[j]) == 0 && !strstr(m->seen[i], "/req/0")) return m->seen[i];
  return NULL;
}

/* 505 bytes: every key of ranks 1 and 2 would end inside the group name. */
static void a_group_name_too_long_for_its_keys_is_refused_before_any_store_operation(void **s) {
  (void)s;
  mem_store *m = mem_store_new(NULL);
  char *group = group_of(505);
  void *base = NULL;
  mori_window *w = NULL;
  assert_int_equal(mori_symm_alloc(1 << 20, 0, &base), 0);
  int rc = mori_symm_rendezvous(base, group, 0, 3, &m->base, &w, NULL);
  const char *err = mori_last_error();
  print_message("rendezvous: %s (%d store operations)\n", err, m->ops);
  const char *same = aliased(m);
  if (same) print_message("one key for two: '%s' (%zu bytes)\n", same, strlen(same));
  if (rc != MORI_ERANGE || !strstr(err, "505 bytes") || !strstr(err, "403") || m->ops != 0)
    fail_msg("want MORI_ERANGE naming the limit 403 before any store operation; got %s after "
             "%d operations: %s",
             mori_error_name(rc), m->ops, err);
  rc = mori_symm_rendezvous_abort(group, 1, 3, &m->base, "gave up");
  if (rc != MORI_ERANGE || m->ops != 0)
    fail_msg("rendezvous_abort: want MORI_ERANGE before any store operation, got %s after %d: %s",
             mori_error_name(rc), m->ops, mori_last_error());
  assert_int_equal(mori_symm_free(base), 0);
  free(group);
  m->base.destroy(&m->base);
}

/* MORI_SYMM_GROUP_MAX bytes, under a launcher's id of the longest kind
 * (64 characters): the rendezvous works and every key it names holds the
 * whole group and ends as it should. */
static void the_longest_group_name_makes_whole_keys(void **s) {
  (void)s;
  static const char id[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  mem_store *m = mem_store_new(id);
  char *group = group_of(MORI_SYMM_GROUP_MAX), prefix[600];
  snprintf(prefix, sizeof prefix, "mori_symm/%s/%s/", group, id);
  void *base = NULL;
  mori_window *w = NULL;
  assert_int_equal(mori_symm_alloc(1 << 20, 0, &base), 0);
  int rc = mori_symm_rendezvous(base, group, 0, 1, &m->base, &w, NULL);
  if (rc != 0) fail_msg("rendezvous: %s", mori_last_error());
  assert_true(m->nseen > 0);
  for (int i = 0; i < m->nseen; i++) {
    const char *k = m->seen[i], *end = k + strlen(k);
    if (strncmp(k, prefix, strlen(prefix)) != 0 || end - k < 6 || strcmp(end - 2, "/0") != 0)
      fail_msg("key %d is not whole (%zu bytes): %s", i, strlen(k), k);
  }
  assert_int_equal(mori_symm_free(base), 0);
  free(group);
  m->base.destroy(&m->base);
}

/* ---- the file store's names for keys ---- */

/* The file store takes every key of up to MORI_STORE_KEY_MAX bytes, whatever
 * its bytes (a plain byte is one of a file name, any other three: %XX),
 * and refuses one more, naming the limit. */
static void a_file_store_takes_every_key_up_to_the_store_key_max_and_refuses_one_more(void **s) {
  (void)s;
  char *dir = sec_tmpdir("keys");
  mori_store *st;
  assert_int_equal(mori_file_store_open(dir, &st), 0);
  static const struct {
    size_t plain;   /* plain bytes */
    size_t escaped; /* then this many '/' (%2F each) */
    int ok;
  } cases[] = {{240, 0, 1}, {241, 0, 1}, {237, 1, 1}, {238, 1, 1}, {0, 80, 1}, {0, 81, 1},
               {MORI_STORE_KEY_MAX, 0, 1}, {0, MORI_STORE_KEY_MAX, 1},
               {MORI_STORE_KEY_MAX - 1, 1, 1}, {MORI_STORE_KEY_MAX + 1, 0, 0},
               {0, MORI_STORE_KEY_MAX + 1, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char key[2 * MORI_STORE_KEY_MAX];
    memset(key, 'k', cases[i].plain);
    memset(key + cases[i].plain, '/', cases[i].escaped);
    key[cases[i].plain + cases[i].escaped] = '\0';
    size_t bytes = strlen(key);
    int set = st->set(st, key, &i, sizeof i);
    void *v = NULL;
    size_t len = 0;
    int get = set == 0 ? st->get(st, key, &v, &len, 0) : set;
    int same = get == 0 && len == sizeof i && memcmp(v, &i, sizeof i) == 0;
    free(v);
    print_message("%zu bytes (%zu escaped): set %d get %d %s\n", bytes, cases[i].escaped, set,
                  get, set ? mori_last_error() : "");
    if (cases[i].ok && !same)
      fail_msg("a key of %zu bytes (%zu escaped) refused or not read back: %s", bytes,
               cases[i].escaped, mori_last_error());
    if (!cases[i].ok && (set != MORI_EINVAL || !strstr(mori_last_error(), "MORI_STORE_KEY_MAX")))
      fail_msg("a key of %zu bytes: set %d, and the error does not name the limit: %s", bytes,
               set, mori_last_error());
  }
  st->destroy(st);
  sec_remove_tree(dir);
  free(dir);
}

/* ---- the longest group name over each store ---- */

typedef struct group_run {
  const char *group;
  int in_band; /* the launcher's incarnation hidden: the ranks agree one */
} group_run;

/* A rank: alloc, rendezvous over the launch's store in the group of
 * ctx->arg, free.  Its line: "rc=<rendezvous's> err=<its error>". */
static int rank_in_group(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const group_run *g = ctx->arg;
  void *base = NULL;
  mori_window *w = NULL;
  if (g->in_band) ctx->store->incarnation = NULL;
  mori_symm_set_timeout_ms(20000); /* a loaded machine is no failure here */
  int rc = mori_symm_alloc(1 << 20, ctx->rank, &base);
  if (rc == 0) rc = mori_symm_rendezvous(base, g->group, ctx->rank, ctx->world, ctx->store, &w, NULL);
  snprintf(msg, msglen, "rc=%d err=%.900s", rc, rc ? mori_last_error() : "");
  if (base) mori_symm_free(base);
  mori_symm_release_all();
  return rc;
}

/* Entries of a store directory that a rendezvous wrote (its sockets/
 * directory, the launcher's, aside). */
static int store_entries(const char *dir) {
  char sockets[4096];
  struct stat st;
  snprintf(sockets, sizeof sockets, "%s/sockets", dir);
  return sec_count_entries(dir) - (stat(sockets, &st) == 0);
}

/* MORI_SYMM_GROUP_MAX bytes, plain or every byte one a file name cannot
 * hold (the file store's encoding triples it), rendezvous over the file
 * store at 2 ranks, through every step up to the last barrier, with an
 * in-band incarnation (the longest keys: joins and answers) and with a
 * launcher's; one byte more is refused with MORI_ERANGE by both ranks
 * before anything is written to the store.  torch's stores take keys of
 * any length: MORI_SYMM_GROUP_MAX is what MORI_STORE_KEY_MAX leaves a
 * group, which every store must take (mori/store.h). */
static void the_longest_group_name_rendezvouses_over_the_file_store_and_one_more_is_refused(
    void **s) {
  (void)s;
  static const char bytes[] = {'g', '/'};
  for (int escaped = 0; escaped < 2; escaped++)
    for (int in_band = 0; in_band < 2; in_band++)
      for (size_t n = MORI_SYMM_GROUP_MAX; n <= MORI_SYMM_GROUP_MAX + 1; n++) {
        char *dir = sec_tmpdir("longest"), group[MORI_SYMM_GROUP_MAX + 2];
        memset(group, bytes[escaped], n);
        group[n] = '\0';
        mori_rank_result res[2];
        group_run run = {group, in_band};
        int failed = mori_launch_at(dir, 2, rank_in_group, &run, 60000, res);
        for (int r = 0; r < 2; r++)
          print_message("%zu bytes%s%s: rank %d: %s\n", n, escaped ? " of '/'" : "",
                        in_band ? ", in-band" : "", r, res[r].msg);
        int entries = store_entries(dir);
        if (n <= MORI_SYMM_GROUP_MAX && failed != 0)
          fail_msg("a group name of %zu bytes%s failed: %s | %s", n, escaped ? " of '/'" : "",
                   res[0].msg, res[1].msg);
        for (int r = 0; n > MORI_SYMM_GROUP_MAX && r < 2; r++)
          if (sec_num(res[r].msg, "rc") != MORI_ERANGE || !strstr(res[r].msg, "403"))
            fail_msg("rank %d: a group name of %zu bytes: want MORI_ERANGE naming 403: %s", r, n,
                     res[r].msg);
        if (n > MORI_SYMM_GROUP_MAX && entries != 0)
          fail_msg("a group name of %zu bytes left %d entries in the store", n, entries);
        sec_remove_tree(dir);
        free(dir);
      }
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          a_group_name_too_long_for_its_keys_is_refused_before_any_store_operation, setup,
          teardown),
      cmocka_unit_test_setup_teardown(the_longest_group_name_makes_whole_keys, setup, teardown),
      cmocka_unit_test(a_file_store_takes_every_key_up_to_the_store_key_max_and_refuses_one_more),
      cmocka_unit_test_setup_teardown(
          the_longest_group_name_rendezvouses_over_the_file_store_and_one_more_is_refused, setup,
          teardown),
  };
  return mori_run_tests(argc, argv, tests);
}
