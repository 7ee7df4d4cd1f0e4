/* profiles.h: GPU profiles for the simulated device: the capacity CUDA reports, a typical CUDA context,
 * memory bandwidth and dense 16-bit tensor throughput, the cuBLAS workspace PyTorch uses on that
 * architecture. Figures and their sources: reference/workload-memory.md section 6. */
#ifndef OOMLAB_PROFILES_H
#define OOMLAB_PROFILES_H

#include <stddef.h>
#include <stdint.h>

/* The default device's profile: `sim` alone, and the architecture of a bare `sim:SIZE`. */
#define GPU_PROFILE_DEFAULT "rtx5090"

/* PyTorch's default cuBLAS workspace per stream (CUBLAS_WORKSPACE_CONFIG): ":4096:8" from sm_90
 * (Hopper) on, ":4096:2:16:8" before. */
#define CUBLAS_WORKSPACE_SM90_BYTES (4096ULL * 1024 * 8)
#define CUBLAS_WORKSPACE_PRE_SM90_BYTES (4096ULL * 1024 * 2 + 16ULL * 1024 * 8)

struct gpu_profile {
    const char *name;         /* "rtx5090" */
    const char *description;  /* "NVIDIA GeForce RTX 5090 (32 GB GDDR7, sm_120)" */
    uint64_t total_bytes;     /* cudaMemGetInfo total */
    uint64_t context_bytes;   /* memory the CUDA context and kernels take before PyTorch allocates */
    double bandwidth_gbs;     /* GB/s */
    double tflops_16bit;      /* dense bf16/fp16 tensor TFLOP/s with fp32 accumulation */
    double tflops_fp32;       /* plain fp32 (PyTorch leaves TF32 off for matmuls by default) */
    uint64_t cublas_workspace_bytes;
};

const struct gpu_profile *gpu_profile_find(const char *name);
const struct gpu_profile *gpu_profile_default(void);
size_t gpu_profile_count(void);
const struct gpu_profile *gpu_profile_at(size_t i);

#endif
