/*
 * test_heal_forgery.c - only the dead are replaced.  A forger, a fresh
 * process of the job's user with the job's store, writes the survivors'
 * heal keys the way heal.c writes them (the offer under
 * mori_symm/<group>/heal/<rank>[/<seq>], requests under the heal's
 * generation, <seq>.<gen>) and offers itself as a rank: as the replacement
 * of a live rank (with the job's secret, and without), as a live survivor
 * during a real heal, and without the secret as the replacement of a rank
 * that really died.  No survivor ever imports anything of it: its data,
 * pointers and signals stay the original world's, and each heal is
 * refused or fails naming what gave the forger away (labels: security).
 */
#include "sec_harness.h"

#include "mori/error.h"
#include "life_pattern.h"
#include "signal_rounds.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { WORLD = 4, LIVE = 1, DEAD = 2, CLAIMED = 3, FORGER_LIFE = 9 };
#define GROUP "job"
#define SECRET_ENV "MORI_SYMM_JOB_SECRET"
#define WAIT_MS 60000
/* What a seal adds to a value: the HMAC-SHA256 tag and the 8-byte mark. */
#define SEAL_BYTES 40
/* The forger's own rendezvous gives up this soon: long enough to be
 * waiting while the survivors are asked to heal, short enough for the
 * case to end soon after. */
#define FORGER_TIMEOUT_MS "3000"

/* ---- data and pointers the survivors check ---- */


/* What a survivor had before the forger came: its pointer tables and
 * what the shim holds for it. */
typedef struct before {
  void *ptrs[WORLD], *pads[WORLD], *ptrs_dev;
  mori_shim_registry_counts reg;
} before;

static void remember(mori_window *w, before *b) {
  memcpy(b->ptrs, mori_window_buffer_ptrs(w), sizeof b->ptrs);
  memcpy(b->pads, mori_window_signal_pad_ptrs(w), sizeof b->pads);
  b->ptrs_dev = mori_window_buffer_ptrs_dev(w);
  mori_shim_registry(&b->reg);
}

/* The window is the one it was: same pointers, nothing imported or mapped
 * since, every rank's data (the live rank's slot included) as written. */
static int unchanged(const mori_rank_ctx *ctx, mori_window *w, const before *b, const char *when,
                     char *msg, size_t msglen) {
  mori_shim_registry_counts now;
  mori_shim_registry(&now);
  CHECK(now.handles == b->reg.handles && now.mappings == b->reg.mappings,
        "%s: the registry went from %ld handles and %ld mappings to %ld and %ld", when,
        b->reg.handles, b->reg.mappings, now.handles, now.mappings);
  CHECK(memcmp(b->ptrs, mori_window_buffer_ptrs(w), sizeof b->ptrs) == 0 &&
            memcmp(b->pads, mori_window_signal_pad_ptrs(w), sizeof b->pads) == 0 &&
            b->ptrs_dev == mori_window_buffer_ptrs_dev(w),
        "%s: the pointer tables moved", when);
  for (int p = 0; p < WORLD; p++) {
    int d = life_pattern_differs(mori_window_buffer_ptrs(w)[p], p, 0);
    CHECK(d == 0, "%s: rank %d's slot: word %d differs", when, p, d - 1);
  }
  return 0;
}

/* Signals among the original four: ordered rounds of barriers and a
 * put/wait ring. */
static int signals_work(const mori_rank_ctx *ctx, mori_window *w, char *msg, size_t msglen) {
  if (ordered_rounds(ctx, w, 0, 8, msg, msglen)) return 1;
  int next = (ctx->rank + 1) % WORLD, prev = (ctx->rank + WORLD - 1) % WORLD;
  for (int i = 1; i <= 3; i++) {
    CHECK(mori_window_put_signal(w, next, 1, NULL, 10000) == 0, "put %d: %s", i,
          mori_last_error());
    CHECK(mori_window_wait_signal(w, prev, 1, NULL, 10000) == 0, "wait %d: %s", i,
          mori_last_error());
  }
  CHECK(mori_hipStreamSynchronize(NULL) == hipSuccess, "sync: %s", mori_shim_message());
  return 0;
}

