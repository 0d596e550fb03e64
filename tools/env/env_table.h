/*
 * env_table.h - every environment variable mori-symm's code reads, as one table
 * (env_table.c): name, the values it takes, its default, what it does and
 * who reads it.  `mori-symm help env` prints it, docs/environment.md is
 * generated from it (mori-env-doc), and tests/env fails when the code reads
 * a MORI_* or TORCH_* variable that is not a row, or a row nobody reads.
 */
#ifndef MORI_ENV_H
#define MORI_ENV_H

#include <stdio.h>

/* Where a variable acts, in the order the help and the page list them. */
enum mori_env_section {
  MORI_ENV_LIBRARY, /* libmori_core.so, in every program that uses it */
  MORI_ENV_SHIM,    /* libmori_hip_shim.so: the GPU runtime it binds */
  MORI_ENV_SIM,     /* the sim backend of the shim */
  MORI_ENV_FAULT,   /* libmori_faultinject.so and the tools that drive it */
  MORI_ENV_TORCH,   /* the torch adapter, and torch's own variables */
  MORI_ENV_TESTS,   /* the test suite, the scripts and the GPU suite */
  MORI_ENV__SECTIONS
};

typedef struct mori_env_var {
  const char *name;
  enum mori_env_section section;
  const char *values;  /* what it takes: "auto|hip|cuda|sim", "MS", "PATH" */
  const char *fallback; /* what holds when it is unset */
  const char *meaning;  /* one sentence */
  const char *readers;  /* who reads it */
} mori_env_var;

extern const mori_env_var mori_env_vars[]; /* ends with a row whose name is NULL */
extern const char *const mori_env_section_titles[MORI_ENV__SECTIONS];

/* The table as `mori-symm help env` shows it, wrapped for a terminal. */
void mori_env_print_text(FILE *out);
/* The table as docs/environment.md embeds it (markdown, one table per
 * section). */
void mori_env_print_markdown(FILE *out);
/* One name and its section a line, for tests/env. */
void mori_env_print_names(FILE *out);

/* `help env` of mori-symm and mori-fi. */
struct cli_topic;
extern const struct cli_topic mori_env_help_topic;

#endif
