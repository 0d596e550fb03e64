/*
 * cuda_smoke.c - the cuda backend on a real NVIDIA GPU (label gpu): one
 * POSIX-fd window through its whole lifecycle, imported back into a second
 * mapping of the same process and, through SCM_RIGHTS, into another process
 * that writes to it with a stream memory operation; the fabric create that
 * needs an IMEX domain; and the ledger at the end.  Prints what it sees;
 * exits 0 only if every step behaved.
 */
#include "fd_pass.h"
#include "mori/hip_shim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;

#define STEP(call)                                                                         \
  do {                                                                                     \
    hipError_t e_ = (call);                                                                \
    printf("smoke: %-60.60s %s\n", #call, mori_hipGetErrorName(e_));                       \
    if (e_ != hipSuccess) {                                                                \
      printf("smoke:   FAILED: %s\n", mori_shim_message());                               \
      failures++;                                                                          \
      goto out;                                                                            \
    }                                                                                      \
  } while (0)

#define EXPECT(cond)                                                                       \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      printf("smoke:   FAILED: %s\n", #cond);                                              \
      failures++;                                                                          \
      goto out;                                                                            \
    }                                                                                      \
  } while (0)

static hipMemAllocationProp prop_of(hipMemAllocationHandleType type) {
  hipMemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = hipMemAllocationTypePinned;
  p.requestedHandleType = type;
  p.location.type = hipMemLocationTypeDevice;
  p.location.id = 0;
  return p;
}

/* Without an IMEX domain the driver refuses fabric handles (800), which the
 * backend reports as hipErrorNotSupported: what the probe expects. */
static void try_fabric(size_t gran) {
  hipMemAllocationProp prop = prop_of(hipMemHandleTypeFabric);
  hipMemGenericAllocationHandle_t h = NULL;
  int hint = -1;
  if (mori_hipDeviceGetAttribute(&hint, moriDeviceAttributeFabricHandleSupported, 0) ==
      hipSuccess)
    printf("smoke: fabric attribute (hint) = %d\n", hint);
  hipError_t e = mori_hipMemCreate(&h, gran, &prop, 0);
  printf("smoke: fabric hipMemCreate -> %s: %s\n", mori_hipGetErrorName(e),
         e == hipSuccess ? "created (IMEX domain present)" : mori_shim_message());
  if (e == hipSuccess) {
    hipMemFabricHandle_t blob;
    e = mori_hipMemExportToShareableHandle(&blob, h, hipMemHandleTypeFabric, 0);
    printf("smoke: fabric export -> %s\n", mori_hipGetErrorName(e));
    if (mori_hipMemRelease(h) != hipSuccess) failures++;
  } else if (e != hipErrorNotSupported) {
    failures++;
  }
  (void)mori_hipGetLastError();
}

/* The peer: forked before either process touched the GPU, so it brings
 * the driver up on its own; imports the fd, checks the first word, and
 * signals through its own mapping with a stream write. */
static int peer(int sock) {
  hipMemAllocationProp prop = prop_of(hipMemHandleTypePosixFileDescriptor);
  hipMemAccessDesc rw;
  hipMemGenericAllocationHandle_t h = NULL;
  void *va = NULL;
  size_t gran = 0;
  uint32_t word = 0;
  int fd = test_recv_fd(sock);
  alarm(120); /* a wedged driver must not hold the run */
  if (fd < 0) return 2; /* the exporter gave up before sending */
  memset(&rw, 0, sizeof rw);
  rw.location.type = hipMemLocationTypeDevice;
  rw.flags = hipMemAccessFlagsProtReadWrite;
  printf("peer:  received fd %d\n", fd);
  STEP(mori_hipMemGetAllocationGranularity(&gran, &prop, hipMemAllocationGranularityRecommended));
  STEP(mori_hipMemImportFromShareableHandle(&h, (void *)(intptr_t)fd,
                                            hipMemHandleTypePosixFileDescriptor));
  STEP(mori_hipMemAddressReserve(&va, gran, 0, NULL, 0));
  STEP(mori_hipMemMap(va, gran, 0, h, 0));
  STEP(mori_hipMemSetAccess(va, gran, &rw, 1));
  STEP(mori_hipMemcpy(&word, va, sizeof word, hipMemcpyDeviceToHost));
  EXPECT(word == 0xC0FFEEu);
  STEP(mori_hipStreamWriteValue32(NULL, (char *)va + 128, 42, 0));
  STEP(mori_hipStreamSynchronize(NULL));
  STEP(mori_hipMemUnmap(va, gran));
  STEP(mori_hipMemAddressFree(va, gran));
  STEP(mori_hipMemRelease(h));
  close(fd);
out:
  if (mori_shim_registry_report(stdout) != 0) failures++;
  printf(failures ? "peer FAILED\n" : "peer ok\n");
  return failures ? 1 : 0;
}

