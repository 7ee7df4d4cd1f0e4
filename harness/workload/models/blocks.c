/* blocks.c: transformer pieces shared by the decoder, encoder, T5, CLIP and ViT families, as transformers
 * writes them: the attention module (projections, rotary embedding, KV cache, core, output
 * projection), the feed-forward module (plain or gated), the pre-LayerNorm layer of CLIP and ViT,
 * token inputs, masks and the causal LM loss. The families compose them into layers with their own norms, residuals and lifetimes. */
#include "workload/models/models.h"
#include "workload/compiled_act.h"
#include "workload/parallel_tensor.h"

/* A projection output whose storage the module frees while autograd still names it (the attention
 * reads its shape, and routes its gradient to it): keep its identity, drop the reference. */
static void release_storage(struct gen *g, tref x)
{
    if (x == TNONE)
        return;
    g->t[x].holds++;
    t_release(g, x);
}

static void forget_identity(struct gen *g, tref x)
{
    if (x != TNONE)
        t_unhold(g, x);
}

tref tf_attention(struct gen *g, const struct tf_cfg *c, const struct tf_ctx *x, tref h, tref kv_src)
{
    const struct model_spec *m = c->m;
    const struct tf_names *nm = c->nm;
    int64_t hid = m->hidden, hd = m->head_dim, heads = m->heads, kvh = m->kv_heads;
    bool cross = c->cross, fused = c->fused_qkv && !cross;
    gen_push(g, "%s", nm->attn);
    tref q, k = TNONE, v = TNONE;
    bool qkv_bias = m->bias || m->qkv_bias;
    g->lora = LORA_FULL; /* LoRA on the query and value projections (PEFT's default targets) */
    h = cross ? t_ref(g, h) : tp_column_input(g, h); /* tensor parallel: q/k/v are column-parallel */
    if (fused) {
        q = nn_linear(g, nm->qkv, h, hid, (heads + 2 * kvh) * hd, qkv_bias);
    } else {
        tref src = cross ? kv_src : h;
        int64_t in = cross && g->mode == GEN_RUN ? g->t[src].dims[g->t[src].ndim - 1] : hid;
        q = nn_linear(g, nm->q, h, hid, heads * hd, qkv_bias);
        g->lora = LORA_NONE;
        k = nn_linear(g, nm->k, src, in, kvh * hd, qkv_bias);
        g->lora = LORA_FULL;
        v = nn_linear(g, nm->v, src, in, kvh * hd, qkv_bias);
    }
    t_release(g, h);
    g->lora = LORA_NONE;
    if (m->qk_norm && !cross) { /* Qwen3Attention: q_norm(q_proj(x).view(..., head_dim)), k likewise */
        tref qn = nn_norm(g, "q_norm", q, hd, m->norm, false, 0);
        tref kn = nn_norm(g, "k_norm", k, hd, m->norm, false, 0);
        t_release(g, q);
        t_release(g, k);
        q = qn;
        k = kn;
    }
    if (nm->core)
        gen_push(g, "%s", nm->core);
    bool rotary = m->pos == POS_ROTARY && !cross && g->mode == GEN_RUN;
    tref gone[2] = {TNONE, TNONE}; /* projections freed before the core runs */
    if (rotary) { /* apply_rotary_pos_emb: the projections' outputs die once both are rotated */
        tref qr = nn_rotary(g, NULL, q, heads, hd, x->cos, x->sin);
        tref kr = nn_rotary(g, NULL, k, kvh, hd, x->cos, x->sin);
        t_release(g, q);
        t_release(g, k);
        q = qr;
        k = kr;
    }
    tref cache = TNONE;
    if (c->cache && g->mode == GEN_RUN) {
        cache = fused ? nn_kv_cache(g, NULL, q, q, heads, kvh, hd) : nn_kv_cache(g, NULL, k, v, 0, kvh, hd);
        if (!fused) { /* key_states, value_states = cache.update(...): the cache's copies replace them */
            release_storage(g, k);
            release_storage(g, v);
            gone[0] = k;
            gone[1] = v;
        }
    }
    struct attn_args a = {
        .heads = heads, .kv_heads = kvh, .head_dim = hd, .causal = c->causal && !cross,
        .eager = m->attn == ATTN_EAGER, .dropout = c->attn_dropout, .scale = c->attn_scale,
        .bias = cross ? TNONE : x->bias, .mask = cross ? TNONE : x->mask, .cache = cache, .rotary = rotary,
        .scale_op = c->scale_op, .upcast_softmax = c->upcast_softmax, .softcap = cross ? 0 : m->attn_softcap,
    };
    tref ctx = nn_attention(g, NULL, q, k, v, &a);
    gen_hold(g, &g->forward_held, cache); /* the cache lives in the model's output */
    if (nm->core) { /* the core is its own module (BERT's BertSelfAttention): its projections die here */
        gen_pop(g);
        t_release(g, gone[0] == TNONE ? k : TNONE);
        t_release(g, gone[1] == TNONE ? v : TNONE);
        t_release(g, q);
        k = v = q = TNONE;
    }
    tref o = tp_row_output(g, nn_linear(g, nm->o, ctx, heads * hd, hid, m->bias));
    t_release(g, ctx);
    if (c->out_dropout > 0) {
        tref d = nn_dropout(g, nm->attn_drop, o, c->out_dropout);
        t_release(g, o);
        o = d;
    }
    if (gone[0] == TNONE)
        t_release(g, k);
    if (gone[1] == TNONE && !fused)
        t_release(g, v);
    t_release(g, q);
    forget_identity(g, gone[0]);
    forget_identity(g, gone[1]);
    gen_pop(g);
    return o;
}

