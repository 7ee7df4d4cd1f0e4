/* kernels.h: oomlab's one table of kernels (ops a training step launches).
 *
 * Each kernel_call (kernel_call.h) names a kernel, the compute dtype, up to 8 dims,
 * up to 6 tensors (op-program tensor ids; inputs first, then outputs) and 4 float parameters.
 * This header fixes, per kernel, what those slots mean. For every kernel the table gives the
 * FLOP and byte counts a roofline model uses, the size of each tensor, a CPU implementation (used
 * by the host device and as the reference) and the tolerance of that kernel against a naive
 * reference per input dtype. CUDA twins live in kernels/cuda/ and run through the cuda plugin.
 * Each kernel is one row of kernel_list.def; its CPU code is cpu_<name> in kernels/cpu/F.c and its
 * CUDA code cuda_<name> in kernels/cuda/F.cu, F being its family below.
 *
 * Conventions for every kernel:
 *   - "T" tensors have the call's dtype (DT_F32, DT_BF16 or DT_F16); arithmetic is in fp32.
 *     Tensors marked f32, u8 or i64 always have that dtype, whatever the call's dtype.
 *   - Shapes are row-major and contiguous; the last index varies fastest.
 *   - Outputs are overwritten (no accumulation) unless the kernel says "in place".
 *   - Gradients are named dX for input X; backward kernels have the same dims as their forward.
 *   - Scalars that must be exact integers (seeds, steps, flags) go in dims, never in fparam.
 *
 * The kernels by family (F), their dims, tensors and fparam:
 *
 * ---- gemm: GEMM ----
 * K_GEMM            C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b]   (fp32 accumulation)
 *     dims   {M, N, K, transA, transB, batch}      batch 0 counts as 1
 *     tensors{A: T [batch, M, K] ([batch, K, M] if transA),
 *             B: T [batch, K, N] ([batch, N, K] if transB), C: T [batch, M, N] (read if beta != 0)}
 *     fparam {alpha, beta}
 *     A linear layer y = x W^T is M = rows, N = out features, K = in features, transB = 1.
 *
 * ---- conv: convolution ----
 * K_CONV2D_FWD      y = conv2d(x, w), NCHW, square R x R filter, groups = 1, no bias (K_BIAS_ADD)
 *     dims   {N, C, H, W, K, R, stride, pad}       P = (H + 2 pad - R) / stride + 1, Q likewise from W
 *     tensors{x: T [N, C, H, W], w: T [K, C, R, R], y: T [N, K, P, Q]}
 * K_CONV2D_BWD_DATA     tensors{dy: T [N, K, P, Q], w, dx: T [N, C, H, W]}        dims as forward
 * K_CONV2D_BWD_FILTER   tensors{x, dy, dw: T [K, C, R, R]}                         dims as forward
 *
 * ---- attention: unfused attention ----
 * Attention (scaled dot product). Layouts are token-major, as linear layers produce them and as
 * flash-attention takes them: q [B, Tq, H, D]; k and v packed in one tensor kv [B, Tk, 2, Hkv, D]
 * (the output of a fused k/v projection with N = 2 * Hkv * D); o [B, Tq, H, D]. Query head h
 * uses key/value head h / (H / Hkv) (grouped-query attention; Hkv = 0 means Hkv = H).
 * With packed = 1, q, k and v are ONE tensor qkv [B, T, H + 2 Hkv, D] (a fused qkv projection,
 * Tq == Tk): pass its id as both q and kv, and the gradient's id as both dq and dkv.
 * Causal masking keeps key j for query i iff j <= i + (Tk - Tq) (aligned to the bottom right).
 *     dims   {B, H, Tq, Tk, D, causal, Hkv, packed}
 *     fparam {scale}    0 means 1 / sqrt(D)
 * K_ATTN_FWD        unfused: S = scale q k^T (masked), P = softmax(S), o = P v
 *     tensors{q, kv, p: T [B, H, Tq, Tk] (saved for backward), o}
 * K_ATTN_BWD        tensors{q, kv, p, do, dq, dkv}
 *     (PyTorch's math path also materialises dP and dS of p's size; a generator modelling it
 *      allocates and frees those around this call. This kernel needs no workspace.)
 * K_ATTN_BIAS_FWD   K_ATTN_FWD with an additive score bias (T5's relative position bias):
 *     S = scale q k^T + bias (masked); dims and fparam as attention
 *     tensors{q, kv, bias: T [B, H, Tq, Tk], p: T [B, H, Tq, Tk], o}
 * K_ATTN_DSCORES    gradient of the (pre-softmax) scores, which is the gradient of an additive bias:
 *     dS = P * (dP - rowsum(P * dP)), dP = do v^T; masked entries 0; dims and fparam as attention
 *     tensors{kv, p, do, ds: T [B, H, Tq, Tk]}   (dq and dkv come from K_ATTN_BWD)
 *
 * ---- flash_attention: fused attention ----
 *     dims, fparam, layouts and masking as attention
 * K_FLASH_FWD       fused, memory-efficient: online softmax, never materialises S or P
 *     tensors{q, kv, o, lse: f32 [B, H, Tq] (log-sum-exp of each scaled, masked score row)}
 * K_FLASH_BWD_PREP  stats = (lse, rowsum(do * o)) per query row; flash-attention's dot(dO, O) pass
 *     tensors{o, do, lse, stats: f32 [B, H, Tq, 2]}
 * K_FLASH_BWD       recomputes P block by block from q, kv and stats
 *     tensors{q, kv, stats, do, dq, dkv}
 *
 * ---- norm: softmax and normalisation ----
 * K_SOFTMAX_FWD     y = softmax(x) along rows;   dims {rows, cols}; tensors{x: T [rows, cols], y}
 * K_SOFTMAX_BWD     dx = y * (dy - sum(y * dy)); dims {rows, cols}; tensors{y, dy, dx}
 * K_LAYERNORM_FWD   y = (x - mean) * rstd * gamma + beta over the last dim C
 *     dims {rows, C}; tensors{x: T [rows, C], gamma: T [C], beta: T [C], y, mean: f32 [rows],
 *     rstd: f32 [rows]}; fparam {eps}
 * K_LAYERNORM_BWD_DX      tensors{dy, x, gamma, mean, rstd, dx}
 * K_LAYERNORM_BWD_PARAMS  tensors{dy, x, mean, rstd, dgamma: T [C], dbeta: T [C]}
 * K_RMSNORM_FWD     y = x * rstd * gamma, rstd = 1 / sqrt(mean(x^2) + eps)
 *     dims {rows, C}; tensors{x, gamma, y, rstd: f32 [rows]}; fparam {eps}
 * K_RMSNORM_BWD     tensors{dy, x, gamma, rstd, dx, dgamma}
 * K_ROW_NORM        y[r] = sqrt(sum over c of x[r, c]^2)^p, accumulated in double (CPU) or fp32 (CUDA)
 *     dims {rows, cols}; tensors{x: T [rows, cols], y: T [rows]}; fparam {p} (0 means 1: the norm)
 * K_GROUPNORM_FWD   normalises each of G channel groups of each sample, then per-channel affine
 *     dims {N, C, HW, G}; tensors{x: T [N, C, HW], gamma: T [C], beta: T [C], y,
 *     mean: f32 [N, G], rstd: f32 [N, G]}; fparam {eps}
 * K_GROUPNORM_BWD_DX      tensors{dy, x, gamma, mean, rstd, dx}
 * K_GROUPNORM_BWD_PARAMS  tensors{dy, x, mean, rstd, dgamma, dbeta}
 *
 * ---- activation: activations ----
 * K_GELU_FWD        y = gelu(x);  dims {n, approx}  approx 1 = tanh approximation, 0 = erf
 *     tensors{x: T [n], y}
 * K_GELU_BWD        dims {n, approx}; tensors{x, dy, dx}
 * K_SILU_FWD        y = x * sigmoid(x); dims {n}; tensors{x, y}
 * K_SILU_BWD        dims {n}; tensors{x, dy, dx}
 * K_GEGLU_FWD       y = gelu(gate) * up
 *     dims {rows, F, packed, approx}; tensors{gate: T [rows, F], up: T [rows, F], y: T [rows, F]}
 *     packed = 1: gate and up are ONE tensor [rows, 2F], each row [up | gate] (diffusers' GEGLU
 *     chunk order); pass its id as both gate and up, and the gradient's id as both dgate and dup.
 * K_GEGLU_BWD       dims as forward; tensors{gate, up, dy, dgate, dup}
 * K_SWIGLU_FWD      y = silu(gate) * up (Llama's MLP); dims {rows, F, packed}; tensors as GEGLU
 * K_SWIGLU_BWD      tensors{gate, up, dy, dgate, dup}
 * K_RELU_FWD        y = max(x, 0); dims {n}; tensors{x: T [n], y}
 * K_RELU_BWD        dx = dy * (x > 0); dims {n}; tensors{x, dy, dx}
 * K_QUICK_GELU_FWD  y = x * sigmoid(1.702 x) (CLIP); dims {n}; tensors{x: T [n], y}
 * K_QUICK_GELU_BWD  dims {n}; tensors{x, dy, dx}
 *
 * ---- dropout: dropout ----
 * K_DROPOUT_FWD     mask[i] = keep with probability 1 - p (counter-based RNG: the SplitMix64
 *     sequence of the seed, one draw per two elements, so any device draws the same mask);
 *     y = x * mask / (1 - p)
 *     dims {n, seed}; tensors{x: T [n], y: T [n], mask: u8 [n] (1 = kept)}; fparam {p}
 * K_DROPOUT_BWD     dx = dy * mask / (1 - p); dims {n}; tensors{dy, mask, dx}; fparam {p}
 *
 * ---- pointwise: elementwise arithmetic ----
 * K_CAST            y = x converted to dims[1]; the call's dtype is x's (round to nearest even)
 *     dims {n, dst_dtype}; tensors{x: [n] call dtype, y: [n] dst_dtype}
 * K_ADD             y = alpha * a + beta * b (y may be a or b: residuals, grad accumulation)
 *     dims {n}; tensors{a: T [n], b: T [n], y: T [n]}; fparam {alpha, beta}
 * K_SCALE           y = alpha * x (y may be x); dims {n}; tensors{x, y}; fparam {alpha}
 * K_FILL            y = value (zero_grad(set_to_none=False)); dims {n}; tensors{y}; fparam {value}
 * K_EYE             y = the n x n identity (torch.eye); dims {n}; tensors{y: T [n, n]}
 * K_BIAS_ADD        y[o, c, i] = x[o, c, i] + bias[c]  (y may be x)
 *     dims {outer, C, inner}; tensors{x: T [outer, C, inner], bias: T [C], y}
 *     a linear layer's bias: outer = rows, inner = 1; a conv's: outer = N, inner = P * Q
 * K_BIAS_BWD        dbias[c] = sum over o, i of dy[o, c, i]; dims as forward; tensors{dy, dbias}
 *
 * ---- broadcast: broadcasts over {outer, repeat, inner} ----
 * K_MUL_BCAST       y[o, r, i] = a[o, r, i] * b[o, i]   (b broadcast over the middle dim; y may be a)
 *     dims {outer, repeat, inner}; tensors{a: T [outer, repeat, inner], b: T [outer, inner], y: as a}
 *     no broadcast: {n, 1, 1}; a per-channel scale of [rows, C]: {1, rows, C}
 * K_ADD_BCAST       y[o, r, i] = alpha * a[o, r, i] + beta * b[o, i]; dims and tensors as K_MUL_BCAST
 *     fparam {alpha, beta}
 * K_EXPAND          y[o, r, i] = alpha * x[o, i] (broadcast copy, e.g. repeat_kv, a mask over heads)
 *     dims {outer, repeat, inner}; tensors{x: T [outer, inner], y: T [outer, repeat, inner]}; fparam {alpha}
 * K_REDUCE_SUM      y[o, i] = alpha * sum over r of x[o, r, i] (sum, or mean with alpha = 1 / repeat)
 *     dims {outer, repeat, inner}; tensors{x: T [outer, repeat, inner], y: T [outer, inner]}; fparam {alpha}
 *
 * ---- layout: moving elements ----
 * K_TRANSPOSE       y[b, j, i] = x[b, i, j]; dims {batch, rows, cols}
 *     tensors{x: T [batch, rows, cols], y: T [batch, cols, rows]}
 * K_COPY_BLOCKS     for o < outer, i < len: y[o * dst_stride + dst_off + i] (+)= x[o * src_stride + src_off + i]
 *     (slices, concatenation, chunks); y elsewhere is left as it is
 *     dims {outer, len, src_stride, src_off, dst_stride, dst_off, accumulate}
 *     tensors{x: T [outer * src_stride], y: T [outer * dst_stride] (in place)}
 * K_UPSAMPLE2X_FWD  nearest-neighbour 2x: y[n, c, h, w] = x[n, c, h / 2, w / 2]
 *     dims {N, C, H, W} (of x); tensors{x: T [N, C, H, W], y: T [N, C, 2H, 2W]}
 * K_UPSAMPLE2X_BWD  dx = sum of the 4 dy it fed; tensors{dy, dx}
 *
 * ---- embedding: embeddings ----
 * K_EMBEDDING_FWD   y[r] = table[ids[r]]; dims {rows, V, C}
 *     tensors{ids: i64 [rows], table: T [V, C], y: T [rows, C]}
 * K_EMBEDDING_BWD   dtable = scatter-add of dy by ids (zeroed first); tensors{ids, dy, dtable}
 * K_ROPE            rotary position embedding (rotate_half convention) of the first H heads of each
 *     token row; token t of each sequence is position t, pair (d, d + D/2) of a head rotated by
 *     t * theta^(-2d / D); inverse = 1 rotates back (the backward); the rest of a row is copied.
 *     dims {B, T, H, D, row, inverse}; tensors{x: T [B, T, row], y: T [B, T, row] (y may be x)}
 *     fparam {theta} (0 means 10000)
 *
 * ---- loss: loss ----
 * K_CROSS_ENTROPY_FWD   loss[r] = lse(logits[r]) - logits[r, target[r]]; 0 where target < 0
 *     dims {rows, V}; tensors{logits: T [rows, V] (fp32 in practice), target: i64 [rows],
 *     loss: f32 [rows], lse: f32 [rows]}
 * K_CROSS_ENTROPY_BWD   dlogits = scale * (softmax(logits) - onehot(target)); 0 rows where target < 0
 *     tensors{logits, target, lse, dlogits}; fparam {scale} (dloss / valid rows for a mean)
 *
 * ---- optim: optimizer steps ----
 * K_ADAMW           in place on param, m, v (PyTorch AdamW, bias-corrected, decoupled decay)
 *     dims {n, step (1-based), eps_bits, impl}; tensors{param: T [n] (in place), grad: T [n],
 *     m: f32 [n] (in place), v: f32 [n] (in place)}; fparam {lr, beta1, beta2, weight_decay}
 *     eps_bits: eps as the bit pattern of an fp32 (kernel_f32_bits); 0 means 1e-8
 *     impl: how the framework runs the update, which only its timing depends on: 0 torch.optim's
 *     for-loop (one launch per op per tensor), 1 foreach (multi-tensor launches over the parameter
 *     list), 2 one fused kernel per tensor (bitsandbytes' 32-bit update)
 * K_ADAMW8          8-bit block-wise AdamW (bitsandbytes): m and v stored as u8 codes of a
 *     dynamic (tree) quantization map, scaled by the absmax of each block of `block` elements
 *     dims {n, step, eps_bits, block (2048 or 256)}; tensors{param (in place), grad,
 *     m: u8 [n] (in place), v: u8 [n] (in place), m_absmax: f32 [nblocks] (in place),
 *     v_absmax: f32 [nblocks] (in place)}; fparam as K_ADAMW; nblocks = ceil(n / block)
 * K_ADAMW_T         K_ADAMW with m and v in the call's dtype (torch.optim.AdamW on 16-bit params
 *     keeps exp_avg and exp_avg_sq in the parameter's dtype); dims, fparam as K_ADAMW
 *     tensors{param (in place), grad, m: T [n] (in place), v: T [n] (in place)}
 * K_SGD             torch.optim.SGD with momentum, in place; step 1 sets buf = grad
 *     dims {n, step, impl (as K_ADAMW's)}; tensors{param: T [n], grad: T [n], buf: T [n]}
 *     fparam {lr, momentum, dampening, weight_decay}
 * K_ADAFACTOR       Adafactor without momentum (transformers' defaults but a fixed lr): second
 *     moment factored into row and column means for matrices (cols > 1), full for vectors;
 *     beta2 = 1 - step^decay_rate; update = g / sqrt(v), clipped to RMS <= clip; param -= lr * update
 *     dims {rows, cols, step}; tensors{param: T [rows * cols] (in place), grad: T [rows * cols],
 *     state: f32 [rows + cols] (row means then column means), or f32 [rows] when cols == 1 (in place)}
 *     fparam {lr, eps1, clip, decay_rate}  (0s mean 1e-3, 1e-30, 1.0, -0.8)
 * K_EMA             shadow = decay * shadow + (1 - decay) * param
 *     dims {n}; tensors{param: T [n], shadow: T [n] (in place)}; fparam {decay}
 *
 * ---- random: seeded fills ----
 * K_DEQUANT         bitsandbytes' blockwise dequantization: y[i] = code(q, i) * absmax[i / block]
 *     dims {n, block, kind}; tensors{q: u8 [(n+1)/2 for 4-bit kinds, else n], absmax: f32 [ceil(n / block)],
 *     y: T [n]}; kind 0 NF4, 1 FP4 (two codes a byte, element 2j in byte j's high nibble), 2 the signed
 *     dynamic 8-bit map (a nested absmax), 3 signed int8 times absmax / 127 (LLM.int8's CB * SCB / 127,
 *     block = a row)
 * K_INT8_QUANT_ROWS LLM.int8's activation quantization (bitsandbytes int8_vectorwise_quant, no outliers):
 *     absmax[r] = max |x[r, :]|, q[r, c] = round(x[r, c] * 127 / absmax[r]) as a signed byte (0 when
 *     absmax is 0); dims {rows, cols}; tensors{x: T [rows, cols], q: u8 [rows, cols], absmax: f32 [rows]}
 * K_INT8_GEMM       LLM.int8's matmul (int8_scaled_mm: int8_linear_matmul, then int8_mm_dequant):
 *     acc[m, n] = sum over k of a[m, k] b[n, k] (signed bytes), y = acc a_absmax[m] b_absmax[n] / 127^2;
 *     dims {M, N, K}; tensors{a: u8 [M, K], b: u8 [N, K], a_absmax: f32 [M], b_absmax: f32 [N],
 *     acc: f32 [M, N], y: T [M, N]}; acc stands for bitsandbytes' int32 product (the same 4 bytes a
 *     value; held as fp32, exact below 2^24)
 * K_RAND_UNIFORM    y[i] = lo + (hi - lo) * u, u in [0, 1) from splitmix64 of seed and i, rounded
 *     to T; a value that rounds to hi becomes lo, as in PyTorch's uniform_, so y stays in [lo, hi)
 *     (parameter and input initialisation); dims {n, seed}; tensors{y: T [n]}; fparam {lo, hi}
 * K_RANDINT         y[i] = an integer in [0, high) from splitmix64 of seed and i (token ids, labels);
 *     the call's dtype is not used; dims {n, seed, high}; tensors{y: i64 [n]}
 *
 * CUDA (kernels/cuda, through the cuda device plugin): GEMM runs on cuBLAS, conv2d on cuDNN, the
 * rest on our kernels, with two limits the CPU path does not have: attention head dim D <= 256
 * (but attn_dscores) and K_ADAMW8 block <= 6144. Out-of-range ids (targets, embedding rows) are an
 * ERR_INPUT on the CPU; on the GPU such rows are skipped (loss 0, output 0).
 */
