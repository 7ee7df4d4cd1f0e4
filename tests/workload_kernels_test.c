/* workload_kernels_test.c: every KERNEL op the workload generator emits is a valid kernels.h call:
 * kernel_validate() accepts it, and each tensor it names is live with an ALLOC of exactly
 * kernel_tensor_bytes() bytes (the one exception: memory-efficient attention's padded log-sum-exp). Covers every model family (tiny presets and a small configured model
 * each), eager and SDPA attention, fp32, bf16 and autocast, every optimizer, checkpointing, LoRA,
 * EMA with eval, diffusion sampling with a VAE decode, every fault, the generate and eval job kinds, the
 * fused linear cross-entropy and compiled activations. */
#include <uthash.h>

#include "kernels.h"
#include "tap.h"
#include "workload/generate.h"

struct live {
    uint64_t id, bytes;
    UT_hash_handle hh;
};

/* An op sink checking each kernel against the live ALLOCs. */
struct check_sink {
    struct op_sink base;
    struct live *live;
    uint64_t kernels, bad;
    uint64_t used[K_COUNT];
    char first[512];
};

static void fail(struct check_sink *s, const struct op *op, const char *fmt, const char *what, unsigned long long a,
                 unsigned long long b)
{
    if (!s->bad++) {
        char msg[1200];
        snprintf(msg, sizeof msg, fmt, what, a, b);
        snprintf(s->first, sizeof s->first, "%.255s (%.200s)", msg, op->name ? op->name : "-");
    }
}

/* The memory-efficient SDPA kernel's log-sum-exp, which PyTorch pads to a multiple of 32 query rows
 * (attention.cu, kAlignLSE): the kernels read the first Tq of each row. */
static bool padded_lse(const struct kernel_call *k, unsigned i, uint64_t bytes)
{
    bool lse = (k->kernel == K_FLASH_FWD && i == 3) || (k->kernel == K_FLASH_BWD_PREP && i == 2);
    return lse && bytes == (uint64_t)(k->dims[0] * k->dims[1] * ((k->dims[2] + 31) / 32 * 32)) * 4;
}

static void check_kernel(struct check_sink *s, const struct op *op)
{
    const struct kernel_call *k = &op->kernel;
    struct err e = {0};
    s->kernels++;
    if (kernel_validate(k, &e) < 0) {
        fail(s, op, "%s%.0llu%.0llu", e.msg, 0, 0);
        return;
    }
    s->used[k->kernel]++;
    const struct kernel_desc *kd = kernel_get(k->kernel);
    /* nothing of an earlier op left in this one (kernel_emit.c writes every KERNEL op in one struct op) */
    if (op->id || op->bytes || op->where || op->category) {
        fail(s, op, "%s: a KERNEL op with id %llu, bytes %llu", kd->name, op->id, op->bytes);
        return;
    }
    for (unsigned i = 0; i < KERNEL_MAX_DIMS; i++)
        if (!kd->dim_names[i] && k->dims[i]) {
            fail(s, op, "%s: dims[%llu] = %llu past the kernel's dims", kd->name, i, (unsigned long long)k->dims[i]);
            return;
        }
    for (unsigned i = k->ntensors; i < KERNEL_MAX_TENSORS; i++)
        if (k->tensors[i]) {
            fail(s, op, "%s: tensors[%llu] = %llu past the call's tensors", kd->name, i,
                 (unsigned long long)k->tensors[i]);
            return;
        }
    for (unsigned i = 0; i < k->ntensors; i++) {
        struct live *t;
        HASH_FIND(hh, s->live, &k->tensors[i], sizeof k->tensors[i], t);
        if (!t) {
            fail(s, op, "%s: tensor %llu is not live%.0llu", kd->name, (unsigned long long)k->tensors[i], 0);
            return;
        }
        uint64_t want = kernel_tensor_bytes(k, i);
        if (want != t->bytes && !padded_lse(k, i, t->bytes)) {
            char what[96];
            snprintf(what, sizeof what, "%s.%s", kd->name, kd->tensor_names[i]);
            fail(s, op, "%s: kernel bytes %llu, ALLOC bytes %llu", what, (unsigned long long)want,
                 (unsigned long long)t->bytes);
            return;
        }
    }
}

