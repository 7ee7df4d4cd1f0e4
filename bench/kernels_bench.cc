// kernels_bench.cc: Google Benchmark microbenchmarks of the CPU kernels.
//   GEMM: the kernel-table GEMM (kernel_run_cpu) next to cblas_sgemm called directly at the same
//   shapes, reported as FLOP/s, so the wrapper's overhead shows (it should stay within 80% of
//   BLAS); for bf16 operands the conversion to and from fp32 is benchmarked on its own too.
//   Elementwise kernels (activations forward and backward, dropout, casts, add, scale, bias add,
//   AdamW fp32/16-bit/8-bit, SGD, EMA): bytes/s from the table's byte counts, next to two
//   bandwidth references: a memcpy of one tensor on one core, and the same copy split over every
//   core the process may use, as the kernels split long tensors (the machine's memory bandwidth;
//   the target: at least half of it). This machine's bandwidth drifts with its neighbours' load,
//   so each elementwise benchmark also times that all-core copy between its own runs and reports
//   its fastest run as a share of the fastest copy (vs_copy); a summary at the end lists every
//   kernel's share and whether it meets the target. All figures are measured.
// Run alone: build/bench/kernels_bench [--benchmark_filter=Gemm]
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_calls.h"

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

// Every tensor of the call's dtype, and each half of the copy, holds 4x the last-level cache (the
// STREAM benchmark's rule; at least 16 MiB), so that kernels and copy alike run from DRAM, and a
// bf16 kernel's tensors no more fit in cache than an fp32 one's.
size_t tensor_bytes()
{
    static const size_t bytes = [] {
        size_t want = 4 * last_level_cache_bytes();
        return want > (16u << 20) ? want : static_cast<size_t>(16u << 20);
    }();
    return bytes;
}

int64_t elems(int dt)
{
    return static_cast<int64_t>(tensor_bytes() / dtype_size(static_cast<enum dtype>(dt)));
}

size_t usable_cores()
{
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 ? static_cast<size_t>(CPU_COUNT(&set)) : 1;
}

// dst = src, split over `cores` threads in 64-byte-aligned parts (as cpu_for_chunks splits kernels).
void copy_all_cores(std::vector<uint8_t> &dst, const std::vector<uint8_t> &src, size_t cores)
{
    const size_t per = (src.size() / cores + 63) / 64 * 64;
    auto part = [&](size_t i) {
        size_t lo = i * per < src.size() ? i * per : src.size();
        size_t hi = lo + per < src.size() ? lo + per : src.size();
        std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);
    };
    std::vector<std::thread> threads;
    for (size_t i = 1; i < cores; i++)
        threads.emplace_back(part, i);
    part(0);
    for (auto &t : threads)
        t.join();
}

double seconds_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Seconds one all-core copy of a tensor's bytes takes now.
double time_copy()
{
    static std::vector<uint8_t> src(tensor_bytes(), 1), dst(tensor_bytes());
    auto t0 = std::chrono::steady_clock::now();
    copy_all_cores(dst, src, usable_cores());
    return seconds_since(t0);
}

