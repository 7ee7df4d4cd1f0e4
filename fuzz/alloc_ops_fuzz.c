/* alloc_ops_fuzz.c: the allocator model driven op by op from the input, under a config and capacity
 * the input chooses, with PyTorch's stat-consistency check (alloc_check_consistency, as
 * tests/alloc_random_test.c uses) after every op, and everything returned at the end.
 *
 * Input: 6 header bytes, then ops.
 *   h[0] bits: 0 expandable_segments, 1 max_split_size_mb, 2 garbage_collection_threshold,
 *              3 roundup_power2_divisions, 4 per_process_memory_fraction, 5 max_non_split_rounding_mb
 *   h[1..4]   their values; h[5] capacity: 64 MiB << (h[5] % 8)
 *   op byte:  low 3 bits the op, the rest its slot (of 32 live allocations) or stream
 *     0-3 malloc into the slot (3 more bytes: size class and 16 bits within it), stream = op
 *     4 free the slot   5 empty_cache   6 by slot % 4: reset peak stats, reset accumulated stats,
 *       record_stream (1 more byte b: the block in slot b % 32 used on stream b >> 5 % 4), or sync the
 *       stream slot >> 2 % 4
 *     7 release a whole cached segment recorded by the trace (allocator_release_segment) */
#include <string.h>

#include "alloc/allocator.h"
#include "alloc/snapshot.h"
#include "device/sim.h"
#include "fuzz.h"
#include "util/size.h"

#define SLOTS 32
#define SEGMENTS 16

struct recorder {
    uint64_t segments[SEGMENTS]; /* addresses of recent segment_alloc events */
    size_t next;
};

static void record(void *ctx, const struct alloc_trace_event *ev)
{
    struct recorder *r = ctx;
    if (ev->action == ACT_SEGMENT_ALLOC)
        r->segments[r->next++ % SEGMENTS] = ev->addr;
}

/* A size from a class byte and 16 bits: every pool, split and rounding boundary gets hit. */
static uint64_t decode_size(uint8_t cls, uint16_t bits)
{
    switch (cls % 8) {
    case 0: return bits % 4097;                          /* tiny, including 0 */
    case 1: return 1 + (uint64_t)bits * 16;              /* small pool, up to 1 MiB */
    case 2: return MiB - 512 + bits % 1025;              /* around the small/large boundary */
    case 3: return MiB + (uint64_t)bits * 144;           /* into 20 MiB segments (below 10 MiB) */
    case 4: return 10 * MiB - 4096 + bits % 8193;        /* around the 10 MiB boundary */
    case 5: return 10 * MiB + (uint64_t)bits * 2048;     /* large, 2 MiB-multiple segments */
    case 6: return (uint64_t)(1 + bits % 64) * 2 * MiB;  /* exact multiples */
    default: return (uint64_t)bits << 16;                /* up to 4 GiB: OOMs */
    }
}

static void configure(const uint8_t *h, struct alloc_config *cfg)
{
    char conf[256];
    int n = 0;
    n += snprintf(conf + n, sizeof conf - (size_t)n, "expandable_segments:%s", h[0] & 1 ? "True" : "False");
    if (h[0] & 2)
        n += snprintf(conf + n, sizeof conf - (size_t)n, ",max_split_size_mb:%d", 20 + h[1] % 200);
    if (h[0] & 4)
        n += snprintf(conf + n, sizeof conf - (size_t)n, ",garbage_collection_threshold:0.%02d", 1 + h[2] % 99);
    if (h[0] & 8)
        n += snprintf(conf + n, sizeof conf - (size_t)n, ",roundup_power2_divisions:%d", 1 << (h[3] % 5));
    if (h[0] & 16)
        n += snprintf(conf + n, sizeof conf - (size_t)n, ",per_process_memory_fraction:0.%02d", 10 + h[4] % 90);
    if (h[0] & 32)
        snprintf(conf + n, sizeof conf - (size_t)n, ",max_non_split_rounding_mb:%d", 20 + h[4] % 100);
    struct err e = {0};
    alloc_config_default(cfg);
    fuzz_require(alloc_config_parse(cfg, conf, &e) == 0, "the harness writes valid configs: '%s': %s", conf, e.msg);
}

static void check(const struct allocator *a, const char *after)
{
    char why[256] = "";
    fuzz_require(alloc_check_consistency(a, why, sizeof why) == 0, "after %s: %s", after, why);
}

FUZZ_TARGET(alloc_ops)
{
    if (size < 6)
        return 0;
    struct alloc_config cfg;
    configure(data, &cfg);
    struct device *dev = sim_device_create("sim:fuzz", (64 * MiB) << (data[5] % 8), 0, NULL);
    struct allocator *a = allocator_create(dev, &cfg);
    struct recorder rec = {{0}, 0};
    allocator_set_trace(a, record, &rec);
    struct alloc_block *live[SLOTS] = {0};
    struct err e = {0};
    for (size_t i = 6; i < size;) {
        uint8_t opb = data[i++], op = opb & 7;
        size_t slot = (size_t)(opb >> 3) % SLOTS;
        if (op <= 3) {
            if (i + 3 > size)
                break;
            uint64_t bytes = decode_size(data[i], (uint16_t)(data[i + 1] | data[i + 2] << 8));
            i += 3;
            allocator_free(a, live[slot]);
            live[slot] = NULL;
            struct alloc_oom oom;
            int rc = allocator_malloc(a, bytes, op, &live[slot], &oom, &e);
            fuzz_require(rc == 0 || rc == 1, "malloc of %llu bytes: a block or an OOM, not a device error (%s)",
                         (unsigned long long)bytes, e.msg);
            fuzz_require(rc == 0 || !live[slot], "an OOM leaves nothing allocated");
            fuzz_require(rc != 0 || bytes == 0 || (live[slot] && alloc_block_size(live[slot]) >= bytes),
                         "a block holds its request");
            check(a, "malloc");
        } else if (op == 4) {
            allocator_free(a, live[slot]);
            live[slot] = NULL;
            check(a, "free");
        } else if (op == 5) {
            allocator_empty_cache(a);
            check(a, "empty_cache");
        } else if (op == 6) {
            if (slot % 4 == 0) {
                allocator_reset_peak_stats(a);
            } else if (slot % 4 == 1) {
                allocator_reset_accumulated_stats(a);
            } else if (slot % 4 == 2) {
                if (i >= size)
                    break;
                uint8_t b = data[i++];
                allocator_record_stream(a, live[b % SLOTS], (uint64_t)(b >> 5) % 4);
            } else {
                allocator_stream_sync(a, (uint64_t)(slot >> 2) % 4);
            }
            check(a, "a stats reset, record_stream or sync");
        } else {
            allocator_release_segment(a, rec.segments[slot % SEGMENTS]);
            check(a, "release_segment");
        }
    }
    for (size_t k = 0; k < SLOTS; k++)
        allocator_free(a, live[k]);
    check(a, "freeing everything");
    const struct alloc_stats *s = allocator_stats(a);
    fuzz_require(s->allocated_bytes[STAT_ALL].current == 0, "nothing allocated at the end");
    allocator_empty_cache(a);
    fuzz_require(s->reserved_bytes[STAT_ALL].current == 0, "empty_cache returns every segment");
    allocator_destroy(a);
    dev->ops->destroy(dev);
    return 0;
}
