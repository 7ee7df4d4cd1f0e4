/* fixes.c: the fix table. Each row is a named, composable fix: its help, its parameters (key rows:
 * type, bounds, default, help), what it changes in the job's settings, and for an allocator fix the
 * settings it adds to the variant's allocator config; generator code behind a fix (generate.c,
 * models/) is found by its id. */
#include "alloc/config.h"
#include "workload/switch_rows.h"

#define FIX_TABLE(NAME, keys) SWITCH_PARAMS_TABLE("variants.NAME.fixes." #NAME, "fix", NAME, keys)

/* ---- gradient_checkpointing ---- */
SWITCH_PARAMS_DEFINE(fix_params, FIX_GRADIENT_CHECKPOINTING, gradient_checkpointing)
SWITCH_PARAMS_DEFAULTS(gradient_checkpointing, .every = 1)
#define P struct gradient_checkpointing_params
static const struct key ckpt_keys[] = {
    K_INT(P, "every", every, 1, 4096, NULL, "Checkpoint every k layers (keep their inputs only)."),
};
#undef P
static const struct key_table ckpt_params = FIX_TABLE(gradient_checkpointing, ckpt_keys);

/* ---- chunked_decode ---- */
SWITCH_PARAMS_DEFINE(fix_params, FIX_CHUNKED_DECODE, chunked_decode)
SWITCH_PARAMS_DEFAULTS(chunked_decode, .chunk = 1)
#define P struct chunked_decode_params
static const struct key decode_keys[] = {
    K_INT(P, "chunk", chunk, 1, 1 << 20, NULL, "Images per VAE decode."),
};
#undef P
static const struct key_table decode_params = FIX_TABLE(chunked_decode, decode_keys);

/* ---- fused_linear_cross_entropy ---- */
SWITCH_PARAMS_DEFINE(fix_params, FIX_FUSED_LINEAR_CROSS_ENTROPY, fused_linear_cross_entropy)
SWITCH_PARAMS_DEFAULTS(fused_linear_cross_entropy, .chunk = 0)
#define P struct fused_linear_cross_entropy_params
static const struct key flce_keys[] = {
    K_INT(P, "chunk", chunk, 0, 1 << 24, "Liger's rule: next_power_of_2(ceil(tokens / ceil(vocab / hidden)))",
          "Token rows per chunk of logits."),
};
#undef P
static const struct key_table flce_params = FIX_TABLE(fused_linear_cross_entropy, flce_keys);

/* ---- max_split_size_mb ---- */
SWITCH_PARAMS_DEFINE(fix_params, FIX_MAX_SPLIT_SIZE_MB, max_split_size_mb)
SWITCH_PARAMS_DEFAULTS(max_split_size_mb, .mb = 128)
#define P struct max_split_size_mb_params
static const struct key split_keys[] = {
    K_INT(P, "mb", mb, 20, BIG, NULL, "Cached blocks above this size (MiB) are never split (PyTorch: at least 20)."),
};
#undef P
static const struct key_table split_params = FIX_TABLE(max_split_size_mb, split_keys);

/* ---- garbage_collection_threshold ---- */
SWITCH_PARAMS_DEFINE(fix_params, FIX_GARBAGE_COLLECTION_THRESHOLD, garbage_collection_threshold)
SWITCH_PARAMS_DEFAULTS(garbage_collection_threshold, .threshold = 0.7)
#define P struct garbage_collection_threshold_params
static const struct key gc_keys[] = {
    {.name = "threshold", .type = KEY_FLOAT, FIELD(P, threshold), .fmin = 0, .fmax = 1, .fopen = true,
     .help = "Unused cached blocks are reclaimed when reserved memory is above this fraction of the limit."},
};
#undef P
static const struct key_table gc_params = FIX_TABLE(garbage_collection_threshold, gc_keys);

/* ---- mixed_precision ---- */
SWITCH_PARAMS_DEFINE(fix_params, FIX_MIXED_PRECISION, mixed_precision)
SWITCH_PARAMS_DEFAULTS(mixed_precision, .dtype = DT_BF16)
#define P struct mixed_precision_params
static const struct key mp_keys[] = {
    K_ENUM(P, "dtype", dtype, float_dtype_at, SPEC_FLOAT_DTYPES, "Autocast dtype (fp16 adds loss scaling)."),
};
#undef P
static const struct key_table mp_params = FIX_TABLE(mixed_precision, mp_keys);

/* ---- gradient_accumulation ---- */
SWITCH_PARAMS_DEFINE(fix_params, FIX_GRADIENT_ACCUMULATION, gradient_accumulation)
SWITCH_PARAMS_DEFAULTS(gradient_accumulation, 0)
#define P struct gradient_accumulation_params
static const struct key accum_keys[] = {
    K_INT(P, "micro_batch", micro_batch, 0, 1 << 20, "batch / 4, at least 1",
          "Micro-batch; steps accumulate to the same batch."),
};
#undef P
static const struct key_table accum_params = FIX_TABLE(gradient_accumulation, accum_keys);

/* ---- settings hooks ---- */

