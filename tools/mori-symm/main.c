/*
 * main.c - the mori-symm command line: the one list of its commands, and
 * the small ones (probe, fsm).  Grammar and help come from args.c.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* mori_shim_runtime_find("auto") in a child: HIP's version call may bring
 * the runtime up, and the ranks fork later.  1 found and accepted, 0 none,
 * -1 refused (why says what and why); a child that dies says so as -1. */
static int runtime_found(char *why, size_t whylen) {
  int fds[2];
  why[0] = '\0';
  if (pipe(fds) != 0) {
    snprintf(why, whylen, "pipe: %s", strerror(errno));
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    char text[1024];
    int rc = mori_shim_runtime_find("auto", text, sizeof text);
    FILE *out = fdopen(fds[1], "w");
    if (out != NULL) fprintf(out, "%d %s", rc, text);
    _exit(out != NULL && fclose(out) == 0 ? 0 : 1);
  }
  close(fds[1]);
  char text[1100] = "";
  size_t n = 0;
  ssize_t k;
  while (pid > 0 && n + 1 < sizeof text &&
         ((k = read(fds[0], text + n, sizeof text - 1 - n)) > 0 || (k < 0 && errno == EINTR)))
    n += k > 0 ? (size_t)k : 0;
  text[n] = '\0';
  close(fds[0]);
  int status = 0, rc = -1, used = 0;
  if (pid < 0) snprintf(why, whylen, "fork: %s", strerror(errno));
  else if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
           sscanf(text, "%d %n", &rc, &used) != 1)
    snprintf(why, whylen, "the child looking for a GPU runtime failed (%s)", text);
  else
    snprintf(why, whylen, "%s", text + used);
  return rc;
}

const char *cli_default_shim(const char *arg) {
  if (arg && *arg) return arg;
  const char *env = getenv("MORI_SYMM_SHIM");
  if (env && *env) return env;
  char why[1100];
  int found = runtime_found(why, sizeof why);
  if (found == 1) return "auto";
  if (found < 0)
    fprintf(stderr, "[mori-symm WARN] %s: falling back to the sim, the emulator (no GPU is "
                    "used; --shim sim or MORI_SYMM_SHIM=sim chooses it without this warning)\n",
            why);
  return "sim";
}

int cli_is_emulator(const char *shim) { return shim != NULL && strcmp(shim, "sim") == 0; }

const char *cli_shim_label(const char *shim) {
  return cli_is_emulator(shim) ? "sim (the emulator, no GPU)" : shim;
}

const char *cli_emulator_note(const char *shim) {
  return cli_is_emulator(shim) ? " on the emulator (shim sim, no GPU)" : "";
}

/* ---- probe ---- */

struct probe_args {
  const char *shim;
};

static const cli_option probe_options[] = {
    {"--shim", CLI_CHOICE, offsetof(struct probe_args, shim), 0, 0, cli_shims, "SHIM",
     "GPU shim backend (default MORI_SYMM_SHIM, else auto where a GPU runtime is found and "
     "accepted, else sim: a refused one is named on stderr)"},
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
  const char *backend = mori_shim_backend();
  printf("shim %s, runtime version %d, %d device(s)\n", cli_shim_label(backend), version, ndev);
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
  printf("probe ok: devices=%d leaks=%ld%s\n", ndev, leaks, cli_emulator_note(backend));
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
    .version_details = cli_print_runtimes,
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
