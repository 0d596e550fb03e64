/*
 * watchdog.c - bounded GPU waits.  A signal call with a timeout records an
 * event before its waits and one after, and hands the watchdog the cells
 * its stream waits on.  One thread per process (started at the first such
 * call) polls the events: once the stream has reached the first event, the
 * deadline runs; a wait still pending at the deadline is released by
 * writing the awaited value into the local cell through a private
 * non-blocking stream, so the stream, the context and a later teardown go
 * on, and the window is marked failed with the peers that never wrote.
 * The thread never takes mori__lock and holds its own lock only to look at
 * its list, never across a wait.  An entry's life is fsm.h's watchdog
 * entry machine: its state moves only through watch_set.  Its events come
 * from the devices' pools (base/device.c: creating one is a runtime call).
 */
#include "watchdog.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POLL_MS 2.0 /* how often pending entries are looked at */

struct mori__watch {
  struct mori__watch *prev, *next;
  struct mori__watch *expired_next;
  const mori_window *w;
  int device, channel, timeout_ms;
  const char *op;
  hipEvent_t start, end;  /* end: NULL once given back (its record failed) */
  mori_watch_state state; /* under wd.lock */
  double deadline_ms;     /* 0 until the stream reaches start */
  int gone;               /* 1 + a rank waited for whose process is gone; 0: none */
  int ncells;
  struct mori__watch_cell cells[];
};

/* The list, every entry's state and the counters sit under wd.lock;
 * `changed` is broadcast whenever an entry stops releasing or goes.  An
 * entry's events go back to their pool under wd.lock (the pool's lock is
 * taken inside it, never the other way round). */
static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake, changed;
  struct mori__watch *head, *tail;
  int running, stop;
  pthread_t thread;
  long watched, expired;
} wd = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
        .changed = PTHREAD_COND_INITIALIZER};

/* A forked child has no watchdog thread and none of the parent's GPU
 * objects (its event pools start from nothing too: base/device.c): it
 * starts from nothing. */
static void atfork_child(void) {
  pthread_mutex_init(&wd.lock, NULL);
  pthread_cond_init(&wd.wake, NULL);
  pthread_cond_init(&wd.changed, NULL);
  wd.head = wd.tail = NULL;
  wd.running = wd.stop = 0;
}

static void install_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }
static void once(void) {
  static pthread_once_t o = PTHREAD_ONCE_INIT;
  pthread_once(&o, install_atfork);
}

/* The clock the deadlines run on (the seam's: a test may advance it);
 * *ms is left as it was if the clock cannot be read. */
static int now_ms(double *ms) {
  double us = 0;
  int rc = mori__clock_us(&us, "watchdog");
  if (rc == 0) *ms = us / 1e3;
  return rc;
}

/* ---- an entry's state ---- */

static int listed(const struct mori__watch *x) { return x->prev != NULL || wd.head == x; }

/* Whether ev is legal in x's state: the questions the scan asks (START:
 * not started yet; REARM: being released; END: its call still holds it)
 * are answered by the table, not by flags. */
static int can(const struct mori__watch *x, mori_watch_event ev) {
  return mori_watch_next(x->state, ev) >= 0;
}

/* assert_watch_state() */
static void assert_watch(const struct mori__watch *x) {
  mori_watch_facts f = {listed(x), x->deadline_ms > 0, x->end != NULL};
  char why[160];
  if (mori_watch_check(x->state, &f, why, sizeof why) != 0)
    mori__bug("watchdog entry of %s on channel %d: %s", x->op, x->channel, why);
}

/* The one setter of x->state, under wd.lock: an illegal transition or a
 * state its facts contradict is a bug, caught here. */
static void watch_set(struct mori__watch *x, mori_watch_event ev) {
  mori_watch_state from = x->state;
  if (mori_watch_fire(&x->state, ev) != 0)
    mori__bug("watchdog entry of %s on channel %d: %s while %s is not a transition of its life",
              x->op, x->channel, mori_watch_event_name(ev), mori_watch_name(from));
  assert_watch(x);
}

/* Its call ended and recorded the end event: the entry completes when the
 * stream reaches it.  Under wd.lock. */
