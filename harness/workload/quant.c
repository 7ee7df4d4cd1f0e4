/* quant.c: bitsandbytes' quantized weights (transformers' BitsAndBytesConfig: load_in_4bit, or
 * load_in_8bit's LLM.int8) as the decoder's linear layers hold and use them.
 *
 * Which: replace_with_bnb_linear (transformers integrations/bitsandbytes.py) swaps every nn.Linear for
 * bnb.nn.Linear4bit except the modules get_keys_to_not_convert returns (the output embedding,
 * lm_head); embeddings and norms are not Linear and stay in the load dtype.
 * Sizes (bitsandbytes functional.py quantize_4bit, QuantState): the codes packed two to a uint8,
 * (n + 1) / 2 bytes; an fp32 absmax per block of `blocksize`; with compress_statistics (double
 * quantization) the absmax minus its mean (offset, a 0-d fp32 tensor) goes through
 * quantize_blockwise with blocks of 256: uint8 codes per block, an fp32 absmax per 256 blocks, and
 * a copy of the 256-entry dynamic map (code.to(device, copy=True)); each QuantState also holds its
 * own 16-entry code table (get_4bit_type).
 * Use (autograd/_functions.py MatMul4Bit): forward runs F.linear(A, dequantize_4bit(B, state).to(A.dtype).t()),
 * the dequantized weight a temporary of the full size freed after the matmul; it saves the quantized
 * B (ctx.tensors = (None, B)), not the dequantized weight, and backward dequantizes again for grad_A.
 * dequantize_4bit: with nested statistics, absmax = dequantize_blockwise(absmax, state2) (a new fp32
 * tensor of one value per block) + offset, then the output of quant_state.dtype. Linear4bit.forward
 * casts its input to compute_dtype and its output back to the input's dtype.
 * LLM.int8 (nn/modules.py Int8Params._quantize, Linear8bitLt; autograd/_functions.py MatMul8bitLt):
 * the weight lands as fp16 and int8_vectorwise_quant makes CB (int8, the weight's shape) and SCB (fp32,
 * one absmax a row). Forward: A.to(float16), its int8 codes CA and row absmax SCA, the int32 product
 * and its fp16 dequantization (int8_scaled_mm with dtype=A.dtype: cast to A's dtype when that is not
 * fp16); ctx.tensors = (CAt, subA, A) keeps A. Backward: CB.to(A.dtype, copy=True).mul_(SCB / 127), the
 * dequantized weight a temporary, times grad_output. Not modelled: the outlier columns above
 * llm_int8_threshold (they depend on the data; taken as none) and SCB / 127's [rows] temporary. */
#include "workload/gen.h"

#include <math.h>
#include <string.h>

#include "elementwise.h"

#define NESTED_BLOCK 256 /* quantize_blockwise's blocksize for the nested absmax */
#define CODE4_SIZE 16    /* get_4bit_type */
#define DYNMAP_SIZE 256  /* create_dynamic_map */

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

bool quant_applies(const struct gen *g)
{
    return g->spec.quant.type != QUANT_NONE && g->module_id == 0 && !g->in_head;
}

static int64_t dequant_kind(const struct gen *g)
{
    return g->spec.quant.type == QUANT_FP4 ? OOM_DQ_FP4 : OOM_DQ_NF4;
}

static tref state_tensor(struct gen *g, const struct param *p, int64_t n, enum dtype dt)
{
    tref x = t_new2(g, n, 1, dt, CAT_PARAM, p->tag);
    if (dt != DT_U8)
        kern_fill(g, x, 0.0f, p->module);
    return x;
}

/* Int8Params._quantize: the fp16 weight on the device, CB and SCB from it. */
static void int8_load(struct gen *g, struct param *p)
{
    tref w = t_new2(g, p->dims[0], p->dims[1], DT_F16, CAT_TEMP, p->tag);
    float bound = 1.0f / sqrtf((float)p->dims[1]);
    kern_init_uniform(g, w, -bound, bound, p->module);
    p->data = t_new2(g, p->dims[0], p->dims[1], DT_U8, CAT_PARAM, p->tag);
    p->qstate[0] = t_new2(g, p->dims[0], 1, DT_F32, CAT_PARAM, p->tag);
    int64_t d[2] = {p->dims[0], p->dims[1]};
    tref ts[3] = {w, p->data, p->qstate[0]};
    kern(g, K_INT8_QUANT_ROWS, DT_F16, d, 2, ts, 3, NULL, 0, p->module);
    t_release(g, w);
}

