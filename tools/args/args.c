/*
 * args.c - strict parsing of command-line values by the tables of args.h,
 * and the help texts made from the same tables.  A value is accepted whole
 * or refused with a message naming the option, the value and what would be
 * accepted; nothing is guessed (no atoi, no trailing garbage, no units
 * other than the listed ones).
 */
#include "args.h"
#include "mori/values.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *tool_name = "mori-symm";

/* ---- values ---- */

/* The strict reader of mori/values.h: the command line and the
 * environment take numbers and sizes by the same grammar. */
int cli_parse_int(const char *text, long long min, long long max, long long *out, char *why,
                  size_t whylen) {
  return mori_value_int(text, min, max, out, why, whylen);
}

void cli_format_size(long long n, char *buf, size_t len) { mori_value_format_size(n, buf, len); }

static void size_range(long long min, long long max, char *buf, size_t len) {
  char lo[32], hi[32];
  cli_format_size(min, lo, sizeof lo);
  cli_format_size(max, hi, sizeof hi);
  snprintf(buf, len, "%s to %s", lo, hi);
}

int cli_parse_size(const char *text, long long min, long long max, long long *out, char *why,
                   size_t whylen) {
  return mori_value_size(text, min, max, out, why, whylen);
}

static int parse_choice(const char *text, const char *const *choices, char *why,
                        size_t whylen) {
  for (const char *const *c = choices; *c; c++)
    if (strcmp(text, *c) == 0) return 0;
  size_t n = (size_t)snprintf(why, whylen, "unknown value (accepted:");
  for (const char *const *c = choices; *c && n < whylen; c++)
    n += (size_t)snprintf(why + n, whylen - n, "%s %s", c == choices ? "" : ",", *c);
  if (n < whylen) snprintf(why + n, whylen - n, ")");
  return -1;
}

/* ---- options ---- */

static const cli_option *find_option(const cli_command *cmd, const char *name, size_t len) {
  for (const cli_option *o = cmd->options; o && o->name; o++)
    if (strlen(o->name) == len && strncmp(o->name, name, len) == 0) return o;
  return NULL;
}

static int store(const cli_command *cmd, const cli_option *o, const char *value, void *args) {
  char why[512];
  long long v = 0;
  char *field = (char *)args + o->offset;
  int rc = 0;
  switch (o->kind) {
  case CLI_FLAG:
    *(int *)field = 1;
    return 0;
  case CLI_INT:
    rc = cli_parse_int(value, o->min, o->max, &v, why, sizeof why);
    if (rc == 0) *(int *)field = (int)v;
    break;
  case CLI_SIZE:
    rc = cli_parse_size(value, o->min, o->max, &v, why, sizeof why);
    if (rc == 0) *(size_t *)field = (size_t)v;
    break;
  case CLI_TEXT:
    if (*value == '\0') {
      snprintf(why, sizeof why, "empty (a value is needed)");
      rc = -1;
    }
    if (rc == 0) *(const char **)field = value;
    break;
  case CLI_CHOICE:
    rc = parse_choice(value, o->choices, why, sizeof why);
    if (rc == 0) *(const char **)field = value;
    break;
  }
  if (rc != 0) return cli_usage_error(cmd, "%s '%s': %s", o->name, value, why);
  return 0;
}

int cli_usage_error(const cli_command *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s %s: ", tool_name, cmd->name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  return CLI_EXIT_USAGE;
}

int cli_parse(const cli_command *cmd, void *args, int argc, char **argv) {
  int have_operand = 0;
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      cli_print_command_help(stdout, cmd);
      return CLI_EXIT_HELP;
    }
    if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
      if (cmd->operand == NULL || have_operand)
        return cli_usage_error(cmd, "unexpected argument '%s' (%s help %s lists the options)",
                               arg, tool_name, cmd->name);
      *(const char **)((char *)args + cmd->operand_offset) = arg;
      have_operand = 1;
      continue;
    }
    const char *eq = strchr(arg, '=');
    const cli_option *o = find_option(cmd, arg, eq ? (size_t)(eq - arg) : strlen(arg));
    if (o == NULL)
      return cli_usage_error(cmd, "unknown option '%.*s' (%s help %s lists the options)",
                             eq ? (int)(eq - arg) : (int)strlen(arg), arg, tool_name,
                             cmd->name);
    const char *value = NULL;
    if (o->kind == CLI_FLAG) {
      if (eq) return cli_usage_error(cmd, "%s takes no value", o->name);
    } else if (eq) {
      value = eq + 1;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return cli_usage_error(cmd, "%s needs a value (%s)", o->name, o->value);
    }
    int rc = store(cmd, o, value, args);
    if (rc != 0) return rc;
  }
  if (cmd->operand != NULL && !have_operand)
    return cli_usage_error(cmd, "%s is missing (%s help %s)", cmd->operand, tool_name, cmd->name);
  return 0;
}

