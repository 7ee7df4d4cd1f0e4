/* cudart_standin.c: a stand-in for the CUDA runtime (libcudart.so.13) and, through
 * cudaGetDriverEntryPointByVersion, the driver's virtual-memory calls, serving the oomlab CUDA plugin
 * from host memory so its own logic (probing, opening, capacity and fraction, cudaMalloc's OOM and its
 * errors, expandable segments over cuMemAddressReserve/cuMemCreate/cuMemMap, events, streams) runs in
 * tests on machines without a GPU. Loaded in place of the real library through LD_LIBRARY_PATH.
 * Kernel launches cannot run here: they fail with cudaErrorNoKernelImageForDevice and a message saying so.
 *
 * $OOMLAB_CUDA_STANDIN names a file with one GPU per line, `key=value` fields separated by ';':
 *   name=NVIDIA GeForce RTX 5090;total=34190917632;cc=12.0;uuid=0123456789abcdef0123456789abcdef
 * and optional lines `fail=CALL:N` (the Nth call of cudaMalloc or cuMemCreate fails with an error other
 * than out-of-memory). No file: no GPU (cudaErrorNoDevice). $OOMLAB_CUDA_STANDIN_LOG names a file each
 * memory call is appended to ("cudaMalloc 2097152"), for tests to count. */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define MAX_GPUS 8
#define GRANULARITY (2ULL << 20)

struct gpu {
    char name[256];
    uint64_t total, used;
    int major, minor;
    unsigned char uuid[16];
};

static struct {
    int loaded, count, current;
    struct gpu gpus[MAX_GPUS];
    char fail_call[64];
    long fail_at, calls_malloc, calls_create;
    cudaError_t last;
} st;

static void field(const char *line, const char *key, char *val, size_t n)
{
    size_t k = strlen(key);
    val[0] = '\0';
    for (const char *p = line; p && *p; p = strchr(p, ';') ? strchr(p, ';') + 1 : NULL)
        if (!strncmp(p, key, k) && p[k] == '=') {
            size_t len = strcspn(p + k + 1, ";\n");
            snprintf(val, n, "%.*s", (int)(len < n ? len : n - 1), p + k + 1);
            return;
        }
}

static void load(void)
{
    if (st.loaded)
        return;
    st.loaded = 1;
    const char *path = getenv("OOMLAB_CUDA_STANDIN");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return;
    char line[1024], v[256];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (!strncmp(line, "fail=", 5)) {
            char *colon = strchr(line, ':');
            snprintf(st.fail_call, sizeof st.fail_call, "%.*s", colon ? (int)(colon - line - 5) : 0, line + 5);
            st.fail_at = colon ? atol(colon + 1) : 0;
            continue;
        }
        if (st.count == MAX_GPUS)
            break;
        struct gpu *g = &st.gpus[st.count++];
        field(line, "name", g->name, sizeof g->name);
        field(line, "total", v, sizeof v);
        g->total = strtoull(v, NULL, 10);
        field(line, "cc", v, sizeof v);
        if (sscanf(v, "%d.%d", &g->major, &g->minor) != 2)
            g->major = 8, g->minor = 0;
        field(line, "uuid", v, sizeof v); /* 32 hex digits */
        for (int i = 0; i < 16 && v[2 * i] && v[2 * i + 1]; i++)
            sscanf(v + 2 * i, "%2hhx", &g->uuid[i]);
    }
    fclose(f);
}

static void log_call(const char *call, unsigned long long bytes)
{
    const char *path = getenv("OOMLAB_CUDA_STANDIN_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f) {
        fprintf(f, "%s %llu\n", call, bytes);
        fclose(f);
    }
}

/* The Nth call of `call` is to fail (fail=CALL:N). */
static int injected(const char *call, long *calls)
{
    return ++*calls == st.fail_at && !strcmp(call, st.fail_call);
}

static cudaError_t ret(cudaError_t rc)
{
    if (rc != cudaSuccess)
        st.last = rc;
    return rc;
}

/* Device memory is host memory reserved without backing, so large segments cost nothing until touched. */
static void *reserve(size_t size)
{
    void *p = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Sizes of cudaMalloc blocks, to give back on cudaFree. */
struct block {
    void *p;
    size_t size;
    struct block *next;
};
static struct block *blocks;

cudaError_t cudaGetDeviceCount(int *count)
{
    load();
    *count = st.count;
    return st.count ? cudaSuccess : ret(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device)
{
    load();
    if (device < 0 || device >= st.count)
        return ret(cudaErrorInvalidDevice);
    st.current = device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    load();
    if (device < 0 || device >= st.count)
        return ret(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "%s", st.gpus[device].name);
    prop->totalGlobalMem = st.gpus[device].total;
    prop->major = st.gpus[device].major;
    prop->minor = st.gpus[device].minor;
    memcpy(prop->uuid.bytes, st.gpus[device].uuid, sizeof prop->uuid.bytes);
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t size)
{
    load();
    struct gpu *g = &st.gpus[st.current];
    log_call("cudaMalloc", size);
    if (injected("cudaMalloc", &st.calls_malloc))
        return ret(cudaErrorLaunchFailure);
    struct block *b = malloc(sizeof *b);
    if (!b || g->used + size > g->total || !(*p = reserve(size))) {
        free(b);
        return ret(cudaErrorMemoryAllocation);
    }
    *b = (struct block){*p, size, blocks};
    blocks = b;
    g->used += size;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    for (struct block **b = &blocks; *b; b = &(*b)->next)
        if ((*b)->p == p) {
            struct block *dead = *b;
            log_call("cudaFree", dead->size);
            st.gpus[st.current].used -= dead->size;
            munmap(dead->p, dead->size ? dead->size : 1);
            *b = dead->next;
            free(dead);
            return cudaSuccess;
        }
    return p ? ret(cudaErrorInvalidValue) : cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    load();
    struct gpu *g = &st.gpus[st.current];
    *total = g->total;
    *free_bytes = g->total - g->used;
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    memcpy(dst, src, n);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s)
{
    memset(p, value, n);
    return cudaSuccess;
}

cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t n, size_t offset,
                                    enum cudaMemcpyKind kind, cudaStream_t s)
{
    return cudaSuccess; /* __constant__ data of kernels that cannot run here */
}

cudaError_t cudaDeviceSynchronize(void)
{
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t rc = st.last;
    st.last = cudaSuccess;
    return rc;
}

const char *cudaGetErrorString(cudaError_t rc)
{
    switch (rc) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorLaunchFailure: return "unspecified launch failure (injected by the CUDA stand-in)";
    case cudaErrorNoKernelImageForDevice: return "kernel launches cannot run in the CUDA stand-in (no GPU here)";
    default: return "unknown error";
    }
}