/* ---- the store, as the forger writes it ---- */

/* The survivors' offer of rank's place (heal.c, publish_offer). */
static void offer_keys(int rank, char *group_key, char *window_key, size_t cap) {
  snprintf(group_key, cap, "mori_symm/" GROUP "/heal/%d", rank);
  snprintf(window_key, cap, "mori_symm/" GROUP "/heal/%d/0", rank);
}

/* rank's request in the first heal of window 0 (mori__store_key). */
static void heal_request_key(const char *incarnation, int rank, char *out, size_t cap) {
  snprintf(out, cap, "mori_symm/" GROUP "/%s/0.1/req/%d", incarnation, rank);
}

/* A value as a rank of the job writes it (rendezvous/seal.c): with the
 * job's secret, if this process has it, the value, an HMAC-SHA256 over
 * the label, the key and the value (NUL between), and the mark; bare
 * otherwise.  out has room for len + SEAL_BYTES bytes. */
static size_t seal(const char *key, const void *value, size_t len, uint8_t *out) {
  static const char label[] = "mori-symm seal 1";
  const char *hex = getenv(SECRET_ENV);
  memcpy(out, value, len);
  if (hex == NULL || *hex == '\0') return len;
  uint8_t secret[64], msg[sizeof label + 512 + MORI_STORE_VALUE_MAX];
  size_t n = strlen(hex) / 2, klen = strlen(key) + 1, m = 0;
  for (size_t i = 0; i < n && i < sizeof secret; i++) sscanf(hex + 2 * i, "%2hhx", &secret[i]);
  memcpy(msg, label, sizeof label), m += sizeof label;
  memcpy(msg + m, key, klen), m += klen;
  memcpy(msg + m, value, len), m += len;
  unsigned int tag_len = 0;
  HMAC(EVP_sha256(), secret, (int)n, msg, m, out + len, &tag_len);
  memcpy(out + len + tag_len, "MORISEAL", SEAL_BYTES - tag_len);
  return len + SEAL_BYTES;
}

static int forge_set(mori_store *store, const char *key, const void *value, size_t len) {
  uint8_t sealed[MORI_STORE_VALUE_MAX + SEAL_BYTES];
  return store->set(store, key, sealed, seal(key, value, len, sealed));
}

/* The offer heal.c's leader would publish for rank: the group's
 * incarnation, its next sequence number (1: window 0 is healed) and the
 * heal's generation (1). */
static int forge_offer(mori_store *store, const char *incarnation, int rank) {
  char group_key[256], window_key[256], value[128];
  offer_keys(rank, group_key, window_key, sizeof group_key);
  int n = snprintf(value, sizeof value, "%s 1", incarnation);
  if (forge_set(store, group_key, value, (size_t)n) != 0) return -1;
  return forge_set(store, window_key, "1", 1);
}

/* The forger joins as rank's replacement, with its own memory, through
 * the public path a real replacement takes; its rendezvous's result. */
static int join_as_replacement(mori_store *store, int rank, int life, char *err, size_t cap) {
  void *base = NULL;
  mori_window *w = NULL;
  int rc = mori_shim_select("sim");
  mori_symm_set_replacement(1);
  if (rc == 0) rc = mori_symm_alloc(MiB, rank, &base);
  if (rc == 0) rc = life_pattern_fill(base, rank, life);
  if (rc == 0) rc = mori_symm_rendezvous(base, GROUP, rank, WORLD, store, &w, NULL);
  snprintf(err, cap, "%s", rc != 0 ? mori_last_error() : "");
  if (base != NULL) (void)mori_symm_free(base);
  (void)mori_symm_release_all();
  return rc;
}

/* ---- the fresh processes: the forger and the real replacement ---- */