/* ---- help ---- */

static void option_value_text(const cli_option *o, char *buf, size_t len) {
  char range[80];
  switch (o->kind) {
  case CLI_INT:
    snprintf(buf, len, "%lld to %lld", o->min, o->max);
    return;
  case CLI_SIZE:
    size_range(o->min, o->max, range, sizeof range);
    snprintf(buf, len, "%s", range);
    return;
  case CLI_CHOICE: {
    size_t n = 0;
    buf[0] = '\0';
    for (const char *const *c = o->choices; *c && n < len; c++)
      n += (size_t)snprintf(buf + n, len - n, "%s%s", c == o->choices ? "" : "|", *c);
    return;
  }
  default:
    buf[0] = '\0';
  }
}

/* Writes text from column `indent` (the cursor is there already), wrapped
 * at HELP_WIDTH on spaces, continuation lines indented the same; NO_BREAK
 * prints as a space that is never broken ("[1 to 16 GiB]" stays whole). */
#define HELP_WIDTH 79
#define NO_BREAK '\x1f'

void cli_wrap(FILE *out, const char *text, int indent) {
  int col = indent;
  while (*text) {
    size_t word = strcspn(text, " ");
    if (col > indent && col + 1 + (int)word > HELP_WIDTH) {
      fprintf(out, "\n%*s", indent, "");
      col = indent;
    } else if (col > indent) {
      fputc(' ', out);
      col++;
    }
    for (size_t i = 0; i < word; i++) fputc(text[i] == NO_BREAK ? ' ' : text[i], out);
    col += (int)word;
    text += word;
    while (*text == ' ') text++;
  }
  fputc('\n', out);
}

#define OPTION_COLUMN 26
void cli_print_command_help(FILE *out, const cli_command *cmd) {
  fprintf(out, "usage: %s %s%s%s%s\n  ", tool_name, cmd->name, cmd->options ? " [OPTIONS]" : "",
          cmd->operand ? " " : "", cmd->operand ? cmd->operand : "");
  cli_wrap(out, cmd->summary, 2);
  for (const cli_option *o = cmd->options; o && o->name; o++) {
    char head[64], accepted[160], text[640];
    int n = snprintf(head, sizeof head, "  %s%s%s", o->name, o->kind == CLI_FLAG ? "" : " ",
                     o->kind == CLI_FLAG ? "" : o->value);
    option_value_text(o, accepted, sizeof accepted);
    for (char *c = accepted; *c; c++)
      if (*c == ' ') *c = NO_BREAK;
    snprintf(text, sizeof text, "%s%s%s%s", o->help, accepted[0] ? " [" : "", accepted,
             accepted[0] ? "]" : "");
    if (n >= OPTION_COLUMN)
      fprintf(out, "%s\n%*s", head, OPTION_COLUMN, "");
    else
      fprintf(out, "%-*s", OPTION_COLUMN, head);
    cli_wrap(out, text, OPTION_COLUMN);
  }
  if (cmd->details) fprintf(out, "%s", cmd->details);
}