static int emit(struct op_sink *base, const struct op *op, struct err *e)
{
    struct check_sink *s = (struct check_sink *)base;
    struct live *t;
    switch (op->kind) {
    case OP_ALLOC:
    case OP_MANAGED_ALLOC:
        if (!(t = malloc(sizeof *t)))
            return err_set(e, ERR_INTERNAL, "out of memory");
        t->id = op->id;
        t->bytes = op->bytes;
        HASH_ADD(hh, s->live, id, sizeof t->id, t);
        break;
    case OP_FREE:
        HASH_FIND(hh, s->live, &op->id, sizeof op->id, t);
        if (!t)
            return err_set(e, ERR_INTERNAL, "FREE of tensor %llu, which is not live", (unsigned long long)op->id);
        HASH_DEL(s->live, t);
        free(t);
        break;
    case OP_KERNEL:
        check_kernel(s, op);
        break;
    default:
        break;
    }
    return 0;
}

static uint64_t coverage[K_COUNT];

static void check(const struct job_spec *spec, const char *what)
{
    struct check_sink s = {.base.emit = emit};
    struct err e = {0};
    int rc = workload_generate(spec, &s.base, &e);
    ok(rc == 0 && s.bad == 0 && s.kernels > 0, "%s: %llu kernels, all valid with matching tensor sizes", what,
       (unsigned long long)s.kernels);
    if (rc)
        diag("generate failed: %s", e.msg);
    if (s.bad)
        diag("%llu bad kernels; first: %s", (unsigned long long)s.bad, s.first);
    for (unsigned i = 0; i < K_COUNT; i++)
        coverage[i] += s.used[i];
    struct live *t, *tmp;
    HASH_ITER(hh, s.live, t, tmp) {
        HASH_DEL(s.live, t);
        free(t);
    }
}

static void base(struct job_spec *s)
{
    job_spec_init(s);
    s->batch = 2;
    s->seq_len = 16;
    s->image_size = 16;
    s->context_len = 8;
    s->steps = 2;
    s->eval.every = 2;
}

static void configured(struct job_spec *s, enum model_family f)
{
    struct model_spec *m = &s->model;
    memset(m, 0, sizeof *m);
    m->family = f;
    m->hidden = 64;
    m->heads = 4;
    m->layers = 2;
    m->ffn = 128;
    m->vocab = 256;
    m->max_positions = 32;
    m->norm = NORM_LAYERNORM;
    m->norm_bias = true;
    m->act = ACT_GELU;
    m->bias = true;
    m->dropout = 0.1f;
    m->lm_head = true;
    switch (f) {
    case FAMILY_DECODER: /* Llama style: rotary, GQA, RMSNorm, SwiGLU, no biases */
        m->pos = POS_ROTARY;
        m->kv_heads = 2;
        m->norm = NORM_RMSNORM;
        m->norm_bias = false;
        m->ffn_kind = FFN_GATED;
        m->act = ACT_SILU;
        m->bias = false;
        m->causal = true;
        m->dropout = 0;
        break;
    case FAMILY_ENCODER:
        m->pos = POS_LEARNED;
        m->norm_place = NORM_POST;
        m->type_vocab = 2;
        m->pooler = true;
        m->num_labels = 3; /* BertForSequenceClassification's head */
        m->lm_head = false;
        break;
    case FAMILY_T5: /* PyTorch's fused RMSNorm and transformers' composite gelu_new */
        m->pos = POS_RELATIVE_BIAS;
        m->rel_buckets = 8;
        m->norm = NORM_RMSNORM_FUSED;
        m->norm_bias = false;
        m->ffn_kind = FFN_GATED;
        m->act = ACT_GELU_NEW;
        m->bias = false;
        m->head_dim = 16;
        m->decoder_layers = 2;
        break;
    case FAMILY_CLIP_TEXT:
        m->pos = POS_LEARNED;
        m->act = ACT_QUICK_GELU;
        m->max_positions = 16;
        m->causal = true;
        m->projection_dim = 32;
        m->lm_head = false;
        break;
    case FAMILY_VIT: /* 4x4 patches of the 16-pixel image: 16 + the class token */
    case FAMILY_CLIP_VISION:
        m->in_channels = 3;
        m->patch_size = 4;
        m->max_positions = 17;
        m->num_labels = f == FAMILY_VIT ? 10 : 0;
        m->projection_dim = f == FAMILY_VIT ? 0 : 32;
        m->act = f == FAMILY_VIT ? ACT_GELU : ACT_QUICK_GELU;
        m->lm_head = false;
        break;
    case FAMILY_MLP:
        m->mlp_in = 32;
        m->mlp_depth = 2;
        m->mlp_hidden[0] = m->mlp_hidden[1] = 48;
        m->mlp_out = 5;
        m->act = ACT_GELU_TANH;
        break;
    default: /* GPT-2 style decoder */
        m->family = FAMILY_DECODER;
        m->pos = POS_LEARNED;
        m->causal = true;
        m->tied_embeddings = true;
        m->act = ACT_GELU_TANH;
        break;
    }
}

