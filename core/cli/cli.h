/*
 * cli.h - the commands of the mori-symm tool and what they share.
 */
#ifndef MORI_CLI_H
#define MORI_CLI_H

#include <stddef.h>

int cli_demo(int argc, char **argv);
int cli_probe(int argc, char **argv);
int cli_cycles(int argc, char **argv);
int cli_bench_sim(int argc, char **argv);
double cli_now_us(void);
size_t cli_parse_size(const char *s);
/* The shim to use: the argument, else MORI_SYMM_SHIM, else "auto" when a
 * GPU runtime library can be loaded, else "sim". */
const char *cli_default_shim(const char *arg);

#endif
