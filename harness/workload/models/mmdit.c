/* mmdit.c: diffusers' MMDiT transformers as a model family. FluxTransformer2DModel (Flux.1,
 * transformer_flux.py; model.patch_size 0): packed
 * 2x2 latent patches embedded by x_embedder, the text encoder's states by context_embedder, the
 * timestep (and, guidance-distilled, the guidance) embedders plus the pooled text projection summed
 * into one conditioning vector; `layers` double-stream blocks (FluxTransformerBlock: separate
 * AdaLayerNormZero modulation, projections and feed-forwards for image and text tokens, one joint
 * attention over both with RMSNorm on q and k and rotary embedding), the streams concatenated, then
 * `single_layers` single-stream blocks (FluxSingleTransformerBlock: attention and a 4x MLP in parallel,
 * concatenated into proj_out); the text tokens dropped, AdaLayerNormContinuous and proj_out. Training
 * loss: the flow-matching MSE of the prediction against its target (train_dreambooth_lora_flux.py).
 * SD3Transformer2DModel (transformer_sd3.py; model.patch_size 2): PatchEmbed (a convolution of kernel
 * and stride patch_size over the latents, plus the position table cropped from a persistent buffer),
 * no guidance embedder, JointTransformerBlocks (attention.py) as Flux's double blocks without rotary
 * embedding, image tokens before text ones, the last block context_pre_only (AdaLayerNormContinuous
 * on the text, which then ends), no single blocks, and the output unpatchified (one copy).
 *
 * LoRA goes where diffusers' LoRA scripts put it by default: Flux's (train_dreambooth_lora_flux.py)
 * on attn.to_q, to_k, to_v and to_out.0 (the single blocks' attention has no to_out), SD3's
 * (train_dreambooth_lora_sd3.py) on the text stream's add_q/k/v_proj and to_add_out too. PyTorch views are copies here: the six
 * (three, two) modulation chunks each a [B, 1, D] slice (standing for the view and the `1 + scale`
 * it feeds, a tensor of that size), and the split of the joint attention's output into its text and
 * image rows. A checkpointed segment of double blocks carries its two streams out as one
 * concatenation (a checkpoint node has one output), sliced apart again by the next segment. */
#include "workload/models/models.h"

/* What one forward's blocks share. */
struct mmdit_ctx {
    tref temb;      /* conditioning vector [B, D] */
    tref cos, sin;  /* rotary tables over text + image tokens */
};

/* act(temb) -> linear -> n chunks of [B, 1, D] (AdaLayerNormZero: 6, ...Single: 3, ...Continuous: 2). */
static void modulation(struct gen *g, const struct model_spec *m, const char *name, tref temb, int n, tref *chunk)
{
    int64_t d = m->hidden;
    gen_push(g, "%s", name);
    tref a = nn_act(g, "silu", temb, ACT_SILU);
    tref emb = nn_linear(g, "linear", a, d, n * d, true);
    t_release(g, a);
    for (int i = 0; i < n; i++) {
        chunk[i] = TNONE;
        if (g->mode != GEN_RUN)
            continue;
        int64_t b = g->t[emb].dims[0], dims[3] = {b, 1, d};
        chunk[i] = nn_slice(g, "chunk", emb, dims, 3, b, d, n * d, i * d);
    }
    t_release(g, emb);
    gen_pop(g);
}

/* norm(x) * (1 + scale) + shift, the norm a LayerNorm without affine parameters. */
static tref modulate(struct gen *g, const struct model_spec *m, const char *norm, tref x, tref scale, tref shift)
{
    char name[64];
    tref n = nn_layernorm_plain(g, norm, x, m->hidden);
    tref s = nn_mul(g, gen_dotted(name, sizeof name, norm, "scale"), n, scale);
    t_release(g, n);
    tref y = nn_add(g, gen_dotted(name, sizeof name, norm, "shift"), s, shift);
    t_release(g, s);
    return y;
}

