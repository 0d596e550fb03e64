/* A stand-in for CUPTI's header, just what bench/cupti_trace.c uses, so
 * that CI (no CUDA toolkit) can build the tracer and check how it opens
 * its output; the names and member order are CUPTI's. */
#ifndef MORI_CUPTI_STUB_H
#define MORI_CUPTI_STUB_H
#include <stdint.h>
#include <stddef.h>
#define CUPTIAPI
typedef int CUptiResult; typedef void *CUcontext; typedef uint32_t CUpti_CallbackId;
enum { CUPTI_SUCCESS = 0, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED = 1 };
typedef enum { CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_KERNEL, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL } CUpti_ActivityKind;
typedef enum { CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RUNTIME_API } CUpti_CallbackDomain;
typedef struct { CUpti_ActivityKind kind; } CUpti_Activity;
typedef struct { CUpti_ActivityKind kind; CUpti_CallbackId cbid; uint64_t start, end; uint32_t processId, threadId, correlationId, returnValue; } CUpti_ActivityAPI;
CUptiResult cuptiGetResultString(CUptiResult, const char **);
CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain, uint32_t, const char **);
CUptiResult cuptiActivityGetNextRecord(uint8_t *, size_t, CUpti_Activity **);
CUptiResult cuptiGetTimestamp(uint64_t *);
CUptiResult cuptiActivityFlushAll(uint32_t);
CUptiResult cuptiActivityRegisterCallbacks(void (*)(uint8_t **, size_t *, size_t *), void (*)(CUcontext, uint32_t, uint8_t *, size_t, size_t));
CUptiResult cuptiActivityEnable(CUpti_ActivityKind);
#endif
