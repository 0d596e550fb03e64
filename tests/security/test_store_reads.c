/*
 * test_store_reads.c - the file store reads only regular files it can
 * bound: a FIFO, directory, socket, device, symlink or a 2 GiB sparse file
 * where a key should be gets a clear error within milliseconds and no
 * memory growth.  Each get runs in a child with an alarm and an
 * address-space limit, so what would hang or balloon fails the case
 * instead (labels: security).
 */
#include "sec_harness.h"

#include "mori/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { ALARM_S = 10, AS_MIB = 512 };

typedef struct fixture {
  sec_fixture base;
  char *dir;
  char key_path[512];
  char lock_path[512];
} fixture;

static int setup(void **state) {
  sec_fixture_setup(state, sizeof(fixture), "reads");
  fixture *f = *state;
  f->dir = f->base.dir;
  snprintf(f->key_path, sizeof f->key_path, "%s/k", f->dir); /* key "k" is file "k" */
  snprintf(f->lock_path, sizeof f->lock_path, "%s/.lock-k", f->dir);
  return 0;
}

static int teardown(void **state) { return sec_fixture_teardown(state); }

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* What the child saw, through a pipe. */
typedef struct probe {
  const fixture *f;
  int op; /* 0: get, 1: add */
  int out;
} probe;

typedef struct probe_result {
  int rc;
  double ms;
  long rss_growth_kib;
  char value[64];
  char msg[900];
} probe_result;

static int probe_child(void *arg) {
  probe *p = arg;
  probe_result r = {0};
  mori_store *s = NULL;
  struct rusage before, after;
  getrusage(RUSAGE_SELF, &before);
  double t0 = now_ms();
  r.rc = mori_file_store_open(p->f->dir, &s);
  if (r.rc == 0 && p->op == 0) {
    void *v = NULL;
    size_t len = 0;
    r.rc = s->get(s, "k", &v, &len, 1000);
    if (r.rc == 0) snprintf(r.value, sizeof r.value, "%.*s", (int)(len < 60 ? len : 60), (char *)v);
    free(v);
  } else if (r.rc == 0) {
    int64_t v = 0;
    r.rc = s->add(s, "k", 1, &v);
  }
  r.ms = now_ms() - t0;
  getrusage(RUSAGE_SELF, &after);
  r.rss_growth_kib = after.ru_maxrss - before.ru_maxrss;
  snprintf(r.msg, sizeof r.msg, "%s", mori_last_error());
  if (s) s->destroy(s);
  return write(p->out, &r, sizeof r) == sizeof r ? 0 : 1;
}

/* Runs op on key "k" in a bounded child; the child must come back. */
static probe_result run_probe(const fixture *f, int op, const char *what) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  probe p = {f, op, fds[1]};
  int status = sec_run_bounded(probe_child, &p, ALARM_S, AS_MIB);
  close(fds[1]);
  probe_result r;
  memset(&r, 0, sizeof r);
  ssize_t n = read(fds[0], &r, sizeof r);
  close(fds[0]);
  if (status == 128 + 14) fail_msg("%s: the store hung (still waiting after %d s)", what, ALARM_S);
  if (status != 0 || n != (ssize_t)sizeof r)
    fail_msg("%s: the child ended with status %d (address space limited to %d MiB)", what, status,
             AS_MIB);
  print_message("%s: %s after %.2f ms, max RSS +%ld KiB: %s\n", what, mori_error_name(r.rc), r.ms,
                r.rss_growth_kib, r.rc ? r.msg : r.value);
  return r;
}

/* A clear error naming the key and what is wrong, without memory growth. */
static void assert_refused(const fixture *f, int op, const char *what, const char *says) {
  probe_result r = run_probe(f, op, what);
  if (r.rc == 0) fail_msg("%s: accepted (value '%s')", what, r.value);
  if (r.rc == MORI_ETIMEDOUT) fail_msg("%s: waited out the timeout instead of refusing: %s", what, r.msg);
  if (r.rc == MORI_ENOMEM) fail_msg("%s: tried to allocate what the entry claims: %s", what, r.msg);
  if (!strstr(r.msg, "'k'") || !strstr(r.msg, says))
    fail_msg("%s: the error does not name key 'k' and '%s': %s", what, says, r.msg);
  if (r.rss_growth_kib > 16 * 1024) fail_msg("%s: max RSS grew by %ld KiB", what, r.rss_growth_kib);
}

