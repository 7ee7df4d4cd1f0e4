/* nn_norm.c: normalisation layers, forward and backward. LayerNorm, GroupNorm and torch.nn.RMSNorm are
 * PyTorch's fused native ops (one kernel each way; the output, then mean and rstd, as
 * native_layer_norm allocates them). RMSNorm is the composite transformers writes (LlamaRMSNorm, T5LayerNorm): an fp32 copy of
 * the input, its square, mean, + eps, rsqrt, the normalised product, its cast back and the weight
 * multiply, each a tensor, and a backward of a dozen elementwise ops; every one is a kernel of
 * kernels.h on the tensors PyTorch allocates, except rsqrt, whose values come from the fused RMSNorm
 * kernel that also writes the output. */
#include "workload/gen.h"

#define NORM_EPS 1e-5f

enum { NS_X, NS_MEAN, NS_RSTD, NS_GAMMA, NS_BETA };  /* fused norms (RMSNorm: no mean, no beta) */
enum { RS_A, RS_RSTD, RS_C, RS_W, RS_X };           /* RMSNorm: fp32 input, rsqrt, normalised, weight, input */

static enum dtype dtype_of(const struct gen *g, tref x)
{
    return (enum dtype)g->t[x].dtype;
}

/* A [C] zero tensor standing in for a LayerNorm/GroupNorm bias the module does not have. */
static tref zero_vector(struct gen *g, int64_t c, enum dtype dt, const char *tag)
{
    tref z = t_new2(g, c, 1, dt, CAT_TEMP, tag);
    kern_fill(g, z, 0.0f, tag);
    return z;
}

/* A [C] tensor of ones standing in for the weight of a norm without one, for the kernel that reads it. */
static tref unit_vector(struct gen *g, int64_t c, enum dtype dt, const char *tag)
{
    tref u = t_new2(g, c, 1, dt, CAT_TEMP, tag);
    kern_fill(g, u, 1.0f, tag);
    return u;
}

static tref full_like(struct gen *g, tref x, enum dtype dt, enum category cat, const char *tag)
{
    return t_like(g, x, dt, cat, tag);
}

/* transformers' RMSNorm: h = x.to(fp32); var = h.pow(2).mean(-1, keepdim=True);
 * h = h * rsqrt(var + eps); return weight * h.to(input dtype). Autograd keeps h (PowBackward,
 * MulBackward), the rsqrt (RsqrtBackward's result) and the cast (for the weight's gradient). */
static tref rmsnorm(struct gen *g, const char *tag, tref x, int32_t pw, int64_t rows, int64_t c)
{
    enum dtype xd = dtype_of(g, x), wd = dtype_of(g, g->params[pw].data), od = gen_promote(wd, xd);
    tref a = nn_as_dtype(g, "upcast", x, DT_F32);
    tref p = full_like(g, a, DT_F32, CAT_ACTIVATION, tag);
    int64_t all[3] = {t_numel(g, a), 1, 1}, over_c[3] = {rows, c, 1};
    kern_bcast(g, K_MUL_BCAST, a, a, p, all, 1.0f, 0.0f, tag);
    tref var = t_new2(g, rows, 1, DT_F32, CAT_ACTIVATION, tag);
    kern_bcast(g, K_REDUCE_SUM, p, TNONE, var, over_c, 1.0f / (float)c, 0.0f, tag);
    t_release(g, p);
    tref e = t_new2(g, rows, 1, DT_F32, CAT_ACTIVATION, tag);
    kern_fill(g, e, NORM_EPS, tag);
    kern_add(g, var, e, e, 1.0f, 1.0f, tag);
    tref rstd = t_new2(g, rows, 1, DT_F32, CAT_ACTIVATION, tag);
    t_release(g, e);
    tref prod = full_like(g, a, DT_F32, CAT_ACTIVATION, tag);
    tref cst = xd == DT_F32 ? t_ref(g, prod) : full_like(g, a, xd, CAT_ACTIVATION, tag);
    tref y = full_like(g, a, od, CAT_ACTIVATION, tag);
    /* the fused kernel writes the output and rsqrt; the product and its cast from them */
    float eps = NORM_EPS;
    int64_t d[2] = {rows, c};
    if (xd == wd) {
        tref ts[4] = {x, g->params[pw].data, y, rstd};
        kern(g, K_RMSNORM_FWD, xd, d, 2, ts, 4, &eps, 1, tag);
    } else { /* mixed dtypes: the kernel in fp32 on the fp32 copy, with an fp32 copy of the weight */
        tref w32 = nn_param_as(g, pw, DT_F32);
        tref ts[4] = {a, w32, y, rstd};
        kern(g, K_RMSNORM_FWD, DT_F32, d, 2, ts, 4, &eps, 1, tag);
        t_release(g, w32);
    }
    kern_bcast(g, K_MUL_BCAST, a, rstd, prod, over_c, 1.0f, 0.0f, tag);
    if (cst != prod)
        kern_cast(g, prod, cst, tag);
    t_release(g, prod);
    t_release(g, var);
    if (nn_records(g, t_rg(g, x) || param_trains(g, pw))) {
        struct node *n = tape_push(g, N_NORM, y, tag);
        if (n) {
            node_input(g, n, 0, x);
            n->param[0] = pw;
            n->a[0] = NORM_RMSNORM;
            n->a[1] = rows;
            n->a[2] = c;
            node_save(g, n, RS_A, a);
            node_save(g, n, RS_RSTD, rstd);
            node_save(g, n, RS_C, cst);
            node_save(g, n, RS_W, g->params[pw].data);
        }
    }
    t_release(g, a);
    t_release(g, rstd);
    t_release(g, cst);
    return y;
}

