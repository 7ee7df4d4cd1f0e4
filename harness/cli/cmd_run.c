/* cmd_run.c: `oomlab run FILE|DIR...`: every variant of every scenario, a before/after table per scenario,
 * optional JSON, CSV and TAP; exit 1 if any expectation fails. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "report/json_out.h"
#include "report/run_report.h"
#include "util/output.h"
#include "util/size.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: oomlab run [options] SCENARIO.yaml|DIR...\n"
               "  runs every variant (before = the faults, after = faults + fixes) of every scenario\n"
               "options:\n"
               "  --device DEV     run every scenario on DEV instead of its own (sim:PROFILE, sim:SIZE,\n"
               "                   host, host:SIZE|FRACTION, cuda, cuda:N)\n"
               "  --capacity CAP   override the device capacity: a size (24GiB) or a share of the\n"
               "                   device's memory (0.5 or 50%%)\n"
               "  --json FILE      results as JSON (memory_stats key names), '-' for stdout\n"
               "  --csv FILE       one row per variant, '-' for stdout\n"
               "  --tap            one TAP line per expectation instead of the tables\n"
               "exit: 0 every expectation holds, 1 one failed, 2 bad input, 3 internal or device error\n");
}

struct outputs {
    json_t *json;
    struct output csv;
    bool tap;
    int tap_count, failures;
};

static int run_path(const char *path, const struct harness_options *opt, struct outputs *out, struct err *e)
{
    struct scenario *sc;
    size_t n;
    if (scenario_load_dir_or_file(path, &sc, &n, e))
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct variant_result *r;
        if ((rc = harness_run_scenario(&sc[i], opt, &r, e)))
            break;
        if (out->tap)
            out->failures += report_tap(stdout, r, sc[i].nvariants, &out->tap_count);
        else {
            report_table(stdout, &sc[i], r, sc[i].nvariants);
            for (size_t k = 0; k < sc[i].nvariants; k++)
                out->failures += !r[k].expect_ok;
        }
        fflush(stdout);
        if (out->json)
            report_json_add(out->json, &sc[i], r, sc[i].nvariants);
        if (out->csv.f)
            report_csv_rows(out->csv.f, r, sc[i].nvariants);
        free(r);
    }
    scenario_free_all(sc, n);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"device", required_argument, 0, 'd'}, {"capacity", required_argument, 0, 'c'},
        {"json", required_argument, 0, 'j'},   {"csv", required_argument, 0, 'v'},
        {"tap", no_argument, 0, 't'},          {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    struct harness_options opt = {0};
    const char *json_path = NULL, *csv_path = NULL, *capacity_s = NULL;
    struct outputs out = {0};
    struct err e = {0};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': opt.device = optarg; break;
        case 'c': capacity_s = optarg; break;
        case 'j': json_path = optarg; break;
        case 'v': csv_path = optarg; break;
        case 't': out.tap = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "oomlab run: expected at least one scenario file or directory\n");
        usage(stderr);
        return 2;
    }
    if (capacity_s && capacity_parse(capacity_s, &opt.capacity, &e)) {
        fprintf(stderr, "oomlab run: --capacity: %s\n", e.msg);
        return 2;
    }
    if (json_path)
        out.json = json_array();
    bool csv_stdout = csv_path && !strcmp(csv_path, "-");
    if (csv_path && !csv_stdout && output_open(&out.csv, csv_path, &e)) {
        fprintf(stderr, "oomlab run: %s\n", e.msg);
        json_decref(out.json);
        return 2;
    }
    if (csv_stdout)
        out.csv.f = stdout;
    if (out.csv.f)
        report_csv_header(out.csv.f);
    int rc = 0;
    for (int i = optind; i < argc && rc == 0; i++)
        rc = run_path(argv[i], &opt, &out, &e);
    if (rc == 0 && json_path) {
        json_t *root = json_pack("{s:o}", "scenarios", out.json);
        out.json = NULL;
        rc = json_write_file(json_path, root, &e);
    }
    if (rc == 0 && csv_path && !csv_stdout)
        rc = output_commit(&out.csv, &e);
    else if (csv_path && !csv_stdout)
        output_abort(&out.csv);
    json_decref(out.json);
    if (out.tap)
        printf("1..%d\n", out.tap_count);
    if (rc) {
        fprintf(stderr, "oomlab run: %s\n", e.msg);
        return e.code == ERR_INPUT ? 2 : 3;
    }
    return out.failures ? 1 : 0;
}
