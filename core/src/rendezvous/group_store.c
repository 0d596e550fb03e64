/*
 * group_store.c - what a rendezvous keeps in the store: the group's
 * incarnation (so that nothing an earlier run left in a store that outlived
 * it is ever taken as current), the key of each entry, gathers that stop
 * early when a peer published an abort, the abort itself, and the encoded
 * requests.
 *
 * Incarnations (docs/security.md has the argument in full).  The store may
 * carry one, handed to every rank by the job's launcher; otherwise the
 * ranks agree one at the group's first rendezvous in the process.  Rank 0
 * of a group, its leader, draws a random 128-bit id; every other rank draws a
 * random 128-bit nonce, publishes it as its join, and waits for the answer
 * under a key named by that nonce, which no earlier run can have written.
 * The leader answers whatever join it finds for each rank, and answers
 * again whenever a rank's join changes, until that rank's request arrives
 * under the id: a join left by an earlier run gets an answer nobody reads.
 * Every other key lives under the id.
 */
#include "rendezvous.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ID_HEX 32 /* 128 bits */
/* Every key below fits this, NUL included, or is refused: a key cut short
 * would alias another (two ranks' joins, say).  The longest is
 * mori_symm/<group>/<incarnation: 64>/<seq: 20 digits>/mapped/<rank: 4 digits>,
 * which leaves the group MORI_SYMM_GROUP_MAX bytes. */
#define KEY_MAX (MORI_STORE_KEY_MAX + 1)
#define KEY_LONGEST_BUT_GROUP (sizeof "mori_symm//" - 1 + 64 + 1 + 20 + sizeof "/mapped/" - 1 + 4)
_Static_assert(MORI_SYMM_GROUP_MAX + KEY_LONGEST_BUT_GROUP == KEY_MAX - 1,
               "MORI_SYMM_GROUP_MAX is what the longest key leaves");
_Static_assert(MORI_WIRE_MAX_WORLD <= 10000, "a rank takes at most 4 digits");
/* Of a peer's abort reason, the most bytes an error shows (escaped). */
#define PEER_TEXT_SHOWN 400
#define ABORT_EVERY_US 5000 /* a gather's look at the aborts, at most this often */

typedef char hex_id[ID_HEX + 1];

/* An in-band incarnation: one per group and process, like the sequence
 * numbers.  The thread whose rendezvous agrees it is the only one to touch
 * it until it is agreed; others of the group wait for that.  No lock is
 * held while the store is waited on. */
typedef struct incarnation {
  struct incarnation *next;
  int agreed;
  hex_id id;
  uint64_t lead_seq; /* the rendezvous that led, which answers joins */
  hex_id *answered;  /* its joins answered per rank, until it takes them */
  hex_id joined;     /* a member: the nonce of its join, whose answer it took */
  char group[];
} incarnation;

static incarnation *incarnations;
static pthread_mutex_t incarnation_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t incarnation_cond = PTHREAD_COND_INITIALIZER;

static incarnation *incarnation_find(const char *group) {
  for (incarnation *i = incarnations; i != NULL; i = i->next)
    if (strcmp(i->group, group) == 0) return i;
  return NULL;
}

static void incarnation_drop(incarnation *gone) {
  for (incarnation **p = &incarnations; *p != NULL; p = &(*p)->next)
    if (*p == gone) {
      *p = gone->next;
      break;
    }
  free(gone->answered);
  free(gone);
}

static int random_hex(hex_id out, const char *what) {
  uint64_t v[2];
  MORI_GUARD(mori__random64(&v[0], what));
  MORI_GUARD(mori__random64(&v[1], what));
  snprintf(out, ID_HEX + 1, "%016llx%016llx", (unsigned long long)v[0],
           (unsigned long long)v[1]);
  return 0;
}

