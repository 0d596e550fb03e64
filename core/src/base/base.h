/*
 * base.h - what every subsystem of the core stands on: errors (error.c),
 * settings and logging (config.c), the OS calls and the clock (os.c), what
 * is trusted on disk (trust.c), and the device's services (device.c).  It
 * calls nothing above it.
 *
 * The core's subsystems, each a folder with its own header, bottom up:
 *   base/        this header
 *   alloc/       blocks, window lifetimes, the ledger and the machine driver
 *   signal/      the signal calls, their engines and the watchdog
 *   rendezvous/  the rendezvous, its store entries, the wire, the fd channel
 * and at the top, core/src/process.c (what the process holds as a whole).
 * A file includes its own subsystem's header, which includes the one below;
 * tests/layout/check_layers.py checks that no include goes up.
 */
#ifndef MORI_CORE_BASE_H
#define MORI_CORE_BASE_H

#include <pthread.h>
#include <sys/stat.h>

#include "mori/error_internal.h"
#include "mori/fsm.h"
#include "mori/symm.h"
#include "mori/wire.h"

/* The public handle-type names are HIP's values (symm.h). */
_Static_assert((int)MORI_HANDLE_TYPE_POSIX_FD == (int)hipMemHandleTypePosixFileDescriptor &&
                   (int)MORI_HANDLE_TYPE_FABRIC == (int)hipMemHandleTypeFabric,
               "MORI_HANDLE_TYPE_* are hipMemAllocationHandleType's values");

/* ---- settings and logging (config.c) ---- */

enum { MORI_LOG_WARN = 1, MORI_LOG_INFO = 2, MORI_LOG_TRACE = 3 };
int mori__log_level(void);
void mori__log(int level, int rank, long window, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define MORI_LOG(level, rank, window, ...)                                           \
  do {                                                                               \
    if (mori__log_level() >= (level)) mori__log((level), (rank), (window), __VA_ARGS__); \
  } while (0)
/* Lines about a block, which has a device but no rank or window yet. */
void mori__log_device(int level, int device, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define MORI_LOG_DEVICE(level, device, ...)                                           \
  do {                                                                                \
    if (mori__log_level() >= (level)) mori__log_device((level), (device), __VA_ARGS__); \
  } while (0)

/* An illegal transition or a broken state of a lifecycle: the message on
 * stderr, then abort(). */
_Noreturn void mori__bug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

size_t mori__round_up(size_t n, size_t to);
/* 16 bytes of the host's boot id, so ranks can tell whether they share a
 * host; 0, or MORI_EIO naming the call that failed. */
int mori__host_id(uint8_t out[MORI_WIRE_HOST_ID_SIZE]);
/* MORI_EINVAL naming MORI_SYMM_TIMEOUT_MS, its value and what is accepted
 * if the strict reader refuses it (config.c); 0 if unset or good. */
int mori__timeout_env_check(void);
/* MORI_EINVAL naming the first of the library's 0/1 switches
 * (MORI_SYMM_TEARDOWN, _ALLOW_OVERLAPPING_DEVICES, _MEMOP_BATCH) set to
 * anything else (config.c); 0 otherwise. */
int mori__env_switches_check(void);

/* ---- what is trusted on disk (trust.c) ---- */

#include "mori/trust.h" /* mori_trusted_dir_open: the walk, public for the tools */

/* A directory owned by our euid (or root, if shared), not writable by
 * group or others (unless shared, root-owned and sticky). */
int mori__dir_check(const struct stat *st, const char *path, int shared, const char *who);
/* "regular file", "FIFO", "directory", ... */
const char *mori__file_type(mode_t mode);

/* ---- OS calls (os.c) ---- */

/* mori_openat, with EINTR retried. */
int mori__openat(int dirfd, const char *path, int flags, mode_t mode);
/* mori_unlinkat of a file of ours, tried once more if the first fails (a
 * transient failure must not leave it behind); a file already gone counts
 * as removed.  0, or -1 with errno. */
int mori__unlinkat(int dirfd, const char *path, int flags);

/* Time, through the seam like every other OS call, so that a sweep fails
 * it and a test can advance the clock a deadline reads.  Each is 0, or
 * MORI_EIO with a message that names the call, prefixed with what needed
 * it: a wait that cannot read the clock cannot keep its deadline, a nonce
 * the kernel could not draw is no nonce (no weaker fallback is taken). */
/* The monotonic clock in microseconds. */
int mori__clock_us(double *us, const char *what);
/* Sleeps up to us microseconds; an interrupted sleep is a short one. */
int mori__nap_us(double us, const char *what);
/* 64 bits from the kernel's random source (getrandom; EINTR retried). */
int mori__random64(uint64_t *out, const char *what);
/* 1 if the process pid is gone from this host (reaped); 0 if it is there
 * (a zombie not yet reaped is) or unknown (0). */
int mori__process_gone(uint32_t pid);
/* For a log line's figures only (read at INFO and above): the monotonic
 * clock in microseconds, or NAN where it could not be read, which the line
 * then shows; nothing else depends on it. */
double mori__log_clock_us(void);

/* Runs a shim call and turns a failure into MORI_EHIP naming it. */
#define MORI_HIP(call, expr)                                                         \
  do {                                                                               \
    hipError_t mori__e = (expr);                                                     \
    if (mori__e != hipSuccess) return mori__hip_error(call, mori__e);                \
  } while (0)

/* ---- the device's services (device.c) ---- */

/* The device's private non-blocking stream (zeroing, the watchdog's
 * releases), created at its first use. */
int mori__service_stream(int device, hipStream_t *out);
/* *captured = 1 while stream is being captured into a graph; an
 * invalidated capture is an error. */
int mori__stream_capturing(hipStream_t stream, int *captured);

/* n events of the device's pool (timing disabled), created where the
 * pool has too few: 0, or an error naming the call (out[0, n) NULL: none
 * is taken). */
int mori__device_events_get(int device, hipEvent_t *out, int n);
/* evs[0, n) back to the device's pool (a NULL one is nothing); one the
 * pool cannot take is destroyed.  May be called under a caller's lock. */
void mori__device_events_put(int device, const hipEvent_t *evs, int n);

/* The device's module: the core carries one (the signal kernels). */
#define MORI__MODULE_ENTRIES 8
typedef struct mori__module_spec {
  const mori_module_image *image;
  const char *const *entries; /* found by name at the load, at most MORI__MODULE_ENTRIES */
  int nentries;
  const char *what;    /* its name in messages: "signal kernels" */
  const char *without; /* what goes on where the runtime cannot load it at all */
} mori__module_spec;
/* Loads spec's module on device once (later calls find it): 0, or an
 * error naming the call; *unsupported is set when the runtime cannot load
 * it at all (no JIT for the PTX, no hiprtc), which is then remembered and
 * logged once at WARN. */
int mori__device_module_load(int device, const mori__module_spec *spec, int *unsupported);
/* Whether device's module is loaded. */
int mori__device_module_loaded(int device);
/* Entry number entry (spec's order) of device's loaded module. */
hipFunction_t mori__device_module_entry(int device, int entry);

/* The pooled events, the modules and the private streams go
 * (release_all, once nothing takes events any more). */
void mori__device_release_all(void);

#endif
