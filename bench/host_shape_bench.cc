// host_shape_bench.cc: a second check of the kernel-time model's shape, on this machine (issue 17).
// The host device runs every kernel of a scenario for real on the CPU and measures it; the sim with a
// profile of this CPU's own rates models the same op program. If the model's rules are right, the
// two agree on how much each fix costs or saves, whatever the absolute speeds.
//   1. This CPU's rates, measured with the kernel table's CPU kernels: an fp32 GEMM (a linear layer
//      of the checkpointing scenario's FFN), a streaming kernel's bandwidth (add over tensors of 4x
//      the last-level cache), fused attention, and the time of a tiny kernel (the floor).
//   2. A profile and calibration of those rates (shares 1, no wave quantization, no framework time:
//      the host device calls each kernel directly).
//   3. Every variant of scenarios/host/ on the host device (measured: the fastest step of 3 runs, the
//      variants taking turns) and on that sim (modelled); for each scenario, the ratio of a fix's
//      steps/s to before's (unless the fix leaves training alone) and of its eval time.
// Target: modelled and measured ratios within 25% of each other (a loose bound: this is one run on
// a shared machine; it is a benchmark, not a test, and exits 1 when missed). All rates measured.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_calls.h"

extern "C" {
#include "cpu/tensor_io.h"
#include "device/sim.h"
#include "kernels.h"
#include "run/harness.h"
#include "run/runner.h"
#include "scenario/scenario.h"
#include "workload/generate.h"
}

