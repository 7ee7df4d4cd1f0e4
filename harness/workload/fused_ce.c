/* fused_ce.c: the fix fused_linear_cross_entropy, Liger-Kernel's LigerFusedLinearCrossEntropyFunction
 * (src/liger_kernel/ops/fused_linear_cross_entropy.py; Apple's cut-cross-entropy makes the same
 * promise): the LM head and the loss in one autograd function that never materializes the
 * [B*S, vocab] logits.
 *
 * What it allocates, from that file (mean reduction, accum_dtype None): in forward, grad_input =
 * zeros_like(hidden states) and, when the head trains and the hidden states require a gradient,
 * grad_weight = zeros_like(weight) (the weight's dtype), loss_1d [BT] fp32 and target_mask [BT] bool; then per chunk of rows a [chunk, vocab] logits
 * buffer in the compute dtype that the cross-entropy kernel overwrites with its gradient, grad_input's
 * rows = grad_logits @ weight (a [chunk, H] product copied in), and grad_weight += grad_logits^T @ x by
 * addmm in place; only when grad_logits is fp32 or its dtype differs from grad_weight's (fp32 weights,
 * autocast) does it take the legacy path, a [vocab, H] fp32 temporary per chunk. Chunk rows: vocab
 * over hidden is the "inc_factor", chunk = next_power_of_2(ceil(BT / inc_factor)), at most BT. It saves
 * grad_input and grad_weight for backward, which scales them in place (when the loss gradient is not 1)
 * and hands them on: grad_input becomes the hidden states' gradient, grad_weight the .grad.
 *
 * Deviations, by the kernel interface (each kernel names whole tensors): each chunk's rows of the
 * hidden states, of the shifted labels and of loss_1d are copied to chunk-sized temporaries
 * ([chunk, H] in the compute dtype and two [chunk] vectors), where Liger slices views; under autocast
 * the weight's 16-bit copy lives for the op (autocast's cache would keep it to the region's end). */
#include "workload/fused_ce.h"

static int64_t next_pow2(int64_t x)
{
    int64_t p = 1;
    while (p < x)
        p <<= 1;
    return p;
}

int64_t fused_ce_chunk_rows(int64_t bt, int64_t vocab, int64_t hidden, int chunk)
{
    if (chunk > 0)
        return chunk < bt ? chunk : bt;
    int64_t inc = (vocab + hidden - 1) / hidden;
    int64_t rows = next_pow2((bt + inc - 1) / inc);
    return rows < bt ? rows : bt;
}

/* rows [at, at + n) of x [bt, w] into a new [n, w] temporary (or back: y's rows from a temporary) */
static void copy_rows(struct gen *g, tref src, tref dst, int64_t n, int64_t w, int64_t src_at, int64_t dst_at,
                      const char *tag)
{
    int64_t total_src = t_numel(g, src), total_dst = t_numel(g, dst);
    int64_t blocks[6] = {1, n * w, total_src, src_at * w, total_dst, dst_at * w};
    kern_copy_blocks(g, src, dst, blocks, false, tag);
}

