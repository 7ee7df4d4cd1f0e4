/* fixes.c: the fix table: each a named, composable switch that either changes what the generator
 * emits (see generate.c, optimizer.c, nn.c) or contributes a PYTORCH_CUDA_ALLOC_CONF fragment. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "workload/switches.h"

#define XP(field) offsetof(struct fix_params, field)

static const struct switch_param ckpt_params[] = {
    {"every", SWITCH_INT, XP(checkpoint_every), "1", "checkpoint every k layers (keep their inputs only)"},
};
static const struct switch_param decode_params[] = {
    {"chunk", SWITCH_INT, XP(decode_chunk), "1", "images per VAE decode"},
};
static const struct switch_param split_params[] = {
    {"mb", SWITCH_INT, XP(max_split_size_mb), "128", "blocks above this size (MiB) are never split"},
};
static const struct switch_param gc_params[] = {
    {"threshold", SWITCH_DOUBLE, XP(gc_threshold), "0.7", "reclaim cached blocks above this fraction of the limit"},
};
static const struct switch_param accum_params[] = {
    {"micro_batch", SWITCH_INT, XP(micro_batch), "0", "micro-batch (0 = batch / 4); steps accumulate to the same batch"},
};
static const struct switch_param mp_params[] = {
    {"dtype", SWITCH_DTYPE, XP(mp_dtype), "bf16", "autocast dtype (fp16 adds loss scaling)"},
};

#define N(a) (int)(sizeof a / sizeof a[0])

static const struct switch_info fixes[FIX_COUNT] = {
    {FIX_CONVERT_ONCE, "convert_once", "load once in the target dtype; no extra references or state-dict copies",
     NULL, 0, NULL},
    {FIX_GRADIENT_CHECKPOINTING, "gradient_checkpointing",
     "keep only the inputs of each checkpointed segment and recompute its forward in backward", ckpt_params,
     N(ckpt_params), NULL},
    {FIX_CHUNKED_DECODE, "chunked_decode", "decode N images at a time with the VAE", decode_params, N(decode_params),
     NULL},
    {FIX_ZERO_GRAD_SET_TO_NONE, "zero_grad_set_to_none", "zero_grad(set_to_none=True): gradients freed after the step",
     NULL, 0, NULL},
    {FIX_EXPANDABLE_SEGMENTS, "expandable_segments", "allocator: one segment per stream grows and shrinks in pages",
     NULL, 0, "expandable_segments:True"},
    {FIX_MAX_SPLIT_SIZE_MB, "max_split_size_mb", "allocator: do not split cached blocks above a size", split_params,
     N(split_params), "max_split_size_mb:%d"},
    {FIX_GARBAGE_COLLECTION_THRESHOLD, "garbage_collection_threshold",
     "allocator: reclaim unused cached blocks above a fraction of the memory limit (needs a memory fraction < 1)",
     gc_params, N(gc_params), "garbage_collection_threshold:%g"},
    {FIX_SKIP_EMA_EVAL, "skip_ema_eval", "evaluate the live weights, without the EMA store/copy_to/restore", NULL, 0,
     NULL},
    {FIX_EMA_ON_CPU, "ema_on_cpu", "keep the EMA shadow (and its stored copy) on the CPU", NULL, 0, NULL},
    {FIX_ADAMW_8BIT, "adamw_8bit", "bitsandbytes 8-bit AdamW: 2 B/param of state plus block absmax", NULL, 0, NULL},
    {FIX_MIXED_PRECISION, "mixed_precision", "forward under autocast (fp32 weights, 16-bit compute)", mp_params,
     N(mp_params), NULL},
    {FIX_GRADIENT_ACCUMULATION, "gradient_accumulation", "smaller micro-batches accumulated to the same effective batch",
     accum_params, N(accum_params), NULL},
    {FIX_SDPA_ATTENTION, "sdpa_attention", "fused scaled_dot_product_attention: no score matrix kept", NULL, 0, NULL},
    {FIX_SAMPLES_TO_CPU, "samples_to_cpu", "move each generated sample batch to the CPU", NULL, 0, NULL},
    {FIX_OFFLOAD_TEXT_ENCODER, "offload_text_encoder", "keep the frozen text encoder on the CPU", NULL, 0, NULL},
    {FIX_PAD_TO_LONGEST, "pad_to_longest", "pad each batch to its longest sequence, not max_length", NULL, 0, NULL},
};

const struct switch_info *fix_table(int *count)
{
    *count = FIX_COUNT;
    return fixes;
}

const struct switch_info *fix_find(const char *name)
{
    return switch_find(fixes, FIX_COUNT, name);
}

int fix_enable(struct job_spec *spec, const char *name, struct err *e)
{
    const struct switch_info *f = fix_find(name);
    if (!f)
        return err_set(e, ERR_INPUT, "unknown fix '%s' (see `oomlab list`)", name);
    spec->fixes |= 1u << f->id;
    return 0;
}

int fix_param_set(struct job_spec *spec, const char *fix, const char *param, const char *value, struct err *e)
{
    const struct switch_info *f = fix_find(fix);
    if (!f)
        return err_set(e, ERR_INPUT, "unknown fix '%s' (see `oomlab list`)", fix);
    return switch_param_set(f, &spec->fix, param, value, e);
}

void fixes_alloc_conf(const struct job_spec *spec, char *buf, size_t len)
{
    size_t at = 0;
    if (len)
        buf[0] = 0;
    for (int i = 0; i < FIX_COUNT; i++) {
        const struct switch_info *f = &fixes[i];
        if (!f->alloc_conf || !spec_has_fix(spec, (enum fix_id)f->id))
            continue;
        char part[96];
        if (f->id == FIX_MAX_SPLIT_SIZE_MB)
            snprintf(part, sizeof part, f->alloc_conf, spec->fix.max_split_size_mb);
        else if (f->id == FIX_GARBAGE_COLLECTION_THRESHOLD)
            snprintf(part, sizeof part, f->alloc_conf, spec->fix.gc_threshold);
        else
            snprintf(part, sizeof part, "%s", f->alloc_conf);
        int n = snprintf(buf + at, len > at ? len - at : 0, "%s%s", at ? "," : "", part);
        if (n > 0)
            at += (size_t)n;
    }
}
