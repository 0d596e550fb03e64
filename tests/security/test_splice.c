/*
 * test_splice.c - two jobs of one user with one group name, each over a
 * store of its own, and a process that can write into both (as any local
 * user can write into a TCPStore) copying every entry one store lacks from
 * the other: job A's rank 0 and job B's rank 1 meet as one world, each
 * mapping the other's memory, unless a job secret binds the entries to
 * their job (docs/security.md, labels: security).
 */
#include "sec_harness.h"

#include "mori/hip_shim.h"

#include <dirent.h>
#include <dlfcn.h>
#include <openssl/evp.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { WORLD = 2, MARK = 32 };

/* libcrypto's HMAC as the core calls it, refused while hmac_refused is set
 * (the test program's definition comes first). */
static int hmac_refused;
unsigned char *HMAC(const EVP_MD *md, const void *key, int key_len, const unsigned char *d,
                    size_t n, unsigned char *out, unsigned int *out_len);
unsigned char *HMAC(const EVP_MD *md, const void *key, int key_len, const unsigned char *d,
                    size_t n, unsigned char *out, unsigned int *out_len) {
  typedef unsigned char *(*hmac_fn)(const EVP_MD *, const void *, int, const unsigned char *,
                                     size_t, unsigned char *, unsigned int *);
  hmac_fn real = (hmac_fn)dlsym(RTLD_NEXT, "HMAC");
  if (hmac_refused || real == NULL) return NULL;
  return real(md, key, key_len, d, n, out, out_len);
}

/* One job: which of its ranks runs (the other is the splicer's to play),
 * its secret, and where its rank's log goes. */
typedef struct job {
  const char *name;
  int rank;
  const char *secret; /* NULL: the launcher's; "": none; else this one */
  char log[256];
  int refuse_hmac;
} job;

static int splice_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const job *j = ctx->arg;
  char peer[MARK] = "-", mark[MARK], err[700] = "-";
  if (ctx->rank != j->rank) {
    snprintf(msg, msglen, "absent");
    return 0;
  }
  if (j->secret && *j->secret) setenv("MORI_SYMM_JOB_SECRET", j->secret, 1);
  if (j->secret && !*j->secret) unsetenv("MORI_SYMM_JOB_SECRET");
  hmac_refused = j->refuse_hmac;
  int log = open(j->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log < 0 || dup2(log, 2) < 0) return 1;
  close(log);
  /* agreed in-band, as over torch's stores: the launcher's id would
   * namespace each job's keys apart (a store that can be listed gives
   * them away, though) */
  ctx->store->incarnation = NULL;
  void *base = NULL;
  mori_window *w = NULL;
  int rc = mori_shim_select("sim") == 0 ? 0 : MORI_EINVAL;
  mori_symm_set_timeout_ms(2000);
  if (rc == 0) rc = mori_symm_alloc((size_t)1 << 20, ctx->rank, &base);
  if (rc == 0) rc = mori_symm_rendezvous(base, "g", ctx->rank, WORLD, ctx->store, &w, NULL);
  if (rc != 0) snprintf(err, sizeof err, "%s", mori_last_error());
  /* Spliced: each writes its job's name into its own buffer and reads the
   * peer's, the memory of another job. */
  snprintf(mark, sizeof mark, "%s", j->name);
  if (rc == 0 && mori_hipMemcpy(base, mark, MARK, hipMemcpyHostToDevice) != hipSuccess)
    rc = MORI_EHIP;
  if (rc == 0) rc = mori_window_barrier(w, 0, NULL, 0);
  if (rc == 0 && mori_hipMemcpy(peer, mori_window_buffer_ptrs(w)[1 - ctx->rank], MARK,
                                hipMemcpyDeviceToHost) != hipSuccess)
    rc = MORI_EHIP;
  peer[MARK - 1] = '\0';
  if (base) (void)mori_symm_free(base);
  (void)mori_symm_release_all();
  snprintf(msg, msglen, "rc=%d peer=%s err=%s", rc, peer, err);
  return 0;
}

/* ---- the splicer: every entry one store has and the other lacks ---- */

