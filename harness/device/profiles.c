/* profiles.c: the GPU profile table (see profiles.h). Totals are the CUDA-visible capacities seen in
 * PyTorch OOM messages (workload-memory.md 6.2); the context is the 426 MiB measured for a PyTorch 2.10 /
 * CUDA 13 context (6.3); fp32 rates are the cards' non-tensor FP32 peaks (6.1 and vendor sheets); cuBLAS workspaces are 32 MiB on Hopper and Blackwell, 8,519,680 B elsewhere (6.4). */
#include "device/profiles.h"

#include <string.h>

#include "util/size.h"

#define CUBLAS_WS_DEFAULT CUBLAS_WORKSPACE_PRE_SM90_BYTES
#define CUBLAS_WS_LARGE CUBLAS_WORKSPACE_SM90_BYTES
#define CONTEXT (426 * MiB)

static const struct gpu_profile profiles[] = {
    {"rtx5090", "NVIDIA GeForce RTX 5090, 32 GB GDDR7, sm_120 (CUDA reports 31.51 GiB)", 32266 * MiB, CONTEXT,
     1792, 209.5, 104.8, CUBLAS_WS_LARGE},
    {"rtx4090", "NVIDIA GeForce RTX 4090, 24 GB GDDR6X, sm_89 (CUDA reports 23.65 GiB)", 24218 * MiB, CONTEXT,
     1008, 165.2, 82.6, CUBLAS_WS_DEFAULT},
    {"a100-40", "NVIDIA A100 40GB, HBM2, sm_80 (CUDA reports 39.39 GiB)", 40339 * MiB, CONTEXT, 1555, 312, 19.5,
     CUBLAS_WS_DEFAULT},
    {"a100-80", "NVIDIA A100 80GB SXM, HBM2e, sm_80 (CUDA reports 79.35 GiB)", 81254 * MiB, CONTEXT, 2039, 312, 19.5,
     CUBLAS_WS_DEFAULT},
    {"h100", "NVIDIA H100 80GB SXM5, HBM3, sm_90 (CUDA reports 79.11 GiB)", 81009 * MiB, CONTEXT, 3350, 989.4, 66.9,
     CUBLAS_WS_LARGE},
    {"h200", "NVIDIA H200 141GB SXM, HBM3e, sm_90 (CUDA total estimated 550 MiB below nvidia-smi's 143771 MiB)",
     143221 * MiB, CONTEXT, 4800, 989.4, 66.9, CUBLAS_WS_LARGE},
    {"l4", "NVIDIA L4, 24 GB GDDR6, sm_89 (CUDA reports 22.03 GiB)", 22559 * MiB, CONTEXT, 300, 121, 30.3,
     CUBLAS_WS_DEFAULT},
    {"t4", "NVIDIA T4, 16 GB GDDR6, sm_75, fp16 only (CUDA reports 14.75 GiB)", 15104 * MiB, CONTEXT, 320, 65, 8.1,
     CUBLAS_WS_DEFAULT},
};

const struct gpu_profile *gpu_profile_find(const char *name)
{
    for (size_t i = 0; i < sizeof profiles / sizeof profiles[0]; i++)
        if (!strcmp(profiles[i].name, name))
            return &profiles[i];
    return NULL;
}

const struct gpu_profile *gpu_profile_default(void)
{
    return gpu_profile_find(GPU_PROFILE_DEFAULT);
}

size_t gpu_profile_count(void)
{
    return sizeof profiles / sizeof profiles[0];
}

const struct gpu_profile *gpu_profile_at(size_t i)
{
    return i < gpu_profile_count() ? &profiles[i] : NULL;
}
