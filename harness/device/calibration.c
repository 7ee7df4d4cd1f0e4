/* calibration.c: the kernel-time model's calibration table (see calibration.h), one row per
 * architecture. Every number comes from a published measurement named beside it; where none was
 * found the row says "assumed" and what it borrows. Shared by every row:
 *  - gemm_fixed_us 5.75: the XLA GPU cost model's measured sm_90 matmul table
 *    (tensorflow/tensorflow third_party/xla/xla/service/gpu/model/matmul_interpolator_data.h) is
 *    fitted, over its bf16 shapes from 256^3 to 4096^3, by 5.75 us + max(FLOPs / 791 TFLOP/s,
 *    bytes / achieved bandwidth) with a median error of 5% (tests/data/throughput/xla-sm90-matmul.tsv
 *    and tests/device_kernel_time_test.c check it); no such table was found for other architectures.
 *  - gemm_tile: 128 where a card's matmul rate steps with its SM count: the V100's torch.matmul at
 *    2048^3 runs at 0.80 of its 8192^3 rate (zzc0721 issue #140), as 256 tiles of 128 x 128 in 4
 *    waves of 80 SMs predict, and at 4096^3 at 0.98 (1024 tiles, 13 waves); the A100's 1024 x 2145 x
 *    1024 at 133 of 256 TFLOP/s (AI-benchmarking-guide ND A100 v4), as 136 tiles in 2 waves of 108 SMs
 *    and the fixed time predict. 0 (none) on Hopper: the sm_90 table above is fitted worse with any
 *    one tile. Turing and Ada are assumed to behave as Volta and Ampere, consumer Blackwell as Hopper.
 *  - kernel_min_us 2: assumed (no measurement found); below the host time per op (profiles.h), so it
 *    only shows when launches have queued up ahead of the GPU.
 * Matmul rates are torch.matmul peaks over square sizes from zzc0721/torch-performance-test-data
 * (database.md; issue #140 for the V100-SXM2-16GB), as shares of the spec rates in profiles.c.
 * Bandwidth shares are a PyTorch tensor copy (chsasank/device-benchmarks README: 2 x bytes / time)
 * or STREAM copy (samuel-bohman/AI-benchmarking-guide Azure_Results) against the spec bandwidth.
 * Fused attention: FlashAttention-2 measured by AI-benchmarking-guide (batch 2, 8192 keys) and the
 * FlashAttention-2 paper's 50% of A100 peak at 512 keys (arXiv 2307.08691), which together give
 * half_keys 83 for the T / (T + half) rise. */
#include "device/calibration.h"

#define FIXED_GEMM_US 5.75
#define KERNEL_MIN_US 2.0
#define FLASH_HALF_KEYS 83.0

