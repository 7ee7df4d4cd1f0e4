/* main.c: oomlab's entry point; dispatches to the subcommands of cli/commands.c. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        cmd_help_usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("oomlab %s\n", oomlab_version);
        return 0;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
        return cmd_help(1, argv + 1);
    const struct command *c = command_find(argv[1]);
    if (c)
        return c->run(argc - 1, argv + 1);
    fprintf(stderr, "oomlab: unknown command '%s'\n", argv[1]);
    cmd_help_usage(stderr);
    return 2;
}
