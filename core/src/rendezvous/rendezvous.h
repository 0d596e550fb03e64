/*
 * rendezvous.h - the rendezvous: the window's machine and its steps
 * (rendezvous.c), what it keeps in the store (group_store.c), the job's
 * seal on those entries (seal.c), and below them the wire codec (wire.c),
 * the checks of what peers sent (protocol.c), the fd channel (channel.c)
 * and the file store (store_file.c), whose own headers are in
 * core/internal/mori.
 */
#ifndef MORI_CORE_RENDEZVOUS_H
#define MORI_CORE_RENDEZVOUS_H

#include "../signal/signal.h"

/* ---- the job's seal on store entries (seal.c) ---- */

/* key = value, sealed with the job's secret (MORI_SYMM_JOB_SECRET) if it
 * has one: an HMAC-SHA256 over key and value follows the value. */
int mori__sealed_set(mori_store *store, const char *key, const void *value, size_t len);
/* libcrypto's first HMAC in a process costs 1.5 to 5 ms (its providers'
 * start, measured on the project's machine; a later one 7 us): taken
 * where a process prepares to rendezvous (the file store opened, a
 * replacement announced), so that no rendezvous or heal waits on it;
 * nothing without a job secret.  Any failure shows again where a seal is
 * made. */
void mori__seal_warm(void);
/* Checks the seal of a value read under key and strips it (*len shrinks):
 * MORI_EAUTH naming key and what ("rank 1's req") if the value is not
 * sealed with this job's secret, or sealed where this rank has none. */
int mori__unseal(const char *key, const void *value, size_t *len, const char *what);
/* store->get, then mori__unseal (the value freed and NULL if refused). */
int mori__sealed_get(mori_store *store, const char *key, void **value, size_t *len,
                     int timeout_ms, const char *what);
/* Once per process, at INFO: this rendezvous runs without a job secret. */
void mori__seal_note(int rank, long window);
/* 1 if this build can seal (it has libcrypto). */
int mori__seal_supported(void);

/* ---- the rendezvous's store entries (group_store.c) ---- */

/* MORI_ERANGE naming the limit if group is longer than
 * MORI_SYMM_GROUP_MAX: what every rendezvous entry point checks first. */
int mori__group_check(const char *group);
/* mori_symm/<group>/<incarnation>/<seq>/<what>/<rank>; MORI_ESTATE if the
 * group has no incarnation yet (mori__publish_request agrees on it),
 * MORI_ERANGE if it does not fit n bytes (never cut short). */
int mori__store_key(char *out, size_t n, const mori_window *w, const char *what, int rank);
/* Gets what/<r> for every rank r != self into vals/lens (malloc'd; free
 * with mori__free_vals); ends early with MORI_EPEER on a peer's abort, and
 * on a timeout names every rank still missing. */
int mori__gather(mori_window *w, mori_store *store, const char *what, void **vals,
                 size_t *lens, int timeout_ms);
void mori__free_vals(void **vals, int n);
/* Sets what/<self>, then gathers what/<r> of every other rank. */
int mori__store_barrier(mori_window *w, mori_store *store, const char *what, int timeout_ms);
/* After the rendezvous's last barrier: the keys it wrote leave the store
 * (best effort, where the store can remove). */
void mori__store_cleanup(mori_window *w, mori_store *store);
/* Tells the group this rank gave up, so peers stop waiting (best effort);
 * the error message keeps the cause first, and a failure to publish is
 * appended to it. */
void mori__publish_abort(mori_window *w, mori_store *store);
/* After a failure rc of this rank's rendezvous: MORI_EPEER with the peer's
 * reason if a peer gave up first and rc is what that can cause here (a
 * socket gone, an allocation released), else rc unchanged. */
int mori__peer_failed_first(mori_window *w, mori_store *store, int rc);
/* Publishes this rank's request; the group's first rendezvous in this
 * process agrees on its incarnation first (rank 0 leads, others join). */
int mori__publish_request(mori_window *w, mori_store *store, const mori_request *q);
/* Gathers and decodes every other rank's request into reqs. */
int mori__gather_requests(mori_window *w, mori_store *store, mori_request *reqs, int timeout_ms);
/* For a rank that will not take part in the group's rendezvous number
 * seq: agrees the incarnation as that rendezvous would (the leader keeps
 * answering joins until every member's request is in, or timeout_ms) and
 * publishes an abort saying why, so peers fail now, not at their timeout. */
int mori__abort_rendezvous(const char *group, uint64_t seq, int rank, int world_size,
                           mori_store *store, const char *why, int timeout_ms);
/* The fd channel's abort check: ctx is a struct mori__abort_ctx. */
struct mori__abort_ctx {
  mori_window *w;
  mori_store *store;
};
int mori__channel_abort_check(void *ctx);

/* ---- the rendezvous's parts a heal runs again (rendezvous.c) ---- */

/* This rank's request for w, naming socket_name (the fd path's channel). */
int mori__fill_request(const mori_window *w, const char *socket_name, mori_request *q);
/* Rank's slot of w's span. */
char *mori__window_slot(const mori_window *w, int rank);
/* The sequence number the group's next rendezvous in this process takes. */
int mori__group_next_seq(const char *group, uint64_t *next);

/* ---- heals: the replacement's side (replacement.c) ---- */

/* Whether this process was started in place of a dead rank
 * (MORI_SYMM_REPLACEMENT=1, or mori_symm_set_replacement). */
int mori__replacement(void);
/* A replacement's rendezvous, before its request: learns the group's
 * incarnation and, for a window the survivors heal, the heal's
 * generation (w->heal_gen, which moves every key into the heal's) from
 * the survivors' offer, waiting up to timeout_ms for it. */
int mori__heal_join(mori_window *w, mori_store *store, int timeout_ms);
/* group_store.c: mori_symm/<group>/heal/<rank>[/<seq>] (seq < 0: the
 * group's part), where the survivors (heal.c) offer the dead rank's place
 * and the replacement (replacement.c) reads it. */
int mori__heal_offer_key(char *out, size_t n, const char *group, int rank, long long seq);
/* The seq argument that names .../heal/<rank>/<seq>/abort instead: where
 * a survivor whose heal failed says so to a replacement that has not
 * learned the heal's keys yet (a failed offer), and the replacement's
 * waits for the offer read it. */
#define MORI__HEAL_ABORT_KEY(seq) (-2 - (long long)(seq))
#define MORI__HEAL_ABORT_SEQ(arg) (-2 - (arg))
/* Writes the last error there for the heal of rank's window seq of group:
 * a survivor whose heal failed, or a replacement that failed before it
 * learned the heal's keys (mori__heal_join, or mori_symm_rendezvous_abort
 * in a replacement), as "rank <from>: <error>"; best effort, the error
 * kept. */
void mori__heal_abort_publish(const char *group, int rank, uint64_t seq, int from,
                              mori_store *store);
/* group_store.c: the group's incarnation is id, agreed (a replacement's,
 * from the survivors' offer), so that no agreement runs for it. */
int mori__incarnation_adopt(const char *group, const char *id);
/* group_store.c: the launcher's notice of rank's death leaves the store
 * (a heal replaced it; best effort). */
void mori__death_notice_clear(const mori_window *w, mori_store *store, int rank);

#endif
