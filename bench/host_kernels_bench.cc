// host_kernels_bench.cc: the host kernels issue 18 compares with PyTorch CPU, at the shapes of a GPT-2-small
// style layer (tokens 8192 = batch 32 x 256, width 768, 12 heads of 64) and a ResNet-style convolution:
// bias gradient (dy.sum(0)), softmax over attention rows, LayerNorm, causal flash attention forward and backward,
// causal eager attention forward and backward, conv2d 3x3 forward and both gradients, exact (erf) GELU forward and
// backward over the tiny transformer's MLP activations (batch 8 x 256 tokens x 1024), and the fused fp32 AdamW step
// over 10 M parameters. Each runs through the kernel table on
// as many threads as the process may use (taskset chooses); bench/torch_peer.py runs this file on one and two
// cores beside torch at the same shapes and prints the ratios. Real time, fastest of the repetitions.
// BM_HostTrainStep is a whole training step of the tiny GPT-2-style transformer of scenarios/host/checkpointing.yaml
// (variant before: batch 8 x 256 tokens, 4 layers of width 256, vocabulary 2048, AdamW) on the host device: the
// wall-clock time of its training phases (kernels, the allocator model, every launch), fastest step; torch_peer.py
// builds the same model in torch. Run it from the top of the tree (it reads that scenario).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <new>
#include <vector>

#include "bench_calls.h"

extern "C" {
#include "cpu/tensor_io.h"
#include "kernels.h"
#include "run/harness.h"
#include "scenario/scenario.h"
}

namespace {

// Storage 64-byte aligned, as PyTorch aligns every CPU tensor (c10/core/alignment.h: gAlignment) and the host
// device's arena places them: with a plain vector's 16 bytes, each 16-float load or store of an AVX-512 loop
// spans two cache lines (GELU 8-12% slower, measured).
template <class T> struct aligned64 {
    using value_type = T;
    aligned64() = default;
    template <class U> aligned64(const aligned64<U> &) {}
    T *allocate(size_t n) { return static_cast<T *>(::operator new(n * sizeof(T), std::align_val_t{64})); }
    void deallocate(T *p, size_t) { ::operator delete(p, std::align_val_t{64}); }
    template <class U> bool operator==(const aligned64<U> &) const { return true; }
    template <class U> bool operator!=(const aligned64<U> &) const { return false; }
};
using fvec = std::vector<float, aligned64<float>>;

// Tensors of the call's sizes holding small pseudo-random values (v of AdamW: positive).
std::vector<fvec> tensors_for(const kernel_call &k)
{
    std::vector<fvec> t;
    uint64_t s = 7;
    for (unsigned i = 0; i < k.ntensors; i++) {
        fvec v((kernel_tensor_bytes(&k, i) + 3) / 4);
        for (auto &x : v) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            x = static_cast<float>(s >> 40) / 16777216.0f * 0.5f + 0.01f;
        }
        t.push_back(std::move(v));
    }
    return t;
}

void run_call(benchmark::State &state, kernel_call k)
{
    auto bufs = tensors_for(k);
    std::vector<void *> t;
    for (auto &b : bufs)
        t.push_back(b.data());
    for (auto _ : state) {
        err e{};
        if (kernel_run_cpu(&k, t.data(), &e) < 0) {
            state.SkipWithError(e.msg);
            return;
        }
    }
}

