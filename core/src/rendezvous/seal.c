/*
 * seal.c - what binds a rendezvous's store entries to its job: a secret the
 * ranks share out of band (MORI_SYMM_JOB_SECRET; mori_launch draws one per
 * launch), never written to the store.  With one, every value a rendezvous
 * writes carries an HMAC-SHA256 (OpenSSL's libcrypto) over its key and its
 * bytes, and every value it reads must carry this job's, so that nothing
 * written by a process without the secret is taken, nor a value moved
 * from another key or another job (docs/security.md says why a MAC and
 * not secret key names).  Without one, values go as they are.
 */
#include "rendezvous.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#ifdef MORI_SYMM_HAVE_LIBCRYPTO
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#endif

#define SECRET_ENV "MORI_SYMM_JOB_SECRET"
#define SECRET_HEX_MIN 32  /* 128 bits */
#define SECRET_HEX_MAX 128 /* 512 bits */
#define TAG_SIZE 32        /* HMAC-SHA256 */
/* A sealed value is the value, its tag, then this: a rank can tell a
 * sealed value from a bare one, and so say which side lacks the secret. */
static const char seal_mark[8] = {'M', 'O', 'R', 'I', 'S', 'E', 'A', 'L'};
#define SEAL_SIZE (TAG_SIZE + sizeof seal_mark)
/* The largest value sealed: an abort's text is under 1 KiB, a request
 * MORI_WIRE_REQUEST_MAX bytes.  The largest read is whatever a store
 * returns (MORI_STORE_VALUE_MAX); the longest key, KEY_LIMIT - 1 bytes
 * (group_store.c's KEY_MAX). */
#define SEALED_VALUE_MAX 1024
#define KEY_LIMIT 512
#define KEY_SHOWN 160

typedef struct secret {
  int set;
  size_t len;
  uint8_t bytes[SECRET_HEX_MAX / 2];
} secret;

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* The job's secret from the environment: none, or 32 to 128 hex digits.
 * The value is never shown in a message (it is the secret). */
static int secret_get(secret *s) {
  const char *v = getenv(SECRET_ENV);
  memset(s, 0, sizeof *s);
  if (v == NULL || *v == '\0') return 0;
  size_t n = strlen(v);
  int ok = n >= SECRET_HEX_MIN && n <= SECRET_HEX_MAX && n % 2 == 0;
  for (size_t i = 0; ok && i < n; i++) ok = hex_digit(v[i]) >= 0;
  if (!ok)
    return mori__error(MORI_EINVAL,
                       "rendezvous: " SECRET_ENV "=<%zu characters, not shown: the job's "
                       "secret>: not an even count of hex digits from 32 to 128 (accepted: "
                       "32 to 128 hex digits, the same on every rank, e.g. from `openssl rand "
                       "-hex 32`)",
                       n);
#ifndef MORI_SYMM_HAVE_LIBCRYPTO
  return mori__error(MORI_ENOTSUP,
                     "rendezvous: " SECRET_ENV " is set, but this build of mori-symm has no "
                     "HMAC: it was configured without OpenSSL's libcrypto (install libssl-dev "
                     "and rebuild), so it cannot seal the job's store entries; unset it to run "
                     "unsealed (docs/security.md says what that leaves open)");
#else
  for (size_t i = 0; i < n / 2; i++)
    s->bytes[i] = (uint8_t)(hex_digit(v[2 * i]) << 4 | hex_digit(v[2 * i + 1]));
  s->len = n / 2;
  s->set = 1;
  return 0;
#endif
}

int mori__seal_supported(void) {
#ifdef MORI_SYMM_HAVE_LIBCRYPTO
  return 1;
#else
  return 0;
#endif
}

#ifdef MORI_SYMM_HAVE_LIBCRYPTO
/* What is MACed: this label, the key, and the value, NUL between them (a
 * key holds no NUL): a value is bound to the one key it was written under. */
static const char seal_label[] = "mori-symm seal 1";

/* The tag of value under key. */
static int tag_of(const secret *s, const char *key, const void *value, size_t len,
                  uint8_t tag[TAG_SIZE]) {
  uint8_t msg[sizeof seal_label + KEY_LIMIT + MORI_STORE_VALUE_MAX];
  size_t klen = strnlen(key, KEY_LIMIT) + 1, n = 0;
  if (klen > KEY_LIMIT || len > MORI_STORE_VALUE_MAX)
    mori__bug("seal: a key of %zu bytes or a value of %zu (the store's limits: %d and %d)", klen,
              len, KEY_LIMIT - 1, MORI_STORE_VALUE_MAX);
  memcpy(msg, seal_label, sizeof seal_label);
  n = sizeof seal_label;
  memcpy(msg + n, key, klen);
  n += klen;
  if (len) memcpy(msg + n, value, len);
  n += len;
  unsigned int tag_len = 0;
  if (HMAC(EVP_sha256(), s->bytes, (int)s->len, msg, n, tag, &tag_len) == NULL ||
      tag_len != TAG_SIZE)
    return mori__error(MORI_EIO, "rendezvous: HMAC-SHA256 (libcrypto) failed");
  return 0;
}
#endif

