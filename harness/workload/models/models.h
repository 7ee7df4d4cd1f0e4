/* models.h: the model families the generator can walk (one file each), and the shared pieces
 * (transformer blocks) they are built from. Internal to the workload generator. */
#ifndef OOMLAB_WORKLOAD_MODELS_H
#define OOMLAB_WORKLOAD_MODELS_H

#include "workload/gen.h"

/* Shapes of one forward. */
struct batch {
    int64_t b;       /* samples */
    int64_t s;       /* tokens (T5: encoder tokens) */
    int64_t t;       /* T5: decoder tokens */
    int64_t image;   /* pixels per side */
    int64_t context; /* UNet: text tokens for cross-attention */
};

/* Runs (or, in GEN_PARAMS mode, registers) the model. With `loss` the forward ends in the training
 * loss (returned, a scalar); without, the model's output is returned. */
tref model_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss);

tref decoder_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss);
tref encoder_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss);
tref t5_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss);
tref clip_text_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss);
tref unet_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss);
tref vae_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss);
tref mlp_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss);
tref cnn_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss);
tref vit_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss); /* ViT, CLIP vision */
tref mmdit_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss);

/* mean((pred - target)^2) (mse_loss.c); takes over the references to pred and target. */
tref mse_loss(struct gen *g, tref pred, tref target);

/* VAE halves for a frozen VAE extra: images [B,3,H,W] -> latents, latents -> images. */
tref vae_encode(struct gen *g, const struct model_spec *m, tref images);
tref vae_decode(struct gen *g, const struct model_spec *m, tref latents);

/* ---- transformer pieces (blocks.c) ---- */

struct tf_names {
    const char *attn, *q, *k, *v, *qkv, *o;   /* attention module and projections (qkv: GPT-2's fused c_attn) */
    const char *core;                         /* the attention core's own module (BERT's "self"), or NULL */
    const char *attn_drop;                    /* the attention module's output dropout */
    const char *attn_norm;                    /* norm of the attention sub-block */
    const char *ffn, *up, *gate, *act, *down; /* feed-forward module, projections and activation */
    const char *ffn_drop;                     /* the feed-forward module's output dropout */
    const char *ffn_norm;
};

/* One attention or feed-forward module as a transformers model class writes it. */
struct tf_cfg {
    const struct model_spec *m;
    const struct tf_names *nm;
    bool fused_qkv;       /* one [3h] projection (GPT-2 c_attn) */
    bool scale_op;        /* eager attention scales by a separate multiply */
    float attn_scale;     /* score scale (0 = 1/sqrt(head_dim); T5: 1) */
    bool upcast_softmax;  /* eager softmax in fp32 (Llama) */
    bool causal;
    bool ffn_bias;
    float attn_dropout;   /* attention-probability dropout */
    float out_dropout;    /* dropout inside the module after its output projection (GPT-2's resid_dropout) */
    float inner_dropout;  /* dropout between a gated unit's product and its down projection (T5) */
    bool cache;           /* the attention builds KV cache copies (use_cache; held to the forward's end) */
    bool cross;           /* cross-attention: keys and values from the encoder's states */
};

/* What every layer of one forward shares. */
struct tf_ctx {
    tref mask;            /* additive attention mask [B, 1, S, Sk], or TNONE */
    tref bias;            /* position bias [1, heads, S, Sk] (T5), or TNONE */
    tref cos, sin;        /* rotary tables, or TNONE */
};

/* The attention module: projections of h (and, cross-attention, of kv_src's keys and values), rotary
 * embedding, KV cache copies, the attention core, the output projection (and its dropout when the
 * module has one). Frees the projections where the module's forward returns. */
tref tf_attention(struct gen *g, const struct tf_cfg *c, const struct tf_ctx *x, tref h, tref kv_src);
/* The feed-forward module: up (gate, act, up, product) or up-act, inner dropout, down (and its
 * dropout when the module has one). */
tref tf_ffn(struct gen *g, const struct tf_cfg *c, tref h);
/* Mixtral's sparse MoE block in place of the feed-forward module (moe.c), and the tokens balanced
 * routing gives expert e. */
tref tf_moe(struct gen *g, const struct tf_cfg *c, tref h);
int64_t moe_expert_tokens(int64_t tokens, int top_k, int experts, int e);
/* A pre-LayerNorm encoder layer (CLIPEncoderLayer, ViTLayer): h + attention(attn_norm(h)), then that
 * + ffn(ffn_norm(.)). Takes over the caller's reference to h. */
tref tf_pre_ln_layer(struct gen *g, const struct tf_cfg *c, const struct tf_ctx *x, tref h);
/* x[:, 0] of hidden states x [B, S, hidden] (the class / first token) as its own [B, hidden] tensor: a view
 * that the op reading it copies (LayerNorm's contiguous input) or reads with its leading stride (a GEMM). */
tref tf_first_token(struct gen *g, const char *name, tref x);
/* CLIPEncoderLayer's module names (clip_text.c), shared by the CLIP text and vision towers. */
extern const struct tf_names tf_clip_names;
/* Layers per checkpointed segment of a stack of `layers`: gradient_checkpointing's `every`, or the
 * whole stack as one plain segment when the model is not checkpointed. */
int tf_checkpoint_every(const struct gen *g, int layers);
/* transformers builds the KV cache in training unless use_cache is off; gradient checkpointing turns
 * it off. */
bool tf_use_cache(const struct gen *g);
/* Token ids [B, S] (int64, each in [0, high)) as a device input that lives until the step ends (the
 * batch); tf_position_ids: the [1, S] arange the model makes (an activation it frees itself). */
tref tf_ids(struct gen *g, int64_t b, int64_t s, int64_t high, const char *leaf);
tref tf_position_ids(struct gen *g, int64_t s, int64_t high);
/* masking_utils (transformers 5.x): the additive mask an attention gets, or TNONE. Eager causal
 * attention always has one ([B, 1, S, S] in dtype dt, made from a bool [1 or B, 1, S, S] that is then
 * freed); with padding every attention gets one (eager: that float mask; SDPA: the bool mask
 * itself); without padding, none otherwise (SDPA uses is_causal). */
tref tf_mask(struct gen *g, int64_t b, int64_t s, int64_t sk, bool causal, bool eager, enum dtype dt);
/* The causal LM loss (ForCausalLMLoss): logits.float() (a copy only when they are not fp32), labels
 * padded by one and shifted (a contiguous copy), then cross-entropy. */
tref tf_lm_loss(struct gen *g, tref logits, tref labels);

#endif
