/*
 * sim_stream.c - the sim's streams, events and stream capture.
 *
 * MORI_SIM_STREAMS=sync (the default) runs every operation when it is
 * enqueued, on the caller's thread: a wait spins there, bounded by
 * MORI_SIM_WAIT_TIMEOUT_MS, and fails the call with hipErrorLaunchTimeOut.
 * MORI_SIM_STREAMS=async gives each stream a worker thread that runs its
 * operations in order, as a GPU queue does: a wait is only enqueued and the
 * caller goes on; hipStreamSynchronize, hipEventQuery and
 * hipEventSynchronize observe the progress.  There a wait past the bound
 * leaves the stream with a sticky hipErrorLaunchTimeOut (a GPU would hang)
 * and the stream skips its later operations.  Synchronous copies and fills
 * first wait for every blocking stream, as the legacy default stream makes
 * them.  A stream in capture records operations into a graph instead of
 * running them; a graph launch runs them again with the values baked in.
 */
#include "sim_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- wait conditions (HIP's; the mask applies to the word, and for Nor
 * to the value too) ---- */

static int wait_gte(uint32_t m, uint32_t v, uint32_t mask) { return (m & mask) >= v; }
static int wait_eq(uint32_t m, uint32_t v, uint32_t mask) { return (m & mask) == v; }
static int wait_and(uint32_t m, uint32_t v, uint32_t mask) { return ((m & mask) & v) != 0; }
static int wait_nor(uint32_t m, uint32_t v, uint32_t mask) {
  return ~((m & mask) | (v & mask)) != 0;
}

static const struct {
  const char *op;
  int (*met)(uint32_t mem, uint32_t value, uint32_t mask);
} wait_ops[] = {
    [hipStreamWaitValueGte] = {">=", wait_gte},
    [hipStreamWaitValueEq] = {"==", wait_eq},
    [hipStreamWaitValueAnd] = {"&", wait_and},
    [hipStreamWaitValueNor] = {"nor", wait_nor},
};

int mori__sim_wait_flags_valid(unsigned flags) { return flags < COUNT(wait_ops); }

static long elapsed_ms(const struct timespec *since) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - since->tv_sec) * 1000L + (now.tv_nsec - since->tv_nsec) / 1000000L;
}

/* Spins briefly (a peer usually answers within microseconds), then sleeps
 * with doubling pauses up to 1 ms so that 16 waiting ranks on 2 cores still
 * leave the writers room to run. */
int mori__sim_spin(const uint32_t *p, uint32_t value, unsigned flags, uint32_t mask, long bound_ms,
                   uint32_t *last) {
  struct timespec start, pause = {0, 1000};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (unsigned spin = 0;; spin++) {
    *last = __atomic_load_n(p, __ATOMIC_ACQUIRE);
    if (wait_ops[flags].met(*last, value, mask)) return 0;
    if (spin < 64) continue;
    if (elapsed_ms(&start) >= bound_ms) return -1;
    nanosleep(&pause, NULL);
    if (pause.tv_nsec < 1000000) pause.tv_nsec *= 2;
  }
}

/* The call that enqueued each kind of operation, for the messages of its
 * failures when a stream runs it. */
static const char *const op_calls[] = {
    [MORI__SIM_OP_WRITE] = "hipStreamWriteValue32",
    [MORI__SIM_OP_WAIT] = "hipStreamWaitValue32",
    [MORI__SIM_OP_FILL] = "hipMemsetAsync",
    [MORI__SIM_OP_COPY] = "hipMemcpyAsync",
    [MORI__SIM_OP_KERNEL] = "hipModuleLaunchKernel",
};

/* Runs one operation whose checks passed, through the engine (sim_vmm.c):
 * the device addresses in op are never dereferenced here.  A failure's
 * detail goes to why, since a worker has no caller to tell. */