static tref fused(struct gen *g, const char *tag, tref x, int32_t pw, tref labels)
{
    enum dtype cd = nn_compute_dtype(g, x);
    tref xin = nn_as_dtype(g, "autocast", x, cd);
    tref w = nn_param_as(g, pw, cd);
    int64_t V = g->params[pw].dims[0], H = g->params[pw].dims[1], BT = t_numel(g, xin) / H;
    int64_t rows = fused_ce_chunk_rows(BT, V, H, fused_linear_cross_entropy_params(&g->spec).chunk);
    /* as Liger's forward: gradients only when the input requires one, the weight's among them (a head
     * trained on frozen hidden states gets none); grad_input is allocated whatever */
    bool in_grad = nn_records(g, t_rg(g, xin)), w_grad = in_grad && param_trains(g, pw);
    enum dtype wd = (enum dtype)g->t[g->params[pw].data].dtype;
    tref gi = t_like(g, xin, cd, CAT_ACTIVATION, tag), gw = TNONE;
    kern_fill(g, gi, 0.0f, tag);
    if (w_grad) { /* the weight's gradient, computed here and handed on as .grad */
        gw = t_new2(g, V, H, wd, CAT_GRAD, g->params[pw].tag);
        kern_fill(g, gw, 0.0f, tag);
    }
    int64_t one[1] = {BT};
    tref loss_1d = t_new(g, one, 1, DT_F32, CAT_ACTIVATION, tag);
    kern_fill(g, loss_1d, 0.0f, tag);
    tref target_mask = t_new(g, one, 1, DT_U8, CAT_TEMP, tag); /* target != ignore_index */
    bool legacy = gw != TNONE && (cd == DT_F32 || wd != cd);
    for (int64_t at = 0; at < BT && !g->failed; at += rows) {
        int64_t n = at + rows <= BT ? rows : BT - at;
        tref xc = t_new2(g, n, H, cd, CAT_TEMP, tag);
        copy_rows(g, xin, xc, n, H, at, 0, tag);
        tref lc = t_new2(g, n, V, cd, CAT_TEMP, tag); /* the chunk's logits, then their gradient */
        kern_gemm(g, n, V, H, false, true, xc, w, lc, tag);
        int64_t vec[1] = {n}, d[2] = {n, V};
        tref tc = t_new(g, vec, 1, DT_I64, CAT_TEMP, tag), lossc = t_new(g, vec, 1, DT_F32, CAT_TEMP, tag);
        tref lse = t_new(g, vec, 1, DT_F32, CAT_TEMP, tag);
        copy_rows(g, labels, tc, n, 1, at, 0, tag);
        tref tf[4] = {lc, tc, lossc, lse};
        kern(g, K_CROSS_ENTROPY_FWD, cd, d, 2, tf, 4, NULL, 0, tag);
        copy_rows(g, lossc, loss_1d, n, 1, 0, at, tag);
        if (in_grad) {
            float scale = 1.0f / (float)BT; /* reduction mean: the kernel divides by the token count */
            tref tb[4] = {lc, tc, lse, lc};
            kern(g, K_CROSS_ENTROPY_BWD, cd, d, 2, tb, 4, &scale, 1, tag);
        }
        if (in_grad) { /* grad_input[rows] = grad_logits @ weight */
            tref gc = t_new2(g, n, H, cd, CAT_TEMP, tag);
            kern_gemm(g, n, H, V, false, false, lc, w, gc, tag);
            copy_rows(g, gc, gi, n, H, 0, at, tag);
            t_release(g, gc);
        }
        if (gw != TNONE && legacy) { /* grad_weight += torch.mm(grad_logits.t(), x).float() */
            tref tmp = t_new2(g, V, H, cd, CAT_TEMP, tag);
            kern_gemm(g, V, H, n, true, false, lc, xc, tmp, tag);
            if (cd != wd) { /* .float(): the legacy path runs when grad_weight is fp32 and the product is not */
                tref f = t_new2(g, V, H, wd, CAT_TEMP, tag);
                kern_cast(g, tmp, f, tag);
                t_release(g, tmp);
                tmp = f;
            }
            kern_add(g, gw, tmp, gw, 1.0f, 1.0f, tag);
            t_release(g, tmp);
        } else if (gw != TNONE) { /* torch.addmm(grad_weight, grad_logits.t(), x, out=grad_weight) */
            int64_t gd[5] = {V, H, n, 1, 0};
            tref ts[3] = {lc, xc, gw};
            float ab[2] = {1.0f, 1.0f};
            kern(g, K_GEMM, wd, gd, 5, ts, 3, ab, 2, tag);
        }
        t_release(g, lse);
        t_release(g, lossc);
        t_release(g, tc);
        t_release(g, lc);
        t_release(g, xc);
    }
    t_release(g, target_mask);
    int64_t scalar[1] = {1};
    tref loss = t_new(g, scalar, 1, DT_F32, CAT_ACTIVATION, tag); /* torch.sum(loss_1d) */
    int64_t sum[3] = {1, BT, 1};
    kern_bcast(g, K_REDUCE_SUM, loss_1d, TNONE, loss, sum, 1.0f, 0.0f, tag);
    t_release(g, loss_1d);
    struct node *nd = in_grad ? tape_push(g, N_FUSED_CE, loss, tag) : NULL;
    if (nd) {
        node_input(g, nd, 0, xin);
        node_save(g, nd, 0, gi);
        node_save(g, nd, 1, gw);
        nd->param[0] = pw;
    }
    t_release(g, gi);
    t_release(g, gw);
    t_release(g, w);
    t_release(g, xin);
    return loss;
}

tref nn_fused_lm_loss(struct gen *g, tref hidden, int32_t tied, tref ids)
{
    gen_push(g, "lm_head");
    int32_t pw = tied >= 0 ? tied : param_take(g, "weight");
    const char *tag = gen_tag(g, NULL);
    gen_pop(g);
    /* the labels as ForCausalLMLoss shifts them: padded by one, then a contiguous [B, S] slice */
    gen_push(g, "loss");
    int64_t b = g->t[ids].dims[0], s = g->t[ids].dims[1], padded[2] = {b, s + 1}, shifted[2] = {b, s};
    const char *ltag = gen_tag(g, NULL);
    tref pad = t_new(g, padded, 2, DT_I64, CAT_ACTIVATION, ltag);
    tref shift = t_new(g, shifted, 2, DT_I64, CAT_ACTIVATION, ltag);
    kern_init_ids(g, shift, g->params[pw].dims[0], ltag);
    gen_pop(g);
    tref loss = fused(g, tag, hidden, pw, shift);
    t_release(g, pad);
    t_release(g, shift);
    return loss;
}

void nn_fused_ce_backward(struct gen *g, struct node *n, tref gy)
{
    (void)gy; /* the loss is the last op: its gradient is 1, or the GradScaler's scale */
    tref gi = n->saved[0], gw = n->saved[1];
    if (g->spec.loss_scaling) { /* element_mul_kernel in place */
        kern_scale(g, gi, gi, nn_loss_scale(), n->tag);
        if (gw != TNONE)
            kern_scale(g, gw, gw, nn_loss_scale(), n->tag);
    }
    grad_accumulate(g, n->in[0], t_ref(g, gi));
    if (gw != TNONE) {
        struct param *p = &g->params[n->param[0]];
        if (p->grad == TNONE) { /* AccumulateGrad steals the only reference */
            p->grad = gw;
            n->saved[1] = TNONE;
        } else {
            kern_add(g, p->grad, gw, p->grad, 1.0f, 1.0f, p->module);
        }
    }
}
