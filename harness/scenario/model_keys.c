/* model_keys.c: the `model:` key table: a preset, or a family with its dimensions. */
#include <libgen.h>
#include <string.h>

#include "scenario/key_macros.h"
#include "scenario/scenario_file.h"
#include "workload/hf_config.h"

/* Enum names through int-indexed wrappers of the workload's name functions. */
static const char *family_at(int i) { return family_name((enum model_family)i); }
static const char *norm_at(int i) { return norm_name((enum norm_kind)i); }
static const char *norm_place_at(int i) { return norm_place_name((enum norm_place)i); }
static const char *ffn_at(int i) { return ffn_name((enum ffn_kind)i); }
static const char *act_at(int i) { return act_name((enum act_kind)i); }
static const char *pos_at(int i) { return pos_name((enum pos_kind)i); }
static const char *attn_at(int i) { return attn_name((enum attn_impl)i); }

/* A model starts blank: a preset fills it all, a family takes exactly the dimensions written. */
static void model_defaults(void *obj)
{
    memset(obj, 0, sizeof(struct model_input));
}

/* Per-level lists must match the number of levels. */
static int check_levels(const struct key_ctx *c, yaml_node_t *m, const struct model_input *in, struct err *e)
{
    static const struct { const char *name; size_t count; } per_level[] = {
        {"transformer_depth", offsetof(struct model_input, ntransformer_depth)},
        {"attn_heads", offsetof(struct model_input, nattn_heads)},
    };
    for (size_t i = 0; i < COUNT(per_level); i++) {
        int n;
        memcpy(&n, (const char *)in + per_level[i].count, sizeof n);
        yaml_node_t *list = yaml_mapping_get(c->doc, m, per_level[i].name, NULL);
        if (list && n != in->spec.nlevels)
            return yaml_doc_error(c->doc, list, e, "%s.%s has %d entries but channels has %d levels", c->where,
                                  per_level[i].name, n, in->spec.nlevels);
    }
    return 0;
}

static const struct key_table model_override_table;

/* The model of a Hugging Face config.json (hf_config.c), its path read from the scenario's directory;
 * the other keys written beside it then override it, as beside a preset. */
static int load_hf_config(const struct key_ctx *c, yaml_node_t *m, struct model_input *in, struct err *e)
{
    yaml_node_t *at = NULL;
    yaml_mapping_get(c->doc, m, "hf_config", &at);
    if (in->spec.preset[0] || yaml_mapping_get(c->doc, m, "family", NULL))
        return yaml_doc_error(c->doc, at, e, "%s.hf_config cannot be combined with %s.preset or %s.family",
                              c->where, c->where, c->where);
    char dir[512], path[1100];
    snprintf(dir, sizeof dir, "%s", c->doc->path);
    if (in->hf_config[0] == '/')
        snprintf(path, sizeof path, "%s", in->hf_config);
    else
        snprintf(path, sizeof path, "%s/%s", dirname(dir), in->hf_config);
    *in = (struct model_input){0};
    struct err why = {0};
    if (hf_config_read(path, &in->spec, &in->hf, stderr, &why))
        return yaml_doc_error(c->doc, at, e, "%s.hf_config: %s", c->where, why.msg);
    return keytable_apply(&model_override_table, c, m, in, e) < 0 ? -1 : check_levels(c, m, in, e);
}

/* A preset fills every dimension; the other keys written beside it then override those (eager
 * attention, dropout, fewer layers), so the model is expanded here rather than when the job is
 * validated. The family comes with the preset. Without a preset the model is the family and the
 * dimensions written. */
