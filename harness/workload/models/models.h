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

/* VAE halves for a frozen VAE extra: images [B,3,H,W] -> latents, latents -> images. */
tref vae_encode(struct gen *g, const struct model_spec *m, tref images);
tref vae_decode(struct gen *g, const struct model_spec *m, tref latents);

/* ---- transformer pieces (blocks.c) ---- */

struct tf_names {
    const char *attn, *q, *kv, *qkv, *o;      /* attention module and projections (kv: fused k and v) */
    const char *attn_norm;                    /* norm of the attention sub-block */
    const char *ffn, *up, *gate, *down;       /* feed-forward module and projections */
    const char *ffn_norm;
};

struct tf_cfg {
    const struct model_spec *m;
    const struct tf_names *nm;
    bool fused_qkv;       /* one [3h] projection (GPT-2 c_attn) */
    bool scale_op;        /* eager attention scales by a separate op */
    float attn_scale;     /* score scale (0 = 1/sqrt(head_dim); T5: 1) */
    bool upcast_softmax;  /* eager softmax in fp32 (Llama) */
    bool causal;
    bool post_norm;       /* BERT */
    bool ffn_bias;
    float dropout;        /* residual / FFN dropout */
    float attn_dropout;   /* attention-probability dropout */
};

/* Attention sub-block (norm placement, projections, core, output projection, dropout, residual).
 * kv: TNONE for self-attention, else the encoder states for cross-attention. `bias` is added to the
 * scores (mask or position bias). rel_bias: T5 layer 0 registers a relative-attention-bias table. */
tref tf_attention(struct gen *g, const struct tf_cfg *c, tref x, tref kv, tref bias, int64_t kv_dim);
tref tf_ffn(struct gen *g, const struct tf_cfg *c, tref x);
/* Layers c->layer .. c->layer + c->count - 1 of a self-attention + FFN stack (each tagged by name_fmt, e.g.
 * "layer.%d"), with c->extra[0] as the attention bias/mask; the layer function behind checkpointing. */
tref tf_layer_stack(struct gen *g, const struct tf_cfg *cfg, const struct ckpt *c, tref x, const char *name_fmt);
/* Layers per checkpointed segment of a stack of `layers`: gradient_checkpointing's `every`, or the
 * whole stack as one plain segment when the model is not checkpointed. */
int tf_checkpoint_every(const struct gen *g, int layers);
/* Token ids [B, S] (int64, each in [0, high)) as a device input. */
tref tf_ids(struct gen *g, int64_t b, int64_t s, int64_t high, const char *leaf);
/* Causal [B, 1, S, S] or padding [B, 1, 1, S] mask in dtype dt, built once per forward (eager). */
tref tf_mask(struct gen *g, int64_t b, int64_t s, bool causal, enum dtype dt);
/* The LM loss: logits upcast as transformers' loss functions do, cross-entropy against labels. */
tref tf_lm_loss(struct gen *g, tref logits, tref labels);

#endif