static hipError_t run_op(const char *call, const struct mori__sim_op *op, char *why,
                         size_t whylen) {
  uint32_t last, *word = NULL;
  hipError_t e;
  switch (op->kind) {
  case MORI__SIM_OP_WRITE:
    if ((e = mori__sim_word(call, op->dst, 1, &word, why, whylen)) == hipSuccess)
      __atomic_store_n(word, op->value, __ATOMIC_RELEASE);
    return e;
  case MORI__SIM_OP_WAIT:
    if ((e = mori__sim_word(call, op->dst, 0, &word, why, whylen)) != hipSuccess) return e;
    if (mori__sim_spin(word, op->value, op->flags, op->mask, mori__sim_config.wait_timeout_ms,
                       &last) == 0)
      return hipSuccess;
    snprintf(why, whylen,
             "%s: hipErrorLaunchTimeOut: (*%p & 0x%x) %s 0x%x still false after %ld ms (last "
             "value 0x%x; MORI_SIM_WAIT_TIMEOUT_MS)",
             call, op->dst, op->mask, wait_ops[op->flags].op, op->value,
             mori__sim_config.wait_timeout_ms, last);
    return hipErrorLaunchTimeOut;
  case MORI__SIM_OP_FILL:
    return mori__sim_fill(call, op->dst, (int)op->value, op->size, why, whylen);
  case MORI__SIM_OP_COPY:
    return mori__sim_copy(call, op->dst, op->src, op->size, op->host, why, whylen);
  case MORI__SIM_OP_KERNEL:
    return mori__sim_run_kernel(op, why, whylen);
  }
  return hipErrorUnknown;
}

/* ---- streams, events, graphs ---- */

struct mori_sim_graph {
  struct mori__sim_op *ops;
  size_t len, cap;
};

struct sim_event {
  struct sim_event *next;
  uint64_t recorded, completed; /* generations: complete when completed >= recorded */
  int refs;                     /* the handle and each queued record */
  int destroyed;
};

/* A queued item: an operation, or an event's record when event is set. */
struct item {
  struct mori__sim_op op;
  struct sim_event *event;
  uint64_t generation;
};

struct sim_stream {
  struct sim_stream *next; /* every stream, destroyed ones until drained */
  unsigned flags;
  struct item *ring;
  size_t head, len, cap;   /* cap a power of two */
  int busy;                /* the worker runs the item at head */
  int has_worker, destroyed;
  pthread_cond_t work;     /* an item arrived, or the stream was destroyed */
  hipError_t sticky;       /* async: the first failure; later work is skipped */
  char sticky_detail[320];
  mori_sim_graph *capture; /* non-NULL while capturing */
};

/* One lock over every stream and event; `progress` is broadcast whenever a
 * worker finishes an item, for whoever synchronizes. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t progress = PTHREAD_COND_INITIALIZER;
static struct sim_stream default_stream = {.work = PTHREAD_COND_INITIALIZER};
static struct sim_stream *streams = &default_stream;
static struct sim_event *events;

static void atfork_prepare(void) { pthread_mutex_lock(&lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&lock); }
static void atfork_child(void) {
  mori__sim_streams_atfork_child();
  pthread_mutex_unlock(&lock);
}
static void install_atfork(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }
static void once(void) {
  static pthread_once_t o = PTHREAD_ONCE_INIT;
  pthread_once(&o, install_atfork);
}

/* The workers did not survive the fork: their queued work is lost, as a
 * GPU context is to a forked child.  Called with the lock held. */
void mori__sim_streams_atfork_child(void) {
  pthread_cond_init(&progress, NULL);
  for (struct sim_stream *s = streams; s != NULL; s = s->next) {
    for (size_t i = 0; i < s->len; i++) {
      struct item *it = &s->ring[(s->head + i) & (s->cap - 1)];
      if (it->event) it->event->refs--;
    }
    s->head = s->len = 0;
    s->busy = s->has_worker = 0;
    pthread_cond_init(&s->work, NULL);
  }
  for (struct sim_event *e = events; e != NULL; e = e->next) e->completed = e->recorded;
}

