/*
 * calls.c - the tables the schedule language and the trace format share:
 * call names and argument layouts (from fi_calls.h), the HIP error names,
 * and which calls give resources back.
 */
#include "mori/fi.h"

#include <string.h>

static const struct {
  const char *name, *spec;
} calls[MORI_FI_CALL__COUNT] = {
#define ROW_HIP(name, arity, params, args, spec) {#name, spec},
#define ROW_OS(name, spec) {#name, spec},
    MORI_FI_HIP_CALLS(ROW_HIP) MORI_FI_OS_CALLS(ROW_OS)
#undef ROW_HIP
#undef ROW_OS
};

const char *mori_fi_call_name(int call) {
  return call >= 0 && call < MORI_FI_CALL__COUNT ? calls[call].name : NULL;
}

const char *mori_fi_call_spec(int call) {
  return call >= 0 && call < MORI_FI_CALL__COUNT ? calls[call].spec : NULL;
}

static int name_is(const char *want, const char *name, size_t len) {
  return strlen(want) == len && memcmp(want, name, len) == 0;
}

int mori_fi_call_find(const char *name, size_t len) {
  for (int c = 0; c < MORI_FI_CALL__COUNT; c++) {
    if (name_is(calls[c].name, name, len)) return c;
    /* mori_hipMemMap is the exported spelling of hipMemMap */
    if (mori_fi_call_is_hip(c) && len > 5 && memcmp(name, "mori_", 5) == 0 &&
        name_is(calls[c].name, name + 5, len - 5))
      return c;
  }
  return -1;
}

int mori_fi_call_releases(int call) {
  static const int releasing[] = {MORI_FI_CALL_hipMemRelease, MORI_FI_CALL_hipMemAddressFree,
                                  MORI_FI_CALL_hipMemUnmap, MORI_FI_CALL_hipFree};
  for (size_t i = 0; i < sizeof releasing / sizeof releasing[0]; i++)
    if (releasing[i] == call) return 1;
  return 0;
}

/* The shim's own list (hip_shim.h), so the two tables cannot drift. */
#define MORI_ERROR_ROW(e) {e, #e},
static const struct {
  int code;
  const char *name;
} errors[] = {MORI_HIP_ERROR_LIST(MORI_ERROR_ROW)};
#undef MORI_ERROR_ROW

const char *mori_fi_error_name(int code) {
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].code == code) return errors[i].name;
  return NULL;
}

int mori_fi_error_find(const char *name, size_t len, int *code) {
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (name_is(errors[i].name, name, len)) {
      *code = errors[i].code;
      return 0;
    }
  return -1;
}
