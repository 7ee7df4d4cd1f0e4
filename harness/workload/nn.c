/* nn.c: the layers model families are written in. Each call registers its parameters (GEN_PARAMS) or
 * emits its forward (GEN_RUN): outputs allocated, kernels launched (kernels.h's contract), temporaries
 * freed, and, when autograd records, a tape node holding exactly what PyTorch saves for backward.
 * nn_backward emits each node's backward. Under autocast, linear/conv/SDPA run in the autocast dtype
 * (weights and biases cast once per forward and cached), norms, softmax and losses in fp32.
 * Attention is in nn_attention.c, layout ops (transpose, expand, mean, slice, concat) in nn_layout.c. */
#include "workload/gen.h"
#include "workload/parallel_tensor.h"

#include <string.h>

#define LOSS_SCALE 65536.0f /* GradScaler's initial scale */

static enum dtype act_dt(const struct tensor *t)
{
    return (enum dtype)t->dtype;
}

bool nn_records(const struct gen *g, bool any_input_grad)
{
    return g->grad_enabled && any_input_grad && g->mode == GEN_RUN;
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
    const char *tag = gen_intern(g, leaf);
    tref x = t_new(g, dims, ndim, dt, CAT_INPUT, tag);
    kern_init_uniform(g, x, -1.0f, 1.0f, tag);
    return x;
}

tref nn_ids(struct gen *g, const int64_t *dims, int ndim, int64_t high, const char *leaf)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_intern(g, leaf);
    tref x = t_new(g, dims, ndim, DT_I64, CAT_INPUT, tag);
    kern_init_ids(g, x, high, tag);
    return x;
}

/* ---- casts (autocast and explicit .to()) ---- */

tref nn_cast(struct gen *g, const char *name, tref x, enum dtype dt)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    tref y = t_like(g, x, dt, CAT_ACTIVATION, tag);
    kern_cast(g, x, y, tag);
    if (nn_records(g, t_rg(g, x))) {
        struct node *n = tape_push(g, N_CAST, y, tag);
        if (n)
            node_input(g, n, 0, x);
    }
    return y;
}

/* The weight (or bias) a 16-bit op uses: the parameter itself, or its autocast cast, made once per
 * forward and cached. */
static tref weight_for(struct gen *g, int32_t p, enum dtype cd)
{
    struct param *pp = &g->params[p];
    if (g->t[pp->data].dtype == cd)
        return pp->data;
    if (pp->cast == TNONE) {
        pp->cast = t_like(g, pp->data, cd, CAT_ACTIVATION, pp->tag);
        kern_cast(g, pp->data, pp->cast, pp->module);
    }
    return pp->cast;
}

tref nn_param_as(struct gen *g, int32_t p, enum dtype dt)
{
    struct param *pp = &g->params[p];
    if (g->t[pp->data].dtype == dt)
        return t_ref(g, pp->data);
    tref c = t_like(g, pp->data, dt, CAT_ACTIVATION, pp->tag);
    kern_cast(g, pp->data, c, pp->module);
    return c;
}

void nn_end_autocast(struct gen *g)
{
    for (int32_t i = 0; i < g->nparams; i++) {
        if (g->params[i].cast != TNONE) {
            t_release(g, g->params[i].cast);
            g->params[i].cast = TNONE;
        }
    }
}

enum dtype nn_compute_dtype(const struct gen *g, tref x)
{
    return g->autocast ? g->spec.autocast_dtype : (enum dtype)g->t[x].dtype;
}

tref nn_as_dtype(struct gen *g, const char *name, tref x, enum dtype dt)
{
    if (g->t[x].dtype == dt)
        return t_ref(g, x);
    return nn_cast(g, name, x, dt);
}

/* ---- linear ---- */

/* y [m, out] += the bias in dtype dt (its cast made once per forward). */
static void bias_add(struct gen *g, const char *tag, tref y, int32_t pb, enum dtype dt, int64_t m, int64_t out_f)
{
    if (pb < 0)
        return;
    tref b = weight_for(g, pb, dt);
    int64_t d[3] = {m, out_f, 1};
    tref ts[3] = {y, b, y};
    kern(g, K_BIAS_ADD, dt, d, 3, ts, 3, NULL, 0, tag);
}

/* The tape node of a linear layer y = x W^T (+ b), when autograd records it; the caller saves tensors. */
static struct node *linear_node(struct gen *g, const char *tag, tref y, tref x, int32_t pw, int32_t pb, int64_t m)
{
    if (!nn_records(g, t_rg(g, x) || param_trains(g, pw) || param_trains(g, pb)))
        return NULL;
    struct node *n = tape_push(g, N_LINEAR, y, tag);
    if (n) {
        node_input(g, n, 0, x);
        n->param[0] = pw;
        n->param[1] = pb;
        n->a[0] = m;
        n->a[1] = g->params[pw].dims[0];
        n->a[2] = g->params[pw].dims[1];
    }
    return n;
}

