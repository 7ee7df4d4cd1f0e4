/* alloc_limits_test.c: the allocator model at the edges of its numbers: a restored block whose offset +
 * size would wrap past 2^64 (or whose requested size exceeds it) is refused, and at the largest capacity
 * oomlab accepts (SIZE_LIMIT, 4 EiB) the cumulative stats stop at INT64_MAX instead of overflowing
 * while current and peak stay exact (UBSan in `make test SANITIZE=1` catches any signed overflow), and freed
 * (derived from allocated and current, stats.h) stays exact while allocated has stopped. */
#include "tap.h"

#include "alloc/allocator.h"
#include "alloc/snapshot.h"
#include "device/sim.h"
#include "util/size.h"

static void restore_refusals(void)
{
    struct device *dev = sim_device_create("sim:24GiB", 24 * GiB, 0, NULL);
    struct alloc_config cfg;
    alloc_config_default(&cfg);
    struct allocator *a = allocator_create(dev, &cfg);
    struct alloc_block *handles[2];
    uint64_t addr;
    struct err e = {0};
    struct restore_block wraps[] = {{512, UINT64_MAX - 255, 512}}; /* 512 + 2^64 - 256 wraps to 256 */
    ok(allocator_restore_segment(a, 20 * MiB, 0, false, wraps, 1, handles, &addr, &e) == -1 && e.code == ERR_INPUT,
       "a block at offset 512 of 2^64-256 bytes in a 20 MiB segment is refused");
    is_str(e.msg,
           "restored block 0 (offset 512, 18446744073709551360 bytes) overlaps or leaves its 20971520-byte segment",
           "with the reason");
    struct restore_block second[] = {{0, 512, 512}, {1024, UINT64_MAX - 1023, 0}};
    e = (struct err){0};
    ok(allocator_restore_segment(a, 20 * MiB, 0, false, second, 2, handles, &addr, &e) == -1,
       "so is a second block that wraps (%s)", e.msg);
    struct restore_block greedy[] = {{0, 512, 1024}};
    e = (struct err){0};
    ok(allocator_restore_segment(a, 2 * MiB, 0, true, greedy, 1, handles, &addr, &e) == -1, "a requested size above the block's is refused");
    is_str(e.msg, "restored block 0: requested size 1024 is larger than the block (512 bytes)", "with the reason");
    const struct alloc_stats *s = allocator_stats(a);
    is_int(s->reserved_bytes[STAT_ALL].current, 0, "nothing was reserved by the refused restores");
    struct restore_block fine[] = {{512, 20 * MiB - 512, 1000}};
    e = (struct err){0};
    ok(allocator_restore_segment(a, 20 * MiB, 0, false, fine, 1, handles, &addr, &e) == 0, "a block up to the segment's end is fine");
    is_int(s->allocated_bytes[STAT_ALL].current, 20 * MiB - 512, "and counted");
    allocator_destroy(a);
    dev->ops->destroy(dev);
}

