/* loss.c: CPU cross-entropy over logits (+ backward) and the embedding lookup (+ backward),
 * the two kernels that take integer ids. */
#include <math.h>
#include <string.h>

#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

static int id_check(const char *name, int64_t row, int64_t id, int64_t limit, int allow_negative, struct err *e)
{
    if (id >= limit || (id < 0 && !allow_negative))
        return err_set(e, ERR_INPUT, "%s: row %lld has id %lld outside [0, %lld)", name, (long long)row,
                       (long long)id, (long long)limit);
    return 0;
}

int cpu_cross_entropy_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t rows = k->dims[0], V = k->dims[1];
    const int64_t *target = t[1];
    float *loss = t[2], *lse = t[3];
    for (int64_t r = 0; r < rows; r++) {
        if (id_check("cross_entropy_fwd", r, target[r], V, 1, e) < 0)
            return -1;
        size_t base = (size_t)(r * V);
        float mx = -INFINITY;
        double sum = 0.0;
        for (int64_t c = 0; c < V; c++)
            mx = fmaxf(mx, ld(t[0], k->dtype, base + c));
        for (int64_t c = 0; c < V; c++)
            sum += expf(ld(t[0], k->dtype, base + c) - mx);
        lse[r] = mx + (float)log(sum);
        loss[r] = target[r] < 0 ? 0.0f : lse[r] - ld(t[0], k->dtype, base + (size_t)target[r]);
    }
    return 0;
}

int cpu_cross_entropy_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t rows = k->dims[0], V = k->dims[1];
    const int64_t *target = t[1];
    const float *lse = t[2], scale = k->fparam[0];
    for (int64_t r = 0; r < rows; r++) {
        if (id_check("cross_entropy_bwd", r, target[r], V, 1, e) < 0)
            return -1;
        size_t base = (size_t)(r * V);
        for (int64_t c = 0; c < V; c++) {
            float g = target[r] < 0 ? 0.0f
                                    : scale * (expf(ld(t[0], k->dtype, base + c) - lse[r]) - (c == target[r] ? 1.0f : 0.0f));
            st(t[3], k->dtype, base + c, g);
        }
    }
    return 0;
}

int cpu_embedding_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t rows = k->dims[0], V = k->dims[1], C = k->dims[2];
    const int64_t *ids = t[0];
    const size_t esize = dtype_size((enum dtype)k->dtype);
    for (int64_t r = 0; r < rows; r++) {
        if (id_check("embedding_fwd", r, ids[r], V, 0, e) < 0)
            return -1;
        memcpy((char *)t[2] + (size_t)(r * C) * esize, (const char *)t[1] + (size_t)(ids[r] * C) * esize,
               (size_t)C * esize);
    }
    return 0;
}

int cpu_embedding_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t rows = k->dims[0], V = k->dims[1], C = k->dims[2];
    const int64_t *ids = t[0];
    float *acc = cpu_scratch((size_t)(V * C), "embedding gradient", e);
    if (!acc)
        return -1;
    memset(acc, 0, (size_t)(V * C) * sizeof *acc);
    for (int64_t r = 0; r < rows; r++) {
        if (id_check("embedding_bwd", r, ids[r], V, 0, e) < 0) {
            free(acc);
            return -1;
        }
        for (int64_t c = 0; c < C; c++)
            acc[ids[r] * C + c] += ld(t[1], k->dtype, (size_t)(r * C + c));
    }
    tensor_from_f32(t[2], k->dtype, acc, (size_t)(V * C));
    free(acc);
    return 0;
}
