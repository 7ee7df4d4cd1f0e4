/* kernel_table.c: the kernel table: per kernel its dims and tensors, tensor sizes, FLOP and byte
 * counts for the roofline, shape checks, CPU implementation and tolerances (see kernels.h). */
#include "kernels.h"

#include <math.h>

#include "cpu/cpu_kernels.h"
#include "cpu/cpu_kernels_extra.h"

#define D(i) ((uint64_t)k->dims[i])
#define MAX1(x) ((x) > 0 ? (x) : 1)

/* ---- tensor sizes ---- */

static uint64_t gemm_elems(const struct kernel_call *k, unsigned i)
{
    uint64_t b = MAX1(k->dims[5]);
    return i == 0 ? b * D(0) * D(2) : i == 1 ? b * D(2) * D(1) : b * D(0) * D(1);
}

static uint64_t conv_p(const struct kernel_call *k, int hw)
{
    int64_t in = k->dims[2 + hw], out = (in + 2 * k->dims[7] - k->dims[5]) / MAX1(k->dims[6]) + 1;
    return out > 0 ? (uint64_t)out : 0;
}

enum conv_shape { CONV_X, CONV_W, CONV_Y };

static uint64_t conv_shape_elems(const struct kernel_call *k, enum conv_shape s)
{
    if (s == CONV_X)
        return D(0) * D(1) * D(2) * D(3);
    if (s == CONV_W)
        return D(4) * D(1) * D(5) * D(5);
    return D(0) * D(4) * conv_p(k, 0) * conv_p(k, 1);
}

static uint64_t conv_fwd_elems(const struct kernel_call *k, unsigned i)
{
    static const enum conv_shape s[] = {CONV_X, CONV_W, CONV_Y};
    return conv_shape_elems(k, s[i]);
}

static uint64_t conv_bwd_data_elems(const struct kernel_call *k, unsigned i)
{
    static const enum conv_shape s[] = {CONV_Y, CONV_W, CONV_X};
    return conv_shape_elems(k, s[i]);
}

static uint64_t conv_bwd_filter_elems(const struct kernel_call *k, unsigned i)
{
    static const enum conv_shape s[] = {CONV_X, CONV_Y, CONV_W};
    return conv_shape_elems(k, s[i]);
}

enum attn_shape { AT_Q, AT_KV, AT_P, AT_O, AT_LSE, AT_STATS };

static uint64_t attn_shape_elems(const struct kernel_call *k, enum attn_shape s)
{
    uint64_t B = D(0), H = D(1), Tq = D(2), Tk = D(3), Dh = D(4), Hkv = k->dims[6] > 0 ? D(6) : H;
    switch (s) {
    case AT_Q:
        return k->dims[7] ? B * Tq * (H + 2 * Hkv) * Dh : B * Tq * H * Dh;
    case AT_KV:
        return k->dims[7] ? B * Tq * (H + 2 * Hkv) * Dh : B * Tk * 2 * Hkv * Dh;
    case AT_P:
        return B * H * Tq * Tk;
    case AT_O:
        return B * Tq * H * Dh;
    case AT_LSE:
        return B * H * Tq;
    case AT_STATS:
        return B * H * Tq * 2;
    }
    return 0;
}

#define ATTN_ELEMS(fn, ...)                                                  \
    static uint64_t fn(const struct kernel_call *k, unsigned i)              \
    {                                                                        \
        static const enum attn_shape s[] = {__VA_ARGS__};                    \
        return attn_shape_elems(k, s[i]);                                    \
    }
ATTN_ELEMS(attn_fwd_elems, AT_Q, AT_KV, AT_P, AT_O)
ATTN_ELEMS(attn_bwd_elems, AT_Q, AT_KV, AT_P, AT_O, AT_Q, AT_KV)
ATTN_ELEMS(flash_fwd_elems, AT_Q, AT_KV, AT_O, AT_LSE)
ATTN_ELEMS(flash_prep_elems, AT_O, AT_O, AT_LSE, AT_STATS)
ATTN_ELEMS(flash_bwd_elems, AT_Q, AT_KV, AT_STATS, AT_O, AT_Q, AT_KV)

/* Row kernels: "x" tensors are rows x C, "p" tensors C (params), "r" tensors rows (stats). */
static uint64_t row_shape(const struct kernel_call *k, char s)
{
    return s == 'x' ? D(0) * D(1) : s == 'p' ? D(1) : D(0);
}

#define ROW_ELEMS(fn, shapes)                                                \
    static uint64_t fn(const struct kernel_call *k, unsigned i)              \
    {                                                                        \
        return row_shape(k, shapes[i]);                                      \
    }
ROW_ELEMS(softmax_elems, "xxx")
ROW_ELEMS(ln_fwd_elems, "xppxrr")
ROW_ELEMS(ln_bwd_dx_elems, "xxprrx")
ROW_ELEMS(ln_bwd_params_elems, "xxrrpp")
ROW_ELEMS(rms_fwd_elems, "xpxr")
ROW_ELEMS(rms_bwd_elems, "xxprxp")
ROW_ELEMS(ce_fwd_elems, "xrrr")
ROW_ELEMS(ce_bwd_elems, "xrrx")

/* GroupNorm: "x" N*C*HW, "p" C, "r" N*G. */
static uint64_t gn_shape(const struct kernel_call *k, char s)
{
    return s == 'x' ? D(0) * D(1) * D(2) : s == 'p' ? D(1) : D(0) * D(3);
}

#define GN_ELEMS(fn, shapes)                                                 \
    static uint64_t fn(const struct kernel_call *k, unsigned i)              \
    {                                                                        \
        return gn_shape(k, shapes[i]);                                       \
    }
GN_ELEMS(gn_fwd_elems, "xppxrr")
GN_ELEMS(gn_bwd_dx_elems, "xxprrx")
GN_ELEMS(gn_bwd_params_elems, "xxrrpp")

