/* unet.c: diffusers UNet2DConditionModel (SD 1.x, SDXL): conv_in, sinusoidal time embedding MLP,
 * SDXL's text-time add-embedding, down blocks (resnets, optional transformers, downsamplers), a
 * cross-attention mid block, up blocks fed by skip connections, GroupNorm + conv_out. Training loss:
 * MSE between predicted and true noise. */
#include "workload/models/conv_blocks.h"

#define MAX_SKIPS 32

struct unet_run {
    const struct model_spec *m;
    tref temb, ctx;
    bool eager;
    tref skips[MAX_SKIPS];
    int64_t skip_ch[MAX_SKIPS];
    int nskips;
};

static void push_skip(struct gen *g, struct unet_run *u, tref x, int64_t c)
{
    if (u->nskips < MAX_SKIPS) {
        u->skips[u->nskips] = t_ref(g, x);
        u->skip_ch[u->nskips++] = c;
    }
}

static tref concat(struct gen *g, tref x, tref skip)
{
    return g->mode == GEN_RUN ? nn_concat(g, "cat", x, skip) : TNONE;
}

static tref level_attention(struct gen *g, struct unet_run *u, tref x, int level, int j, int64_t c, int depth)
{
    if (!depth)
        return x;
    const struct model_spec *m = u->m;
    char name[32];
    snprintf(name, sizeof name, "attentions.%d", j);
    tref y = conv_transformer(g, name, x, c, m->attn_heads[level], depth, u->ctx, m->cross_attention_dim, m->groups,
                              u->eager);
    t_release(g, x);
    return y;
}

tref unet_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss)
{
    struct unet_run u = {.m = m, .eager = m->attn == ATTN_EAGER};
    int64_t lat = bt->image / m->vae_scale, lat_w = (g->image_w ? g->image_w : bt->image) / m->vae_scale;
    int64_t c0 = m->channels[0], temb_dim = 4 * c0;
    int64_t xd[4] = {bt->b, m->latent_channels, lat, lat_w}, cd[3] = {bt->b, bt->context, m->cross_attention_dim};
    enum dtype dt = g->act_dtype;
    tref x = nn_input(g, xd, 4, dt, "noisy_latents");
    tref noise = loss ? nn_input(g, xd, 4, dt, "noise") : TNONE;
    u.ctx = g->ctx_override != TNONE ? t_ref(g, g->ctx_override) : nn_input(g, cd, 3, dt, "encoder_hidden_states");
    int64_t td[2] = {bt->b, m->time_embed_input};
    tref tproj = nn_input(g, td, 2, dt, "time_proj");
    tref t1 = nn_linear(g, "time_embedding.linear_1", tproj, m->time_embed_input, temb_dim, true);
    t_release(g, tproj);
    tref ta = nn_act(g, "time_embedding.act", t1, ACT_SILU);
    t_release(g, t1);
    u.temb = nn_linear(g, "time_embedding.linear_2", ta, temb_dim, temb_dim, true);
    t_release(g, ta);
    if (m->add_time_embed_dim) {
        int64_t ad[2] = {bt->b, m->add_embed_input};
        tref add_in = nn_input(g, ad, 2, dt, "add_time_proj");
        tref a1 = nn_linear(g, "add_embedding.linear_1", add_in, m->add_embed_input, temb_dim, true);
        t_release(g, add_in);
        tref aa = nn_act(g, "add_embedding.act", a1, ACT_SILU);
        t_release(g, a1);
        tref a2 = nn_linear(g, "add_embedding.linear_2", aa, temb_dim, temb_dim, true);
        t_release(g, aa);
        tref s = nn_add(g, "add_embedding.sum", u.temb, a2);
        t_release(g, u.temb);
        t_release(g, a2);
        u.temb = s;
    }
    tref h = nn_conv(g, "conv_in", x, m->latent_channels, c0, 3, 1, true);
    push_skip(g, &u, h, c0);
    int64_t cin = c0;
    for (int i = 0; i < m->nlevels; i++) {
        int64_t c = m->channels[i];
        gen_push(g, "down_blocks.%d", i);
        for (int j = 0; j < m->layers_per_block; j++) {
            char name[32];
            snprintf(name, sizeof name, "resnets.%d", j);
            tref r = conv_resnet(g, name, h, j == 0 ? cin : c, c, u.temb, temb_dim, m->groups);
            t_release(g, h);
            h = level_attention(g, &u, r, i, j, c, m->transformer_depth[i]);
            push_skip(g, &u, h, c);
        }
        if (i < m->nlevels - 1) {
            tref dn = nn_conv(g, "downsamplers.0.conv", h, c, c, 3, 2, true);
            t_release(g, h);
            h = dn;
            push_skip(g, &u, h, c);
        }
        gen_pop(g);
        cin = c;
    }
    int64_t cl = m->channels[m->nlevels - 1];
    gen_push(g, "mid_block");
    tref r0 = conv_resnet(g, "resnets.0", h, cl, cl, u.temb, temb_dim, m->groups);
    t_release(g, h);
    h = level_attention(g, &u, r0, m->nlevels - 1, 0, cl, m->mid_transformer_depth);
    tref r1 = conv_resnet(g, "resnets.1", h, cl, cl, u.temb, temb_dim, m->groups);
    t_release(g, h);
    h = r1;
    gen_pop(g);
    int64_t prev = cl;
    for (int i = 0; i < m->nlevels; i++) {
        int lvl = m->nlevels - 1 - i;
        int64_t c = m->channels[lvl];
        gen_push(g, "up_blocks.%d", i);
        for (int j = 0; j <= m->layers_per_block; j++) {
            u.nskips--;
            tref skip = u.skips[u.nskips];
            int64_t sc = u.skip_ch[u.nskips];
            tref cat = concat(g, h, skip);
            t_release(g, skip);
            t_release(g, h);
            char name[32];
            snprintf(name, sizeof name, "resnets.%d", j);
            tref r = conv_resnet(g, name, cat, (j == 0 ? prev : c) + sc, c, u.temb, temb_dim, m->groups);
            t_release(g, cat);
            h = level_attention(g, &u, r, lvl, j, c, m->transformer_depth[lvl]);
        }
        if (i < m->nlevels - 1) {
            tref up = nn_upsample(g, "upsamplers.0", h);
            t_release(g, h);
            h = nn_conv(g, "upsamplers.0.conv", up, c, c, 3, 1, true);
            t_release(g, up);
        }
        gen_pop(g);
        prev = c;
    }
    tref n = nn_norm(g, "conv_norm_out", h, c0, NORM_GROUPNORM, true, m->groups);
    t_release(g, h);
    tref a = nn_act(g, "conv_act", n, ACT_SILU);
    t_release(g, n);
    g->in_head = true;
    tref out = nn_conv(g, "conv_out", a, c0, m->latent_channels, 3, 1, true);
    g->in_head = false;
    t_release(g, a);
    t_release(g, u.temb);
    t_release(g, u.ctx);
    t_release(g, x);
    if (!loss)
        return out;
    return mse_loss(g, out, noise);
}