static void precision(struct job_spec *s, int p)
{
    if (p == 1) {
        s->load_dtype = s->param_dtype = DT_BF16;
    } else if (p == 2) {
        s->autocast = true;
        s->autocast_dtype = DT_BF16;
    } else if (p == 3) { /* 16-bit weights with fp32 masters, fp16 autocast and loss scaling */
        s->load_dtype = DT_F32;
        s->param_dtype = DT_F16;
        s->master_weights = true;
        s->autocast = true;
        s->autocast_dtype = DT_F16;
        s->loss_scaling = true;
    }
}

static const char *const precisions[] = {"fp32", "bf16", "autocast-bf16", "fp16-master-scaled"};

static void test_families(void)
{
    static const char *const tiny[] = {"tiny-transformer", "tiny-mlp", "tiny-cnn", "tiny-unet", "tiny-vae"};
    static const struct { enum model_family f; const char *name; } conf[] = {
        {FAMILY_COUNT, "gpt2-style"}, {FAMILY_DECODER, "llama-style"}, {FAMILY_ENCODER, "bert-style"},
        {FAMILY_T5, "t5"}, {FAMILY_CLIP_TEXT, "clip-text"}, {FAMILY_MLP, "mlp"}, {FAMILY_VIT, "vit"},
        {FAMILY_CLIP_VISION, "clip-vision"},
    };
    int run = 0;
    for (int attn = 0; attn < ATTN_COUNT; attn++)
        for (int p = 0; p < 4; p++) {
            for (size_t i = 0; i < sizeof tiny / sizeof tiny[0] + sizeof conf / sizeof conf[0]; i++, run++) {
                struct job_spec s;
                char what[128];
                base(&s);
                if (i < sizeof tiny / sizeof tiny[0]) {
                    snprintf(s.model.preset, sizeof s.model.preset, "%s", tiny[i]);
                    preset_apply(&s.model, tiny[i], &(struct err){0});
                    s.model.preset[0] = 0;
                } else {
                    configured(&s, conf[i - sizeof tiny / sizeof tiny[0]].f);
                }
                s.model.attn = (enum attn_impl)attn;
                precision(&s, p);
                s.optimizer = (enum optimizer_kind)(run % OPT_COUNT);
                if (run % 3 == 0)
                    fix_enable(&s, "gradient_checkpointing", &(struct err){0});
                snprintf(what, sizeof what, "%s %s %s %s%s",
                         i < sizeof tiny / sizeof tiny[0] ? tiny[i] : conf[i - sizeof tiny / sizeof tiny[0]].name,
                         attn_name((enum attn_impl)attn), precisions[p], optimizer_name(s.optimizer),
                         run % 3 == 0 ? " ckpt" : "");
                check(&s, what);
            }
        }
}

static void test_optimizers(void)
{
    for (int o = 0; o < OPT_COUNT; o++)
        for (int p = 0; p < 4; p++) {
            struct job_spec s;
            char what[96];
            base(&s);
            configured(&s, FAMILY_DECODER);
            precision(&s, p);
            s.optimizer = (enum optimizer_kind)o;
            s.foreach = o % 2;
            s.set_to_none = p % 2;
            s.grad_accum = 2;
            snprintf(what, sizeof what, "llama-style %s %s, 2 micro-batches", optimizer_name(s.optimizer),
                     precisions[p]);
            check(&s, what);
        }
}

