/* profiles.h: GPU profiles for the simulated device: the capacity CUDA reports, a typical CUDA context
 * (and the context of other CUDA versions), memory bandwidth and dense tensor rates from the vendor's
 * sheets, the large-matmul rates measured on the card where published, its architecture (whose row of
 * calibration.h holds the kernel-time constants), and the cuBLAS workspace PyTorch uses there.
 * Figures and their sources: profiles.c and reference/workload-memory.md section 6. */
#ifndef OOMLAB_PROFILES_H
#define OOMLAB_PROFILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device/calibration.h"
#include "dtype.h"

/* The default device's profile: `sim` alone, and the architecture of a bare `sim:SIZE`. */
#define GPU_PROFILE_DEFAULT "rtx5090"

/* PyTorch's default cuBLAS workspace per stream (CUBLAS_WORKSPACE_CONFIG): ":4096:8" from sm_90
 * (Hopper) on, ":4096:2:16:8" before. */
#define CUBLAS_WORKSPACE_SM90_BYTES (4096ULL * 1024 * 8)
#define CUBLAS_WORKSPACE_PRE_SM90_BYTES (4096ULL * 1024 * 2 + 16ULL * 1024 * 8)

struct gpu_profile {
    const char *name;         /* "rtx5090" */
    const char *description;  /* "NVIDIA GeForce RTX 5090, 32 GB GDDR7, sm_120 (CUDA reports 31.51 GiB)" */
    const struct arch_calibration *calibration; /* its architecture's row of calibration.h */
    int sms;                  /* streaming multiprocessors (vendor sheet) */
    uint64_t total_bytes;     /* cudaMemGetInfo total */
    uint64_t context_bytes;   /* memory the CUDA context and kernels take before PyTorch allocates */
    double bandwidth_gbs;     /* GB/s */
    double tflops_16bit;      /* dense bf16/fp16 tensor TFLOP/s with fp32 accumulation */
    double tflops_fp32;       /* plain fp32 (PyTorch leaves TF32 off for matmuls by default) */
    /* torch.matmul's measured peak TFLOP/s by dtype (DT_F32, DT_BF16, DT_F16); 0 where none was
     * published, and the architecture's share of the spec rate stands in. */
    double matmul_tflops[DT_F16 + 1];
    uint64_t cublas_workspace_bytes;
};

const struct gpu_profile *gpu_profile_find(const char *name);
const struct gpu_profile *gpu_profile_default(void);
size_t gpu_profile_count(void);
const struct gpu_profile *gpu_profile_at(size_t i);
/* The large-matmul rate in FLOP/s for a dtype: measured, or the spec rate times the architecture's share. */
double gpu_profile_matmul_rate(const struct gpu_profile *p, enum dtype dt);

/* The software stack of a PyTorch process, chosen by its CUDA version (`sim:PROFILE@cudaX.Y`): the
 * CUDA context it creates (eager module loading before 11.7, lazy after), the host time its framework
 * spends per operator it issues (Python, dispatcher, cudaLaunchKernel), and whether its cuBLAS runs
 * 16-bit GEMMs on tensor cores whatever their shape (from cuBLAS 11, CUDA 11.0) or only when M, N
 * and K are multiples of 8. profiles.c has the rows and their sources. */
struct software_stack {
    int major, minor;         /* the first CUDA version of the row */
    uint64_t context_bytes;
    double host_op_us;
    bool tensor_cores_any_shape;
    const char *name;         /* "PyTorch 1.x, eager module loading" */
    const char *source;
};

/* The row of CUDA major.minor; major 0: today's stack (the last row). */
const struct software_stack *software_stack_for(int major, int minor);
size_t software_stack_count(void);
const struct software_stack *software_stack_at(size_t i);

#endif