tref tf_ffn(struct gen *g, const struct tf_cfg *c, tref h)
{
    const struct model_spec *m = c->m;
    const struct tf_names *nm = c->nm;
    int64_t hid = m->hidden, f = m->ffn;
    if (nm->ffn)
        gen_push(g, "%s", nm->ffn);
    h = tp_column_input(g, h); /* tensor parallel: gate and up are column-parallel, down row-parallel */
    tref act;
    if (m->ffn_kind == FFN_GATED && spec_has_fix(&g->spec, FIX_COMPILED_ACTIVATIONS) && compiled_gate_fuses(m->act)) {
        tref gate = nn_linear(g, nm->gate, h, hid, f, c->ffn_bias);
        tref up = nn_linear(g, nm->up, h, hid, f, c->ffn_bias);
        act = nn_gated_compiled(g, nm->act, gate, up, m->act);
        t_release(g, gate);
        t_release(g, up);
    } else if (m->ffn_kind == FFN_GATED) { /* act(gate(x)) * up(x) */
        tref gate = nn_linear(g, nm->gate, h, hid, f, c->ffn_bias);
        tref ga = nn_act(g, nm->act, gate, m->act);
        t_release(g, gate);
        tref up = nn_linear(g, nm->up, h, hid, f, c->ffn_bias);
        act = nn_mul(g, NULL, ga, up);
        t_release(g, ga);
        t_release(g, up);
    } else {
        tref up = nn_linear(g, nm->up, h, hid, f, c->ffn_bias);
        act = nn_act(g, nm->act, up, m->act);
        t_release(g, up);
    }
    t_release(g, h);
    if (c->inner_dropout > 0) { /* T5's dropout before wo */
        tref d = nn_dropout(g, "dropout", act, c->inner_dropout);
        t_release(g, act);
        act = d;
    }
    tref o = tp_row_output(g, nn_linear(g, nm->down, act, f, hid, c->ffn_bias));
    t_release(g, act);
    if (c->out_dropout > 0) {
        tref d = nn_dropout(g, nm->ffn_drop, o, c->out_dropout);
        t_release(g, o);
        o = d;
    }
    if (nm->ffn)
        gen_pop(g);
    return o;
}