/* Params4bit._quantize: the checkpoint's 16-bit weight lands on the device and quantize_4bit packs it.
 * The codes stand for a quantized checkpoint, read under a zero absmax (no quantize kernel is
 * modelled: the dequantized weights are zeros), as the 8-bit optimizer's fresh state is. */
void quant_load(struct gen *g, struct param *p, enum dtype load_dtype)
{
    const struct quant_spec *q = &g->spec.quant;
    if (q->type == QUANT_INT8) {
        int8_load(g, p);
        return;
    }
    int64_t n = p->numel, blocks = ceil_div(n, q->blocksize);
    tref w = t_new2(g, p->dims[0], p->dims[1], load_dtype, CAT_TEMP, p->tag);
    float bound = 1.0f / sqrtf((float)p->dims[1]);
    kern_init_uniform(g, w, -bound, bound, p->module);
    p->data = state_tensor(g, p, ceil_div(n, 2), DT_U8);
    tref absmax = state_tensor(g, p, blocks, DT_F32);
    p->qstate[3] = state_tensor(g, p, CODE4_SIZE, DT_F32);
    if (q->double_quant) {
        p->qstate[2] = state_tensor(g, p, 1, DT_F32); /* offset = absmax.mean() */
        p->qstate[0] = state_tensor(g, p, blocks, DT_U8);
        p->qstate[1] = state_tensor(g, p, ceil_div(blocks, NESTED_BLOCK), DT_F32);
        p->qstate[4] = state_tensor(g, p, DYNMAP_SIZE, DT_F32);
        t_release(g, absmax); /* del absmax: the fp32 statistics are replaced by their codes */
    } else {
        p->qstate[0] = absmax;
    }
    t_release(g, w);
}

tref quant_weight(struct gen *g, int32_t pi, enum dtype dt, const char *tag)
{
    struct param *p = &g->params[pi];
    const struct quant_spec *q = &g->spec.quant;
    if (q->type == QUANT_INT8) { /* CB.to(A.dtype, copy=True).mul_(SCB.unsqueeze(1) / 127) */
        tref w = t_new2(g, p->dims[0], p->dims[1], dt, CAT_TEMP, tag);
        int64_t d[3] = {p->numel, p->dims[1], OOM_DQ_INT8_ROW};
        tref ts[3] = {p->data, p->qstate[0], w};
        kern(g, K_DEQUANT, dt, d, 3, ts, 3, NULL, 0, tag);
        return w;
    }
    int64_t n = p->numel, blocks = ceil_div(n, q->blocksize);
    tref absmax = p->qstate[0];
    if (q->double_quant) { /* dequantize_blockwise(absmax, state2) + offset: a new fp32 tensor */
        absmax = t_new2(g, blocks, 1, DT_F32, CAT_TEMP, tag);
        int64_t d[3] = {blocks, NESTED_BLOCK, OOM_DQ_DYNAMIC8};
        tref ts[3] = {p->qstate[0], p->qstate[1], absmax};
        kern(g, K_DEQUANT, DT_F32, d, 3, ts, 3, NULL, 0, tag);
        int64_t ori[3] = {1, blocks, 1}; /* the 0-d offset broadcast over every block */
        kern_bcast(g, K_ADD_BCAST, absmax, p->qstate[2], absmax, ori, 1.0f, 1.0f, tag);
    }
    enum dtype state_dt = g->spec.load_dtype; /* QuantState.dtype: the weight's when it was quantized */
    tref w = t_new2(g, p->dims[0], p->dims[1], state_dt, CAT_TEMP, tag);
    int64_t d[3] = {n, q->blocksize, dequant_kind(g)};
    tref ts[3] = {p->data, absmax, w};
    kern(g, K_DEQUANT, state_dt, d, 3, ts, 3, NULL, 0, tag);
    if (absmax != p->qstate[0])
        t_release(g, absmax);
    if (state_dt != dt) { /* .to(A.dtype) */
        tref c = t_new2(g, p->dims[0], p->dims[1], dt, CAT_TEMP, tag);
        kern_cast(g, w, c, tag);
        t_release(g, w);
        w = c;
    }
    return w;
}

