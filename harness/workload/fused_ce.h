/* fused_ce.h: the fix fused_linear_cross_entropy (fused_ce.c), internal to the workload generator. */
#ifndef OOMLAB_WORKLOAD_FUSED_CE_H
#define OOMLAB_WORKLOAD_FUSED_CE_H

#include "workload/gen.h"

/* Rows per chunk: `chunk` when set (at most bt), else Liger's rule next_power_of_2(ceil(bt /
 * ceil(vocab / hidden))), at most bt. */
int64_t fused_ce_chunk_rows(int64_t bt, int64_t vocab, int64_t hidden, int chunk);
/* The causal LM loss of hidden states [B, S, H] through the LM head (the `lm_head` weight, or the tied
 * embedding `tied` when >= 0) against ids [B, S], without materializing the logits; a scalar. */
tref nn_fused_lm_loss(struct gen *g, tref hidden, int32_t tied, tref ids);

#endif
