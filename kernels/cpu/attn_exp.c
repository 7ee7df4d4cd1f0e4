/* attn_exp.c: the exponentials of attention's softmax, x[j] = exp(x[j] - m) over a row of scores, with
 * their sum. m is the row's maximum (or its log-sum-exp), so every argument is at most 0 and cpu_vec.h's
 * cpu_exp_nonpos inlines into the loop at the CPU's vector width (libmvec's expf costs a call per vector).
 * A masked score (-inf) gives exactly 0, as expf does, and so does a row with no visible key at all,
 * whose -inf - -inf is NaN. */
#include "cpu/attn_cpu.h"
#include "cpu/cpu_vec.h"

CPU_BODY void exp_row_body(float *restrict x, int64_t n, float m, float *out_sum)
{
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; j++) {
        float d = x[j] - m;
        float p = cpu_exp_nonpos(d >= -88.0f ? d : -88.0f); /* -inf and NaN: 0 */
        x[j] = p;
        sum += p;
    }
    *out_sum = sum;
}
CPU_MULTIVERSION(exp_row, (float *restrict x, int64_t n, float m, float *out_sum), (x, n, m, out_sum))

float attn_exp_row(float *x, int64_t n, float m)
{
    float sum;
    exp_row(x, n, m, &sum);
    return sum;
}
