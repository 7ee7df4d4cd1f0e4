/* conv.c: CPU 2-D convolution (NCHW, square filter, groups = 1): forward, backward to the input and backward
 * to the filter, by oneDNN (dnnl_lib.h), the library PyTorch's CPU convolutions run on
 * (aten/src/ATen/native/mkldnn/Conv.cpp). Each call describes its convolution on the plain NCHW and OIHW fp32
 * tensors, lets oneDNN choose the layouts its fastest kernel wants (on AVX-512, channels in blocks of 16),
 * reorders into and out of them, and runs on as many threads as the CPU kernels may use. Other dtypes are
 * converted to fp32 and back, as the other CPU kernels compute. oneDNN keeps the primitives it builds in its
 * own cache, keyed by their description, so a shape seen before is not compiled again. The forward and the
 * backward to the input give the same bits on any number of threads; the backward to the filter sums the
 * threads' partial gradients, so its last bits depend on how many ran. */
#include <pthread.h>
#include <stdbool.h>

#include "cpu/cpu_kernels.h"
#include "cpu/cpu_threads.h"
#include "cpu/dnnl_lib.h"
#include "cpu/tensor_io.h"

/* The convolution's three tensors, in the order of dnnl's descriptors: input, filter, output. */
enum { CX, CW, CY, CN };

/* Blocked-layout buffers kept from call to call (one call at a time holds them; a call made meanwhile
 * allocates its own): glibc returns freed blocks of megabytes to the kernel, and faulting a fresh one's pages
 * in cost a fifth to a quarter of a 3 x 3 convolution of 8 x 64 x 56 x 56 (measured). Each keeps the largest size asked
 * of it, until the process ends. */
static struct {
    pthread_mutex_t mu;
    float *buf[CN];
    size_t floats[CN];
} kept = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* A buffer for a blocked layout, 64-byte aligned as oneDNN aligns its own (else every 16-float load of its
 * kernels straddles two cache lines); NULL with e set. */
static float *blocked_alloc(size_t floats, struct err *e)
{
    float *p = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    if (!p)
        err_set(e, ERR_INTERNAL, "out of host memory for %zu floats of a conv2d blocked layout", floats);
    return p;
}

/* One call: the tensor it computes (`out`), each tensor's plain description, fp32 view, and the memory oneDNN
 * runs on (the view itself when the layouts agree, else a reordered copy in `blocked`). */
struct conv_run {
    const struct kernel_call *k;
    int out;
    dnnl_memory_desc_t plain[CN];
    float *f32[CN], *blocked[CN];
    bool keeps; /* holds kept: blocked[i] is kept.buf[i] */
    dnnl_memory_t user[CN], mem[CN];
    dnnl_stream_t stream;
};

/* 0, or -1 with e naming the kernel, what failed and oneDNN's status. */
static int ok(dnnl_status_t s, const struct conv_run *c, const char *what, struct err *e)
{
    if (s == dnnl_success)
        return 0;
    return err_set(e, ERR_INTERNAL, "%s: oneDNN %s: %s", kernel_get(c->k->kernel)->name, what, dnnl_status2str(s));
}

/* Runs a reorder from memory a to memory b. */
static int reorder(struct conv_run *c, dnnl_memory_t a, const dnnl_memory_desc_t *ad, dnnl_memory_t b,
                   const dnnl_memory_desc_t *bd, struct err *e)
{
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t p;
    if (ok(dnnl_reorder_primitive_desc_create(&pd, ad, dnnl_lib_engine(), bd, dnnl_lib_engine(), NULL), c,
           "reorder description", e) < 0)
        return -1;
    int rc = ok(dnnl_primitive_create(&p, pd), c, "reorder", e);
    dnnl_primitive_desc_destroy(pd);
    if (rc < 0)
        return -1;
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
    rc = ok(dnnl_primitive_execute(p, c->stream, 2, args), c, "reorder", e);
    dnnl_primitive_destroy(p);
    return rc;
}

/* Memory for tensor i in the layout pd wants (`want`): the fp32 view itself, or a buffer of that layout
 * into which an input is reordered now (the output is reordered out of it after the run). */
