/* t5.c: T5 / FLAN-T5 as transformers 5.x writes T5ForConditionalGeneration: a shared embedding,
 * T5LayerNorm (RMSNorm), separate q, k, v, o projections without biases, an eager attention that
 * multiplies its scores by 1.0 and adds a position bias: block 0's relative_attention_bias embedding
 * [S, S, heads], shared by every layer of its stack (a permuted view, never expanded to the batch),
 * and zeros [1, heads, T, S] for the cross-attention; the decoder's causal mask; the decoder's KV cache
 * (an EncoderDecoderCache: self- and cross-attention copies); gated-GELU feed-forward (or the
 * original T5's ReLU one); an untied lm_head (or, tied, the shared embedding after a d_model**-0.5
 * scale); decoder_input_ids made from the labels (_shift_right); cross-entropy on the logits. With
 * model.encoder_only, T5EncoderModel: the shared embedding and the encoder stack, returning its states. */
#include "workload/models/models.h"

#include <math.h>

static const struct tf_names self_names = {
    .attn = "SelfAttention", .q = "q", .k = "k", .v = "v", .o = "o",
};
static const struct tf_names cross_names = {
    .attn = "EncDecAttention", .q = "q", .k = "k", .v = "v", .o = "o",
};
static const struct tf_names ffn_names = {
    .ffn = "DenseReluDense", .gate = "wi_0", .up = "wi_1", .act = "act", .down = "wo",
};
static const struct tf_names relu_names = { /* T5DenseActDense (feed_forward_proj "relu": t5-small..11b) */
    .ffn = "DenseReluDense", .up = "wi", .act = "act", .down = "wo",
};

static struct tf_cfg t5_cfg(const struct gen *g, const struct model_spec *m, const struct tf_names *nm, bool causal,
                            bool cache, bool cross)
{
    struct tf_cfg c = {.m = m, .nm = nm, .causal = causal, .scale_op = true, .attn_scale = 1.0f,
                       .attn_dropout = m->dropout, .inner_dropout = m->dropout, .cache = cache && tf_use_cache(g),
                       .cross = cross};
    return c;
}

/* T5LayerSelfAttention / T5LayerCrossAttention / T5LayerFF: x + dropout(sublayer(layer_norm(x))). The
 * sublayer's parameters are defined before the norm's (block 0's relative_attention_bias among the
 * attention's, after o). */
static tref t5_sublayer(struct gen *g, const struct tf_cfg *c, const struct tf_ctx *ctx, tref x, tref enc, bool ffn,
                        bool rel_bias)
{
    const struct model_spec *m = c->m;
    if (g->mode == GEN_PARAMS) {
        if (ffn)
            tf_ffn(g, c, TNONE);
        else
            tf_attention(g, c, ctx, TNONE, TNONE);
        if (rel_bias) {
            gen_push(g, "%s", c->nm->attn);
            nn_embedding(g, "relative_attention_bias", TNONE, m->rel_buckets, m->heads, -1);
            gen_pop(g);
        }
        nn_norm(g, "layer_norm", TNONE, m->hidden, m->norm, false, 0);
        return TNONE;
    }
    tref n = nn_norm(g, "layer_norm", x, m->hidden, m->norm, false, 0);
    tref o = ffn ? tf_ffn(g, c, n) : tf_attention(g, c, ctx, n, enc);
    tref d = nn_dropout(g, "dropout", o, m->dropout);
    tref r = nn_add(g, NULL, x, d);
    t_release(g, d);
    t_release(g, o);
    t_release(g, n);
    return r;
}

/* extra: [0] self-attention mask, [1] position bias; decoder: [2] encoder states, [3] cross bias,
 * [4] cross mask */