/* Called with the lock held. */
static struct sim_stream *find_stream(const char *call, hipStream_t handle, hipError_t *e) {
  if (handle == NULL) return &default_stream;
  for (struct sim_stream *s = streams; s != NULL; s = s->next)
    if ((hipStream_t)s == handle && !s->destroyed) return s;
  *e = mori__sim_contract(call, RULE_UNKNOWN_STREAM, "%p", (void *)handle);
  return NULL;
}

static struct sim_event *find_event(const char *call, hipEvent_t handle, hipError_t *e) {
  for (struct sim_event *ev = events; ev != NULL; ev = ev->next)
    if ((hipEvent_t)ev == handle && !ev->destroyed) return ev;
  *e = mori__sim_contract(call, RULE_UNKNOWN_EVENT, "%p", (void *)handle);
  return NULL;
}

static void event_unref(struct sim_event *ev) {
  if (--ev->refs > 0) return;
  for (struct sim_event **p = &events; *p != NULL; p = &(*p)->next)
    if (*p == ev) {
      *p = ev->next;
      break;
    }
  free(ev);
}

static void stream_unlink(struct sim_stream *s) {
  for (struct sim_stream **p = &streams; *p != NULL; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  free(s->ring);
  pthread_cond_destroy(&s->work);
  free(s);
}

static int drained(const struct sim_stream *s) { return s->len == 0 && !s->busy; }

/* The worker: runs the stream's items in order, the lock released while an
 * operation runs; leaves once the stream is destroyed and drained. */
static void *worker_main(void *arg) {
  struct sim_stream *s = arg;
  char why[sizeof s->sticky_detail];
  pthread_mutex_lock(&lock);
  for (;;) {
    while (s->len == 0 && !s->destroyed) pthread_cond_wait(&s->work, &lock);
    if (s->len == 0) break;
    struct item it = s->ring[s->head & (s->cap - 1)];
    int skip = s->sticky != hipSuccess;
    s->busy = 1;
    pthread_mutex_unlock(&lock);
    hipError_t e =
        it.event || skip ? hipSuccess : run_op(op_calls[it.op.kind], &it.op, why, sizeof why);
    pthread_mutex_lock(&lock);
    if (e != hipSuccess && s->sticky == hipSuccess) {
      s->sticky = e;
      snprintf(s->sticky_detail, sizeof s->sticky_detail, "%s", why);
    }
    if (it.event) {
      if (it.event->completed < it.generation) it.event->completed = it.generation;
      event_unref(it.event);
    }
    s->head++;
    s->len--;
    s->busy = 0;
    pthread_cond_broadcast(&progress);
  }
  s->has_worker = 0;
  stream_unlink(s);
  pthread_cond_broadcast(&progress);
  pthread_mutex_unlock(&lock);
  return NULL;
}

/* Queues an item, starting the stream's worker on first use.  Lock held. */
static hipError_t push(const char *call, struct sim_stream *s, const struct item *it) {
  if (s->len == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    struct item *ring = malloc(cap * sizeof *ring);
    if (ring == NULL) {
      mori__shim_detail("%s: stream queue: %s", call, strerror(errno));
      return hipErrorOutOfMemory;
    }
    for (size_t i = 0; i < s->len; i++) ring[i] = s->ring[(s->head + i) & (s->cap - 1)];
    free(s->ring);
    s->ring = ring;
    s->head = 0;
    s->cap = cap;
  }
  if (!s->has_worker) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, worker_main, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
      mori__shim_detail("%s: stream worker: %s", call, strerror(rc));
      return hipErrorOutOfMemory;
    }
    s->has_worker = 1;
  }
  s->ring[(s->head + s->len) & (s->cap - 1)] = *it;
  s->len++;
  if (it->event) it->event->refs++;
  pthread_cond_signal(&s->work);
  return hipSuccess;
}

