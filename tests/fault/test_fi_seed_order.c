/*
 * test_fi_seed_order.c - why the seed's teardown crashed at >= 4 ranks and
 * ours does not, shown on the shim directly.  Four ranks build a window by
 * hand (export, pass the fd, import, map every slot) and tear it down in
 * our order or with the seed's deviations from it, under each sim quirk.
 * Each deviation must fail under exactly the quirk that models its ROCm
 * defect, and our order under none.  The same runs, recorded with the
 * fault shim and replayed under every quirk set, must point at the same
 * calls (run under LD_PRELOAD=libmori_faultinject.so).
 */
#include "fault_harness.h"

#include <fcntl.h>
#include <unistd.h>

#define WORLD 4
#define GRAN ((size_t)2 << 20)

/* The seed's deviations from our order (docs/teardown.md). */
enum {
  D_CLOSE_EXPORTED_EARLY = 1,  /* exported fd closed once peers have it */
  D_CLOSE_RECEIVED_EARLY = 2,  /* received fd closed right after its import */
  D_RELEASE_RETAINED = 4,      /* release a retained handle, then the original */
  D_UNMAP_SPAN_AT_ONCE = 8,    /* one unmap over every slot of the span */
  D_SEED = 15
};

/* The quirks, as MORI_SIM_QUIRKS names them. */
enum { Q_RETAIN = 1, Q_EXPORT_FD = 2, Q_UNMAP = 4, Q_MEMSET = 8, Q_IMPORT_FD = 16 };
static const struct {
  const char *name;
  unsigned bits;
} quirk_sets[] = {{"none", 0},
                  {"retain-no-ref", Q_RETAIN},
                  {"export-fd-lifetime", Q_EXPORT_FD},
                  {"unmap-multi", Q_UNMAP},
                  {"memset-fabric", Q_MEMSET},
                  {"import-fd-lifetime", Q_IMPORT_FD},
                  {"all", 31}};

/* Which quirk breaks which deviation, and what the failure says.  Closing
 * a received fd early breaks the mapping that follows on ROCm before the
 * fix of rocm-systems #8304 (quirk import-fd-lifetime): the build itself
 * fails; the other deviations break the teardown. */
static const struct {
  unsigned deviation, breaks;
  const char *says;
} expect[] = {
    {0, 0, NULL},
    {D_CLOSE_EXPORTED_EARLY, Q_EXPORT_FD, "quirk export-fd-lifetime"},
    {D_CLOSE_RECEIVED_EARLY, Q_IMPORT_FD, "quirk import-fd-lifetime"},
    {D_RELEASE_RETAINED, Q_RETAIN, "double release"},
    {D_UNMAP_SPAN_AT_ONCE, Q_UNMAP, "quirk unmap-multi"},
    {D_SEED, Q_RETAIN | Q_EXPORT_FD | Q_UNMAP | Q_IMPORT_FD, NULL},
};

typedef struct rank_state {
  const mori_rank_ctx *ctx;
  unsigned dev;
  hipMemGenericAllocationHandle_t own, imported[WORLD], retained[WORLD];
  void *local, *span;
  int exported_fd, received[WORLD];
  char first[512]; /* the first failure: call and the shim's message */
} rank_state;

/* Runs a call; the first failure is kept and the teardown goes on, as a
 * teardown must, so that every defect the order triggers shows. */
static int hip(rank_state *s, hipError_t e, const char *call) {
  if (e != hipSuccess && s->first[0] == '\0')
    snprintf(s->first, sizeof s->first, "%s: %s", call, mori_shim_message());
  return e != hipSuccess;
}

static int barrier(rank_state *s, const char *what) {
  char key[64];
  snprintf(key, sizeof key, "%s/%d", what, s->ctx->rank);
  if (s->ctx->store->set(s->ctx->store, key, "1", 1) != 0) return -1;
  for (int r = 0; r < WORLD; r++) {
    void *v = NULL;
    size_t n;
    snprintf(key, sizeof key, "%s/%d", what, r);
    if (s->ctx->store->get(s->ctx->store, key, &v, &n, 20000) != 0) return -1;
    free(v);
  }
  return 0;
}

