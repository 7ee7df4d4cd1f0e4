/* encoder.c: encoder-only transformers as transformers writes BertModel: word + token-type +
 * learned position embeddings, embedding LayerNorm and dropout, post-LayerNorm layers with separate
 * query, key and value projections (BertSelfAttention), biases and GELU, and the pooler. With
 * num_labels, the sequence-classification head of BertForSequenceClassification (with the pooler) or
 * RobertaForSequenceClassification (without) and its cross-entropy; without, the training loss is a
 * parameter-free cross-entropy on the pooled output, so the model keeps BertModel's exact count.
 * Module tags are the base model's (no `bert.` / `roberta.` prefix). */
#include "workload/models/models.h"

static const struct tf_names bert_names = {
    .attn = "attention", .q = "self.query", .k = "self.key", .v = "self.value", .core = "self",
    .o = "output.dense", .attn_drop = "output.dropout", .attn_norm = "output.LayerNorm",
    .up = "intermediate.dense", .act = "intermediate.intermediate_act_fn", .down = "output.dense",
    .ffn_drop = "output.dropout", .ffn_norm = "output.LayerNorm",
};

/* extra[0] = the attention mask */
static tref encoder_layers(struct gen *g, const struct ckpt *c, tref x)
{
    const struct model_spec *m = c->model;
    struct tf_cfg cfg = {.m = m, .nm = &bert_names, .scale_op = true, .ffn_bias = m->bias,
                         .attn_dropout = m->dropout, .out_dropout = m->dropout};
    struct tf_ctx ctx = {.mask = c->extra[0], .bias = TNONE, .cos = TNONE, .sin = TNONE};
    tref h = t_ref(g, x);
    for (int i = c->layer; i < c->layer + c->count; i++) {
        gen_push(g, "layer.%d", i);
        /* BertSelfOutput: LayerNorm(dropout(dense(ctx)) + input); the dropout's output is its local */
        tref a = tf_attention(g, &cfg, &ctx, h, TNONE);
        gen_push(g, "%s", bert_names.attn);
        tref s = nn_add(g, "output", a, h);
        tref n = nn_norm(g, bert_names.attn_norm, s, m->hidden, m->norm, m->norm_bias, 0);
        gen_pop(g);
        t_release(g, s);
        t_release(g, a);
        /* BertIntermediate, then BertOutput: LayerNorm(dropout(dense(.)) + attention_output) */
        tref f = tf_ffn(g, &cfg, n);
        tref s2 = nn_add(g, "output", f, n);
        tref out = nn_norm(g, bert_names.ffn_norm, s2, m->hidden, m->norm, m->norm_bias, 0);
        t_release(g, s2);
        t_release(g, f);
        t_release(g, n);
        t_release(g, h); /* the caller's hidden_states holds the layer's input until the layer returns */
        h = out;
        gen_pop(g);
    }
    return h;
}

/* The sequence-classification head on out (the pooled output with a pooler, else the last hidden
 * states): BertForSequenceClassification's dropout + classifier on the pooled output
 * (modeling_bert.py), or RobertaForSequenceClassification's RobertaClassificationHead on the first
 * token: dropout, dense, tanh, dropout, out_proj (modeling_roberta.py). Dropout: classifier_dropout,
 * which defaults to hidden_dropout_prob. A linear probe trains it. */
static tref classifier(struct gen *g, const struct model_spec *m, tref out)
{
    bool head = g->in_head;
    g->in_head = true;
    tref x = m->pooler ? t_ref(g, out) : tf_first_token(g, "classifier.first_token", out);
    tref d = nn_dropout(g, m->pooler ? "dropout" : "classifier.dropout", x, m->dropout);
    t_release(g, x);
    if (!m->pooler) {
        tref h = nn_linear(g, "classifier.dense", d, m->hidden, m->hidden, true);
        t_release(g, d);
        tref a = nn_act(g, "classifier.tanh", h, ACT_GELU_TANH); /* tanh's cost: a fused saved-input kernel */
        t_release(g, h);
        d = nn_dropout(g, "classifier.dropout", a, m->dropout);
        t_release(g, a);
    }
    tref logits = nn_linear(g, m->pooler ? "classifier" : "classifier.out_proj", d, m->hidden, m->num_labels, true);
    t_release(g, d);
    g->in_head = head;
    return logits;
}

