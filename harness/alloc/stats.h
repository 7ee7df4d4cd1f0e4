/* stats.h: PyTorch's DeviceStats (memory_stats) with its exact key names and update rules. */
#ifndef OOMLAB_ALLOC_STATS_H
#define OOMLAB_ALLOC_STATS_H

#include <stddef.h>
#include <stdint.h>

/* One Stat: current, peak, allocated (cumulative increases), freed (cumulative decreases). A live allocator's
 * updates leave freed out: every decrease is one of current, so freed is allocated - (current - base), which
 * alloc_stats_settle fills in (base: current at the last reset of the cumulative counters; excess: what the
 * increases added beyond the INT64_MAX at which allocated stops, so that freed stays exact past it). */
struct stat {
    int64_t current, peak, allocated, freed;
    int64_t base, excess;
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
    /* The model's own (no memory_stats() key): blocks freed but waiting for stream events, and their bytes,
     * and the active peaks reached while some waited. A block is active while allocated or waiting, so the
     * active stats follow from allocation's and these (alloc_stats_settle) instead of being counted apart. */
    int64_t pending[STAT_TYPES], pending_bytes[STAT_TYPES];
    int64_t active_peak_pending[STAT_TYPES], active_bytes_peak_pending[STAT_TYPES];
};

/* The cumulative counters (allocated, freed) stop at INT64_MAX instead of overflowing, as PyTorch's
 * int64 would after 8 EiB of traffic. current and peak cannot get there: no size or capacity above
 * SIZE_LIMIT (2^62, util/size.h) is accepted, so they stay exact. */
static inline int64_t stat_saturating_add(int64_t a, int64_t n)
{
    int64_t sum;
    return __builtin_add_overflow(a, n, &sum) ? INT64_MAX : sum;
}

/* allocated reached INT64_MAX: the rest of n goes to excess (stats.c, out of line: 8 EiB of traffic first). */
void stat_allocated_overflow(struct stat *s, int64_t n);

static inline void stat_add_allocated(struct stat *s, int64_t n)
{
    int64_t sum;
    if (__builtin_add_overflow(s->allocated, n, &sum))
        stat_allocated_overflow(s, n);
    else
        s->allocated = sum;
}

/* A new peak is rare once a run is past its ramp-up, and a ramp-up raises it every time: either way a
 * predicted branch, cheaper than storing the peak on every increase. */
static inline void stat_raise_peak(struct stat *s)
{
    if (s->current > s->peak)
        s->peak = s->current;
}

static inline void stat_increase(struct stat *s, int64_t n)
{
    s->current += n;
    stat_add_allocated(s, n);
    stat_raise_peak(s);
}

static inline void stat_decrease(struct stat *s, int64_t n)
{
    s->current -= n; /* freed: alloc_stats_settle */
}

/* Counts (blocks, segments) move by one per operation: their cumulative counters cannot get near INT64_MAX
 * (2^63 operations), so they need no saturation. */
static inline void stat_count_up(struct stat *s)
{
    s->current++;
    s->allocated++;
    stat_raise_peak(s);
}

static inline void stat_count_down(struct stat *s)
{
    s->current--;
}

/* The pool's entry of a stat array: STAT_LARGE_POOL - 1 is STAT_SMALL_POOL, one subtraction instead of a select. */
static inline int stat_pool_type(int small)
{
    return STAT_LARGE_POOL - (small != 0);
}

static inline struct stat *stat_of_pool(struct stat *a, int small)
{
    return &a[stat_pool_type(small)];
}

/* Updates the aggregate entry and the pool's entry, like for_each_selected_stat_type (n >= 0). The aggregate's
 * cumulative counters are the pools' saturating sums, the same numbers as adding every n to them (both only
 * grow from the same reset), so they are left to alloc_stats_settle and each update writes three fields less. */
static inline void stat_array_increase(struct stat *a, int small, int64_t n)
{
    a[STAT_ALL].current += n;
    stat_raise_peak(&a[STAT_ALL]);
    stat_increase(stat_of_pool(a, small), n);
}

static inline void stat_array_decrease(struct stat *a, int small, int64_t n)
{
    a[STAT_ALL].current -= n;
    stat_decrease(stat_of_pool(a, small), n);
}

static inline void stat_array_count_up(struct stat *a, int small)
{
    a[STAT_ALL].current++;
    stat_raise_peak(&a[STAT_ALL]);
    stat_count_up(stat_of_pool(a, small));
}

static inline void stat_array_count_down(struct stat *a, int small)
{
    a[STAT_ALL].current--;
    stat_count_down(stat_of_pool(a, small));
}

/* stat_array_increase(delta) or stat_array_decrease(-delta), and nothing for 0, without branching on the
 * sign (the free path's split counts go either way at random). */
static inline void stat_array_change(struct stat *a, int small, int64_t delta)
{
    int64_t up = delta > 0 ? delta : 0;
    struct stat *all = &a[STAT_ALL], *pool = stat_of_pool(a, small);
    all->current += delta;
    stat_raise_peak(all);
    pool->current += delta;
    stat_raise_peak(pool);
    stat_add_allocated(pool, up);
}

/* The active peaks while blocks wait for stream events (only then does active exceed allocation). */
void stat_raise_active_peaks(struct alloc_stats *s, int small);

/* A block became allocated (a malloc, or a live block restored from a snapshot), and so active with the same
 * size: active and active_bytes are allocation's and allocated_bytes' plus the waiting blocks (their current,
 * their allocated counters; their peaks too while none wait), which alloc_stats_settle adds up. */
static inline void stat_block_allocated(struct alloc_stats *s, int small, int64_t size, int64_t requested)
{
    stat_array_count_up(s->allocation, small);
    stat_array_increase(s->allocated_bytes, small, size);
    stat_array_increase(s->requested_bytes, small, requested);
    if (s->pending[STAT_ALL])
        stat_raise_active_peaks(s, small);
}

/* A freed block waits for stream events (+1) or is done waiting (-1). */
static inline void stat_block_pending(struct alloc_stats *s, int small, int64_t change, int64_t size)
{
    s->pending[STAT_ALL] += change;
    s->pending[stat_pool_type(small)] += change;
    s->pending_bytes[STAT_ALL] += change * size;
    s->pending_bytes[stat_pool_type(small)] += change * size;
}

/* Fills in what the updates above leave out (the active stats, the freed counters, the aggregate entries'
 * cumulative counters) before they are read. */
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
