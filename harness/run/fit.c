/* fit.c: the search for the largest batch size, sequence length or image size, or the smallest world
 * size, tensor-parallel degree or number of pipeline stages (see fit.h). */
#include "run/fit.h"

#include <stdlib.h>

static int *field(struct job_spec *job, enum fit_param p)
{
    switch (p) {
    case FIT_SEQ_LEN: return &job->seq_len;
    case FIT_IMAGE_SIZE: return &job->image_size;
    case FIT_WORLD_SIZE: return &job->parallel.world_size;
    case FIT_TENSOR_PARALLEL: return &job->parallel.tensor_parallel;
    case FIT_PIPELINE_STAGES: return &job->parallel.pipeline_parallel;
    case FIT_BATCH: break;
    }
    return &job->batch;
}

static int tensor_degree(const struct job_spec *job)
{
    return job->parallel.tensor_parallel > 1 ? job->parallel.tensor_parallel : 1;
}

static int stages(const struct job_spec *job)
{
    return job->parallel.pipeline_parallel > 1 ? job->parallel.pipeline_parallel : 1;
}

/* world_size names the model-parallel ranks too (always with a strategy; without one, when not 1) */
static bool counts_ranks(const struct job_spec *job)
{
    return job->parallel.strategy != PAR_NONE || job->parallel.world_size > 1;
}

/* The variant's job with the parameter set to value. world_size counts tensor x pipeline x data-parallel
 * ranks, so a new tensor-parallel degree or number of stages keeps the data-parallel degree. */
static struct job_spec with_value(const struct job_spec *variant_job, enum fit_param p, int value)
{
    struct job_spec job = *variant_job;
    if (p == FIT_TENSOR_PARALLEL && counts_ranks(&job))
        job.parallel.world_size = job.parallel.world_size / tensor_degree(variant_job) * value;
    if (p == FIT_PIPELINE_STAGES && counts_ranks(&job))
        job.parallel.world_size = job.parallel.world_size / stages(variant_job) * value;
    *field(&job, p) = value;
    if (p == FIT_PIPELINE_STAGES && value == 1) { /* one GPU: the micro-batches as gradient accumulation */
        job.grad_accum = job.parallel.micro_batches;
        job.parallel.micro_batches = 1;
    }
    return job;
}

/* 1 fits (no OOM, and the margin free at the reserved peak), 0 does not, -1 error. A value the job
 * rejects (e.g. an image size the model cannot halve) is an error. */
static int probe(const struct scenario *sc, const struct variant *v, const struct harness_options *opt,
                 const struct fit_options *fo, int value, struct fit_result *out, struct err *e)
{
    if (fo->param == FIT_WORLD_SIZE && v->job.parallel.strategy == PAR_NONE)
        return err_set(e, ERR_INPUT, "--param world_size: variant %s has no job.parallel.strategy", v->name);
    struct job_spec job = with_value(&v->job, fo->param, value);
    job.robust.on_oom = ON_OOM_FAIL; /* what fits a fresh process, without retries */
    /* the worst step: the first step's optimizer creates the optimizer state, so only the second runs
     * forward and backward beside it (a job of one step would be judged at its lighter first step) */
    if (job.steps < 2)
        job.steps = 2;
    struct gradient_accumulation_params accum = gradient_accumulation_params(&job);
    if (fo->param == FIT_BATCH && accum.micro_batch > value) {
        accum.micro_batch = value;
        gradient_accumulation_params_set(&job, &accum);
    }
    struct job_result r;
    out->probes++;
    if (harness_run_variant(sc, v, &job, opt, &r, e))
        return -1;
    bool fits = !r.run.oom.happened && (double)r.run.peak_reserved <= (1.0 - fo->margin) * (double)r.device_total;
    if (fits || out->probes == 1) /* a first probe that fails still names the variant and its device */
        out->at_largest = r;
    return fits;
}

/* Narrows good (fits) and bad (does not; either may be the larger) down to neighbours `step` apart,
 * then runs the value that fits again, so the figures kept are its own (the last probe may have
 * failed). */