#ifndef OOMLAB_KERNELS_H
#define OOMLAB_KERNELS_H

#include <stdint.h>
#include <string.h>

#include "kernel_call.h"
#include "util/err.h"

/* K_GEMM, K_CONV2D_FWD, ...: one id per row of kernel_list.def, in its order. */
enum kernel_id {
#define KERNEL(id, name, ...) K_##id,
#include "kernel_list.def"
    K_COUNT
};

/* How a kernel uses a tensor; in-place tensors are read and written (they count twice in bytes). */
enum tensor_role { TR_IN, TR_OUT, TR_INOUT };

/* A tensor's dtype in the table: a fixed dtype, the call's dtype, or (K_CAST) the one in dims[1]. */
enum { TD_CALL = DT_COUNT, TD_DIMS1 };

struct kernel_desc {
    const char *name;    /* "gemm", "flash_bwd", ... (lower case, as in op-program text) */
    const char *summary; /* one line */
    const char *dim_names[KERNEL_MAX_DIMS]; /* NULL after the last dim the kernel uses */
    uint8_t positive_dims;                  /* bit i set: dims[i] must be >= 1 */
    uint8_t ntensors;
    const char *tensor_names[KERNEL_MAX_TENSORS];
    uint8_t roles[KERNEL_MAX_TENSORS];  /* enum tensor_role */
    uint8_t dtypes[KERNEL_MAX_TENSORS]; /* enum dtype, TD_CALL or TD_DIMS1 */
    /* Elements of tensor i for this call. */
    uint64_t (*elems)(const struct kernel_call *k, unsigned i);
    /* Floating-point operations (multiply-add = 2) the kernel performs. */
    double (*flops)(const struct kernel_call *k);
    /* Bytes the kernel must move at least: each distinct tensor once, twice if read and written
     * (a tensor id given twice, as packed qkv or y == x, counts once). */
    double (*bytes)(const struct kernel_call *k);
    /* Shape rules beyond positive dims (divisibility, output size > 0); NULL if none. */
    int (*check)(const struct kernel_call *k, struct err *e);
    /* Allowed error against an fp64/fp32 naive reference with inputs in each dtype:
     * |got - ref| <= tol * (1 + |ref|). Zero for dtypes the kernel does not take. */
    double tol[DT_COUNT];
    /* Runs on the CPU on host pointers, tensors[i] for tensor i; 0 or -1 with e set (cpu_<name>). */
    int (*run_cpu)(const struct kernel_call *k, void *const *tensors, struct err *e);
};

