/*
 * main.c - the mori-symm command line: the one list of its commands, and
 * the small ones (probe, fsm).  Grammar and help come from args.c.
 */
#include "cli.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mori/fi.h"
#include "mori/fsm.h"
#include "env_table.h"
#include "mori/symm.h"

double cli_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

const char *const cli_shims[] = {"sim", "cuda", "hip", "auto", NULL};

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

/* ---- probe ---- */

struct probe_args {
  const char *shim;
};

static const cli_option probe_options[] = {
    {"--shim", CLI_CHOICE, offsetof(struct probe_args, shim), 0, 0, cli_shims, "SHIM",
     "GPU shim backend (default MORI_SYMM_SHIM, else auto where a GPU runtime loads, else sim)"},
    {0},
};

static int probe_run(int argc, char **argv) {
  struct probe_args a = {NULL};
  int rc = cli_parse(&cli_probe_command, &a, argc, argv);
  if (rc != 0) return rc == CLI_EXIT_HELP ? 0 : rc;
  const char *shim = cli_default_shim(a.shim);
  if (mori_shim_select(shim) != 0) {
    fprintf(stderr, "probe FAILED: shim %s: %s\n", shim, mori_shim_message());
    return 1;
  }
  int ndev = 0;
  if (mori_hipGetDeviceCount(&ndev) != hipSuccess) {
    fprintf(stderr, "probe FAILED: hipGetDeviceCount: %s\n", mori_shim_message());
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
      fprintf(stderr, "probe FAILED: device %d: %s\n", d, mori_last_error());
      return 1;
    }
    printf("%-7d %-10s %s\n", d, type == hipMemHandleTypeFabric ? "fabric" : "posix_fd", why);
  }
  long leaks = mori_shim_registry_total();
  if (leaks != 0) {
    fprintf(stderr, "probe FAILED: devices=%d leaks=%ld\n", ndev, leaks);
    return 1;
  }
  printf("probe ok: devices=%d leaks=%ld\n", ndev, leaks);
  return 0;
}

const cli_command cli_probe_command = {
    .name = "probe",
    .run = probe_run,
    .summary = "per device: the handle type the probe chooses (fabric or posix_fd) and why",
    .options = probe_options,
};

/* ---- fsm ---- */

struct fsm_args {
  int dot;
};

static const cli_option fsm_options[] = {
    {"--dot", CLI_FLAG, offsetof(struct fsm_args, dot), 0, 0, NULL, NULL,
     "print the diagram as Graphviz DOT (required: the one output so far)"},
    {0},
};

static int fsm_run(int argc, char **argv) {
  struct fsm_args a = {0};
  int rc = cli_parse(&cli_fsm_command, &a, argc, argv);
  if (rc != 0) return rc == CLI_EXIT_HELP ? 0 : rc;
  if (!a.dot) return cli_usage_error(&cli_fsm_command, "--dot is required");
  mori_fsm_write_dot(stdout);
  return 0;
}

const cli_command cli_fsm_command = {
    .name = "fsm",
    .run = fsm_run,
    .summary = "the window state machine, drawn from its transition table",
    .options = fsm_options,
};

/* ---- the tool ---- */

static const cli_command *const commands[] = {
    &cli_probe_command, &cli_demo_command,       &cli_cycles_command,
    &cli_bench_sim_command, &cli_replay_command, &cli_fsm_command, NULL,
};

static const cli_topic *const topics[] = {&mori_env_help_topic, NULL};

static const cli_tool tool = {
    .name = "mori-symm",
    .version = MORI_SYMM_VERSION_STRING,
    .library_version = mori_symm_version,
    .summary = "MORI, a torch SymmetricMemory backend over HIP VMM: probe, run and check it",
    .commands = commands,
    .topics = topics,
    .details = "environment: `mori-symm help env` lists every variable mori-symm reads, its\n"
               "values, its default and who reads it (docs/environment.md, the same table).\n"
               "mori-fi (beside mori-symm): fault-injection sweeps; mori-fi --help.\n",
};

int main(int argc, char **argv) {
  (void)mori_symm_log_level(); /* a bad MORI_SYMM_DEBUG is reported once, not per rank */
  return cli_main(&tool, argc, argv);
}
