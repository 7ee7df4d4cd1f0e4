/* presets.c: named models with the published configurations, whose parameter counts (as the
 * generator enumerates them) match the published ones exactly; tiny ones for quick tests. */
#include "workload/gen.h"
#include "workload/spec.h"

#include <string.h>

struct preset {
    const char *name;
    void (*fill)(struct model_spec *m, int variant);
    int variant;
    const char *about;
};

static void transformer_defaults(struct model_spec *m)
{
    m->norm = NORM_LAYERNORM;
    m->norm_bias = true;
    m->ffn_kind = FFN_MLP;
    m->act = ACT_GELU;
    m->bias = true;
    m->pos = POS_LEARNED;
    m->attn = ATTN_SDPA;
    m->lm_head = true;
}

static void gpt2(struct model_spec *m, int v)
{
    static const int dims[4][3] = {{768, 12, 12}, {1024, 24, 16}, {1280, 36, 20}, {1600, 48, 25}};
    m->family = FAMILY_DECODER;
    transformer_defaults(m);
    m->act = ACT_GELU_NEW; /* GPT2Config.activation_function */
    m->hidden = dims[v][0];
    m->layers = dims[v][1];
    m->heads = dims[v][2];
    m->ffn = 4 * m->hidden;
    m->vocab = 50257;
    m->max_positions = 1024;
    m->tied_embeddings = true;
    m->causal = true;
    m->dropout = 0.1f;
}

static void llama(struct model_spec *m, int v)
{
    m->family = FAMILY_DECODER;
    transformer_defaults(m);
    m->norm = NORM_RMSNORM;
    m->norm_bias = false;
    m->ffn_kind = FFN_GATED;
    m->act = ACT_SILU;
    m->bias = false;
    m->pos = POS_ROTARY;
    m->hidden = 4096;
    m->layers = 32;
    m->heads = 32;
    m->kv_heads = v ? 8 : 32;
    m->ffn = v ? 14336 : 11008;
    m->vocab = v ? 128256 : 32000;
    m->max_positions = v ? 8192 : 4096;
    m->causal = true;
}

/* Variants 0-2: FLAN-T5 base, large, XL; 3: T5 v1.1 XXL's encoder (T5EncoderModel), Flux's and SD3's
 * text encoder (google/t5-v1_1-xxl config.json: d_model 4096, d_ff 10240, 24 layers, 64 heads of 64). */
static void t5(struct model_spec *m, int v)
{
    static const int dims[4][4] = {{768, 2048, 12, 12}, {1024, 2816, 24, 16}, {2048, 5120, 24, 32}, {4096, 10240, 24, 64}};
    m->family = FAMILY_T5;
    transformer_defaults(m);
    m->norm = NORM_RMSNORM;
    m->norm_bias = false;
    m->ffn_kind = FFN_GATED;
    m->act = ACT_GELU_NEW; /* feed_forward_proj "gated-gelu" -> dense_act_fn "gelu_new" (configuration_t5.py) */
    m->bias = false;
    m->pos = POS_RELATIVE_BIAS;
    m->rel_buckets = 32;
    m->attn = ATTN_EAGER;
    m->hidden = dims[v][0];
    m->ffn = dims[v][1];
    m->layers = m->decoder_layers = dims[v][2];
    m->heads = dims[v][3];
    m->head_dim = 64;
    m->vocab = 32128;
    m->max_positions = 512;
    m->dropout = 0.1f;
    m->encoder_only = v == 3;
}

static void bert_large(struct model_spec *m, int v)
{
    (void)v;
    m->family = FAMILY_ENCODER;
    transformer_defaults(m);
    m->norm_place = NORM_POST;
    m->hidden = 1024;
    m->layers = 24;
    m->heads = 16;
    m->ffn = 4096;
    m->vocab = 30522;
    m->max_positions = 512;
    m->type_vocab = 2;
    m->pooler = true;
    m->lm_head = false;
    m->dropout = 0.1f;
}

/* Variant 0: openai/clip-vit-large-patch14's CLIPTextModel; 1: OpenCLIP ViT-bigG/14's text tower as
 * SDXL's text_encoder_2 (CLIPTextModelWithProjection, config.json: hidden 1280, 32 layers, 20 heads,
 * intermediate 5120, hidden_act gelu, projection_dim 1280); 2: CLIP-L with its projection (768), SD3's
 * text_encoder. */