const struct arch_calibration arch_calibrations[ARCH_COUNT] = {
    /* V100-SXM2-16GB matmul fp32 14.51 of 15.7, fp16 97.36 of 125, bf16 10.65 (no bf16 tensor cores):
     * zzc0721 issue #140; copy 766 of 900 GB/s (V100 32GB, chsasank). Fused attention (memory-efficient
     * kernels on sm_70): assumed, half of Ampere's share. */
    [ARCH_VOLTA] = {"Volta",
                    "V100 matmul (zzc0721 torch-performance-test-data #140), V100 copy (chsasank device-benchmarks)",
                    {[DT_F32] = 0.924, [DT_BF16] = 0.085, [DT_F16] = 0.779},
                    FIXED_GEMM_US,
                    128,
                    0.851,
                    0.29,
                    FLASH_HALF_KEYS,
                    KERNEL_MIN_US},
    /* T4 matmul fp32 4.43 of 8.1, fp16 42.71 of 65, bf16 2.27 (emulated): zzc0721 (Kaggle row); copy
     * 240 of 320 GB/s (chsasank; CUDA bandwidthTest gives 239.6, router-gao/cuda-demo). Fused attention
     * assumed as Volta. */
    [ARCH_TURING] = {"Turing",
                     "T4 matmul (zzc0721 torch-performance-test-data), T4 copy (chsasank device-benchmarks)",
                     {[DT_F32] = 0.547, [DT_BF16] = 0.035, [DT_F16] = 0.657},
                     FIXED_GEMM_US,
                     128,
                     0.750,
                     0.29,
                     FLASH_HALF_KEYS,
                     KERNEL_MIN_US},
    /* Medians over A100 40GB, A100 SXM4 80GB, RTX 3090 and RTX A6000 (zzc0721): fp32 0.929, 0.984,
     * 0.687, 0.618; bf16 0.790, 0.848, 1.075, 0.797; fp16 0.794, 0.829, 1.065, 0.778 (the GeForce card
     * boosts above its spec clock). Bandwidth: median of A100 80GB STREAM copy 1.61 of 2.039 TB/s
     * (AI-benchmarking-guide ND A100 v4), RTX 3090 831 of 936 and A10 469 of 600 GB/s (chsasank).
     * FlashAttention-2 on A100 80GB: 179.5 of 312 TFLOP/s at 8192 keys, head dim 64. */
    [ARCH_AMPERE] =
        {"Ampere",
         "A100/3090/A6000 matmul (zzc0721), A100 STREAM (AI-benchmarking-guide), FA2 (same; arXiv 2307.08691)",
         {[DT_F32] = 0.808, [DT_BF16] = 0.823, [DT_F16] = 0.812},
         FIXED_GEMM_US,
         128,
         0.790,
         0.58,
         FLASH_HALF_KEYS,
         KERNEL_MIN_US},
    /* Means of RTX 4090 (fp32 54.77 of 82.6, bf16 173.31 and fp16 171.06 of 165.2) and L40S (46.88 of
     * 91.6, 269.15 and 264.02 of 362.05), zzc0721; copy: RTX 4090 912 of 1008 and RTX 4070 Super 411 of
     * 504 GB/s (chsasank). Fused attention assumed as Ampere's share. */
    [ARCH_ADA] = {"Ada",
                  "RTX 4090/L40S matmul (zzc0721), RTX 4090/4070S copy (chsasank); fused attention as Ampere",
                  {[DT_F32] = 0.588, [DT_BF16] = 0.896, [DT_F16] = 0.882},
                  FIXED_GEMM_US,
                  128,
                  0.860,
                  0.58,
                  FLASH_HALF_KEYS,
                  KERNEL_MIN_US},
    /* H100 80GB HBM3 matmul fp32 52.11 of 66.9, bf16 783.66 and fp16 758.14 of 989.4 (zzc0721);
     * STREAM copy 2.90 of 3.35 TB/s and FlashAttention-2 327.9 TFLOP/s at 8192 keys, head dim 128
     * (AI-benchmarking-guide ND H100 v5). */
    [ARCH_HOPPER] = {"Hopper",
                     "H100 matmul (zzc0721), H100 STREAM and FA2 (AI-benchmarking-guide), XLA sm_90 GEMM table",
                     {[DT_F32] = 0.779, [DT_BF16] = 0.792, [DT_F16] = 0.766},
                     FIXED_GEMM_US,
                     0,
                     0.866,
                     0.334,
                     FLASH_HALF_KEYS,
                     KERNEL_MIN_US},
    /* B200 matmul fp32 66.24 of 80, bf16 1696.03 and fp16 1627.64 of 2250 (zzc0721); bandwidth assumed
     * as Hopper's (no measurement found); FlashAttention-2 373.9 TFLOP/s of GB200's 2500 at 8192 keys
     * (AI-benchmarking-guide ND GB200 v6). */
    [ARCH_BLACKWELL_DC] = {"Blackwell (data centre)",
                           "B200 matmul (zzc0721), GB200 FA2 (AI-benchmarking-guide); bandwidth as Hopper",
                           {[DT_F32] = 0.828, [DT_BF16] = 0.754, [DT_F16] = 0.723},
                           FIXED_GEMM_US,
                           0,
                           0.866,
                           0.151,
                           FLASH_HALF_KEYS,
                           KERNEL_MIN_US},
    /* Means of RTX 5090 (fp32 67.57 of 104.8, bf16 242.18 and fp16 237.63 of 209.5) and RTX PRO 6000
     * Blackwell Workstation (77.24 of 125, 417.98 and 315.51 of 503.8), zzc0721; bandwidth assumed as
     * Ada's and fused attention as Ampere's share (no measurements found). */
    [ARCH_BLACKWELL_CONSUMER] = {"Blackwell (consumer and workstation)",
                                 "RTX 5090/PRO 6000 matmul (zzc0721); bandwidth as Ada, fused attention as Ampere",
                                 {[DT_F32] = 0.631, [DT_BF16] = 0.993, [DT_F16] = 0.880},
                                 FIXED_GEMM_US,
                                 0,
                                 0.860,
                                 0.58,
                                 FLASH_HALF_KEYS,
                                 KERNEL_MIN_US},
};
