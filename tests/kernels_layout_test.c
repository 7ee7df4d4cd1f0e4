/* kernels_layout_test.c: batched transpose and strided block copies (slices, concatenation,
 * accumulation, within one tensor) against naive references in every dtype, and their shape checks. */
#include "kernels_test_util.h"

static void test_transpose_and_blocks(void)
{
    const int64_t B = 2, R = 3, C = 5, n = B * R * C;
    for (size_t t = 0; t < 3; t++) {
        int dt = test_dtypes[t];
        float *x = rnd_vec((size_t)n, 1.0f);
        round_to(x, (size_t)n, dt);
        void *tx = typed(x, (size_t)n, dt), *ty = typed(x, (size_t)n, dt);
        double *ref = malloc((size_t)n * sizeof *ref);
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < R; i++)
                for (int64_t j = 0; j < C; j++)
                    ref[(b * C + j) * R + i] = x[(b * R + i) * C + j];
        struct kernel_call k = KCALL(K_TRANSPOSE, dt, B, R, C);
        void *ts[2] = {tx, ty};
        run(&k, ts);
        check_close(ty, dt, ref, (size_t)n, 0.0, "transpose");
        free(x), free(tx), free(ty), free(ref);
    }
    /* concatenation of [2, 3] and [2, 2] rows into [2, 5], then accumulate a slice back */
    for (size_t t = 0; t < 3; t++) {
        int dt = test_dtypes[t];
        float a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {7, 8, 9, 10.25f}, y0[10] = {0};
        void *ta = typed(a, 6, dt), *tb = typed(b, 4, dt), *ty = typed(y0, 10, dt);
        struct kernel_call k = KCALL(K_COPY_BLOCKS, dt, 2, 3, 3, 0, 5, 0, 0);
        run(&k, (void *[]){ta, ty});
        k = KCALL(K_COPY_BLOCKS, dt, 2, 2, 2, 0, 5, 3, 0);
        run(&k, (void *[]){tb, ty});
        double cat[10] = {1, 2, 3, 7, 8, 4, 5, 6, 9, 10.25};
        check_close(ty, dt, cat, 10, 0.0, "copy_blocks: concatenation");
        k = KCALL(K_COPY_BLOCKS, dt, 2, 2, 2, 0, 5, 3, 1);
        run(&k, (void *[]){tb, ty});
        double acc[10] = {1, 2, 3, 14, 16, 4, 5, 6, 18, 20.5};
        check_close(ty, dt, acc, 10, kernel_get(K_COPY_BLOCKS)->tol[dt], "copy_blocks: accumulate leaves the other blocks alone");
        free(ta), free(tb), free(ty);
    }
    struct err e = {0};
    struct kernel_call k = KCALL(K_COPY_BLOCKS, DT_F32, 2, 3, 3, 1, 5, 0, 0);
    ok(kernel_validate(&k, &e) < 0, "copy_blocks: a block overrunning its stride is rejected (%s)", e.msg);
}

int main(void)
{
    test_transpose_and_blocks();
    return done_testing();
}