static hipError_t graph_append(const char *call, mori_sim_graph *g, const struct mori__sim_op *op) {
  if (g->len == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 16;
    struct mori__sim_op *ops = realloc(g->ops, cap * sizeof *ops);
    if (ops == NULL) {
      mori__shim_detail("%s: graph: %s", call, strerror(errno));
      return hipErrorOutOfMemory;
    }
    g->ops = ops;
    g->cap = cap;
  }
  g->ops[g->len++] = *op;
  return hipSuccess;
}

hipError_t mori__sim_run(const char *call, const struct mori__sim_op *op) {
  char why[320];
  hipError_t e = run_op(call, op, why, sizeof why);
  if (e != hipSuccess) mori__shim_detail("%s", why);
  return e;
}

hipError_t mori__sim_enqueue(const char *call, hipStream_t stream, const struct mori__sim_op *op) {
  hipError_t e = hipSuccess;
  once();
  pthread_mutex_lock(&lock);
  struct sim_stream *s = find_stream(call, stream, &e);
  if (s != NULL && s->capture != NULL) {
    e = graph_append(call, s->capture, op);
    s = NULL;
  } else if (s != NULL && mori__sim_config.async_streams) {
    struct item it = {.op = *op};
    e = push(call, s, &it);
    s = NULL;
  }
  pthread_mutex_unlock(&lock);
  return s != NULL ? mori__sim_run(op_calls[op->kind], op) : e;
}

/* Waits, lock held, until every stream that `pick` selects is drained. */
static void drain(int (*pick)(const struct sim_stream *)) {
  for (;;) {
    int pending = 0;
    for (struct sim_stream *s = streams; s != NULL && !pending; s = s->next)
      pending = pick(s) && !drained(s);
    if (!pending) return;
    pthread_cond_wait(&progress, &lock);
  }
}

static int blocking(const struct sim_stream *s) { return !(s->flags & hipStreamNonBlocking); }
static int any(const struct sim_stream *s) { return 1; }

hipError_t mori__sim_legacy_sync(const char *call) {
  if (!mori__sim_config.async_streams) return hipSuccess;
  once();
  pthread_mutex_lock(&lock);
  drain(blocking);
  pthread_mutex_unlock(&lock);
  return hipSuccess;
}

static hipError_t sticky_of(const struct sim_stream *s) {
  if (s->sticky != hipSuccess) mori__shim_detail("%s", s->sticky_detail);
  return s->sticky;
}

hipError_t mori__sim_stream_sync(hipStream_t stream) {
  static const char call[] = "hipStreamSynchronize";
  hipError_t e = hipSuccess;
  once();
  pthread_mutex_lock(&lock);
  struct sim_stream *s = find_stream(call, stream, &e);
  if (s != NULL && s->capture != NULL) {
    e = mori__sim_contract(call, RULE_CAPTURE, "stream %p", (void *)stream);
  } else if (s != NULL) {
    /* The legacy default stream waits for every blocking stream's work. */
    if (s == &default_stream) drain(blocking);
    while (!drained(s)) pthread_cond_wait(&progress, &lock);
    e = sticky_of(s);
  }
  pthread_mutex_unlock(&lock);
  return e;
}

hipError_t mori__sim_device_sync(void) {
  hipError_t e = hipSuccess;
  once();
  pthread_mutex_lock(&lock);
  drain(any);
  /* A destroyed stream's failure went with it (nobody can synchronize it). */
  for (struct sim_stream *s = streams; s != NULL && e == hipSuccess; s = s->next)
    if (!s->destroyed) e = sticky_of(s);
  pthread_mutex_unlock(&lock);
  return e;
}

