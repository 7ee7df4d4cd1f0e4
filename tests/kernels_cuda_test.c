/* kernels_cuda_test.c: every kernel on the GPU (through the cuda plugin) against the CPU kernel on
 * the same inputs, in fp32, bf16 and fp16, within 4x the kernel's tolerance (the GPU sums in
 * another order); seeded fills and integer outputs must match exactly. Variants share tensors as
 * kernels.h allows (in place, packed qkv and gate/up) and take the kernels' other paths. Skipped,
 * with the probe's reason, where no GPU is usable. */
#include <libgen.h>
#include <limits.h>
#include <unistd.h>

#include "device/cuda_loader.h"
#include "kernels_test_util.h"

/* A small valid call per kernel: dims and fparam (unpacked layouts, GQA, causal with Tq != Tk). */
static struct kernel_call sample_call(unsigned id, int dt)
{
    static const int64_t conv[] = {2, 3, 8, 7, 4, 3, 1, 1}, attn[] = {2, 4, 9, 11, 16, 1, 2, 0};
    struct kernel_call k;
    const float adam[4] = {1e-3f, 0.9f, 0.999f, 0.01f};
    switch (id) {
    case K_GEMM:
        k = KCALL(id, dt, 17, 13, 19, 0, 1, 2);
        k.fparam[0] = 1.0f;
        k.fparam[1] = 0.5f;
        return k;
    case K_CONV2D_FWD:
    case K_CONV2D_BWD_DATA:
    case K_CONV2D_BWD_FILTER:
        return kcall(id, dt, conv, 8);
    case K_ATTN_FWD:
    case K_ATTN_BWD:
    case K_FLASH_FWD:
    case K_FLASH_BWD_PREP:
    case K_FLASH_BWD:
        return kcall(id, dt, attn, 8);
    case K_SOFTMAX_FWD:
    case K_SOFTMAX_BWD:
        return KCALL(id, dt, 5, 37);
    case K_LAYERNORM_FWD:
    case K_LAYERNORM_BWD_DX:
    case K_LAYERNORM_BWD_PARAMS:
    case K_RMSNORM_FWD:
    case K_RMSNORM_BWD:
        k = KCALL(id, dt, 5, 48);
        k.fparam[0] = 1e-5f;
        return k;
    case K_GROUPNORM_FWD:
    case K_GROUPNORM_BWD_DX:
    case K_GROUPNORM_BWD_PARAMS:
        k = KCALL(id, dt, 2, 8, 9, 4);
        k.fparam[0] = 1e-5f;
        return k;
    case K_GEGLU_FWD:
    case K_GEGLU_BWD:
    case K_SWIGLU_FWD:
    case K_SWIGLU_BWD:
        return KCALL(id, dt, 7, 13, 0, 1);
    case K_DROPOUT_FWD:
    case K_DROPOUT_BWD:
        k = KCALL(id, dt, 1000, 7);
        k.fparam[0] = 0.1f;
        return k;
    case K_CAST:
        return KCALL(id, dt, 1000, dt == DT_F32 ? DT_BF16 : DT_F32);
    case K_BIAS_ADD:
    case K_BIAS_BWD:
        return KCALL(id, dt, 3, 5, 7);
    case K_ADAMW:
    case K_ADAMW_T:
    case K_ADAMW8:
        k = id == K_ADAMW8 ? KCALL(id, dt, 3000, 3, 0, 256) : KCALL(id, dt, 1000, 3);
        memcpy(k.fparam, adam, sizeof adam);
        return k;
    case K_UPSAMPLE2X_FWD:
    case K_UPSAMPLE2X_BWD:
        return KCALL(id, dt, 2, 3, 4, 5);
    case K_CROSS_ENTROPY_FWD:
    case K_CROSS_ENTROPY_BWD:
        k = KCALL(id, dt, 6, 50);
        k.fparam[0] = 1.0f;
        return k;
    case K_EMBEDDING_FWD:
    case K_EMBEDDING_BWD:
        return KCALL(id, dt, 7, 10, 6);
    case K_MUL_BCAST:
    case K_ADD_BCAST:
    case K_EXPAND:
    case K_REDUCE_SUM:
        k = KCALL(id, dt, 3, 37, 5);
        k.fparam[0] = 0.7f;
        k.fparam[1] = -1.3f;
        return k;
    case K_TRANSPOSE:
        return KCALL(id, dt, 2, 33, 45);
    case K_COPY_BLOCKS:
        return KCALL(id, dt, 6, 5, 9, 3, 12, 4, 0);
    case K_ROPE:
        k = KCALL(id, dt, 2, 7, 3, 8, 40, 0);
        k.fparam[0] = 500.0f;
        return k;
    case K_ATTN_BIAS_FWD:
    case K_ATTN_DSCORES:
        return kcall(id, dt, attn, 8);
    case K_SGD:
        k = KCALL(id, dt, 1000, 3);
        memcpy(k.fparam, (const float[]){0.1f, 0.9f, 0.1f, 0.01f}, 4 * sizeof(float));
        return k;
    case K_ADAFACTOR:
        return KCALL(id, dt, 13, 40, 3);
    case K_RAND_UNIFORM:
        k = KCALL(id, dt, 1000, 42);
        k.fparam[0] = -0.5f;
        k.fparam[1] = 2.0f;
        return k;
    case K_RANDINT:
        return KCALL(id, dt, 1000, 7, 50257);
    case K_DEQUANT: /* NF4 in blocks of 64, an odd count (a half-filled last byte) */
        return KCALL(id, dt, 1001, 64, 0);
    case K_INT8_QUANT_ROWS:
    case K_ROW_NORM:
        return KCALL(id, dt, 37, 300);
    case K_EYE:
        return KCALL(id, dt, 37);
    case K_INT8_GEMM:
        return KCALL(id, dt, 17, 23, 300);
    default: /* gelu, silu, relu, quick gelu, add, scale, fill, ema: dims {n, approx} */
        k = KCALL(id, dt, 1000, 1);
        k.fparam[0] = 0.99f;
        k.fparam[1] = 0.5f;
        return k;
    }
}