/* The fused norms (LayerNorm, GroupNorm, torch.nn.RMSNorm); pw < 0: no weight (elementwise_affine=False). */
static tref fused_norm(struct gen *g, const char *tag, tref x, int64_t channels, enum norm_kind kind, int32_t pw,
                       int32_t pb, int64_t groups)
{
    bool rms = kind == NORM_RMSNORM_FUSED;
    int64_t numel = t_numel(g, x);
    int64_t rows = kind == NORM_GROUPNORM ? g->t[x].dims[0] * groups : numel / channels;
    /* autocast runs norms in fp32 */
    enum dtype dt = g->autocast ? DT_F32 : dtype_of(g, x);
    tref xin = nn_as_dtype(g, "upcast", x, dt);
    tref y = full_like(g, xin, dt, CAT_ACTIVATION, tag);
    tref mean = rms ? TNONE : t_new2(g, rows, 1, DT_F32, CAT_ACTIVATION, tag);
    tref rstd = t_new2(g, rows, 1, DT_F32, CAT_ACTIVATION, tag);
    tref gamma = pw >= 0 ? nn_param_as(g, pw, dt) : unit_vector(g, channels, dt, tag);
    tref beta = rms ? TNONE : pb >= 0 ? nn_param_as(g, pb, dt) : zero_vector(g, channels, dt, tag);
    tref ts[6] = {xin, gamma, beta, y, mean, rstd};
    float eps = NORM_EPS;
    if (rms) {
        int64_t d[2] = {rows, channels};
        tref tr[4] = {xin, gamma, y, rstd};
        kern(g, K_RMSNORM_FWD, dt, d, 2, tr, 4, &eps, 1, tag);
    } else if (kind == NORM_GROUPNORM) {
        int64_t d[4] = {g->t[xin].dims[0], channels, numel / (g->t[xin].dims[0] * channels), groups};
        kern(g, K_GROUPNORM_FWD, dt, d, 4, ts, 6, &eps, 1, tag);
    } else {
        int64_t d[2] = {rows, channels};
        kern(g, K_LAYERNORM_FWD, dt, d, 2, ts, 6, &eps, 1, tag);
    }
    if (nn_records(g, t_rg(g, xin) || param_trains(g, pw) || param_trains(g, pb))) {
        struct node *n = tape_push(g, N_NORM, y, tag);
        if (n) {
            node_input(g, n, 0, xin);
            n->param[0] = pw;
            n->param[1] = pb;
            n->a[0] = kind;
            n->a[1] = rows;
            n->a[2] = channels;
            n->a[3] = groups;
            node_save(g, n, NS_X, xin);
            node_save(g, n, NS_MEAN, mean);
            node_save(g, n, NS_RSTD, rstd);
            node_save(g, n, NS_GAMMA, pw >= 0 ? gamma : TNONE);
            node_save(g, n, NS_BETA, pb >= 0 ? beta : TNONE);
        }
    }
    t_release(g, xin);
    t_release(g, mean);
    t_release(g, rstd);
    t_release(g, gamma);
    t_release(g, beta);
    return y;
}

