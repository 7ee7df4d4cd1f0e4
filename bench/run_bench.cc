// run_bench.cc: end-to-end speed and host memory of sim runs. Targets (issue 3): one FLAN-T5-XL training
// step at batch 8, sequence 512, generated and run through the allocator model on sim in under 100 ms;
// every scenario in scenarios/ in under 5 s; a sim run's host memory under 100 MiB whatever the
// simulated model's size (peak RSS is reported as a counter).
#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <cstdio>

extern "C" {
#include "device/sim.h"
#include "run/harness.h"
#include "run/runner.h"
#include "scenario/scenario.h"
#include "workload/generate.h"
}

namespace {

double peak_rss_mib()
{
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

void BM_FlanT5XlStepOnSim(benchmark::State &state)
{
    job_spec spec;
    job_spec_init(&spec);
    snprintf(spec.model.preset, sizeof spec.model.preset, "flan-t5-xl");
    spec.batch = 8;
    spec.seq_len = 512;
    spec.load_dtype = spec.param_dtype = DT_BF16;
    spec.optimizer = OPT_ADAMW_8BIT;
    spec.fixes |= 1u << FIX_GRADIENT_CHECKPOINTING; /* as the scenario's fitting variant */
    spec.steps = 1;
    const gpu_profile *p = gpu_profile_find("rtx5090");
    spec.cublas_workspace_bytes = p->cublas_workspace_bytes;
    uint64_t peak = 0, ops = 0;
    for (auto _ : state) {
        err e{};
        alloc_config cfg;
        alloc_config_default(&cfg);
        device *dev = sim_device_create("sim:rtx5090", p->total_bytes, p->context_bytes, p);
        runner *r = runner_create(dev, &cfg, nullptr);
        int rc = workload_generate(&spec, runner_sink(r), &e);
        run_result res;
        runner_finish(r, &res);
        runner_destroy(r);
        dev->ops->destroy(dev);
        if (rc || res.oom.happened) {
            state.SkipWithError(res.oom.happened ? "the step OOMs: the benchmark times a step that fits" : e.msg);
            return;
        }
        peak = res.peak_reserved;
        ops = res.allocs + res.frees + res.kernels;
    }
    state.counters["peak_reserved_GiB"] = (double)peak / (1024.0 * 1024 * 1024);
    state.counters["ops"] = (double)ops;
    state.counters["host_peak_RSS_MiB"] = peak_rss_mib();
}

void BM_AllScenarios(benchmark::State &state)
{
    size_t variants = 0;
    for (auto _ : state) {
        err e{};
        scenario *sc;
        size_t n;
        if (scenario_load_dir_or_file("scenarios", &sc, &n, &e)) {
            state.SkipWithError(e.msg);
            return;
        }
        harness_options opt{};
        variants = 0;
        for (size_t i = 0; i < n; i++) {
            job_result *r;
            if (harness_run_scenario(&sc[i], &opt, &r, &e)) {
                state.SkipWithError(e.msg);
                scenario_free_all(sc, n);
                return;
            }
            variants += sc[i].nvariants;
            free(r);
        }
        scenario_free_all(sc, n);
    }
    state.counters["variants"] = (double)variants;
    state.counters["host_peak_RSS_MiB"] = peak_rss_mib();
}

} // namespace

BENCHMARK(BM_FlanT5XlStepOnSim)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AllScenarios)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_MAIN();
