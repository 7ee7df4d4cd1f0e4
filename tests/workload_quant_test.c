/* workload_quant_test.c: quantized weights and LoRA targets in the generator's op program, with
 * numbers worked out here from bitsandbytes' and PEFT's sources: the allocations of one 4096 x 4096
 * NF4 weight with and without double quantization, its dequantized temporary in forward and again in
 * backward, LLM.int8's weights and temporaries, trainable counts of LoRA targets on Llama-3-8B, lora_dropout's mask, paged optimizer state
 * in unified memory, DoRA's magnitude vectors and weight-norm temporaries, and bad settings refused with
 * the key named. */
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "kernels.h"
#include "elementwise.h"
#include "workload/generate.h"

#define MAX_OPS 400000

struct rec_op {
    enum op_kind kind;
    uint8_t category;
    uint64_t id, bytes;
    char name[128];
    char phase[16];
    struct kernel_call k;
};

struct rec_sink {
    struct op_sink base;
    struct rec_op *ops;
    size_t n;
    char phase[16];
};

static int rec_emit(struct op_sink *sink, const struct op *op, struct err *e)
{
    struct rec_sink *r = (struct rec_sink *)sink;
    if (op->kind == OP_PHASE)
        snprintf(r->phase, sizeof r->phase, "%s", op->name);
    if (r->n == MAX_OPS)
        return err_set(e, ERR_INTERNAL, "test sink full");
    struct rec_op *o = &r->ops[r->n++];
    o->kind = op->kind;
    o->category = op->category;
    o->id = op->id;
    o->bytes = op->bytes;
    snprintf(o->name, sizeof o->name, "%s", op->name ? op->name : "");
    snprintf(o->phase, sizeof o->phase, "%s", r->phase);
    o->k = op->kernel;
    return 0;
}

/* The job's op program into r (r->ops freed and NULL when it fails, with the reason in the diagnostics). */
static int record(const struct job_spec *s, struct rec_sink *r, struct err *e)
{
    memset(r, 0, sizeof *r);
    r->base.emit = rec_emit;
    r->ops = calloc(MAX_OPS, sizeof *r->ops);
    if (r->ops && workload_generate(s, &r->base, e) == 0)
        return 0;
    diag("generate failed: %s", e->msg);
    free(r->ops);
    r->ops = NULL;
    return -1;
}

/* One Llama-style layer with Llama-3-8B's widths, a small vocabulary, QLoRA on q and v. */
static void qlora_layer(struct job_spec *s, bool double_quant)
{
    job_spec_init(s);
    snprintf(s->model.preset, sizeof s->model.preset, "llama-3-8b");
    struct err e = {0};
    preset_apply(&s->model, "llama-3-8b", &e);
    s->model.preset[0] = 0;
    s->model.layers = 1;
    s->model.vocab = 256;
    s->load_dtype = s->param_dtype = DT_BF16;
    s->batch = 1;
    s->seq_len = 16;
    s->trainable = TRAIN_LORA;
    s->lora_rank = 16;
    s->quant.type = QUANT_NF4;
    s->quant.double_quant = double_quant;
}

#define QW "model.layers.0.self_attn.q_proj.weight"
#define QM "model.layers.0.self_attn.q_proj"

/* Bytes of the load phase's allocations under `name`, in order, into v; how many. */
static int load_allocs(const struct rec_sink *r, const char *name, uint64_t *v, int max, uint64_t *kept)
{
    int n = 0;
    *kept = 0;
    for (size_t i = 0; i < r->n; i++) {
        const struct rec_op *o = &r->ops[i];
        if (o->kind != OP_ALLOC || strcmp(o->phase, "load") || strcmp(o->name, name))
            continue;
        if (n < max)
            v[n++] = o->bytes;
        bool freed = false;
        for (size_t j = i + 1; j < r->n && !freed; j++)
            freed = r->ops[j].kind == OP_FREE && r->ops[j].id == o->id;
        *kept += freed ? 0 : o->bytes;
    }
    return n;
}