static tref t5_layers(struct gen *g, const struct ckpt *c, tref x, bool decoder)
{
    const struct model_spec *m = c->model;
    const struct tf_names *ffn = m->ffn_kind == FFN_GATED ? &ffn_names : &relu_names;
    struct tf_cfg sa = t5_cfg(g, m, &self_names, decoder, decoder, false),
                  ca = t5_cfg(g, m, &cross_names, false, true, true), ff = t5_cfg(g, m, ffn, false, false, false);
    struct tf_ctx self = {.mask = c->extra[0], .bias = c->extra[1], .cos = TNONE, .sin = TNONE};
    struct tf_ctx cross = {.mask = c->extra[4], .bias = c->extra[3], .cos = TNONE, .sin = TNONE};
    tref h = t_ref(g, x);
    for (int i = c->layer; i < c->layer + c->count; i++) {
        gen_push(g, "block.%d", i);
        tref in = h; /* the caller's hidden_states holds the block's input until the block returns */
        gen_push(g, "layer.0");
        tref a = t5_sublayer(g, &sa, &self, h, TNONE, false, i == 0);
        gen_pop(g);
        h = a;
        if (decoder) {
            gen_push(g, "layer.1");
            a = t5_sublayer(g, &ca, &cross, h, c->extra[2], false, false);
            gen_pop(g);
            t_release(g, h);
            h = a;
        }
        gen_push(g, "layer.%d", decoder ? 2 : 1);
        a = t5_sublayer(g, &ff, NULL, h, TNONE, true, false);
        gen_pop(g);
        t_release(g, h);
        t_release(g, in);
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

/* T5Attention.compute_bias in block 0: relative positions [S, S] (int64), their buckets (kept: the
 * embedding's backward reads them) and relative_attention_bias looked up: [S, S, heads]. */
static tref position_bias(struct gen *g, const struct model_spec *m, int64_t s)
{
    if (g->mode != GEN_RUN) /* registered with block 0's attention (t5_sublayer) */
        return TNONE;
    gen_push(g, "block.0.layer.0.SelfAttention");
    tref rel = TNONE, buckets = TNONE;
    if (g->mode == GEN_RUN) {
        const char *tag = gen_tag(g, NULL);
        int64_t d[2] = {s, s};
        rel = t_new(g, d, 2, DT_I64, CAT_ACTIVATION, tag);
        buckets = t_new(g, d, 2, DT_I64, CAT_ACTIVATION, tag);
        kern_init_ids(g, buckets, m->rel_buckets, tag);
    }
    tref rb = nn_embedding(g, "relative_attention_bias", buckets, m->rel_buckets, m->heads, -1);
    t_release(g, rel);
    t_release(g, buckets);
    gen_pop(g);
    return rb;
}

/* One T5Stack: embedding, dropout, the blocks, final_layer_norm, dropout. */
static tref t5_stack(struct gen *g, const struct model_spec *m, tref ids, int32_t shared, int layers, int64_t b,
                     int64_t s, bool decoder, tref enc, int64_t enc_len)
{
    tref emb = nn_embedding(g, "embed_tokens", ids, m->vocab, m->hidden, shared);
    enum dtype dt = g->mode == GEN_RUN ? (enum dtype)g->t[emb].dtype : DT_F32;
    bool eager = m->attn == ATTN_EAGER;
    tref mask = tf_mask(g, b, s, s, decoder, eager, dt);
    tref x = nn_dropout(g, "dropout", emb, m->dropout);
    tref bias = position_bias(g, m, s), cross_bias = TNONE, cross_mask = TNONE;
    if (decoder && g->mode == GEN_RUN) { /* layer.1's torch.zeros((1, n_heads, T, S)), shared after block 0 */
        gen_push(g, "block.0.layer.1.EncDecAttention");
        int64_t d[4] = {1, m->heads, s, enc_len};
        cross_bias = t_new(g, d, 4, dt, CAT_ACTIVATION, gen_tag(g, NULL));
        kern_fill(g, cross_bias, 0.0f, gen_tag(g, NULL));
        gen_pop(g);
        cross_mask = tf_mask(g, b, s, enc_len, false, eager, dt);
    }
    int every = tf_checkpoint_every(g, layers);
    for (int i = 0; i < layers; i += every) {
        struct ckpt c = {.fn = decoder ? decoder_layers : encoder_layers, .model = m, .layer = i,
                         .count = i + every <= layers ? every : layers - i,
                         .extra = {mask, bias, enc, cross_bias, cross_mask}};
        tref y = nn_checkpoint(g, &c, x);
        t_release(g, x);
        x = y;
    }
    tref n = nn_norm(g, "final_layer_norm", x, m->hidden, m->norm, false, 0);
    t_release(g, x);
    tref out = nn_dropout(g, "dropout", n, m->dropout);
    t_release(g, n);
    t_release(g, emb);
    t_release(g, mask);
    t_release(g, bias);
    t_release(g, cross_bias);
    t_release(g, cross_mask);
    return out;
}

/* T5EncoderModel has no loss of its own (it is a frozen text encoder beside a diffusion model): trained
 * alone, a cross-entropy of its last hidden states over labels in [0, d_model), as CLIP text's. */
static tref encoder_loss(struct gen *g, tref enc, int64_t b, int64_t s)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    int64_t d[2] = {b, s};
    tref labels = nn_ids(g, d, 2, T(g, enc)->dims[2], "labels");
    tref l = nn_cross_entropy(g, "loss", enc, labels);
    t_release(g, enc);
    t_release(g, labels);
    return l;
}

tref t5_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss)
{
    int64_t s = bt->s, t = bt->t ? bt->t : bt->s;
    tref ids = tf_ids(g, bt->b, s, m->vocab, "input_ids");
    tref labels = m->encoder_only ? TNONE : tf_ids(g, bt->b, t, m->vocab, "labels");
    int32_t shared = nn_embedding_param(g, "shared", m->vocab, m->hidden);

    gen_push(g, "encoder");
    tref enc = t5_stack(g, m, ids, shared, m->layers, bt->b, s, false, TNONE, 0);
    gen_pop(g);
    if (m->encoder_only) {
        t_release(g, labels);
        t_release(g, ids);
        return loss ? encoder_loss(g, enc, bt->b, s) : enc;
    }

    /* _shift_right(labels): new_zeros, a clone of labels[..., :-1] shifted in, freed */
    tref dec_ids = TNONE;
    if (g->mode == GEN_RUN) {
        const char *tag = gen_intern(g, "decoder_input_ids");
        int64_t d[2] = {bt->b, t}, c[2] = {bt->b, t > 1 ? t - 1 : 1};
        dec_ids = t_new(g, d, 2, DT_I64, CAT_ACTIVATION, tag);
        tref clone = t_new(g, c, 2, DT_I64, CAT_ACTIVATION, tag);
        kern_init_ids(g, dec_ids, m->vocab, tag);
        t_release(g, clone);
    }
    gen_push(g, "decoder");
    tref dec = t5_stack(g, m, dec_ids, shared, m->decoder_layers, bt->b, t, true, enc, s);
    gen_pop(g);

    bool head = g->in_head;
    g->in_head = true;
    tref logits;
    if (m->tied_embeddings) { /* T5ForConditionalGeneration: sequence_output * model_dim**-0.5, shared weight */
        tref scaled = nn_scale(g, "lm_head", dec, 1.0f / sqrtf((float)m->hidden));
        logits = nn_linear_tied(g, "lm_head", scaled, shared);
        t_release(g, scaled);
    } else {
        logits = nn_linear(g, "lm_head", dec, m->hidden, m->vocab, false);
    }
    g->in_head = head;
    t_release(g, dec);
    tref out = logits;
    if (loss) {
        out = nn_cross_entropy(g, "loss", logits, labels);
        t_release(g, logits);
    }
    t_release(g, enc); /* the encoder's output lives in the model's output */
    t_release(g, dec_ids);
    t_release(g, ids);
    t_release(g, labels);
    return out;
}
