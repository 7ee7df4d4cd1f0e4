/* cmd_check.c: `oomlab check --baseline FILE SCENARIO...`: the CI gate. Runs the scenarios (or reads a
 * results document with --results) and compares every job with the baseline document: a peak above it by
 * more than the tolerance, a job that fitted and now OOMs, modelled samples/s below it by more than the
 * tolerance, or a baseline job that is gone is a regression, and the command exits 1. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "report/gate.h"
#include "run/harness.h"
#include "util/share.h"
#include "util/size.h"

void cmd_check_usage(FILE *f)
{
    fprintf(f, "usage: oomlab check --baseline FILE [options] SCENARIO.yaml|DIR...\n"
               "       oomlab check --baseline FILE --results FILE\n"
               "  compares a run (or a results document) with a baseline results document (oomlab run --json);\n"
               "  exit 1 if a job regressed: a peak above the baseline by more than the tolerance, a job that\n"
               "  fitted and now OOMs, modelled samples/s below it by more than the tolerance, a job gone\n"
               "options:\n"
               "  --baseline FILE   the results to compare with\n"
               "  --results FILE    compare these results instead of running the scenarios\n"
               "  --tolerance SHARE how much worse a figure may be (default 2%%; 0.05 or 5%%)\n"
               "  --device DEV      run every scenario on DEV; --capacity CAP: as `oomlab run`\n"
               "  --junit FILE      the comparison as JUnit XML (a testcase per job)\n"
               "  --json FILE       the fresh run's results document, '-' for stdout\n" CLI_GPU_HELP
               "exit: 0 nothing regressed, 1 something did, 2 bad input, 3 internal error\n");
}

static json_t *load_document(const char *path, struct err *e)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc)
        err_set(e, ERR_INPUT, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    return doc;
}

/* Runs the scenarios; the results document, or NULL with e set. */
static json_t *run_all(char **paths, int n, const struct harness_options *opt, const char *json_path, struct err *e)
{
    struct report_outputs out;
    if (report_outputs_open(&out, "run", json_path, NULL, false, e))
        return NULL;
    if (report_outputs_keep_document(&out, e)) {
        report_outputs_close(&out, false, &(struct err){0});
        return NULL;
    }
    out.table = false; /* the comparison is what check prints */
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = cli_run_scenarios(paths[i], opt, &out, e);
    json_t *doc = rc ? NULL : report_outputs_document(&out);
    if (report_outputs_close(&out, rc == 0, e) || rc) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

const struct option cmd_check_options[] = {
    {"baseline", required_argument, 0, 'b'}, {"results", required_argument, 0, 'r'},
    {"tolerance", required_argument, 0, 't'}, {"device", required_argument, 0, 'd'},
    {"capacity", required_argument, 0, 'c'}, {"junit", required_argument, 0, 'J'},
    {"json", required_argument, 0, 'j'},     {"help", no_argument, 0, 'h'},
    CLI_GPU_OPTIONS,                         {0, 0, 0, 0},
};

int cmd_check(int argc, char **argv)
{
    const char *baseline_path = NULL, *results_path = NULL, *junit = NULL, *json_path = NULL;
    double tolerance = 0.02;
    struct harness_options opt = {0};
    struct err e = {0};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", cmd_check_options, NULL)) != -1) {
        int gpu = cli_gpu_option(c, optarg, &e);
        if (gpu < 0)
            return cli_fail("check", &e);
        if (gpu)
            continue;
        switch (c) {
        case 'b': baseline_path = optarg; break;
        case 'r': results_path = optarg; break;
        case 't':
            if (share_parse(optarg, &tolerance, &e) && err_prefix(&e, "--tolerance: "))
                return cli_fail("check", &e);
            break;
        case 'd': opt.device = optarg; break;
        case 'c':
            if (capacity_parse(optarg, &opt.capacity, &e) && err_prefix(&e, "--capacity: "))
                return cli_fail("check", &e);
            break;
        case 'J': junit = optarg; break;
        case 'j': json_path = optarg; break;
        case 'h': cmd_check_usage(stdout); return 0;
        default: cmd_check_usage(stderr); return 2;
        }
    }
    if (!baseline_path || (results_path ? optind != argc : optind >= argc)) {
        fprintf(stderr, "oomlab check: expected --baseline FILE and scenarios to run, or --results FILE\n");
        cmd_check_usage(stderr);
        return 2;
    }
    json_t *baseline = load_document(baseline_path, &e), *now = NULL;
    if (baseline)
        now = results_path ? load_document(results_path, &e) : run_all(argv + optind, argc - optind, &opt, json_path, &e);
    struct gate_result g;
    int rc = baseline && now ? gate_compare(baseline, now, tolerance, &g, &e) : -1;
    if (rc == 0) {
        gate_print(stdout, &g, tolerance);
        if (junit)
            rc = gate_write_junit(junit, &g, tolerance, &e);
        if (fflush(stdout) && rc == 0)
            rc = err_set(&e, ERR_INTERNAL, "cannot write to standard output");
    }
    json_decref(baseline);
    json_decref(now);
    if (rc)
        return cli_fail("check", &e);
    size_t regressions = g.regressions;
    gate_result_free(&g);
    return regressions ? 1 : 0;
}
