/* mlp.c: a plain multi-layer perceptron (Linear + activation per hidden layer, linear head,
 * cross-entropy over mlp_out classes). */
#include "workload/models/models.h"

tref mlp_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss)
{
    int64_t d[2] = {bt->b, m->mlp_in};
    tref x = nn_input(g, d, 2, g->act_dtype, "features");
    int64_t in = m->mlp_in;
    for (int i = 0; i < m->mlp_depth; i++) {
        gen_push(g, "layers.%d", i);
        tref h = nn_linear(g, "linear", x, in, m->mlp_hidden[i], m->bias);
        t_release(g, x);
        x = nn_act(g, "act", h, m->act);
        t_release(g, h);
        tref dr = nn_dropout(g, "dropout", x, m->dropout);
        t_release(g, x);
        x = dr;
        gen_pop(g);
        in = m->mlp_hidden[i];
    }
    g->in_head = true;
    tref out = nn_linear(g, "head", x, in, m->mlp_out, m->bias);
    g->in_head = false;
    t_release(g, x);
    if (!loss)
        return out;
    int64_t ld[1] = {bt->b};
    tref labels = nn_ids(g, ld, 1, m->mlp_out, "labels");
    tref l = nn_cross_entropy(g, "loss", out, labels);
    t_release(g, out);
    t_release(g, labels);
    return l;
}
