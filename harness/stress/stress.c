/* stress.c: `oomlab stress`'s driver (stress.h): for each allocator setting of a profile, a device, a
 * runner under that setting and the kind's generator; the run's figures and the generator's into one
 * job result. A soak's scenario is loaded once, its variant's job given the soak's steps. */
#include <stdlib.h>
#include <string.h>

#include "device/device_kind.h"
#include "report/program_text.h"
#include "run/harness.h"
#include "scenario/scenario.h"
#include "stress/profile_file.h"
#include "stress/stress_kind.h"
#include "util/output.h"

typedef int (*stress_fn)(struct stress_ctx *c, struct err *e);
static const stress_fn generators[STRESS_KIND_COUNT] = {
    [STRESS_FILL] = stress_fill,       [STRESS_CHURN] = stress_churn, [STRESS_OOM_STORM] = stress_oom_storm,
    [STRESS_SOAK] = stress_soak,       [STRESS_STREAMS] = stress_streams,
};

/* The soak's scenario and variant, and its job for the soak's steps. */
static int soak_prepare(const struct stress_profile *p, const struct stress_options *opt, struct scenario *sc,
                        const struct variant **v, struct job_spec *job, struct err *e)
{
    char path[1100];
    stress_relative_path(p->path, p->soak.scenario, path, sizeof path);
    if (scenario_load(path, sc, e))
        return err_prefix(e, "%s: soak.scenario: ", p->path);
    *v = NULL;
    for (size_t i = 0; i < sc->nvariants && !*v; i++)
        if (!strcmp(sc->variants[i].name, p->soak.variant))
            *v = &sc->variants[i];
    if (!*v)
        return err_set(e, ERR_INPUT, "%s: soak.variant: %s has no variant '%s'", p->path, path, p->soak.variant);
    *job = (*v)->job;
    job->steps = p->soak.steps;
    uint64_t limit = opt->max_forwards ? opt->max_forwards : HARNESS_MAX_FORWARDS;
    uint64_t forwards = (uint64_t)job->steps * (uint64_t)(job->grad_accum > 0 ? job->grad_accum : 1);
    if (forwards > limit)
        return err_set(e, ERR_INPUT,
                       "%s: soak.steps: %llu forward passes (steps x grad_accum), more than the %llu allowed; give "
                       "--max-forwards %llu",
                       p->path, (unsigned long long)forwards, (unsigned long long)limit, (unsigned long long)forwards);
    return 0;
}

static void describe(const struct stress_profile *p, const struct alloc_config *cfg, const struct device *dev,
                     struct job_result *j)
{
    snprintf(j->group, sizeof j->group, "%s", p->name);
    snprintf(j->name, sizeof j->name, "%s", *cfg->text ? cfg->text : "default");
    snprintf(j->fixes, sizeof j->fixes, "-");
    snprintf(j->alloc_conf, sizeof j->alloc_conf, "%s", cfg->text);
    snprintf(j->device, sizeof j->device, "%s", dev->name);
    snprintf(j->device_detail, sizeof j->device_detail, "%s", dev->detail);
    snprintf(j->timed_by, sizeof j->timed_by, "%s", dev->timed_by);
    j->device_total = dev->total;
}

/* NVML's reading of a real GPU (the device's UUID): false with why when there is none. */
static bool read_gpu(const struct device *dev, struct nvml_gpu *out, char *why, size_t n)
{
    static struct nvml_gpu g[NVML_MAX_GPUS];
    int count;
    struct err e = {0};
    if (nvml_list(g, NVML_MAX_GPUS, &count, &e)) {
        snprintf(why, n, "%.150s", e.msg);
        return false;
    }
    for (int i = 0; i < count; i++)
        if (!strcmp(g[i].uuid, dev->uuid)) {
            *out = g[i];
            return true;
        }
    snprintf(why, n, "NVML lists no GPU %.60s", dev->uuid);
    return false;
}