// One elementwise kernel; bytes per iteration from the table.
void run_elementwise(benchmark::State &state, kernel_call k, std::vector<std::vector<uint8_t>> &bufs)
{
    std::vector<void *> t;
    for (auto &b : bufs)
        t.push_back(b.data());
    const double bytes = static_cast<double>(kernel_get(k.kernel)->bytes(&k));
    double best_kernel = 1e30, best_copy = 1e30;
    err e = {};
    for (auto _ : state) {
        auto t0 = std::chrono::steady_clock::now();
        if (kernel_run_cpu(&k, t.data(), &e) < 0) {
            state.SkipWithError(e.msg);
            break;
        }
        best_kernel = std::min(best_kernel, seconds_since(t0));
        state.PauseTiming(); // the copy between two runs, timed on its own
        best_copy = std::min(best_copy, time_copy());
        state.ResumeTiming();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
    state.counters["best_GiB/s"] = bytes / best_kernel / (1 << 30);
    state.counters["copy_GiB/s"] = 2.0 * static_cast<double>(tensor_bytes()) / best_copy / (1 << 30);
    state.counters["vs_copy"] = state.counters["best_GiB/s"] / state.counters["copy_GiB/s"];
}

// A unary kernel {x, y} or its backward {x, dy, dx} with dims {n, d1}.
void BM_Unary(benchmark::State &state, int dt, unsigned kernel, int64_t d1)
{
    const int64_t n = elems(dt);
    std::vector<std::vector<uint8_t>> bufs;
    for (unsigned i = 0; i < kernel_get(kernel)->ntensors; i++)
        bufs.push_back(random_tensor(n, dt));
    run_elementwise(state, make_call(kernel, dt, {n, d1}), bufs);
}

void BM_Dropout(benchmark::State &state, int dt, unsigned kernel)
{
    const int64_t n = elems(dt);
    std::vector<std::vector<uint8_t>> bufs{random_tensor(n, dt), random_tensor(n, dt),
                                           std::vector<uint8_t>(n, 1)};
    if (kernel == K_DROPOUT_BWD)
        std::swap(bufs[1], bufs[2]); // {dy, mask, dx}
    kernel_call k = make_call(kernel, dt, {n, 7});
    k.fparam[0] = 0.1f;
    run_elementwise(state, k, bufs);
}

void BM_Cast(benchmark::State &state, int src, int dst)
{
    const int64_t n = elems(src);
    std::vector<std::vector<uint8_t>> bufs{random_tensor(n, src), random_tensor(n, dst)};
    run_elementwise(state, make_call(K_CAST, src, {n, dst}), bufs);
}

void BM_Add(benchmark::State &state, int dt)
{
    const int64_t n = elems(dt);
    std::vector<std::vector<uint8_t>> bufs{random_tensor(n, dt), random_tensor(n, dt),
                                           random_tensor(n, dt)};
    kernel_call k = make_call(K_ADD, dt, {n});
    k.fparam[0] = 1.0f;
    k.fparam[1] = 0.5f;
    run_elementwise(state, k, bufs);
}

void BM_Scale(benchmark::State &state, int dt)
{
    const int64_t n = elems(dt);
    std::vector<std::vector<uint8_t>> bufs{random_tensor(n, dt), random_tensor(n, dt)};
    kernel_call k = make_call(K_SCALE, dt, {n});
    k.fparam[0] = 0.5f;
    run_elementwise(state, k, bufs);
}

// Args: C, inner (a linear layer's bias: inner 1; a conv's: inner = P * Q).
void BM_BiasAdd(benchmark::State &state, int dt)
{
    const int64_t n = elems(dt);
    const int64_t C = state.range(0), inner = state.range(1);
    std::vector<std::vector<uint8_t>> bufs{random_tensor(n, dt), random_tensor(C, dt), random_tensor(n, dt)};
    run_elementwise(state, make_call(K_BIAS_ADD, dt, {n / (C * inner), C, inner}), bufs);
}

// AdamW's moments: fp32 (K_ADAMW) or the call's dtype (K_ADAMW_T); v must not be negative.
void BM_AdamW(benchmark::State &state, int dt, unsigned kernel)
{
    const int64_t n = elems(dt);
    const int mdt = kernel == K_ADAMW ? DT_F32 : dt;
    std::vector<float> v(n, 1e-4f);
    std::vector<uint8_t> vt(n * dtype_size(static_cast<enum dtype>(mdt)));
    tensor_from_f32(vt.data(), mdt, v.data(), n);
    std::vector<std::vector<uint8_t>> bufs{random_tensor(n, dt), random_tensor(n, dt),
                                           random_tensor(n, mdt), vt};
    kernel_call k = make_call(kernel, dt, {n, 10});
    k.fparam[0] = 1e-3f;
    k.fparam[1] = 0.9f;
    k.fparam[2] = 0.999f;
    k.fparam[3] = 0.01f;
    run_elementwise(state, k, bufs);
}

void BM_AdamW8(benchmark::State &state, int dt)
{
    const int64_t n = elems(dt);
    const int64_t block = 2048, nblocks = n / block;
    std::vector<float> absmax(nblocks, 1e-3f);
    std::vector<uint8_t> absmax_bytes(reinterpret_cast<uint8_t *>(absmax.data()),
                                      reinterpret_cast<uint8_t *>(absmax.data() + nblocks));
    std::vector<std::vector<uint8_t>> bufs{random_tensor(n, dt),      random_tensor(n, dt),
                                           std::vector<uint8_t>(n, 200), std::vector<uint8_t>(n, 100),
                                           absmax_bytes,                    absmax_bytes};
    kernel_call k = make_call(K_ADAMW8, dt, {n, 10, 0, block});
    k.fparam[0] = 1e-3f;
    k.fparam[1] = 0.9f;
    k.fparam[2] = 0.999f;
    k.fparam[3] = 0.01f;
    run_elementwise(state, k, bufs);
}

void BM_Sgd(benchmark::State &state, int dt)
{
    const int64_t n = elems(dt);
    std::vector<std::vector<uint8_t>> bufs{random_tensor(n, dt), random_tensor(n, dt),
                                           random_tensor(n, dt)};
    kernel_call k = make_call(K_SGD, dt, {n, 10});
    k.fparam[0] = 1e-2f;
    k.fparam[1] = 0.9f;
    run_elementwise(state, k, bufs);
}

void BM_Ema(benchmark::State &state, int dt)
{
    const int64_t n = elems(dt);
    std::vector<std::vector<uint8_t>> bufs{random_tensor(n, dt), random_tensor(n, dt)};
    kernel_call k = make_call(K_EMA, dt, {n});
    k.fparam[0] = 0.999f;
    run_elementwise(state, k, bufs);
}

// The bandwidth reference: copying one tensor's bytes on one core (read + write, as GELU fp32 moves).
void BM_Memcpy(benchmark::State &state)
{
    std::vector<uint8_t> src(tensor_bytes(), 1), dst(tensor_bytes());
    for (auto _ : state) {
        std::memcpy(dst.data(), src.data(), src.size());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * src.size()));
}

