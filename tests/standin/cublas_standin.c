/* cublas_standin.c: a stand-in for cuBLAS (libcublas.so.13) beside cudart_standin.c: handles, streams and
 * workspaces as the oomlab CUDA plugin sets them up, so it opens and lends cuBLAS its workspace on a
 * machine without a GPU; a GEMM cannot run here and says so (CUBLAS_STATUS_NOT_SUPPORTED). */
#include <cublas_api.h>
#include <stdlib.h>

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    *handle = (cublasHandle_t)malloc(1);
    return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t bytes)
{
    return workspace || !bytes ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long int strideA, const void *B, cudaDataType Btype, int ldb,
                                          long long int strideB, const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount, cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo)
{
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    return status == CUBLAS_STATUS_SUCCESS         ? "CUBLAS_STATUS_SUCCESS"
           : status == CUBLAS_STATUS_NOT_SUPPORTED ? "GEMMs cannot run in the cuBLAS stand-in (no GPU here)"
                                                   : "cuBLAS stand-in error";
}
