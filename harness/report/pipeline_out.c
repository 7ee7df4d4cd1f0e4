/* pipeline_out.c: a pipeline-parallel job's stages (job.parallel.pipeline_parallel) in the table and the
 * results document: each stage's layers, micro-batches in flight, parameters and peaks, and which stage
 * the job's other figures are. */
#include "report/pipeline_out.h"

#include "report/wrap.h"
#include "util/size.h"

#include <string.h>

/* "embedding, layers 0-7" / "layer 8" / "layers 24-31, norm, head, loss" */
static void stage_parts(const struct job_result *r, int s, char *buf, size_t len)
{
    const struct pipe_stage_result *p = &r->pipe[s];
    char layers[32];
    if (p->last_layer - p->first_layer == 1)
        snprintf(layers, sizeof layers, "layer %d", p->first_layer);
    else
        snprintf(layers, sizeof layers, "layers %d-%d", p->first_layer, p->last_layer - 1);
    snprintf(buf, len, "%s%s%s", s == 0 ? "embedding, " : "", layers,
             s == r->pipe_stages - 1 ? ", norm, head, loss" : "");
}

void pipeline_print(FILE *f, const struct job_result *r)
{
    if (!r->pipe_stages)
        return;
    char first[128], text[512];
    snprintf(first, sizeof first, "   %s: ", r->name);
    snprintf(text, sizeof text, "pipeline of %d stages, %s schedule, %d micro-batch%s per step; every stage run "
             "(%s), the figures above are stage %d's (%s):", r->pipe_stages, r->pipe_schedule, r->pipe_micro_batches,
             r->pipe_micro_batches == 1 ? "" : "es", r->run.measured ? "measured" : "modelled", r->pipe_shown,
             r->pipe[r->pipe_shown].oom ? "the first to OOM" : "the highest reserved peak");
    if (!r->pipe[r->pipe_shown].oom)
        snprintf(text + strlen(text) - 1, sizeof text - strlen(text) + 1, "; the throughput above is the "
                 "slowest stage's step (its optimizer step included) stretched by the pipeline bubble, x "
                 "(micro-batches + stages - 1) / micro-batches:");
    wrap_print(f, first, 5, text);
    for (int s = 0; s < r->pipe_stages; s++) {
        const struct pipe_stage_result *p = &r->pipe[s];
        char parts[96], params[32], alloc[32], reserved[32];
        stage_parts(r, s, parts, sizeof parts);
        size_format_pytorch(p->params, params, sizeof params);
        size_format_pytorch(p->peak_allocated, alloc, sizeof alloc);
        size_format_pytorch(p->peak_reserved, reserved, sizeof reserved);
        wrap_keep_together(params);
        wrap_keep_together(alloc);
        wrap_keep_together(reserved);
        snprintf(first, sizeof first, "     stage %d (%s): ", s, parts);
        int n = snprintf(text, sizeof text, "%d in flight, parameters %s, peak allocated %s, reserved %s%s",
                         p->in_flight, params, alloc, reserved, p->oom ? ", OOM" : "");
        if (p->step_seconds > 0)
            snprintf(text + n, sizeof text - (size_t)n, ", %.3g s of kernels a step", p->step_seconds);
        wrap_print(f, first, 7, text);
    }
}

json_t *pipeline_json(const struct job_result *r)
{
    if (!r->pipe_stages)
        return NULL;
    json_t *stages = json_array();
    for (int s = 0; s < r->pipe_stages; s++) {
        const struct pipe_stage_result *p = &r->pipe[s];
        json_array_append_new(stages, json_pack("{s:i, s:i, s:i, s:b, s:I, s:I, s:I, s:f}", "first_layer",
                                                p->first_layer, "last_layer", p->last_layer, "in_flight", p->in_flight,
                                                "oom", p->oom, "params", (json_int_t)p->params, "peak_allocated",
                                                (json_int_t)p->peak_allocated, "peak_reserved",
                                                (json_int_t)p->peak_reserved, "step_kernel_seconds", p->step_seconds));
    }
    return json_pack("{s:s, s:i, s:i, s:o}", "schedule", r->pipe_schedule, "micro_batches", r->pipe_micro_batches,
                     "shown_stage", r->pipe_shown, "stages", stages);
}

int pipeline_read(const json_t *o, struct job_result *r, struct err *e)
{
    if (!o)
        return 0;
    json_error_t je;
    json_t *stages;
    const char *sch;
    if (json_unpack_ex((json_t *)o, &je, 0, "{s:s, s:i, s:i, s:o}", "schedule", &sch, "micro_batches",
                       &r->pipe_micro_batches, "shown_stage", &r->pipe_shown, "stages", &stages) ||
        !json_is_array(stages))
        return err_set(e, ERR_INPUT, "pipeline: %s", json_is_array(stages) ? je.text : "stages is not an array");
    size_t n = json_array_size(stages);
    if (n < 1 || n > PIPE_MAX_STAGES || r->pipe_shown < 0 || (size_t)r->pipe_shown >= n)
        return err_set(e, ERR_INPUT, "pipeline: %zu stages (1..%d), shown_stage %d", n, PIPE_MAX_STAGES,
                       r->pipe_shown);
    snprintf(r->pipe_schedule, sizeof r->pipe_schedule, "%s", sch);
    r->pipe_stages = (int)n;
    size_t i;
    json_t *st;
    json_array_foreach(stages, i, st) {
        struct pipe_stage_result *p = &r->pipe[i];
        json_int_t params, pa, pr;
        int oom;
        if (json_unpack_ex(st, &je, 0, "{s:i, s:i, s:i, s:b, s:I, s:I, s:I, s:F}", "first_layer", &p->first_layer,
                           "last_layer", &p->last_layer, "in_flight", &p->in_flight, "oom", &oom, "params", &params,
                           "peak_allocated", &pa, "peak_reserved", &pr, "step_kernel_seconds", &p->step_seconds))
            return err_set(e, ERR_INPUT, "pipeline.stages[%zu]: %s", i, je.text);
        p->oom = oom;
        p->params = (uint64_t)params, p->peak_allocated = (uint64_t)pa, p->peak_reserved = (uint64_t)pr;
    }
    return 0;
}
