/* result.c: what every writer says of a job's outcome and throughput (see result.h). */
#include "run/result.h"

#include <stdio.h>

void job_outcome(const struct job_result *r, char *buf, size_t len)
{
    const struct run_oom *o = &r->run.oom;
    if (!o->happened)
        snprintf(buf, len, "fits");
    else
        snprintf(buf, len, "OOM in %s, step %lld (%s)", o->phase, (long long)o->step, o->tag);
}

void job_throughput(struct job_result *r)
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
