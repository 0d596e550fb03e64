/*
 * gen_corpus.c - writes the seed corpora of fuzz/corpus/<target>/ from the
 * real encoders, plus edge cases made by damaging valid messages, and
 * checks that the committed corpora are what it would write (a codec change
 * must regenerate them, or fuzzing would start from stale seeds).
 *
 *   mori-fuzz-corpus write DIR     (re)writes DIR/<target>/<seed>
 *   mori-fuzz-corpus check DIR     exits 1 naming each stale, missing or extra seed
 */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mori/fi.h"
#include "mori/fsm.h"
#include "mori/hip_shim.h"

#define FD_TYPE hipMemHandleTypePosixFileDescriptor
#define FABRIC_TYPE hipMemHandleTypeFabric

/* ---- emitting seeds ---- */

static const char *out_dir;
static int checking, defects;

/* Seeds are built in one buffer, then emitted. */
typedef struct seed {
  uint8_t b[8192];
  size_t n;
} seed;

static void add(seed *s, const void *p, size_t n) {
  if (s->n + n > sizeof s->b) {
    fprintf(stderr, "mori-fuzz-corpus: seed over %zu bytes\n", sizeof s->b);
    exit(2);
  }
  memcpy(s->b + s->n, p, n);
  s->n += n;
}

static void add_u8(seed *s, uint8_t v) { add(s, &v, 1); }

static void add_u16(seed *s, uint16_t v) {
  uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
  add(s, b, 2);
}

static void fail_gen(const char *what, const char *name) {
  fprintf(stderr, "mori-fuzz-corpus: %s: %s\n", name, what);
  exit(2);
}

/* "target/name" of every seed emitted, for the check of extra files. */
static char emitted[512][128];
static size_t nemitted;

static int was_emitted(const char *key) {
  for (size_t i = 0; i < nemitted; i++)
    if (strcmp(emitted[i], key) == 0) return 1;
  return 0;
}

static void emit(const char *target, const char *name, const seed *s) {
  char path[4096];
  if (nemitted == sizeof emitted / sizeof emitted[0]) fail_gen("too many seeds", name);
  snprintf(emitted[nemitted++], sizeof emitted[0], "%s/%s", target, name);
  snprintf(path, sizeof path, "%s/%s", out_dir, target);
  if (!checking && mkdir(path, 0755) != 0 && errno != EEXIST) fail_gen(strerror(errno), path);
  snprintf(path, sizeof path, "%s/%s/%s", out_dir, target, name);
  if (checking) {
    static uint8_t have[sizeof s->b + 1];
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(have, 1, sizeof have, f) : 0;
    if (f) fclose(f);
    if (!f || n != s->n || memcmp(have, s->b, n) != 0) {
      fprintf(stderr, "%s: %s\n", path, f ? "stale" : "missing");
      defects++;
    }
    return;
  }
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(s->b, 1, s->n, f) != s->n || fclose(f) != 0) fail_gen("write failed", path);
}

/* ---- wire seeds ---- */

static size_t encode_request(const mori_request *r, uint8_t *buf) {
  size_t len;
  if (mori_wire_encode_request(r, buf, MORI_WIRE_REQUEST_MAX, &len) != 0)
    fail_gen("the encoder refused a seed request", "request");
  return len;
}

/* mode 0: the message; mode 1: its body, for the harness to frame. */
static void add_message(seed *s, uint8_t mode, const uint8_t *msg, size_t len) {
  add_u8(s, mode);
  if (mode & 1)
    add(s, msg + MORI_FUZZ_HEADER_SIZE, len - MORI_FUZZ_HEADER_SIZE - MORI_FUZZ_CRC_SIZE);
  else
    add(s, msg, len);
}

static void emit_request(const char *name, uint8_t mode, const mori_request *r) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  seed s = {.n = 0};
  add_message(&s, mode, buf, encode_request(r, buf));
  emit("request", name, &s);
}

/* A valid request with bytes [at, at+n) of its body replaced (and, for
 * mode 1, reframed by the harness): reaches one field check. */
