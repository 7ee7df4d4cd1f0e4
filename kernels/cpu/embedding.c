/* embedding.c: CPU embeddings: the token lookup in a table (+ its scatter-add backward) and the
 * rotary position embedding (forward rotation, or its inverse for backward). */
#include <string.h>

#include "cpu/cpu_kernels.h"
#include "cpu/cpu_vec.h"
#include "cpu/tensor_io.h"

int cpu_embedding_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t rows = k->dims[0], V = k->dims[1], C = k->dims[2];
    const int64_t *ids = t[0];
    const size_t esize = dtype_size((enum dtype)k->dtype);
    for (int64_t r = 0; r < rows; r++) {
        if (cpu_id_check("embedding_fwd", r, ids[r], V, 0, e) < 0)
            return -1;
        memcpy((char *)t[2] + (size_t)(r * C) * esize, (const char *)t[1] + (size_t)(ids[r] * C) * esize,
               (size_t)C * esize);
    }
    return 0;
}

CPU_MULTIVERSION(cpu_acc, (float *restrict acc, const float *restrict x, size_t n), (acc, x, n))

/* Every id checked first; then each row of dy added to its id's row of the fp32 gradient (the output itself
 * when it is fp32), rows in order. */
int cpu_embedding_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t rows = k->dims[0], V = k->dims[1], C = k->dims[2];
    const int64_t *ids = t[0];
    for (int64_t r = 0; r < rows; r++)
        if (cpu_id_check("embedding_bwd", r, ids[r], V, 0, e) < 0)
            return -1;
    float *acc = k->dtype == DT_F32 ? t[2] : cpu_scratch((size_t)(V * C), "embedding gradient", e), buf[CPU_CHUNK];
    if (!acc)
        return -1;
    memset(acc, 0, (size_t)(V * C) * sizeof *acc);
    for (int64_t r = 0; r < rows; r++)
        for (size_t c0 = 0; c0 < (size_t)C; c0 += CPU_CHUNK) {
            size_t n = cpu_piece((size_t)C, c0);
            cpu_acc(acc + (size_t)(ids[r] * C) + c0, chunk_in(t[1], k->dtype, (size_t)(r * C) + c0, n, buf), n);
        }
    if (acc != t[2]) {
        tensor_from_f32(t[2], k->dtype, acc, (size_t)(V * C));
        free(acc);
    }
    return 0;
}

int cpu_rope(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t B = k->dims[0], T = k->dims[1], H = k->dims[2], D = k->dims[3], row = k->dims[4], half = D / 2;
    const float theta = kernel_rope_theta(k);
    if (t[1] != t[0])
        memmove(t[1], t[0], (size_t)(B * T * row) * dtype_size((enum dtype)k->dtype));
    for (int64_t b = 0; b < B; b++)
        for (int64_t p = 0; p < T; p++)
            for (int64_t d = 0; d < half; d++) {
                float c, s, y0, y1;
                oom_rope_cos_sin(p, d, D, theta, k->dims[5] != 0, &c, &s);
                for (int64_t h = 0; h < H; h++) {
                    size_t lo = (size_t)((b * T + p) * row + h * D + d), hi = lo + (size_t)half;
                    oom_rope_rotate(ld(t[0], k->dtype, lo), ld(t[0], k->dtype, hi), c, s, &y0, &y1);
                    st(t[1], k->dtype, lo, y0);
                    st(t[1], k->dtype, hi, y1);
                }
            }
    return 0;
}