typedef struct splicer {
  const char *dir[2];
  int stop;
  long copied;
  int forge; /* also answer job B's rank 1's join itself, with an id of its own */
} splicer;

/* What a store writer without the secret can answer a join with: the
 * group's id as a leader writes it (job A's, say, which it read). */
static void forge_answer(const char *dir) {
  static const char id[] = "0123456789abcdef0123456789abcdef";
  mori_store *st = sec_store_client(dir);
  void *nonce = NULL;
  size_t len = 0;
  char key[256];
  if (st == NULL) return;
  if (st->get(st, "mori_symm/g/join/1", &nonce, &len, 0) == 0 && len >= 32) {
    snprintf(key, sizeof key, "mori_symm/g/incarnation/1/%.32s", (const char *)nonce);
    (void)st->set(st, key, id, 32);
  }
  free(nonce);
  st->destroy(st);
}

static int has(const char *dir, const char *name) {
  char path[512];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return lstat(path, &st) == 0;
}

/* from/name to to/name, through a temp file and a rename, as the store
 * writes (a reader never sees it half-written). */
static void copy_entry(splicer *s, const char *from, const char *to, const char *name) {
  char path[512], tmp[512], buf[8192];
  snprintf(path, sizeof path, "%s/%s", from, name);
  int in = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  if (in < 0) return;
  ssize_t n = read(in, buf, sizeof buf);
  close(in);
  if (n < 0) return;
  snprintf(tmp, sizeof tmp, "%s/.splice", to);
  int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (out < 0) return;
  int whole = write(out, buf, (size_t)n) == n;
  close(out);
  snprintf(path, sizeof path, "%s/%s", to, name);
  if (whole && rename(tmp, path) == 0) __atomic_add_fetch(&s->copied, 1, __ATOMIC_RELAXED);
}

static void *splicing(void *arg) {
  splicer *s = arg;
  while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
    for (int k = 0; k < 2; k++) {
      DIR *d = opendir(s->dir[k]);
      if (d == NULL) continue;
      for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.' && e->d_type == DT_REG && !has(s->dir[1 - k], e->d_name))
          copy_entry(s, s->dir[k], s->dir[1 - k], e->d_name);
      closedir(d);
    }
    if (s->forge) forge_answer(s->dir[1]);
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

/* ---- the scene ---- */

typedef struct outcome {
  mori_rank_result a[WORLD], b[WORLD];
  char log_a[2048], log_b[2048];
  long copied;
} outcome;

static void read_log(const char *path, char *out, size_t cap) {
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(out, 1, cap - 1, f) : 0;
  out[n] = '\0';
  if (f) fclose(f);
}

/* Job A (rank 0) and job B (rank 1) at once, each over its own store,
 * with the splicer copying between the two stores. */
static void run_spliced_forging(const char *secret_a, const char *secret_b, int forge,
                               outcome *o) {
  char *dir_a = sec_tmpdir("splice-a"), *dir_b = sec_tmpdir("splice-b"),
       *logs = sec_tmpdir("splice-logs");
  assert_non_null(dir_a);
  assert_non_null(dir_b);
  assert_non_null(logs);
  job a = {"job A", 0, secret_a, "", 0}, b = {"job B", 1, secret_b, "", 0};
  snprintf(a.log, sizeof a.log, "%s/a.log", logs);
  snprintf(b.log, sizeof b.log, "%s/b.log", logs);
  mori_rank_result *shared = mmap(NULL, sizeof o->b, PROT_READ | PROT_WRITE,
                                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(shared != MAP_FAILED);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    mori_launch_at(dir_b, WORLD, splice_rank, &b, 30000, shared);
    _exit(0);
  }
  splicer s = {{dir_a, dir_b}, 0, 0, forge};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, splicing, &s), 0);
  mori_launch_at(dir_a, WORLD, splice_rank, &a, 30000, o->a);
  waitpid(pid, NULL, 0);
  __atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
  pthread_join(t, NULL);
  memcpy(o->b, shared, sizeof o->b);
  munmap(shared, sizeof o->b);
  o->copied = s.copied;
  read_log(a.log, o->log_a, sizeof o->log_a);
  read_log(b.log, o->log_b, sizeof o->log_b);
  print_message("job A rank 0: %s\njob B rank 1: %s\n(%ld entries copied between the stores)\n",
                o->a[0].msg, o->b[1].msg, o->copied);
  sec_remove_tree(dir_a);
  sec_remove_tree(dir_b);
  sec_remove_tree(logs);
  free(dir_a);
  free(dir_b);
  free(logs);
}

