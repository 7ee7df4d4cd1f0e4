/* kernels_quant_test.c: K_DEQUANT against bitsandbytes' formats written out by hand: NF4 and FP4
 * codes two to a byte (element 2j in the high nibble), the signed dynamic map of a nested absmax, and
 * LLM.int8's rows (int8 * SCB / 127); LLM.int8's forward kernels (K_INT8_QUANT_ROWS, K_INT8_GEMM) on
 * small worked cases; and the tensor sizes the table gives a 4096 x 4096 weight. */
#include "kernels_test_util.h"

/* bitsandbytes get_4bit_type("nf4") and ("fp4") / 12, in code order */
static const double nf4[16] = {-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                               -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                               0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
                               0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0};
static const double fp4[16] = {0, 0.0625, 8, 12, 4, 6, 2, 3, -0.0, -0.0625, -8, -12, -4, -6, -2, -3};

static void test_four_bit(void)
{
    enum { N = 256, BLOCK = 64 };
    uint8_t q[N / 2];
    float absmax[N / BLOCK] = {1.0f, 0.5f, 2.0f, 0.25f};
    for (int j = 0; j < N / 2; j++)
        q[j] = (uint8_t)((j % 16) << 4 | (15 - j % 16));
    for (int kind = 0; kind < 2; kind++) {
        for (size_t t = 0; t < 3; t++) {
            int dt = test_dtypes[t];
            void *y = calloc(N, 4);
            struct kernel_call k = KCALL(K_DEQUANT, dt, N, BLOCK, kind);
            run(&k, (void *[]){q, absmax, y});
            double ref[N];
            for (int i = 0; i < N; i++) {
                int code = i % 2 ? 15 - (i / 2) % 16 : (i / 2) % 16;
                ref[i] = (kind == 0 ? nf4[code] : fp4[code] / 12.0) * absmax[i / BLOCK];
            }
            check_close(y, dt, ref, N, kernel_get(K_DEQUANT)->tol[dt],
                        kind == 0 ? "dequant nf4: code[nibble] * absmax" : "dequant fp4: code[nibble] / 12 * absmax");
            free(y);
        }
    }
}

static void test_eight_bit(void)
{
    enum { N = 512 };
    uint8_t q[N];
    float map[OOM_QMAP_SIZE], absmax[2] = {3.0f, 0.5f}, y[N];
    oom_qmap_fill(1, map);
    for (int i = 0; i < N; i++)
        q[i] = (uint8_t)(i * 7);
    struct kernel_call k = KCALL(K_DEQUANT, DT_F32, N, 256, OOM_DQ_DYNAMIC8);
    run(&k, (void *[]){q, absmax, y});
    double ref[N];
    for (int i = 0; i < N; i++)
        ref[i] = map[q[i]] * absmax[i / 256];
    check_close(y, DT_F32, ref, N, 1e-6, "dequant dynamic 8-bit: the signed map times the block's absmax");
    ok(map[0] < -0.9f && map[255] == 1.0f, "the signed dynamic map runs from %g to 1", map[0]);
    /* LLM.int8 rows: 3 rows of 4, SCB per row */
    int8_t cb[12] = {127, -127, 0, 64, 1, -1, 2, -2, 100, 50, -25, 0};
    float scb[3] = {2.54f, 127.0f, 1.0f}, w[12];
    struct kernel_call r = KCALL(K_DEQUANT, DT_F32, 12, 4, OOM_DQ_INT8_ROW);
    run(&r, (void *[]){cb, scb, w});
    double wref[12];
    for (int i = 0; i < 12; i++)
        wref[i] = cb[i] * (scb[i / 4] / 127.0);
    check_close(w, DT_F32, wref, 12, 1e-6, "dequant int8 rows: CB * SCB / 127");
}