/* Further calls of kernel id, written into v (at most 4): tensors shared as kernels.h allows (in
 * place, packed qkv and gate/up) and the kernels' other paths (vector Adafactor, SGD's first step,
 * copy_blocks accumulating or within one tensor, inverse rotary embedding). Returns how many. */
static unsigned variant_calls(unsigned id, int dt, struct kernel_call *v)
{
    static const int64_t packed_attn[] = {2, 4, 9, 9, 16, 1, 2, 1};
    struct kernel_call k = sample_call(id, dt);
    switch (id) {
    case K_ADD:
    case K_MUL_BCAST:
    case K_ADD_BCAST:
    case K_BIAS_ADD: /* y = the first input */
        k.tensors[2] = k.tensors[0];
        v[0] = k;
        return 1;
    case K_SCALE:
    case K_RELU_FWD:
        k.tensors[1] = k.tensors[0];
        v[0] = k;
        return 1;
    case K_ROPE: /* in place (k inside kv) and the inverse */
        k.tensors[1] = k.tensors[0];
        k.dims[5] = 1;
        v[0] = k;
        return 1;
    case K_COPY_BLOCKS: /* accumulating; then x = y: disjoint, overlapping (memmove) and accumulating */
        v[0] = KCALL(id, dt, 6, 5, 9, 3, 12, 4, 1);
        v[1] = KCALL(id, dt, 6, 5, 12, 0, 12, 6, 0);
        v[2] = KCALL(id, dt, 6, 5, 12, 4, 12, 2, 0);
        v[3] = KCALL(id, dt, 6, 5, 12, 2, 12, 4, 1);
        for (unsigned i = 1; i < 4; i++)
            v[i].tensors[1] = v[i].tensors[0];
        return 4;
    case K_ADAFACTOR:
        k.dims[1] = 1;
        v[0] = k;
        return 1;
    case K_DEQUANT: /* FP4, the dynamic 8-bit map in blocks of 256, int8 rows of 77 */
        for (int kind = 1; kind < 4; kind++) {
            v[kind - 1] = k;
            v[kind - 1].dims[1] = kind == 2 ? 256 : kind == 3 ? 77 : 64;
            v[kind - 1].dims[2] = kind;
        }
        return 3;
    case K_SGD:
        k.dims[1] = 1;
        v[0] = k;
        return 1;
    case K_ATTN_DSCORES: /* ds = p */
        k.tensors[3] = k.tensors[1];
        v[0] = k;
        return 1;
    case K_ATTN_FWD:
    case K_ATTN_BWD:
    case K_FLASH_FWD:
    case K_FLASH_BWD:
    case K_ATTN_BIAS_FWD: /* packed qkv: q = kv (and dq = dkv) */
        k = kcall(id, dt, packed_attn, 8);
        k.tensors[1] = k.tensors[0];
        if (id == K_ATTN_BWD || id == K_FLASH_BWD)
            k.tensors[5] = k.tensors[4];
        v[0] = k;
        return 1;
    case K_GEGLU_FWD:
    case K_GEGLU_BWD:
    case K_SWIGLU_FWD:
    case K_SWIGLU_BWD: /* packed [up | gate] rows */
        k.dims[2] = 1;
        k.tensors[1] = k.tensors[0];
        if (id == K_GEGLU_BWD || id == K_SWIGLU_BWD)
            k.tensors[4] = k.tensors[3];
        v[0] = k;
        return 1;
    default:
        return 0;
    }
}

