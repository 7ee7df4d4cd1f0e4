/* taesd.c: diffusers' AutoencoderTiny (autoencoders/autoencoder_tiny.py, EncoderTiny / DecoderTiny and
 * AutoencoderTinyBlock in autoencoders/vae.py) with the config of madebyollin/taesd and taesdxl (same
 * shapes): 64 channels per level, encoder blocks (1, 3, 3, 3), decoder blocks (3, 3, 3, 1), ReLU,
 * 4 latent channels, nearest 2x upsampling. Parameters: the encoder's conv_in 3->64 (1,792), three
 * stride-2 convs without bias (3 x 36,864), ten blocks (10 x 110,784) and conv_out 64->4 (2,308):
 * 1,222,532; the decoder's conv_in 4->64 (2,368), ten blocks, three bias-free convs after the
 * upsamplers and conv_out 64->3 (1,731): 1,222,531. */
#include "workload/diffusion_job.h"
#include "workload/models/models.h"

#define TAESD_CH 64
static const int enc_blocks[4] = {1, 3, 3, 3}, dec_blocks[4] = {3, 3, 3, 1};

/* AutoencoderTinyBlock(64, 64): fuse(conv(x) + skip(x)), conv = conv3x3, ReLU, conv3x3, ReLU, conv3x3;
 * skip is the identity (same channels), fuse a ReLU. */
static tref tiny_block(struct gen *g, int index, tref x)
{
    gen_push(g, "layers.%d", index);
    tref h = x != TNONE ? t_ref(g, x) : TNONE;
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "conv.%d", 2 * i);
        tref c = nn_conv(g, name, h, TAESD_CH, TAESD_CH, 3, 1, true);
        t_release(g, h);
        h = c;
        if (i < 2) {
            tref a = nn_act(g, "act", h, ACT_RELU);
            t_release(g, h);
            h = a;
        }
    }
    tref s = nn_add(g, "skip", h, x);
    t_release(g, h);
    tref y = nn_act(g, "fuse", s, ACT_RELU);
    t_release(g, s);
    gen_pop(g);
    return y;
}

static tref conv_at(struct gen *g, int index, tref x, int64_t cin, int64_t cout, int stride, bool bias)
{
    char name[24];
    snprintf(name, sizeof name, "layers.%d", index);
    tref y = nn_conv(g, name, x, cin, cout, 3, stride, bias);
    t_release(g, x);
    return y;
}

static tref blocks(struct gen *g, int *index, int n, tref h)
{
    for (int j = 0; j < n; j++) {
        tref y = tiny_block(g, (*index)++, h);
        t_release(g, h);
        h = y;
    }
    return h;
}

/* EncoderTiny: registered so the load holds its weights (pipe.to moves the whole model); never run. */
static void encoder(struct gen *g)
{
    int index = 0;
    gen_push(g, "encoder");
    for (int i = 0; i < 4; i++) {
        tref h = conv_at(g, index++, TNONE, i == 0 ? 3 : TAESD_CH, TAESD_CH, i == 0 ? 1 : 2, i == 0);
        blocks(g, &index, enc_blocks[i], h);
    }
    conv_at(g, index, TNONE, TAESD_CH, 4, 1, true);
    gen_pop(g);
}

/* DecoderTiny.forward: torch.tanh(x / 3) * 3, the layers, then x.mul(2).sub(1). */
static tref decoder(struct gen *g, tref z)
{
    gen_push(g, "decoder");
    tref h = TNONE;
    if (z != TNONE) { /* the clamp: tanh is not in the kernel table; its latent-sized output is written
                       * by a scale (the bytes are tanh's, the values are not) */
        tref a = nn_scale(g, "clamp.div", z, 1.0f / 3.0f);
        tref t = nn_scale(g, "clamp.tanh", a, 1.0f);
        t_release(g, a);
        h = nn_scale(g, "clamp.mul", t, 3.0f);
        t_release(g, t);
    }
    int index = 0;
    h = conv_at(g, index++, h, 4, TAESD_CH, 1, true);
    tref a = nn_act(g, "act", h, ACT_RELU);
    t_release(g, h);
    h = a;
    index++; /* layers.1 is the activation */
    for (int i = 0; i < 4; i++) {
        bool last = i == 3;
        h = blocks(g, &index, dec_blocks[i], h);
        if (!last) {
            char name[24];
            snprintf(name, sizeof name, "layers.%d", index++);
            tref u = nn_upsample(g, name, h);
            t_release(g, h);
            h = u;
        }
        h = conv_at(g, index++, h, TAESD_CH, last ? 3 : TAESD_CH, 1, last);
    }
    tref m = nn_scale(g, "mul", h, 2.0f);
    t_release(g, h);
    tref out = nn_scale(g, "sub", m, 1.0f); /* .sub(1): no scalar-add kernel; its bytes, not its values */
    t_release(g, m);
    gen_pop(g);
    return out;
}

void taesd_register(struct gen *g)
{
    encoder(g);
    decoder(g, TNONE);
}

tref taesd_decode(struct gen *g, tref latents)
{
    return decoder(g, latents);
}
