/* runner_peaks_test.c: the run's and each phase's allocated peaks, where they happened and the live bytes
 * per category at the run's: an allocation under the current phase's peak changes neither (the runner
 * skips it), one over the phase's but not over the run's moves the phase's only, and an equal one is no
 * new peak. Every op is counted, run with no observer. */
#include <string.h>

#include "kernels.h"
#include "run/runner.h"
#include "sim_runner.h"
#include "tap.h"
#include "util/size.h"

static const struct phase_peak *phase_of(const struct run_result *res, const char *name)
{
    for (size_t i = 0; i < res->nphases; i++)
        if (!strcmp(res->phases[i].name, name))
            return &res->phases[i];
    return NULL;
}

static struct op alloc(uint64_t id, uint64_t mib, enum category c)
{
    return (struct op){.kind = OP_ALLOC, .id = id, .bytes = mib * MiB, .category = (uint8_t)c, .name = "t"};
}

static struct op free_op(uint64_t id)
{
    return (struct op){.kind = OP_FREE, .id = id};
}

int main(void)
{
    struct err e = {0};
    struct device *dev;
    struct runner *r = sim_runner("1GiB", &dev, &e);
    if (!ok(r, "a runner on a 1 GiB sim")) {
        diag("%s", e.msg);
        return done_testing();
    }
    struct op ops[] = {
        {.kind = OP_STEP, .id = 1},
        {.kind = OP_PHASE, .name = "load"},
        alloc(1, 4, CAT_PARAM),
        alloc(2, 2, CAT_ACTIVATION), /* 6 MiB: the run's peak until backward */
        free_op(2),
        {.kind = OP_PHASE, .name = "forward"},
        alloc(3, 1, CAT_ACTIVATION), /* 5 MiB: forward's first peak, under the run's */
        alloc(4, 1, CAT_ACTIVATION), /* 6 MiB: forward's peak; the run's equalled, not passed */
        free_op(3),
        free_op(4),
        alloc(5, 1, CAT_ACTIVATION), /* 5 MiB: under forward's peak, no change */
        {.kind = OP_STEP, .id = 2},
        {.kind = OP_PHASE, .name = "backward"},
        alloc(6, 3, CAT_GRAD), /* 8 MiB: the run's peak */
        {.kind = OP_KERNEL, .kernel = {.kernel = K_FILL}},
        free_op(6),
    };
    struct op_sink *sink = runner_sink(r);
    bool emitted = true;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0] && emitted; i++) {
        emitted = sink->emit(sink, &ops[i], &e) == 0;
        if (ops[i].kind == OP_STEP && ops[i].id == 2)
            is_str(runner_peek(r)->peak_allocated_phase, "load", "after step 1: the run's peak is load's (forward only equalled it)");
    }
    if (!ok(emitted, "the program runs"))
        diag("%s", e.msg);
    struct run_result res;
    runner_finish(r, &res);
    ok(res.ops == sizeof ops / sizeof ops[0] && res.allocs == 6 && res.frees == 4 && res.kernels == 1,
       "every op counted: %llu ops, %llu allocations, %llu frees, %llu kernels", (unsigned long long)res.ops,
       (unsigned long long)res.allocs, (unsigned long long)res.frees, (unsigned long long)res.kernels);
    is_u64(res.peak_allocated, 8 * MiB, "the run's allocated peak: 8 MiB");
    is_u64((uint64_t)res.peak_allocated_step, 2, "  in step 2");
    is_str(res.peak_allocated_phase, "backward", "  in backward");
    is_u64(res.category_at_peak[CAT_PARAM], 4 * MiB, "  4 MiB of parameters live then");
    is_u64(res.category_at_peak[CAT_ACTIVATION], 1 * MiB, "  1 MiB of activations");
    is_u64(res.category_at_peak[CAT_GRAD], 3 * MiB, "  3 MiB of gradients");
    ok(res.peak_reserved >= res.peak_allocated, "the reserved peak is at least the allocated one");
    const struct phase_peak *load = phase_of(&res, "load"), *fwd = phase_of(&res, "forward"),
                            *bwd = phase_of(&res, "backward");
    if (ok(load && fwd && bwd, "three phases")) {
        is_u64(load->peak_allocated, 6 * MiB, "load's peak: 6 MiB");
        is_u64(fwd->peak_allocated, 6 * MiB, "forward's peak: 6 MiB");
        is_u64((uint64_t)fwd->peak_allocated_step, 1, "  in step 1");
        is_u64(bwd->peak_allocated, 8 * MiB, "backward's peak: 8 MiB");
        is_u64((uint64_t)bwd->peak_allocated_step, 2, "  in step 2");
    }
    runner_destroy(r);
    dev->ops->destroy(dev);
    return done_testing();
}
