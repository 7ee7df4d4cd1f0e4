/* scenario_keys.c: the key tables of a scenario file (top level, model, job, eval, extras, variant,
 * expect). The loader fills structs from them and the reference in docs/scenario-keys.md is printed
 * from them: a key exists, with its type, range and default, exactly where it is listed here. */
#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "scenario/scenario_file.h"

#define FIELD(S, m) .offset = offsetof(S, m), .size = sizeof(((S *)0)->m)
#define K_INT(S, key, m, lo, hi, zero, h) \
    {.name = key, .type = KEY_INT, FIELD(S, m), .imin = lo, .imax = hi, .zero_means = zero, .help = h}
#define K_BOOL(S, key, m, h) {.name = key, .type = KEY_BOOL, FIELD(S, m), .help = h}
#define K_ENUM(S, key, m, names, n, h) \
    {.name = key, .type = KEY_ENUM, FIELD(S, m), .name_of = names, .nnames = n, .help = h}
#define K_STR(S, key, m, req, zero, h) \
    {.name = key, .type = KEY_STRING, FIELD(S, m), .required = req, .zero_means = zero, .help = h}
#define K_LIST(S, key, m, count, lo, hi, h)                                                             \
    {.name = key, .type = KEY_INT_LIST, FIELD(S, m), .count_offset = offsetof(S, count), .imin = lo, \
     .imax = hi, .zero_means = "none", .help = h}
#define K_TABLE(S, key, m, table, req, h) \
    {.name = key, .type = KEY_TABLE, FIELD(S, m), .sub = &table, .required = req, .help = h}
#define COUNT(a) (sizeof a / sizeof a[0])
#define BIG (1 << 22)

/* Enum names through int-indexed wrappers of the workload's name functions. */
static const char *family_at(int i) { return family_name((enum model_family)i); }
static const char *norm_at(int i) { return norm_name((enum norm_kind)i); }
static const char *norm_place_at(int i) { return norm_place_name((enum norm_place)i); }
static const char *ffn_at(int i) { return ffn_name((enum ffn_kind)i); }
static const char *act_at(int i) { return act_name((enum act_kind)i); }
static const char *pos_at(int i) { return pos_name((enum pos_kind)i); }
static const char *attn_at(int i) { return attn_name((enum attn_impl)i); }
static const char *optimizer_at(int i) { return optimizer_name((enum optimizer_kind)i); }
static const char *trainable_at(int i) { return trainable_name((enum trainable_kind)i); }
static const char *ema_place_at(int i) { return ema_place_name((enum ema_place)i); }
static const char *extra_role_at(int i) { return extra_role_name((enum extra_role)i); }
static const char *dtype_at(int i) { return dtype_name((enum dtype)i); }
/* Weights and compute are fp32, bf16 or fp16: the first three dtypes of program.h. */
#define FLOAT_DTYPES (DT_F16 + 1)

static void job_defaults(void *obj)
{
    job_spec_init(obj);
}

/* A model starts blank: a preset fills it all, a family takes exactly the dimensions written. */
static void model_defaults(void *obj)
{
    memset(obj, 0, sizeof(struct model_input));
}

static void eval_defaults(void *obj)
{
    struct job_spec j;
    job_spec_init(&j);
    *(struct eval_spec *)obj = j.eval;
}

static void extra_defaults(void *obj)
{
    struct extra_spec *x = obj;
    memset(x, 0, sizeof *x);
    x->dtype = DT_F32;
    x->on_device = true;
}

static void variant_defaults(void *obj)
{
    struct variant *v = obj;
    memset(v, 0, sizeof *v);
    job_spec_init(&v->job);
}

static void top_defaults(void *obj)
{
    struct scenario_file *f = obj;
    memset(f, 0, sizeof *f);
    snprintf(f->head.device, sizeof f->head.device, "sim:rtx5090");
    job_spec_init(&f->base);
    model_defaults(&f->model);
}

/* ---- model ---- */

/* A preset fixes every dimension (the workload expands it when the job is validated), so it stands
 * alone; without one the model is the family and the dimensions written. Per-level lists must match
 * the number of levels. */
