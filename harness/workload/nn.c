/* nn.c: the layers model families are written in. Each call registers its parameters (GEN_PARAMS) or
 * emits its forward (GEN_RUN): outputs allocated, temporaries freed, and, when autograd records, a
 * tape node holding exactly what PyTorch saves for backward. nn_backward emits each node's backward.
 * Under autocast, linear/conv/SDPA run in the autocast dtype (weights cast once per forward and
 * cached), norms, softmax and losses in fp32. */
#include "workload/gen.h"

#include <string.h>

static const char *leaf_tag(struct gen *g, const char *name)
{
    return gen_tag(g, name);
}

static bool records(const struct gen *g, bool any_input_grad)
{
    return g->grad_enabled && any_input_grad && g->mode == GEN_RUN;
}

static enum dtype act_dt(const struct tensor *t)
{
    return (enum dtype)t->dtype;
}

static tref new_act(struct gen *g, tref like, int64_t last, enum dtype dt, const char *tag)
{
    int64_t d[TMAX_DIMS];
    memcpy(d, g->t[like].dims, sizeof d);
    d[g->t[like].ndim - 1] = last;
    return t_new(g, d, g->t[like].ndim, dt, CAT_ACTIVATION, tag);
}

tref nn_input(struct gen *g, const int64_t *dims, int ndim, enum dtype dt, const char *leaf)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    return t_new(g, dims, ndim, dt, CAT_INPUT, gen_intern(g, leaf));
}

/* ---- casts (autocast and explicit .to()) ---- */

tref nn_cast(struct gen *g, const char *name, tref x, enum dtype dt)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = leaf_tag(g, name);
    tref y = t_like(g, x, dt, CAT_ACTIVATION, tag);
    int64_t d[2] = {t_numel(g, x), g->t[x].dtype};
    tref ts[2] = {x, y};
    kern(g, WK_CAST, dt, d, 2, ts, 2, 0, tag);
    if (records(g, t_rg(g, x))) {
        struct node *n = tape_push(g, N_CAST, y, tag);
        if (n)
            node_input(g, n, 0, x);
    }
    return y;
}

/* The weight a 16-bit op uses: the parameter itself, or its autocast cast, made once per forward. */
static tref weight_for(struct gen *g, int32_t p, enum dtype cd)
{
    struct param *pp = &g->params[p];
    if (g->t[pp->data].dtype == cd)
        return pp->data;
    if (pp->cast == TNONE) {
        pp->cast = t_like(g, pp->data, cd, CAT_ACTIVATION, pp->tag);
        int64_t d[2] = {pp->numel, g->t[pp->data].dtype};
        tref ts[2] = {pp->data, pp->cast};
        kern(g, WK_CAST, cd, d, 2, ts, 2, 0, pp->module);
    }
    return pp->cast;
}

static enum dtype compute_dtype(const struct gen *g, tref x)
{
    return g->autocast ? g->spec.autocast_dtype : (enum dtype)g->t[x].dtype;
}

/* x cast to dt when autocast needs it (a new tensor, recorded), else a new reference to x. */
static tref as_dtype(struct gen *g, const char *name, tref x, enum dtype dt)
{
    if (g->t[x].dtype == dt)
        return t_ref(g, x);
    return nn_cast(g, name, x, dt);
}

/* ---- linear ---- */

static tref linear_apply(struct gen *g, const char *tag, tref x, int32_t pw, int32_t pb)
{
    enum dtype cd = compute_dtype(g, x);
    tref xin = as_dtype(g, "autocast", x, cd);
    tref w = weight_for(g, pw, cd);
    int64_t out_f = g->params[pw].dims[0], in_f = g->params[pw].dims[1];
    tref y = new_act(g, xin, out_f, cd, tag);
    int64_t m = t_numel(g, xin) / in_f;
    kern_gemm(g, m, out_f, in_f, cd, xin, w, y, tag);
    bool wt = param_trains(g, pw), bt = param_trains(g, pb);
    if (records(g, t_rg(g, xin) || wt || bt)) {
        struct node *n = tape_push(g, N_LINEAR, y, tag);
        if (n) {
            node_input(g, n, 0, xin);
            n->param[0] = pw;
            n->param[1] = pb;
            n->a[0] = m;
            n->a[1] = out_f;
            n->a[2] = in_f;
            if (wt)
                node_save(g, n, 0, xin);      /* for dW */
            if (t_rg(g, xin))
                node_save(g, n, 1, w);        /* for dX (a param, or its autocast cast) */
        }
    }
    t_release(g, xin);
    return y;
}

static void lora_register(struct gen *g, int64_t in, int64_t out)
{
    int r = g->spec.lora_rank;
    int32_t a = param_add(g, "lora_A.weight", r, in);
    int32_t b = param_add(g, "lora_B.weight", out, r);
    if (a >= 0)
        g->params[a].lora = true;
    if (b >= 0)
        g->params[b].lora = true;
}

tref nn_linear(struct gen *g, const char *name, tref x, int64_t in, int64_t out, bool bias)
{
    gen_push(g, "%s", name);
    if (g->mode == GEN_PARAMS) {
        param_add(g, "weight", out, in);
        if (bias)
            param_add(g, "bias", out, 1);
        if (g->in_lora_target && g->spec.trainable == TRAIN_LORA)
            lora_register(g, in, out);
        gen_pop(g);
        return TNONE;
    }
    int32_t pw = param_next(g), pb = bias ? param_next(g) : -1;
    const char *tag = g->params[pw].module;
    tref y = linear_apply(g, tag, x, pw, pb);
    if (g->in_lora_target && g->spec.trainable == TRAIN_LORA) {
        int32_t pa = param_next(g), pB = param_next(g);
        tref h = linear_apply(g, g->params[pa].module, x, pa, -1);
        tref l = linear_apply(g, g->params[pB].module, h, pB, -1);
        t_release(g, h);
        tref s = nn_add(g, "lora", y, l);
        t_release(g, y);
        t_release(g, l);
        y = s;
    }
    gen_pop(g);
    return y;
}