hipError_t mori__sim_stream_create(hipStream_t *stream, unsigned int flags) {
  static const char call[] = "hipStreamCreateWithFlags";
  if (stream == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "stream");
  if (flags & ~(unsigned)hipStreamNonBlocking)
    return mori__sim_contract(call, RULE_STREAM_FLAGS, "got 0x%x", flags);
  struct sim_stream *s = calloc(1, sizeof *s);
  if (s == NULL) {
    mori__shim_detail("%s: %s", call, strerror(errno));
    return hipErrorOutOfMemory;
  }
  s->flags = flags;
  pthread_cond_init(&s->work, NULL);
  once();
  pthread_mutex_lock(&lock);
  s->next = streams->next; /* the default stream stays first */
  streams->next = s;
  pthread_mutex_unlock(&lock);
  *stream = (hipStream_t)s;
  return hipSuccess;
}

/* As in HIP and CUDA the call returns at once; work already queued still
 * runs, and the worker frees the stream when it is done. */
hipError_t mori__sim_stream_destroy(hipStream_t stream) {
  static const char call[] = "hipStreamDestroy";
  hipError_t e = hipSuccess;
  if (stream == NULL)
    return mori__sim_contract(call, RULE_UNKNOWN_STREAM, "the default stream is not destroyed");
  once();
  pthread_mutex_lock(&lock);
  struct sim_stream *s = find_stream(call, stream, &e);
  if (s != NULL && s->capture != NULL) {
    e = mori__sim_contract(call, RULE_CAPTURE, "stream %p", (void *)stream);
  } else if (s != NULL) {
    s->destroyed = 1;
    if (s->has_worker)
      pthread_cond_signal(&s->work);
    else
      stream_unlink(s);
  }
  pthread_mutex_unlock(&lock);
  return e;
}

hipError_t mori__sim_stream_is_capturing(hipStream_t stream, hipStreamCaptureStatus *status) {
  static const char call[] = "hipStreamIsCapturing";
  hipError_t e = hipSuccess;
  if (status == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "status");
  once();
  pthread_mutex_lock(&lock);
  struct sim_stream *s = find_stream(call, stream, &e);
  if (s != NULL)
    *status = s->capture ? hipStreamCaptureStatusActive : hipStreamCaptureStatusNone;
  pthread_mutex_unlock(&lock);
  return e;
}

hipError_t mori__sim_event_create(hipEvent_t *event, unsigned int flags) {
  static const char call[] = "hipEventCreateWithFlags";
  if (event == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "event");
  if (flags & ~(unsigned)(hipEventBlockingSync | hipEventDisableTiming))
    return mori__sim_contract(call, RULE_FLAGS_ZERO, "event flags 0x%x", flags);
  struct sim_event *ev = calloc(1, sizeof *ev);
  if (ev == NULL) {
    mori__shim_detail("%s: %s", call, strerror(errno));
    return hipErrorOutOfMemory;
  }
  ev->refs = 1;
  once();
  pthread_mutex_lock(&lock);
  ev->next = events;
  events = ev;
  pthread_mutex_unlock(&lock);
  *event = (hipEvent_t)ev;
  return hipSuccess;
}

hipError_t mori__sim_event_record(hipEvent_t event, hipStream_t stream) {
  static const char call[] = "hipEventRecord";
  hipError_t e = hipSuccess;
  once();
  pthread_mutex_lock(&lock);
  struct sim_event *ev = find_event(call, event, &e);
  struct sim_stream *s = ev ? find_stream(call, stream, &e) : NULL;
  if (s != NULL && s->capture != NULL) {
    e = mori__sim_contract(call, RULE_CAPTURE, "the sim records no event into a graph");
  } else if (s != NULL) {
    ev->recorded++;
    if (mori__sim_config.async_streams) {
      struct item it = {.event = ev, .generation = ev->recorded};
      e = push(call, s, &it);
      if (e != hipSuccess) ev->recorded--;
    } else {
      ev->completed = ev->recorded;
    }
  }
  pthread_mutex_unlock(&lock);
  return e;
}

