/* spec.c: job_spec defaults, validation, and the name <-> enum tables the scenario loader uses. */
#include "workload/spec.h"
#include "workload/job_kinds.h"
#include "workload/diffusion_job.h"

#include <string.h>

#define NAME_TABLE(fn, type, count, ...)                                     \
    static const char *const fn##_names[count] = {__VA_ARGS__};            \
    const char *fn##_name(type v)                                          \
    {                                                                      \
        return (unsigned)v < (unsigned)(count) ? fn##_names[v] : "?";      \
    }                                                                      \
    int fn##_from_name(const char *s)                                      \
    {                                                                      \
        for (int i = 0; i < (int)(count); i++)                             \
            if (strcmp(s, fn##_names[i]) == 0)                             \
                return i;                                                  \
        return -1;                                                         \
    }

NAME_TABLE(norm, enum norm_kind, NORM_COUNT, "layernorm", "rmsnorm", "groupnorm", "rmsnorm_fused")
NAME_TABLE(norm_place, enum norm_place, NORM_PLACE_COUNT, "pre", "post")
NAME_TABLE(ffn, enum ffn_kind, FFN_COUNT, "mlp", "gated")
NAME_TABLE(act, enum act_kind, ACT_COUNT, "gelu", "gelu_tanh", "quick_gelu", "silu", "relu",
           "gelu_new")
NAME_TABLE(pos, enum pos_kind, POS_COUNT, "learned", "rotary", "relative_bias", "none")
NAME_TABLE(attn, enum attn_impl, ATTN_COUNT, "eager", "sdpa")
NAME_TABLE(optimizer, enum optimizer_kind, OPT_COUNT, "sgd", "adamw", "adamw_8bit", "adafactor", "paged_adamw_8bit",
           "paged_adamw_32bit")
NAME_TABLE(trainable, enum trainable_kind, TRAIN_COUNT, "full", "lora", "linear_probe")
NAME_TABLE(ema_place, enum ema_place, EMA_COUNT, "off", "gpu", "cpu")
NAME_TABLE(on_oom, enum on_oom_policy, ON_OOM_COUNT, "fail", "halve_batch")
NAME_TABLE(extra_role, enum extra_role, EXTRA_ROLE_COUNT, "text_encoder", "vae")
NAME_TABLE(parallel_strategy, enum parallel_strategy, PAR_COUNT, "none", "ddp", "zero1", "zero2", "zero3", "fsdp", "fsdp1")
NAME_TABLE(fsdp_backward_prefetch, enum fsdp_backward_prefetch, BWD_PREFETCH_COUNT, "backward_pre", "backward_post",
           "none")
NAME_TABLE(nccl_transport, enum nccl_transport, NCCL_TRANSPORT_COUNT, "p2p", "shm")
NAME_TABLE(job_kind, enum job_kind, JOB_KIND_COUNT, "train", "eval", "generate", "diffusion")
NAME_TABLE(cache_kind, enum cache_kind, CACHE_COUNT, "dynamic", "static")
NAME_TABLE(quant, enum quant_kind, QUANT_COUNT, "none", "nf4", "fp4", "int8")
NAME_TABLE(offload, enum offload_kind, OFFLOAD_COUNT, "none", "model", "sequential")
NAME_TABLE(vae_upcast, enum vae_upcast_kind, VAE_UPCAST_COUNT, "auto", "true", "false")

const char *float_dtype_at(int i)
{
    return i >= 0 && i < SPEC_FLOAT_DTYPES ? dtype_name((enum dtype)i) : "?";
}

void job_spec_init(struct job_spec *s)
{
    struct err e = {0};
    memset(s, 0, sizeof *s);
    snprintf(s->model.preset, sizeof s->model.preset, "tiny-transformer");
    preset_apply(&s->model, "tiny-transformer", &e);
    s->batch = 8;
    s->seq_len = 128;
    s->image_size = 512;
    s->context_len = 77;
    s->load_dtype = s->param_dtype = DT_F32;
    s->autocast_dtype = DT_BF16;
    s->optimizer = OPT_ADAMW;
    s->foreach = true;
    s->set_to_none = true;
    s->grad_accum = 1;
    s->steps = 1;
    s->eval.batches = 1;
    s->generate.prompt_len = 128;
    s->generate.new_tokens = 128;
    s->diffusion.steps = 50;
    s->diffusion.guidance = true;
    s->diffusion.images_per_prompt = 1;
    s->diffusion.tile_overlap = 0.25;
    s->lora_rank = 8;
    s->lora.alpha = 16.0f;
    s->quant.blocksize = 64;
    s->quant.double_quant = true;
    s->quant.compute_dtype = DT_BF16;
    switches_init(s);
    s->cublas_workspace_bytes = CUBLAS_WORKSPACE_DEFAULT_BYTES;
    s->streams = 1;
    s->use_cache = true;
    s->kernel_scratch = true;
    s->robust.min_batch_size = 1;
    s->robust.max_retries = 8;
    s->robust.keep_effective_batch = true;
    parallel_spec_init(&s->parallel);
}

void job_spec_place_extras(struct job_spec *s, enum extra_role role, bool on_device)
{
    for (int i = 0; i < s->nextras; i++)
        if (s->extras[i].role == role)
            s->extras[i].on_device = on_device;
}

static bool is_float(enum dtype d)
{
    return d == DT_F32 || d == DT_BF16 || d == DT_F16;
}

int job_spec_validate(struct job_spec *s, struct err *e)
{
    if (s->model.preset[0] && strcmp(s->model.preset, s->model.expanded_from) != 0) {
        char name[SPEC_NAME_MAX];
        snprintf(name, sizeof name, "%s", s->model.preset);
        if (preset_apply(&s->model, name, e) < 0)
            return -1;
    }
    if (s->batch < 1)
        return err_set(e, ERR_INPUT, "batch: must be at least 1 (got %d)", s->batch);
    if (s->steps < 0 || s->grad_accum < 1)
        return err_set(e, ERR_INPUT, "steps/grad_accum: steps >= 0 and grad_accum >= 1");
    if (s->seq_len < 1)
        return err_set(e, ERR_INPUT, "seq_len: must be at least 1");
    if (!is_float(s->load_dtype) || !is_float(s->param_dtype) || !is_float(s->autocast_dtype))
        return err_set(e, ERR_INPUT, "dtypes: load, param and autocast dtypes must be fp32, bf16 or fp16");
    if (model_spec_resolve(&s->model, s, e))
        return -1;
    if (s->robust.on_oom == ON_OOM_HALVE_BATCH && s->robust.min_batch_size > s->batch)
        return err_set(e, ERR_INPUT, "robust.min_batch_size: %d is above the batch size %d", s->robust.min_batch_size,
                       s->batch);
    if (s->trainable == TRAIN_LORA && s->lora_rank < 1)
        return err_set(e, ERR_INPUT, "lora_rank: must be at least 1");
    if (quant_spec_check(s, e) || lora_spec_check(s, e))
        return -1;
    if (s->nextras < 0 || s->nextras > SPEC_MAX_EXTRAS)
        return err_set(e, ERR_INPUT, "extras: at most %d", SPEC_MAX_EXTRAS);
    for (int i = 0; i < s->nextras; i++) {
        struct model_spec tmp;
        if (preset_apply(&tmp, s->extras[i].preset, e) < 0)
            return err_prefix(e, "extras[%d]: ", i);
    }
    if (s->streams < 1 || s->streams > 8)
        return err_set(e, ERR_INPUT, "streams: 1..8 (got %d)", s->streams);
    if (s->eval.every < 0 || s->eval.batches < 0 || s->eval.sampling_steps < 0)
        return err_set(e, ERR_INPUT, "eval: every, batches and sampling_steps must be >= 0");
    if (s->kind < 0 || s->kind >= JOB_KIND_COUNT)
        return err_set(e, ERR_INPUT, "job.kind %d is not a job kind", (int)s->kind);
    if (s->kind == JOB_GENERATE && generation_check(s, e))
        return -1;
    if (s->kind == JOB_EVAL && eval_job_check(s, e))
        return -1;
    if (s->kind == JOB_DIFFUSION && diffusion_check(s, e))
        return -1;
    if (parallel_spec_check(s, e) < 0)
        return -1;
    return switches_check(s, e);
}