static int check_model(const struct key_ctx *c, yaml_node_t *m, void *obj, struct err *e)
{
    struct model_input *in = obj;
    yaml_node_t *preset_key = NULL;
    if (yaml_mapping_get(c->doc, m, "preset", &preset_key)) {
        for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_doc_node(c->doc, p->key);
            if (k != preset_key)
                return yaml_doc_error(c->doc, k, e,
                                      "%s.%s cannot be combined with %s.preset: a preset sets every dimension "
                                      "(write the family and its dimensions instead)",
                                      c->where, yaml_scalar_text(k), c->where);
        }
        return 0;
    }
    yaml_node_t *key = NULL;
    if (!yaml_mapping_get(c->doc, m, "family", &key))
        return yaml_doc_error(c->doc, m, e, "%s needs a preset, or a family with its dimensions", c->where);
    static const struct { const char *name; size_t count; } per_level[] = {
        {"transformer_depth", offsetof(struct model_input, ntransformer_depth)},
        {"attn_heads", offsetof(struct model_input, nattn_heads)},
    };
    for (size_t i = 0; i < COUNT(per_level); i++) {
        int n;
        memcpy(&n, (char *)obj + per_level[i].count, sizeof n);
        yaml_node_t *list = yaml_mapping_get(c->doc, m, per_level[i].name, NULL);
        if (list && n != in->spec.nlevels)
            return yaml_doc_error(c->doc, list, e, "%s.%s has %d entries but channels has %d levels", c->where,
                                  per_level[i].name, n, in->spec.nlevels);
    }
    return 0;
}

#define M struct model_input
static const struct key model_keys[] = {
    {.name = "preset", .type = KEY_CUSTOM, FIELD(M, spec.preset), .parse = parse_preset,
     .doc_type = "preset name, see [Presets](#presets)", .zero_means = "none",
     .help = "A published model; it sets every dimension, so no other model key may be given with it."},
    K_ENUM(M, "family", spec.family, family_at, FAMILY_COUNT, "Model family, when no preset is given."),
    K_INT(M, "layers", spec.layers, 1, 4096, "unset", "Transformer blocks (T5: encoder layers)."),
    K_INT(M, "decoder_layers", spec.decoder_layers, 0, 4096, "same as layers", "T5 decoder layers."),
    K_INT(M, "hidden", spec.hidden, 1, BIG, "unset", "Model width (d_model)."),
    K_INT(M, "heads", spec.heads, 1, 4096, "unset", "Attention heads."),
    K_INT(M, "kv_heads", spec.kv_heads, 0, 4096, "same as heads", "Key/value heads (grouped-query attention)."),
    K_INT(M, "head_dim", spec.head_dim, 0, 65536, "hidden / heads", "Width of one head (T5: d_kv)."),
    K_INT(M, "ffn", spec.ffn, 0, BIG, NULL, "Feed-forward intermediate size."),
    K_INT(M, "vocab", spec.vocab, 0, BIG, NULL, "Vocabulary size."),
    K_INT(M, "max_positions", spec.max_positions, 0, BIG, NULL, "Rows of a learned position table."),
    K_INT(M, "type_vocab", spec.type_vocab, 0, 1024, "none", "BERT token types."),
    K_ENUM(M, "norm", spec.norm, norm_at, NORM_COUNT, "Normalisation layer."),
    K_ENUM(M, "norm_place", spec.norm_place, norm_place_at, NORM_PLACE_COUNT,
           "Normalise before (GPT) or after (BERT) each sublayer."),
    K_BOOL(M, "norm_bias", spec.norm_bias, "LayerNorm has a bias (RMSNorm never has one)."),
    K_ENUM(M, "ffn_kind", spec.ffn_kind, ffn_at, FFN_COUNT, "Plain up-act-down MLP, or gated act(gate)*up-down."),
    K_ENUM(M, "act", spec.act, act_at, ACT_COUNT, "Activation function."),
    K_BOOL(M, "bias", spec.bias, "Linear layers have biases."),
    K_BOOL(M, "tied_embeddings", spec.tied_embeddings, "The LM head shares the token embedding."),
    K_ENUM(M, "pos", spec.pos, pos_at, POS_COUNT, "Position encoding."),
    K_INT(M, "rel_buckets", spec.rel_buckets, 0, 4096, "none", "Relative-position buckets (T5: 32)."),
    K_BOOL(M, "causal", spec.causal, "Causal attention mask (decoder, CLIP text)."),
    K_BOOL(M, "pooler", spec.pooler, "BERT pooler (dense + tanh)."),
    K_INT(M, "projection_dim", spec.projection_dim, 0, BIG, "none", "CLIP text projection width."),
    K_BOOL(M, "lm_head", spec.lm_head, "Produce vocabulary logits and a cross-entropy loss."),
    K_ENUM(M, "attn", spec.attn, attn_at, ATTN_COUNT,
           "Attention kernel: unfused matmuls with a materialised score matrix, or fused SDPA."),
    {.name = "dropout", .type = KEY_FLOAT, FIELD(M, spec.dropout), .fmin = 0, .fmax = 1, .zero_means = "no masks",
     .help = "Dropout probability."},
    K_INT(M, "in_channels", spec.in_channels, 0, 65536, NULL, "Input channels (UNet, VAE, CNN)."),
    K_INT(M, "out_channels", spec.out_channels, 0, BIG, NULL, "Output channels (CNN: classes)."),
    K_LIST(M, "channels", spec.channels, spec.nlevels, 1, 65536,
           "Channels per resolution level (block_out_channels); their number is the number of levels."),
    K_INT(M, "layers_per_block", spec.layers_per_block, 0, 64, NULL, "Residual blocks per level."),
    K_INT(M, "groups", spec.groups, 0, 4096, NULL, "GroupNorm groups."),
    K_LIST(M, "transformer_depth", spec.transformer_depth, ntransformer_depth, 0, 64,
           "UNet: transformer blocks per attention, one per level (0 = none at that level)."),
    K_LIST(M, "attn_heads", spec.attn_heads, nattn_heads, 0, 4096, "UNet: attention heads, one per level."),
    K_INT(M, "mid_transformer_depth", spec.mid_transformer_depth, 0, 64, NULL, "UNet mid-block transformer blocks."),
    K_INT(M, "cross_attention_dim", spec.cross_attention_dim, 0, BIG, NULL, "UNet: text-embedding width."),
    K_BOOL(M, "linear_projection", spec.linear_projection, "UNet: linear proj_in/out (SDXL) instead of 1x1 convs."),
    K_INT(M, "time_embed_input", spec.time_embed_input, 0, BIG, "channels[0]", "UNet: sinusoidal time projection width."),
    K_INT(M, "add_time_embed_dim", spec.add_time_embed_dim, 0, BIG, "none", "SDXL: time projection per added value."),
    K_INT(M, "add_embed_input", spec.add_embed_input, 0, BIG, "none", "SDXL: projection_class_embeddings_input_dim."),
    K_INT(M, "latent_channels", spec.latent_channels, 0, 1024, NULL, "VAE latent channels; UNet in/out channels."),
    K_INT(M, "vae_scale", spec.vae_scale, 0, 64, NULL, "Pixels per latent along a side."),
    K_INT(M, "mlp_in", spec.mlp_in, 0, BIG, NULL, "MLP input features."),
    K_LIST(M, "mlp_hidden", spec.mlp_hidden, spec.mlp_depth, 1, BIG, "MLP hidden layer widths."),
    K_INT(M, "mlp_out", spec.mlp_out, 0, BIG, NULL, "MLP output features."),
};
#undef M

