/* dora.c: PEFT's DoRA (LoraConfig use_dora: weight-decomposed LoRA) on a float linear layer. Sources:
 * peft/tuners/lora/layer.py (Linear.forward: x cast to the adapters' dtype, then the variant's forward),
 * variants.py (DoraLinearVariant: with lora_dropout an Identity, base_result is the base layer's output)
 * and dora.py (DoraLinearLayer). A trainable magnitude vector [out] per adapted linear, initialised by
 * update_layer to the row norms of W + scaling * (lora_B @ lora_A); each forward:
 *     x_eye = eye(in); lora_weight = lora_B(lora_A(x_eye)).T            (all kept to the return)
 *     weight = W.to(x.dtype); weight_norm = ||weight + scaling * lora_weight||_row, detached
 *     mag_norm_scale = magnitude / weight_norm        (saves weight_norm for the magnitude's gradient)
 *     result_dora = (mag_norm_scale - 1) * base_result + mag_norm_scale * lora_B(lora_A(x)) * scaling
 * The norm's graph is dead (lora_weight.detach()), so the eye path runs unrecorded. Two products save
 * full-size tensors plain LoRA does not: base_result and lora_B's output. oomlab computes
 * 1 / weight_norm with K_ROW_NORM and multiplies (the same [out] tensors as norm then div); the
 * scalar "- 1" goes through a one-element temporary PyTorch does not allocate (a wrapped number). */
#include "workload/gen.h"

static float scaling(const struct gen *g)
{
    return g->spec.lora.alpha / (float)g->spec.lora_rank;
}

void dora_register(struct gen *g, int64_t out)
{
    int32_t m = param_add(g, "lora_magnitude_vector.weight", out, 1);
    if (m >= 0)
        g->params[m].lora = true;
}

/* norm_p[r] = ||w + scaling * lw||_row ^ power, w the base weight in lw's dtype (nn_param_as). */
static void weight_norm(struct gen *g, int32_t pw, tref w, tref lw, tref norm_p, float power, const char *tag)
{
    enum dtype ad = (enum dtype)g->t[lw].dtype;
    tref scaled = t_like(g, lw, ad, CAT_TEMP, tag);
    kern_scale(g, lw, scaled, scaling(g), tag);
    tref sum = t_like(g, lw, ad, CAT_TEMP, tag);
    kern_add(g, w, scaled, sum, 1.0f, 1.0f, tag);
    t_release(g, scaled);
    int64_t d[2] = {g->params[pw].dims[0], g->params[pw].dims[1]};
    tref ts[2] = {sum, norm_p};
    kern(g, K_ROW_NORM, ad, d, 2, ts, 2, &power, 1, tag);
    t_release(g, sum);
}

/* update_layer: lora_weight = lora_B @ lora_A, magnitude = the row norms of W + scaling * lora_weight. */
void dora_init(struct gen *g, int32_t pw, int32_t pa, int32_t pb, int32_t pm)
{
    const struct param *m = &g->params[pm];
    tref lw = t_new2(g, g->params[pw].dims[0], g->params[pw].dims[1], (enum dtype)g->t[m->data].dtype, CAT_TEMP,
                     m->tag);
    kern_gemm(g, g->params[pb].dims[0], g->params[pa].dims[1], g->spec.lora_rank, false, false, g->params[pb].data,
              g->params[pa].data, lw, m->tag);
    tref w = nn_param_as(g, pw, (enum dtype)g->t[lw].dtype);
    weight_norm(g, pw, w, lw, m->data, 1.0f, m->tag);
    t_release(g, w);
    t_release(g, lw);
}

/* y = x op c for a frozen c broadcast as ori says (c: no gradient), recorded as an add of x alone. */
static tref add_frozen(struct gen *g, const char *tag, tref x, tref c, const int64_t *ori, float beta)
{
    tref y = t_like(g, x, (enum dtype)g->t[x].dtype, CAT_ACTIVATION, tag);
    kern_bcast(g, K_ADD_BCAST, x, c, y, ori, 1.0f, beta, tag);
    if (nn_records(g, t_rg(g, x))) {
        struct node *n = tape_push(g, N_ADD, y, tag);
        if (n)
            node_input(g, n, 0, x);
    }
    return y;
}

/* DoraLinearLayer.forward's locals that live to its return: x_eye, lora_A(x_eye) (saved by the dead
 * graph of lora_weight), lora_weight and weight (W.to(x.dtype)). */
struct dora_locals {
    tref v[4];
};