/* LLM.int8's forward on a 3 x 5 activation and a 2 x 5 weight, against the definitions. */
static void test_int8_forward(void)
{
    float x[15] = {1, -2, 0.5f, 4, -4, 0, 0, 0, 0, 0, 3, 2, 1, -1, -0.25f}, sx[3], w[10] = {2, 0, -2, 1, 1, -1, 1, 0, 0, 4};
    uint8_t qx[15], qw[10];
    float sw[2];
    struct kernel_call q = KCALL(K_INT8_QUANT_ROWS, DT_F32, 3, 5);
    run(&q, (void *[]){x, qx, sx});
    q.dims[0] = 2;
    run(&q, (void *[]){w, qw, sw});
    ok(sx[0] == 4 && sx[1] == 0 && sx[2] == 3 && sw[0] == 2 && sw[1] == 4, "int8 quant: each row's absmax");
    ok((int8_t)qx[3] == 127 && (int8_t)qx[4] == -127 && (int8_t)qx[1] == -64 && (int8_t)qx[2] == 16 &&
           qx[5] == 0 && (int8_t)qx[14] == -11,
       "int8 quant: round(x * 127 / absmax): 4 -> 127, -2 -> -64 (-63.5 to even), 0.5 -> 16, -0.25 of 3 -> -11");
    float acc[6], y[6];
    struct kernel_call g = KCALL(K_INT8_GEMM, DT_F32, 3, 2, 5);
    run(&g, (void *[]){qx, qw, sx, sw, acc, y});
    double ref[6], exact = 0;
    int sums = 1;
    for (int m = 0; m < 3; m++)
        for (int n = 0; n < 2; n++) {
            int32_t s = 0;
            double d = 0;
            for (int k = 0; k < 5; k++) {
                s += (int8_t)qx[m * 5 + k] * (int8_t)qw[n * 5 + k];
                d += (double)x[m * 5 + k] * w[n * 5 + k];
            }
            sums = sums && acc[m * 2 + n] == (float)s;
            ref[m * 2 + n] = s * (double)sx[m] * sw[n] / (127.0 * 127.0);
            exact = fmax(exact, fabs(ref[m * 2 + n] - d));
        }
    ok(sums, "int8 gemm: acc holds the int32 sums of the products");
    check_close(y, DT_F32, ref, 6, 1e-6, "int8 gemm: acc * absmax_a * absmax_b / 127^2");
    ok(exact < 0.1, "and that is x w^T within the int8 rounding (%.3g)", exact);
    ok(kernel_tensor_bytes(&g, 4) == 24 && kernel_tensor_bytes(&g, 2) == 12 && kernel_tensor_bytes(&g, 3) == 8,
       "int8 gemm: acc 4 bytes an output (int32), absmax 4 bytes a row");
}

static void test_sizes(void)
{
    /* one 4096 x 4096 weight, blocks of 64: 8,388,608 packed bytes and 262,144 fp32 absmax */
    struct kernel_call k = KCALL(K_DEQUANT, DT_BF16, 4096 * 4096, 64, OOM_DQ_NF4);
    ok(kernel_tensor_bytes(&k, 0) == 8388608 && kernel_tensor_bytes(&k, 1) == 1048576 &&
           kernel_tensor_bytes(&k, 2) == 33554432,
       "nf4 4096 x 4096: codes 8,388,608 B, absmax 1,048,576 B, bf16 output 33,554,432 B (got %llu, %llu, %llu)",
       (unsigned long long)kernel_tensor_bytes(&k, 0), (unsigned long long)kernel_tensor_bytes(&k, 1),
       (unsigned long long)kernel_tensor_bytes(&k, 2));
    /* the nested absmax: 262,144 uint8 codes, 1,024 fp32 absmax in blocks of 256 */
    k = KCALL(K_DEQUANT, DT_F32, 262144, 256, OOM_DQ_DYNAMIC8);
    ok(kernel_tensor_bytes(&k, 0) == 262144 && kernel_tensor_bytes(&k, 1) == 4096,
       "its nested absmax: 262,144 B of codes, 4,096 B of fp32 absmax");
    /* an odd count rounds the packed codes up */
    k = KCALL(K_DEQUANT, DT_F32, 129, 64, OOM_DQ_FP4);
    ok(kernel_tensor_bytes(&k, 0) == 65 && kernel_tensor_bytes(&k, 1) == 12, "129 fp4 values: 65 B, 3 blocks");
    /* LLM.int8's 4096 x 4096 weight dequantized for grad_A: CB 16,777,216 B, SCB 16,384 B */
    k = KCALL(K_DEQUANT, DT_BF16, 4096 * 4096, 4096, OOM_DQ_INT8_ROW);
    ok(kernel_tensor_bytes(&k, 0) == 16777216 && kernel_tensor_bytes(&k, 1) == 16384,
       "int8 4096 x 4096: CB 16,777,216 B and SCB 16,384 B");
    struct err e = {0};
    k = KCALL(K_DEQUANT, DT_F32, 64, 64, 7);
    ok(kernel_validate(&k, &e) < 0 && strstr(e.msg, "dequant: kind 7"), "an unknown kind is refused: %s", e.msg);
}

int main(void)
{
    test_four_bit();
    test_eight_bit();
    test_int8_forward();
    test_sizes();
    return done_testing();
}