static void test_load_sizes(void)
{
    struct job_spec s;
    struct rec_sink r;
    struct err e = {0};
    uint64_t v[16], kept;
    qlora_layer(&s, true);
    ok(record(&s, &r, &e) == 0, "QLoRA layer generates (%s)", e.msg);
    int n = load_allocs(&r, QW, v, 16, &kept);
    /* quantize_4bit: the bf16 weight, packed codes, fp32 absmax (1 per 64), the 16-entry code; double
     * quantization: offset, uint8 absmax, fp32 absmax per 256 blocks, the 256-entry map copy */
    static const uint64_t dq[] = {33554432, 8388608, 1048576, 64, 4, 262144, 4096, 1024};
    ok(n == 8 && !memcmp(v, dq, sizeof dq),
       "double quant: q_proj allocates 33,554,432 (bf16 transient), 8,388,608 (codes), 1,048,576 (fp32 absmax), "
       "64, 4, 262,144, 4,096, 1,024 B (%d allocations)", n);
    is_int((int64_t)kept, 8655940, "double quant: 8,655,940 B stay for one 4096 x 4096 NF4 weight (0.516 B a value)");
    free(r.ops);
    qlora_layer(&s, false);
    ok(record(&s, &r, &e) == 0, "without double quant (%s)", e.msg);
    load_allocs(&r, QW, v, 16, &kept);
    is_int((int64_t)kept, 9437248, "without: 9,437,248 B stay (codes, fp32 absmax 1,048,576, code 64)");
    free(r.ops);
}

/* A 4096 x 4096 weight dequantized: a K_DEQUANT of 16,777,216 NF4 values in bf16, its 33,554,432-byte
 * output freed before the phase ends, after one GEMM reads it. In forward q_proj's; in backward
 * o_proj's (for grad_A). q_proj's input needs no gradient (frozen embedding and norm before it), so
 * its backward has no grad_A and no dequantization. */
static void test_dequant_temporaries(void)
{
    struct job_spec s;
    struct rec_sink r;
    struct err e = {0};
    qlora_layer(&s, true);
    record(&s, &r, &e);
    const char *phases[3] = {"forward", "backward", "backward"};
    const char *modules[3] = {QM, "model.layers.0.self_attn.o_proj", QM};
    for (int p = 0; p < 3; p++) {
        int found = 0, nested = 0, freed_after_gemm = 0;
        for (size_t i = 0; i < r.n; i++) {
            const struct rec_op *o = &r.ops[i];
            if (o->kind != OP_KERNEL || o->k.kernel != K_DEQUANT || strcmp(o->phase, phases[p]) ||
                strcmp(o->name, modules[p]))
                continue;
            if (o->k.dims[2] == OOM_DQ_DYNAMIC8 && o->k.dims[0] == 262144 && o->k.dims[1] == 256)
                nested++;
            if (o->k.dims[2] != OOM_DQ_NF4 || o->k.dims[0] != 16777216 || o->k.dtype != DT_BF16)
                continue;
            found++;
            uint64_t out = o->k.tensors[2];
            int gemms = 0;
            for (size_t j = i + 1; j < r.n; j++) {
                if (r.ops[j].kind == OP_KERNEL && r.ops[j].k.kernel == K_GEMM)
                    gemms++;
                if (r.ops[j].kind == OP_FREE && r.ops[j].id == out) {
                    freed_after_gemm += gemms == 1 && !strcmp(r.ops[j].phase, phases[p]);
                    break;
                }
            }
            for (size_t j = 0; j < i; j++)
                if (r.ops[j].kind == OP_ALLOC && r.ops[j].id == out)
                    ok(r.ops[j].bytes == 33554432 && r.ops[j].category == CAT_TEMP,
                       "%s: the dequantized %s is a 33,554,432 B temp", phases[p], modules[p]);
        }
        if (p == 2) {
            is_int(found + nested, 0, "backward: q_proj (input without a gradient) is not dequantized");
            continue;
        }
        is_int(found, 1, "%s: %s's weight is dequantized once", phases[p], modules[p]);
        is_int(nested, 1, "%s: its nested absmax (262,144 codes, blocks of 256) is dequantized first", phases[p]);
        is_int(freed_after_gemm, 1, "%s: the temporary is freed after its one GEMM", phases[p]);
    }
    free(r.ops);
}

/* LLM.int8 on the same layer: q_proj's CB (16,777,216 B) and SCB (16,384 B) stay, the fp16 weight they
 * come from goes; in forward (16 tokens, bf16) its input cast to fp16 (131,072 B), CA (65,536 B), SCA
 * (64 B), the int32 product (262,144 B) and the fp16 output (131,072 B) cast back to bf16 (131,072 B);
 * in backward o_proj's CB dequantized to bf16 (33,554,432 B) for grad_A. */