static void free_gradients(struct job_spec *s)
{
    s->set_to_none = true;
}

static void ema_to_cpu(struct job_spec *s)
{
    if (s->ema != EMA_OFF)
        s->ema = EMA_CPU;
}

static void adamw_8bit(struct job_spec *s)
{
    s->optimizer = OPT_ADAMW_8BIT;
}

static void autocast(struct job_spec *s)
{
    if (s->autocast)
        return;
    s->autocast = true;
    s->autocast_dtype = mixed_precision_params(s).dtype;
    if (s->autocast_dtype == DT_F16)
        s->loss_scaling = true;
}

static void micro_batches(struct job_spec *s)
{
    int micro = gradient_accumulation_params(s).micro_batch;
    if (micro == 0)
        micro = s->batch / 4 > 0 ? s->batch / 4 : 1;
    if (micro < s->batch) {
        s->grad_accum *= (s->batch + micro - 1) / micro;
        s->batch = micro;
    }
}

static void sdpa(struct job_spec *s)
{
    s->model.attn = ATTN_SDPA;
}

static void text_encoder_off_device(struct job_spec *s)
{
    job_spec_place_extras(s, EXTRA_TEXT_ENCODER, false);
}

/* ---- why a fix changes nothing in a job ---- */

static const char *no_duplicate(const struct job_spec *s)
{
    return spec_has_fault(s, FAULT_DUPLICATE_DTYPE_CONVERSION) ? NULL : "the job keeps no second copy of the weights";
}

static const char *no_vae_decode(const struct job_spec *s)
{
    return s->eval.every || s->eval.before_training ? (s->eval.vae_decode ? NULL : "the job decodes nothing")
                                                    : "the job runs no eval";
}

static const char *grads_freed(const struct job_spec *s)
{
    return s->set_to_none && !spec_has_fault(s, FAULT_UNRELEASED_GRADIENTS) ? "zero_grad already frees gradients"
                                                                            : NULL;
}

static const char *no_ema_eval(const struct job_spec *s)
{
    return s->ema == EMA_OFF ? "the job keeps no EMA"
           : !spec_has_fault(s, FAULT_EMA_CONTEXT_SPIKE) ? "eval does not swap in the EMA weights"
                                                         : NULL;
}

static const char *no_gpu_ema(const struct job_spec *s)
{
    return s->ema == EMA_OFF ? "the job keeps no EMA" : s->ema == EMA_CPU ? "the EMA is already on the CPU" : NULL;
}

static const char *not_adamw(const struct job_spec *s)
{
    switch (s->optimizer) {
    case OPT_ADAMW: return NULL;
    case OPT_ADAMW_8BIT:
    case OPT_PAGED_ADAMW_8BIT: return "AdamW is already 8-bit";
    case OPT_PAGED_ADAMW_32BIT: return "the optimizer is bitsandbytes' paged AdamW";
    default: return "the optimizer is not AdamW";
    }
}

static const char *already_16bit(const struct job_spec *s)
{
    return s->autocast ? "the forward already runs under autocast"
           : s->param_dtype != DT_F32 ? "the weights are already 16-bit"
                                      : NULL;
}

static const char *batch_of_one(const struct job_spec *s)
{
    return s->batch <= 1 ? "the batch is already 1" : NULL;
}

static const char *already_sdpa(const struct job_spec *s)
{
    return s->model.attn == ATTN_SDPA ? "attention is already SDPA" : NULL;
}

static const char *no_samples(const struct job_spec *s)
{
    return spec_has_fault(s, FAULT_EVAL_SAMPLES_ON_DEVICE) ? NULL : "the job keeps no generated samples on the device";
}

static const char *no_text_encoder(const struct job_spec *s)
{
    for (int i = 0; i < s->nextras; i++)
        if (s->extras[i].role == EXTRA_TEXT_ENCODER && s->extras[i].on_device)
            return NULL;
    return "no text encoder stays on the device";
}

static const char *no_lm_loss(const struct job_spec *s)
{
    return s->model.family == FAMILY_DECODER && s->model.lm_head && s->kind != JOB_GENERATE
               ? NULL
               : "the job computes no decoder LM loss";
}

/* torch.compile fuses gelu_new's composite into one kernel saving its input: the tanh GELU */
static void compile_activations(struct job_spec *s)
{
    if (s->model.act == ACT_GELU_NEW)
        s->model.act = ACT_GELU_TANH;
}

static const char *nothing_to_compile(const struct job_spec *s)
{
    const struct model_spec *m = &s->model;
    bool gated = m->ffn_kind == FFN_GATED && (m->act == ACT_SILU || m->act == ACT_GELU || m->act == ACT_GELU_TANH);
    bool composite = m->act == ACT_GELU_NEW;
    bool transformer = m->family == FAMILY_DECODER || m->family == FAMILY_ENCODER || m->family == FAMILY_T5 ||
                       m->family == FAMILY_CLIP_TEXT;
    return transformer && (gated || composite) ? NULL : "no gated MLP or composite activation to fuse";
}

