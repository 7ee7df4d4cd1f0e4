/* optimizer.c: the optimizer step and zero_grad as PyTorch runs them: state created lazily at the
 * first step (SGD momentum; AdamW exp_avg/exp_avg_sq; bitsandbytes 8-bit AdamW with blockwise
 * absmax and 32-bit state for tensors under 4096 elements; Adafactor factored row/column state;
 * bitsandbytes' paged AdamW, 8-bit or 32-bit, whose state1/state2 of tensors from 1e5 elements are
 * unified memory outside the caching allocator: Optimizer8bit.get_state_buffer, optim/optimizer.py),
 * foreach temporaries the size of the parameters (or one parameter at a time without foreach), fp32
 * master weights, GradScaler unscaling. Each step is a kernels.h optimizer kernel on real state. */
#include "workload/optimizer.h"

#define BNB_BLOCK 256        /* bitsandbytes blockwise quantization block */
#define BNB_MIN_8BIT 4096    /* min_8bit_size */
#define BNB_MIN_PAGED 100000 /* get_state_buffer: p.numel() < 1e5 stays in torch.zeros_like */

static enum dtype state_dtype(const struct gen *g, const struct param *p)
{
    return p->master != TNONE ? DT_F32 : (enum dtype)g->t[p->data].dtype;
}

#define LR 1e-3f
#define ADAM_BETA1 0.9f
#define ADAM_BETA2 0.999f
#define WEIGHT_DECAY 0.01f
#define SGD_MOMENTUM 0.9f

/* New optimizer state, zeroed as torch.zeros_like does (8-bit codes read as 0 under a zero absmax). */
static tref new_state(struct gen *g, int64_t r, int64_t c, enum dtype dt, const char *tag, const char *module)
{
    tref s = t_new2(g, r, c, dt, CAT_OPTIMIZER_STATE, tag);
    if (dt != DT_U8)
        kern_fill(g, s, 0.0f, module);
    return s;
}

static bool paged(const struct gen *g)
{
    return g->spec.optimizer == OPT_PAGED_ADAMW_8BIT || g->spec.optimizer == OPT_PAGED_ADAMW_32BIT;
}

static bool eight_bit(const struct gen *g)
{
    return g->spec.optimizer == OPT_ADAMW_8BIT || g->spec.optimizer == OPT_PAGED_ADAMW_8BIT;
}

/* bitsandbytes' get_state_buffer: F.get_paged (cudaMallocManaged) + F.fill(buff, 0) for a large
 * tensor of a paged optimizer, else torch.zeros_like. */
static tref state_buffer(struct gen *g, struct param *p, enum dtype dt)
{
    if (!paged(g) || p->numel < BNB_MIN_PAGED)
        return new_state(g, p->dims[0], p->dims[1], dt, p->tag, p->module);
    tref s = t_new_managed(g, p->dims[0], p->dims[1], dt, CAT_OPTIMIZER_STATE, p->tag);
    if (dt != DT_U8)
        kern_fill(g, s, 0.0f, p->module);
    return s;
}

static void create_state(struct gen *g, struct param *p)
{
    enum dtype sd = state_dtype(g, p);
    const char *tag = p->tag, *mod = p->module;
    int64_t r = p->dims[0], c = p->dims[1], blocks = (p->numel + BNB_BLOCK - 1) / BNB_BLOCK;
    switch (g->spec.optimizer) {
    case OPT_SGD:
        p->state[0] = new_state(g, r, c, sd, tag, mod);
        break;
    case OPT_ADAMW:
        p->state[0] = new_state(g, r, c, sd, tag, mod);
        p->state[1] = new_state(g, r, c, sd, tag, mod);
        break;
    case OPT_ADAMW_8BIT:
    case OPT_PAGED_ADAMW_8BIT:
    case OPT_PAGED_ADAMW_32BIT:
        if (p->numel < BNB_MIN_8BIT || !eight_bit(g)) {
            p->state[0] = state_buffer(g, p, DT_F32);
            p->state[1] = state_buffer(g, p, DT_F32);
        } else {
            p->state[0] = state_buffer(g, p, DT_U8);
            p->state[1] = state_buffer(g, p, DT_U8);
            p->state[2] = new_state(g, blocks, 1, DT_F32, tag, mod);
            p->state[3] = new_state(g, blocks, 1, DT_F32, tag, mod);
        }
        break;
    case OPT_ADAFACTOR: /* row and column means of a matrix (one tensor), the full moment of a vector */
        p->state[0] = new_state(g, c > 1 ? r + c : r, 1, DT_F32, tag, mod);
        break;
    case OPT_COUNT:
        break;
    }
}

/* Temporaries one parameter's update allocates (AdamW's denom, Adafactor's update and
 * approximation); bitsandbytes and SGD update in place. The for-loop AdamW makes its denom in two
 * (see optimizer_step). */
static int temps_per_param(const struct gen *g)
{
    switch (g->spec.optimizer) {
    case OPT_ADAMW:
        return 1;
    case OPT_ADAFACTOR:
        return 2;
    default:
        return 0;
    }
}

/* How the framework runs a step (the adamw and sgd kernels' impl dim, kernels.h): bitsandbytes
 * updates its 32-bit-state tensors with one fused kernel each; torch.optim loops or uses foreach. */
static int64_t update_impl(const struct gen *g)
{
    if (g->spec.optimizer == OPT_ADAMW_8BIT || paged(g))
        return 2;
    return g->spec.foreach ? 1 : 0;
}

