/* fixes.h: the fixes (their rows are in fixes.c): ids, the parameter struct of each fix that takes
 * parameters, with its accessors, and the table. A fix changes what the generator emits (its code is
 * in generate.c and, for gradient checkpointing, the transformer stacks of models/, found by its id),
 * the job's settings (its row's settings hook) or the allocator config (its row's alloc_edit).
 * C++-includable. */
#ifndef OOMLAB_WORKLOAD_FIXES_H
#define OOMLAB_WORKLOAD_FIXES_H

#include "program/program.h"
#include "workload/switches.h"

#ifdef __cplusplus
extern "C" {
#endif

enum fix_id {
    FIX_CONVERT_ONCE,
    FIX_GRADIENT_CHECKPOINTING,
    FIX_CHUNKED_DECODE,
    FIX_ZERO_GRAD_SET_TO_NONE,
    FIX_EXPANDABLE_SEGMENTS,
    FIX_MAX_SPLIT_SIZE_MB,
    FIX_GARBAGE_COLLECTION_THRESHOLD,
    FIX_SKIP_EMA_EVAL,
    FIX_EMA_ON_CPU,
    FIX_ADAMW_8BIT,
    FIX_MIXED_PRECISION,
    FIX_GRADIENT_ACCUMULATION,
    FIX_SDPA_ATTENTION,
    FIX_SAMPLES_TO_CPU,
    FIX_OFFLOAD_TEXT_ENCODER,
    FIX_PAD_TO_LONGEST,
    FIX_FUSED_LINEAR_CROSS_ENTROPY,
    FIX_COMPILED_ACTIVATIONS,
    FIX_COUNT
};

struct gradient_checkpointing_params {
    int every;        /* checkpoint every k layers */
};
SWITCH_PARAMS_ACCESSORS(gradient_checkpointing);

struct chunked_decode_params {
    int chunk;        /* images per VAE decode */
};
SWITCH_PARAMS_ACCESSORS(chunked_decode);

struct max_split_size_mb_params {
    int mb;           /* cached blocks above this size (MiB) are never split */
};
SWITCH_PARAMS_ACCESSORS(max_split_size_mb);

struct garbage_collection_threshold_params {
    double threshold; /* fraction of the memory limit above which unused cached blocks are reclaimed */
};
SWITCH_PARAMS_ACCESSORS(garbage_collection_threshold);

struct mixed_precision_params {
    enum dtype dtype; /* autocast dtype */
};
SWITCH_PARAMS_ACCESSORS(mixed_precision);

struct gradient_accumulation_params {
    int micro_batch;  /* 0 = batch / 4, at least 1 */
};
SWITCH_PARAMS_ACCESSORS(gradient_accumulation);

struct fused_linear_cross_entropy_params {
    int chunk;        /* rows per chunk (0 = Liger's rule: about batch x seq x hidden / vocab, a power of 2) */
};
SWITCH_PARAMS_ACCESSORS(fused_linear_cross_entropy);

const struct switch_info *fix_table(int *count); /* indexed by enum fix_id */
const struct switch_info *fix_find(const char *name); /* NULL if unknown */
int fix_enable(struct job_spec *spec, const char *name, struct err *e);

#ifdef __cplusplus
}
#endif

#endif