static void emit_request_patched(const char *name, const mori_request *r, size_t at,
                                 const void *bytes, size_t n) {
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  size_t len = encode_request(r, buf);
  memcpy(buf + MORI_FUZZ_HEADER_SIZE + at, bytes, n);
  seed s = {.n = 0};
  add_message(&s, 1, buf, len);
  mori_request out;
  uint8_t framed[MORI_FUZZ_MSG_MAX];
  size_t flen = mori__fuzz_frame(MORI_WIRE_KIND_REQUEST, s.b + 1, s.n - 1, framed, sizeof framed);
  if (mori_wire_decode_request(framed, flen, &out) == 0) fail_gen("edge case decodes", name);
  emit("request", name, &s);
}

static void request_seeds(void) {
  mori_request r;
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  mori__fuzz_world_request(0, 4, FD_TYPE, &r);
  emit_request("fd-rank0-of-4.raw", 0, &r);
  emit_request("fd-rank0-of-4.body", 1, &r);
  mori__fuzz_world_request(1, 2, FABRIC_TYPE, &r);
  emit_request("fabric-rank1-of-2.raw", 0, &r);
  emit_request("fabric-rank1-of-2.body", 1, &r);

  mori__fuzz_world_request(4095, MORI_WIRE_MAX_WORLD, FD_TYPE, &r);
  memset(r.socket_name, 'n', MORI_WIRE_SOCKET_NAME_MAX);
  r.socket_name[MORI_WIRE_SOCKET_NAME_MAX] = '\0';
  emit_request("largest-world-longest-name.raw", 0, &r);
  mori__fuzz_world_request(0, 1, FD_TYPE, &r);
  r.signal_pad_size = 0;
  r.signal_pad_offset = r.alloc_size;
  r.buffer_size = r.alloc_size;
  emit_request("no-signal-pad.body", 1, &r);

  /* Damaged frames, as received. */
  mori__fuzz_world_request(0, 4, FD_TYPE, &r);
  size_t len = encode_request(&r, buf);
  static const struct {
    const char *name;
    size_t at, keep; /* byte to flip (or none), bytes kept */
  } frames[] = {
      {"header-only.raw", SIZE_MAX, MORI_FUZZ_HEADER_SIZE},
      {"bad-magic.raw", 0, 0},
      {"bad-version.raw", 4, 0},
      {"bad-kind.raw", 7, 0},
      {"huge-total-length.raw", 11, 0},
      {"bad-crc.raw", SIZE_MAX - 1, 0},
      {"truncated.raw", SIZE_MAX, 40},
  };
  for (size_t i = 0; i < sizeof frames / sizeof frames[0]; i++) {
    uint8_t copy[MORI_WIRE_REQUEST_MAX];
    size_t n = frames[i].keep ? frames[i].keep : len;
    memcpy(copy, buf, len);
    if (frames[i].at == SIZE_MAX - 1)
      copy[len - 1] ^= 0x01;
    else if (frames[i].at != SIZE_MAX)
      copy[frames[i].at] ^= 0x40;
    seed s = {.n = 0};
    add_u8(&s, 0);
    add(&s, copy, n);
    emit("request", frames[i].name, &s);
  }

  /* Field defects behind a valid frame (body offsets from wire.h's order). */
  const uint32_t big = 5000, two = 2, fd = FD_TYPE;
  const uint8_t nul = 0;
  const uint16_t long_name = MORI_WIRE_SOCKET_NAME_MAX + 1;
  emit_request_patched("rank-beyond-world.body", &r, 0, &big, 4);
  emit_request_patched("world-beyond-max.body", &r, 4, &big, 4);
  emit_request_patched("buffer-beyond-pad.body", &r, 16, "\xff\xff\xff", 3);
  emit_request_patched("unknown-handle-type.body", &r, 68, &two, 4);
  emit_request_patched("nul-in-socket-name.body", &r, 86 + 3, &nul, 1);
  emit_request_patched("socket-name-too-long.body", &r, 84, &long_name, 2);
  mori__fuzz_world_request(0, 4, FABRIC_TYPE, &r);
  emit_request_patched("fabric-claims-fd.body", &r, 68, &fd, 4);
}

static void datagram_seed(const char *name, uint8_t mode, const uint8_t ctx[4],
                          const mori_datagram *d) {
  uint8_t buf[MORI_WIRE_PROOF_SIZE];
  size_t len;
  if (mori_wire_encode_datagram(d, buf, sizeof buf, &len) != 0)
    fail_gen("the encoder refused a seed datagram", name);
  seed s = {.n = 0};
  add_u8(&s, (uint8_t)(mode | d->type << 1)); /* the framing's kind (fuzz.h) */
  add(&s, ctx, 4);
  if (mode & 1)
    add(&s, buf + MORI_FUZZ_HEADER_SIZE, len - MORI_FUZZ_HEADER_SIZE - MORI_FUZZ_CRC_SIZE);
  else
    add(&s, buf, len);
  emit("datagram", name, &s);
}