/* The descriptor of kernel id, or NULL if id >= K_COUNT. */
const struct kernel_desc *kernel_get(unsigned id);
/* The id of the kernel named s ("gemm"), or -1. */
int kernel_from_name(const char *s);
unsigned kernel_count(void);

/* Checks a call against the table: known kernel, tensor count, dtype, positive dims, shape rules.
 * Returns 0, or -1 with an ERR_INPUT message naming the kernel. */
int kernel_validate(const struct kernel_call *k, struct err *e);
/* The call's FLOP and byte counts (its row's flops and bytes); the call's kernel must be in the table. */
struct kernel_cost kernel_cost(const struct kernel_call *k);
/* Bytes of tensor i of a call (elements times its dtype's size). */
uint64_t kernel_tensor_bytes(const struct kernel_call *k, unsigned i);
/* The dtype of tensor i of a call. */
enum dtype kernel_tensor_dtype(const struct kernel_call *k, unsigned i);
/* Loads what the CPU kernels load at run time (the BLAS, cpu/blas.h) so that a device that will run them
 * can fail at open rather than at its first GEMM: 0, or -1 with an ERR_INTERNAL message saying why. */
int kernel_cpu_load(struct err *e);
/* The most threads one CPU kernel uses (0: one per CPU this process may run on); the host device sets one
 * per core it may use, as hwloc counts them, since two hardware threads of a core share its units. */
void kernel_cpu_set_threads(unsigned n);
/* Validates the call and runs its CPU implementation. */
int kernel_run_cpu(const struct kernel_call *k, void *const *tensors, struct err *e);

/* fp32 <-> the bit pattern stored in dims (K_ADAMW's eps). */
static inline int64_t kernel_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (int64_t)u;
}

static inline float kernel_bits_f32(int64_t bits)
{
    uint32_t u = (uint32_t)bits;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The theta of a K_ROPE call: fparam[0], 0 meaning 10000. */
static inline float kernel_rope_theta(const struct kernel_call *k)
{
    return k->fparam[0] != 0.0f ? k->fparam[0] : 10000.0f;
}

/* The eps of an AdamW call (K_ADAMW, K_ADAMW8, K_ADAMW_T): dims[2] as fp32 bits, 0 meaning 1e-8. */
static inline float kernel_adamw_eps(const struct kernel_call *k)
{
    return k->dims[2] ? kernel_bits_f32(k->dims[2]) : 1e-8f;
}

#endif
