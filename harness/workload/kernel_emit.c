/* kernel_emit.c: KERNEL ops: fills a kernel_call with the op's dims, dtype and the (live) tensors it
 * names, and allocates the cuBLAS workspace of a stream before that stream's first GEMM. Kernel
 * numbers are the generator's own (WORKLOAD_KERNEL_BASE + enum wl_kernel), not kernels.h ids. */
#include "workload/gen.h"
#include "workload/generate.h"

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

void kern(struct gen *g, enum wl_kernel k, enum dtype dt, const int64_t *dims, int ndims, const tref *ts, int nts,
          float fparam, const char *tag)
{
    if (g->mode != GEN_RUN || g->failed)
        return;
    if (k == WK_GEMM || k == WK_BGEMM)
        workspace_for_stream(g);
    struct op op = {.kind = OP_KERNEL, .stream = g->stream, .name = tag};
    op.kernel.kernel = (uint16_t)(WORKLOAD_KERNEL_BASE + (unsigned)k);
    op.kernel.dtype = (uint8_t)dt;
    for (int i = 0; i < ndims && i < KERNEL_MAX_DIMS; i++)
        op.kernel.dims[i] = dims[i];
    int n = 0;
    for (int i = 0; i < nts && n < KERNEL_MAX_TENSORS; i++)
        if (ts[i] != TNONE)
            op.kernel.tensors[n++] = g->t[ts[i]].id;
    op.kernel.ntensors = (uint8_t)n;
    op.kernel.fparam[0] = fparam;
    gen_emit(g, &op);
}

void kern_gemm(struct gen *g, int64_t m, int64_t n, int64_t k, enum dtype dt, tref a, tref b, tref c, const char *tag)
{
    int64_t d[3] = {m, n, k};
    tref ts[3] = {a, b, c};
    kern(g, WK_GEMM, dt, d, 3, ts, 3, 0, tag);
}