static const char *not_padded(const struct job_spec *s)
{
    return spec_has_fault(s, FAULT_ACTIVATION_GROWTH) || spec_has_fault(s, FAULT_VARIABLE_LENGTH_FRAGMENTATION)
               ? NULL
               : "batches are not padded to a maximum length";
}

/* ---- allocator edits ---- */

static int edit_expandable(struct alloc_config *c, const struct job_spec *s, struct err *e)
{
    return alloc_config_set_expandable_segments(c, true, e);
}

static int edit_max_split(struct alloc_config *c, const struct job_spec *s, struct err *e)
{
    return alloc_config_set_max_split_size_mb(c, (uint64_t)max_split_size_mb_params(s).mb, e);
}

static int edit_gc_threshold(struct alloc_config *c, const struct job_spec *s, struct err *e)
{
    return alloc_config_set_garbage_collection_threshold(c, garbage_collection_threshold_params(s).threshold, e);
}

static const struct switch_info fixes[FIX_COUNT] = {
    {.id = FIX_CONVERT_ONCE, .name = "convert_once",
     .help = "load once in the target dtype; no extra references or state-dict copies", .inert = no_duplicate},
    {.id = FIX_GRADIENT_CHECKPOINTING, .name = "gradient_checkpointing",
     .help = "keep only the inputs of each checkpointed segment and recompute its forward in backward",
     .params = &ckpt_params},
    {.id = FIX_CHUNKED_DECODE, .name = "chunked_decode", .help = "decode N images at a time with the VAE",
     .params = &decode_params, .inert = no_vae_decode},
    {.id = FIX_ZERO_GRAD_SET_TO_NONE, .name = "zero_grad_set_to_none",
     .help = "zero_grad(set_to_none=True): gradients freed after the step", .settings = free_gradients,
     .inert = grads_freed},
    {.id = FIX_EXPANDABLE_SEGMENTS, .name = "expandable_segments",
     .help = "allocator: one segment per stream grows and shrinks in pages", .alloc_edit = edit_expandable},
    {.id = FIX_MAX_SPLIT_SIZE_MB, .name = "max_split_size_mb",
     .help = "allocator: do not split cached blocks above a size", .params = &split_params,
     .alloc_edit = edit_max_split},
    {.id = FIX_GARBAGE_COLLECTION_THRESHOLD, .name = "garbage_collection_threshold",
     .help = "allocator: reclaim unused cached blocks above a fraction of the memory limit (needs a memory "
             "fraction < 1)",
     .params = &gc_params, .alloc_edit = edit_gc_threshold},
    {.id = FIX_SKIP_EMA_EVAL, .name = "skip_ema_eval",
     .help = "evaluate the live weights, without the EMA store/copy_to/restore", .inert = no_ema_eval},
    {.id = FIX_EMA_ON_CPU, .name = "ema_on_cpu", .help = "keep the EMA shadow (and its stored copy) on the CPU",
     .settings = ema_to_cpu,
     .inert = no_gpu_ema},
    {.id = FIX_ADAMW_8BIT, .name = "adamw_8bit",
     .help = "bitsandbytes 8-bit AdamW: 2 B/param of state plus block absmax", .settings = adamw_8bit,
     .inert = not_adamw},
    {.id = FIX_MIXED_PRECISION, .name = "mixed_precision",
     .help = "forward under autocast (fp32 weights, 16-bit compute)", .params = &mp_params, .settings = autocast,
     .inert = already_16bit},
    {.id = FIX_GRADIENT_ACCUMULATION, .name = "gradient_accumulation",
     .help = "smaller micro-batches accumulated to the same effective batch", .params = &accum_params,
     .settings = micro_batches, .inert = batch_of_one},
    {.id = FIX_SDPA_ATTENTION, .name = "sdpa_attention",
     .help = "fused scaled_dot_product_attention: no score matrix kept", .settings = sdpa,
     .inert = already_sdpa},
    {.id = FIX_SAMPLES_TO_CPU, .name = "samples_to_cpu",
     .help = "move each generated sample batch, or each eval batch's logits (eval_accumulation_steps=1), to the CPU",
     .inert = no_samples},
    {.id = FIX_OFFLOAD_TEXT_ENCODER, .name = "offload_text_encoder",
     .help = "keep the frozen text encoder on the CPU", .settings = text_encoder_off_device,
     .inert = no_text_encoder},
    {.id = FIX_PAD_TO_LONGEST, .name = "pad_to_longest",
     .help = "pad each batch to its longest sequence, not max_length", .inert = not_padded},
    {.id = FIX_FUSED_LINEAR_CROSS_ENTROPY, .name = "fused_linear_cross_entropy",
     .help = "LM head and loss in chunks of rows (Liger-Kernel, cut-cross-entropy): the logits are never whole",
     .params = &flce_params, .inert = no_lm_loss},
    {.id = FIX_COMPILED_ACTIVATIONS, .name = "compiled_activations",
     .help = "torch.compile's fused activations: act(gate) * up saves only gate and up; gelu_new saves its input",
     .settings = compile_activations, .inert = nothing_to_compile},
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
    return switch_enable(fixes, FIX_COUNT, "fix", &spec->fixes, name, e);
}
