// replay_bench.cc: how fast `oomlab replay` reads and replays in process (issue 18): the pickle reader alone
// (the whole value tree), the snapshot reader as replay runs it (the trace streamed: snapshot_parse) and as
// it reads a file it cannot stream (the tree, then the walk: snapshot_parse_whole), and parse plus replay, on the DeComFL snapshot and the
// largest shared one (3.3 MB). Whole processes, the targets, are timed by process_bench.cc.
// OOMLAB_SHARED locates the snapshots.
#include <benchmark/benchmark.h>


#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_snapshots.h"

extern "C" {
#include "replay/pickle.h"
#include "replay/replay.h"
#include "replay/snapshot_file.h"
}

namespace {

std::vector<unsigned char> read_file(const std::string &path)
{
    std::vector<unsigned char> data;
    if (FILE *f = fopen(path.c_str(), "rb")) {
        unsigned char buf[1 << 16];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            data.insert(data.end(), buf, buf + n);
        fclose(f);
    }
    return data;
}

// Parses the snapshot `file` in memory with parse(name, data, len) (0 on success, else an error message).
template <typename Parse> void parse_bench(benchmark::State &state, const std::string &file, Parse parse)
{
    auto data = read_file(shared_dir() + file);
    if (data.empty()) {
        state.SkipWithError(("cannot read " + file).c_str());
        return;
    }
    for (auto _ : state) {
        err e{};
        if (parse(file.c_str(), data.data(), data.size(), &e)) {
            state.SkipWithError(e.msg);
            break;
        }
    }
    state.SetBytesProcessed((int64_t)(state.iterations() * data.size()));
}

void BM_PickleParse(benchmark::State &state, const std::string &file)
{
    parse_bench(state, file, [](const char *name, const unsigned char *data, size_t len, err *e) {
        pickle_doc *doc = nullptr;
        int rc = pickle_parse(name, data, len, &doc, e);
        pickle_free(doc);
        return rc;
    });
}

void BM_SnapshotParse(benchmark::State &state, const std::string &file)
{
    parse_bench(state, file, [](const char *name, const unsigned char *data, size_t len, err *e) {
        snapshot s;
        int rc = snapshot_parse(name, data, len, &s, e);
        snapshot_free(&s);
        return rc;
    });
}

void BM_SnapshotParseWhole(benchmark::State &state, const std::string &file)
{
    parse_bench(state, file, [](const char *name, const unsigned char *data, size_t len, err *e) {
        snapshot s;
        int rc = snapshot_parse_whole(name, data, len, &s, e);
        snapshot_free(&s);
        return rc;
    });
}

void BM_Replay(benchmark::State &state, const std::string &file)
{
    std::string path = shared_dir() + file;
    for (auto _ : state) {
        err e{};
        replay_options opt{};
        job_result *jobs = nullptr;
        size_t njobs = 0;
        int rc = replay_path(path.c_str(), &opt, &jobs, &njobs, &e);
        free(jobs);
        if (rc) {
            state.SkipWithError(e.msg);
            break;
        }
    }
}

} // namespace

BENCHMARK_CAPTURE(BM_PickleParse, decomfl, kDeComFL)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SnapshotParse, decomfl, kDeComFL)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SnapshotParseWhole, decomfl, kDeComFL)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, decomfl, kDeComFL)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PickleParse, largest, kLargest)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SnapshotParse, largest, kLargest)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SnapshotParseWhole, largest, kLargest)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, largest, kLargest)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
