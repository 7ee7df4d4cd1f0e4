/* decoder.c: decoder-only transformers. GPT-2 style (learned positions, fused c_attn, LayerNorm,
 * GELU MLP, biases, tied LM head) and Llama style (rotary, GQA, RMSNorm, SwiGLU, no biases, untied),
 * chosen by the model's positional scheme; causal LM loss. */
#include "workload/models/models.h"

static const struct tf_names gpt2_names = {
    .attn = "attn", .qkv = "c_attn", .o = "c_proj", .attn_norm = "ln_1",
    .ffn = "mlp", .up = "c_fc", .down = "c_proj", .ffn_norm = "ln_2",
};
static const struct tf_names llama_names = {
    .attn = "self_attn", .q = "q_proj", .kv = "kv_proj", .o = "o_proj",
    .attn_norm = "input_layernorm", .ffn = "mlp", .gate = "gate_proj", .up = "up_proj",
    .down = "down_proj", .ffn_norm = "post_attention_layernorm",
};

static bool gpt2_style(const struct model_spec *m)
{
    return m->pos == POS_LEARNED;
}

static struct tf_cfg decoder_cfg(const struct model_spec *m)
{
    bool gpt = gpt2_style(m);
    struct tf_cfg c = {
        .m = m, .nm = gpt ? &gpt2_names : &llama_names, .fused_qkv = gpt, .scale_op = true,
        .upcast_softmax = !gpt, .causal = true, .ffn_bias = m->bias, .dropout = m->dropout,
        .attn_dropout = m->dropout,
    };
    return c;
}

static tref decoder_layers(struct gen *g, const struct ckpt *c, tref x)
{
    const struct model_spec *m = c->model;
    struct tf_cfg cfg = decoder_cfg(m);
    return tf_layer_stack(g, &cfg, c, x, gpt2_style(m) ? "h.%d" : "layers.%d");
}

tref decoder_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss)
{
    bool gpt = gpt2_style(m);
    tref ids = tf_ids(g, bt->b, bt->s, m->vocab, "input_ids");
    tref labels = loss ? tf_ids(g, bt->b, bt->s, m->vocab, "labels") : TNONE;
    gen_push(g, gpt ? "transformer" : "model");
    int32_t wte = param_peek(g);
    tref x = nn_embedding(g, gpt ? "wte" : "embed_tokens", ids, m->vocab, m->hidden, -1);
    if (m->pos == POS_LEARNED) {
        tref pos = tf_ids(g, 1, bt->s, m->max_positions, "position_ids");
        tref pe = nn_embedding(g, "wpe", pos, m->max_positions, m->hidden, -1);
        tref s = nn_add(g, "embed", x, pe);
        t_release(g, x);
        t_release(g, pe);
        t_release(g, pos);
        x = nn_dropout(g, "drop", s, m->dropout);
        t_release(g, s);
    }
    tref mask = m->attn == ATTN_EAGER && g->mode == GEN_RUN ? tf_mask(g, bt->b, bt->s, true, (enum dtype)g->t[x].dtype)
                                                           : TNONE;
    int every = tf_checkpoint_every(g, m->layers);
    for (int i = 0; i < m->layers; i += every) {
        struct ckpt c = {.fn = decoder_layers, .model = m, .layer = i,
                         .count = i + every <= m->layers ? every : m->layers - i, .extra = {mask, TNONE, TNONE}};
        tref y = nn_checkpoint(g, &c, x);
        t_release(g, x);
        x = y;
    }
    t_release(g, mask);
    tref f = nn_norm(g, gpt ? "ln_f" : "norm", x, m->hidden, m->norm, m->norm_bias, 0);
    t_release(g, x);
    gen_pop(g);
    bool head = g->in_head;
    g->in_head = true;
    tref logits = m->tied_embeddings ? nn_linear_tied(g, "lm_head", f, wte)
                                     : nn_linear(g, "lm_head", f, m->hidden, m->vocab, false);
    g->in_head = head;
    t_release(g, f);
    t_release(g, ids);
    if (!loss)
        return logits;
    tref l = tf_lm_loss(g, logits, labels);
    t_release(g, logits);
    t_release(g, labels);
    return l;
}
