/* parallel_pipeline.h: pipeline-parallel training (job.parallel.pipeline_parallel): how a decoder's
 * layers split over the stages, how many micro-batches each stage holds in flight, and the generator's
 * hooks that run one stage (parallel_pipeline.c). */
#ifndef OOMLAB_WORKLOAD_PARALLEL_PIPELINE_H
#define OOMLAB_WORKLOAD_PARALLEL_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "workload/spec.h"

#define PIPE_MAX_STAGES 64

/* What one stage runs: decoder layers [first, last), the embedding (stage 0) and the final norm, LM
 * head and loss (the last stage). */
struct pipe_split {
    int first, last;
    bool embed, head;
};

/* The job's checks (called by parallel_spec_check); messages name the key. */
int pipeline_spec_check(const struct job_spec *s, struct err *e);
/* Pipeline-parallel: more than one stage. */
bool pipeline_on(const struct job_spec *s);
/* Stage `stage` of `stages` over `layers` layers (Megatron-LM: layers / stages each, in order). */
struct pipe_split pipeline_split(int layers, int stages, int stage);
/* The most micro-batches whose activations stage `stage` holds at once: 1F1B min(stages - stage, M),
 * GPipe M. */
int pipeline_in_flight(int stages, int stage, int micro_batches, enum pipe_schedule sch);

/* ---- generator hooks (gen.h's struct gen) ---- */
struct gen;
struct batch;
typedef int32_t tref;

/* The decoder's part on this run's stage (everything when not pipeline-parallel, or while the
 * parameters are registered). */
struct pipe_split pipeline_layers(const struct gen *g, int layers);
/* Parameter p of the trained model lives on this run's stage. */
bool pipeline_holds(struct gen *g, int32_t p);
/* recv_forward: the previous stage's hidden states [b, s, hidden] ([b, s / t, hidden] with sequence
 * parallelism) in a new buffer that requires grad, kept by the schedule until the micro-batch's
 * backward; returns the caller's reference. */
tref pipeline_recv_forward(struct gen *g, int64_t b, int64_t s, int64_t hidden);
/* One training step's micro-batches in the schedule's order: fwd runs a micro-batch's forward through
 * this stage (the loss on the last stage, else the stage's output); backward runs here. */
typedef tref (*pipe_forward_fn)(struct gen *g, void *ctx, const struct batch *bt);
void pipeline_step(struct gen *g, pipe_forward_fn fwd, void *ctx, const struct batch *bt);
void pipeline_free(struct gen *g);

#endif