static uint64_t flat_elems(const struct kernel_call *k, unsigned i)
{
    return D(0);
}

/* Gated units: tensor 2 (y or dy) is rows x F; the others are too, or rows x 2F when packed. */
static uint64_t glu_elems(const struct kernel_call *k, unsigned i)
{
    return k->dims[2] && i != 2 ? D(0) * D(1) * 2 : D(0) * D(1);
}

static uint64_t bias_elems(const struct kernel_call *k, unsigned i)
{
    int is_bias = (k->kernel == K_BIAS_ADD && i == 1) || (k->kernel == K_BIAS_BWD && i == 1);
    return is_bias ? D(1) : D(0) * D(1) * D(2);
}

static uint64_t adamw8_elems(const struct kernel_call *k, unsigned i)
{
    return i < 4 ? D(0) : (D(0) + D(3) - 1) / D(3);
}

static uint64_t upsample_elems(const struct kernel_call *k, unsigned i)
{
    uint64_t n = D(0) * D(1) * D(2) * D(3);
    int big = k->kernel == K_UPSAMPLE2X_FWD ? i == 1 : i == 0;
    return big ? 4 * n : n;
}

static uint64_t embedding_elems(const struct kernel_call *k, unsigned i)
{
    if (i == 0)
        return D(0);
    int is_table = k->kernel == K_EMBEDDING_FWD ? i == 1 : i == 2;
    return is_table ? D(1) * D(2) : D(0) * D(2);
}

/* ---- FLOP counts ---- */

static double gemm_flops(const struct kernel_call *k)
{
    return 2.0 * MAX1(k->dims[5]) * D(0) * D(1) * D(2);
}

static double conv_flops(const struct kernel_call *k)
{
    return 2.0 * D(0) * D(4) * conv_p(k, 0) * conv_p(k, 1) * D(1) * D(5) * D(5);
}

/* Score-matrix entries an attention kernel computes (fused kernels skip fully masked blocks). */
static double attn_scores(const struct kernel_call *k, int fused)
{
    double s = (double)D(0) * D(1) * D(2) * D(3);
    if (fused && k->dims[5] && D(2) == D(3))
        s *= 0.5;
    return s;
}

static double attn_fwd_flops(const struct kernel_call *k)
{
    return attn_scores(k, 0) * (4.0 * D(4) + 5.0);
}

static double attn_bwd_flops(const struct kernel_call *k)
{
    return attn_scores(k, 0) * (8.0 * D(4) + 4.0);
}

static double flash_fwd_flops(const struct kernel_call *k)
{
    return attn_scores(k, 1) * (4.0 * D(4) + 5.0);
}

static double flash_prep_flops(const struct kernel_call *k)
{
    return 2.0 * D(0) * D(1) * D(2) * D(4);
}

static double flash_bwd_flops(const struct kernel_call *k)
{
    return attn_scores(k, 1) * (10.0 * D(4) + 6.0);
}

/* Elementwise and reduction kernels: a fixed number of operations per element of tensor 0. */
#define PER_ELEM_FLOPS(fn, per)                                              \
    static double fn(const struct kernel_call *k)                            \
    {                                                                        \
        return (per) * (double)kernel_get(k->kernel)->elems(k, 0);           \
    }
PER_ELEM_FLOPS(flops_0, 0.0)
PER_ELEM_FLOPS(flops_1, 1.0)
PER_ELEM_FLOPS(flops_2, 2.0)
PER_ELEM_FLOPS(flops_3, 3.0)
PER_ELEM_FLOPS(flops_4, 4.0)
PER_ELEM_FLOPS(flops_5, 5.0)
PER_ELEM_FLOPS(flops_8, 8.0)
PER_ELEM_FLOPS(flops_10, 10.0)
PER_ELEM_FLOPS(flops_15, 15.0)
PER_ELEM_FLOPS(flops_25, 25.0)

static double embedding_bwd_flops(const struct kernel_call *k)
{
    return (double)D(0) * D(2);
}

static double glu_fwd_flops(const struct kernel_call *k)
{
    return 12.0 * D(0) * D(1);
}

static double glu_bwd_flops(const struct kernel_call *k)
{
    return 18.0 * D(0) * D(1);
}

/* ---- bytes ---- */

static double generic_bytes(const struct kernel_call *k)
{
    const struct kernel_desc *kd = kernel_get(k->kernel);
    double total = 0;
    for (unsigned i = 0; i < kd->ntensors; i++) {
        int reads = kd->roles[i] != TR_OUT, writes = kd->roles[i] != TR_IN, seen = 0;
        for (unsigned j = 0; j < kd->ntensors; j++) {
            if (k->tensors[j] != k->tensors[i])
                continue;
            if (j < i)
                seen = 1;
            reads |= kd->roles[j] != TR_OUT;
            writes |= kd->roles[j] != TR_IN;
        }
        if (!seen)
            total += (double)kernel_tensor_bytes(k, i) * (reads + writes);
    }
    return total;
}

static double gemm_bytes(const struct kernel_call *k)
{
    double c = k->fparam[1] != 0.0f ? (double)kernel_tensor_bytes(k, 2) : 0.0;
    return generic_bytes(k) + c;
}

/* ---- shape checks ---- */

/* BLAS, cuBLAS and cuDNN take int dimensions. */
static int int_dims_check(const struct kernel_call *k, struct err *e)
{
    for (unsigned i = 0; i < KERNEL_MAX_DIMS; i++)
        if (kernel_get(k->kernel)->dim_names[i] && k->dims[i] > INT32_MAX)
            return err_set(e, ERR_INPUT, "%s: %s = %lld does not fit the BLAS/cuDNN int range",
                           kernel_get(k->kernel)->name, kernel_get(k->kernel)->dim_names[i], (long long)k->dims[i]);
    return 0;
}