static void datagram_seeds(void) {
  mori_request w[MORI_FUZZ_WORLD];
  for (int r = 0; r < MORI_FUZZ_WORLD; r++)
    mori__fuzz_world_request(r, MORI_FUZZ_WORLD, FD_TYPE, &w[r]);
  const uint8_t honest[4] = {2, 0, 0, 0}; /* one fd, the sender's own pid and uid, none seen */
  char name[64];
  for (uint32_t s = 0; s < MORI_FUZZ_WORLD; s++) {
    if (s == MORI_FUZZ_SELF) continue;
    mori_datagram d = {MORI_FUZZ_WINDOW_SEQ, s, MORI_FUZZ_SELF, w[s].nonce,
                       w[MORI_FUZZ_SELF].nonce, MORI_DATAGRAM_FD, 0};
    snprintf(name, sizeof name, "from-rank%u.raw", s);
    datagram_seed(name, 0, honest, &d);
    snprintf(name, sizeof name, "from-rank%u.body", s);
    datagram_seed(name, 1, honest, &d);
    /* the proof before it: rank s's challenge, and its answer to SELF's */
    static const uint8_t no_fd[4] = {1, 0, 0, 0};
    d.type = MORI_DATAGRAM_CHALLENGE;
    d.challenge = 0x0123456789abcdefull ^ s;
    snprintf(name, sizeof name, "challenge-from-rank%u.raw", s);
    datagram_seed(name, 0, no_fd, &d);
    d.type = MORI_DATAGRAM_ANSWER;
    d.challenge = mori__fuzz_challenge((int)s);
    snprintf(name, sizeof name, "answer-from-rank%u.raw", s);
    datagram_seed(name, 0, no_fd, &d);
    snprintf(name, sizeof name, "answer-from-rank%u.body", s);
    datagram_seed(name, 1, no_fd, &d);
  }
  const mori_datagram good = {MORI_FUZZ_WINDOW_SEQ, 0, MORI_FUZZ_SELF, w[0].nonce,
                              w[MORI_FUZZ_SELF].nonce, MORI_DATAGRAM_FD, 0};
  static const struct {
    const char *name;
    uint8_t ctx[4];
    int field; /* 0: none; 1 seq, 2 sender, 3 receiver, 4 sender nonce, 5 receiver nonce,
                  6: an answer (value: XORed into the secret it echoes) */
    uint64_t value;
  } cases[] = {
      {"duplicate.body", {2, 0, 0, 1}, 0, 0},
      {"forged-pid.body", {2, 1, 0, 0}, 0, 0},
      {"foreign-pid.body", {2, 0x80, 0, 0}, 0, 0},
      {"foreign-uid.body", {2, 0, 0x80, 0}, 0, 0},
      {"no-fd.body", {1, 0, 0, 0}, 0, 0},
      {"two-fds.body", {3, 0, 0, 0}, 0, 0},
      {"stale-sequence.body", {2, 0, 0, 0}, 1, MORI_FUZZ_WINDOW_SEQ - 1},
      {"claims-self.body", {2, 0, 0, 0}, 2, MORI_FUZZ_SELF},
      {"claims-rank-outside-world.body", {2, 0, 0, 0}, 2, MORI_FUZZ_WORLD},
      {"addressed-to-another-rank.body", {2, 0, 0, 0}, 3, 2},
      {"wrong-sender-nonce.body", {2, 0, 0, 0}, 4, 1},
      {"wrong-receiver-nonce.body", {2, 0, 0, 0}, 5, 1},
      /* answers: another secret than the one sent; one already taken;
       * one with an fd attached */
      {"answer-with-another-secret.body", {1, 0, 0, 0}, 6, 1},
      {"duplicate-answer.body", {1 | 3 << 2, 0, 0, 1}, 6, 0},
      {"answer-with-an-fd.body", {2, 0, 0, 0}, 6, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mori_datagram d = good;
    uint64_t v = cases[i].value;
    uint64_t *u64[] = {NULL, &d.window_seq, NULL, NULL, &d.sender_nonce, &d.receiver_nonce};
    if (cases[i].field == 2)
      d.sender_rank = (uint32_t)v;
    else if (cases[i].field == 3)
      d.receiver_rank = (uint32_t)v;
    else if (cases[i].field == 6)
      d.type = MORI_DATAGRAM_ANSWER, d.challenge = mori__fuzz_challenge(0) ^ v;
    else if (u64[cases[i].field])
      *u64[cases[i].field] = v;
    datagram_seed(cases[i].name, 1, cases[i].ctx, &d);
  }
}

/* ---- world seeds ---- */

typedef void (*world_edit)(mori_request *q, int n);

static void edit_none(mori_request *q, int n) {}
static void edit_duplicate_device(mori_request *q, int n) { q[n - 1].device = q[0].device; }
static void edit_duplicate_nonce(mori_request *q, int n) { q[n - 1].nonce = q[0].nonce; }
static void edit_unequal_size(mori_request *q, int n) { q[n - 1].buffer_size -= 4096; }
static void edit_other_host(mori_request *q, int n) { q[n - 1].host_id[0] ^= 1; }
static void edit_swapped_ranks(mori_request *q, int n) {
  mori_request t = q[0];
  q[0] = q[1], q[1] = t;
}
static void edit_world_size(mori_request *q, int n) { q[n - 1].world_size = (uint32_t)n + 1; }
static void edit_mixed_handles(mori_request *q, int n) {
  q[n - 1].handle_type = FABRIC_TYPE;
  q[n - 1].socket_name[0] = '\0';
}

static void world_seed(const char *name, uint8_t mode, int n, uint32_t type, world_edit edit) {
  mori_request q[8];
  uint8_t buf[MORI_WIRE_REQUEST_MAX];
  for (int i = 0; i < n; i++) mori__fuzz_world_request(i, n, type, &q[i]);
  edit(q, n);
  seed s = {.n = 0};
  add_u8(&s, mode);
  add_u8(&s, 0);
  for (int i = 0; i < n; i++) {
    size_t len = encode_request(&q[i], buf);
    size_t keep = (mode & 1) ? len - MORI_FUZZ_HEADER_SIZE - MORI_FUZZ_CRC_SIZE : len;
    add_u16(&s, (uint16_t)keep);
    add(&s, buf + ((mode & 1) ? MORI_FUZZ_HEADER_SIZE : 0), keep);
  }
  emit("world", name, &s);
}

static void world_seeds(void) {
  static const struct {
    const char *name;
    uint8_t mode;
    int n;
    uint32_t type;
    world_edit edit;
  } worlds[] = {
      {"fd-1-rank.raw", 0, 1, FD_TYPE, edit_none},
      {"fd-2-ranks.raw", 0, 2, FD_TYPE, edit_none},
      {"fd-4-ranks.raw", 0, 4, FD_TYPE, edit_none},
      {"fd-4-ranks.body", 1, 4, FD_TYPE, edit_none},
      {"fd-4-ranks.fixed-identity", 3, 4, FD_TYPE, edit_none},
      {"fabric-3-ranks.body", 1, 3, FABRIC_TYPE, edit_none},
      {"fabric-spanning-hosts.body", 1, 2, FABRIC_TYPE, edit_other_host},
      {"fd-spanning-hosts.body", 1, 2, FD_TYPE, edit_other_host},
      {"duplicate-device.fixed-identity", 3, 3, FD_TYPE, edit_duplicate_device},
      {"duplicate-nonce.fixed-identity", 3, 3, FD_TYPE, edit_duplicate_nonce},
      {"unequal-buffer-size.fixed-identity", 3, 3, FD_TYPE, edit_unequal_size},
      {"mixed-handle-types.fixed-identity", 3, 2, FD_TYPE, edit_mixed_handles},
      {"swapped-ranks.body", 1, 2, FD_TYPE, edit_swapped_ranks},
      {"wrong-world-size.body", 1, 3, FD_TYPE, edit_world_size},
  };
  for (size_t i = 0; i < sizeof worlds / sizeof worlds[0]; i++)
    world_seed(worlds[i].name, worlds[i].mode, worlds[i].n, worlds[i].type, worlds[i].edit);
}

/* ---- fsm seeds: operation scripts in the harness's encoding ---- */

enum { OP_PUSH, OP_FORGET, OP_FIRE, OP_RELEASE, OP_FAIL };

static void push(seed *s, mori_res kind, uint8_t value, int aux) {
  uint8_t op[4] = {OP_PUSH, (uint8_t)(kind + 1), value, (uint8_t)(aux + 1)};
  add(s, op, sizeof op);
}

static void fire(seed *s, mori_wevent ev) {
  uint8_t op[2] = {OP_FIRE, (uint8_t)ev};
  add(s, op, sizeof op);
}

/* A block through EXPORTED, one step per forward row. */
static void block_script(seed *s, int export_fd) {
  add_u8(s, 0);
  push(s, MORI_RES_PHYS_HANDLE, 1, 0);
  fire(s, MORI_EV_CREATE);
  push(s, MORI_RES_LOCAL_RESERVATION, 2, 0);
  fire(s, MORI_EV_RESERVE);
  push(s, MORI_RES_LOCAL_MAPPING, 3, 0);
  fire(s, MORI_EV_MAP);
  fire(s, MORI_EV_GRANT);
  fire(s, MORI_EV_ZERO);
  if (export_fd) push(s, MORI_RES_EXPORTED_FD, 4, 0);
  fire(s, MORI_EV_EXPORT);
}

/* A window of `world` ranks as rank `rank`, through MAPPED: the fd path
 * binds a channel, receives every peer's fd and closes the channel; every
 * peer's slot is mapped, the own one only by FLATTEN (the span's first
 * hand-out), which the fd-path shapes of more than one rank take. */
static void window_script(seed *s, int world, int rank, int fds) {
  uint8_t head[3] = {1, (uint8_t)world, (uint8_t)rank};
  add(s, head, sizeof head);
  push(s, MORI_RES_BLOCK_REF, 1, 0);
  fire(s, MORI_EV_ATTACH);
  if (fds) push(s, MORI_RES_CHANNEL, 2, 0);
  fire(s, MORI_EV_BIND);
  fire(s, MORI_EV_PUBLISH);
  fire(s, MORI_EV_GATHER);
  fire(s, MORI_EV_VALIDATE);
  fire(s, MORI_EV_TAKE_SLOT);
  for (int p = 0; fds && p < world; p++)
    if (p != rank) push(s, MORI_RES_RECEIVED_FD, (uint8_t)(16 + p), p);
  if (fds) {
    uint8_t forget[3] = {OP_FORGET, MORI_RES_CHANNEL + 1, 2};
    add(s, forget, sizeof forget);
  }
  fire(s, MORI_EV_EXCHANGE);
  for (int p = 0; p < world; p++)
    if (p != rank) push(s, MORI_RES_IMPORTED_HANDLE, (uint8_t)(32 + p), p);
  fire(s, MORI_EV_IMPORT);
  push(s, MORI_RES_SPAN_RESERVATION, 3, 0);
  fire(s, MORI_EV_RESERVE);
  for (int p = 0; p < world; p++)
    if (p != rank) push(s, MORI_RES_SLOT_MAPPING, (uint8_t)(48 + p), p);
  fire(s, MORI_EV_MAP);
  fire(s, MORI_EV_GRANT);
  push(s, MORI_RES_DEVICE_TABLE, 4, 0);
  fire(s, MORI_EV_BUILD_TABLES);
  fire(s, MORI_EV_BARRIER);
  if (fds && world > 1) {
    push(s, MORI_RES_OWN_SLOT_MAPPING, (uint8_t)(48 + rank), 0);
    fire(s, MORI_EV_FLATTEN);
  }
}

static void fsm_seeds(void) {
  seed s = {.n = 0};
  block_script(&s, 1);
  add_u8(&s, OP_RELEASE);
  emit("fsm", "block-lifecycle-fd", &s);
  s.n = 0;
  block_script(&s, 0);
  add_u8(&s, OP_FAIL);
  emit("fsm", "block-fabric-then-fail", &s);
  s.n = 0;
  add_u8(&s, 0);
  push(&s, MORI_RES_PHYS_HANDLE, 0x81, 0); /* its release fails */
  fire(&s, MORI_EV_CREATE);
  push(&s, MORI_RES_LOCAL_RESERVATION, 2, 0);
  add_u8(&s, OP_FAIL);
  emit("fsm", "block-rollback-with-failing-release", &s);

  static const int shapes[][3] = {{1, 0, 1}, {2, 1, 1}, {4, 2, 1}, {4, 0, 0}, {8, 7, 1}};
  char name[64];
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    s.n = 0;
    window_script(&s, shapes[i][0], shapes[i][1], shapes[i][2]);
    add_u8(&s, OP_RELEASE);
    snprintf(name, sizeof name, "window-%d-ranks-rank%d%s", shapes[i][0], shapes[i][1],
             shapes[i][2] ? "-fd" : "-fabric");
    emit("fsm", name, &s);
  }
  /* A received fd whose ownership passed on (forgotten), then a rollback. */
  s.n = 0;
  window_script(&s, 2, 0, 1);
  uint8_t forget[3] = {OP_FORGET, MORI_RES_RECEIVED_FD + 1, 17};
  add(&s, forget, sizeof forget);
  add_u8(&s, OP_FAIL);
  emit("fsm", "window-forget-received-fd-then-fail", &s);
  /* An exchange that never closed its channel: EXCHANGED's invariant
   * refuses the fire, and the rollback closes both. */
  s.n = 0;
  uint8_t head[3] = {1, 2, 0};
  add(&s, head, sizeof head);
  push(&s, MORI_RES_BLOCK_REF, 1, 0);
  fire(&s, MORI_EV_ATTACH);
  push(&s, MORI_RES_CHANNEL, 2, 0);
  fire(&s, MORI_EV_BIND);
  push(&s, MORI_RES_BLOCK_REF, 3, 0); /* not acquired here: refused */
  fire(&s, MORI_EV_PUBLISH);
  fire(&s, MORI_EV_GATHER);
  fire(&s, MORI_EV_VALIDATE);
  fire(&s, MORI_EV_TAKE_SLOT);
  push(&s, MORI_RES_RECEIVED_FD, 17, 1);
  fire(&s, MORI_EV_EXCHANGE); /* the channel is still open: broken invariant */
  add_u8(&s, OP_FAIL);
  emit("fsm", "window-exchange-keeping-the-channel", &s);
}