tref nn_linear_tied(struct gen *g, const char *name, tref x, int32_t weight)
{
    if (g->mode == GEN_PARAMS)
        return TNONE;
    gen_push(g, "%s", name);
    tref y = linear_apply(g, gen_tag(g, NULL), x, weight, -1);
    gen_pop(g);
    return y;
}

static void linear_backward(struct gen *g, const struct node *n, tref gy)
{
    enum dtype cd = act_dt(&g->t[gy]);
    int64_t m = n->a[0], out_f = n->a[1], in_f = n->a[2];
    if (n->in[0] != TNONE) {
        tref dx = t_like(g, n->in[0], cd, CAT_TEMP, n->tag);
        kern_gemm(g, m, in_f, out_f, cd, gy, n->saved[1], dx, n->tag);
        grad_accumulate(g, n->in[0], dx);
    }
    if (param_trains(g, n->param[0])) {
        tref dw = pgrad_begin(g, n->param[0], cd);
        kern_gemm(g, out_f, in_f, m, cd, gy, n->saved[0], dw, n->tag);
        pgrad_end(g, n->param[0], dw);
    }
    if (param_trains(g, n->param[1])) {
        tref db = pgrad_begin(g, n->param[1], cd);
        int64_t d[2] = {m, out_f};
        tref ts[2] = {gy, db};
        kern(g, WK_REDUCE, cd, d, 2, ts, 2, 0, n->tag);
        pgrad_end(g, n->param[1], db);
    }
}

/* ---- embedding ---- */

tref nn_embedding(struct gen *g, const char *name, tref ids, int64_t rows, int64_t dim, int32_t shared)
{
    if (g->mode == GEN_PARAMS) {
        if (shared < 0) {
            gen_push(g, "%s", name);
            param_add(g, "weight", rows, dim);
            gen_pop(g);
        }
        return TNONE;
    }
    int32_t p = shared >= 0 ? shared : param_next(g);
    gen_push(g, "%s", name);
    const char *tag = gen_tag(g, NULL);
    gen_pop(g);
    tref w = g->params[p].data;
    int64_t dims[TMAX_DIMS];
    int nd = g->t[ids].ndim < TMAX_DIMS ? g->t[ids].ndim : TMAX_DIMS - 1;
    memcpy(dims, g->t[ids].dims, sizeof dims);
    dims[nd] = dim;
    tref y = t_new(g, dims, nd + 1, act_dt(&g->t[w]), CAT_ACTIVATION, tag);
    int64_t d[3] = {t_numel(g, ids), dim, rows};
    tref ts[3] = {w, ids, y};
    kern(g, WK_EMBEDDING, act_dt(&g->t[w]), d, 3, ts, 3, 0, tag);
    if (records(g, param_trains(g, p))) {
        struct node *n = tape_push(g, N_EMBED, y, tag);
        if (n) {
            n->param[0] = p;
            n->a[0] = t_numel(g, ids);
            node_save(g, n, 0, ids);
        }
    }
    return y;
}

static void embed_backward(struct gen *g, const struct node *n, tref gy)
{
    struct param *pp = &g->params[n->param[0]];
    tref dw = pgrad_begin(g, n->param[0], act_dt(&g->t[gy]));
    int64_t d[3] = {n->a[0], pp->dims[1], pp->dims[0]};
    tref ts[3] = {gy, n->saved[0], dw};
    kern(g, WK_EMBEDDING_BWD, act_dt(&g->t[gy]), d, 3, ts, 3, 0, n->tag);
    pgrad_end(g, n->param[0], dw);
}

/* ---- norms ---- */

tref nn_norm(struct gen *g, const char *name, tref x, int64_t channels, enum norm_kind kind, bool bias,
             int64_t groups)
{
    gen_push(g, "%s", name);
    if (g->mode == GEN_PARAMS) {
        param_add(g, "weight", channels, 1);
        if (bias && kind != NORM_RMSNORM)
            param_add(g, "bias", channels, 1);
        gen_pop(g);
        return TNONE;
    }
    int32_t pw = param_next(g), pb = bias && kind != NORM_RMSNORM ? param_next(g) : -1;
    const char *tag = g->params[pw].module;
    gen_pop(g);
    int64_t numel = t_numel(g, x);
    int64_t rows = kind == NORM_GROUPNORM ? g->t[x].dims[0] * groups : numel / channels;
    bool rms = kind == NORM_RMSNORM;
    /* autocast runs norms in fp32; RMSNorm (HF) upcasts to fp32 itself */
    enum dtype in_dt = (g->autocast || rms) ? DT_F32 : act_dt(&g->t[x]);
    tref xin = as_dtype(g, "upcast", x, in_dt);
    tref mean = rms ? TNONE : t_new2(g, rows, 1, DT_F32, CAT_ACTIVATION, tag);
    tref rstd = t_new2(g, rows, 1, DT_F32, CAT_ACTIVATION, tag);
    enum dtype out_dt = rms ? act_dt(&g->t[g->params[pw].data]) : in_dt;
    if (rms && g->autocast)
        out_dt = DT_F32;
    tref hc = TNONE;
    int64_t d[4] = {rows, numel / rows, kind, groups};
    if (rms && out_dt != in_dt) { /* hidden * rsqrt(var) in fp32, then .to(weight dtype), then * weight */
        tref h = t_like(g, xin, DT_F32, CAT_TEMP, tag);
        tref ts[3] = {xin, rstd, h};
        kern(g, WK_RMSNORM, DT_F32, d, 4, ts, 3, 0, tag);
        hc = t_like(g, h, out_dt, CAT_ACTIVATION, tag);
        int64_t dc[2] = {numel, DT_F32};
        tref tc[2] = {h, hc};
        kern(g, WK_CAST, out_dt, dc, 2, tc, 2, 0, tag);
        t_release(g, h);
    } else if (rms) {
        hc = t_like(g, xin, out_dt, CAT_ACTIVATION, tag);
        tref ts[3] = {xin, rstd, hc};
        kern(g, WK_RMSNORM, out_dt, d, 4, ts, 3, 0, tag);
    }
    tref y = t_like(g, xin, out_dt, CAT_ACTIVATION, tag);
    tref w = g->params[pw].data;
    if (rms) {
        int64_t dm[1] = {numel};
        tref ts[3] = {hc, w, y};
        kern(g, WK_MUL, out_dt, dm, 1, ts, 3, 0, tag);
    } else {
        tref ts[6] = {xin, w, pb >= 0 ? g->params[pb].data : TNONE, mean, rstd, y};
        kern(g, kind == NORM_GROUPNORM ? WK_GROUPNORM : WK_LAYERNORM, out_dt, d, 4, ts, 6, 0, tag);
    }
    if (records(g, t_rg(g, xin) || param_trains(g, pw) || param_trains(g, pb))) {
        struct node *n = tape_push(g, N_NORM, y, tag);
        if (n) {
            node_input(g, n, 0, xin);
            n->param[0] = pw;
            n->param[1] = pb;
            memcpy(n->a, d, sizeof d);
            node_save(g, n, 0, xin);
            node_save(g, n, 1, mean);
            node_save(g, n, 2, rstd);
            node_save(g, n, 3, hc);
        }
    }
    t_release(g, xin);
    t_release(g, mean);
    t_release(g, rstd);
    t_release(g, hc);
    return y;
}