static int conv_check(const struct kernel_call *k, struct err *e)
{
    if (int_dims_check(k, e) < 0)
        return -1;
    if (k->dims[7] < 0 || conv_p(k, 0) == 0 || conv_p(k, 1) == 0)
        return err_set(e, ERR_INPUT, "%s: %lldx%lld input with filter %lld, pad %lld has no output",
                       kernel_get(k->kernel)->name, (long long)k->dims[2], (long long)k->dims[3],
                       (long long)k->dims[5], (long long)k->dims[7]);
    return 0;
}

static int attn_check(const struct kernel_call *k, struct err *e)
{
    const char *name = kernel_get(k->kernel)->name;
    int64_t hkv = k->dims[6] > 0 ? k->dims[6] : k->dims[1];
    if (k->dims[6] < 0 || k->dims[1] % hkv != 0)
        return err_set(e, ERR_INPUT, "%s: %lld heads do not group over %lld key/value heads", name,
                       (long long)k->dims[1], (long long)hkv);
    if (k->dims[7] && k->dims[2] != k->dims[3])
        return err_set(e, ERR_INPUT, "%s: packed qkv needs Tq == Tk (got %lld and %lld)", name,
                       (long long)k->dims[2], (long long)k->dims[3]);
    if (k->dims[7] && k->kernel != K_FLASH_BWD_PREP &&
        (k->tensors[0] != k->tensors[1] ||
         ((k->kernel == K_ATTN_BWD || k->kernel == K_FLASH_BWD) && k->tensors[4] != k->tensors[5])))
        return err_set(e, ERR_INPUT, "%s: packed qkv must be passed as both q and kv", name);
    return 0;
}

static int glu_check(const struct kernel_call *k, struct err *e)
{
    int bwd = k->kernel == K_GEGLU_BWD || k->kernel == K_SWIGLU_BWD;
    if (k->dims[2] && (k->tensors[0] != k->tensors[1] || (bwd && k->tensors[3] != k->tensors[4])))
        return err_set(e, ERR_INPUT, "%s: packed gate/up must be passed as both gate and up",
                       kernel_get(k->kernel)->name);
    return 0;
}

static int gn_check(const struct kernel_call *k, struct err *e)
{
    if (k->dims[1] % k->dims[3] != 0)
        return err_set(e, ERR_INPUT, "%s: %lld channels do not split into %lld groups",
                       kernel_get(k->kernel)->name, (long long)k->dims[1], (long long)k->dims[3]);
    return 0;
}

static int cast_check(const struct kernel_call *k, struct err *e)
{
    if (k->dims[1] != DT_F32 && k->dims[1] != DT_BF16 && k->dims[1] != DT_F16)
        return err_set(e, ERR_INPUT, "cast: destination dtype %lld is not fp32, bf16 or fp16",
                       (long long)k->dims[1]);
    return 0;
}

static int adamw_check(const struct kernel_call *k, struct err *e)
{
    float eps = kernel_adamw_eps(k);
    if (!(eps > 0.0f) || !isfinite(eps))
        return err_set(e, ERR_INPUT, "%s: eps (dims[2] bits) must be a positive float", kernel_get(k->kernel)->name);
    return 0;
}

static int dropout_check(const struct kernel_call *k, struct err *e)
{
    if (!(k->fparam[0] >= 0.0f && k->fparam[0] < 1.0f))
        return err_set(e, ERR_INPUT, "%s: p = %g is not in [0, 1)", kernel_get(k->kernel)->name, k->fparam[0]);
    return 0;
}

/* ---- kernels appended for the workload generator: sizes, FLOPs, bytes, checks ---- */

/* Broadcast kernels {outer, repeat, inner}: "f" tensors are outer x repeat x inner, "s" outer x inner. */
static uint64_t bcast_shape(const struct kernel_call *k, char s)
{
    return s == 'f' ? D(0) * D(1) * D(2) : D(0) * D(2);
}

#define BCAST_ELEMS(fn, shapes)                                              \
    static uint64_t fn(const struct kernel_call *k, unsigned i)              \
    {                                                                        \
        return bcast_shape(k, shapes[i]);                                    \
    }
BCAST_ELEMS(binary_bcast_elems, "fsf")
BCAST_ELEMS(expand_elems, "sf")
BCAST_ELEMS(reduce_sum_elems, "fs")

static uint64_t transpose_elems(const struct kernel_call *k, unsigned i)
{
    return D(0) * D(1) * D(2);
}

static uint64_t copy_blocks_elems(const struct kernel_call *k, unsigned i)
{
    return D(0) * (i == 0 ? D(2) : D(4));
}

static double copy_blocks_bytes(const struct kernel_call *k)
{
    return (double)D(0) * D(1) * dtype_size((enum dtype)k->dtype) * (k->dims[6] ? 3.0 : 2.0);
}

static int copy_blocks_check(const struct kernel_call *k, struct err *e)
{
    if (k->dims[3] + k->dims[1] > k->dims[2] || k->dims[5] + k->dims[1] > k->dims[4])
        return err_set(e, ERR_INPUT, "copy_blocks: a block of %lld at offsets %lld / %lld overruns strides %lld / %lld",
                       (long long)k->dims[1], (long long)k->dims[3], (long long)k->dims[5], (long long)k->dims[2],
                       (long long)k->dims[4]);
    return 0;
}

static uint64_t rope_elems(const struct kernel_call *k, unsigned i)
{
    return D(0) * D(1) * D(4);
}

static int rope_check(const struct kernel_call *k, struct err *e)
{
    if (k->dims[3] % 2 || k->dims[2] * k->dims[3] > k->dims[4])
        return err_set(e, ERR_INPUT, "rope: %lld heads of even size %lld must fit a row of %lld", (long long)k->dims[2],
                       (long long)k->dims[3], (long long)k->dims[4]);
    return 0;
}

ATTN_ELEMS(attn_bias_fwd_elems, AT_Q, AT_KV, AT_P, AT_P, AT_O)
ATTN_ELEMS(attn_dscores_elems, AT_KV, AT_P, AT_O, AT_P)

