/* cnn.c: a small convolutional classifier: per level `layers_per_block` conv3x3 + GroupNorm + ReLU
 * (the first conv of each level after the first strides by 2), global average pool, linear head. */
#include "workload/models/models.h"

tref cnn_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss)
{
    int64_t d[4] = {bt->b, m->in_channels, bt->image, bt->image};
    tref x = nn_input(g, d, 4, g->act_dtype, "images");
    int64_t cin = m->in_channels;
    for (int i = 0; i < m->nlevels; i++) {
        for (int j = 0; j < m->layers_per_block; j++) {
            gen_push(g, "stages.%d.%d", i, j);
            tref c = nn_conv(g, "conv", x, cin, m->channels[i], 3, i > 0 && j == 0 ? 2 : 1, m->bias);
            t_release(g, x);
            tref n = nn_norm(g, "norm", c, m->channels[i], NORM_GROUPNORM, true, m->groups);
            t_release(g, c);
            x = nn_act(g, "act", n, ACT_RELU);
            t_release(g, n);
            gen_pop(g);
            cin = m->channels[i];
        }
    }
    int64_t pd[2] = {bt->b, cin};
    int64_t over_pixels[3] = {bt->b * cin, g->mode == GEN_RUN ? t_numel(g, x) / (bt->b * cin) : 1, 1};
    tref pooled = g->mode == GEN_RUN ? nn_mean(g, "pool", x, over_pixels, pd, 2) : TNONE;
    t_release(g, x);
    g->in_head = true;
    tref out = nn_linear(g, "fc", pooled, cin, m->out_channels, true);
    g->in_head = false;
    t_release(g, pooled);
    if (!loss)
        return out;
    int64_t ld[1] = {bt->b};
    tref labels = nn_ids(g, ld, 1, m->out_channels, "labels");
    tref l = nn_cross_entropy(g, "loss", out, labels);
    t_release(g, out);
    t_release(g, labels);
    return l;
}
