// kernels_bench.cc: Google Benchmark microbenchmarks of the CPU kernels.
//   GEMM: the kernel-table GEMM (kernel_run_cpu) next to cblas_sgemm called directly at the same
//   shapes, reported as FLOP/s, so the wrapper's overhead shows (it should stay within 80% of
//   BLAS); for bf16 operands the conversion to and from fp32 is benchmarked on its own too.
//   Elementwise kernels (activations forward and backward, dropout, casts, add, scale, bias add,
//   AdamW fp32/16-bit/8-bit, SGD, EMA): bytes/s from the table's byte counts, next to two
//   bandwidth references: a memcpy of 2 x 16 MiB on one core, and the same copy split over every
//   core the process may use, as the kernels split long tensors (the machine's memory bandwidth;
//   the target: at least half of it).
// Run alone: build/bench/kernels_bench [--benchmark_filter=Gemm]
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <sched.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

extern "C" {
#include "cpu/tensor_io.h"
#include "kernels.h"
}

namespace {

std::vector<float> random_floats(size_t n)
{
    std::vector<float> v(n);
    uint64_t s = 42;
    for (auto &x : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x = static_cast<float>(s >> 40) / 16777216.0f - 0.5f;
    }
    return v;
}

// A tensor of n elements of dtype dt holding small random values.
std::vector<uint8_t> random_tensor(size_t n, int dt)
{
    std::vector<float> f = random_floats(n);
    std::vector<uint8_t> t(n * dtype_size(static_cast<enum dtype>(dt)));
    tensor_from_f32(t.data(), dt, f.data(), n);
    return t;
}

kernel_call make_call(unsigned kernel, int dt, std::initializer_list<int64_t> dims)
{
    kernel_call k;
    std::memset(&k, 0, sizeof k);
    k.kernel = static_cast<uint16_t>(kernel);
    k.dtype = static_cast<uint8_t>(dt);
    k.ntensors = kernel_get(kernel)->ntensors;
    unsigned i = 0;
    for (int64_t d : dims)
        k.dims[i++] = d;
    for (unsigned j = 0; j < k.ntensors; j++)
        k.tensors[j] = j + 1;
    return k;
}

void set_flops(benchmark::State &state, double flops_per_iter)
{
    state.counters["FLOP/s"] = benchmark::Counter(flops_per_iter * static_cast<double>(state.iterations()),
                                                  benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// Shapes: a square GEMM and a linear layer (rows x in -> out, weight transposed).
// Args: M, N, K, transB.
void gemm_shapes(benchmark::internal::Benchmark *b)
{
    b->Args({512, 512, 512, 0})->Args({1024, 1024, 1024, 0})->Args({2048, 768, 768, 1});
    b->Unit(benchmark::kMillisecond)->MinTime(0.3)->UseRealTime(); // BLAS runs on every core
}

void BM_GemmKernel(benchmark::State &state, int dt)
{
    const int64_t M = state.range(0), N = state.range(1), K = state.range(2), tb = state.range(3);
    auto a = random_tensor(M * K, dt), b = random_tensor(K * N, dt), c = random_tensor(M * N, dt);
    kernel_call k = make_call(K_GEMM, dt, {M, N, K, 0, tb, 1});
    k.fparam[0] = 1.0f;
    void *t[3] = {a.data(), b.data(), c.data()};
    err e = {};
    for (auto _ : state)
        if (kernel_run_cpu(&k, t, &e) < 0) {
            state.SkipWithError(e.msg);
            break;
        }
    set_flops(state, kernel_get(K_GEMM)->flops(&k));
}

void BM_GemmBlas(benchmark::State &state)
{
    const int M = static_cast<int>(state.range(0)), N = static_cast<int>(state.range(1));
    const int K = static_cast<int>(state.range(2)), tb = static_cast<int>(state.range(3));
    auto a = random_floats(static_cast<size_t>(M) * K), b = random_floats(static_cast<size_t>(K) * N);
    std::vector<float> c(static_cast<size_t>(M) * N);
    for (auto _ : state) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, a.data(), K, b.data(),
                    tb ? K : N, 0.0f, c.data(), N);
        benchmark::DoNotOptimize(c.data());
    }
    set_flops(state, 2.0 * M * N * K);
}

// The conversion part of a bf16 GEMM: A and B to fp32, C back to bf16.
void BM_GemmBf16Conversion(benchmark::State &state)
{
    const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
    auto a = random_tensor(M * K, DT_BF16), b = random_tensor(K * N, DT_BF16), c = random_tensor(M * N, DT_BF16);
    std::vector<float> af(M * K), bf(K * N), cf(M * N);
    for (auto _ : state) {
        tensor_to_f32(af.data(), a.data(), DT_BF16, af.size());
        tensor_to_f32(bf.data(), b.data(), DT_BF16, bf.size());
        tensor_from_f32(c.data(), DT_BF16, cf.data(), cf.size());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(6 * (M * K + K * N + M * N)));
}

BENCHMARK(BM_GemmBlas)->Apply(gemm_shapes);
BENCHMARK_CAPTURE(BM_GemmKernel, fp32, DT_F32)->Apply(gemm_shapes);
BENCHMARK_CAPTURE(BM_GemmKernel, bf16, DT_BF16)->Apply(gemm_shapes);
BENCHMARK(BM_GemmBf16Conversion)->Apply(gemm_shapes);

constexpr int64_t kElems = 4 << 20; // 16 MiB of fp32 per tensor: well beyond the caches

// One elementwise kernel over kElems elements; bytes per iteration from the table.
void run_elementwise(benchmark::State &state, kernel_call k, std::vector<std::vector<uint8_t>> &bufs)
{
    std::vector<void *> t;
    for (auto &b : bufs)
        t.push_back(b.data());
    err e = {};
    for (auto _ : state)
        if (kernel_run_cpu(&k, t.data(), &e) < 0) {
            state.SkipWithError(e.msg);
            break;
        }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kernel_get(k.kernel)->bytes(&k)));
}

