/* vae.c: diffusers AutoencoderKL: encoder (conv_in, DownEncoderBlock2D x levels, mid block with one
 * attention, GN + conv_out to 2x latent channels), quant_conv, post_quant_conv (both absent with
 * model.no_quant_conv: diffusers' use_quant_conv / use_post_quant_conv false, Flux's VAE), decoder (conv_in,
 * mid block, UpDecoderBlock2D x levels with nearest upsampling, GN + conv_out). Training: encode,
 * decode, MSE reconstruction loss. */
#include "workload/models/conv_blocks.h"

static tref mid_block(struct gen *g, const struct model_spec *m, tref h, int64_t c)
{
    gen_push(g, "mid_block");
    tref r0 = conv_resnet(g, "resnets.0", h, c, c, TNONE, 0, m->groups);
    tref a = conv_vae_attention(g, "attentions.0", r0, c, m->groups, m->attn == ATTN_EAGER);
    t_release(g, r0);
    tref r1 = conv_resnet(g, "resnets.1", a, c, c, TNONE, 0, m->groups);
    t_release(g, a);
    gen_pop(g);
    return r1;
}

static tref norm_out(struct gen *g, const struct model_spec *m, tref h, int64_t c, int64_t cout)
{
    tref n = nn_norm(g, "conv_norm_out", h, c, NORM_GROUPNORM, true, m->groups);
    tref a = nn_act(g, "conv_act", n, ACT_SILU);
    t_release(g, n);
    tref o = nn_conv(g, "conv_out", a, c, cout, 3, 1, true);
    t_release(g, a);
    return o;
}

tref vae_encode(struct gen *g, const struct model_spec *m, tref images)
{
    gen_push(g, "encoder");
    int64_t c0 = m->channels[0], cin = c0;
    tref h = nn_conv(g, "conv_in", images, m->in_channels, c0, 3, 1, true);
    for (int i = 0; i < m->nlevels; i++) {
        int64_t c = m->channels[i];
        gen_push(g, "down_blocks.%d", i);
        for (int j = 0; j < m->layers_per_block; j++) {
            char name[32];
            snprintf(name, sizeof name, "resnets.%d", j);
            tref r = conv_resnet(g, name, h, j == 0 ? cin : c, c, TNONE, 0, m->groups);
            t_release(g, h);
            h = r;
        }
        if (i < m->nlevels - 1) {
            tref d = nn_conv(g, "downsamplers.0.conv", h, c, c, 3, 2, true);
            t_release(g, h);
            h = d;
        }
        gen_pop(g);
        cin = c;
    }
    int64_t cl = m->channels[m->nlevels - 1];
    tref mid = mid_block(g, m, h, cl);
    t_release(g, h);
    tref moments = norm_out(g, m, mid, cl, 2 * m->latent_channels);
    t_release(g, mid);
    gen_pop(g);
    tref q = moments;
    if (!m->no_quant_conv) {
        q = nn_conv(g, "quant_conv", moments, 2 * m->latent_channels, 2 * m->latent_channels, 1, 1, true);
        t_release(g, moments);
    }
    if (g->mode != GEN_RUN)
        return TNONE;
    int64_t d[4] = {T(g, q)->dims[0], m->latent_channels, T(g, q)->dims[2], T(g, q)->dims[3]};
    int64_t len = d[1] * d[2] * d[3];
    tref z = nn_slice(g, "latent_dist.sample", q, d, 4, d[0], len, 2 * len, 0); /* the mean half */
    t_release(g, q);
    return z;
}

tref vae_decode(struct gen *g, const struct model_spec *m, tref latents)
{
    tref z = m->no_quant_conv ? t_ref(g, latents)
                              : nn_conv(g, "post_quant_conv", latents, m->latent_channels, m->latent_channels, 1, 1, true);
    gen_push(g, "decoder");
    int64_t cl = m->channels[m->nlevels - 1];
    tref h = nn_conv(g, "conv_in", z, m->latent_channels, cl, 3, 1, true);
    t_release(g, z);
    tref mid = mid_block(g, m, h, cl);
    t_release(g, h);
    h = mid;
    int64_t prev = cl;
    for (int i = 0; i < m->nlevels; i++) {
        int64_t c = m->channels[m->nlevels - 1 - i];
        gen_push(g, "up_blocks.%d", i);
        for (int j = 0; j <= m->layers_per_block; j++) {
            char name[32];
            snprintf(name, sizeof name, "resnets.%d", j);
            tref r = conv_resnet(g, name, h, j == 0 ? prev : c, c, TNONE, 0, m->groups);
            t_release(g, h);
            h = r;
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
    g->in_head = true;
    tref out = norm_out(g, m, h, m->channels[0], m->in_channels);
    g->in_head = false;
    t_release(g, h);
    gen_pop(g);
    return out;
}

tref vae_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss)
{
    int64_t d[4] = {bt->b, m->in_channels, bt->image, bt->image};
    tref img = nn_input(g, d, 4, g->act_dtype, "pixel_values");
    tref z = vae_encode(g, m, img);
    tref out = vae_decode(g, m, z);
    t_release(g, z);
    if (!loss) {
        t_release(g, img);
        return out;
    }
    return mse_loss(g, out, img);
}