static const struct key_table model_table = {
    .name = "model",
    .help = "The trained model: a `preset` (a published model with its exact parameter count), or a "
            "`family` with its dimensions. Keys a family does not use are ignored by it.",
    .keys = model_keys, .nkeys = COUNT(model_keys), .obj_size = sizeof(struct model_input),
    .init = model_defaults, .check = check_model,
};

/* ---- job ---- */

#define EV struct eval_spec
static const struct key eval_keys[] = {
    K_INT(EV, "every", every, 0, INT_MAX, "never", "Evaluate after every N optimizer steps."),
    K_BOOL(EV, "before_training", before_training, "Evaluate once before the first step."),
    K_INT(EV, "batch_size", batch, 0, 1 << 20, "the training batch", "Eval batch size."),
    K_INT(EV, "batches", batches, 1, 1 << 20, NULL, "Batches per eval."),
    K_INT(EV, "sampling_steps", sampling_steps, 0, 100000, "one no_grad forward",
          "Diffusion: denoising steps per sample batch."),
    K_BOOL(EV, "vae_decode", vae_decode, "Decode the generated latents with the VAE extra."),
};
#undef EV

static const struct key_table eval_table = {
    .name = "job.eval",
    .help = "What an evaluation does and when it runs.",
    .keys = eval_keys, .nkeys = COUNT(eval_keys), .obj_size = sizeof(struct eval_spec), .init = eval_defaults,
};