static void norm_backward(struct gen *g, const struct node *n, tref gy)
{
    tref x = n->saved[0];
    enum dtype dt = act_dt(&g->t[x]);
    if (n->in[0] != TNONE) {
        tref dx = t_like(g, x, dt, CAT_TEMP, n->tag);
        tref ts[5] = {gy, x, n->saved[1], n->saved[2], dx};
        kern(g, WK_NORM_BWD, dt, n->a, 4, ts, 5, 0, n->tag);
        grad_accumulate(g, n->in[0], dx);
    }
    for (int i = 0; i < 2; i++) {
        if (!param_trains(g, n->param[i]))
            continue;
        tref dw = pgrad_begin(g, n->param[i], act_dt(&g->t[gy]));
        int64_t d[2] = {n->a[0], n->a[1]};
        tref ts[3] = {gy, x, dw};
        kern(g, WK_REDUCE, act_dt(&g->t[gy]), d, 2, ts, 3, 0, n->tag);
        pgrad_end(g, n->param[i], dw);
    }
}

/* ---- elementwise ---- */

tref nn_act(struct gen *g, const char *name, tref x, enum act_kind act)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = leaf_tag(g, name);
    tref y = t_like(g, x, act_dt(&g->t[x]), CAT_ACTIVATION, tag);
    int64_t d[2] = {t_numel(g, x), act};
    tref ts[2] = {x, y};
    kern(g, WK_ACT, act_dt(&g->t[x]), d, 2, ts, 2, 0, tag);
    if (records(g, t_rg(g, x))) {
        struct node *n = tape_push(g, N_ACT, y, tag);
        if (n) {
            node_input(g, n, 0, x);
            node_save(g, n, 0, x);
            n->a[0] = d[0];
            n->a[1] = act;
        }
    }
    return y;
}

tref nn_dropout(struct gen *g, const char *name, tref x, float p)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    if (p <= 0 || !g->training)
        return t_ref(g, x);
    const char *tag = leaf_tag(g, name);
    tref mask = t_like(g, x, DT_U8, CAT_ACTIVATION, tag);
    tref y = t_like(g, x, act_dt(&g->t[x]), CAT_ACTIVATION, tag);
    int64_t d[1] = {t_numel(g, x)};
    tref ts[3] = {x, mask, y};
    kern(g, WK_DROPOUT, act_dt(&g->t[x]), d, 1, ts, 3, p, tag);
    if (records(g, t_rg(g, x))) {
        struct node *n = tape_push(g, N_DROPOUT, y, tag);
        if (n) {
            node_input(g, n, 0, x);
            node_save(g, n, 0, mask);
            n->a[0] = d[0];
        }
    }
    t_release(g, mask);
    return y;
}

static tref binary(struct gen *g, enum node_kind kind, const char *name, tref x, tref y)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = leaf_tag(g, name);
    tref big = t_numel(g, x) >= t_numel(g, y) ? x : y;
    tref z = t_like(g, big, gen_promote(act_dt(&g->t[x]), act_dt(&g->t[y])), CAT_ACTIVATION, tag);
    int64_t d[1] = {t_numel(g, big)};
    tref ts[3] = {x, y, z};
    kern(g, kind == N_ADD ? WK_ADD : WK_MUL, act_dt(&g->t[z]), d, 1, ts, 3, 0, tag);
    if (records(g, t_rg(g, x) || t_rg(g, y))) {
        struct node *n = tape_push(g, kind, z, tag);
        if (n) {
            node_input(g, n, 0, x);
            node_input(g, n, 1, y);
            if (kind == N_MUL) {
                if (t_rg(g, y))
                    node_save(g, n, 0, x);
                if (t_rg(g, x))
                    node_save(g, n, 1, y);
            }
        }
    }
    return z;
}

tref nn_add(struct gen *g, const char *name, tref x, tref y)
{
    return binary(g, N_ADD, name, x, y);
}

tref nn_mul(struct gen *g, const char *name, tref x, tref y)
{
    return binary(g, N_MUL, name, x, y);
}