tref quant_int8_forward(struct gen *g, const char *tag, tref x, int32_t pw, tref *saved)
{
    struct param *p = &g->params[pw];
    enum dtype ad = (enum dtype)g->t[x].dtype;
    int64_t out_f = p->dims[0], in_f = p->dims[1], m = t_numel(g, x) / in_f;
    tref xh = t_ref(g, x);
    if (ad != DT_F16) { /* A.to(torch.float16) */
        t_release(g, xh);
        xh = t_like(g, x, DT_F16, CAT_TEMP, tag);
        kern_cast(g, x, xh, tag);
    }
    tref ca = t_new2(g, m, in_f, DT_U8, CAT_TEMP, tag), sca = t_new2(g, m, 1, DT_F32, CAT_TEMP, tag);
    int64_t qd[2] = {m, in_f};
    tref qt[3] = {xh, ca, sca};
    kern(g, K_INT8_QUANT_ROWS, DT_F16, qd, 2, qt, 3, NULL, 0, tag);
    t_release(g, xh);
    int64_t dims[TMAX_DIMS];
    memcpy(dims, g->t[x].dims, sizeof dims);
    dims[g->t[x].ndim - 1] = out_f;
    tref acc = t_new2(g, m, out_f, DT_F32, CAT_TEMP, tag); /* int8_linear_matmul's int32 product */
    tref y = t_new(g, dims, g->t[x].ndim, DT_F16, CAT_ACTIVATION, tag);
    int64_t gd[3] = {m, out_f, in_f};
    tref gt[6] = {ca, p->data, sca, p->qstate[0], acc, y};
    kern(g, K_INT8_GEMM, DT_F16, gd, 3, gt, 6, NULL, 0, tag);
    t_release(g, acc);
    t_release(g, ca);
    t_release(g, sca);
    if (ad != DT_F16) { /* int8_mm_dequant's fp16 output .to(dtype) */
        tref c = t_like(g, y, ad, CAT_ACTIVATION, tag);
        kern_cast(g, y, c, tag);
        t_release(g, y);
        y = c;
    }
    *saved = x;
    return y;
}

/* prepare_model_for_kbit_training (peft utils/other.py): every fp16/bf16 parameter that is not a
 * Params4bit is cast to fp32 (param.data = param.data.to(torch.float32)): embeddings, norms, lm_head. */
void quant_prepare_kbit(struct gen *g, int32_t first, int32_t count)
{
    if (g->spec.quant.type == QUANT_NONE || !g->spec.quant.prepare_kbit)
        return;
    for (int32_t i = first; i < first + count; i++) {
        struct param *p = &g->params[i];
        if (p->quant || p->data == TNONE || g->t[p->data].dtype == DT_F32)
            continue;
        tref nw = t_new2(g, p->dims[0], p->dims[1], DT_F32, CAT_PARAM, p->tag);
        kern_cast(g, p->data, nw, p->module);
        t_release(g, p->data);
        p->data = nw;
    }
}

int quant_spec_check(const struct job_spec *s, struct err *e)
{
    const struct quant_spec *q = &s->quant;
    if (q->type == QUANT_NONE)
        return 0;
    if (s->model.family != FAMILY_DECODER)
        return err_set(e, ERR_INPUT, "quantization: modelled for the decoder family only (model is %s)",
                       family_name(s->model.family));
    if (s->trainable == TRAIN_FULL)
        return err_set(e, ERR_INPUT, "quantization: a quantized base is frozen (Params4bit and Int8Params have no "
                                     "gradient): use trainable: lora");
    int b = q->blocksize;
    if (b < 64 || b > 4096 || (b & (b - 1)))
        return err_set(e, ERR_INPUT, "quantization.blocksize: one of 64, 128, ..., 4096 (got %d)", b);
    return 0;
}