static int recorded(const struct mori__watch *x) {
  return !can(x, MORI_WATCH_EV_END) && x->end != NULL;
}

/* ---- the list ---- */

static void unlink_entry(struct mori__watch *x) {
  if (x->prev) x->prev->next = x->next;
  else wd.head = x->next;
  if (x->next) x->next->prev = x->prev;
  else wd.tail = x->prev;
  x->prev = x->next = NULL;
}

static void entry_free(struct mori__watch *x) {
  mori__device_events_put(x->device, (hipEvent_t[]){x->start, x->end}, 2);
  free(x);
}

/* Off the list; freed now (FREED), or by its call's mori__watch_end if the
 * call still holds it (RETIRED: a release can end the waits while the call
 * is still enqueuing them: the sim's sync mode runs the waits in the call). */
static void retire(struct mori__watch *x) {
  unlink_entry(x);
  watch_set(x, MORI_WATCH_EV_RETIRE);
  if (x->state == MORI_WATCH_FREED) entry_free(x);
  pthread_cond_broadcast(&wd.changed);
}

/* hipEventQuery's answer as done (1) or pending (0).  A failure other than
 * "not ready" means the stream will not get there: done, as far as the
 * watchdog can help. */
static int reached(hipEvent_t ev) {
  hipError_t e = mori_hipEventQuery(ev);
  if (e == hipErrorNotReady) return 0;
  if (e != hipSuccess) (void)mori_hipGetLastError();
  return 1;
}

/* ---- releasing an expired entry (outside wd.lock) ---- */

/* Whether the stream has passed the end event its call recorded; the call
 * may end while the entry is being released, so its state is read under
 * wd.lock (the event stays valid: the entry is not freed while releasing). */
static int completed(const struct mori__watch *x) {
  pthread_mutex_lock(&wd.lock);
  hipEvent_t end = recorded(x) ? x->end : NULL;
  pthread_mutex_unlock(&wd.lock);
  return end != NULL && reached(end);
}

static int met(const struct mori__watch_cell *c, uint32_t v) {
  return c->flags == hipStreamWaitValueAnd ? (v & c->value) != 0 : v == c->value;
}

static void fail_vwindow(const mori_window *w, int rc, const char *fmt, va_list ap) {
  struct mori__signals *s = w->signals;
  if (__atomic_load_n(&s->failed, __ATOMIC_ACQUIRE)) return; /* the first failure is the one */
  vsnprintf(s->failure, sizeof s->failure, fmt, ap);
  s->failed_rc = rc;
  __atomic_store_n(&s->failed, 1, __ATOMIC_RELEASE);
}

void mori__signals_fail(const mori_window *w, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fail_vwindow(w, rc, fmt, ap);
  va_end(ap);
}

