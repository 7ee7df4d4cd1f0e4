/* clip_text.c: CLIP text encoders (CLIPTextModel / WithProjection): token + learned position
 * embeddings, pre-LayerNorm blocks with quick_gelu MLPs and a causal mask, final LayerNorm and an
 * optional text projection. Used mostly as a frozen extra beside a UNet. */
#include "workload/models/models.h"

const struct tf_names tf_clip_names = {
    .attn = "self_attn", .q = "q_proj", .k = "k_proj", .v = "v_proj", .o = "out_proj",
    .attn_norm = "layer_norm1", .ffn = "mlp", .up = "fc1", .act = "activation_fn", .down = "fc2",
    .ffn_norm = "layer_norm2",
};

/* CLIPEncoderLayer: x + self_attn(layer_norm1(x)), then + mlp(layer_norm2(.)); extra[0] = the mask */
static tref clip_layers(struct gen *g, const struct ckpt *c, tref x)
{
    const struct model_spec *m = c->model;
    struct tf_cfg cfg = {.m = m, .nm = &tf_clip_names, .causal = true, .scale_op = true, .ffn_bias = m->bias,
                         .attn_dropout = m->dropout};
    struct tf_ctx ctx = {.mask = c->extra[0], .bias = TNONE, .cos = TNONE, .sin = TNONE};
    tref h = t_ref(g, x);
    for (int i = c->layer; i < c->layer + c->count; i++) {
        gen_push(g, "layers.%d", i);
        h = tf_pre_ln_layer(g, &cfg, &ctx, h);
        gen_pop(g);
    }
    return h;
}

tref clip_text_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss)
{
    int64_t s = bt->context ? bt->context : m->max_positions;
    tref ids = tf_ids(g, bt->b, s, m->vocab, "input_ids");
    tref pos = g->mode == GEN_RUN ? nn_ids(g, (int64_t[2]){1, s}, 2, m->max_positions, "position_ids") : TNONE;
    gen_push(g, "text_model");
    gen_push(g, "embeddings");
    tref x = nn_embedding(g, "token_embedding", ids, m->vocab, m->hidden, -1);
    tref pe = nn_embedding(g, "position_embedding", pos, m->max_positions, m->hidden, -1);
    tref h = nn_add(g, "sum", x, pe);
    t_release(g, x);
    t_release(g, pe);
    gen_pop(g);
    tref mask = tf_mask(g, bt->b, s, s, true, m->attn == ATTN_EAGER,
                        g->mode == GEN_RUN ? (enum dtype)g->t[h].dtype : DT_F32);
    gen_push(g, "encoder");
    struct ckpt c = {.fn = clip_layers, .model = m, .layer = 0, .count = m->layers, .extra = {mask, TNONE, TNONE, TNONE, TNONE}};
    tref y = nn_checkpoint(g, &c, h);
    t_release(g, h);
    gen_pop(g);
    t_release(g, mask);
    tref out = nn_norm(g, "final_layer_norm", y, m->hidden, m->norm, m->norm_bias, 0);
    t_release(g, y);
    gen_pop(g);
    if (m->projection_dim) {
        tref p = nn_linear(g, "text_projection", out, m->hidden, m->projection_dim, false);
        t_release(g, out);
        out = p;
    }
    t_release(g, ids);
    t_release(g, pos);
    if (!loss)
        return out;
    int64_t d[2] = {bt->b, s};
    tref labels = g->mode == GEN_RUN ? nn_ids(g, d, 2, T(g, out)->dims[2], "labels") : TNONE;
    tref l = nn_cross_entropy(g, "loss", out, labels);
    t_release(g, out);
    t_release(g, labels);
    return l;
}