static void test_int8(void)
{
    struct job_spec s;
    struct rec_sink r;
    struct err e = {0};
    uint64_t v[8], kept;
    qlora_layer(&s, false);
    s.quant.type = QUANT_INT8;
    ok(record(&s, &r, &e) == 0, "LLM.int8 layer generates (%s)", e.msg);
    int n = load_allocs(&r, QW, v, 8, &kept);
    ok(n == 3 && v[0] == 33554432 && v[1] == 16777216 && v[2] == 16384 && kept == 16793600,
       "int8 load: fp16 weight 33,554,432 B (freed), CB 16,777,216 B, SCB 16,384 B (%d allocations, %llu kept)", n,
       (unsigned long long)kept);
    uint64_t want[6] = {131072, 65536, 64, 262144, 131072, 131072}, got[6] = {0};
    int k = 0, gemms = 0, back = 0;
    for (size_t i = 0; i < r.n; i++) {
        const struct rec_op *o = &r.ops[i];
        if (o->kind == OP_ALLOC && !strcmp(o->phase, "forward") && !strcmp(o->name, QM) && k < 6)
            got[k++] = o->bytes;
        gemms += o->kind == OP_KERNEL && o->k.kernel == K_INT8_GEMM && !strcmp(o->phase, "forward");
        back += o->kind == OP_KERNEL && o->k.kernel == K_DEQUANT && o->k.dims[2] == OOM_DQ_INT8_ROW &&
                o->k.dims[0] == 16777216 && o->k.dims[1] == 4096 && !strcmp(o->phase, "backward") &&
                !strcmp(o->name, "model.layers.0.self_attn.o_proj");
    }
    ok(k == 6 && !memcmp(got, want, sizeof want),
       "int8 forward of q_proj: 131,072, 65,536, 64, 262,144, 131,072, 131,072 B (got %llu %llu %llu %llu %llu %llu)",
       (unsigned long long)got[0], (unsigned long long)got[1], (unsigned long long)got[2], (unsigned long long)got[3],
       (unsigned long long)got[4], (unsigned long long)got[5]);
    is_int(gemms, 7, "int8 forward: one int8 GEMM per linear of the layer");
    is_int(back, 1, "int8 backward: o_proj's CB * SCB / 127 dequantized once for grad_A");
    free(r.ops);
}

/* Trainable parameters: fp32 adapters (PEFT's on a quantized base; the fp32 model's elsewhere) allocated
 * at load, bytes / 4. */
static int64_t adapter_params(const char *preset, const char *targets, bool all_linear, int rank)
{
    struct job_spec s;
    struct rec_sink r;
    struct err e = {0};
    job_spec_init(&s);
    snprintf(s.model.preset, sizeof s.model.preset, "%s", preset);
    bool llama = !strcmp(preset, "llama-3-8b");
    s.load_dtype = s.param_dtype = llama ? DT_BF16 : DT_F32;
    s.batch = 1;
    s.seq_len = 8;
    s.steps = 0;
    s.trainable = TRAIN_LORA;
    s.lora_rank = rank;
    s.quant.type = llama ? QUANT_NF4 : QUANT_NONE;
    s.lora.all_linear = all_linear;
    for (const char *t = targets; t && *t; t += strcspn(t, ",") + (t[strcspn(t, ",")] != 0))
        snprintf(s.lora.targets[s.lora.ntargets++], sizeof s.lora.targets[0], "%.*s", (int)strcspn(t, ","), t);
    if (record(&s, &r, &e))
        return -1;
    int64_t bytes = 0;
    for (size_t i = 0; i < r.n; i++)
        if (r.ops[i].kind == OP_ALLOC && r.ops[i].category == CAT_PARAM && strstr(r.ops[i].name, ".lora_"))
            bytes += (int64_t)r.ops[i].bytes;
    free(r.ops);
    return bytes / 4;
}

static int64_t lora_params(const char *targets, bool all_linear, int rank)
{
    return adapter_params("llama-3-8b", targets, all_linear, rank);
}

