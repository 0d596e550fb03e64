/*
 * env_table.c - the one table of the environment variables mori-symm's
 * code reads (env_table.h), and its three printings: the help's text, the
 * markdown of docs/environment.md and the names tests/env checks the code
 * against.  A variable the code starts reading gets its row here, or
 * tests/env fails naming the file and line that reads it.
 */
#include "env_table.h"

#include <string.h>

#include "args.h"
#include "mori/runtime_search.h"

const char *const mori_env_section_titles[MORI_ENV__SECTIONS] = {
    [MORI_ENV_LIBRARY] = "The library (libmori_core.so, in every program that uses it)",
    [MORI_ENV_SHIM] = "The GPU shim (libmori_hip_shim.so)",
    [MORI_ENV_SIM] = "The sim backend (MORI_SYMM_SHIM=sim: no GPU)",
    [MORI_ENV_FAULT] = "Fault injection (libmori_faultinject.so, mori-fi)",
    [MORI_ENV_TORCH] = "torch: the adapter, and torch's own variables the project sets",
    [MORI_ENV_TESTS] = "The test suite, the scripts and the GPU suite",
};

const mori_env_var mori_env_vars[] = {
    /* ---- the library ---- */
    {"MORI_SYMM_TIMEOUT_MS", MORI_ENV_LIBRARY, "1..86400000", "30000",
     "how long (ms) a rendezvous waits for its peers and a signal for its peer, unless the API "
     "set a timeout (mori_symm_set_timeout_ms); digits only, another value fails the "
     "rendezvous naming it",
     "libmori_core.so"},
    {"MORI_SYMM_DEBUG", MORI_ENV_LIBRARY, "WARN|INFO|TRACE", "off",
     "log to stderr, each line naming the rank and window (or the device); another value is "
     "reported once and logging stays off",
     "libmori_core.so"},
    {"MORI_SYMM_TEARDOWN", MORI_ENV_LIBRARY, "0", "teardown on",
     "0 leaves every window mapped at exit instead of tearing it down from the exit hook; a "
     "value other than 0 or 1 fails the rendezvous naming it",
     "libmori_core.so; mori_symm (Python) at exit"},
    {"MORI_SYMM_ALLOW_OVERLAPPING_DEVICES", MORI_ENV_LIBRARY, "1", "refused",
     "1 lets several ranks of a group use one device (torch's "
     "TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES, outside torch); read at every rendezvous; a "
     "value other than 0 or 1 fails the rendezvous naming it",
     "libmori_core.so"},
    {"MORI_SYMM_KEEP_WARM", MORI_ENV_LIBRARY, "0|1", "0 (the torch adapter: 1)",
     "1 keeps a freed block of at most 4 MiB (one per device) for the next allocation of its "
     "size and, after a device's last window goes, its device-table chunk and the last "
     "exported fd of such a block, for the next rendezvous (mori_symm_keep_warm; "
     "mori_symm_release_all and the exit give them back); unless the API set it; read at each "
     "decision; a value other than 0 or 1 fails the rendezvous naming it",
     "libmori_core.so; the torch adapter sets 1 unless it is set"},
    {"MORI_SYMM_SOCKET_DIR", MORI_ENV_LIBRARY, "DIR", "XDG_RUNTIME_DIR, else TMPDIR, else /tmp",
     "where the fd channel makes its sockets; it must pass the trusted-directory check "
     "(docs/security.md); the launcher sets it per launch",
     "libmori_core.so; set by the launcher"},
    {"MORI_SYMM_JOB_SECRET", MORI_ENV_LIBRARY, "HEX", "none (the launcher draws one per launch)",
     "32 to 128 hex digits the ranks of one job share out of band, never written to the "
     "store: every store entry a rendezvous writes is sealed with an HMAC-SHA256 under it and "
     "every entry it reads must carry the job's seal, so that a store others can write cannot "
     "splice two jobs (docs/security.md); the same value on every rank, e.g. from `openssl "
     "rand -hex 32`; malformed, or set in a build without libcrypto, fails the rendezvous "
     "(the value is never shown)",
     "libmori_core.so; set by the launcher"},
    {"MORI_SYMM_BARRIER", MORI_ENV_LIBRARY, "flat|dissemination", "flat",
     "the shape of a window barrier's signals; another value fails the barrier",
     "libmori_core.so"},
    {"MORI_SYMM_SIGNAL_ENGINE", MORI_ENV_LIBRARY, "auto|memop|kernel", "auto",
     "what barrier, put_signal and wait_signal run as: stream memory operations or one small "
     "kernel per call; auto chooses per window and form (memops where a peer shares the "
     "device); another value fails the signal call",
     "libmori_core.so"},
    {"MORI_SYMM_MEMOP_BATCH", MORI_ENV_LIBRARY, "0", "batched",
     "0 issues one runtime call per stream memory operation instead of one batch, to measure "
     "the difference; a value other than 0 or 1 fails the rendezvous naming it",
     "libmori_core.so"},
    {"MORI_SYMM_REPLACEMENT", MORI_ENV_LIBRARY, "0|1", "0",
     "1 in a process started in place of a dead rank: its rendezvous of a group's windows the "
     "survivors heal (mori_window_heal) join the heal instead of making a new window "
     "(docs/recovery.md); mori_launch sets it in a rank it restarts; a value other than 0 or 1 "
     "fails the rendezvous naming it",
     "libmori_core.so"},
    {"MORI_SYMM_HOST_ID", MORI_ENV_LIBRARY, "HEX32|UUID", "the boot id",
     "the host identity a rank publishes (tests pretend ranks are on other hosts with it): 32 "
     "hex digits of either case or a UUID as the boot id is written; another value fails the "
     "rendezvous naming it",
     "libmori_core.so"},
    /* ---- the shim ---- */
    {"MORI_SYMM_SHIM", MORI_ENV_SHIM, "auto|hip|cuda|sim", "auto",
     "the shim backend: auto binds the GPU runtime found; unset, the tools use auto where "
     "the shim finds a runtime it accepts, else sim (with one WARN line naming a runtime "
     "found and refused); the Python package picks the runtime torch was built for",
     "libmori_hip_shim.so, mori-symm, mori-fi, mori_symm (Python)"},
    {"MORI_SYMM_HIP_LIB", MORI_ENV_SHIM, "PATH",
     "an already loaded libamdhip64, else the first of " MORI_HIP_SONAMES(MORI_SONAME_TEXT)
     "that loads (mori/runtime_search.h)",
     "the HIP runtime library the hip backend loads",
     "libmori_hip_shim.so"},
    {"MORI_SYMM_CUDA_LIB", MORI_ENV_SHIM, "PATH", "libcuda.so.1",
     "the CUDA driver library the cuda backend loads",
     "libmori_hip_shim.so"},
    {"MORI_SYMM_IMEX_CHANNELS", MORI_ENV_SHIM, "PATH", "/dev/nvidia-caps-imex-channels",
     "where the cuda backend looks for an IMEX channel node (channelN) this process may read "
     "and write before it asks the driver for a fabric handle; with none, it refuses as the "
     "driver would (CUDA_ERROR_NOT_PERMITTED) without asking",
     "libmori_hip_shim.so"},
    {"MORI_SHIM_REGISTRY_REPORT", MORI_ENV_SHIM, "1", "off",
     "print the shim's resource registry (every live runtime resource) at exit; another "
     "value than 0 or 1 is said once, named",
     "libmori_hip_shim.so"},
    {"MORI_SHIM_LEDGER_REPORT", MORI_ENV_SHIM, "1", "off",
     "the registry report's first name, still read",
     "libmori_hip_shim.so"},
    /* ---- the sim ---- */
    {"MORI_SIM_ARCH", MORI_ENV_SIM, "gfx942|gfx950|gfx1250|gfx1250-rocm7.1", "gfx950",
     "the capability profile the sim reproduces (which handle types work; docs/quirks.md)",
     "libmori_hip_shim.so (sim); mori-symm replay and mori-fi set it"},
    {"MORI_SIM_QUIRKS", MORI_ENV_SIM, "LIST|all|none", "none",
     "known ROCm defects the sim reproduces, comma separated (docs/quirks.md)",
     "libmori_hip_shim.so (sim)"},
    {"MORI_SIM_DEVICES", MORI_ENV_SIM, "1..1024", "8",
     "how many devices the sim reports",
     "libmori_hip_shim.so (sim); bench-sim and replay set it"},
    {"MORI_SIM_STREAMS", MORI_ENV_SIM, "sync|async", "sync",
     "sync runs stream work in the call; async runs it on a thread per stream after the call "
     "returns, as a GPU queue does",
     "libmori_hip_shim.so (sim)"},
    {"MORI_SIM_WAIT_TIMEOUT_MS", MORI_ENV_SIM, "0..86400000", "30000",
     "how long a stream wait of the sim in sync mode waits for its value",
     "libmori_hip_shim.so (sim); replay sets 0"},
    {"MORI_SIM_DEVICE_BYTES", MORI_ENV_SIM, "BYTES", "68719476736 (64 GiB)",
     "the device memory the sim's hipMemGetInfo reports: a size as the help writes it (8G, "
     "\"16 GiB\"), 1 MiB to 1 PiB; another value fails the sim's bring-up naming it",
     "libmori_hip_shim.so (sim)"},
    /* ---- fault injection ---- */
    {"MORI_FI", MORI_ENV_FAULT, "SCHEDULE", "no faults",
     "the faults to inject, e.g. 'rank=1 hipMemMap#3=hipErrorOutOfMemory', and count= / "
     "record= (docs/fault-injection.md); set without libmori_faultinject.so preloaded, "
     "libmori_hip_shim.so warns once that nothing will be injected",
     "libmori_faultinject.so; libmori_hip_shim.so warns"},
    {"MORI_FI_RECORD", MORI_ENV_FAULT, "PATH", "no trace",
     "write the shim trace of the run there (as MORI_FI's record=), as PATH.RANK: a free-form "
     "path; a symbolic link, FIFO, another user's file or a hard link there is refused, "
     "named",
     "libmori_faultinject.so"},
    {"MORI_RANK", MORI_ENV_FAULT, "0..1048575", "none",
     "the rank a process is, which MORI_FI's rank= rules match; the launcher sets it; another "
     "value is said on stderr, naming it, and the process has no rank",
     "libmori_faultinject.so; set by the launcher"},
    {"MORI_LAUNCH_LIFE", MORI_ENV_FAULT, "0, 1, ...", "0 (1 or more where MORI_SYMM_REPLACEMENT=1)",
     "the rank's life: 0 in its first process, n in the process started after its n-th death; "
     "MORI_FI's life=N rules fire in that life alone; the launcher sets it; another value is "
     "said on stderr, naming it, and no life= rule fires",
     "libmori_faultinject.so; set by the launcher"},
    {"MORI_FI_PRELOAD", MORI_ENV_FAULT, "PATH", "libmori_faultinject.so beside libmori_core.so",
     "the fault shim mori-fi preloads into the runs of a sweep",
     "mori-fi"},
    {"MORI_FI_LEDGER_REPORT", MORI_ENV_FAULT, "any", "off",
     "a scenario run that leaks prints the shim's registry of what it left",
     "mori-fi run-scenario"},
    {"MORI_BENCH_SIM_PRELOADED", MORI_ENV_FAULT, "1", "unset",
     "set by bench-sim when it re-executes itself under the counting fault shim, so that it "
     "does so once",
     "mori-symm bench-sim"},
    /* ---- torch ---- */
    {"TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES", MORI_ENV_TORCH, "1", "refused",
     "torch's: several ranks of a group may use one device; the adapter reads it at every new "
     "rendezvous, as torch's backend does",
     "the torch adapter (and torch)"},
    {"TORCH_SYMM_MEM_DISABLE_MULTICAST", MORI_ENV_TORCH, "1", "torch's",
     "torch's: multicast off in its backend; the GPU suite, bench and tests set it so both "
     "backends run the same ops",
     "torch; set by tests/gpu, bench/, torch/tests"},
    {"TORCH_SYMMMEM", MORI_ENV_TORCH, "CUDA|NVSHMEM|NCCL", "torch's",
     "torch's backend choice by environment; it rejects MORI, and the conformance suite "
     "removes it from its workers' environment",
     "torch; removed by torch/tests/conformance"},
    {"TORCH_SHOW_CPP_STACKTRACES", MORI_ENV_TORCH, "1", "torch's",
     "torch's: C++ stacks in its errors; the conformance suite's workers run with it",
     "torch; set by torch/tests/conformance"},
    {"TORCH_DISABLE_ADDR2LINE", MORI_ENV_TORCH, "1", "torch's",
     "torch's: symbolize stacks without addr2line; the conformance suite's workers run with it",
     "torch; set by torch/tests/conformance"},
    {"TORCH_CUDA_ARCH_LIST", MORI_ENV_TORCH, "LIST", "torch's",
     "torch's: the GPU architectures its extension builds compile for (the examples' inline "
     "kernel)",
     "torch; set by tests/gpu/examples.sh"},
    {"TORCH_EXTENSIONS_DIR", MORI_ENV_TORCH, "DIR", "torch's",
     "torch's: where it caches built extensions (the examples' inline kernel)",
     "torch; set by tests/gpu/examples.sh"},
    /* ---- tests and scripts ---- */
    {"MORI_KILL_LOOP_SEED", MORI_ENV_TESTS, "N", "drawn, and printed",
     "the seed of the kill loops' choices (which rank dies, and where), to replay a run",
     "tests/sim/test_kill_loop.c"},
    {"MORI_KILL_LOOP_ITERATIONS", MORI_ENV_TESTS, "N", "100",
     "how many kill-and-heal iterations the kill loops run",
     "tests/sim/test_kill_loop.c"},
    {"MORI_TEST_BUILD_DIR", MORI_ENV_TESTS, "DIR", "build",
     "the build tree scripts/test.sh builds and tests",
     "scripts/test.sh"},
    {"MORI_TEST_NO_BUILD", MORI_ENV_TESTS, "1", "build first",
     "scripts/test.sh runs ctest on what is built, without building",
     "scripts/test.sh"},
    {"MORI_FUZZ_SECONDS", MORI_ENV_TESTS, "S", "20",
     "the length of each libFuzzer run of fuzz/ci.sh",
     "fuzz/ci.sh"},
    {"MORI_AFL_SECONDS", MORI_ENV_TESTS, "S", "10",
     "the length of each AFL++ run of fuzz/ci.sh",
     "fuzz/ci.sh"},
    {"MORI_AFL_BUILD", MORI_ENV_TESTS, "DIR", "build-afl",
     "the AFL++ build tree fuzz/run-afl.sh uses",
     "fuzz/run-afl.sh"},
    {"MORI_AFL_OUT", MORI_ENV_TESTS, "DIR", "BUILD/afl/TARGET",
     "where fuzz/run-afl.sh writes its findings",
     "fuzz/run-afl.sh"},
    {"MORI_GPU_PARTS", MORI_ENV_TESTS, "LIST", "c bench scale torch kill heal examples compare",
     "the parts of tests/gpu/run.sh to run",
     "tests/gpu/run.sh"},
    {"MORI_HEAL_RANKS", MORI_ENV_TESTS, "LIST", "2,4,8",
     "the world sizes tests/gpu/run.sh's heal part times mori-heal-bench at",
     "tests/gpu/run.sh"},
    {"MORI_HEAL_REPS", MORI_ENV_TESTS, "N", "5",
     "mori-heal-bench's repetitions in tests/gpu/run.sh's heal part",
     "tests/gpu/run.sh"},
    {"MORI_GPU_SHIM", MORI_ENV_TESTS, "cuda|hip", "cuda",
     "the shim backend of tests/gpu/run.sh's C parts",
     "tests/gpu/run.sh"},
    {"MORI_CONFORMANCE_OUT", MORI_ENV_TESTS, "DIR", "a new temporary directory",
     "where the conformance suite's pytest run writes its worlds' results",
     "torch/tests/conformance"},
    {"MORI_CONFORMANCE_RESULTS", MORI_ENV_TESTS, "PATH", "run the worlds",
     "a results.json to judge instead of running the worlds",
     "torch/tests/conformance"},
    {"MORI_CONFORMANCE_DEADLINE", MORI_ENV_TESTS, "S", "480",
     "the conformance run's deadline",
     "torch/tests/conformance"},
    {"MORI_CONFORMANCE_CHECKS", MORI_ENV_TESTS, "MODULE", "checks",
     "the module of checks the conformance worlds run (the harness's own tests use another)",
     "torch/tests/conformance"},
    {"MORI_STANDIN_TRACE", MORI_ENV_TESTS, "1", "off",
     "the stand-in runtimes of tests/hipstub print the sim's detail behind each error",
     "tests/hipstub"},
    {"MORI_STANDIN_HIP_VERSION", MORI_ENV_TESTS, "N|error|init:N", "the stand-in's",
     "the runtime version the stand-in libamdhip64 reports (error: its hipRuntimeGetVersion "
     "fails; init:N: it fails until hipInit, then reports N)",
     "tests/hipstub"},
    {"MORI_STANDIN_CUDA_VERSION", MORI_ENV_TESTS, "N", "the stand-in's",
     "the driver version the stand-in libcuda reports",
     "tests/hipstub"},
    {"MORI_STANDIN_CUDA_IMEX", MORI_ENV_TESTS, "1", "no IMEX",
     "the stand-in libcuda behaves as if an IMEX domain allowed fabric handles",
     "tests/hipstub"},
    {"MORI_STANDIN_HIPRTC_FAIL", MORI_ENV_TESTS, "1", "compiles",
     "the stand-in hiprtc refuses every program, with a log, as a runtime without a device "
     "compiler would",
     "tests/hipstub"},
    {"MORI_STUB_LOG", MORI_ENV_TESTS, "PATH", "none",
     "where the stand-in cmake and ctest of the test.sh selftest log what they were asked",
     "tests/selftest"},
    {"MORI_TEST_LOAD_HIP", MORI_ENV_TESTS, "PATH", "none",
     "a runtime test_bringup loads first, as torch does",
     "tests/hipstub"},
    {"MORI_TEST_EXPECT_HIP", MORI_ENV_TESTS, "PATH", "required",
     "the runtime file test_bringup and test_real_runtime expect the hip backend to bind "
     "(or, for Debian's HIP 5.2.3, to judge and refuse)",
     "tests/hipstub, tests/rocm"},
    {"MORI_TEST_EXPECT_MAPPED", MORI_ENV_TESTS, "N", "required",
     "how many libamdhip64 files test_real_runtime may find in /proc/self/maps after the "
     "bring-up, each the expected one",
     "tests/rocm"},
    {"MORI_TEST_HIP_PARTIAL", MORI_ENV_TESTS, "PATH", "required",
     "a runtime missing symbols, for test_missing",
     "tests/hipstub"},
    {"MORI_TEST_CUDA_STUB", MORI_ENV_TESTS, "PATH", "required",
     "a driver stub missing symbols, for test_missing",
     "tests/hipstub"},
    {0},
};