void mori__seal_warm(void) {
#ifdef MORI_SYMM_HAVE_LIBCRYPTO
  static atomic_int warmed;
  secret s;
  uint8_t tag[TAG_SIZE];
  if (atomic_load(&warmed) || secret_get(&s) != 0 || !s.set) return;
  (void)tag_of(&s, "warm", NULL, 0, tag);
  OPENSSL_cleanse(&s, sizeof s);
  atomic_store(&warmed, 1);
#endif
}

int mori__sealed_set(mori_store *store, const char *key, const void *value, size_t len) {
  secret s;
  MORI_GUARD(secret_get(&s));
  if (!s.set) return store->set(store, key, value, len);
  if (len > SEALED_VALUE_MAX) mori__bug("seal: a value of %zu bytes to seal", len);
#ifdef MORI_SYMM_HAVE_LIBCRYPTO
  uint8_t sealed[SEALED_VALUE_MAX + SEAL_SIZE];
  if (len) memcpy(sealed, value, len);
  int rc = tag_of(&s, key, value, len, sealed + len);
  if (rc == 0) {
    memcpy(sealed + len + TAG_SIZE, seal_mark, sizeof seal_mark);
    rc = store->set(store, key, sealed, len + SEAL_SIZE);
  }
  OPENSSL_cleanse(&s, sizeof s);
  return rc;
#else
  return MORI_ENOTSUP; /* secret_get refused it */
#endif
}

static int marked(const void *value, size_t len) {
  return len >= SEAL_SIZE &&
         memcmp((const uint8_t *)value + len - sizeof seal_mark, seal_mark, sizeof seal_mark) == 0;
}

static int refused(const char *key, const char *what, const char *why) {
  char shown[KEY_SHOWN + 64];
  return mori__error(MORI_EAUTH, "rendezvous: seal mismatch: %s under '%s' %s", what,
                     mori__escape(shown, sizeof shown, key, strlen(key), KEY_SHOWN), why);
}

int mori__unseal(const char *key, const void *value, size_t *len, const char *what) {
  secret s;
  MORI_GUARD(secret_get(&s));
  if (!s.set) {
    if (marked(value, *len))
      return refused(key, what,
                     "is sealed with a job secret, and this rank has none: set " SECRET_ENV
                     " to the same value on every rank of the job, or on none");
    return 0;
  }
  if (!marked(value, *len) || *len > MORI_STORE_VALUE_MAX)
    return refused(key, what,
                   "carries no seal: its writer has no job secret (" SECRET_ENV
                   "), and this rank's job has one: another job wrote it, or someone "
                   "writing into the store");
#ifdef MORI_SYMM_HAVE_LIBCRYPTO
  uint8_t tag[TAG_SIZE];
  size_t bare = *len - SEAL_SIZE;
  int rc = tag_of(&s, key, value, bare, tag);
  OPENSSL_cleanse(&s, sizeof s);
  if (rc != 0) return rc;
  if (CRYPTO_memcmp(tag, (const uint8_t *)value + bare, TAG_SIZE) != 0)
    return refused(key, what,
                   "is not sealed with this job's secret (" SECRET_ENV
                   "): the job secrets differ (another job wrote it, or moved it from "
                   "another key), or someone without the secret wrote it into the store");
  *len = bare;
  return 0;
#else
  return MORI_ENOTSUP;
#endif
}

int mori__sealed_get(mori_store *store, const char *key, void **value, size_t *len,
                     int timeout_ms, const char *what) {
  int rc = store->get(store, key, value, len, timeout_ms);
  if (rc != 0) return rc;
  rc = mori__unseal(key, *value, len, what);
  if (rc != 0) {
    free(*value);
    *value = NULL;
  }
  return rc;
}

/* Once per process: a rendezvous over a store without a secret says what
 * that leaves open. */
void mori__seal_note(int rank, long window) {
  static atomic_int said;
  secret s;
  if (secret_get(&s) != 0 || s.set || atomic_exchange(&said, 1)) {
#ifdef MORI_SYMM_HAVE_LIBCRYPTO
    OPENSSL_cleanse(&s, sizeof s);
#endif
    return;
  }
  MORI_LOG(MORI_LOG_INFO, rank, window,
           "rendezvous: no job secret (" SECRET_ENV " is unset): the store's entries are not "
           "sealed, so whoever can write into this store can splice this job with another of "
           "the same group name (each would map the other's memory); set " SECRET_ENV
           " to the same random value on every rank (docs/security.md)");
}