static int is_hex_id(const void *value, size_t len) {
  const char *s = value;
  if (len != ID_HEX) return 0;
  for (size_t i = 0; i < len; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

/* ---- keys ---- */

int mori__group_check(const char *group) {
  size_t n = strlen(group);
  char shown[96];
  if (n > MORI_SYMM_GROUP_MAX)
    return mori__error(MORI_ERANGE,
                       "rendezvous: group name '%s' is %zu bytes, longer than the %d its store "
                       "keys leave for it (MORI_SYMM_GROUP_MAX)",
                       mori__escape(shown, sizeof shown, group, n, 40), n, MORI_SYMM_GROUP_MAX);
  /* every message names the group: it is text, shown as it is */
  if (!mori__text_is_plain(group, n))
    return mori__error(MORI_EINVAL,
                       "rendezvous: group name '%s' has a control character, a backslash or "
                       "bytes that are not UTF-8 text",
                       mori__escape(shown, sizeof shown, group, n, 40));
  return 0;
}

/* What snprintf made of a key: whole, or refused (cut short, it could be
 * another key). */
static int key_made(int n, size_t cap, const char *out) {
  if (n >= 0 && (size_t)n < cap) return 0;
  return mori__error(MORI_ERANGE, "rendezvous: a store key would be %d bytes, more than %zu: %.60s...",
                     n, cap - 1, out);
}

int mori__store_key(char *out, size_t n, const mori_window *w, const char *what, int rank) {
  if (w->incarnation[0] == '\0')
    return mori__error(MORI_ESTATE, "rendezvous: group %s has no incarnation yet", w->group);
  /* a heal's keys are its generation's (rendezvous/heal.c) */
  if (w->heal_gen > 0)
    return key_made(snprintf(out, n, "mori_symm/%s/%s/%llu.%d/%s/%d", w->group, w->incarnation,
                             (unsigned long long)w->seq, w->heal_gen, what, rank),
                    n, out);
  return key_made(snprintf(out, n, "mori_symm/%s/%s/%llu/%s/%d", w->group, w->incarnation,
                           (unsigned long long)w->seq, what, rank),
                  n, out);
}

static int join_key(char *out, size_t n, const char *group, int rank) {
  return key_made(snprintf(out, n, "mori_symm/%s/join/%d", group, rank), n, out);
}

static int answer_key(char *out, size_t n, const char *group, int rank, const char *nonce) {
  return key_made(snprintf(out, n, "mori_symm/%s/incarnation/%d/%s", group, rank, nonce), n, out);
}

/* ---- agreeing on the incarnation ---- */

/* Leader: answers rank r's join if it is there and not answered yet.  A
 * join that changed after it was answered was an earlier run's: an
 * answered join is read again only when `reread` says so (the caller's
 * cadence), since a stale join is rare and every read is a store round
 * trip. */
static int answer_join(const mori_window *w, mori_store *store, hex_id *answered, int r,
                       int reread) {
  char key[KEY_MAX];
  void *join = NULL;
  size_t len = 0;
  if (answered[r][0] && !reread) return 0;
  MORI_GUARD(join_key(key, sizeof key, w->group, r));
  int rc = mori__sealed_get(store, key, &join, &len, 0, "a join");
  if (rc == MORI_ETIMEDOUT) return 0; /* not joined yet */
  /* not this job's (another's, an earlier run's with another secret, a
   * forgery): never answered; a leader that times out says why */
  if (rc == MORI_EAUTH) return 0;
  if (rc != 0) return rc;
  int fresh = is_hex_id(join, len) && memcmp(join, answered[r], ID_HEX) != 0;
  if (fresh) {
    if (answered[r][0])
      MORI_LOG(MORI_LOG_INFO, w->rank, w->id,
               "group %s: rank %d joined again; its join %s was stale (an earlier run's)",
               w->group, r, answered[r]);
    memcpy(answered[r], join, ID_HEX);
  }
  free(join);
  if (!fresh) return 0;
  MORI_GUARD(answer_key(key, sizeof key, w->group, r, answered[r]));
  return mori__sealed_set(store, key, w->incarnation, ID_HEX);
}

static int lead(mori_window *w, mori_store *store, incarnation *inc) {
  MORI_GUARD(random_hex(inc->id, "rendezvous: the group's incarnation"));
  memcpy(w->incarnation, inc->id, sizeof inc->id);
  inc->lead_seq = w->seq;
  if (w->world_size > 1) {
    inc->answered = mori_calloc((size_t)w->world_size, sizeof *inc->answered);
    if (inc->answered == NULL) return mori__nomem("rendezvous");
    for (int r = 1; r < w->world_size; r++) MORI_GUARD(answer_join(w, store, inc->answered, r, 1));
  }
  return 0;
}

static int join(mori_window *w, mori_store *store, incarnation *inc, int timeout_ms) {
  char key[KEY_MAX];
  hex_id nonce;
  void *id = NULL;
  size_t len = 0;
  MORI_GUARD(random_hex(nonce, "rendezvous: the nonce of this rank's join"));
  memcpy(inc->joined, nonce, sizeof nonce);
  MORI_GUARD(join_key(key, sizeof key, w->group, w->rank));
  MORI_GUARD(mori__sealed_set(store, key, nonce, ID_HEX));
  MORI_GUARD(answer_key(key, sizeof key, w->group, w->rank, nonce));
  int rc = mori__sealed_get(store, key, &id, &len, timeout_ms, "the answer to this rank's join");
  if (rc == MORI_ETIMEDOUT)
    return mori__error(MORI_ETIMEDOUT,
                       "rendezvous: rank 0 (the leader of group %s) did not answer this rank's "
                       "join within %d ms",
                       w->group, timeout_ms);
  if (rc != 0) return rc;
  int ok = is_hex_id(id, len);
  if (ok) memcpy(inc->id, id, ID_HEX);
  free(id);
  if (!ok)
    return mori__error(MORI_EPROTO, "rendezvous: the answer to this rank's join (%s) is no id",
                       key);
  memcpy(w->incarnation, inc->id, sizeof inc->id);
  return 0;
}

/* The launcher's id, if the store carries one: up to 64 characters a key
 * can hold as they are. */
static int launcher_incarnation(mori_window *w, const char *id) {
  size_t n = strlen(id);
  int ok = n > 0 && n < sizeof w->incarnation;
  for (size_t i = 0; ok && i < n; i++)
    ok = (id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'z') ||
         (id[i] >= 'A' && id[i] <= 'Z') || id[i] == '-' || id[i] == '_';
  char shown[128];
  if (!ok)
    return mori__error(MORI_EINVAL,
                       "rendezvous: the store's incarnation '%s' is not 1-64 letters, digits, "
                       "'-' or '_'",
                       mori__escape(shown, sizeof shown, id, n, 80));
  memcpy(w->incarnation, id, n + 1);
  return 0;
}

/* Copies the group's incarnation into w: the one the launcher gave the
 * store, or else the one agreed in-band, agreeing it first if this is the
 * group's first rendezvous in this process (or waiting for the thread
 * that is agreeing it). */
static int incarnation_get(mori_window *w, mori_store *store, int timeout_ms) {
  incarnation *inc;
  if (store->incarnation != NULL) return launcher_incarnation(w, store->incarnation);
  pthread_mutex_lock(&incarnation_lock);
  while ((inc = incarnation_find(w->group)) != NULL && !inc->agreed)
    pthread_cond_wait(&incarnation_cond, &incarnation_lock);
  if (inc != NULL) memcpy(w->incarnation, inc->id, sizeof inc->id);
  if (inc == NULL) {
    size_t n = strlen(w->group) + 1;
    inc = mori_calloc(1, sizeof *inc + n);
    if (inc != NULL) {
      memcpy(inc->group, w->group, n);
      inc->next = incarnations;
      incarnations = inc;
    }
  } else {
    inc = NULL; /* agreed already */
  }
  pthread_mutex_unlock(&incarnation_lock);
  if (w->incarnation[0]) return 0;
  if (inc == NULL) return mori__nomem("rendezvous");
  w->incarnation_tried = 1;
  int rc = w->rank == 0 ? lead(w, store, inc) : join(w, store, inc, timeout_ms);
  pthread_mutex_lock(&incarnation_lock);
  if (rc == 0) inc->agreed = 1;
  else incarnation_drop(inc); /* the next rendezvous of the group tries again */
  pthread_cond_broadcast(&incarnation_cond);
  pthread_mutex_unlock(&incarnation_lock);
  if (rc == 0)
    MORI_LOG(MORI_LOG_INFO, w->rank, w->id, "group %s: incarnation %s (%s)", w->group,
             w->incarnation, w->rank == 0 ? "drawn" : "from rank 0");
  else
    w->incarnation[0] = '\0';
  return rc;
}

int mori__heal_offer_key(char *out, size_t n, const char *group, int rank, long long seq) {
  int len = seq == -1 ? snprintf(out, n, "mori_symm/%s/heal/%d", group, rank)
            : seq < 0 ? snprintf(out, n, "mori_symm/%s/heal/%d/%lld/abort", group, rank,
                                 MORI__HEAL_ABORT_SEQ(seq))
                      : snprintf(out, n, "mori_symm/%s/heal/%d/%lld", group, rank, seq);
  if (len < 0 || (size_t)len >= n)
    return mori__error(MORI_ERANGE, "heal: a store key would be longer than %zu bytes", n - 1);
  return 0;
}

void mori__heal_abort_publish(const char *group, int rank, uint64_t seq, int from,
                              mori_store *store) {
  char key[KEY_MAX], text[PEER_TEXT_SHOWN + 32];
  mori__first_error cause;
  (void)mori__first_set(&cause, MORI_OK);
  int n = snprintf(text, sizeof text, "rank %d: %s", from, cause.message);
  if (n >= (int)sizeof text) n = (int)sizeof text - 1;
  if (mori__heal_offer_key(key, sizeof key, group, rank, MORI__HEAL_ABORT_KEY(seq)) == 0)
    (void)mori__sealed_set(store, key, text, (size_t)n);
  (void)mori__first_end(&cause, MORI_OK);
}

/* During a heal, the failed heal's word (mori__heal_abort_publish): 1 with
 * its text, 0, or a negative MORI_E*. */
static int heal_abort_said(const mori_window *w, mori_store *store, char *text, size_t cap) {
  char key[KEY_MAX];
  void *why = NULL;
  size_t len = 0;
  if (!w->healing) return 0;
  MORI_GUARD(mori__heal_offer_key(key, sizeof key, w->group, w->healing - 1,
                                  MORI__HEAL_ABORT_KEY(w->seq)));
  int rc = mori__sealed_get(store, key, &why, &len, 0, "a failed heal's word");
  if (rc == MORI_ETIMEDOUT) return 0;
  if (rc != 0) return rc;
  mori__escape(text, cap, why, len, PEER_TEXT_SHOWN);
  free(why);
  return 1;
}

int mori__incarnation_adopt(const char *group, const char *id) {
  size_t n = strlen(group) + 1;
  pthread_mutex_lock(&incarnation_lock);
  incarnation *inc = incarnation_find(group);
  if (inc == NULL && (inc = mori_calloc(1, sizeof *inc + n)) != NULL) {
    memcpy(inc->group, group, n);
    inc->next = incarnations;
    incarnations = inc;
  }
  if (inc != NULL) {
    snprintf(inc->id, sizeof inc->id, "%s", id);
    inc->agreed = 1;
    inc->lead_seq = UINT64_MAX; /* never this process's to lead */
  }
  pthread_cond_broadcast(&incarnation_cond);
  pthread_mutex_unlock(&incarnation_lock);
  return inc != NULL ? 0 : mori__nomem("heal: the group's incarnation");
}

/* The joins the leading rendezvous answers while it gathers: handed to it
 * alone (NULL for every other). */
static hex_id *take_answering(const mori_window *w) {
  hex_id *answered = NULL;
  pthread_mutex_lock(&incarnation_lock);
  incarnation *inc = incarnation_find(w->group);
  if (inc != NULL && inc->agreed && inc->lead_seq == w->seq && w->rank == 0) {
    answered = inc->answered;
    inc->answered = NULL;
  }
  pthread_mutex_unlock(&incarnation_lock);
  return answered;
}

/* ---- gathers and aborts ---- */

/* The launcher's notice of the death of rank r of a job of w's world size,
 * or (r < 0) its mark that some rank died: the abort it published as rank
 * 0 of the group MORI_STORE_DEATH_GROUP/<world>[/<r>] (mori/store.h). */
static int dead_key(char *out, size_t n, const mori_window *w, int r) {
  char group[64];
  mori_window notice = {.group = group, .seq = 0};
  if (r < 0) snprintf(group, sizeof group, MORI_STORE_DEATH_GROUP "/%d", w->world_size);
  else snprintf(group, sizeof group, MORI_STORE_DEATH_GROUP "/%d/%d", w->world_size, r);
  memcpy(notice.incarnation, w->incarnation, sizeof notice.incarnation);
  return mori__store_key(out, n, &notice, "abort", 0);
}

/* Whether the launcher told of the death of a rank w waits for: one whose
 * entry is not in have (every peer where have is NULL).  1 with the rank
 * and the launcher's words in text, 0, or a negative MORI_E* (a notice
 * without this job's seal: MORI_EAUTH naming it).  Only over a store that
 * carries the launcher's incarnation, where a group of the launch's world
 * size has the launch's ranks; one get a poll round, of the mark, until a
 * rank died. */
static int find_dead(const mori_window *w, mori_store *store, void *const *have, char *text,
                     size_t cap) {
  char key[KEY_MAX], shown[PEER_TEXT_SHOWN + 16];
  void *why = NULL;
  size_t len = 0;
  if (store->incarnation == NULL || dead_key(key, sizeof key, w, -1) != 0) return 0;
  int rc = mori__sealed_get(store, key, &why, &len, 0, "the launcher's mark of a death");
  free(why);
  if (rc != 0) return rc == MORI_ETIMEDOUT ? 0 : rc;
  for (int r = 0; r < w->world_size; r++) {
    /* a heal waits for the replacement of the rank whose death it answers */
    if (r == w->rank || r == w->healing - 1 || (have != NULL && have[r] != NULL) ||
        dead_key(key, sizeof key, w, r) != 0)
      continue;
    why = NULL;
    rc = mori__sealed_get(store, key, &why, &len, 0, "the launcher's notice of a death");
    if (rc == MORI_ETIMEDOUT) continue;
    if (rc != 0) return rc;
    /* the "rank 0: " abort_window put first is the notice's group's rank */
    size_t skip = len >= 8 && memcmp(why, "rank 0: ", 8) == 0 ? 8 : 0;
    mori__escape(shown, sizeof shown, (char *)why + skip, len - skip, PEER_TEXT_SHOWN);
    snprintf(text, cap, "rank %d %s, says the launcher", r, shown);
    free(why);
    return 1;
  }
  return 0;
}

void mori__death_notice_clear(const mori_window *w, mori_store *store, int rank) {
  char key[KEY_MAX];
  if (store->remove == NULL || store->incarnation == NULL) return;
  if (dead_key(key, sizeof key, w, rank) == 0) (void)store->remove(store, key);
}

/* MORI_EPEER if a peer published an abort for this rendezvous, or the
 * launcher told of the death of a rank it waits for (have: find_dead).
 * The death is read first: a rank that published an abort did so before
 * it died, so the abort read after it is there, and names the cause. */
static int check_abort_of(mori_window *w, mori_store *store, const char *what,
                          void *const *have) {
  char key[KEY_MAX], dead[PEER_TEXT_SHOWN + 96];
  void *why = NULL;
  size_t why_len = 0;
  /* A heal's replacement is not in the launcher's notices (those of its
   * rank tell of the death the heal answers); once its request named its
   * process, that process gone is its death, read before the aborts as
   * the launcher's notices are (one it published before it ended names
   * the cause). */
  int gone = w->healing && w->heal_pid != 0 && mori__process_gone(w->heal_pid);
  if (mori__store_key(key, sizeof key, w, "abort", 0) != 0) return 0;
  /* A notice this rank cannot take (another job's seal, or a secret it
   * lacks) must not hide an abort it can: the abort, if any, is the
   * cause; else the notice's refusal is the error. */
  mori__first_error refused;
  int died = find_dead(w, store, have, dead, sizeof dead);
  if (died < 0) (void)mori__first_set(&refused, died);
  int rc = mori__sealed_get(store, key, &why, &why_len, 0, "an abort");
  if (died < 0 && rc != 0) return mori__first_end(&refused, died);
  if (rc == MORI_ETIMEDOUT && died > 0)
    return mori__error(MORI_EPEER, "a peer failed while this rank waited for %s: %s", what, dead);
  if (rc == MORI_ETIMEDOUT) {
    int said = heal_abort_said(w, store, dead, sizeof dead);
    if (said < 0) return said;
    if (said)
      return mori__error(MORI_EPEER, "a peer failed while this rank waited for %s: %s", what,
                         dead);
  }
  if (rc == MORI_ETIMEDOUT && gone)
    return mori__error(MORI_EPEER,
                       "a peer failed while this rank waited for %s: rank %d's replacement "
                       "(pid %u) is gone",
                       what, w->healing - 1, w->heal_pid);
  if (rc == MORI_ETIMEDOUT) return 0; /* no abort */
  if (rc != 0) return rc;
  char shown[PEER_TEXT_SHOWN + 64];
  mori__escape(shown, sizeof shown, why, why_len, PEER_TEXT_SHOWN);
  rc = mori__error(MORI_EPEER, "a peer failed while this rank waited for %s: %s", what, shown);
  free(why);
  return rc;
}

static int check_abort(mori_window *w, mori_store *store, const char *what) {
  return check_abort_of(w, store, what, NULL);
}

/* Failures a peer's can cause here: its socket gone, its export released.
 * A disagreement this rank finds in the requests is its own finding, and a
 * wait that timed out its own timeout (the wait looked for aborts all
 * along), whoever failed first. */
static int may_follow_a_peer(int rc) { return rc == MORI_EIO || rc == MORI_EHIP; }

int mori__peer_failed_first(mori_window *w, mori_store *store, int rc) {
  mori__first_error own;
  (void)mori__first_set(&own, rc);
  if (!may_follow_a_peer(rc) || check_abort(w, store, "the rendezvous") != MORI_EPEER)
    return mori__first_end(&own, rc);
  mori__error_suffix(" (here then: %s)", own.message);
  return MORI_EPEER;
}

int mori__channel_abort_check(void *ctx) {
  struct mori__abort_ctx *a = ctx;
  return check_abort(a->w, a->store, "fd datagrams");
}

double mori_store_backoff_us(double waited_us) {
  double us = waited_us / 8;
  return us < 20 ? 20 : us > 2000 ? 2000 : us;
}

/* The id now answering rank r's join nonce, if it is one other than w's:
 * 1 with other filled, else 0 (a failed read says nothing here). */
static int answer_differs(const mori_window *w, mori_store *store, int r, const char *nonce,
                          hex_id other) {
  char key[KEY_MAX];
  void *v = NULL;
  size_t len = 0;
  if (answer_key(key, sizeof key, w->group, r, nonce) != 0 ||
      store->get(store, key, &v, &len, 0) != 0)
    return 0;
  if (mori__unseal(key, v, &len, "an answer") != 0) { /* not this job's: says nothing */
    free(v);
    return 0;
  }
  int differs = is_hex_id(v, len) && memcmp(v, w->incarnation, ID_HEX) != 0;
  if (differs) {
    memcpy(other, v, ID_HEX);
    other[ID_HEX] = '\0';
  }
  free(v);
  return differs;
}

/* The nonce of this process's join in group, if it joined one. */
static int joined_nonce(const char *group, hex_id out) {
  pthread_mutex_lock(&incarnation_lock);
  incarnation *inc = incarnation_find(group);
  int joined = inc != NULL && inc->joined[0];
  if (joined) memcpy(out, inc->joined, sizeof inc->joined);
  pthread_mutex_unlock(&incarnation_lock);
  return joined;
}

/* Why a wait under an id agreed in-band may have timed out, when the
 * store says more than the timeout: the answer under a join (a missing
 * rank's, for the leader; its own, for a member) is another id than the
 * one this rank works under.  Two leaders answered it: another run of the
 * group on this store at the same time, or someone writing into the
 * store.  MORI_EMISMATCH naming both ids, or 0. */
static int ids_differ(const mori_window *w, mori_store *store, hex_id *answering,
                      void *const *vals, const char *what, const char *missing, int timeout_ms) {
  hex_id other, nonce;
  if (store->incarnation != NULL) return 0; /* the launcher's id: no joins */
  for (int r = 0; answering != NULL && r < w->world_size; r++)
    if (r != w->rank && vals[r] == NULL && answering[r][0] &&
        answer_differs(w, store, r, answering[r], other))
      return mori__error(MORI_EMISMATCH,
                         "rendezvous: the incarnations differ: rank %d's join %s is answered "
                         "with %s, not with this leader's %s (another leader of group %s on "
                         "this store at the same time, or someone writing into it, answered "
                         "it too), and rank %d works under that id; no %s from rank(s) %s "
                         "within %d ms",
                         r, answering[r], other, w->incarnation, w->group, r, what, missing,
                         timeout_ms);
  if (w->rank != 0 && joined_nonce(w->group, nonce) &&
      answer_differs(w, store, w->rank, nonce, other))
    return mori__error(MORI_EMISMATCH,
                       "rendezvous: the incarnations differ: this rank took %s from the answer "
                       "to its join %s, which now says %s (two leaders answered it: another "
                       "run of group %s on this store at the same time, or someone writing "
                       "into it); no %s from rank(s) %s within %d ms",
                       w->incarnation, nonce, other, w->group, what, missing, timeout_ms);
  return 0;
}

/* Why a leader's wait for its first requests may have timed out, when the
 * store says more: the join of a missing rank is not this job's (sealed
 * with another secret, or not sealed where this job has one, or sealed
 * where it has none), so it was never answered.  MORI_EAUTH naming it, or
 * 0. */
static int join_refused(const mori_window *w, mori_store *store, void *const *vals,
                        const char *what, const char *missing, int timeout_ms) {
  char key[KEY_MAX], whose[64];
  for (int r = 0; r < w->world_size; r++) {
    void *v = NULL;
    size_t len = 0;
    if (r == w->rank || vals[r] != NULL || join_key(key, sizeof key, w->group, r) != 0) continue;
    snprintf(whose, sizeof whose, "rank %d's join", r);
    int rc = mori__sealed_get(store, key, &v, &len, 0, whose);
    free(v);
    if (rc == MORI_EAUTH) {
      mori__error_suffix(" (so this leader never answered it); no %s from rank(s) %s within %d ms",
                         what, missing, timeout_ms);
      return rc;
    }
  }
  return 0;
}

/* Gets what/<r> for every rank r != self.  Waits on one key at a time in
 * short slices, so that an abort key published by a failing peer ends the
 * wait early; on a timeout names every rank still missing.  A leader in
 * its first rendezvous also answers joins while it waits, so it looks at
 * every missing rank in each pass and sleeps on any change in between. */
static int gather(mori_window *w, mori_store *store, const char *what, void **vals, size_t *lens,
                  int timeout_ms, hex_id *answering, int stop_on_abort, const char *or_what) {
  char key[KEY_MAX], missing[256] = "";
  int remaining = w->world_size - 1;
  /* the clock is read once a pass, from the end of the first that did
   * not find everything (most gathers need no more than one) */
  double started = -1, deadline = 0, now = 0, reread_at = 0, checked = -1;
  for (;;) {
    /* Joins already answered are read again once a millisecond, not at
     * every pass: a rank whose join was an earlier run's is answered at
     * most that much later, and the store is not read twice per rank per
     * pass while the leader waits. */
    int reread = now >= reread_at;
    if (reread) reread_at = now + 1000;
    for (int r = 0; r < w->world_size && remaining > 0; r++) {
      if (r == w->rank || vals[r] != NULL) continue;
      if (answering) MORI_GUARD(answer_join(w, store, answering, r, reread));
      MORI_GUARD(mori__store_key(key, sizeof key, w, what, r));
      int slice = answering ? 0 : remaining > 4 ? 2 : 10;
      char whose[64];
      snprintf(whose, sizeof whose, "rank %d's %s", r, what);
      int get = mori__sealed_get(store, key, &vals[r], &lens[r], slice, whose);
      if (get == MORI_ETIMEDOUT && or_what != NULL) { /* or that rank's other word */
        MORI_GUARD(mori__store_key(key, sizeof key, w, or_what, r));
        snprintf(whose, sizeof whose, "rank %d's %s", r, or_what);
        get = mori__sealed_get(store, key, &vals[r], &lens[r], 0, whose);
      }
      if (get == 0) remaining--;
      else if (get != MORI_ETIMEDOUT) return get;
    }
    if (remaining == 0) return 0;
    MORI_GUARD(mori__clock_us(&now, "rendezvous"));
    /* The aborts (and the launcher's notices: a file and a MAC each) after
     * the first pass that did not find everything, then once every
     * ABORT_EVERY_US, not at every pass: passes come as fast as the
     * entries do. */
    if (stop_on_abort && (checked < 0 || now - checked >= ABORT_EVERY_US)) {
      MORI_GUARD(check_abort_of(w, store, what, vals));
      checked = now;
    }
    if (started < 0) started = now, deadline = now + timeout_ms * 1e3, reread_at = now + 1000;
    double left_ms = (deadline - now) / 1e3;
    if (left_ms <= 0) break;
    if (answering && store->wait_change) {
      MORI_GUARD(store->wait_change(store, left_ms < 10 ? (int)left_ms + 1 : 10));
    } else if (answering) { /* no change to wait for: pause, longer as the wait goes on */
      double nap = mori_store_backoff_us(now - started);
      MORI_GUARD(mori__nap_us(nap < left_ms * 1e3 ? nap : left_ms * 1e3, "rendezvous"));
    }
  }
  for (int r = 0, n = 0; r < w->world_size; r++)
    if (r != w->rank && vals[r] == NULL) {
      size_t m = strlen(missing);
      snprintf(missing + m, sizeof missing - m, "%s%d", n++ ? "," : "", r);
    }
  int rc = answering ? join_refused(w, store, vals, what, missing, timeout_ms) : 0;
  if (rc == 0) rc = ids_differ(w, store, answering, vals, what, missing, timeout_ms);
  if (rc != 0) return rc;
  return mori__error(MORI_ETIMEDOUT, "timed out after %d ms waiting for %s from rank(s) %s",
                     timeout_ms, what, missing);
}

int mori__gather(mori_window *w, mori_store *store, const char *what, void **vals,
                 size_t *lens, int timeout_ms) {
  return gather(w, store, what, vals, lens, timeout_ms, NULL, 1, NULL);
}

void mori__free_vals(void **vals, int n) {
  for (int r = 0; r < n; r++) free(vals[r]);
}

/* Publishes w's abort saying why.  If the group's incarnation is not
 * agreed yet (this rank failed before its request went out), it is agreed
 * first, since peers look for aborts only under it; a leader then answers
 * joins until every member's request shows it has the id (and so will find
 * the abort), or the timeout. */
static int abort_window(mori_window *w, mori_store *store, const char *why, int timeout_ms) {
  char key[KEY_MAX], text[768];
  hex_id *answering = NULL;
  int rc = 0;
  if (!w->incarnation[0]) {
    rc = incarnation_get(w, store, timeout_ms);
    if (rc == 0) answering = take_answering(w);
  }
  if (rc == 0) rc = mori__store_key(key, sizeof key, w, "abort", 0);
  int n = snprintf(text, sizeof text, "rank %d: %s", w->rank, why);
  size_t len = (size_t)(n < (int)sizeof text ? n : (int)sizeof text - 1);
  if (rc == 0) rc = mori__sealed_set(store, key, text, len);
  /* ... and under this rank: a leader still answering joins learns that
   * this rank has the id, and will send no request. */
  if (rc == 0 && w->rank != 0) rc = mori__store_key(key, sizeof key, w, "abort", w->rank);
  if (rc == 0 && w->rank != 0) rc = mori__sealed_set(store, key, text, len);
  if (rc == 0 && answering) {
    void **vals = mori_calloc((size_t)w->world_size, sizeof *vals);
    size_t *lens = mori_calloc((size_t)w->world_size, sizeof *lens);
    if (vals && lens)
      (void)gather(w, store, "req", vals, lens, timeout_ms, answering, 0, "abort");
    if (vals) mori__free_vals(vals, w->world_size);
    free(vals);
    free(lens);
  }
  free(answering);
  return rc;
}

/* Tells the group this rank gave up, so peers stop waiting (best effort).
 * The error this rank reports stays the one that made it give up; if the
 * abort cannot be published either (a full disk, no fds left), that is
 * appended to it, never put in its place. */
void mori__publish_abort(mori_window *w, mori_store *store) {
  mori__first_error cause, failure;
  (void)mori__first_set(&cause, MORI_OK);
  /* If agreeing on the incarnation is what failed, there is no key a peer
   * would look at (and trying again would wait as long again): peers time
   * out, as they would on a rank that died. */
  int agreement_failed = !w->incarnation[0] && w->incarnation_tried;
  if (agreement_failed || abort_window(w, store, cause.message, mori_symm_timeout_ms()) == 0) {
    (void)mori__first_end(&cause, MORI_OK);
    return;
  }
  (void)mori__first_set(&failure, MORI_OK);
  (void)mori__first_end(&cause, MORI_OK);
  /* at most 511 bytes of the publication's failure */
  mori__error_suffix("; publishing the abort also failed: %.511s", failure.message);
}

int mori__abort_rendezvous(const char *group, uint64_t seq, int rank, int world_size,
                           mori_store *store, const char *why, int timeout_ms) {
  mori_window w = {
      .group = (char *)group, .seq = seq, .id = -1, .rank = rank, .world_size = world_size};
  return abort_window(&w, store, why, timeout_ms);
}

/* ---- requests ---- */

int mori__publish_request(mori_window *w, mori_store *store, const mori_request *q) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  size_t len = 0;
  char key[KEY_MAX];
  mori__seal_note(w->rank, w->id);
  MORI_GUARD(incarnation_get(w, store, mori_symm_timeout_ms()));
  int wrc = mori_wire_encode_request(q, buf, sizeof buf, &len);
  if (wrc != 0) return mori__error(MORI_EPROTO, "encode request: %s", mori_wire_strerror(wrc));
  MORI_GUARD(mori__store_key(key, sizeof key, w, "req", w->rank));
  return mori__sealed_set(store, key, buf, len);
}

int mori__gather_requests(mori_window *w, mori_store *store, mori_request *reqs,
                          int timeout_ms) {
  hex_id *answering = take_answering(w);
  void **vals = mori_calloc((size_t)w->world_size, sizeof *vals);
  size_t *lens = mori_calloc((size_t)w->world_size, sizeof *lens);
  int rc = vals && lens ? 0 : mori__nomem("rendezvous");
  if (rc == 0) rc = gather(w, store, "req", vals, lens, timeout_ms, answering, 1, NULL);
  free(answering); /* every rank has the id now, or this rendezvous failed */
  for (int r = 0; rc == 0 && r < w->world_size; r++) {
    if (r == w->rank) continue;
    int d = mori_wire_decode_request(vals[r], lens[r], &reqs[r]);
    if (d != 0)
      rc = mori__error(MORI_EPROTO, "request from rank %d rejected: %s", r,
                       mori_wire_strerror(d));
  }
  if (vals) mori__free_vals(vals, w->world_size);
  free(vals);
  free(lens);
  return rc;
}

/* Sets what/<self> and waits for what/<r> of every other rank: a barrier
 * through the store that an abort ends early. */
int mori__store_barrier(mori_window *w, mori_store *store, const char *what, int timeout_ms) {
  char key[KEY_MAX];
  MORI_GUARD(mori__store_key(key, sizeof key, w, what, w->rank));
  /* Everything that can fail here fails before the own key is set: once
   * it is, peers may pass the barrier whatever this rank does next. */
  void **vals = mori_calloc((size_t)w->world_size, sizeof *vals);
  size_t *lens = mori_calloc((size_t)w->world_size, sizeof *lens);
  int rc = vals && lens ? mori__sealed_set(store, key, "1", 1)
                        : mori__nomem("rendezvous");
  if (rc == 0) rc = mori__gather(w, store, what, vals, lens, timeout_ms);
  if (vals) mori__free_vals(vals, w->world_size);
  free(vals);
  free(lens);
  return rc;
}

/* ---- cleanup: a finished rendezvous leaves no keys ---- */

/* Once this rank passed the mapped barrier, every rank has gathered every
 * request (a rank sets its mapped key only after), so nobody reads this
 * rendezvous's requests or this rank's join again: each rank removes its
 * own request, and a member its join and the leader's answer to it.  The
 * mapped keys are read until the last rank passed the barrier: each rank
 * counts itself out under done/0, and the one whose add makes it
 * world_size removes them and the count.  Best effort, on a store that can
 * remove: a key left behind is stale under the next run's incarnation,
 * and what failed is logged at INFO, never the rendezvous's failure.  A
 * rendezvous that failed leaves its keys (docs/security.md). */
static void remove_key(const mori_window *w, mori_store *store, const char *key) {
  if (store->remove(store, key) != 0)
    MORI_LOG(MORI_LOG_INFO, w->rank, w->id, "rendezvous: %s stays in the store: %s", key,
             mori_last_error());
}

/* The nonce of this process's join in group, taken: its keys go once. */
static int take_joined_nonce(const char *group, hex_id out) {
  pthread_mutex_lock(&incarnation_lock);
  incarnation *inc = incarnation_find(group);
  int joined = inc != NULL && inc->joined[0];
  if (joined) {
    memcpy(out, inc->joined, sizeof inc->joined);
    inc->joined[0] = '\0';
  }
  pthread_mutex_unlock(&incarnation_lock);
  return joined;
}

void mori__store_cleanup(mori_window *w, mori_store *store) {
  char key[KEY_MAX];
  hex_id nonce;
  int64_t out = 0;
  if (store->remove == NULL) return;
  if (mori__store_key(key, sizeof key, w, "req", w->rank) == 0) remove_key(w, store, key);
  if (w->rank != 0 && take_joined_nonce(w->group, nonce)) {
    if (join_key(key, sizeof key, w->group, w->rank) == 0) remove_key(w, store, key);
    if (answer_key(key, sizeof key, w->group, w->rank, nonce) == 0) remove_key(w, store, key);
  }
  if (mori__store_key(key, sizeof key, w, "done", 0) != 0) return;
  if (w->world_size > 1 && store->add(store, key, 1, &out) != 0) {
    MORI_LOG(MORI_LOG_INFO, w->rank, w->id, "rendezvous: add %s: %s; the mapped keys stay", key,
             mori_last_error());
    return;
  }
  if (w->world_size > 1 && out != w->world_size) return; /* not the last rank out */
  for (int r = 0; r < w->world_size; r++)
    if (mori__store_key(key, sizeof key, w, "mapped", r) == 0) remove_key(w, store, key);
  if (w->world_size > 1 && mori__store_key(key, sizeof key, w, "done", 0) == 0)
    remove_key(w, store, key);
}
