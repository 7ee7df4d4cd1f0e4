/* profiles.c: the GPU profile table (see profiles.h). One line per card, its comment citing:
 *  - total: the CUDA-visible capacity (cudaMemGetInfo total, as PyTorch's OOM message prints it);
 *    workload-memory.md 6.2 for the first eight, a named issue for the others; where no such total
 *    was found the row says "estimated" and from what.
 *  - context: 426 MiB, measured for a PyTorch 2.10 / CUDA 13 context (6.3); other CUDA versions in
 *    the table below.
 *  - SMs, bandwidth and dense tensor rates (fp32 accumulation; half rate on GeForce cards) from the
 *    vendor's data sheets and architecture whitepapers (6.1 for the first eight).
 *  - matmul: torch.matmul peaks from zzc0721/torch-performance-test-data database.md (fp32, bf16,
 *    fp16), the row named by its contributor; issue #140 for the V100.
 *  - cuBLAS workspace: 32 MiB from Hopper on (Blackwell included), 8,519,680 B before (6.4). */
#include "device/profiles.h"

#include <string.h>

#include "util/size.h"

#define WS_PRE_SM90 CUBLAS_WORKSPACE_PRE_SM90_BYTES
#define WS_SM90 CUBLAS_WORKSPACE_SM90_BYTES
#define CONTEXT (426 * MiB)
#define MATMUL(fp32, bf16, fp16)                                                                                       \
    {                                                                                                                  \
        [DT_F32] = (fp32), [DT_BF16] = (bf16), [DT_F16] = (fp16)                                                       \
    }
#define NO_MATMUL MATMUL(0, 0, 0)

/* Host time per framework op.
 * Today's stack: the submit cost of one bare eager PyTorch CUDA op from Python, 8 us for add[512x512]
 * on an A100 host (flagos-ai/Torch-FL pull request #27; PyTorch issue #41383 measured 5-7 us per
 * autograd-recorded op before the CUDA launch). A training loop adds module calls, views and autograd
 * bookkeeping that launch nothing, so launch-bound runs on this stack come out optimistic.
 * PyTorch 1.x: no per-op measurement of that stack was found, so its one published launch-bound
 * training measurement fixes it: Hugging Face's bert-large run on a V100 cloud host (transformers
 * perf_train_gpu_one, 2022) at batch 1 with checkpointing and fp16 (10.09 samples/s, 1.139x its vanilla
 * run) takes 21 us per program op to reproduce that ratio within 2% (1.121x). It is the one constant
 * taken from the table tests/throughput_hf_test.c checks; its other rows test it. */
#define HOST_OP_US 8.0
#define HOST_OP_US_PYTORCH1 21.0