tref nn_scale(struct gen *g, const char *name, tref x)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = leaf_tag(g, name);
    tref y = t_like(g, x, act_dt(&g->t[x]), CAT_ACTIVATION, tag);
    int64_t d[1] = {t_numel(g, x)};
    tref ts[2] = {x, y};
    kern(g, WK_MUL, act_dt(&g->t[x]), d, 1, ts, 2, 0, tag);
    if (records(g, t_rg(g, x))) {
        struct node *n = tape_push(g, N_SCALE, y, tag);
        if (n)
            node_input(g, n, 0, x);
    }
    return y;
}

/* Gradient of an input of an elementwise op: gy itself when shapes match and nothing else needs it
 * (PyTorch passes it through), a reduction when the input was broadcast. */
static tref grad_to_shape(struct gen *g, tref x, tref gy, const char *tag)
{
    if (t_numel(g, x) == t_numel(g, gy) && g->t[x].dtype == g->t[gy].dtype)
        return t_ref(g, gy);
    tref dx = t_like(g, x, act_dt(&g->t[x]), CAT_TEMP, tag);
    int64_t d[2] = {t_numel(g, gy) / t_numel(g, x), t_numel(g, x)};
    tref ts[2] = {gy, dx};
    kern(g, t_numel(g, x) == t_numel(g, gy) ? WK_CAST : WK_REDUCE, act_dt(&g->t[x]), d, 2, ts, 2, 0, tag);
    return dx;
}

static void elementwise_backward(struct gen *g, const struct node *n, tref gy)
{
    int64_t d[2] = {t_numel(g, gy), n->a[1]};
    switch (n->kind) {
    case N_ADD:
        for (int i = 0; i < 2; i++)
            if (n->in[i] != TNONE)
                grad_accumulate(g, n->in[i], grad_to_shape(g, n->in[i], gy, n->tag));
        break;
    case N_SCALE: {
        tref dx = t_like(g, gy, act_dt(&g->t[gy]), CAT_TEMP, n->tag);
        tref ts[2] = {gy, dx};
        kern(g, WK_MUL, act_dt(&g->t[gy]), d, 1, ts, 2, 0, n->tag);
        grad_accumulate(g, n->in[0], dx);
        break;
    }
    case N_MUL:
        for (int i = 0; i < 2; i++) {
            if (n->in[i] == TNONE)
                continue;
            tref other = n->saved[1 - i];
            tref full = t_like(g, gy, act_dt(&g->t[gy]), CAT_TEMP, n->tag);
            tref ts[3] = {gy, other, full};
            kern(g, WK_MUL, act_dt(&g->t[gy]), d, 1, ts, 3, 0, n->tag);
            tref dx = grad_to_shape(g, n->in[i], full, n->tag);
            t_release(g, full);
            grad_accumulate(g, n->in[i], dx);
        }
        break;
    case N_CAST: {
        tref x = n->in[0];
        tref dx = t_like(g, gy, act_dt(&g->t[x]), CAT_TEMP, n->tag);
        int64_t dc[2] = {d[0], g->t[gy].dtype};
        tref ts[2] = {gy, dx};
        kern(g, WK_CAST, act_dt(&g->t[x]), dc, 2, ts, 2, 0, n->tag);
        grad_accumulate(g, x, dx);
        break;
    }
    case N_ACT:
    case N_DROPOUT: {
        tref dx = t_like(g, gy, act_dt(&g->t[gy]), CAT_TEMP, n->tag);
        tref ts[3] = {gy, n->saved[0], dx};
        kern(g, n->kind == N_ACT ? WK_ACT_BWD : WK_DROPOUT_BWD, act_dt(&g->t[gy]), d, 2, ts, 3, 0, n->tag);
        grad_accumulate(g, n->in[0], dx);
        break;
    }
    default:
        break;
    }
}

/* ---- convolution, upsampling, reductions ---- */

tref nn_conv(struct gen *g, const char *name, tref x, int64_t cin, int64_t cout, int k, int stride, bool bias)
{
    gen_push(g, "%s", name);
    if (g->mode == GEN_PARAMS) {
        param_add(g, "weight", cout, cin * k * k);
        if (bias)
            param_add(g, "bias", cout, 1);
        gen_pop(g);
        return TNONE;
    }
    int32_t pw = param_next(g), pb = bias ? param_next(g) : -1;
    const char *tag = g->params[pw].module;
    gen_pop(g);
    enum dtype cd = compute_dtype(g, x);
    tref xin = as_dtype(g, "autocast", x, cd);
    tref w = weight_for(g, pw, cd);
    const struct tensor *xt = &g->t[xin];
    int64_t dims[4] = {xt->dims[0], cout, xt->dims[2] / stride, xt->dims[3] / stride};
    int64_t d[8] = {xt->dims[0], cin, xt->dims[2], xt->dims[3], cout, k, stride, k / 2};
    tref y = t_new(g, dims, 4, cd, CAT_ACTIVATION, tag); /* may move the slab: xt is stale after this */
    tref ts[4] = {xin, w, pb >= 0 ? g->params[pb].data : TNONE, y};
    kern(g, WK_CONV2D, cd, d, 8, ts, 4, 0, tag);
    bool wt = param_trains(g, pw);
    if (records(g, t_rg(g, xin) || wt || param_trains(g, pb))) {
        struct node *n = tape_push(g, N_CONV, y, tag);
        if (n) {
            node_input(g, n, 0, xin);
            n->param[0] = pw;
            n->param[1] = pb;
            memcpy(n->a, d, sizeof d);
            if (wt)
                node_save(g, n, 0, xin);
            if (t_rg(g, xin))
                node_save(g, n, 1, w);
        }
    }
    t_release(g, xin);
    return y;
}