static hipMemAllocationProp prop(int device) {
  hipMemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = hipMemAllocationTypePinned;
  p.requestedHandleType = hipMemHandleTypePosixFileDescriptor;
  p.location.type = hipMemLocationTypeDevice;
  p.location.id = device;
  return p;
}

/* The fd of every peer, opened through /proc like the sim's own fabric
 * path: the same memfd a SCM_RIGHTS datagram would have carried. */
static int exchange(rank_state *s) {
  char key[64], val[64];
  snprintf(key, sizeof key, "fd/%d", s->ctx->rank);
  int n = snprintf(val, sizeof val, "%ld %d", (long)getpid(), s->exported_fd);
  if (s->ctx->store->set(s->ctx->store, key, val, (size_t)n) != 0) return -1;
  for (int r = 0; r < WORLD; r++) {
    s->received[r] = -1;
    if (r == s->ctx->rank) continue;
    void *v = NULL;
    size_t len = 0;
    snprintf(key, sizeof key, "fd/%d", r);
    if (s->ctx->store->get(s->ctx->store, key, &v, &len, 20000) != 0) return -1;
    long pid = 0;
    int fd = -1;
    char text[64] = "", path[64];
    memcpy(text, v, len < sizeof text - 1 ? len : sizeof text - 1);
    free(v);
    if (sscanf(text, "%ld %d", &pid, &fd) != 2) return -1;
    snprintf(path, sizeof path, "/proc/%ld/fd/%d", pid, fd);
    if ((s->received[r] = open(path, O_RDWR | O_CLOEXEC)) < 0) return -1;
  }
  return barrier(s, "received"); /* from here the exporters may close their fds */
}

static int build(rank_state *s) {
  int me = s->ctx->rank;
  hipMemAllocationProp p = prop(me);
  hipMemAccessDesc access = {{hipMemLocationTypeDevice, me}, hipMemAccessFlagsProtReadWrite};
  if (hip(s, mori_hipSetDevice(me), "hipSetDevice") ||
      hip(s, mori_hipMemCreate(&s->own, GRAN, &p, 0), "hipMemCreate") ||
      hip(s, mori_hipMemAddressReserve(&s->local, GRAN, GRAN, NULL, 0), "hipMemAddressReserve") ||
      hip(s, mori_hipMemMap(s->local, GRAN, 0, s->own, 0), "hipMemMap") ||
      hip(s, mori_hipMemSetAccess(s->local, GRAN, &access, 1), "hipMemSetAccess") ||
      hip(s, mori_hipMemExportToShareableHandle(&s->exported_fd, s->own,
                                                hipMemHandleTypePosixFileDescriptor, 0),
          "hipMemExportToShareableHandle") ||
      exchange(s) != 0)
    return -1;
  if (s->dev & D_CLOSE_EXPORTED_EARLY) (void)mori_close(s->exported_fd), s->exported_fd = -1;
  for (int r = 0; r < WORLD; r++) {
    if (r == me) continue;
    if (hip(s, mori_hipMemImportFromShareableHandle(&s->imported[r], (void *)(intptr_t)s->received[r],
                                                    hipMemHandleTypePosixFileDescriptor),
            "hipMemImportFromShareableHandle"))
      return -1;
    if (s->dev & D_CLOSE_RECEIVED_EARLY) (void)mori_close(s->received[r]), s->received[r] = -1;
  }
  if (hip(s, mori_hipMemAddressReserve(&s->span, WORLD * GRAN, GRAN, NULL, 0), "hipMemAddressReserve"))
    return -1;
  for (int r = 0; r < WORLD; r++) {
    char *slot = (char *)s->span + (size_t)r * GRAN;
    if (hip(s, mori_hipMemMap(slot, GRAN, 0, r == me ? s->own : s->imported[r], 0), "hipMemMap") ||
        hip(s, mori_hipMemSetAccess(slot, GRAN, &access, 1), "hipMemSetAccess"))
      return -1;
  }
  uint32_t word = 0x5EED0000u | (uint32_t)me;
  for (int r = 0; r < WORLD; r++)
    if (hip(s, mori_hipMemcpy((char *)s->span + (size_t)r * GRAN + 4 * (size_t)me, &word, 4,
                              hipMemcpyHostToDevice),
            "hipMemcpy"))
      return -1;
  return barrier(s, "mapped"); /* nobody unmaps while a peer still writes */
}