/* (a) rank LIVE is alive; the forger offers its place and joins. */
static int forge_live(mori_store *store, const char *incarnation, char *err, size_t cap) {
  if (forge_offer(store, incarnation, LIVE) != 0) return snprintf(err, cap, "offer"), -1;
  return join_as_replacement(store, LIVE, FORGER_LIFE, err, cap);
}

/* (b) rank DEAD died; once survivor CLAIMED published its request in the
 * heal's keys, the forger puts its own there: the same request, from its
 * own pid, sealed with the job's secret. */
static int forge_survivor(mori_store *store, const char *incarnation, char *err, size_t cap) {
  char key[256];
  void *v = NULL;
  size_t len = 0;
  mori_request q;
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  size_t n = 0;
  heal_request_key(incarnation, CLAIMED, key, sizeof key);
  if (store->get(store, key, &v, &len, WAIT_MS) != 0)
    return snprintf(err, cap, "no request of rank %d at %s", CLAIMED, key), -1;
  int ok = len > SEAL_BYTES && mori_wire_decode_request(v, len - SEAL_BYTES, &q) == MORI_WIRE_OK;
  free(v);
  if (!ok) return snprintf(err, cap, "rank %d's request does not decode", CLAIMED), -1;
  q.pid = (uint32_t)getpid();
  if (mori_wire_encode_request(&q, buf, sizeof buf, &n) != MORI_WIRE_OK ||
      forge_set(store, key, buf, n) != 0)
    return snprintf(err, cap, "the forged request was not written"), -1;
  return 0;
}

/* (c) rank DEAD died; the forger, without the job's secret, offers itself
 * as its replacement once the survivors made their offer. */
static int forge_dead(mori_store *store, const char *incarnation, char *err, size_t cap) {
  char group_key[256], window_key[256];
  void *v = NULL;
  size_t len = 0;
  offer_keys(DEAD, group_key, window_key, sizeof group_key);
  if (store->get(store, window_key, &v, &len, WAIT_MS) != 0)
    return snprintf(err, cap, "the survivors made no offer"), -1;
  free(v);
  if (forge_offer(store, incarnation, DEAD) != 0) return snprintf(err, cap, "offer"), -1;
  return join_as_replacement(store, DEAD, FORGER_LIFE, err, cap);
}

/* The real replacement of rank DEAD (b). */
static int replace_dead(mori_store *store, const char *incarnation, char *err, size_t cap) {
  (void)incarnation;
  return join_as_replacement(store, DEAD, 1, err, cap);
}

static const struct role {
  const char *name;
  int (*run)(mori_store *store, const char *incarnation, char *err, size_t cap);
} roles[] = {
    {"forge-live", forge_live},
    {"forge-survivor", forge_survivor},
    {"forge-dead", forge_dead},
    {"replacement", replace_dead},
};

/* A fresh process: its verdict, " rc=<rc> pid=<pid> err=<message>" (as
 * sec_num reads it), under forgery/<role>. */
static int fresh_main(const char *name, const char *dir, const char *incarnation) {
  mori_store *store = NULL;
  char err[700] = "no such role", verdict[800];
  int rc = -1;
  if (mori_file_store_open(dir, &store) != 0) return 2;
  store->incarnation = incarnation;
  for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
    if (strcmp(roles[i].name, name) == 0) rc = roles[i].run(store, incarnation, err, sizeof err);
  int n = snprintf(verdict, sizeof verdict, " rc=%d pid=%d err=%s", rc, (int)getpid(), err);
  char key[64];
  snprintf(key, sizeof key, "forgery/%s", name);
  (void)store->set(store, key, verdict, (size_t)n + 1);
  store->destroy(store);
  return 0;
}

/* Starts this program again as a fresh process playing role: a
 * grandchild of the rank, so that it outlives it, with the job's secret
 * or without it. */
static void start(const mori_rank_ctx *ctx, const char *role, int with_secret) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    if (fork() != 0) _exit(0);
    if (!with_secret) unsetenv(SECRET_ENV);
    if (strncmp(role, "forge", 5) == 0) setenv("MORI_SYMM_TIMEOUT_MS", FORGER_TIMEOUT_MS, 1);
    execl("/proc/self/exe", "test_sec_heal_forgery", "--fresh", role, ctx->store_dir,
          ctx->incarnation, (char *)NULL);
    _exit(127);
  }
  if (pid > 0) waitpid(pid, NULL, 0);
}

