// cuda_launch.cu: running kernel_calls on the GPU through the CUDA kernel table (kernels/cuda):
// one cuBLAS and one cuDNN handle per stream, the cuBLAS workspace and kernel scratch (cuDNN
// workspaces included) from the caller's allocator; each launch timed with a pair of CUDA events.
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

// What a launch's callbacks need: the device and the stream's handles.
struct launch_user {
    cuda_dev *c;
    cuda_stream_ctx *s;
};

// The stream's cuBLAS handle with its workspace, which is taken from the caller's allocator at the
// first GEMM (PyTorch's lazy workspace) and kept until the device is destroyed.
static cublasHandle_t stream_cublas(void *user, char *why, size_t why_len)
{
    launch_user *u = (launch_user *)user;
    cuda_dev *c = u->c;
    cuda_stream_ctx *s = u->s;
    if (!s->cublas_ws) {
        uint64_t bytes = c->dev.cublas_workspace_bytes;
        if (cuda_workspace_alloc(c, bytes, LAUNCH_STREAM, &s->cublas_ws) < 0) {
            snprintf(why, why_len, "out of memory for the %llu-byte cuBLAS workspace", (unsigned long long)bytes);
            return NULL;
        }
        if (cublasSetWorkspace(s->cublas, (void *)(uintptr_t)s->cublas_ws, bytes) != CUBLAS_STATUS_SUCCESS) {
            snprintf(why, why_len, "cublasSetWorkspace failed");
            return NULL;
        }
    }
    return s->cublas;
}

// Kernel scratch through the caller's allocator.
static void *scratch_get(void *user, size_t bytes)
{
    uint64_t addr = 0;
    return cuda_workspace_alloc(((launch_user *)user)->c, bytes, LAUNCH_STREAM, &addr) == 0 ? (void *)(uintptr_t)addr
                                                                                            : NULL;
}

static void scratch_put(void *user, void *p)
{
    cuda_workspace_free(((launch_user *)user)->c, (uint64_t)(uintptr_t)p);
}

int cuda_launch(struct device *d, const struct kernel_call *k, const struct kernel_cost *cost, const uint64_t *addrs,
                struct err *e)
{
    cuda_dev *c = cuda_of(d);
    cuda_stream_ctx *s = NULL;
    cuda_timing tm;
    if (stream_ctx(c, LAUNCH_STREAM, &s, e) < 0 || timing_pair(c, &tm, e) < 0)
        return -1;
    void *t[KERNEL_MAX_TENSORS];
    for (unsigned i = 0; i < KERNEL_MAX_TENSORS; i++)
        t[i] = i < k->ntensors ? (void *)(uintptr_t)addrs[i] : NULL;
    cudaEventRecord(tm.start, s->stream);
    launch_user user = {c, s};
    char why[256] = "";
    const struct cuda_kernel_ctx ctx = {s->stream, s->cudnn, stream_cublas, scratch_get, scratch_put, &user, why, sizeof why};
    cudaError_t ce = cuda_kernel_launch(k, t, &ctx);
    int rc = 0;
    if (ce == cudaErrorNotSupported)
        rc = cuda_fail(e, ERR_INPUT, "%s: %s", d->name, why);
    else if (ce != cudaSuccess && why[0])
        rc = cuda_fail(e, ERR_INTERNAL, "%s: %s", d->name, why);
    else if (ce != cudaSuccess)
        rc = cuda_fail(e, ERR_INTERNAL, "%s: kernel %u: %s", d->name, k->kernel, cudaGetErrorString(ce));
    cudaEventRecord(tm.stop, s->stream);
    c->pending.push_back(tm);
    return rc;
}