static void run_spliced(const char *secret_a, const char *secret_b, outcome *o) {
  run_spliced_forging(secret_a, secret_b, 0, o);
}

static void assert_not_spliced(const outcome *o) {
  if (strstr(o->a[0].msg, "peer=job B") || strstr(o->b[1].msg, "peer=job A"))
    fail_msg("the jobs were spliced: A: %s; B: %s", o->a[0].msg, o->b[1].msg);
  if (sec_num(o->a[0].msg, "rc") == 0 || sec_num(o->b[1].msg, "rc") == 0)
    fail_msg("a rank of a spliced world succeeded: A: %s; B: %s", o->a[0].msg, o->b[1].msg);
  if (!strstr(sec_err(o->a[0].msg), "seal mismatch"))
    fail_msg("job A's rank 0 does not name the seal mismatch: %s", o->a[0].msg);
}

/* The attack is real: without a secret the two jobs become one world, and
 * the first rendezvous of each said at INFO that nothing binds it. */
static void without_a_secret_the_splice_succeeds_and_the_rendezvous_says_so(void **state) {
  (void)state;
  outcome o;
  run_spliced("", "", &o);
  if (!strstr(o.a[0].msg, "peer=job B") || !strstr(o.b[1].msg, "peer=job A"))
    fail_msg("the splicer did not splice the jobs (the test's attack is broken): A: %s; B: %s",
             o.a[0].msg, o.b[1].msg);
  for (int k = 0; k < 2; k++)
    if (!strstr(k ? o.log_b : o.log_a, "no job secret (MORI_SYMM_JOB_SECRET is unset)"))
      fail_msg("job %c's rank did not say at INFO that it has no secret:\n%s", 'A' + k,
               k ? o.log_b : o.log_a);
}

/* Each launch draws a secret of its own. */
static void two_jobs_with_their_own_secrets_cannot_be_spliced(void **state) {
  (void)state;
  outcome o;
  run_spliced(NULL, NULL, &o);
  assert_not_spliced(&o);
  if (strstr(o.log_a, "no job secret"))
    fail_msg("job A has a secret but says it has none:\n%s", o.log_a);
}

static void two_jobs_with_different_given_secrets_cannot_be_spliced(void **state) {
  (void)state;
  outcome o;
  run_spliced("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
              "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100", &o);
  assert_not_spliced(&o);
}

static void a_job_with_a_secret_cannot_be_spliced_with_one_without(void **state) {
  (void)state;
  outcome o;
  run_spliced("00112233445566778899aabbccddeeff", "", &o);
  assert_not_spliced(&o);
  run_spliced("", "00112233445566778899aabbccddeeff", &o);
  assert_not_spliced(&o);
}

/* The store writer answers job B's join itself: rank 1 takes no answer
 * without its job's seal, and says so at once. */
static void an_answer_forged_into_a_job_with_a_secret_is_refused(void **state) {
  (void)state;
  outcome o;
  run_spliced_forging(NULL, NULL, 1, &o);
  assert_not_spliced(&o);
  if (!strstr(sec_err(o.b[1].msg), "seal mismatch: the answer to this rank's join"))
    fail_msg("job B's rank 1 does not name the seal mismatch of its answer: %s", o.b[1].msg);
}

/* ---- one job alone: what its secret and libcrypto do to it ---- */

static void run_alone(job *j, mori_rank_result *res) {
  char *dir = sec_tmpdir("seal"), *logs = sec_tmpdir("seal-logs");
  assert_non_null(dir);
  assert_non_null(logs);
  snprintf(j->log, sizeof j->log, "%s/rank.log", logs);
  j->rank = 0; /* a world of 2 whose rank 1 never comes: rank 0 fails before it waits */
  mori_launch_at(dir, WORLD, splice_rank, j, 30000, res);
  print_message("rank 0: %s\n", res[0].msg);
  sec_remove_tree(dir);
  sec_remove_tree(logs);
  free(dir);
  free(logs);
}

