/* nn_param.c: parameters a module uses as tensors rather than through a layer, as transformers' ViT
 * embeddings use them (models/vit/modeling_vit.py, ViTEmbeddings.forward): the class token broadcast over
 * the batch and concatenated before the patch tokens, torch.cat((cls_token.expand(B, -1, -1), x), dim=1),
 * and the position embeddings added to every sample, x + position_embeddings. Their backward: cat's
 * gradient is a slice per input; expand's and the broadcast add's sum the gradient over the batch into
 * the parameter's. Neither op saves a tensor for backward. */
#include "workload/gen.h"

/* The parameter in dtype dt: a new reference, or a cast (type promotion inside cat and add). */
static tref param_in(struct gen *g, int32_t p, enum dtype dt, const char *tag)
{
    tref d = g->params[p].data;
    if (g->t[d].dtype == dt)
        return t_ref(g, d);
    tref c = t_like(g, d, dt, CAT_TEMP, tag);
    kern_cast(g, d, c, tag);
    return c;
}

static void record(struct gen *g, enum node_kind kind, tref y, tref x, int32_t p, int64_t b, int64_t n,
                   int64_t dim, const char *tag)
{
    if (!nn_records(g, t_rg(g, x) || param_trains(g, p)))
        return;
    struct node *nd = tape_push(g, kind, y, tag);
    if (!nd)
        return;
    node_input(g, nd, 0, x);
    nd->param[0] = p;
    nd->a[0] = b;
    nd->a[1] = n;
    nd->a[2] = dim;
}

tref nn_param_prepend(struct gen *g, const char *name, tref x, int64_t dim)
{
    if (g->mode == GEN_PARAMS) {
        param_add(g, name, 1, dim);
        return TNONE;
    }
    int32_t p = param_take(g, name);
    const char *tag = g->params[p].tag;
    enum dtype zd = gen_promote((enum dtype)g->t[x].dtype, (enum dtype)g->t[g->params[p].data].dtype);
    int64_t b = g->t[x].dims[0], n = g->t[x].dims[1], d[3] = {b, 1 + n, dim};
    tref z = t_new(g, d, 3, zd, CAT_ACTIVATION, tag);
    /* cat reads the expanded view and casts as it copies; here the class token is expanded into a [B, dim]
     * temporary and a lower-precision x cast first */
    tref c = param_in(g, p, zd, tag);
    tref e = t_new2(g, b, dim, zd, CAT_TEMP, tag);
    int64_t ori[3] = {1, b, dim};
    kern_bcast(g, K_EXPAND, c, TNONE, e, ori, 1.0f, 0.0f, tag);
    t_release(g, c);
    tref xz = nn_as_dtype(g, "cast", x, zd);
    int64_t be[6] = {b, dim, dim, 0, (1 + n) * dim, 0}, bx[6] = {b, n * dim, n * dim, 0, (1 + n) * dim, dim};
    kern_copy_blocks(g, e, z, be, false, tag);
    kern_copy_blocks(g, xz, z, bx, false, tag);
    t_release(g, e);
    t_release(g, xz);
    record(g, N_PARAM_CAT, z, x, p, b, n, dim, tag);
    return z;
}

tref nn_param_add(struct gen *g, const char *name, tref x, int64_t rows, int64_t cols)
{
    if (g->mode == GEN_PARAMS) {
        param_add(g, name, rows, cols);
        return TNONE;
    }
    int32_t p = param_take(g, name);
    const char *tag = g->params[p].tag;
    enum dtype zd = gen_promote((enum dtype)g->t[x].dtype, (enum dtype)g->t[g->params[p].data].dtype);
    int64_t b = t_numel(g, x) / (rows * cols);
    tref z = t_like(g, x, zd, CAT_ACTIVATION, tag);
    tref a = x;
    if (g->t[x].dtype != zd) { /* a lower-precision x is cast straight into the output, as in nn_add */
        kern_cast(g, x, z, tag);
        a = z;
    }
    tref c = param_in(g, p, zd, tag);
    int64_t ori[3] = {1, b, rows * cols};
    kern_bcast(g, K_ADD_BCAST, a, c, z, ori, 1.0f, 1.0f, tag);
    t_release(g, c);
    record(g, N_PARAM_ADD, z, x, p, b, rows, cols, tag);
    return z;
}

/* The parameter's gradient: src [B, len] summed over the batch. */
static void param_grad(struct gen *g, int32_t p, tref src, int64_t b, int64_t len)
{
    tref dp = pgrad_begin(g, p, (enum dtype)g->t[src].dtype);
    int64_t ori[3] = {1, b, len};
    kern_bcast(g, K_REDUCE_SUM, src, TNONE, dp, ori, 1.0f, 0.0f, g->params[p].module);
    pgrad_end(g, p, dp);
}

void nn_param_backward(struct gen *g, const struct node *n, tref gy)
{
    int32_t p = n->param[0];
    int64_t b = n->a[0], rows = n->a[1], dim = n->a[2];
    if (n->kind == N_PARAM_ADD) {
        if (n->in[0] != TNONE)
            grad_accumulate(g, n->in[0], nn_grad_to_shape(g, n->in[0], gy, n->tag));
        if (param_trains(g, p))
            param_grad(g, p, gy, b, rows * dim);
        return;
    }
    /* N_PARAM_CAT: cat's backward narrows the gradient (views here copied into their own tensors) */
    if (n->in[0] != TNONE) {
        tref dx = t_like(g, n->in[0], (enum dtype)g->t[gy].dtype, CAT_TEMP, n->tag);
        int64_t blocks[6] = {b, rows * dim, (1 + rows) * dim, dim, rows * dim, 0};
        kern_copy_blocks(g, gy, dx, blocks, false, n->tag);
        grad_accumulate(g, n->in[0], dx);
    }
    if (param_trains(g, p)) {
        tref first = t_new2(g, b, dim, (enum dtype)g->t[gy].dtype, CAT_TEMP, n->tag);
        int64_t blocks[6] = {b, dim, (1 + rows) * dim, 0, dim, 0};
        kern_copy_blocks(g, gy, first, blocks, false, n->tag);
        param_grad(g, p, first, b, dim);
        t_release(g, first);
    }
}
