/* job_kinds.h: the job kinds other than training (job.kind), internal to the workload generator:
 * their checks (called by job_spec_validate) and their runs (called by workload_run once the weights
 * are loaded). */
#ifndef OOMLAB_WORKLOAD_JOB_KINDS_H
#define OOMLAB_WORKLOAD_JOB_KINDS_H

#include "workload/gen.h"

/* job.kind eval (generate.c's eval loop, run once): eval.every and before_training belong to training. */
int eval_job_check(const struct job_spec *s, struct err *e);

/* job.kind generate (generation.c): a decoder-only model with rotary positions (Llama, Mistral, Qwen2)
 * or learned ones (GPT-2); messages name the key. */
int generation_check(const struct job_spec *s, struct err *e);
/* model.generate() `steps` times: per call a prefill (phase "prefill") and new_tokens - 1 decode
 * steps (phase "decode"). g->cursor must be the model's first parameter. */
void generation_run(struct gen *g, const struct model_spec *m, int32_t first_param);
/* The bytes a KV cache holds: layers x 2 (keys, values) x kv_heads x head_dim x tokens x batch x dtype
 * size (worked in tests/generation_test.c). */
uint64_t kv_cache_bytes(const struct model_spec *m, int64_t batch, int64_t tokens, enum dtype dt);

#endif