static void a_malformed_secret_fails_the_rendezvous_without_showing_it(void **state) {
  (void)state;
  static const char secret[] = "0123456789abcdef0123456789abcdeg"; /* 'g' */
  mori_rank_result res[WORLD];
  job j = {"job", 0, secret, "", 0};
  run_alone(&j, res);
  const char *err = sec_err(res[0].msg);
  if (sec_num(res[0].msg, "rc") != MORI_EINVAL ||
      !strstr(err, "MORI_SYMM_JOB_SECRET=<32 characters, not shown: the job's secret>: not an "
                   "even count of hex digits from 32 to 128"))
    fail_msg("a malformed secret is not refused naming the variable: %s", res[0].msg);
  if (strstr(err, "0123456789abcdef"))
    fail_msg("the refusal shows the secret: %s", err);
}

static void a_seal_libcrypto_cannot_make_fails_the_rendezvous_naming_it(void **state) {
  (void)state;
  mori_rank_result res[WORLD];
  job j = {"job", 0, NULL, "", 1};
  run_alone(&j, res);
  if (sec_num(res[0].msg, "rc") != MORI_EIO ||
      !strstr(sec_err(res[0].msg), "HMAC-SHA256 (libcrypto) failed"))
    fail_msg("a refused HMAC does not fail the rendezvous naming it: %s", res[0].msg);
}

/* A store writer moves a value the job sealed under one key to another:
 * what rank 0 reads as rank 1's request is its own, sealed by this very
 * job, under its own key. */
static void move_own_request(const char *key, void **value, size_t *len, void *ctx) {
  char other[512];
  if (!strstr(key, "/req/1")) return;
  sec_key_sibling(key, "req", 0, other, sizeof other);
  mori_store *st = sec_store_client(ctx);
  void *v = NULL;
  size_t n = 0;
  if (st && st->get(st, other, &v, &n, 0) == 0) {
    free(*value);
    *value = v;
    *len = n;
  }
  if (st) st->destroy(st);
}

static void a_value_moved_to_another_key_of_the_job_is_refused(void **state) {
  (void)state;
  char *dir = sec_tmpdir("moved");
  assert_non_null(dir);
  sec_plan plan = {.timeout_ms = 2000, .job_secret = "00112233445566778899aabbccddeeff"};
  plan.rank[0].rewrite = move_own_request;
  plan.rank[0].rewrite_ctx = dir;
  mori_rank_result res[WORLD];
  sec_launch(dir, WORLD, &plan, res);
  sec_remove_tree(dir);
  free(dir);
  print_message("rank 0: %s\n", sec_err(res[0].msg));
  if (sec_num(res[0].msg, "rc") != MORI_EAUTH ||
      !strstr(sec_err(res[0].msg), "seal mismatch: rank 1's req under"))
    fail_msg("rank 0 took a value moved from another key: %s", res[0].msg);
}

int main(void) {
  /* A process reads its log level once, and the launcher's may read it
   * before it forks a rank: INFO from the start, for the ranks' logs. */
  setenv("MORI_SYMM_DEBUG", "INFO", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(without_a_secret_the_splice_succeeds_and_the_rendezvous_says_so),
      cmocka_unit_test(two_jobs_with_their_own_secrets_cannot_be_spliced),
      cmocka_unit_test(two_jobs_with_different_given_secrets_cannot_be_spliced),
      cmocka_unit_test(a_job_with_a_secret_cannot_be_spliced_with_one_without),
      cmocka_unit_test(an_answer_forged_into_a_job_with_a_secret_is_refused),
      cmocka_unit_test(a_value_moved_to_another_key_of_the_job_is_refused),
      cmocka_unit_test(a_malformed_secret_fails_the_rendezvous_without_showing_it),
      cmocka_unit_test(a_seal_libcrypto_cannot_make_fails_the_rendezvous_naming_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
