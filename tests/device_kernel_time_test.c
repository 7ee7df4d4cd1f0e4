/* device_kernel_time_test.c: the sim's kernel-time model (device/kernel_time.h) rule by rule, with
 * worked numbers: GEMMs (measured matmul rate, fixed time, memory bound, wave quantization and the
 * smaller tiles of small GEMMs, tensor-core alignment under cuBLAS 10 and 11), eager and fused attention, the optimizer
 * paths (for-loop, foreach, fused, Adafactor, SGD), streaming kernels and their floor, the host time
 * per op of each software stack, the fallback matmul rate of a profile without a measurement, bad
 * input; and the GEMM rule against the measured sm_90 matmul table of XLA's cost model. */
#include <math.h>

#include "device/kernel_time.h"
#include "kernels.h"
#include "tap.h"

static const struct software_stack *today(void)
{
    return software_stack_for(0, 0);
}

static struct kernel_call call(unsigned kernel, enum dtype dt)
{
    const struct kernel_desc *kd = kernel_get(kernel);
    struct kernel_call k = {.kernel = (uint16_t)kernel, .dtype = (uint8_t)dt, .ntensors = kd->ntensors};
    for (unsigned i = 0; i < kd->ntensors; i++)
        k.tensors[i] = i + 1;
    return k;
}

static struct kernel_call gemm(enum dtype dt, int64_t M, int64_t N, int64_t K)
{
    struct kernel_call k = call(K_GEMM, dt);
    k.dims[0] = M, k.dims[1] = N, k.dims[2] = K;
    k.fparam[0] = 1.0f;
    return k;
}

static struct kernel_time timed(const struct kernel_call *k, const char *profile, const struct software_stack *stack)
{
    struct kernel_time t = {0};
    struct err e = {0};
    const struct kernel_cost cost = kernel_cost(k);
    const struct kernel_rates rates = kernel_rates_for(gpu_profile_find(profile), stack);
    if (kernel_time_model(k, &cost, &rates, &t, &e))
        diag("%s", e.msg);
    return t;
}

static int near(double got, double want)
{
    return fabs(got - want) <= 1e-9 * fabs(want);
}

#define is_time(got, want, ...)                                                      \
    do {                                                                             \
        double g_ = (got), w_ = (want);                                              \
        if (!ok(near(g_, w_), __VA_ARGS__))                                          \
            diag("     got %.15g s, expected %.15g s", g_, w_);                      \
    } while (0)

