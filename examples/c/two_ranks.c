/*
 * two_ranks.c - mori-symm from C, whole: two ranks (forked processes) each
 * allocate a symmetric buffer, rendezvous over a file store, write a
 * greeting into the peer's slot, meet at a barrier, read back what the peer
 * wrote into their own buffer, and free.  The public headers only; data
 * moves with mori_symm_memcpy, which works on every shim backend.
 *
 *   cc two_ranks.c $(pkg-config --cflags --libs mori-symm) -o two_ranks
 *   MORI_SYMM_SHIM=sim ./two_ranks        # the emulator: no GPU needed
 *
 * Rank r uses device r (the sim has 8; on a GPU host with one device set
 * MORI_SYMM_ALLOW_OVERLAPPING_DEVICES=1).
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mori/symm.h>

#define RANKS 2
#define BUFFER_BYTES (1u << 20)
#define TIMEOUT_MS 30000

/* One rank, in its own process: 0 on success, else 1 after saying why. */
static int run_rank(int rank, const char *store_dir) {
  mori_store *store = NULL;
  mori_window *window = NULL;
  void *buffer = NULL;
  char sent[64], got[64];
  const char *failed = NULL;
  int peer = (rank + 1) % RANKS;

  if (mori_file_store_open(store_dir, &store) != 0) failed = "file store";
  else if (mori_symm_alloc(BUFFER_BYTES, rank, &buffer) != 0) failed = "alloc";
  else if (mori_symm_rendezvous(buffer, "two_ranks", rank, RANKS, store, &window, NULL) != 0)
    failed = "rendezvous";
  if (failed == NULL) {
    /* The peer's slot is a device address: a copy reaches it, a store
     * through the pointer from the host would not. */
    void *peer_slot = mori_window_buffer_ptrs(window)[peer];
    snprintf(sent, sizeof sent, "hello from rank %d", rank);
    if (mori_symm_memcpy(peer_slot, sent, sizeof sent) != 0) failed = "write the peer's slot";
    else if (mori_window_barrier(window, 0, NULL, TIMEOUT_MS) != 0) failed = "barrier";
    else if (mori_symm_synchronize(NULL) != 0) failed = "synchronize";
    else if (mori_symm_memcpy(got, buffer, sizeof got) != 0) failed = "read back";
  }
  if (failed != NULL) {
    fprintf(stderr, "rank %d: %s: %s\n", rank, failed, mori_last_error());
    return 1;
  }
  got[sizeof got - 1] = '\0';
  snprintf(sent, sizeof sent, "hello from rank %d", peer);
  printf("rank %d (shim %s, device %d): my slot holds \"%s\"\n", rank, mori_shim_backend(),
         mori_window_device(window), got);
  if (strcmp(got, sent) != 0) {
    fprintf(stderr, "rank %d: expected \"%s\"\n", rank, sent);
    return 1;
  }
  /* Freeing tears the window down; the store goes after every rank's last
   * use of it, which the barrier above ensured. */
  if (mori_symm_free(buffer) != 0) {
    fprintf(stderr, "rank %d: free: %s\n", rank, mori_last_error());
    return 1;
  }
  store->destroy(store);
  long live = mori_shim_registry_total();
  if (live != 0) {
    fprintf(stderr, "rank %d: %ld runtime resources still live after free\n", rank, live);
    return 1;
  }
  return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

int main(void) {
  char store_dir[] = "/tmp/mori-two-ranks-XXXXXX"; /* 0700, ours: a trusted directory */
  pid_t pids[RANKS];
  int failures = 0;
  if (mkdtemp(store_dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  printf("two_ranks: mori-symm %s, %d ranks, store %s\n", mori_symm_version(), RANKS, store_dir);
  fflush(stdout);
  /* The GPU runtime must come up in each rank, after the fork. */
  for (int r = 0; r < RANKS; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      int rc = run_rank(r, store_dir);
      fflush(NULL);
      _exit(rc);
    }
    if (pids[r] < 0) {
      perror("fork");
      failures++;
    }
  }
  for (int r = 0; r < RANKS; r++) {
    int status = 0;
    if (pids[r] > 0 && (waitpid(pids[r], &status, 0) != pids[r] || !WIFEXITED(status) ||
                        WEXITSTATUS(status) != 0))
      failures++;
  }
  nftw(store_dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
  if (failures != 0) {
    fprintf(stderr, "two_ranks FAILED: %d rank(s)\n", failures);
    return 1;
  }
  printf("two_ranks ok: each rank read its peer's greeting from its own slot\n");
  return 0;
}