static void a_fifo_as_a_key_is_refused_at_once(void **state) {
  fixture *f = *state;
  assert_int_equal(mkfifo(f->key_path, 0600), 0);
  assert_refused(f, 0, "FIFO", "not a regular file");
}

static void a_directory_as_a_key_is_refused(void **state) {
  fixture *f = *state;
  assert_int_equal(mkdir(f->key_path, 0700), 0);
  assert_refused(f, 0, "directory", "not a regular file");
}

static void a_socket_as_a_key_is_refused(void **state) {
  fixture *f = *state;
  int s = socket(AF_UNIX, SOCK_DGRAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", f->key_path);
  assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
  assert_refused(f, 0, "socket", "not a regular file");
  close(s);
}

static void a_device_as_a_key_is_refused(void **state) {
  SEC_NEED_ROOT("mknod of a character device");
  fixture *f = *state;
  assert_int_equal(mknod(f->key_path, S_IFCHR | 0600, makedev(1, 5)), 0); /* /dev/zero */
  assert_refused(f, 0, "device", "not a regular file");
}

static void a_2_gib_sparse_file_as_a_key_is_refused_without_reading_it(void **state) {
  fixture *f = *state;
  int fd = open(f->key_path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, (off_t)2 << 30), 0);
  close(fd);
  /* the error names the file's size: nothing tried to allocate it */
  assert_refused(f, 0, "2 GiB sparse file", "2147483648");
}

static void a_symlink_as_a_key_is_not_followed(void **state) {
  fixture *f = *state;
  char outside[600];
  snprintf(outside, sizeof outside, "%s.outside", f->dir);
  FILE *o = fopen(outside, "w");
  assert_non_null(o);
  fputs("planted", o);
  fclose(o);
  assert_int_equal(symlink(outside, f->key_path), 0);
  probe_result r = run_probe(f, 0, "symlink");
  unlink(outside);
  if (r.rc == 0) fail_msg("symlink: followed it and read '%s'", r.value);
  if (!strstr(r.msg, "'k'") || !strstr(r.msg, "symlink"))
    fail_msg("symlink: the error does not say the key is a symlink: %s", r.msg);
}

static void a_fifo_as_a_lock_file_is_refused(void **state) {
  fixture *f = *state;
  assert_int_equal(mkfifo(f->lock_path, 0600), 0);
  assert_refused(f, 1, "FIFO lock file", "not a regular file");
}

/* The largest value set can take, get must give back: whole. */
static void a_value_of_exactly_the_largest_size_is_set_and_read_back(void **state) {
  fixture *f = *state;
  mori_store *s;
  assert_int_equal(mori_file_store_open(f->dir, &s), 0);
  size_t max = MORI_STORE_VALUE_MAX;
  char *v = malloc(max);
  for (size_t i = 0; i < max; i++) v[i] = (char)('a' + i % 26);
  void *got = NULL;
  size_t len = 0;
  int set = s->set(s, "k", v, max);
  int get = set == 0 ? s->get(s, "k", &got, &len, 0) : set;
  s->destroy(s);
  if (set != 0 || get != 0)
    fail_msg("a value of exactly %zu bytes: set %d, get %d: %s", max, set, get, mori_last_error());
  assert_int_equal(len, max);
  assert_memory_equal(got, v, max);
  free(got);
  free(v);
}

static void a_value_larger_than_any_entry_is_refused_by_set(void **state) {
  fixture *f = *state;
  mori_store *s;
  assert_int_equal(mori_file_store_open(f->dir, &s), 0);
  size_t big = (size_t)MORI_STORE_VALUE_MAX + 1;
  char *v = calloc(1, big);
  int rc = s->set(s, "k", v, big);
  free(v);
  s->destroy(s);
  if (rc == 0) fail_msg("set of %zu bytes accepted", big);
  assert_non_null(strstr(mori_last_error(), "'k'"));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(a_fifo_as_a_key_is_refused_at_once, setup, teardown),
      cmocka_unit_test_setup_teardown(a_directory_as_a_key_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(a_socket_as_a_key_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(a_device_as_a_key_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(a_2_gib_sparse_file_as_a_key_is_refused_without_reading_it,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(a_symlink_as_a_key_is_not_followed, setup, teardown),
      cmocka_unit_test_setup_teardown(a_fifo_as_a_lock_file_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(a_value_of_exactly_the_largest_size_is_set_and_read_back,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(a_value_larger_than_any_entry_is_refused_by_set, setup,
                                      teardown),
  };
  return mori_run_tests(argc, argv, tests);
}