/* What a fresh process said: its rc, and its verdict in out. */
static int verdict_of(const mori_rank_ctx *ctx, const char *role, char *out, size_t cap) {
  char key[64];
  void *v = NULL;
  size_t len = 0;
  snprintf(key, sizeof key, "forgery/%s", role);
  if (ctx->store->get(ctx->store, key, &v, &len, WAIT_MS) != 0) {
    snprintf(out, cap, "%s said nothing", role);
    return -1;
  }
  snprintf(out, cap, "%.*s", (int)len, (char *)v);
  free(v);
  return (int)sec_num(out, "rc");
}

/* ---- the ranks ---- */

/* Every rank's prologue: a window of group GROUP over the launcher's
 * store, its pattern written, a barrier passed, every pid published. */
static int begin(const mori_rank_ctx *ctx, int *fds0, void **base, mori_window **w, char *msg,
                 size_t msglen) {
  char key[64], pid[32];
  if (ranks_begin_block(ctx, msg, msglen, fds0, MiB, base, GROUP, w)) return 1;
  CHECK(life_pattern_fill(*base, ctx->rank, 0) == 0, "fill: %s", mori_last_error());
  CHECK(mori_window_barrier(*w, 0, NULL, 10000) == 0, "barrier: %s", mori_last_error());
  CHECK(mori_hipStreamSynchronize(NULL) == hipSuccess, "sync");
  snprintf(key, sizeof key, "forgery/pid/%d", ctx->rank);
  int n = snprintf(pid, sizeof pid, "%d", (int)getpid());
  CHECK(ctx->store->set(ctx->store, key, pid, (size_t)n + 1) == 0, "set: %s", mori_last_error());
  return 0;
}

static long pid_of(const mori_rank_ctx *ctx, int rank) {
  char key[64];
  void *v = NULL;
  size_t len = 0;
  snprintf(key, sizeof key, "forgery/pid/%d", rank);
  if (ctx->store->get(ctx->store, key, &v, &len, WAIT_MS) != 0) return -1;
  long pid = strtol(v, NULL, 10);
  free(v);
  return pid;
}

/* What this rank's heal answered (and, on rank 0, what the forger's own
 * rendezvous did), for its line of the report. */
static char heard[900] = "";

static void hear(const char *what, const char *text) {
  size_t n = strlen(heard);
  snprintf(heard + n, sizeof heard - n, "%s%s: %.400s", n ? "; " : "", what, text);
}

/* mori_window_heal, again while the dead rank's process is still there. */
static int heal_once_gone(const mori_rank_ctx *ctx, mori_window *w, int dead) {
  int rc = MORI_ESTATE;
  for (int i = 0; i < 2000; i++) {
    rc = mori_window_heal(w, dead, ctx->store);
    if (rc != MORI_ESTATE || strstr(mori_last_error(), "is alive") == NULL) break;
    sleep_ms(10);
  }
  return rc;
}

/* (a) Nobody died.  The forger offers rank LIVE's place and waits in the
 * heal's keys as its replacement: no rank imports anything of it, its
 * data or signals, and a heal of rank LIVE is refused: it is alive. */
