/* kernel_shape.c: a kernel call's shape and the cost memo (see kernel_shape.h). */
#include "kernel_shape.h"

#include <stdbool.h>
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
            if (__builtin_expect(t[i] == t[j], 0)) /* rare: a predicted branch, not a bit built per pair */
                same |= 1ULL << bit;
    return same;
}

static inline uint64_t mix(uint64_t h, uint64_t w)
{
    return (h ^ w) * 0x9e3779b97f4a7c15ULL;
}

/* Whether slot a holds the shape of k, whose head is head. */
static bool holds(const struct kernel_shape *a, uint64_t head, const struct kernel_call *k)
{
    uint64_t fparam[2];
    memcpy(fparam, k->fparam, sizeof fparam);
    uint64_t diff = (a->head ^ head) | (a->fparam[0] ^ fparam[0]) | (a->fparam[1] ^ fparam[1]);
    for (int i = 0; i < KERNEL_MAX_DIMS; i++)
        diff |= (uint64_t)(a->dims[i] ^ k->dims[i]);
    return !diff;
}

/* A miss: k's shape and cost into slot, under a new shape id. Out of line, and called last (a tail call), so
 * a hit saves no registers for it. */
static __attribute__((noinline)) struct kernel_cost fill(struct kernel_cost_slot *slot, uint64_t head,
                                                         const struct kernel_call *k)
{
    static uint64_t last_id; /* shared by every memo of the process, so a shape id is never given twice */
    slot->shape.head = head;
    memcpy(slot->shape.dims, k->dims, sizeof slot->shape.dims);
    memcpy(slot->shape.fparam, k->fparam, sizeof slot->shape.fparam);
    slot->cost = kernel_cost(k);
    slot->cost.shape_id = __atomic_add_fetch(&last_id, 1, __ATOMIC_RELAXED);
    return slot->cost;
}

static struct kernel_cost first_call(struct kernel_cost_memo *m, const struct kernel_call *k);

struct kernel_cost kernel_cost_memo(struct kernel_cost_memo *m, const struct kernel_call *k)
{
    if (__builtin_expect(!m->slots, 0))
        return first_call(m, k);
    /* bit 31 set: a shape's head is never 0, so it never matches an empty slot */
    const uint64_t head = (uint64_t)k->kernel | (uint64_t)k->dtype << 16 | (uint64_t)k->ntensors << 24 | 1ULL << 31 |
                          same_tensors(k, m->kernel_tensors[k->kernel]) << 32;
    /* the slot by the fields that tell the shapes of a step apart; holds() compares every field */
    uint32_t alpha;
    memcpy(&alpha, &k->fparam[0], sizeof alpha);
    uint64_t h = mix(mix(mix(mix(mix(head, (uint64_t)k->dims[0]), (uint64_t)k->dims[1]), (uint64_t)k->dims[2]),
                         (uint64_t)k->dims[3]),
                     alpha);
    struct kernel_cost_slot *slot = &m->slots[(h ^ h >> 32) & (KERNEL_COST_MEMO_SLOTS - 1)];
    if (!holds(&slot->shape, head, k))
        return fill(slot, head, k);
    return slot->cost;
}

/* The memo's first call: the slots, and after them each kernel's tensor count (a call's shape reads it, and a
 * lookup there is cheaper than a call to kernel_get per launch); then the call asked again. */
static __attribute__((cold, noinline)) struct kernel_cost first_call(struct kernel_cost_memo *m,
                                                                     const struct kernel_call *k)
{
    const size_t slots = KERNEL_COST_MEMO_SLOTS * sizeof *m->slots;
    if (!(m->slots = calloc(1, slots + K_COUNT)))
        return kernel_cost(k);
    uint8_t *n = (uint8_t *)m->slots + slots;
    for (unsigned i = 0; i < K_COUNT; i++)
        n[i] = kernel_get(i)->ntensors;
    m->kernel_tensors = n;
    return kernel_cost_memo(m, k);
}

void kernel_cost_memo_free(struct kernel_cost_memo *m)
{
    free(m->slots);
    m->slots = NULL;
    m->kernel_tensors = NULL;
}
