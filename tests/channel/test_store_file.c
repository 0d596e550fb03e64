/*
 * test_store_file.c - the file store: what set, get and add promise to the
 * processes of one job sharing a directory (labels: unit).
 */
#include "harness.h"
#include "mori/error.h"
#include "mori/hip_shim.h"
#include "mori/sha256.h"
#include "mori/store.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <dlfcn.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the seam, interposed by the test ----
 *
 * The store's waits are polls of its inotify watch through the seam
 * (mori_poll); the test defines mori_poll and mori_renameat itself, so that
 * it sees each wait and what ended it, and acts at the moment a get first
 * waits, without a sleep.  Outside a test that arms it, both only forward. */
static struct {
  void (*at_first_wait)(void *arg); /* armed: called once, as a get first waits */
  void *arg;
  mori_store *drain;                /* during a rename: its watch is drained first */
  int inside;                       /* in a call of the hook's own */
  long waits, woken, ran_out;       /* the store's polls: woken by an event, or not */
} seam;

#define REAL(name, ...)                                                    \
  static int (*real)(__VA_ARGS__);                                         \
  if (real == NULL) *(void **)&real = dlsym(RTLD_NEXT, "mori_" #name)

int mori_poll(struct pollfd *fds, nfds_t nfds, int timeout) {
  REAL(poll, struct pollfd *, nfds_t, int);
  if (seam.at_first_wait == NULL || seam.inside) return real(fds, nfds, timeout);
  if (seam.waits++ == 0) {
    seam.inside = 1;
    seam.at_first_wait(seam.arg);
    seam.inside = 0;
  }
  int n = real(fds, nfds, timeout);
  if (n > 0) seam.woken++;
  else if (n == 0) seam.ran_out++;
  return n;
}

/* A set's rename, with every event of the store's watch before it (the
 * temporary file's creation, writes and close) drained: what wakes a get
 * afterwards is the rename. */
int mori_renameat(int olddir, const char *oldpath, int newdir, const char *newpath) {
  REAL(renameat, int, const char *, int, const char *);
  if (seam.drain != NULL && seam.inside) assert_int_equal(seam.drain->wait_change(seam.drain, 0), 0);
  return real(olddir, oldpath, newdir, newpath);
}

static void seam_arm(void (*at_first_wait)(void *), void *arg, mori_store *drain) {
  seam.waits = seam.woken = seam.ran_out = 0;
  seam.arg = arg;
  seam.drain = drain;
  seam.at_first_wait = at_first_wait;
}

static void seam_disarm(void) { seam.at_first_wait = NULL, seam.drain = NULL; }

typedef struct fixture {
  char *dir;
  mori_store *store;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  f->dir = harness_tmpdir("store");
  assert_non_null(f->dir);
  assert_int_equal(mori_file_store_open(f->dir, &f->store), 0);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  f->store->destroy(f->store);
  harness_remove_tree(f->dir);
  free(f->dir);
  free(f);
  return 0;
}

/* get into a NUL-terminated string; asserts it succeeds. */
static char *get_string(mori_store *s, const char *key) {
  void *v = NULL;
  size_t len = 0;
  int rc = s->get(s, key, &v, &len, 1000);
  if (rc != 0) fail_msg("get %s: %s", key, mori_last_error());
  assert_int_equal(strlen(v), len);
  return v;
}

static void get_returns_the_value_set(void **state) {
  mori_store *s = ((fixture *)*state)->store;
  assert_int_equal(s->set(s, "alpha", "one", 3), 0);
  char *v = get_string(s, "alpha");
  assert_string_equal(v, "one");
  free(v);
}

static void set_overwrites_the_previous_value(void **state) {
  mori_store *s = ((fixture *)*state)->store;
  assert_int_equal(s->set(s, "k", "a longer first value", 20), 0);
  assert_int_equal(s->set(s, "k", "short", 5), 0);
  char *v = get_string(s, "k");
  assert_string_equal(v, "short");
  free(v);
}

static void values_are_binary_and_may_be_empty(void **state) {
  mori_store *s = ((fixture *)*state)->store;
  uint8_t bytes[512];
  for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (uint8_t)(i * 7); /* NULs included */
  assert_int_equal(s->set(s, "bin", bytes, sizeof bytes), 0);
  assert_int_equal(s->set(s, "empty", "", 0), 0);
  void *v;
  size_t len;
  assert_int_equal(s->get(s, "bin", &v, &len, 0), 0);
  assert_int_equal(len, sizeof bytes);
  assert_memory_equal(v, bytes, sizeof bytes);
  free(v);
  assert_int_equal(s->get(s, "empty", &v, &len, 0), 0);
  assert_int_equal(len, 0);
  free(v);
}

/* Keys that differ only in characters a file name cannot hold as-is must
 * stay distinct keys, each one file directly in the directory. */
static void unsafe_key_characters_are_encoded_into_distinct_files(void **state) {
  fixture *f = *state;
  mori_store *s = f->store;
  static const char *const keys[] = {"a/b", "a%2Fb", "a_b", "..", ".", "../escape",
                                     "mori_symm/g 1/0/3", "\n\t"};
  enum { NKEYS = sizeof keys / sizeof keys[0] };
  for (int i = 0; i < NKEYS; i++) assert_int_equal(s->set(s, keys[i], &i, sizeof i), 0);
  for (int i = 0; i < NKEYS; i++) {
    void *v;
    size_t len;
    assert_int_equal(s->get(s, keys[i], &v, &len, 0), 0);
    assert_int_equal(len, sizeof i);
    assert_memory_equal(v, &i, sizeof i);
    free(v);
  }
  DIR *d = opendir(f->dir);
  int files = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    assert_int_equal(e->d_type, DT_REG); /* no subdirectory made from a '/' */
    files++;
  }
  closedir(d);
  assert_int_equal(files, NKEYS); /* and no temp file left behind */
  char outside[4096];
  snprintf(outside, sizeof outside, "%s/../escape", f->dir);
  assert_int_not_equal(access(outside, F_OK), 0);
}