/* residual + gate * y (`name`: the gate's variable in diffusers) */
static tref gated_residual(struct gen *g, const char *name, tref residual, tref gate, tref y)
{
    char res[64];
    tref gy = nn_mul(g, name, y, gate);
    tref out = nn_add(g, gen_dotted(res, sizeof res, name, "residual"), residual, gy);
    t_release(g, gy);
    return out;
}

static tref projection(struct gen *g, const char *name, tref x, int64_t in, int64_t out, bool lora)
{
    g->lora = lora ? LORA_FULL : LORA_NONE;
    tref y = nn_linear(g, name, x, in, out, true);
    g->lora = LORA_NONE;
    return y;
}

/* The text stream's projections (add_*_proj, to_add_out) have LoRA in SD3's recipe, not in Flux's. */
static bool lora_on(const struct model_spec *m, bool added)
{
    return !added || m->patch_size;
}

/* q, k, v of one stream with RMSNorm over each head of q and k (Attention qk_norm="rms_norm"). */
static void qkv(struct gen *g, const struct model_spec *m, tref x, bool added, tref *q, tref *k, tref *v)
{
    int64_t d = m->hidden, inner = (int64_t)m->heads * m->head_dim;
    bool lora = lora_on(m, added);
    *q = projection(g, added ? "add_q_proj" : "to_q", x, d, inner, lora);
    *k = projection(g, added ? "add_k_proj" : "to_k", x, d, inner, lora);
    *v = projection(g, added ? "add_v_proj" : "to_v", x, d, inner, lora);
    if (!m->qk_norm)
        return;
    tref qn = nn_rmsnorm_diffusers(g, added ? "norm_added_q" : "norm_q", *q, m->head_dim);
    t_release(g, *q);
    *q = qn;
    tref kn = nn_rmsnorm_diffusers(g, added ? "norm_added_k" : "norm_k", *k, m->head_dim);
    t_release(g, *k);
    *k = kn;
}

static tref joined(struct gen *g, tref txt, tref img)
{
    if (txt == TNONE)
        return img;
    tref j = nn_concat(g, "cat", txt, img);
    t_release(g, txt);
    t_release(g, img);
    return j;
}

/* rotary embedding on q and k (Flux), then SDPA (FluxAttnProcessor2_0, JointAttnProcessor2_0) */
static tref joint_attention(struct gen *g, const struct model_spec *m, const struct mmdit_ctx *x, tref q, tref k,
                            tref v)
{
    bool rotary = x->cos != TNONE;
    tref qr = rotary ? nn_rotary_fp32(g, NULL, q, m->heads, m->head_dim, x->cos, x->sin) : t_ref(g, q);
    tref kr = rotary ? nn_rotary_fp32(g, NULL, k, m->heads, m->head_dim, x->cos, x->sin) : t_ref(g, k);
    t_release(g, q);
    t_release(g, k);
    struct attn_args a = {.heads = m->heads, .kv_heads = m->heads, .head_dim = m->head_dim,
                          .eager = m->attn == ATTN_EAGER, .rotary = rotary, .bias = TNONE, .mask = TNONE,
                          .cache = TNONE};
    tref o = nn_attention(g, NULL, qr, kr, v, &a);
    t_release(g, qr);
    t_release(g, kr);
    t_release(g, v);
    return o;
}

/* tokens [from, from + n) of x [B, S, D] */
static tref rows(struct gen *g, const char *name, tref x, int64_t from, int64_t n)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    int64_t b = g->t[x].dims[0], s = g->t[x].dims[1], d = g->t[x].dims[2], dims[3] = {b, n, d};
    return nn_slice(g, name, x, dims, 3, b, n * d, s * d, from * d);
}

