/* cuda_kernels.h: the CUDA twins of the CPU kernels (the .cu files in kernels/cuda), for the cuda device
 * plugin. GEMM and conv2d are not here: the plugin runs them with cuBLAS and cuDNN. */
#ifndef OOMLAB_CUDA_KERNELS_H
#define OOMLAB_CUDA_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>

#include "kernels.h"

/* Device scratch memory the plugin obtains from its caller's allocator (PyTorch takes such
 * temporaries from its caching allocator): get returns NULL when out of memory; put frees. */
struct cuda_scratch {
    void *(*get)(void *user, size_t bytes);
    void (*put)(void *user, void *ptr);
    void *user;
};

/* Launches kernel k on stream with device pointers t (order as in kernels.h). Returns
 * cudaSuccess, a CUDA error, or cudaErrorNotSupported with the reason in why (GEMM and conv2d,
 * which belong to cuBLAS and cuDNN, or a shape these kernels do not cover). */
cudaError_t cuda_kernel_launch(const struct kernel_call *k, void *const *t, cudaStream_t stream,
                               const struct cuda_scratch *scratch, char *why, size_t why_len);

/* Per-family launchers behind cuda_kernel_launch (same contract). */
cudaError_t cuda_pointwise_launch(const struct kernel_call *k, void *const *t, cudaStream_t s);
cudaError_t cuda_optim_launch(const struct kernel_call *k, void *const *t, cudaStream_t s);
cudaError_t cuda_rows_launch(const struct kernel_call *k, void *const *t, cudaStream_t s,
                             const struct cuda_scratch *scratch);
cudaError_t cuda_attention_launch(const struct kernel_call *k, void *const *t, cudaStream_t s,
                                  const struct cuda_scratch *scratch, char *why, size_t why_len);
/* The kernels appended for the workload generator (the *_extra.cu files). */
cudaError_t cuda_pointwise_extra_launch(const struct kernel_call *k, void *const *t, cudaStream_t s);
cudaError_t cuda_activation_extra_launch(const struct kernel_call *k, void *const *t, cudaStream_t s);
cudaError_t cuda_attention_extra_launch(const struct kernel_call *k, void *const *t, cudaStream_t s, char *why,
                                        size_t why_len);
cudaError_t cuda_optim_extra_launch(const struct kernel_call *k, void *const *t, cudaStream_t s,
                                    const struct cuda_scratch *scratch);
cudaError_t cuda_random_launch(const struct kernel_call *k, void *const *t, cudaStream_t s);

#endif
