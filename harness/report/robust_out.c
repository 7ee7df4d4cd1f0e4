/* robust_out.c: see robust_out.h. */
#include "report/robust_out.h"

#include "report/wrap.h"
#include "util/size.h"

static double seconds_thrown_away(const struct robust_result *rb, int64_t *steps)
{
    double s = 0;
    *steps = 0;
    for (int i = 0; i < rb->nattempts; i++)
        if (rb->attempts[i].oom) {
            s += rb->attempts[i].seconds;
            *steps += rb->attempts[i].steps_done;
        }
    return s;
}

void robust_print(FILE *f, const struct job_result *r)
{
    const struct robust_result *rb = &r->robust;
    if (!rb->on)
        return;
    char first[128], text[768];
    snprintf(first, sizeof first, "   %s: ", r->name);
    snprintf(text, sizeof text, "on OOM, halve the batch and retry (job.robust; kernel time %s):",
             rb->measured ? "measured" : "modelled");
    wrap_print(f, first, 5, text);
    int ooms = 0;
    for (int i = 0; i < rb->nattempts; i++) {
        const struct robust_attempt *a = &rb->attempts[i];
        snprintf(first, sizeof first, "     batch %d x %d on %s: ", a->batch, a->grad_accum, a->device);
        if (!a->oom) {
            snprintf(text, sizeof text, "ran to the end (%lld step%s, %.3g s of kernels)", (long long)a->steps_done,
                     a->steps_done == 1 ? "" : "s", a->seconds);
            wrap_print(f, first, 7, text);
            continue;
        }
        ooms++;
        char freed[32], reserved[32];
        size_format_pytorch(a->freed, freed, sizeof freed);
        size_format_pytorch(a->reserved_after, reserved, sizeof reserved);
        wrap_keep_together(freed);
        wrap_keep_together(reserved);
        int n = snprintf(text, sizeof text, "OOM in %s, step %lld (%s); %lld finished steps and %.3g s of kernels "
                                            "thrown away",
                         a->phase, (long long)a->step, a->tag, (long long)a->steps_done, a->seconds);
        if (a->freed || a->reserved_after)
            snprintf(text + n, sizeof text - (size_t)n, "; the recovery freed %s, %s reserved after empty_cache", freed,
                     reserved);
        wrap_print(f, first, 7, text);
    }
    int64_t steps;
    double lost = seconds_thrown_away(rb, &steps);
    int n = rb->settled ? snprintf(text, sizeof text, "settled at batch %d x %d after %d OOM%s (%lld steps, %.3g s of "
                                                      "kernels thrown away)",
                                   rb->batch, rb->grad_accum, ooms, ooms == 1 ? "" : "s", (long long)steps, lost)
                        : snprintf(text, sizeof text, "never settled: %d OOM%s, the last one ends the run", ooms,
                                   ooms == 1 ? "" : "s");
    if (rb->fit_known && rb->fit_batch)
        snprintf(text + n, sizeof text - (size_t)n, "; oomlab fit, up front: batch %d fits a fresh process on %s",
                 rb->fit_batch, rb->attempts[0].device);
    else if (rb->fit_known)
        snprintf(text + n, sizeof text - (size_t)n, "; oomlab fit, up front: not even batch 1 fits on %s",
                 rb->attempts[0].device);
    wrap_print(f, "     ", 7, text);
}

json_t *robust_json(const struct robust_result *rb)
{
    if (!rb->on)
        return json_null();
    json_t *attempts = json_array();
    for (int i = 0; i < rb->nattempts; i++) {
        const struct robust_attempt *a = &rb->attempts[i];
        json_array_append_new(
            attempts, json_pack("{s:s, s:i, s:i, s:b, s:s, s:I, s:s, s:I, s:I, s:f, s:I, s:I}", "device", a->device,
                                "batch_size", a->batch, "grad_accum", a->grad_accum, "oom", a->oom, "phase", a->phase,
                                "step", (json_int_t)a->step, "tag", a->tag, "steps_done", (json_int_t)a->steps_done,
                                "samples", (json_int_t)a->samples, "kernel_seconds", a->seconds, "freed",
                                (json_int_t)a->freed, "reserved_after", (json_int_t)a->reserved_after));
    }
    int64_t steps;
    double lost = seconds_thrown_away(rb, &steps);
    return json_pack("{s:o, s:b, s:o, s:o, s:I, s:f, s:o}", "attempts", attempts, "settled", rb->settled, "batch_size",
                     rb->settled ? json_integer(rb->batch) : json_null(), "grad_accum",
                     rb->settled ? json_integer(rb->grad_accum) : json_null(), "steps_thrown_away", (json_int_t)steps,
                     "kernel_seconds_thrown_away", lost, "fit_batch_size",
                     rb->fit_known ? json_integer(rb->fit_batch) : json_null());
}