static void test_trainable_counts(void)
{
    /* per layer r (in + out): q 16 * 8192, k and v 16 * 5120, o 16 * 8192, gate, up, down 16 * 18432 */
    is_int(lora_params(NULL, true, 16), 41943040, "Llama-3-8B, r=16, all-linear: 41,943,040 trainable");
    is_int(lora_params("q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", false, 16), 41943040,
           "the seven names listed: the same 41,943,040");
    is_int(lora_params(NULL, false, 16), 6815744, "the default (q_proj, v_proj): 32 x 16 x (8192 + 5120) = 6,815,744");
    is_int(lora_params("o_proj", false, 8), 2097152, "o_proj alone, r=8: 32 x 8 x 8192 = 2,097,152");
    is_int(lora_params("self_attn.o_proj", false, 8), 2097152, "a dotted target matches the end of the full name");
    is_int(lora_params("lm_head", false, 8), 8 * (4096 + 128256), "lm_head by name (all-linear leaves it out): 8 x (4096 + 128256) = 1,058,816");
    /* other families, by their own module names */
    is_int(adapter_params("gpt2", "c_attn", false, 8), 12 * 8 * (768 + 2304), "GPT-2 c_attn, r=8: 294,912");
    is_int(adapter_params("gpt2", NULL, true, 8), 12 * 8 * (3072 + 1536 + 3840 + 3840),
           "GPT-2 all-linear (c_attn, attn and mlp c_proj, c_fc; not the tied lm_head), r=8: 1,179,648");
    is_int(adapter_params("bert-large-uncased", "query,value", false, 8), 24 * 2 * 8 * 2048,
           "BERT query and value (self.query, self.value), r=8: 786,432");
}

static void test_dropout(void)
{
    struct job_spec s;
    struct rec_sink r;
    struct err e = {0};
    qlora_layer(&s, true);
    s.lora.dropout = 0.1f;
    record(&s, &r, &e);
    int masks = 0, fwd = 0;
    for (size_t i = 0; i < r.n; i++) {
        const struct rec_op *o = &r.ops[i];
        if (o->kind == OP_ALLOC && !strcmp(o->name, QM ".lora_dropout") && !strcmp(o->phase, "forward")) {
            masks += o->bytes == 16 * 4096; /* the uint8 mask of the 16 x 4096 input */
            fwd++;
        }
    }
    /* the fp32 cast of x (PEFT casts to the adapters' dtype), dropout's fp32 output and its mask */
    ok(masks == 1 && fwd == 2, "lora_dropout 0.1 on q_proj: its output and a 65,536 B mask (%d allocations, %d masks)",
       fwd, masks);
    free(r.ops);
    s.lora.dropout = 0;
    record(&s, &r, &e);
    int none = 0;
    for (size_t i = 0; i < r.n; i++)
        none += r.ops[i].kind == OP_ALLOC && strstr(r.ops[i].name, "lora_dropout") != NULL;
    is_int(none, 0, "lora_dropout 0: nn.Identity, nothing allocated");
    free(r.ops);
}

/* Paged AdamW: the state of adapters from 1e5 elements is cudaMallocManaged (OP_MANAGED_ALLOC). With
 * r = 16 on every linear of a Llama-3-8B layer those are gate's and up's lora_B [14336, 16] and down's
 * lora_A [16, 14336], 229,376 elements each: two buffers each, of 1 byte (8-bit) or 4 (32-bit). */
static int64_t managed_bytes(enum optimizer_kind o, int64_t *absmax_managed)
{
    struct job_spec s;
    struct rec_sink r;
    struct err e = {0};
    qlora_layer(&s, true);
    s.lora.all_linear = true;
    s.optimizer = o;
    s.steps = 1;
    if (record(&s, &r, &e))
        return -1;
    int64_t bytes = 0;
    *absmax_managed = 0;
    for (size_t i = 0; i < r.n; i++)
        if (r.ops[i].kind == OP_MANAGED_ALLOC) {
            bytes += (int64_t)r.ops[i].bytes;
            *absmax_managed += r.ops[i].bytes != 229376 && r.ops[i].bytes != 917504;
        }
    free(r.ops);
    return bytes;
}

static void test_paged(void)
{
    int64_t odd;
    is_int(managed_bytes(OPT_PAGED_ADAMW_8BIT, &odd), 1376256, "paged_adamw_8bit: 3 x 2 x 229,376 B of uint8 state managed");
    is_int(odd, 0, "paged_adamw_8bit: its absmax and the small tensors' state stay in the allocator");
    is_int(managed_bytes(OPT_PAGED_ADAMW_32BIT, &odd), 5505024, "paged_adamw_32bit: 3 x 2 x 917,504 B of fp32 state");
    is_int(managed_bytes(OPT_ADAMW_8BIT, &odd), 0, "adamw_8bit (not paged): nothing in unified memory");
}

static void refused(void (*edit)(struct job_spec *), const char *want)
{
    struct job_spec s;
    struct err e = {0};
    qlora_layer(&s, true);
    edit(&s);
    struct workload *w = workload_create(&s, &e);
    ok(!w && e.code == ERR_INPUT && strstr(e.msg, want), "refused: %s", e.msg);
    workload_destroy(w);
}