/* The earlier tensor of the call that tensor i is (same id), or -1. */
static int alias_of(const struct kernel_call *k, unsigned i)
{
    for (unsigned j = 0; j < i; j++)
        if (k->tensors[j] == k->tensors[i])
            return (int)j;
    return -1;
}

/* Random contents for tensor i: values in [-1, 1) for call-dtype tensors, (0, 1] for fp32
 * statistics and moments and for adamw_t's v (v must not be negative), 0/1 masks, any byte for
 * 8-bit codes, ids below dims[1]. */
static void *sample_tensor(const struct kernel_call *k, unsigned i, size_t *bytes)
{
    const struct kernel_desc *kd = kernel_get(k->kernel);
    size_t n = kd->elems(k, i);
    enum dtype dt = kernel_tensor_dtype(k, i);
    *bytes = kernel_tensor_bytes(k, i);
    void *p = malloc(*bytes ? *bytes : 1);
    for (size_t j = 0; j < n; j++) {
        float r = rnd();
        if (dt == DT_U8)
            ((uint8_t *)p)[j] = k->kernel == K_ADAMW8 ? (uint8_t)(r * 127 + 128) : r > 0;
        else if (dt == DT_I64)
            ((int64_t *)p)[j] = (int64_t)((r + 1) / 2 * (float)k->dims[1]) % k->dims[1];
        else if (kd->dtypes[i] == DT_F32 || (k->kernel == K_ADAMW_T && i == 3))
            st(p, dt, j, 0.55f + 0.45f * r);
        else
            st(p, dt, j, r);
    }
    return p;
}