static void conv_backward(struct gen *g, const struct node *n, tref gy)
{
    enum dtype cd = act_dt(&g->t[gy]);
    if (n->in[0] != TNONE) {
        tref dx = t_like(g, n->in[0], cd, CAT_TEMP, n->tag);
        tref ts[3] = {gy, n->saved[1], dx};
        kern(g, WK_CONV2D_BWD, cd, n->a, 8, ts, 3, 0, n->tag);
        grad_accumulate(g, n->in[0], dx);
    }
    for (int i = 0; i < 2; i++) {
        if (!param_trains(g, n->param[i]))
            continue;
        tref dw = pgrad_begin(g, n->param[i], cd);
        tref ts[3] = {gy, i == 0 ? n->saved[0] : TNONE, dw};
        kern(g, i == 0 ? WK_CONV2D_BWD : WK_REDUCE, cd, n->a, 8, ts, 3, 0, n->tag);
        pgrad_end(g, n->param[i], dw);
    }
}

tref nn_upsample(struct gen *g, const char *name, tref x)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = leaf_tag(g, name);
    struct tensor *xt = &g->t[x];
    int64_t dims[4] = {xt->dims[0], xt->dims[1], xt->dims[2] * 2, xt->dims[3] * 2};
    tref y = t_new(g, dims, 4, act_dt(xt), CAT_ACTIVATION, tag);
    tref ts[2] = {x, y};
    kern(g, WK_UPSAMPLE, act_dt(&g->t[y]), g->t[x].dims, 4, ts, 2, 0, tag);
    if (records(g, t_rg(g, x))) {
        struct node *n = tape_push(g, N_UPSAMPLE, y, tag);
        if (n)
            node_input(g, n, 0, x);
    }
    return y;
}

tref nn_reduce(struct gen *g, const char *name, tref x, const int64_t *dims, int ndim)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = leaf_tag(g, name);
    tref y = t_new(g, dims, ndim, act_dt(&g->t[x]), CAT_ACTIVATION, tag);
    int64_t d[2] = {t_numel(g, x) / t_numel(g, y), t_numel(g, y)};
    tref ts[2] = {x, y};
    kern(g, WK_REDUCE, act_dt(&g->t[y]), d, 2, ts, 2, 0, tag);
    if (records(g, t_rg(g, x))) {
        struct node *n = tape_push(g, N_REDUCE, y, tag);
        if (n)
            node_input(g, n, 0, x);
    }
    return y;
}

static void reshape_backward(struct gen *g, const struct node *n, tref gy)
{
    tref x = n->in[0];
    tref dx = t_like(g, x, act_dt(&g->t[gy]), CAT_TEMP, n->tag);
    tref ts[2] = {gy, dx};
    if (n->kind == N_UPSAMPLE)
        kern(g, WK_UPSAMPLE_BWD, act_dt(&g->t[gy]), g->t[x].dims, 4, ts, 2, 0, n->tag);
    else {
        int64_t d[2] = {t_numel(g, x) / t_numel(g, gy), t_numel(g, gy)};
        kern(g, WK_COPY, act_dt(&g->t[gy]), d, 2, ts, 2, 0, n->tag);
    }
    grad_accumulate(g, x, dx);
}

/* ---- loss ---- */

tref nn_cross_entropy(struct gen *g, const char *name, tref logits, tref labels)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = leaf_tag(g, name);
    enum dtype dt = g->autocast ? DT_F32 : act_dt(&g->t[logits]);
    tref x = as_dtype(g, "upcast", logits, dt);
    tref logp = t_like(g, x, dt, CAT_ACTIVATION, tag);
    int64_t vocab = g->t[x].dims[g->t[x].ndim - 1];
    int64_t d[2] = {t_numel(g, x) / vocab, vocab};
    tref ts[2] = {x, logp};
    kern(g, WK_SOFTMAX, dt, d, 2, ts, 2, 0, tag);
    int64_t one[1] = {1};
    tref loss = t_new(g, one, 1, DT_F32, CAT_ACTIVATION, tag);
    tref tl[3] = {logp, labels, loss};
    kern(g, WK_CROSS_ENTROPY, dt, d, 2, tl, 3, 0, tag);
    if (records(g, t_rg(g, x))) {
        struct node *n = tape_push(g, N_CE, loss, tag);
        if (n) {
            node_input(g, n, 0, x);
            node_save(g, n, 0, logp);
            node_save(g, n, 1, labels);
            n->a[0] = d[0];
            n->a[1] = d[1];
        }
    }
    t_release(g, logp);
    t_release(g, x);
    return loss;
}

static void ce_backward(struct gen *g, const struct node *n, tref gy)
{
    tref logp = n->saved[0];
    enum dtype dt = act_dt(&g->t[logp]);
    tref dlogp = t_like(g, logp, dt, CAT_TEMP, n->tag);
    tref ts[4] = {gy, n->saved[1], dlogp};
    kern(g, WK_CROSS_ENTROPY_BWD, dt, n->a, 2, ts, 3, 0, n->tag);
    tref dx = t_like(g, logp, dt, CAT_TEMP, n->tag);
    tref ts2[3] = {dlogp, logp, dx};
    kern(g, WK_SOFTMAX_BWD, dt, n->a, 2, ts2, 3, 0, n->tag);
    t_release(g, dlogp);
    grad_accumulate(g, n->in[0], dx);
}

/* ---- attention ---- */

enum { AF_FUSED = 1, AF_ROTARY = 2, AF_GQA = 4, AF_EAGER = 8, AF_SCALE = 16, AF_DROPOUT = 32, AF_UPCAST = 64 };

static tref heads_tensor(struct gen *g, int64_t b, int64_t h, int64_t s, int64_t d, enum dtype dt,
                         enum category cat, const char *tag)
{
    int64_t dims[4] = {b, h, s, d};
    return t_new(g, dims, 4, dt, cat, tag);
}

static tref rope(struct gen *g, tref x, const char *tag)
{
    tref y = t_like(g, x, act_dt(&g->t[x]), CAT_ACTIVATION, tag);
    int64_t d[1] = {t_numel(g, x)};
    tref ts[2] = {x, y};
    kern(g, WK_MUL, act_dt(&g->t[x]), d, 1, ts, 2, 0, tag);
    return y;
}