/* ---- fault injection: schedules and traces are text ---- */

/* Seeds named "bad-..." are meant to be rejected, the others accepted. */
static void emit_text(const char *target, const char *name, const char *text, int parsed) {
  if (parsed != (strncmp(name, "bad-", 4) != 0))
    fail_gen(parsed ? "a bad- seed parses" : "the seed does not parse", name);
  seed s = {.n = 0};
  add(&s, text, strlen(text));
  emit(target, name, &s);
}

static void fi_schedule_seeds(void) {
  static const struct {
    const char *name, *spec;
  } specs[] = {
      {"fail-one-call", "hipMemMap#2=hipErrorOutOfMemory"},
      {"fail-by-number", "mori_hipMemCreate#1=2"},
      {"persist-from-call", "hipMemImportFromShareableHandle#3=persist:hipErrorInvalidValue"},
      {"persist-every-call", "hipMemUnmap#*=hipErrorUnmapFailed"},
      {"global-call-index", "call#17=hipErrorNotSupported"},
      {"kill-on-rank", "rank=2 hipMemSetAccess#1=kill"},
      {"recv-reorder", "recv=reorder:seed=12345"},
      {"recv-order", "rank=0 recv=order:3,1,2"},
      {"recv-duplicate", "recv=duplicate#2"},
      {"send-actions", "send=drop;send=truncate#2;rank=1 send=forge#*"},
      {"count-and-record", "count=/tmp/mori-fi/count ; record=/tmp/mori-fi/trace"},
      {"every-form",
       "rank=1 hipMalloc#1=hipErrorOutOfMemory; call#4=persist:999;"
       " recv=duplicate; send=drop#3 ;;rank=3 record=/tmp/t"},
      {"bad-unknown-function", "hipMemFrobnicate#1=hipErrorUnknown"},
      {"os-call-errno", "openat#3=EIO;rank=1 malloc#*=ENOMEM;mori_sendmsg#2=persist:EAGAIN"},
      {"os-call-errno-number", "close#1=5;write#2=kill"},
      {"bad-hip-error-for-os-call", "sendmsg#1=hipErrorUnknown"},
      {"bad-errno-for-runtime-call", "hipMemMap#1=EIO"},
      {"bad-call-zero", "hipMemMap#0=kill"},
      {"bad-persistent-kill", "hipMemMap#*=kill"},
      {"bad-inject-success", "hipFree#1=hipSuccess"},
      {"bad-order-repeats", "recv=order:1,2,1"},
      {"bad-rank-too-large", "rank=4096 hipFree#1=kill"},
      {"bad-trailing", "hipFree#1=kill x"},
      {"bad-empty-path", "record=   ;"},
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    mori_fi_schedule sched;
    int ok = mori_fi_parse(specs[i].spec, strlen(specs[i].spec), &sched, NULL, 0) == 0;
    if (ok) mori_fi_schedule_free(&sched);
    emit_text("fi_schedule", specs[i].name, specs[i].spec, ok);
  }
}

