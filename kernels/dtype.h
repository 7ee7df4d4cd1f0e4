/* dtype.h: the element types of the tensors kernels read and write, with their names and sizes. */
#ifndef OOMLAB_DTYPE_H
#define OOMLAB_DTYPE_H

enum dtype { DT_F32, DT_BF16, DT_F16, DT_U8, DT_I64, DT_COUNT };

const char *dtype_name(enum dtype d);
int dtype_from_name(const char *s); /* accepts fp32/float32, bf16/bfloat16, fp16/float16, u8, i64; -1 if unknown */

/* Bytes per element, 0 for a value that is no dtype. Inline: every tensor made and every kernel costed asks. */
static inline unsigned dtype_size(enum dtype d)
{
    switch (d) {
    case DT_F32: return 4;
    case DT_BF16:
    case DT_F16: return 2;
    case DT_U8: return 1;
    case DT_I64: return 8;
    default: return 0;
    }
}

#endif
