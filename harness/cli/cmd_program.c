/* cmd_program.c: `oomlab program SCENARIO [--variant NAME]`: prints the op program the workload generator
 * emits for one variant, one op per line, for the scenario's device (opened as `oomlab run` opens it, so
 * the cuBLAS workspace is the one the run allocates). A job with an OOM policy (job.robust) is run, and
 * what the runner executed is printed: its retries depend on where it runs out of memory. A pipeline-parallel
 * job prints one stage's program (--stage). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "report/program_text.h"
#include "run/harness.h"
#include "scenario/scenario.h"
#include "workload/generate.h"
#include "workload/parallel_pipeline.h"

void cmd_program_usage(FILE *f)
{
    fprintf(f, "usage: oomlab program [--variant NAME] [--stage N] SCENARIO.yaml\n"
               "  prints the op program of one variant (default: before), one op per line, in the text form\n"
               "  `oomlab replay` reads\n"
               "options:\n"
               "  --variant NAME   the variant (default before)\n"
               "  --stage N        a pipeline-parallel job's stage N (default 0, the first)\n");
}

/* A robust job's program: what its run executes. 0, or -1 with e. */
static int print_run(const struct scenario *sc, const struct variant *v, struct err *e)
{
    printf("# job.robust: the ops its run executed, retries included (they depend on where it runs out of memory)\n");
    struct job_result *r = malloc(sizeof *r);
    if (!r)
        return err_set(e, ERR_INTERNAL, "out of host memory");
    int rc = harness_run_variant(sc, v, NULL, &(struct harness_options){.program_out = stdout}, r, e);
    free(r);
    return rc;
}

/* --stage N names a stage of the variant's pipeline. */
static bool pipeline_stage_arg(const struct variant *v, const char *arg)
{
    char *end;
    long n = strtol(arg, &end, 10);
    return *arg && !*end && pipeline_on(&v->job) && n >= 0 && n < v->job.parallel.pipeline_parallel;
}

const struct option cmd_program_options[] = {
    {"variant", required_argument, 0, 'v'}, {"stage", required_argument, 0, 's'}, {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0}};

int cmd_program(int argc, char **argv)
{
    const char *want = "before", *stage = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", cmd_program_options, NULL)) != -1) {
        if (c == 'v')
            want = optarg;
        else if (c == 's')
            stage = optarg;
        else {
            cmd_program_usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? 0 : 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "oomlab program: expected one scenario file\n");
        return 2;
    }
    struct scenario sc;
    struct err e = {0};
    if (scenario_load(argv[optind], &sc, &e)) {
        fprintf(stderr, "oomlab program: %s\n", e.msg);
        return 2;
    }
    const struct variant *v = NULL;
    for (size_t i = 0; i < sc.nvariants && !v; i++)
        if (!strcmp(sc.variants[i].name, want))
            v = &sc.variants[i];
    int rc = 0;
    if (!v) {
        fprintf(stderr, "oomlab program: %s has no variant '%s'\n", argv[optind], want);
        rc = 2;
    } else if (stage && !pipeline_stage_arg(v, stage)) {
        int n = v->job.parallel.pipeline_parallel;
        fprintf(stderr, "oomlab program: --stage %s: variant %s has %d pipeline stage%s "
                        "(job.parallel.pipeline_parallel)\n", stage, v->name, n, n == 1 ? "" : "s");
        rc = 2;
    } else {
        struct job_spec job = v->job;
        job.parallel.pipeline_stage = stage ? atoi(stage) : 0;
        struct device *dev = harness_open_device(&sc, &(struct harness_options){0}, &job, &e);
        if (!dev) {
            fprintf(stderr, "oomlab program: %s: %s\n", argv[optind], e.msg);
            rc = e.code == ERR_INPUT ? 2 : 3;
        } else {
            struct text_sink sink;
            text_sink_init(&sink, stdout);
            printf("# op program of %s, variant %s, alloc_conf '%s'\n", sc.name, v->name, v->alloc.text);
            if (pipeline_on(&job))
                printf("# pipeline stage %d of %d\n", job.parallel.pipeline_stage, job.parallel.pipeline_parallel);
            printf("# device %s%s%s%s, cuBLAS workspace %llu B per stream\n", dev->name, dev->detail[0] ? " (" : "",
                   dev->detail, dev->detail[0] ? ")" : "", (unsigned long long)job.cublas_workspace_bytes);
            dev->ops->destroy(dev);
            if (job.robust.on_oom != ON_OOM_FAIL ? print_run(&sc, v, &e) : workload_generate(&job, &sink.sink, &e)) {
                fprintf(stderr, "oomlab program: %s\n", e.msg);
                rc = e.code == ERR_INPUT ? 2 : 3;
            }
        }
    }
    scenario_free(&sc);
    return rc;
}