static int live_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  const int *with_secret = ctx->arg;
  int fds0 = 0;
  void *base = NULL;
  mori_window *w = NULL;
  before b;
  char key[256], said[900];
  void *v = NULL;
  size_t len = 0;
  if (begin(ctx, &fds0, &base, &w, msg, msglen)) return 1;
  remember(w, &b);
  if (ctx->rank == 0) start(ctx, "forge-live", *with_secret);
  heal_request_key(ctx->incarnation, LIVE, key, sizeof key);
  CHECK(ctx->store->get(ctx->store, key, &v, &len, WAIT_MS) == 0,
        "the forger published no request at %s", key);
  free(v);
  if (unchanged(ctx, w, &b, "with the forger waiting", msg, msglen) ||
      signals_work(ctx, w, msg, msglen))
    return 1;
  if (ctx->rank != LIVE) {
    char alive[96];
    snprintf(alive, sizeof alive, "rank %d's process (pid %ld) is alive", LIVE, pid_of(ctx, LIVE));
    int rc = mori_window_heal(w, LIVE, ctx->store);
    CHECK(rc == MORI_ESTATE && strstr(mori_last_error(), alive) != NULL,
          "heal of the live rank %d: rc %d: %s", LIVE, rc, mori_last_error());
    hear("heal", mori_last_error());
  } else {
    hear("heal", "none (the rank the forger claims to replace)");
  }
  if (unchanged(ctx, w, &b, "after the heal of a live rank", msg, msglen) ||
      signals_work(ctx, w, msg, msglen))
    return 1;
  CHECK(verdict_of(ctx, "forge-live", said, sizeof said) != 0, "the forger joined: %s", said);
  if (ctx->rank == 0) hear("forger", said + 1);
  if (unchanged(ctx, w, &b, "after the forger gave up", msg, msglen) ||
      signals_work(ctx, w, msg, msglen))
    return 1;
  return ranks_end(ctx, msg, msglen, fds0, base, heard);
}

/* The dead rank's slot given back and nothing taken in its place: one
 * handle and one mapping fewer than before the death. */
static int slot_given_back(const mori_rank_ctx *ctx, const before *b, const char *when, char *msg,
                           size_t msglen) {
  mori_shim_registry_counts now;
  mori_shim_registry(&now);
  CHECK(now.handles == b->reg.handles - 1 && now.mappings == b->reg.mappings - 1,
        "%s: the registry went from %ld handles and %ld mappings to %ld and %ld", when,
        b->reg.handles, b->reg.mappings, now.handles, now.mappings);
  return 0;
}

/* (b) Rank DEAD died and its real replacement rejoins; a forger puts its
 * own request in rank CLAIMED's place in the heal's keys, after CLAIMED
 * published its own and before the other survivors read it (the worst
 * case: the forgery is what they read).  They refuse the heal naming the
 * forger's pid (every survivor's part must come from the process it had),
 * import nothing, and so the heal fails everywhere, cleanly. */
static int claimed_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = 0, rc = 0;
  void *base = NULL;
  mori_window *w = NULL;
  before b;
  char said[900];
  if (begin(ctx, &fds0, &base, &w, msg, msglen)) return 1;
  remember(w, &b);
  if (ctx->rank == DEAD) {
    start(ctx, "replacement", 1);
    start(ctx, "forge-survivor", 1);
    raise(SIGKILL);
  }
  if (ctx->rank == CLAIMED) {
    rc = heal_once_gone(ctx, w, DEAD);
    CHECK(rc != 0, "rank %d healed with its request forged", CLAIMED);
    hear("heal", mori_last_error());
  } else {
    CHECK(verdict_of(ctx, "forge-survivor", said, sizeof said) == 0, "the forger: %s", said);
    char from[128];
    snprintf(from, sizeof from, "rank %d's request comes from pid %ld, not from pid %ld",
             CLAIMED, sec_num(said, "pid"), pid_of(ctx, CLAIMED));
    rc = heal_once_gone(ctx, w, DEAD);
    CHECK(rc == MORI_EAUTH && strstr(mori_last_error(), from) != NULL,
          "heal with rank %d's request forged: rc %d: %s", CLAIMED, rc, mori_last_error());
    hear("heal", mori_last_error());
    if (slot_given_back(ctx, &b, "after the refused heal", msg, msglen)) return 1;
  }
  CHECK(life_pattern_differs(base, ctx->rank, 0) == 0, "own data changed by the failed heal");
  CHECK(mori_window_barrier(w, 0, NULL, 1000) == MORI_ESTATE, "the failed window still signals");
  if (ctx->rank == 0)
    CHECK(verdict_of(ctx, "replacement", said, sizeof said) != 0,
          "the replacement joined a heal its survivors refused: %s", said);
  if (ctx->rank == 0) hear("replacement", said + 1);
  return ranks_end(ctx, msg, msglen, fds0, base, heard);
}

