/*
 * test_sigkill.c - a rank killed with SIGKILL at each step of a rendezvous
 * (the first store operation of each kind, which bracket the channel's
 * bind, the fd exchange, the import and the mapping): the survivor fails
 * within its timeout and leaks nothing, a rerun on the same store
 * succeeds, and that rerun removes what the killed rank left in the socket
 * directory (labels: security).
 */
#include "sec_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WORLD = 2, TIMEOUT_MS = 300 };

/* The steps of a rendezvous as the store sees them, in order: the first
 * operation of each kind on each kind of key.  Between them lie the
 * channel's bind (before the join), the fd exchange and import (between
 * reading the requests and setting "mapped") and the mapping. */
static const struct step {
  char on;
  const char *key;
} steps[] = {
    {'s', "/join/"},        /* a member announces itself */
    {'g', "/join/"},        /* the leader reads a join */
    {'s', "/incarnation/"}, /* the leader answers it */
    {'g', "/incarnation/"}, /* the member reads the answer */
    {'s', "/req/"},         /* the request is published (the socket is bound) */
    {'g', "/req/"},         /* a peer's request is read: the exchange follows */
    {'s', "/mapped/"},      /* every handle imported and mapped */
    {'g', "/mapped/"},      /* waiting for the peer's mapping */
    {'g', "/abort/"},       /* looking for a peer's abort while waiting */
};

static void kill_at_every_step(int victim, int in_band) {
  char *dir = sec_tmpdir("kill");
  assert_non_null(dir);
  char sockets[512];
  snprintf(sockets, sizeof sockets, "%s/sockets", dir);
  double worst_ms = 0;
  int hit = 0;
  for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
    mori_rank_result res[WORLD];
    sec_plan plan = {.timeout_ms = TIMEOUT_MS, .in_band = in_band};
    plan.rank[victim].kill_at_key = steps[k].key;
    plan.rank[victim].kill_on = steps[k].on;
    sec_launch(dir, WORLD, &plan, res);
    if (res[victim].signal != 9) { /* a step this rank does not take */
      for (int r = 0; r < WORLD; r++)
        if (sec_num(res[r].msg, "rc") != 0)
          fail_msg("step %c%s not taken by rank %d, yet rank %d failed: %s", steps[k].on,
                   steps[k].key, victim, r, res[r].msg);
      continue;
    }
    hit++;
    int survivor = 1 - victim;
    const char *m = res[survivor].msg;
    print_message("rank %d killed at %c%s: rank %d after %.0f ms: %s\n", victim, steps[k].on,
                  steps[k].key, survivor, res[survivor].wall_ms, sec_err(m));
    if (sec_num(m, "rc") == 0) fail_msg("step %c%s: rank %d succeeded without its peer: %s",
                                         steps[k].on, steps[k].key, survivor, m);
    if (sec_num(m, "fds") != 0 || sec_num(m, "leaks") != 0 || sec_num(m, "release") != 0)
      fail_msg("step %c%s: rank %d left something behind: %s", steps[k].on, steps[k].key,
               survivor, m);
    if (res[survivor].wall_ms > worst_ms) worst_ms = res[survivor].wall_ms;
    sec_plan again = {.timeout_ms = 5000, .in_band = in_band};
    sec_launch(dir, WORLD, &again, res);
    for (int r = 0; r < WORLD; r++)
      if (sec_num(res[r].msg, "rc") != 0 || sec_num(res[r].msg, "fds") != 0)
        fail_msg("rerun after rank %d was killed at %c%s: rank %d: %s", victim, steps[k].on,
                 steps[k].key, r, res[r].msg);
    int left = sec_count_entries(sockets);
    if (left != 0)
      fail_msg("after the rerun (kill at %c%s), %s holds %d entries", steps[k].on, steps[k].key,
               sockets, left);
  }
  print_message("rank %d killed at each of %d steps (%s): the survivor failed within %.0f ms at "
                "worst (rendezvous timeout %d ms, a barrier's 2000 ms)\n",
                victim, hit, in_band ? "incarnation agreed in-band" : "the launcher's id", worst_ms,
                TIMEOUT_MS);
  /* every rank takes these: s/req, g/req, s/mapped, g/mapped, and in-band
   * two of the join's; the abort check only when it has to wait */
  assert_true(hit >= (in_band ? 6 : 4));
  sec_remove_tree(dir);
  free(dir);
}

static void the_leader_killed_at_each_step_fails_its_peer_and_a_rerun_succeeds(void **s) {
  (void)s;
  kill_at_every_step(0, 0);
}

static void a_member_killed_at_each_step_fails_its_peer_and_a_rerun_succeeds(void **s) {
  (void)s;
  kill_at_every_step(1, 0);
}

static void the_leader_killed_at_each_step_of_an_in_band_agreement(void **s) {
  (void)s;
  kill_at_every_step(0, 1);
}

static void a_member_killed_at_each_step_of_an_in_band_agreement(void **s) {
  (void)s;
  kill_at_every_step(1, 1);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_leader_killed_at_each_step_fails_its_peer_and_a_rerun_succeeds),
      cmocka_unit_test(a_member_killed_at_each_step_fails_its_peer_and_a_rerun_succeeds),
      cmocka_unit_test(the_leader_killed_at_each_step_of_an_in_band_agreement),
      cmocka_unit_test(a_member_killed_at_each_step_of_an_in_band_agreement),
  };
  return mori_run_tests(argc, argv, tests);
}