tref nn_attention(struct gen *g, const char *name, tref q, tref k, tref v, const struct attn_args *a)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = leaf_tag(g, name);
    int64_t B = g->t[q].dims[0], S = g->t[q].dims[1], H = a->heads, D = a->head_dim;
    int64_t KV = a->kv_heads ? a->kv_heads : H;
    int64_t Sk = a->fused_qkv ? S : g->t[k].dims[1];
    enum dtype cd = compute_dtype(g, q);
    bool rg = records(g, t_rg(g, q) || t_rg(g, k) || t_rg(g, v) || t_rg(g, a->bias));
    bool drop = a->dropout > 0 && g->training;
    int flags = (a->fused_qkv ? AF_FUSED : 0) | (a->rotary ? AF_ROTARY : 0) | (a->eager ? AF_EAGER : 0);
    tref qu, ku, vu;
    if (a->fused_qkv) {
        qu = as_dtype(g, "autocast", q, cd);
        ku = t_ref(g, qu);
        vu = t_ref(g, qu);
    } else {
        qu = as_dtype(g, "autocast", q, cd);
        ku = as_dtype(g, "autocast", k, cd);
        vu = as_dtype(g, "autocast", v, cd);
    }
    if (a->rotary) {
        tref r = rope(g, qu, tag);
        t_release(g, qu);
        qu = r;
        r = rope(g, ku, tag);
        t_release(g, ku);
        ku = r;
    }
    tref y = TNONE;
    struct node *n = NULL;
    int64_t dd[8] = {B, H, S, Sk, D, KV, a->causal, 0};
    if (a->eager) {
        if (KV < H) { /* repeat_kv: k and v expanded to every head (copies) */
            flags |= AF_GQA;
            tref ke = heads_tensor(g, B, H, Sk, D, cd, CAT_ACTIVATION, tag);
            tref ve = heads_tensor(g, B, H, Sk, D, cd, CAT_ACTIVATION, tag);
            tref t1[2] = {ku, ke}, t2[2] = {vu, ve};
            int64_t dc[2] = {t_numel(g, ke), cd};
            kern(g, WK_COPY, cd, dc, 2, t1, 2, 0, tag);
            kern(g, WK_COPY, cd, dc, 2, t2, 2, 0, tag);
            t_release(g, ku);
            t_release(g, vu);
            ku = ke;
            vu = ve;
        }
        int64_t bg[4] = {B * H, S, Sk, D};
        tref cur = heads_tensor(g, B, H, S, Sk, cd, CAT_ACTIVATION, tag);
        tref t1[3] = {qu, ku, cur};
        kern(g, WK_BGEMM, cd, bg, 4, t1, 3, 0, tag);
        int steps = (a->scale_op ? 1 : 0) + (a->causal || a->bias != TNONE ? 1 : 0);
        if (a->scale_op)
            flags |= AF_SCALE;
        for (int i = 0; i < steps; i++) { /* scaling, then mask / position bias: each a new tensor */
            tref nx = heads_tensor(g, B, H, S, Sk, cd, CAT_ACTIVATION, tag);
            int64_t d1[1] = {t_numel(g, nx)};
            tref tt[3] = {cur, a->bias, nx};
            kern(g, WK_ADD, cd, d1, 1, tt, 3, 0, tag);
            t_release(g, cur);
            cur = nx;
        }
        enum dtype sm = (g->autocast || a->upcast_softmax) ? DT_F32 : cd;
        if (a->upcast_softmax)
            flags |= AF_UPCAST;
        tref probs = heads_tensor(g, B, H, S, Sk, sm, CAT_ACTIVATION, tag);
        int64_t ds[2] = {B * H * S, Sk};
        tref t2[2] = {cur, probs};
        kern(g, WK_SOFTMAX, sm, ds, 2, t2, 2, 0, tag);
        t_release(g, cur);
        tref pv = t_ref(g, probs);
        if (sm != cd) {
            tref pc = heads_tensor(g, B, H, S, Sk, cd, CAT_ACTIVATION, tag);
            int64_t dc[2] = {t_numel(g, pc), sm};
            tref tc[2] = {probs, pc};
            kern(g, WK_CAST, cd, dc, 2, tc, 2, 0, tag);
            t_release(g, pv);
            pv = pc;
        }
        tref mask = TNONE;
        if (drop) {
            flags |= AF_DROPOUT;
            mask = heads_tensor(g, B, H, S, Sk, DT_U8, CAT_ACTIVATION, tag);
            tref dr = heads_tensor(g, B, H, S, Sk, cd, CAT_ACTIVATION, tag);
            int64_t d1[1] = {t_numel(g, dr)};
            tref tt[3] = {pv, mask, dr};
            kern(g, WK_DROPOUT, cd, d1, 1, tt, 3, a->dropout, tag);
            t_release(g, pv);
            pv = dr;
        }
        tref ctx = heads_tensor(g, B, H, S, D, cd, CAT_ACTIVATION, tag);
        int64_t bg2[4] = {B * H, S, D, Sk};
        tref t3[3] = {pv, vu, ctx};
        kern(g, WK_BGEMM, cd, bg2, 4, t3, 3, 0, tag);
        int64_t yd[3] = {B, S, H * D};
        y = t_new(g, yd, 3, cd, CAT_ACTIVATION, tag);
        int64_t dc[2] = {t_numel(g, y), cd};
        tref t4[2] = {ctx, y};
        kern(g, WK_COPY, cd, dc, 2, t4, 2, 0, tag);
        t_release(g, ctx);
        if (rg && (n = tape_push(g, N_ATTN, y, tag))) {
            node_save(g, n, 0, qu);
            if (!a->fused_qkv || (flags & AF_GQA)) {
                node_save(g, n, 1, ku);
                node_save(g, n, 2, vu);
            }
            node_save(g, n, 3, probs);
            node_save(g, n, 4, mask);
            node_save(g, n, 5, pv);
        }
        t_release(g, probs);
        t_release(g, mask);
        t_release(g, pv);
    } else {
        tref o = heads_tensor(g, B, H, S, D, cd, CAT_ACTIVATION, tag);
        int64_t ld[3] = {B, H, S};
        tref lse = t_new(g, ld, 3, DT_F32, CAT_ACTIVATION, tag);
        tref ts[6] = {qu, ku, vu, a->bias, o, lse};
        kern(g, WK_ATTENTION, cd, dd, 7, ts, 6, drop ? a->dropout : 0, tag);
        int64_t yd[3] = {B, S, H * D};
        y = t_new(g, yd, 3, cd, CAT_ACTIVATION, tag);
        int64_t dc[2] = {t_numel(g, y), cd};
        tref t4[2] = {o, y};
        kern(g, WK_COPY, cd, dc, 2, t4, 2, 0, tag);
        if (rg && (n = tape_push(g, N_ATTN, y, tag))) {
            node_save(g, n, 0, qu);
            if (!a->fused_qkv) {
                node_save(g, n, 1, ku);
                node_save(g, n, 2, vu);
            }
            node_save(g, n, 3, o);
            node_save(g, n, 4, lse);
        }
        t_release(g, o);
        t_release(g, lse);
    }
    if (n) {
        node_input(g, n, 0, q);
        if (!a->fused_qkv) {
            node_input(g, n, 1, k);
            node_input(g, n, 2, v);
        }
        node_input(g, n, 3, a->bias);
        memcpy(n->a, dd, sizeof dd);
        n->a[7] = flags;
        n->flags = (uint8_t)cd;
    }
    t_release(g, qu);
    t_release(g, ku);
    t_release(g, vu);
    return y;
}

