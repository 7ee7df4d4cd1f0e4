// bench_snapshots.h: the shared PyTorch snapshots the replay benchmarks read (OOMLAB_SHARED locates them).
#ifndef OOMLAB_BENCH_SNAPSHOTS_H
#define OOMLAB_BENCH_SNAPSHOTS_H

#include <cstdlib>
#include <string>

inline std::string shared_dir()
{
    const char *root = std::getenv("OOMLAB_SHARED");
    return std::string(root ? root : "../shared") + "/data/pytorch-snapshots/";
}

const std::string kDeComFL = "ZidongLiu_DeComFL__memory.pickle";
const std::string kLargest = "kkaitlyn111_cs336-a2__memory_files_memory_ctx256_fullstep_.pickle"; // 3.3 MB

#endif
