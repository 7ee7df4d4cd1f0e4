/* t5.c: T5 / FLAN-T5 encoder-decoder: shared embedding, RMSNorm (no bias, HF's fp32 upcast),
 * gated-GELU FFN, no biases, relative position bias made once per stack in block 0 and added to
 * every layer's scores (a [B, heads, S, S] tensor, as transformers builds it), a zero cross-attention
 * bias plus mask for the decoder, untied lm_head, cross-entropy loss. */
#include "workload/models/models.h"

static const struct tf_names self_names = {
    .attn = "SelfAttention", .q = "q", .kv = "kv", .o = "o", .attn_norm = "layer_norm",
};
static const struct tf_names cross_names = {
    .attn = "EncDecAttention", .q = "q", .kv = "kv", .o = "o", .attn_norm = "layer_norm",
};
static const struct tf_names ffn_names = {
    .ffn = "DenseReluDense", .gate = "wi_0", .up = "wi_1", .down = "wo", .ffn_norm = "layer_norm",
};

static struct tf_cfg t5_cfg(const struct model_spec *m, const struct tf_names *nm, bool causal)
{
    struct tf_cfg c = {.m = m, .nm = nm, .causal = causal, .attn_scale = 1.0f, .dropout = m->dropout,
                       .attn_dropout = m->dropout};
    return c;
}

/* extra[0] = self-attention position bias; decoder: extra[1] = encoder states, extra[2] = cross bias */
static tref t5_layers(struct gen *g, const struct ckpt *c, tref x, bool decoder)
{
    const struct model_spec *m = c->model;
    struct tf_cfg sa = t5_cfg(m, &self_names, decoder), ca = t5_cfg(m, &cross_names, false),
                  ff = t5_cfg(m, &ffn_names, false);
    tref h = t_ref(g, x);
    for (int i = c->layer; i < c->layer + c->count; i++) {
        gen_push(g, "block.%d", i);
        gen_push(g, "layer.0");
        tref a = tf_attention(g, &sa, h, TNONE, c->extra[0], 0);
        gen_pop(g);
        t_release(g, h);
        h = a;
        if (decoder) {
            gen_push(g, "layer.1");
            a = tf_attention(g, &ca, h, c->extra[1], c->extra[2], m->hidden);
            gen_pop(g);
            t_release(g, h);
            h = a;
        }
        gen_push(g, "layer.%d", decoder ? 2 : 1);
        a = tf_ffn(g, &ff, h);
        gen_pop(g);
        t_release(g, h);
        h = a;
        gen_pop(g);
    }
    return h;
}

static tref encoder_layers(struct gen *g, const struct ckpt *c, tref x)
{
    return t5_layers(g, c, x, false);
}

static tref decoder_layers(struct gen *g, const struct ckpt *c, tref x)
{
    return t5_layers(g, c, x, true);
}

/* Block 0's relative_attention_bias looked up over [S, S] buckets, plus the mask: [B, H, S, S]. */
static tref position_bias(struct gen *g, const struct model_spec *m, int64_t b, int64_t s, bool causal)
{
    gen_push(g, "block.0.layer.0.SelfAttention");
    tref buckets = g->mode == GEN_RUN ? tf_ids(g, s, s, m->rel_buckets, "relative_position_buckets") : TNONE;
    tref rb = nn_embedding(g, "relative_attention_bias", buckets, m->rel_buckets, m->heads, -1);
    tref out = TNONE;
    if (g->mode == GEN_RUN) {
        tref mask = tf_mask(g, b, s, causal, (enum dtype)g->t[rb].dtype);
        int64_t hd[3] = {m->heads, s, s}, d[4] = {b, m->heads, s, s}, over_batch[3] = {1, b, m->heads * s * s};
        tref per_head = nn_transpose(g, "position_bias.permute", rb, 1, s * s, m->heads, hd, 3);
        tref big = nn_expand(g, "position_bias", per_head, over_batch, d, 4);
        t_release(g, per_head);
        out = nn_add(g, "position_bias", big, mask);
        t_release(g, big);
        t_release(g, mask);
    }
    t_release(g, rb);
    t_release(g, buckets);
    gen_pop(g);
    return out;
}

static tref stack(struct gen *g, const struct model_spec *m, tref x, int layers, tref bias, tref enc,
                  tref cross_bias, bool decoder)
{
    int every = tf_checkpoint_every(g, layers);
    for (int i = 0; i < layers; i += every) {
        struct ckpt c = {.fn = decoder ? decoder_layers : encoder_layers, .model = m, .layer = i,
                         .count = i + every <= layers ? every : layers - i, .extra = {bias, enc, cross_bias}};
        tref y = nn_checkpoint(g, &c, x);
        t_release(g, x);
        x = y;
    }
    tref n = nn_norm(g, "final_layer_norm", x, m->hidden, m->norm, false, 0);
    t_release(g, x);
    tref d = nn_dropout(g, "dropout", n, m->dropout);
    t_release(g, n);
    return d;
}

tref t5_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss)
{
    int64_t s = bt->s, t = bt->t ? bt->t : bt->s;
    tref ids = tf_ids(g, bt->b, s, m->vocab, "input_ids");
    tref dec_ids = tf_ids(g, bt->b, t, m->vocab, "decoder_input_ids");
    tref labels = loss ? tf_ids(g, bt->b, t, m->vocab, "labels") : TNONE;
    int32_t shared = g->mode == GEN_PARAMS ? param_add(g, "shared.weight", m->vocab, m->hidden) : param_next(g);

    gen_push(g, "encoder");
    tref x = nn_embedding(g, "embed_tokens", ids, m->vocab, m->hidden, shared);
    tref xd = nn_dropout(g, "dropout", x, m->dropout);
    t_release(g, x);
    tref bias = position_bias(g, m, bt->b, s, false);
    tref enc = stack(g, m, xd, m->layers, bias, TNONE, TNONE, false);
    t_release(g, bias);
    gen_pop(g);

    gen_push(g, "decoder");
    tref y = nn_embedding(g, "embed_tokens", dec_ids, m->vocab, m->hidden, shared);
    tref yd = nn_dropout(g, "dropout", y, m->dropout);
    t_release(g, y);
    tref dbias = position_bias(g, m, bt->b, t, true);
    tref cross = TNONE;
    if (g->mode == GEN_RUN) { /* zeros(1, H, T, S) + encoder mask, as transformers builds it */
        tref mask = tf_mask(g, bt->b, s, false, (enum dtype)g->t[enc].dtype);
        int64_t d[4] = {bt->b, m->heads, t, s}, over_heads[3] = {bt->b, m->heads * t, s};
        cross = nn_expand(g, "encoder_decoder_position_bias", mask, over_heads, d, 4);
        t_release(g, mask);
    }
    tref dec = stack(g, m, yd, m->decoder_layers, dbias, enc, cross, true);
    t_release(g, dbias);
    t_release(g, cross);
    t_release(g, enc);
    gen_pop(g);

    bool head = g->in_head;
    g->in_head = true;
    tref logits = nn_linear(g, "lm_head", dec, m->hidden, m->vocab, false);
    g->in_head = head;
    t_release(g, dec);
    t_release(g, ids);
    t_release(g, dec_ids);
    if (!loss)
        return logits;
    tref l = nn_cross_entropy(g, "loss", logits, labels);
    t_release(g, logits);
    t_release(g, labels);
    return l;
}
