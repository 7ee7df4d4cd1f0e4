/* conv_blocks.c: diffusers ResnetBlock2D, Transformer2DModel / BasicTransformerBlock and the VAE's
 * mid-block attention, as nn_* calls; image tensors are [B, C, H, W], token tensors [B, HW, C]. */
#include "workload/models/conv_blocks.h"
#include "workload/diffusion_job.h"

tref conv_resnet(struct gen *g, const char *name, tref x, int64_t cin, int64_t cout, tref temb, int64_t temb_dim,
                 int64_t groups)
{
    gen_push(g, "%s", name);
    tref n1 = nn_norm(g, "norm1", x, cin, NORM_GROUPNORM, true, groups);
    tref a1 = nn_act(g, "nonlinearity", n1, ACT_SILU);
    t_release(g, n1);
    tref h = nn_conv(g, "conv1", a1, cin, cout, 3, 1, true);
    t_release(g, a1);
    if (temb_dim) {
        tref ta = nn_act(g, "nonlinearity", temb, ACT_SILU);
        tref tp = nn_linear(g, "time_emb_proj", ta, temb_dim, cout, true);
        t_release(g, ta);
        tref s = nn_add(g, "time_add", h, tp);
        t_release(g, h);
        t_release(g, tp);
        h = s;
    }
    tref n2 = nn_norm(g, "norm2", h, cout, NORM_GROUPNORM, true, groups);
    t_release(g, h);
    tref a2 = nn_act(g, "nonlinearity", n2, ACT_SILU);
    t_release(g, n2);
    tref h2 = nn_conv(g, "conv2", a2, cout, cout, 3, 1, true);
    t_release(g, a2);
    tref skip = cin != cout ? nn_conv(g, "conv_shortcut", x, cin, cout, 1, 1, true) : t_ref(g, x);
    tref out = nn_add(g, "residual", skip, h2);
    t_release(g, skip);
    t_release(g, h2);
    gen_pop(g);
    return out;
}

static tref to_tokens(struct gen *g, tref x, const char *name)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    struct tensor *t = T(g, x);
    int64_t d[3] = {t->dims[0], t->dims[2] * t->dims[3], t->dims[1]};
    return nn_transpose(g, name, x, d[0], d[2], d[1], d, 3);
}

static tref to_image(struct gen *g, tref x, tref like, const char *name)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    int64_t d[4];
    for (int i = 0; i < 4; i++)
        d[i] = T(g, like)->dims[i];
    return nn_transpose(g, name, x, d[0], d[2] * d[3], d[1], d, 4);
}

static tref attention(struct gen *g, const char *name, tref x, tref ctx, int64_t c, int64_t ctx_dim, int64_t heads,
                      bool bias, bool eager)
{
    gen_push(g, "%s", name);
    tref q = nn_linear(g, "to_q", x, c, c, bias);
    tref src = ctx != TNONE || ctx_dim ? ctx : x;
    int64_t sd = ctx_dim ? ctx_dim : c;
    tref kv = nn_linear(g, "to_kv", src, sd, 2 * c, bias); /* to_k and to_v fused */
    struct attn_args a = {.heads = heads, .kv_heads = heads, .head_dim = c / heads, .eager = eager, .bias = TNONE,
                          .mask = TNONE, .cache = TNONE, .scale_op = eager};
    tref o = g->attn_slice ? nn_sliced_attention(g, "core", q, kv, heads, c / heads) /* enable_attention_slicing */
                           : nn_attention(g, "core", q, kv, kv, &a);
    t_release(g, q);
    t_release(g, kv);
    tref out = nn_linear(g, "to_out.0", o, c, c, true);
    t_release(g, o);
    gen_pop(g);
    return out;
}

static tref residual(struct gen *g, tref x, tref y)
{
    tref r = nn_add(g, "residual", x, y);
    t_release(g, y);
    return r;
}

tref conv_transformer(struct gen *g, const char *name, tref x, int64_t c, int64_t heads, int depth, tref context,
                      int64_t context_dim, int64_t groups, bool eager)
{
    gen_push(g, "%s", name);
    tref n = nn_norm(g, "norm", x, c, NORM_GROUPNORM, true, groups);
    tref tok = to_tokens(g, n, "to_tokens");
    t_release(g, n);
    tref h = nn_linear(g, "proj_in", tok, c, c, true);
    t_release(g, tok);
    for (int d = 0; d < depth; d++) {
        gen_push(g, "transformer_blocks.%d", d);
        tref n1 = nn_norm(g, "norm1", h, c, NORM_LAYERNORM, true, 0);
        tref a1 = attention(g, "attn1", n1, TNONE, c, 0, heads, false, eager);
        t_release(g, n1);
        tref h1 = residual(g, h, a1);
        t_release(g, h);
        tref n2 = nn_norm(g, "norm2", h1, c, NORM_LAYERNORM, true, 0);
        tref a2 = attention(g, "attn2", n2, context, c, context_dim, heads, false, eager);
        t_release(g, n2);
        tref h2 = residual(g, h1, a2);
        t_release(g, h1);
        tref n3 = nn_norm(g, "norm3", h2, c, NORM_LAYERNORM, true, 0);
        tref p = nn_linear(g, "ff.net.0.proj", n3, c, 8 * c, true);
        t_release(g, n3);
        tref gl = nn_glu(g, "ff.net.0", p, ACT_GELU);
        t_release(g, p);
        tref f = nn_linear(g, "ff.net.2", gl, 4 * c, c, true);
        t_release(g, gl);
        h = residual(g, h2, f);
        t_release(g, h2);
        gen_pop(g);
    }
    tref po = nn_linear(g, "proj_out", h, c, c, true);
    t_release(g, h);
    tref img = to_image(g, po, x, "to_image");
    t_release(g, po);
    tref out = residual(g, x, img);
    gen_pop(g);
    return out;
}

tref conv_vae_attention(struct gen *g, const char *name, tref x, int64_t c, int64_t groups, bool eager)
{
    gen_push(g, "%s", name);
    tref n = nn_norm(g, "group_norm", x, c, NORM_GROUPNORM, true, groups);
    tref tok = to_tokens(g, n, "to_tokens");
    t_release(g, n);
    gen_pop(g);
    tref a = attention(g, name, tok, TNONE, c, 0, 1, true, eager);
    t_release(g, tok);
    tref img = to_image(g, a, x, "to_image");
    t_release(g, a);
    return residual(g, x, img);
}