/* One rank's share of a 2-rank POSIX-fd rendezvous, in the recorder's
 * spelling (faultinject/preload_record.c): every call of the seam once. */
static const char trace_fd_lifecycle[] =
    "# mori-fi trace v1\n"
    "# rank 0\n"
    "1 hipGetDeviceCount rc=hipSuccess\n"
    "2 hipSetDevice device=0 rc=hipSuccess\n"
    "3 hipMemGetAllocationGranularity out=0x200000 prop=pinned/fabric/0 option=0x1 rc=hipSuccess\n"
    "4 hipMemCreate out=0 size=0x200000 prop=pinned/fabric/0 flags=0x0 rc=hipErrorNotSupported\n"
    "5 hipGetLastError rc=hipErrorNotSupported\n"
    "6 hipMemGetAllocationGranularity out=0x200000 prop=pinned/posix_fd/0 option=0x1 "
    "rc=hipSuccess\n"
    "7 hipMemCreate out=h1 size=0x600000 prop=pinned/posix_fd/0 flags=0x0 rc=hipSuccess\n"
    "8 hipMemAddressReserve out=r1 size=0x600000 align=0x200000 hint=0 flags=0x0 rc=hipSuccess\n"
    "9 hipMemMap addr=r1 size=0x600000 offset=0x0 handle=h1 flags=0x0 rc=hipSuccess\n"
    "10 hipMemSetAccess addr=r1 size=0x600000 desc=rw/0 count=0x1 rc=hipSuccess\n"
    "11 hipMemset dst=r1 value=0 size=0x600000 rc=hipSuccess\n"
    "12 hipMemExportToShareableHandle out=fd1 handle=h1 type=posix_fd flags=0x0 rc=hipSuccess\n"
    "- sendmsg fds=fd1 bytes=0x30 rc=48\n"
    "- recvmsg fds=fd2 bytes=0x30 rc=48\n"
    "13 hipMemImportFromShareableHandle out=h2 os=fd2 type=posix_fd rc=hipSuccess\n"
    "- close fd=fd2 rc=0\n"
    "14 hipMemAddressReserve out=r2 size=0xc00000 align=0x200000 hint=0 flags=0x0 rc=hipSuccess\n"
    "15 hipMemMap addr=r2 size=0x600000 offset=0x0 handle=h1 flags=0x0 rc=hipSuccess\n"
    "16 hipMemMap addr=r2+0x600000 size=0x600000 offset=0x0 handle=h2 flags=0x0 rc=hipSuccess\n"
    "17 hipMemSetAccess addr=r2 size=0xc00000 desc=rw/0 count=0x1 rc=hipSuccess\n"
    "18 hipMalloc out=d1 size=0x10 rc=hipSuccess\n"
    "19 hipMemcpy dst=d1 src=host size=0x10 kind=0x1 rc=hipSuccess\n"
    "20 hipStreamWriteValue32 stream=0 addr=r2+0xa02400 value=0x1 flags=0x0 rc=hipSuccess\n"
    "21 hipStreamWaitValue32 stream=s1 addr=r2+0x402400 value=0x1 flags=0x1 mask=0xffffffff "
    "rc=hipSuccess\n"
    "22 hipStreamSynchronize stream=s1 rc=hipSuccess\n"
    "23 hipDeviceSynchronize rc=hipSuccess\n"
    "24 hipDeviceGetAttribute attr=0x5 device=0 rc=hipSuccess\n"
    "25 hipGetDevice rc=hipSuccess\n"
    "26 hipRuntimeGetVersion rc=hipSuccess\n"
    "27 hipFree addr=d1 rc=hipSuccess\n"
    "28 hipMemUnmap addr=r2+0x600000 size=0x600000 rc=hipSuccess\n"
    "29 hipMemUnmap addr=r2 size=0x600000 rc=hipSuccess\n"
    "30 hipMemRelease handle=h2 rc=hipSuccess\n"
    "31 hipMemAddressFree addr=r2 size=0xc00000 rc=hipSuccess\n"
    "32 hipMemUnmap addr=r1 size=0x600000 rc=hipSuccess\n"
    "33 hipMemAddressFree addr=r1 size=0x600000 rc=hipSuccess\n"
    "34 hipMemRelease handle=h1 rc=hipSuccess\n"
    "- close fd=fd1 rc=0\n";