static void print_tool_help(FILE *out, const cli_tool *tool, int with_options) {
  fprintf(out, "usage: %s COMMAND [OPTIONS]\n  %s\n\ncommands:\n", tool->name, tool->summary);
  for (const cli_command *const *c = tool->commands; *c; c++) {
    fprintf(out, "  %-14s", (*c)->name);
    cli_wrap(out, (*c)->summary, 16);
  }
  fprintf(out, "  %-14s", "help");
  cli_wrap(out, "this text; `help COMMAND`: one command's options", 16);
  for (const cli_topic *const *t = tool->topics; t && *t; t++) {
    char line[256];
    snprintf(line, sizeof line, "help %s", (*t)->name);
    fprintf(out, "  %-14s", line);
    cli_wrap(out, (*t)->summary, 16);
  }
  fprintf(out, "  %-14s", "--version");
  cli_wrap(out, "the version of mori-symm this tool belongs to", 16);
  if (with_options) {
    for (const cli_command *const *c = tool->commands; *c; c++) {
      fprintf(out, "\n");
      cli_print_command_help(out, *c);
    }
    if (tool->details) fprintf(out, "\n%s", tool->details);
  } else {
    fprintf(out, "\n%s --help lists every option.\n", tool->name);
  }
}

static const cli_command *find_command(const cli_tool *tool, const char *name) {
  for (const cli_command *const *c = tool->commands; *c; c++)
    if (strcmp((*c)->name, name) == 0) return *c;
  return NULL;
}

static const cli_topic *find_topic(const cli_tool *tool, const char *name) {
  for (const cli_topic *const *t = tool->topics; t && *t; t++)
    if (strcmp((*t)->name, name) == 0) return *t;
  return NULL;
}

/* with_topics: what `help` takes (the commands, the topics and help). */
static int unknown_command(const cli_tool *tool, int with_topics, const char *name) {
  fprintf(stderr, "%s: %sunknown command '%s' (accepted:", tool->name, with_topics ? "help: " : "",
          name);
  for (const cli_command *const *c = tool->commands; *c; c++)
    fprintf(stderr, "%s %s", c == tool->commands ? "" : ",", (*c)->name);
  for (const cli_topic *const *t = tool->topics; with_topics && t && *t; t++)
    fprintf(stderr, ", %s", (*t)->name);
  fprintf(stderr, "%s; %s --help)\n", with_topics ? ", help" : "", tool->name);
  return CLI_EXIT_USAGE;
}

static void print_help_help(FILE *out, const cli_tool *tool) {
  fprintf(out, "usage: %s help [COMMAND|TOPIC]\n  ", tool->name);
  cli_wrap(out, "without a name: every command and option (as --help); with a command: its "
            "options and what they take; with a topic:", 2);
  for (const cli_topic *const *t = tool->topics; t && *t; t++)
    fprintf(out, "    %-12s%s\n", (*t)->name, (*t)->summary);
}

int cli_main(const cli_tool *tool, int argc, char **argv) {
  tool_name = tool->name;
  if (argc < 2) {
    print_tool_help(stderr, tool, 0);
    return CLI_EXIT_USAGE;
  }
  const char *name = argv[1];
  if (strcmp(name, "--version") == 0 && argc == 2) {
    const char *lib = tool->library_version ? tool->library_version() : tool->version;
    printf("%s %s\nlibmori_core.so %s%s\n", tool->name, tool->version, lib,
           strcmp(lib, tool->version) == 0 ? "" : " (not the version this tool was built as)");
    if (tool->version_details) tool->version_details(stdout);
    return 0;
  }
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 ||
      (strcmp(name, "help") == 0 && argc == 2)) {
    print_tool_help(stdout, tool, 1);
    return 0;
  }
  if (strcmp(name, "help") == 0) {
    const cli_command *c = find_command(tool, argv[2]);
    const cli_topic *t = c ? NULL : find_topic(tool, argv[2]);
    if (c == NULL && t == NULL && strcmp(argv[2], "help") != 0)
      return unknown_command(tool, 1, argv[2]);
    if (argc > 3) {
      fprintf(stderr, "%s: help: unexpected argument '%s' (help takes one COMMAND or TOPIC; %s "
                      "help help)\n", tool->name, argv[3], tool->name);
      return CLI_EXIT_USAGE;
    }
    if (c != NULL)
      cli_print_command_help(stdout, c);
    else if (t != NULL)
      t->print(stdout);
    else
      print_help_help(stdout, tool);
    return 0;
  }
  const cli_command *c = find_command(tool, name);
  if (c == NULL) return unknown_command(tool, 0, name);
  return c->run(argc - 2, argv + 2);
}
