/* cmd_fit.c: `oomlab fit SCENARIO`: the largest batch size (or sequence length, or image size) each variant
 * can run with on its device, optionally leaving a margin of the device free, and the throughput at that
 * size, so a fix's value reads as "how much more fits, and how fast it runs". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "run/fit.h"
#include "util/share.h"
#include "util/size.h"

void cmd_fit_usage(FILE *f)
{
    fprintf(f, "usage: oomlab fit [options] SCENARIO.yaml\n"
               "       oomlab fit [options] --hf-config CONFIG.json\n"
               "  the largest value of the parameter with which each variant runs without an OOM\n"
               "  and, with --margin, with PCT of the device's capacity still free at the reserved\n"
               "  peak; with the samples/s at that value\n"
               "options:\n" CLI_HF_HELP
               "  --param P        batch_size (default), seq_len, image_size, or world_size: the\n"
               "                   smallest world size of the variant's job.parallel, or\n"
               "                   tensor_parallel: the smallest tensor-parallel degree (1, 2, 4, ...)\n"
               "  --limit N        largest value tried (default 4096, at most 1048576)\n"
               "  --max-forwards N run jobs of up to N forward passes (default 100000)\n"
               "  --device DEV     run on DEV instead of the scenario's device\n"
               "  --capacity CAP   a size (24GiB) or a share of the device's memory (0.5 or 50%%)\n"
               "  --margin SHARE   keep this share of the device free at the reserved peak (5%% or 0.05)\n" CLI_REPORT_HELP CLI_GPU_HELP
               "exit: 0 every variant fits at some value, 1 one fits at none, 2 bad input, 3 internal error\n");
}

static const char *const param_names[] = {"batch_size", "seq_len", "image_size", "world_size", "tensor_parallel"};
#define NPARAMS (int)(sizeof param_names / sizeof param_names[0])

static int fit_all(const struct scenario *sc, const struct harness_options *opt, const struct fit_options *fo,
                   const char *capacity_s, struct report_outputs *out, struct err *e)
{
    struct job_result *jobs = calloc(sc->nvariants + 1, sizeof *jobs);
    struct fit_row *rows = calloc(sc->nvariants + 1, sizeof *rows);
    int rc = jobs && rows ? 0 : err_set(e, ERR_INTERNAL, "out of host memory");
    for (size_t i = 0; i < sc->nvariants && rc == 0; i++) {
        struct fit_result f;
        if ((rc = fit_variant(sc, &sc->variants[i], opt, fo, &f, e)))
            break;
        jobs[i] = f.at_largest;
        rows[i] = (struct fit_row){f.largest, f.probes, f.hit_limit};
    }
    if (rc == 0) {
        struct report_group g = {.kind = REPORT_FIT, .name = sc->name, .title = sc->title, .source = sc->source,
                                 .file = sc->path, .jobs = jobs, .njobs = sc->nvariants, .fits = rows,
                                 .fit_param = param_names[fo->param], .fit_margin = fo->margin,
                                 .fit_smallest = fo->param == FIT_WORLD_SIZE || fo->param == FIT_TENSOR_PARALLEL,
                                 .capacity_text = capacity_s};
        report_outputs_add(out, &g);
    }
    free(jobs);
    free(rows);
    return rc;
}

const struct option cmd_fit_options[] = {
    {"param", required_argument, 0, 'p'},  {"limit", required_argument, 0, 'l'},
    {"device", required_argument, 0, 'd'}, {"capacity", required_argument, 0, 'c'},
    {"margin", required_argument, 0, 'm'}, {"help", no_argument, 0, 'h'},
    {"max-forwards", required_argument, 0, 'F'}, CLI_HF_OPTIONS,
    CLI_REPORT_OPTIONS, CLI_GPU_OPTIONS,                    {0, 0, 0, 0},
};

int cmd_fit(int argc, char **argv)
{
    struct harness_options opt = {0};
    struct cli_report_args ra = {0};
    const char *capacity_s = NULL;
    struct cli_hf_args hf = {0};
    struct fit_options fo = {FIT_BATCH, 4096, 0.0};
    int c;
    struct err e = {0};
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", cmd_fit_options, NULL)) != -1) {
        if (cli_report_option(c, optarg, &ra) || cli_hf_option(c, optarg, &hf))
            continue;
        int gpu = cli_gpu_option(c, optarg, &e);
        if (gpu < 0)
            return cli_fail("fit", &e);
        if (gpu)
            continue;
        switch (c) {
        case 'p':
            for (fo.param = 0; (int)fo.param < NPARAMS && strcmp(optarg, param_names[fo.param]); fo.param++)
                ;
            if ((int)fo.param == NPARAMS) {
                fprintf(stderr, "oomlab fit: --param must be batch_size, seq_len, image_size, world_size or tensor_parallel\n");
                return 2;
            }
            break;
        case 'l': {
            uint64_t limit;
            if (cli_count_option("--limit", optarg, &limit, &e) || (limit > FIT_MAX_LIMIT &&
                err_set(&e, ERR_INPUT, "--limit %s: at most %d", optarg, FIT_MAX_LIMIT)))
                return cli_fail("fit", &e);
            fo.limit = (int)limit;
            break;
        }
        case 'm':
            if (share_parse(optarg, &fo.margin, &e) || (fo.margin >= 1.0 &&
                err_set(&e, ERR_INPUT, "'%s' leaves nothing of the device", optarg)))
                return err_prefix(&e, "--margin: "), cli_fail("fit", &e);
            break;
        case 'd': opt.device = optarg; break;
        case 'F':
            if (cli_count_option("--max-forwards", optarg, &opt.max_forwards, &e))
                return cli_fail("fit", &e);
            break;
        case 'c':
            capacity_s = optarg;
            if (capacity_parse(optarg, &opt.capacity, &e) && err_prefix(&e, "--capacity: "))
                return cli_fail("fit", &e);
            break;
        case 'h': cmd_fit_usage(stdout); return 0;
        default: cmd_fit_usage(stderr); return 2;
        }
    }
    if (optind != argc - !hf.config) {
        fprintf(stderr, "oomlab fit: expected one scenario file, or --hf-config FILE alone\n");
        return 2;
    }
    struct scenario sc;
    if (cli_hf_only(&hf, &e) ||
        (hf.config ? cli_hf_scenario(&hf, &sc, stdout, &e) : scenario_load(argv[optind], &sc, &e)))
        return cli_fail("fit", &e);
    struct report_outputs out;
    int rc = report_outputs_open(&out, "fit", ra.json, ra.csv, ra.tap, &e);
    if (rc == 0) {
        rc = fit_all(&sc, &opt, &fo, capacity_s, &out, &e);
        rc = report_outputs_close(&out, rc == 0, &e) || rc;
    }
    scenario_free(&sc);
    return rc ? cli_fail("fit", &e) : cli_exit_status(&out);
}