#define X struct extra_spec
static const struct key extra_keys[] = {
    {.name = "preset", .type = KEY_CUSTOM, FIELD(X, preset), .parse = parse_preset, .required = true,
     .doc_type = "preset name, see [Presets](#presets)", .help = "The frozen module (`clip-l-text`, `sd-vae`, ...)."},
    {.name = "role", .type = KEY_ENUM, FIELD(X, role), .name_of = extra_role_at, .nnames = EXTRA_ROLE_COUNT,
     .required = true, .help = "What the training loop uses it for."},
    K_ENUM(X, "dtype", dtype, dtype_at, FLOAT_DTYPES, "Dtype of its weights."),
    K_BOOL(X, "on_device", on_device, "Resident on the device (false: kept on the CPU)."),
};
#undef X

static const struct key_table extra_table = {
    .name = "job.extras[]",
    .help = "One frozen module resident beside the trained model (no gradients, no optimizer state).",
    .keys = extra_keys, .nkeys = COUNT(extra_keys), .obj_size = sizeof(struct extra_spec), .init = extra_defaults,
};

static int parse_extras(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e)
{
    char got[96], path[300];
    struct job_spec *job = field; /* the key's offset is 0: it fills extras and nextras */
    if (v->type != YAML_SEQUENCE_NODE)
        return yaml_doc_error(c->doc, v, e, "%s must be a list of mappings, got %s", c->where,
                              yaml_node_describe(v, got, sizeof got));
    int n = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++, n++) {
        yaml_node_t *item = yaml_doc_node(c->doc, *it);
        if (n == SPEC_MAX_EXTRAS)
            return yaml_doc_error(c->doc, item, e, "%s has more than %d entries", c->where, SPEC_MAX_EXTRAS);
        snprintf(path, sizeof path, "%s[%d]", c->where, n);
        struct key_ctx sub = {c->doc, c->root, path};
        extra_defaults(&job->extras[n]);
        if (keytable_expect_mapping(c, item, path, e) || keytable_apply(&extra_table, &sub, item, &job->extras[n], e))
            return -1;
    }
    job->nextras = n;
    return 0;
}

#define J struct job_spec
static const struct key job_keys[] = {
    K_INT(J, "batch_size", batch, 1, 1 << 20, NULL, "Samples per optimizer step, before gradient accumulation."),
    K_INT(J, "seq_len", seq_len, 1, BIG, NULL, "Tokens per sample (T5: encoder input)."),
    K_INT(J, "target_len", target_len, 0, BIG, "seq_len", "T5: decoder tokens."),
    K_INT(J, "image_size", image_size, 0, 65536, NULL,
          "Pixels per side (UNet, VAE, CNN; the UNet latent is image_size / vae_scale)."),
    K_INT(J, "context_len", context_len, 0, BIG, NULL, "UNet: text tokens for cross-attention."),
    K_ENUM(J, "load_dtype", load_dtype, dtype_at, FLOAT_DTYPES, "torch_dtype given to from_pretrained."),
    K_BOOL(J, "load_on_device", load_on_device, "Weights land on the device at load (device_map=\"cuda\")."),
    K_ENUM(J, "param_dtype", param_dtype, dtype_at, FLOAT_DTYPES, "Dtype of the trained weights after .to(dtype)."),
    K_BOOL(J, "autocast", autocast, "Run the forward under torch.autocast."),
    K_ENUM(J, "autocast_dtype", autocast_dtype, dtype_at, FLOAT_DTYPES, "The autocast dtype."),
    K_BOOL(J, "master_weights", master_weights, "The optimizer keeps an fp32 master copy of 16-bit weights."),
    K_BOOL(J, "loss_scaling", loss_scaling, "fp16 GradScaler: scaled loss, unscale before the step."),
    K_ENUM(J, "optimizer", optimizer, optimizer_at, OPT_COUNT, "The optimizer."),
    K_BOOL(J, "foreach", foreach, "Multi-tensor (foreach) optimizer step, with parameter-sized temporaries."),
    K_BOOL(J, "set_to_none", set_to_none, "zero_grad(set_to_none=True), PyTorch's default since 2.0."),
    K_INT(J, "grad_accum", grad_accum, 1, 1 << 20, NULL, "Micro-batches per optimizer step (1 = none)."),
    K_INT(J, "steps", steps, 1, 1 << 20, NULL, "Optimizer steps to run."),
    K_ENUM(J, "ema", ema, ema_place_at, EMA_COUNT, "Exponential moving average of the weights, and where it lives."),
    K_TABLE(J, "eval", eval, eval_table, false, "Evaluation cadence and contents."),
    K_ENUM(J, "trainable", trainable, trainable_at, TRAIN_COUNT, "Which weights train."),
    K_INT(J, "lora_rank", lora_rank, 0, 65536, NULL, "LoRA rank r on every attention projection."),
    {.name = "extras", .type = KEY_CUSTOM, .offset = 0, .size = sizeof(J), .parse = parse_extras, .sub = &extra_table,
     .doc_type = "list of mappings, see [`job.extras[]`](#jobextras)", .zero_means = "none",
     .help = "Frozen modules resident beside the model (text encoder, VAE)."},
    {.name = "cublas_workspace", .type = KEY_SIZE, FIELD(J, cublas_workspace_bytes),
     .help = "cuBLAS workspace per stream, allocated at its first GEMM and never freed."},
    K_INT(J, "streams", streams, 1, 64, NULL, "CUDA streams: stream 0 trains; with 2 or more, eval runs on stream 1."),
};
#undef J