static tref bsd(struct gen *g, int64_t b, int64_t s, int64_t hd, enum dtype dt, const char *tag)
{
    int64_t d[3] = {b, s, hd};
    return t_new(g, d, 3, dt, CAT_TEMP, tag);
}

static void attention_backward(struct gen *g, const struct node *n, tref gy)
{
    int64_t B = n->a[0], H = n->a[1], S = n->a[2], Sk = n->a[3], D = n->a[4], KV = n->a[5];
    int flags = (int)n->a[7];
    enum dtype cd = (enum dtype)n->flags;
    const char *tag = n->tag;
    bool fused = flags & AF_FUSED, gqa = flags & AF_GQA;
    tref qs = n->saved[0];
    tref ks = n->saved[1] != TNONE ? n->saved[1] : qs, vs = n->saved[2] != TNONE ? n->saved[2] : qs;
    int64_t kvw = gqa ? H * D : KV * D;
    tref dq, dk, dv;
    if (flags & AF_EAGER) {
        int64_t bg[4] = {B * H, S, Sk, D};
        tref dpv = heads_tensor(g, B, H, S, Sk, cd, CAT_TEMP, tag);
        tref t1[3] = {gy, vs, dpv};
        kern(g, WK_BGEMM, cd, bg, 4, t1, 3, 0, tag);
        dv = bsd(g, B, Sk, kvw, cd, tag);
        tref t2[3] = {n->saved[5], gy, dv};
        kern(g, WK_BGEMM, cd, bg, 4, t2, 3, 0, tag);
        tref cur = dpv;
        int64_t d1[2] = {B * H * S * Sk, 0};
        if (flags & AF_DROPOUT) {
            tref nx = heads_tensor(g, B, H, S, Sk, cd, CAT_TEMP, tag);
            tref tt[3] = {cur, n->saved[4], nx};
            kern(g, WK_DROPOUT_BWD, cd, d1, 1, tt, 3, 0, tag);
            t_release(g, cur);
            cur = nx;
        }
        enum dtype sm = (enum dtype)g->t[n->saved[3]].dtype;
        if (sm != cd) {
            tref nx = heads_tensor(g, B, H, S, Sk, sm, CAT_TEMP, tag);
            tref tt[2] = {cur, nx};
            d1[1] = cd;
            kern(g, WK_CAST, sm, d1, 2, tt, 2, 0, tag);
            t_release(g, cur);
            cur = nx;
        }
        tref ds = heads_tensor(g, B, H, S, Sk, sm, CAT_TEMP, tag);
        int64_t dsm[2] = {B * H * S, Sk};
        tref t3[3] = {cur, n->saved[3], ds};
        kern(g, WK_SOFTMAX_BWD, sm, dsm, 2, t3, 3, 0, tag);
        t_release(g, cur);
        cur = ds;
        if (sm != cd || (flags & AF_SCALE)) {
            tref nx = heads_tensor(g, B, H, S, Sk, cd, CAT_TEMP, tag);
            tref tt[2] = {cur, nx};
            kern(g, WK_MUL, cd, d1, 1, tt, 2, 0, tag);
            t_release(g, cur);
            cur = nx;
        }
        if (n->in[3] != TNONE)
            grad_accumulate(g, n->in[3], grad_to_shape(g, n->in[3], cur, tag));
        dq = bsd(g, B, S, H * D, cd, tag);
        dk = bsd(g, B, Sk, kvw, cd, tag);
        tref t4[3] = {cur, ks, dq}, t5[3] = {cur, qs, dk};
        kern(g, WK_BGEMM, cd, bg, 4, t4, 3, 0, tag);
        kern(g, WK_BGEMM, cd, bg, 4, t5, 3, 0, tag);
        t_release(g, cur);
    } else {
        dq = bsd(g, B, S, H * D, cd, tag);
        dk = bsd(g, B, Sk, KV * D, cd, tag);
        dv = bsd(g, B, Sk, KV * D, cd, tag);
        tref acc = bsd(g, B, S, H * D, DT_F32, tag); /* fp32 dq accumulator */
        int64_t ld[3] = {B, H, S};
        tref sd = t_new(g, ld, 3, DT_F32, CAT_TEMP, tag); /* softmax_d = rowsum(dO * O) */
        tref ts[6] = {gy, qs, n->saved[3], dq, dk, dv};
        kern(g, WK_ATTENTION_BWD, cd, n->a, 7, ts, 6, 0, tag);
        t_release(g, acc);
        t_release(g, sd);
        if (n->in[3] != TNONE) {
            tref db = t_like(g, n->in[3], act_dt(&g->t[n->in[3]]), CAT_TEMP, tag);
            grad_accumulate(g, n->in[3], db);
        }
    }
    if (gqa) { /* sum the expanded heads back to kv_heads */
        tref rk = bsd(g, B, Sk, KV * D, cd, tag), rv = bsd(g, B, Sk, KV * D, cd, tag);
        int64_t dr[2] = {H / KV, B * Sk * KV * D};
        tref t1[2] = {dk, rk}, t2[2] = {dv, rv};
        kern(g, WK_REDUCE, cd, dr, 2, t1, 2, 0, tag);
        kern(g, WK_REDUCE, cd, dr, 2, t2, 2, 0, tag);
        t_release(g, dk);
        t_release(g, dv);
        dk = rk;
        dv = rv;
    }
    if (flags & AF_ROTARY) {
        tref rq = rope(g, dq, tag), rk = rope(g, dk, tag);
        t_release(g, dq);
        t_release(g, dk);
        dq = rq;
        dk = rk;
    }
    if (fused) {
        tref dqkv = bsd(g, B, S, 3 * H * D, cd, tag);
        int64_t dc[2] = {t_numel(g, dqkv), cd};
        tref ts[4] = {dq, dk, dv, dqkv};
        kern(g, WK_COPY, cd, dc, 2, ts, 4, 0, tag);
        t_release(g, dq);
        t_release(g, dk);
        t_release(g, dv);
        grad_accumulate(g, n->in[0], dqkv);
        return;
    }
    grad_accumulate(g, n->in[0], dq);
    grad_accumulate(g, n->in[1], dk);
    grad_accumulate(g, n->in[2], dv);
}