static void gemms(void)
{
    /* rtx5090 (no wave quantization): 2 x 4096^3 FLOPs at its measured 242.18 TFLOP/s bf16 beat 3 x
     * 32 MiB at 1792 GB/s x 0.86, plus the fixed 5.75 us */
    struct kernel_call k = gemm(DT_BF16, 4096, 4096, 4096);
    struct kernel_time t = timed(&k, "rtx5090", today());
    is_time(t.gpu_seconds, 5.75e-6 + 2.0 * 4096 * 4096 * 4096 / 242.18e12, "bf16 4096^3 on the rtx5090: 573.26 us");
    ok(t.launches == 1 && near(t.host_seconds, 8e-6), "  one launch, 8 us of host time on today's stack");
    k.dtype = DT_F32;
    is_time(timed(&k, "rtx5090", today()).gpu_seconds, 5.75e-6 + 2.0 * 4096 * 4096 * 4096 / 67.57e12,
            "fp32 at its measured 67.57 TFLOP/s: 2.040 ms");
    /* v100-16: 16 x 8 tiles of 128 on 80 SMs run in 2 waves, 0.8 of the SMs busy: 14.51 x 0.8 TFLOP/s */
    k = gemm(DT_F32, 2048, 1024, 1024);
    is_time(timed(&k, "v100-16", today()).gpu_seconds, 5.75e-6 + 2.0 * 2048 * 1024 * 1024 / (14.51e12 * 0.8),
            "fp32 2048 x 1024 x 1024 on the V100: 2 waves of 128 tiles, 375.75 us");
    /* too small for 80 tiles of 128: 8 x 16 tiles of 64, again 2 waves at 0.8 */
    k = gemm(DT_F16, 512, 1024, 1024);
    is_time(timed(&k, "v100-16", today()).gpu_seconds, 5.75e-6 + 2.0 * 512 * 1024 * 1024 / (97.36e12 * 0.8),
            "fp16 512 x 1024 x 1024: half-size tiles when the big ones cannot fill the SMs, 19.54 us");
    /* N = 1002 is not a multiple of 8: cuBLAS 10 (CUDA 10.2) leaves tensor cores for the CUDA cores,
     * twice the fp32 rate; from cuBLAS 11 the aligned rule holds */
    k = gemm(DT_F16, 2048, 1002, 1024);
    is_time(timed(&k, "v100-16", software_stack_for(10, 2)).gpu_seconds,
            5.75e-6 + 2.0 * 2048 * 1002 * 1024 / (2 * 14.51e12 * 0.8),
            "fp16 with N = 1002 under CUDA 10.2: off the tensor cores, 186.8 us");
    is_time(timed(&k, "v100-16", today()).gpu_seconds, 5.75e-6 + 2.0 * 2048 * 1002 * 1024 / (97.36e12 * 0.8),
            "  under today's cuBLAS on them still, 59.7 us");
    struct kernel_call odd = gemm(DT_F16, 1024, 2145, 1024);
    double odd_tflops = 2.0 * 1024 * 2145 * 1024 / timed(&odd, "a100-80", today()).gpu_seconds / 1e12;
    ok(fabs(odd_tflops / 132.8 - 1) < 0.05,
       "A100 fp16 1024 x 2145 x 1024: %.1f TFLOP/s modelled, 132.8 measured (AI-benchmarking-guide)", odd_tflops);
    k.dtype = DT_F32;
    is_time(timed(&k, "v100-16", today()).gpu_seconds, 5.75e-6 + 2.0 * 2048 * 1002 * 1024 / (14.51e12 * 0.8),
            "fp32 has no alignment rule: 367.80 us");
    /* skinny: 8 x 8192 x 8192 bf16 on the h100 reads 128 MiB of B: memory-bound at 3350 x 0.866 GB/s */
    k = gemm(DT_BF16, 8, 8192, 8192);
    double bytes = 2.0 * (8 * 8192 + 8192.0 * 8192 + 8 * 8192);
    is_time(timed(&k, "h100", today()).gpu_seconds, 5.75e-6 + bytes / (3350e9 * 0.866),
            "a skinny GEMM is memory-bound: 8 x 8192 x 8192 on the H100 in 52.2 us");
    /* a profile without a published matmul: the architecture's share of the spec rate */
    double l4 = gpu_profile_matmul_rate(gpu_profile_find("l4"), DT_BF16);
    ok(near(l4, 121e12 * 0.896), "the L4's bf16 rate is Ada's share of its 121 TFLOP/s: %.4g", l4);
    ok(near(gpu_profile_matmul_rate(gpu_profile_find("v100-16"), DT_BF16), 10.65e12),
       "the V100's bf16 (emulated) is its measured 10.65 TFLOP/s");
}

static struct kernel_call attention(unsigned kernel, enum dtype dt, int64_t keys)
{
    struct kernel_call k = call(kernel, dt);
    k.dims[0] = 4, k.dims[1] = 16, k.dims[2] = keys, k.dims[3] = keys, k.dims[4] = 64;
    return k;
}

static void attentions(void)
{
    struct kernel_call k = attention(K_ATTN_FWD, DT_F32, 512);
    struct kernel_time t32 = timed(&k, "v100-16", today());
    k.dtype = DT_F16;
    struct kernel_time t16 = timed(&k, "v100-16", today());
    ok(t32.launches == 5 && t16.launches == 6,
       "eager attention forward: 2 batched GEMMs, scale, mask, softmax (and a cast back in 16-bit): %g, %g",
       t32.launches, t16.launches);
    /* fp32: the five passes read and write the 4 x 16 x 512 x 512 fp32 scores three times */
    double scores = 4.0 * 16 * 512 * 512, bw = 900e9 * 0.851;
    struct kernel_call s = gemm(DT_F32, 512, 512, 64), pv = gemm(DT_F32, 512, 64, 512);
    s.dims[5] = pv.dims[5] = 64;
    double gemms = timed(&s, "v100-16", today()).gpu_seconds + timed(&pv, "v100-16", today()).gpu_seconds;
    is_time(t32.gpu_seconds, gemms + 3 * (2 * 4 * scores) / bw, "fp32: the two GEMMs plus 3 score passes, %.1f us",
            t32.gpu_seconds * 1e6);
    ok(t16.gpu_seconds < t32.gpu_seconds, "fp16 is faster (%.1f us) though its softmax writes fp32",
       t16.gpu_seconds * 1e6);
    k = attention(K_ATTN_BWD, DT_F32, 512);
    ok(timed(&k, "v100-16", today()).launches == 6, "backward: 4 GEMMs, softmax and scale backward");
    k.dtype = DT_BF16;
    ok(timed(&k, "h100", today()).launches == 8, "  and 2 casts in 16-bit");
    /* fused attention: its FLOPs at the flash share, rising with the keys */
    struct kernel_call f = attention(K_FLASH_FWD, DT_BF16, 8192);
    double flops = kernel_get(K_FLASH_FWD)->flops(&f);
    is_time(timed(&f, "h100", today()).gpu_seconds, 5.75e-6 + flops / (989.4e12 * 0.334 * 8192 / (8192 + 83)),
            "flash forward at 8192 keys on the H100: Hopper's 0.334 of 989.4 TFLOP/s");
    struct kernel_call e = attention(K_ATTN_FWD, DT_BF16, 8192);
    ok(timed(&f, "h100", today()).gpu_seconds < timed(&e, "h100", today()).gpu_seconds,
       "  faster than eager attention at that length");
    struct kernel_call f512 = attention(K_FLASH_FWD, DT_BF16, 512);
    double rate512 = kernel_get(K_FLASH_FWD)->flops(&f512) / (timed(&f512, "a100-80", today()).gpu_seconds - 5.75e-6);
    double rate8k = kernel_get(K_FLASH_FWD)->flops(&f) / (timed(&f, "a100-80", today()).gpu_seconds - 5.75e-6);
    ok(rate512 < rate8k && near(rate512 / rate8k, (512.0 / 595) / (8192.0 / 8275)),
       "  and its rate rises with the keys: %.0f vs %.0f TFLOP/s on the A100", rate512 / 1e12, rate8k / 1e12);
}