/* Writes each op the runner is about to execute (stress_options.program_dir). */
struct program_writer {
    struct run_observer base;
    struct output out;
};

static void write_op(struct run_observer *o, const struct op *op)
{
    op_print(((struct program_writer *)o)->out.f, op);
}

static int run_setting(const struct stress_profile *p, const struct stress_options *opt, const struct alloc_config *cfg,
                       int setting, struct stress_ctx *c, struct job_result *j, struct err *e)
{
    struct device_open_options o = {.capacity = opt->capacity,
                                    .cublas_workspace_bytes = c->job ? c->job->cublas_workspace_bytes : 0};
    struct device *dev = device_open(opt->device ? opt->device : p->device, &o, e);
    if (!dev)
        return err_prefix(e, "%s: ", p->path);
    if (c->job)
        c->job->cublas_workspace_bytes = dev->cublas_workspace_bytes;
    describe(p, cfg, dev, j);
    uint64_t free_bytes = 0, total = 0;
    dev->ops->mem_info(dev, &free_bytes, &total);
    c->res->capacity = dev->total;
    c->res->device_free_start = free_bytes;
    int rc = -1;
    struct program_writer pw = {.base.before_op = write_op};
    if (opt->program_dir) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s--%d.trace", opt->program_dir, p->name, setting + 1);
        if (output_open(&pw.out, path, e)) {
            dev->ops->destroy(dev);
            return err_prefix(e, "--program: ");
        }
        fprintf(pw.out.f, "# oomlab stress %s, alloc_conf \"%s\", on %s: the executed op program\n", p->path,
                cfg->text, dev->name);
    }
    if (!(c->run = runner_create(dev, cfg, NULL)) || (pw.out.f && runner_add_observer(c->run, &pw.base))) {
        err_set(e, ERR_INTERNAL, "out of host memory");
    } else {
        bool gpu = dev->uuid[0] && read_gpu(dev, &c->res->gpu_start, c->res->telemetry_why, sizeof c->res->telemetry_why);
        rc = generators[p->kind](c, e);
        c->res->telemetry = gpu && read_gpu(dev, &c->res->gpu_end, c->res->telemetry_why, sizeof c->res->telemetry_why);
        dev->ops->mem_info(dev, &free_bytes, &total);
        c->res->device_used_end = total - free_bytes;
        runner_finish(c->run, &j->run);
    }
    runner_destroy(c->run);
    if (rc)
        output_abort(&pw.out); /* a no-op without --program */
    else if (pw.out.f && output_commit(&pw.out, e))
        rc = -1;
    dev->ops->destroy(dev);
    return rc;
}

int stress_run(const struct stress_profile *p, const struct stress_options *opt, struct job_result *jobs,
               struct stress_result *res, struct err *e)
{
    struct scenario sc = {0};
    const struct variant *v = NULL;
    struct job_spec job;
    if (p->kind == STRESS_SOAK && soak_prepare(p, opt, &sc, &v, &job, e)) {
        scenario_free(&sc);
        return -1;
    }
    /* a soak keeps its variant's allocator settings unless the profile names its own (nsettings is 1 then) */
    const struct alloc_config *settings = v && !p->settings_given ? &v->alloc : p->settings;
    int rc = 0;
    for (int i = 0; i < p->nsettings && rc == 0; i++) {
        memset(&res[i], 0, sizeof res[i]);
        memset(&jobs[i], 0, sizeof jobs[i]);
        res[i].kind = p->kind;
        struct job_spec job_i;
        if (v)
            job_i = job;
        struct stress_ctx c = {.p = p, .res = &res[i], .rng = p->seed,
                               .job = v ? &job_i : NULL};
        rc = run_setting(p, opt, &settings[i], i, &c, &jobs[i], e);
        jobs[i].steps_planned = v ? job.steps : 0;
    }
    scenario_free(&sc);
    return rc;
}
