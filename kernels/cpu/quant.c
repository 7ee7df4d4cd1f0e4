/* quant.c: CPU dequantization of bitsandbytes' blockwise formats (K_DEQUANT): the 4-bit weights of
 * Linear4bit (NF4, FP4), the 8-bit nested absmax of double quantization, and LLM.int8's row-wise int8
 * weights; each element from elementwise.h's oom_dequant_elem, shared with the CUDA twin. */
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