static const struct key_table job_table = {
    .name = "job",
    .help = "The training job. A variant's own `job:` mapping changes these keys for that variant only.",
    .keys = job_keys, .nkeys = COUNT(job_keys), .obj_size = sizeof(struct job_spec), .init = job_defaults,
};

/* ---- variants ---- */

static int check_expect(const struct key_ctx *c, yaml_node_t *m, void *obj, struct err *e)
{
    struct expectation *x = obj;
    yaml_node_t *key = NULL;
    if (x->oom_phase[0] && !x->oom && yaml_mapping_get(c->doc, m, "oom_phase", &key))
        return yaml_doc_error(c->doc, key, e, "%s.oom_phase is set but %s.oom is false", c->where, c->where);
    if (x->peak_reserved_min && x->peak_reserved_max && x->peak_reserved_min > x->peak_reserved_max &&
        yaml_mapping_get(c->doc, m, "peak_reserved_min", &key))
        return yaml_doc_error(c->doc, key, e, "%s.peak_reserved_min is above %s.peak_reserved_max", c->where,
                              c->where);
    return 0;
}

#define EX struct expectation
static const struct key expect_keys[] = {
    {.name = "oom", .type = KEY_BOOL, FIELD(EX, oom), .required = true,
     .help = "`true`: the run must end in an out-of-memory error; `false`: it must fit."},
    {.name = "peak_reserved_max", .type = KEY_SIZE, FIELD(EX, peak_reserved_max), .zero_means = "no bound",
     .help = "The peak of reserved memory must not exceed this."},
    {.name = "peak_reserved_min", .type = KEY_SIZE, FIELD(EX, peak_reserved_min), .zero_means = "no bound",
     .help = "The peak of reserved memory must reach at least this."},
    K_STR(EX, "oom_phase", oom_phase, false, "any phase",
          "The phase the OOM must happen in, as the op program names it (`load`, `forward`, `backward`, "
          "`optimizer`, `ema`, `eval`, `decode`, ...); needs `oom: true`."),
};
#undef EX

static const struct key_table expect_table = {
    .name = "variants.NAME.expect",
    .help = "What the variant's run must show; `oomlab run` exits 1 when a run misses it.",
    .keys = expect_keys, .nkeys = COUNT(expect_keys), .obj_size = sizeof(struct expectation),
    .check = check_expect,
};

/* `before` runs the faults as written: fixes and kept faults belong to `after` variants. */
static int check_variant(const struct key_ctx *c, yaml_node_t *m, void *obj, struct err *e)
{
    struct variant *v = obj;
    static const char *const after_only[] = {"fixes", "keep_faults"};
    yaml_node_t *key = NULL;
    for (size_t i = 0; i < COUNT(after_only); i++)
        if (!strcmp(v->name, "before") && yaml_mapping_get(c->doc, m, after_only[i], &key))
            return yaml_doc_error(c->doc, key, e,
                                  "%s cannot have %s: 'before' runs the faults as written (put fixes in an "
                                  "'after' variant)",
                                  c->where, after_only[i]);
    return 0;
}