static double attn_bias_fwd_flops(const struct kernel_call *k)
{
    return attn_scores(k, 0) * (4.0 * D(4) + 6.0);
}

static double attn_dscores_flops(const struct kernel_call *k)
{
    return attn_scores(k, 0) * (2.0 * D(4) + 3.0);
}

/* attention shape rules for the appended kernels (no packed gradient pairs among their tensors) */
static int attn_extra_check(const struct kernel_call *k, struct err *e)
{
    const char *name = kernel_get(k->kernel)->name;
    int64_t hkv = k->dims[6] > 0 ? k->dims[6] : k->dims[1];
    if (k->dims[6] < 0 || k->dims[1] % hkv != 0)
        return err_set(e, ERR_INPUT, "%s: %lld heads do not group over %lld key/value heads", name,
                       (long long)k->dims[1], (long long)hkv);
    if (k->dims[7] && k->dims[2] != k->dims[3])
        return err_set(e, ERR_INPUT, "%s: packed qkv needs Tq == Tk (got %lld and %lld)", name,
                       (long long)k->dims[2], (long long)k->dims[3]);
    if (k->dims[7] && k->kernel == K_ATTN_BIAS_FWD && k->tensors[0] != k->tensors[1])
        return err_set(e, ERR_INPUT, "%s: packed qkv must be passed as both q and kv", name);
    return 0;
}

static uint64_t adafactor_elems(const struct kernel_call *k, unsigned i)
{
    if (i < 2)
        return D(0) * D(1);
    return D(1) > 1 ? D(0) + D(1) : D(0);
}

static int randint_check(const struct kernel_call *k, struct err *e)
{
    if (k->dims[2] > (int64_t)1 << 53)
        return err_set(e, ERR_INPUT, "randint: high = %lld is above 2^53", (long long)k->dims[2]);
    return 0;
}

/* ---- the table ---- */

#define IN TR_IN
#define OUT TR_OUT
#define IO TR_INOUT
#define T TD_CALL
#define F DT_F32
#define TOL_FLOAT {[DT_F32] = 1e-5, [DT_BF16] = 1e-2, [DT_F16] = 2e-3}
#define TOL_SUM {[DT_F32] = 1e-4, [DT_BF16] = 2e-2, [DT_F16] = 4e-3}