static struct kernel_call adamw(int64_t n, int64_t impl)
{
    struct kernel_call k = call(K_ADAMW, DT_F32);
    k.dims[0] = n, k.dims[1] = 2, k.dims[3] = impl;
    return k;
}

static void optimizers(void)
{
    const double bw = 900e9 * 0.851, n = 1 << 20;
    const double bytes[] = {8, 12, 8, 12, 8, 8, 8, 16}; /* per element of torch's eight for-loop ops */
    struct kernel_call k = adamw(1 << 20, 0);
    struct kernel_time loop = timed(&k, "v100-16", software_stack_for(11, 2));
    double want = 0;
    for (int i = 0; i < 8; i++)
        want += n * bytes[i] / bw;
    is_time(loop.gpu_seconds, want, "for-loop AdamW of 1M fp32 parameters: 8 unfused ops, 80 B each, %.1f us",
            want * 1e6);
    ok(loop.launches == 8 && near(loop.host_seconds, 8 * 21e-6), "  8 launches, 21 us each on PyTorch 1.x");
    k = adamw(1 << 20, 1);
    struct kernel_time each = timed(&k, "v100-16", today());
    /* depths 1, 2, 1, 2, 2, 1, 1, 3: 4/110 + 3/64 + 1/48 launches, plus 8 x 16 chunks of 65536 / 320 */
    double launches = 4.0 / 110 + 3.0 / 64 + 1.0 / 48 + 8 * n / (65536.0 * 320);
    ok(near(each.launches, launches) && near(each.host_seconds, launches * 8e-6),
       "foreach: the tensor shares its list's launches, %.3f of them", each.launches);
    is_time(each.gpu_seconds, want + launches * 2e-6, "  and moves the same bytes");
    k = adamw(1 << 20, 2);
    struct kernel_time fused = timed(&k, "v100-16", today());
    is_time(fused.gpu_seconds, n * (3 * 4 + 4 * 4) / bw, "fused (bitsandbytes' 32-bit): one pass of 28 B per element");
    ok(fused.launches == 1, "  in one launch");
    struct err e = {0};
    struct kernel_time t;
    k = adamw(1 << 20, 3);
    const struct kernel_cost cost = kernel_cost(&k);
    const struct kernel_rates v100 = kernel_rates_for(gpu_profile_find("v100-16"), today());
    ok(kernel_time_model(&k, &cost, &v100, &t, &e) == -1 && e.code == ERR_INPUT,
       "impl 3 is refused");
    is_str(e.msg, "adamw: impl = 3 is not 0 (for-loop), 1 (foreach) or 2 (fused)", "  naming the kernel");
    struct kernel_call a = call(K_ADAFACTOR, DT_F32);
    a.dims[0] = 1024, a.dims[1] = 4096, a.dims[2] = 1;
    ok(timed(&a, "v100-16", today()).launches == 24, "transformers' Adafactor on a matrix: 24 ops");
    a.dims[1] = 1;
    ok(timed(&a, "v100-16", today()).launches == 16, "  on a vector: 16");
    struct kernel_call sgd = call(K_SGD, DT_F32);
    sgd.dims[0] = 1 << 20, sgd.dims[1] = 1;
    ok(timed(&sgd, "v100-16", today()).launches == 2, "SGD's first step clones the gradient: 2 ops");
    sgd.dims[1] = 2;
    ok(timed(&sgd, "v100-16", today()).launches == 3, "  later steps 3");
}

