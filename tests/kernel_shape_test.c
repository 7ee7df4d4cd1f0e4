/* kernel_shape_test.c: the cost memo (kernel_shape.h) and the sim's times kept by shape id. A call of a
 * shape seen before gets the cost counted for it and its shape id, whatever tensors it names; a call that
 * differs in anything a rule reads (a dim, the dtype, an fparam's sign bit, a tensor named twice) is a new
 * shape with the cost kernel_cost gives it; shapes that share a direct-mapped slot evict each other and
 * come back under new ids; and a sim timing by shape ids runs its clock to the bit as one timing every
 * call afresh, also after its software stack changes. */
#include <string.h>

#include "device/profiles.h"
#include "device/sim.h"
#include "kernel_shape.h"
#include "kernels.h"
#include "tap.h"

/* A K_ADD of n elements, y = a + b, on tensors a, b, y. */
static struct kernel_call add(int64_t n, uint64_t a, uint64_t b, uint64_t y)
{
    return (struct kernel_call){.kernel = K_ADD, .dtype = DT_BF16, .ntensors = 3, .dims = {n},
                                .tensors = {a, b, y}, .fparam = {1.0f, 1.0f}};
}

static bool same_cost(struct kernel_cost a, struct kernel_cost b)
{
    return !memcmp(&a.flops, &b.flops, sizeof a.flops) && !memcmp(&a.bytes, &b.bytes, sizeof a.bytes);
}

static void memo(void)
{
    struct kernel_cost_memo m = {0};
    struct kernel_call k = add(1000, 1, 2, 3);
    struct kernel_cost first = kernel_cost_memo(&m, &k);
    ok(first.shape_id != 0 && same_cost(first, kernel_cost(&k)), "a first call: kernel_cost's count, a shape id");
    ok(first.flops == 3000 && first.bytes == 3 * 2000, "K_ADD of 1000 bf16 (alpha a + beta b): 3000 FLOPs, 6000 bytes");
    struct kernel_call other = add(1000, 7, 8, 9);
    struct kernel_cost again = kernel_cost_memo(&m, &other);
    ok(again.shape_id == first.shape_id && same_cost(again, first), "other tensors, same shape: the kept cost");

    struct kernel_call inplace = add(1000, 7, 8, 7); /* y = a: read and written once */
    struct kernel_cost c = kernel_cost_memo(&m, &inplace);
    ok(c.shape_id != first.shape_id && same_cost(c, kernel_cost(&inplace)) && c.bytes == 2 * 2000 + 2000,
       "y named as a: a new shape, 4000 bytes read and 2000 written (%g)", c.bytes);
    struct kernel_call inplace2 = add(1000, 4, 5, 4);
    ok(kernel_cost_memo(&m, &inplace2).shape_id == c.shape_id, "another in-place add: that shape again");
    struct kernel_call square = add(1000, 4, 4, 5); /* a + a */
    c = kernel_cost_memo(&m, &square);
    ok(c.shape_id != first.shape_id && same_cost(c, kernel_cost(&square)) && c.bytes == 2000 + 2000,
       "a + a: a new shape, 2000 bytes read and 2000 written (%g)", c.bytes);

    struct kernel_call short_a = add(1000, 1, 2, 3), short_b = add(1000, 1, 2, 1); /* the third slot past the call's */
    short_a.ntensors = short_b.ntensors = 2;
    struct kernel_cost sa = kernel_cost_memo(&m, &short_a), sb = kernel_cost_memo(&m, &short_b);
    ok(sa.shape_id != sb.shape_id && same_cost(sa, kernel_cost(&short_a)) && same_cost(sb, kernel_cost(&short_b)),
       "a call naming fewer tensors than its kernel: the slots up to the kernel's count still tell shapes apart");

    struct kernel_call wider = add(1001, 1, 2, 3), half = add(1000, 1, 2, 3), negzero = add(1000, 1, 2, 3);
    half.dtype = DT_F32;
    negzero.fparam[1] = -0.0f;
    struct kernel_call zero = add(1000, 1, 2, 3);
    zero.fparam[1] = 0.0f;
    uint64_t ids[4] = {kernel_cost_memo(&m, &wider).shape_id, kernel_cost_memo(&m, &half).shape_id,
                       kernel_cost_memo(&m, &negzero).shape_id, kernel_cost_memo(&m, &zero).shape_id};
    bool distinct = true;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < i; j++)
            distinct &= ids[i] != ids[j] && ids[i] != first.shape_id;
    ok(distinct, "another dim, dtype, beta -0.0 or beta 0.0: four new shapes");
    ok(same_cost(kernel_cost_memo(&m, &half), kernel_cost(&half)) && kernel_cost(&half).bytes == 3 * 4000,
       "the fp32 add: kernel_cost's 12000 bytes");

    /* many shapes through 512 slots: every call still gets kernel_cost's count, and an evicted shape
     * comes back under a new id (an id is never given to two shapes) */
    bool exact = true;
    for (int64_t n = 1; n <= 5000; n++) {
        struct kernel_call s = add(n, 1, 2, 3);
        exact &= same_cost(kernel_cost_memo(&m, &s), kernel_cost(&s));
    }
    ok(exact, "5000 shapes: each call costs what kernel_cost counts");
    struct kernel_cost back = kernel_cost_memo(&m, &k);
    ok(same_cost(back, first) && back.shape_id != first.shape_id, "the first shape, evicted: a new id, same cost");
    kernel_cost_memo_free(&m);
    kernel_cost_memo_free(&m); /* freeing twice is harmless */
}

