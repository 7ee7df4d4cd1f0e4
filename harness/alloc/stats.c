/* stats.c: resetting DeviceStats and flattening them into memory_stats()'s sorted key space. */
#include "alloc/stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t max_of(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static const char *const type_names[STAT_TYPES] = {"all", "small_pool", "large_pool"};

#define STAT_ARRAYS(X)                                                                                      \
    X(allocation) X(segment) X(active) X(inactive_split) X(allocated_bytes) X(reserved_bytes) X(active_bytes) \
        X(inactive_split_bytes) X(requested_bytes)

static void for_each_stat(struct alloc_stats *s, void (*fn)(struct stat *))
{
#define APPLY(name)                                                                                          \
    for (int t = 0; t < STAT_TYPES; t++)                                                                     \
        fn(&s->name[t]);
    STAT_ARRAYS(APPLY)
#undef APPLY
    fn(&s->oversize_allocations);
    fn(&s->oversize_segments);
}

static void reset_peak(struct stat *st)
{
    st->peak = st->current;
}

static void reset_accumulated(struct stat *st)
{
    st->allocated = 0;
    st->freed = 0;
    st->excess = 0;
    st->base = st->current;
}

/* Past INT64_MAX, allocated stays there and the rest goes to excess, itself kept below 2^62: freed is
 * allocated + excess - (current - base), current - base is at most SIZE_LIMIT (2^62) in size, so an excess
 * of 2^62 already puts freed at INT64_MAX, where it stops as well. */
#define STAT_EXCESS_CAP (INT64_C(1) << 62)
void stat_allocated_overflow(struct stat *st, int64_t n)
{
    int64_t over = n - (INT64_MAX - st->allocated); /* > 0: the sum did not fit */
    st->allocated = INT64_MAX;
    st->excess = st->excess > STAT_EXCESS_CAP - over ? STAT_EXCESS_CAP : st->excess + over;
}

static void settle_freed(struct stat *st)
{
    __int128 freed = (__int128)st->allocated + st->excess - st->current + st->base;
    st->freed = freed > INT64_MAX ? INT64_MAX : (int64_t)freed;
}

void stat_raise_active_peaks(struct alloc_stats *s, int small)
{
    int types[2] = {STAT_ALL, stat_pool_type(small)};
    for (int i = 0; i < 2; i++) {
        int t = types[i];
        if (!s->pending[t]) /* then active equals allocation, whose peak covers it */
            continue;
        s->active_peak_pending[t] = max_of(s->active_peak_pending[t], s->allocation[t].current + s->pending[t]);
        s->active_bytes_peak_pending[t] =
            max_of(s->active_bytes_peak_pending[t], s->allocated_bytes[t].current + s->pending_bytes[t]);
    }
}

/* Active is allocation plus the waiting blocks; its peak is allocation's, or one reached while blocks waited
 * (stat_raise_active_peaks): the active peak of a time when none waited is at most allocation's, and one
 * reached while some waited is counted there. */
static void settle_active(struct alloc_stats *s)
{
    for (int t = 0; t < STAT_TYPES; t++) {
        s->active[t].current = s->allocation[t].current + s->pending[t];
        s->active[t].peak = max_of(s->allocation[t].peak, s->active_peak_pending[t]);
        s->active_bytes[t].current = s->allocated_bytes[t].current + s->pending_bytes[t];
        s->active_bytes[t].peak = max_of(s->allocated_bytes[t].peak, s->active_bytes_peak_pending[t]);
    }
    for (int t = STAT_SMALL_POOL; t <= STAT_LARGE_POOL; t++) { /* every allocated block becomes active */
        s->active[t].allocated = s->allocation[t].allocated;
        s->active[t].excess = s->allocation[t].excess;
        s->active_bytes[t].allocated = s->allocated_bytes[t].allocated;
        s->active_bytes[t].excess = s->allocated_bytes[t].excess;
    }
}

void alloc_stats_settle(struct alloc_stats *s)
{
    settle_active(s);
#define SETTLE(name)                                                                                         \
    settle_freed(&s->name[STAT_SMALL_POOL]);                                                                 \
    settle_freed(&s->name[STAT_LARGE_POOL]);                                                                 \
    s->name[STAT_ALL].allocated =                                                                            \
        stat_saturating_add(s->name[STAT_SMALL_POOL].allocated, s->name[STAT_LARGE_POOL].allocated);        \
    s->name[STAT_ALL].freed = stat_saturating_add(s->name[STAT_SMALL_POOL].freed, s->name[STAT_LARGE_POOL].freed);
    STAT_ARRAYS(SETTLE)
#undef SETTLE
    settle_freed(&s->oversize_allocations);
    settle_freed(&s->oversize_segments);
}