// A unary kernel {x, y} or its backward {x, dy, dx} with dims {n, d1}.
void BM_Unary(benchmark::State &state, int dt, unsigned kernel, int64_t d1)
{
    std::vector<std::vector<uint8_t>> bufs;
    for (unsigned i = 0; i < kernel_get(kernel)->ntensors; i++)
        bufs.push_back(random_tensor(kElems, dt));
    run_elementwise(state, make_call(kernel, dt, {kElems, d1}), bufs);
}

void BM_Dropout(benchmark::State &state, int dt, unsigned kernel)
{
    std::vector<std::vector<uint8_t>> bufs{random_tensor(kElems, dt), random_tensor(kElems, dt),
                                           std::vector<uint8_t>(kElems, 1)};
    if (kernel == K_DROPOUT_BWD)
        std::swap(bufs[1], bufs[2]); // {dy, mask, dx}
    kernel_call k = make_call(kernel, dt, {kElems, 7});
    k.fparam[0] = 0.1f;
    run_elementwise(state, k, bufs);
}

void BM_Cast(benchmark::State &state, int src, int dst)
{
    std::vector<std::vector<uint8_t>> bufs{random_tensor(kElems, src), random_tensor(kElems, dst)};
    run_elementwise(state, make_call(K_CAST, src, {kElems, dst}), bufs);
}

void BM_Add(benchmark::State &state, int dt)
{
    std::vector<std::vector<uint8_t>> bufs{random_tensor(kElems, dt), random_tensor(kElems, dt),
                                           random_tensor(kElems, dt)};
    kernel_call k = make_call(K_ADD, dt, {kElems});
    k.fparam[0] = 1.0f;
    k.fparam[1] = 0.5f;
    run_elementwise(state, k, bufs);
}

void BM_Scale(benchmark::State &state, int dt)
{
    std::vector<std::vector<uint8_t>> bufs{random_tensor(kElems, dt), random_tensor(kElems, dt)};
    kernel_call k = make_call(K_SCALE, dt, {kElems});
    k.fparam[0] = 0.5f;
    run_elementwise(state, k, bufs);
}

