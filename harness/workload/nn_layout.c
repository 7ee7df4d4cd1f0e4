/* nn_layout.c: layout ops, each a new tensor as PyTorch's .permute().contiguous(), .expand() + add,
 * .mean(), slicing and torch.cat allocate it, with their backward: transpose, broadcast, mean over
 * a middle dim, strided slices and concatenation along dimension 1 or the last. */
#include "workload/gen.h"

#include <string.h>

static struct node *record(struct gen *g, enum node_kind kind, tref y, tref x, const char *tag)
{
    if (!nn_records(g, t_rg(g, x)))
        return NULL;
    struct node *n = tape_push(g, kind, y, tag);
    if (n)
        node_input(g, n, 0, x);
    return n;
}

tref nn_transpose(struct gen *g, const char *name, tref x, int64_t batch, int64_t rows, int64_t cols,
                  const int64_t *dims, int ndim)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    tref y = t_new(g, dims, ndim, (enum dtype)g->t[x].dtype, CAT_ACTIVATION, tag);
    int64_t d[3] = {batch, rows, cols};
    tref ts[2] = {x, y};
    kern(g, K_TRANSPOSE, (enum dtype)g->t[x].dtype, d, 3, ts, 2, NULL, 0, tag);
    struct node *n = record(g, N_TRANSPOSE, y, x, tag);
    if (n)
        memcpy(n->a, d, sizeof d);
    return y;
}

static tref over_middle(struct gen *g, enum node_kind kind, const char *name, tref x, const int64_t *ori,
                        const int64_t *dims, int ndim)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    tref y = t_new(g, dims, ndim, (enum dtype)g->t[x].dtype, CAT_ACTIVATION, tag);
    bool mean = kind == N_MEAN;
    kern_bcast(g, mean ? K_REDUCE_SUM : K_EXPAND, x, TNONE, y, ori, mean ? 1.0f / (float)ori[1] : 1.0f, 0.0f, tag);
    struct node *n = record(g, kind, y, x, tag);
    if (n)
        memcpy(n->a, ori, 3 * sizeof *ori);
    return y;
}

tref nn_expand(struct gen *g, const char *name, tref x, const int64_t *ori, const int64_t *dims, int ndim)
{
    return over_middle(g, N_EXPAND, name, x, ori, dims, ndim);
}

tref nn_mean(struct gen *g, const char *name, tref x, const int64_t *ori, const int64_t *dims, int ndim)
{
    return over_middle(g, N_MEAN, name, x, ori, dims, ndim);
}

tref nn_slice(struct gen *g, const char *name, tref x, const int64_t *dims, int ndim, int64_t outer, int64_t len,
              int64_t src_stride, int64_t src_off)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    tref y = t_new(g, dims, ndim, (enum dtype)g->t[x].dtype, CAT_ACTIVATION, tag);
    int64_t blocks[6] = {outer, len, src_stride, src_off, len, 0};
    kern_copy_blocks(g, x, y, blocks, false, tag);
    struct node *n = record(g, N_SLICE, y, x, tag);
    if (n)
        memcpy(n->a, blocks, 4 * sizeof *blocks);
    return y;
}

/* torch.cat along dimension `dim`: per index of the dimensions before it, x's block then y's. */
static tref concat_at(struct gen *g, const char *name, tref x, tref y, int dim)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    const struct tensor *a = &g->t[x], *b = &g->t[y];
    int64_t d[TMAX_DIMS], B = 1;
    memcpy(d, a->dims, sizeof d);
    d[dim] += b->dims[dim];
    for (int i = 0; i < dim; i++)
        B *= d[i];
    int64_t la = t_numel(g, x) / B, lb = t_numel(g, y) / B;
    enum dtype dt = (enum dtype)a->dtype;
    tref z = t_new(g, d, a->ndim, dt, CAT_ACTIVATION, tag);
    tref yc = nn_as_dtype(g, "cast", y, dt);
    int64_t bx[6] = {B, la, la, 0, la + lb, 0}, by[6] = {B, lb, lb, 0, la + lb, la};
    kern_copy_blocks(g, x, z, bx, false, tag);
    kern_copy_blocks(g, yc, z, by, false, tag);
    t_release(g, yc);
    if (nn_records(g, t_rg(g, x) || t_rg(g, y))) {
        struct node *n = tape_push(g, N_CONCAT, z, tag);
        if (n) {
            node_input(g, n, 0, x);
            node_input(g, n, 1, y);
            n->a[0] = B;
            n->a[1] = la;
            n->a[2] = lb;
        }
    }
    return z;
}

tref nn_concat(struct gen *g, const char *name, tref x, tref y)
{
    return concat_at(g, name, x, y, 1);
}

tref nn_concat_last(struct gen *g, const char *name, tref x, tref y)
{
    return g->mode == GEN_RUN ? concat_at(g, name, x, y, g->t[x].ndim - 1) : TNONE;
}

/* A new tensor shaped like x holding the given blocks of gy (zeros elsewhere when `clear`). */
static tref gather(struct gen *g, tref x, tref gy, const int64_t *blocks, bool clear, const char *tag)
{
    tref dx = t_like(g, x, (enum dtype)g->t[gy].dtype, CAT_TEMP, tag);
    if (clear)
        kern_fill(g, dx, 0.0f, tag);
    kern_copy_blocks(g, gy, dx, blocks, false, tag);
    return dx;
}

void nn_layout_backward(struct gen *g, const struct node *n, tref gy)
{
    tref x = n->in[0];
    const int64_t *a = n->a;
    switch (n->kind) {
    case N_TRANSPOSE: {
        tref dx = t_like(g, x, (enum dtype)g->t[gy].dtype, CAT_TEMP, n->tag);
        int64_t d[3] = {a[0], a[2], a[1]};
        tref ts[2] = {gy, dx};
        kern(g, K_TRANSPOSE, (enum dtype)g->t[gy].dtype, d, 3, ts, 2, NULL, 0, n->tag);
        grad_accumulate(g, x, dx);
        break;
    }
    case N_EXPAND:
    case N_MEAN: {
        tref dx = t_like(g, x, (enum dtype)g->t[gy].dtype, CAT_TEMP, n->tag);
        bool mean = n->kind == N_MEAN;
        kern_bcast(g, mean ? K_EXPAND : K_REDUCE_SUM, gy, TNONE, dx, a, mean ? 1.0f / (float)a[1] : 1.0f, 0.0f,
                   n->tag);
        grad_accumulate(g, x, dx);
        break;
    }
    case N_SLICE: {
        int64_t blocks[6] = {a[0], a[1], a[1], 0, a[2], a[3]};
        grad_accumulate(g, x, gather(g, x, gy, blocks, true, n->tag));
        break;
    }
    case N_CONCAT: {
        int64_t B = a[0], la = a[1], lb = a[2];
        int64_t bx[6] = {B, la, la + lb, 0, la, 0}, by[6] = {B, lb, la + lb, la, lb, 0};
        if (x != TNONE)
            grad_accumulate(g, x, gather(g, x, gy, bx, false, n->tag));
        if (n->in[1] != TNONE)
            grad_accumulate(g, n->in[1], gather(g, n->in[1], gy, by, false, n->tag));
        break;
    }
    default:
        break;
    }
}