static void fi_trace_seeds(void) {
  static const struct {
    const char *name, *text;
  } traces[] = {
      {"fd-lifecycle-rank0", trace_fd_lifecycle},
      {"fabric-export-import",
       "# rank 1\n"
       "1 hipMemCreate out=h1 size=0x200000 prop=pinned/fabric/1 flags=0x0 rc=hipSuccess\n"
       "2 hipMemExportToShareableHandle out=fabric handle=h1 type=fabric flags=0x0 "
       "rc=hipSuccess\n"
       "3 hipMemImportFromShareableHandle out=h2 os=fabric type=8 rc=hipSuccess\n"
       "4 hipMemRetainAllocationHandle out=h3 addr=r1+0x1000 rc=hipSuccess\n"},
      {"injected-failure",
       "7 hipMemCreate out=0 size=0x600000 prop=pinned/posix_fd/0 flags=0x0 "
       "rc=hipErrorOutOfMemory injected\n"
       "- sendmsg fds=none bytes=0x30 rc=-1 errno=EPIPE injected\n"},
      {"numbers-and-names",
       "1 hipMemSetAccess addr=d4+0x10 size=4096 desc=3/7 count=1 rc=2\n"
       "2 hipMemcpy dst=host src=0 size=0 kind=0 rc=hipErrorInvalidValue\n"
       "- recvmsg fds=fd1,fd2,fd3 bytes=0x60 rc=96\n"
       "- close fd=other rc=-1\n"},
      {"bad-unknown-call", "1 hipMemFrobnicate rc=hipSuccess\n"},
      {"bad-socket-call-with-index", "5 close fd=fd1 rc=0\n"},
      {"bad-runtime-call-without-index", "- hipFree addr=d1 rc=hipSuccess\n"},
      {"bad-missing-rc", "1 hipFree addr=d1\n"},
      {"bad-value", "1 hipMemMap addr=q1 size=0x1 offset=0x0 handle=h1 flags=0x0 rc=0\n"},
      {"bad-trailing-word", "1 hipFree addr=d1 rc=hipSuccess later\n"},
  };
  for (size_t i = 0; i < sizeof traces / sizeof traces[0]; i++) {
    mori_fi_trace tr;
    int ok = mori_trace_parse(traces[i].text, strlen(traces[i].text), &tr, NULL, 0) == 0;
    if (ok) mori_trace_free(&tr);
    emit_text("fi_trace", traces[i].name, traces[i].text, ok);
  }
}

