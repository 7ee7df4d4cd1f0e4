/* blocks.c: transformer pieces shared by the decoder, encoder, T5 and CLIP families: the attention
 * and feed-forward sub-blocks (pre- or post-norm, fused or separate QKV, eager or SDPA, GQA,
 * rotary, gated FFNs), token inputs, masks and the LM loss. */
#include "workload/models/models.h"

tref tf_attention(struct gen *g, const struct tf_cfg *c, tref x, tref kv, tref bias, int64_t kv_dim)
{
    const struct model_spec *m = c->m;
    const struct tf_names *nm = c->nm;
    int64_t h = m->hidden, hd = m->head_dim, heads = m->heads, kvh = m->kv_heads;
    bool cross = kv_dim > 0;
    tref in = c->post_norm ? t_ref(g, x) : nn_norm(g, nm->attn_norm, x, h, m->norm, m->norm_bias, 0);
    gen_push(g, "%s", nm->attn);
    tref q, kvp = TNONE;
    g->lora = LORA_FULL;
    if (c->fused_qkv && !cross) {
        q = nn_linear(g, nm->qkv, in, h, (heads + 2 * kvh) * hd, m->bias);
    } else { /* q, and k and v as one fused projection (kernels.h's packed k/v layout) */
        q = nn_linear(g, nm->q, in, h, heads * hd, m->bias);
        g->lora = LORA_SECOND_HALF; /* LoRA on v, not k */
        kvp = nn_linear(g, nm->kv, cross ? kv : in, cross ? kv_dim : h, 2 * kvh * hd, m->bias);
    }
    g->lora = LORA_NONE;
    struct attn_args a = {
        .heads = heads, .kv_heads = kvh, .head_dim = hd, .causal = c->causal && !cross,
        .eager = m->attn == ATTN_EAGER, .dropout = c->attn_dropout, .scale = c->attn_scale, .bias = bias,
        .rotary = m->pos == POS_ROTARY && !cross, .fused_qkv = c->fused_qkv && !cross,
        .scale_op = c->scale_op, .upcast_softmax = c->upcast_softmax,
    };
    tref ctx = nn_attention(g, "core", q, kvp, &a);
    t_release(g, q);
    t_release(g, kvp);
    tref o = nn_linear(g, nm->o, ctx, heads * hd, h, m->bias);
    t_release(g, ctx);
    gen_pop(g);
    tref d = nn_dropout(g, "dropout", o, c->dropout);
    t_release(g, o);
    tref r = nn_add(g, "residual", x, d);
    t_release(g, d);
    t_release(g, in);
    if (c->post_norm) {
        gen_push(g, "%s", nm->attn);
        tref n = nn_norm(g, nm->attn_norm, r, h, m->norm, m->norm_bias, 0);
        gen_pop(g);
        t_release(g, r);
        return n;
    }
    return r;
}

tref tf_ffn(struct gen *g, const struct tf_cfg *c, tref x)
{
    const struct model_spec *m = c->m;
    const struct tf_names *nm = c->nm;
    int64_t h = m->hidden, f = m->ffn;
    tref in = c->post_norm ? t_ref(g, x) : nn_norm(g, nm->ffn_norm, x, h, m->norm, m->norm_bias, 0);
    if (nm->ffn)
        gen_push(g, "%s", nm->ffn);
    tref hid;
    if (m->ffn_kind == FFN_GATED) {
        tref gate = nn_linear(g, nm->gate, in, h, f, c->ffn_bias);
        tref up = nn_linear(g, nm->up, in, h, f, c->ffn_bias);
        tref act = nn_act(g, "act", gate, m->act);
        t_release(g, gate);
        hid = nn_mul(g, "gate_mul", act, up);
        t_release(g, act);
        t_release(g, up);
    } else {
        tref up = nn_linear(g, nm->up, in, h, f, c->ffn_bias);
        hid = nn_act(g, "act", up, m->act);
        t_release(g, up);
    }
    tref hd = nn_dropout(g, "dropout", hid, m->ffn_kind == FFN_GATED ? c->dropout : 0);
    t_release(g, hid);
    tref o = nn_linear(g, nm->down, hd, f, h, c->ffn_bias);
    t_release(g, hd);
    if (nm->ffn)
        gen_pop(g);
    tref d = nn_dropout(g, "dropout", o, c->dropout);
    t_release(g, o);
    tref r = nn_add(g, "residual", x, d);
    t_release(g, d);
    t_release(g, in);
    if (c->post_norm) {
        tref n = nn_norm(g, nm->ffn_norm, r, h, m->norm, m->norm_bias, 0);
        t_release(g, r);
        return n;
    }
    return r;
}

int tf_checkpoint_every(const struct gen *g, int layers)
{
    return g->checkpointing ? gradient_checkpointing_params(&g->spec).every : layers;
}

tref tf_ids(struct gen *g, int64_t b, int64_t s, int64_t high, const char *leaf)
{
    int64_t d[2] = {b, s};
    return nn_ids(g, d, 2, high, leaf);
}

tref tf_mask(struct gen *g, int64_t b, int64_t s, bool causal, enum dtype dt)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    int64_t d[4] = {b, 1, causal ? s : 1, s};
    tref mk = t_new(g, d, 4, dt, CAT_ACTIVATION, gen_intern(g, "attention_mask"));
    kern_fill(g, mk, 0.0f, gen_intern(g, "attention_mask"));
    return mk;
}

tref tf_lm_loss(struct gen *g, tref logits, tref labels)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    tref up = nn_cast(g, "logits.float", logits, DT_F32);
    tref loss = nn_cross_entropy(g, "loss", up, labels);
    t_release(g, up);
    return loss;
}

tref tf_layer_stack(struct gen *g, const struct tf_cfg *cfg, const struct ckpt *c, tref x, const char *name_fmt)
{
    tref h = t_ref(g, x);
    for (int i = c->layer; i < c->layer + c->count; i++) {
        gen_push(g, name_fmt, i);
        tref a = tf_attention(g, cfg, h, TNONE, c->extra[0], 0);
        t_release(g, h);
        h = tf_ffn(g, cfg, a);
        t_release(g, a);
        gen_pop(g);
    }
    return h;
}
