/* harness.c: the before/after harness (see harness.h). */
#include "run/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_kind.h"
#include "report/snapshot_out.h"
#include "util/dir.h"
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

static void judge(struct job_result *r, const struct expectation *x)
{
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

/* DIR/SCENARIO--VARIANT.pickle, DIR made if missing. */
static int write_snapshot(struct snapshot_recorder *snap, struct runner *run, const char *dir,
                          const struct scenario *sc, const struct variant *v, struct err *e)
{
    if (dir_make(dir, e))
        return err_prefix(e, "--snapshot: ");
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s--%s.pickle", dir, sc->name, v->name) >= (int)sizeof path)
        return err_set(e, ERR_INPUT, "--snapshot %s: path too long", dir);
    return snapshot_recorder_write(snap, run, path, e);
}

struct device *harness_open_device(const struct scenario *sc, const struct harness_options *opt, struct job_spec *job,
                                   struct err *e)
{
    struct device_open_options o = {.capacity = opt->capacity, .cublas_workspace_bytes = job->cublas_workspace_bytes};
    struct device *dev = device_open(opt->device ? opt->device : sc->device, &o, e);
    if (dev)
        job->cublas_workspace_bytes = dev->cublas_workspace_bytes;
    return dev;
}

int harness_run_variant(const struct scenario *sc, const struct variant *v, const struct job_spec *job_override,
                        const struct harness_options *opt, struct job_result *r, struct err *e)
{
    *r = (struct job_result){.has_expect = true, .expect_oom = v->expect.oom};
    snprintf(r->group, sizeof r->group, "%s", sc->name);
    snprintf(r->name, sizeof r->name, "%s", v->name);
    snprintf(r->alloc_conf, sizeof r->alloc_conf, "%s", v->alloc.text);
    variant_fixes_text(v, r->fixes, sizeof r->fixes);
    struct job_spec job = job_override ? *job_override : v->job;
    r->steps_planned = job.steps;
    struct err ae = {0};
    r->has_assumptions = workload_assumptions(&job, &r->assumptions, &ae) == 0;
    struct device *dev = harness_open_device(sc, opt, &job, e);
    if (!dev)
        return err_prefix(e, "%s: variant %s: ", sc->path, v->name);
    snprintf(r->device, sizeof r->device, "%s", dev->name);
    snprintf(r->device_detail, sizeof r->device_detail, "%s", dev->detail);
    snprintf(r->timed_by, sizeof r->timed_by, "%s", dev->timed_by);
    r->device_total = dev->total;
    int rc = -1;
    struct runner *run = NULL;
    struct snapshot_recorder *snap = NULL;
    if (!(run = runner_create(dev, &v->alloc, NULL))) {
        err_set(e, ERR_INTERNAL, "out of host memory");
    } else if (opt->snapshot_dir && (!(snap = snapshot_recorder_create()) ||
                                     runner_add_observer(run, snapshot_recorder_base(snap)))) {
        err_set(e, ERR_INTERNAL, "out of host memory");
    } else {
        struct err gen_err = {0};
        rc = workload_generate(&job, runner_sink(run), &gen_err);
        if (rc && runner_stopped_by_oom(run))
            rc = 0; /* the OOM is the result */
        else if (rc)
            *e = gen_err, err_prefix(e, "%s: variant %s: ", sc->path, v->name);
        runner_finish(run, &r->run);
        if (rc == 0 && snap)
            rc = write_snapshot(snap, run, opt->snapshot_dir, sc, v, e);
    }
    snapshot_recorder_destroy(snap);
    runner_destroy(run);
    dev->ops->destroy(dev);
    if (rc == 0) {
        judge(r, &v->expect);
        job_throughput(r);
    }
    return rc;
}

int harness_run_scenario(const struct scenario *sc, const struct harness_options *opt, struct job_result **out,
                         struct err *e)
{
    struct job_result *res = calloc(sc->nvariants ? sc->nvariants : 1, sizeof *res);
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
