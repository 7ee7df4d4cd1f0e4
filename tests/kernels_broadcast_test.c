/* kernels_broadcast_test.c: the kernels over {outer, repeat, inner} against naive references in
 * every dtype: broadcast multiply and add, expand, and reduce_sum (expand's adjoint). */
#include "kernels_test_util.h"

/* Shapes after the first: one value per row (inner 1, rows across a 2048-element chunk), no repeat (an
 * elementwise add, split over threads), inner runs longer than a chunk. */
static void test_bcast(int64_t O, int64_t R, int64_t I)
{
    const int64_t nf = O * R * I, ns = O * I;
    char what[64];
    for (size_t t = 0; t < 3; t++) {
        int dt = test_dtypes[t];
        float *a = rnd_vec((size_t)nf, 1.0f), *b = rnd_vec((size_t)ns, 1.0f);
        round_to(a, (size_t)nf, dt);
        round_to(b, (size_t)ns, dt);
        void *ta = typed(a, (size_t)nf, dt), *tb = typed(b, (size_t)ns, dt), *ty = typed(a, (size_t)nf, dt);
        double *mul = malloc((size_t)nf * sizeof *mul), *add = malloc((size_t)nf * sizeof *add);
        for (int64_t o = 0; o < O; o++)
            for (int64_t r = 0; r < R; r++)
                for (int64_t i = 0; i < I; i++) {
                    int64_t at = (o * R + r) * I + i;
                    mul[at] = (double)a[at] * b[o * I + i];
                    add[at] = 0.5 * a[at] - 2.0 * b[o * I + i];
                }
        struct kernel_call k = KCALL(K_MUL_BCAST, dt, O, R, I);
        void *t3[3] = {ta, tb, ty};
        run(&k, t3);
        snprintf(what, sizeof what, "mul_bcast %lld x %lld x %lld", (long long)O, (long long)R, (long long)I);
        check_close(ty, dt, mul, (size_t)nf, kernel_get(K_MUL_BCAST)->tol[dt], what);
        k = KCALL(K_ADD_BCAST, dt, O, R, I);
        k.fparam[0] = 0.5f;
        k.fparam[1] = -2.0f;
        run(&k, t3);
        snprintf(what, sizeof what, "add_bcast %lld x %lld x %lld", (long long)O, (long long)R, (long long)I);
        check_close(ty, dt, add, (size_t)nf, kernel_get(K_ADD_BCAST)->tol[dt], what);
        free(a), free(b), free(ta), free(tb), free(ty), free(mul), free(add);
    }
}

/* expand and reduce_sum against loops in every dtype, and as adjoints: <expand(x), y> = <x, reduce(y)>. */
static void test_expand_reduce(int64_t O, int64_t R, int64_t I)
{
    const int64_t nf = O * R * I, ns = O * I;
    char what[64];
    for (size_t t = 0; t < 3; t++) {
        int dt = test_dtypes[t];
        float *x = rnd_vec((size_t)ns, 1.0f), *y = rnd_vec((size_t)nf, 1.0f);
        round_to(x, (size_t)ns, dt);
        round_to(y, (size_t)nf, dt);
        void *tx = typed(x, (size_t)ns, dt), *ty = typed(y, (size_t)nf, dt), *ex = malloc((size_t)nf * 4), *ry = malloc((size_t)ns * 4);
        struct kernel_call k = KCALL(K_EXPAND, dt, O, R, I);
        k.fparam[0] = 1.5f;
        void *te[2] = {tx, ex};
        run(&k, te);
        double *ref = malloc((size_t)nf * sizeof *ref), *rref = calloc((size_t)ns, sizeof *rref);
        for (int64_t o = 0; o < O; o++)
            for (int64_t r = 0; r < R; r++)
                for (int64_t i = 0; i < I; i++) {
                    ref[(o * R + r) * I + i] = 1.5 * x[o * I + i];
                    rref[o * I + i] += 1.5 * y[(o * R + r) * I + i];
                }
        snprintf(what, sizeof what, "expand %lld x %lld x %lld", (long long)O, (long long)R, (long long)I);
        check_close(ex, dt, ref, (size_t)nf, kernel_get(K_EXPAND)->tol[dt], what);
        k = KCALL(K_REDUCE_SUM, dt, O, R, I);
        k.fparam[0] = 1.5f;
        void *tr[2] = {ty, ry};
        run(&k, tr);
        check_close(ry, dt, rref, (size_t)ns, kernel_get(K_REDUCE_SUM)->tol[dt], "reduce_sum");
        if (dt == DT_F32) {
            double lhs = wsum(y, ex, (size_t)nf), rhs = wsum(x, ry, (size_t)ns);
            ok(fabs(lhs - rhs) <= 1e-5 * (1 + fabs(lhs)), "reduce_sum is expand's adjoint: %.6f vs %.6f", lhs, rhs);
        }
        free(x), free(y), free(tx), free(ty), free(ex), free(ry), free(ref), free(rref);
    }
}

int main(void)
{
    test_bcast(2, 3, 4);
    test_bcast(3, 700, 1);
    test_bcast(1100, 1, 2000);
    test_bcast(5, 3, 3000);
    test_expand_reduce(3, 5, 2);
    test_expand_reduce(3, 700, 1);
    test_expand_reduce(2, 5000, 1); /* a sum over a run longer than a chunk */
    test_expand_reduce(1100, 1, 2000);
    return done_testing();
}
