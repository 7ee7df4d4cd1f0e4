/* open_index.c: the open-addressing index (see open_index.h): growth and deletion. */
#include "util/open_index.h"
#include "util/prefault.h"

#include <stdint.h>
#include <stdlib.h>

#define MIN_SLOTS 64

int open_index_grow(struct open_index *x)
{
    size_t n = x->slots ? 2 * (x->mask + 1) : MIN_SLOTS;
    /* the slots are cleared whole, then filled all over: their pages prefaulted, not faulted in one by one */
    struct open_slot *slots = n <= SIZE_MAX / sizeof *slots ? prefault_calloc(n * sizeof *slots) : NULL;
    if (!slots)
        return -1;
    struct open_index old = *x;
    size_t limit = n < OPEN_INDEX_DENSE_SLOTS ? n / 4 : old.packed ? n / 4 * 3 : n / 2;
    *x = (struct open_index){.slots = slots, .mask = n - 1, .shift = 64 - (unsigned)__builtin_ctzll(n),
                             .count = old.count, .limit = limit, .packed = old.packed};
    for (size_t i = 0; old.slots && i <= old.mask; i++) {
        if (!old.slots[i].item)
            continue;
        size_t j = open_index_home(x, old.slots[i].hash);
        while (x->slots[j].item)
            j = (j + 1) & x->mask;
        x->slots[j] = old.slots[i];
    }
    free(old.slots);
    return 0;
}

void open_index_shift_out(struct open_index *x, size_t i)
{
    /* backward shift: each later slot of the probe run moves into the hole unless its home lies
     * cyclically after the hole (it would then sit before its home) */
    for (size_t j = (i + 1) & x->mask; x->slots[j].item; j = (j + 1) & x->mask) {
        size_t home = (size_t)(x->slots[j].hash >> x->shift);
        if (((j - home) & x->mask) >= ((j - i) & x->mask)) {
            x->slots[i] = x->slots[j];
            i = j;
        }
    }
    x->slots[i] = (struct open_slot){0, NULL};
    x->count--;
}

void open_index_free(struct open_index *x)
{
    free(x->slots);
    *x = (struct open_index){.packed = x->packed};
}