/* Linear8bitLt: bnb.matmul is a custom autograd Function, so autocast leaves its input alone. */
static tref int8_linear_apply(struct gen *g, const char *tag, tref x, int32_t pw, int32_t pb)
{
    tref saved = TNONE;
    tref y = quant_int8_forward(g, tag, x, pw, &saved);
    int64_t m = t_numel(g, x) / g->params[pw].dims[1];
    bias_add(g, tag, y, pb, (enum dtype)g->t[y].dtype, m, g->params[pw].dims[0]); /* int8_scaled_mm's bias */
    struct node *n = linear_node(g, tag, y, x, pw, pb, m);
    if (n)
        node_save(g, n, 2, saved); /* ctx.tensors = (CAt, subA, A) */
    return y;
}

/* A 4-bit weight (quant.c) is dequantized for this matmul only; MatMul4Bit saves the quantized
 * weight, already resident, and not the input (ctx.tensors = (None, B)); Linear4bit casts the input
 * to its compute dtype and the output back. */
static tref linear_apply(struct gen *g, const char *tag, tref x, int32_t pw, int32_t pb)
{
    bool quant = g->params[pw].quant;
    if (quant && g->spec.quant.type == QUANT_INT8)
        return int8_linear_apply(g, tag, x, pw, pb);
    enum dtype cd = quant && !g->autocast ? g->spec.quant.compute_dtype : nn_compute_dtype(g, x);
    tref xin = nn_as_dtype(g, "autocast", x, cd);
    tref w = quant ? quant_weight(g, pw, cd, tag) : weight_for(g, pw, cd);
    int64_t out_f = g->params[pw].dims[0], in_f = g->params[pw].dims[1];
    tref y = new_act(g, xin, out_f, cd, tag);
    int64_t m = t_numel(g, xin) / in_f;
    kern_gemm(g, m, out_f, in_f, false, true, xin, w, y, tag);
    if (quant)
        t_release(g, w);
    bias_add(g, tag, y, pb, cd, m, out_f);
    struct node *n = linear_node(g, tag, y, xin, pw, pb, m);
    if (n) {
        if (param_trains(g, pw))
            node_save(g, n, 0, xin); /* for dW */
        if (t_rg(g, xin) && !quant)
            node_save(g, n, 1, w);   /* for dX (a param, or its autocast cast) */
    }
    t_release(g, xin);
    /* Linear4bit: out.to(inp_dtype). Not under autocast: the attention core reads a KV cache in the
     * dtype it was written in, so the projections stay in the autocast dtype there (an fp32 input, as
     * prepare_kbit's fp32 norms give, would make them fp32 tensors autocast casts back) */
    if (quant && !g->autocast && g->t[y].dtype != g->t[x].dtype) {
        tref c = nn_cast(g, "to_input_dtype", y, (enum dtype)g->t[x].dtype);
        t_release(g, y);
        y = c;
    }
    return y;
}

tref nn_linear(struct gen *g, const char *name, tref x, int64_t in, int64_t out, bool bias)
{
    gen_push(g, "%s", name);
    bool lora = lora_wanted(g);
    if (g->mode == GEN_PARAMS) {
        int32_t w = param_add(g, "weight", out, in);
        if (w >= 0 && quant_applies(g))
            g->params[w].quant = true;
        if (bias)
            param_add(g, "bias", out, 1);
        if (lora)
            lora_register(g, in, out);
        gen_pop(g);
        return TNONE;
    }
    int32_t pw = param_take(g, "weight"), pb = bias ? param_take(g, "bias") : -1;
    const char *tag = g->params[pw].module;
    tref y = linear_apply(g, tag, x, pw, pb);
    if (lora)
        y = lora_forward(g, x, y, pw, pb);
    gen_pop(g);
    return y;
}

tref nn_linear_param(struct gen *g, const char *tag, tref x, int32_t weight)
{
    return linear_apply(g, tag, x, weight, -1);
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
        bool quant = g->params[n->param[0]].quant; /* MatMul4Bit.backward dequantizes again */
        tref w = quant ? quant_weight(g, n->param[0], cd, n->tag) : n->saved[1];
        tref dx = t_like(g, n->in[0], cd, CAT_TEMP, n->tag);
        kern_gemm(g, m, in_f, out_f, false, false, gy, w, dx, n->tag);
        if (quant)
            t_release(g, w);
        grad_accumulate(g, n->in[0], dx);
    }
    if (param_trains(g, n->param[0])) {
        tref dw = pgrad_begin(g, n->param[0], cd);
        kern_gemm(g, out_f, in_f, m, true, false, gy, n->saved[0], dw, n->tag);
        pgrad_end(g, n->param[0], dw);
    }
    if (param_trains(g, n->param[1])) {
        tref db = pgrad_begin(g, n->param[1], cd);
        int64_t d[3] = {m, out_f, 1};
        tref ts[2] = {gy, db};
        kern(g, K_BIAS_BWD, cd, d, 3, ts, 2, NULL, 0, n->tag);
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
    gen_push(g, "%s", name);
    int32_t p = shared >= 0 ? shared : param_take(g, "weight");
    const char *tag = gen_tag(g, NULL);
    gen_pop(g);
    tref w = g->params[p].data;
    int64_t dims[TMAX_DIMS];
    int nd = g->t[ids].ndim < TMAX_DIMS ? g->t[ids].ndim : TMAX_DIMS - 1;
    memcpy(dims, g->t[ids].dims, sizeof dims);
    dims[nd] = dim;
    tref y = t_new(g, dims, nd + 1, act_dt(&g->t[w]), CAT_ACTIVATION, tag);
    int64_t d[3] = {t_numel(g, ids), g->params[p].dims[0], dim};
    tref ts[3] = {ids, w, y};
    kern(g, K_EMBEDDING_FWD, act_dt(&g->t[w]), d, 3, ts, 3, NULL, 0, tag);
    if (nn_records(g, param_trains(g, p))) {
        struct node *n = tape_push(g, N_EMBED, y, tag);
        if (n) {
            n->param[0] = p;
            memcpy(n->a, d, sizeof d);
            node_save(g, n, 0, ids);
        }
    }
    return y;
}

