/* rounding.h: request -> block size -> pool -> segment size (pytorch-allocator.md sections 1 and 3). Inline:
 * every malloc runs them. */
#ifndef OOMLAB_ALLOC_ROUNDING_H
#define OOMLAB_ALLOC_ROUNDING_H

#include <stdbool.h>
#include <stdint.h>

#include "alloc/config.h"

#define ALLOC_MIN_BLOCK_SIZE 512ULL                  /* kMinBlockSize */
#define ALLOC_SMALL_SIZE (1ULL << 20)                /* kSmallSize */
#define ALLOC_SMALL_BUFFER (2ULL << 20)              /* kSmallBuffer */
#define ALLOC_LARGE_BUFFER (20ULL << 20)             /* kLargeBuffer */
#define ALLOC_MIN_LARGE_ALLOC (10ULL << 20)          /* kMinLargeAlloc */
#define ALLOC_ROUND_LARGE (2ULL << 20)               /* kRoundLarge */

static inline uint64_t alloc_floor_pow2(uint64_t n)
{
    return 1ULL << (63 - __builtin_clzll(n));
}

/* roundup_power2_next_division */
static inline uint64_t alloc_round_to_division(uint64_t n, uint32_t divisions)
{
    if ((n & (n - 1)) == 0)
        return n;
    uint64_t step = alloc_floor_pow2(n) / divisions;
    if (step == 0)
        return alloc_floor_pow2(n) << 1;
    return (n + step - 1) / step * step;
}

/* round_size without power-of-two divisions: a multiple of kMinBlockSize, at least one. */
static inline uint64_t alloc_round_min_block(uint64_t size)
{
    if (size < ALLOC_MIN_BLOCK_SIZE)
        return ALLOC_MIN_BLOCK_SIZE;
    return ALLOC_MIN_BLOCK_SIZE * ((size + ALLOC_MIN_BLOCK_SIZE - 1) / ALLOC_MIN_BLOCK_SIZE);
}

static inline uint64_t alloc_round_size(const struct alloc_config *cfg, uint64_t size)
{
    uint32_t d = alloc_config_divisions(cfg, size);
    if (d > 1 && size > ALLOC_MIN_BLOCK_SIZE * d)
        return alloc_round_to_division(size, d);
    return alloc_round_min_block(size);
}

/* Whether any size's rounding uses divisions (alloc_round_size is then more than alloc_round_min_block). */
static inline bool alloc_config_has_divisions(const struct alloc_config *cfg)
{
    for (int i = 0; i < ALLOC_ROUNDUP_INTERVALS; i++)
        if (cfg->roundup_power2_divisions[i] > 1)
            return true;
    return false;
}

static inline uint64_t alloc_segment_size(uint64_t rounded)
{
    if (rounded <= ALLOC_SMALL_SIZE)
        return ALLOC_SMALL_BUFFER;
    if (rounded < ALLOC_MIN_LARGE_ALLOC)
        return ALLOC_LARGE_BUFFER;
    return ALLOC_ROUND_LARGE * ((rounded + ALLOC_ROUND_LARGE - 1) / ALLOC_ROUND_LARGE);
}

static inline bool alloc_is_small(uint64_t rounded)
{
    return rounded <= ALLOC_SMALL_SIZE;
}

#endif
