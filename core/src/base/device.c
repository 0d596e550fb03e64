/*
 * device.c - the services the core keeps per device: a private
 * non-blocking stream for its own work (an allocation's zeroing, a
 * signal slot's, the watchdog's releases), created at its first use and
 * given back by release_all, and the question whether a stream is being
 * captured into a graph.
 */
#include "base.h"

#include <string.h>

#define MAX_DEVICES 256

static pthread_mutex_t service_lock = PTHREAD_MUTEX_INITIALIZER;
static hipStream_t service[MAX_DEVICES];

/* A forked child has none of the parent's GPU objects: it starts from
 * nothing. */
static void atfork_child(void) {
  pthread_mutex_init(&service_lock, NULL);
  memset(service, 0, sizeof service);
}

static void install_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

int mori__service_stream(int device, hipStream_t *out) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  if (device < 0 || device >= MAX_DEVICES)
    return mori__error(MORI_ERANGE, "service stream: device %d out of range", device);
  pthread_once(&once, install_atfork);
  pthread_mutex_lock(&service_lock);
  hipError_t e = hipSuccess;
  if (service[device] == NULL)
    e = mori_hipStreamCreateWithFlags(&service[device], hipStreamNonBlocking);
  *out = service[device];
  pthread_mutex_unlock(&service_lock);
  return e == hipSuccess ? 0 : mori__hip_error("hipStreamCreateWithFlags", e);
}

int mori__stream_capturing(hipStream_t stream, int *captured) {
  hipStreamCaptureStatus st = hipStreamCaptureStatusNone;
  MORI_HIP("hipStreamIsCapturing", mori_hipStreamIsCapturing(stream, &st));
  if (st == hipStreamCaptureStatusInvalidated)
    return mori__error(MORI_EHIP, "the stream's capture was invalidated by an earlier error");
  *captured = st == hipStreamCaptureStatusActive;
  return 0;
}

void mori__device_release_all(void) {
  pthread_mutex_lock(&service_lock);
  for (int d = 0; d < MAX_DEVICES; d++) {
    if (service[d] == NULL) continue;
    (void)mori_hipSetDevice(d);
    (void)mori_hipStreamDestroy(service[d]);
    service[d] = NULL;
  }
  pthread_mutex_unlock(&service_lock);
}