static int bisect(const struct scenario *sc, const struct variant *v, const struct harness_options *opt,
                  const struct fit_options *fo, int good, int bad, int step, struct fit_result *out, struct err *e)
{
    while (abs(bad - good) > step) {
        int mid = (good + bad) / 2 / step * step;
        if (mid == good || mid == bad)
            break;
        int rc = probe(sc, v, opt, fo, mid, out, e);
        if (rc < 0)
            return -1;
        if (rc)
            good = mid;
        else
            bad = mid;
    }
    out->largest = good;
    if (good)
        probe(sc, v, opt, fo, good, out, e);
    return 0;
}

/* The smallest world size that fits: doubling from 1 (from tensor x pipeline parallel, in its multiples)
 * until one fits, then bisection below it (fewer ranks never take less memory per rank). */
static int fit_smallest(const struct scenario *sc, const struct variant *v, const struct harness_options *opt,
                        const struct fit_options *fo, struct fit_result *out, struct err *e)
{
    int bad = 0, u = tensor_degree(&v->job) * stages(&v->job);
    for (int x = u; x <= fo->limit; x = x * 2 > fo->limit && x < fo->limit ? fo->limit / u * u : x * 2) {
        int rc = probe(sc, v, opt, fo, x, out, e);
        if (rc < 0)
            return -1;
        if (rc)
            return bisect(sc, v, opt, fo, x, bad, u, out, e);
        bad = x;
        if (x >= fo->limit / u * u)
            break;
    }
    return 0; /* none up to the limit */
}

/* The smallest tensor-parallel degree that fits: 1, 2, 4, ... until one fits, or the model cannot be split
 * that many ways (job.parallel.tensor_parallel's checks: heads, KV heads, ...). */
static int fit_tensor_parallel(const struct scenario *sc, const struct variant *v, const struct harness_options *opt,
                               const struct fit_options *fo, struct fit_result *out, struct err *e)
{
    for (int t = 1; t <= fo->limit; t *= 2) {
        struct job_spec job = with_value(&v->job, FIT_TENSOR_PARALLEL, t);
        struct err ignored = {0};
        if (t > 1 && job_spec_validate(&job, &ignored) < 0)
            return 0; /* no degree up to t / 2 fits */
        int rc = probe(sc, v, opt, fo, t, out, e);
        if (rc < 0)
            return -1;
        if (rc) {
            out->largest = t;
            return 0;
        }
    }
    return 0;
}

/* The fewest pipeline stages that fit: each number of stages the layers split evenly over, in turn
 * (stages are not a power-of-two search: 32 layers take 1, 2, 4, 8, 16 or 32). */
static int fit_stages(const struct scenario *sc, const struct variant *v, const struct harness_options *opt,
                      const struct fit_options *fo, struct fit_result *out, struct err *e)
{
    struct job_spec job = v->job;
    if (job_spec_validate(&job, e) < 0) /* the preset's layers */
        return err_prefix(e, "%s: variant %s: ", sc->path, v->name);
    for (int x = 1; x <= fo->limit && x <= job.model.layers && x <= PIPE_MAX_STAGES; x++) {
        if (job.model.layers % x)
            continue;
        int rc = probe(sc, v, opt, fo, x, out, e);
        if (rc)
            return rc < 0 ? -1 : (out->largest = x, 0);
    }
    return 0; /* none up to the limit */
}

int fit_variant(const struct scenario *sc, const struct variant *v, const struct harness_options *opt,
                const struct fit_options *fo, struct fit_result *out, struct err *e)
{
    *out = (struct fit_result){0};
    if (fo->param == FIT_WORLD_SIZE)
        return fit_smallest(sc, v, opt, fo, out, e);
    if (fo->param == FIT_TENSOR_PARALLEL)
        return fit_tensor_parallel(sc, v, opt, fo, out, e);
    if (fo->param == FIT_PIPELINE_STAGES)
        return fit_stages(sc, v, opt, fo, out, e);
    int good = 0, bad = 0, step = fo->param == FIT_IMAGE_SIZE ? 64 : 1, x = step;
    const int limit = fo->limit / step * step; /* the largest value the job takes */
    while (x <= limit) {
        int rc = probe(sc, v, opt, fo, x, out, e);
        if (rc < 0)
            return -1;
        if (!rc) {
            bad = x;
            break;
        }
        good = x;
        if (x == limit)
            break;
        x = x * 2 > limit ? limit : x * 2; /* the limit itself is the last probe */
    }
    if (!bad) {
        out->largest = good;
        out->hit_limit = good > 0;
        return 0;
    }
    return bisect(sc, v, opt, fo, good, bad, step, out, e);
}
