/* kernel_emit.c: KERNEL ops as kernels/kernels.h defines them: a kernel_call with the kernel's
 * dims, the compute dtype and the op-program ids of its (live) tensors in the documented order;
 * the cuBLAS workspace of a stream is allocated before that stream's first GEMM. Helpers for the
 * calls the layers make most (GEMM, cast, fill, scale, add, broadcast ops, block copies, inits). */
#include "workload/gen.h"

#include <stddef.h>
#include <string.h>

_Static_assert(offsetof(struct kernel_call, tensors) == offsetof(struct kernel_call, dims) + sizeof(int64_t[KERNEL_MAX_DIMS]) &&
                   offsetof(struct kernel_call, fparam) == offsetof(struct kernel_call, tensors) + sizeof(uint64_t[KERNEL_MAX_TENSORS]),
               "kern_op clears dims, tensors and fparam as one run of bytes");

static void workspace_for_stream(struct gen *g)
{
    int s = g->stream < 8 ? g->stream : 7;
    if (g->workspace_done[s] || !g->spec.cublas_workspace_bytes)
        return;
    g->workspace_done[s] = true;
    struct op op = {.kind = OP_ALLOC, .category = CAT_WORKSPACE, .stream = g->stream, .id = ++g->next_id,
                    .bytes = g->spec.cublas_workspace_bytes, .name = gen_intern(g, "cublas_workspace")};
    g->live_bytes += (int64_t)op.bytes;
    gen_emit(g, &op);
}

/* The body of kern, inlined into the helpers below, whose counts are constants: the copies unroll and the
 * op's kernel part is written whole (g->kern_op stays zero elsewhere; clearing a struct op per call cost more
 * than the rest of the call). */
static inline __attribute__((always_inline)) void kern_op(struct gen *g, enum kernel_id k, enum dtype dt,
                                                          const int64_t *dims, int ndims, const tref *ts, int nts,
                                                          const float *fparam, int nfparam, const char *tag)
{
    if (g->mode != GEN_RUN || g->failed)
        return;
    if (k == K_GEMM)
        workspace_for_stream(g);
    for (int i = 0; g->par && i < nts; i++) /* a sharded parameter's unit is gathered before its kernels */
        if (g->t[ts[i]].param >= 0)
            parallel_param_use(g, g->t[ts[i]].param);
    ndims = ndims < KERNEL_MAX_DIMS ? ndims : KERNEL_MAX_DIMS;
    nts = nts < KERNEL_MAX_TENSORS ? nts : KERNEL_MAX_TENSORS;
    nfparam = nfparam < 4 ? nfparam : 4;
    struct op *op = &g->kern_op;
    op->kind = OP_KERNEL;
    op->stream = g->stream;
    op->name = tag;
    struct kernel_call *c = &op->kernel;
    c->kernel = (uint16_t)k;
    c->dtype = (uint8_t)dt;
    c->ntensors = (uint8_t)nts;
    const struct tensor *t = g->t;
    if (__builtin_constant_p(ndims) && __builtin_constant_p(nts) && __builtin_constant_p(nfparam)) {
        /* the counts known where inlined: only the slots past them are cleared */
        for (int i = ndims; i < KERNEL_MAX_DIMS; i++)
            c->dims[i] = 0;
        for (int i = nts; i < KERNEL_MAX_TENSORS; i++)
            c->tensors[i] = 0;
        for (int i = nfparam; i < 4; i++)
            c->fparam[i] = 0.0f;
    } else {
        memset(c->dims, 0, sizeof c->dims + sizeof c->tensors + sizeof c->fparam); /* adjacent: a few wide stores */
    }
    for (int i = 0; i < ndims; i++)
        c->dims[i] = dims[i];
    for (int i = 0; i < nts; i++)
        c->tensors[i] = t[ts[i]].id;
    for (int i = 0; i < nfparam; i++)
        c->fparam[i] = fparam[i];
    gen_emit(g, op);
}