static void streams(void)
{
    struct kernel_call f = call(K_FILL, DT_F32);
    f.dims[0] = 1 << 28;
    is_time(timed(&f, "rtx5090", today()).gpu_seconds, (double)(1ULL << 30) / (1792e9 * 0.86),
            "fill of 1 GiB on the rtx5090: 696.7 us at 0.86 of 1792 GB/s");
    f.dims[0] = 16;
    is_time(timed(&f, "rtx5090", today()).gpu_seconds, 2e-6, "a tiny fill still takes the 2 us floor");
    is_time(timed(&f, "rtx5090", software_stack_for(11, 2)).host_seconds, 21e-6, "  and 21 us to issue on PyTorch 1.x");
    struct kernel_call bad = call(K_FILL, DT_F32);
    bad.kernel = K_COUNT;
    struct err e = {0};
    struct kernel_time t;
    const struct kernel_rates rates = kernel_rates_for(gpu_profile_default(), today());
    ok(kernel_time_model(&bad, &(struct kernel_cost){0}, &rates, &t, &e) == -1 &&
           e.code == ERR_INTERNAL,
       "an unknown kernel is an internal error");
}

static void stacks(void)
{
    ok(software_stack_for(10, 2) == software_stack_at(0) && !software_stack_at(0)->tensor_cores_any_shape,
       "CUDA 10.2: cuBLAS 10, tensor cores for aligned 16-bit GEMMs only");
    ok(software_stack_for(11, 2) == software_stack_at(1) && software_stack_at(1)->context_bytes == 1343ULL << 20 &&
           software_stack_at(1)->tensor_cores_any_shape,
       "CUDA 11.2: eager module loading, a 1343 MiB context, cuBLAS 11");
    ok(software_stack_for(11, 6) == software_stack_at(1), "  up to 11.6");
    ok(software_stack_for(11, 7) == software_stack_at(2) && software_stack_at(2)->context_bytes == 287047680,
       "CUDA 11.7: lazy loading, 287,047,680 B");
    ok(software_stack_for(12, 4) == software_stack_at(2), "  and 12.4");
    ok(software_stack_for(13, 0) == software_stack_at(3) && software_stack_at(3)->context_bytes == 426ULL << 20,
       "CUDA 13: 426 MiB");
    ok(software_stack_for(0, 0) == software_stack_at(software_stack_count() - 1), "no version: today's stack");
    ok(software_stack_for(9, 0) == software_stack_at(0), "anything older: the oldest row");
}

/* The GEMM rule against XLA's measured sm_90 bf16 table, on the h100 profile. */
static void xla_table(void)
{
    FILE *f = fopen("tests/data/throughput/xla-sm90-matmul.tsv", "r");
    if (!ok(f != NULL, "tests/data/throughput/xla-sm90-matmul.tsv opens"))
        return;
    double err[128];
    int n = 0;
    char line[256];
    while (fgets(line, sizeof line, f) && n < 128) {
        double b, m, nn, kk, tflops;
        if (line[0] == '#' || sscanf(line, "%lf %lf %lf %lf %lf", &b, &m, &nn, &kk, &tflops) != 5)
            continue;
        struct kernel_call k = gemm(DT_BF16, (int64_t)m, (int64_t)nn, (int64_t)kk);
        k.dims[5] = (int64_t)b;
        double measured = 2 * b * m * nn * kk / (tflops * 1e12);
        err[n++] = fabs(timed(&k, "h100", today()).gpu_seconds / measured - 1);
    }
    fclose(f);
    for (int i = 1; i < n; i++) /* sort */
        for (int j = i; j > 0 && err[j] < err[j - 1]; j--) {
            double x = err[j];
            err[j] = err[j - 1];
            err[j - 1] = x;
        }
    is_int(n, 87, "87 measured shapes");
    ok(n && err[n / 2] < 0.08, "the GEMM rule's median error on them is under 8%%: %.1f%%", 100 * err[n / 2]);
    ok(n && err[n * 9 / 10] < 0.20, "  its 90th percentile under 20%%: %.1f%%", 100 * err[n * 9 / 10]);
    ok(n && err[n - 1] < 0.40, "  its worst under 40%%: %.1f%%", 100 * err[n - 1]);
}

int main(void)
{
    gemms();
    attentions();
    optimizers();
    streams();
    stacks();
    xla_table();
    return done_testing();
}
