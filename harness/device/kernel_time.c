/* kernel_time.c: the kernel-time model's rules by kernel class (see kernel_time.h). */
#include "device/kernel_time.h"

#include <math.h>

#include "kernels.h"

/* How an optimizer kernel's update runs (the `impl` dim of adamw, adamw_t and sgd, kernels.h). */
enum optim_impl { OPTIM_FOR_LOOP = 0, OPTIM_FOREACH = 1, OPTIM_FUSED = 2 };

/* PyTorch's multi_tensor_apply (aten/src/ATen/native/cuda/MultiTensorApply.cuh): one launch takes
 * up to depth_to_max_tensors[depth - 1] = 110, 64, 48, 36 tensors and 320 blocks of 65536 elements. */
static const double foreach_max_tensors[] = {110, 64, 48, 36};
#define FOREACH_CHUNK (65536.0 * 320.0)

struct model {
    const struct kernel_rates *r;
    struct kernel_time *out;
};

static double max2(double a, double b)
{
    return a > b ? a : b;
}

/* One launch of a streaming kernel moving `bytes` and doing `flops`. */
static void add_stream(struct model *m, double bytes, double flops)
{
    double t = max2(bytes / m->r->bandwidth, flops / (m->r->p->tflops_fp32 * 1e12));
    m->out->gpu_seconds += max2(t, m->r->kernel_min);
    m->out->launches += 1;
    m->out->host_seconds += m->r->host_op;
}

/* cuBLAS before 11 runs a 16-bit GEMM on tensor cores only when M, N and K are multiples of 8; otherwise
 * on the CUDA cores, at twice the fp32 rate on Volta and Turing (the only GPUs such stacks drive). From
 * cuBLAS 11 tensor cores take any shape: A100 fp16 1024 x 2145 x 1024 runs at 133 TFLOP/s
 * (AI-benchmarking-guide ND A100 v4), what the aligned rule gives within 2%. */
static int misaligned(double M, double N, double K)
{
    return (long long)M % 8 || (long long)N % 8 || (long long)K % 8;
}

/* The share of the SMs a GEMM's output tiles keep busy over its waves (1 without a tile size). A GEMM
 * too small to give every SM a tile of the calibrated size gets tiles of half the side, as cuBLAS's
 * heuristics pick smaller tiles for small problems (Matrix Multiplication Background User's Guide, 2.3). */
static double wave_share(const struct model *m, double batch, double M, double N)
{
    double tile = m->r->cal->gemm_tile, sms = m->r->p->sms;
    if (tile <= 0 || sms <= 0)
        return 1.0;
    double tiles = batch * ceil(M / tile) * ceil(N / tile);
    if (tiles < sms) {
        tile /= 2;
        tiles = batch * ceil(M / tile) * ceil(N / tile);
    }
    double waves = ceil(tiles / sms);
    return tiles / (waves * sms);
}

/* One launch of a batched GEMM of M x N x K in dtype dt doing `flops` and moving `bytes` (a
 * convolution passes its implicit GEMM's dimensions). */
static void add_gemm_like(struct model *m, enum dtype dt, double flops, double bytes, double batch, double M, double N,
                          double K)
{
    double rate = gpu_profile_matmul_rate(m->r->p, dt);
    if (dt != DT_F32 && misaligned(M, N, K) && !m->r->stack->tensor_cores_any_shape)
        rate = 2 * gpu_profile_matmul_rate(m->r->p, DT_F32);
    rate *= wave_share(m, batch, M, N);
    m->out->gpu_seconds += m->r->gemm_fixed + max2(flops / rate, bytes / m->r->bandwidth);
    m->out->launches += 1;
    m->out->host_seconds += m->r->host_op;
}

static void add_gemm(struct model *m, enum dtype dt, double batch, double M, double N, double K)
{
    double esz = dtype_size(dt);
    add_gemm_like(m, dt, 2.0 * batch * M * N * K, esz * batch * (M * K + K * N + M * N), batch, M, N, K);
}

