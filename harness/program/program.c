/* program.c: names of op-program categories and dtypes. */
#include "program/program.h"

#include <string.h>

static const char *const category_names[CAT_COUNT] = {
    "param", "grad", "optimizer_state", "ema", "activation", "temp", "workspace", "input", "output", "other",
};

const char *category_name(enum category c)
{
    return (unsigned)c < CAT_COUNT ? category_names[c] : "?";
}

int category_from_name(const char *s)
{
    for (int i = 0; i < CAT_COUNT; i++)
        if (strcmp(s, category_names[i]) == 0)
            return i;
    return -1;
}

static const struct {
    const char *name, *alias;
    unsigned size;
} dtypes[DT_COUNT] = {
    [DT_F32] = {"fp32", "float32", 4}, [DT_BF16] = {"bf16", "bfloat16", 2}, [DT_F16] = {"fp16", "float16", 2},
    [DT_U8] = {"u8", "uint8", 1},      [DT_I64] = {"i64", "int64", 8},
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

unsigned dtype_size(enum dtype d)
{
    return (unsigned)d < DT_COUNT ? dtypes[d].size : 0;
}
