/* cudnn_standin.c: a stand-in for cuDNN (libcudnn.so.9) beside cudart_standin.c: handles and descriptors
 * as the oomlab CUDA plugin makes them, one algorithm with no workspace per convolution, so everything
 * around a convolution runs on a machine without a GPU; the convolution itself cannot and says so
 * (CUDNN_STATUS_NOT_SUPPORTED). */
#include <cudnn.h>
#include <stdlib.h>
#include <string.h>

#define HANDLE(type, name)                                 \
    cudnnStatus_t name(type *out)                          \
    {                                                      \
        *out = (type)malloc(1);                            \
        return *out ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED; \
    }
#define RELEASE(type, name)        \
    cudnnStatus_t name(type h)     \
    {                              \
        free(h);                   \
        return CUDNN_STATUS_SUCCESS; \
    }

HANDLE(cudnnHandle_t, cudnnCreate)
RELEASE(cudnnHandle_t, cudnnDestroy)
HANDLE(cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor)
RELEASE(cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor)
HANDLE(cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor)
RELEASE(cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor)
HANDLE(cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor)
RELEASE(cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor)

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream)
{
    return CUDNN_STATUS_SUCCESS;
}

const char *cudnnGetErrorString(cudnnStatus_t status)
{
    return status == CUDNN_STATUS_SUCCESS         ? "CUDNN_STATUS_SUCCESS"
           : status == CUDNN_STATUS_NOT_SUPPORTED ? "convolutions cannot run in the cuDNN stand-in (no GPU here)"
                                                  : "cuDNN stand-in error";
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format, cudnnDataType_t type,
                                         int n, int c, int h, int w)
{
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type, cudnnTensorFormat_t format,
                                         int k, int c, int h, int w)
{
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v,
                                              int dilation_h, int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t type)
{
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t math)
{
    return CUDNN_STATUS_SUCCESS;
}

/* One algorithm (number 0), found and needing no workspace. */
#define ONE_ALGO(perf_type, fn, ...)                                                                  \
    cudnnStatus_t fn(__VA_ARGS__, const int requested, int *returned, perf_type *perf)                \
    {                                                                                                 \
        memset(perf, 0, sizeof *perf);                                                                \
        perf->status = CUDNN_STATUS_SUCCESS;                                                          \
        *returned = requested > 0;                                                                    \
        return CUDNN_STATUS_SUCCESS;                                                                  \
    }
ONE_ALGO(cudnnConvolutionFwdAlgoPerf_t, cudnnGetConvolutionForwardAlgorithm_v7, cudnnHandle_t h,
         const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w, const cudnnConvolutionDescriptor_t conv,
         const cudnnTensorDescriptor_t y)
ONE_ALGO(cudnnConvolutionBwdDataAlgoPerf_t, cudnnGetConvolutionBackwardDataAlgorithm_v7, cudnnHandle_t h,
         const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t conv,
         const cudnnTensorDescriptor_t dx)
ONE_ALGO(cudnnConvolutionBwdFilterAlgoPerf_t, cudnnGetConvolutionBackwardFilterAlgorithm_v7, cudnnHandle_t h,
         const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t conv,
         const cudnnFilterDescriptor_t dw)

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                      const cudnnFilterDescriptor_t w,
                                                      const cudnnConvolutionDescriptor_t conv,
                                                      const cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t algo,
                                                      size_t *bytes)
{
    *bytes = 0;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t h, const cudnnFilterDescriptor_t w,
                                                           const cudnnTensorDescriptor_t dy,
                                                           const cudnnConvolutionDescriptor_t conv,
                                                           const cudnnTensorDescriptor_t dx,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes)
{
    *bytes = 0;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
                                                             const cudnnTensorDescriptor_t dy,
                                                             const cudnnConvolutionDescriptor_t conv,
                                                             const cudnnFilterDescriptor_t dw,
                                                             cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes)
{
    *bytes = 0;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd,
                                      const void *x, const cudnnFilterDescriptor_t wd, const void *w,
                                      const cudnnConvolutionDescriptor_t conv, cudnnConvolutionFwdAlgo_t algo, void *ws,
                                      size_t ws_bytes, const void *beta, const cudnnTensorDescriptor_t yd, void *y)
{
    return CUDNN_STATUS_NOT_SUPPORTED;
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha, const cudnnFilterDescriptor_t wd,
                                           const void *w, const cudnnTensorDescriptor_t dyd, const void *dy,
                                           const cudnnConvolutionDescriptor_t conv, cudnnConvolutionBwdDataAlgo_t algo,
                                           void *ws, size_t ws_bytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxd, void *dx)
{
    return CUDNN_STATUS_NOT_SUPPORTED;
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd,
                                             const void *x, const cudnnTensorDescriptor_t dyd, const void *dy,
                                             const cudnnConvolutionDescriptor_t conv,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *ws, size_t ws_bytes,
                                             const void *beta, const cudnnFilterDescriptor_t dwd, void *dw)
{
    return CUDNN_STATUS_NOT_SUPPORTED;
}