/* FeedForward(activation_fn="gelu-approximate"): net.0.proj, tanh GELU, net.2 (its dropout p=0 is a no-op) */
static tref feed_forward(struct gen *g, const struct model_spec *m, const char *name, tref x)
{
    gen_push(g, "%s", name);
    tref up = nn_linear(g, "net.0.proj", x, m->hidden, m->ffn, true);
    tref a = nn_act(g, "net.0", up, ACT_GELU_TANH);
    t_release(g, up);
    tref y = nn_linear(g, "net.2", a, m->ffn, m->hidden, true);
    t_release(g, a);
    gen_pop(g);
    return y;
}

/* The second half of a double block for one stream: x + gate_msa * attn, then + gate_mlp * ff(mod(norm2)). */
static tref stream_out(struct gen *g, const struct model_spec *m, tref x, tref attn, const tref *c, bool context)
{
    tref h = gated_residual(g, context ? "c_gate_msa" : "gate_msa", x, c[2], attn);
    tref n = modulate(g, m, context ? "norm2_context" : "norm2", h, c[4], c[3]);
    tref f = feed_forward(g, m, context ? "ff_context" : "ff", n);
    t_release(g, n);
    tref out = gated_residual(g, context ? "c_gate_mlp" : "gate_mlp", h, c[5], f);
    t_release(g, f);
    t_release(g, h);
    return out;
}

/* FluxTransformerBlock / JointTransformerBlock; *img and *txt are replaced by the block's outputs (*txt by
 * TNONE after a context_pre_only block). Chunks: shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp,
 * gate_mlp; a context_pre_only block's text norm is AdaLayerNormContinuous (scale, shift). Flux puts the
 * text tokens first in the joint attention, SD3 the image tokens. */
static void double_block(struct gen *g, const struct model_spec *m, const struct mmdit_ctx *x, tref *img, tref *txt,
                         bool pre_only)
{
    tref ci[6], cc[6];
    int nc_chunks = pre_only ? 2 : 6;
    modulation(g, m, "norm1", x->temb, 6, ci);
    modulation(g, m, "norm1_context", x->temb, nc_chunks, cc);
    tref ni = modulate(g, m, "norm1.norm", *img, ci[1], ci[0]);
    tref nc = pre_only ? modulate(g, m, "norm1_context.norm", *txt, cc[0], cc[1])
                       : modulate(g, m, "norm1_context.norm", *txt, cc[1], cc[0]);
    gen_push(g, "attn");
    tref q, k, v, aq, ak, av;
    qkv(g, m, ni, false, &q, &k, &v);
    qkv(g, m, nc, true, &aq, &ak, &av);
    t_release(g, ni);
    t_release(g, nc);
    bool flux = !m->patch_size;
    int64_t t = g->mode == GEN_RUN ? g->t[*txt].dims[1] : 0, s = g->mode == GEN_RUN ? g->t[*img].dims[1] : 0;
    tref o = flux ? joint_attention(g, m, x, joined(g, aq, q), joined(g, ak, k), joined(g, av, v))
                  : joint_attention(g, m, x, joined(g, q, aq), joined(g, k, ak), joined(g, v, av));
    tref ot = pre_only ? TNONE : rows(g, "split", o, flux ? 0 : s, t), oi = rows(g, "split", o, flux ? t : 0, s);
    t_release(g, o);
    int64_t inner = (int64_t)m->heads * m->head_dim;
    tref ai = projection(g, "to_out.0", oi, inner, m->hidden, true);
    t_release(g, oi);
    tref at = pre_only ? TNONE : projection(g, "to_add_out", ot, inner, m->hidden, lora_on(m, true));
    t_release(g, ot);
    gen_pop(g);
    tref yi = stream_out(g, m, *img, ai, ci, false);
    t_release(g, ai);
    tref yt = pre_only ? TNONE : stream_out(g, m, *txt, at, cc, true);
    t_release(g, at);
    for (int i = 0; i < 6; i++)
        t_release(g, ci[i]);
    for (int i = 0; i < nc_chunks; i++)
        t_release(g, cc[i]);
    t_release(g, *img);
    t_release(g, *txt);
    *img = yi;
    *txt = yt;
}

