/*
 * fsm_dot.c - the tables in words: the invariant line of each state, the
 * Graphviz diagram, and the markdown tables of steps, states, resource
 * kinds and lifecycles, every one drawn from fsm.h's lists
 * (docs/state-machine.md embeds them; tests compare).
 */
#include "fsm_internal.h"

#include <stdarg.h>
#include <string.h>

/* An appending snprintf that keeps counting past the end of buf. */
typedef struct text {
  char *buf;
  size_t cap, len;
} text;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void put(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = t->len < t->cap ? t->cap - t->len : 0;
  int n = vsnprintf(room ? t->buf + t->len : NULL, room, fmt, ap);
  va_end(ap);
  if (n > 0) t->len += (size_t)n;
}

static void put_bound(text *t, mori__bound b) {
  if (b.per_world == 0)
    put(t, "%d", b.plus);
  else if (b.per_world == 1 && b.plus == 0)
    put(t, "world_size");
  else if (b.per_world == 1)
    put(t, "world_size%+d", b.plus);
  else
    put(t, "%d*world_size%+d", b.per_world, b.plus);
}

static int is_const(mori__bound b, int c) { return b.per_world == 0 && b.plus == c; }

/* "1 physical handle, 0..1 exported fd", or "empty ledger": the kinds in
 * ledger order (by tier; a tier's kinds as numbered). */
static void put_counts(text *t, const mori__count held[MORI_RES__COUNT]) {
  const char *sep = "";
  int order[MORI_RES__COUNT], n = 0;
  for (unsigned tier = 0; n < MORI_RES__COUNT; tier++)
    for (int r = 0; r < MORI_RES__COUNT; r++)
      if (mori__res_infos[r].tier == tier) order[n++] = r;
  for (int i = 0; i < n; i++) {
    int r = order[i];
    mori__count c = held[r];
    if (is_const(c.hi, 0)) continue;
    put(t, "%s", sep);
    if (c.lo.per_world != c.hi.per_world || c.lo.plus != c.hi.plus) {
      put_bound(t, c.lo);
      put(t, "..");
    }
    put_bound(t, c.hi);
    put(t, " %s", is_const(c.hi, 1) ? mori__res_infos[r].singular : mori__res_infos[r].plural);
    sep = ", ";
  }
  if (*sep == '\0') put(t, "empty ledger");
}

int mori__fsm_describe(int s, char *buf, size_t n) {
  static const mori_fsm_kind kinds[] = {MORI_FSM_BLOCK, MORI_FSM_WINDOW};
  char part[2][256] = {"", ""};
  int held[2];
  for (int k = 0; k < 2; k++) {
    mori__count counts[MORI_RES__COUNT];
    held[k] = mori__fsm_ledger(kinds[k], s, counts) == 0;
    text t = {part[k], sizeof part[k], 0};
    if (held[k]) put_counts(&t, counts);
  }
  text out = {buf, n, 0};
  if (n > 0) buf[0] = '\0';
  if (held[0] && held[1] && strcmp(part[0], part[1]) == 0) {
    put(&out, "%s", part[0]);
    return (int)out.len;
  }
  const char *sep = "";
  for (int k = 0; k < 2; k++) {
    if (!held[k]) continue;
    put(&out, "%s%s: %s", sep, mori__fsm_kind_name(kinds[k]), part[k]);
    sep = "; ";
  }
  return (int)out.len;
}

static void write_kinds(FILE *out, unsigned kinds) {
  const char *sep = "";
  for (unsigned k = MORI_FSM_BLOCK; k <= MORI_FSM_WINDOW; k <<= 1) {
    if (!(kinds & k)) continue;
    fprintf(out, "%s%s", sep, mori__fsm_kind_name((mori_fsm_kind)k));
    sep = ", ";
  }
}

/* The kinds a row of a machine kind gives back: each whose most on entry
 * to `to` is below the most `from` held (an ENDS, a heal's LESS); a
 * BREAK's bounds are never below, so it gives back nothing. */
static unsigned gives_back(mori_fsm_kind kind, const mori__fsm_row *row) {
  mori__count held[MORI_RES__COUNT];
  unsigned mask = 0;
  if (mori__fsm_ledger(kind, row->from, held) != 0) return 0;
  for (int r = 0; r < MORI_RES__COUNT; r++) {
    mori__bound was = held[r].hi, now = row->adds[r].count.hi;
    if (!row->adds[r].set) continue;
    if (now.per_world < was.per_world || (now.per_world == was.per_world && now.plus < was.plus))
      mask |= MORI__BIT(r);
  }
  return mask;
}