/* DoRA (peft dora.py, DoraLinearLayer) on one bf16 Llama-3-8B layer, all-linear r=16, one step. */
static void test_dora(void)
{
    struct job_spec s;
    struct rec_sink r;
    struct err e = {0};
    qlora_layer(&s, false);
    s.quant.type = QUANT_NONE;
    s.lora.all_linear = true;
    s.lora.dora = true;
    s.steps = 1;
    if (record(&s, &r, &e)) {
        ok(0, "DoRA layer recorded");
        return;
    }
    int64_t lora = 0, mag = 0;
    int q_fwd = 0, q_load = 0;
    const uint64_t full = 4096ull * 4096 * 2; /* a bf16 [4096, 4096]: 33,554,432 bytes */
    for (size_t i = 0; i < r.n; i++) {
        const struct rec_op *o = &r.ops[i];
        if (o->kind != OP_ALLOC)
            continue;
        if (o->category == CAT_PARAM && strstr(o->name, ".lora_magnitude_vector."))
            mag += (int64_t)o->bytes / 2;
        else if (o->category == CAT_PARAM && strstr(o->name, ".lora_"))
            lora += (int64_t)o->bytes / 2;
        if (o->category == CAT_TEMP && o->bytes == full && !strncmp(o->name, QM, strlen(QM)))
            *(strcmp(o->phase, "load") ? &q_fwd : &q_load) += 1;
    }
    /* per layer: LoRA 16 x (8192 + 5120 + 5120 + 8192 + 3 x 18432) = 1,310,720; magnitudes the out_features
     * 4096 + 1024 + 1024 + 4096 + 14336 + 14336 + 4096 = 43,008 */
    is_int(lora, 1310720, "DoRA layer: LoRA 1,310,720 trainable (x 32 layers: 41,943,040)");
    is_int(mag, 43008, "DoRA layer: magnitude vectors 43,008 (x 32: 1,376,256; with LoRA 43,319,296)");
    /* forward: x_eye [in, in], lora_B(lora_A(x_eye)) [in, out], scaling * it, W + that (W is bf16 already) */
    is_int(q_fwd, 4, "q_proj forward: 4 temporaries of 4096 x 4096 x 2 = 33,554,432 bytes (eye, B@A, scaled, sum)");
    /* update_layer at load: lora_B @ lora_A, scaled, sum */
    is_int(q_load, 3, "q_proj at load: lora_B @ lora_A, scaled and summed (3 x 33,554,432 bytes)");
    int norms = 0;
    for (size_t i = 0; i < r.n; i++)
        norms += r.ops[i].kind == OP_KERNEL && r.ops[i].k.kernel == K_ROW_NORM;
    is_int(norms, 14, "one row norm per adapted linear at load and per forward: 2 x 7");
    free(r.ops);
}

static void bad_target(struct job_spec *s) { snprintf(s->lora.targets[s->lora.ntargets++], 32, "c_attn"); }
static void full(struct job_spec *s) { s->trainable = TRAIN_FULL; }
static void blocksize(struct job_spec *s) { s->quant.blocksize = 100; }
static void dropout(struct job_spec *s) { s->lora.dropout = 1.0f; }
static void dora(struct job_spec *s) { s->lora.dora = true; }
static void dora_dropout(struct job_spec *s)
{
    s->quant.type = QUANT_NONE;
    s->lora.dora = true;
    s->lora.dropout = 0.1f;
}
static void dora_autocast(struct job_spec *s)
{
    s->quant.type = QUANT_NONE;
    s->lora.dora = true;
    s->autocast = true;
}
static void not_decoder(struct job_spec *s) { snprintf(s->model.preset, sizeof s->model.preset, "bert-large-uncased"); }

int main(void)
{
    test_load_sizes();
    test_dequant_temporaries();
    test_int8();
    test_trainable_counts();
    test_dora();
    test_dropout();
    test_paged();
    refused(bad_target, "lora_targets: 'c_attn' matches no linear module");
    refused(full, "quantization: a quantized base is frozen");
    refused(blocksize, "quantization.blocksize: one of 64");
    refused(dropout, "lora_dropout: must be in [0, 1)");
    refused(dora, "use_dora: DoRA on a quantized base (QDoRA) is not modelled yet");
    refused(dora_dropout, "use_dora: DoRA with lora_dropout > 0");
    refused(dora_autocast, "use_dora: DoRA under autocast");
    refused(not_decoder, "quantization: modelled for the decoder family only");
    return done_testing();
}
