/* harness.c: the before/after harness (see harness.h). */
#include "run/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_open.h"
#include "device/sim.h"
#include "workload/generate.h"

void variant_fixes_text(const struct variant *v, char *buf, size_t len)
{
    int count;
    const struct switch_info *fixes = fix_table(&count);
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < count; i++) {
        if (!spec_has_fix(&v->job, (enum fix_id)fixes[i].id))
            continue;
        int n = snprintf(buf + at, len - at, "%s%s", at ? "," : "", fixes[i].name);
        if (n < 0 || (size_t)n >= len - at)
            break;
        at += (size_t)n;
    }
    if (!at)
        snprintf(buf, len, "-");
}

static void judge(struct variant_result *r)
{
    const struct expectation *x = &r->variant->expect;
    const struct run_result *run = &r->run;
    char why[256] = "";
    if (x->oom && !run->oom.happened)
        snprintf(why, sizeof why, "expected an OOM, but the job fits");
    else if (!x->oom && run->oom.happened)
        snprintf(why, sizeof why, "expected it to fit, but it OOMs in %s", run->oom.phase);
    else if (x->oom && x->oom_phase[0] && strcmp(x->oom_phase, run->oom.phase))
        snprintf(why, sizeof why, "expected the OOM in %s, got it in %s", x->oom_phase, run->oom.phase);
    else if (x->peak_reserved_max && run->peak_reserved > x->peak_reserved_max)
        snprintf(why, sizeof why, "peak reserved %llu B is above the bound %llu B",
                 (unsigned long long)run->peak_reserved, (unsigned long long)x->peak_reserved_max);
    else if (x->peak_reserved_min && run->peak_reserved < x->peak_reserved_min)
        snprintf(why, sizeof why, "peak reserved %llu B is below the bound %llu B",
                 (unsigned long long)run->peak_reserved, (unsigned long long)x->peak_reserved_min);
    r->expect_ok = why[0] == '\0';
    snprintf(r->expect_why, sizeof r->expect_why, "%s", why);
}

/* Steps per second: on a measured device from the median step (robust to a noisy machine: the first
 * step's page faults, another process), on sim from the modelled total over the job's steps. */
static void throughput(struct variant_result *r)
{
    double train = 0;
    for (size_t i = 0; i < r->run.nphases; i++)
        if (phase_is_training(r->run.phases[i].name)) {
            train += r->run.phases[i].seconds;
            r->train_flops += r->run.phases[i].flops;
        }
    r->train_seconds = train;
    if (r->run.oom.happened || train <= 0 || r->run.steps <= 0)
        return;
    if (r->run.measured && r->run.step_seconds_median > 0)
        r->steps_per_s = 1.0 / r->run.step_seconds_median;
    else
        r->steps_per_s = (double)r->run.steps / train;
    r->samples_per_s = r->steps_per_s * (double)r->run.samples / (double)r->run.steps;
}

int harness_run_variant(const struct scenario *sc, const struct variant *v, const struct job_spec *job_override,
                        const struct harness_options *opt, struct variant_result *r, struct err *e)
{
    *r = (struct variant_result){.scenario = sc, .variant = v};
    const char *device = opt->device ? opt->device : sc->device;
    struct runner_ref ref = {0};
    struct cuda_workspace_alloc ws = {runner_workspace_alloc, runner_workspace_free, &ref};
    struct device *dev = device_open(device, opt->capacity, &ws, e);
    if (!dev)
        return err_prefix(e, "%s: variant %s: ", sc->path, v->name);
    snprintf(r->device, sizeof r->device, "%s", dev->name);
    r->device_total = dev->total;
    const struct gpu_profile *profile = NULL;
    if (device_is_sim(dev)) {
        profile = sim_device_profile(dev);
        if (!profile)
            profile = gpu_profile_find("rtx5090"); /* a bare sim:SIZE is timed with the RTX 5090's rates */
        r->rates_from = profile->name;
    }
    struct job_spec job = job_override ? *job_override : v->job;
    if (profile)
        job.cublas_workspace_bytes = profile->cublas_workspace_bytes;
    int rc = -1;
    struct runner *run = NULL;
    if (!(run = runner_create(dev, &v->alloc, profile))) {
        err_set(e, ERR_INTERNAL, "out of host memory");
    } else {
        ref.runner = run;
        struct err gen_err = {0};
        rc = workload_generate(&job, runner_sink(run), &gen_err);
        if (rc && runner_stopped_by_oom(run))
            rc = 0; /* the OOM is the result */
        else if (rc)
            *e = gen_err, err_prefix(e, "%s: variant %s: ", sc->path, v->name);
        runner_finish(run, &r->run);
    }
    ref.runner = NULL; /* the device gives its workspaces back at destroy; the allocator is gone by then */
    runner_destroy(run);
    dev->ops->destroy(dev);
    if (rc == 0) {
        judge(r);
        throughput(r);
    }
    return rc;
}

int harness_run_scenario(const struct scenario *sc, const struct harness_options *opt, struct variant_result **out,
                         struct err *e)
{
    struct variant_result *res = calloc(sc->nvariants ? sc->nvariants : 1, sizeof *res);
    if (!res)
        return err_set(e, ERR_INTERNAL, "out of host memory");
    for (size_t i = 0; i < sc->nvariants; i++) {
        if (harness_run_variant(sc, &sc->variants[i], NULL, opt, &res[i], e)) {
            free(res);
            return -1;
        }
    }
    *out = res;
    return 0;
}