static const struct kernel_desc table[K_COUNT] = {
    [K_GEMM] = {"gemm", "batched matrix product with transposes (cuBLAS / OpenBLAS)",
                {"M", "N", "K", "transA", "transB", "batch"}, 0x07, 3, {"A", "B", "C"}, {IN, IN, OUT}, {T, T, T},
                gemm_elems, gemm_flops, gemm_bytes, int_dims_check, cpu_gemm, TOL_SUM},
    [K_CONV2D_FWD] = {"conv2d_fwd", "2-D convolution, NCHW, square filter (cuDNN / im2col + GEMM)",
                      {"N", "C", "H", "W", "K", "R", "stride", "pad"}, 0x7f, 3, {"x", "w", "y"}, {IN, IN, OUT},
                      {T, T, T}, conv_fwd_elems, conv_flops, generic_bytes, conv_check, cpu_conv2d_fwd, TOL_SUM},
    [K_CONV2D_BWD_DATA] = {"conv2d_bwd_data", "gradient of conv2d with respect to its input",
                           {"N", "C", "H", "W", "K", "R", "stride", "pad"}, 0x7f, 3, {"dy", "w", "dx"},
                           {IN, IN, OUT}, {T, T, T}, conv_bwd_data_elems, conv_flops, generic_bytes, conv_check,
                           cpu_conv2d_bwd_data, TOL_SUM},
    [K_CONV2D_BWD_FILTER] = {"conv2d_bwd_filter", "gradient of conv2d with respect to its filter",
                             {"N", "C", "H", "W", "K", "R", "stride", "pad"}, 0x7f, 3, {"x", "dy", "dw"},
                             {IN, IN, OUT}, {T, T, T}, conv_bwd_filter_elems, conv_flops, generic_bytes,
                             conv_check, cpu_conv2d_bwd_filter, TOL_SUM},
    [K_ATTN_FWD] = {"attn_fwd", "unfused attention: scores, mask, softmax (saved), times v",
                    {"B", "H", "Tq", "Tk", "D", "causal", "Hkv", "packed"}, 0x1f, 4, {"q", "kv", "p", "o"},
                    {IN, IN, OUT, OUT}, {T, T, T, T}, attn_fwd_elems, attn_fwd_flops, generic_bytes, attn_check,
                    cpu_attn_fwd, TOL_SUM},
    [K_ATTN_BWD] = {"attn_bwd", "unfused attention backward from the saved probabilities",
                    {"B", "H", "Tq", "Tk", "D", "causal", "Hkv", "packed"}, 0x1f, 6,
                    {"q", "kv", "p", "do", "dq", "dkv"}, {IN, IN, IN, IN, OUT, OUT}, {T, T, T, T, T, T},
                    attn_bwd_elems, attn_bwd_flops, generic_bytes, attn_check, cpu_attn_bwd, TOL_SUM},
    [K_FLASH_FWD] = {"flash_fwd", "fused memory-efficient attention: online softmax, saves log-sum-exp",
                     {"B", "H", "Tq", "Tk", "D", "causal", "Hkv", "packed"}, 0x1f, 4, {"q", "kv", "o", "lse"},
                     {IN, IN, OUT, OUT}, {T, T, T, F}, flash_fwd_elems, flash_fwd_flops, generic_bytes, attn_check,
                     cpu_flash_fwd, TOL_SUM},
    [K_FLASH_BWD_PREP] = {"flash_bwd_prep", "fused attention backward, pass 1: lse and rowsum(do * o) per row",
                          {"B", "H", "Tq", "Tk", "D", "causal", "Hkv", "packed"}, 0x1f, 4,
                          {"o", "do", "lse", "stats"}, {IN, IN, IN, OUT}, {T, T, F, F}, flash_prep_elems,
                          flash_prep_flops, generic_bytes, attn_check, cpu_flash_bwd_prep, TOL_SUM},
    [K_FLASH_BWD] = {"flash_bwd", "fused attention backward, pass 2: recomputes probabilities block by block",
                     {"B", "H", "Tq", "Tk", "D", "causal", "Hkv", "packed"}, 0x1f, 6,
                     {"q", "kv", "stats", "do", "dq", "dkv"}, {IN, IN, IN, IN, OUT, OUT}, {T, T, F, T, T, T},
                     flash_bwd_elems, flash_bwd_flops, generic_bytes, attn_check, cpu_flash_bwd, TOL_SUM},
    [K_SOFTMAX_FWD] = {"softmax_fwd", "softmax along rows", {"rows", "cols"}, 0x03, 2, {"x", "y"}, {IN, OUT},
                       {T, T}, softmax_elems, flops_5, generic_bytes, NULL, cpu_softmax_fwd, TOL_FLOAT},
    [K_SOFTMAX_BWD] = {"softmax_bwd", "softmax backward from its output", {"rows", "cols"}, 0x03, 3,
                       {"y", "dy", "dx"}, {IN, IN, OUT}, {T, T, T}, softmax_elems, flops_4, generic_bytes, NULL,
                       cpu_softmax_bwd, TOL_FLOAT},
    [K_LAYERNORM_FWD] = {"layernorm_fwd", "LayerNorm over the last dim, saves mean and rstd", {"rows", "C"},
                         0x03, 6, {"x", "gamma", "beta", "y", "mean", "rstd"}, {IN, IN, IN, OUT, OUT, OUT},
                         {T, T, T, T, F, F}, ln_fwd_elems, flops_8, generic_bytes, NULL, cpu_layernorm_fwd,
                         TOL_SUM},
    [K_LAYERNORM_BWD_DX] = {"layernorm_bwd_dx", "LayerNorm backward to the input", {"rows", "C"}, 0x03, 6,
                            {"dy", "x", "gamma", "mean", "rstd", "dx"}, {IN, IN, IN, IN, IN, OUT},
                            {T, T, T, F, F, T}, ln_bwd_dx_elems, flops_10, generic_bytes, NULL,
                            cpu_layernorm_bwd_dx, TOL_SUM},
    [K_LAYERNORM_BWD_PARAMS] = {"layernorm_bwd_params", "LayerNorm backward to gamma and beta", {"rows", "C"},
                                0x03, 6, {"dy", "x", "mean", "rstd", "dgamma", "dbeta"},
                                {IN, IN, IN, IN, OUT, OUT}, {T, T, F, F, T, T}, ln_bwd_params_elems, flops_4,
                                generic_bytes, NULL, cpu_layernorm_bwd_params, TOL_SUM},
    [K_RMSNORM_FWD] = {"rmsnorm_fwd", "RMSNorm over the last dim, saves rstd", {"rows", "C"}, 0x03, 4,
                       {"x", "gamma", "y", "rstd"}, {IN, IN, OUT, OUT}, {T, T, T, F}, rms_fwd_elems, flops_5,
                       generic_bytes, NULL, cpu_rmsnorm_fwd, TOL_SUM},
    [K_RMSNORM_BWD] = {"rmsnorm_bwd", "RMSNorm backward to the input and gamma", {"rows", "C"}, 0x03, 6,
                       {"dy", "x", "gamma", "rstd", "dx", "dgamma"}, {IN, IN, IN, IN, OUT, OUT},
                       {T, T, T, F, T, T}, rms_bwd_elems, flops_10, generic_bytes, NULL, cpu_rmsnorm_bwd,
                       TOL_SUM},
    [K_GROUPNORM_FWD] = {"groupnorm_fwd", "GroupNorm over channel groups, saves mean and rstd",
                         {"N", "C", "HW", "G"}, 0x0f, 6, {"x", "gamma", "beta", "y", "mean", "rstd"},
                         {IN, IN, IN, OUT, OUT, OUT}, {T, T, T, T, F, F}, gn_fwd_elems, flops_8, generic_bytes,
                         gn_check, cpu_groupnorm_fwd, TOL_SUM},
    [K_GROUPNORM_BWD_DX] = {"groupnorm_bwd_dx", "GroupNorm backward to the input", {"N", "C", "HW", "G"}, 0x0f,
                            6, {"dy", "x", "gamma", "mean", "rstd", "dx"}, {IN, IN, IN, IN, IN, OUT},
                            {T, T, T, F, F, T}, gn_bwd_dx_elems, flops_10, generic_bytes, gn_check,
                            cpu_groupnorm_bwd_dx, TOL_SUM},
    [K_GROUPNORM_BWD_PARAMS] = {"groupnorm_bwd_params", "GroupNorm backward to gamma and beta",
                                {"N", "C", "HW", "G"}, 0x0f, 6, {"dy", "x", "mean", "rstd", "dgamma", "dbeta"},
                                {IN, IN, IN, IN, OUT, OUT}, {T, T, F, F, T, T}, gn_bwd_params_elems, flops_4,
                                generic_bytes, gn_check, cpu_groupnorm_bwd_params, TOL_SUM},
    [K_GELU_FWD] = {"gelu_fwd", "GELU (approx 1: tanh, 0: erf)", {"n", "approx"}, 0x01, 2, {"x", "y"}, {IN, OUT},
                    {T, T}, flat_elems, flops_10, generic_bytes, NULL, cpu_gelu_fwd, TOL_FLOAT},
    [K_GELU_BWD] = {"gelu_bwd", "GELU backward", {"n", "approx"}, 0x01, 3, {"x", "dy", "dx"}, {IN, IN, OUT},
                    {T, T, T}, flat_elems, flops_15, generic_bytes, NULL, cpu_gelu_bwd, TOL_FLOAT},
    [K_SILU_FWD] = {"silu_fwd", "SiLU (swish)", {"n"}, 0x01, 2, {"x", "y"}, {IN, OUT}, {T, T}, flat_elems,
                    flops_5, generic_bytes, NULL, cpu_silu_fwd, TOL_FLOAT},
    [K_SILU_BWD] = {"silu_bwd", "SiLU backward", {"n"}, 0x01, 3, {"x", "dy", "dx"}, {IN, IN, OUT}, {T, T, T},
                    flat_elems, flops_8, generic_bytes, NULL, cpu_silu_bwd, TOL_FLOAT},
    [K_GEGLU_FWD] = {"geglu_fwd", "gated GELU: gelu(gate) * up", {"rows", "F", "packed", "approx"}, 0x03, 3,
                     {"gate", "up", "y"}, {IN, IN, OUT}, {T, T, T}, glu_elems, glu_fwd_flops, generic_bytes,
                     glu_check, cpu_geglu_fwd, TOL_FLOAT},
    [K_GEGLU_BWD] = {"geglu_bwd", "gated GELU backward", {"rows", "F", "packed", "approx"}, 0x03, 5,
                     {"gate", "up", "dy", "dgate", "dup"}, {IN, IN, IN, OUT, OUT}, {T, T, T, T, T}, glu_elems,
                     glu_bwd_flops, generic_bytes, glu_check, cpu_geglu_bwd, TOL_FLOAT},
    [K_SWIGLU_FWD] = {"swiglu_fwd", "gated SiLU: silu(gate) * up", {"rows", "F", "packed"}, 0x03, 3,
                      {"gate", "up", "y"}, {IN, IN, OUT}, {T, T, T}, glu_elems, glu_fwd_flops, generic_bytes,
                      glu_check, cpu_swiglu_fwd, TOL_FLOAT},
    [K_SWIGLU_BWD] = {"swiglu_bwd", "gated SiLU backward", {"rows", "F", "packed"}, 0x03, 5,
                      {"gate", "up", "dy", "dgate", "dup"}, {IN, IN, IN, OUT, OUT}, {T, T, T, T, T},
                      glu_elems, glu_bwd_flops, generic_bytes, glu_check, cpu_swiglu_bwd, TOL_FLOAT},
    [K_DROPOUT_FWD] = {"dropout_fwd", "dropout with a counter-based RNG, saves a byte mask", {"n", "seed"}, 0x01,
                       3, {"x", "y", "mask"}, {IN, OUT, OUT}, {T, T, DT_U8}, flat_elems, flops_3, generic_bytes,
                       dropout_check, cpu_dropout_fwd, TOL_FLOAT},
    [K_DROPOUT_BWD] = {"dropout_bwd", "dropout backward through the saved mask", {"n"}, 0x01, 3,
                       {"dy", "mask", "dx"}, {IN, IN, OUT}, {T, DT_U8, T}, flat_elems, flops_2, generic_bytes,
                       dropout_check, cpu_dropout_bwd, TOL_FLOAT},
    [K_CAST] = {"cast", "dtype conversion, round to nearest even", {"n", "dst_dtype"}, 0x01, 2, {"x", "y"},
                {IN, OUT}, {T, TD_DIMS1}, flat_elems, flops_1, generic_bytes, cast_check, cpu_cast,
                {[DT_F32] = 0, [DT_BF16] = 0, [DT_F16] = 0}},
    [K_ADD] = {"add", "y = alpha * a + beta * b", {"n"}, 0x01, 3, {"a", "b", "y"}, {IN, IN, OUT}, {T, T, T},
               flat_elems, flops_3, generic_bytes, NULL, cpu_add, TOL_FLOAT},
    [K_SCALE] = {"scale", "y = alpha * x", {"n"}, 0x01, 2, {"x", "y"}, {IN, OUT}, {T, T}, flat_elems, flops_1,
                 generic_bytes, NULL, cpu_scale, TOL_FLOAT},
    [K_FILL] = {"fill", "y = value", {"n"}, 0x01, 1, {"y"}, {OUT}, {T}, flat_elems, flops_0, generic_bytes, NULL,
                cpu_fill, TOL_FLOAT},
    [K_BIAS_ADD] = {"bias_add", "per-channel bias", {"outer", "C", "inner"}, 0x07, 3, {"x", "bias", "y"},
                    {IN, IN, OUT}, {T, T, T}, bias_elems, flops_1, generic_bytes, NULL, cpu_bias_add, TOL_FLOAT},
    [K_BIAS_BWD] = {"bias_bwd", "per-channel bias gradient (sum)", {"outer", "C", "inner"}, 0x07, 2,
                    {"dy", "dbias"}, {IN, OUT}, {T, T}, bias_elems, flops_1, generic_bytes, NULL, cpu_bias_bwd,
                    TOL_SUM},
    [K_ADAMW] = {"adamw", "AdamW step, fp32 moments", {"n", "step", "eps_bits"}, 0x03, 4,
                 {"param", "grad", "m", "v"}, {IO, IN, IO, IO}, {T, T, F, F}, flat_elems, flops_15, generic_bytes,
                 adamw_check, cpu_adamw, TOL_FLOAT},
    [K_ADAMW8] = {"adamw8", "8-bit block-wise AdamW, dynamic quantization", {"n", "step", "eps_bits", "block"},
                  0x0b, 6, {"param", "grad", "m", "v", "m_absmax", "v_absmax"}, {IO, IN, IO, IO, IO, IO},
                  {T, T, DT_U8, DT_U8, F, F}, adamw8_elems, flops_25, generic_bytes, adamw_check, cpu_adamw8,
                  {[DT_F32] = 0.05, [DT_BF16] = 0.05, [DT_F16] = 0.05}},
    [K_EMA] = {"ema", "shadow = decay * shadow + (1 - decay) * param", {"n"}, 0x01, 2, {"param", "shadow"},
               {IN, IO}, {T, T}, flat_elems, flops_3, generic_bytes, NULL, cpu_ema, TOL_FLOAT},
    [K_UPSAMPLE2X_FWD] = {"upsample2x_fwd", "nearest-neighbour 2x upsampling", {"N", "C", "H", "W"}, 0x0f, 2,
                          {"x", "y"}, {IN, OUT}, {T, T}, upsample_elems, flops_0, generic_bytes, NULL,
                          cpu_upsample2x_fwd, TOL_FLOAT},
    [K_UPSAMPLE2X_BWD] = {"upsample2x_bwd", "nearest 2x upsampling backward (sum of 4)", {"N", "C", "H", "W"},
                          0x0f, 2, {"dy", "dx"}, {IN, OUT}, {T, T}, upsample_elems, flops_1, generic_bytes, NULL,
                          cpu_upsample2x_bwd, TOL_FLOAT},
    [K_CROSS_ENTROPY_FWD] = {"cross_entropy_fwd", "cross-entropy per row from logits", {"rows", "V"}, 0x03, 4,
                             {"logits", "target", "loss", "lse"}, {IN, IN, OUT, OUT}, {T, DT_I64, F, F}, ce_fwd_elems,
                             flops_4, generic_bytes, NULL, cpu_cross_entropy_fwd, TOL_SUM},
    [K_CROSS_ENTROPY_BWD] = {"cross_entropy_bwd", "cross-entropy gradient to the logits", {"rows", "V"}, 0x03, 4,
                             {"logits", "target", "lse", "dlogits"}, {IN, IN, IN, OUT}, {T, DT_I64, F, T},
                             ce_bwd_elems, flops_4, generic_bytes, NULL, cpu_cross_entropy_bwd, TOL_FLOAT},
    [K_EMBEDDING_FWD] = {"embedding_fwd", "row lookup in a table", {"rows", "V", "C"}, 0x07, 3,
                         {"ids", "table", "y"}, {IN, IN, OUT}, {DT_I64, T, T}, embedding_elems, flops_0,
                         generic_bytes, NULL, cpu_embedding_fwd, TOL_FLOAT},
    [K_EMBEDDING_BWD] = {"embedding_bwd", "scatter-add of row gradients into the table", {"rows", "V", "C"},
                         0x07, 3, {"ids", "dy", "dtable"}, {IN, IN, OUT}, {DT_I64, T, T}, embedding_elems,
                         embedding_bwd_flops, generic_bytes, NULL, cpu_embedding_bwd, TOL_SUM},
    [K_MUL_BCAST] = {"mul_bcast", "y = a * b, b broadcast over the middle dim", {"outer", "repeat", "inner"}, 0x07, 3,
                     {"a", "b", "y"}, {IN, IN, OUT}, {T, T, T}, binary_bcast_elems, flops_1, generic_bytes, NULL,
                     cpu_mul_bcast, TOL_FLOAT},
    [K_ADD_BCAST] = {"add_bcast", "y = alpha * a + beta * b, b broadcast over the middle dim",
                     {"outer", "repeat", "inner"}, 0x07, 3, {"a", "b", "y"}, {IN, IN, OUT}, {T, T, T},
                     binary_bcast_elems, flops_3, generic_bytes, NULL, cpu_add_bcast, TOL_FLOAT},
    [K_EXPAND] = {"expand", "broadcast copy over the middle dim, times alpha", {"outer", "repeat", "inner"}, 0x07, 2,
                  {"x", "y"}, {IN, OUT}, {T, T}, expand_elems, flops_1, generic_bytes, NULL, cpu_expand, TOL_FLOAT},
    [K_REDUCE_SUM] = {"reduce_sum", "sum over the middle dim, times alpha", {"outer", "repeat", "inner"}, 0x07, 2,
                      {"x", "y"}, {IN, OUT}, {T, T}, reduce_sum_elems, flops_1, generic_bytes, NULL, cpu_reduce_sum,
                      TOL_SUM},
    [K_TRANSPOSE] = {"transpose", "swap the last two dims of each batch", {"batch", "rows", "cols"}, 0x07, 2,
                     {"x", "y"}, {IN, OUT}, {T, T}, transpose_elems, flops_0, generic_bytes, NULL, cpu_transpose,
                     TOL_FLOAT},
    [K_COPY_BLOCKS] = {"copy_blocks", "strided block copy (slice, concatenate), optionally accumulating",
                       {"outer", "len", "src_stride", "src_off", "dst_stride", "dst_off", "accumulate"}, 0x17, 2,
                       {"x", "y"}, {IN, IO}, {T, T}, copy_blocks_elems, flops_0, copy_blocks_bytes, copy_blocks_check,
                       cpu_copy_blocks, TOL_FLOAT},
    [K_RELU_FWD] = {"relu_fwd", "ReLU", {"n"}, 0x01, 2, {"x", "y"}, {IN, OUT}, {T, T}, flat_elems, flops_1,
                    generic_bytes, NULL, cpu_relu_fwd, TOL_FLOAT},
    [K_RELU_BWD] = {"relu_bwd", "ReLU backward", {"n"}, 0x01, 3, {"x", "dy", "dx"}, {IN, IN, OUT}, {T, T, T},
                    flat_elems, flops_1, generic_bytes, NULL, cpu_relu_bwd, TOL_FLOAT},
    [K_QUICK_GELU_FWD] = {"quick_gelu_fwd", "x * sigmoid(1.702 x) (CLIP)", {"n"}, 0x01, 2, {"x", "y"}, {IN, OUT},
                          {T, T}, flat_elems, flops_5, generic_bytes, NULL, cpu_quick_gelu_fwd, TOL_FLOAT},
    [K_QUICK_GELU_BWD] = {"quick_gelu_bwd", "quick GELU backward", {"n"}, 0x01, 3, {"x", "dy", "dx"},
                          {IN, IN, OUT}, {T, T, T}, flat_elems, flops_8, generic_bytes, NULL, cpu_quick_gelu_bwd,
                          TOL_FLOAT},
    [K_ROPE] = {"rope", "rotary position embedding of the first H heads of each row (inverse: backward)",
                {"B", "T", "H", "D", "row", "inverse"}, 0x1f, 2, {"x", "y"}, {IN, OUT}, {T, T}, rope_elems, flops_3,
                generic_bytes, rope_check, cpu_rope, TOL_FLOAT},
    [K_ATTN_BIAS_FWD] = {"attn_bias_fwd", "unfused attention with an additive score bias, saves probabilities",
                         {"B", "H", "Tq", "Tk", "D", "causal", "Hkv", "packed"}, 0x1f, 5, {"q", "kv", "bias", "p", "o"},
                         {IN, IN, IN, OUT, OUT}, {T, T, T, T, T}, attn_bias_fwd_elems, attn_bias_fwd_flops,
                         generic_bytes, attn_extra_check, cpu_attn_bias_fwd, TOL_SUM},
    [K_ATTN_DSCORES] = {"attn_dscores", "gradient of the attention scores (of an additive bias)",
                        {"B", "H", "Tq", "Tk", "D", "causal", "Hkv", "packed"}, 0x1f, 4, {"kv", "p", "do", "ds"},
                        {IN, IN, IN, OUT}, {T, T, T, T}, attn_dscores_elems, attn_dscores_flops, generic_bytes,
                        attn_extra_check, cpu_attn_dscores, TOL_SUM},
    [K_SGD] = {"sgd", "SGD step with momentum", {"n", "step"}, 0x03, 3, {"param", "grad", "buf"}, {IO, IN, IO},
               {T, T, T}, flat_elems, flops_5, generic_bytes, NULL, cpu_sgd, TOL_FLOAT},
    [K_ADAMW_T] = {"adamw_t", "AdamW step, moments in the parameter's dtype", {"n", "step", "eps_bits"}, 0x03, 4,
                   {"param", "grad", "m", "v"}, {IO, IN, IO, IO}, {T, T, T, T}, flat_elems, flops_15, generic_bytes,
                   adamw_check, cpu_adamw_t, {[DT_F32] = 1e-5, [DT_BF16] = 2e-2, [DT_F16] = 1e-2}},
    [K_ADAFACTOR] = {"adafactor", "Adafactor step, factored second moment", {"rows", "cols", "step"}, 0x07, 3,
                     {"param", "grad", "state"}, {IO, IN, IO}, {T, T, F}, adafactor_elems, flops_15, generic_bytes,
                     NULL, cpu_adafactor, TOL_SUM},
    [K_RAND_UNIFORM] = {"rand_uniform", "seeded uniform fill in [lo, hi)", {"n", "seed"}, 0x01, 1, {"y"}, {OUT},
                        {T}, flat_elems, flops_3, generic_bytes, NULL, cpu_rand_uniform, TOL_FLOAT},
    [K_RANDINT] = {"randint", "seeded integer fill in [0, high)", {"n", "seed", "high"}, 0x05, 1, {"y"}, {OUT},
                   {DT_I64}, flat_elems, flops_3, generic_bytes, randint_check, cpu_randint, TOL_FLOAT},
};