static int bind(struct conv_run *c, int i, const dnnl_memory_desc_t *want, struct err *e)
{
    if (ok(dnnl_memory_create(&c->user[i], &c->plain[i], dnnl_lib_engine(), c->f32[i]), c, "memory", e) < 0)
        return -1;
    if (dnnl_memory_desc_equal(want, &c->plain[i])) {
        c->mem[i] = c->user[i];
        return 0;
    }
    size_t floats = (dnnl_memory_desc_get_size(want) + sizeof(float) - 1) / sizeof(float);
    if (c->keeps && kept.floats[i] < floats) {
        free(kept.buf[i]);
        kept.floats[i] = (kept.buf[i] = blocked_alloc(floats, e)) ? floats : 0;
    }
    if (!(c->blocked[i] = c->keeps ? kept.buf[i] : blocked_alloc(floats, e)) ||
        ok(dnnl_memory_create(&c->mem[i], want, dnnl_lib_engine(), c->blocked[i]), c, "memory", e) < 0)
        return -1;
    return i == c->out ? 0 : reorder(c, c->user[i], &c->plain[i], c->mem[i], want, e);
}

/* The primitive description of the call: the forward, or a backward with the forward as its hint. */
static int describe(struct conv_run *c, dnnl_primitive_desc_t *pd, struct err *e)
{
    const int64_t *d = c->k->dims; /* N C H W K R stride pad */
    dnnl_memory_desc_t any[CN];
    for (int i = 0; i < CN; i++)
        if (ok(dnnl_memory_desc_init_by_tag(&any[i], 4, c->plain[i].dims, dnnl_f32, dnnl_format_tag_any), c,
               "memory description", e) < 0)
            return -1;
    /* padding_r = pad: oneDNN's output size is (H - R + pad_l + pad_r) / stride + 1, as PyTorch's */
    const dnnl_dims_t stride = {d[6], d[6]}, pad = {d[7], d[7]};
    dnnl_convolution_desc_t fd, bd;
    dnnl_primitive_desc_t fwd;
    if (ok(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &any[CX], &any[CW],
                                              NULL, &any[CY], stride, pad, pad),
           c, "convolution description", e) < 0 ||
        ok(dnnl_primitive_desc_create(&fwd, &fd, NULL, dnnl_lib_engine(), NULL), c, "convolution", e) < 0)
        return -1;
    if (c->out == CY) {
        *pd = fwd;
        return 0;
    }
    dnnl_status_t s = c->out == CX ? dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &any[CX],
                                                                              &any[CW], &any[CY], stride, pad, pad)
                                   : dnnl_convolution_backward_weights_desc_init(&bd, dnnl_convolution_direct, &any[CX],
                                                                                 &any[CW], NULL, &any[CY], stride, pad, pad);
    int rc = ok(s, c, "convolution description", e) < 0 ||
                     ok(dnnl_primitive_desc_create(pd, &bd, NULL, dnnl_lib_engine(), fwd), c, "convolution", e) < 0
                 ? -1
                 : 0;
    dnnl_primitive_desc_destroy(fwd);
    return rc;
}

