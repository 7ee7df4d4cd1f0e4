/* main.c: oomlab's entry point; dispatches to the subcommands in cli/. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"run", cmd_run, "every variant of each scenario: before/after table; exit 1 if an expect: fails"},
    {"replay", cmd_replay, "replay a PyTorch snapshot or text trace under any allocator settings"},
    {"fit", cmd_fit, "largest batch size (or sequence length) that fits, per variant"},
    {"check", cmd_check, "compare a run with a baseline: the CI gate; exit 1 on a regression"},
    {"program", cmd_program, "print a scenario variant's op program"},
    {"devices", cmd_devices, "devices with their availability, capacity and reasons"},
    {"list", cmd_list, "presets, faults, fixes, kernels, GPU profiles, scenarios"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: oomlab COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n`oomlab COMMAND --help` describes a command.\n"
               "exit codes: 0 ok, 1 an expectation failed, 2 bad input or usage, 3 internal or device error\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "oomlab: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