static void clip_l(struct model_spec *m, int v)
{
    m->family = FAMILY_CLIP_TEXT;
    transformer_defaults(m);
    bool big = v == 1;
    m->act = big ? ACT_GELU : ACT_QUICK_GELU;
    m->hidden = big ? 1280 : 768;
    m->layers = big ? 32 : 12;
    m->heads = big ? 20 : 12;
    m->ffn = big ? 5120 : 3072;
    m->projection_dim = v ? m->hidden : 0;
    m->vocab = 49408;
    m->max_positions = 77;
    m->causal = true;
    m->lm_head = false;
}

/* google/vit-{base,large}-patch16-224 (ViTForImageClassification, ImageNet-1k's 1000 labels) and the vision
 * tower of openai/clip-vit-large-patch14 (CLIPVisionModel): their config.json dimensions; dropout 0.0 in
 * all three. */
static void vit(struct model_spec *m, int v)
{
    m->family = v == 2 ? FAMILY_CLIP_VISION : FAMILY_VIT;
    transformer_defaults(m);
    m->lm_head = false;
    m->in_channels = 3;
    m->hidden = v ? 1024 : 768;
    m->layers = v ? 24 : 12;
    m->heads = v ? 16 : 12;
    m->ffn = 4 * m->hidden;
    m->patch_size = v == 2 ? 14 : 16;
    m->max_positions = 1 + (224 / m->patch_size) * (224 / m->patch_size);
    if (v == 2)
        m->act = ACT_QUICK_GELU;
    else
        m->num_labels = 1000;
}

static void unet(struct model_spec *m, int xl)
{
    m->family = FAMILY_UNET;
    m->attn = ATTN_SDPA;
    m->latent_channels = m->in_channels = m->out_channels = 4;
    m->layers_per_block = 2;
    m->groups = 32;
    m->vae_scale = 8;
    if (!xl) {
        static const int ch[4] = {320, 640, 1280, 1280}, depth[4] = {1, 1, 1, 0};
        m->nlevels = 4;
        for (int i = 0; i < 4; i++) {
            m->channels[i] = ch[i];
            m->transformer_depth[i] = depth[i];
            m->attn_heads[i] = 8;
        }
        m->mid_transformer_depth = 1;
        m->cross_attention_dim = 768;
    } else {
        static const int ch[3] = {320, 640, 1280}, depth[3] = {0, 2, 10}, heads[3] = {5, 10, 20};
        m->nlevels = 3;
        for (int i = 0; i < 3; i++) {
            m->channels[i] = ch[i];
            m->transformer_depth[i] = depth[i];
            m->attn_heads[i] = heads[i];
        }
        m->mid_transformer_depth = 10;
        m->cross_attention_dim = 2048;
        m->linear_projection = true;
        m->add_time_embed_dim = 256;
        m->add_embed_input = 2816;
    }
}

/* diffusers FluxTransformer2DModel of black-forest-labs/FLUX.1-dev (transformer/config.json: 19 double
 * and 38 single blocks, 24 heads of 128, joint_attention_dim 4096, pooled_projection_dim 768,
 * guidance_embeds true, in_channels 64 = 16 latent channels in 2x2 patches). */
static void flux(struct model_spec *m, int v)
{
    (void)v;
    m->family = FAMILY_MMDIT;
    m->attn = ATTN_SDPA;
    m->layers = 19;
    m->single_layers = 38;
    m->hidden = 3072;
    m->heads = 24;
    m->head_dim = 128;
    m->ffn = 4 * 3072; /* mlp_ratio 4 */
    m->in_channels = 64;
    m->latent_channels = 16;
    m->vae_scale = 8;
    m->cross_attention_dim = 4096;
    m->pooled_dim = 768;
    m->guidance_embed = true;
    m->qk_norm = true;
}

/* diffusers SD3Transformer2DModel of stabilityai/stable-diffusion-3-medium-diffusers
 * (transformer/config.json: 24 layers, 24 heads of 64, patch_size 2, in_channels 16,
 * joint_attention_dim 4096, caption_projection_dim 1536, pooled_projection_dim 2048,
 * pos_embed_max_size 192; no qk_norm). */