int32_t nn_embedding_param(struct gen *g, const char *name, int64_t rows, int64_t dim)
{
    gen_push(g, "%s", name);
    int32_t p = g->mode == GEN_PARAMS ? param_add(g, "weight", rows, dim) : param_take(g, "weight");
    gen_pop(g);
    return p;
}

static void embed_backward(struct gen *g, const struct node *n, tref gy)
{
    struct scratch_list sl = {0};
    scratch_embedding_backward(g, n->a[0], n->a[1], n->a[2], n->tag, &sl);
    tref dw = pgrad_begin(g, n->param[0], act_dt(&g->t[gy]));
    tref ts[3] = {n->saved[0], gy, dw};
    kern(g, K_EMBEDDING_BWD, act_dt(&g->t[gy]), n->a, 3, ts, 3, NULL, 0, n->tag);
    scratch_free(g, &sl);
    pgrad_end(g, n->param[0], dw);
}

/* ---- activations and dropout ---- */

static enum kernel_id act_kernel(enum act_kind act, bool backward)
{
    switch (act) {
    case ACT_SILU: return backward ? K_SILU_BWD : K_SILU_FWD;
    case ACT_QUICK_GELU: return backward ? K_QUICK_GELU_BWD : K_QUICK_GELU_FWD;
    case ACT_RELU: return backward ? K_RELU_BWD : K_RELU_FWD;
    default: return backward ? K_GELU_BWD : K_GELU_FWD;
    }
}

static bool tanh_form(enum act_kind act)
{
    return act == ACT_GELU_TANH || act == ACT_GELU_NEW;
}

/* transformers' NewGELUActivation (activations.py):
 * 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))
 * Autograd saves the input (PowBackward0), the tanh output (TanhBackward0 saves its result) and both
 * operands of the last multiply (0.5 * input and 1 + tanh); the five other results are temporaries.
 * The output is the tanh-form GELU the fused kernel computes; 0.5 * x and the cube chain are computed,
 * the tanh and 1 + tanh tensors are allocated as PyTorch allocates them but not written: nothing
 * here reads them (the backward's result comes from the fused GELU backward). */
static tref gelu_new(struct gen *g, const char *tag, tref x, tref *saved)
{
    enum dtype dt = act_dt(&g->t[x]);
    int64_t n = t_numel(g, x), all[3] = {n, 1, 1};
    tref half = t_like(g, x, dt, CAT_ACTIVATION, tag);
    kern_scale(g, x, half, 0.5f, tag);
    tref cube = t_like(g, x, dt, CAT_ACTIVATION, tag);
    kern_bcast(g, K_MUL_BCAST, x, x, cube, all, 1.0f, 0.0f, tag);
    kern_bcast(g, K_MUL_BCAST, cube, x, cube, all, 1.0f, 0.0f, tag);
    tref t1 = t_like(g, x, dt, CAT_ACTIVATION, tag);
    kern_scale(g, cube, t1, 0.044715f, tag);
    t_release(g, cube);
    tref t2 = t_like(g, x, dt, CAT_ACTIVATION, tag);
    kern_add(g, x, t1, t2, 1.0f, 1.0f, tag);
    t_release(g, t1);
    tref t3 = t_like(g, x, dt, CAT_ACTIVATION, tag);
    kern_scale(g, t2, t3, 0.7978845608f, tag); /* sqrt(2 / pi) */
    t_release(g, t2);
    tref th = t_like(g, x, dt, CAT_ACTIVATION, tag);
    t_release(g, t3);
    tref onep = t_like(g, x, dt, CAT_ACTIVATION, tag);
    tref y = t_like(g, x, dt, CAT_ACTIVATION, tag);
    int64_t d[2] = {n, 1};
    tref ts[2] = {x, y};
    kern(g, K_GELU_FWD, dt, d, 2, ts, 2, NULL, 0, tag);
    saved[0] = half;
    saved[1] = th;
    saved[2] = onep;
    return y;
}

