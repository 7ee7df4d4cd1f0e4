/* rounding.c: request -> block size -> pool -> segment size (pytorch-allocator.md sections 1 and 3). */
#include "alloc/allocator.h"
#include "util/size.h"

#define MIN_BLOCK_SIZE 512ULL
#define SMALL_SIZE MiB
#define SMALL_BUFFER (2 * MiB)
#define LARGE_BUFFER (20 * MiB)
#define MIN_LARGE_ALLOC (10 * MiB)
#define ROUND_LARGE (2 * MiB)

static uint64_t floor_pow2(uint64_t n)
{
    return 1ULL << (63 - __builtin_clzll(n));
}

/* roundup_power2_next_division */
static uint64_t round_to_division(uint64_t n, uint32_t divisions)
{
    if ((n & (n - 1)) == 0)
        return n;
    uint64_t step = floor_pow2(n) / divisions;
    if (step == 0)
        return floor_pow2(n) << 1;
    return (n + step - 1) / step * step;
}

uint64_t alloc_round_size(const struct alloc_config *cfg, uint64_t size)
{
    if (size < MIN_BLOCK_SIZE)
        return MIN_BLOCK_SIZE;
    uint32_t d = alloc_config_divisions(cfg, size);
    if (d > 1 && size > MIN_BLOCK_SIZE * d)
        return round_to_division(size, d);
    return MIN_BLOCK_SIZE * ((size + MIN_BLOCK_SIZE - 1) / MIN_BLOCK_SIZE);
}

uint64_t alloc_segment_size(uint64_t rounded)
{
    if (rounded <= SMALL_SIZE)
        return SMALL_BUFFER;
    if (rounded < MIN_LARGE_ALLOC)
        return LARGE_BUFFER;
    return ROUND_LARGE * ((rounded + ROUND_LARGE - 1) / ROUND_LARGE);
}

bool alloc_is_small(uint64_t rounded)
{
    return rounded <= SMALL_SIZE;
}
