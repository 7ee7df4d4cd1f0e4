/* commands.h: the oomlab subcommands, each in its own cli/cmd_*.c, returning an exit code (0 ok, 1 a job
 * failed what it was asked, 2 bad input or usage, 3 internal or device error), and the one table of them
 * that main, --help, the man page and shell completion all read. */
#ifndef OOMLAB_COMMANDS_H
#define OOMLAB_COMMANDS_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;         /* one line */
    void (*usage)(FILE *f);      /* what --help prints */
    const struct option *options; /* its long options, for completion */
};

/* Every command, in the order --help lists them. */
const struct command *command_table(size_t *n);
const struct command *command_find(const char *name); /* NULL if unknown */

/* The version: the release and, in a git checkout, the commit it was built from. */
extern const char oomlab_version[];

#define DECLARE_COMMAND(name)                              \
    int cmd_##name(int argc, char **argv);                 \
    void cmd_##name##_usage(FILE *f);                      \
    extern const struct option cmd_##name##_options[];

DECLARE_COMMAND(run)
DECLARE_COMMAND(replay)
DECLARE_COMMAND(fit)
DECLARE_COMMAND(check)
DECLARE_COMMAND(advise)
DECLARE_COMMAND(stress)
DECLARE_COMMAND(sweep)
DECLARE_COMMAND(merge)
DECLARE_COMMAND(program)
DECLARE_COMMAND(devices)
DECLARE_COMMAND(list)
DECLARE_COMMAND(help)

#endif