tref nn_act(struct gen *g, const char *name, tref x, enum act_kind act)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    tref extra[3] = {TNONE, TNONE, TNONE}, y;
    if (act == ACT_GELU_NEW) {
        y = gelu_new(g, tag, x, extra);
    } else {
        y = t_like(g, x, act_dt(&g->t[x]), CAT_ACTIVATION, tag);
        int64_t d[2] = {t_numel(g, x), tanh_form(act)};
        tref ts[2] = {x, y};
        kern(g, act_kernel(act, false), act_dt(&g->t[x]), d, 2, ts, 2, NULL, 0, tag);
    }
    if (nn_records(g, t_rg(g, x))) {
        struct node *n = tape_push(g, N_ACT, y, tag);
        if (n) {
            node_input(g, n, 0, x);
            node_save(g, n, 0, x);
            for (int i = 0; i < 3; i++)
                node_save(g, n, 1 + i, extra[i]);
            n->a[0] = act;
        }
    }
    for (int i = 0; i < 3; i++)
        t_release(g, extra[i]);
    return y;
}

/* NewGELUActivation's backward, node by node as the engine runs them (the last multiply's two
 * gradients, tanh's, the scalings, pow's x.pow(2) * 3 * grad, and the three gradients of the input
 * summed out of place). The fused GELU backward writes the input's gradient into the first
 * temporary that outlives the incoming gradient, and the sums carry it to the result. */
static void gelu_new_backward(struct gen *g, struct node *n, tref *gy)
{
    const char *tag = n->tag;
    tref x = n->saved[0];
    enum dtype dt = act_dt(&g->t[*gy]);
    int64_t d[2] = {t_numel(g, x), 1};
    tref gb = t_like(g, x, dt, CAT_TEMP, tag); /* grad * (0.5 x): the gradient of 1 + tanh */
    tref ga = t_like(g, x, dt, CAT_TEMP, tag); /* grad * (1 + tanh): the gradient of 0.5 x */
    tref ts[3] = {x, *gy, ga};
    kern(g, K_GELU_BWD, dt, d, 2, ts, 3, NULL, 0, tag);
    t_release(g, *gy);
    *gy = TNONE;
    static const int last_mul[2] = {3, 1}; /* the last multiply's operands, 1 + tanh and 0.5 x */
    for (int i = 0; i < 2; i++) {
        t_release(g, n->saved[last_mul[i]]);
        n->saved[last_mul[i]] = TNONE;
    }
    tref gt = t_like(g, x, dt, CAT_TEMP, tag); /* tanh_backward */
    t_release(g, gb);
    t_release(g, n->saved[2]);
    n->saved[2] = TNONE;
    tref gu = t_like(g, x, dt, CAT_TEMP, tag); /* * sqrt(2 / pi) */
    t_release(g, gt);
    tref gp = t_like(g, x, dt, CAT_TEMP, tag); /* * 0.044715 */
    tref sq = t_like(g, x, dt, CAT_TEMP, tag); /* pow_backward: self.pow(2), * 3, grad * */
    tref sq3 = t_like(g, x, dt, CAT_TEMP, tag);
    tref gx3 = t_like(g, x, dt, CAT_TEMP, tag);
    t_release(g, sq3);
    t_release(g, sq);
    t_release(g, gp);
    t_release(g, n->saved[0]);
    n->saved[0] = TNONE;
    tref s1 = t_like(g, x, dt, CAT_TEMP, tag);
    t_release(g, gu);
    t_release(g, gx3);
    tref ghalf = t_like(g, x, dt, CAT_TEMP, tag); /* * 0.5 */
    kern_scale(g, ga, ghalf, 1.0f, tag);
    t_release(g, ga);
    tref dx = t_like(g, x, dt, CAT_TEMP, tag);
    kern_add(g, ghalf, s1, dx, 1.0f, 0.0f, tag);
    t_release(g, s1);
    t_release(g, ghalf);
    grad_accumulate(g, n->in[0], dx);
}

void nn_act_backward(struct gen *g, struct node *n, tref *gy)
{
    if (n->a[0] == ACT_GELU_NEW) {
        gelu_new_backward(g, n, gy);
        return;
    }
    enum dtype dt = act_dt(&g->t[*gy]);
    tref dx = t_like(g, *gy, dt, CAT_TEMP, n->tag);
    int64_t d[2] = {t_numel(g, *gy), tanh_form((enum act_kind)n->a[0])};
    tref ts[3] = {n->saved[0], *gy, dx};
    kern(g, act_kernel((enum act_kind)n->a[0], true), dt, d, 2, ts, 3, NULL, 0, n->tag);
    grad_accumulate(g, n->in[0], dx);
}

tref nn_dropout(struct gen *g, const char *name, tref x, float p)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    if (p <= 0 || !g->training)
        return t_ref(g, x);
    const char *tag = gen_tag(g, name);
    tref y = t_like(g, x, act_dt(&g->t[x]), CAT_ACTIVATION, tag); /* native_dropout: output, then mask */
    tref mask = t_like(g, x, DT_U8, CAT_ACTIVATION, tag);
    int64_t d[2] = {t_numel(g, x), (int64_t)g->t[y].id};
    tref ts[3] = {x, y, mask};
    kern(g, K_DROPOUT_FWD, act_dt(&g->t[x]), d, 2, ts, 3, &p, 1, tag);
    if (nn_records(g, t_rg(g, x))) {
        struct node *n = tape_push(g, N_DROPOUT, y, tag);
        if (n) {
            node_input(g, n, 0, x);
            node_save(g, n, 0, mask);
            n->f = p;
        }
    }
    t_release(g, mask);
    return y;
}