static const struct gpu_profile profiles[] = {
    /* matmul: sakmist's RTX 5090 */
    {"rtx5090", "NVIDIA GeForce RTX 5090, 32 GB GDDR7, sm_120 (CUDA reports 31.51 GiB)",
     &arch_calibrations[ARCH_BLACKWELL_CONSUMER], 170, 32266 * MiB, CONTEXT, 1792, 209.5, 104.8,
     MATMUL(67.57, 242.18, 237.63), WS_SM90},
    /* matmul: sd0ric4's RTX 4090 24GB */
    {"rtx4090", "NVIDIA GeForce RTX 4090, 24 GB GDDR6X, sm_89 (CUDA reports 23.65 GiB)", &arch_calibrations[ARCH_ADA],
     128, 24218 * MiB, CONTEXT, 1008, 165.2, 82.6, MATMUL(54.77, 173.31, 171.06), WS_PRE_SM90},
    /* matmul: zzc0208's A100 40GB */
    {"a100-40", "NVIDIA A100 40GB, HBM2, sm_80 (CUDA reports 39.39 GiB)", &arch_calibrations[ARCH_AMPERE], 108,
     40339 * MiB, CONTEXT, 1555, 312, 19.5, MATMUL(18.11, 246.33, 247.63), WS_PRE_SM90},
    /* matmul: Charming's A100 SXM4 80GB */
    {"a100-80", "NVIDIA A100 80GB SXM, HBM2e, sm_80 (CUDA reports 79.35 GiB)", &arch_calibrations[ARCH_AMPERE], 108,
     81254 * MiB, CONTEXT, 2039, 312, 19.5, MATMUL(19.18, 264.53, 258.74), WS_PRE_SM90},
    /* matmul: clow1710's H100 80GB HBM3 (the other H100 row's fp32 is TF32) */
    {"h100", "NVIDIA H100 80GB SXM5, HBM3, sm_90 (CUDA reports 79.11 GiB)", &arch_calibrations[ARCH_HOPPER], 132,
     81009 * MiB, CONTEXT, 3350, 989.4, 66.9, MATMUL(52.11, 783.66, 758.14), WS_SM90},
    /* matmul: Mightlaus's H200 */
    {"h200", "NVIDIA H200 141GB SXM, HBM3e, sm_90 (CUDA total estimated 550 MiB below nvidia-smi's 143771 MiB)",
     &arch_calibrations[ARCH_HOPPER], 132, 143221 * MiB, CONTEXT, 4800, 989.4, 66.9, MATMUL(51.34, 790.29, 759.40),
     WS_SM90},
    /* no published matmul: Ada's shares */
    {"l4", "NVIDIA L4, 24 GB GDDR6, sm_89 (CUDA reports 22.03 GiB)", &arch_calibrations[ARCH_ADA], 58, 22559 * MiB,
     CONTEXT, 300, 121, 30.3, NO_MATMUL, WS_PRE_SM90},
    /* matmul: sxjeru's T4 (Kaggle) */
    {"t4", "NVIDIA T4, 16 GB GDDR6, sm_75, fp16 only (CUDA reports 14.75 GiB)", &arch_calibrations[ARCH_TURING], 40,
     15104 * MiB, CONTEXT, 320, 65, 8.1, MATMUL(4.43, 2.27, 42.71), WS_PRE_SM90},
    /* total: "NVIDIA GeForce RTX 3090, 23.70GB" (torch's total_memory in GiB, huggingface/transformers
     * #14608); rates: GA102 whitepaper (71 TFLOP/s fp16 with fp32 accumulation); matmul: zzc0208's */
    {"rtx3090", "NVIDIA GeForce RTX 3090, 24 GB GDDR6X, sm_86 (CUDA reports 23.70 GiB)",
     &arch_calibrations[ARCH_AMPERE], 82, 24269 * MiB, CONTEXT, 936, 71, 35.6, MATMUL(24.46, 76.34, 75.64),
     WS_PRE_SM90},
    /* total estimated: 16 GiB less the 358 MiB the RTX 4090 keeps from its 24 GiB (Windows reports
     * 15.99 GiB under WDDM, aigc-apps/sd-webui-EasyPhoto #281); rates: Ada whitepaper (97.5 fp16 with
     * fp32 accumulation) */
    {"rtx4080", "NVIDIA GeForce RTX 4080, 16 GB GDDR6X, sm_89 (CUDA total estimated at 15.65 GiB)",
     &arch_calibrations[ARCH_ADA], 76, 16026 * MiB, CONTEXT, 716.8, 97.5, 48.7, NO_MATMUL, WS_PRE_SM90},
    /* total estimated: 16 GiB less the 502 MiB the RTX 5090 keeps from its 32 GiB, scaled to 16 GiB;
     * rates: 56.3 TFLOP/s fp32, tensor fp16 with fp32 accumulation at half the 225 of fp16 accumulation */
    {"rtx5080", "NVIDIA GeForce RTX 5080, 16 GB GDDR7, sm_120 (CUDA total estimated at 15.75 GiB)",
     &arch_calibrations[ARCH_BLACKWELL_CONSUMER], 84, 16133 * MiB, CONTEXT, 960, 112.6, 56.3, NO_MATMUL, WS_SM90},
    /* total estimated as the RTX 5080's; rates: 43.9 TFLOP/s fp32, tensor as for the 5080 */
    {"rtx5070ti", "NVIDIA GeForce RTX 5070 Ti, 16 GB GDDR7, sm_120 (CUDA total estimated at 15.75 GiB)",
     &arch_calibrations[ARCH_BLACKWELL_CONSUMER], 70, 16133 * MiB, CONTEXT, 896, 87.9, 43.9, NO_MATMUL, WS_SM90},
    /* total: 47.54 GiB with nvidia-smi's 49140 MiB (vllm-project/vllm #1201); rates: data sheet (309.7
     * sparse tensor TFLOP/s, full-rate fp32 accumulation); matmul: Mightlaus's */
    {"rtx-a6000", "NVIDIA RTX A6000, 48 GB GDDR6 ECC, sm_86 (CUDA reports 47.54 GiB)", &arch_calibrations[ARCH_AMPERE],
     84, 48681 * MiB, CONTEXT, 768, 154.8, 38.7, MATMUL(23.92, 123.34, 120.49), WS_PRE_SM90},
    /* total estimated: nvidia-smi's 97887 MiB (public deployment notes) less the RTX 5090's 341 MiB;
     * rates: data sheet (125 TFLOP/s fp32, 4000 sparse FP4 TOPS = 504 dense fp16); matmul: AlfreSama's
     * Workstation Edition */
    {"rtx-pro-6000", "NVIDIA RTX PRO 6000 Blackwell, 96 GB GDDR7 ECC, sm_120 (CUDA total estimated at 95.26 GiB)",
     &arch_calibrations[ARCH_BLACKWELL_CONSUMER], 188, 97546 * MiB, CONTEXT, 1792, 503.8, 125,
     MATMUL(77.24, 417.98, 315.51), WS_SM90},
    /* total: 44.42 GiB (stepfun-ai/Step-Video-T2V #8, 8 x L40S); rates: data sheet (362.05 dense);
     * matmul: Mightlaus's */
    {"l40s", "NVIDIA L40S, 48 GB GDDR6, sm_89 (CUDA reports 44.42 GiB)", &arch_calibrations[ARCH_ADA], 142, 45486 * MiB,
     CONTEXT, 864, 362.05, 91.6, MATMUL(46.88, 269.15, 264.02), WS_PRE_SM90},
    /* total: 22.19 GiB on ml.g5 instances (vllm-project/vllm #372); rates: the A10 data sheet (AWS
     * publishes none for its A10G variant) */
    {"a10g", "NVIDIA A10G (AWS g5), 24 GB GDDR6, sm_86 (CUDA reports 22.19 GiB)", &arch_calibrations[ARCH_AMPERE], 72,
     22723 * MiB, CONTEXT, 600, 125, 31.2, NO_MATMUL, WS_PRE_SM90},
    /* total: nvidia-smi's 16160 MiB for a V100-SXM2-16GB (huggingface/transformers docs
     * perf_train_gpu_one, 2022), which PyTorch prints as 15.78 GiB (kchengiva/Shift-GCN #34); rates:
     * V100 data sheet (SXM2); matmul: zzc0721 issue #140 */
    {"v100-16", "NVIDIA Tesla V100-SXM2 16GB, HBM2, sm_70 (CUDA reports 15.78 GiB)", &arch_calibrations[ARCH_VOLTA], 80,
     16160 * MiB, CONTEXT, 900, 125, 15.7, MATMUL(14.51, 10.65, 97.36), WS_PRE_SM90},
    /* total: 31.75 GiB (uni-medical/SAM-Med3D #8); rates and matmul as the 16 GB card's (same chip and clocks) */
    {"v100-32", "NVIDIA Tesla V100-SXM2 32GB, HBM2, sm_70 (CUDA reports 31.75 GiB)", &arch_calibrations[ARCH_VOLTA], 80,
     32512 * MiB, CONTEXT, 900, 125, 15.7, MATMUL(14.51, 10.65, 97.36), WS_PRE_SM90},
    /* total: 178.35 GiB (stas00/ml-engineering debug/pytorch.md); rates: 2250 dense bf16 (the MAMF table
     * of stas00/ml-engineering compute/accelerator), about 80 TFLOP/s fp32; matmul: zzc0208's (GCP a4) */
    {"b200", "NVIDIA B200, 180 GB HBM3e, sm_100 (CUDA reports 178.35 GiB)", &arch_calibrations[ARCH_BLACKWELL_DC], 148,
     182630 * MiB, CONTEXT, 8000, 2250, 80, MATMUL(66.24, 1696.03, 1627.64), WS_SM90},
};

