/* cmd_fit.c: `oomlab fit SCENARIO`: the largest batch size (or sequence length, or image size) each variant
 * can run with on its device, optionally leaving a margin of the device free, and the throughput at that
 * size, so a fix's value reads as "how much more fits, and how fast it runs". */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "run/fit.h"
#include "util/size.h"

/* "5", "5%" or "2.5%": a percentage in [0, 100), as a fraction; -1 if malformed. */
static double parse_percent(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || (*end && strcmp(end, "%")) || !isfinite(v) || v < 0 || v >= 100)
        return -1;
    return v / 100.0;
}

/* "1234.5 samples/s (modelled)", or "-" when the run reports none. */
static void throughput_text(const struct variant_result *r, char *buf, size_t len)
{
    if (r->samples_per_s > 0)
        snprintf(buf, len, "%.2f (%s)", r->samples_per_s, r->run.measured ? "measured" : "modelled");
    else
        snprintf(buf, len, "-");
}

int cmd_fit(int argc, char **argv)
{
    static const struct option opts[] = {
        {"param", required_argument, 0, 'p'},  {"limit", required_argument, 0, 'l'},
        {"device", required_argument, 0, 'd'}, {"capacity", required_argument, 0, 'c'},
        {"margin", required_argument, 0, 'm'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    struct harness_options opt = {0};
    const char *capacity_s = NULL;
    struct fit_options fo = {FIT_BATCH, 4096, 0.0};
    int c;
    struct err e = {0};
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (!strcmp(optarg, "batch_size"))
                fo.param = FIT_BATCH;
            else if (!strcmp(optarg, "seq_len"))
                fo.param = FIT_SEQ_LEN;
            else if (!strcmp(optarg, "image_size"))
                fo.param = FIT_IMAGE_SIZE;
            else {
                fprintf(stderr, "oomlab fit: --param must be batch_size, seq_len or image_size\n");
                return 2;
            }
            break;
        case 'l': fo.limit = atoi(optarg); break;
        case 'm':
            if ((fo.margin = parse_percent(optarg)) < 0) {
                fprintf(stderr, "oomlab fit: --margin '%s': a percentage of the device from 0 to below 100 (\"5%%\")\n",
                        optarg);
                return 2;
            }
            break;
        case 'd': opt.device = optarg; break;
        case 'c':
            capacity_s = optarg;
            if (capacity_parse(optarg, &opt.capacity, &e)) {
                fprintf(stderr, "oomlab fit: --capacity: %s\n", e.msg);
                return 2;
            }
            break;
        case 'h':
        default:
            fprintf(c == 'h' ? stdout : stderr,
                    "usage: oomlab fit [--param batch_size|seq_len|image_size] [--limit N] [--device DEV]\n"
                    "                  [--capacity SIZE|FRACTION] [--margin PCT] SCENARIO.yaml\n"
                    "  the largest value of the parameter with which each variant runs without an OOM\n"
                    "  and, with --margin, with PCT of the device's capacity still free at the reserved\n"
                    "  peak; with the samples/s at that value\n");
            return c == 'h' ? 0 : 2;
        }
    }
    if (optind != argc - 1 || fo.limit < 1) {
        fprintf(stderr, "oomlab fit: expected one scenario file (and a positive --limit)\n");
        return 2;
    }
    struct scenario sc;
    if (scenario_load(argv[optind], &sc, &e)) {
        fprintf(stderr, "oomlab fit: %s\n", e.msg);
        return 2;
    }
    static const char *const names[] = {"batch_size", "seq_len", "image_size"};
    printf("== %s: largest %s that fits", sc.name, names[fo.param]);
    if (fo.margin > 0)
        printf(" with %g%% of the device free", fo.margin * 100.0);
    printf(" (modelled on %s%s%s unless the device measures)\n", opt.device ? opt.device : sc.device,
           capacity_s ? " with capacity " : "", capacity_s ? capacity_s : "");
    printf("   %-22s %-44s %8s %12s %-24s %7s\n", "variant", "fixes", names[fo.param], "peak resv", "samples/s",
           "probes");
    int rc = 0;
    for (size_t i = 0; i < sc.nvariants && rc == 0; i++) {
        struct fit_result f;
        if (fit_variant(&sc, &sc.variants[i], &opt, &fo, &f, &e)) {
            fprintf(stderr, "oomlab fit: %s\n", e.msg);
            rc = e.code == ERR_INPUT ? 2 : 3;
            break;
        }
        char fixes[256], resv[32], rate[48];
        variant_fixes_text(&sc.variants[i], fixes, sizeof fixes);
        snprintf(resv, sizeof resv, "%.2f GiB", (double)f.at_largest.run.peak_reserved / (double)GiB);
        throughput_text(&f.at_largest, rate, sizeof rate);
        printf("   %-22s %-44s %7d%s %12s %-24s %7d\n", sc.variants[i].name, fixes, f.largest, f.hit_limit ? "+" : " ",
               f.largest ? resv : "-", f.largest ? rate : "-", f.probes);
    }
    scenario_free(&sc);
    return rc;
}