static struct mmdit_ctx ctx_of(const struct ckpt *c)
{
    return (struct mmdit_ctx){.temb = c->extra[1], .cos = c->extra[2], .sin = c->extra[3]};
}

/* A segment of double blocks: x the image stream, extra[0] the text stream; returns cat(text, image), or
 * the image stream alone once the text has ended (SD3's last block). */
static tref double_layers(struct gen *g, const struct ckpt *c, tref x)
{
    const struct model_spec *m = c->model;
    struct mmdit_ctx ctx = ctx_of(c);
    tref img = t_ref(g, x), txt = t_ref(g, c->extra[0]);
    for (int i = c->layer; i < c->layer + c->count; i++) {
        gen_push(g, "transformer_blocks.%d", i);
        double_block(g, m, &ctx, &img, &txt, m->patch_size && i == m->layers - 1);
        gen_pop(g);
    }
    return joined(g, txt, img);
}

/* FluxSingleTransformerBlock over the joint stream: chunks shift, scale, gate. */
static tref single_layers(struct gen *g, const struct ckpt *c, tref x)
{
    const struct model_spec *m = c->model;
    struct mmdit_ctx ctx = ctx_of(c);
    int64_t d = m->hidden, inner = (int64_t)m->heads * m->head_dim;
    tref h = t_ref(g, x);
    for (int i = c->layer; i < c->layer + c->count; i++) {
        gen_push(g, "single_transformer_blocks.%d", i);
        tref ch[3];
        modulation(g, m, "norm", ctx.temb, 3, ch);
        tref n = modulate(g, m, "norm.norm", h, ch[1], ch[0]);
        tref up = nn_linear(g, "proj_mlp", n, d, m->ffn, true);
        tref mlp = nn_act(g, "act_mlp", up, ACT_GELU_TANH);
        t_release(g, up);
        gen_push(g, "attn");
        tref q, k, v;
        qkv(g, m, n, false, &q, &k, &v);
        tref a = joint_attention(g, m, &ctx, q, k, v);
        gen_pop(g);
        t_release(g, n);
        tref cat = nn_concat_last(g, "cat", a, mlp);
        t_release(g, a);
        t_release(g, mlp);
        tref p = nn_linear(g, "proj_out", cat, inner + m->ffn, d, true);
        t_release(g, cat);
        tref out = gated_residual(g, "gate", h, ch[2], p);
        t_release(g, p);
        for (int j = 0; j < 3; j++)
            t_release(g, ch[j]);
        t_release(g, h);
        h = out;
        gen_pop(g);
    }
    return h;
}

/* TimestepEmbedding (linear_1, SiLU, linear_2) of a sinusoidal projection, or PixArtAlphaTextProjection
 * of the pooled text embedding (the same shape of module, named the same). */
static tref embedder(struct gen *g, const struct model_spec *m, const char *name, const char *act, tref in,
                     int64_t width)
{
    gen_push(g, "%s", name);
    tref h = nn_linear(g, "linear_1", in, width, m->hidden, true);
    tref a = nn_act(g, act, h, ACT_SILU);
    t_release(g, h);
    tref y = nn_linear(g, "linear_2", a, m->hidden, m->hidden, true);
    t_release(g, a);
    gen_pop(g);
    return y;
}

/* time_text_embed: timestep (+ guidance) embedding + pooled text projection. diffusers' Timesteps makes
 * the 256-wide sinusoidal projections (fp32, cast to the embedder's dtype): inputs here. */
