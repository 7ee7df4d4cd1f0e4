/* alloc_rules_test.c: the allocator model against the worked numbers of pytorch-allocator.md:
 * rounding and segment sizes (1.3), roundup_power2_divisions (3), best fit and address order (2.1),
 * split rules (2.3), merging (2.4), the release-and-retry chain (2.5-2.7), GC (2.8), fractions (2.9),
 * expandable segments (4), stats resets (5), the OOM message (6) and record_stream's deferred frees
 * (CUDACachingAllocator.cpp: recordStream, insert_events, process_events). */
#include "tap.h"

#include "alloc/allocator.h"
#include "alloc/snapshot.h"
#include "device/sim.h"
#include "util/size.h"

struct rig {
    struct device *dev;
    struct allocator *a;
    struct alloc_config cfg;
};

static void rig_open(struct rig *r, uint64_t capacity, const char *conf)
{
    struct err e = {0};
    alloc_config_default(&r->cfg);
    if (alloc_config_parse(&r->cfg, conf, &e))
        printf("# bad conf in test: %s\n", e.msg);
    r->dev = sim_device_create("sim:test", capacity, 0, NULL);
    r->a = allocator_create(r->dev, &r->cfg);
}

static void rig_close(struct rig *r)
{
    allocator_destroy(r->a);
    r->dev->ops->destroy(r->dev);
}

static struct alloc_block *must_alloc(struct rig *r, uint64_t n, uint64_t stream)
{
    struct alloc_block *b = NULL;
    struct alloc_oom oom;
    struct err e = {0};
    int rc = allocator_malloc(r->a, n, stream, &b, &oom, &e);
    if (rc != 0)
        printf("# unexpected allocation failure of %llu bytes (rc %d)\n", (unsigned long long)n, rc);
    return b;
}

static int64_t st(struct rig *r, const char *key)
{
    int found;
    int64_t v = alloc_stats_get(allocator_stats(r->a), key, &found);
    if (!found)
        printf("# no such stat key %s\n", key);
    return v;
}

static void consistent(struct rig *r, const char *what)
{
    char why[256] = "";
    ok(alloc_check_consistency(r->a, why, sizeof why) == 0, "stats consistent after %s %s", what, why);
}

static void test_rounding_table(void)
{
    /* request, rounded, segment, allocated_bytes after one alloc in an empty cache */
    static const struct {
        uint64_t n, rounded, segment, allocated;
    } rows[] = {
        {1, 512, 2 * MiB, 512},
        {1200, 1536, 2 * MiB, 1536},
        {MiB, MiB, 2 * MiB, MiB},
        {MiB + 1, 1049088, 20 * MiB, 1049088},
        {5 * MiB, 5 * MiB, 20 * MiB, 5 * MiB},
        {10 * MiB - 512, 10485248, 20 * MiB, 10485248},
        {10 * MiB, 10 * MiB, 10 * MiB, 10 * MiB},
        {10 * MiB + 1, 10486272, 12 * MiB, 10486272},
        {11 * MiB, 11534336, 12 * MiB, 12 * MiB},
        {25 * MiB, 26214400, 26 * MiB, 26 * MiB},
        {GiB, GiB, GiB, GiB},
        {GiB + 1, 1073742336, GiB + 2 * MiB, 1073742336},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct rig r;
        rig_open(&r, 80 * GiB, "");
        is_u64(alloc_round_size(&r.cfg, rows[i].n), rows[i].rounded, "round_size(%llu)", (unsigned long long)rows[i].n);
        is_u64(alloc_segment_size(rows[i].rounded), rows[i].segment, "segment size for %llu", (unsigned long long)rows[i].n);
        struct alloc_block *b = must_alloc(&r, rows[i].n, 0);
        is_int(st(&r, "allocated_bytes.all.current"), rows[i].allocated, "allocated_bytes after %llu B",
               (unsigned long long)rows[i].n);
        is_int(st(&r, "reserved_bytes.all.current"), rows[i].segment, "reserved_bytes after %llu B",
               (unsigned long long)rows[i].n);
        is_int(st(&r, "requested_bytes.all.current"), rows[i].n, "requested_bytes after %llu B",
               (unsigned long long)rows[i].n);
        allocator_free(r.a, b);
        rig_close(&r);
    }
}

