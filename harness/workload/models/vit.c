/* vit.c: vision transformers as transformers writes them, on images [B, C, H, W]:
 * - ViTModel / ViTForImageClassification (models/vit/modeling_vit.py): patch embedding as a Conv2d(C,
 *   hidden, kernel = stride = patch_size) with bias, flattened and transposed to [B, N, hidden]; the
 *   class token concatenated before it and the learned position embeddings (1 + N rows, a bare
 *   parameter) added; dropout; pre-LayerNorm ViTLayers; the final `layernorm`; then ViTModel's pooler
 *   (dense + tanh on the class token) or ViTForImageClassification's `classifier` on the class token
 *   (num_labels outputs, cross-entropy), under `vit.` as transformers names the classification model.
 * - CLIPVisionModel / WithProjection (models/clip/modeling_clip.py, CLIPVisionEmbeddings and
 *   CLIPVisionTransformer): the patch conv without bias, `class_embedding` concatenated, position
 *   embeddings looked up from an nn.Embedding by the position_ids buffer, `pre_layrnorm`, CLIPEncoderLayers,
 *   `post_layernorm` on the class token, and `visual_projection` (projection_dim, no bias).
 * Without a classifier the training loss is a parameter-free cross-entropy on the pooled output, as the
 * encoder family's, so the model keeps the base class's exact count. Positions are fixed by the model
 * (max_positions = 1 + (image_size / patch_size)^2 of its config): another image size would need
 * interpolate_pos_encoding, which is not modelled. */
#include "workload/models/models.h"

static const struct tf_names vit_names = {
    .attn = "attention", .q = "attention.query", .k = "attention.key", .v = "attention.value", .core = "attention",
    .o = "output.dense", .attn_drop = "output.dropout", .attn_norm = "layernorm_before",
    .up = "intermediate.dense", .act = "intermediate.intermediate_act_fn", .down = "output.dense",
    .ffn_drop = "output.dropout", .ffn_norm = "layernorm_after",
};

static bool is_clip(const struct model_spec *m)
{
    return m->family == FAMILY_CLIP_VISION;
}

/* ViTLayer / CLIPEncoderLayer: no mask, no causality. Both eager_attention_forward functions scale the
 * scores by a separate multiply and take the softmax in fp32 (softmax(..., dtype=torch.float32).to(dtype)). */
static tref vit_layers(struct gen *g, const struct ckpt *c, tref x)
{
    const struct model_spec *m = c->model;
    bool clip = is_clip(m);
    struct tf_cfg cfg = {.m = m, .nm = clip ? &tf_clip_names : &vit_names, .scale_op = true, .upcast_softmax = true,
                         .ffn_bias = m->bias, .attn_dropout = m->dropout, .out_dropout = clip ? 0 : m->dropout};
    struct tf_ctx ctx = {.mask = TNONE, .bias = TNONE, .cos = TNONE, .sin = TNONE};
    tref h = t_ref(g, x);
    for (int i = c->layer; i < c->layer + c->count; i++) {
        gen_push(g, clip ? "layers.%d" : "layer.%d", i);
        h = tf_pre_ln_layer(g, &cfg, &ctx, h);
        gen_pop(g);
    }
    return h;
}

/* The embeddings: [B, 1 + N, hidden]. Parameters in the modules' order (the bare parameters of
 * ViTEmbeddings before its patch_embeddings submodule; CLIP's class_embedding first). */
