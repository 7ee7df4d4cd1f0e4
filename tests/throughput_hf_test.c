/* throughput_hf_test.c: modelled throughput against a published measurement. Hugging Face's "Efficient
 * Training on a Single GPU" (transformers perf_train_gpu_one, 2022) trained bert-large-uncased at
 * sequence length 512 on a V100 in nine configurations (tests/data/throughput/hf-bert-large-v100.*).
 * oomlab runs them on sim:v100-16@cuda11.2; for each, the modelled samples/s relative to the vanilla
 * run must be within 15% of the measured ratio, and the samples/s itself within 30%. The ratios are
 * what users decide with ("is fp16 plus checkpointing at batch 1 faster than fp32 at batch 4?").
 * The one constant taken from this table is PyTorch 1.x's host time per op (profiles.c), fixed on
 * the batch-1, checkpointed fp16 run; the other rows test it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "run/harness.h"
#include "tap.h"

#define SCENARIO "tests/data/throughput/hf-bert-large-v100.yaml"
#define MEASURED "tests/data/throughput/hf-bert-large-v100.tsv"
#define RATIO_TOLERANCE 0.15
#define ABSOLUTE_TOLERANCE 0.30

struct measured {
    char variant[64];
    double samples_per_s;
};

static int read_measured(struct measured *m, int max)
{
    FILE *f = fopen(MEASURED, "r");
    if (!f)
        return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < max)
        if (line[0] != '#' && sscanf(line, "%63s %lf", m[n].variant, &m[n].samples_per_s) == 2)
            n++;
    fclose(f);
    return n;
}

static const struct job_result *find(const struct job_result *r, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(r[i].name, name))
            return &r[i];
    return NULL;
}

int main(void)
{
    struct measured m[16];
    int nm = read_measured(m, 16);
    if (!ok(nm == 9 && !strcmp(m[0].variant, "before"), MEASURED " has the nine configurations, vanilla first"))
        return done_testing();
    struct scenario sc;
    struct err e = {0};
    struct job_result *r = NULL;
    if (!ok(scenario_load(SCENARIO, &sc, &e) == 0, SCENARIO " loads%s", e.msg))
        return done_testing();
    if (!ok(harness_run_scenario(&sc, &(struct harness_options){0}, &r, &e) == 0, "its variants run%s", e.msg)) {
        scenario_free(&sc);
        return done_testing();
    }
    const struct job_result *base = find(r, sc.nvariants, "before");
    ok(base && base->samples_per_s > 0 && strstr(base->timed_by, "kernel-time model for Volta (v100-16, PyTorch 1.x"),
       "vanilla is modelled with Volta's calibration and PyTorch 1.x's host time: %s", base ? base->timed_by : "-");
    diag("%-28s %9s %9s %7s %7s %8s %8s", "variant", "measured", "modelled", "ratio", "ratio", "ratio", "samples");
    diag("%-28s %9s %9s %7s %7s %8s %8s", "", "sample/s", "sample/s", "meas.", "model", "error", "error");
    for (int i = 0; base && i < nm; i++) {
        const struct job_result *j = find(r, sc.nvariants, m[i].variant);
        if (!ok(j != NULL && j->samples_per_s > 0, "%s ran and was timed", m[i].variant))
            continue;
        double want = m[i].samples_per_s / m[0].samples_per_s, got = j->samples_per_s / base->samples_per_s;
        double ratio_err = got / want - 1, abs_err = j->samples_per_s / m[i].samples_per_s - 1;
        diag("%-28s %9.2f %9.2f %7.3f %7.3f %+7.1f%% %+7.1f%%", m[i].variant, m[i].samples_per_s, j->samples_per_s,
             want, got, 100 * ratio_err, 100 * abs_err);
        ok(fabs(ratio_err) <= RATIO_TOLERANCE, "%s: modelled %.3fx of vanilla, measured %.3fx (within 15%%)",
           m[i].variant, got, want);
        ok(fabs(abs_err) <= ABSOLUTE_TOLERANCE, "%s: modelled %.2f samples/s, measured %.2f (within 30%%)",
           m[i].variant, j->samples_per_s, m[i].samples_per_s);
    }
    free(r);
    scenario_free(&sc);
    return done_testing();
}