tref nn_norm(struct gen *g, const char *name, tref x, int64_t channels, enum norm_kind kind, bool bias,
             int64_t groups)
{
    gen_push(g, "%s", name);
    if (g->mode == GEN_PARAMS) {
        param_add(g, "weight", channels, 1);
        if (bias && kind != NORM_RMSNORM && kind != NORM_RMSNORM_FUSED)
            param_add(g, "bias", channels, 1);
        gen_pop(g);
        return TNONE;
    }
    bool rms = kind == NORM_RMSNORM || kind == NORM_RMSNORM_FUSED;
    int32_t pw = param_take(g, "weight"), pb = bias && !rms ? param_take(g, "bias") : -1;
    const char *tag = g->params[pw].module;
    gen_pop(g);
    if (kind == NORM_RMSNORM)
        return rmsnorm(g, tag, x, pw, t_numel(g, x) / channels, channels);
    return fused_norm(g, tag, x, channels, kind, pw, pb, groups);
}

tref nn_rmsnorm_diffusers(struct gen *g, const char *name, tref x, int64_t channels)
{
    int32_t before = g->ntape;
    tref y = nn_norm(g, name, x, channels, NORM_RMSNORM, false, 0);
    struct node *n = g->ntape > before ? &g->tape[g->ntape - 1] : NULL;
    if (n && n->kind == N_NORM && n->out == y) /* hidden_states * rsqrt(...) keeps the input itself */
        node_save(g, n, RS_X, x);
    return y;
}

tref nn_layernorm_plain(struct gen *g, const char *name, tref x, int64_t channels)
{
    return g->mode == GEN_RUN ? fused_norm(g, gen_tag(g, name), x, channels, NORM_LAYERNORM, -1, -1, 0) : TNONE;
}

/* Where a norm's parameter gradient goes: the parameter's gradient, or a throwaway [C] tensor when the
 * parameter is frozen or absent (the fused kernels write both). */
static tref norm_pgrad(struct gen *g, int32_t p, int64_t c, enum dtype dt, const char *tag)
{
    return param_trains(g, p) ? pgrad_begin(g, p, dt) : t_new2(g, c, 1, dt, CAT_TEMP, tag);
}

static void norm_pgrad_end(struct gen *g, int32_t p, tref d)
{
    if (param_trains(g, p))
        pgrad_end(g, p, d);
    else
        t_release(g, d);
}

static void drop(struct gen *g, struct node *n, int slot)
{
    t_release(g, n->saved[slot]);
    n->saved[slot] = TNONE;
}

/* x in the dtype of `like`: a new reference, or a temporary cast (mixed-dtype norms only). */
static tref as_dtype_of(struct gen *g, tref x, tref like, const char *tag)
{
    if (g->t[x].dtype == g->t[like].dtype)
        return t_ref(g, x);
    tref c = t_like(g, x, dtype_of(g, like), CAT_TEMP, tag);
    kern_cast(g, x, c, tag);
    return c;
}

