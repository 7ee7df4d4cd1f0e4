// kernel_table.cu: the CUDA side of the kernel table: for each row of kernel_list.def, in its
// order, the kernel's name and cuda_<name>; launches go through it.
#include <stdarg.h>
#include <stdio.h>

#include "cuda/cuda_kernels.h"
#include "cuda/kernel_table.h"

struct cuda_row {
    const char *name;
    cudaError_t (*launch)(const struct kernel_call *k, void *const *t, const struct cuda_kernel_ctx *c);
};

static const struct cuda_row rows[] = {
#define KERNEL(id, name, ...) {#name, cuda_##name},
#include "kernel_list.def"
};
static_assert(sizeof rows / sizeof rows[0] == K_COUNT, "one CUDA row per kernel");

cudaError_t cuda_kernel_fail(const struct cuda_kernel_ctx *c, cudaError_t rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, c->why_len, fmt, ap);
    va_end(ap);
    return rc;
}

cudaError_t cuda_kernel_launch(const struct kernel_call *k, void *const *t, const struct cuda_kernel_ctx *c)
{
    if (k->kernel >= K_COUNT)
        return cuda_kernel_fail(c, cudaErrorNotSupported, "kernel id %u is not in the kernel table", k->kernel);
    return rows[k->kernel].launch(k, t, c);
}

extern "C" const char *cuda_kernel_row(unsigned id, int *has_launcher)
{
    if (id >= K_COUNT)
        return NULL;
    *has_launcher = rows[id].launch != NULL;
    return rows[id].name;
}