#define V struct variant
static const struct key variant_keys[] = {
    {.name = "fixes", .type = KEY_CUSTOM, FIELD(V, job), .parse = parse_fix_list, .zero_means = "none",
     .doc_type = "list of fix names, each bare or with parameters (`- chunked_decode: {chunk: 2}`)",
     .help = "Fixes this variant adds; allocator-only fixes add to its `alloc_conf`. See [Fixes](#fixes)."},
    {.name = "keep_faults", .type = KEY_CUSTOM, FIELD(V, job.faults), .parse = parse_keep_faults,
     .doc_type = "list of fault names from `faults`", .zero_means = "all of `faults`",
     .help = "The faults this variant keeps (default: all of them); `[]` drops them all."},
    {.name = "alloc_conf", .type = KEY_CUSTOM, FIELD(V, alloc_conf), .parse = parse_alloc_conf,
     .doc_type = "PYTORCH_CUDA_ALLOC_CONF string", .zero_means = "the scenario's `alloc_conf`",
     .help = "Replaces the scenario's `alloc_conf` for this variant (the fixes' settings are still added)."},
    K_TABLE(V, "job", job, job_table, false, "Changes to the job for this variant only (same keys as `job`)."),
    K_TABLE(V, "expect", expect, expect_table, true, "What the run must show."),
};
#undef V

const struct key_table scenario_variant_table = {
    .name = "variants.NAME",
    .help = "One variant to run. NAME is `before` (the faults as written, no fixes), `after`, or "
            "`after-SOMETHING`. Each `after` variant is the base job with the faults it keeps and the fixes it "
            "adds. Variants run in file order.",
    .keys = variant_keys, .nkeys = COUNT(variant_keys), .obj_size = sizeof(struct variant),
    .init = variant_defaults, .check = check_variant,
};

/* ---- top level ---- */

static int record_variants(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e)
{
    if (keytable_expect_mapping(c, v, c->where, e))
        return -1;
    if (v->data.mapping.pairs.start == v->data.mapping.pairs.top)
        return yaml_doc_error(c->doc, v, e, "%s is empty: name at least one variant (before, after, ...)", c->where);
    memcpy(field, &v, sizeof v);
    return 0;
}

static void format_device_default(const struct key *k, const void *field, char *buf, size_t len)
{
    snprintf(buf, len, "`%s`", (const char *)field);
}

#define F struct scenario_file
static const struct key top_keys[] = {
    /* at most what the job's own name holds (it carries the scenario's name) */
    {.name = "name", .type = KEY_STRING, .offset = offsetof(F, head.name), .size = sizeof(((struct job_spec *)0)->name),
     .required = true,
     .help = "Short name of the scenario: lower-case letters, digits, `-`, `_` and `.`; names its results."},
    K_STR(F, "title", head.title, true, NULL, "One line saying what fails."),
    K_STR(F, "source", head.source, true, NULL, "Where the failure was reported (a report, an issue, a section)."),
    {.name = "device", .type = KEY_CUSTOM, FIELD(F, head.device), .parse = parse_device,
     .format = format_device_default,
     .doc_type = "`sim`, `sim:PROFILE`, `sim:SIZE`, `host`, `host:SIZE`, `cuda` or `cuda:N`",
     .help = "Where the variants run; a simulated GPU profile (see [Devices](#devices)) or capacity, host "
             "memory, or a real GPU."},
    {.name = "alloc_conf", .type = KEY_CUSTOM, FIELD(F, head.alloc_conf), .parse = parse_alloc_conf,
     .doc_type = "PYTORCH_CUDA_ALLOC_CONF string", .zero_means = "PyTorch's defaults",
     .help = "Allocator settings for every variant, kept verbatim and checked with PyTorch's rules."},
    K_TABLE(F, "model", model, model_table, true, "The trained model."),
    K_TABLE(F, "job", base, job_table, false, "The training job."),
    {.name = "faults", .type = KEY_CUSTOM, FIELD(F, base), .parse = parse_fault_list, .zero_means = "none",
     .doc_type = "list of fault names, each bare or with parameters (`- activation_growth: {seq_step: 64}`)",
     .help = "The mistakes switched on; see [Faults](#faults)."},
    {.name = "variants", .type = KEY_CUSTOM, FIELD(F, variants_node), .parse = record_variants,
     .sub = &scenario_variant_table, .required = true,
     .doc_type = "mapping of variant name to [`variants.NAME`](#variantsname)",
     .help = "The runs to compare, each with its expectation."},
};
#undef F

const struct key_table scenario_top_table = {
    .name = "scenario",
    .help = "The top level of a scenario file.",
    .keys = top_keys, .nkeys = COUNT(top_keys), .obj_size = sizeof(struct scenario_file),
    .init = top_defaults, .check = build_variants,
};