// The same copy split over the cores the process may use (as cpu_for_chunks splits the kernels).
void BM_MemcpyAllCores(benchmark::State &state)
{
    std::vector<uint8_t> src(tensor_bytes(), 1), dst(tensor_bytes());
    const size_t cores = usable_cores();
    for (auto _ : state) {
        copy_all_cores(dst, src, cores);
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * src.size()));
    state.counters["threads"] = static_cast<double>(cores);
}

// A fixed count: each further trial run would fill its tensors (hundreds of MiB) again.
void elementwise_opts(benchmark::internal::Benchmark *b)
{
    b->Unit(benchmark::kMillisecond)->Iterations(10)->UseRealTime();
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

// The console report, then a summary of every elementwise kernel against the bandwidth target.
class SummaryReporter : public benchmark::ConsoleReporter {
public:
    // Colour only on a terminal, as the library's own default reporter does.
    SummaryReporter() : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_Color : OO_None) {}

    void ReportRuns(const std::vector<Run> &runs) override
    {
        ConsoleReporter::ReportRuns(runs);
        for (const Run &r : runs) {
            auto best = r.counters.find("best_GiB/s"), copy = r.counters.find("copy_GiB/s");
            if (!r.error_occurred && best != r.counters.end() && copy != r.counters.end())
                rows_.push_back({r.run_name.function_name + (r.run_name.args.empty() ? "" : "/" + r.run_name.args),
                                 best->second.value, copy->second.value});
        }
    }

    void Finalize() override
    {
        ConsoleReporter::Finalize();
        if (rows_.empty())
            return;
        size_t met = 0;
        std::printf("\nElementwise kernels against the target: at least half the rate of an all-core copy of\n"
                    "one tensor, the copy timed between the kernel's runs; fastest run of each (measured):\n"
                    "%-40s %10s %10s %8s  %s\n",
                    "kernel", "GiB/s", "copy GiB/s", "share", "target");
        for (const Row &row : rows_) {
            const double share = row.rate / row.copy;
            met += share >= 0.5;
            std::printf("%-40s %10.2f %10.2f %7.0f%%  %s\n", row.name.c_str(), row.rate, row.copy, 100.0 * share,
                        share >= 0.5 ? "met" : "missed");
        }
        std::printf("%zu of %zu elementwise kernels meet the target\n", met, rows_.size());
    }

private:
    struct Row {
        std::string name;
        double rate, copy; // GiB/s
    };
    std::vector<Row> rows_;
};

} // namespace

int main(int argc, char **argv)
{
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
        return 1;
    SummaryReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();
    return 0;
}
