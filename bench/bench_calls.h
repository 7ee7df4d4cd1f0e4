// bench_calls.h: kernel calls for the benchmarks, as the op program makes them.
#ifndef OOMLAB_BENCH_CALLS_H
#define OOMLAB_BENCH_CALLS_H

#include <cstring>
#include <initializer_list>

extern "C" {
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

#endif
