// gemm.cu: the CUDA GEMM: one strided-batched cuBLAS call, fp32 accumulation for every dtype, on the
// stream's handle with its workspace (cuda_kernel_ctx::cublas).
#include "cuda/cuda_kernels.h"

static cudaDataType_t cublas_type(int dt)
{
    return dt == DT_BF16 ? CUDA_R_16BF : dt == DT_F16 ? CUDA_R_16F : CUDA_R_32F;
}

CUDA_KERNEL(cuda_gemm)
{
    cublasHandle_t h = c->cublas(c->user, c->why, c->why_len);
    if (!h)
        return cudaErrorMemoryAllocation;
    const int64_t M = k->dims[0], N = k->dims[1], K = k->dims[2], batch = k->dims[5] > 0 ? k->dims[5] : 1;
    const int ta = k->dims[3] != 0, tb = k->dims[4] != 0;
    const float alpha = k->fparam[0], beta = k->fparam[1];
    const cudaDataType_t ty = cublas_type(k->dtype);
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
    cublasStatus_t st = cublasGemmStridedBatchedEx(
        h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, t[1], ty,
        tb ? (int)K : (int)N, K * N, t[0], ty, ta ? (int)M : (int)K, M * K, &beta, t[2], ty, (int)N, M * N, (int)batch,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
        return cuda_kernel_fail(c, cudaErrorUnknown, "gemm %lldx%lldx%lld: %s", (long long)M, (long long)N, (long long)K,
                                cublasGetStatusString(st));
    return cudaSuccess;
}
