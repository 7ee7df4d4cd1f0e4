/* kernel_shape.c: a kernel call's shape and the cost memo (see kernel_shape.h). */
#include "kernel_shape.h"

#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* Which of k's tensor slots name the same tensor, over the slots a cost or time rule reads: those below
 * the call's tensor count or its kernel's (generic_bytes walks the kernel's). Bit i * (i - 1) / 2 + j, for
 * j < i: slots i and j match. */
static uint64_t same_tensors(const struct kernel_call *k, unsigned kernel_tensors)
{
    const uint64_t *t = k->tensors;
    unsigned n = k->ntensors > kernel_tensors ? k->ntensors : kernel_tensors;
    n = n < KERNEL_MAX_TENSORS ? n : KERNEL_MAX_TENSORS;
    uint64_t same = 0;
    unsigned bit = 0;
    for (unsigned i = 1; i < n; i++)
        for (unsigned j = 0; j < i; j++, bit++)
            same |= (uint64_t)(t[i] == t[j]) << bit;
    return same;
}

static inline uint64_t mix(uint64_t h, uint64_t w)
{
    return (h ^ w) * 0x9e3779b97f4a7c15ULL;
}

static bool same_shape(const struct kernel_shape *a, const struct kernel_shape *b)
{
    uint64_t diff = (a->head ^ b->head) | (a->fparam[0] ^ b->fparam[0]) | (a->fparam[1] ^ b->fparam[1]);
    for (int i = 0; i < KERNEL_MAX_DIMS; i++)
        diff |= (uint64_t)(a->dims[i] ^ b->dims[i]);
    return !diff;
}

struct kernel_cost kernel_cost_memo(struct kernel_cost_memo *m, const struct kernel_call *k)
{
    static uint64_t last_id; /* shared by every memo of the process, so a shape id is never given twice */
    const struct kernel_desc *kd = kernel_get(k->kernel);
    if (!kd || (!m->slots && !(m->slots = calloc(KERNEL_COST_MEMO_SLOTS, sizeof *m->slots))))
        return kernel_cost(k);
    struct kernel_shape s;
    /* bit 31 set: a shape's head is never 0, so it never matches an empty slot */
    s.head = (uint64_t)k->kernel | (uint64_t)k->dtype << 16 | (uint64_t)k->ntensors << 24 | 1ULL << 31 |
             same_tensors(k, kd->ntensors) << 32;
    memcpy(s.dims, k->dims, sizeof s.dims);
    memcpy(s.fparam, k->fparam, sizeof s.fparam);
    /* the slot by the fields that tell the shapes of a step apart; the comparison is of every field */
    uint64_t h = mix(mix(mix(mix(mix(s.head, (uint64_t)s.dims[0]), (uint64_t)s.dims[1]), (uint64_t)s.dims[2]),
                         (uint64_t)s.dims[3]),
                     s.fparam[0]);
    struct kernel_cost_slot *slot = &m->slots[(h ^ h >> 32) & (KERNEL_COST_MEMO_SLOTS - 1)];
    if (!same_shape(&slot->shape, &s)) {
        slot->shape = s;
        slot->cost = kernel_cost(k);
        slot->cost.shape_id = __atomic_add_fetch(&last_id, 1, __ATOMIC_RELAXED);
    }
    return slot->cost;
}

void kernel_cost_memo_free(struct kernel_cost_memo *m)
{
    free(m->slots);
    m->slots = NULL;
}
