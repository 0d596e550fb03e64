/*
 * preload.c - libmori_faultinject.so, loaded with LD_PRELOAD over a program
 * that calls the GPU runtime through libmori_hip_shim.so: one wrapper per
 * shim function, generated from the seam's lists (MORI_SHIM_HIP_CALLS and
 * MORI_FI_OS_CALLS), that counts the call, fails or
 * kills it when the MORI_FI schedule says so, records it, and otherwise
 * forwards to the shim's own definition (dlsym RTLD_NEXT).
 */
#include "preload.h"

#include "mori/values.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct fi_real fi__real;
pthread_mutex_t fi__lock = PTHREAD_MUTEX_INITIALIZER;
struct fi_process fi__p = {.rank = -1, .record_fd = -1};

/* Where an OS call goes when the schedule lets it through: the shim,
 * except that sendmsg and recvmsg pass the datagram rules first, close
 * drops what the datagram rules queued for the fd, and clock_gettime adds
 * the test's advance of the monotonic clock. */
static struct fi_real next;

/* ---- the clock the core reads ---- */

/* How far a test moved the monotonic clock ahead (mori_fi_clock_advance),
 * in this process and those it forks after: every deadline the core
 * keeps runs on it, so a test makes "later" happen now instead of
 * sleeping.  Only ever forward: the clock stays monotonic. */
static long long advance_ns;

static int advanced_clock_gettime(clockid_t clock, struct timespec *now) {
  int rc = fi__real.clock_gettime(clock, now);
  long long add = __atomic_load_n(&advance_ns, __ATOMIC_RELAXED);
  if (rc == 0 && clock == CLOCK_MONOTONIC && add > 0) {
    long long ns = (long long)now->tv_nsec + add % 1000000000LL;
    now->tv_sec += (time_t)(add / 1000000000LL + ns / 1000000000LL);
    now->tv_nsec = (long)(ns % 1000000000LL);
  }
  return rc;
}

/* ---- resolving the shim ---- */

static int forward_close(int fd) {
  fi__dgram_forget(fd);
  int rc = fi__real.close(fd);
  int saved = errno;
  pthread_mutex_lock(&fi__lock);
  fi__record_close(fd, rc);
  pthread_mutex_unlock(&fi__lock);
  errno = saved;
  return rc;
}

/* The shim's own definition of a mori_ symbol: the next one in the global
 * scope, else the one of a libmori_hip_shim.so already loaded into a local
 * scope (a Python extension's dependencies are: RTLD_NEXT does not see
 * them, while their calls still reach these wrappers first). */
static void *real_symbol(void *local, const char *name) {
  void *f = dlsym(RTLD_NEXT, name);
  return f != NULL || local == NULL ? f : dlsym(local, name);
}