static tref time_text_embed(struct gen *g, const struct model_spec *m, const struct batch *bt, enum dtype dt)
{
    enum { TIME_PROJ = 256 }; /* CombinedTimestep...Embeddings: Timesteps(num_channels=256) */
    int64_t td[2] = {bt->b, TIME_PROJ}, pd[2] = {bt->b, m->pooled_dim};
    gen_push(g, "time_text_embed");
    tref tp = nn_input(g, td, 2, dt, "timesteps_proj");
    tref temb = embedder(g, m, "timestep_embedder", "act", tp, TIME_PROJ);
    t_release(g, tp);
    if (m->guidance_embed) {
        tref gp = nn_input(g, td, 2, dt, "guidance_proj");
        tref gemb = embedder(g, m, "guidance_embedder", "act", gp, TIME_PROJ);
        t_release(g, gp);
        tref s = nn_add(g, NULL, temb, gemb);
        t_release(g, temb);
        t_release(g, gemb);
        temb = s;
    }
    tref pooled = g->pooled_override != TNONE ? t_ref(g, g->pooled_override) : nn_input(g, pd, 2, dt, "pooled_projections");
    tref pemb = embedder(g, m, "text_embedder", "act_1", pooled, m->pooled_dim);
    t_release(g, pooled);
    tref c = nn_add(g, NULL, temb, pemb);
    t_release(g, temb);
    t_release(g, pemb);
    gen_pop(g);
    return c;
}

/* SD3's PatchEmbed: proj (kernel = stride = patch_size), flatten(2).transpose(1, 2) (a view, read by the
 * add: a copy here), + the position table cropped from the pos_embed buffer to the latent's side. */
static tref patch_embed(struct gen *g, const struct model_spec *m, tref x, int64_t side)
{
    int64_t d = m->hidden, pm = m->pos_embed_max;
    gen_push(g, "pos_embed");
    tref c = nn_conv(g, "proj", x, m->in_channels, d, m->patch_size, m->patch_size, true);
    if (g->mode != GEN_RUN) {
        param_add_buffer(g, "pos_embed", pm * pm, d);
        gen_pop(g);
        return TNONE;
    }
    int32_t pb = param_take(g, "pos_embed");
    int64_t b = g->t[c].dims[0], s = side * side, dims[3] = {b, s, d}, pd[3] = {1, s, d}, top = (pm - side) / 2;
    tref tok = nn_transpose(g, "flatten", c, b, d, s, dims, 3);
    t_release(g, c);
    /* cropped_pos_embed: side x side from the centre of the pm x pm table (the rows taken from the table's
     * top: a copy's offset stays within its row, the bytes are the same) */
    tref pos = nn_slice(g, "cropped_pos_embed", g->params[pb].data, pd, 3, side, side * d, pm * d, top * d);
    tref y = nn_add(g, NULL, tok, pos);
    t_release(g, tok);
    t_release(g, pos);
    gen_pop(g);
    return y;
}

static tref run_stack(struct gen *g, const struct model_spec *m, layer_fn fn, int layers, tref x,
                      const tref *extra)
{
    int every = tf_checkpoint_every(g, layers);
    for (int i = 0; i < layers; i += every) {
        struct ckpt c = {.fn = fn, .model = m, .layer = i, .count = i + every <= layers ? every : layers - i,
                         .extra = {extra[0], extra[1], extra[2], extra[3], TNONE}};
        tref y = nn_checkpoint(g, &c, x);
        t_release(g, x);
        x = y;
    }
    return x;
}

/* The double-stream stack: each segment returns cat(text, image); between segments the streams are
 * sliced apart again. */
static tref double_stack(struct gen *g, const struct model_spec *m, tref img, tref txt, int64_t t,
                         const struct mmdit_ctx *x)
{
    int every = tf_checkpoint_every(g, m->layers);
    tref joint = TNONE;
    for (int i = 0; i < m->layers; i += every) {
        if (joint != TNONE) {
            int64_t s = g->t[joint].dims[1] - t;
            txt = rows(g, "txt", joint, 0, t);
            img = rows(g, "img", joint, t, s);
            t_release(g, joint);
        }
        struct ckpt c = {.fn = double_layers, .model = m, .layer = i,
                         .count = i + every <= m->layers ? every : m->layers - i,
                         .extra = {txt, x->temb, x->cos, x->sin, TNONE}};
        joint = nn_checkpoint(g, &c, img);
        t_release(g, img);
        t_release(g, txt);
    }
    return joint;
}