void BM_HostBiasGrad(benchmark::State &state) { run_call(state, make_call(K_BIAS_BWD, DT_F32, {8192, 768, 1})); }
void BM_HostSoftmax(benchmark::State &state) { run_call(state, make_call(K_SOFTMAX_FWD, DT_F32, {32 * 12 * 256, 256})); }
void BM_HostLayerNorm(benchmark::State &state)
{
    kernel_call k = make_call(K_LAYERNORM_FWD, DT_F32, {8192, 768});
    k.fparam[0] = 1e-5f;
    run_call(state, k);
}
void BM_HostFlashFwd(benchmark::State &state)
{
    kernel_call k = make_call(K_FLASH_FWD, DT_F32, {8, 12, 256, 256, 64, 1, 12, 0});
    k.fparam[0] = 0.125f;
    run_call(state, k);
}
void BM_HostConv2d(benchmark::State &state)
{
    run_call(state, make_call(K_CONV2D_FWD, DT_F32, {8, 64, 56, 56, 64, 3, 1, 1}));
}
// nn.GELU()'s default (approximate='none'), as the tiny transformer below runs it; the backward from x and dy.
void BM_HostGeluFwd(benchmark::State &state) { run_call(state, make_call(K_GELU_FWD, DT_F32, {2048 * 1024, 0})); }
void BM_HostGeluBwd(benchmark::State &state) { run_call(state, make_call(K_GELU_BWD, DT_F32, {2048 * 1024, 0})); }
// kernattn's entries: the fused attention backward (its prep pass and the block pass, from the forward's own o
// and lse), eager attention forward and backward, and conv2d's two gradients, at the shapes above.
kernel_call flash_call(unsigned kernel)
{
    kernel_call k = make_call(kernel, DT_F32, {8, 12, 256, 256, 64, 1, 12, 0});
    k.fparam[0] = 0.125f;
    return k;
}
void BM_HostFlashBwd(benchmark::State &state)
{
    kernel_call fwd = flash_call(K_FLASH_FWD), prep = flash_call(K_FLASH_BWD_PREP), bwd = flash_call(K_FLASH_BWD);
    auto in = tensors_for(bwd); // q, kv, stats, do, dq, dkv
    fvec o(in[3].size()), lse(in[2].size() / 2);
    void *tf[] = {in[0].data(), in[1].data(), o.data(), lse.data()};
    void *tp[] = {o.data(), in[3].data(), lse.data(), in[2].data()};
    void *tb[] = {in[0].data(), in[1].data(), in[2].data(), in[3].data(), in[4].data(), in[5].data()};
    err e{};
    if (kernel_run_cpu(&fwd, tf, &e) < 0) {
        state.SkipWithError(e.msg);
        return;
    }
    for (auto _ : state)
        if (kernel_run_cpu(&prep, tp, &e) < 0 || kernel_run_cpu(&bwd, tb, &e) < 0) {
            state.SkipWithError(e.msg);
            return;
        }
}
// Eager (unfused) attention, the host step's default: the forward saving P, the backward from it.
void BM_HostAttnEagerFwd(benchmark::State &state) { run_call(state, flash_call(K_ATTN_FWD)); }
void BM_HostAttnEagerBwd(benchmark::State &state) { run_call(state, flash_call(K_ATTN_BWD)); }
void BM_HostConv2dBwdData(benchmark::State &state)
{
    run_call(state, make_call(K_CONV2D_BWD_DATA, DT_F32, {8, 64, 56, 56, 64, 3, 1, 1}));
}
void BM_HostConv2dBwdFilter(benchmark::State &state)
{
    run_call(state, make_call(K_CONV2D_BWD_FILTER, DT_F32, {8, 64, 56, 56, 64, 3, 1, 1}));
}

void BM_HostAdamWFused(benchmark::State &state)
{
    kernel_call k = make_call(K_ADAMW, DT_F32, {10000000, 10});
    k.fparam[0] = 1e-3f;
    k.fparam[1] = 0.9f;
    k.fparam[2] = 0.999f;
    k.fparam[3] = 0.01f;
    run_call(state, k);
}

// The fastest training step's wall time of one host run of the checkpointing scenario's first variant (5 steps).
void BM_HostTrainStep(benchmark::State &state)
{
    scenario sc;
    err e = {};
    if (scenario_load("scenarios/host/checkpointing.yaml", &sc, &e)) {
        state.SkipWithError(e.msg);
        return;
    }
    static job_result r; // large
    harness_options opt = {};
    for (auto _ : state) {
        if (harness_run_variant(&sc, &sc.variants[0], nullptr, &opt, &r, &e) || r.run.step_wall_seconds_min <= 0) {
            state.SkipWithError(e.msg[0] ? e.msg : "the host run timed no step");
            break;
        }
        state.SetIterationTime(r.run.step_wall_seconds_min);
    }
    scenario_free(&sc);
}

void repeated(benchmark::internal::Benchmark *b)
{
    b->Unit(benchmark::kMillisecond)->Repetitions(3)->ComputeStatistics(
        "min", [](const std::vector<double> &v) { return *std::min_element(v.begin(), v.end()); });
}

void opts(benchmark::internal::Benchmark *b)
{
    repeated(b->UseRealTime()->MinTime(0.2));
}

} // namespace

BENCHMARK(BM_HostBiasGrad)->Apply(opts);
BENCHMARK(BM_HostSoftmax)->Apply(opts);
BENCHMARK(BM_HostLayerNorm)->Apply(opts);
BENCHMARK(BM_HostFlashFwd)->Apply(opts);
BENCHMARK(BM_HostConv2d)->Apply(opts);
BENCHMARK(BM_HostGeluFwd)->Apply(opts);
BENCHMARK(BM_HostGeluBwd)->Apply(opts);
BENCHMARK(BM_HostFlashBwd)->Apply(opts);
BENCHMARK(BM_HostAttnEagerFwd)->Apply(opts);
BENCHMARK(BM_HostAttnEagerBwd)->Apply(opts);
BENCHMARK(BM_HostConv2dBwdData)->Apply(opts);
BENCHMARK(BM_HostConv2dBwdFilter)->Apply(opts);
BENCHMARK(BM_HostAdamWFused)->Apply(opts);
BENCHMARK(BM_HostTrainStep)->Apply(repeated)->UseManualTime()->Iterations(1);
BENCHMARK_MAIN();