static void test_roundup(void)
{
    static const struct {
        const char *conf;
        uint64_t n, want;
    } rows[] = {
        {"roundup_power2_divisions:4", 84 * MiB, 96 * MiB},
        {"roundup_power2_divisions:8", 84 * MiB, 88 * MiB},
        {"roundup_power2_divisions:2", 400 * MiB, 512 * MiB},
        {"roundup_power2_divisions:2", 100 * MiB, 128 * MiB},
        {"roundup_power2_divisions:4", 100 * MiB, 112 * MiB},
        {"roundup_power2_divisions:8", 100 * MiB, 104 * MiB},
        {"roundup_power2_divisions:4", 300 * MiB, 320 * MiB},
        {"roundup_power2_divisions:4", 3 * MiB / 2 + 1, 1835008},
        {"roundup_power2_divisions:16", 64 * MiB, 64 * MiB},
        {"roundup_power2_divisions:4", 3000, 3072},
        {"roundup_power2_divisions:4", 1200, 1536},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct alloc_config c;
        struct err e = {0};
        alloc_config_default(&c);
        alloc_config_parse(&c, rows[i].conf, &e);
        is_u64(alloc_round_size(&c, rows[i].n), rows[i].want, "%s: %llu -> %llu", rows[i].conf,
               (unsigned long long)rows[i].n, (unsigned long long)rows[i].want);
    }
    /* the C++ test's list forms */
    struct alloc_config c;
    struct err e = {0};
    alloc_config_default(&c);
    ok(alloc_config_parse(&c, "roundup_power2_divisions:[64:8,128:2,256:4,512:2,1024:4,>:1]", &e) == 0, "list form parses");
    const uint64_t mb[] = {32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
    const uint32_t want1[] = {8, 8, 2, 4, 2, 4, 1, 1, 1};
    for (int i = 0; i < 9; i++)
        is_int(alloc_config_divisions(&c, mb[i] * MiB), want1[i], "[64:8,...,>:1] divisions(%llu MiB)",
               (unsigned long long)mb[i]);
    alloc_config_default(&c);
    ok(alloc_config_parse(&c, "roundup_power2_divisions:[128:8,256:16,512:1,2048:8,>:2]", &e) == 0, "second list parses");
    const uint64_t mb2[] = {64, 128, 256, 512, 1024, 2048, 4096};
    const uint32_t want2[] = {8, 8, 16, 1, 0, 8, 2};
    for (int i = 0; i < 7; i++)
        is_int(alloc_config_divisions(&c, mb2[i] * MiB), want2[i], "[128:8,...,>:2] divisions(%llu MiB)",
               (unsigned long long)mb2[i]);
    /* through the allocator's mallocs: the divisions it was made with (none), then those of each
     * allocator_set_config (it looks them up only when some apply) */
    struct rig r;
    rig_open(&r, 8 * GiB, "");
    struct alloc_block *b = must_alloc(&r, 84 * MiB + 1, 0);
    is_u64(alloc_block_size(b), 84 * MiB + 512, "no divisions: 84 MiB + 1 -> 84 MiB + 512");
    allocator_free(r.a, b);
    ok(alloc_config_parse(&c, "roundup_power2_divisions:4", &e) == 0, "divisions 4 parse");
    allocator_set_config(r.a, &c);
    b = must_alloc(&r, 84 * MiB, 0);
    is_u64(alloc_block_size(b), 96 * MiB, "set_config's divisions 4 apply: 84 MiB -> 96 MiB");
    allocator_free(r.a, b);
    ok(alloc_config_parse(&c, "roundup_power2_divisions:8", &e) == 0, "divisions 8 parse");
    allocator_set_config(r.a, &c);
    b = must_alloc(&r, 84 * MiB, 0);
    is_u64(alloc_block_size(b), 88 * MiB, "then divisions 8: 84 MiB -> 88 MiB");
    allocator_free(r.a, b);
    rig_close(&r);
}

static void test_best_fit_and_split(void)
{
    struct rig r;
    rig_open(&r, 80 * GiB, "");
    /* Two 1 MiB small allocations share one 2 MiB segment: low address first. */
    struct alloc_block *x = must_alloc(&r, MiB, 0), *y = must_alloc(&r, MiB, 0);
    is_u64(alloc_block_addr(y) - alloc_block_addr(x), MiB, "second 1 MiB block follows the first in the same segment");
    is_int(st(&r, "segment.small_pool.current"), 1, "one small segment");
    is_u64(alloc_block_addr(x), 1ULL << 40, "first segment at 2^40 on sim");
    allocator_free(r.a, x);
    is_int(st(&r, "inactive_split.small_pool.current"), 1, "freed head of a split segment is inactive_split");
    is_int(st(&r, "inactive_split_bytes.small_pool.current"), MiB, "inactive_split_bytes 1 MiB");
    allocator_free(r.a, y);
    is_int(st(&r, "inactive_split.small_pool.current"), 0, "merged back: no inactive split");
    consistent(&r, "small merge");

    /* 11 MiB: 12 MiB segment not split (remainder 1 MiB is not > 1 MiB) -> whole block allocated */
    struct alloc_block *b11 = must_alloc(&r, 11 * MiB, 0);
    is_u64(alloc_block_size(b11), 12 * MiB, "11 MiB request takes the whole 12 MiB block");
    allocator_free(r.a, b11);
    /* The cached 12 MiB block serves a 6 MiB request, split (remainder 6 MiB > 1 MiB). */
    struct alloc_block *b6 = must_alloc(&r, 6 * MiB, 0);
    is_int(st(&r, "segment.large_pool.current"), 1, "6 MiB reuses the cached 12 MiB segment");
    is_u64(alloc_block_size(b6), 6 * MiB, "and splits it");
    is_int(st(&r, "inactive_split_bytes.large_pool.current"), 6 * MiB, "leaving a 6 MiB inactive split");
    consistent(&r, "large split");
    /* Equal-size free blocks: lowest address wins. */
    struct alloc_block *c1 = must_alloc(&r, 30 * MiB, 0), *c2 = must_alloc(&r, 30 * MiB, 0);
    uint64_t lower = alloc_block_addr(c1) < alloc_block_addr(c2) ? alloc_block_addr(c1) : alloc_block_addr(c2);
    allocator_free(r.a, c2);
    allocator_free(r.a, c1);
    struct alloc_block *c3 = must_alloc(&r, 30 * MiB, 0);
    is_u64(alloc_block_addr(c3), lower, "best fit breaks ties by lowest address");
    /* A block freed on stream 1 does not serve stream 2. */
    struct alloc_block *s1 = must_alloc(&r, 40 * MiB, 1);
    allocator_free(r.a, s1);
    int64_t segs = st(&r, "segment.all.current");
    struct alloc_block *s2 = must_alloc(&r, 40 * MiB, 2);
    is_int(st(&r, "segment.all.current"), segs + 1, "free block of stream 1 not used by stream 2");
    allocator_free(r.a, s2);
    allocator_free(r.a, c3);
    allocator_free(r.a, b6);
    consistent(&r, "streams");
    allocator_empty_cache(r.a);
    is_int(st(&r, "reserved_bytes.all.current"), 0, "empty_cache releases every whole free segment");
    is_int(st(&r, "num_sync_all_streams"), 1, "empty_cache counts one num_sync_all_streams");
    rig_close(&r);
}

static void test_oom_chain_and_message(void)
{
    struct rig r;
    rig_open(&r, 100 * MiB, "");
    struct alloc_block *a1 = must_alloc(&r, 60 * MiB, 0);
    struct alloc_block *a2 = must_alloc(&r, 30 * MiB, 0);
    allocator_free(r.a, a2); /* 30 MiB cached */
    /* 40 MiB: no free block fits, cudaMalloc fails (60+30+40 > 100), release_cached frees the 30 MiB, retry works */
    struct alloc_block *a3 = must_alloc(&r, 40 * MiB, 0);
    ok(a3 != NULL, "allocation succeeds after releasing the cache");
    is_int(st(&r, "num_alloc_retries"), 1, "one retry counted");
    is_int(st(&r, "num_device_free"), 1, "the cached segment was cudaFree'd");
    /* 10 MiB more fits exactly (100 = 60 + 40); then 1 byte needs a 2 MiB segment: OOM */
    struct alloc_block *b = NULL;
    struct alloc_oom oom;
    struct err e = {0};
    /* needs a 20 MiB segment: 60 + 40 + 20 > 100 */
    is_int(allocator_malloc(r.a, 3 * MiB, 0, &b, &oom, &e), 1, "3 MiB request needing a 20 MiB segment is an OOM");
    is_int(allocator_malloc(r.a, 5 * MiB, 0, &b, &oom, &e), 1, "5 MiB request is an OOM");
    is_int(st(&r, "num_ooms"), 2, "num_ooms counts both");
    char msg[1024];
    alloc_oom_message(&oom, 0, msg, sizeof msg);
    is_str(msg,
           "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 100.00 MiB of which 0 bytes "
           "is free. Of the allocated memory 100.00 MiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but "
           "unallocated. If reserved but unallocated memory is large try setting "
           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
           "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
           "OOM message, byte for byte");
    is_int(allocator_malloc(r.a, 1ULL << 60, 0, &b, &oom, &e), 1, "1 EB request rejected");
    alloc_oom_message(&oom, 0, msg, sizeof msg);
    is_str(msg, "CUDA out of memory. Tried to allocate more than 1EB memory.", "1 EB message");
    is_int(st(&r, "num_ooms"), 2, "the 1 EB rejection is not counted in num_ooms");
    allocator_free(r.a, a1);
    allocator_free(r.a, a3);
    consistent(&r, "oom chain");
    rig_close(&r);
}

static void test_fraction_and_max_split(void)
{
    struct rig r;
    rig_open(&r, GiB, "per_process_memory_fraction:0.5");
    struct alloc_block *b = NULL;
    struct alloc_oom oom;
    struct err e = {0};
    is_int(allocator_malloc(r.a, 600 * MiB, 0, &b, &oom, &e), 1, "600 MiB over a 512 MiB fraction limit is an OOM");
    char msg[1024];
    alloc_oom_message(&oom, 0, msg, sizeof msg);
    ok(strstr(msg, "is free. 512.00 MiB allowed; Of the allocated") != NULL, "OOM message names the allowed amount");
    rig_close(&r);

    /* max_split_size_mb:100: oversize blocks are not split and do not serve small requests */
    rig_open(&r, 8 * GiB, "max_split_size_mb:100");
    struct alloc_block *big = must_alloc(&r, 200 * MiB, 0);
    allocator_free(r.a, big);
    struct alloc_block *small = must_alloc(&r, 50 * MiB, 0);
    is_int(st(&r, "segment.large_pool.current"), 2, "a cached 200 MiB oversize block does not serve 50 MiB");
    struct alloc_block *b190 = must_alloc(&r, 190 * MiB, 0);
    is_u64(alloc_block_size(b190), 200 * MiB, "oversize request takes the 200 MiB block whole (within 20 MiB)");
    is_int(st(&r, "oversize_allocations.current"), 1, "one oversize allocation");
    is_int(st(&r, "oversize_segments.current"), 1, "one oversize segment");
    allocator_free(r.a, b190);
    struct alloc_block *b170 = must_alloc(&r, 170 * MiB, 0);
    is_int(st(&r, "segment.large_pool.current"), 3, "170 MiB does not take the 200 MiB block (>= 20 MiB slack)");
    allocator_free(r.a, b170);
    allocator_free(r.a, small);
    is_int(st(&r, "max_split_size"), 100 * MiB, "max_split_size stat");
    consistent(&r, "max_split");
    rig_close(&r);

    /* release_available_cached_blocks frees one oversize block instead of the whole cache */
    rig_open(&r, 500 * MiB, "max_split_size_mb:100");
    struct alloc_block *o1 = must_alloc(&r, 150 * MiB, 0), *o2 = must_alloc(&r, 150 * MiB, 0);
    struct alloc_block *s20 = must_alloc(&r, 20 * MiB, 0);
    allocator_free(r.a, o1);
    allocator_free(r.a, o2);
    allocator_free(r.a, s20);
    struct alloc_block *n1 = must_alloc(&r, 250 * MiB, 0); /* 300+20+250 > 500 */
    ok(n1 != NULL, "250 MiB fits after releasing cached oversize blocks");
    is_int(st(&r, "num_alloc_retries"), 0, "without the full-flush retry");
    is_int(st(&r, "segment.large_pool.current"), 2, "the 20 MiB segment stays cached");
    allocator_free(r.a, n1);
    consistent(&r, "release_available");
    rig_close(&r);
}

static void test_expandable(void)
{
    static const struct {
        uint64_t n, mapped;
    } rows[] = {{MiB + 1, 20 * MiB}, {5 * MiB, 20 * MiB}, {11 * MiB, 20 * MiB}, {25 * MiB, 40 * MiB}, {GiB, 1040 * MiB}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct rig r;
        rig_open(&r, 80 * GiB, "expandable_segments:True");
        struct alloc_block *b = must_alloc(&r, rows[i].n, 0);
        is_int(st(&r, "reserved_bytes.all.current"), rows[i].mapped, "expandable: %llu B maps %llu MiB",
               (unsigned long long)rows[i].n, (unsigned long long)(rows[i].mapped / MiB));
        is_int(st(&r, "segment.all.current"), 0, "expandable memory is not counted in segment");
        is_u64(alloc_block_addr(b), 1ULL << 40, "expandable reservation at 2^40");
        allocator_free(r.a, b);
        consistent(&r, "expandable alloc/free");
        allocator_empty_cache(r.a);
        is_int(st(&r, "reserved_bytes.all.current"), 0, "empty_cache unmaps every free page");
        is_int(st(&r, "num_device_free"), 1, "one unmap");
        rig_close(&r);
    }
    /* Allocations tile one growing segment; the second large segment for a new stream sits above the first
     * reservation: 2^40 + 1.125 x 80 GiB rounded to 20 MiB + 1 GiB. */
    struct rig r;
    rig_open(&r, 80 * GiB, "expandable_segments:True");
    struct alloc_block *x = must_alloc(&r, 15 * MiB, 0), *y = must_alloc(&r, 15 * MiB, 0);
    is_u64(alloc_block_addr(y), alloc_block_addr(x) + 15 * MiB, "second block tiles right after the first");
    is_int(st(&r, "reserved_bytes.all.current"), 40 * MiB, "two pages mapped for 30 MiB");
    struct alloc_block *z = must_alloc(&r, 15 * MiB, 7);
    uint64_t reserve = 20 * MiB * ((80 * GiB + 10 * GiB + 20 * MiB - 1) / (20 * MiB));
    is_u64(alloc_block_addr(z), (1ULL << 40) + reserve + GiB, "new stream gets its own reservation above the first");
    struct alloc_block *s = must_alloc(&r, 1000, 0);
    is_int(st(&r, "reserved_bytes.small_pool.current"), 2 * MiB, "small pool maps one 2 MiB page");
    allocator_free(r.a, x);
    allocator_empty_cache(r.a);
    is_int(st(&r, "reserved_bytes.large_pool.current"), 60 * MiB, "15 MiB free at the start: no whole page to unmap (40 + 20 MiB stay)");
    allocator_free(r.a, y);
    allocator_free(r.a, z);
    allocator_free(r.a, s);
    consistent(&r, "expandable streams");
    allocator_empty_cache(r.a);
    is_int(st(&r, "reserved_bytes.all.current"), 0, "all pages unmapped");
    consistent(&r, "expandable release");
    rig_close(&r);
}

/* A replayed retry: the recording released cached pages, then mapped new ones for the request. Unmapping
 * an oversize free block leaves a smaller one (here 18 MiB, under max_split_size) that the normal search
 * takes; allocator_malloc_fresh skips the search, as the recorded request (which searched before its
 * release) did, and maps after the lowest unmapped range's free 2 MiB instead. */
static void test_fresh_after_release(void)
{
    for (int fresh = 0; fresh < 2; fresh++) {
        struct rig r;
        rig_open(&r, 80 * GiB, "expandable_segments:True,max_split_size_mb:128");
        uint64_t base = 1ULL << 40;
        struct alloc_block *l0 = must_alloc(&r, 18 * MiB, 0), *f1 = must_alloc(&r, 202 * MiB, 0);
        struct alloc_block *s = must_alloc(&r, 2 * MiB, 0), *f2 = must_alloc(&r, 318 * MiB, 0);
        is_u64(alloc_block_addr(f2), base + 222 * MiB, "318 MiB laid after the 2 MiB block");
        allocator_free(r.a, f1);
        allocator_free(r.a, f2);
        ok(allocator_release_mapped(r.a, base + 20 * MiB, 200 * MiB), "unmap [20, 220) MiB");
        ok(allocator_release_mapped(r.a, base + 240 * MiB, 300 * MiB), "unmap [240, 540) MiB");
        is_int(st(&r, "reserved_bytes.all.current"), 40 * MiB, "two pages stay mapped: [0, 20) and [220, 240) MiB");
        struct alloc_block *b = NULL;
        struct alloc_oom oom;
        struct err e = {0};
        int rc = (fresh ? allocator_malloc_fresh : allocator_malloc)(r.a, 10 * MiB, 0, &b, &oom, &e);
        ok(rc == 0 && b, "10 MiB allocates");
        if (fresh) {
            is_u64(b ? alloc_block_addr(b) : 0, base + 18 * MiB, "fresh: after the free 2 MiB, mapping new pages");
            is_int(st(&r, "reserved_bytes.all.current"), 60 * MiB, "fresh: one 20 MiB page mapped");
        } else {
            is_u64(b ? alloc_block_addr(b) : 0, base + 222 * MiB, "search: the 18 MiB free block");
            is_int(st(&r, "reserved_bytes.all.current"), 40 * MiB, "search: nothing mapped");
        }
        allocator_free(r.a, b);
        allocator_free(r.a, l0);
        allocator_free(r.a, s);
        consistent(&r, fresh ? "a fresh allocation" : "a searched allocation");
        rig_close(&r);
    }
}

static void test_gc(void)
{
    /* GC runs only under a fraction < 1 and a threshold; it frees aged unsplit large blocks on a miss. */
    struct rig r;
    rig_open(&r, 1000 * MiB, "garbage_collection_threshold:0.5,per_process_memory_fraction:0.8");
    struct alloc_block *b[4];
    for (int i = 0; i < 4; i++)
        b[i] = must_alloc(&r, 100 * MiB, 0);
    for (int i = 0; i < 4; i++)
        allocator_free(r.a, b[i]);
    /* reserved 400 MiB > 0.5 x 800 MiB? no (400 <= 400): a miss must not collect */
    struct alloc_block *m = must_alloc(&r, 120 * MiB, 0);
    is_int(st(&r, "segment.large_pool.current"), 5, "no GC while reserved <= threshold");
    /* now reserved 520 > 400: the next miss collects blocks of at least average age */
    struct alloc_block *m2 = must_alloc(&r, 130 * MiB, 0);
    ok(st(&r, "segment.large_pool.current") < 6, "GC released aged cached blocks (%lld segments)",
       (long long)st(&r, "segment.large_pool.current"));
    is_int(st(&r, "num_alloc_retries"), 0, "without a retry");
    allocator_free(r.a, m);
    allocator_free(r.a, m2);
    consistent(&r, "gc");
    rig_close(&r);
    /* Without a fraction the threshold does nothing. */
    rig_open(&r, 1000 * MiB, "garbage_collection_threshold:0.5");
    for (int i = 0; i < 4; i++)
        b[i] = must_alloc(&r, 100 * MiB, 0);
    for (int i = 0; i < 4; i++)
        allocator_free(r.a, b[i]);
    m = must_alloc(&r, 120 * MiB, 0);
    m2 = must_alloc(&r, 130 * MiB, 0);
    is_int(st(&r, "segment.large_pool.current"), 6, "garbage_collection_threshold alone changes nothing");
    allocator_free(r.a, m);
    allocator_free(r.a, m2);
    rig_close(&r);
}

static void test_stat_resets(void)
{
    struct rig r;
    rig_open(&r, GiB, "");
    struct alloc_block *b = must_alloc(&r, 100 * MiB, 0);
    allocator_free(r.a, b);
    is_int(st(&r, "allocated_bytes.all.peak"), 100 * MiB, "peak before reset");
    allocator_reset_peak_stats(r.a);
    is_int(st(&r, "allocated_bytes.all.peak"), 0, "reset_peak_memory_stats: peak := current");
    is_int(st(&r, "reserved_bytes.all.peak"), 100 * MiB, "reserved peak := current reserved");
    is_int(st(&r, "allocated_bytes.all.allocated"), 100 * MiB, "accumulated kept by reset_peak");
    allocator_reset_accumulated_stats(r.a);
    is_int(st(&r, "allocated_bytes.all.allocated"), 0, "reset_accumulated: allocated := 0");
    is_int(st(&r, "allocated_bytes.all.freed"), 0, "reset_accumulated: freed := 0");
    is_int(st(&r, "num_device_alloc"), 0, "reset_accumulated clears num_device_alloc");
    is_int(st(&r, "reserved_bytes.all.current"), 100 * MiB, "current untouched");
    struct stat_entry all[ALLOC_STATS_NKEYS];
    size_t n = alloc_stats_flatten(allocator_stats(r.a), all);
    is_int(n, 122, "memory_stats has 122 keys");
    is_str(all[0].key, "active.all.allocated", "keys sorted like Python: first");
    is_str(all[n - 1].key, "segment.small_pool.peak", "keys sorted like Python: last");
    is_int(st(&r, "max_split_size"), -1, "max_split_size -1 when unlimited");
    rig_close(&r);
}

/* A block used on stream 1 and freed on stream 0 is not reused until stream 1 synchronises; memory_stats
 * count it as freed (allocated) but still active. */
static void test_record_stream(void)
{
    struct rig r;
    rig_open(&r, 1 * GiB, "");
    struct alloc_block *a = must_alloc(&r, 12 * MiB, 0);
    uint64_t a_addr = alloc_block_addr(a);
    allocator_record_stream(r.a, a, 1);
    allocator_record_stream(r.a, a, 1); /* a set: one event per stream */
    allocator_free(r.a, a);
    uint64_t pending_bytes = 0;
    is_u64(allocator_pending_frees(r.a, &pending_bytes), 1, "the freed block waits for stream 1");
    is_u64(pending_bytes, 12 * MiB, "... 12 MiB of it");
    is_int(st(&r, "allocated_bytes.all.current"), 0, "allocated_bytes drop at the free");
    is_int(st(&r, "allocation.all.current"), 0, "allocation.all.current 0");
    is_int(st(&r, "active_bytes.all.current"), 12 * MiB, "active_bytes keep the pending block");
    is_int(st(&r, "active.all.current"), 1, "active.all.current 1");
    is_int(st(&r, "requested_bytes.all.current"), 12 * MiB, "requested_bytes keep it too");
    consistent(&r, "a free deferred by record_stream");

    struct alloc_block *b = must_alloc(&r, 12 * MiB, 0);
    ok(alloc_block_addr(b) != a_addr, "the next 12 MiB on stream 0 gets a new segment, not the pending block");
    is_int(st(&r, "reserved_bytes.all.current"), 24 * MiB, "reserved 24 MiB: two segments");
    is_int(st(&r, "num_device_alloc"), 2, "two cudaMallocs");
    allocator_free(r.a, b); /* no other stream: straight back to the pool */
    is_u64(allocator_pending_frees(r.a, NULL), 1, "still pending before stream 1 synchronises");

    allocator_stream_sync(r.a, 0); /* the wrong stream changes nothing */
    struct alloc_block *c = must_alloc(&r, 12 * MiB, 0);
    is_u64(alloc_block_addr(c), alloc_block_addr(b), "after syncing stream 0 only, the pool's block is reused");
    allocator_free(r.a, c);
    allocator_stream_sync(r.a, 1);
    is_int(st(&r, "active_bytes.all.current"), 12 * MiB, "a sync alone returns nothing: events are queried at malloc");
    c = must_alloc(&r, 12 * MiB, 0);
    is_u64(alloc_block_addr(c), a_addr, "after stream 1 synchronised, the next malloc reuses the lower address");
    is_u64(allocator_pending_frees(r.a, NULL), 0, "nothing pending");
    is_int(st(&r, "active_bytes.all.current"), 12 * MiB, "active_bytes 12 MiB: the new block only");
    is_int(st(&r, "reserved_bytes.all.current"), 24 * MiB, "no new segment");
    consistent(&r, "events processed at malloc");

    /* the allocation stream itself is ignored */
    allocator_record_stream(r.a, c, 0);
    allocator_free(r.a, c);
    is_u64(allocator_pending_frees(r.a, NULL), 0, "record_stream on the block's own stream defers nothing");

    /* empty_cache synchronises every event before releasing */
    struct alloc_block *d = must_alloc(&r, 12 * MiB, 0);
    allocator_record_stream(r.a, d, 2);
    allocator_record_stream(r.a, d, 3);
    allocator_free(r.a, d);
    is_u64(allocator_pending_frees(r.a, NULL), 1, "two streams' events, one block");
    allocator_empty_cache(r.a);
    is_u64(allocator_pending_frees(r.a, NULL), 0, "empty_cache completed both events");
    is_int(st(&r, "reserved_bytes.all.current"), 0, "and released both segments");
    is_int(st(&r, "active_bytes.all.current"), 0, "active_bytes 0");
    consistent(&r, "empty_cache with pending events");

    /* a pending block is not merged with its free neighbour (small pool: 512-byte split remainder) */
    struct alloc_block *x = must_alloc(&r, 1000, 0), *y = must_alloc(&r, 1000, 0);
    uint64_t x_addr = alloc_block_addr(x);
    allocator_record_stream(r.a, x, 1);
    allocator_free(r.a, x);
    allocator_free(r.a, y);
    is_int(st(&r, "inactive_split.all.current"), 1, "y merged with the remainder only: one inactive split block");
    is_int(st(&r, "active_bytes.all.current"), 1024, "x's 1024 bytes still active");
    consistent(&r, "a pending block beside free ones");
    allocator_stream_sync(r.a, 1);
    struct alloc_block *z = must_alloc(&r, 1 * MiB, 0);
    is_u64(alloc_block_addr(z), x_addr, "x came back and merged with the rest: the whole segment is one free block");
    consistent(&r, "the merge after the events");
    allocator_free(r.a, z);

    /* a recorded segment_free of a segment whose block waits for its events is refused */
    struct alloc_block *w = must_alloc(&r, 12 * MiB, 0);
    uint64_t w_addr = alloc_block_addr(w);
    allocator_record_stream(r.a, w, 1);
    allocator_free(r.a, w);
    ok(!allocator_release_segment(r.a, w_addr), "a pending block's segment is not released");
    consistent(&r, "a refused release of a pending block");
    allocator_empty_cache(r.a);
    /* still live at destroy, with streams recorded: allocator_destroy frees its stream_uses array (a leak
     * under SANITIZE=1 otherwise) */
    struct alloc_block *live = must_alloc(&r, 4 * MiB, 0);
    allocator_record_stream(r.a, live, 2);
    rig_close(&r);

    /* expandable segments: growth does not take a pending block's pages (PyTorch's allocatable()) */
    rig_open(&r, 1 * GiB, "expandable_segments:True");
    struct alloc_block *p = must_alloc(&r, 20 * MiB, 0);
    uint64_t p_addr = alloc_block_addr(p);
    allocator_record_stream(r.a, p, 1);
    allocator_free(r.a, p);
    struct alloc_block *q = must_alloc(&r, 40 * MiB, 0);
    ok(alloc_block_addr(q) >= p_addr + 20 * MiB, "the next block maps pages after the pending one");
    is_int(st(&r, "reserved_bytes.all.current"), 60 * MiB, "60 MiB mapped");
    consistent(&r, "expandable growth beside a pending block");
    allocator_free(r.a, q);
    allocator_stream_sync(r.a, 1);
    struct alloc_block *u = must_alloc(&r, 60 * MiB, 0);
    is_u64(alloc_block_addr(u), p_addr, "after the sync the pending pages join: 60 MiB from the base");
    is_int(st(&r, "reserved_bytes.all.current"), 60 * MiB, "nothing more mapped");
    consistent(&r, "the pending block back in the expandable segment");
    allocator_free(r.a, u);
    rig_close(&r);
}

/* A block handed out whole from its pool starts with no stream uses: while free, the same bytes held its tree
 * links (the 96-byte block, harness/alloc/internal.h). And record_stream on a block that is not allocated is
 * ignored: PyTorch's recordStream finds only allocated blocks (get_allocated_block). */
static void test_reused_block_uses(void)
{
    struct rig r;
    rig_open(&r, 1 * GiB, "");
    struct alloc_block *a = must_alloc(&r, 12 * MiB, 0), *b = must_alloc(&r, 12 * MiB, 0); /* two segments */
    uint64_t a_addr = alloc_block_addr(a);
    ok(a_addr < alloc_block_addr(b), "a below b");
    allocator_free(r.a, a); /* a: its class's root */
    allocator_free(r.a, b); /* b: a's right child, so a's links are not all NULL */
    allocator_record_stream(r.a, b, 1); /* b is free: ignored */
    struct alloc_block *again = must_alloc(&r, 12 * MiB, 0);
    is_u64(alloc_block_addr(again), a_addr, "a reused whole (the lower address)");
    allocator_free(r.a, again);
    is_u64(allocator_pending_frees(r.a, NULL), 0, "its free waits for no stream: no uses left from its links");
    is_int(st(&r, "active_bytes.all.current"), 0, "active_bytes 0");
    struct alloc_block *x = must_alloc(&r, 12 * MiB, 0), *y = must_alloc(&r, 12 * MiB, 0);
    is_int(st(&r, "num_device_alloc"), 2, "both 12 MiB blocks reused: still two segments");
    allocator_free(r.a, x);
    allocator_free(r.a, y);
    is_u64(allocator_pending_frees(r.a, NULL), 0, "record_stream on the free b recorded nothing");
    consistent(&r, "reused blocks and a record_stream on a free block");
    rig_close(&r);
}

int main(void)
{
    test_rounding_table();
    test_roundup();
    test_best_fit_and_split();
    test_oom_chain_and_message();
    test_fraction_and_max_split();
    test_expandable();
    test_fresh_after_release();
    test_gc();
    test_stat_resets();
    test_record_stream();
    test_reused_block_uses();
    return done_testing();
}