tref mmdit_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss)
{
    enum dtype dt = g->act_dtype;
    bool flux = !m->patch_size;
    int64_t lat = bt->image / m->vae_scale, p = flux ? 2 : m->patch_size, side = lat / p, s = side * side;
    int64_t t = bt->context, out_ch = flux ? m->in_channels : p * p * m->in_channels;
    /* Flux: the pipeline's packed latents [B, S, in_channels]; SD3: the latents [B, C, H, W] */
    int64_t xd[4] = {bt->b, flux ? s : m->in_channels, flux ? m->in_channels : lat, lat};
    int64_t cd[3] = {bt->b, t, m->cross_attention_dim};
    int nd = flux ? 3 : 4;
    tref x = nn_input(g, xd, nd, dt, flux ? "packed_noisy_latents" : "noisy_latents");
    tref target = loss ? nn_input(g, xd, nd, dt, "target") : TNONE;
    tref ctx = g->ctx_override != TNONE ? t_ref(g, g->ctx_override) : nn_input(g, cd, 3, dt, "encoder_hidden_states");
    if (g->mode == GEN_RUN)
        t = g->t[ctx].dims[1]; /* SD3's text encoders on the device: CLIP's tokens, then T5's */
    tref img = flux ? nn_linear(g, "x_embedder", x, m->in_channels, m->hidden, true) : patch_embed(g, m, x, side);
    t_release(g, x);
    struct mmdit_ctx mc = {.temb = time_text_embed(g, m, bt, dt), .cos = TNONE, .sin = TNONE};
    tref txt = nn_linear(g, "context_embedder", ctx, m->cross_attention_dim, m->hidden, true);
    t_release(g, ctx);
    if (flux) {
        gen_push(g, "pos_embed"); /* FluxPosEmbed over the text and image ids, in fp32 */
        nn_rotary_tables(g, t + s, m->head_dim, DT_F32, &mc.cos, &mc.sin);
        gen_pop(g);
    }
    tref h = double_stack(g, m, img, txt, t, &mc);
    if (flux) {
        tref extra[4] = {TNONE, mc.temb, mc.cos, mc.sin};
        tref joint = run_stack(g, m, single_layers, m->single_layers, h, extra);
        h = rows(g, "image_tokens", joint, t, s);
        t_release(g, joint);
    }
    tref c[2];
    modulation(g, m, "norm_out", mc.temb, 2, c); /* AdaLayerNormContinuous: scale, then shift */
    tref n = modulate(g, m, "norm_out.norm", h, c[0], c[1]);
    t_release(g, h);
    t_release(g, c[0]);
    t_release(g, c[1]);
    g->in_head = true;
    tref out = nn_linear(g, "proj_out", n, m->hidden, out_ch, true);
    g->in_head = false;
    t_release(g, n);
    t_release(g, mc.temb);
    t_release(g, mc.cos);
    t_release(g, mc.sin);
    if (!flux && g->mode == GEN_RUN) { /* unpatchify: reshape, einsum nhwpqc->nchpwq, reshape */
        tref u = nn_transpose(g, "unpatchify", out, bt->b, s, out_ch, xd, 4);
        t_release(g, out);
        out = u;
    }
    if (!loss || g->mode != GEN_RUN)
        return out;
    /* (model_pred.float() - target.float()) ** 2, mean */
    tref pf = nn_as_dtype(g, "loss.float", out, DT_F32);
    t_release(g, out);
    tref tf = nn_as_dtype(g, "loss.target_float", target, DT_F32);
    t_release(g, target);
    return mse_loss(g, pf, tf);
}