const struct kernel_desc *kernel_get(unsigned id)
{
    return id < K_COUNT ? &table[id] : NULL;
}

int kernel_from_name(const char *s)
{
    for (unsigned i = 0; i < K_COUNT; i++)
        if (strcmp(s, table[i].name) == 0)
            return (int)i;
    return -1;
}

unsigned kernel_count(void)
{
    return K_COUNT;
}

enum dtype kernel_tensor_dtype(const struct kernel_call *k, unsigned i)
{
    uint8_t d = table[k->kernel].dtypes[i];
    return d == TD_CALL ? (enum dtype)k->dtype : d == TD_DIMS1 ? (enum dtype)k->dims[1] : (enum dtype)d;
}

uint64_t kernel_tensor_bytes(const struct kernel_call *k, unsigned i)
{
    return table[k->kernel].elems(k, i) * dtype_size(kernel_tensor_dtype(k, i));
}

int kernel_validate(const struct kernel_call *k, struct err *e)
{
    if (k->kernel >= K_COUNT)
        return err_set(e, ERR_INPUT, "kernel id %u is not in the kernel table", k->kernel);
    const struct kernel_desc *kd = &table[k->kernel];
    if (k->ntensors != kd->ntensors)
        return err_set(e, ERR_INPUT, "%s: takes %u tensors, got %u", kd->name, kd->ntensors, k->ntensors);
    if (k->dtype != DT_F32 && k->dtype != DT_BF16 && k->dtype != DT_F16)
        return err_set(e, ERR_INPUT, "%s: dtype %s is not fp32, bf16 or fp16", kd->name,
                       dtype_name((enum dtype)k->dtype));
    for (unsigned i = 0; i < KERNEL_MAX_DIMS; i++) {
        if ((kd->positive_dims >> i & 1) && k->dims[i] < 1)
            return err_set(e, ERR_INPUT, "%s: %s = %lld must be at least 1", kd->name, kd->dim_names[i],
                           (long long)k->dims[i]);
        if (kd->dim_names[i] && k->dims[i] < 0)
            return err_set(e, ERR_INPUT, "%s: %s = %lld is negative", kd->name, kd->dim_names[i],
                           (long long)k->dims[i]);
    }
    return kd->check ? kd->check(k, e) : 0;
}

int kernel_run_cpu(const struct kernel_call *k, void *const *tensors, struct err *e)
{
    if (kernel_validate(k, e) < 0)
        return -1;
    for (unsigned i = 0; i < k->ntensors; i++)
        if (!tensors[i])
            return err_set(e, ERR_INPUT, "%s: tensor %s has no memory", table[k->kernel].name,
                           table[k->kernel].tensor_names[i]);
    return table[k->kernel].run_cpu(k, tensors, e);
}