/* mag_norm_scale [out] = magnitude / weight_norm, weight_norm from the eye path. */
static tref mag_norm_scale(struct gen *g, int32_t pw, int32_t pa, int32_t pb, int32_t pm, enum dtype ad,
                           struct dora_locals *l)
{
    const char *tag = g->params[pm].module;
    int64_t out = g->params[pw].dims[0], in = g->params[pw].dims[1], r = g->spec.lora_rank;
    tref eye = t_new2(g, in, in, ad, CAT_TEMP, tag);
    kern(g, K_EYE, ad, &in, 1, &eye, 1, NULL, 0, tag);
    tref h = t_new2(g, in, r, ad, CAT_TEMP, tag); /* lora_A(x_eye) */
    kern_gemm(g, in, r, in, false, true, eye, g->params[pa].data, h, tag);
    /* lora_B(h).T: PyTorch's [in, out] buffer seen transposed; computed here straight as [out, in] */
    tref lw = t_new2(g, out, in, ad, CAT_TEMP, tag);
    kern_gemm(g, out, in, r, false, true, g->params[pb].data, h, lw, tag);
    tref w = nn_param_as(g, pw, ad);
    tref rnorm = t_new(g, (int64_t[]){out}, 1, ad, CAT_ACTIVATION, tag);
    weight_norm(g, pw, w, lw, rnorm, -1.0f, tag);
    tref mns = t_new(g, (int64_t[]){out}, 1, ad, CAT_ACTIVATION, tag);
    kern_bcast(g, K_MUL_BCAST, g->params[pm].data, rnorm, mns, (int64_t[]){out, 1, 1}, 1.0f, 0.0f, tag);
    if (nn_records(g, param_trains(g, pm))) {
        struct node *n = tape_push(g, N_DORA, mns, tag);
        if (n) {
            n->param[0] = pm;
            n->a[0] = out;
            node_save(g, n, 0, rnorm);
        }
    }
    t_release(g, rnorm);
    *l = (struct dora_locals){{eye, h, lw, w}};
    return mns;
}

/* The magnitude's gradient: d magnitude = d mag_norm_scale / weight_norm. */
void dora_backward(struct gen *g, const struct node *n, tref gy)
{
    tref dm = pgrad_begin(g, n->param[0], (enum dtype)g->t[gy].dtype);
    kern_bcast(g, K_MUL_BCAST, gy, n->saved[0], dm, (int64_t[]){n->a[0], 1, 1}, 1.0f, 0.0f, n->tag);
    pgrad_end(g, n->param[0], dm);
}

/* An op's result, its operands released (the forward's locals going out of scope). */
static tref consumed(struct gen *g, tref r, tref a, tref b)
{
    t_release(g, a);
    t_release(g, b);
    return r;
}

tref dora_forward(struct gen *g, tref x, tref y, int32_t pw, int32_t pbias)
{
    int32_t pa = param_take(g, "lora_A.weight"), pb = param_take(g, "lora_B.weight");
    int32_t pm = param_take(g, "lora_magnitude_vector.weight");
    enum dtype ad = (enum dtype)g->t[g->params[pa].data].dtype, yd = (enum dtype)g->t[y].dtype;
    const char *tag = g->params[pm].module;
    int64_t out = g->params[pw].dims[0];
    tref xa = nn_as_dtype(g, "lora_cast", x, ad);
    struct dora_locals l;
    tref mns = mag_norm_scale(g, pw, pa, pb, pm, ad, &l);
    tref h = nn_linear_param(g, g->params[pa].module, xa, pa);
    t_release(g, xa);
    tref lora_result = nn_linear_param(g, g->params[pb].module, h, pb);
    t_release(g, h);
    tref base = pbias < 0 ? t_ref(g, y) /* base_result, less the bias when there is one */
                          : add_frozen(g, gen_tag(g, "dora.sub_bias"), y, g->params[pbias].data,
                                       (int64_t[]){1, t_numel(g, y) / out, out}, -1.0f);
    tref one = t_new2(g, 1, 1, ad, CAT_TEMP, tag);
    kern_fill(g, one, 1.0f, tag);
    tref m1 = add_frozen(g, gen_tag(g, "dora.sub_one"), mns, one, (int64_t[]){1, out, 1}, -1.0f);
    t_release(g, one);
    tref t1 = consumed(g, nn_mul(g, "dora.base", m1, base), m1, base);
    tref t2 = consumed(g, nn_mul(g, "dora.lora", mns, lora_result), mns, lora_result);
    tref t3 = consumed(g, nn_scale(g, "lora.scaling", t2, scaling(g)), t2, TNONE);
    tref dora = consumed(g, nn_add(g, "dora", t1, t3), t1, t3);
    for (int i = 0; i < 4; i++) /* DoraLinearLayer.forward returns */
        t_release(g, l.v[i]);
    tref sum = consumed(g, nn_add(g, "lora", y, dora), y, dora);
    if (g->t[sum].dtype == yd)
        return sum;
    tref c = nn_cast(g, "lora", sum, yd);
    t_release(g, sum);
    return c;
}
