/*
 * fi.h - fault injection for mori-symm: the MORI_FI schedule language, the
 * shim-call trace format with record and replay, and the control calls of
 * libmori_faultinject.so (the LD_PRELOAD fault shim).
 *
 * The parsers are pure functions of their input (no globals, no I/O), so
 * they are fuzz targets: any byte string yields a result or an error that
 * names the column (schedule) or line and column (trace).
 */
#ifndef MORI_FI_H
#define MORI_FI_H

#include <stddef.h>
#include <stdint.h>

#include "mori/hip_shim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the calls ----
 *
 * Every call of the seam, from the shim's own lists (hip_shim.h): the
 * runtime calls (MORI_SHIM_HIP_CALLS, whose rows also give each call's
 * trace layout, what it does to the resource registry and the errors it
 * can return) and the OS calls (MORI_SHIM_OS_CALLS, plus close, which the
 * shim declares apart because an exported fd leaves its registry there).
 * The fault shim wraps every one of them.  OS calls fail the way libc does
 * (-1 and errno, or NULL), carry no hipError_t and take no global call
 * index: how often a nonblocking recvmsg finds the queue empty, or a store
 * read polls for a key, is timing.
 *
 * A runtime call's trace layout (its spec column) is one "key:kind" per
 * parameter, in order: the key it has in a trace line and how its value is
 * written there.  Kind '-' marks a parameter a trace leaves out because its
 * value is a fact of one runtime (versions, attribute values), or a list
 * the format has no word for (a batch's operations).
 *
 * Kinds: H out handle (new symbol hN)   h handle (hN, 0)
 *        R out reservation (rN)         M out device allocation (dN)
 *        a address (rN+0xOFF, dN+0xOFF, host, 0)
 *        z size  u unsigned  i int      Z out size
 *        P allocation prop (alloc/handletype/device)
 *        D access descriptor (access/device)
 *        t handle type (posix_fd, fabric, none, or a number)
 *        X export output (fdN or fabric)   O import input (fdN, fabric, other)
 *        s stream (0 or sN)                F fd list (fdN,fdM or none)
 *        f fd (fdN or other)
 * The kinds of a handle or fd that comes out of a call name a new symbol;
 * the sizes the symbol covers come from the first 'z' of the same row. */
#define MORI_FI_OS_CALLS(X) MORI_SHIM_OS_CALLS(X) X(int, close, (int fd), (fd))

typedef enum mori_fi_call {
#define MORI_FI__ENUM_HIP(name, arity, params, args, registry, shim, spec, errors) \
  MORI_FI_CALL_##name,
#define MORI_FI__ENUM_OS(ret, name, params, args) MORI_FI_CALL_##name,
  MORI_SHIM_HIP_CALLS(MORI_FI__ENUM_HIP) MORI_FI_OS_CALLS(MORI_FI__ENUM_OS) MORI_FI_CALL__COUNT
#undef MORI_FI__ENUM_HIP
#undef MORI_FI__ENUM_OS
} mori_fi_call;

/* Runtime calls come first; each of them takes a global call index. */
#define MORI_FI__ONE_HIP(name, arity, params, args, registry, shim, spec, errors) +1
enum { MORI_FI_CALL__HIP_COUNT = 0 MORI_SHIM_HIP_CALLS(MORI_FI__ONE_HIP) };
#undef MORI_FI__ONE_HIP
#define mori_fi_call_is_hip(c) ((int)(c) >= 0 && (int)(c) < (int)MORI_FI_CALL__HIP_COUNT)
#define mori_fi_call_is_os(c) \
  ((int)(c) >= (int)MORI_FI_CALL__HIP_COUNT && (int)(c) < (int)MORI_FI_CALL__COUNT)

/* "hipMemMap", "openat", "malloc"; NULL out of range. */
const char *mori_fi_call_name(int call);
/* The row's "key:kind ..." layout (the spec column); "" for an OS call that
 * traces do not record (only the datagrams and closes carry fds). */
const char *mori_fi_call_spec(int call);
/* By name, with or without the mori_ prefix of the exported symbol; -1 if
 * none. */
int mori_fi_call_find(const char *name, size_t len);
/* Calls that give a resource back (their registry column releases): a
 * failure there leaves it live. */
int mori_fi_call_releases(int call);
/* What the call can really return when it fails, most likely first:
 * hipError_t values for a runtime call, errno values for an OS call (an
 * allocation fails with NULL and ENOMEM).  Sets *errors, returns how many
 * (at least 1). */
int mori_fi_call_errors(int call, const int **errors);

/* HIP error names <-> codes, for schedules and traces.  Agrees with the
 * shim's mori_hipGetErrorName() (a test pins that). */
const char *mori_fi_error_name(int code); /* NULL if not in the table */
int mori_fi_error_find(const char *name, size_t len, int *code);
/* errno names <-> values ("EINTR"), one table for schedules, messages
 * and sweeps. */
const char *mori_fi_errno_name(int e); /* NULL if not in the table */
int mori_fi_errno_find(const char *name, size_t len, int *e);
/* EINTR and EAGAIN: a caller retries them, so only a transient failure
 * with one of them is a fault (a persistent one is an endless retry). */
int mori_fi_errno_transient(int e);
/* 1 if the core must retry (or otherwise absorb) call failing with error:
 * the transient errnos for every OS call, and ENOBUFS for sendmsg, but not
 * EAGAIN from thread_create (pthread_create's: a limit reached). */
int mori_fi_call_retries(int call, int error);
/* The name of a failure of call: "hipErrorOutOfMemory", "EIO", or the
 * number when the table has no name.  Into buf (32 bytes suffice). */
const char *mori_fi_failure_name(int call, int code, char *buf, size_t n);

/* ---- the schedule language (MORI_FI) ---- */

#define MORI_FI_ORDER_MAX 64

typedef enum mori_fi_target {
  MORI_FI_T_CALL = 1, /* fn#N=...: the Nth call of one function */
  MORI_FI_T_GLOBAL,   /* call#N=...: the Nth runtime call, any function */
  MORI_FI_T_RECV,     /* recv=...: datagrams this rank receives */
  MORI_FI_T_SEND,     /* send=...: datagrams this rank sends */
  MORI_FI_T_COUNT,    /* count=PATH */
  MORI_FI_T_RECORD    /* record=PATH (as MORI_FI_RECORD) */
} mori_fi_target;

typedef enum mori_fi_action {
  MORI_FI_A_FAIL = 1,   /* return `error` instead of calling the runtime */
  MORI_FI_A_KILL,       /* the process dies at that call (SIGKILL) */
  MORI_FI_A_REORDER,    /* recv: deliver what is queued in a seeded random order */
  MORI_FI_A_ORDER,      /* recv: deliver by sender rank in the order given */
  MORI_FI_A_DUPLICATE,  /* recv: the Nth datagram twice, its fds dup'ed */
  MORI_FI_A_DROP,       /* send: the Nth datagram is not sent; success returned */
  MORI_FI_A_TRUNCATE,   /* send: the Nth datagram goes out cut to half its length */
  MORI_FI_A_FORGE,      /* send: the Nth datagram is also sent from a forked process */
  MORI_FI_A_PATH        /* count=/record=: path in `path` */
} mori_fi_action;

typedef struct mori_fi_rule {
  int rank;               /* -1: every rank */
  int life;               /* -1: the first life only (a counted rule) or every life; else
                           * the rank's life it fires in (0 the first process, n after n
                           * restarts: MORI_LAUNCH_LIFE) */
  mori_fi_target target;
  mori_fi_action action;
  int call;               /* MORI_FI_T_CALL: the function */
  long nth;               /* 1-based; 1 with persist for '#*' */
  int persist;            /* from the nth call on, every call */
  int error;              /* MORI_FI_A_FAIL: the hipError_t returned, or the
                           * errno an OS call fails with */
  uint64_t seed;          /* MORI_FI_A_REORDER */
  int order[MORI_FI_ORDER_MAX];
  int norder;             /* MORI_FI_A_ORDER */
  char *path;             /* MORI_FI_A_PATH (malloc'd) */
  size_t column;          /* 1-based column where the rule starts */
  char text[128];         /* the rule as written, for messages */
} mori_fi_rule;

typedef struct mori_fi_schedule {
  mori_fi_rule *rules;
  size_t n;
} mori_fi_schedule;

/* Parses spec[0..len): rules separated by ';', each optionally prefixed
 * "rank=N ".  On success 0 and *out filled (free it with
 * mori_fi_schedule_free); otherwise -1, *out empty, and err says
 * "MORI_FI: column C: ..." naming the first defect.  The grammar is in
 * docs/fault-injection.md. */
int mori_fi_parse(const char *spec, size_t len, mori_fi_schedule *out, char *err,
                  size_t errlen);
void mori_fi_schedule_free(mori_fi_schedule *s);

/* ---- traces (MORI_FI_RECORD) ---- */

#define MORI_FI_TRACE_ARGS 12 /* hipModuleLaunchKernel has 11 */
#define MORI_FI_TRACE_FDS 8

typedef enum mori_fi_value_kind {
  MORI_FI_V_NULL = 1, /* 0 */
  MORI_FI_V_SYMBOL,   /* hN, rN+off, dN+off, sN, fdN */
  MORI_FI_V_NUMBER,
  MORI_FI_V_HOST,     /* an address outside every reservation and allocation */
  MORI_FI_V_FABRIC,   /* a fabric handle blob */
  MORI_FI_V_OTHER,    /* an fd the trace does not know */
  MORI_FI_V_PROP,     /* alloc/handletype/device */
  MORI_FI_V_DESC,     /* access/device */
  MORI_FI_V_FDS       /* list of fd symbols (possibly empty: none) */
} mori_fi_value_kind;

typedef struct mori_fi_value {
  mori_fi_value_kind kind;
  char sym;           /* 'h', 'r', 'd', 's' or 'f' (fd) */
  long id;            /* the symbol's number */
  uint64_t offset;    /* rN+0x200000 */
  int64_t number;     /* MORI_FI_V_NUMBER; handle type for 't' */
  int sub[3];         /* PROP: alloc type, handle type, device; DESC: access, device */
  long fds[MORI_FI_TRACE_FDS];
  int nfds;
} mori_fi_value;

typedef struct mori_fi_trace_rec {
  long index;         /* the global call index; -1 for socket calls and closes */
  int call;           /* mori_fi_call */
  int nargs;          /* the spec's recorded parameters, in order */
  mori_fi_value args[MORI_FI_TRACE_ARGS];
  long rc;            /* hipError_t, or the socket call's return value */
  int injected;       /* the fault shim failed this call on purpose */
  long line;          /* 1-based line in the trace text */
} mori_fi_trace_rec;

typedef struct mori_fi_trace {
  mori_fi_trace_rec *recs;
  size_t n;
  int rank;           /* from the "# rank N" header; -1 if absent */
} mori_fi_trace;

/* Parses a trace written by the fault shim.  0 and *out filled (free with
 * mori_trace_free), or -1 with err "line L column C: ...". */
int mori_trace_parse(const char *text, size_t len, mori_fi_trace *out, char *err,
                     size_t errlen);
void mori_trace_free(mori_fi_trace *t);

/* ---- replay against the sim backend ---- */

typedef struct mori_fi_replay_result {
  int ok;             /* no call that succeeded in the trace failed here */
  long calls;         /* records executed */
  long violation_at;  /* the first violation: its trace index (-1: a socket call) */
  long violation_line;
  int violation_call;
  char message[640];  /* "<call>: <hip error> (<n>): <sim's message>" */
  long divergences;   /* calls that failed in the trace but succeed here */
  long live_at_end;   /* shim ledger entries the trace leaves live */
} mori_fi_replay_result;

/* Replays t in a forked child on the sim shim under profile arch (NULL:
 * the sim's default) with MORI_SIM_QUIRKS=quirks (NULL or "": none),
 * contract checker on.  Peers are absent: an import of a peer's handle is
 * replayed as a fresh allocation of the size the trace maps it at, socket
 * calls are skipped, and a stream wait for a peer's signal passes.
 * Returns 0 with *res filled, or -1 (could not run; res->message). */
int mori_fi_replay(const mori_fi_trace *t, const char *arch, const char *quirks,
                   mori_fi_replay_result *res);

/* "Every profile and quirk set" is the sim's own tables:
 * mori_sim_profile_name() and mori_sim_quirk_name() in hip_shim.h. */

/* ---- control of a loaded libmori_faultinject.so ---- */

/* These reach the fault shim through dlsym, so a program can use them
 * whether or not it runs under LD_PRELOAD.  mori_fi_control replaces the
 * schedule (spec NULL or "": none) and resets this process's counters;
 * -1 with err if the shim is not loaded or spec is malformed. */
int mori_fi_loaded(void);
int mori_fi_control(const char *spec, char *err, size_t errlen);
/* Faults injected and runtime calls made in this process since the last
 * reset (fork resets them); -1 if the shim is not loaded. */
long mori_fi_injected(void);
long mori_fi_calls(void);
/* Every call (runtime and OS) rank has made so far, as any process forked
 * from the one that loaded the fault shim sees it: the launcher's
 * progress watch.  -1 if the shim is not loaded. */
long mori_fi_progress(int rank);
/* Resources whose last release the runtime refused (injected or not) and
 * that are therefore still live in the shim's ledger; 0 if not loaded. */
long mori_fi_refused(void);
/* The call the last injected fault hit ("hipMemMap"), NULL if none. */
const char *mori_fi_last_fault(void);
/* The sender ranks of the datagrams a recv= rule delivered to this
 * process, in delivery order (-1: undecodable); how many, or -1. */
int mori_fi_delivered(int *senders, int max);
/* fds the fault shim holds open itself (its trace), 0 if not loaded: leak
 * checks that count a process's fds subtract these. */
int mori_fi_own_fds(void);
/* A virtual clock: moves the monotonic clock the core reads through the
 * seam ms ahead in this process (and in the processes it forks later), at
 * once, so that a deadline that would take ms to come is met without
 * waiting for it; every deadline the core keeps (store waits, the
 * rendezvous, the fd channel, the watchdog) runs on that clock.  Only
 * forward.  The total advance in ms, or -1 if the shim is not loaded or ms
 * is negative. */
long mori_fi_clock_advance(long ms);

/* What this process has called through the seam since the last reset (fork
 * resets it): every call by mori_fi_call, and the datagrams that moved.  A
 * program that measures its own cost (mori-symm bench-sim) reads it between
 * steps.  0, or -1 if the shim is not loaded or comes from another build. */
typedef struct mori_fi_counts {
  long calls[MORI_FI_CALL__COUNT];
  long datagrams_sent, datagrams_received;
} mori_fi_counts;
int mori_fi_counts_get(mori_fi_counts *out);

#ifdef __cplusplus
}
#endif
#endif
