/*
 * driver.c - the driver that walks a machine through its steps (s2n's
 * handshake loop over fsm/'s table), timing each step for the log lines
 * that explain where an allocation's or a rendezvous's time went.
 */
#include "alloc.h"

/* s2n's handshake loop: the table says which step leaves the current
 * state; the driver runs it and fires its event, which checks the new
 * state's invariants.  The ledger's room is reserved first, so a step's
 * acquisition can always be recorded: an allocation failure can only
 * come before anything was acquired, or from a step, never between a
 * step's acquisition and its record. */
int mori__advance(mori_fsm *m, const mori__step steps[MORI_EV__COUNT], void *ctx,
                  int until, mori__step_times *t) {
  int rc = 0, ev = -1;
  if (t != NULL) t->n = 0;
  if (mori_fsm_reserve(m, mori_fsm_capacity(m)) != 0) return mori__nomem("ledger: %s", m->why);
  while (rc == 0 && m->state.id != until && (ev = mori_fsm_forward(m->kind, m->state.id)) >= 0) {
    const char *name = mori_wevent_name((mori_wevent)ev);
    MORI_LOG(MORI_LOG_TRACE, m->kind == MORI_FSM_WINDOW ? m->rank : -1, -1, "step %s from %s",
             name, mori_fsm_state_name(m->state.id));
    double t0 = t != NULL ? mori__log_clock_us() : 0;
    rc = steps[ev] ? steps[ev](ctx) : mori__error(MORI_ESTATE, "no step for %s", name);
    if (t != NULL && t->n < MORI_EV__COUNT) {
      t->step[t->n].event = (mori_wevent)ev;
      t->step[t->n++].us = mori__log_clock_us() - t0;
    }
    if (rc == 0 && mori_fsm_fire(m, (mori_wevent)ev) != 0)
      rc = mori__error(MORI_ESTATE, "%s", m->why);
    if (rc != 0) mori__error_prefix("step %s: ", name);
  }
  return rc;
}

int mori__drive(mori_fsm *m, const mori__step steps[MORI_EV__COUNT], void *ctx,
                int until, int (*on_fail)(void *ctx, int rc), mori__step_times *t) {
  int rc = mori__advance(m, steps, ctx, until, t);
  if (rc != 0) {
    if (on_fail != NULL) rc = on_fail(ctx, rc);
    (void)mori__unwind(m, 1);
  }
  return rc;
}

void mori__step_times_format(const mori__step_times *t, char *out, size_t n) {
  size_t len = 0;
  out[0] = '\0';
  for (int i = 0; i < t->n && len < n; i++)
    len += (size_t)snprintf(out + len, n - len, "%s%s %.0f", i ? " " : "",
                            mori_wevent_name(t->step[i].event), t->step[i].us);
}
