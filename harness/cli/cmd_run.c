/* cmd_run.c: `oomlab run FILE|DIR...`: every variant of every scenario, a before/after table per scenario,
 * optional JSON, CSV and TAP; exit 1 if any expectation fails. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "run/harness.h"
#include "scenario/scenario.h"
#include "util/dir.h"
#include "util/size.h"

void cmd_run_usage(FILE *f)
{
    fprintf(f, "usage: oomlab run [options] SCENARIO.yaml|DIR...\n"
               "       oomlab run [options] --hf-config CONFIG.json\n"
               "  runs every variant (before = the faults, after = faults + fixes) of every scenario\n"
               "options:\n" CLI_HF_HELP
               "  --device DEV     run every scenario on DEV instead of its own (sim:PROFILE, sim:SIZE,\n"
               "                   either with @cudaX.Y, sim:gpuN, host, host:SIZE|FRACTION, cuda, cuda:N,\n"
               "                   cuda:auto)\n"
               "  --capacity CAP   override the device capacity: a size (24GiB) or a share of the\n"
               "                   device's memory (0.5 or 50%%)\n"
               "  --snapshot DIR   write each variant's run as a PyTorch memory snapshot,\n"
               "                   DIR/SCENARIO--VARIANT.pickle (pytorch.org/memory_viz opens it)\n"
               "  --plot DIR       draw pictures into DIR (SVG and PNG): per variant the memory timeline\n"
               "                   (SCENARIO--VARIANT-timeline) and the segments at the reserved peak\n"
               "                   (-segments); per scenario its variants side by side (SCENARIO-variants)\n"
               "  --perfetto DIR   write each variant's run as a trace ui.perfetto.dev and chrome://tracing\n"
               "                   open, DIR/SCENARIO--VARIANT.json (memory counters, phases, kernels)\n"
               "  --max-forwards N run jobs of up to N forward passes (default 100000)\n" CLI_REPORT_HELP CLI_GPU_HELP
               "exit: 0 every expectation holds, 1 one failed, 2 bad input, 3 internal or device error\n");
}

const struct option cmd_run_options[] = {
    {"device", required_argument, 0, 'd'}, {"capacity", required_argument, 0, 'c'},
    {"help", no_argument, 0, 'h'},         {"snapshot", required_argument, 0, 'S'},
    {"max-forwards", required_argument, 0, 'F'}, {"plot", required_argument, 0, 'p'},
    {"perfetto", required_argument, 0, 'T'}, CLI_HF_OPTIONS,
    CLI_REPORT_OPTIONS, CLI_GPU_OPTIONS,
    {0, 0, 0, 0},
};

int cmd_run(int argc, char **argv)
{
    struct harness_options opt = {0};
    struct cli_report_args ra = {0};
    struct cli_hf_args hf = {0};
    struct err e = {0};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", cmd_run_options, NULL)) != -1) {
        if (cli_report_option(c, optarg, &ra) || cli_hf_option(c, optarg, &hf))
            continue;
        int gpu = cli_gpu_option(c, optarg, &e);
        if (gpu < 0)
            return cli_fail("run", &e);
        if (gpu)
            continue;
        switch (c) {
        case 'd': opt.device = optarg; break;
        case 'F':
            if (cli_count_option("--max-forwards", optarg, &opt.max_forwards, &e))
                return cli_fail("run", &e);
            break;
        case 'S': opt.snapshot_dir = optarg; break;
        case 'p': opt.plot_dir = optarg; break;
        case 'T': opt.perfetto_dir = optarg; break;
        case 'c':
            if (capacity_parse(optarg, &opt.capacity, &e) && err_prefix(&e, "--capacity: "))
                return cli_fail("run", &e);
            break;
        case 'h': cmd_run_usage(stdout); return 0;
        default: cmd_run_usage(stderr); return 2;
        }
    }
    if (hf.config ? optind != argc : optind >= argc) {
        fprintf(stderr, "oomlab run: expected at least one scenario file or directory, or --hf-config FILE alone\n");
        cmd_run_usage(stderr);
        return 2;
    }
    struct scenario sc = {0};
    if (cli_hf_only(&hf, &e) || (hf.config && cli_hf_scenario(&hf, &sc, stdout, &e)))
        return cli_fail("run", &e);
    /* output directories that cannot be made fail before anything runs */
    if ((opt.plot_dir && dir_make(opt.plot_dir, &e) && err_prefix(&e, "--plot: ")) ||
        (opt.perfetto_dir && dir_make(opt.perfetto_dir, &e) && err_prefix(&e, "--perfetto: ")))
        return cli_fail("run", &e);
    struct report_outputs out;
    if (report_outputs_open(&out, "run", ra.json, ra.csv, ra.tap, &e))
        return scenario_free(&sc), cli_fail("run", &e);
    int rc = hf.config ? cli_run_scenario(&sc, &opt, &out, &e) : 0;
    for (int i = optind; i < argc && rc == 0; i++)
        rc = cli_run_scenarios(argv[i], &opt, &out, &e);
    scenario_free(&sc);
    if (report_outputs_close(&out, rc == 0, &e) || rc)
        return cli_fail("run", &e);
    return cli_exit_status(&out);
}
