/* loss.c: CPU cross-entropy over logits and its gradient; rows with a negative target (ignore_index)
 * count 0. */
#include <math.h>

#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

int cpu_cross_entropy_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t rows = k->dims[0], V = k->dims[1];
    const int64_t *target = t[1];
    float *loss = t[2], *lse = t[3];
    for (int64_t r = 0; r < rows; r++) {
        if (cpu_id_check("cross_entropy_fwd", r, target[r], V, 1, e) < 0)
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
        if (cpu_id_check("cross_entropy_bwd", r, target[r], V, 1, e) < 0)
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
