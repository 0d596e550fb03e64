/*
 * main.c - the mori-symm command line: probe, demo, fsm --dot.
 */
#include "cli.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mori/fi.h"
#include "mori/fsm.h"
#include "mori/symm.h"

double cli_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

size_t cli_parse_size(const char *s) {
  char *end = NULL;
  double v = strtod(s, &end);
  static const struct { char suffix; double scale; } units[] = {
      {'K', 1024.0}, {'k', 1024.0}, {'M', 1048576.0}, {'m', 1048576.0},
      {'G', 1073741824.0}, {'g', 1073741824.0}};
  for (size_t i = 0; end && *end && i < sizeof units / sizeof units[0]; i++)
    if (*end == units[i].suffix) v *= units[i].scale;
  return v > 0 ? (size_t)v : 0;
}

/* Loading a runtime library does not initialize it, so forked ranks can
 * still bring it up themselves. */
static int runtime_present(void) {
  static const char *const libs[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libcuda.so.1"};
  for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
    void *h = dlopen(libs[i], RTLD_LAZY | RTLD_LOCAL);
    if (h) {
      dlclose(h);
      return 1;
    }
  }
  return 0;
}

const char *cli_default_shim(const char *arg) {
  if (arg && *arg) return arg;
  const char *env = getenv("MORI_SYMM_SHIM");
  if (env && *env) return env;
  return runtime_present() ? "auto" : "sim";
}

int cli_probe(int argc, char **argv) {
  const char *shim = NULL;
  for (int i = 0; i < argc; i++) {
    if (i + 1 < argc && strcmp(argv[i], "--shim") == 0) shim = argv[++i];
    else {
      fprintf(stderr, "usage: mori-symm probe [--shim sim|cuda|hip|auto]\n");
      return 2;
    }
  }
  if (mori_shim_select(cli_default_shim(shim)) != 0) {
    printf("probe FAILED: %s\n", mori_shim_message());
    return 1;
  }
  int ndev = 0;
  if (mori_hipGetDeviceCount(&ndev) != hipSuccess) {
    printf("probe FAILED: hipGetDeviceCount: %s\n", mori_shim_message());
    return 1;
  }
  int version = mori_shim_runtime_version();
  printf("shim %s, runtime version %d, %d device(s)\n", mori_shim_backend(), version, ndev);
  printf("%-7s %-10s %s\n", "device", "handle", "why");
  for (int d = 0; d < ndev; d++) {
    int type = 0;
    char why[256];
    if (mori_symm_probe(d, &type, why, sizeof why) != 0) {
      printf("%-7d %-10s %s\n", d, "error", mori_last_error());
      return 1;
    }
    printf("%-7d %-10s %s\n", d, type == hipMemHandleTypeFabric ? "fabric" : "posix_fd", why);
  }
  long leaks = mori_shim_ledger_total();
  printf("probe ok: devices=%d leaks=%ld\n", ndev, leaks);
  return leaks == 0 ? 0 : 1;
}

static int cli_fsm(int argc, char **argv) {
  if (argc == 1 && strcmp(argv[0], "--dot") == 0) {
    mori_fsm_write_dot(stdout);
    return 0;
  }
  fprintf(stderr, "usage: mori-symm fsm --dot\n");
  return 2;
}

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *help;
} commands[] = {
    {"probe", cli_probe, "per-device table: the handle type chosen and why"},
    {"demo", cli_demo, "N ranks: alloc, rendezvous, all-to-all, barriers, verify, teardown"},
    {"cycles", cli_cycles, "alloc/rendezvous/barrier/free repeated: fd, ledger, memory growth"},
    {"bench-sim", cli_bench_sim, "per-rank store ops, datagrams, memops, syscalls vs world size"},
    {"replay", mori_fi_cli_replay, "TRACE [--profile ARCH[,QUIRK...]]: replay a shim trace on the sim"},
    {"fsm", cli_fsm, "--dot: the window state machine as a Graphviz diagram"},
};

int main(int argc, char **argv) {
  for (size_t i = 0; argc > 1 && i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 2, argv + 2);
  fprintf(stderr, "usage: mori-symm COMMAND [ARGS]\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(stderr, "  %-6s %s\n", commands[i].name, commands[i].help);
  return 2;
}