void alloc_stats_reset_peak(struct alloc_stats *s)
{
    settle_active(s);
    for_each_stat(s, reset_peak);
    for (int t = 0; t < STAT_TYPES; t++) { /* the peaks while blocks wait start again from the current values */
        s->active_peak_pending[t] = s->active[t].current;
        s->active_bytes_peak_pending[t] = s->active_bytes[t].current;
    }
}

void alloc_stats_reset_accumulated(struct alloc_stats *s)
{
    settle_active(s); /* the active stats' base is their current */
    for_each_stat(s, reset_accumulated);
    s->num_alloc_retries = 0;
    s->num_ooms = 0;
    s->num_sync_all_streams = 0;
    s->num_device_alloc = 0;
    s->num_device_free = 0;
}

/* Every memory_stats() key with where its value lives, unsorted. */
struct stat_slot {
    char key[48];
    int64_t *value;
};

static size_t add_stat(struct stat_slot *out, size_t n, const char *prefix, struct stat *st)
{
    static const char *const fields[4] = {"current", "peak", "allocated", "freed"};
    int64_t *values[4] = {&st->current, &st->peak, &st->allocated, &st->freed};
    for (int f = 0; f < 4; f++) {
        snprintf(out[n].key, sizeof out[n].key, "%s.%s", prefix, fields[f]);
        out[n++].value = values[f];
    }
    return n;
}

static size_t stat_slots(struct alloc_stats *s, struct stat_slot *out)
{
    size_t n = 0;
    char prefix[40];
#define FLAT(name)                                                                                           \
    for (int t = 0; t < STAT_TYPES; t++) {                                                                   \
        snprintf(prefix, sizeof prefix, "%s.%s", #name, type_names[t]);                                      \
        n = add_stat(out, n, prefix, &s->name[t]);                                                           \
    }
    STAT_ARRAYS(FLAT)
#undef FLAT
    n = add_stat(out, n, "oversize_allocations", &s->oversize_allocations);
    n = add_stat(out, n, "oversize_segments", &s->oversize_segments);
    const struct {
        const char *key;
        int64_t *value;
    } plain[] = {
        {"num_alloc_retries", &s->num_alloc_retries}, {"num_ooms", &s->num_ooms},
        {"num_sync_all_streams", &s->num_sync_all_streams}, {"num_device_alloc", &s->num_device_alloc},
        {"num_device_free", &s->num_device_free}, {"max_split_size", &s->max_split_size},
    };
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        snprintf(out[n].key, sizeof out[n].key, "%s", plain[i].key);
        out[n++].value = plain[i].value;
    }
    return n;
}

static int by_key(const void *a, const void *b)
{
    return strcmp(((const struct stat_entry *)a)->key, ((const struct stat_entry *)b)->key);
}

size_t alloc_stats_flatten(const struct alloc_stats *s, struct stat_entry *out)
{
    struct stat_slot slots[ALLOC_STATS_NKEYS];
    size_t n = stat_slots((struct alloc_stats *)s, slots); /* read only */
    for (size_t i = 0; i < n; i++) {
        memcpy(out[i].key, slots[i].key, sizeof out[i].key);
        out[i].value = *slots[i].value;
    }
    qsort(out, n, sizeof *out, by_key);
    return n;
}

int alloc_stats_set(struct alloc_stats *s, const char *key, int64_t value)
{
    struct stat_slot slots[ALLOC_STATS_NKEYS];
    size_t n = stat_slots(s, slots);
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(slots[i].key, key)) {
            *slots[i].value = value;
            return 0;
        }
    }
    return -1;
}

int64_t alloc_stats_get(const struct alloc_stats *s, const char *key, int *found)
{
    struct stat_entry all[ALLOC_STATS_NKEYS];
    size_t n = alloc_stats_flatten(s, all);
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(all[i].key, key)) {
            *found = 1;
            return all[i].value;
        }
    }
    *found = 0;
    return -1;
}
