/* runner_managed_test.c: unified memory outside the allocator (OP_MANAGED_ALLOC, bitsandbytes' paged
 * optimizer state) on a 64 MiB sim. 24 MiB resident, then 48 MiB that find no room and stay on the host,
 * a zero-byte one; freed, the device's pages come back; 16 MiB more stay below the 24 MiB peak. A tensor
 * still live at runner_destroy is let go with the runner. */
#include "sim_runner.h"
#include "tap.h"
#include "util/size.h"

static uint64_t used(struct device *dev)
{
    uint64_t free_bytes = 0, total = 0;
    dev->ops->mem_info(dev, &free_bytes, &total);
    return total - free_bytes;
}

int main(void)
{
    struct err e = {0};
    struct device *dev;
    struct runner *r = sim_runner("64MiB", &dev, &e);
    if (!ok(r != NULL, "a runner on a 64 MiB sim")) {
        diag("%s", e.msg);
        return done_testing();
    }
    uint64_t before = used(dev);
    struct op_sink *sink = runner_sink(r);
    struct op paged = {.kind = OP_MANAGED_ALLOC, .id = 1, .bytes = 24 * MiB, .category = CAT_OPTIMIZER_STATE,
                       .name = "adam.state1"};
    ok(sink->emit(sink, &paged, &e) == 0 && used(dev) == before + 24 * MiB, "24 MiB resident on the device");
    paged.id = 2;
    paged.bytes = 48 * MiB;
    ok(sink->emit(sink, &paged, &e) == 0 && used(dev) == before + 24 * MiB, "48 MiB more stay on the host");
    paged.id = 3;
    paged.bytes = 0;
    ok(sink->emit(sink, &paged, &e) == 0, "a zero-byte one");
    const struct run_result *res = runner_peek(r);
    is_u64(res->managed_peak, 24 * MiB, "the resident peak: 24 MiB");
    is_u64(res->managed_on_host, 48 * MiB, "on the host: 48 MiB");
    bool freed = true;
    for (uint64_t id = 1; id <= 3 && freed; id++)
        freed = sink->emit(sink, &(struct op){.kind = OP_FREE, .id = id}, &e) == 0;
    ok(freed && used(dev) == before, "all three freed: the device's pages come back");
    paged.id = 4;
    paged.bytes = 16 * MiB;
    ok(sink->emit(sink, &paged, &e) == 0 && used(dev) == before + 16 * MiB && res->managed_peak == 24 * MiB,
       "16 MiB more: resident, the peak still 24 MiB");
    ok(sink->emit(sink, &(struct op){.kind = OP_FREE, .id = 1}, &e) != 0, "a second free of the first is refused");
    runner_destroy(r); /* with tensor 4 still live */
    dev->ops->destroy(dev);
    return done_testing();
}
