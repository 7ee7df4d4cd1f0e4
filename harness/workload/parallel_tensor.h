/* parallel_tensor.h: Megatron-style tensor (and sequence) parallelism of a decoder, one rank of the
 * tensor-parallel group (job.parallel.tensor_parallel, sequence_parallel; parallel_tensor.c). */
#ifndef OOMLAB_WORKLOAD_PARALLEL_TENSOR_H
#define OOMLAB_WORKLOAD_PARALLEL_TENSOR_H

#include "workload/gen.h"

/* The job's tensor-parallel settings checked against its model (divisible heads, KV heads, ...). */
int tensor_parallel_check(const struct job_spec *s, struct err *e);
/* Megatron's padded vocabulary (a multiple of 128 * t), divided over t ranks. */
int64_t tensor_parallel_vocab(int64_t vocab, int t);
/* Ranks of one data-parallel replica: tensor_parallel x pipeline_parallel (Megatron: world_size = tp x pp x dp). */
int model_parallel_ranks(const struct job_spec *s);
/* world_size against them: 1 or all of them without a strategy, else a multiple of them. */
int model_parallel_world_check(const struct job_spec *s, struct err *e);
/* One rank's share: heads, KV heads, intermediate and vocabulary / t, world_size the data-parallel group. */
void tensor_parallel_shard(struct job_spec *s);

bool tp_sequence_parallel(const struct gen *g);
/* Before column-parallel linears: a new reference to x, or (sequence parallel) the gathered sequence. */
tref tp_column_input(struct gen *g, tref x);
/* After a row-parallel linear, consuming y: y all-reduced in place, or (sequence parallel) reduce-scattered. */
tref tp_row_output(struct gen *g, tref y);
/* After the embedding (sequence parallel): this rank's part of the sequence; else a new reference to x. */
tref tp_sequence_scatter(struct gen *g, tref x);
/* VocabParallelEmbedding: the ids masked to this rank's `rows` (what the lookup saves), *mask the ids not in
 * them; then, on the lookup's output y, output_parallel[input_mask, :] = 0.0. Without tensor parallelism, a
 * new reference to ids and nothing. */
tref tp_embedding_ids(struct gen *g, tref ids, int64_t rows, tref *mask);
void tp_embedding_masked(struct gen *g, tref y, tref mask);
/* Megatron's vocab_parallel_cross_entropy of logits [B, S, vocab / t] with labels [B, S]: the mean loss. */
tref tp_lm_loss(struct gen *g, tref logits, tref labels);
bool tp_vocab_loss(const struct gen *g);
void tp_backward(struct gen *g, const struct node *n, tref gy);

#endif
