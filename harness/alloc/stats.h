/* stats.h: PyTorch's DeviceStats (memory_stats) with its exact key names and update rules. */
#ifndef OOMLAB_ALLOC_STATS_H
#define OOMLAB_ALLOC_STATS_H

#include <stddef.h>
#include <stdint.h>

/* One Stat: current, peak, allocated (cumulative increases), freed (cumulative decreases). */
struct stat {
    int64_t current, peak, allocated, freed;
};

enum stat_type { STAT_ALL, STAT_SMALL_POOL, STAT_LARGE_POOL, STAT_TYPES };

struct alloc_stats {
    struct stat allocation[STAT_TYPES];
    struct stat segment[STAT_TYPES];
    struct stat active[STAT_TYPES];
    struct stat inactive_split[STAT_TYPES];
    struct stat allocated_bytes[STAT_TYPES];
    struct stat reserved_bytes[STAT_TYPES];
    struct stat active_bytes[STAT_TYPES];
    struct stat inactive_split_bytes[STAT_TYPES];
    struct stat requested_bytes[STAT_TYPES];
    int64_t num_alloc_retries;
    int64_t num_ooms;
    int64_t num_sync_all_streams;
    int64_t num_device_alloc;
    int64_t num_device_free;
    struct stat oversize_allocations;
    struct stat oversize_segments;
    int64_t max_split_size; /* captured at construction; -1 = unlimited */
};

/* The cumulative counters (allocated, freed) stop at INT64_MAX instead of overflowing, as PyTorch's
 * int64 would after 8 EiB of traffic. current and peak cannot get there: no size or capacity above
 * SIZE_LIMIT (2^62, util/size.h) is accepted, so they stay exact. */
static inline int64_t stat_saturating_add(int64_t a, int64_t n)
{
    int64_t sum;
    return __builtin_add_overflow(a, n, &sum) ? INT64_MAX : sum;
}

/* Peaks are stored unconditionally: whether one moves is as random as the workload. */
static inline int64_t stat_max(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static inline void stat_increase(struct stat *s, int64_t n)
{
    s->current += n;
    s->allocated = stat_saturating_add(s->allocated, n);
    s->peak = stat_max(s->peak, s->current);
}

static inline void stat_decrease(struct stat *s, int64_t n)
{
    s->current -= n;
    s->freed = stat_saturating_add(s->freed, n);
}

/* Updates the aggregate entry and the pool's entry, like for_each_selected_stat_type (n >= 0). The aggregate's
 * cumulative counters are the pools' saturating sums, the same numbers as adding every n to them (both only
 * grow from the same reset), so they are left to alloc_stats_settle and each update writes three fields less. */
static inline void stat_array_increase(struct stat *a, int small, int64_t n)
{
    struct stat *all = &a[STAT_ALL];
    all->current += n;
    all->peak = stat_max(all->peak, all->current);
    stat_increase(&a[small ? STAT_SMALL_POOL : STAT_LARGE_POOL], n);
}

static inline void stat_array_decrease(struct stat *a, int small, int64_t n)
{
    a[STAT_ALL].current -= n;
    stat_decrease(&a[small ? STAT_SMALL_POOL : STAT_LARGE_POOL], n);
}

/* stat_array_increase(delta) or stat_array_decrease(-delta), and nothing for 0, without branching on the
 * sign (the free path's split counts go either way at random); a peak is never below its current. */
static inline void stat_array_change(struct stat *a, int small, int64_t delta)
{
    int64_t up = delta > 0 ? delta : 0, down = up - delta;
    struct stat *all = &a[STAT_ALL], *pool = &a[small ? STAT_SMALL_POOL : STAT_LARGE_POOL];
    all->current += delta;
    all->peak = stat_max(all->peak, all->current);
    pool->current += delta;
    pool->peak = stat_max(pool->peak, pool->current);
    pool->allocated = stat_saturating_add(pool->allocated, up);
    pool->freed = stat_saturating_add(pool->freed, down);
}

/* Fills in the aggregate entries' allocated and freed after stat_array_* updates (before they are read). */
void alloc_stats_settle(struct alloc_stats *s);

void alloc_stats_reset_peak(struct alloc_stats *s);
void alloc_stats_reset_accumulated(struct alloc_stats *s);

/* torch.cuda.memory_stats() flattened and sorted by key, e.g. "reserved_bytes.all.peak". */
struct stat_entry {
    char key[48];
    int64_t value;
};
#define ALLOC_STATS_NKEYS (9 * STAT_TYPES * 4 + 5 + 1 + 2 * 4)
/* Fills out[ALLOC_STATS_NKEYS] in Python's sorted order and returns the count. */
size_t alloc_stats_flatten(const struct alloc_stats *s, struct stat_entry *out);
/* Value of one key, or -1 with *found = 0 if no such key. */
int64_t alloc_stats_get(const struct alloc_stats *s, const char *key, int *found);
/* Sets one key's value (a results document read back); -1 if no such key. */
int alloc_stats_set(struct alloc_stats *s, const char *key, int64_t value);

#endif