/* A convolution as cuDNN's implicit GEMM: forward M = N P Q output pixels, N = K filters, K = C R R;
 * backward to the data M = N H W, N = C, K = K R R; to the filter M = K, N = C R R, K = N P Q. */
static void add_conv(struct model *m, const struct kernel_call *k, const struct kernel_cost *cost)
{
    double n = (double)k->dims[0], c = (double)k->dims[1], h = (double)k->dims[2], w = (double)k->dims[3];
    double kk = (double)k->dims[4], r = (double)k->dims[5], stride = k->dims[6] > 0 ? (double)k->dims[6] : 1;
    double pad = (double)k->dims[7], p = floor((h + 2 * pad - r) / stride) + 1,
           q = floor((w + 2 * pad - r) / stride) + 1;
    double gm = n * p * q, gn = kk, gk = c * r * r;
    if (k->kernel == K_CONV2D_BWD_DATA)
        gm = n * h * w, gn = c, gk = kk * r * r;
    else if (k->kernel == K_CONV2D_BWD_FILTER)
        gm = kk, gn = c * r * r, gk = n * p * q;
    add_gemm_like(m, (enum dtype)k->dtype, cost->flops, cost->bytes, 1, gm, gn, gk);
}

/* Unfused attention as PyTorch's math path runs it: batched GEMMs over B x H, and passes over the
 * B x H x Tq x Tk score matrix. A 16-bit call computes its softmax in fp32, as autocast does (softmax
 * is on its fp32 list) and as eager attention code upcasts it: the softmax writes fp32 probabilities
 * and a cast brings them back for P v; backward casts dP up, and dS back down. */
static void add_eager_attention(struct model *m, const struct kernel_call *k)
{
    enum dtype dt = (enum dtype)k->dtype;
    double bh = (double)k->dims[0] * (double)k->dims[1], tq = (double)k->dims[2], tk = (double)k->dims[3];
    double d = (double)k->dims[4], scores = bh * tq * tk, lo = dtype_size(dt), hi = 4;
    int upcast = dt != DT_F32;
    switch (k->kernel) {
    case K_ATTN_FWD:
    case K_ATTN_BIAS_FWD:
        add_gemm(m, dt, bh, tq, tk, d);                                         /* S = q k^T */
        add_stream(m, scores * 2 * lo, 0);                                      /* scale */
        add_stream(m, scores * (k->kernel == K_ATTN_BIAS_FWD ? 3 : 2) * lo, 0); /* mask, or bias */
        add_stream(m, scores * (lo + (upcast ? hi : lo)), 0);                   /* softmax */
        if (upcast)
            add_stream(m, scores * (hi + lo), 0); /* P to the call's dtype */
        add_gemm(m, dt, bh, tq, d, tk);           /* o = P v */
        break;
    case K_ATTN_BWD:
        add_gemm(m, dt, bh, tk, d, tq); /* dv = P^T do */
        add_gemm(m, dt, bh, tq, tk, d); /* dP = do v^T */
        if (upcast)
            add_stream(m, scores * (lo + hi), 0);          /* dP up */
        add_stream(m, scores * 3 * (upcast ? hi : lo), 0); /* softmax backward */
        add_stream(m, scores * 2 * (upcast ? hi : lo), 0); /* scale backward */
        if (upcast)
            add_stream(m, scores * (hi + lo), 0); /* dS down */
        add_gemm(m, dt, bh, tq, d, tk);           /* dq = dS k */
        add_gemm(m, dt, bh, tk, d, tq);           /* dk = dS^T q */
        break;
    default:                                                             /* K_ATTN_DSCORES */
        add_gemm(m, dt, bh, tq, tk, d);                                  /* dP = do v^T */
        add_stream(m, scores * (upcast ? lo + hi + 3 * hi : 3 * lo), 0); /* softmax backward */
        break;
    }
}

/* Fused attention: its FLOPs at the architecture's flash share of the spec rate for the dtype,
 * which rises with the keys each query attends to. */