static void update(struct gen *g, struct param *p, tref grad, tref target)
{
    enum dtype dt = (enum dtype)g->t[target].dtype;
    int64_t step = g->opt_steps;
    float adam[4] = {LR, ADAM_BETA1, ADAM_BETA2, WEIGHT_DECAY};
    switch (g->spec.optimizer) {
    case OPT_SGD: {
        int64_t d[3] = {p->numel, step, update_impl(g)};
        float f[4] = {LR, SGD_MOMENTUM, 0.0f, 0.0f};
        tref ts[3] = {target, grad, p->state[0]};
        kern(g, K_SGD, dt, d, 3, ts, 3, f, 4, p->module);
        break;
    }
    case OPT_ADAMW:
    case OPT_ADAMW_8BIT:
    case OPT_PAGED_ADAMW_8BIT:
    case OPT_PAGED_ADAMW_32BIT:
        if (p->state[2] != TNONE) {
            int64_t d[4] = {p->numel, step, 0, BNB_BLOCK};
            tref ts[6] = {target, grad, p->state[0], p->state[1], p->state[2], p->state[3]};
            kern(g, K_ADAMW8, dt, d, 4, ts, 6, adam, 4, p->module);
        } else {
            int64_t d[4] = {p->numel, step, 0, update_impl(g)};
            tref ts[4] = {target, grad, p->state[0], p->state[1]};
            kern(g, g->t[p->state[0]].dtype == DT_F32 ? K_ADAMW : K_ADAMW_T, dt, d, 4, ts, 4, adam, 4, p->module);
        }
        break;
    case OPT_ADAFACTOR: {
        int64_t d[3] = {p->dims[0], p->dims[1], step};
        float f[4] = {LR, 1e-30f, 1.0f, -0.8f};
        tref ts[3] = {target, grad, p->state[0]};
        kern(g, K_ADAFACTOR, dt, d, 3, ts, 3, f, 4, p->module);
        break;
    }
    case OPT_COUNT:
        break;
    }
}

static tref temp_for(struct gen *g, struct param *p)
{
    return t_new2(g, p->dims[0], p->dims[1], state_dtype(g, p), CAT_TEMP, p->tag);
}

void optimizer_step(struct gen *g)
{
    gen_phase(g, gen_intern(g, "optimizer"));
    g->opt_steps++;
    if (g->spec.loss_scaling) { /* GradScaler.unscale_: found_inf, then in-place unscale */
        int64_t one[1] = {1};
        tref inf = t_new(g, one, 1, DT_F32, CAT_TEMP, gen_intern(g, "grad_scaler.found_inf"));
        for (int32_t i = 0; i < g->nparams; i++)
            if (g->params[i].trainable && g->params[i].grad != TNONE)
                kern_scale(g, g->params[i].grad, g->params[i].grad, 1.0f / nn_loss_scale(), g->params[i].module);
        t_release(g, inf);
    }
    /* Optimizer._init_group: the state of every parameter with a gradient, in parameter order, before
     * any update (torch/optim/adamw.py) */
    for (int32_t i = 0; i < g->nparams && !g->failed; i++) {
        struct param *p = &g->params[i];
        if (p->trainable && p->grad != TNONE && p->state[0] == TNONE)
            create_state(g, p);
    }
    int tp = temps_per_param(g);
    bool foreach = g->spec.foreach && tp > 0;
    /* foreach: every temporary of the group exists at once (torch._foreach_sqrt over the list), and the
     * list is freed from its end */
    tref *held = NULL;
    int nheld = 0;
    if (foreach) {
        held = calloc((size_t)g->nparams * (size_t)tp, sizeof *held);
        if (!held) {
            if (!g->failed)
                err_set(g->e, ERR_INTERNAL, "workload: out of host memory for the optimizer");
            g->failed = 1;
            return;
        }
        for (int32_t i = 0; i < g->nparams; i++)
            if (g->params[i].trainable && g->params[i].grad != TNONE)
                for (int k = 0; k < tp; k++)
                    held[nheld++] = temp_for(g, &g->params[i]);
    }
    for (int32_t i = 0; i < g->nparams && !g->failed; i++) {
        struct param *p = &g->params[i];
        if (!p->trainable || p->grad == TNONE)
            continue;
        tref grad = p->grad;
        if (p->master != TNONE) { /* the step runs on the fp32 master with an fp32 copy of the grad */
            grad = t_like(g, p->grad, DT_F32, CAT_TEMP, p->tag);
            kern_cast(g, p->grad, grad, p->module);
        }
        tref target = p->master != TNONE ? p->master : p->data;
        tref own[2] = {TNONE, TNONE};
        if (!foreach && g->spec.optimizer == OPT_ADAMW) {
            /* _single_tensor_adam: denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps): the
             * sqrt, then the quotient (the sqrt freed), kept through the update */
            tref sq = temp_for(g, p);
            own[0] = temp_for(g, p);
            t_release(g, sq);
        } else if (!foreach) {
            for (int k = 0; k < tp; k++)
                own[k] = temp_for(g, p);
        }
        update(g, p, grad, target);
        for (int k = 0; k < 2; k++)
            t_release(g, own[k]); /* freed before the next parameter's update */
        if (p->master != TNONE) {
            kern_cast(g, p->master, p->data, p->module);
            t_release(g, grad);
        }
    }
    while (nheld > 0)
        t_release(g, held[--nheld]);
    free(held);
}

void optimizer_zero_grad(struct gen *g, bool set_to_none)
{
    for (int32_t i = 0; i < g->nparams; i++) {
        struct param *p = &g->params[i];
        if (p->grad == TNONE)
            continue;
        if (set_to_none) {
            t_release(g, p->grad);
            p->grad = TNONE;
        } else {
            kern_fill(g, p->grad, 0.0f, p->module);
        }
    }
}
