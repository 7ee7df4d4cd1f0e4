/* loss.c: CPU cross-entropy over logits and its gradient; rows with a negative target (ignore_index)
 * count 0. Vectorized loops over fp32 pieces of whole rows (cpu_exp_nonpos), the rows split over the cores;
 * every target is checked before any row runs. */
#include <math.h>

#include "cpu/cpu_kernels.h"
#include "cpu/cpu_vec.h"
#include "cpu/tensor_io.h"

/* 0, or -1 with e naming the first row whose target is outside [0, V) and not negative. */
static int check_targets(const char *name, const struct kernel_call *k, const int64_t *target, struct err *e)
{
    for (int64_t r = 0; r < k->dims[0]; r++)
        if (cpu_id_check(name, r, target[r], k->dims[1], 1, e) < 0)
            return -1;
    return 0;
}

/* Rows [i0 / V, (i0 + len) / V): loss = logsumexp(row) - row[target], lse saved for the backward. The max in
 * one pass, then the sum of exp(x - max) in fp32 per piece and fp64 across pieces. */
CPU_BODY void ce_fwd_rows_body(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    const size_t V = (size_t)k->dims[1];
    const int64_t *target = t[1];
    float *loss = t[2], *lse = t[3], buf[CPU_CHUNK];
    for (size_t base = i0; base < i0 + len; base += V) {
        const size_t r = base / V;
        const float mx = cpu_row_max(t[0], k->dtype, base, V);
        double sum = 0.0;
        for (size_t c0 = 0; c0 < V; c0 += CPU_CHUNK) {
            size_t n = cpu_piece(V, c0);
            const float *x = chunk_in(t[0], k->dtype, base + c0, n, buf);
            float s = 0.0f;
#pragma omp simd reduction(+ : s)
            for (size_t c = 0; c < n; c++)
                s += cpu_exp_nonpos(x[c] - mx);
            sum += s;
        }
        lse[r] = mx + (float)log(sum);
        loss[r] = target[r] < 0 ? 0.0f : lse[r] - ld(t[0], k->dtype, base + (size_t)target[r]);
    }
}
CPU_MULTIVERSION(ce_fwd_rows, (const struct kernel_call *k, void *const *t, size_t i0, size_t len), (k, t, i0, len))

/* Rows [i0 / V, (i0 + len) / V) of dlogits = scale * (softmax(row) - onehot(target)); 0 for an ignored row. */
CPU_BODY void ce_bwd_rows_body(const struct kernel_call *k, void *const *t, size_t i0, size_t len)
{
    const size_t V = (size_t)k->dims[1];
    const int64_t *target = t[1];
    const float *lse = t[2], scale = k->fparam[0];
    float buf[CPU_CHUNK];
    for (size_t base = i0; base < i0 + len; base += V) {
        const size_t r = base / V;
        const float s = target[r] < 0 ? 0.0f : scale, m = lse[r];
        for (size_t c0 = 0; c0 < V; c0 += CPU_CHUNK) {
            size_t n = cpu_piece(V, c0);
            const float *x = chunk_in(t[0], k->dtype, base + c0, n, buf);
            float *g = chunk_out(t[3], k->dtype, base + c0, buf);
#pragma omp simd
            for (size_t c = 0; c < n; c++)
                g[c] = s * cpu_exp_nonpos(x[c] - m);
            if (target[r] >= (int64_t)c0 && target[r] < (int64_t)(c0 + n))
                g[target[r] - (int64_t)c0] -= s;
            chunk_put(t[3], k->dtype, base + c0, n, g);
        }
    }
}
CPU_MULTIVERSION(ce_bwd_rows, (const struct kernel_call *k, void *const *t, size_t i0, size_t len), (k, t, i0, len))

int cpu_cross_entropy_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    if (check_targets("cross_entropy_fwd", k, t[1], e) < 0)
        return -1;
    cpu_for_rows(k, t, (size_t)k->dims[0], (size_t)k->dims[1], ce_fwd_rows);
    return 0;
}

int cpu_cross_entropy_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    if (check_targets("cross_entropy_bwd", k, t[1], e) < 0)
        return -1;
    cpu_for_rows(k, t, (size_t)k->dims[0], (size_t)k->dims[1], ce_bwd_rows);
    return 0;
}
