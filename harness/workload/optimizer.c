/* optimizer.c: the optimizer step and zero_grad as PyTorch runs them: state created lazily at the
 * first step (SGD momentum; AdamW exp_avg/exp_avg_sq; bitsandbytes 8-bit AdamW with blockwise
 * absmax and 32-bit state for tensors under 4096 elements; Adafactor factored row/column state),
 * foreach temporaries the size of the parameters (or one parameter at a time without foreach), fp32
 * master weights, GradScaler unscaling. */
#include "workload/optimizer.h"

#define BNB_BLOCK 256        /* bitsandbytes blockwise quantization block */
#define BNB_MIN_8BIT 4096    /* min_8bit_size */

static enum dtype state_dtype(const struct gen *g, const struct param *p)
{
    return p->master != TNONE ? DT_F32 : (enum dtype)g->t[p->data].dtype;
}

static void create_state(struct gen *g, struct param *p)
{
    enum dtype sd = state_dtype(g, p);
    const char *tag = p->tag;
    int64_t r = p->dims[0], c = p->dims[1];
    switch (g->spec.optimizer) {
    case OPT_SGD:
        p->state[0] = t_new2(g, r, c, sd, CAT_OPTIMIZER_STATE, tag);
        break;
    case OPT_ADAMW:
        p->state[0] = t_new2(g, r, c, sd, CAT_OPTIMIZER_STATE, tag);
        p->state[1] = t_new2(g, r, c, sd, CAT_OPTIMIZER_STATE, tag);
        break;
    case OPT_ADAMW_8BIT:
        if (p->numel < BNB_MIN_8BIT) {
            p->state[0] = t_new2(g, r, c, DT_F32, CAT_OPTIMIZER_STATE, tag);
            p->state[1] = t_new2(g, r, c, DT_F32, CAT_OPTIMIZER_STATE, tag);
        } else {
            p->state[0] = t_new2(g, r, c, DT_U8, CAT_OPTIMIZER_STATE, tag);
            p->state[1] = t_new2(g, r, c, DT_U8, CAT_OPTIMIZER_STATE, tag);
            p->state[2] = t_new2(g, 2, (p->numel + BNB_BLOCK - 1) / BNB_BLOCK, DT_F32, CAT_OPTIMIZER_STATE, tag);
        }
        break;
    case OPT_ADAFACTOR:
        if (c > 1) {
            p->state[0] = t_new2(g, r, 1, DT_F32, CAT_OPTIMIZER_STATE, tag);
            p->state[1] = t_new2(g, 1, c, DT_F32, CAT_OPTIMIZER_STATE, tag);
        } else {
            p->state[0] = t_new2(g, r, c, DT_F32, CAT_OPTIMIZER_STATE, tag);
        }
        break;
    case OPT_COUNT:
        break;
    }
}

/* Temporaries one parameter's update allocates (AdamW's denom, Adafactor's update and
 * approximation); bitsandbytes and SGD update in place. */
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

static void update(struct gen *g, struct param *p, tref grad, tref target)
{
    int64_t d[2] = {p->numel, (p->numel + BNB_BLOCK - 1) / BNB_BLOCK};
    static const enum wl_kernel kernels[OPT_COUNT] = {WK_SGD, WK_ADAMW, WK_ADAMW_8BIT, WK_ADAFACTOR};
    tref ts[5] = {target, grad, p->state[0], p->state[1], p->state[2]};
    kern(g, kernels[g->spec.optimizer], (enum dtype)g->t[target].dtype, d, 2, ts, 5, 0, p->module);
}

static tref temp_for(struct gen *g, struct param *p)
{
    return t_new2(g, p->dims[0], p->dims[1], state_dtype(g, p), CAT_TEMP, p->tag);
}

void optimizer_step(struct gen *g)
{
    gen_phase(g, gen_intern(g, "optimizer"));
    if (g->spec.loss_scaling) { /* GradScaler.unscale_: found_inf, then in-place unscale */
        int64_t one[1] = {1};
        tref inf = t_new(g, one, 1, DT_F32, CAT_TEMP, gen_intern(g, "grad_scaler.found_inf"));
        t_release(g, inf);
    }
    int tp = temps_per_param(g);
    bool foreach = g->spec.foreach && tp > 0;
    /* foreach: every temporary of the group exists at once (torch._foreach_sqrt over the list) */
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
    }
    for (int32_t i = 0; i < g->nparams && !g->failed; i++) {
        struct param *p = &g->params[i];
        if (!p->trainable || p->grad == TNONE)
            continue;
        if (p->state[0] == TNONE)
            create_state(g, p);
        tref grad = p->grad;
        if (p->master != TNONE) { /* the step runs on the fp32 master with an fp32 copy of the grad */
            grad = t_like(g, p->grad, DT_F32, CAT_TEMP, p->tag);
            int64_t dc[2] = {p->numel, g->t[p->grad].dtype};
            tref tc[2] = {p->grad, grad};
            kern(g, WK_CAST, DT_F32, dc, 2, tc, 2, 0, p->module);
        }
        tref target = p->master != TNONE ? p->master : p->data;
        for (int k = 0; k < tp; k++) {
            tref t = temp_for(g, p);
            if (foreach)
                held[nheld++] = t;
            else
                t_release(g, t); /* freed before the next parameter's update */
        }
        update(g, p, grad, target);
        if (p->master != TNONE) {
            int64_t dc[2] = {p->numel, DT_F32};
            tref tc[2] = {p->master, p->data};
            kern(g, WK_CAST, (enum dtype)g->t[p->data].dtype, dc, 2, tc, 2, 0, p->module);
            t_release(g, grad);
        }
    }
    for (int i = 0; i < nheld; i++)
        t_release(g, held[i]);
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
            int64_t d[1] = {p->numel};
            tref ts[1] = {p->grad};
            kern(g, WK_FILL, (enum dtype)g->t[p->grad].dtype, d, 1, ts, 1, 0, p->module);
        }
    }
}
