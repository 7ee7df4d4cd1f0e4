// dispatch.cu: the CUDA side of the kernel table: routes a kernel_call to its family's launcher.
#include <stdio.h>

#include "cuda/cuda_kernels.h"

cudaError_t cuda_kernel_launch(const struct kernel_call *k, void *const *t, cudaStream_t stream,
                               const struct cuda_scratch *scratch, char *why, size_t why_len)
{
    cudaError_t rc = cudaErrorNotSupported;
    switch (k->kernel) {
    case K_ATTN_FWD:
    case K_ATTN_BWD:
    case K_FLASH_FWD:
    case K_FLASH_BWD_PREP:
    case K_FLASH_BWD:
        return cuda_attention_launch(k, t, stream, scratch, why, why_len);
    case K_SOFTMAX_FWD:
    case K_SOFTMAX_BWD:
    case K_LAYERNORM_FWD:
    case K_LAYERNORM_BWD_DX:
    case K_LAYERNORM_BWD_PARAMS:
    case K_RMSNORM_FWD:
    case K_RMSNORM_BWD:
    case K_GROUPNORM_FWD:
    case K_GROUPNORM_BWD_DX:
    case K_GROUPNORM_BWD_PARAMS:
    case K_BIAS_BWD:
    case K_CROSS_ENTROPY_FWD:
    case K_CROSS_ENTROPY_BWD:
    case K_EMBEDDING_FWD:
    case K_EMBEDDING_BWD:
        rc = cuda_rows_launch(k, t, stream, scratch);
        break;
    case K_ADAMW:
    case K_ADAMW8:
    case K_EMA:
        rc = cuda_optim_launch(k, t, stream);
        if (rc == cudaErrorNotSupported && k->kernel == K_ADAMW8)
            snprintf(why, why_len, "CUDA adamw8 supports blocks up to 6144 elements (got %lld)", (long long)k->dims[3]);
        return rc;
    case K_MUL_BCAST:
    case K_ADD_BCAST:
    case K_EXPAND:
    case K_REDUCE_SUM:
    case K_TRANSPOSE:
    case K_COPY_BLOCKS:
        rc = cuda_pointwise_extra_launch(k, t, stream);
        break;
    case K_RELU_FWD:
    case K_RELU_BWD:
    case K_QUICK_GELU_FWD:
    case K_QUICK_GELU_BWD:
    case K_ROPE:
        rc = cuda_activation_extra_launch(k, t, stream);
        break;
    case K_ATTN_BIAS_FWD:
    case K_ATTN_DSCORES:
        return cuda_attention_extra_launch(k, t, stream, why, why_len);
    case K_SGD:
    case K_ADAMW_T:
    case K_ADAFACTOR:
        rc = cuda_optim_extra_launch(k, t, stream, scratch);
        break;
    case K_RAND_UNIFORM:
    case K_RANDINT:
        rc = cuda_random_launch(k, t, stream);
        break;
    case K_GEMM:
    case K_CONV2D_FWD:
    case K_CONV2D_BWD_DATA:
    case K_CONV2D_BWD_FILTER:
        snprintf(why, why_len, "kernel %u runs through cuBLAS/cuDNN in the plugin, not here", k->kernel);
        return cudaErrorNotSupported;
    default:
        rc = cuda_pointwise_launch(k, t, stream);
        break;
    }
    if (rc == cudaErrorNotSupported)
        snprintf(why, why_len, "kernel %u has no CUDA implementation", k->kernel);
    return rc;
}
