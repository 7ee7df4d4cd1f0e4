/* program.c: names of op-program verbs and categories. */
#include "program/program.h"

#include <string.h>

static const char *const op_kind_names[OP_KIND_COUNT] = {
    [OP_ALLOC] = "alloc",
    [OP_FREE] = "free",
    [OP_KERNEL] = "kernel",
    [OP_EMPTY_CACHE] = "empty_cache",
    [OP_PHASE] = "phase",
    [OP_STEP] = "step",
    [OP_MARK] = "mark",
    [OP_RESET_PEAK] = "reset_peak_memory_stats",
    [OP_RESET_ACCUMULATED] = "reset_accumulated_memory_stats",
    [OP_SEGMENT_ALLOC] = "segment_alloc",
    [OP_SEGMENT_FREE] = "segment_free",
    [OP_SEGMENT_MAP] = "segment_map",
    [OP_SEGMENT_UNMAP] = "segment_unmap",
    [OP_RECORDED_OOM] = "oom",
    [OP_MANAGED_ALLOC] = "managed_alloc",
};

const char *op_kind_name(enum op_kind k)
{
    return (unsigned)k < OP_KIND_COUNT ? op_kind_names[k] : "?";
}

int op_kind_from_name(const char *s)
{
    for (int i = 0; i < OP_KIND_COUNT; i++)
        if (strcmp(s, op_kind_names[i]) == 0)
            return i;
    return -1;
}

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