static void largest_capacity(void)
{
    struct device *dev = sim_device_create("sim:4EiB", SIZE_LIMIT, 0, NULL);
    struct alloc_config cfg;
    alloc_config_default(&cfg);
    struct allocator *a = allocator_create(dev, &cfg);
    const uint64_t big = (UINT64_C(1) << 60) - 2 * MiB; /* just below PyTorch's 1 EB request limit */
    struct err e = {0};
    char why[256] = "";
    int fails = 0, bad = 0;
    /* 20 x 3 x ~1 EiB of allocations, past INT64_MAX cumulatively, from the same three cached segments
     * (the sim never reuses an address, so its 2^64 address space holds fewer than 16 such segments) */
    for (int i = 0; i < 20; i++) {
        struct alloc_block *b[3] = {0};
        struct alloc_oom oom;
        for (int k = 0; k < 3; k++)
            fails += allocator_malloc(a, big, 0, &b[k], &oom, &e) != 0;
        for (int k = 0; k < 3; k++)
            allocator_free(a, b[k]);
        bad += alloc_check_consistency(a, why, sizeof why) != 0;
    }
    is_int(fails, 0, "three ~1 EiB allocations at a time fit a 4 EiB device, 20 times");
    is_int(bad, 0, "the allocator stays consistent %s", why);
    const struct alloc_stats *s = allocator_stats(a);
    is_int(s->allocated_bytes[STAT_ALL].peak, (int64_t)(3 * big), "peak allocated is exact: 3 x (2^60 - 2 MiB)");
    is_int(s->reserved_bytes[STAT_ALL].peak, (int64_t)(3 * big), "peak reserved is exact");
    is_int(s->allocated_bytes[STAT_ALL].current, 0, "current is exact: 0");
    is_int(s->allocated_bytes[STAT_ALL].allocated, INT64_MAX, "cumulative allocated stops at INT64_MAX");
    is_int(s->allocated_bytes[STAT_ALL].freed, INT64_MAX, "cumulative freed stops at INT64_MAX");
    is_int(s->allocated_bytes[STAT_LARGE_POOL].allocated, INT64_MAX, "as do the pool's");
    is_int(s->num_device_alloc, 3, "three segments served it all");
    allocator_empty_cache(a);
    is_int(s->reserved_bytes[STAT_ALL].current, 0, "empty_cache returns them");
    allocator_destroy(a);
    dev->ops->destroy(dev);
}

/* Two ~1 EiB blocks kept, a third allocated and freed over and over: allocated passes INT64_MAX long before
 * freed does, and freed, which is not counted but derived from allocated, must not stop with it. */
static void freed_past_saturated_allocated(void)
{
    struct device *dev = sim_device_create("sim:4EiB", SIZE_LIMIT, 0, NULL);
    struct alloc_config cfg;
    alloc_config_default(&cfg);
    struct allocator *a = allocator_create(dev, &cfg);
    const int64_t big = (INT64_C(1) << 60) - 2 * (int64_t)MiB;
    struct err e = {0};
    struct alloc_oom oom;
    struct alloc_block *kept[2] = {0}, *b = NULL;
    int fails = 0;
    for (int k = 0; k < 2; k++)
        fails += allocator_malloc(a, (uint64_t)big, 0, &kept[k], &oom, &e) != 0;
    for (int i = 0; i < 7; i++) { /* 9 x big allocated in all (past INT64_MAX), 6 x big freed (below it) */
        allocator_free(a, b);
        fails += allocator_malloc(a, (uint64_t)big, 0, &b, &oom, &e) != 0;
    }
    is_int(fails, 0, "nine ~1 EiB allocations, three live at a time");
    const struct alloc_stats *s = allocator_stats(a);
    is_int(s->allocated_bytes[STAT_LARGE_POOL].allocated, INT64_MAX, "allocated has stopped at INT64_MAX");
    is_int(s->allocated_bytes[STAT_LARGE_POOL].freed, 6 * big, "freed is exact: 6 x (2^60 - 2 MiB)");
    is_int(s->active_bytes[STAT_ALL].freed, 6 * big, "as is active_bytes' freed");
    is_int(s->allocation[STAT_ALL].freed, 6, "six frees counted");
    allocator_reset_accumulated_stats(a);
    allocator_free(a, b);
    allocator_free(a, kept[0]);
    s = allocator_stats(a);
    is_int(s->allocated_bytes[STAT_ALL].allocated, 0, "after reset_accumulated: nothing allocated since");
    is_int(s->allocated_bytes[STAT_ALL].freed, 2 * big, "two blocks freed since, exactly");
    is_int(s->active_bytes[STAT_LARGE_POOL].freed, 2 * big, "active_bytes counts them too");
    is_int(s->allocation[STAT_LARGE_POOL].freed, 2, "two frees since the reset");
    is_int(s->allocated_bytes[STAT_ALL].current, big, "one block still allocated");
    allocator_free(a, kept[1]);
    allocator_destroy(a);
    dev->ops->destroy(dev);
}

int main(void)
{
    restore_refusals();
    largest_capacity();
    freed_past_saturated_allocated();
    return done_testing();
}
