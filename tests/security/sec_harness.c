/*
 * sec_harness.c - helpers of the security tests (see sec_harness.h).  Plain
 * libc around the library: the tests play the attacker and the environment.
 */
#include "sec_harness.h"

#include "mori/hip_shim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int sec_is_root(void) { return geteuid() == 0; }

char *sec_tmpdir(const char *tag) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/mori-sec-%s-XXXXXX", tag);
  return mkdtemp(path) ? strdup(path) : NULL;
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st;
  (void)type;
  (void)ftw;
  return remove(path);
}

void sec_remove_tree(const char *dir) {
  if (dir) nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

int sec_fixture_setup(void **state, size_t size, const char *tag) {
  sec_fixture *f = calloc(1, size);
  assert_non_null(f);
  f->arg = *state;
  f->dir = sec_tmpdir(tag);
  assert_non_null(f->dir);
  *state = f;
  return 0;
}

int sec_fixture_teardown(void **state) {
  sec_fixture *f = *state;
  sec_remove_tree(f->dir);
  free(f->dir);
  free(f);
  return 0;
}

int sec_count_entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static int wait_status(pid_t pid) {
  int st;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void sec_drop_to(uid_t uid) {
  if (uid == geteuid()) return;
  if (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0)
    _exit(120);
}

int sec_run_as(uid_t uid, int (*fn)(void *arg), void *arg) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    sec_drop_to(uid);
    _exit(fn(arg));
  }
  return wait_status(pid);
}

int sec_run_bounded(int (*fn)(void *arg), void *arg, int alarm_s, size_t as_mib) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    if (as_mib) {
      struct rlimit lim = {as_mib << 20, as_mib << 20};
      setrlimit(RLIMIT_AS, &lim);
    }
    alarm((unsigned)alarm_s);
    _exit(fn(arg));
  }
  return wait_status(pid);
}

/* ---- the decorated store ---- */

typedef struct plan_store {
  mori_store base;
  mori_store *inner;
  const sec_rank_plan *plan;
  int ops;
} plan_store;