tref tf_pre_ln_layer(struct gen *g, const struct tf_cfg *c, const struct tf_ctx *x, tref h)
{
    const struct model_spec *m = c->m;
    tref n1 = nn_norm(g, c->nm->attn_norm, h, m->hidden, m->norm, m->norm_bias, 0);
    tref a = tf_attention(g, c, x, n1, TNONE);
    t_release(g, n1);
    tref r1 = nn_add(g, NULL, h, a);
    t_release(g, h);
    t_release(g, a);
    tref n2 = nn_norm(g, c->nm->ffn_norm, r1, m->hidden, m->norm, m->norm_bias, 0);
    tref f = tf_ffn(g, c, n2);
    t_release(g, n2);
    tref out = nn_add(g, NULL, r1, f);
    t_release(g, r1);
    t_release(g, f);
    return out;
}

tref tf_first_token(struct gen *g, const char *name, tref x)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const struct tensor *t = &g->t[x];
    int64_t b = t->dims[0], s = t->dims[1], h = t->dims[2], d[2] = {b, h};
    return nn_slice(g, name, x, d, 2, b, h, s * h, 0);
}

int tf_checkpoint_every(const struct gen *g, int layers)
{
    return g->checkpointing ? gradient_checkpointing_params(&g->spec).every : layers;
}

bool tf_use_cache(const struct gen *g)
{
    return g->spec.use_cache && !g->checkpointing;
}

tref tf_ids(struct gen *g, int64_t b, int64_t s, int64_t high, const char *leaf)
{
    int64_t d[2] = {b, s};
    tref x = nn_ids(g, d, 2, high, leaf);
    gen_hold(g, &g->step_held, t_ref(g, x));
    return x;
}

tref tf_position_ids(struct gen *g, int64_t s, int64_t high)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    /* torch.arange(S) + past_seen_tokens, unsqueezed: the arange is freed, the sum kept */
    const char *tag = gen_tag(g, NULL);
    int64_t d[2] = {1, s};
    tref r = t_new(g, d, 2, DT_I64, CAT_ACTIVATION, tag);
    tref p = t_new(g, d, 2, DT_I64, CAT_ACTIVATION, tag);
    kern_init_ids(g, p, high, tag);
    t_release(g, r);
    return p;
}

tref tf_mask(struct gen *g, int64_t b, int64_t s, int64_t sk, bool causal, bool eager, enum dtype dt)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    bool padding = g->spec.padding;
    if (!padding && !(causal && eager))
        return TNONE;
    const char *tag = gen_tag(g, NULL);
    /* sdpa_mask: the mask function broadcast over [B or 1, 1, S, Sk] (batch only with a padding mask) */
    int64_t bd[4] = {padding ? b : 1, 1, s, sk}, fd[4] = {b, 1, s, sk};
    tref bmask = t_new(g, bd, 4, DT_U8, CAT_ACTIVATION, tag); /* all true: no kernel reads its values */
    if (!eager)
        return bmask;
    /* eager_mask: torch.where(mask, 0, finfo(dtype).min), an additive [B, 1, S, Sk] tensor; the values
     * are 0 (no key is padded: the causal part is the attention kernel's flag) */
    tref mask = t_new(g, fd, 4, dt, CAT_ACTIVATION, tag);
    kern_fill(g, mask, 0.0f, tag);
    t_release(g, bmask);
    return mask;
}

tref tf_lm_loss(struct gen *g, tref logits, tref labels)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    gen_push(g, "loss");
    /* ForCausalLMLoss (loss_utils.py): logits.float() returns the tensor itself when it is fp32 */
    tref up = nn_as_dtype(g, "float", logits, DT_F32);
    /* labels = pad(labels, (0, 1), value=-100); shift_labels = labels[..., 1:].contiguous() */
    int64_t b = g->t[labels].dims[0], s = g->t[labels].dims[1], padded[2] = {b, s + 1}, shifted[2] = {b, s};
    const char *tag = gen_tag(g, NULL);
    tref pad = t_new(g, padded, 2, DT_I64, CAT_ACTIVATION, tag);
    tref shift = t_new(g, shifted, 2, DT_I64, CAT_ACTIVATION, tag);
    kern_init_ids(g, shift, g->t[logits].dims[g->t[logits].ndim - 1], tag); /* seeded ids, as the batch's */
    gen_pop(g);
    tref loss = nn_cross_entropy(g, "loss", up, shift);
    t_release(g, pad); /* the function's local, until it returns */
    t_release(g, up);
    t_release(g, shift);
    return loss;
}