int main(void) {
  hipMemAllocationProp prop = prop_of(hipMemHandleTypePosixFileDescriptor);
  hipMemAccessDesc rw;
  hipMemGenericAllocationHandle_t h = NULL, imported = NULL;
  void *va = NULL, *va2 = NULL, *dev = NULL;
  size_t gran = 0, min_gran = 0;
  int fd = -1, version = 0, count = 0, sms = 0, vmm = 0;
  uint32_t words[4] = {0};
  int sv[2], status = 0;
  pid_t pid;

  setvbuf(stdout, NULL, _IOLBF, 0);
  if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) != 0 || (pid = fork()) < 0) {
    perror("smoke: socketpair/fork");
    return 1;
  }
  if (pid == 0) {
    close(sv[0]);
    _exit(peer(sv[1]));
  }
  close(sv[1]);
  memset(&rw, 0, sizeof rw);
  rw.location.type = hipMemLocationTypeDevice;
  rw.location.id = 0;
  rw.flags = hipMemAccessFlagsProtReadWrite;

  if (mori_shim_select("cuda") != 0) {
    printf("smoke: cuda backend not available: %s\n", mori_shim_message());
    return 1;
  }
  STEP(mori_hipRuntimeGetVersion(&version));
  STEP(mori_hipGetDeviceCount(&count));
  STEP(mori_hipSetDevice(0));
  STEP(mori_hipDeviceGetAttribute(&sms, moriDeviceAttributeMultiprocessorCount, 0));
  STEP(mori_hipDeviceGetAttribute(&vmm, moriDeviceAttributeVirtualMemoryManagementSupported, 0));
  printf("smoke: driver %d, %d device(s), %d SMs, VMM %d\n", version, count, sms, vmm);
  STEP(mori_hipMemGetAllocationGranularity(&min_gran, &prop, hipMemAllocationGranularityMinimum));
  STEP(mori_hipMemGetAllocationGranularity(&gran, &prop, hipMemAllocationGranularityRecommended));
  printf("smoke: granularity minimum %zu, recommended %zu\n", min_gran, gran);
  try_fabric(gran);

  STEP(mori_hipMemCreate(&h, gran, &prop, 0));
  STEP(mori_hipMemExportToShareableHandle(&fd, h, hipMemHandleTypePosixFileDescriptor, 0));
  printf("smoke: exported fd %d\n", fd);
  STEP(mori_hipMemAddressReserve(&va, gran, 0, NULL, 0));
  STEP(mori_hipMemMap(va, gran, 0, h, 0));
  STEP(mori_hipMemSetAccess(va, gran, &rw, 1));
  STEP(mori_hipMemset(va, 0, gran));
  words[0] = 0xC0FFEEu;
  STEP(mori_hipMemcpy(va, words, sizeof words, hipMemcpyHostToDevice));
  /* The other process: its own driver, its own mapping, its own write. */
  EXPECT(test_send_fd(sv[0], fd) == 0);
  EXPECT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  pid = -1;
  STEP(mori_hipStreamWaitValue32(NULL, (char *)va + 128, 42, hipStreamWaitValueGte, 0xFFFFFFFFu));
  STEP(mori_hipStreamSynchronize(NULL));
  STEP(mori_hipMemcpy(words, (char *)va + 128, sizeof words[0], hipMemcpyDeviceToHost));
  EXPECT(words[0] == 42);
  printf("smoke: the peer process's stream write arrived through its own mapping\n");
  /* The fd imported back: a second mapping of the same memory. */
  STEP(mori_hipMemImportFromShareableHandle(&imported, (void *)(intptr_t)fd,
                                            hipMemHandleTypePosixFileDescriptor));
  STEP(mori_hipMemAddressReserve(&va2, gran, 0, NULL, 0));
  STEP(mori_hipMemMap(va2, gran, 0, imported, 0));
  STEP(mori_hipMemSetAccess(va2, gran, &rw, 1));
  STEP(mori_hipStreamWriteValue32(NULL, (char *)va2 + 64, 7, 0));
  STEP(mori_hipStreamWaitValue32(NULL, (char *)va + 64, 7, hipStreamWaitValueGte, 0xFFFFFFFFu));
  STEP(mori_hipStreamSynchronize(NULL));
  memset(words, 0, sizeof words);
  STEP(mori_hipMemcpy(words, va2, sizeof words, hipMemcpyDeviceToHost));
  EXPECT(words[0] == 0xC0FFEEu);
  STEP(mori_hipMemcpy(words, (char *)va + 64, sizeof words[0], hipMemcpyDeviceToHost));
  EXPECT(words[0] == 7);
  printf("smoke: writes through one mapping read back through the other\n");
  STEP(mori_hipMalloc(&dev, 4096));
  STEP(mori_hipMemcpy(dev, va, 4096, hipMemcpyDeviceToDevice));
  STEP(mori_hipDeviceSynchronize());
  STEP(mori_hipFree(dev));
  dev = NULL;

  STEP(mori_hipMemUnmap(va2, gran));
  STEP(mori_hipMemAddressFree(va2, gran));
  va2 = NULL;
  STEP(mori_hipMemRelease(imported));
  imported = NULL;
  STEP(mori_hipMemUnmap(va, gran));
  STEP(mori_hipMemAddressFree(va, gran));
  va = NULL;
  STEP(mori_hipMemRelease(h));
  h = NULL;
  mori_close(fd);
  fd = -1;
out:
  close(sv[0]); /* a peer still waiting sees end of file and exits */
  if (pid > 0) waitpid(pid, &status, 0);
  if (mori_shim_registry_report(stdout) != 0) failures++;
  printf(failures ? "cuda smoke FAILED (%d)\n" : "cuda smoke ok\n", failures);
  return failures ? 1 : 0;
}
