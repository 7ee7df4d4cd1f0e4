/* layout.c: CPU kernels that move elements without arithmetic (but for accumulation and the
 * upsampling backward's sum): batched transpose, strided block copies (slices, concatenation) and
 * nearest 2x upsampling (+ backward). */
#include <string.h>

#include "cpu/cpu_kernels.h"
#include "cpu/tensor_io.h"

int cpu_transpose(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t B = k->dims[0], R = k->dims[1], C = k->dims[2];
    const size_t es = dtype_size((enum dtype)k->dtype);
    const char *x = t[0];
    char *y = t[1];
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < C; j++)
                memcpy(y + (size_t)((b * C + j) * R + i) * es, x + (size_t)((b * R + i) * C + j) * es, es);
    return 0;
}

int cpu_copy_blocks(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t outer = k->dims[0], len = k->dims[1], ss = k->dims[2], so = k->dims[3], ds = k->dims[4],
                  doff = k->dims[5];
    const size_t es = dtype_size((enum dtype)k->dtype);
    for (int64_t o = 0; o < outer; o++) {
        size_t src = (size_t)(o * ss + so), dst = (size_t)(o * ds + doff);
        if (!k->dims[6]) {
            memmove((char *)t[1] + dst * es, (const char *)t[0] + src * es, (size_t)len * es);
            continue;
        }
        for (int64_t i = 0; i < len; i++)
            st(t[1], k->dtype, dst + (size_t)i, ld(t[1], k->dtype, dst + (size_t)i) + ld(t[0], k->dtype, src + (size_t)i));
    }
    return 0;
}

int cpu_upsample2x_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t planes = k->dims[0] * k->dims[1], H = k->dims[2], W = k->dims[3];
    for (int64_t p = 0; p < planes; p++)
        for (int64_t h = 0; h < 2 * H; h++)
            for (int64_t w = 0; w < 2 * W; w++)
                st(t[1], k->dtype, (size_t)((p * 2 * H + h) * 2 * W + w),
                   ld(t[0], k->dtype, (size_t)((p * H + h / 2) * W + w / 2)));
    return 0;
}

int cpu_upsample2x_bwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    const int64_t planes = k->dims[0] * k->dims[1], H = k->dims[2], W = k->dims[3];
    for (int64_t p = 0; p < planes; p++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t w = 0; w < W; w++) {
                size_t top = (size_t)((p * 2 * H + 2 * h) * 2 * W + 2 * w), below = top + (size_t)(2 * W);
                float s = ld(t[0], k->dtype, top) + ld(t[0], k->dtype, top + 1) + ld(t[0], k->dtype, below) +
                          ld(t[0], k->dtype, below + 1);
                st(t[1], k->dtype, (size_t)((p * H + h) * W + w), s);
            }
    return 0;
}