/* ---- binary ops with broadcasting ---- */

/* Splits big's shape into [outer, repeat, inner] where small (aligned to the left if its dims are a
 * prefix of big's, else to the right) has size 1 exactly along the middle run. False if it cannot. */
bool nn_bcast_split(const struct gen *g, tref big, tref small, int64_t *ori)
{
    const struct tensor *b = &g->t[big], *s = &g->t[small];
    int64_t sd[TMAX_DIMS];
    int nb = b->ndim, ns = s->ndim, lead = nb - ns;
    bool prefix = ns <= nb;
    for (int i = 0; i < ns && prefix; i++)
        prefix = s->dims[i] == b->dims[i];
    for (int i = 0; i < nb; i++) {
        int j = prefix ? i : i - lead;
        sd[i] = j >= 0 && j < ns ? s->dims[j] : 1;
    }
    int first = -1, last = -1;
    for (int i = 0; i < nb; i++) {
        if (sd[i] == b->dims[i])
            continue;
        if (sd[i] != 1 || (last >= 0 && last != i - 1))
            return false;
        if (first < 0)
            first = i;
        last = i;
    }
    ori[0] = ori[1] = ori[2] = 1;
    for (int i = 0; i < nb; i++)
        ori[first < 0 || i < first ? 0 : i <= last ? 1 : 2] *= b->dims[i];
    return true;
}

/* y = x op y (op: add with beta, or mul), promoted dtype; a lower-precision full-size operand is cast
 * straight into the output, which the kernel then updates in place (PyTorch mixes dtypes inside one
 * kernel, without a temporary). */
static tref binary(struct gen *g, enum node_kind kind, const char *name, tref x, tref y, float beta)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    bool x_big = t_numel(g, x) >= t_numel(g, y);
    tref big = x_big ? x : y, small = x_big ? y : x;
    enum dtype zd = gen_promote(act_dt(&g->t[x]), act_dt(&g->t[y]));
    tref z = t_like(g, big, zd, CAT_ACTIVATION, tag);
    int64_t ori[3] = {t_numel(g, big), 1, 1};
    if (t_numel(g, small) != t_numel(g, big) && !nn_bcast_split(g, big, small, ori)) {
        if (!g->failed)
            err_set(g->e, ERR_INTERNAL, "workload: %s: operands do not broadcast", tag);
        g->failed = 1;
        return z;
    }
    tref a = big;
    if (act_dt(&g->t[big]) != zd) {
        kern_cast(g, big, z, tag);
        a = z;
    }
    tref b = act_dt(&g->t[small]) == zd ? t_ref(g, small) : t_like(g, small, zd, CAT_TEMP, tag);
    if (b != small)
        kern_cast(g, small, b, tag);
    float alpha = x_big ? 1.0f : beta, bb = x_big ? beta : 1.0f;
    kern_bcast(g, kind == N_MUL ? K_MUL_BCAST : K_ADD_BCAST, a, b, z, ori, alpha, bb, tag);
    t_release(g, b);
    if (nn_records(g, t_rg(g, x) || t_rg(g, y))) {
        struct node *n = tape_push(g, kind, z, tag);
        if (n) {
            node_input(g, n, 0, x);
            node_input(g, n, 1, y);
            n->f = beta;
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
    return binary(g, N_ADD, name, x, y, 1.0f);
}

tref nn_sub(struct gen *g, const char *name, tref x, tref y)
{
    return binary(g, N_ADD, name, x, y, -1.0f);
}

tref nn_mul(struct gen *g, const char *name, tref x, tref y)
{
    return binary(g, N_MUL, name, x, y, 1.0f);
}

tref nn_scale(struct gen *g, const char *name, tref x, float alpha)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    tref y = t_like(g, x, act_dt(&g->t[x]), CAT_ACTIVATION, tag);
    kern_scale(g, x, y, alpha, tag);
    if (nn_records(g, t_rg(g, x))) {
        struct node *n = tape_push(g, N_SCALE, y, tag);
        if (n) {
            node_input(g, n, 0, x);
            n->f = alpha;
        }
    }
    return y;
}

tref nn_grad_to_shape(struct gen *g, tref x, tref gy, const char *tag)
{
    if (t_numel(g, x) == t_numel(g, gy) && g->t[x].dtype == g->t[gy].dtype)
        return t_ref(g, gy);
    if (t_numel(g, x) == t_numel(g, gy)) {
        tref dx = t_like(g, x, act_dt(&g->t[x]), CAT_TEMP, tag);
        kern_cast(g, gy, dx, tag);
        return dx;
    }
    tref dx = t_like(g, x, act_dt(&g->t[gy]), CAT_TEMP, tag);
    int64_t ori[3];
    nn_bcast_split(g, gy, x, ori);
    kern_bcast(g, K_REDUCE_SUM, gy, TNONE, dx, ori, 1.0f, 0.0f, tag);
    return dx;
}

