/*
 * bench/cupti_trace.c - a CUDA injection library that records, per
 * process, every driver and runtime API call, every memset, copy and
 * kernel on the device, and the ranges a benchmark marks, for
 * bench/nsys_steps.py to read where no nsys is installed.
 *
 * Built on a GPU host against its CUPTI (tests/gpu/run.sh does not need
 * it; bench/cupti_trace.sh builds and runs it):
 *
 *   cc -O2 -shared -fPIC bench/cupti_trace.c -I$CUPTI/include \
 *      -I$CUDA/include -L$CUPTI/lib64 -lcupti -o libcupti_trace.so
 *   CUDA_INJECTION64_PATH=$PWD/libcupti_trace.so CUPTI_TRACE_DIR=/tmp/t \
 *      COMPARE_CUPTI=$PWD/libcupti_trace.so python3 bench/compare.py ...
 *
 * The driver loads the library at its first cuInit and calls
 * InitializeInjection.  Each process writes CUPTI_TRACE_DIR/trace-PID.tsv
 * at exit, one record a line, tab separated, times in CUPTI's clock (ns):
 *
 *   A start end tid D|R name     a driver (D) or runtime (R) API call
 *   M start end bytes            a memset on the device
 *   C start end bytes            a copy on the device
 *   K start end                  a kernel
 *   R ts tid B|E name            a range begun or ended (cupti_trace_mark)
 *
 * Only the leading members of each record are read; they have kept their
 * places in every CUPTI since CUDA 9 (the API record, memset, memcpy and
 * kernel records from version 4 on).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cupti.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* What the driver and the benchmark call. */
int InitializeInjection(void);
void cupti_trace_mark(const char *name, int begin);

enum { BUF = 8 << 20 };

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;

struct memset_head { uint32_t kind, value; uint64_t bytes, start, end; };
struct memcpy_head { uint32_t kind; uint8_t ck, sk, dk, flags; uint64_t bytes, start, end; };
struct kernel_head {
  uint32_t kind;
  uint8_t cache, shared;
  uint16_t regs;
  uint32_t pgc_requested, pgc_executed;
  uint64_t start, end;
};

static void say(CUptiResult r, const char *what) {
  if (r == CUPTI_SUCCESS) return;
  const char *s = "?";
  cuptiGetResultString(r, &s);
  fprintf(stderr, "cupti_trace: %s: %s\n", what, s);
}

static void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, BUF);
  *size = *buffer ? BUF : 0;
  *max_records = 0;
}

static void write_record(CUpti_Activity *rec) {
  switch (rec->kind) {
  case CUPTI_ACTIVITY_KIND_DRIVER:
  case CUPTI_ACTIVITY_KIND_RUNTIME: {
    CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)rec;
    int driver = rec->kind == CUPTI_ACTIVITY_KIND_DRIVER;
    const char *name = NULL;
    cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
                         a->cbid, &name);
    fprintf(out, "A\t%llu\t%llu\t%u\t%c\t%s\n", (unsigned long long)a->start,
            (unsigned long long)a->end, a->threadId, driver ? 'D' : 'R', name ? name : "?");
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMSET: {
    struct memset_head *m = (struct memset_head *)rec;
    fprintf(out, "M\t%llu\t%llu\t%llu\n", (unsigned long long)m->start,
            (unsigned long long)m->end, (unsigned long long)m->bytes);
    break;
  }
  case CUPTI_ACTIVITY_KIND_MEMCPY: {
    struct memcpy_head *m = (struct memcpy_head *)rec;
    fprintf(out, "C\t%llu\t%llu\t%llu\n", (unsigned long long)m->start,
            (unsigned long long)m->end, (unsigned long long)m->bytes);
    break;
  }
  case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
  case CUPTI_ACTIVITY_KIND_KERNEL: {
    struct kernel_head *k = (struct kernel_head *)rec;
    fprintf(out, "K\t%llu\t%llu\n", (unsigned long long)k->start, (unsigned long long)k->end);
    break;
  }
  default:
    break;
  }
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                               size_t valid) {
  (void)ctx;
  (void)stream;
  (void)size;
  CUpti_Activity *rec = NULL;
  pthread_mutex_lock(&out_lock);
  while (out != NULL && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
    write_record(rec);
  pthread_mutex_unlock(&out_lock);
  free(buffer);
}

/* Called by the benchmark (ctypes) at a range's edges, in CUPTI's clock. */
void cupti_trace_mark(const char *name, int begin) {
  uint64_t ts = 0;
  cuptiGetTimestamp(&ts);
  pthread_mutex_lock(&out_lock);
  if (out != NULL)
    fprintf(out, "R\t%llu\t%ld\t%c\t%s\n", (unsigned long long)ts, (long)syscall(SYS_gettid),
            begin ? 'B' : 'E', name);
  pthread_mutex_unlock(&out_lock);
}

static void finish(void) {
  say(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  pthread_mutex_lock(&out_lock);
  if (out != NULL) fclose(out);
  out = NULL;
  pthread_mutex_unlock(&out_lock);
}

int InitializeInjection(void) {
  const char *dir = getenv("CUPTI_TRACE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/trace-%ld.tsv", dir && *dir ? dir : ".", (long)getpid());
  /* A new file of its own: never through a link left at the name, never
   * over another process's file. */
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  out = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (out == NULL) {
    perror(path);
    if (fd >= 0) close(fd);
    return 0;
  }
  say(cuptiActivityRegisterCallbacks(requested, completed), "cuptiActivityRegisterCallbacks");
  static const CUpti_ActivityKind kinds[] = {
      CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_MEMSET,
      CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    say(cuptiActivityEnable(kinds[i]), "cuptiActivityEnable");
  atexit(finish);
  return 1;
}
