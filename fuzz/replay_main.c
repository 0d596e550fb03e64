/*
 * replay_main.c - the regression runner: a main() that feeds every file of
 * the given directories (and any files named) through a harness's
 * LLVMFuzzerTestOneInput, so that the default build replays each corpus and
 * every saved crash without a fuzzing engine.
 *
 *   mori_fuzz_<target>_replay DIR|FILE... [--optional DIR...]
 *
 * A required directory must hold at least one input (an empty corpus would
 * make the test pass vacuously); an --optional one (saved crashes) may be
 * missing.  Each input is read into a buffer of exactly its size, so a
 * read past the end is visible to valgrind and ASan.
 */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The input being replayed, for the crash handler to name. */
static const char *current;

static void on_crash(int sig) {
  static const char prefix[] = "replay: crashed on input ";
  if (current) {
    (void)!write(2, prefix, sizeof prefix - 1);
    (void)!write(2, current, strlen(current));
    (void)!write(2, "\n", 1);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return fprintf(stderr, "replay: fopen %s: %s\n", path, strerror(errno)), -1;
  struct stat st;
  if (fstat(fileno(f), &st) != 0) return fclose(f), fprintf(stderr, "replay: fstat %s\n", path), -1;
  size_t size = (size_t)st.st_size;
  uint8_t *buf = malloc(size ? size : 1);
  int ok = buf && fread(buf, 1, size, f) == size;
  fclose(f);
  if (!ok) return free(buf), fprintf(stderr, "replay: reading %s failed\n", path), -1;
  current = path;
  LLVMFuzzerTestOneInput(buf, size);
  current = NULL;
  free(buf);
  return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

/* Hidden files (editor and engine droppings) are not inputs. */
static int visible(const struct dirent *e) { return e->d_name[0] != '.'; }

/* Replays every regular file of dir in name order; returns how many, or -1. */
static long replay_dir(const char *dir) {
  struct dirent **names;
  int n = scandir(dir, &names, visible, by_name);
  if (n < 0) return -1;
  long done = 0, failed = 0;
  for (int i = 0; i < n; i++) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
    free(names[i]);
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (replay_file(path) != 0)
      failed++;
    else
      done++;
  }
  free(names);
  return failed ? -1 : done;
}

int main(int argc, char **argv) {
  signal(SIGABRT, on_crash);
  signal(SIGSEGV, on_crash);
  signal(SIGBUS, on_crash);
  signal(SIGFPE, on_crash);
  long total = 0;
  int optional = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--optional") == 0) {
      optional = 1;
      continue;
    }
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      if (optional && errno == ENOENT) continue;
      fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
      return 1;
    }
    long n = S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]) == 0 ? 1 : -1;
    if (n < 0 || (n == 0 && !optional)) {
      fprintf(stderr, "replay: %s: %s\n", argv[i], n < 0 ? "unreadable" : "no inputs");
      return 1;
    }
    printf("replay: %ld inputs from %s\n", n, argv[i]);
    total += n;
  }
  printf("replay: %ld inputs, all passed\n", total);
  return total > 0 ? 0 : 1;
}
