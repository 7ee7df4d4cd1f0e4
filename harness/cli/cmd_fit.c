/* cmd_fit.c: `oomlab fit SCENARIO`: the largest batch size (or sequence length, or image size) each variant
 * can run with on its device, so a fix's value reads as "how much more fits". */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "run/fit.h"
#include "util/size.h"

int cmd_fit(int argc, char **argv)
{
    static const struct option opts[] = {
        {"param", required_argument, 0, 'p'},  {"limit", required_argument, 0, 'l'},
        {"device", required_argument, 0, 'd'}, {"capacity", required_argument, 0, 'c'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0},
    };
    struct harness_options opt = {0};
    enum fit_param param = FIT_BATCH;
    int limit = 4096, c;
    struct err e = {0};
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (!strcmp(optarg, "batch_size"))
                param = FIT_BATCH;
            else if (!strcmp(optarg, "seq_len"))
                param = FIT_SEQ_LEN;
            else if (!strcmp(optarg, "image_size"))
                param = FIT_IMAGE_SIZE;
            else {
                fprintf(stderr, "oomlab fit: --param must be batch_size, seq_len or image_size\n");
                return 2;
            }
            break;
        case 'l': limit = atoi(optarg); break;
        case 'd': opt.device = optarg; break;
        case 'c':
            if (size_parse(optarg, &opt.capacity, &e)) {
                fprintf(stderr, "oomlab fit: --capacity: %s\n", e.msg);
                return 2;
            }
            break;
        case 'h':
        default:
            fprintf(c == 'h' ? stdout : stderr,
                    "usage: oomlab fit [--param batch_size|seq_len|image_size] [--limit N] [--device DEV]\n"
                    "                  [--capacity SIZE] SCENARIO.yaml\n"
                    "  the largest value of the parameter with which each variant runs without an OOM\n");
            return c == 'h' ? 0 : 2;
        }
    }
    if (optind != argc - 1 || limit < 1) {
        fprintf(stderr, "oomlab fit: expected one scenario file (and a positive --limit)\n");
        return 2;
    }
    struct scenario sc;
    if (scenario_load(argv[optind], &sc, &e)) {
        fprintf(stderr, "oomlab fit: %s\n", e.msg);
        return 2;
    }
    static const char *const names[] = {"batch_size", "seq_len", "image_size"};
    printf("== %s: largest %s that fits (modelled on %s unless the device measures)\n", sc.name, names[param],
           opt.device ? opt.device : sc.device);
    printf("   %-22s %-44s %8s %12s %7s\n", "variant", "fixes", names[param], "peak resv", "probes");
    int rc = 0;
    for (size_t i = 0; i < sc.nvariants && rc == 0; i++) {
        struct fit_result f;
        if (fit_variant(&sc, &sc.variants[i], &opt, param, limit, &f, &e)) {
            fprintf(stderr, "oomlab fit: %s\n", e.msg);
            rc = e.code == ERR_INPUT ? 2 : 3;
            break;
        }
        char fixes[256], resv[32];
        variant_fixes_text(&sc.variants[i], fixes, sizeof fixes);
        snprintf(resv, sizeof resv, "%.2f GiB", (double)f.at_largest.peak_reserved / (double)GiB);
        printf("   %-22s %-44s %7d%s %12s %7d\n", sc.variants[i].name, fixes, f.largest, f.hit_limit ? "+" : " ",
               f.largest ? resv : "-", f.probes);
    }
    scenario_free(&sc);
    return rc;
}