static void test_training_modes(void)
{
    for (int ckpt = 0; ckpt < 2; ckpt++)
        for (int t = 0; t < TRAIN_COUNT; t++) {
            struct job_spec s;
            char what[96];
            base(&s);
            configured(&s, t == TRAIN_LORA ? FAMILY_ENCODER : FAMILY_T5);
            s.model.attn = ATTN_EAGER;
            s.trainable = (enum trainable_kind)t;
            s.ema = EMA_GPU;
            if (ckpt)
                fix_enable(&s, "gradient_checkpointing", &(struct err){0});
            snprintf(what, sizeof what, "%s trainable %s, EMA on the device%s",
                     t == TRAIN_LORA ? "bert-style" : "t5", trainable_name(s.trainable), ckpt ? ", checkpointed" : "");
            check(&s, what);
        }
}

/* QLoRA: a llama-style decoder with NF4 or FP4 base weights (with and without double quantization)
 * or LLM.int8 ones, all-linear adapters with dropout, bf16 and autocast, checkpointed or not. */
static void test_qlora(void)
{
    for (int v = 0; v < 10; v++) {
        struct job_spec s;
        char what[128];
        base(&s);
        configured(&s, FAMILY_DECODER);
        s.load_dtype = s.param_dtype = DT_BF16;
        s.autocast = v & 1;
        s.trainable = TRAIN_LORA;
        s.lora.all_linear = true;
        s.lora.dropout = 0.05f;
        s.quant.type = v >= 8 ? QUANT_INT8 : v & 2 ? QUANT_FP4 : QUANT_NF4;
        s.quant.double_quant = !(v & 4);
        s.quant.prepare_kbit = v & 4;
        if (v & 2)
            fix_enable(&s, "gradient_checkpointing", &(struct err){0});
        snprintf(what, sizeof what, "QLoRA %s%s%s%s", quant_name(s.quant.type), s.autocast ? ", autocast" : "",
                 s.quant.double_quant ? ", double quant" : ", prepare_kbit", v & 2 ? ", checkpointed" : "");
        check(&s, what);
    }
}

/* DoRA on a bf16 decoder: adapters in bf16 or fp32 (the base weight cast for the norm), checkpointed or not. */
static void test_dora(void)
{
    for (int v = 0; v < 4; v++) {
        struct job_spec s;
        char what[128];
        base(&s);
        configured(&s, FAMILY_DECODER);
        s.load_dtype = s.param_dtype = DT_BF16;
        s.trainable = TRAIN_LORA;
        s.lora.all_linear = true;
        s.lora.dora = true;
        s.lora.dtype = v & 1 ? 1 + DT_F32 : 0;
        if (v & 2)
            fix_enable(&s, "gradient_checkpointing", &(struct err){0});
        snprintf(what, sizeof what, "DoRA, %s adapters%s", v & 1 ? "fp32" : "bf16", v & 2 ? ", checkpointed" : "");
        check(&s, what);
    }
}

/* A UNet with a frozen text encoder and VAE on the device: EMA, eval inside the EMA context with
 * sampling and a VAE decode (whole and chunked), every fault. */
static void test_diffusion(void)
{
    for (int variant = 0; variant < 4; variant++) {
        struct job_spec s;
        char what[96];
        base(&s);
        snprintf(s.model.preset, sizeof s.model.preset, "tiny-unet");
        s.model.attn = variant % 2 ? ATTN_EAGER : ATTN_SDPA;
        s.image_size = 16;
        s.ema = EMA_GPU;
        s.eval.every = 1;
        s.eval.sampling_steps = 2;
        s.eval.vae_decode = true;
        s.nextras = 2;
        s.extras[0] = (struct extra_spec){"clip-l-text", EXTRA_TEXT_ENCODER, variant < 2 ? DT_F32 : DT_BF16, true};
        s.extras[1] = (struct extra_spec){"tiny-vae", EXTRA_VAE, variant < 2 ? DT_F32 : DT_BF16, true};
        precision(&s, variant);
        s.context_len = 77;
        int count;
        const struct switch_info *faults = fault_table(&count);
        for (int i = 0; i < count; i++)
            fault_enable(&s, faults[i].name, &(struct err){0});
        if (variant >= 2)
            fix_enable(&s, "chunked_decode", &(struct err){0});
        snprintf(what, sizeof what, "tiny-unet + clip-l-text + tiny-vae, %s %s, every fault%s",
                 attn_name(s.model.attn), precisions[variant], variant >= 2 ? ", chunked decode" : "");
        check(&s, what);
    }
}

/* job.kind generate (dynamic and static caches, sampling) and eval (with on-device logits), and the
 * fused linear cross-entropy at every precision. */
