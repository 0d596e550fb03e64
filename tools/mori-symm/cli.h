/*
 * cli.h - the commands of the mori-symm tool and what they share: the
 * option rows and the forked ranks of demo and cycles (ranks.c).
 */
#ifndef MORI_CLI_H
#define MORI_CLI_H

#include <stddef.h>

#include "args.h"
#include "launch.h"

/* Every command of mori-symm; main.c lists them once. */
extern const cli_command cli_probe_command;
extern const cli_command cli_demo_command;
extern const cli_command cli_cycles_command;
extern const cli_command cli_bench_sim_command;
extern const cli_command cli_fsm_command;
extern const cli_command cli_replay_command;

double cli_now_us(void);

/* bench-sim's per-rank report, "counts NAME:c0,...,cN-1,wall_us ... seam=S"
 * (bench_report.c): out gets nsteps rows of ncounts counts and the wall
 * time, per operation (every column of a repeated step divided by reps).
 * Returns 0, or -1 when msg is not such a report. */
int cli_bench_parse(const char *msg, const char *const *names, const int *repeated,
                    size_t nsteps, int ncounts, int reps, double *out, int *seam);

/* The shim choices of --shim, and the default: the argument, else
 * MORI_SYMM_SHIM, else "auto" where the shim finds a GPU runtime it
 * accepts (mori_shim_runtime_find, asked in a child), else "sim": without
 * a word where none is found, with one WARN line on stderr naming each
 * refusal (a HIP older than 6.2: its file, its version, the minimum; a
 * MORI_SYMM_HIP_LIB that does not load). */
extern const char *const cli_shims[];
const char *cli_default_shim(const char *arg);
/* What the emulator's outputs say of it: the shim as a header names it
 * ("sim (the emulator, no GPU)"), and the note a closing line ends with
 * (" on the emulator (shim sim, no GPU)"; "" for a GPU shim). */
int cli_is_emulator(const char *shim);
const char *cli_shim_label(const char *shim);
const char *cli_emulator_note(const char *shim);

/* ---- forked ranks (ranks.c) ---- */

/* What demo and cycles share, first in their argument structs. */
typedef struct cli_ranks {
  int ranks;
  int per_device; /* 0: not given */
  const char *shim;
  int devices;    /* filled by cli_ranks_prepare */
} cli_ranks;

/* The option rows of a cli_ranks member `r` of type T. */
#define CLI_RANKS_OPTIONS(T, default_ranks)                                                   \
  {"--ranks", CLI_INT, offsetof(T, r.ranks), 1, 1024, NULL, "N",                              \
   "ranks to fork (default " #default_ranks "; at most devices x ranks per device)"},         \
  {"--ranks-per-device", CLI_INT, offsetof(T, r.per_device), 1, 64, NULL, "N",                \
   "ranks that may share one device; rank r uses device r mod devices (default 1, or any "   \
   "with MORI_SYMM_ALLOW_OVERLAPPING_DEVICES=1)"},                                       \
  {"--shim", CLI_CHOICE, offsetof(T, r.shim), 0, 0, cli_shims, "SHIM",                        \
   "GPU shim backend (default MORI_SYMM_SHIM, else auto where a GPU runtime is found and "   \
   "accepted, else sim: a refused one is named on stderr)"}

/* Resolves the shim, counts its devices (in a forked child: a GPU runtime
 * must not come up before the ranks fork) and checks --ranks against
 * devices x ranks per device.  Ranks beyond the device count share
 * devices: then overlapping devices are allowed for them.
 * Returns 0, or the command's exit status after printing why. */
int cli_ranks_prepare(const cli_command *cmd, cli_ranks *r);

/* Prints the ranks' lines: a succeeded rank's report on stdout; failures on
 * stderr, each distinct message once with the ranks that gave it, the
 * first as "<command> FAILED: ...".  Returns the number that failed. */
int cli_ranks_report(const cli_command *cmd, int ranks, mori_rank_result *res, int deadline_ms);

#endif
