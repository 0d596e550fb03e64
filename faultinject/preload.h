/*
 * preload.h - the state libmori_faultinject.so keeps per process and what
 * its files (preload.c: wrappers and injection, preload_record.c: traces,
 * preload_dgram.c: datagram faults) share.  Everything here is hidden;
 * only the interposed shim functions and the control calls are exported.
 */
#ifndef MORI_FI_PRELOAD_H
#define MORI_FI_PRELOAD_H

#include <pthread.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "fi_internal.h"

#define FI_EXPORT __attribute__((visibility("default")))

/* The next definitions in the lookup order: the shim's own. */
struct fi_real {
#define FI_REAL_HIP(name, arity, params, args, registry, shim, spec, errors) \
  hipError_t(*name) params;
#define FI_REAL_OS(ret, name, params, args) ret(*name) params;
  MORI_SHIM_HIP_CALLS(FI_REAL_HIP)
  MORI_FI_OS_CALLS(FI_REAL_OS)
#undef FI_REAL_HIP
#undef FI_REAL_OS
  const char *(*mori_shim_message)(void);
};
extern struct fi_real fi__real;
/* Resolves fi__real once (dlsym RTLD_NEXT). */
void fi__resolve(void);

/* One process's view; a forked child starts its own (counters zero, rank
 * read again from MORI_RANK, which the launcher sets after fork). */
struct fi_process {
  pid_t pid;
  int rank;                      /* -1 until MORI_RANK is read */
  mori_fi_schedule sched;
  long calls[MORI_FI_CALL__COUNT];
  double us[MORI_FI_CALL__COUNT];     /* time in the forwarded calls (count=) */
  double us_max[MORI_FI_CALL__COUNT]; /* and the longest of them */
  long nth_max[MORI_FI_CALL__COUNT];  /* which call of the function that was */
  long global;                   /* runtime calls so far */
  long injected;
  long dgrams_sent, dgrams_received;
  long fd_dgrams_sent, fd_dgrams_received; /* of them, with an fd: what send=/recv= number */
  long dgram_forged;             /* the datagram number already forged */
  int last_fault;                /* the call most recently failed or shaped; -1: none */
  int delivered[64];             /* senders of datagrams a recv= rule delivered, in order */
  int ndelivered;
  const char *count_path, *record_path; /* into sched or the environment */
  int record_fd;                 /* -1: not open yet */
};

/* Guards fi__p and everything below; never held across a runtime call. */
extern pthread_mutex_t fi__lock;
extern struct fi_process fi__p;

/* The rank of this process (MORI_RANK), reading it on first use. */
int fi__rank(void);
/* The first rule of target for this rank whose action is one of the mask
 * bits (1 << action) and, if nth > 0, that fires at the nth event. */
const mori_fi_rule *fi__rule(mori_fi_target target, unsigned actions, long nth);

/* ---- traces (preload_record.c), all with fi__lock held ---- */

typedef struct fi_arg {
  const void *p; /* the parameter's address */
  size_t size;   /* and its size */
} fi_arg;

void fi__record_hip(int call, long index, const fi_arg *argv, hipError_t rc, int injected);
void fi__record_msg(int call, const struct msghdr *msg, ssize_t rc, int injected);
void fi__record_close(int fd, int rc);
/* Forgets every symbol and closes the trace (fork, reconfiguration). */
void fi__record_reset(void);

/* ---- datagrams (preload_dgram.c) ---- */

/* sendmsg and recvmsg as the schedule's send= and recv= rules shape them;
 * the OS wrappers forward to these instead of the shim's. */
ssize_t fi__dgram_sendmsg(int fd, const struct msghdr *msg, int flags);
ssize_t fi__dgram_recvmsg(int fd, struct msghdr *msg, int flags);
/* Drops what is queued for fd (closing the fds it carried): fd is being
 * closed.  Takes fi__lock. */
void fi__dgram_forget(int fd);
/* Drops every queue without closing (a forked child's copies). */
void fi__dgram_reset(void);

#endif
