/*
 * replacement.c - the replacement's side of a heal (heal.c is the
 * survivors'): a process started in a dead rank's place
 * (MORI_SYMM_REPLACEMENT=1, mori_symm_set_replacement) learns from the
 * survivors' offer where its rendezvous join: the group's incarnation,
 * which it adopts instead of agreeing one, how far the group's sequence
 * came, and for each window the survivors heal, the heal's generation,
 * whose keys its rendezvous then uses (mori__store_key).  The offer carries
 * no authority: the replacement's request passes every check a first
 * peer's does.
 */
#include "rendezvous.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mori/values.h"

#define KEY_MAX (MORI_STORE_KEY_MAX + 1)

static int replacement_set = -1; /* mori_symm_set_replacement; -1: the environment says */

void mori_symm_set_replacement(int on) {
  __atomic_store_n(&replacement_set, on ? 1 : 0, __ATOMIC_RELEASE);
  if (on) mori__seal_warm(); /* its heal's first read is sealed */
}

int mori__replacement(void) {
  int set = __atomic_load_n(&replacement_set, __ATOMIC_ACQUIRE);
  if (set >= 0) return set;
  long long on = 0;
  char why[160];
  /* anything but 0 or 1 was refused by mori__env_switches_check already */
  return mori_env_int("MORI_SYMM_REPLACEMENT", 0, 1, 0, &on, why, sizeof why) == 0 && on == 1;
}

/* What a replacement learned of a group from the survivors' offer, once
 * per group and process: the incarnation, and the sequence number below
 * which the group's windows are healed, not made anew. */
struct heal_group {
  struct heal_group *next;
  uint64_t next_seq;
  char incarnation[65];
  char name[];
};
static struct heal_group *heal_groups;
static pthread_mutex_t heal_lock = PTHREAD_MUTEX_INITIALIZER;

static int plain_id(const char *s, size_t n) {
  if (n == 0 || n > 64) return 0;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
          (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '-' || s[i] == '_'))
      return 0;
  return 1;
}

#define OFFER_SLICE_MS 20 /* between looks at the failed heal's word */

/* The sealed value at key (a part of the offer), waiting up to timeout_ms
 * for it as mori__sealed_get does; in between, every OFFER_SLICE_MS, a
 * look at where a survivor whose heal failed before this process could
 * learn its keys says so (MORI__HEAL_ABORT_KEY): MORI_EPEER with its
 * words then, rather than a wait to the timeout. */
static int offer_get(const mori_window *w, mori_store *store, const char *key, void **v,
                     size_t *len, int timeout_ms) {
  char abort_key[KEY_MAX];
  double t0 = 0, now = 0;
  MORI_GUARD(mori__heal_offer_key(abort_key, sizeof abort_key, w->group, w->rank,
                                  MORI__HEAL_ABORT_KEY(w->seq)));
  MORI_GUARD(mori__clock_us(&t0, "heal: the survivors' offer"));
  for (;;) {
    void *why = NULL;
    size_t why_len = 0;
    int rc = mori__sealed_get(store, abort_key, &why, &why_len, 0, "a failed heal's word");
    if (rc == 0) {
      char shown[512];
      mori__escape(shown, sizeof shown, why, why_len, 400);
      free(why);
      return mori__error(MORI_EPEER, "heal: the survivors' heal of rank %d failed: %s", w->rank,
                         shown);
    }
    if (rc != MORI_ETIMEDOUT) return rc;
    MORI_GUARD(mori__clock_us(&now, "heal: the survivors' offer"));
    double left = timeout_ms - (now - t0) / 1e3;
    int slice = left < OFFER_SLICE_MS ? (int)(left > 0 ? left : 0) : OFFER_SLICE_MS;
    rc = mori__sealed_get(store, key, v, len, slice, "the survivors' offer");
    if (rc != MORI_ETIMEDOUT || left <= OFFER_SLICE_MS) return rc;
  }
}