static void elementwise_backward(struct gen *g, const struct node *n, tref gy)
{
    enum dtype dt = act_dt(&g->t[gy]);
    switch (n->kind) {
    case N_ADD:
        for (int i = 0; i < 2; i++) {
            if (n->in[i] == TNONE)
                continue;
            if (i == 1 && n->f != 1.0f) { /* x - y: y's gradient is -gy */
                tref neg = t_like(g, gy, dt, CAT_TEMP, n->tag);
                kern_scale(g, gy, neg, n->f, n->tag);
                grad_accumulate(g, n->in[i], nn_grad_to_shape(g, n->in[i], neg, n->tag));
                t_release(g, neg);
            } else {
                grad_accumulate(g, n->in[i], nn_grad_to_shape(g, n->in[i], gy, n->tag));
            }
        }
        break;
    case N_SCALE: {
        tref dx = t_like(g, gy, dt, CAT_TEMP, n->tag);
        kern_scale(g, gy, dx, n->f, n->tag);
        grad_accumulate(g, n->in[0], dx);
        break;
    }
    case N_MUL:
        for (int i = 0; i < 2; i++) {
            if (n->in[i] == TNONE)
                continue;
            tref other = n->saved[1 - i];
            tref full = t_like(g, gy, dt, CAT_TEMP, n->tag);
            tref o = act_dt(&g->t[other]) == dt ? t_ref(g, other) : t_like(g, other, dt, CAT_TEMP, n->tag);
            if (o != other)
                kern_cast(g, other, o, n->tag);
            int64_t ori[3] = {t_numel(g, gy), 1, 1};
            if (t_numel(g, o) != t_numel(g, gy))
                nn_bcast_split(g, gy, o, ori);
            kern_bcast(g, K_MUL_BCAST, gy, o, full, ori, 1.0f, 0.0f, n->tag);
            t_release(g, o);
            tref dx = nn_grad_to_shape(g, n->in[i], full, n->tag);
            t_release(g, full);
            grad_accumulate(g, n->in[i], dx);
        }
        break;
    case N_CAST: {
        tref x = n->in[0];
        tref dx = t_like(g, gy, act_dt(&g->t[x]), CAT_TEMP, n->tag);
        kern_cast(g, gy, dx, n->tag);
        grad_accumulate(g, x, dx);
        break;
    }
    case N_DROPOUT: {
        tref dx = t_like(g, gy, dt, CAT_TEMP, n->tag);
        int64_t d[1] = {t_numel(g, gy)};
        tref ts[3] = {gy, n->saved[0], dx};
        kern(g, K_DROPOUT_BWD, dt, d, 1, ts, 3, &n->f, 1, n->tag);
        grad_accumulate(g, n->in[0], dx);
        break;
    }
    default:
        break;
    }
}

/* ---- convolution and upsampling ---- */

/* "same" padding for odd kernels; none for even ones (a patch embedding: kernel = stride) */
tref nn_conv(struct gen *g, const char *name, tref x, int64_t cin, int64_t cout, int k, int stride, bool bias)
{
    return nn_conv_pad(g, name, x, cin, cout, k, stride, k % 2 ? k / 2 : 0, bias);
}

tref nn_conv_pad(struct gen *g, const char *name, tref x, int64_t cin, int64_t cout, int k, int stride, int pad,
                 bool bias)
{
    gen_push(g, "%s", name);
    if (g->mode == GEN_PARAMS) {
        param_add(g, "weight", cout, cin * k * k);
        if (bias)
            param_add(g, "bias", cout, 1);
        gen_pop(g);
        return TNONE;
    }
    int32_t pw = param_take(g, "weight"), pb = bias ? param_take(g, "bias") : -1;
    const char *tag = g->params[pw].module;
    gen_pop(g);
    enum dtype cd = nn_compute_dtype(g, x);
    tref xin = nn_as_dtype(g, "autocast", x, cd);
    tref w = weight_for(g, pw, cd);
    const struct tensor *xt = &g->t[xin];
    int64_t p = (xt->dims[2] + 2 * pad - k) / stride + 1, q = (xt->dims[3] + 2 * pad - k) / stride + 1;
    int64_t dims[4] = {xt->dims[0], cout, p, q};
    int64_t d[8] = {xt->dims[0], cin, xt->dims[2], xt->dims[3], cout, k, stride, pad};
    tref y = t_new(g, dims, 4, cd, CAT_ACTIVATION, tag); /* may move the slab: xt is stale after this */
    tref ts[3] = {xin, w, y};
    kern(g, K_CONV2D_FWD, cd, d, 8, ts, 3, NULL, 0, tag);
    if (pb >= 0) {
        int64_t bd[3] = {d[0], cout, p * q};
        tref tb[3] = {y, weight_for(g, pb, cd), y};
        kern(g, K_BIAS_ADD, cd, bd, 3, tb, 3, NULL, 0, tag);
    }
    bool wt = param_trains(g, pw);
    if (nn_records(g, t_rg(g, xin) || wt || param_trains(g, pb))) {
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
        kern(g, K_CONV2D_BWD_DATA, cd, n->a, 8, ts, 3, NULL, 0, n->tag);
        grad_accumulate(g, n->in[0], dx);
    }
    if (param_trains(g, n->param[0])) {
        tref dw = pgrad_begin(g, n->param[0], cd);
        tref ts[3] = {n->saved[0], gy, dw};
        kern(g, K_CONV2D_BWD_FILTER, cd, n->a, 8, ts, 3, NULL, 0, n->tag);
        pgrad_end(g, n->param[0], dw);
    }
    if (param_trains(g, n->param[1])) {
        tref db = pgrad_begin(g, n->param[1], cd);
        int64_t bd[3] = {n->a[0], n->a[4], t_numel(g, gy) / (n->a[0] * n->a[4])};
        tref ts[2] = {gy, db};
        kern(g, K_BIAS_BWD, cd, bd, 3, ts, 2, NULL, 0, n->tag);
        pgrad_end(g, n->param[1], db);
    }
}

