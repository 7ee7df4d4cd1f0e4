// conv.cu: the CUDA conv2d forward, backward to the input and backward to the filter on cuDNN
// (NCHW, square filter, groups = 1): cuDNN's heuristic picks the algorithm, and its workspace is
// scratch for the duration of the call, as PyTorch takes it from its caching allocator.
#include "cuda/cuda_kernels.h"

// cuDNN descriptors of one conv2d call, destroyed together.
struct conv_desc {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
};

static cudnnStatus_t conv_desc_make(conv_desc *d, const struct kernel_call *k)
{
    const int64_t *v = k->dims;
    const int N = (int)v[0], C = (int)v[1], H = (int)v[2], W = (int)v[3], K = (int)v[4], R = (int)v[5];
    const int stride = (int)v[6], pad = (int)v[7];
    const int P = (H + 2 * pad - R) / stride + 1, Q = (W + 2 * pad - R) / stride + 1;
    const cudnnDataType_t ty = k->dtype == DT_BF16 ? CUDNN_DATA_BFLOAT16 : k->dtype == DT_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    cudnnStatus_t st;
    if ((st = cudnnCreateTensorDescriptor(&d->x)) || (st = cudnnCreateTensorDescriptor(&d->y)) ||
        (st = cudnnCreateFilterDescriptor(&d->w)) || (st = cudnnCreateConvolutionDescriptor(&d->conv)))
        return st;
    if ((st = cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, ty, N, C, H, W)) ||
        (st = cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, ty, N, K, P, Q)) ||
        (st = cudnnSetFilter4dDescriptor(d->w, ty, CUDNN_TENSOR_NCHW, K, C, R, R)) ||
        (st = cudnnSetConvolution2dDescriptor(d->conv, pad, pad, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT)))
        return st;
    return cudnnSetConvolutionMathType(d->conv, k->dtype == DT_F32 ? CUDNN_DEFAULT_MATH : CUDNN_TENSOR_OP_MATH);
}

static void conv_desc_free(conv_desc *d)
{
    cudnnDestroyTensorDescriptor(d->x);
    cudnnDestroyTensorDescriptor(d->y);
    cudnnDestroyFilterDescriptor(d->w);
    cudnnDestroyConvolutionDescriptor(d->conv);
}

// The call's pass: the algorithm cuDNN's heuristic ranks first, its workspace, the convolution.
static cudnnStatus_t conv_run(const struct kernel_call *k, void *const *t, const struct cuda_kernel_ctx *c,
                              const conv_desc *d, bool *oom)
{
    const float one = 1.0f, zero = 0.0f;
    cudnnStatus_t st;
    size_t bytes = 0;
    int got = 0;
    union {
        cudnnConvolutionFwdAlgo_t fwd;
        cudnnConvolutionBwdDataAlgo_t data;
        cudnnConvolutionBwdFilterAlgo_t filter;
    } algo;
    if (k->kernel == K_CONV2D_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf;
        if ((st = cudnnGetConvolutionForwardAlgorithm_v7(c->cudnn, d->x, d->w, d->conv, d->y, 1, &got, &perf)))
            return st;
        algo.fwd = perf.algo;
        st = cudnnGetConvolutionForwardWorkspaceSize(c->cudnn, d->x, d->w, d->conv, d->y, algo.fwd, &bytes);
    } else if (k->kernel == K_CONV2D_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf;
        if ((st = cudnnGetConvolutionBackwardDataAlgorithm_v7(c->cudnn, d->w, d->y, d->conv, d->x, 1, &got, &perf)))
            return st;
        algo.data = perf.algo;
        st = cudnnGetConvolutionBackwardDataWorkspaceSize(c->cudnn, d->w, d->y, d->conv, d->x, algo.data, &bytes);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf;
        if ((st = cudnnGetConvolutionBackwardFilterAlgorithm_v7(c->cudnn, d->x, d->y, d->conv, d->w, 1, &got, &perf)))
            return st;
        algo.filter = perf.algo;
        st = cudnnGetConvolutionBackwardFilterWorkspaceSize(c->cudnn, d->x, d->y, d->conv, d->w, algo.filter, &bytes);
    }
    if (st)
        return st;
    void *w = NULL;
    if (bytes && !(w = c->scratch_get(c->user, bytes))) {
        *oom = true;
        return CUDNN_STATUS_ALLOC_FAILED;
    }
    if (k->kernel == K_CONV2D_FWD) // tensors {x, w, y}
        st = cudnnConvolutionForward(c->cudnn, &one, d->x, t[0], d->w, t[1], d->conv, algo.fwd, w, bytes, &zero, d->y, t[2]);
    else if (k->kernel == K_CONV2D_BWD_DATA) // {dy, w, dx}
        st = cudnnConvolutionBackwardData(c->cudnn, &one, d->w, t[1], d->y, t[0], d->conv, algo.data, w, bytes, &zero,
                                          d->x, t[2]);
    else // {x, dy, dw}
        st = cudnnConvolutionBackwardFilter(c->cudnn, &one, d->x, t[0], d->y, t[1], d->conv, algo.filter, w, bytes,
                                            &zero, d->w, t[2]);
    if (w)
        c->scratch_put(c->user, w);
    return st;
}

static cudaError_t conv(const struct kernel_call *k, void *const *t, const struct cuda_kernel_ctx *c)
{
    conv_desc d = {};
    bool oom = false;
    cudnnStatus_t st = conv_desc_make(&d, k);
    if (st == CUDNN_STATUS_SUCCESS)
        st = conv_run(k, t, c, &d, &oom);
    conv_desc_free(&d);
    if (oom)
        return cuda_kernel_fail(c, cudaErrorMemoryAllocation, "out of memory for a cuDNN workspace");
    if (st != CUDNN_STATUS_SUCCESS)
        return cuda_kernel_fail(c, cudaErrorUnknown, "conv2d: %s", cudnnGetErrorString(st));
    return cudaSuccess;
}

CUDA_KERNEL(cuda_conv2d_fwd)
{
    return conv(k, t, c);
}

CUDA_KERNEL(cuda_conv2d_bwd_data)
{
    return conv(k, t, c);
}

CUDA_KERNEL(cuda_conv2d_bwd_filter)
{
    return conv(k, t, c);
}