// Args: C, inner (a linear layer's bias: inner 1; a conv's: inner = P * Q).
void BM_BiasAdd(benchmark::State &state, int dt)
{
    const int64_t C = state.range(0), inner = state.range(1);
    std::vector<std::vector<uint8_t>> bufs{random_tensor(kElems, dt), random_tensor(C, dt), random_tensor(kElems, dt)};
    run_elementwise(state, make_call(K_BIAS_ADD, dt, {kElems / (C * inner), C, inner}), bufs);
}

// AdamW's moments: fp32 (K_ADAMW) or the call's dtype (K_ADAMW_T); v must not be negative.
void BM_AdamW(benchmark::State &state, int dt, unsigned kernel)
{
    const int mdt = kernel == K_ADAMW ? DT_F32 : dt;
    std::vector<float> v(kElems, 1e-4f);
    std::vector<uint8_t> vt(kElems * dtype_size(static_cast<enum dtype>(mdt)));
    tensor_from_f32(vt.data(), mdt, v.data(), kElems);
    std::vector<std::vector<uint8_t>> bufs{random_tensor(kElems, dt), random_tensor(kElems, dt),
                                           random_tensor(kElems, mdt), vt};
    kernel_call k = make_call(kernel, dt, {kElems, 10});
    k.fparam[0] = 1e-3f;
    k.fparam[1] = 0.9f;
    k.fparam[2] = 0.999f;
    k.fparam[3] = 0.01f;
    run_elementwise(state, k, bufs);
}

void BM_AdamW8(benchmark::State &state, int dt)
{
    const int64_t block = 2048, nblocks = kElems / block;
    std::vector<float> absmax(nblocks, 1e-3f);
    std::vector<uint8_t> absmax_bytes(reinterpret_cast<uint8_t *>(absmax.data()),
                                      reinterpret_cast<uint8_t *>(absmax.data() + nblocks));
    std::vector<std::vector<uint8_t>> bufs{random_tensor(kElems, dt),      random_tensor(kElems, dt),
                                           std::vector<uint8_t>(kElems, 200), std::vector<uint8_t>(kElems, 100),
                                           absmax_bytes,                    absmax_bytes};
    kernel_call k = make_call(K_ADAMW8, dt, {kElems, 10, 0, block});
    k.fparam[0] = 1e-3f;
    k.fparam[1] = 0.9f;
    k.fparam[2] = 0.999f;
    k.fparam[3] = 0.01f;
    run_elementwise(state, k, bufs);
}

void BM_Sgd(benchmark::State &state, int dt)
{
    std::vector<std::vector<uint8_t>> bufs{random_tensor(kElems, dt), random_tensor(kElems, dt),
                                           random_tensor(kElems, dt)};
    kernel_call k = make_call(K_SGD, dt, {kElems, 10});
    k.fparam[0] = 1e-2f;
    k.fparam[1] = 0.9f;
    run_elementwise(state, k, bufs);
}

void BM_Ema(benchmark::State &state, int dt)
{
    std::vector<std::vector<uint8_t>> bufs{random_tensor(kElems, dt), random_tensor(kElems, dt)};
    kernel_call k = make_call(K_EMA, dt, {kElems});
    k.fparam[0] = 0.999f;
    run_elementwise(state, k, bufs);
}

// The bandwidth reference: copying 2 x 16 MiB (read + write, as GELU fp32 moves).
void BM_Memcpy(benchmark::State &state)
{
    std::vector<uint8_t> src(kElems * 4, 1), dst(kElems * 4);
    for (auto _ : state) {
        std::memcpy(dst.data(), src.data(), src.size());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * src.size()));
}

// The same copy split over the cores the process may use (as cpu_for_chunks splits the kernels).
void BM_MemcpyAllCores(benchmark::State &state)
{
    std::vector<uint8_t> src(kElems * 4, 1), dst(kElems * 4);
    cpu_set_t set;
    size_t cores = sched_getaffinity(0, sizeof set, &set) == 0 ? static_cast<size_t>(CPU_COUNT(&set)) : 1;
    const size_t per = (src.size() / cores + 63) / 64 * 64;
    for (auto _ : state) {
        std::vector<std::thread> threads;
        for (size_t i = 1; i < cores; i++)
            threads.emplace_back([&, i] {
                size_t lo = i * per < src.size() ? i * per : src.size();
                size_t hi = lo + per < src.size() ? lo + per : src.size();
                std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);
            });
        std::memcpy(dst.data(), src.data(), per < src.size() ? per : src.size());
        for (auto &t : threads)
            t.join();
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * src.size()));
    state.counters["threads"] = static_cast<double>(cores);
}

