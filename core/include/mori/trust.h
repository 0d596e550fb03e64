/*
 * trust.h - directories no other user can change (docs/security.md): the
 * check the file store's root and the fd channel's socket base pass, for
 * the tools above the library too (the launcher makes and removes its
 * working directory under a TMPDIR that passed it, through the fd it gets
 * here).
 */
#ifndef MORI_TRUST_H
#define MORI_TRUST_H

#include "mori/api.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  MORI_TRUST_CREATE = 1, /* make the directory, 0700, if it is missing (never a parent) */
  MORI_TRUST_SHARED = 2  /* the directory itself may be root's, or root's and sticky (/tmp) */
};

/* Opens the absolute path as a directory (O_RDONLY, close-on-exec) that no
 * other user can change, into *fd: every component from "/" down is opened
 * with O_NOFOLLOW and judged on the fd in hand: each belongs to this euid
 * or root and is writable by nobody else unless root-owned and sticky; the
 * directory itself belongs to this euid and is writable by it alone (with
 * MORI_TRUST_SHARED, it may also be root's, or root's and sticky); no
 * component is a symlink.  who starts every message ("file store",
 * "launcher"); a refusal names the path and the reason (MORI_EAUTH), a
 * path that is not absolute is MORI_EINVAL.  Use the fd with *at() calls
 * only: the path may name something else a moment later, the fd not. */
MORI_API int mori_trusted_dir_open(const char *path, int flags, const char *who, int *fd);

#ifdef __cplusplus
}
#endif
#endif
