/*
 * args.h - the command-line grammar of mori-symm and mori-fi, as data: a
 * tool is a table of commands, a command a table of options, and the
 * parser, its error messages and every help text are made from the tables,
 * so a command or an option is listed in exactly one place.
 */
#ifndef MORI_CLI_ARGS_H
#define MORI_CLI_ARGS_H

#include <stddef.h>
#include <stdio.h>

enum cli_kind {
  CLI_FLAG,   /* --name alone: sets an int to 1 */
  CLI_INT,    /* a whole decimal number in [min, max] (int) */
  CLI_SIZE,   /* bytes: digits, then nothing, K, M, G, KiB, MiB or GiB, in [min, max] (size_t) */
  CLI_TEXT,   /* any non-empty text (const char *) */
  CLI_CHOICE, /* one of choices (const char *) */
};

typedef struct cli_option {
  const char *name;           /* "--ranks" */
  enum cli_kind kind;
  size_t offset;              /* of its field in the command's argument struct */
  long long min, max;         /* CLI_INT and CLI_SIZE */
  const char *const *choices; /* CLI_CHOICE: NULL-terminated */
  const char *value;          /* the value as help names it: "N", "BYTES" */
  const char *help;           /* one line, saying the default */
} cli_option;

typedef struct cli_command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;        /* one line */
  const cli_option *options;  /* ends with a row whose name is NULL; NULL for none */
  const char *operand;        /* the one positional argument ("TRACE"), or NULL */
  size_t operand_offset;      /* its field (const char *) */
  const char *details;        /* more lines for `help COMMAND`, or NULL */
} cli_command;

/* Something `help NAME` explains that is not a command (`help env`). */
typedef struct cli_topic {
  const char *name;
  const char *summary;        /* one line, for the tool's help */
  void (*print)(FILE *out);
} cli_topic;

/* The range of the launcher's deadline on a command's ranks, one for
 * every command that takes one (--timeout-ms of demo and bench-sim,
 * --deadline-ms of sweep and run-scenario): under a second no launch of
 * ranks can finish, and above an hour a hang is not worth waiting for. */
#define CLI_DEADLINE_MS_MIN 1000
#define CLI_DEADLINE_MS_MAX 3600000

typedef struct cli_tool {
  const char *name;           /* "mori-symm" */
  const char *version;        /* what --version prints: the version it was built as */
  const char *(*library_version)(void); /* the library's it runs with, named if it differs */
  const char *summary;
  const cli_command *const *commands; /* NULL-terminated: the one list of commands */
  const cli_topic *const *topics;     /* NULL-terminated, or NULL: what else help explains */
  const char *details;        /* environment and files, for --help */
  void (*version_details)(FILE *out); /* what --version adds after the versions, or NULL */
} cli_tool;

/* The shim backends built in and the runtime each finds (version.c): a
 * tool's version_details. */
void cli_print_runtimes(FILE *out);

/* Dispatches argv[1] to its command; `--help`, `-h`, `help [COMMAND|TOPIC]`
 * (`help help` says how help works) and `--version` print to stdout and
 * return 0; no or an unknown command is an error (stderr, 2). */
int cli_main(const cli_tool *tool, int argc, char **argv);

/* Fills args from a command's arguments by its table.  Returns 0, or
 * CLI_EXIT_HELP after printing the command's help for --help (the command
 * then returns 0), or CLI_EXIT_USAGE after printing to stderr an error that
 * names the option, the value and what is accepted. */
#define CLI_EXIT_HELP (-1)
#define CLI_EXIT_USAGE 2
int cli_parse(const cli_command *cmd, void *args, int argc, char **argv);

/* Prints "<tool> <command>: <message>" to stderr and returns CLI_EXIT_USAGE:
 * for checks that involve more than one option. */
int cli_usage_error(const cli_command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The value parsers on their own (0, or -1 with why filled). */
int cli_parse_int(const char *text, long long min, long long max, long long *out, char *why,
                  size_t whylen);
int cli_parse_size(const char *text, long long min, long long max, long long *out, char *why,
                   size_t whylen);

/* "16 GiB", "3 MiB", "12345 bytes": the largest unit that divides n. */
void cli_format_size(long long n, char *buf, size_t len);

void cli_print_command_help(FILE *out, const cli_command *cmd);

/* Writes text from column indent, where the cursor already is, wrapped at
 * the help's width on spaces, continuation lines indented the same. */
void cli_wrap(FILE *out, const char *text, int indent);

#endif