/* "<incarnation> <next seq>", sealed, at mori_symm/<group>/heal/<rank>. */
static int read_group_offer(const mori_window *w, mori_store *store, int timeout_ms,
                            struct heal_group *g) {
  char key[KEY_MAX], text[128];
  void *v = NULL;
  size_t len = 0;
  MORI_GUARD(mori__heal_offer_key(key, sizeof key, w->group, w->rank, -1));
  int rc = offer_get(w, store, key, &v, &len, timeout_ms);
  if (rc == MORI_ETIMEDOUT)
    return mori__error(MORI_ETIMEDOUT,
                       "heal: no survivor of group %s offered rank %d's place within %d ms "
                       "(%s): this process was started as a replacement (MORI_SYMM_REPLACEMENT)",
                       w->group, w->rank, timeout_ms, key);
  MORI_GUARD(rc);
  snprintf(text, sizeof text, "%.*s", (int)(len < sizeof text ? len : sizeof text - 1), (char *)v);
  free(v);
  char *space = strchr(text, ' '), *end = NULL;
  unsigned long long next = space ? strtoull(space + 1, &end, 10) : 0;
  if (space == NULL || !plain_id(text, (size_t)(space - text)) || end == space + 1 || *end != '\0')
    return mori__error(MORI_EPROTO, "heal: the survivors' offer at %s is malformed", key);
  *space = '\0';
  snprintf(g->incarnation, sizeof g->incarnation, "%s", text);
  g->next_seq = next;
  return 0;
}

/* The generation of the heal of window <seq>, at .../heal/<rank>/<seq>. */
static int read_window_offer(mori_window *w, mori_store *store, int timeout_ms) {
  char key[KEY_MAX], text[32];
  void *v = NULL;
  size_t len = 0;
  MORI_GUARD(mori__heal_offer_key(key, sizeof key, w->group, w->rank, (long long)w->seq));
  int rc = offer_get(w, store, key, &v, &len, timeout_ms);
  if (rc == MORI_ETIMEDOUT)
    return mori__error(MORI_ETIMEDOUT,
                       "heal: the survivors of group %s did not offer window %llu to rank %d "
                       "within %d ms (%s)",
                       w->group, (unsigned long long)w->seq, w->rank, timeout_ms, key);
  MORI_GUARD(rc);
  snprintf(text, sizeof text, "%.*s", (int)(len < sizeof text ? len : sizeof text - 1), (char *)v);
  free(v);
  long long gen = 0;
  char why[160];
  if (mori_value_int(text, 1, 1000000, &gen, why, sizeof why) != 0)
    return mori__error(MORI_EPROTO, "heal: the survivors' offer at %s: %s", key, why);
  w->heal_gen = (int)gen;
  return 0;
}

int mori__heal_join(mori_window *w, mori_store *store, int timeout_ms) {
  pthread_mutex_lock(&heal_lock);
  struct heal_group *g = heal_groups;
  while (g != NULL && strcmp(g->name, w->group) != 0) g = g->next;
  pthread_mutex_unlock(&heal_lock);
  if (g == NULL) {
    size_t n = strlen(w->group) + 1;
    struct heal_group *fresh = mori_calloc(1, sizeof *fresh + n);
    if (fresh == NULL) return mori__nomem("heal");
    memcpy(fresh->name, w->group, n);
    int rc = read_group_offer(w, store, timeout_ms, fresh);
    if (rc == 0) rc = mori__incarnation_adopt(w->group, fresh->incarnation);
    if (rc != 0) {
      free(fresh);
      return rc;
    }
    pthread_mutex_lock(&heal_lock);
    fresh->next = heal_groups;
    heal_groups = g = fresh;
    pthread_mutex_unlock(&heal_lock);
    MORI_LOG(MORI_LOG_INFO, w->rank, w->id,
             "group %s: replacing rank %d, incarnation %s, windows below %llu healed", w->group,
             w->rank, g->incarnation, (unsigned long long)g->next_seq);
  }
  if (w->seq >= g->next_seq) return 0; /* a window the survivors make anew too */
  return read_window_offer(w, store, timeout_ms);
}

