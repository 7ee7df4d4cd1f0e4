/* kernel_emit.c: KERNEL ops as kernels/kernels.h defines them: a kernel_call with the kernel's
 * dims, the compute dtype and the op-program ids of its (live) tensors in the documented order;
 * the cuBLAS workspace of a stream is allocated before that stream's first GEMM. Helpers for the
 * calls the layers make most (GEMM, cast, fill, scale, add, broadcast ops, block copies, inits). */
#include "workload/gen.h"

#include <string.h>

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

void kern(struct gen *g, enum kernel_id k, enum dtype dt, const int64_t *dims, int ndims, const tref *ts, int nts,
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
    struct op op = {.kind = OP_KERNEL, .stream = g->stream, .name = tag};
    op.kernel.kernel = (uint16_t)k;
    op.kernel.dtype = (uint8_t)dt;
    op.kernel.ntensors = (uint8_t)nts;
    for (int i = 0; i < ndims; i++)
        op.kernel.dims[i] = dims[i];
    for (int i = 0; i < nts; i++)
        op.kernel.tensors[i] = g->t[ts[i]].id;
    for (int i = 0; i < nfparam; i++)
        op.kernel.fparam[i] = fparam[i];
    gen_emit(g, &op);
}

void kern_gemm(struct gen *g, int64_t m, int64_t n, int64_t k, bool ta, bool tb, tref a, tref b, tref c,
               const char *tag)
{
    int64_t d[5] = {m, n, k, ta, tb};
    tref ts[3] = {a, b, c};
    float f[2] = {1.0f, 0.0f};
    kern(g, K_GEMM, (enum dtype)g->t[c].dtype, d, 5, ts, 3, f, 2, tag);
}

void kern_cast(struct gen *g, tref x, tref y, const char *tag)
{
    int64_t d[2] = {t_numel(g, x), g->t[y].dtype};
    tref ts[2] = {x, y};
    kern(g, K_CAST, (enum dtype)g->t[x].dtype, d, 2, ts, 2, NULL, 0, tag);
}

void kern_fill(struct gen *g, tref y, float value, const char *tag)
{
    int64_t d[1] = {t_numel(g, y)};
    kern(g, K_FILL, (enum dtype)g->t[y].dtype, d, 1, &y, 1, &value, 1, tag);
}

void kern_scale(struct gen *g, tref x, tref y, float alpha, const char *tag)
{
    int64_t d[1] = {t_numel(g, y)};
    tref ts[2] = {x, y};
    kern(g, K_SCALE, (enum dtype)g->t[y].dtype, d, 1, ts, 2, &alpha, 1, tag);
}

void kern_add(struct gen *g, tref a, tref b, tref y, float alpha, float beta, const char *tag)
{
    int64_t d[1] = {t_numel(g, y)};
    tref ts[3] = {a, b, y};
    float f[2] = {alpha, beta};
    kern(g, K_ADD, (enum dtype)g->t[y].dtype, d, 1, ts, 3, f, 2, tag);
}

void kern_bcast(struct gen *g, enum kernel_id k, tref a, tref b, tref y, const int64_t *ori, float alpha, float beta,
                const char *tag)
{
    tref ts[3] = {a, b, y};
    float f[2] = {alpha, beta};
    if (b == TNONE) { /* one-input kernels: x, y */
        ts[1] = y;
        kern(g, k, (enum dtype)g->t[y].dtype, ori, 3, ts, 2, f, 2, tag);
        return;
    }
    kern(g, k, (enum dtype)g->t[y].dtype, ori, 3, ts, 3, f, 2, tag);
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
    kern(g, K_COPY_BLOCKS, dt, d, 7, ts, 2, NULL, 0, tag);
}

void kern_init_uniform(struct gen *g, tref y, float lo, float hi, const char *tag)
{
    int64_t d[2] = {t_numel(g, y), (int64_t)g->t[y].id};
    float f[2] = {lo, hi};
    kern(g, K_RAND_UNIFORM, (enum dtype)g->t[y].dtype, d, 2, &y, 1, f, 2, tag);
}

void kern_init_ids(struct gen *g, tref y, int64_t high, const char *tag)
{
    int64_t d[3] = {t_numel(g, y), (int64_t)g->t[y].id, high};
    kern(g, K_RANDINT, DT_F32, d, 3, &y, 1, NULL, 0, tag);
}
