/* cuda_kernels.h: the CUDA twins of the CPU kernels, for the cuda device plugin (C++, nvcc only):
 * cuda_<name> for each row of kernel_list.def, in kernels/cuda/F.cu beside kernels/cpu/F.c, all
 * behind one table (kernel_table.cu). GEMM runs on cuBLAS and conv2d on cuDNN, with the handles and
 * the memory behind them from the plugin. */
#ifndef OOMLAB_CUDA_KERNELS_H
#define OOMLAB_CUDA_KERNELS_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stddef.h>

#include "kernels.h"

/* What a kernel launches with. The plugin owns the stream, the library handles bound to it and the
 * device memory kernels borrow, which it takes from its caller's allocator (PyTorch takes such
 * temporaries from its caching allocator, so they count in the memory model). */
struct cuda_kernel_ctx {
    cudaStream_t stream;
    cudnnHandle_t cudnn; /* bound to stream */
    /* The cuBLAS handle bound to stream with its workspace attached, taken on first use as PyTorch
     * does; NULL with the reason in why. */
    cublasHandle_t (*cublas)(void *user, char *why, size_t why_len);
    /* Device scratch (workspaces included) of `bytes`, NULL when out of memory; put gives it back,
     * stream-ordered, so it may be put right after the launches that use it. */
    void *(*scratch_get)(void *user, size_t bytes);
    void (*scratch_put)(void *user, void *ptr);
    void *user;
    char *why; /* where a kernel says why it failed */
    size_t why_len;
};

/* A CUDA kernel: launches call k on c->stream with device pointers t (order as in kernels.h).
 * Returns cudaSuccess; cudaErrorNotSupported with the reason in c->why (a shape these kernels do not
 * cover); or another error, with the reason in c->why where the error code alone does not say it
 * (a cuBLAS or cuDNN failure, a workspace that did not fit). */
#define CUDA_KERNEL(name) cudaError_t name(const struct kernel_call *k, void *const *t, const struct cuda_kernel_ctx *c)

#define KERNEL(id, name, ...) CUDA_KERNEL(cuda_##name);
#include "kernel_list.def"

/* Runs k's row of the CUDA table (kernel_table.cu); the contract of CUDA_KERNEL. */
cudaError_t cuda_kernel_launch(const struct kernel_call *k, void *const *t, const struct cuda_kernel_ctx *c);

/* Writes the reason (printf-style) to c->why and returns rc. */
cudaError_t cuda_kernel_fail(const struct cuda_kernel_ctx *c, cudaError_t rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
