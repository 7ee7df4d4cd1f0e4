// workload_bench.cc: Google Benchmark of the workload generator: one FLAN-T5-XL training step
// (batch 8, sequence 512, bf16, AdamW) streamed into a sink that only counts ops and bytes.
extern "C" {
#include "program/program.h"
#include "workload/generate.h"
}

#include <benchmark/benchmark.h>

namespace {

struct counting_sink {
    op_sink base;
    uint64_t ops = 0;
    uint64_t alloc_bytes = 0;
};

int count_op(op_sink *s, const op *o, err *)
{
    auto *c = reinterpret_cast<counting_sink *>(s);
    c->ops++;
    if (o->kind == OP_ALLOC)
        c->alloc_bytes += o->bytes;
    return 0;
}

void BM_FlanT5XlStep(benchmark::State &state)
{
    job_spec spec;
    job_spec_init(&spec);
    snprintf(spec.model.preset, sizeof spec.model.preset, "flan-t5-xl");
    spec.batch = 8;
    spec.seq_len = 512;
    spec.load_dtype = spec.param_dtype = DT_BF16;
    spec.steps = 1;
    uint64_t ops = 0;
    size_t host = 0;
    for (auto _ : state) {
        err e{};
        counting_sink sink;
        sink.base.emit = count_op;
        workload *w = workload_create(&spec, &e);
        if (!w || workload_run(w, &sink.base, &e) < 0) {
            state.SkipWithError(e.msg);
            workload_destroy(w);
            return;
        }
        host = workload_host_bytes(w);
        workload_destroy(w);
        ops = sink.ops;
        benchmark::DoNotOptimize(sink.alloc_bytes);
    }
    state.counters["ops"] = static_cast<double>(ops);
    state.counters["host_MiB"] = static_cast<double>(host) / 1048576.0;
    state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(ops));
}

BENCHMARK(BM_FlanT5XlStep)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