static void resolve_once(void) {
  void *local = dlsym(RTLD_NEXT, "mori_hipMemCreate") != NULL
                    ? NULL
                    : dlopen(MORI_HIP_SHIM_SONAME, RTLD_LAZY | RTLD_NOLOAD);
#define FI_RESOLVE_HIP(name, arity, params, args, registry, shim, spec, errors)         \
  *(void **)&fi__real.name = real_symbol(local, "mori_" #name);
#define FI_RESOLVE_OS(ret, name, params, args)                                        \
  *(void **)&fi__real.name = real_symbol(local, "mori_" #name);
  MORI_SHIM_HIP_CALLS(FI_RESOLVE_HIP)
  MORI_FI_OS_CALLS(FI_RESOLVE_OS)
#undef FI_RESOLVE_HIP
#undef FI_RESOLVE_OS
  *(void **)&fi__real.mori_shim_message = real_symbol(local, "mori_shim_message");
  if (fi__real.hipMemCreate == NULL || fi__real.close == NULL || fi__real.malloc == NULL) {
    /* Only a program that calls the shim gets here, so the shim is missing
     * from behind us: nothing can be forwarded. */
    fprintf(stderr, "MORI_FI: libmori_faultinject.so found no libmori_hip_shim.so behind it, "
                    "in the global scope or loaded anywhere else\n");
    abort();
  }
  next = fi__real;
  next.sendmsg = fi__dgram_sendmsg;
  next.recvmsg = fi__dgram_recvmsg;
  next.close = forward_close;
  next.clock_gettime = advanced_clock_gettime;
}

void fi__resolve(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, resolve_once);
}

/* ---- progress: every call of every rank, where the launcher sees it ---- */

/* One counter per rank in memory shared with the process that loaded the
 * fault shim first and every process it forks (the launcher and its
 * ranks): a rank whose counter stands still while it is not in a call that
 * may block is hung, however slow the machine (docs/fault-injection.md). */
#define PROGRESS_RANKS 1024
static long *progress;

static void progress_map(void) {
  void *p = mmap(NULL, PROGRESS_RANKS * sizeof *progress, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  progress = p == MAP_FAILED ? NULL : p;
}

static void progress_step(void) {
  int r = fi__p.rank;
  if (progress != NULL && r >= 0 && r < PROGRESS_RANKS)
    __atomic_add_fetch(&progress[r], 1, __ATOMIC_RELAXED);
}

/* ---- refused releases ---- */

/* The resources whose last release failed (injected or not): the ledger
 * keeps them live, and a verdict that counts leaks must tell them from
 * resources nobody tried to release.  Keyed by call and handle/address. */
typedef struct refusal {
  int call;
  uintptr_t what;
} refusal;
static refusal *refused;
static size_t nrefused, cap_refused;

static void note_release(int call, uintptr_t what, int failed) {
  for (size_t i = 0; i < nrefused; i++)
    if (refused[i].call == call && refused[i].what == what) {
      if (!failed) refused[i] = refused[--nrefused];
      return;
    }
  if (!failed) return;
  if (nrefused == cap_refused) {
    size_t cap = cap_refused ? 2 * cap_refused : 16;
    refusal *grown = realloc(refused, cap * sizeof *grown);
    if (grown == NULL) return;
    refused = grown;
    cap_refused = cap;
  }
  refused[nrefused++] = (refusal){call, what};
}

/* ---- the process state ---- */

/* MORI_RANK by the strict reader (mori/values.h): a value it refuses is
 * said once on stderr, naming it, and the process has no rank (rank=
 * rules do not match it) rather than a guessed one. */
int fi__rank(void) {
  static int reported;
  if (fi__p.rank < 0) {
    char why[256];
    long long r;
    if (mori_env_int("MORI_RANK", 0, (1 << 20) - 1, -1, &r, why, sizeof why) != 0) {
      if (!reported++) fprintf(stderr, "MORI_FI: %s\n", why);
    } else if (r >= 0) {
      fi__p.rank = (int)r;
    }
  }
  return fi__p.rank;
}

static int rank_matches(const mori_fi_rule *r) { return r->rank < 0 || r->rank == fi__rank(); }

/* A rule's faults are a rank's first life's: a process the launcher
 * started in place of a dead rank (MORI_SYMM_REPLACEMENT=1) counts its
 * calls afresh, and a kill rule would kill every replacement again. */
static int first_life(void) {
  const char *v = getenv("MORI_SYMM_REPLACEMENT");
  return v == NULL || strcmp(v, "1") != 0;
}

/* A rule with life=N fires in that life alone: the launcher's count of the
 * rank's restarts (MORI_LAUNCH_LIFE; 0 in a first process that has none);
 * a replacement that does not say its life matches no life=. */
static int life_matches(const mori_fi_rule *r) {
  if (r->life < 0) return first_life();
  const char *v = getenv("MORI_LAUNCH_LIFE");
  char *end = NULL;
  if (v == NULL || *v == '\0') return first_life() && r->life == 0;
  long n = strtol(v, &end, 10);
  if (*end != '\0' || n < 0) {
    static atomic_int said;
    if (atomic_exchange(&said, 1) == 0)
      fprintf(stderr, "MORI_FI: MORI_LAUNCH_LIFE=%.32s is not a life (0, 1, ...): no life= "
                      "rule fires\n", v);
    return 0;
  }
  return n == r->life;
}

static int fires(const mori_fi_rule *r, long n) {
  return (r->persist ? n >= r->nth : n == r->nth) && life_matches(r);
}

const mori_fi_rule *fi__rule(mori_fi_target target, unsigned actions, long nth) {
  for (size_t i = 0; i < fi__p.sched.n; i++) {
    const mori_fi_rule *r = &fi__p.sched.rules[i];
    if (r->target == target && (actions & (1u << r->action)) && rank_matches(r) &&
        (nth <= 0 || fires(r, nth)))
      return r;
  }
  return NULL;
}

/* The rule that fails or kills the call now, if any. */
static const mori_fi_rule *call_rule(int call, long nth, long global) {
  for (size_t i = 0; i < fi__p.sched.n; i++) {
    const mori_fi_rule *r = &fi__p.sched.rules[i];
    if (!rank_matches(r)) continue;
    if (r->target == MORI_FI_T_CALL && r->call == call && fires(r, nth)) return r;
    if (r->target == MORI_FI_T_GLOBAL && mori_fi_call_is_hip(call) && fires(r, global)) return r;
  }
  return NULL;
}

static const char *path_of(mori_fi_target target, const char *env) {
  for (size_t i = 0; i < fi__p.sched.n; i++)
    if (fi__p.sched.rules[i].target == target && rank_matches(&fi__p.sched.rules[i]))
      return fi__p.sched.rules[i].path;
  const char *v = env ? getenv(env) : NULL;
  return v && *v ? v : NULL;
}

/* Zero counters, forget symbols and queues: a fresh process or schedule. */
static void reset_counters(void) {
  fi__p.pid = getpid();
  fi__p.rank = -1;
  memset(fi__p.calls, 0, sizeof fi__p.calls);
  memset(fi__p.us, 0, sizeof fi__p.us);
  memset(fi__p.us_max, 0, sizeof fi__p.us_max);
  memset(fi__p.nth_max, 0, sizeof fi__p.nth_max);
  fi__p.global = fi__p.injected = 0;
  fi__p.dgrams_sent = fi__p.dgrams_received = fi__p.dgram_forged = 0;
  fi__p.fd_dgrams_sent = fi__p.fd_dgrams_received = 0;
  fi__p.last_fault = -1;
  fi__p.ndelivered = 0;
  nrefused = 0;
  fi__record_reset();
}

/* ---- count=PATH ---- */

static void write_counts(void) {
  pthread_mutex_lock(&fi__lock);
  const char *base = path_of(MORI_FI_T_COUNT, NULL);
  if (base != NULL && (fi__p.global > 0 || fi__rank() >= 0)) {
    char path[4096];
    if (fi__rank() >= 0) snprintf(path, sizeof path, "%s.%d", base, fi__rank());
    else snprintf(path, sizeof path, "%s.pid%ld", base, (long)getpid());
    char why[4200];
    int fd = mori_fi__create_output(path, why, sizeof why);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (fd >= 0 && f == NULL) {
      snprintf(why, sizeof why, "fdopen(%s): %s", path, strerror(errno));
      close(fd);
    }
    if (f != NULL) {
      fprintf(f, "global %ld\ninjected %ld\ndatagrams_sent %ld\ndatagrams_received %ld\n",
              fi__p.global, fi__p.injected, fi__p.dgrams_sent, fi__p.dgrams_received);
      /* function, calls, then the microseconds the forwarded ones took:
       * in all and the longest, and which call of the function that was
       * (as a FUNCTION#N= rule numbers it); readers of
       * the counts ignore the rest */
      for (int c = 0; c < MORI_FI_CALL__COUNT; c++)
        if (fi__p.calls[c])
          fprintf(f, "%s %ld %.1f %.1f #%ld\n", mori_fi_call_name(c), fi__p.calls[c], fi__p.us[c],
                  fi__p.us_max[c], fi__p.nth_max[c]);
      fclose(f);
    } else {
      fprintf(stderr, "MORI_FI: count=%s: %s\n", base, why);
    }
  }
  pthread_mutex_unlock(&fi__lock);
}

/* ---- schedules ---- */

static int configure(const char *spec, char *err, size_t errlen) {
  mori_fi_schedule s;
  if (mori_fi_parse(spec ? spec : "", spec ? strlen(spec) : 0, &s, err, errlen) != 0) return -1;
  pthread_mutex_lock(&fi__lock);
  mori_fi_schedule_free(&fi__p.sched);
  fi__p.sched = s;
  reset_counters();
  fi__p.count_path = path_of(MORI_FI_T_COUNT, NULL);
  fi__p.record_path = path_of(MORI_FI_T_RECORD, "MORI_FI_RECORD");
  pthread_mutex_unlock(&fi__lock);
  return 0;
}

static void atfork_prepare(void) { pthread_mutex_lock(&fi__lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&fi__lock); }
static void atfork_child(void) {
  fi__dgram_reset();
  reset_counters();
  pthread_mutex_unlock(&fi__lock);
}

__attribute__((constructor)) static void fi_init(void) {
  char err[512];
  fi__p.pid = getpid();
  if (configure(getenv("MORI_FI"), err, sizeof err) != 0) {
    /* A fault run that silently injected nothing would pass for a clean one. */
    fprintf(stderr, "%s\n", err);
    _exit(2);
  }
  progress_map();
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
  atexit(write_counts);
}

/* ---- the wrappers ---- */

/* The detail message of the last injected failure on this thread, shown by
 * mori_shim_message() until a call that reaches the shim fails (the shim's
 * own detail then); and the error hipGetLastError() owes the caller. */
static __thread int tl_injected;
static __thread char tl_message[512];
static __thread hipError_t tl_pending;

typedef struct fi_call {
  int call;
  long nth, index;
  hipError_t rc, pending;
  int injected;
  double t0; /* when a forwarded call went on */
} fi_call;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The time a forwarded call took, for count=.  With fi__lock held. */
static void fi_took(const fi_call *c) {
  double us = now_us() - c->t0;
  fi__p.us[c->call] += us;
  if (us > fi__p.us_max[c->call]) {
    fi__p.us_max[c->call] = us;
    fi__p.nth_max[c->call] = c->nth;
  }
}

static void die(const fi_call *c, const mori_fi_rule *r) {
  char global[32] = "-";
  if (c->index > 0) snprintf(global, sizeof global, "%ld", c->index);
  fprintf(stderr, "MORI_FI: rank %d killed at %s (call %ld of it, global call %s) by rule '%s'\n",
          fi__rank(), mori_fi_call_name(c->call), c->nth, global, r->text);
  fflush(NULL);
  kill(getpid(), SIGKILL);
  _exit(137); /* not reached */
}

/* Fails the call under rule r: the error it returns, and the message
 * mori_shim_message() shows for it until the next call reaches the shim. */
static void inject(fi_call *c, const mori_fi_rule *r) {
  const char *name = mori_fi_call_name(c->call);
  char code[32], where[48] = "";
  const char *ename = mori_fi_failure_name(c->call, r->error, code, sizeof code);
  if (c->index > 0) snprintf(where, sizeof where, ", global call %ld", c->index);
  snprintf(tl_message, sizeof tl_message,
           "%s: %s (%d): injected by MORI_FI rule '%s' (call %ld of %s%s, rank %d)", name, ename,
           r->error, r->text, c->nth, name, where, fi__rank());
  c->rc = (hipError_t)r->error;
  c->injected = 1;
  fi__p.injected++;
  fi__p.last_fault = c->call;
  tl_injected = 1;
  if (mori_fi_call_is_hip(c->call)) tl_pending = c->rc;
}

/* Counts the call and decides.  1: injected (c->rc set, no forwarding). */
static int fi_enter(int call, fi_call *c) {
  fi__resolve();
  pthread_mutex_lock(&fi__lock);
  int hip = mori_fi_call_is_hip(call);
  c->call = call;
  c->nth = ++fi__p.calls[call];
  c->index = hip ? ++fi__p.global : -1;
  c->injected = 0;
  (void)fi__rank();
  progress_step();
  const mori_fi_rule *r = call_rule(call, c->nth, c->index);
  if (r != NULL && r->action == MORI_FI_A_KILL) {
    pthread_mutex_unlock(&fi__lock);
    die(c, r);
  }
  if (r != NULL) {
    inject(c, r);
  } else if (hip) { /* this call reaches the shim, which keeps its own last error */
    c->pending = tl_pending;
    tl_pending = hipSuccess;
  }
  pthread_mutex_unlock(&fi__lock);
  c->t0 = now_us();
  return c->injected;
}

/* released: what a releasing call gives back (its registry key), 0 for
 * any other call. */
static hipError_t fi_leave(fi_call *c, const fi_arg *argv, uintptr_t released) {
  /* The shim never saw an injected failure, so its last error does not
   * hold it: hipGetLastError must still report it, as HIP would. */
  if (c->call == MORI_FI_CALL_hipGetLastError && !c->injected && c->pending != hipSuccess)
    c->rc = c->pending;
  /* mori_shim_message() describes the last failed call, as the shim's own
   * detail does: a forwarded call that failed replaces the injected one */
  if (!c->injected && c->rc != hipSuccess && c->call != MORI_FI_CALL_hipGetLastError)
    tl_injected = 0; /* (hipGetLastError's result is an answer, not a failure) */
  pthread_mutex_lock(&fi__lock);
  if (!c->injected) fi_took(c);
  if (mori_fi_call_releases(c->call)) note_release(c->call, released, c->rc != hipSuccess);
  fi__record_hip(c->call, c->index, argv, c->rc, c->injected);
  pthread_mutex_unlock(&fi__lock);
  return c->rc;
}

#define FI_ARG(x) {&(x), sizeof(x)}
#define FI_PACK_0() {{NULL, 0}}
#define FI_PACK_1(a) {FI_ARG(a)}
#define FI_PACK_2(a, b) {FI_ARG(a), FI_ARG(b)}
#define FI_PACK_3(a, b, c) {FI_ARG(a), FI_ARG(b), FI_ARG(c)}
#define FI_PACK_4(a, b, c, d) {FI_ARG(a), FI_ARG(b), FI_ARG(c), FI_ARG(d)}
#define FI_PACK_5(a, b, c, d, e) {FI_ARG(a), FI_ARG(b), FI_ARG(c), FI_ARG(d), FI_ARG(e)}
#define FI_PACK_11(a, b, c, d, e, f, g, h, i, j, k)                                      \
  {FI_ARG(a), FI_ARG(b), FI_ARG(c), FI_ARG(d), FI_ARG(e), FI_ARG(f), FI_ARG(g), FI_ARG(h), \
   FI_ARG(i), FI_ARG(j), FI_ARG(k)}

/* The key a releasing row gives back (its registry column), 0 for others. */
#define FI_RELEASED(op, kind, key, size, when) FI_RELEASED_##op(key)
#define FI_RELEASED_none(key) 0
#define FI_RELEASED_acquire(key) 0
#define FI_RELEASED_release(key) (uintptr_t)(key)
#define FI_RELEASED_release_range(key) (uintptr_t)(key)

#define FI_WRAP(name, arity, params, args, registry, shim, spec, errors)              \
  FI_EXPORT hipError_t mori_##name params;                                            \
  FI_EXPORT hipError_t mori_##name params {                                           \
    fi_arg argv_[] = FI_PACK_##arity args;                                            \
    fi_call c_;                                                                       \
    if (fi_enter(MORI_FI_CALL_##name, &c_) == 0) c_.rc = fi__real.name args;          \
    return fi_leave(&c_, argv_, FI_RELEASED registry);                                \
  }
MORI_SHIM_HIP_CALLS(FI_WRAP)
#undef FI_WRAP

/* An injected failure of an OS call does not reach the shim, except that a
 * failed close still closes the fd, as Linux's close does whatever it
 * returns. */
#define FI_OS_WRAP(ret, name, params, args)                                           \
  FI_EXPORT ret mori_##name params;                                                   \
  FI_EXPORT ret mori_##name params {                                                  \
    fi_call c_;                                                                       \
    if (fi_enter(MORI_FI_CALL_##name, &c_) == 0) {                                   \
      ret r_ = next.name args;                                                        \
      int e_ = errno;                                                                 \
      pthread_mutex_lock(&fi__lock);                                                  \
      fi_took(&c_);                                                                   \
      pthread_mutex_unlock(&fi__lock);                                                \
      errno = e_;                                                                     \
      if (r_ == MORI_SHIM_OS_FAILURE(ret)) tl_injected = 0; /* the shim's detail now */ \
      return r_;                                                                      \
    }                                                                                 \
    if (MORI_FI_CALL_##name == MORI_FI_CALL_close) (void)next.name args;              \
    errno = (int)c_.rc;                                                               \
    return MORI_SHIM_OS_FAILURE(ret);                                                            \
  }
MORI_FI_OS_CALLS(FI_OS_WRAP)
#undef FI_OS_WRAP

FI_EXPORT const char *mori_shim_message(void);
FI_EXPORT const char *mori_shim_message(void) {
  if (tl_injected) return tl_message;
  fi__resolve();
  return fi__real.mori_shim_message ? fi__real.mori_shim_message() : "";
}

/* ---- control calls (reached through dlsym by mori_fi_control etc.) ---- */

FI_EXPORT int mori_fi_preload_configure(const char *spec, char *err, size_t errlen);
FI_EXPORT int mori_fi_preload_configure(const char *spec, char *err, size_t errlen) {
  return configure(spec, err, errlen);
}

FI_EXPORT long mori_fi_preload_injected(void);
FI_EXPORT long mori_fi_preload_injected(void) {
  pthread_mutex_lock(&fi__lock);
  long n = fi__p.injected;
  pthread_mutex_unlock(&fi__lock);
  return n;
}

/* fds the fault shim holds itself (its trace file), which a program that
 * counts its fds for leaks must not blame on the code under test. */
FI_EXPORT int mori_fi_preload_fds(void);
FI_EXPORT int mori_fi_preload_fds(void) {
  pthread_mutex_lock(&fi__lock);
  int n = fi__p.record_fd >= 0;
  pthread_mutex_unlock(&fi__lock);
  return n;
}

/* The call the last fault hit (mori_fi_call), -1 if none yet. */
FI_EXPORT int mori_fi_preload_last_fault(void);
FI_EXPORT int mori_fi_preload_last_fault(void) {
  pthread_mutex_lock(&fi__lock);
  int c = fi__p.last_fault;
  pthread_mutex_unlock(&fi__lock);
  return c;
}

/* Moves the monotonic clock the core reads ms ahead (ms >= 0); the total
 * advance, in ms. */
FI_EXPORT long mori_fi_preload_clock_advance(long ms);
FI_EXPORT long mori_fi_preload_clock_advance(long ms) {
  long long total = __atomic_add_fetch(&advance_ns, ms > 0 ? ms * 1000000LL : 0, __ATOMIC_RELAXED);
  return (long)(total / 1000000LL);
}

FI_EXPORT long mori_fi_preload_refused(void);
FI_EXPORT long mori_fi_preload_refused(void) {
  pthread_mutex_lock(&fi__lock);
  long n = (long)nrefused;
  pthread_mutex_unlock(&fi__lock);
  return n;
}

/* Every call rank has made (runtime and OS), in any process of this
 * launch; -1 outside the ranks this shim can see. */
FI_EXPORT long mori_fi_preload_progress(int rank);
FI_EXPORT long mori_fi_preload_progress(int rank) {
  if (progress == NULL || rank < 0 || rank >= PROGRESS_RANKS) return -1;
  return __atomic_load_n(&progress[rank], __ATOMIC_RELAXED);
}

FI_EXPORT long mori_fi_preload_calls(void);
FI_EXPORT long mori_fi_preload_calls(void) {
  pthread_mutex_lock(&fi__lock);
  long n = fi__p.global;
  pthread_mutex_unlock(&fi__lock);
  return n;
}

/* The size names the build: a program of another build (another call list)
 * gets -1 rather than counts under the wrong names. */
FI_EXPORT int mori_fi_preload_counts(mori_fi_counts *out, size_t size);
FI_EXPORT int mori_fi_preload_counts(mori_fi_counts *out, size_t size) {
  if (size != sizeof *out) return -1;
  pthread_mutex_lock(&fi__lock);
  memcpy(out->calls, fi__p.calls, sizeof out->calls);
  out->datagrams_sent = fi__p.dgrams_sent;
  out->datagrams_received = fi__p.dgrams_received;
  pthread_mutex_unlock(&fi__lock);
  return 0;
}
