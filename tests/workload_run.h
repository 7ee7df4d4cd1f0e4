/* workload_run.h: the workload tests' way to run a job into the live-bytes sink, and what they read from it
 * (included by one test file each; TAP's diag from tap.h). */
#ifndef OOMLAB_TESTS_WORKLOAD_RUN_H
#define OOMLAB_TESTS_WORKLOAD_RUN_H

#include "workload/generate.h"
#include "workload/live_sink.h"

static struct workload *last; /* kept until the next run: the sink's mark names are its strings */

static int run(const struct job_spec *s, struct live_sink *k)
{
    struct err e = {0};
    live_sink_init(k, &e);
    workload_destroy(last);
    last = workload_create(s, &e);
    int rc = last ? workload_run(last, &k->base, &e) : -1;
    if (rc < 0)
        diag("generate failed: %s", e.msg);
    return rc;
}

/* Live bytes of category c at the n-th mark named phase, or -1. */
static inline int64_t cat_at(const struct live_sink *k, const char *phase, int n, enum category c)
{
    const struct live_mark *m = live_sink_mark(k, phase, n);
    return m ? m->cat[c] : -1;
}

/* A GPT-2 style model configured like Korthikanti et al.: 16-bit, dropout, unfused attention,
 * GELU MLP of 4h, LayerNorm, biases. */
static inline void korthikanti_job(struct job_spec *s, int layers, enum attn_impl attn)
{
    job_spec_init(s);
    s->model.preset[0] = 0;
    s->model.family = FAMILY_DECODER;
    s->model.hidden = 256;
    s->model.heads = 8;
    s->model.layers = layers;
    s->model.ffn = 1024;
    s->model.vocab = 512;
    s->model.max_positions = 512;
    s->model.attn = attn;
    s->model.dropout = 0.1f;
    s->load_dtype = s->param_dtype = DT_BF16;
    s->batch = 4;
    s->seq_len = 128;
    s->steps = 1;
}

/* Activation bytes the forward leaves for backward: live CAT_ACTIVATION at the backward phase. */
static inline int64_t saved_activations(const struct job_spec *s)
{
    struct live_sink k;
    int64_t v = run(s, &k) == 0 ? cat_at(&k, "backward", 0, CAT_ACTIVATION) : -1;
    live_sink_fini(&k);
    return v;
}

#endif