static void sd3(struct model_spec *m, int v)
{
    (void)v;
    m->family = FAMILY_MMDIT;
    m->attn = ATTN_SDPA;
    m->layers = 24;
    m->hidden = 1536;
    m->heads = 24;
    m->head_dim = 64;
    m->ffn = 4 * 1536;
    m->patch_size = 2;
    m->pos_embed_max = 192;
    m->in_channels = m->latent_channels = 16;
    m->vae_scale = 8;
    m->cross_attention_dim = 4096;
    m->pooled_dim = 2048;
}

/* Variant 0: the SD 1.x/2.x/XL AutoencoderKL; 1: FLUX.1-dev's (vae/config.json: latent_channels 16,
 * use_quant_conv and use_post_quant_conv false). */
static void sd_vae(struct model_spec *m, int v)
{
    static const int ch[4] = {128, 256, 512, 512};
    m->family = FAMILY_VAE;
    m->attn = ATTN_SDPA;
    m->in_channels = m->out_channels = 3;
    m->latent_channels = v ? 16 : 4;
    m->no_quant_conv = v == 1;
    m->nlevels = 4;
    for (int i = 0; i < 4; i++)
        m->channels[i] = ch[i];
    m->layers_per_block = 2;
    m->groups = 32;
    m->vae_scale = 8;
}

static void tiny(struct model_spec *m, int v)
{
    if (v == 0) {
        m->family = FAMILY_MLP;
        m->act = ACT_RELU;
        m->bias = true;
        m->mlp_in = 256;
        m->mlp_depth = 2;
        m->mlp_hidden[0] = m->mlp_hidden[1] = 512;
        m->mlp_out = 10;
    } else if (v == 1) {
        static const int ch[3] = {32, 64, 128};
        m->family = FAMILY_CNN;
        m->in_channels = 3;
        m->out_channels = 10;
        m->nlevels = 3;
        for (int i = 0; i < 3; i++)
            m->channels[i] = ch[i];
        m->layers_per_block = 2;
        m->groups = 8;
        m->bias = true;
    } else if (v == 3) {
        static const int ch[2] = {32, 64}, depth[2] = {1, 0};
        m->family = FAMILY_UNET;
        m->attn = ATTN_SDPA;
        m->latent_channels = m->in_channels = m->out_channels = 4;
        m->nlevels = 2;
        for (int i = 0; i < 2; i++) {
            m->channels[i] = ch[i];
            m->transformer_depth[i] = depth[i];
            m->attn_heads[i] = 4;
        }
        m->layers_per_block = 1;
        m->groups = 8;
        m->vae_scale = 2;
        m->mid_transformer_depth = 1;
        m->cross_attention_dim = 768;
    } else if (v == 4) {
        static const int ch[2] = {32, 64};
        m->family = FAMILY_VAE;
        m->attn = ATTN_SDPA;
        m->in_channels = m->out_channels = 3;
        m->latent_channels = 4;
        m->nlevels = 2;
        for (int i = 0; i < 2; i++)
            m->channels[i] = ch[i];
        m->layers_per_block = 1;
        m->groups = 8;
        m->vae_scale = 2;
    } else {
        m->family = FAMILY_DECODER;
        transformer_defaults(m);
        m->hidden = 256;
        m->layers = 4;
        m->heads = 4;
        m->ffn = 1024;
        m->vocab = 8192;
        m->max_positions = 512;
        m->causal = true;
        m->tied_embeddings = true;
        m->dropout = 0.1f;
    }
}

/* Llama-style decoders from their published config.json (hidden_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads, intermediate_size, vocab_size, head_dim,
 * max_position_embeddings, tie_word_embeddings), read as hf_config.c reads them. */