/* (c) Rank DEAD died; a forger without the job's secret offers itself as
 * its replacement.  What it wrote cannot even be read: every survivor's
 * heal fails on its request with MORI_EAUTH, before anything is
 * exchanged. */
static int unsealed_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  int fds0 = 0;
  void *base = NULL;
  mori_window *w = NULL;
  before b;
  char said[900], seal_says[96];
  CHECK(getenv(SECRET_ENV) != NULL, "the launcher gave this job no secret");
  if (begin(ctx, &fds0, &base, &w, msg, msglen)) return 1;
  remember(w, &b);
  if (ctx->rank == DEAD) {
    start(ctx, "forge-dead", 0);
    raise(SIGKILL);
  }
  snprintf(seal_says, sizeof seal_says, "seal mismatch: rank %d's req under", DEAD);
  int rc = heal_once_gone(ctx, w, DEAD);
  CHECK(rc == MORI_EAUTH && strstr(mori_last_error(), seal_says) != NULL &&
            strstr(mori_last_error(), "carries no seal") != NULL,
        "heal with an unsealed replacement: rc %d: %s", rc, mori_last_error());
  hear("heal", mori_last_error());
  if (slot_given_back(ctx, &b, "after the refused heal", msg, msglen)) return 1;
  CHECK(life_pattern_differs(base, ctx->rank, 0) == 0, "own data changed by the failed heal");
  if (ctx->rank == 0)
    CHECK(verdict_of(ctx, "forge-dead", said, sizeof said) != 0, "the forger joined: %s", said);
  if (ctx->rank == 0) hear("forger", said + 1);
  return ranks_end(ctx, msg, msglen, fds0, base, heard);
}

/* ---- the cases ---- */

static void launch(mori_rank_fn fn, void *arg, int dead) {
  mori_rank_result res[WORLD];
  memset(res, 0, sizeof res);
  (void)mori_launch(WORLD, fn, arg, 120000, res);
  for (int r = 0; r < WORLD; r++) {
    int ok = r == dead ? res[r].signal == SIGKILL : (res[r].exit_code == 0 && !res[r].signal);
    if (!ok || res[r].hung)
      print_error("rank %d: exit %d signal %d hung %d: %s\n", r, res[r].exit_code, res[r].signal,
                  res[r].hung, res[r].msg);
    else if (r != dead)
      print_message("rank %d: %s\n", r, res[r].msg);
  }
  for (int r = 0; r < WORLD; r++) {
    assert_false(res[r].hung);
    assert_true(r == dead ? res[r].signal == SIGKILL : (res[r].exit_code == 0 && !res[r].signal));
  }
}

static void a_forger_with_the_secret_never_replaces_a_live_rank(void **state) {
  (void)state;
  int with_secret = 1;
  launch(live_rank, &with_secret, -1);
}

static void a_forger_without_the_secret_never_replaces_a_live_rank(void **state) {
  (void)state;
  int with_secret = 0;
  launch(live_rank, &with_secret, -1);
}

static void a_forged_request_of_a_survivor_fails_the_heal_naming_its_pid(void **state) {
  (void)state;
  launch(claimed_rank, NULL, DEAD);
}

static void a_replacement_without_the_secret_cannot_even_be_read(void **state) {
  (void)state;
  launch(unsealed_rank, NULL, DEAD);
}

int main(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[1], "--fresh") == 0) return fresh_main(argv[2], argv[3], argv[4]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_forger_with_the_secret_never_replaces_a_live_rank),
      cmocka_unit_test(a_forger_without_the_secret_never_replaces_a_live_rank),
      cmocka_unit_test(a_forged_request_of_a_survivor_fails_the_heal_naming_its_pid),
      cmocka_unit_test(a_replacement_without_the_secret_cannot_even_be_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
