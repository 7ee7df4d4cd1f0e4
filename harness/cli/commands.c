/* commands.c: the table of subcommands (see commands.h). */
#include "cli/commands.h"

#include <string.h>

#ifndef OOMLAB_VERSION
#define OOMLAB_VERSION "unknown"
#endif
const char oomlab_version[] = OOMLAB_VERSION;

#define ROW(name, summary) {#name, cmd_##name, summary, cmd_##name##_usage, cmd_##name##_options}

static const struct command commands[] = {
    ROW(run, "every variant of each scenario: before/after table; exit 1 if an expect: fails"),
    ROW(replay, "replay a PyTorch snapshot or text trace under any allocator settings"),
    ROW(fit, "largest batch size (or sequence length) that fits, per variant"),
    ROW(check, "compare a run with a baseline: the CI gate; exit 1 on a regression"),
    ROW(advise, "every fix (or allocator setting) tried, proven by a run and ranked"),
    ROW(stress, "fill, churn, OOM storm, soak and streams profiles: the allocator under stress, checked"),
    ROW(sweep, "scenarios x devices x --set values as tasks, run here or as a Slurm job array"),
    ROW(merge, "a sweep's task results as one table, JSON, CSV or TAP, as run writes them"),
    ROW(program, "print a scenario variant's op program"),
    ROW(devices, "devices with their availability, capacity and reasons"),
    ROW(list, "presets, faults, fixes, kernels, GPU profiles, scenarios"),
    ROW(help, "this list, a command's help, the man page (--man) or shell completion"),
};

const struct command *command_table(size_t *n)
{
    *n = sizeof commands / sizeof commands[0];
    return commands;
}

const struct command *command_find(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(commands[i].name, name))
            return &commands[i];
    return NULL;
}