enum hf_kind { HF_LLAMA, HF_QWEN2, HF_GEMMA2 };
static const struct hf_decoder {
    int hidden, layers, heads, kv_heads, ffn, vocab, head_dim, max_positions;
    bool tied;
    enum hf_kind kind;
} hf_decoders[] = {
    {4096, 32, 32, 8, 14336, 32000, 0, 32768, false, HF_LLAMA},      /* mistralai/Mistral-7B-v0.1 */
    {4096, 32, 32, 8, 14336, 128256, 0, 131072, false, HF_LLAMA},    /* meta-llama/Llama-3.1-8B */
    {896, 24, 14, 2, 4864, 151936, 0, 32768, true, HF_QWEN2},        /* Qwen/Qwen2.5-0.5B */
    {1536, 28, 12, 2, 8960, 151936, 0, 131072, true, HF_QWEN2},      /* Qwen/Qwen2.5-1.5B */
    {2048, 36, 16, 2, 11008, 151936, 0, 32768, true, HF_QWEN2},      /* Qwen/Qwen2.5-3B */
    {3584, 28, 28, 4, 18944, 152064, 0, 131072, false, HF_QWEN2},    /* Qwen/Qwen2.5-7B */
    {5120, 40, 40, 40, 13824, 32000, 0, 4096, false, HF_LLAMA},      /* meta-llama/Llama-2-13b-hf */
    {3584, 42, 16, 8, 14336, 256000, 256, 8192, true, HF_GEMMA2},    /* google/gemma-2-9b */
    {3072, 32, 32, 32, 8192, 32064, 0, 4096, false, HF_LLAMA},       /* microsoft/Phi-3-mini-4k-instruct */
};

static void hf_decoder(struct model_spec *m, int v)
{
    const struct hf_decoder *d = &hf_decoders[v];
    llama(m, 1);
    m->hidden = d->hidden;
    m->layers = d->layers;
    m->heads = d->heads;
    m->kv_heads = d->kv_heads;
    m->ffn = d->ffn;
    m->vocab = d->vocab;
    m->head_dim = d->head_dim;
    m->max_positions = d->max_positions;
    m->tied_embeddings = d->tied;
    m->qkv_bias = d->kind == HF_QWEN2;
    if (d->kind == HF_GEMMA2) { /* Gemma2Config: gelu_pytorch_tanh, final and attention soft-capping 30, 50 */
        m->act = ACT_GELU_TANH;
        m->embed_scale = m->sandwich_norm = true;
        m->logit_softcap = 30.0f;
        m->attn_softcap = 50.0f;
    }
}

/* RobertaModel (with its pooler): BERT's layout with 50265 tokens, 514 positions, one token type. */
static void roberta(struct model_spec *m, int large)
{
    bert_large(m, 0);
    m->hidden = large ? 1024 : 768;
    m->layers = large ? 24 : 12;
    m->heads = large ? 16 : 12;
    m->ffn = 4 * m->hidden;
    m->vocab = 50265;
    m->max_positions = 514;
    m->type_vocab = 1;
}

