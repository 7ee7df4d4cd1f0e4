/* kernel_table.c: the kernel table, kernel_list.def's rows: per kernel its dims and tensors, tensor
 * sizes, FLOP and byte counts for the roofline, shape checks, tolerances and CPU implementation (see
 * kernels.h); the functions the rows name, and the table's lookups and checks. */
#include "kernels.h"

#include <math.h>

#include "cpu/blas.h"
#include "cpu/cpu_kernels.h"
#include "elementwise.h"

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
ATTN_ELEMS(attn_bias_fwd_elems, AT_Q, AT_KV, AT_P, AT_P, AT_O)
ATTN_ELEMS(attn_dscores_elems, AT_KV, AT_P, AT_O, AT_P)

/* fn: the size of tensor i is shape(k, shapes[i]), one letter per tensor. */
#define SHAPE_ELEMS(fn, shape, shapes)                                       \
    static uint64_t fn(const struct kernel_call *k, unsigned i)              \
    {                                                                        \
        return shape(k, shapes[i]);                                          \
    }

/* Row kernels: "x" tensors are rows x C, "p" tensors C (params), "r" tensors rows (stats). */
static uint64_t row_shape(const struct kernel_call *k, char s)
{
    return s == 'x' ? D(0) * D(1) : s == 'p' ? D(1) : D(0);
}

#define ROW_ELEMS(fn, shapes) SHAPE_ELEMS(fn, row_shape, shapes)
ROW_ELEMS(softmax_elems, "xxx")
ROW_ELEMS(ln_fwd_elems, "xppxrr")
ROW_ELEMS(ln_bwd_dx_elems, "xxprrx")
ROW_ELEMS(ln_bwd_params_elems, "xxrrpp")
ROW_ELEMS(rms_fwd_elems, "xpxr")
ROW_ELEMS(rms_bwd_elems, "xxprxp")
ROW_ELEMS(ce_fwd_elems, "xrrr")
ROW_ELEMS(ce_bwd_elems, "xrrx")
ROW_ELEMS(row_norm_elems, "xr")

/* GroupNorm: "x" N*C*HW, "p" C, "r" N*G. */
static uint64_t gn_shape(const struct kernel_call *k, char s)
{
    return s == 'x' ? D(0) * D(1) * D(2) : s == 'p' ? D(1) : D(0) * D(3);
}

#define GN_ELEMS(fn, shapes) SHAPE_ELEMS(fn, gn_shape, shapes)
GN_ELEMS(gn_fwd_elems, "xppxrr")
GN_ELEMS(gn_bwd_dx_elems, "xxprrx")
GN_ELEMS(gn_bwd_params_elems, "xxrrpp")

static uint64_t flat_elems(const struct kernel_call *k, unsigned i)
{
    return D(0);
}

