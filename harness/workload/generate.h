/* generate.h: the workload generator's public interface: a job_spec in, its op program streamed
 * out one op at a time. Tag strings stay valid until workload_destroy(). C++-includable. */
#ifndef OOMLAB_WORKLOAD_GENERATE_H
#define OOMLAB_WORKLOAD_GENERATE_H

#include <stddef.h>

#include "program/program.h"
#include "workload/spec.h"

#ifdef __cplusplus
extern "C" {
#endif

struct workload;

/* Validates a copy of the spec and enumerates the models' parameters. NULL (and e set) on error. */
struct workload *workload_create(const struct job_spec *spec, struct err *e);
/* Emits the whole program (load, steps, evals) to sink; -1 if the sink or the generator failed. */
int workload_run(struct workload *w, struct op_sink *sink, struct err *e);
/* Host bytes the generator holds (tensor slab, tape, parameters, strings). */
size_t workload_host_bytes(const struct workload *w);
void workload_destroy(struct workload *w);

/* create + run + destroy: for sinks that do not keep op names after returning. */
int workload_generate(const struct job_spec *spec, struct op_sink *sink, struct err *e);

/* What a job's run assumes where two tools could differ: the attention implementation, the
 * activation's form, the precision recipe, the optimizer's implementation, the steps, and whether the
 * KV cache and kernels' scratch are in (assumptions.c). */
struct job_assumptions {
    char attention[48];   /* "eager", "sdpa (flash)", "sdpa (memory-efficient)", "none" */
    char activation[48];  /* "gelu_new (composite)", "silu (fused)" */
    char precision[128];   /* "fp32", "pure bf16", "autocast bf16 over fp32 weights", ... */
    char optimizer[128];  /* "adamw foreach", "adamw for-loop", "adamw_8bit (bitsandbytes)", ... */
    char routing[160];    /* sparse MoE models: the routing assumed (models/moe.c); "" = dense */
    int steps;
    bool use_cache, kernel_scratch;
    int64_t nccl_bytes;   /* job.parallel: NCCL's own device buffers (parallel_nccl.c), outside the allocator */
    int nccl_channels;
};
/* The assumptions of spec after its preset is expanded and its switches' settings applied; -1 (e set)
 * if the spec does not validate. */
int workload_assumptions(const struct job_spec *spec, struct job_assumptions *a, struct err *e);
/* "attention eager; act gelu_new (composite); fp32; adamw foreach; 2 steps; KV cache on; kernel scratch on" */
void job_assumptions_text(const struct job_assumptions *a, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