void elementwise_opts(benchmark::internal::Benchmark *b)
{
    b->Unit(benchmark::kMillisecond)->MinTime(0.2)->UseRealTime();
}

BENCHMARK(BM_Memcpy)->Apply(elementwise_opts);
BENCHMARK(BM_MemcpyAllCores)->Apply(elementwise_opts);

// Every elementwise kernel in fp32 and bf16 (fp16 runs the same loops as bf16 but its conversions).
#define BENCH_DTYPES(fn, name, ...)                                          \
    BENCHMARK_CAPTURE(fn, name##_fp32, DT_F32, ##__VA_ARGS__)->Apply(elementwise_opts); \
    BENCHMARK_CAPTURE(fn, name##_bf16, DT_BF16, ##__VA_ARGS__)->Apply(elementwise_opts)

BENCH_DTYPES(BM_Unary, gelu_tanh, K_GELU_FWD, 1);
BENCH_DTYPES(BM_Unary, gelu_erf, K_GELU_FWD, 0);
BENCH_DTYPES(BM_Unary, gelu_tanh_bwd, K_GELU_BWD, 1);
BENCH_DTYPES(BM_Unary, silu, K_SILU_FWD, 0);
BENCH_DTYPES(BM_Unary, silu_bwd, K_SILU_BWD, 0);
BENCH_DTYPES(BM_Unary, relu, K_RELU_FWD, 0);
BENCH_DTYPES(BM_Unary, relu_bwd, K_RELU_BWD, 0);
BENCH_DTYPES(BM_Unary, quick_gelu, K_QUICK_GELU_FWD, 0);
BENCH_DTYPES(BM_Unary, quick_gelu_bwd, K_QUICK_GELU_BWD, 0);
BENCH_DTYPES(BM_Dropout, fwd, K_DROPOUT_FWD);
BENCH_DTYPES(BM_Dropout, bwd, K_DROPOUT_BWD);
BENCHMARK_CAPTURE(BM_Cast, fp32_to_bf16, DT_F32, DT_BF16)->Apply(elementwise_opts);
BENCHMARK_CAPTURE(BM_Cast, bf16_to_fp32, DT_BF16, DT_F32)->Apply(elementwise_opts);
BENCHMARK_CAPTURE(BM_Cast, fp32_to_fp16, DT_F32, DT_F16)->Apply(elementwise_opts);
BENCHMARK_CAPTURE(BM_Cast, fp16_to_fp32, DT_F16, DT_F32)->Apply(elementwise_opts);
BENCHMARK_CAPTURE(BM_Cast, bf16_to_fp16, DT_BF16, DT_F16)->Apply(elementwise_opts);
BENCH_DTYPES(BM_Add, add);
BENCH_DTYPES(BM_Scale, scale);
BENCHMARK_CAPTURE(BM_BiasAdd, linear_fp32, DT_F32)->Args({768, 1})->Apply(elementwise_opts);
BENCHMARK_CAPTURE(BM_BiasAdd, conv_fp32, DT_F32)->Args({256, 1024})->Apply(elementwise_opts);
BENCHMARK_CAPTURE(BM_BiasAdd, linear_bf16, DT_BF16)->Args({768, 1})->Apply(elementwise_opts);
BENCH_DTYPES(BM_AdamW, adamw, K_ADAMW);
BENCH_DTYPES(BM_AdamW, adamw_t, K_ADAMW_T);
BENCH_DTYPES(BM_AdamW8, adamw8);
BENCH_DTYPES(BM_Sgd, sgd);
BENCH_DTYPES(BM_Ema, ema);

} // namespace

BENCHMARK_MAIN();
