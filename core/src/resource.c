/*
 * resource.c - how each kind of ledger entry is given back.  One row per
 * mori_res; the state machine decides the order, this table the call.
 */
#include "internal.h"

#include "mori/channel.h"

static int release_handle(const mori_ledger_entry *e) {
  MORI_HIP("hipMemRelease", mori_hipMemRelease((hipMemGenericAllocationHandle_t)e->value));
  return 0;
}

static int free_reservation(const mori_ledger_entry *e) {
  MORI_HIP("hipMemAddressFree", mori_hipMemAddressFree((void *)e->value, e->size));
  return 0;
}

static int unmap(const mori_ledger_entry *e) {
  MORI_HIP("hipMemUnmap", mori_hipMemUnmap((void *)e->value, e->size));
  return 0;
}

static int close_fd(const mori_ledger_entry *e) {
  if (mori_close((int)e->value) != 0)
    return mori__error(MORI_EIO, "close(fd %d) failed", (int)e->value);
  return 0;
}

static int close_channel(const mori_ledger_entry *e) {
  mori_channel_close((mori_channel *)e->value);
  return 0;
}

static int free_device(const mori_ledger_entry *e) {
  MORI_HIP("hipFree", mori_hipFree((void *)e->value));
  return 0;
}

static int (*const release_row[MORI_RES__COUNT])(const mori_ledger_entry *) = {
    [MORI_RES_PHYS_HANDLE] = release_handle,
    [MORI_RES_LOCAL_RESERVATION] = free_reservation,
    [MORI_RES_LOCAL_MAPPING] = unmap,
    [MORI_RES_EXPORTED_FD] = close_fd,
    [MORI_RES_BLOCK_REF] = NULL, /* borrowed: the block releases itself */
    [MORI_RES_CHANNEL] = close_channel,
    [MORI_RES_RECEIVED_FD] = close_fd,
    [MORI_RES_IMPORTED_HANDLE] = release_handle,
    [MORI_RES_SPAN_RESERVATION] = free_reservation,
    [MORI_RES_SLOT_MAPPING] = unmap,
    [MORI_RES_DEVICE_TABLE] = free_device,
};

/* The first failure of an unwind: later failures must not overwrite its
 * message, since it names the call that went wrong first. */
struct unwind_first {
  int rc;
  char message[1024];
};

int mori__release_entry(void *ctx, const mori_ledger_entry *e) {
  if ((unsigned)e->kind >= MORI_RES__COUNT || release_row[e->kind] == NULL) return 0;
  MORI_LOG(MORI_LOG_TRACE, -1, -1, "release %s 0x%lx size %zu aux %d", mori_res_name(e->kind),
           (unsigned long)e->value, e->size, e->aux);
  int rc = release_row[e->kind](e);
  struct unwind_first *first = ctx;
  if (rc != 0 && first != NULL && first->rc == 0) {
    first->rc = rc;
    snprintf(first->message, sizeof first->message, "%s", mori_last_error());
  }
  return rc;
}

int mori__unwind(mori_fsm *m, int fail) {
  struct unwind_first first = {0, ""};
  char original[1024];
  snprintf(original, sizeof original, "%s", mori_last_error());
  int rc = fail ? mori_fsm_fail(m, mori__release_entry, &first)
                : mori_fsm_release(m, mori__release_entry, &first);
  if (fail) {
    /* The error that caused the rollback is the one to report. */
    if (first.rc != 0)
      mori__error(first.rc, "%s (rollback also failed: %s)", original, first.message);
    else
      mori__error(MORI_OK, "%s", original);
    return first.rc;
  }
  if (first.rc != 0) return mori__error(first.rc, "%s", first.message);
  if (rc != 0) return mori__error(MORI_ESTATE, "release: %s", m->why);
  return 0;
}
