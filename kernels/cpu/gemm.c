/* gemm.c: the CPU GEMM: batched cblas_sgemm (OpenBLAS); bf16/fp16 operands go through fp32 copies. */
#include "cpu/blas.h"
#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

/* fp32 view of a tensor: the tensor itself when it is fp32, else a converted copy. */
static float *as_f32(void *p, int dt, size_t n, int convert, const char *what, struct err *e)
{
    if (dt == DT_F32)
        return p;
    float *f = cpu_scratch(n, what, e);
    if (f && convert)
        tensor_to_f32(f, p, dt, n);
    return f;
}

int cpu_gemm(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t M = k->dims[0], N = k->dims[1], K = k->dims[2];
    const int ta = k->dims[3] != 0, tb = k->dims[4] != 0;
    const int64_t batch = k->dims[5] > 0 ? k->dims[5] : 1;
    const float alpha = k->fparam[0], beta = k->fparam[1];
    const size_t na = (size_t)(M * K), nb = (size_t)(K * N), nc = (size_t)(M * N);
    int rc = -1;
    if (blas_load(e) < 0)
        return -1;
    float *a = as_f32(t[0], k->dtype, na * batch, 1, "gemm A", e);
    float *b = a ? as_f32(t[1], k->dtype, nb * batch, 1, "gemm B", e) : NULL;
    float *c = b ? as_f32(t[2], k->dtype, nc * batch, beta != 0.0f, "gemm C", e) : NULL;
    if (!c)
        goto out;
    for (int64_t i = 0; i < batch; i++)
        blas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                    (int)K, alpha, a + i * na, ta ? (int)M : (int)K, b + i * nb, tb ? (int)K : (int)N, beta,
                    c + i * nc, (int)N);
    tensor_from_f32(t[2], k->dtype, c, nc * batch);
    rc = 0;
out:
    if (k->dtype != DT_F32) {
        free(a);
        free(b);
        free(c);
    }
    return rc;
}