/* The digest that names a long key, against FIPS 180-4's examples and the
 * padding's edges (55, 56 and 64 bytes: one block, two, a whole one). */
static void sha256_matches_the_fips_180_4_examples(void **state) {
  (void)state;
  static const struct {
    const char *text;
    size_t repeat; /* text is one byte repeated this often (0: text itself) */
    const char *hex;
  } cases[] = {
      {"", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", 0, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 0,
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {"a", 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {"a", 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {"a", 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {"a", 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    size_t n = cases[i].repeat ? cases[i].repeat : strlen(cases[i].text);
    char *in = malloc(n + 1), hex[2 * MORI_SHA256_SIZE + 1];
    if (cases[i].repeat) memset(in, cases[i].text[0], n);
    else memcpy(in, cases[i].text, n);
    uint8_t d[MORI_SHA256_SIZE];
    mori__sha256(in, n, d);
    for (int k = 0; k < MORI_SHA256_SIZE; k++) snprintf(hex + 2 * k, 3, "%02x", d[k]);
    if (strcmp(hex, cases[i].hex) != 0)
      fail_msg("SHA-256 of %zu bytes: %s, want %s", n, hex, cases[i].hex);
    free(in);
  }
}

/* Keys too long for a file name as they are, which differ only in their
 * last byte (past the part a name shows), or only in a byte the encoding
 * escapes, are distinct entries, each one file of at most NAME_MAX bytes
 * directly in the directory; adds to them count apart. */
static void long_keys_that_differ_only_at_the_end_are_distinct_entries(void **state) {
  fixture *f = *state;
  mori_store *s = f->store;
  char keys[4][MORI_STORE_KEY_MAX + 1];
  for (int i = 0; i < 4; i++) {
    memset(keys[i], i < 2 ? 'k' : '/', MORI_STORE_KEY_MAX);
    keys[i][MORI_STORE_KEY_MAX] = '\0';
  }
  keys[1][MORI_STORE_KEY_MAX - 1] = 'x';
  keys[3][MORI_STORE_KEY_MAX - 1] = 'x';
  for (int i = 0; i < 4; i++) assert_int_equal(s->set(s, keys[i], &i, sizeof i), 0);
  for (int i = 0; i < 4; i++) {
    void *v = NULL;
    size_t len = 0;
    assert_int_equal(s->get(s, keys[i], &v, &len, 0), 0);
    if (len != sizeof i || memcmp(v, &i, sizeof i) != 0)
      fail_msg("long key %d read back another key's value", i);
    free(v);
  }
  int64_t sum = 0;
  char counter[2][MORI_STORE_KEY_MAX + 1];
  memcpy(counter[0], keys[0], sizeof counter[0]);
  memcpy(counter[1], keys[0], sizeof counter[1]);
  counter[0][0] = 'c', counter[1][0] = 'c', counter[1][MORI_STORE_KEY_MAX - 1] = 'y';
  assert_int_equal(s->add(s, counter[0], 5, &sum), 0);
  assert_int_equal(s->add(s, counter[1], 7, &sum), 0);
  assert_int_equal(sum, 7);
  assert_int_equal(s->add(s, counter[0], 1, &sum), 0);
  assert_int_equal(sum, 6);
  DIR *d = opendir(f->dir);
  int files = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || e->d_name[0] == '.') continue;
    assert_int_equal(e->d_type, DT_REG);
    assert_true(strlen(e->d_name) <= 240);
    files++;
  }
  closedir(d);
  assert_int_equal(files, 6);
}

/* remove takes a key's entry and the lock file an add left beside it; a
 * key already gone is no failure; something that is no entry under a key's
 * name (a directory) is a failure naming it. */
static void remove_takes_the_entry_and_its_lock_and_an_absent_key_is_no_failure(void **state) {
  fixture *f = *state;
  mori_store *s = f->store;
  int64_t v = 0;
  assert_non_null(s->remove);
  assert_int_equal(s->set(s, "kept", "x", 1), 0);
  assert_int_equal(s->set(s, "gone", "x", 1), 0);
  assert_int_equal(s->add(s, "count", 3, &v), 0);
  assert_int_equal(s->remove(s, "gone"), 0);
  assert_int_equal(s->remove(s, "count"), 0);
  assert_int_equal(s->remove(s, "never-set"), 0);
  void *val = NULL;
  size_t len = 0;
  assert_int_equal(s->get(s, "gone", &val, &len, 0), MORI_ETIMEDOUT);
  assert_int_equal(s->add(s, "count", 1, &v), 0);
  assert_int_equal(v, 1); /* counted from zero again */
  assert_int_equal(s->remove(s, "count"), 0);
  DIR *d = opendir(f->dir);
  int n = 0;
  char names[256] = "";
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    n++;
    strncat(names, e->d_name, sizeof names - strlen(names) - 2);
    strcat(names, " ");
  }
  closedir(d);
  if (n != 1 || strcmp(names, "kept ") != 0) fail_msg("left in the store: %s", names);
  char planted[4096];
  snprintf(planted, sizeof planted, "%s/dir", f->dir);
  assert_int_equal(mkdir(planted, 0700), 0);
  int rc = s->remove(s, "dir");
  print_message("remove of a directory: %d %s\n", rc, mori_last_error());
  if (rc != MORI_EIO || !strstr(mori_last_error(), "remove 'dir'") ||
      !strstr(mori_last_error(), "unlinkat"))
    fail_msg("a directory under a key's name: want MORI_EIO naming remove and unlinkat, got %d: %s",
             rc, mori_last_error());
  rmdir(planted);
}

static void empty_key_is_rejected(void **state) {
  mori_store *s = ((fixture *)*state)->store;
  assert_int_equal(s->set(s, "", "x", 1), MORI_EINVAL);
}

static void get_of_a_missing_key_times_out_naming_the_key(void **state) {
  mori_store *s = ((fixture *)*state)->store;
  void *v = NULL;
  size_t len;
  assert_int_equal(s->get(s, "mori_symm/never/0", &v, &len, 30), MORI_ETIMEDOUT);
  assert_null(v);
  assert_non_null(strstr(mori_last_error(), "mori_symm/never/0"));
}

/* get with a bound no test should meet (it waits for an event). */
static char *get_string_waiting(mori_store *s, const char *key) {
  void *v = NULL;
  size_t len = 0;
  int rc = s->get(s, key, &v, &len, 60000);
  if (rc != 0) fail_msg("get %s: %s", key, mori_last_error());
  return v;
}

static void set_woken(void *arg) {
  mori_store *s = arg;
  assert_int_equal(s->set(s, "woken", "by the rename", 13), 0);
}

/* A set wakes a get waiting for its key: the get's wait ends on the
 * rename's event, counted, not on its slice running out (the watch wakes
 * a wait at least every 4 ms anyway, so a watch that missed renames would
 * still return the value, only later: every wait would run out its
 * slice).  The set comes as the get first waits, with every event before
 * its rename drained. */
static void a_set_wakes_a_get_waiting_for_its_key(void **state) {
  mori_store *s = ((fixture *)*state)->store;
  seam_arm(set_woken, s, s);
  char *v = get_string_waiting(s, "woken");
  seam_disarm();
  assert_string_equal(v, "by the rename");
  free(v);
  if (seam.waits != 1 || seam.woken != 1 || seam.ran_out != 0)
    fail_msg("the get waited %ld times: %ld woken by an event, %ld ran out their slice", seam.waits,
             seam.woken, seam.ran_out);
}

/* The child sets once the parent's get waits (a byte down a pipe when it
 * first polls), so the set always comes from another process while the key
 * is being waited for. */
static void tell_the_child(void *arg) {
  int fd = *(int *)arg;
  assert_int_equal(write(fd, "w", 1), 1);
}

static void get_waits_for_a_key_set_later_by_another_process(void **state) {
  fixture *f = *state;
  mori_store *s = f->store;
  int go[2];
  assert_int_equal(pipe(go), 0);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    char c;
    mori_store *child;
    close(go[1]);
    int rc = read(go[0], &c, 1) != 1 || mori_file_store_open(f->dir, &child) != 0;
    if (rc == 0) {
      rc = child->set(child, "late", "arrived", 7);
      child->destroy(child);
    }
    _exit(rc != 0);
  }
  close(go[0]);
  seam_arm(tell_the_child, &go[1], NULL);
  char *v = get_string_waiting(s, "late");
  seam_disarm();
  close(go[1]);
  assert_string_equal(v, "arrived");
  free(v);
  assert_true(seam.waits >= 1);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void add_starts_from_zero_and_accumulates(void **state) {
  mori_store *s = ((fixture *)*state)->store;
  int64_t v = -1;
  assert_int_equal(s->add(s, "n", 5, &v), 0);
  assert_int_equal(v, 5);
  assert_int_equal(s->add(s, "n", -7, &v), 0);
  assert_int_equal(v, -2);
  char *text = get_string(s, "n"); /* decimal text, as torch's stores keep it */
  assert_string_equal(text, "-2");
  free(text);
}

static void add_to_a_non_integer_value_fails_and_keeps_it(void **state) {
  mori_store *s = ((fixture *)*state)->store;
  int64_t v = 0;
  assert_int_equal(s->set(s, "word", "12abc", 5), 0);
  assert_int_equal(s->add(s, "word", 1, &v), MORI_EINVAL);
  assert_non_null(strstr(mori_last_error(), "word"));
  char *text = get_string(s, "word");
  assert_string_equal(text, "12abc");
  free(text);
}

static void add_that_would_overflow_fails(void **state) {
  mori_store *s = ((fixture *)*state)->store;
  int64_t v = 0;
  assert_int_equal(s->add(s, "big", INT64_MAX, &v), 0);
  assert_int_equal(s->add(s, "big", 1, &v), MORI_ERANGE);
  assert_int_equal(s->add(s, "big", 0, &v), 0);
  assert_true(v == INT64_MAX);
}

enum { ADDERS = 6, ADDS_EACH = 40 };

typedef struct adders {
  int results_w; /* each result goes down this pipe */
  const char *dir;
} adders;

/* Each process adds 1 ADDS_EACH times and reports every result it saw. */
static int add_many(int rank, int n, void *arg) {
  const adders *a = arg;
  mori_store *s;
  if (mori_file_store_open(a->dir, &s) != 0) return 1;
  int rc = 0;
  for (int i = 0; i < ADDS_EACH && rc == 0; i++) {
    int64_t v;
    rc = s->add(s, "counter", 1, &v);
    if (rc == 0 && write(a->results_w, &v, sizeof v) != sizeof v) rc = 1;
  }
  s->destroy(s);
  return rc;
}

/* Concurrent adds neither lose an update nor hand out one value twice: the
 * results seen across processes are exactly 1..total. */
static void concurrent_adds_from_forked_processes_sum_exactly(void **state) {
  fixture *f = *state;
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  adders arg = {fds[1], f->dir};
  assert_int_equal(harness_run_ranks(ADDERS, add_many, &arg), 0);
  close(fds[1]);
  uint8_t seen[ADDERS * ADDS_EACH + 1] = {0};
  int64_t v;
  int count = 0;
  while (read(fds[0], &v, sizeof v) == sizeof v) {
    assert_in_range(v, 1, ADDERS * ADDS_EACH);
    assert_int_equal(seen[v]++, 0);
    count++;
  }
  close(fds[0]);
  assert_int_equal(count, ADDERS * ADDS_EACH);
  char *text = get_string(f->store, "counter");
  assert_int_equal(atoi(text), ADDERS * ADDS_EACH);
  free(text);
}

/* The pause of a poller: an eighth of the wait so far, 20 us to 2 ms. */
static void backoff_is_an_eighth_of_the_wait_from_20_us_to_2_ms(void **state) {
  (void)state;
  assert_true(mori_store_backoff_us(0) == 20);
  assert_true(mori_store_backoff_us(160) == 20);
  assert_true(mori_store_backoff_us(1000) == 125);
  assert_true(mori_store_backoff_us(16000) == 2000);
  assert_true(mori_store_backoff_us(1e9) == 2000);
}

/* The store's directory is made 0700 if it is missing, but never its
 * parents: a path whose parent is missing (a typo, an unmounted volume) is
 * refused naming that parent, and nothing is created, as root too. */
static void open_creates_the_last_missing_level_only(void **state) {
  fixture *f = *state;
  char nested[4096], parent[4096], last[4096];
  struct stat st;
  mori_store *s = NULL;
  snprintf(parent, sizeof parent, "%s/sub", f->dir);
  snprintf(nested, sizeof nested, "%s/sub/store", f->dir);
  int rc = mori_file_store_open(nested, &s);
  print_message("open(%s): %d %s\n", nested, rc, rc ? mori_last_error() : "");
  if (rc == 0) s->destroy(s);
  if (rc != MORI_ENOTFOUND || !strstr(mori_last_error(), parent) ||
      !strstr(mori_last_error(), "only the last level"))
    fail_msg("a store under a missing parent: want MORI_ENOTFOUND naming %s, got %d: %s", parent,
             rc, mori_last_error());
  if (stat(parent, &st) == 0) fail_msg("%s was created for a store under it", parent);
  snprintf(last, sizeof last, "%s/store", f->dir);
  assert_int_equal(mori_file_store_open(last, &s), 0);
  assert_int_equal(stat(last, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0700);
  s->destroy(s); /* and leaves the directory in place */
  assert_int_equal(stat(last, &st), 0);
}

int main(void) {
  umask(022);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(get_returns_the_value_set, setup, teardown),
      cmocka_unit_test_setup_teardown(set_overwrites_the_previous_value, setup, teardown),
      cmocka_unit_test_setup_teardown(values_are_binary_and_may_be_empty, setup, teardown),
      cmocka_unit_test_setup_teardown(unsafe_key_characters_are_encoded_into_distinct_files,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(empty_key_is_rejected, setup, teardown),
      cmocka_unit_test_setup_teardown(
          remove_takes_the_entry_and_its_lock_and_an_absent_key_is_no_failure, setup, teardown),
      cmocka_unit_test(sha256_matches_the_fips_180_4_examples),
      cmocka_unit_test_setup_teardown(long_keys_that_differ_only_at_the_end_are_distinct_entries,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(get_of_a_missing_key_times_out_naming_the_key, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(get_waits_for_a_key_set_later_by_another_process, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(a_set_wakes_a_get_waiting_for_its_key, setup, teardown),
      cmocka_unit_test_setup_teardown(add_starts_from_zero_and_accumulates, setup, teardown),
      cmocka_unit_test_setup_teardown(add_to_a_non_integer_value_fails_and_keeps_it, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(add_that_would_overflow_fails, setup, teardown),
      cmocka_unit_test_setup_teardown(concurrent_adds_from_forked_processes_sum_exactly, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(open_creates_the_last_missing_level_only, setup, teardown),
      cmocka_unit_test(backoff_is_an_eighth_of_the_wait_from_20_us_to_2_ms),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