namespace {

constexpr double kTolerance = 0.25;

struct Rates {
    double gemm = 0, bandwidth = 0, flash = 0, tiny = 0; // FLOP/s, bytes/s, FLOP/s, seconds
};

// Fastest of `reps` runs of k on zero-filled tensors of the sizes the table gives; -1 on error.
double best_seconds(kernel_call k, int reps)
{
    std::vector<std::vector<uint8_t>> bufs;
    std::vector<void *> t;
    for (unsigned i = 0; i < k.ntensors; i++) {
        bufs.emplace_back(kernel_tensor_bytes(&k, i) + 64, 0);
        t.push_back(bufs.back().data());
    }
    err e = {};
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        auto t0 = std::chrono::steady_clock::now();
        if (kernel_run_cpu(&k, t.data(), &e) < 0) {
            std::fprintf(stderr, "host_shape_bench: %s\n", e.msg);
            return -1;
        }
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

Rates measure()
{
    Rates r;
    kernel_call g = make_call(K_GEMM, DT_F32, {2048, 1024, 256, 0, 1, 1});
    g.fparam[0] = 1.0f;
    r.gemm = kernel_get(K_GEMM)->flops(&g) / best_seconds(g, 5);
    const int64_t n = static_cast<int64_t>(4 * last_level_cache_bytes() / 4);
    kernel_call a = make_call(K_ADD, DT_F32, {n});
    a.fparam[0] = a.fparam[1] = 1.0f;
    r.bandwidth = kernel_get(K_ADD)->bytes(&a) / best_seconds(a, 5);
    kernel_call f = make_call(K_FLASH_FWD, DT_F32, {8, 4, 256, 256, 64, 1, 4, 0});
    r.flash = kernel_get(K_FLASH_FWD)->flops(&f) / best_seconds(f, 3);
    r.tiny = best_seconds(make_call(K_FILL, DT_F32, {16}), 50);
    return r;
}

struct Timing {
    double steps_per_s = 0, eval_seconds = 0;
};

double eval_seconds(const run_result &run)
{
    double t = 0;
    for (size_t i = 0; i < run.nphases; i++)
        if (phase_is_eval(run.phases[i].name))
            t += run.phases[i].seconds;
    return t;
}

// The variant on this CPU, measured by the host device: its fastest step, the least disturbed.
Timing on_host(const scenario &sc, const variant &v)
{
    static job_result r; // large
    harness_options opt = {};
    opt.device = "host:2GiB";
    err e = {};
    if (harness_run_variant(&sc, &v, nullptr, &opt, &r, &e)) {
        std::fprintf(stderr, "host_shape_bench: %s\n", e.msg);
        return {};
    }
    return {r.run.step_seconds_min > 0 ? 1.0 / r.run.step_seconds_min : 0, eval_seconds(r.run)};
}

// The best of kRepeats host runs of each variant, the variants taking turns, so that a neighbour's
// burst of load on this shared machine slows one run of each rather than every run of one.
constexpr int kRepeats = 3;

std::vector<Timing> best_on_host(const scenario &sc)
{
    std::vector<Timing> best(sc.nvariants);
    for (int rep = 0; rep < kRepeats; rep++)
        for (size_t i = 0; i < sc.nvariants; i++) {
            Timing t = on_host(sc, sc.variants[i]);
            best[i].steps_per_s = std::max(best[i].steps_per_s, t.steps_per_s);
            if (t.eval_seconds > 0 && (best[i].eval_seconds == 0 || t.eval_seconds < best[i].eval_seconds))
                best[i].eval_seconds = t.eval_seconds;
        }
    return best;
}

// The variant modelled by the sim with this CPU's profile.
Timing on_model(const scenario &sc, const variant &v, const gpu_profile *p, const software_stack *stack)
{
    device *dev = sim_device_create("sim:this-cpu", p->total_bytes, 0, p);
    sim_device_set_stack(dev, stack);
    job_spec job = v.job;
    job.cublas_workspace_bytes = p->cublas_workspace_bytes;
    runner *run = runner_create(dev, &v.alloc, nullptr);
    err e = {};
    if (workload_generate(&job, runner_sink(run), &e))
        std::fprintf(stderr, "host_shape_bench: %s\n", e.msg);
    run_result res;
    runner_finish(run, &res);
    runner_destroy(run);
    dev->ops->destroy(dev);
    double train = 0;
    for (size_t i = 0; i < res.nphases; i++)
        if (phase_is_training(res.phases[i].name))
            train += res.phases[i].seconds;
    return {train > 0 ? (double)res.steps / train : 0, eval_seconds(res)};
}

bool within(double modelled, double measured)
{
    return measured > 0 && modelled > 0 && std::fabs(modelled / measured - 1) <= kTolerance;
}

bool g_missed = false;

void BM_HostShape(benchmark::State &state)
{
    Rates r;
    for (auto _ : state)
        r = measure();
    state.counters["gemm_GFLOP/s"] = r.gemm / 1e9;
    state.counters["bandwidth_GB/s"] = r.bandwidth / 1e9;
    state.counters["flash_GFLOP/s"] = r.flash / 1e9;
    state.counters["tiny_kernel_us"] = r.tiny * 1e6;
    static arch_calibration cal = {"this CPU", "its own measured rates (bench/host_shape_bench.cc)", {1, 1, 1},
                                   0.0, 0, 1.0, 0, 0, 0};
    cal.flash_share = r.flash / r.gemm;
    cal.kernel_min_us = r.tiny * 1e6;
    cal.gemm_fixed_us = r.tiny * 1e6;
    gpu_profile cpu = *gpu_profile_find("rtx5090");
    cpu.name = "this-cpu";
    cpu.description = "this machine's CPU, as measured";
    cpu.calibration = &cal;
    cpu.sms = 0;
    cpu.bandwidth_gbs = r.bandwidth / 1e9;
    cpu.tflops_16bit = cpu.tflops_fp32 = r.gemm / 1e12;
    for (double &m : cpu.matmul_tflops)
        m = r.gemm / 1e12;
    const software_stack direct = {0, 0, 0, 0.0, true, "direct kernel calls", "the host device calls each kernel"};
    std::printf("\nThis CPU: fp32 GEMM %.1f GFLOP/s, bandwidth %.1f GB/s, fused attention %.1f GFLOP/s, tiny "
                "kernel %.0f ns (measured)\n",
                r.gemm / 1e9, r.bandwidth / 1e9, r.flash / 1e9, r.tiny * 1e9);
    std::printf("%-24s %-14s %12s %12s %9s  %s\n", "scenario", "variant", "measured", "modelled", "ratio err",
                "target (within 25%)");
    scenario *all = nullptr;
    size_t n = 0;
    err e = {};
    if (scenario_load_dir_or_file("scenarios/host", &all, &n, &e)) {
        state.SkipWithError(e.msg);
        g_missed = true;
        return;
    }
    for (size_t s = 0; s < n; s++) {
        const scenario &sc = all[s];
        std::vector<Timing> host = best_on_host(sc), model;
        for (size_t i = 0; i < sc.nvariants; i++)
            model.push_back(on_model(sc, sc.variants[i], &cpu, &direct));
        for (size_t i = 1; i < sc.nvariants; i++) {
            const double measured = host[i].steps_per_s / host[0].steps_per_s;
            const double modelled = model[i].steps_per_s / model[0].steps_per_s;
            if (std::fabs(modelled - 1) < 0.02) { /* a fix of the eval only: training differs by noise */
                std::printf("%-24s %-14s %11.3fx %11.3fx %9s  n/a (steps/s: the fix leaves training alone)\n",
                            sc.name, sc.variants[i].name, measured, modelled, "");
            } else {
                const bool ok = within(modelled, measured);
                g_missed |= !ok;
                std::printf("%-24s %-14s %11.3fx %11.3fx %+8.1f%%  %s (steps/s vs before)\n", sc.name,
                            sc.variants[i].name, measured, modelled, 100 * (modelled / measured - 1),
                            ok ? "met" : "missed");
            }
            if (host[0].eval_seconds > 0 && model[0].eval_seconds > 0) {
                const double me = host[i].eval_seconds / host[0].eval_seconds;
                const double mo = model[i].eval_seconds / model[0].eval_seconds;
                const bool eok = within(mo, me);
                g_missed |= !eok;
                std::printf("%-24s %-14s %11.3fx %11.3fx %+8.1f%%  %s (eval time vs before)\n", sc.name,
                            sc.variants[i].name, me, mo, 100 * (mo / me - 1), eok ? "met" : "missed");
            }
        }
    }
    scenario_free_all(all, n);
}

BENCHMARK(BM_HostShape)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

} // namespace

int main(int argc, char **argv)
{
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
        return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    if (g_missed)
        std::printf("host_shape_bench: the model's ratios missed the measured ones by more than 25%%\n");
    return g_missed ? 1 : 0;
}