/* ---- gated units and reshapes ---- */

tref nn_glu(struct gen *g, const char *name, tref p, enum act_kind act)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = leaf_tag(g, name);
    int64_t half = g->t[p].dims[g->t[p].ndim - 1] / 2;
    tref a = new_act(g, p, half, act_dt(&g->t[p]), tag);
    tref y = new_act(g, p, half, act_dt(&g->t[p]), tag);
    int64_t d[2] = {t_numel(g, a), act};
    tref t1[2] = {p, a}, t2[3] = {a, p, y};
    kern(g, WK_ACT, act_dt(&g->t[p]), d, 2, t1, 2, 0, tag);
    kern(g, WK_MUL, act_dt(&g->t[p]), d, 1, t2, 3, 0, tag);
    if (records(g, t_rg(g, p))) {
        struct node *n = tape_push(g, N_GLU, y, tag);
        if (n) {
            node_input(g, n, 0, p);
            node_save(g, n, 0, p);
            node_save(g, n, 1, a);
            n->a[0] = d[0];
            n->a[1] = act;
        }
    }
    t_release(g, a);
    return y;
}

static void glu_backward(struct gen *g, const struct node *n, tref gy)
{
    enum dtype dt = act_dt(&g->t[gy]);
    tref da = t_like(g, gy, dt, CAT_TEMP, n->tag);
    tref t1[3] = {gy, n->saved[0], da};
    kern(g, WK_MUL, dt, n->a, 1, t1, 3, 0, n->tag);
    tref dp = t_like(g, n->saved[0], dt, CAT_TEMP, n->tag);
    tref t2[4] = {gy, da, n->saved[1], dp};
    kern(g, WK_ACT_BWD, dt, n->a, 2, t2, 4, 0, n->tag);
    t_release(g, da);
    grad_accumulate(g, n->in[0], dp);
}

tref nn_reshape(struct gen *g, const char *name, tref x, const int64_t *dims, int ndim)
{
    return nn_reduce(g, name, x, dims, ndim);
}

/* ---- checkpointing ---- */

tref nn_checkpoint(struct gen *g, const struct ckpt *c, tref x)
{
    if (g->mode != GEN_RUN || !g->grad_enabled || !g->checkpointing || g->recomputing)
        return c->fn(g, c, x);
    int32_t cursor = g->cursor;
    g->grad_enabled = false;
    tref y = c->fn(g, c, x);
    g->grad_enabled = true;
    if (y == TNONE)
        return y;
    struct node *n = tape_push(g, N_CKPT, y, g->params[cursor].module);
    if (!n)
        return y;
    n->ck = *c;
    n->ck.cursor = cursor;
    node_input(g, n, 0, x);
    node_save(g, n, 0, x);
    for (int i = 0; i < 3; i++) {
        node_input(g, n, 1 + i, c->extra[i]);
        if (c->extra[i] != TNONE)
            node_save(g, n, 1 + i, c->extra[i]);
    }
    return y;
}

void nn_backward(struct gen *g, const struct node *n, tref gy)
{
    switch ((enum node_kind)n->kind) {
    case N_LINEAR:
        linear_backward(g, n, gy);
        break;
    case N_EMBED:
        embed_backward(g, n, gy);
        break;
    case N_NORM:
        norm_backward(g, n, gy);
        break;
    case N_CONV:
        conv_backward(g, n, gy);
        break;
    case N_ATTN:
        attention_backward(g, n, gy);
        break;
    case N_CE:
        ce_backward(g, n, gy);
        break;
    case N_UPSAMPLE:
    case N_REDUCE:
        reshape_backward(g, n, gy);
        break;
    case N_ACT:
    case N_DROPOUT:
    case N_ADD:
    case N_MUL:
    case N_CAST:
    case N_SCALE:
        elementwise_backward(g, n, gy);
        break;
    case N_GLU:
        glu_backward(g, n, gy);
        break;
    case N_CKPT:
        break;
    }
}
