/* sim_launch_test.c: the sim keeps a shape's modelled time by its shape id. A GEMM launched under shape id
 * 7 takes the model's time for its cost; launched again under 7 it takes the same time from the kept one;
 * under 7 with another cost (a different GEMM) it is timed afresh and kept in its place; under shape id 0
 * (none) it is always timed afresh; and under 7 + 512 (the same slot) it replaces the slot's time. */
#include "device/device_kind.h"
#include "device/kernel_time.h"
#include "kernels.h"
#include "tap.h"

static struct kernel_call gemm(int64_t M, int64_t N, int64_t K)
{
    struct kernel_call k = {.kernel = K_GEMM, .dtype = DT_BF16, .ntensors = kernel_get(K_GEMM)->ntensors};
    for (unsigned i = 0; i < k.ntensors; i++)
        k.tensors[i] = i + 1;
    k.dims[0] = M, k.dims[1] = N, k.dims[2] = K;
    k.fparam[0] = 1.0f;
    return k;
}

/* The seconds one launch of k under shape id takes on dev (its kernel time since the last reading). */
static double launched(struct device *dev, const struct kernel_call *k, uint64_t shape_id)
{
    struct kernel_cost cost = kernel_cost(k);
    cost.shape_id = shape_id;
    struct err e = {0};
    dev->ops->kernel_seconds(dev);
    if (dev->ops->launch(dev, k, &cost, NULL, &e))
        diag("%s", e.msg);
    return dev->ops->kernel_seconds(dev);
}

/* Times are compared exactly: a kept time is the model's to the bit. */
#define is_time(got, want, ...)                                                                              \
    do {                                                                                                     \
        double g_ = (got), w_ = (want);                                                                      \
        if (!ok(g_ == w_, __VA_ARGS__))                                                                      \
            diag("     got %.17g s, expected %.17g s", g_, w_);                                              \
    } while (0)

int main(void)
{
    struct err e = {0};
    struct device *dev = device_open("sim", &(struct device_open_options){0}, &e);
    struct device *fresh = device_open("sim", &(struct device_open_options){0}, &e);
    if (!ok(dev && fresh, "two sims")) {
        diag("%s", e.msg);
        return done_testing();
    }
    const struct kernel_call big = gemm(4096, 4096, 4096), small = gemm(256, 256, 256);
    double t_big = launched(fresh, &big, 0), t_small = launched(fresh, &small, 0);
    ok(t_big > 0 && t_small > 0 && t_big != t_small, "the model times the two GEMMs apart (%g s, %g s)", t_big,
       t_small);
    is_time(launched(dev, &big, 7), t_big, "shape 7, the big GEMM: the model's time");
    is_time(launched(dev, &big, 7), t_big, "again: the same, kept");
    is_time(launched(dev, &small, 7), t_small, "shape 7 with the small GEMM's cost: timed afresh");
    is_time(launched(dev, &small, 7), t_small, "  and kept in its place");
    is_time(launched(dev, &big, 0), t_big, "no shape id: timed afresh");
    is_time(launched(dev, &big, 7 + 512), t_big, "shape 519 (shape 7's slot): its own time");
    is_time(launched(dev, &small, 7), t_small, "shape 7 again, its slot taken: timed afresh");
    dev->ops->destroy(dev);
    fresh->ops->destroy(fresh);
    return done_testing();
}