/* ---- main ---- */

/* Names every file under DIR/<target> that the generator did not write:
 * a seed left behind by a renamed case would otherwise live on unseen. */
static void find_extra(const char *target) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", out_dir, target);
  DIR *d = opendir(path);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", target, e->d_name);
    if (!was_emitted(path)) {
      fprintf(stderr, "%s/%s: not a generated seed\n", out_dir, path);
      defects++;
    }
  }
  closedir(d);
}

static const char *const targets[] = {"request", "datagram",    "world",
                                      "fsm",     "fi_schedule", "fi_trace"};

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "write") != 0 && strcmp(argv[1], "check") != 0)) {
    fprintf(stderr, "usage: mori-fuzz-corpus write|check DIR\n");
    return 2;
  }
  checking = strcmp(argv[1], "check") == 0;
  out_dir = argv[2];
  if (!checking && mkdir(out_dir, 0755) != 0 && errno != EEXIST) fail_gen(strerror(errno), out_dir);
  request_seeds();
  datagram_seeds();
  world_seeds();
  fsm_seeds();
  fi_schedule_seeds();
  fi_trace_seeds();
  for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) find_extra(targets[i]);
  if (checking && defects) {
    fprintf(stderr, "%d seeds differ: run mori-fuzz-corpus write %s\n", defects, out_dir);
    return 1;
  }
  return 0;
}
