// bench_build_dir.h: the build directory a benchmark binary runs from (build/bench/X -> build), so the
// whole-process benchmarks find the oomlab binary beside them wherever the tree is.
#ifndef OOMLAB_BENCH_BUILD_DIR_H
#define OOMLAB_BENCH_BUILD_DIR_H

#include <unistd.h>

#include <string>

inline std::string bench_build_dir()
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return "build";
    exe[n] = '\0';
    std::string dir(exe);
    dir = dir.substr(0, dir.rfind('/')); // build/bench
    return dir.substr(0, dir.rfind('/'));
}

#endif