/* Our order: synchronize; unmap each slot on its own; free the span;
 * release the imported handles, then close the fds they came from; the
 * local block; release the physical handle; close the exported fd last. */
static void teardown(rank_state *s) {
  int me = s->ctx->rank;
  (void)hip(s, mori_hipDeviceSynchronize(), "hipDeviceSynchronize");
  if (s->dev & D_RELEASE_RETAINED)
    for (int r = 0; r < WORLD; r++)
      (void)hip(s, mori_hipMemRetainAllocationHandle(&s->retained[r], (char *)s->span + (size_t)r * GRAN),
                "hipMemRetainAllocationHandle");
  if (s->dev & D_UNMAP_SPAN_AT_ONCE)
    (void)hip(s, mori_hipMemUnmap(s->span, WORLD * GRAN), "hipMemUnmap");
  else
    for (int r = 0; r < WORLD; r++)
      (void)hip(s, mori_hipMemUnmap((char *)s->span + (size_t)r * GRAN, GRAN), "hipMemUnmap");
  (void)hip(s, mori_hipMemAddressFree(s->span, WORLD * GRAN), "hipMemAddressFree");
  for (int r = 0; r < WORLD; r++) {
    if (s->dev & D_RELEASE_RETAINED) (void)hip(s, mori_hipMemRelease(s->retained[r]), "hipMemRelease");
    if (r == me) continue;
    (void)hip(s, mori_hipMemRelease(s->imported[r]), "hipMemRelease");
    if (s->received[r] >= 0) (void)mori_close(s->received[r]);
  }
  (void)hip(s, mori_hipMemUnmap(s->local, GRAN), "hipMemUnmap");
  (void)hip(s, mori_hipMemAddressFree(s->local, GRAN), "hipMemAddressFree");
  (void)hip(s, mori_hipMemRelease(s->own), "hipMemRelease");
  if (s->exported_fd >= 0) (void)mori_close(s->exported_fd);
}

static int shim_rank(const mori_rank_ctx *ctx, char *msg, size_t msglen) {
  rank_state s;
  memset(&s, 0, sizeof s);
  s.ctx = ctx;
  s.dev = *(const unsigned *)ctx->arg;
  s.exported_fd = -1;
  for (int r = 0; r < WORLD; r++) s.received[r] = -1;
  if (mori_shim_select("sim") != 0) return 1;
  int built = build(&s) == 0;
  if (built) teardown(&s);
  snprintf(msg, msglen, "built=%d leaks=%ld first=%s", built, mori_shim_registry_total(),
           s.first[0] ? s.first : "-");
  return s.first[0] != '\0' || mori_shim_registry_total() != 0;
}

static unsigned quirks_of(const char *failure) {
  static const struct {
    const char *says;
    unsigned bit;
  } sig[] = {{"double release", Q_RETAIN}, {"quirk export-fd-lifetime", Q_EXPORT_FD},
             {"quirk unmap-multi", Q_UNMAP}, {"quirk import-fd-lifetime", Q_IMPORT_FD}};
  for (size_t i = 0; i < sizeof sig / sizeof sig[0]; i++)
    if (strstr(failure, sig[i].says)) return sig[i].bit;
  return 0;
}