/* The composite's backward, op by op as autograd runs it (the forward's nodes in reverse). */
static void rmsnorm_backward(struct gen *g, struct node *n, tref *gy)
{
    const char *tag = n->tag;
    int64_t rows = n->a[1], c = n->a[2];
    tref go = *gy, a = n->saved[RS_A], rstd = n->saved[RS_RSTD];
    enum dtype od = dtype_of(g, go);
    int64_t all[3] = {t_numel(g, a), 1, 1}, over_rows[3] = {1, rows, c}, over_c[3] = {rows, c, 1};
    /* weight * c: the gradient of c, then of the weight (summed over rows) */
    tref w = as_dtype_of(g, n->saved[RS_W], go, tag), cst = as_dtype_of(g, n->saved[RS_C], go, tag);
    tref gc = full_like(g, go, od, CAT_TEMP, tag);
    kern_bcast(g, K_MUL_BCAST, go, w, gc, over_rows, 1.0f, 0.0f, tag);
    tref gwf = full_like(g, go, od, CAT_TEMP, tag);
    kern_bcast(g, K_MUL_BCAST, go, cst, gwf, all, 1.0f, 0.0f, tag);
    if (param_trains(g, n->param[0])) {
        tref dw = pgrad_begin(g, n->param[0], od);
        kern_bcast(g, K_REDUCE_SUM, gwf, TNONE, dw, over_rows, 1.0f, 0.0f, tag);
        pgrad_end(g, n->param[0], dw);
    }
    t_release(g, gwf);
    t_release(g, w);
    t_release(g, cst);
    drop(g, n, RS_C);
    t_release(g, *gy);
    *gy = TNONE;
    /* .to(input dtype)'s backward: the gradient in fp32 */
    tref gh = gc;
    if (od != DT_F32) {
        gh = full_like(g, go, DT_F32, CAT_TEMP, tag);
        kern_cast(g, gc, gh, tag);
        t_release(g, gc);
    }
    /* h * rsqrt: dh * h summed to rsqrt's shape, dh * rsqrt to h's */
    tref f1 = full_like(g, a, DT_F32, CAT_TEMP, tag);
    kern_bcast(g, K_MUL_BCAST, gh, a, f1, all, 1.0f, 0.0f, tag);
    tref f2 = full_like(g, a, DT_F32, CAT_TEMP, tag);
    kern_bcast(g, K_MUL_BCAST, gh, rstd, f2, over_c, 1.0f, 0.0f, tag);
    tref r1 = t_new2(g, rows, 1, DT_F32, CAT_TEMP, tag);
    kern_bcast(g, K_REDUCE_SUM, f1, TNONE, r1, over_c, 1.0f, 0.0f, tag);
    t_release(g, f1);
    t_release(g, gh);
    /* rsqrt_backward: -0.5 * grad * result.pow(3) */
    int64_t one[3] = {rows, 1, 1};
    tref r2 = t_new2(g, rows, 1, DT_F32, CAT_TEMP, tag);
    kern_scale(g, r1, r2, -0.5f, tag);
    tref r3 = t_new2(g, rows, 1, DT_F32, CAT_TEMP, tag);
    kern_bcast(g, K_MUL_BCAST, rstd, rstd, r3, one, 1.0f, 0.0f, tag);
    kern_bcast(g, K_MUL_BCAST, r3, rstd, r3, one, 1.0f, 0.0f, tag);
    tref r4 = t_new2(g, rows, 1, DT_F32, CAT_TEMP, tag);
    kern_bcast(g, K_MUL_BCAST, r2, r3, r4, one, 1.0f, 0.0f, tag);
    t_release(g, r3);
    t_release(g, r2);
    t_release(g, r1);
    drop(g, n, RS_RSTD);
    /* mean's backward (expand / C), then pow's: grad * (2 * h.pow(1)) */
    tref f3 = full_like(g, a, DT_F32, CAT_TEMP, tag);
    kern_bcast(g, K_EXPAND, r4, TNONE, f3, over_c, 1.0f / (float)c, 0.0f, tag);
    t_release(g, r4);
    tref f4 = full_like(g, a, DT_F32, CAT_TEMP, tag);
    kern_scale(g, a, f4, 1.0f, tag);
    tref f5 = full_like(g, a, DT_F32, CAT_TEMP, tag);
    kern_scale(g, f4, f5, 2.0f, tag);
    tref f6 = full_like(g, a, DT_F32, CAT_TEMP, tag);
    kern_bcast(g, K_MUL_BCAST, f3, f5, f6, all, 1.0f, 0.0f, tag);
    t_release(g, f5);
    t_release(g, f4);
    t_release(g, f3);
    drop(g, n, RS_A);
    tref f7 = full_like(g, f2, DT_F32, CAT_TEMP, tag); /* h's two gradients, summed out of place */
    kern_add(g, f2, f6, f7, 1.0f, 1.0f, tag);
    t_release(g, f2);
    t_release(g, f6);
    tref x = n->in[0];
    if (x == TNONE) {
        t_release(g, f7);
        return;
    }
    tref dx = f7;
    if (dtype_of(g, x) != DT_F32) { /* x.to(fp32)'s backward */
        dx = t_like(g, x, dtype_of(g, x), CAT_TEMP, tag);
        kern_cast(g, f7, dx, tag);
        t_release(g, f7);
    }
    grad_accumulate(g, x, dx);
}