static void write_res_names(FILE *out, const char *first, unsigned mask) {
  const char *sep = first;
  for (int r = 0; r < MORI_RES__COUNT; r++) {
    if (!(mask & MORI__BIT(r))) continue;
    fprintf(out, "%s%s", sep, mori_res_name((mori_res)r));
    sep = ", ";
  }
}

/* An edge's tooltip: what its row records and gives back, or for RELEASE
 * and FAIL that they unwind (a forward row that does neither says it
 * acquires nothing). */
static void write_acquires(FILE *out, mori_fsm_kind kind, const mori__fsm_row *row) {
  unsigned acquires = mori__fsm_acquires(row), gives = gives_back(kind, row);
  if (row->event == MORI_EV_RELEASE || row->event == MORI_EV_FAIL) {
    fputs("unwinds the ledger in reverse order", out);
    return;
  }
  if (acquires == 0 && gives == 0) {
    fputs("acquires nothing", out);
    return;
  }
  write_res_names(out, "acquires ", acquires);
  write_res_names(out, acquires ? "; gives back " : "gives back ", gives);
}

/* "INIT, RELEASED or FAILED", or "not RELEASED" where that is shorter. */
static void put_states(text *t, unsigned mask) {
  int total = 0, k = 0;
  for (int c = 0; c < MORI_FSM_NSTATES; c++) total += (mask >> c) & 1;
  if (2 * total > MORI_FSM_NSTATES) {
    put(t, "not ");
    mask = ~mask;
    total = MORI_FSM_NSTATES - total;
  }
  for (int c = 0; c < MORI_FSM_NSTATES; c++) {
    if (!((mask >> c) & 1)) continue;
    k++;
    put(t, "%s%s", k == 1 ? "" : k == total ? " or " : ", ", mori_fsm_state_name(c));
  }
}

int mori__lc_describe(const mori__lifecycle *lc, int s, char *buf, size_t n) {
  text t = {buf, n, 0};
  const char *sep = "";
  if (n > 0) buf[0] = '\0';
  for (int i = 0; i < lc->nfacts; i++) {
    unsigned mask = lc->states[s].allowed[i];
    const mori__fact *f = &lc->facts[i];
    if (mask == MORI__ANY) continue;
    put(&t, "%s", sep);
    sep = "; ";
    if (f->kind == MORI__FACT_COUNT) {
      put(&t, "%s %s", f->name, mask & 1 ? "0" : "> 0");
    } else if (f->kind == MORI__FACT_FLAG) {
      put(&t, "%s", mask & 2 ? f->name : f->no);
    } else {
      put(&t, "%s ", f->name);
      put_states(&t, mask);
    }
  }
  if (*sep == '\0') put(&t, "nothing required");
  return (int)t.len;
}

/* One cluster per lifecycle; node names carry its prefix, since its
 * states' names may be the machines' too. */
static void write_lifecycle(FILE *out, const mori__lifecycle *lc) {
  fprintf(out, "  subgraph cluster_%s {\n    label=\"%s\";\n", lc->id, lc->name);
  for (int s = 0; s < lc->nstates; s++) {
    char line[512];
    mori__lc_describe(lc, s, line, sizeof line);
    fprintf(out, "    %s_%s [label=\"%s\\n", lc->id, lc->states[s].name, lc->states[s].name);
    for (const char *p = line; *p; p++) {
      if (p[0] == ';' && p[1] == ' ') {
        fputs("\\n", out);
        p++;
      } else {
        fputc(*p, out);
      }
    }
    fprintf(out, "\", tooltip=\"%s\"];\n", line);
  }
  for (size_t i = 0; i < lc->nrows; i++) {
    const mori__lc_row *r = &lc->rows[i];
    fprintf(out, "    %s_%s -> %s_%s [label=\"%s\"];\n", lc->id, lc->states[r->from].name, lc->id,
            lc->states[r->to].name, lc->events[r->event].name);
  }
  fputs("  }\n", out);
}

/* One cluster per machine kind, its nodes named <kind>_<STATE>: the
 * states its rows use, each labelled with its name alone (the resources it
 * holds are its tooltip); a step's edge says its event, what it adds to
 * the ledger and what it gives back; the FAIL rows, drawn dashed and
 * unlabelled, all end in the machine's own FAILED, so that the two
 * machines' rollbacks do not cross. */