static void fail_window(const struct mori__watch *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void fail_window(const struct mori__watch *x, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fail_vwindow(x->w, MORI_ETIMEDOUT, fmt, ap);
  va_end(ap);
}

/* 1: the entry is done (released, or found complete); 0: re-arm it. */
static int release(struct mori__watch *x) {
  hipStream_t svc = NULL;
  (void)mori_hipSetDevice(x->device);
  if (completed(x)) return 1;
  if (mori__service_stream(x->device, &svc) != 0) {
    fail_window(x, "%s on channel %d: no release after %d ms: %s", x->op, x->channel,
                x->timeout_ms, mori_last_error());
    return 1;
  }
  int n = x->ncells, missing = 0;
  /* vals[0, n): the cells read back; vals[n, 2n): the absent ranks, sorted */
  uint32_t *vals = mori_calloc(2 * (size_t)n + 1, sizeof *vals);
  if (vals == NULL) return 0; /* try again at the next look */
  for (int i = 0; i < n; i++)
    if (mori_hipMemcpyAsync(&vals[i], x->cells[i].cell, 4, hipMemcpyDeviceToHost, svc) !=
        hipSuccess)
      vals[i] = ~x->cells[i].value; /* unreadable: treated as not written */
  (void)mori_hipStreamSynchronize(svc);
  for (int i = 0; i < n; i++) missing += !met(&x->cells[i], vals[i]);
  /* A cell read back as unwritten may be one the stream already passed and
   * reset; the rest of its work takes microseconds, so look again.  If the
   * peers did write, the stream is behind other work, not stuck. */
  if (missing > 0) (void)mori__nap_us(1000, "watchdog"); /* a failed nap: it looks sooner */
  if (missing == 0 || completed(x)) {
    free(vals);
    return missing > 0;
  }
  /* Ended early because a rank's process is gone: while a rank it still
   * waits for lives (late, or dead and not yet reaped), it waits on, to
   * its deadline at most, so that the failure names exactly the dead. */
  if (x->gone) {
    int living = 0;
    double now = 0;
    for (int i = 0; i < n; i++)
      living |= !met(&x->cells[i], vals[i]) && !mori__process_gone(x->w->pids[x->cells[i].peer]);
    if (living && now_ms(&now) == 0 && now < x->deadline_ms) {
      free(vals);
      return 0;
    }
    if (living) x->gone = 0; /* the deadline came first: a timeout */
  }

  /* Name the writers of every cell still unwritten, in rank order. */
  uint32_t *absent = vals + n;
  int nabsent = 0;
  const char *what = "never signalled";
  for (int i = 0; i < n; i++) {
    if (met(&x->cells[i], vals[i])) continue;
    what = x->cells[i].what;
    int k = nabsent++;
    for (; k > 0 && absent[k - 1] > (uint32_t)x->cells[i].peer; k--) absent[k] = absent[k - 1];
    absent[k] = (uint32_t)x->cells[i].peer;
  }
  char peers[256] = "";
  for (int k = 0, len = 0; k < nabsent && (size_t)len < sizeof peers; k++)
    len += snprintf(peers + len, sizeof peers - (size_t)len, "%s%u", k ? ", " : "", absent[k]);
  /* The window is failed before its waits are released: the caller's
   * stream moves on once the cells are written, and a call made after its
   * synchronize must already see the failure (a barrier that passed there
   * under load, one run in about 40, was a release seen before its
   * failure). */
  if (x->gone)
    fail_window(x,
                "%s on channel %d: rank(s) %s %s: rank %d's process (pid %u) is gone (window "
                "%ld, group %s); the waits were released and the window is failed",
                x->op, x->channel, peers, what, x->gone - 1, x->w->pids[x->gone - 1], x->w->id,
                x->w->group);
  else
    fail_window(x,
                "%s on channel %d: rank(s) %s %s within %d ms (window %ld, group %s); the "
                "waits were released and the window is failed",
                x->op, x->channel, peers, what, x->timeout_ms, x->w->id, x->w->group);
  pthread_mutex_lock(&wd.lock);
  wd.expired++;
  pthread_mutex_unlock(&wd.lock);
  MORI_LOG(MORI_LOG_WARN, x->w->rank, x->w->id, "%s", x->w->signals->failure);
  for (int i = 0; i < n; i++)
    if (!met(&x->cells[i], vals[i]))
      (void)mori_hipStreamWriteValue32(svc, x->cells[i].cell, x->cells[i].release, 0);
  free(vals);
  if (mori_hipStreamSynchronize(svc) != hipSuccess)
    MORI_LOG(MORI_LOG_WARN, x->w->rank, x->w->id, "%s on channel %d: the release itself failed: %s",
             x->op, x->channel, mori_shim_message());
  return 1;
}

/* ---- the thread ---- */

/* 1 + a rank x waits for whose process is gone from this host (its
 * window's request named it), or 0: its waits end now, not at the
 * deadline.  Ranks on other hosts are not known here (pid 0 there is
 * never gone). */
static int peer_gone(const struct mori__watch *x) {
  if (x->w->pids == NULL || x->w->handle_type != hipMemHandleTypePosixFileDescriptor) return 0;
  for (int i = 0; i < x->ncells; i++) {
    int p = x->cells[i].peer;
    if (p >= 0 && p < x->w->world_size && p != x->w->rank && mori__process_gone(x->w->pids[p]))
      return 1 + p;
  }
  return 0;
}

/* Looks at every entry once, under wd.lock; returns the expired ones
 * (marked releasing) and the time of the next deadline. */
static struct mori__watch *scan(double now, double *next) {
  struct mori__watch *expired = NULL, *nx;
  for (struct mori__watch *x = wd.head; x != NULL; x = nx) {
    nx = x->next;
    if (can(x, MORI_WATCH_EV_REARM)) continue; /* being released */
    (void)mori_hipSetDevice(x->device);
    if (recorded(x) && reached(x->end)) {
      retire(x);
      continue;
    }
    if (can(x, MORI_WATCH_EV_START)) {
      if (!reached(x->start)) continue;
      x->deadline_ms = now + x->timeout_ms;
      watch_set(x, MORI_WATCH_EV_START);
    }
    if (now >= x->deadline_ms || (x->gone = peer_gone(x)) != 0) {
      watch_set(x, MORI_WATCH_EV_EXPIRE);
      x->expired_next = expired;
      expired = x;
    } else if (x->deadline_ms < *next) {
      *next = x->deadline_ms;
    }
  }
  return expired;
}

/* Without a clock no deadline can be judged: every window watched now is
 * failed, naming the call (its waits end when their peers signal, and a
 * later pass judges the deadlines again if the clock comes back).  Under
 * wd.lock. */
static void clock_failed(void) {
  for (struct mori__watch *x = wd.head; x != NULL; x = x->next)
    if (!can(x, MORI_WATCH_EV_REARM))
      fail_window(x, "%s on channel %d: the deadline of %d ms cannot be kept: %s", x->op,
                  x->channel, x->timeout_ms, mori_last_error());
}

/* Sleeps on wd.wake for up to ms, under wd.lock; the condition's clock is
 * the real-time one, read through the seam too (not advanced by a test:
 * the wait is a length, whatever the deadlines' clock says). */
static void wait_wake(double ms) {
  struct timespec until;
  if (mori_clock_gettime(CLOCK_REALTIME, &until) != 0) {
    pthread_mutex_unlock(&wd.lock);
    (void)mori__nap_us(ms * 1e3, "watchdog");
    pthread_mutex_lock(&wd.lock);
    return;
  }
  long long ns = until.tv_nsec + (long long)(ms * 1e6);
  until.tv_sec += (time_t)(ns / 1000000000);
  until.tv_nsec = (long)(ns % 1000000000);
  pthread_cond_timedwait(&wd.wake, &wd.lock, &until);
}

static void *watchdog_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&wd.lock);
  while (!wd.stop) {
    if (wd.head == NULL) {
      pthread_cond_wait(&wd.wake, &wd.lock);
      continue;
    }
    double now, next;
    if (now_ms(&now) != 0) {
      clock_failed();
      wait_wake(POLL_MS);
      continue;
    }
    next = now + POLL_MS;
    struct mori__watch *expired = scan(now, &next);
    pthread_mutex_unlock(&wd.lock);
    for (struct mori__watch *x = expired, *nx; x != NULL; x = nx) {
      nx = x->expired_next; /* x may be freed by its retirement */
      int done = release(x);
      pthread_mutex_lock(&wd.lock);
      if (done) {
        retire(x);
      } else {
        double later = now;
        (void)now_ms(&later); /* else the pass's time: a deadline a little early */
        x->deadline_ms = later + x->timeout_ms;
        watch_set(x, MORI_WATCH_EV_REARM);
      }
      pthread_mutex_unlock(&wd.lock);
    }
    pthread_mutex_lock(&wd.lock);
    pthread_cond_broadcast(&wd.changed);
    double later = next - POLL_MS; /* a failed read: wait one poll */
    (void)now_ms(&later);
    if (next - later > 0) wait_wake(next - later);
  }
  pthread_mutex_unlock(&wd.lock);
  return NULL;
}