static const struct preset presets[] = {
    {"flan-t5-base", t5, 0, "google/flan-t5-base"},
    {"flan-t5-large", t5, 1, "google/flan-t5-large"},
    {"flan-t5-xl", t5, 2, "google/flan-t5-xl"},
    {"gpt2", gpt2, 0, "openai-community/gpt2"},
    {"gpt2-medium", gpt2, 1, "openai-community/gpt2-medium"},
    {"gpt2-large", gpt2, 2, "openai-community/gpt2-large"},
    {"gpt2-xl", gpt2, 3, "openai-community/gpt2-xl"},
    {"llama-2-7b", llama, 0, "meta-llama/Llama-2-7b-hf"},
    {"llama-3-8b", llama, 1, "meta-llama/Meta-Llama-3-8B"},
    {"bert-large-uncased", bert_large, 0, "google-bert/bert-large-uncased (BertModel)"},
    {"sd15-unet", unet, 0, "runwayml/stable-diffusion-v1-5 unet"},
    {"sdxl-unet", unet, 1, "stabilityai/stable-diffusion-xl-base-1.0 unet"},
    {"sd-vae", sd_vae, 0, "AutoencoderKL of SD 1.x/2.x/XL"},
    {"flux-vae", sd_vae, 1, "black-forest-labs/FLUX.1-dev vae (AutoencoderKL, 16 latent channels)"},
    {"clip-l-text", clip_l, 0, "openai/clip-vit-large-patch14 text encoder"},
    {"mistral-7b", hf_decoder, 0, "mistralai/Mistral-7B-v0.1 (sliding window as full attention)"},
    {"llama-3.1-8b", hf_decoder, 1, "meta-llama/Llama-3.1-8B"},
    {"qwen2.5-0.5b", hf_decoder, 2, "Qwen/Qwen2.5-0.5B"},
    {"qwen2.5-1.5b", hf_decoder, 3, "Qwen/Qwen2.5-1.5B"},
    {"qwen2.5-3b", hf_decoder, 4, "Qwen/Qwen2.5-3B"},
    {"qwen2.5-7b", hf_decoder, 5, "Qwen/Qwen2.5-7B"},
    {"llama-2-13b", hf_decoder, 6, "meta-llama/Llama-2-13b-hf"},
    {"gemma-2-9b", hf_decoder, 7, "google/gemma-2-9b (sliding window as full attention)"},
    {"phi-3-mini", hf_decoder, 8, "microsoft/Phi-3-mini-4k-instruct (fused qkv as q, k, v)"},
    {"roberta-base", roberta, 0, "FacebookAI/roberta-base (RobertaModel)"},
    {"roberta-large", roberta, 1, "FacebookAI/roberta-large (RobertaModel)"},
    {"vit-base-patch16-224", vit, 0, "google/vit-base-patch16-224 (ViTForImageClassification)"},
    {"vit-large-patch16-224", vit, 1, "google/vit-large-patch16-224 (ViTForImageClassification)"},
    {"clip-vit-l14-vision", vit, 2, "openai/clip-vit-large-patch14 vision tower (CLIPVisionModel)"},
    {"clip-l-text-proj", clip_l, 2, "CLIP-L text encoder with its projection (SD3 text_encoder)"},
    {"openclip-bigg-text", clip_l, 1, "SDXL text_encoder_2 (OpenCLIP ViT-bigG/14 text, with projection)"},
    {"t5-v1.1-xxl", t5, 3, "google/t5-v1_1-xxl encoder (T5EncoderModel; Flux, SD3 text_encoder)"},
    {"flux.1-dev", flux, 0, "black-forest-labs/FLUX.1-dev transformer"},
    {"sd3-medium", sd3, 0, "stabilityai/stable-diffusion-3-medium transformer (MMDiT)"},
    {"tiny-mlp", tiny, 0, "2 hidden layers of 512"},
    {"tiny-cnn", tiny, 1, "3 levels of 32/64/128 channels"},
    {"tiny-transformer", tiny, 2, "GPT-2 style, 4 layers, hidden 256"},
    {"tiny-unet", tiny, 3, "SD-style UNet, 2 levels of 32/64 channels, latents at 1/2 resolution"},
    {"tiny-vae", tiny, 4, "SD-style AutoencoderKL, 2 levels of 32/64 channels, 2x downsampling"},
};

static const struct preset *preset_find(const char *name)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

int preset_apply(struct model_spec *m, const char *name, struct err *e)
{
    const struct preset *p = preset_find(name);
    if (!p)
        return err_set(e, ERR_INPUT, "unknown model preset '%s' (see `oomlab list`)", name);
    char keep[SPEC_NAME_MAX];
    snprintf(keep, sizeof keep, "%s", name);
    memset(m, 0, sizeof *m);
    snprintf(m->preset, sizeof m->preset, "%s", keep);
    snprintf(m->expanded_from, sizeof m->expanded_from, "%s", keep);
    p->fill(m, p->variant);
    return 0;
}

bool preset_known(const char *name)
{
    return preset_find(name) != NULL;
}

int64_t preset_param_count(const char *name)
{
    struct model_spec m;
    struct err e = {0};
    if (preset_apply(&m, name, &e) < 0)
        return -1;
    return model_param_count(&m, &e);
}

void presets_print(FILE *out)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        struct model_spec m;
        struct err e = {0};
        preset_apply(&m, presets[i].name, &e);
        long long n = (long long)model_param_count(&m, &e);
        fprintf(out, "%-22s %-11s %15lld params  %s\n", presets[i].name, family_name(m.family), n, presets[i].about);
    }
}
