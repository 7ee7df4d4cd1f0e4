/* workload_parallel_job.h: what the job.parallel tests share: one rank of GPT-2 (124,439,808 parameters)
 * at batch 1 of 64 tokens for 2 steps (cat_at, the live bytes of a category at a mark, is in workload_run.h). */
#ifndef OOMLAB_TESTS_WORKLOAD_PARALLEL_JOB_H
#define OOMLAB_TESTS_WORKLOAD_PARALLEL_JOB_H

#include <stdio.h>

#include "workload/spec.h"
#include "workload_run.h" /* cat_at */

#define GPT2_P 124439808LL
#define GPT2_WTE (50257LL * 768) /* transformer.wte.weight, the first parameter */

static inline void gpt2_job_dtype(struct job_spec *s, enum parallel_strategy st, int world, enum dtype dt)
{
    job_spec_init(s);
    snprintf(s->model.preset, sizeof s->model.preset, "gpt2");
    s->load_dtype = s->param_dtype = dt;
    s->batch = 1;
    s->seq_len = 64;
    s->steps = 2;
    s->parallel.strategy = st;
    s->parallel.world_size = world;
}

static inline void gpt2_job(struct job_spec *s, enum parallel_strategy st, int world)
{
    gpt2_job_dtype(s, st, world, DT_BF16);
}

#endif
