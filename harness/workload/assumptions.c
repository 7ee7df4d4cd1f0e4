/* assumptions.c: the choices a job's op program embodies that a user must know to compare oomlab's
 * figures with another tool's (generate.h, struct job_assumptions), from the resolved job. */
#include "workload/generate.h"
#include "workload/parallel.h"
#include "workload/switches.h"

#include <stdio.h>
#include <string.h>

static bool transformer(enum model_family f)
{
    return f == FAMILY_DECODER || f == FAMILY_ENCODER || f == FAMILY_T5 || f == FAMILY_CLIP_TEXT || f == FAMILY_VIT ||
           f == FAMILY_CLIP_VISION;
}

static void attention_text(const struct job_spec *s, enum dtype cd, char *buf, size_t len)
{
    const struct model_spec *m = &s->model;
    if (!transformer(m->family) && m->family != FAMILY_UNET && m->family != FAMILY_VAE && m->family != FAMILY_MMDIT) {
        snprintf(buf, len, "none");
        return;
    }
    if (m->attn == ATTN_EAGER) {
        snprintf(buf, len, "eager");
        return;
    }
    /* nn_attention: flash for 16-bit inputs without a mask (T5's position bias is one) */
    bool masked = s->padding || (m->family == FAMILY_T5);
    bool flash = (cd == DT_BF16 || cd == DT_F16) && !masked;
    snprintf(buf, len, "sdpa (%s)", flash ? "flash" : "memory-efficient");
}

static void activation_text(const struct model_spec *m, char *buf, size_t len)
{
    enum act_kind act = m->act;
    if (m->family == FAMILY_UNET || m->family == FAMILY_VAE)
        act = ACT_SILU;
    else if (m->family == FAMILY_CNN)
        act = ACT_RELU;
    else if (m->family == FAMILY_MMDIT)
        act = ACT_GELU_TANH; /* FeedForward "gelu-approximate", act_mlp GELU(approximate="tanh") */
    snprintf(buf, len, "%s (%s)", act_name(act), act == ACT_GELU_NEW ? "composite" : "fused");
}

static void precision_text(const struct job_spec *s, char *buf, size_t len)
{
    const char *master = s->master_weights ? ", fp32 master weights" : "";
    const char *scaled = s->loss_scaling ? ", loss scaling" : "";
    if (s->autocast)
        snprintf(buf, len, "autocast %s over %s weights%s%s", dtype_name(s->autocast_dtype), dtype_name(s->param_dtype),
                 master, scaled);
    else if (s->param_dtype != DT_F32)
        snprintf(buf, len, "pure %s%s%s", dtype_name(s->param_dtype), master, scaled);
    else
        snprintf(buf, len, "fp32%s", scaled);
    if (s->quant.type != QUANT_NONE) {
        size_t n = strlen(buf);
        bool nested = s->quant.double_quant && s->quant.type != QUANT_INT8;
        snprintf(buf + n, len - n, ", %s base weights%s%s", quant_name(s->quant.type), nested ? " (double quant)" : "",
                 s->quant.prepare_kbit ? ", prepare_kbit" : "");
    }
}

static void optimizer_text(const struct job_spec *s, char *buf, size_t len)
{
    switch (s->optimizer) {
    case OPT_ADAMW_8BIT:
        snprintf(buf, len, "adamw_8bit (bitsandbytes)");
        break;
    case OPT_ADAFACTOR:
        snprintf(buf, len, "adafactor (transformers)");
        break;
    case OPT_PAGED_ADAMW_8BIT:
    case OPT_PAGED_ADAMW_32BIT:
        snprintf(buf, len, "%s (bitsandbytes; paged state in unified memory, modelled resident)",
                 optimizer_name(s->optimizer));
        break;
    default:
        snprintf(buf, len, "%s %s", optimizer_name(s->optimizer), s->foreach ? "foreach" : "for-loop");
        break;
    }
}

int workload_assumptions(const struct job_spec *spec, struct job_assumptions *a, struct err *e)
{
    struct job_spec s = *spec;
    if (job_spec_validate(&s, e) < 0)
        return -1;
    switches_apply_settings(&s);
    if (s.kind == JOB_GENERATE || s.kind == JOB_DIFFUSION) /* as workload_create: the weights as loaded */
        s.param_dtype = s.load_dtype;
    enum dtype cd = s.autocast ? s.autocast_dtype : fsdp_gather_dtype(&s); /* FSDP computes in its param_dtype */
    *a = (struct job_assumptions){.steps = s.steps, .kernel_scratch = s.kernel_scratch};
    a->use_cache = s.use_cache && !spec_has_fix(&s, FIX_GRADIENT_CHECKPOINTING) &&
                   (s.model.family == FAMILY_DECODER || s.model.family == FAMILY_T5);
    attention_text(&s, cd, a->attention, sizeof a->attention);
    activation_text(&s.model, a->activation, sizeof a->activation);
    precision_text(&s, a->precision, sizeof a->precision);
    optimizer_text(&s, a->optimizer, sizeof a->optimizer);
    a->nccl_bytes = nccl_connections(&s.parallel).total;
    a->nccl_channels = a->nccl_bytes ? s.parallel.nccl_channels : 0;
    if (parallel_fsdp(&s) && (fsdp_gather_dtype(&s) != s.param_dtype || fsdp_reduce_dtype(&s) != s.param_dtype)) {
        size_t n = strlen(a->precision);
        snprintf(a->precision + n, sizeof a->precision - n, " shards, FSDP param_dtype %s, reduce_dtype %s",
                 dtype_name(fsdp_gather_dtype(&s)), dtype_name(fsdp_reduce_dtype(&s)));
    }
    if (s.model.experts)
        snprintf(a->routing, sizeof a->routing, "MoE routing assumed balanced (tokens x %d / %d experts each, "
                 "remainder on the first), top-k renormalisation not modelled", s.model.experts_top_k,
                 s.model.experts);
    if (s.kind == JOB_GENERATE) {
        snprintf(a->optimizer, sizeof a->optimizer, "generate with a %s cache, no optimizer",
                 cache_kind_name(s.generate.cache));
    } else if (s.kind == JOB_DIFFUSION) {
        snprintf(a->optimizer, sizeof a->optimizer, "diffusion job, no optimizer");
        if (s.diffusion.attention_slicing)
            snprintf(a->attention, sizeof a->attention, "sliced eager in the UNet (SlicedAttnProcessor)");
    } else if (s.kind != JOB_TRAIN) {
        snprintf(a->optimizer, sizeof a->optimizer, "%s job, no optimizer", job_kind_name(s.kind));
    }
    return 0;
}

void job_assumptions_text(const struct job_assumptions *a, char *buf, size_t len)
{
    snprintf(buf, len, "attention %s; act %s; %s; %s; %d step%s; KV cache %s; kernel scratch %s", a->attention,
             a->activation, a->precision, a->optimizer, a->steps, a->steps == 1 ? "" : "s", a->use_cache ? "on" : "off",
             a->kernel_scratch ? "on" : "off");
    if (a->routing[0]) {
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, "; %s", a->routing);
    }
}
