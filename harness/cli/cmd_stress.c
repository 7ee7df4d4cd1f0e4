/* cmd_stress.c: `oomlab stress PROFILE|DIR...`: every stress profile (scenarios/stress/) under each of its
 * allocator settings, a table per profile, optional JSON, CSV and TAP; exit 1 if a check fails. Every
 * profile is loaded before the first runs, so a bad one fails (exit 2) with nothing written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "scenario/scenario.h"
#include "stress/stress.h"
#include "util/dir.h"
#include "util/size.h"

void cmd_stress_usage(FILE *f)
{
    fprintf(f, "usage: oomlab stress [options] PROFILE.yaml|DIR...\n"
               "  runs stress profiles (kind fill, churn, oom_storm, soak or streams; keys in docs/stress-keys.md)\n"
               "  under each of their allocator settings and checks the allocator's invariants\n"
               "options:\n"
               "  --device DEV     run every profile on DEV instead of its own (sim:PROFILE, sim:SIZE, host,\n"
               "                   host:SIZE|FRACTION, cuda, cuda:N, cuda:auto)\n"
               "  --capacity CAP   override the device capacity: a size (24GiB) or a share (0.5 or 50%%)\n"
               "  --max-forwards N a soak's job may run up to N forward passes (default 100000)\n"
               "  --program DIR    write each setting's executed op program there as text, PROFILE--N.trace\n"
               "                   (N: the setting's place in alloc_conf, from 1), which oomlab replay runs\n" CLI_REPORT_HELP
               "on cuda the same op programs run with real cudaMalloc through the plugin, with a cuBLAS GEMM load\n"
               "while churning (churn.burn_every) and NVML's telemetry of the GPU before and after each run\n"
               "exit: 0 every check holds, 1 one failed, 2 bad input, 3 internal or device error\n");
}

const struct option cmd_stress_options[] = {
    {"device", required_argument, 0, 'd'}, {"capacity", required_argument, 0, 'c'},
    {"max-forwards", required_argument, 0, 'F'}, {"program", required_argument, 0, 'P'},
    {"help", no_argument, 0, 'h'},
    CLI_REPORT_OPTIONS,
    {0, 0, 0, 0},
};

struct profiles {
    struct stress_profile *p;
    size_t n, cap;
};

static int add_profile(struct profiles *ps, const char *path, struct err *e)
{
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 8;
        struct stress_profile *grown = realloc(ps->p, cap * sizeof *grown);
        if (!grown)
            return err_set(e, ERR_INTERNAL, "out of host memory");
        ps->p = grown;
        ps->cap = cap;
    }
    int rc = stress_profile_load(path, &ps->p[ps->n], e);
    if (rc)
        stress_profile_free(&ps->p[ps->n]);
    else
        ps->n++;
    return rc;
}

/* A profile file, or every *.yaml of a directory in name order. */
static int add_path(struct profiles *ps, const char *path, struct err *e)
{
    DIR *d = opendir(path); /* (alloc/stats.h's struct stat hides sys/stat.h's) */
    if (!d)
        return add_profile(ps, path, e);
    closedir(d);
    char **names;
    size_t n;
    if (scenario_list_yaml_files(path, &names, &n, e))
        return -1;
    int rc = 0;
    size_t len = strlen(path);
    for (size_t i = 0; i < n; i++) {
        char full[1100];
        snprintf(full, sizeof full, "%s%s%s", path, len && path[len - 1] == '/' ? "" : "/", names[i]);
        if (rc == 0)
            rc = add_profile(ps, full, e);
        free(names[i]);
    }
    free(names);
    return rc;
}

static int run_profile(const struct stress_profile *p, const struct stress_options *opt, struct report_outputs *out,
                       struct err *e)
{
    struct job_result *jobs = calloc((size_t)p->nsettings, sizeof *jobs);
    struct stress_result *res = calloc((size_t)p->nsettings, sizeof *res);
    int rc = jobs && res ? stress_run(p, opt, jobs, res, e) : err_set(e, ERR_INTERNAL, "out of host memory");
    if (rc == 0) {
        struct report_group g = {.kind = REPORT_STRESS, .name = p->name, .title = p->title, .file = p->path,
                                 .jobs = jobs, .njobs = (size_t)p->nsettings, .stress = res};
        report_outputs_add(out, &g);
    }
    free(jobs);
    free(res);
    return rc;
}

int cmd_stress(int argc, char **argv)
{
    struct stress_options opt = {0};
    struct cli_report_args ra = {0};
    struct err e = {0};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", cmd_stress_options, NULL)) != -1) {
        if (cli_report_option(c, optarg, &ra))
            continue;
        switch (c) {
        case 'd': opt.device = optarg; break;
        case 'c':
            if (capacity_parse(optarg, &opt.capacity, &e) && err_prefix(&e, "--capacity: "))
                return cli_fail("stress", &e);
            break;
        case 'F':
            if (cli_count_option("--max-forwards", optarg, &opt.max_forwards, &e))
                return cli_fail("stress", &e);
            break;
        case 'P': opt.program_dir = optarg; break;
        case 'h': cmd_stress_usage(stdout); return 0;
        default: cmd_stress_usage(stderr); return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "oomlab stress: expected at least one profile file or directory\n");
        cmd_stress_usage(stderr);
        return 2;
    }
    if (opt.program_dir && dir_make(opt.program_dir, &e) && err_prefix(&e, "--program: "))
        return cli_fail("stress", &e);
    struct profiles ps = {0};
    int rc = 0;
    for (int i = optind; i < argc && rc == 0; i++)
        rc = add_path(&ps, argv[i], &e);
    struct report_outputs out;
    if (rc == 0 && report_outputs_open(&out, "stress", ra.json, ra.csv, ra.tap, &e))
        rc = -1;
    else if (rc == 0) {
        for (size_t i = 0; i < ps.n && rc == 0; i++)
            rc = run_profile(&ps.p[i], &opt, &out, &e);
        if (report_outputs_close(&out, rc == 0, &e))
            rc = -1;
    }
    for (size_t i = 0; i < ps.n; i++)
        stress_profile_free(&ps.p[i]);
    free(ps.p);
    if (rc)
        return cli_fail("stress", &e);
    return cli_exit_status(&out);
}
