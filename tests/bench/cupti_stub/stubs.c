/* CUPTI's calls as the tracer's check needs them: every one succeeds and
 * there are never records; then the injection entry point once, whose
 * answer is printed. */
#include "cupti.h"

#include <stdio.h>

int InitializeInjection(void);

CUptiResult cuptiGetResultString(CUptiResult r, const char **s) {
  (void)r;
  *s = "stub";
  return CUPTI_SUCCESS;
}
CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain d, uint32_t c, const char **s) {
  (void)d;
  (void)c;
  *s = "stub";
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityGetNextRecord(uint8_t *b, size_t n, CUpti_Activity **r) {
  (void)b;
  (void)n;
  (void)r;
  return 1;
}
CUptiResult cuptiGetTimestamp(uint64_t *t) {
  *t = 1;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityFlushAll(uint32_t f) {
  (void)f;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityRegisterCallbacks(void (*a)(uint8_t **, size_t *, size_t *),
                                           void (*b)(CUcontext, uint32_t, uint8_t *, size_t,
                                                     size_t)) {
  (void)a;
  (void)b;
  return CUPTI_SUCCESS;
}
CUptiResult cuptiActivityEnable(CUpti_ActivityKind k) {
  (void)k;
  return CUPTI_SUCCESS;
}

int main(void) {
  printf("InitializeInjection -> %d\n", InitializeInjection());
  return 0;
}