tref nn_upsample(struct gen *g, const char *name, tref x)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    struct tensor *xt = &g->t[x];
    int64_t dims[4] = {xt->dims[0], xt->dims[1], xt->dims[2] * 2, xt->dims[3] * 2};
    tref y = t_new(g, dims, 4, act_dt(xt), CAT_ACTIVATION, tag);
    tref ts[2] = {x, y};
    kern(g, K_UPSAMPLE2X_FWD, act_dt(&g->t[y]), g->t[x].dims, 4, ts, 2, NULL, 0, tag);
    if (nn_records(g, t_rg(g, x))) {
        struct node *n = tape_push(g, N_UPSAMPLE, y, tag);
        if (n)
            node_input(g, n, 0, x);
    }
    return y;
}

static void upsample_backward(struct gen *g, const struct node *n, tref gy)
{
    tref x = n->in[0];
    tref dx = t_like(g, x, act_dt(&g->t[gy]), CAT_TEMP, n->tag);
    tref ts[2] = {gy, dx};
    kern(g, K_UPSAMPLE2X_BWD, act_dt(&g->t[gy]), g->t[x].dims, 4, ts, 2, NULL, 0, n->tag);
    grad_accumulate(g, x, dx);
}

/* ---- loss ---- */

/* log_softmax (saved, as PyTorch saves it) + nll_loss with the mean: the kernel gives each row's
 * loss and log-sum-exp; logp = logits - lse; the saved [rows] stats hold the log-sum-exp of logp
 * (zero), so the backward kernel recovers softmax(logits) from logp. */
tref nn_cross_entropy(struct gen *g, const char *name, tref logits, tref labels)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    enum dtype dt = g->autocast ? DT_F32 : act_dt(&g->t[logits]);
    tref x = nn_as_dtype(g, "upcast", logits, dt);
    int64_t vocab = g->t[x].dims[g->t[x].ndim - 1];
    int64_t d[2] = {t_numel(g, x) / vocab, vocab};
    /* log_softmax's output (saved), then nll_loss's output and total_weight (lse stands for the latter:
     * the kernels need each row's) */
    tref logp = t_like(g, x, dt, CAT_ACTIVATION, tag);
    int64_t one[1] = {1};
    tref loss = t_new(g, one, 1, DT_F32, CAT_ACTIVATION, tag);
    tref lse = t_new2(g, d[0], 1, DT_F32, CAT_ACTIVATION, tag);
    tref row_loss = t_new2(g, d[0], 1, DT_F32, CAT_TEMP, tag);
    tref tl[4] = {x, labels, row_loss, lse};
    kern(g, K_CROSS_ENTROPY_FWD, dt, d, 2, tl, 4, NULL, 0, tag);
    tref shift = lse;
    if (dt != DT_F32) {
        shift = t_like(g, lse, dt, CAT_TEMP, tag);
        kern_cast(g, lse, shift, tag);
    } else {
        t_ref(g, lse);
    }
    int64_t ori[3] = {d[0], d[1], 1};
    kern_bcast(g, K_ADD_BCAST, x, shift, logp, ori, 1.0f, -1.0f, tag);
    t_release(g, shift);
    kern_fill(g, lse, 0.0f, tag);
    int64_t mean[3] = {1, d[0], 1};
    kern_bcast(g, K_REDUCE_SUM, row_loss, TNONE, loss, mean, 1.0f / (float)d[0], 0.0f, tag);
    t_release(g, row_loss);
    if (nn_records(g, t_rg(g, x))) {
        struct node *n = tape_push(g, N_CE, loss, tag);
        if (n) {
            node_input(g, n, 0, x);
            node_save(g, n, 0, logp);
            node_save(g, n, 1, labels);
            node_save(g, n, 2, lse);
            n->a[0] = d[0];
            n->a[1] = d[1];
        }
    }
    t_release(g, logp);
    t_release(g, lse);
    t_release(g, x);
    return loss;
}