/* Describes, binds and runs the call, and reorders its output into the plain fp32 view. */
static int execute(struct conv_run *c, struct err *e)
{
    static const dnnl_query_t fwd_q[CN] = {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md};
    static const dnnl_query_t diff_q[CN] = {dnnl_query_diff_src_md, dnnl_query_diff_weights_md, dnnl_query_diff_dst_md};
    static const int fwd_arg[CN] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    static const int diff_arg[CN] = {DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_DST};
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t p;
    if (describe(c, &pd, e) < 0)
        return -1;
    dnnl_exec_arg_t args[CN];
    const dnnl_memory_desc_t *want[CN];
    int rc = 0;
    for (int i = 0; i < CN && rc == 0; i++) {
        /* the forward reads x and w and writes y; a backward writes the gradient of its output and reads dy */
        const int diff = c->out != CY && (i == c->out || i == CY);
        want[i] = dnnl_primitive_desc_query_md(pd, diff ? diff_q[i] : fwd_q[i], 0);
        rc = bind(c, i, want[i], e);
        args[i] = (dnnl_exec_arg_t){diff ? diff_arg[i] : fwd_arg[i], c->mem[i]};
    }
    if (rc == 0 && (rc = ok(dnnl_primitive_create(&p, pd), c, "convolution", e)) == 0) {
        rc = ok(dnnl_primitive_execute(p, c->stream, CN, args), c, "convolution", e);
        dnnl_primitive_destroy(p);
    }
    if (rc == 0 && c->mem[c->out] != c->user[c->out])
        rc = reorder(c, c->mem[c->out], want[c->out], c->user[c->out], &c->plain[c->out], e);
    if (rc == 0)
        rc = ok(dnnl_stream_wait(c->stream), c, "stream", e);
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* Runs kernel call k (tensors t: two inputs, then the output) computing tensor `out`; `order` names the
 * convolution tensor (CX, CW, CY) that each of t[0..2] is. */
static int conv_call(const struct kernel_call *k, void *const *t, const int order[3], struct err *e)
{
    const int64_t *d = k->dims; /* N C H W K R stride pad */
    const int64_t P = (d[2] + 2 * d[7] - d[5]) / d[6] + 1, Q = (d[3] + 2 * d[7] - d[5]) / d[6] + 1;
    const dnnl_dims_t dims[CN] = {{d[0], d[1], d[2], d[3]}, {d[4], d[1], d[5], d[5]}, {d[0], d[4], P, Q}};
    const dnnl_format_tag_t tags[CN] = {dnnl_nchw, dnnl_oihw, dnnl_nchw};
    struct conv_run c = {.k = k, .out = order[2]};
    if (dnnl_lib_load(e) < 0)
        return -1;
    int rc = 0;
    for (int i = 0; i < CN && rc == 0; i++)
        rc = ok(dnnl_memory_desc_init_by_tag(&c.plain[i], 4, dims[i], dnnl_f32, tags[i]), &c, "memory description", e);
    for (int a = 0; a < 3 && rc == 0; a++) { /* fp32 views: the tensor itself when fp32, else a converted copy */
        const size_t n = kernel_get(k->kernel)->elems(k, (unsigned)a);
        float *f = k->dtype == DT_F32 ? t[a] : cpu_scratch(n, "conv2d fp32 copy", e);
        if (!f)
            rc = -1;
        else if (f != t[a] && a < 2)
            tensor_to_f32(f, t[a], k->dtype, n);
        c.f32[order[a]] = f;
    }
    omp_set_num_threads((int)cpu_threads_most()); /* oneDNN reads it both when it plans and when it runs */
    c.keeps = pthread_mutex_trylock(&kept.mu) == 0;
    if (rc == 0 && (rc = ok(dnnl_stream_create(&c.stream, dnnl_lib_engine(), dnnl_stream_default_flags), &c,
                            "stream", e)) == 0) {
        rc = execute(&c, e);
        dnnl_stream_destroy(c.stream);
    }
    if (rc == 0 && k->dtype != DT_F32)
        tensor_from_f32(t[2], k->dtype, c.f32[c.out], kernel_get(k->kernel)->elems(k, 2));
    for (int i = 0; i < CN; i++) {
        if (c.mem[i] && c.mem[i] != c.user[i])
            dnnl_memory_destroy(c.mem[i]);
        if (c.user[i])
            dnnl_memory_destroy(c.user[i]);
        if (!c.keeps)
            free(c.blocked[i]);
    }
    if (c.keeps)
        pthread_mutex_unlock(&kept.mu);
    for (int a = 0; a < 3; a++)
        if (c.f32[order[a]] != t[a])
            free(c.f32[order[a]]);
    return rc;
}

int cpu_conv2d_fwd(const struct kernel_call *k, void *const *t, struct err *e)
{
    return conv_call(k, t, (const int[3]){CX, CW, CY}, e); /* x, w -> y */
}

int cpu_conv2d_bwd_data(const struct kernel_call *k, void *const *t, struct err *e)
{
    return conv_call(k, t, (const int[3]){CY, CW, CX}, e); /* dy, w -> dx */
}

int cpu_conv2d_bwd_filter(const struct kernel_call *k, void *const *t, struct err *e)
{
    return conv_call(k, t, (const int[3]){CX, CY, CW}, e); /* x, dy -> dw */
}
