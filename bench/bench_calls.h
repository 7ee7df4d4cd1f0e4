// bench_calls.h: kernel calls for the benchmarks, as the op program makes them, and the cache size they size tensors by.
#ifndef OOMLAB_BENCH_CALLS_H
#define OOMLAB_BENCH_CALLS_H

#include <cstring>
#include <initializer_list>

extern "C" {
#include "device/topology.h"
#include "kernels.h"
}

// A call of `kernel` in dtype dt with these dims (the rest 0) on tensors 1, 2, ... in table order.
inline kernel_call make_call(unsigned kernel, int dt, std::initializer_list<int64_t> dims)
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

// The size of one cache of the last level, as hwloc reads it (32 MiB if it cannot). Not sysconf: glibc's
// figure comes from CPUID, which in a VM on AMD EPYC can count every CCX of the host.
inline size_t last_level_cache_bytes()
{
    host_topology t;
    err e = {};
    uint64_t bytes = host_topology_read(&t, &e) ? 0 : host_topology_last_level_cache(&t);
    return bytes ? static_cast<size_t>(bytes) : static_cast<size_t>(32u << 20);
}

#endif