/* An event never recorded is complete, as in HIP and CUDA. */
hipError_t mori__sim_event_query(hipEvent_t event) {
  hipError_t e = hipSuccess;
  once();
  pthread_mutex_lock(&lock);
  struct sim_event *ev = find_event("hipEventQuery", event, &e);
  if (ev != NULL && ev->completed < ev->recorded) e = hipErrorNotReady;
  pthread_mutex_unlock(&lock);
  return e;
}

hipError_t mori__sim_event_sync(hipEvent_t event) {
  hipError_t e = hipSuccess;
  once();
  pthread_mutex_lock(&lock);
  struct sim_event *ev = find_event("hipEventSynchronize", event, &e);
  while (ev != NULL && ev->completed < ev->recorded) pthread_cond_wait(&progress, &lock);
  pthread_mutex_unlock(&lock);
  return e;
}

hipError_t mori__sim_event_destroy(hipEvent_t event) {
  hipError_t e = hipSuccess;
  once();
  pthread_mutex_lock(&lock);
  struct sim_event *ev = find_event("hipEventDestroy", event, &e);
  if (ev != NULL) {
    ev->destroyed = 1;
    event_unref(ev);
  }
  pthread_mutex_unlock(&lock);
  return e;
}

/* ---- capture and replay ---- */

/* Whether any stream captures: calls a runtime refuses during a capture of
 * global mode (CUDA's and HIP's default, torch's) are refused then. */
int mori__sim_capturing(void) {
  int n = 0;
  once();
  pthread_mutex_lock(&lock);
  for (struct sim_stream *s = streams; s != NULL; s = s->next) n += s->capture != NULL;
  pthread_mutex_unlock(&lock);
  return n > 0;
}

hipError_t mori__sim_begin_capture(hipStream_t stream) {
  static const char call[] = "mori_sim_begin_capture";
  hipError_t e = hipSuccess;
  if (stream == NULL)
    return mori__sim_contract(call, RULE_CAPTURE, "the legacy default stream cannot capture");
  mori_sim_graph *g = calloc(1, sizeof *g);
  if (g == NULL) return hipErrorOutOfMemory;
  once();
  pthread_mutex_lock(&lock);
  struct sim_stream *s = find_stream(call, stream, &e);
  if (s != NULL && s->capture != NULL) {
    e = mori__sim_contract(call, RULE_CAPTURE, "stream %p is capturing already", (void *)stream);
  } else if (s != NULL) {
    s->capture = g;
    g = NULL;
  }
  pthread_mutex_unlock(&lock);
  free(g);
  return e;
}

hipError_t mori__sim_end_capture(hipStream_t stream, mori_sim_graph **graph) {
  static const char call[] = "mori_sim_end_capture";
  hipError_t e = hipSuccess;
  if (graph == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "graph");
  once();
  pthread_mutex_lock(&lock);
  struct sim_stream *s = find_stream(call, stream, &e);
  if (s != NULL && s->capture == NULL) {
    e = mori__sim_contract(call, RULE_CAPTURE, "stream %p is not capturing", (void *)stream);
  } else if (s != NULL) {
    *graph = s->capture;
    s->capture = NULL;
  }
  pthread_mutex_unlock(&lock);
  return e;
}

hipError_t mori__sim_graph_launch(const mori_sim_graph *graph, hipStream_t stream) {
  static const char call[] = "mori_sim_graph_launch";
  if (graph == NULL) return mori__sim_contract(call, RULE_NULL_ARGUMENT, "graph");
  hipError_t e = hipSuccess;
  for (size_t i = 0; i < graph->len && e == hipSuccess; i++)
    e = mori__sim_enqueue(call, stream, &graph->ops[i]);
  return e;
}

void mori__sim_graph_destroy(mori_sim_graph *graph) {
  if (graph == NULL) return;
  free(graph->ops);
  free(graph);
}