/* ---- what the memop engine calls ---- */

int mori__watch_begin(mori_window *w, hipStream_t stream, const char *op, int channel,
                      int timeout_ms, const struct mori__watch_cell *cells, int ncells,
                      struct mori__watch **out) {
  once();
  int device = w->block->device;
  struct mori__watch *x = mori_calloc(1, sizeof *x + (size_t)ncells * sizeof x->cells[0]);
  if (x == NULL) return mori__nomem("%s: watchdog entry", op);
  x->w = w;
  x->device = device;
  x->op = op;
  x->channel = channel;
  x->timeout_ms = timeout_ms;
  x->ncells = ncells;
  x->state = MORI_WATCH_HELD_QUEUED; /* off the list until it is linked below */
  memcpy(x->cells, cells, (size_t)ncells * sizeof x->cells[0]);
  hipEvent_t ev[2] = {NULL, NULL};
  int rc = mori__device_events_get(device, ev, 2);
  x->start = ev[0];
  x->end = ev[1];
  hipError_t e = rc == 0 ? mori_hipEventRecord(x->start, stream) : hipSuccess;
  if (e != hipSuccess) rc = mori__hip_error("hipEventRecord", e);
  pthread_mutex_lock(&wd.lock);
  if (rc == 0 && !wd.running) {
    if (mori_thread_create(&wd.thread, NULL, watchdog_main, NULL) != 0)
      rc = mori__error(MORI_ENOMEM, "%s: cannot start the watchdog thread: pthread_create: %s", op,
                       strerror(errno));
    else
      wd.running = 1;
  }
  if (rc == 0) {
    x->prev = wd.tail;
    if (wd.tail) wd.tail->next = x;
    else wd.head = x;
    wd.tail = x;
    assert_watch(x);
    wd.watched++;
    pthread_cond_signal(&wd.wake);
  } else {
    mori__device_events_put(device, ev, 2);
    free(x);
    x = NULL;
  }
  pthread_mutex_unlock(&wd.lock);
  *out = x;
  return rc;
}