static void test_job_kinds(void)
{
    char what[160];
    for (int p = 0; p < 4; p++) {
        struct job_spec s;
        base(&s);
        configured(&s, FAMILY_DECODER);
        precision(&s, p);
        s.eval.every = 0;
        fix_enable(&s, "fused_linear_cross_entropy", &(struct err){0});
        fix_enable(&s, "compiled_activations", &(struct err){0});
        s.model.act = p % 2 ? ACT_SILU : ACT_GELU_TANH; /* SwiGLU and GEGLU, fused */
        snprintf(what, sizeof what, "llama-style %s, %s, fused linear cross-entropy, compiled activations",
                 precisions[p], p % 2 ? "SwiGLU" : "GEGLU");
        check(&s, what);
    }
    for (int run = 0; run < 8; run++) { /* llama / gpt2 style x dynamic / static x sdpa / eager */
        int c = run & 1, gpt = run >> 1 & 1, eager = run >> 2;
        struct job_spec s;
        base(&s);
        configured(&s, gpt ? FAMILY_COUNT : FAMILY_DECODER);
        s.model.attn = eager ? ATTN_EAGER : ATTN_SDPA;
        s.load_dtype = c ? DT_BF16 : DT_F32;
        s.kind = JOB_GENERATE;
        s.eval.every = 0;
        s.generate = (struct generate_spec){.prompt_len = 5, .new_tokens = 4, .cache = (enum cache_kind)c,
                                            .max_cache_len = c ? 12 : 0, .do_sample = c};
        snprintf(what, sizeof what, "%s generate, %s cache, %s", gpt ? "gpt2-style" : "llama-style",
                 cache_kind_name((enum cache_kind)c), attn_name(s.model.attn));
        check(&s, what);
    }
    struct job_spec s;
    base(&s);
    s.kind = JOB_EVAL;
    s.eval.every = 0;
    s.eval.batches = 3;
    fault_enable(&s, "eval_samples_on_device", &(struct err){0});
    check(&s, "tiny-transformer eval job, logits kept on the device");
}

static void test_coverage(void)
{
    static const unsigned expected[] = {
        K_GEMM, K_CONV2D_FWD, K_CONV2D_BWD_DATA, K_CONV2D_BWD_FILTER, K_ATTN_FWD, K_ATTN_BWD, K_FLASH_FWD,
        K_FLASH_BWD_PREP, K_FLASH_BWD, K_LAYERNORM_FWD, K_LAYERNORM_BWD_DX, K_LAYERNORM_BWD_PARAMS, K_RMSNORM_FWD,
        K_RMSNORM_BWD, K_GROUPNORM_FWD, K_GROUPNORM_BWD_DX, K_GROUPNORM_BWD_PARAMS, K_GELU_FWD, K_GELU_BWD,
        K_SILU_FWD, K_SILU_BWD, K_GEGLU_FWD, K_GEGLU_BWD, K_DROPOUT_FWD, K_DROPOUT_BWD, K_CAST, K_ADD, K_SCALE,
        K_FILL, K_BIAS_ADD, K_BIAS_BWD, K_ADAMW, K_ADAMW8, K_EMA, K_UPSAMPLE2X_FWD, K_UPSAMPLE2X_BWD,
        K_CROSS_ENTROPY_FWD, K_CROSS_ENTROPY_BWD, K_EMBEDDING_FWD, K_EMBEDDING_BWD, K_MUL_BCAST, K_ADD_BCAST,
        K_EXPAND, K_REDUCE_SUM, K_TRANSPOSE, K_COPY_BLOCKS, K_RELU_FWD, K_RELU_BWD, K_QUICK_GELU_FWD,
        K_QUICK_GELU_BWD, K_ROPE, K_ATTN_BIAS_FWD, K_ATTN_DSCORES, K_SGD, K_ADAMW_T, K_ADAFACTOR, K_RAND_UNIFORM,
        K_RANDINT, K_DEQUANT, K_INT8_QUANT_ROWS, K_INT8_GEMM, K_ROW_NORM, K_EYE,
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        ok(coverage[expected[i]] > 0, "the generator launches %s (%llu times)", kernel_get(expected[i])->name,
           (unsigned long long)coverage[expected[i]]);
}

int main(void)
{
    test_families();
    test_optimizers();
    test_training_modes();
    test_diffusion();
    test_job_kinds();
    test_qlora();
    test_dora();
    test_coverage();
    return done_testing();
}