static tref embeddings(struct gen *g, const struct model_spec *m, const struct batch *bt)
{
    bool clip = is_clip(m);
    int64_t hid = m->hidden, n = m->max_positions - 1;
    const char *cls = clip ? "class_embedding" : "cls_token";
    tref images = TNONE, pos = TNONE;
    if (g->mode == GEN_RUN) {
        int64_t d[4] = {bt->b, m->in_channels, bt->image, bt->image};
        images = nn_input(g, d, 4, g->act_dtype, "pixel_values");
        gen_hold(g, &g->step_held, t_ref(g, images));
        if (clip) /* the position_ids buffer [1, num_positions] */
            pos = nn_ids(g, (int64_t[2]){1, m->max_positions}, 2, m->max_positions, "position_ids");
    }
    gen_push(g, "embeddings");
    if (g->mode == GEN_PARAMS) {
        nn_param_prepend(g, cls, TNONE, hid);
        if (!clip)
            nn_param_add(g, "position_embeddings", TNONE, m->max_positions, hid);
    }
    int p = m->patch_size;
    tref c = nn_conv_pad(g, clip ? "patch_embedding" : "patch_embeddings.projection", images, m->in_channels, hid, p,
                         p, 0, !clip);
    t_release(g, images);
    tref x = TNONE;
    if (g->mode == GEN_RUN) {
        /* .flatten(2).transpose(1, 2): a view that the concatenation reads; a tensor here, freed at once */
        int64_t td[3] = {bt->b, n, hid};
        tref tokens = nn_transpose(g, clip ? "patch_embedding" : "patch_embeddings", c, bt->b, hid, n, td, 3);
        t_release(g, c);
        x = nn_param_prepend(g, cls, tokens, hid);
        t_release(g, tokens);
    }
    tref e;
    if (clip) {
        tref pe = nn_embedding(g, "position_embedding", pos, m->max_positions, hid, -1);
        e = nn_add(g, NULL, x, pe);
        t_release(g, pe);
        t_release(g, pos);
    } else {
        e = g->mode == GEN_RUN ? nn_param_add(g, "position_embeddings", x, m->max_positions, hid) : TNONE;
    }
    t_release(g, x);
    tref out = nn_dropout(g, "dropout", e, clip ? 0 : m->dropout);
    t_release(g, e);
    gen_pop(g);
    return out;
}

/* A head layer: trained under a linear probe. */
static tref head_linear(struct gen *g, const char *name, tref x, int64_t in, int64_t out, bool bias)
{
    bool head = g->in_head;
    g->in_head = true;
    tref y = nn_linear(g, name, x, in, out, bias);
    g->in_head = head;
    return y;
}

tref vit_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss)
{
    bool clip = is_clip(m), classifier = !clip && m->num_labels > 0;
    int64_t b = bt->b, hid = m->hidden;
    /* the batch's class labels, over the output's width */
    int64_t classes = classifier ? m->num_labels : clip && m->projection_dim ? m->projection_dim : hid;
    tref labels = loss ? nn_ids(g, (int64_t[1]){b}, 1, classes, "labels") : TNONE;
    gen_hold(g, &g->step_held, t_ref(g, labels));
    if (clip)
        gen_push(g, "vision_model");
    else if (classifier)
        gen_push(g, "vit");
    tref x = embeddings(g, m, bt);
    if (clip) {
        tref n = nn_norm(g, "pre_layrnorm", x, hid, m->norm, m->norm_bias, 0);
        t_release(g, x);
        x = n;
    }
    gen_push(g, "encoder");
    int every = tf_checkpoint_every(g, m->layers);
    for (int i = 0; i < m->layers; i += every) {
        struct ckpt c = {.fn = vit_layers, .model = m, .layer = i,
                         .count = i + every <= m->layers ? every : m->layers - i,
                         .extra = {TNONE, TNONE, TNONE, TNONE, TNONE}};
        tref y = nn_checkpoint(g, &c, x);
        t_release(g, x);
        x = y;
    }
    gen_pop(g);
    tref out;
    if (clip) { /* pooled_output = post_layernorm(last_hidden_state[:, 0, :]) */
        tref first = tf_first_token(g, "post_layernorm", x);
        t_release(g, x);
        out = nn_norm(g, "post_layernorm", first, hid, m->norm, m->norm_bias, 0);
        t_release(g, first);
        gen_pop(g);
        if (m->projection_dim) {
            tref p = head_linear(g, "visual_projection", out, hid, m->projection_dim, false);
            t_release(g, out);
            out = p;
        }
    } else {
        tref seq = nn_norm(g, "layernorm", x, hid, m->norm, m->norm_bias, 0);
        t_release(g, x);
        tref first = tf_first_token(g, classifier ? "classifier" : m->pooler ? "pooler" : "loss", seq);
        t_release(g, seq);
        if (classifier) { /* logits = classifier(sequence_output[:, 0, :]); no pooler (add_pooling_layer=False) */
            gen_pop(g);
            out = head_linear(g, "classifier", first, hid, m->num_labels, true);
            t_release(g, first);
        } else if (m->pooler) { /* ViTPooler: dense + tanh (pooler_act) on the class token */
            tref p = head_linear(g, "pooler.dense", first, hid, hid, true);
            t_release(g, first);
            out = nn_act(g, "pooler.activation", p, ACT_GELU_TANH); /* tanh's cost: a fused saved-input kernel */
            t_release(g, p);
        } else {
            out = first;
        }
    }
    if (!loss)
        return out;
    tref l = nn_cross_entropy(g, "loss", out, labels);
    t_release(g, out);
    t_release(g, labels);
    return l;
}