static void write_machine(FILE *out, mori_fsm_kind kind) {
  const char *k = mori__fsm_kind_name(kind);
  unsigned used = 0;
  for (size_t i = 0; i < mori__fsm_nrows; i++)
    if (mori__fsm_rows[i].kinds & (unsigned)kind)
      used |= MORI__BIT(mori__fsm_rows[i].from) | MORI__BIT(mori__fsm_rows[i].to);
  fprintf(out, "  subgraph cluster_%s {\n    label=\"%s machine\";\n", k, k);
  for (int s = 0; s < MORI_FSM_NSTATES; s++) {
    if (!(used & MORI__BIT(s))) continue;
    mori__count counts[MORI_RES__COUNT];
    char held[512] = "";
    text t = {held, sizeof held, 0};
    if (mori__fsm_ledger(kind, s, counts) == 0) put_counts(&t, counts);
    fprintf(out, "    %s_%s [label=\"%s\", tooltip=\"%s\"%s];\n", k, mori_fsm_state_name(s),
            mori_fsm_state_name(s), held,
            s == MORI_FSM_FAILED ? ", style=\"rounded,filled\", fillcolor=gray92" : "");
  }
  for (size_t i = 0; i < mori__fsm_nrows; i++) {
    const mori__fsm_row *r = &mori__fsm_rows[i];
    const char *from = mori_fsm_state_name(r->from), *to = mori_fsm_state_name(r->to);
    if (!(r->kinds & (unsigned)kind)) continue;
    fprintf(out, "    %s_%s -> %s_%s [", k, from, k, to);
    if (r->event == MORI_EV_FAIL) {
      fputs("style=dashed, color=gray60, arrowsize=0.5, tooltip=\"FAIL: ", out);
      write_acquires(out, kind, r);
      fputs("\"];\n", out);
      continue;
    }
    fprintf(out, "label=\"%s", mori_wevent_name(r->event));
    for (int res = 0; res < MORI_RES__COUNT; res++)
      if (mori__fsm_acquires(r) & MORI__BIT(res))
        fprintf(out, "\\n+ %s", mori__res_infos[res].singular);
    for (int res = 0; res < MORI_RES__COUNT; res++)
      if (gives_back(kind, r) & MORI__BIT(res))
        fprintf(out, "\\n- %s", mori__res_infos[res].singular);
    fputs("\", tooltip=\"", out);
    write_acquires(out, kind, r);
    fputs("\"];\n", out);
  }
  fputs("  }\n", out);
}

void mori_fsm_write_dot(FILE *out) {
  fputs("digraph mori_fsm {\n"
        "  rankdir=TB;\n"
        "  nodesep=0.2;\n"
        "  ranksep=0.25;\n"
        "  node [shape=box, style=rounded, fontsize=9, height=0.25, margin=\"0.08,0.03\"];\n"
        "  edge [fontsize=8];\n",
        out);
  write_machine(out, MORI_FSM_BLOCK);
  write_machine(out, MORI_FSM_WINDOW);
  write_lifecycle(out, &mori__life_lifecycle);
  write_lifecycle(out, &mori__watch_lifecycle);
  fputs("  subgraph cluster_legend {\n"
        "    label=\"legend\";\n"
        "    legend [shape=plaintext, style=\"\", label=\""
        "box: a state (its tooltip: what its ledger holds)\\l"
        "solid arrow: a step of the table, its event,\\l"
        "    what it adds to the ledger (+ ...)\\l"
        "    and what it gives back (- ...)\\l"
        "dashed arrow: FAIL, from every state of the machine:\\l"
        "    unwinds the ledger in reverse order\\l"
        "shaded: the machine's failure sink\\l\"];\n"
        "  }\n"
        "}\n",
        out);
}

static void write_res_list(FILE *out, unsigned acquires) {
  const char *sep = "";
  for (int r = 0; r < MORI_RES__COUNT; r++) {
    if (!(acquires & MORI__BIT(r))) continue;
    fprintf(out, "%s%s", sep, mori_res_name((mori_res)r));
    sep = ", ";
  }
  if (*sep == '\0') fputs("-", out);
}