static void before_op(plan_store *p, const char *key, char kind) {
  if (p->ops++ == 0 && p->plan->delay_first_op_ms > 0) {
    struct timespec ts = {p->plan->delay_first_op_ms / 1000,
                          (long)(p->plan->delay_first_op_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  if (p->plan->before_op) p->plan->before_op(key, kind, p->plan->before_op_ctx);
  if (p->plan->kill_at_op == p->ops) raise(SIGKILL);
  char kill_on = p->plan->kill_on ? p->plan->kill_on : 's';
  if (kind == kill_on && p->plan->kill_at_key && strstr(key, p->plan->kill_at_key)) raise(SIGKILL);
}

static int ps_set(mori_store *s, const char *key, const void *value, size_t len) {
  plan_store *p = (plan_store *)s;
  before_op(p, key, 's');
  int rc = p->inner->set(p->inner, key, value, len);
  if (rc == 0 && p->plan->after_set) p->plan->after_set(key, p->plan->after_set_ctx);
  return rc;
}

static int ps_get(mori_store *s, const char *key, void **value, size_t *len, int timeout_ms) {
  plan_store *p = (plan_store *)s;
  before_op(p, key, 'g');
  int rc = p->inner->get(p->inner, key, value, len, timeout_ms);
  if (rc == 0 && p->plan->rewrite) p->plan->rewrite(key, value, len, p->plan->rewrite_ctx);
  return rc;
}

static int ps_add(mori_store *s, const char *key, int64_t delta, int64_t *result) {
  plan_store *p = (plan_store *)s;
  before_op(p, key, 'a');
  return p->inner->add(p->inner, key, delta, result);
}

static void ps_destroy(mori_store *s) { (void)s; }

static int ps_wait_change(mori_store *s, int timeout_ms) {
  plan_store *p = (plan_store *)s;
  return p->inner->wait_change(p->inner, timeout_ms);
}

/* ---- the rank ---- */

static int touch_peers(mori_window *w, int rank, int world, int *bad) {
  void *const *peers = mori_window_buffer_ptrs(w);
  for (int p = 0; p < world; p++) {
    uint32_t v = 0xA5000000u | (uint32_t)rank << 8 | (uint32_t)p;
    if (mori_hipMemcpy((uint32_t *)peers[p] + rank, &v, 4, hipMemcpyHostToDevice)) return MORI_EHIP;
  }
  int rc = mori_window_barrier(w, 0, NULL, 0);
  uint32_t got[4] = {0};
  if (rc == 0 && mori_hipMemcpy(got, peers[rank], 4 * (size_t)world, hipMemcpyDeviceToHost))
    rc = MORI_EHIP;
  for (int q = 0; q < world && rc == 0; q++)
    *bad += got[q] != (0xA5000000u | (uint32_t)q << 8 | (uint32_t)rank);
  if (rc == 0) rc = mori_window_barrier(w, 0, NULL, 0);
  return rc;
}

/* The RLIMIT_NOFILE that leaves exactly `spare` fd numbers free: fds are
 * not contiguous (the launcher's pipe sits high), so count the holes. */
static rlim_t spare_fds_limit(size_t spare) {
  size_t free_seen = 0;
  for (int fd = 0;; fd++)
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF && free_seen++ == spare) return (rlim_t)fd;
}

void sec_limit_fds(size_t spare) {
  struct rlimit lim;
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = spare_fds_limit(spare);
  setrlimit(RLIMIT_NOFILE, &lim);
}

int sec_rank_rendezvous(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const sec_plan *plan = ctx->arg;
  const sec_rank_plan *rp = &plan->rank[ctx->rank];
  plan_store ps = {{ps_set, ps_get, ps_add, ps_destroy, ps_wait_change,
                    plan->in_band ? NULL : ctx->store->incarnation, NULL},
                   ctx->store, rp, 0};
  char err[800] = "-";
  setenv("MORI_SIM_WAIT_TIMEOUT_MS", "2000", 0); /* a barrier with a dead peer fails soon */
  if (rp->socket_dir) setenv("MORI_SYMM_SOCKET_DIR", rp->socket_dir, 1);
  if (plan->job_secret) setenv("MORI_SYMM_JOB_SECRET", plan->job_secret, 1);
  else unsetenv("MORI_SYMM_JOB_SECRET");
  int bad = 0, rc = mori_shim_select("sim") == 0 ? 0 : MORI_EINVAL;
  mori_symm_set_timeout_ms(rp->timeout_ms    ? rp->timeout_ms
                           : plan->timeout_ms ? plan->timeout_ms
                                              : 400);
  void *base = NULL;
  mori_window *w = NULL;
  /* The first allocation brings the runtime up: count fds after it. */
  if (rc == 0 && mori_symm_alloc(1, ctx->rank, &base) == 0) (void)mori_symm_free(base);
  base = NULL;
  int fds0 = mori_count_fds();
  if (rc == 0) rc = mori_symm_alloc(rp->size ? rp->size : (size_t)1 << 20, ctx->rank, &base);
  if (rc == 0 && rp->secret &&
      mori_hipMemcpy(base, rp->secret, strlen(rp->secret) + 1, hipMemcpyHostToDevice))
    rc = MORI_EHIP;
  struct rlimit saved;
  getrlimit(RLIMIT_NOFILE, &saved);
  if (rc == 0 && rp->nofile_headroom) sec_limit_fds(rp->nofile_headroom - 1);
  int rdv = rc == 0 ? mori_symm_rendezvous(base, "g", ctx->rank, ctx->world, &ps.base, &w, NULL)
                    : rc;
  rc = rdv;
  setrlimit(RLIMIT_NOFILE, &saved); /* a plan may have limited it */
  if (rc != 0) snprintf(err, sizeof err, "%s", mori_last_error());
  if (rc == 0) rc = touch_peers(w, ctx->rank, ctx->world, &bad);
  if (rc != 0 && strcmp(err, "-") == 0) snprintf(err, sizeof err, "%s", mori_last_error());
  if (base) (void)mori_symm_free(base);
  int rel = mori_symm_release_all();
  long leaks = mori_shim_registry_total();
  int fds = mori_count_fds() - fds0;
  snprintf(msg, msglen, "rc=%d rdv=%d ops=%d release=%d fds=%d leaks=%ld bad=%d err=%s", rc, rdv,
           ps.ops, rel, fds, leaks, bad, err);
  return rc != 0 || rel != 0 || bad != 0;
}

void sec_launch(const char *dir, int world, const sec_plan *plan, mori_rank_result *res) {
  int timeout = plan->timeout_ms ? plan->timeout_ms : 400;
  for (int r = 0; r < world && r < 4; r++)
    if (plan->rank[r].timeout_ms > timeout) timeout = plan->rank[r].timeout_ms;
  /* Generous: a rank must fail within its timeout, but the host is loaded. */
  int deadline = plan->deadline_ms ? plan->deadline_ms : 20 * timeout + 10000;
  mori_launch_at(dir, world, sec_rank_rendezvous, (void *)plan, deadline, res);
  for (int r = 0; r < world; r++)
    if (res[r].hung || (res[r].signal && res[r].signal != SIGKILL))
      fail_msg("rank %d hung %d signal %d: %s", r, res[r].hung, res[r].signal, res[r].msg);
}

mori_store *sec_store_client(const char *dir) {
  mori_store *s = NULL;
  return mori_file_store_open(dir, &s) == 0 ? s : NULL;
}

void sec_key_sibling(const char *key, const char *what, int rank, char *out, size_t cap) {
  const char *end = key + strlen(key);
  int slashes = 0;
  while (end > key && slashes < 2)
    if (*--end == '/') slashes++;
  snprintf(out, cap, "%.*s/%s/%d", (int)(end - key), key, what, rank);
}

long sec_num(const char *line, const char *key) {
  char k[64];
  snprintf(k, sizeof k, "%s=", key);
  for (const char *p = strstr(line, k); p; p = strstr(p + 1, k))
    if (p == line || p[-1] == ' ') return strtol(p + strlen(k), NULL, 10);
  return -1;
}

const char *sec_err(const char *line) {
  const char *p = strstr(line, " err=");
  return p ? p + 5 : "";
}