/* The sim's clock after calls: by shape id through m, or with shape id 0 (timed afresh). */
static double clock_after(struct device *d, struct kernel_cost_memo *m, const struct kernel_call *calls, int n)
{
    struct err e = {0};
    for (int i = 0; i < n; i++) {
        struct kernel_cost cost = m ? kernel_cost_memo(m, &calls[i]) : kernel_cost(&calls[i]);
        if (d->ops->launch(d, &calls[i], &cost, NULL, &e))
            diag("%s", e.msg);
    }
    return d->ops->kernel_seconds(d);
}

static void sim_times(void)
{
    const struct gpu_profile *p = gpu_profile_find("rtx5090");
    struct device *kept = sim_device_create("kept", 1ULL << 40, 0, p), *fresh = sim_device_create("fresh", 1ULL << 40, 0, p);
    struct kernel_call calls[64];
    for (int i = 0; i < 64; i++) {
        calls[i] = add(1 << (i % 7 + 10), (uint64_t)i + 1, (uint64_t)i + 2, (uint64_t)i % 3 ? (uint64_t)i + 3 : (uint64_t)i + 1);
        if (i % 5 == 0) { /* an AdamW step (one CUDA kernel per op and tensor, for-loop) among them */
            calls[i] = (struct kernel_call){.kernel = K_ADAMW, .dtype = DT_F32, .ntensors = 4,
                                            .dims = {1 << 12, 1, 0, 0}, .tensors = {1, 2, 3, 4},
                                            .fparam = {1e-3f, 0.9f, 0.999f, 1e-8f}};
        }
    }
    struct kernel_cost_memo m = {0};
    double a = clock_after(kept, &m, calls, 64), b = clock_after(fresh, NULL, calls, 64), today = a;
    ok(a > 0 && !memcmp(&a, &b, sizeof a), "64 calls timed by shape id: the clock of timing each afresh (%.12g s)", a);
    a = clock_after(kept, &m, calls, 64);
    b = clock_after(fresh, NULL, calls, 64);
    ok(!memcmp(&a, &b, sizeof a), "again, every shape kept: the same clock");
    const struct software_stack *old = software_stack_for(1, 13);
    sim_device_set_stack(kept, old);
    sim_device_set_stack(fresh, old);
    a = clock_after(kept, &m, calls, 64);
    b = clock_after(fresh, NULL, calls, 64);
    ok(!memcmp(&a, &b, sizeof a) && a != today,
       "after the software stack changes: times at its rates (%.12g s), not the kept ones", a);
    kernel_cost_memo_free(&m);
    kept->ops->destroy(kept);
    fresh->ops->destroy(fresh);
}

int main(void)
{
    memo();
    sim_times();
    return done_testing();
}