tref encoder_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss)
{
    tref ids = tf_ids(g, bt->b, bt->s, m->vocab, "input_ids");
    tref types = m->type_vocab ? tf_ids(g, bt->b, bt->s, m->type_vocab, "token_type_ids") : TNONE;
    int64_t d1[1] = {bt->b};
    tref labels = loss ? nn_ids(g, d1, 1, m->num_labels ? m->num_labels : m->hidden, "labels") : TNONE;
    gen_hold(g, &g->step_held, t_ref(g, labels));
    gen_push(g, "embeddings");
    /* BertEmbeddings' parameters in module order; its forward takes them in another */
    int32_t pw = nn_embedding_param(g, "word_embeddings", m->vocab, m->hidden);
    int32_t pp = nn_embedding_param(g, "position_embeddings", m->max_positions, m->hidden);
    int32_t pt = m->type_vocab ? nn_embedding_param(g, "token_type_embeddings", m->type_vocab, m->hidden) : -1;
    tref we = nn_embedding(g, "word_embeddings", ids, m->vocab, m->hidden, pw);
    tref te = TNONE, s = t_ref(g, we);
    if (m->type_vocab) {
        te = nn_embedding(g, "token_type_embeddings", types, m->type_vocab, m->hidden, pt);
        t_release(g, s);
        s = nn_add(g, NULL, we, te);
    }
    /* position_ids: a view of the module's buffer [1, max_positions] */
    tref pos = g->mode == GEN_RUN ? nn_ids(g, (int64_t[2]){1, bt->s}, 2, m->max_positions, "position_ids") : TNONE;
    tref pe = nn_embedding(g, "position_embeddings", pos, m->max_positions, m->hidden, pp);
    tref s2 = nn_add(g, NULL, s, pe);
    t_release(g, s);
    tref n = nn_norm(g, "LayerNorm", s2, m->hidden, m->norm, m->norm_bias, 0);
    t_release(g, s2);
    tref x = nn_dropout(g, "dropout", n, m->dropout);
    t_release(g, n);
    t_release(g, we);
    t_release(g, te);
    t_release(g, pe);
    t_release(g, pos);
    gen_pop(g);
    tref mask = tf_mask(g, bt->b, bt->s, bt->s, false, m->attn == ATTN_EAGER,
                        g->mode == GEN_RUN ? (enum dtype)g->t[x].dtype : DT_F32);
    gen_push(g, "encoder");
    int every = tf_checkpoint_every(g, m->layers);
    for (int i = 0; i < m->layers; i += every) {
        struct ckpt c = {.fn = encoder_layers, .model = m, .layer = i,
                         .count = i + every <= m->layers ? every : m->layers - i, .extra = {mask, TNONE, TNONE, TNONE, TNONE}};
        tref y = nn_checkpoint(g, &c, x);
        t_release(g, x);
        x = y;
    }
    gen_pop(g);
    tref out = x;
    if (m->pooler) {
        tref first = tf_first_token(g, "pooler.first_token", x);
        bool head = g->in_head;
        g->in_head = !m->num_labels; /* the head of a BertModel; a classifier's body */
        tref p = nn_linear(g, "pooler.dense", first, m->hidden, m->hidden, true);
        g->in_head = head;
        out = nn_act(g, "pooler.activation", p, ACT_GELU_TANH);
        t_release(g, p);
        t_release(g, first);
        t_release(g, x);
    }
    t_release(g, mask);
    t_release(g, ids);
    t_release(g, types);
    if (m->num_labels) {
        tref logits = classifier(g, m, out);
        t_release(g, out);
        out = logits;
    }
    if (!loss) {
        t_release(g, labels);
        return out;
    }
    tref l = nn_cross_entropy(g, "loss", out, labels);
    t_release(g, out);
    t_release(g, labels);
    return l;
}
