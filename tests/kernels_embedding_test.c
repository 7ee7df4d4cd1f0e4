/* kernels_embedding_test.c: the rotary position embedding and its inverse (the backward) against
 * rotations in double in every dtype, in place, and by finite differences in fp32. (The token
 * embedding's tests are in kernels_pointwise_test.c.) */
#include "kernels_test_util.h"

struct rope_ctx {
    struct kernel_call k;
    float *x, *w, *y;
    size_t n;
};

static double rope_loss(void *p)
{
    struct rope_ctx *c = p;
    void *t[2] = {c->x, c->y};
    run(&c->k, t);
    return wsum(c->w, c->y, c->n);
}

/* rope and its inverse (the backward) against rotations in double in every dtype; in fp32 the
 * inverse undoes it, runs in place, and is the forward's gradient by finite differences. */
static void test_rope(void)
{
    const int64_t B = 2, T = 5, H = 2, D = 8, row = 3 * D, n = B * T * row; /* a third head left alone */
    for (size_t t = 0; t < 3; t++) {
        int dt = test_dtypes[t];
        float *x = rnd_vec((size_t)n, 1.0f);
        round_to(x, (size_t)n, dt);
        double *ref = dvec(x, (size_t)n), *iref = dvec(x, (size_t)n);
        for (int64_t b = 0; b < B; b++)
            for (int64_t p = 0; p < T; p++)
                for (int64_t h = 0; h < H; h++)
                    for (int64_t d = 0; d < D / 2; d++) {
                        double ang = p * pow(10000.0, -2.0 * d / D);
                        int64_t lo = (b * T + p) * row + h * D + d, hi = lo + D / 2;
                        ref[lo] = x[lo] * cos(ang) - x[hi] * sin(ang);
                        ref[hi] = x[hi] * cos(ang) + x[lo] * sin(ang);
                        iref[lo] = x[lo] * cos(ang) + x[hi] * sin(ang);
                        iref[hi] = x[hi] * cos(ang) - x[lo] * sin(ang);
                    }
        void *tx = typed(x, (size_t)n, dt), *ty = malloc((size_t)n * 4), *tb = malloc((size_t)n * 4);
        struct kernel_call k = KCALL(K_ROPE, dt, B, T, H, D, row, 0);
        double tol = kernel_get(K_ROPE)->tol[dt];
        run(&k, (void *[]){tx, ty});
        check_close(ty, dt, ref, (size_t)n, tol, "rope: rotate_half, untouched heads copied");
        k.dims[5] = 1;
        run(&k, (void *[]){tx, tb});
        check_close(tb, dt, iref, (size_t)n, tol, "rope inverse: rotates back, untouched heads copied");
        if (dt == DT_F32) {
            run(&k, (void *[]){ty, tb});
            double *orig = dvec(x, (size_t)n);
            check_close(tb, DT_F32, orig, (size_t)n, 1e-5, "rope: inverse undoes it (the backward)");
            k.dims[5] = 0;
            run(&k, (void *[]){tb, tb});
            check_close(tb, DT_F32, ref, (size_t)n, 1e-5, "rope: in place");
            /* the backward of y = rope(x) for a loss sum(w * y) is rope_inverse(w) */
            float *w = rnd_vec((size_t)n, 1.0f), *dx = zeros((size_t)n), *y = zeros((size_t)n);
            k.dims[5] = 1;
            run(&k, (void *[]){w, dx});
            struct rope_ctx c = {k, x, w, y, (size_t)n};
            c.k.dims[5] = 0;
            fd_check(x, (size_t)n, rope_loss, &c, dx, FD_TOL, "rope inverse (backward)");
            free(orig), free(w), free(dx), free(y);
        }
        free(x), free(ref), free(iref), free(tx), free(ty), free(tb);
    }
}

/* Attention with a bias: reference p and o in double; dscores checked by finite differences of
 * sum(w * o) with respect to the bias. */

int main(void)
{
    test_rope();
    return done_testing();
}