void kern(struct gen *g, enum kernel_id k, enum dtype dt, const int64_t *dims, int ndims, const tref *ts, int nts,
          const float *fparam, int nfparam, const char *tag)
{
    kern_op(g, k, dt, dims, ndims, ts, nts, fparam, nfparam, tag);
}

void kern_gemm(struct gen *g, int64_t m, int64_t n, int64_t k, bool ta, bool tb, tref a, tref b, tref c,
               const char *tag)
{
    int64_t d[5] = {m, n, k, ta, tb};
    tref ts[3] = {a, b, c};
    float f[2] = {1.0f, 0.0f};
    kern_op(g, K_GEMM, (enum dtype)g->t[c].dtype, d, 5, ts, 3, f, 2, tag);
}

void kern_cast(struct gen *g, tref x, tref y, const char *tag)
{
    int64_t d[2] = {t_numel(g, x), g->t[y].dtype};
    tref ts[2] = {x, y};
    kern_op(g, K_CAST, (enum dtype)g->t[x].dtype, d, 2, ts, 2, NULL, 0, tag);
}

void kern_fill(struct gen *g, tref y, float value, const char *tag)
{
    int64_t d[1] = {t_numel(g, y)};
    kern_op(g, K_FILL, (enum dtype)g->t[y].dtype, d, 1, &y, 1, &value, 1, tag);
}

void kern_scale(struct gen *g, tref x, tref y, float alpha, const char *tag)
{
    int64_t d[1] = {t_numel(g, y)};
    tref ts[2] = {x, y};
    kern_op(g, K_SCALE, (enum dtype)g->t[y].dtype, d, 1, ts, 2, &alpha, 1, tag);
}

void kern_add(struct gen *g, tref a, tref b, tref y, float alpha, float beta, const char *tag)
{
    int64_t d[1] = {t_numel(g, y)};
    tref ts[3] = {a, b, y};
    float f[2] = {alpha, beta};
    kern_op(g, K_ADD, (enum dtype)g->t[y].dtype, d, 1, ts, 3, f, 2, tag);
}

void kern_bcast(struct gen *g, enum kernel_id k, tref a, tref b, tref y, const int64_t *ori, float alpha, float beta,
                const char *tag)
{
    tref ts[3] = {a, b, y};
    float f[2] = {alpha, beta};
    if (b == TNONE) { /* one-input kernels: x, y */
        ts[1] = y;
        kern_op(g, k, (enum dtype)g->t[y].dtype, ori, 3, ts, 2, f, 2, tag);
        return;
    }
    kern_op(g, k, (enum dtype)g->t[y].dtype, ori, 3, ts, 3, f, 2, tag);
}

void kern_copy_blocks(struct gen *g, tref x, tref y, const int64_t *blocks, bool accumulate, const char *tag)
{
    int64_t d[7];
    memcpy(d, blocks, 6 * sizeof *d);
    d[6] = accumulate;
    tref ts[2] = {x, y};
    enum dtype dt = (enum dtype)g->t[y].dtype;
    if (dt == DT_I64 && !accumulate) { /* token ids: the same bytes copied as pairs of 4-byte words */
        for (int i = 1; i < 6; i++)
            d[i] *= 2;
        dt = DT_F32;
    }
    kern_op(g, K_COPY_BLOCKS, dt, d, 7, ts, 2, NULL, 0, tag);
}

void kern_init_uniform(struct gen *g, tref y, float lo, float hi, const char *tag)
{
    int64_t d[2] = {t_numel(g, y), (int64_t)g->t[y].id};
    float f[2] = {lo, hi};
    kern_op(g, K_RAND_UNIFORM, (enum dtype)g->t[y].dtype, d, 2, &y, 1, f, 2, tag);
}

void kern_init_ids(struct gen *g, tref y, int64_t high, const char *tag)
{
    int64_t d[3] = {t_numel(g, y), (int64_t)g->t[y].id, high};
    kern_op(g, K_RANDINT, DT_F32, d, 3, &y, 1, NULL, 0, tag);
}