/* K_EYE: y [n, n]. */
static uint64_t eye_elems(const struct kernel_call *k, unsigned i)
{
    return D(0) * D(0);
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

/* K_DEQUANT: 4-bit codes two to a byte, 8-bit ones one each; one absmax per block. */
static uint64_t dequant_elems(const struct kernel_call *k, unsigned i)
{
    int four = k->dims[2] == OOM_DQ_NF4 || k->dims[2] == OOM_DQ_FP4;
    if (i == 0)
        return four ? (D(0) + 1) / 2 : D(0);
    return i == 1 ? (D(0) + D(1) - 1) / D(1) : D(0);
}

/* K_INT8_QUANT_ROWS: x and q [rows, cols], one absmax a row. */
static uint64_t int8_quant_elems(const struct kernel_call *k, unsigned i)
{
    return i == 2 ? D(0) : D(0) * D(1);
}

/* K_INT8_GEMM: a [M, K], b [N, K], their row absmax [M] and [N], acc and y [M, N]. */
static uint64_t int8_gemm_elems(const struct kernel_call *k, unsigned i)
{
    static const int dims[4][2] = {{0, 2}, {1, 2}, {0, -1}, {1, -1}};
    if (i >= 4)
        return D(0) * D(1);
    return D(dims[i][0]) * (dims[i][1] < 0 ? 1 : D(dims[i][1]));
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

static uint64_t adafactor_elems(const struct kernel_call *k, unsigned i)
{
    if (i < 2)
        return D(0) * D(1);
    return D(1) > 1 ? D(0) + D(1) : D(0);
}

/* Broadcast kernels {outer, repeat, inner}: "f" tensors are outer x repeat x inner, "s" outer x inner. */
static uint64_t bcast_shape(const struct kernel_call *k, char s)
{
    return s == 'f' ? D(0) * D(1) * D(2) : D(0) * D(2);
}

#define BCAST_ELEMS(fn, shapes) SHAPE_ELEMS(fn, bcast_shape, shapes)
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

static uint64_t rope_elems(const struct kernel_call *k, unsigned i)
{
    return D(0) * D(1) * D(4);
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

static double attn_bias_fwd_flops(const struct kernel_call *k)
{
    return attn_scores(k, 0) * (4.0 * D(4) + 6.0);
}

static double attn_dscores_flops(const struct kernel_call *k)
{
    return attn_scores(k, 0) * (2.0 * D(4) + 3.0);
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

/* Each distinct tensor once (a tensor named twice, in place, is read and written once), read if any of its
 * roles reads it and written if any writes it: a repeat adds its roles to the first occurrence's. */
static double generic_bytes(const struct kernel_call *k)
{
    enum { READ = 1, WRITE = 2 };
    static const uint8_t access[] = {[TR_IN] = READ, [TR_OUT] = WRITE, [TR_INOUT] = READ | WRITE};
    static const double passes[] = {0, 1, 1, 2}; /* by access bits */
    const struct kernel_desc *kd = kernel_get(k->kernel);
    const unsigned n = kd->ntensors;
    uint8_t rw[KERNEL_MAX_TENSORS]; /* access bits; 0 for a repeat */
    for (unsigned i = 0; i < n; i++) {
        unsigned j = 0;
        while (k->tensors[j] != k->tensors[i])
            j++;
        rw[i] = 0;
        rw[j] |= access[kd->roles[i]];
    }
    double total = 0;
    for (unsigned i = 0; i < n; i++)
        if (rw[i])
            total += (double)kernel_tensor_bytes(k, i) * passes[rw[i]];
    return total;
}

static double gemm_bytes(const struct kernel_call *k)
{
    double c = k->fparam[1] != 0.0f ? (double)kernel_tensor_bytes(k, 2) : 0.0;
    return generic_bytes(k) + c;
}

static double copy_blocks_bytes(const struct kernel_call *k)
{
    return (double)D(0) * D(1) * dtype_size((enum dtype)k->dtype) * (k->dims[6] ? 3.0 : 2.0);
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

/* Attention kernels: key/value heads group the query heads; a packed qkv is square and, where the
 * kernel takes q (all but flash_bwd_prep and attn_dscores), passed as both q and kv, and where it
 * writes dq (the backward kernels) its gradient as both dq and dkv. */
static int attn_check(const struct kernel_call *k, struct err *e)
{
    const char *name = kernel_get(k->kernel)->name;
    const int takes_q = k->kernel != K_FLASH_BWD_PREP && k->kernel != K_ATTN_DSCORES;
    const int writes_dq = k->kernel == K_ATTN_BWD || k->kernel == K_FLASH_BWD;
    int64_t hkv = k->dims[6] > 0 ? k->dims[6] : k->dims[1];
    if (k->dims[6] < 0 || k->dims[1] % hkv != 0)
        return err_set(e, ERR_INPUT, "%s: %lld heads do not group over %lld key/value heads", name,
                       (long long)k->dims[1], (long long)hkv);
    if (k->dims[7] && k->dims[2] != k->dims[3])
        return err_set(e, ERR_INPUT, "%s: packed qkv needs Tq == Tk (got %lld and %lld)", name,
                       (long long)k->dims[2], (long long)k->dims[3]);
    if (k->dims[7] && takes_q && (k->tensors[0] != k->tensors[1] || (writes_dq && k->tensors[4] != k->tensors[5])))
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

static int copy_blocks_check(const struct kernel_call *k, struct err *e)
{
    if (k->dims[3] + k->dims[1] > k->dims[2] || k->dims[5] + k->dims[1] > k->dims[4])
        return err_set(e, ERR_INPUT, "copy_blocks: a block of %lld at offsets %lld / %lld overruns strides %lld / %lld",
                       (long long)k->dims[1], (long long)k->dims[3], (long long)k->dims[5], (long long)k->dims[2],
                       (long long)k->dims[4]);
    return 0;
}

static int rope_check(const struct kernel_call *k, struct err *e)
{
    if (k->dims[3] % 2 || k->dims[2] * k->dims[3] > k->dims[4])
        return err_set(e, ERR_INPUT, "rope: %lld heads of even size %lld must fit a row of %lld", (long long)k->dims[2],
                       (long long)k->dims[3], (long long)k->dims[4]);
    return 0;
}

static int randint_check(const struct kernel_call *k, struct err *e)
{
    if (k->dims[2] > (int64_t)1 << 53)
        return err_set(e, ERR_INPUT, "randint: high = %lld is above 2^53", (long long)k->dims[2]);
    return 0;
}

static int dequant_check(const struct kernel_call *k, struct err *e)
{
    if (k->dims[2] < 0 || k->dims[2] >= OOM_DQ_KINDS)
        return err_set(e, ERR_INPUT, "dequant: kind %lld is not 0 (nf4), 1 (fp4), 2 (dynamic 8-bit) or 3 (int8 rows)",
                       (long long)k->dims[2]);
    return 0;
}

/* ---- the table ---- */

/* The abbreviations kernel_list.def's rows use. */
#define IN TR_IN
#define OUT TR_OUT
#define IO TR_INOUT
#define T TD_CALL
#define F DT_F32
#define TOL_FLOAT {[DT_F32] = 1e-5, [DT_BF16] = 1e-2, [DT_F16] = 2e-3}
#define TOL_SUM {[DT_F32] = 1e-4, [DT_BF16] = 2e-2, [DT_F16] = 4e-3}

/* Each row of kernel_list.def with its CPU code, cpu_<name>. */
static const struct kernel_desc table[K_COUNT] = {
#define KERNEL(id, name, ...) [K_##id] = {#name, __VA_ARGS__, cpu_##name},
#include "kernel_list.def"
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

struct kernel_cost kernel_cost(const struct kernel_call *k)
{
    return (struct kernel_cost){.flops = table[k->kernel].flops(k), .bytes = table[k->kernel].bytes(k)};
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

int kernel_cpu_load(struct err *e)
{
    return blas_load(e);
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