static void add_flash(struct model *m, const struct kernel_call *k, const struct kernel_cost *cost)
{
    enum dtype dt = (enum dtype)k->dtype;
    double keys = (double)k->dims[3], spec = (dt == DT_F32 ? m->r->p->tflops_fp32 : m->r->p->tflops_16bit) * 1e12;
    double rate = spec * m->r->cal->flash_share * keys / (keys + m->r->cal->flash_half_keys);
    m->out->gpu_seconds += m->r->gemm_fixed + max2(cost->flops / rate, cost->bytes / m->r->bandwidth);
    m->out->launches += 1;
    m->out->host_seconds += m->r->host_op;
}

/* An optimizer step over n elements as a list of ops, each moving bytes_per_elem[i] bytes per
 * element: one launch per op on the for-loop path; on the foreach path each op's launch is shared by
 * the tensors of a list (depth[i]: the tensor lists it walks) and costs no floor of its own. */
static void add_optim_ops(struct model *m, double n, const double *bytes_per_elem, const int *depth, int nops,
                          enum optim_impl impl)
{
    for (int i = 0; i < nops; i++) {
        if (impl != OPTIM_FOREACH) {
            add_stream(m, n * bytes_per_elem[i], 0);
            continue;
        }
        double launches = 1.0 / foreach_max_tensors[depth[i] - 1] + n / FOREACH_CHUNK;
        m->out->gpu_seconds += n * bytes_per_elem[i] / m->r->bandwidth + launches * m->r->kernel_min;
        m->out->launches += launches;
        m->out->host_seconds += launches * m->r->host_op;
    }
}

/* torch.optim.AdamW (_single_tensor_adamw / _multi_tensor_adamw): param.mul_(1 - lr wd),
 * m.lerp_(g), v.mul_(b2), v.addcmul_(g, g), sqrt(v), .div_(bc2), .add_(eps), param.addcdiv_(m, denom);
 * tp: the parameter's element size, sm: the moments'. */
static void add_adamw(struct model *m, const struct kernel_call *k, double sm)
{
    double tp = dtype_size((enum dtype)k->dtype), n = (double)k->dims[0];
    const double bytes[] = {2 * tp, 2 * sm + tp, 2 * sm, 2 * sm + tp, 2 * sm, 2 * sm, 2 * sm, 2 * tp + 2 * sm};
    const int depth[] = {1, 2, 1, 2, 2, 1, 1, 3};
    enum optim_impl impl = (enum optim_impl)k->dims[3];
    if (impl == OPTIM_FUSED) /* one kernel per tensor (bitsandbytes' 32-bit update): param, grad, m, v once */
        add_stream(m, n * (3 * tp + 4 * sm), 0);
    else
        add_optim_ops(m, n, bytes, depth, 8, impl);
}

/* torch.optim.SGD with momentum: buf.mul_(momentum).add_(g), param.add_(buf); the first step clones
 * the gradient into buf instead. */
static void add_sgd(struct model *m, const struct kernel_call *k)
{
    double tp = dtype_size((enum dtype)k->dtype), n = (double)k->dims[0];
    const double later[] = {2 * tp, 3 * tp, 3 * tp}, first[] = {2 * tp, 3 * tp};
    const int depth[] = {1, 2, 2};
    enum optim_impl impl = (enum optim_impl)k->dims[2];
    if (k->dims[1] <= 1)
        add_optim_ops(m, n, first, depth + 1, 2, impl);
    else
        add_optim_ops(m, n, later, depth, 3, impl);
}

/* transformers' Adafactor.step, op by op (src/transformers/optimization.py): RMS of the parameter,
 * update = g^2 + eps, the row and column means (factored) or the full moment, the approximation
 * rsqrt(row) x rsqrt(col) times g, clipping by the update's RMS, the learning rate, param -= update.
 * The update is fp32; ops on the small row/column state move no bytes that count. */