static void compare_on_gpu(struct device *d, struct kernel_call k)
{
    const unsigned id = k.kernel;
    const int dt = k.dtype;
    const struct kernel_desc *kd = kernel_get(id);
    void *host[KERNEL_MAX_TENSORS] = {0}, *gpu_out[KERNEL_MAX_TENSORS] = {0};
    size_t bytes[KERNEL_MAX_TENSORS] = {0};
    uint64_t addr[KERNEL_MAX_TENSORS] = {0};
    struct err e = {0};
    int fine = 1;
    for (unsigned i = 0; i < kd->ntensors && fine; i++) {
        int first = alias_of(&k, i);
        if (first >= 0) {
            host[i] = host[first];
            addr[i] = addr[first];
            bytes[i] = bytes[first];
            continue;
        }
        host[i] = sample_tensor(&k, i, &bytes[i]);
        fine = d->ops->seg_alloc(d, bytes[i] ? bytes[i] : 1, 0, &addr[i], &e) == DEV_OK &&
               cuda_device_copy(d, (void *)(uintptr_t)addr[i], host[i], bytes[i], 1, &e) == 0;
    }
    const struct kernel_cost cost = kernel_cost(&k);
    fine = fine && d->ops->launch(d, &k, &cost, addr, &e) == 0;
    d->ops->sync(d);
    for (unsigned i = 0; i < kd->ntensors && fine; i++) {
        if (alias_of(&k, i) >= 0) {
            gpu_out[i] = gpu_out[alias_of(&k, i)];
            continue;
        }
        gpu_out[i] = malloc(bytes[i] ? bytes[i] : 1);
        fine = cuda_device_copy(d, gpu_out[i], (void *)(uintptr_t)addr[i], bytes[i], 0, &e) == 0;
    }
    if (!ok(fine && run(&k, host) == 0, "%s (%s) runs on the GPU %s", kd->name, dtype_name((enum dtype)dt), e.msg))
        goto out;
    for (unsigned i = 0; i < kd->ntensors; i++) {
        int first = alias_of(&k, i);
        if (kd->roles[i] == TR_IN || (first >= 0 && kd->roles[first] != TR_IN))
            continue;
        enum dtype tdt = kernel_tensor_dtype(&k, i);
        size_t n = kd->elems(&k, i);
        char what[128];
        snprintf(what, sizeof what, "%s.%s GPU vs CPU%s", kd->name, kd->tensor_names[i], first >= 0 ? " (in place)" : "");
        if (id == K_RAND_UNIFORM || tdt == DT_I64) {
            ok(memcmp(host[i], gpu_out[i], bytes[i]) == 0, "%s (%s): the same bits", what, dtype_name((enum dtype)dt));
            continue;
        }
        if (tdt == DT_U8) {
            size_t differ = 0;
            for (size_t j = 0; j < n; j++)
                differ += ((uint8_t *)host[i])[j] != ((uint8_t *)gpu_out[i])[j];
            ok(differ <= n / 100, "%s: %zu of %zu bytes differ", what, differ, n);
            continue;
        }
        float *cpu = as_float(host[i], n, tdt);
        double *ref = dvec(cpu, n);
        double tol = 4 * (id == K_ADAMW8 ? kernel_get(K_ADAMW)->tol[dt] : kd->tol[dt]) + 1e-5;
        check_close(gpu_out[i], tdt, ref, n, tol, what);
        free(cpu);
        free(ref);
    }
out:
    for (unsigned i = 0; i < kd->ntensors; i++) {
        if (alias_of(&k, i) >= 0)
            continue;
        if (addr[i])
            d->ops->seg_free(d, addr[i], bytes[i] ? bytes[i] : 1);
        free(host[i]);
        free(gpu_out[i]);
    }
}

int main(void)
{
    char exe[PATH_MAX], path[PATH_MAX + 64], why[512] = "";
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        tap_skip_all("cannot read /proc/self/exe");
    exe[len] = '\0';
    snprintf(path, sizeof path, "%s/../%s", dirname(exe), OOMLAB_CUDA_PLUGIN_NAME);
    if (cuda_probe(path, why, sizeof why) <= 0) {
        char reason[600];
        snprintf(reason, sizeof reason, "no usable GPU: %s", why);
        tap_skip_all(reason);
    }
    struct err e = {0};
    struct oomlab_cuda_options opt = {0};
    struct device *d = cuda_device_open(path, 0, &opt, &e);
    if (!ok(d != NULL, "cuda:0 opens %s", e.msg))
        return done_testing();
    for (unsigned d_i = 0; d_i < 3; d_i++)
        for (unsigned id = 0; id < kernel_count(); id++) {
            struct kernel_call variants[4];
            unsigned nv = variant_calls(id, test_dtypes[d_i], variants);
            compare_on_gpu(d, sample_call(id, test_dtypes[d_i]));
            for (unsigned v = 0; v < nv; v++)
                compare_on_gpu(d, variants[v]);
        }
    diag("GPU kernel time: %.3f ms", d->ops->kernel_seconds(d) * 1e3);
    d->ops->destroy(d);
    return done_testing();
}
