/* kernels_gemm_test.c: the CPU GEMM against a triple loop, every transpose, batch, alpha/beta and
 * dtype; plus the GEMM table entry (FLOPs, bytes, validation). */
#include "kernels_test_util.h"

/* C = alpha op(A) op(B) + beta C, in double, row-major, one batch at a time. */
static void gemm_ref(const float *A, const float *B, const float *C0, double *C, int64_t M, int64_t N, int64_t K,
                     int ta, int tb, int64_t batch, float alpha, float beta)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0.0;
                for (int64_t p = 0; p < K; p++) {
                    double a = ta ? A[b * M * K + p * M + i] : A[b * M * K + i * K + p];
                    double bv = tb ? B[b * K * N + j * K + p] : B[b * K * N + p * N + j];
                    s += a * bv;
                }
                size_t c = (size_t)(b * M * N + i * N + j);
                C[c] = alpha * s + beta * (double)C0[c];
            }
}

static void gemm_case(int dt, int64_t M, int64_t N, int64_t K, int ta, int tb, int64_t batch, float alpha, float beta)
{
    size_t na = (size_t)(batch * M * K), nb = (size_t)(batch * K * N), nc = (size_t)(batch * M * N);
    float *A = rnd_vec(na, 1.0f), *B = rnd_vec(nb, 1.0f), *C0 = rnd_vec(nc, 1.0f);
    round_to(A, na, dt);
    round_to(B, nb, dt);
    round_to(C0, nc, dt);
    double *ref = malloc(nc * sizeof *ref);
    gemm_ref(A, B, C0, ref, M, N, K, ta, tb, batch, alpha, beta);
    struct kernel_call k = KCALL(K_GEMM, dt, M, N, K, ta, tb, batch);
    k.fparam[0] = alpha;
    k.fparam[1] = beta;
    void *t[3] = {typed(A, na, dt), typed(B, nb, dt), typed(C0, nc, dt)};
    char what[128];
    snprintf(what, sizeof what, "gemm %lldx%lldx%lld ta=%d tb=%d batch=%lld alpha=%g beta=%g", (long long)M,
             (long long)N, (long long)K, ta, tb, (long long)batch, alpha, beta);
    /* |ref| grows like sqrt(K); the tolerance is relative to 1 + |ref| */
    if (run(&k, t) == 0)
        check_close(t[2], dt, ref, nc, kernel_get(K_GEMM)->tol[dt], what);
    else
        ok(0, "%s ran", what);
    for (int i = 0; i < 3; i++)
        free(t[i]);
    free(A);
    free(B);
    free(C0);
    free(ref);
}

int main(void)
{
    for (unsigned d = 0; d < 3; d++) {
        int dt = test_dtypes[d];
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                gemm_case(dt, 7, 5, 9, ta, tb, 1, 1.0f, 0.0f);
        gemm_case(dt, 16, 12, 33, 0, 1, 3, 0.5f, 0.0f);
        gemm_case(dt, 4, 6, 8, 1, 0, 2, 1.0f, 1.0f);
        gemm_case(dt, 64, 48, 96, 0, 0, 1, 1.0f, -0.5f);
    }

    struct kernel_call k = KCALL(K_GEMM, DT_BF16, 128, 64, 32, 0, 1, 2);
    const struct kernel_desc *g = kernel_get(K_GEMM);
    ok(g->flops(&k) == 2.0 * 2 * 128 * 64 * 32, "gemm flops = 2 * batch * M * N * K");
    ok(g->bytes(&k) == 2.0 * 2 * (128 * 32 + 32 * 64 + 128 * 64), "gemm bytes (beta = 0): A + B + C in bf16");
    k.fparam[1] = 1.0f;
    ok(g->bytes(&k) == 2.0 * 2 * (128 * 32 + 32 * 64 + 2 * 128 * 64), "gemm bytes (beta != 0) read C too");
    is_u64(kernel_tensor_bytes(&k, 1), 2 * 2 * 64 * 32, "B tensor bytes");

    struct err e = {0};
    k.dims[2] = 0;
    ok(kernel_validate(&k, &e) < 0 && strstr(e.msg, "K = 0"), "K = 0 rejected: %s", e.msg);
    memset(&e, 0, sizeof e);
    k = KCALL(K_GEMM, DT_F32, 3000000000ll, 2, 2);
    ok(kernel_validate(&k, &e) < 0 && strstr(e.msg, "int range"), "M beyond int rejected: %s", e.msg);
    memset(&e, 0, sizeof e);
    k = KCALL(K_GEMM, DT_U8, 2, 2, 2);
    ok(kernel_validate(&k, &e) < 0 && strstr(e.msg, "u8"), "u8 gemm rejected: %s", e.msg);
    memset(&e, 0, sizeof e);
    k = KCALL(K_GEMM, DT_F32, 2, 2, 2);
    k.ntensors = 2;
    ok(kernel_validate(&k, &e) < 0 && strstr(e.msg, "takes 3 tensors"), "wrong tensor count rejected: %s", e.msg);
    return done_testing();
}
