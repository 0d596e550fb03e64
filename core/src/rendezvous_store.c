/*
 * rendezvous_store.c - what a rendezvous keeps in the store: the key of
 * each entry, gathers that stop early when a peer published an abort, the
 * abort itself, and the encoded requests.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

void mori__store_key(char *out, size_t n, const mori_window *w, const char *what, int rank) {
  snprintf(out, n, "mori_symm/%s/%llu/%s/%d", w->group, (unsigned long long)w->seq, what, rank);
}

/* MORI_EPEER if a peer published an abort for this rendezvous. */
static int check_abort(mori_window *w, mori_store *store, const char *what) {
  char key[512];
  void *why = NULL;
  size_t why_len = 0;
  mori__store_key(key, sizeof key, w, "abort", 0);
  if (store->get(store, key, &why, &why_len, 0) != 0) return 0;
  int rc = mori__error(MORI_EPEER, "a peer failed while this rank waited for %s: %.*s", what,
                       (int)why_len, (const char *)why);
  free(why);
  return rc;
}

int mori__channel_abort_check(void *ctx) {
  struct mori__abort_ctx *a = ctx;
  return check_abort(a->w, a->store, "fd datagrams");
}

/* Gets what/<r> for every rank r != self.  Polls in short slices so that
 * an abort key published by a failing peer ends the wait early; on a
 * timeout names every rank still missing. */
int mori__gather(mori_window *w, mori_store *store, const char *what, void **vals,
                  size_t *lens, int timeout_ms) {
  char key[512], missing[256] = "";
  int remaining = w->world - 1;
  double deadline = mori__now_us() + timeout_ms * 1e3;
  for (;;) {
    for (int r = 0; r < w->world && remaining > 0; r++) {
      if (r == w->rank || vals[r] != NULL) continue;
      mori__store_key(key, sizeof key, w, what, r);
      int get = store->get(store, key, &vals[r], &lens[r], remaining > 4 ? 2 : 10);
      if (get == 0) remaining--;
      else if (get != MORI_ETIMEDOUT) return get;
    }
    if (remaining == 0) return 0;
    MORI_GUARD(check_abort(w, store, what));
    if (mori__now_us() > deadline) break;
  }
  for (int r = 0, n = 0; r < w->world; r++)
    if (r != w->rank && vals[r] == NULL) {
      size_t m = strlen(missing);
      snprintf(missing + m, sizeof missing - m, "%s%d", n++ ? "," : "", r);
    }
  return mori__error(MORI_ETIMEDOUT, "timed out after %d ms waiting for %s from rank(s) %s",
                     timeout_ms, what, missing);
}

/* Tells the group this rank gave up, so peers stop waiting (best effort). */
void mori__publish_abort(mori_window *w, mori_store *store) {
  char key[512], why[768];
  mori__store_key(key, sizeof key, w, "abort", 0);
  int n = snprintf(why, sizeof why, "rank %d: %s", w->rank, mori_last_error());
  (void)store->set(store, key, why, (size_t)(n < (int)sizeof why ? n : (int)sizeof why - 1));
}

void mori__free_vals(void **vals, int n) {
  for (int r = 0; r < n; r++) free(vals[r]);
}


int mori__publish_request(mori_window *w, mori_store *store, const mori_request *q) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  size_t len = 0;
  char key[512];
  int wrc = mori_wire_encode_request(q, buf, sizeof buf, &len);
  if (wrc != 0) return mori__error(MORI_EPROTO, "encode request: %s", mori_wire_strerror(wrc));
  mori__store_key(key, sizeof key, w, "req", w->rank);
  return store->set(store, key, buf, len);
}

int mori__gather_requests(mori_window *w, mori_store *store, mori_request *reqs,
                           int timeout_ms) {
  void **vals = mori_calloc((size_t)w->world, sizeof *vals);
  size_t *lens = mori_calloc((size_t)w->world, sizeof *lens);
  int rc = vals && lens ? 0 : mori__error(MORI_ENOMEM, "rendezvous: out of host memory");
  if (rc == 0) rc = mori__gather(w, store, "req", vals, lens, timeout_ms);
  for (int r = 0; rc == 0 && r < w->world; r++) {
    if (r == w->rank) continue;
    int d = mori_wire_decode_request(vals[r], lens[r], &reqs[r]);
    if (d != 0)
      rc = mori__error(MORI_EPROTO, "request from rank %d rejected: %s", r,
                       mori_wire_strerror(d));
  }
  if (vals) mori__free_vals(vals, w->world);
  free(vals);
  free(lens);
  return rc;
}

/* Sets what/<self> and waits for what/<r> of every other rank: a barrier
 * through the store that an abort ends early. */
int mori__store_barrier(mori_window *w, mori_store *store, const char *what, int timeout_ms) {
  char key[512];
  mori__store_key(key, sizeof key, w, what, w->rank);
  /* Everything that can fail here fails before the own key is set: once
   * it is, peers may pass the barrier whatever this rank does next. */
  void **vals = mori_calloc((size_t)w->world, sizeof *vals);
  size_t *lens = mori_calloc((size_t)w->world, sizeof *lens);
  int rc = vals && lens ? store->set(store, key, "1", 1)
                        : mori__error(MORI_ENOMEM, "rendezvous: out of host memory");
  if (rc == 0) rc = mori__gather(w, store, what, vals, lens, timeout_ms);
  if (vals) mori__free_vals(vals, w->world);
  free(vals);
  free(lens);
  return rc;
}