/* ---- printing ---- */

void mori_env_print_text(FILE *out) {
  fprintf(out, "The environment variables mori-symm reads (docs/environment.md has the same "
               "table).\n");
  for (int s = 0; s < MORI_ENV__SECTIONS; s++) {
    fprintf(out, "\n%s:\n", mori_env_section_titles[s]);
    for (const mori_env_var *v = mori_env_vars; v->name; v++) {
      if ((int)v->section != s) continue;
      fprintf(out, "  %s=%s\n      ", v->name, v->values);
      char text[1024];
      snprintf(text, sizeof text, "%s. Unset: %s. Read by %s.", v->meaning, v->fallback,
               v->readers);
      cli_wrap(out, text, 6);
    }
  }
}

/* a cell of a markdown table: '|' would end it */
static void cell(FILE *out, const char *text) {
  for (const char *c = text; *c; c++) {
    if (*c == '|') fputc('\\', out);
    fputc(*c, out);
  }
}

void mori_env_print_markdown(FILE *out) {
  for (int s = 0; s < MORI_ENV__SECTIONS; s++) {
    fprintf(out, "%s### %s\n\n| variable | values | unset | what it does | read by |\n"
                 "| --- | --- | --- | --- | --- |\n",
            s ? "\n" : "", mori_env_section_titles[s]);
    for (const mori_env_var *v = mori_env_vars; v->name; v++) {
      if ((int)v->section != s) continue;
      fprintf(out, "| `%s` | `", v->name);
      cell(out, v->values);
      fprintf(out, "` | ");
      cell(out, v->fallback);
      fprintf(out, " | ");
      cell(out, v->meaning);
      fprintf(out, " | ");
      cell(out, v->readers);
      fprintf(out, " |\n");
    }
  }
}

void mori_env_print_names(FILE *out) {
  for (const mori_env_var *v = mori_env_vars; v->name; v++)
    fprintf(out, "%s %d\n", v->name, (int)v->section);
}

const cli_topic mori_env_help_topic = {
    .name = "env",
    .summary = "the environment variables mori-symm reads: values, defaults, who reads them",
    .print = mori_env_print_text,
};