void nn_norm_backward(struct gen *g, struct node *n, tref *gy)
{
    enum norm_kind kind = (enum norm_kind)n->a[0];
    if (kind == NORM_RMSNORM) {
        rmsnorm_backward(g, n, gy);
        return;
    }
    int64_t rows = n->a[1], c = n->a[2], groups = n->a[3];
    tref x = n->saved[NS_X];
    enum dtype dt = dtype_of(g, x);
    tref dy = as_dtype_of(g, *gy, x, n->tag);
    bool params = param_trains(g, n->param[0]) || param_trains(g, n->param[1]);
    if (kind == NORM_RMSNORM_FUSED) { /* _fused_rms_norm_backward: dx and dweight */
        int64_t d[2] = {rows, c};
        tref dx = t_like(g, x, dt, CAT_TEMP, n->tag);
        tref dw = norm_pgrad(g, n->param[0], c, dt, n->tag);
        tref ts[6] = {dy, x, n->saved[NS_GAMMA], n->saved[NS_RSTD], dx, dw};
        kern(g, K_RMSNORM_BWD, dt, d, 2, ts, 6, NULL, 0, n->tag);
        norm_pgrad_end(g, n->param[0], dw);
        t_release(g, dy);
        if (n->in[0] != TNONE)
            grad_accumulate(g, n->in[0], dx);
        else
            t_release(g, dx);
        return;
    }
    int64_t d[4] = {rows, c, 0, 0};
    int nd = 2;
    enum kernel_id kdx = K_LAYERNORM_BWD_DX, kp = K_LAYERNORM_BWD_PARAMS;
    if (kind == NORM_GROUPNORM) {
        d[0] = rows / groups;
        d[2] = t_numel(g, x) / (d[0] * c);
        d[3] = groups;
        nd = 4;
        kdx = K_GROUPNORM_BWD_DX;
        kp = K_GROUPNORM_BWD_PARAMS;
    }
    /* native_layer_norm_backward allocates dx, dgamma and dbeta, then the input's gradient is summed */
    tref dx = n->in[0] != TNONE ? t_like(g, x, dt, CAT_TEMP, n->tag) : TNONE;
    tref dw = params ? norm_pgrad(g, n->param[0], c, dt, n->tag) : TNONE;
    tref db = params ? norm_pgrad(g, n->param[1], c, dt, n->tag) : TNONE;
    struct scratch_list sl = {0};
    if (params && kind == NORM_LAYERNORM)
        scratch_layernorm_backward(g, rows, c, n->param[1] >= 0, dt, n->tag, &sl);
    if (dx != TNONE) {
        tref gamma = n->param[0] >= 0 ? t_ref(g, n->saved[NS_GAMMA]) : unit_vector(g, c, dt, n->tag);
        tref ts[6] = {dy, x, gamma, n->saved[NS_MEAN], n->saved[NS_RSTD], dx};
        kern(g, kdx, dt, d, nd, ts, 6, NULL, 0, n->tag);
        t_release(g, gamma);
    }
    if (params) {
        tref ts[6] = {dy, x, n->saved[NS_MEAN], n->saved[NS_RSTD], dw, db};
        kern(g, kp, dt, d, nd, ts, 6, NULL, 0, n->tag);
        scratch_free(g, &sl);
        norm_pgrad_end(g, n->param[0], dw);
        norm_pgrad_end(g, n->param[1], db);
    }
    t_release(g, dy);
    t_release(g, *gy);
    *gy = TNONE;
    for (int s = NS_X; s <= NS_BETA; s++)
        drop(g, n, s);
    if (dx != TNONE)
        grad_accumulate(g, n->in[0], dx);
}
