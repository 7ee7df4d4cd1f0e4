/* cmd_advise.c: `oomlab advise SCENARIO|TRACE`: every fix tried on the scenario's job (alone, in pairs of
 * the best, and grown greedily), each proven by a full run and ranked; for a snapshot or trace, the
 * allocator settings instead, with the smallest card each survives on. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "replay/trace_input.h"
#include "report/advice_table.h"
#include "run/advise.h"

void cmd_advise_usage(FILE *f)
{
    fprintf(f, "usage: oomlab advise [options] SCENARIO.yaml|SNAPSHOT|TRACE\n"
               "  a scenario: every fix tried on its job (before), alone, in pairs of the best four and grown\n"
               "  greedily from the best, each proven by a full run, ranked: what fits first, then the highest\n"
               "  modelled samples/s, then the lowest peak reserved; fixes that change nothing say why.\n"
               "  a snapshot or trace: allocator settings tried, with the capacity each needs and the smallest\n"
               "  GPU profile it replays on without an OOM.\n"
               "options:\n"
               "  --device DEV     run the scenario on DEV; --capacity CAP: as `oomlab run`\n"
               "  --cuda-device N  the snapshot's device N (a file that recorded several)\n" CLI_REPORT_HELP CLI_GPU_HELP
               "exit: 0 something fits (a scenario) or the trace replays, 1 nothing fits, 2 bad input,\n"
               "      3 internal error\n");
}

const struct option cmd_advise_options[] = {
    {"device", required_argument, 0, 'd'}, {"capacity", required_argument, 0, 'c'},
    {"cuda-device", required_argument, 0, 'D'}, {"help", no_argument, 0, 'h'},
    CLI_REPORT_OPTIONS, CLI_GPU_OPTIONS,
    {0, 0, 0, 0},
};

static bool is_scenario(const char *path)
{
    size_t n = strlen(path);
    return (n > 5 && !strcmp(path + n - 5, ".yaml")) || (n > 4 && !strcmp(path + n - 4, ".yml"));
}

/* The candidates as report jobs (rank order), for --json, --csv and --tap. */
static void report_candidates(struct report_outputs *out, const char *name, const struct advice *a)
{
    struct job_result *jobs = calloc(a->n + 1, sizeof *jobs);
    if (!jobs)
        return;
    jobs[0] = a->base;
    snprintf(jobs[0].name, sizeof jobs[0].name, "as-is");
    for (size_t i = 0; i < a->n; i++) {
        jobs[i + 1] = a->entries[i].run;
        snprintf(jobs[i + 1].name, sizeof jobs[i + 1].name, "rank-%zu", i + 1);
        if (a->entries[i].settings[0])
            snprintf(jobs[i + 1].fixes, sizeof jobs[i + 1].fixes, "%s", a->entries[i].settings);
        jobs[i + 1].has_expect = false;
    }
    jobs[0].has_expect = false;
    struct report_group g = {.kind = REPORT_SCENARIO, .name = name, .title = "advice", .jobs = jobs,
                             .njobs = a->n + 1};
    report_outputs_add(out, &g);
    free(jobs);
}

int cmd_advise(int argc, char **argv)
{
    struct harness_options opt = {0};
    struct cli_report_args ra = {0};
    struct err e = {0};
    int c, cuda_device = -1;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", cmd_advise_options, NULL)) != -1) {
        if (cli_report_option(c, optarg, &ra))
            continue;
        int gpu = cli_gpu_option(c, optarg, &e);
        if (gpu < 0)
            return cli_fail("advise", &e);
        if (gpu)
            continue;
        switch (c) {
        case 'd': opt.device = optarg; break;
        case 'c':
            if (capacity_parse(optarg, &opt.capacity, &e) && err_prefix(&e, "--capacity: "))
                return cli_fail("advise", &e);
            break;
        case 'D': {
            uint64_t n;
            if (uint_parse(optarg, 0, INT_MAX, &n, &e) && err_prefix(&e, "--cuda-device: "))
                return cli_fail("advise", &e);
            cuda_device = (int)n;
            break;
        }
        case 'h': cmd_advise_usage(stdout); return 0;
        default: cmd_advise_usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "oomlab advise: expected one scenario, snapshot or trace\n");
        return 2;
    }
    const char *path = argv[optind];
    struct advice *a = calloc(1, sizeof *a);
    struct report_outputs out;
    if (!a)
        return err_set(&e, ERR_INTERNAL, "out of host memory"), cli_fail("advise", &e);
    int rc = report_outputs_open(&out, "advise", ra.json, ra.csv, ra.tap, &e);
    struct scenario sc;
    bool scenario = is_scenario(path), loaded = false;
    if (rc == 0 && scenario)
        rc = scenario_load(path, &sc, &e), loaded = rc == 0;
    if (rc == 0)
        rc = scenario ? advise_scenario(&sc, &opt, a, &e) : advise_trace(path, cuda_device, a, &e);
    if (rc == 0) {
        const char *name = scenario ? sc.name : path;
        if (out.table)
            report_advice(stdout, name, scenario ? sc.title : "allocator settings for a recorded trace", a);
        bool was_table = out.table;
        out.table = false;
        report_candidates(&out, name, a);
        out.table = was_table;
    }
    rc = report_outputs_close(&out, rc == 0, &e) || rc;
    if (loaded)
        scenario_free(&sc);
    bool fits = a->n && !a->entries[0].run.run.oom.happened;
    free(a);
    if (rc)
        return cli_fail("advise", &e);
    return fits || !scenario ? 0 : 1;
}