static void ce_backward(struct gen *g, const struct node *n, tref gy)
{
    tref logp = n->saved[0];
    enum dtype dt = act_dt(&g->t[logp]);
    tref dlogp = t_like(g, logp, dt, CAT_TEMP, n->tag); /* nll_loss backward's one-hot gradient */
    tref dx = t_like(g, logp, dt, CAT_TEMP, n->tag);
    /* dloss is 1 (times the GradScaler scale): the generator knows it, the kernel takes a scalar */
    float scale = (g->spec.loss_scaling ? LOSS_SCALE : 1.0f) / (float)n->a[0];
    tref ts[4] = {logp, n->saved[1], n->saved[2], dx};
    kern(g, K_CROSS_ENTROPY_BWD, dt, n->a, 2, ts, 4, &scale, 1, n->tag);
    t_release(g, dlogp);
    grad_accumulate(g, n->in[0], dx);
}

float nn_loss_scale(void)
{
    return LOSS_SCALE;
}

/* ---- gated units ---- */

tref nn_glu(struct gen *g, const char *name, tref p, enum act_kind act)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    int64_t half = g->t[p].dims[g->t[p].ndim - 1] / 2;
    tref a = new_act(g, p, half, act_dt(&g->t[p]), tag); /* gelu(gate), saved by the product */
    tref y = new_act(g, p, half, act_dt(&g->t[p]), tag);
    int64_t d[4] = {t_numel(g, p) / (2 * half), half, 1, act == ACT_GELU_TANH};
    tref ts[3] = {p, p, y};
    kern(g, act == ACT_SILU ? K_SWIGLU_FWD : K_GEGLU_FWD, act_dt(&g->t[p]), d, act == ACT_SILU ? 3 : 4, ts, 3, NULL,
         0, tag);
    if (nn_records(g, t_rg(g, p))) {
        struct node *n = tape_push(g, N_GLU, y, tag);
        if (n) {
            node_input(g, n, 0, p);
            node_save(g, n, 0, p);
            node_save(g, n, 1, a);
            memcpy(n->a, d, sizeof d);
            n->a[4] = act;
        }
    }
    t_release(g, a);
    return y;
}

static void glu_backward(struct gen *g, const struct node *n, tref gy)
{
    enum dtype dt = act_dt(&g->t[gy]);
    tref da = t_like(g, gy, dt, CAT_TEMP, n->tag); /* the product's gradient to gelu(gate) */
    tref dp = t_like(g, n->saved[0], dt, CAT_TEMP, n->tag);
    tref ts[5] = {n->saved[0], n->saved[0], gy, dp, dp};
    bool silu = n->a[4] == ACT_SILU;
    kern(g, silu ? K_SWIGLU_BWD : K_GEGLU_BWD, dt, n->a, silu ? 3 : 4, ts, 5, NULL, 0, n->tag);
    t_release(g, da);
    grad_accumulate(g, n->in[0], dp);
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
    n->ck.scope = gen_intern(g, g->scope);
    n->ck.autocast = g->autocast;
    node_input(g, n, 0, x);
    node_save(g, n, 0, x);
    for (int i = 0; i < CKPT_EXTRAS; i++) {
        node_input(g, n, 1 + i, c->extra[i]);
        if (c->extra[i] != TNONE)
            node_save(g, n, 1 + i, c->extra[i]);
    }
    return y;
}

void nn_backward(struct gen *g, struct node *n, tref *gy)
{
    switch ((enum node_kind)n->kind) {
    case N_LINEAR:
        linear_backward(g, n, *gy);
        break;
    case N_EMBED:
        embed_backward(g, n, *gy);
        break;
    case N_NORM:
        nn_norm_backward(g, n, gy);
        break;
    case N_CONV:
        conv_backward(g, n, *gy);
        break;
    case N_ATTN:
        nn_attention_backward(g, n, gy);
        break;
    case N_ROPE:
        nn_rotary_backward(g, n, gy);
        break;
    case N_CE:
        ce_backward(g, n, *gy);
        break;
    case N_FUSED_CE:
        nn_fused_ce_backward(g, n, *gy);
        break;
    case N_GATED:
        nn_gated_compiled_backward(g, n, *gy);
        break;
    case N_SOFTMAX:
    case N_INDEX_ADD:
        nn_moe_backward(g, n, *gy);
        break;
    case N_UPSAMPLE:
        upsample_backward(g, n, *gy);
        break;
    case N_MEAN:
    case N_TRANSPOSE:
    case N_EXPAND:
    case N_SLICE:
    case N_CONCAT:
        nn_layout_backward(g, n, *gy);
        break;
    case N_ACT:
        nn_act_backward(g, n, gy);
        break;
    case N_DROPOUT:
    case N_ADD:
    case N_MUL:
    case N_CAST:
    case N_SCALE:
        elementwise_backward(g, n, *gy);
        break;
    case N_GLU:
        glu_backward(g, n, *gy);
        break;
    case N_PARAM_CAT:
    case N_PARAM_ADD:
        nn_param_backward(g, n, *gy);
        break;
    case N_DORA:
        dora_backward(g, n, *gy);
        break;
    case N_TP_GATHER:
    case N_TP_SPLIT:
    case N_TP_CE:
    case N_TP_MASK:
        tp_backward(g, n, *gy);
        break;
    case N_CKPT:
        break;
    }
}