static void write_steps(FILE *out) {
  fputs("| Kind | From | Step (event) | To | Acquires |\n"
        "|------|------|--------------|----|----------|\n",
        out);
  for (size_t i = 0; i < mori__fsm_nrows; i++) {
    const mori__fsm_row *r = &mori__fsm_rows[i];
    if (r->event == MORI_EV_FAIL) continue;
    fputs("| ", out);
    write_kinds(out, r->kinds);
    fprintf(out, " | %s | %s | %s | ", mori_fsm_state_name(r->from), mori_wevent_name(r->event),
            mori_fsm_state_name(r->to));
    if (r->event == MORI_EV_RELEASE)
      fputs("(unwinds the ledger)", out);
    else
      write_res_list(out, mori__fsm_acquires(r));
    fputs(" |\n", out);
  }
  /* FAIL: one line per kind, listing the states it leaves from. */
  for (unsigned k = MORI_FSM_BLOCK; k <= MORI_FSM_WINDOW; k <<= 1) {
    fprintf(out, "| %s | ", mori__fsm_kind_name((mori_fsm_kind)k));
    const char *sep = "";
    for (size_t i = 0; i < mori__fsm_nrows; i++) {
      const mori__fsm_row *r = &mori__fsm_rows[i];
      if (r->event != MORI_EV_FAIL || !(r->kinds & k)) continue;
      fprintf(out, "%s%s", sep, mori_fsm_state_name(r->from));
      sep = ", ";
    }
    fputs(" | FAIL | FAILED | (rolls the ledger back) |\n", out);
  }
}

/* Every state with the machines that reach it, its ledger on entry and
 * its words. */
static void write_states(FILE *out) {
  fputs("| State | Machine | Ledger on entry | In words |\n"
        "|-------|---------|-----------------|----------|\n",
        out);
  for (int s = 0; s < MORI_FSM_NSTATES; s++) {
    mori__count counts[MORI_RES__COUNT];
    char held[512] = "";
    const char *sep = "";
    fprintf(out, "| %s | ", mori_fsm_state_name(s));
    for (unsigned k = MORI_FSM_BLOCK; k <= MORI_FSM_WINDOW; k <<= 1) {
      if (mori__fsm_ledger((mori_fsm_kind)k, s, counts) != 0) continue;
      text t = {held, sizeof held, 0};
      put_counts(&t, counts);
      fprintf(out, "%s%s", sep, mori__fsm_kind_name((mori_fsm_kind)k));
      sep = ", ";
    }
    fprintf(out, " | %s | %s |\n", held, mori__fsm_state_words(s));
  }
}

/* The resource kinds in ledger order: by tier, a tier's kinds as numbered. */
static void write_resources(FILE *out) {
  static const char *const aux[] = {"-", "its rank", "its peer (never the own rank)"};
  static const char *const unwind[] = {"in reverse order", "after every other entry",
                                       "never: borrowed"};
  fputs("| Tier | Kind | Machine | Aux | Given back | What it is |\n"
        "|------|------|---------|-----|------------|------------|\n",
        out);
  for (unsigned tier = 0, n = 0; n < MORI_RES__COUNT; tier++)
    for (int r = 0; r < MORI_RES__COUNT; r++) {
      const mori__res_info *info = &mori__res_infos[r];
      if (info->tier != tier) continue;
      fprintf(out, "| %u | %s | ", tier, info->name);
      write_kinds(out, mori__fsm_owners((mori_res)r));
      fprintf(out, " | %s | %s | %s |\n", aux[info->aux], unwind[info->unwind], info->words);
      n++;
    }
}

/* A lifecycle's rows with what their events mean, then its states with
 * the facts each allows and its words. */
static void write_lifecycle_tables(FILE *out, const mori__lifecycle *lc) {
  fputs("| From | Event | To | When |\n|------|-------|----|------|\n", out);
  for (size_t i = 0; i < lc->nrows; i++) {
    const mori__lc_row *r = &lc->rows[i];
    fprintf(out, "| %s | %s | %s | %s |\n", lc->states[r->from].name, lc->events[r->event].name,
            lc->states[r->to].name, lc->events[r->event].words);
  }
  fputs("\n| State | Implies | In words |\n|-------|---------|----------|\n", out);
  for (int s = 0; s < lc->nstates; s++) {
    char line[512];
    mori__lc_describe(lc, s, line, sizeof line);
    fprintf(out, "| %s | %s | %s |\n", lc->states[s].name, line, lc->states[s].words);
  }
}

static void write_life(FILE *out) { write_lifecycle_tables(out, &mori__life_lifecycle); }
static void write_watch(FILE *out) { write_lifecycle_tables(out, &mori__watch_lifecycle); }

int mori_fsm_write_table(FILE *out, const char *name) {
  static const struct {
    const char *name;
    void (*write)(FILE *out);
  } tables[] = {{"steps", write_steps},         {"states", write_states},
                {"resources", write_resources}, {"life", write_life},
                {"watch", write_watch}};
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
    if (name != NULL && strcmp(name, tables[i].name) == 0) {
      tables[i].write(out);
      return 0;
    }
  return -1;
}
