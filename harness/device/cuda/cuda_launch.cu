// cuda_launch.cu: running kernel_calls on the GPU: GEMM through cuBLAS, conv2d through cuDNN,
// everything else through kernels/cuda; one cuBLAS and one cuDNN handle per stream, their
// workspaces from the caller's allocator; each launch timed with a pair of CUDA events.
#include <stdio.h>

#include "cuda/cuda_kernels.h"
#include "device/cuda/cuda_impl.h"

// device.h's launch carries no stream: kernels run on the device's stream 0.
#define LAUNCH_STREAM 0

static int stream_ctx(cuda_dev *c, int id, cuda_stream_ctx **out, struct err *e)
{
    auto it = c->streams.find(id);
    if (it != c->streams.end()) {
        *out = &it->second;
        return 0;
    }
    cuda_stream_ctx s = {};
    cudaError_t rc = cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking);
    if (rc != cudaSuccess)
        return cuda_fail(e, ERR_INTERNAL, "%s: cudaStreamCreate: %s", c->dev.name, cudaGetErrorString(rc));
    if (cublasCreate(&s.cublas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(s.cublas, s.stream) != CUBLAS_STATUS_SUCCESS) {
        cudaStreamDestroy(s.stream);
        return cuda_fail(e, ERR_INTERNAL, "%s: cuBLAS handle creation failed", c->dev.name);
    }
    cudnnStatus_t st = cudnnCreate(&s.cudnn);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnSetStream(s.cudnn, s.stream);
    if (st != CUDNN_STATUS_SUCCESS) {
        cublasDestroy(s.cublas);
        cudaStreamDestroy(s.stream);
        return cuda_fail(e, ERR_INTERNAL, "%s: cuDNN handle: %s", c->dev.name, cudnnGetErrorString(st));
    }
    *out = &(c->streams[id] = s);
    return 0;
}

void cuda_streams_release_workspaces(cuda_dev *c)
{
    for (auto &kv : c->streams) {
        if (kv.second.cublas_ws)
            cuda_workspace_free(c, kv.second.cublas_ws);
        kv.second.cublas_ws = 0;
    }
}

void cuda_streams_destroy(cuda_dev *c)
{
    cuda_streams_release_workspaces(c);
    for (auto &kv : c->streams) {
        cuda_stream_ctx &s = kv.second;
        cudnnDestroy(s.cudnn);
        cublasDestroy(s.cublas);
        cudaStreamDestroy(s.stream);
    }
    c->streams.clear();
    for (auto &t : c->spare_events) {
        cudaEventDestroy(t.start);
        cudaEventDestroy(t.stop);
    }
    c->spare_events.clear();
}

void cuda_collect_timings(cuda_dev *c)
{
    for (auto &t : c->pending) {
        float ms = 0.0f;
        if (cudaEventSynchronize(t.stop) == cudaSuccess && cudaEventElapsedTime(&ms, t.start, t.stop) == cudaSuccess)
            c->kernel_ms += ms;
        c->spare_events.push_back(t);
    }
    c->pending.clear();
}

static int timing_pair(cuda_dev *c, cuda_timing *t, struct err *e)
{
    if (!c->spare_events.empty()) {
        *t = c->spare_events.back();
        c->spare_events.pop_back();
        return 0;
    }
    if (cudaEventCreate(&t->start) != cudaSuccess || cudaEventCreate(&t->stop) != cudaSuccess)
        return cuda_fail(e, ERR_INTERNAL, "%s: cudaEventCreate failed", c->dev.name);
    return 0;
}

static cudaDataType_t cuda_type(int dt)
{
    return dt == DT_BF16 ? CUDA_R_16BF : dt == DT_F16 ? CUDA_R_16F : CUDA_R_32F;
}

