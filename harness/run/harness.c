/* harness.c: the before/after harness (see harness.h). */
#include "run/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_kind.h"
#include "report/perfetto.h"
#include "report/plot.h"
#include "report/program_text.h"
#include "report/snapshot_out.h"
#include "run/fit.h"
#include "run/progress.h"
#include "run/robust.h"
#include "run/timeline.h"
#include "util/dir.h"
#include "util/size.h"
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

/* "peak reserved 14.03 GiB (15061745664 bytes) is above the bound 14.00 GiB" */
static void bound_missed(char *why, size_t len, uint64_t got, const char *side, uint64_t bound)
{
    char g[32], b[32];
    size_format_pytorch(got, g, sizeof g);
    size_format_pytorch(bound, b, sizeof b);
    snprintf(why, len, "peak reserved %s (%llu bytes) is %s the bound %s", g, (unsigned long long)got, side, b);
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
        bound_missed(why, sizeof why, run->peak_reserved, "above", x->peak_reserved_max);
    else if (x->peak_reserved_min && run->peak_reserved < x->peak_reserved_min)
        bound_missed(why, sizeof why, run->peak_reserved, "below", x->peak_reserved_min);
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

/* --plot DIR: DIR/SCENARIO--VARIANT-timeline and -segments; --perfetto DIR: DIR/SCENARIO--VARIANT.json. */
static int write_pictures(struct timeline *tl, const struct harness_options *opt, const struct scenario *sc,
                          const struct variant *v, const struct job_result *r, struct err *e)
{
    char stem[4096], path[4096];
    snprintf(stem, sizeof stem, "%s--%s", sc->name, v->name);
    if (opt->plot_dir && plot_run_write(opt->plot_dir, stem, tl, r, e))
        return -1;
    if (!opt->perfetto_dir)
        return 0;
    if (dir_make(opt->perfetto_dir, e))
        return err_prefix(e, "--perfetto: ");
    if (snprintf(path, sizeof path, "%s/%s.json", opt->perfetto_dir, stem) >= (int)sizeof path)
        return err_set(e, ERR_INPUT, "--perfetto %s: path too long", opt->perfetto_dir);
    return perfetto_write(path, tl, r, e);
}

/* Forward passes the job runs: its micro-steps (a pipeline's on every stage) and its eval forwards
 * (each denoising step is one); a
 * generate job's prefill and decode steps, new_tokens per call; an eval job's one evaluation. */
static uint64_t forward_passes(const struct job_spec *j)
{
    if (j->kind == JOB_GENERATE)
        return (uint64_t)j->steps * (uint64_t)j->generate.new_tokens;
    if (j->kind == JOB_DIFFUSION) /* per pipeline call: its UNet steps and a decode */
        return (uint64_t)j->steps * ((uint64_t)j->diffusion.steps + 1);
    uint64_t train = j->kind == JOB_EVAL ? 0 : (uint64_t)j->steps * (uint64_t)j->grad_accum;
    train *= (uint64_t)j->parallel.micro_batches * (uint64_t)j->parallel.pipeline_parallel; /* each stage is run */
    uint64_t evals = j->kind == JOB_EVAL ? 1
                                         : (j->eval.every > 0 ? (uint64_t)(j->steps / j->eval.every) : 0) +
                                               j->eval.before_training;
    uint64_t per_eval = (uint64_t)(j->eval.batches > 0 ? j->eval.batches : 1) *
                        (uint64_t)(j->eval.sampling_steps > 0 ? j->eval.sampling_steps : 1);
    return train + evals * per_eval;
}

static int check_work(const struct job_spec *job, const struct harness_options *opt, struct err *e)
{
    uint64_t limit = opt->max_forwards ? opt->max_forwards : HARNESS_MAX_FORWARDS, n = forward_passes(job);
    if (n <= limit)
        return 0;
    return err_set(e, ERR_INPUT,
                   "the job runs %llu forward passes (steps x grad_accum, a pipeline's x micro_batches x stages, plus "
                   "eval batches x sampling steps; "
                   "generate: steps x new_tokens; diffusion: steps x (diffusion.steps + 1)), more "
                   "than the %llu oomlab runs without --max-forwards; give --max-forwards %llu to run it",
                   (unsigned long long)n, (unsigned long long)limit, (unsigned long long)n);
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

/* Prints each op as the runner is about to execute it (harness_options.program_out). */
struct program_printer {
    struct run_observer base;
    FILE *f;
};

static void print_op(struct run_observer *o, const struct op *op)
{
    op_print(((struct program_printer *)o)->f, op);
}

/* One device's run of the job into r's run figures: the job as written, or under its OOM policy (rr). */
static int run_on_device(const struct scenario *sc, const struct variant *v, struct job_spec *job,
                         const struct harness_options *opt, struct robust_run *rr, struct job_result *r, struct err *e)
{
    struct device *dev = harness_open_device(sc, opt, job, e);
    if (!dev)
        return err_prefix(e, "%s: variant %s: ", sc->path, v->name);
    snprintf(r->device, sizeof r->device, "%s", dev->name);
    snprintf(r->device_detail, sizeof r->device_detail, "%s", dev->detail);
    snprintf(r->timed_by, sizeof r->timed_by, "%s", dev->timed_by);
    r->device_total = dev->total;
    int rc = -1;
    struct runner *run = NULL;
    struct snapshot_recorder *snap = NULL;
    struct progress *progress = NULL;
    struct timeline *tl = NULL;
    struct holders *holders = holders_create();
    struct program_printer printer = {.base.before_op = print_op, .f = opt->program_out};
    if (!holders || !(run = runner_create(dev, &v->alloc, NULL)) ||
        runner_add_observer(run, holders_base(holders)) || (rr && robust_attach(rr, run)) ||
        (opt->program_out && runner_add_observer(run, &printer.base))) {
        err_set(e, ERR_INTERNAL, "out of host memory");
    } else if (opt->snapshot_dir && (!(snap = snapshot_recorder_create()) ||
                                     runner_add_observer(run, snapshot_recorder_base(snap)))) {
        err_set(e, ERR_INTERNAL, "out of host memory");
    } else if ((opt->plot_dir || opt->perfetto_dir) &&
               (!(tl = timeline_create(TIMELINE_POINTS)) || timeline_attach(tl, run))) {
        err_set(e, ERR_INTERNAL, "out of host memory");
    } else {
        char label[336];
        snprintf(label, sizeof label, "%s/%s", sc->name, v->name);
        progress = progress_create(stderr, label, job->steps);
        if (progress)
            runner_add_observer(run, progress_base(progress));
        struct err gen_err = {0};
        if (rr) {
            rc = robust_generate(rr, dev->name, &r->robust, &gen_err);
            rc = rc > 0 ? 0 : rc; /* the last attempt's OOM is the result */
        } else {
            rc = workload_generate(job, runner_sink(run), &gen_err);
            if (rc && runner_stopped_by_oom(run))
                rc = 0; /* the OOM is the result */
        }
        if (rc)
            *e = gen_err, err_prefix(e, "%s: variant %s: ", sc->path, v->name);
        runner_finish(run, &r->run);
        if (rc == 0 && holders_finish(holders, &r->holders))
            rc = err_set(e, ERR_INTERNAL, "out of host memory following what holds the memory");
        if (rc == 0 && snap)
            rc = write_snapshot(snap, run, opt->snapshot_dir, sc, v, e);
        if (rc == 0 && tl) {
            timeline_finish(tl);
            rc = write_pictures(tl, opt, sc, v, r, e);
        }
    }
    timeline_destroy(tl);
    snapshot_recorder_destroy(snap);
    progress_destroy(progress);
    holders_destroy(holders);
    runner_destroy(run);
    dev->ops->destroy(dev);
    return rc;
}

/* The job under its OOM policy: on the scenario's device (or --device), then on each fallback device
 * (without --capacity, which was the first device's) until an attempt runs to the end; then what `oomlab
 * fit` finds up front on the first device. */
static int run_robust(const struct scenario *sc, const struct variant *v, struct job_spec *job,
                      const struct harness_options *opt, struct job_result *r, struct err *e)
{
    struct robust_run *rr = robust_create(job);
    if (!rr)
        return err_set(e, ERR_INTERNAL, "out of host memory");
    int rc = run_on_device(sc, v, job, opt, rr, r, e);
    for (int i = 0; rc == 0 && !r->robust.settled && i < job->robust.nfallback; i++) {
        struct harness_options fo = *opt;
        fo.device = job->robust.fallback[i];
        fo.capacity = (struct capacity){0};
        job->cublas_workspace_bytes = v->job.cublas_workspace_bytes; /* the next device's own, unless set */
        rc = run_on_device(sc, v, job, &fo, rr, r, e);
    }
    robust_destroy(rr);
    if (rc)
        return rc;
    struct fit_result fit;
    struct fit_options fopt = {.param = FIT_BATCH, .limit = FIT_MAX_LIMIT};
    struct harness_options quiet = {.device = opt->device, .capacity = opt->capacity, .max_forwards = opt->max_forwards};
    if (fit_variant(sc, v, &quiet, &fopt, &fit, e)) /* its probes write no snapshots or pictures */
        return -1;
    r->robust.fit_known = true;
    r->robust.fit_batch = fit.largest;
    return 0;
}

/* Pipeline-parallel: every stage run (quietly: no snapshots, pictures or program text), then the stage
 * shown (the first that OOMs, else the highest reserved peak) again with every output asked for. */
static int run_stages(const struct scenario *sc, const struct variant *v, struct job_spec *job,
                      const struct harness_options *opt, struct job_result *r, struct err *e)
{
    const struct parallel_spec *ps = &job->parallel;
    struct harness_options quiet = *opt;
    quiet.snapshot_dir = quiet.plot_dir = quiet.perfetto_dir = NULL;
    quiet.program_out = NULL;
    struct job_result *t = malloc(sizeof *t);
    if (!t)
        return err_set(e, ERR_INTERNAL, "out of host memory");
    int shown = 0;
    for (int s = 0; s < ps->pipeline_parallel; s++) {
        struct job_spec js = *job;
        js.parallel.pipeline_stage = s;
        *t = *r;
        if (run_on_device(sc, v, &js, &quiet, NULL, t, e)) {
            free(t);
            return -1;
        }
        struct pipe_split sp = pipeline_split(job->model.layers, ps->pipeline_parallel, s);
        r->pipe[s] = (struct pipe_stage_result){
            .first_layer = sp.first, .last_layer = sp.last, .oom = t->run.oom.happened,
            .in_flight = pipeline_in_flight(ps->pipeline_parallel, s, ps->micro_batches, ps->schedule),
            .peak_allocated = t->run.peak_allocated, .peak_reserved = t->run.peak_reserved,
            .params = t->run.category_at_peak[CAT_PARAM]};
        job_throughput(t);
        r->pipe[s].step_seconds = t->steps_per_s > 0 ? 1.0 / t->steps_per_s : 0;
        const struct pipe_stage_result *b = &r->pipe[shown];
        if (!b->oom && (r->pipe[s].oom || r->pipe[s].peak_reserved > b->peak_reserved))
            shown = s;
    }
    free(t);
    r->pipe_stages = ps->pipeline_parallel;
    r->pipe_shown = shown;
    r->pipe_micro_batches = ps->micro_batches;
    snprintf(r->pipe_schedule, sizeof r->pipe_schedule, "%s", pipe_schedule_name(ps->schedule));
    job->parallel.pipeline_stage = shown;
    return run_on_device(sc, v, job, opt, NULL, r, e);
}

/* A pipeline's step: its slowest stage's time per micro-batch through M + P - 1 slots, the bubble of GPipe
 * and of non-interleaved 1F1B ((P - 1) / M of the ideal step; Narayanan et al., "Efficient Large-Scale
 * Language Model Training on GPU Clusters Using Megatron-LM", SC'21, section 2.2). The stage's optimizer
 * step is stretched with it (a slight overestimate); sends and receives are not timed. */
static void pipeline_throughput(struct job_result *r)
{
    double slowest = 0;
    for (int s = 0; s < r->pipe_stages; s++)
        slowest = r->pipe[s].step_seconds > slowest ? r->pipe[s].step_seconds : slowest;
    if (r->steps_per_s <= 0 || slowest <= 0)
        return;
    double step = slowest * (r->pipe_micro_batches + r->pipe_stages - 1) / r->pipe_micro_batches;
    r->samples_per_s = r->samples_per_s / r->steps_per_s / step;
    r->steps_per_s = 1.0 / step;
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
    if (check_work(&job, opt, e))
        return err_prefix(e, "%s: variant %s: ", sc->path, v->name);
    struct err ae = {0};
    r->has_assumptions = workload_assumptions(&job, &r->assumptions, &ae) == 0;
    int rc = pipeline_on(&job)                 ? run_stages(sc, v, &job, opt, r, e)
             : job.robust.on_oom == ON_OOM_FAIL ? run_on_device(sc, v, &job, opt, NULL, r, e)
                                              : run_robust(sc, v, &job, opt, r, e);
    if (rc == 0) {
        judge(r, &v->expect);
        job_throughput(r);
        if (r->pipe_stages)
            pipeline_throughput(r);
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
    if (opt->plot_dir && plot_variants_write(opt->plot_dir, sc->name, res, sc->nvariants, e)) {
        free(res);
        return -1;
    }
    *out = res;
    return 0;
}