int mori__watch_end(struct mori__watch *x, hipStream_t stream) {
  hipError_t e = mori_hipEventRecord(x->end, stream);
  pthread_mutex_lock(&wd.lock);
  if (e != hipSuccess && x->state != MORI_WATCH_RETIRED) {
    /* unrecorded, it still ends: by its release at the deadline */
    mori__device_events_put(x->device, &x->end, 1);
    x->end = NULL;
  }
  watch_set(x, MORI_WATCH_EV_END);
  if (x->state == MORI_WATCH_FREED) entry_free(x);
  pthread_mutex_unlock(&wd.lock);
  return e == hipSuccess ? 0 : mori__hip_error("hipEventRecord", e);
}

void mori__watch_retire(const mori_window *w) {
  pthread_mutex_lock(&wd.lock);
  for (;;) {
    int busy = 0;
    for (struct mori__watch *x = wd.head, *nx; x != NULL; x = nx) {
      nx = x->next;
      if (x->w != w) continue;
      if (can(x, MORI_WATCH_EV_REARM)) /* being released */
        busy = 1;
      else
        retire(x);
    }
    if (!busy) break;
    pthread_cond_wait(&wd.changed, &wd.lock);
  }
  pthread_mutex_unlock(&wd.lock);
}

int mori__watch_failed(const mori_window *w, const char *op) {
  const struct mori__signals *s = w->signals;
  if (s == NULL || !__atomic_load_n(&s->failed, __ATOMIC_ACQUIRE)) return 0;
  return mori__error(s->failed_rc, "%s: %s", op, s->failure);
}

void mori__watch_counts(long *watched, long *expired) {
  pthread_mutex_lock(&wd.lock);
  *watched = wd.watched;
  *expired = wd.expired;
  pthread_mutex_unlock(&wd.lock);
}

/* release_all: the thread stops (a later call starts it again); the
 * pooled events go after it, with the devices' other objects
 * (mori__device_release_all). */
void mori__watch_release_all(void) {
  pthread_mutex_lock(&wd.lock);
  int running = wd.running;
  wd.stop = 1;
  pthread_cond_broadcast(&wd.wake);
  pthread_mutex_unlock(&wd.lock);
  if (running) pthread_join(wd.thread, NULL);
  pthread_mutex_lock(&wd.lock);
  wd.running = wd.stop = 0;
  pthread_mutex_unlock(&wd.lock);
}