/* Streams and events: events hold the host's clock when recorded. */
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    *s = (cudaStream_t)malloc(1);
    return *s ? cudaSuccess : ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    free(s);
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *ev)
{
    *ev = (cudaEvent_t)calloc(1, sizeof(struct timespec));
    return *ev ? cudaSuccess : ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    free(ev);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
    clock_gettime(CLOCK_MONOTONIC, (struct timespec *)ev);
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    const struct timespec *x = (const struct timespec *)a, *y = (const struct timespec *)b;
    *ms = (float)((double)(y->tv_sec - x->tv_sec) * 1e3 + (double)(y->tv_nsec - x->tv_nsec) * 1e-6);
    return cudaSuccess;
}

/* What nvcc's generated code calls when the plugin loads and when it launches a kernel. */
void **__cudaRegisterFatBinary(void *fat)
{
    static void *handle;
    return &handle;
}

void __cudaRegisterFatBinaryEnd(void **handle) {}
void __cudaUnregisterFatBinary(void **handle) {}
void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun, const char *name, int limit,
                            uint3 *tid, uint3 *bid, dim3 *bdim, dim3 *gdim, int *wsize)
{
}
void __cudaRegisterVar(void **handle, char *host_var, char *device_address, const char *name, int ext, size_t size,
                       int constant, int global)
{
}

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared, struct CUstream_st *stream)
{
    return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shared, void *stream)
{
    return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *fun)
{
    *kernel = (cudaKernel_t)fun;
    return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t shared,
                               cudaStream_t stream)
{
    return ret(cudaErrorNoKernelImageForDevice);
}

/* The driver's virtual-memory calls, handed out by cudaGetDriverEntryPointByVersion. A physical
 * allocation is counted against the GPU's total; a reservation is address space only. */
struct physical {
    size_t size;
};

static CUresult mem_address_reserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                                    unsigned long long flags)
{
    log_call("cuMemAddressReserve", size);
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

static CUresult mem_address_free(CUdeviceptr ptr, size_t size)
{
    log_call("cuMemAddressFree", size);
    return munmap((void *)(uintptr_t)ptr, size) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult mem_create(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                           unsigned long long flags)
{
    struct gpu *g = &st.gpus[st.current];
    log_call("cuMemCreate", size);
    if (injected("cuMemCreate", &st.calls_create))
        return CUDA_ERROR_UNKNOWN;
    struct physical *ph = malloc(sizeof *ph);
    if (!ph || size % GRANULARITY || g->used + size > g->total) {
        free(ph);
        return size % GRANULARITY ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
    }
    ph->size = size;
    g->used += size;
    *h = (CUmemGenericAllocationHandle)(uintptr_t)ph;
    return CUDA_SUCCESS;
}

static CUresult mem_release(CUmemGenericAllocationHandle h)
{
    struct physical *ph = (struct physical *)(uintptr_t)h;
    log_call("cuMemRelease", ph->size);
    st.gpus[st.current].used -= ph->size;
    free(ph);
    return CUDA_SUCCESS;
}

static CUresult mem_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                        unsigned long long flags)
{
    log_call("cuMemMap", size);
    return mprotect((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult mem_unmap(CUdeviceptr ptr, size_t size)
{
    log_call("cuMemUnmap", size);
    madvise((void *)(uintptr_t)ptr, size, MADV_DONTNEED);
    return mprotect((void *)(uintptr_t)ptr, size, PROT_NONE) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult mem_set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    return CUDA_SUCCESS;
}

static CUresult mem_get_allocation_granularity(size_t *g, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option)
{
    *g = GRANULARITY;
    return CUDA_SUCCESS;
}

static CUresult get_error_string(CUresult r, const char **s)
{
    *s = r == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory"
         : r == CUDA_ERROR_UNKNOWN     ? "unknown error (injected by the CUDA stand-in)"
                                       : "invalid argument";
    return CUDA_SUCCESS;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned version,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *status)
{
    static const struct {
        const char *name;
        void *fn;
    } entries[] = {
        {"cuMemAddressReserve", (void *)mem_address_reserve}, {"cuMemAddressFree", (void *)mem_address_free},
        {"cuMemCreate", (void *)mem_create}, {"cuMemRelease", (void *)mem_release}, {"cuMemMap", (void *)mem_map},
        {"cuMemUnmap", (void *)mem_unmap}, {"cuMemSetAccess", (void *)mem_set_access},
        {"cuMemGetAllocationGranularity", (void *)mem_get_allocation_granularity},
        {"cuGetErrorString", (void *)get_error_string},
    };
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        if (!strcmp(symbol, entries[i].name)) {
            *fn = entries[i].fn;
            *status = cudaDriverEntryPointSuccess;
            return cudaSuccess;
        }
    *fn = NULL;
    *status = cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}