static int check_model(const struct key_ctx *c, yaml_node_t *m, void *obj, struct err *e)
{
    struct model_input *in = obj;
    yaml_node_t *family = NULL;
    if (in->hf_config[0])
        return load_hf_config(c, m, in, e);
    bool has_family = yaml_mapping_get(c->doc, m, "family", &family) != NULL;
    if (in->spec.preset[0]) {
        if (has_family)
            return yaml_doc_error(c->doc, family, e,
                                  "%s.family cannot be combined with %s.preset: the preset sets the family", c->where,
                                  c->where);
        char name[SPEC_NAME_MAX];
        snprintf(name, sizeof name, "%s", in->spec.preset);
        *in = (struct model_input){0};
        if (preset_apply(&in->spec, name, e) < 0 || keytable_apply(&model_override_table, c, m, obj, e) < 0)
            return -1;
        return check_levels(c, m, in, e);
    }
    if (!has_family)
        return yaml_doc_error(c->doc, m, e, "%s needs a preset, or a family with its dimensions", c->where);
    return check_levels(c, m, in, e);
}

#define M struct model_input
static const struct key model_keys[] = {
    {.name = "preset", .type = KEY_CUSTOM, FIELD(M, spec.preset), .parse = parse_preset,
     .doc_type = "preset name, see [Presets](#presets)", .zero_means = "none",
     .help = "A published model: it sets the family and every dimension; other model keys written beside it "
             "override those (for instance `attn: eager`)."},
    {.name = "hf_config", .type = KEY_STRING, FIELD(M, hf_config), .zero_means = "none",
     .help = "A Hugging Face config.json, relative to the scenario file (model_type llama, mistral, qwen2, "
             "qwen3, phi3, gemma, gemma2, gemma3_text, gpt_neox, gpt2, bert, roberta, t5, mixtral (sparse MoE, "
             "balanced routing assumed), vit, clip (its vision tower) or clip_vision_model; a vision model needs the job's "
             "`image_size` to be its config's): it sets the family and every dimension, as a preset does; other model keys "
             "override those. Its torch_dtype becomes the job's `load_dtype` and `param_dtype` unless the job "
             "sets either. A field that changes memory but is not modelled is an error naming it, or a "
             "warning (sliding_window, fused qkv projections, output_router_logits)."},
    K_ENUM(M, "family", spec.family, family_at, FAMILY_COUNT, "Model family, when no preset is given."),
    K_INT(M, "layers", spec.layers, 1, 4096, "unset",
          "Transformer blocks (T5: encoder layers; MMDiT: double-stream blocks)."),
    K_INT(M, "decoder_layers", spec.decoder_layers, 0, 4096, "same as layers", "T5 decoder layers."),
    K_BOOL(M, "encoder_only", spec.encoder_only,
           "T5: the encoder alone (T5EncoderModel), returning its last hidden states; no decoder or LM head."),
    K_INT(M, "single_layers", spec.single_layers, 0, 4096, "none",
          "MMDiT: single-stream blocks after the double-stream ones (Flux's num_single_layers)."),
    K_INT(M, "hidden", spec.hidden, 1, BIG, "unset", "Model width (d_model)."),
    K_INT(M, "heads", spec.heads, 1, 4096, "unset", "Attention heads."),
    K_INT(M, "kv_heads", spec.kv_heads, 0, 4096, "same as heads", "Key/value heads (grouped-query attention)."),
    K_INT(M, "head_dim", spec.head_dim, 0, 65536, "hidden / heads", "Width of one head (T5: d_kv)."),
    K_INT(M, "ffn", spec.ffn, 0, BIG, "unset", "Feed-forward intermediate size."),
    K_INT(M, "vocab", spec.vocab, 0, BIG, "unset", "Vocabulary size."),
    K_INT(M, "max_positions", spec.max_positions, 0, BIG, "unset", "Rows of a learned position table."),
    K_INT(M, "type_vocab", spec.type_vocab, 0, 1024, "none", "BERT token types."),
    K_ENUM(M, "norm", spec.norm, norm_at, NORM_COUNT,
           "Normalisation layer: `rmsnorm` is transformers' RMSNorm (LlamaRMSNorm, T5LayerNorm: an fp32 copy, "
           "square, mean, rsqrt and products, each a tensor); `rmsnorm_fused` is PyTorch's native "
           "torch.nn.RMSNorm (one kernel)."),
    K_ENUM(M, "norm_place", spec.norm_place, norm_place_at, NORM_PLACE_COUNT,
           "Normalise before (GPT) or after (BERT) each sublayer."),
    K_BOOL(M, "norm_bias", spec.norm_bias, "LayerNorm has a bias (RMSNorm never has one)."),
    K_ENUM(M, "ffn_kind", spec.ffn_kind, ffn_at, FFN_COUNT, "Plain up-act-down MLP, or gated act(gate)*up-down."),
    K_ENUM(M, "act", spec.act, act_at, ACT_COUNT,
           "Activation function: `gelu` (erf), `gelu_tanh` (transformers' `gelu_pytorch_tanh`), `quick_gelu`, "
           "`silu` and `relu` are one fused kernel that saves its input; `gelu_new` is transformers' "
           "NewGELUActivation (GPT-2, FLAN-T5's gated-gelu), eight small ops whose autograd keeps three more "
           "tensors of the input's size."),
    K_BOOL(M, "bias", spec.bias, "Linear layers have biases."),
    K_BOOL(M, "tied_embeddings", spec.tied_embeddings, "The LM head shares the token embedding."),
    K_ENUM(M, "pos", spec.pos, pos_at, POS_COUNT, "Position encoding."),
    K_INT(M, "rel_buckets", spec.rel_buckets, 0, 4096, "32 for T5", "T5: relative-position buckets."),
    K_BOOL(M, "causal", spec.causal, "Causal attention mask (decoder, CLIP text)."),
    K_BOOL(M, "pooler", spec.pooler, "BERT pooler, ViTModel's pooler (dense + tanh on the first token)."),
    K_INT(M, "projection_dim", spec.projection_dim, 0, BIG, "none",
          "CLIP text_projection, or CLIP vision's visual_projection (CLIPVisionModelWithProjection), width."),
    K_INT(M, "patch_size", spec.patch_size, 0, 65536, "unset (MMDiT: Flux's packing)",
          "ViT, CLIP vision: pixels per patch side (the patch embedding's Conv2d kernel and stride). MMDiT: SD3's "
          "PatchEmbed, a convolution of this kernel and stride over the latents plus a learned position table; 0: "
          "Flux, latents packed in 2x2 patches by the pipeline, rotary positions."),
    K_INT(M, "num_labels", spec.num_labels, 0, BIG, "no classifier",
          "Classes of a classification head, trained with cross-entropy (at least 2): ViT's "
          "ViTForImageClassification classifier on the class token (0: ViTModel); the encoder's sequence "
          "classification head, BertForSequenceClassification's (dropout + classifier on the pooled output) with "
          "`pooler`, RobertaForSequenceClassification's (dense + tanh + out_proj on the first token) without "
          "(0: the base model with a parameter-free loss)."),
    K_BOOL(M, "lm_head", spec.lm_head, "Produce vocabulary logits and a cross-entropy loss."),
    K_ENUM(M, "attn", spec.attn, attn_at, ATTN_COUNT,
           "Attention kernel: unfused matmuls with a materialised score matrix, or fused SDPA."),
    {.name = "dropout", .type = KEY_FLOAT, FIELD(M, spec.dropout), .fmin = 0, .fmax = 1, .zero_means = "no masks",
     .help = "Dropout probability."},
    K_INT(M, "in_channels", spec.in_channels, 0, 65536, "unset",
          "Image channels (VAE, CNN; ViT and CLIP vision: the config's num_channels; a UNet reads latent_channels; "
          "MMDiT: packed latent channels, 4 x latent_channels)."),
    K_INT(M, "out_channels", spec.out_channels, 0, BIG, "unset", "Output channels (CNN: classes)."),
    K_LIST(M, "channels", spec.channels, spec.nlevels, 1, 65536,
           "Channels per resolution level (block_out_channels); their number is the number of levels."),
    K_INT(M, "layers_per_block", spec.layers_per_block, 0, 64, "unset", "Residual blocks per level."),
    K_INT(M, "groups", spec.groups, 0, 4096, "unset", "GroupNorm groups."),
    K_LIST(M, "transformer_depth", spec.transformer_depth, ntransformer_depth, 0, 64,
           "UNet: transformer blocks per attention, one per level (0 = none at that level)."),
    K_LIST(M, "attn_heads", spec.attn_heads, nattn_heads, 0, 4096, "UNet: attention heads, one per level."),
    K_INT(M, "mid_transformer_depth", spec.mid_transformer_depth, 0, 64, NULL, "UNet mid-block transformer blocks."),
    K_INT(M, "cross_attention_dim", spec.cross_attention_dim, 0, BIG, "unset",
          "UNet: text-embedding width; MMDiT: the text encoder's width (joint_attention_dim)."),
    K_INT(M, "pos_embed_max", spec.pos_embed_max, 0, 4096, "unset",
          "MMDiT with patch_size: side of the position table (SD3's pos_embed_max_size), a buffer loaded with the "
          "weights."),
    K_BOOL(M, "qk_norm", spec.qk_norm,
           "RMSNorm on each head of q and k: decoder (Qwen3, Gemma3, before rotary), MMDiT (Flux, SD3.5)."),
    K_INT(M, "pooled_dim", spec.pooled_dim, 0, BIG, "unset", "MMDiT: pooled text embedding width (pooled_projection_dim)."),
    K_BOOL(M, "guidance_embed", spec.guidance_embed,
           "MMDiT: a guidance embedder beside the timestep embedder (guidance-distilled Flux.1-dev)."),
    K_BOOL(M, "linear_projection", spec.linear_projection, "UNet: linear proj_in/out (SDXL) instead of 1x1 convs."),
    K_INT(M, "time_embed_input", spec.time_embed_input, 0, BIG, "channels[0]", "UNet: sinusoidal time projection width."),
    K_INT(M, "add_time_embed_dim", spec.add_time_embed_dim, 0, BIG, "none", "SDXL: time projection per added value."),
    K_INT(M, "add_embed_input", spec.add_embed_input, 0, BIG, "none", "SDXL: projection_class_embeddings_input_dim."),
    K_INT(M, "latent_channels", spec.latent_channels, 0, 1024, "unset", "VAE latent channels; UNet in/out channels."),
    K_INT(M, "vae_scale", spec.vae_scale, 0, 64, "8", "Pixels per latent along a side."),
    K_BOOL(M, "no_quant_conv", spec.no_quant_conv,
           "VAE: no quant_conv and post_quant_conv (diffusers' use_quant_conv and use_post_quant_conv false: the "
           "Flux and SD3 VAEs)."),
    K_INT(M, "mlp_in", spec.mlp_in, 0, BIG, "unset", "MLP input features."),
    K_LIST(M, "mlp_hidden", spec.mlp_hidden, spec.mlp_depth, 1, BIG, "MLP hidden layer widths."),
    K_INT(M, "mlp_out", spec.mlp_out, 0, BIG, "unset", "MLP output features."),
};
#undef M

const struct key_table scenario_model_table = {
    .name = "model",
    .help = "The trained model: a `preset` (a published model with its exact parameter count) or an "
            "`hf_config`, with "
            "any dimension or choice overridden, or a `family` with its dimensions (the ones each family "
            "needs are listed under [Model families](#model-families)). Keys a family does not use are "
            "ignored by it.",
    .keys = model_keys, .nkeys = COUNT(model_keys), .obj_size = sizeof(struct model_input),
    .init = model_defaults, .check = check_model,
};

/* The same keys read again over an expanded preset (no defaults, no checks). */
static const struct key_table model_override_table = {
    .name = "model", .keys = model_keys, .nkeys = COUNT(model_keys), .obj_size = sizeof(struct model_input),
};