static void each_seed_deviation_fails_under_its_quirk_and_ours_under_none(void **st) {
  (void)st;
  for (size_t q = 0; q < sizeof quirk_sets / sizeof quirk_sets[0]; q++) {
    setenv("MORI_SIM_QUIRKS", quirk_sets[q].name, 1); /* read by each rank's sim */
    for (size_t v = 0; v < sizeof expect / sizeof expect[0]; v++) {
      mori_rank_result res[WORLD];
      unsigned dev = expect[v].deviation, breaks = expect[v].breaks & quirk_sets[q].bits;
      fh_run("", WORLD, shim_rank, &dev, res, -1);
      for (int r = 0; r < WORLD; r++) {
        int failed = res[r].exit_code != 0;
        const char *first = strstr(res[r].msg, "first=");
        /* a received fd closed early fails the build's mapping */
        const char *built = dev & D_CLOSE_RECEIVED_EARLY && breaks & Q_IMPORT_FD ? "built=0"
                                                                                 : "built=1";
        if (!strstr(res[r].msg, built) || failed != (breaks != 0) ||
            (failed && !(quirks_of(first) & breaks)) ||
            (failed && expect[v].says && !strstr(first, expect[v].says)))
          fail_msg("deviations 0x%x under quirks %s: rank %d should %s: %s", dev,
                   quirk_sets[q].name, r, breaks ? "fail under that quirk" : "pass", res[r].msg);
      }
    }
  }
  unsetenv("MORI_SIM_QUIRKS");
}

/* ---- the same, found by record and replay ---- */

static mori_fi_trace record(unsigned dev, const char *dir) {
  char spec[256], path[300], err[256];
  mori_rank_result res[WORLD];
  snprintf(spec, sizeof spec, "record=%s/t%u", dir, dev);
  setenv("MORI_SIM_QUIRKS", "none", 1);
  fh_run(spec, WORLD, shim_rank, &dev, res, -1);
  unsetenv("MORI_SIM_QUIRKS");
  for (int r = 0; r < WORLD; r++) assert_int_equal(res[r].exit_code, 0); /* no quirk: fine */
  snprintf(path, sizeof path, "%s/t%u.0", dir, dev);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  static char text[1 << 18];
  size_t len = fread(text, 1, sizeof text, f);
  fclose(f);
  unlink(path);
  for (int r = 1; r < WORLD; r++) {
    snprintf(path, sizeof path, "%s/t%u.%d", dir, dev, r);
    unlink(path);
  }
  mori_fi_trace t;
  if (mori_trace_parse(text, len, &t, err, sizeof err) != 0) fail_msg("trace: %s", err);
  return t;
}

static void replay_of_the_seeds_trace_finds_each_quirk_ours_replays_clean(void **st) {
  (void)st;
  char dir[] = "/tmp/mori-fi-seed-XXXXXX";
  assert_non_null(mkdtemp(dir));
  const unsigned orders[] = {0, D_SEED};
  for (size_t o = 0; o < 2; o++) {
    mori_fi_trace t = record(orders[o], dir);
    for (size_t q = 0; q < sizeof quirk_sets / sizeof quirk_sets[0]; q++) {
      mori_fi_replay_result res;
      assert_int_equal(mori_fi_replay(&t, "gfx950", quirk_sets[q].name, &res), 0);
      unsigned breaks = orders[o] ? quirk_sets[q].bits & (Q_RETAIN | Q_EXPORT_FD | Q_UNMAP) : 0;
      if (res.ok != !breaks || (!res.ok && !(quirks_of(res.message) & breaks)))
        fail_msg("order 0x%x replayed under %s: ok=%d at call %ld: %s", orders[o],
                 quirk_sets[q].name, res.ok, res.violation_at, res.message);
      if (res.ok) assert_int_equal(res.live_at_end, 0);
      /* the first violation is a teardown call, after everything was built */
      if (!res.ok) assert_true(mori_fi_call_releases(res.violation_call));
    }
    mori_trace_free(&t);
  }
  rmdir(dir);
}

int main(void) {
  if (!mori_fi_loaded()) {
    fprintf(stderr, "test_fi_seed_order needs LD_PRELOAD=libmori_faultinject.so\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(each_seed_deviation_fails_under_its_quirk_and_ours_under_none),
      cmocka_unit_test(replay_of_the_seeds_trace_finds_each_quirk_ours_replays_clean),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