static int gemm(cuda_dev *c, cuda_stream_ctx *s, const struct kernel_call *k, void *const *t, struct err *e)
{
    if (!s->cublas_ws) {
        uint64_t bytes = c->dev.cublas_workspace_bytes;
        if (cuda_workspace_alloc(c, bytes, LAUNCH_STREAM, &s->cublas_ws) < 0)
            return cuda_fail(e, ERR_INTERNAL, "%s: out of memory for the %llu-byte cuBLAS workspace", c->dev.name,
                             (unsigned long long)bytes);
        if (cublasSetWorkspace(s->cublas, (void *)(uintptr_t)s->cublas_ws, bytes) != CUBLAS_STATUS_SUCCESS)
            return cuda_fail(e, ERR_INTERNAL, "%s: cublasSetWorkspace failed", c->dev.name);
    }
    const int64_t M = k->dims[0], N = k->dims[1], K = k->dims[2], batch = k->dims[5] > 0 ? k->dims[5] : 1;
    const int ta = k->dims[3] != 0, tb = k->dims[4] != 0;
    const float alpha = k->fparam[0], beta = k->fparam[1];
    const cudaDataType_t ty = cuda_type(k->dtype);
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
    cublasStatus_t st = cublasGemmStridedBatchedEx(
        s->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M, (int)K, &alpha, t[1], ty,
        tb ? (int)K : (int)N, K * N, t[0], ty, ta ? (int)M : (int)K, M * K, &beta, t[2], ty, (int)N, M * N, (int)batch,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
        return cuda_fail(e, ERR_INTERNAL, "%s: gemm %lldx%lldx%lld: %s", c->dev.name, (long long)M, (long long)N,
                         (long long)K, cublasGetStatusString(st));
    return 0;
}

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

// conv2d forward, backward data or backward filter: cuDNN's heuristic picks the algorithm, its
// workspace comes from the caller for the duration of the call (as PyTorch does).
static cudnnStatus_t conv_run(cuda_dev *c, cuda_stream_ctx *s, const struct kernel_call *k, void *const *t,
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
        if ((st = cudnnGetConvolutionForwardAlgorithm_v7(s->cudnn, d->x, d->w, d->conv, d->y, 1, &got, &perf)))
            return st;
        algo.fwd = perf.algo;
        st = cudnnGetConvolutionForwardWorkspaceSize(s->cudnn, d->x, d->w, d->conv, d->y, algo.fwd, &bytes);
    } else if (k->kernel == K_CONV2D_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf;
        if ((st = cudnnGetConvolutionBackwardDataAlgorithm_v7(s->cudnn, d->w, d->y, d->conv, d->x, 1, &got, &perf)))
            return st;
        algo.data = perf.algo;
        st = cudnnGetConvolutionBackwardDataWorkspaceSize(s->cudnn, d->w, d->y, d->conv, d->x, algo.data, &bytes);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf;
        if ((st = cudnnGetConvolutionBackwardFilterAlgorithm_v7(s->cudnn, d->x, d->y, d->conv, d->w, 1, &got, &perf)))
            return st;
        algo.filter = perf.algo;
        st = cudnnGetConvolutionBackwardFilterWorkspaceSize(s->cudnn, d->x, d->y, d->conv, d->w, algo.filter, &bytes);
    }
    if (st)
        return st;
    uint64_t ws = 0;
    if (bytes && cuda_workspace_alloc(c, bytes, LAUNCH_STREAM, &ws) < 0) {
        *oom = true;
        return CUDNN_STATUS_ALLOC_FAILED;
    }
    void *w = (void *)(uintptr_t)ws;
    if (k->kernel == K_CONV2D_FWD) // tensors {x, w, y}
        st = cudnnConvolutionForward(s->cudnn, &one, d->x, t[0], d->w, t[1], d->conv, algo.fwd, w, bytes, &zero, d->y, t[2]);
    else if (k->kernel == K_CONV2D_BWD_DATA) // {dy, w, dx}
        st = cudnnConvolutionBackwardData(s->cudnn, &one, d->w, t[1], d->y, t[0], d->conv, algo.data, w, bytes, &zero,
                                          d->x, t[2]);
    else // {x, dy, dw}
        st = cudnnConvolutionBackwardFilter(s->cudnn, &one, d->x, t[0], d->y, t[1], d->conv, algo.filter, w, bytes,
                                            &zero, d->w, t[2]);
    if (ws)
        cuda_workspace_free(c, ws);
    return st;
}

static int conv(cuda_dev *c, cuda_stream_ctx *s, const struct kernel_call *k, void *const *t, struct err *e)
{
    conv_desc d = {};
    bool oom = false;
    cudnnStatus_t st = conv_desc_make(&d, k);
    if (st == CUDNN_STATUS_SUCCESS)
        st = conv_run(c, s, k, t, &d, &oom);
    conv_desc_free(&d);
    if (oom)
        return cuda_fail(e, ERR_INTERNAL, "%s: out of memory for a cuDNN workspace", c->dev.name);
    if (st != CUDNN_STATUS_SUCCESS)
        return cuda_fail(e, ERR_INTERNAL, "%s: conv2d: %s", c->dev.name, cudnnGetErrorString(st));
    return 0;
}

// Kernel scratch through the caller's allocator.
static void *scratch_get(void *user, size_t bytes)
{
    uint64_t addr = 0;
    return cuda_workspace_alloc((cuda_dev *)user, bytes, LAUNCH_STREAM, &addr) == 0 ? (void *)(uintptr_t)addr : NULL;
}

static void scratch_put(void *user, void *p)
{
    cuda_workspace_free((cuda_dev *)user, (uint64_t)(uintptr_t)p);
}

int cuda_launch(struct device *d, const struct kernel_call *k, const uint64_t *addrs, struct err *e)
{
    cuda_dev *c = cuda_of(d);
    cuda_stream_ctx *s;
    cuda_timing tm;
    if (stream_ctx(c, LAUNCH_STREAM, &s, e) < 0 || timing_pair(c, &tm, e) < 0)
        return -1;
    void *t[KERNEL_MAX_TENSORS];
    for (unsigned i = 0; i < KERNEL_MAX_TENSORS; i++)
        t[i] = i < k->ntensors ? (void *)(uintptr_t)addrs[i] : NULL;
    cudaEventRecord(tm.start, s->stream);
    int rc = 0;
    if (k->kernel == K_GEMM) {
        rc = gemm(c, s, k, t, e);
    } else if (k->kernel == K_CONV2D_FWD || k->kernel == K_CONV2D_BWD_DATA || k->kernel == K_CONV2D_BWD_FILTER) {
        rc = conv(c, s, k, t, e);
    } else {
        struct cuda_scratch scratch = {scratch_get, scratch_put, c};
        char why[256] = "";
        cudaError_t ce = cuda_kernel_launch(k, t, s->stream, &scratch, why, sizeof why);
        if (ce == cudaErrorNotSupported)
            rc = cuda_fail(e, ERR_INPUT, "%s: %s", d->name, why);
        else if (ce != cudaSuccess)
            rc = cuda_fail(e, ERR_INTERNAL, "%s: kernel %u: %s", d->name, k->kernel, cudaGetErrorString(ce));
    }
    cudaEventRecord(tm.stop, s->stream);
    c->pending.push_back(tm);
    return rc;
}
