/* alloc_random_test.c: randomized runs of the allocator model (1.5 million operations in all, over four
 * streams and sizes from 1 byte to 300 MiB, under capacity pressure so OOMs and every release path happen),
 * checking PyTorch's stat-consistency invariants after every operation, with and without expandable
 * segments and max_split_size_mb; and runs where blocks are used on other streams (record_stream) and
 * streams synchronise, so frees wait for their events. */
#include "tap.h"

#include "alloc/allocator.h"
#include "alloc/snapshot.h"
#include "device/sim.h"
#include "util/size.h"

#define LIVE_MAX 256
#define OPS_PER_CONFIG 300000

static uint64_t rng_state;

static uint64_t rnd(void) /* splitmix64: deterministic across machines */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t random_size(void)
{
    switch (rnd() % 8) {
    case 0: return 1 + rnd() % 4096;                 /* tiny */
    case 1:
    case 2: return 1 + rnd() % MiB;                  /* small pool */
    case 3: return MiB + rnd() % (9 * MiB);          /* 20 MiB segments */
    case 4:
    case 5: return 10 * MiB + rnd() % (40 * MiB);    /* large */
    case 6: return (1 + rnd() % 8) * 8 * MiB;        /* repeated shapes */
    default: return 50 * MiB + rnd() % (250 * MiB);  /* oversize under max_split_size_mb:100 */
    }
}

static void run(const char *conf, uint64_t seed, bool streams)
{
    struct alloc_config cfg;
    struct err e = {0};
    alloc_config_default(&cfg);
    if (alloc_config_parse(&cfg, conf, &e))
        diag("config: %s", e.msg);
    struct device *dev = sim_device_create("sim:random", 3 * GiB, 0, NULL);
    struct allocator *a = allocator_create(dev, &cfg);
    struct alloc_block *live[LIVE_MAX] = {0};
    rng_state = seed;
    long ops = 0, ooms = 0, bad_at = -1;
    char why[256] = "";
    for (; ops < OPS_PER_CONFIG; ops++) {
        uint64_t r = rnd() % 100;
        size_t slot = rnd() % LIVE_MAX;
        if (r < 2) {
            allocator_empty_cache(a);
        } else if (streams && r < 12) { /* a use on another stream, or a stream's synchronize() */
            if (r < 8 && live[slot])
                allocator_record_stream(a, live[slot], rnd() % 4);
            else if (r >= 8)
                allocator_stream_sync(a, rnd() % 4);
        } else if (live[slot]) {
            allocator_free(a, live[slot]);
            live[slot] = NULL;
        } else {
            struct alloc_oom oom;
            int rc = allocator_malloc(a, random_size(), rnd() % 4, &live[slot], &oom, &e);
            ooms += rc == 1;
        }
        if (alloc_check_consistency(a, why, sizeof why)) {
            bad_at = ops;
            break;
        }
    }
    ok(bad_at < 0, "'%s'%s: invariants hold after each of %ld operations (%ld OOMs) %s", conf,
       streams ? " with record_stream" : "", ops, ooms, why);
    const struct alloc_stats *s = allocator_stats(a);
    ok(ooms > 0 && s->num_alloc_retries > 0, "'%s': capacity pressure exercised the retry path (%lld retries)", conf,
       (long long)s->num_alloc_retries);
    struct alloc_snapshot snap;
    ok(allocator_snapshot(a, &snap) == 0, "'%s': snapshot builds", conf);
    uint64_t reserved = 0;
    for (size_t i = 0; i < snap.nsegments; i++)
        reserved += snap.segments[i].total_size;
    is_u64(reserved, s->reserved_bytes[STAT_ALL].current, "'%s': snapshot total_size sums to reserved_bytes", conf);
    alloc_snapshot_free(&snap);
    for (size_t i = 0; i < LIVE_MAX; i++)
        allocator_free(a, live[i]);
    allocator_empty_cache(a);
    is_int(s->allocated_bytes[STAT_ALL].current, 0, "'%s': nothing allocated at the end", conf);
    is_int(s->reserved_bytes[STAT_ALL].current, 0, "'%s': empty_cache returns everything", conf);
    allocator_destroy(a);
    dev->ops->destroy(dev);
}

int main(void)
{
    run("", 1, false);
    run("expandable_segments:True", 2, false);
    run("max_split_size_mb:100", 3, false);
    run("expandable_segments:True,max_split_size_mb:100,roundup_power2_divisions:4", 4, false);
    run("garbage_collection_threshold:0.6,per_process_memory_fraction:0.9", 5, false);
    run("", 6, true);
    run("expandable_segments:True,max_split_size_mb:100", 7, true);
    return done_testing();
}
