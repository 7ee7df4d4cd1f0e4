/* quant.c: CPU kernels of bitsandbytes' quantized formats: dequantization (K_DEQUANT) of Linear4bit's
 * 4-bit weights (NF4, FP4), of the 8-bit nested absmax of double quantization and of LLM.int8's
 * row-wise int8 weights; LLM.int8's forward (K_INT8_QUANT_ROWS of the activation, K_INT8_GEMM). The
 * per-element math is elementwise.h's, shared with the CUDA twins (cuda/quant.cu). */
#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

int cpu_dequant(const struct kernel_call *k, void *const *t, struct err *e)
{
    (void)e;
    float dynmap[OOM_QMAP_SIZE];
    oom_qmap_fill(1, dynmap);
    const uint8_t *q = t[0];
    const float *absmax = t[1];
    for (size_t i = 0; i < (size_t)k->dims[0]; i++)
        st(t[2], k->dtype, i, oom_dequant_elem((int)k->dims[2], q, absmax, k->dims[1], i, dynmap));
    return 0;
}

int cpu_int8_quant_rows(const struct kernel_call *k, void *const *t, struct err *e)
{
    (void)e;
    const size_t rows = (size_t)k->dims[0], cols = (size_t)k->dims[1];
    uint8_t *q = t[1];
    float *absmax = t[2];
    for (size_t r = 0; r < rows; r++) {
        float m = 0.0f;
        for (size_t c = 0; c < cols; c++)
            m = fmaxf(m, fabsf(ld(t[0], k->dtype, r * cols + c)));
        absmax[r] = m;
        for (size_t c = 0; c < cols; c++)
            q[r * cols + c] = oom_int8_quantize(ld(t[0], k->dtype, r * cols + c), m);
    }
    return 0;
}

int cpu_int8_gemm(const struct kernel_call *k, void *const *t, struct err *e)
{
    (void)e;
    const size_t M = (size_t)k->dims[0], N = (size_t)k->dims[1], K = (size_t)k->dims[2];
    const int8_t *a = t[0], *b = t[1];
    const float *sa = t[2], *sb = t[3];
    float *acc = t[4];
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            int32_t s = 0;
            for (size_t i = 0; i < K; i++)
                s += (int32_t)a[m * K + i] * b[n * K + i];
            acc[m * N + n] = (float)s;
            st(t[5], k->dtype, m * N + n, oom_int8_dequant((float)s, sa[m], sb[n]));
        }
    return 0;
}
