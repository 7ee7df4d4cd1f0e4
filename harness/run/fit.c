/* fit.c: batch-size and sequence-length search (see fit.h). */
#include "run/fit.h"

static int *field(struct job_spec *job, enum fit_param p)
{
    switch (p) {
    case FIT_SEQ_LEN: return &job->seq_len;
    case FIT_IMAGE_SIZE: return &job->image_size;
    case FIT_BATCH: break;
    }
    return &job->batch;
}

/* 1 fits, 0 OOMs, -1 error. A value the job rejects (e.g. an image size the model cannot halve) is an error. */
static int probe(const struct scenario *sc, const struct variant *v, const struct harness_options *opt,
                 enum fit_param param, int value, struct fit_result *out, struct err *e)
{
    struct job_spec job = v->job;
    *field(&job, param) = value;
    if (param == FIT_BATCH && job.fix.micro_batch > value)
        job.fix.micro_batch = value;
    struct variant_result r;
    out->probes++;
    if (harness_run_variant(sc, v, &job, opt, &r, e))
        return -1;
    if (!r.run.oom.happened)
        out->at_largest = r.run;
    return !r.run.oom.happened;
}

int fit_variant(const struct scenario *sc, const struct variant *v, const struct harness_options *opt,
                enum fit_param param, int limit, struct fit_result *out, struct err *e)
{
    *out = (struct fit_result){0};
    int good = 0, bad = 0, step = param == FIT_IMAGE_SIZE ? 64 : 1, x = step;
    while (x <= limit) {
        int rc = probe(sc, v, opt, param, x, out, e);
        if (rc < 0)
            return -1;
        if (!rc) {
            bad = x;
            break;
        }
        good = x;
        x *= 2;
    }
    if (!bad) {
        out->largest = good;
        out->hit_limit = good > 0;
        return 0;
    }
    while (bad - good > step) {
        int mid = (good + bad) / 2 / step * step;
        if (mid <= good)
            break;
        int rc = probe(sc, v, opt, param, mid, out, e);
        if (rc < 0)
            return -1;
        if (rc)
            good = mid;
        else
            bad = mid;
    }
    out->largest = good;
    if (good) /* the last probe may have been a failure: keep the figures of the largest that fit */
        probe(sc, v, opt, param, good, out, e);
    return 0;
}