static void add_adafactor(struct model *m, const struct kernel_call *k)
{
    double tp = dtype_size((enum dtype)k->dtype), n = (double)k->dims[0] * (double)k->dims[1];
    const double factored[] = {tp, 0, tp + 4, 8,      4, 0, 0, 4, 0, 0, 0, 0,
                               0,  0, 4,      8 + tp, 4, 0, 0, 0, 8, 8, 8, 2 * tp + 4};
    const double vector[] = {tp, 0, tp + 4, 8, 8, 12, 8, 8 + tp, 4, 0, 0, 0, 8, 8, 8, 2 * tp + 4};
    if (k->dims[1] > 1)
        add_optim_ops(m, n, factored, NULL, (int)(sizeof factored / sizeof factored[0]), OPTIM_FOR_LOOP);
    else
        add_optim_ops(m, n, vector, NULL, (int)(sizeof vector / sizeof vector[0]), OPTIM_FOR_LOOP);
}

struct kernel_rates kernel_rates_for(const struct gpu_profile *p, const struct software_stack *stack)
{
    const struct arch_calibration *cal = p->calibration;
    return (struct kernel_rates){.p = p,
                                 .cal = cal,
                                 .stack = stack,
                                 .bandwidth = p->bandwidth_gbs * 1e9 * cal->bandwidth_share,
                                 .kernel_min = cal->kernel_min_us * 1e-6,
                                 .gemm_fixed = cal->gemm_fixed_us * 1e-6,
                                 .host_op = stack->host_op_us * 1e-6};
}

int kernel_time_model(const struct kernel_call *k, const struct kernel_cost *cost, const struct kernel_rates *r,
                      struct kernel_time *out, struct err *e)
{
    if (k->kernel >= K_COUNT)
        return err_set(e, ERR_INTERNAL, "kernel-time model: unknown kernel %u", k->kernel);
    *out = (struct kernel_time){0};
    struct model m = {.r = r, .out = out};
    enum dtype dt = (enum dtype)k->dtype;
    int64_t impl = k->kernel == K_SGD ? k->dims[2] : k->dims[3];
    if ((k->kernel == K_ADAMW || k->kernel == K_ADAMW_T || k->kernel == K_SGD) && (impl < 0 || impl > OPTIM_FUSED))
        return err_set(e, ERR_INPUT, "%s: impl = %lld is not 0 (for-loop), 1 (foreach) or 2 (fused)",
                       kernel_get(k->kernel)->name, (long long)impl);
    switch (k->kernel) {
    case K_GEMM:
        add_gemm_like(&m, dt, cost->flops, cost->bytes, k->dims[5] > 1 ? (double)k->dims[5] : 1, (double)k->dims[0],
                      (double)k->dims[1], (double)k->dims[2]);
        break;
    case K_INT8_GEMM: /* at the fp16 rate: the profiles have no measured int8 rate */
        add_gemm_like(&m, DT_F16, cost->flops, cost->bytes, 1, (double)k->dims[0], (double)k->dims[1],
                      (double)k->dims[2]);
        break;
    case K_CONV2D_FWD:
    case K_CONV2D_BWD_DATA:
    case K_CONV2D_BWD_FILTER:
        add_conv(&m, k, cost);
        break;
    case K_ATTN_FWD:
    case K_ATTN_BWD:
    case K_ATTN_BIAS_FWD:
    case K_ATTN_DSCORES:
        add_eager_attention(&m, k);
        break;
    case K_FLASH_FWD:
    case K_FLASH_BWD:
        add_flash(&m, k, cost);
        break;
    case K_ADAMW:
        add_adamw(&m, k, 4);
        break;
    case K_ADAMW_T:
        add_adamw(&m, k, dtype_size(dt));
        break;
    case K_SGD:
        add_sgd(&m, k);
        break;
    case K_ADAFACTOR:
        add_adafactor(&m, k);
        break;
    default: /* elementwise, normalisation, reductions, layout, embeddings, losses, fills */
        add_stream(&m, cost->bytes, cost->flops);
        break;
    }
    return 0;
}
