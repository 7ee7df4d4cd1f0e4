/* encoder.c: encoder-only transformers (BERT): word + learned position + token-type embeddings,
 * embedding LayerNorm, post-LayerNorm blocks with biases and GELU, pooler. The training loss is a
 * parameter-free cross-entropy on the pooled output, so the model keeps BertModel's exact count. */
#include "workload/models/models.h"

static const struct tf_names bert_names = {
    .attn = "attention", .q = "self.query", .kv = "self.key_value", .o = "output.dense",
    .attn_norm = "output.LayerNorm", .up = "intermediate.dense", .down = "output.dense",
    .ffn_norm = "output.LayerNorm",
};

static tref encoder_layers(struct gen *g, const struct ckpt *c, tref x)
{
    const struct model_spec *m = c->model;
    struct tf_cfg cfg = {.m = m, .nm = &bert_names, .scale_op = true, .post_norm = true, .ffn_bias = m->bias,
                         .dropout = m->dropout, .attn_dropout = m->dropout};
    return tf_layer_stack(g, &cfg, c, x, "layer.%d");
}

tref encoder_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss)
{
    tref ids = tf_ids(g, bt->b, bt->s, m->vocab, "input_ids");
    tref types = m->type_vocab ? tf_ids(g, bt->b, bt->s, m->type_vocab, "token_type_ids") : TNONE;
    tref pos = tf_ids(g, 1, bt->s, m->max_positions, "position_ids");
    gen_push(g, "bert");
    gen_push(g, "embeddings");
    tref x = nn_embedding(g, "word_embeddings", ids, m->vocab, m->hidden, -1);
    tref pe = nn_embedding(g, "position_embeddings", pos, m->max_positions, m->hidden, -1);
    tref s = nn_add(g, "sum", x, pe);
    t_release(g, x);
    t_release(g, pe);
    if (m->type_vocab) {
        tref te = nn_embedding(g, "token_type_embeddings", types, m->type_vocab, m->hidden, -1);
        tref s2 = nn_add(g, "sum", s, te);
        t_release(g, s);
        t_release(g, te);
        s = s2;
    }
    tref n = nn_norm(g, "LayerNorm", s, m->hidden, m->norm, m->norm_bias, 0);
    t_release(g, s);
    x = nn_dropout(g, "dropout", n, m->dropout);
    t_release(g, n);
    gen_pop(g);
    tref mask = m->attn == ATTN_EAGER && g->mode == GEN_RUN ? tf_mask(g, bt->b, bt->s, false, (enum dtype)g->t[x].dtype)
                                                           : TNONE;
    gen_push(g, "encoder");
    int every = tf_checkpoint_every(g, m->layers);
    for (int i = 0; i < m->layers; i += every) {
        struct ckpt c = {.fn = encoder_layers, .model = m, .layer = i,
                         .count = i + every <= m->layers ? every : m->layers - i, .extra = {mask, TNONE, TNONE}};
        tref y = nn_checkpoint(g, &c, x);
        t_release(g, x);
        x = y;
    }
    gen_pop(g);
    t_release(g, mask);
    tref out = x;
    if (m->pooler) {
        int64_t d[2] = {bt->b, m->hidden};
        tref first = g->mode == GEN_RUN ? nn_slice(g, "pooler.first_token", x, d, 2, bt->b, m->hidden,
                                                    bt->s * m->hidden, 0)
                                        : TNONE;
        bool head = g->in_head;
        g->in_head = true;
        tref p = nn_linear(g, "pooler.dense", first, m->hidden, m->hidden, true);
        g->in_head = head;
        out = nn_act(g, "pooler.activation", p, ACT_GELU_TANH);
        t_release(g, p);
        t_release(g, first);
        t_release(g, x);
    }
    gen_pop(g);
    t_release(g, ids);
    t_release(g, types);
    t_release(g, pos);
    if (!loss)
        return out;
    int64_t d[1] = {bt->b};
    tref labels = g->mode == GEN_RUN ? nn_ids(g, d, 1, T(g, out)->dims[T(g, out)->ndim - 1], "labels") : TNONE;
    tref l = nn_cross_entropy(g, "loss", out, labels);
    t_release(g, out);
    t_release(g, labels);
    return l;
}