/* Software stacks by CUDA version (workload-memory.md 6.3 for the contexts). Before 11.7 every kernel
 * of the PyTorch build loads at context creation; PyTorch 1.13 turned lazy loading on from 11.7. */
static const struct software_stack stacks[] = {
    /* cuBLAS 10 uses tensor cores for 16-bit GEMMs only when M, N and K are multiples of 8 ("your data
     * should meet the requirement to enable tensor core before cublas 11. After cublas 11, cublas will
     * use tensor core automatically", NVIDIA's zlsh80826 in PaddlePaddle/Paddle #25207; NVIDIA's Matrix
     * Multiplication Background User's Guide, 2.2). Context and host time: no measurement of this stack
     * was found; assumed as CUDA 11.x's. */
    {0, 0, 1343 * MiB, HOST_OP_US_PYTORCH1, false, "PyTorch 1.x with cuBLAS 10",
     "tensor cores: PaddlePaddle/Paddle #25207; context and host per op assumed as CUDA 11.x's"},
    /* context: 1343 MiB after one tensor on a V100, CUDA 11.2 (transformers perf_train_gpu_one, 2022) */
    {11, 0, 1343 * MiB, HOST_OP_US_PYTORCH1, true, "PyTorch 1.x, eager module loading",
     "context and host per op: transformers perf_train_gpu_one (V100, CUDA 11.2, 2022)"},
    /* context: 287,047,680 B after one tensor with lazy loading (pytorch/pytorch #86509) */
    {11, 7, 287047680, HOST_OP_US, true, "PyTorch with lazy module loading",
     "context: pytorch/pytorch #86509; host per op: flagos-ai/Torch-FL #27"},
    /* context: 426 MiB for PyTorch 2.10 with CUDA 13 (unslothai/unsloth-zoo #1053) */
    {13, 0, 426 * MiB, HOST_OP_US, true, "PyTorch 2.x, CUDA 13",
     "context: unslothai/unsloth-zoo #1053; host per op: flagos-ai/Torch-FL #27"},
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

double gpu_profile_matmul_rate(const struct gpu_profile *p, enum dtype dt)
{
    if (dt > DT_F16)
        dt = DT_F32;
    if (p->matmul_tflops[dt] > 0)
        return p->matmul_tflops[dt] * 1e12;
    double spec = dt == DT_F32 ? p->tflops_fp32 : p->tflops_16bit;
    return spec * p->calibration->gemm_share[dt] * 1e12;
}

const struct software_stack *software_stack_for(int major, int minor)
{
    size_t n = sizeof stacks / sizeof stacks[0];
    if (major == 0)
        return &stacks[n - 1];
    const struct software_stack *row = &stacks[0];
    for (size_t i = 0; i < n; i++)
        if (major > stacks[i].major || (major == stacks[i].major && minor >= stacks[i].minor))
            row = &stacks[i];
    return row;
}

size_t software_stack_count(void)
{
    return sizeof stacks / sizeof stacks[0];
}

const struct software_stack *software_stack_at(size_t i)
{
    return i < software_stack_count() ? &stacks[i] : NULL;
}
