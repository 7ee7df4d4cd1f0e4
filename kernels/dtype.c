/* dtype.c: names of the tensor dtypes (their sizes are inline, in dtype.h). */
#include "dtype.h"

#include <string.h>

static const struct {
    const char *name, *alias;
} dtypes[DT_COUNT] = {
    [DT_F32] = {"fp32", "float32"}, [DT_BF16] = {"bf16", "bfloat16"}, [DT_F16] = {"fp16", "float16"},
    [DT_U8] = {"u8", "uint8"},      [DT_I64] = {"i64", "int64"},
};

const char *dtype_name(enum dtype d)
{
    return (unsigned)d < DT_COUNT ? dtypes[d].name : "?";
}

int dtype_from_name(const char *s)
{
    for (int i = 0; i < DT_COUNT; i++)
        if (strcmp(s, dtypes[i].name) == 0 || strcmp(s, dtypes[i].alias) == 0)
            return i;
    return -1;
}
