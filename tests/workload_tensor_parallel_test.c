/* workload_tensor_parallel_test.c: one rank of Megatron-style tensor parallelism (job.parallel.tensor_parallel,
 * sequence_parallel) against numbers worked here: Korthikanti et al. 2022's per-layer activations
 * sbh(10 + 24/t + 5as/(ht)) and, with sequence parallelism, sbh(34/t + 5as/(ht)) for a GPT-2 style layer set up
 * as their Section 4 assumes (16-bit, dropout, unfused attention, GELU MLP of 4h); Megatron's padded
 * vocabulary; Llama-3-8B's parameters per rank; TP with ZeRO-2 on the data-parallel group; and the
 * checks. Uses the live-bytes sink (no allocator). */
#include <string.h>

#include "tap.h"
#include "workload/generate.h"
#include "workload/live_sink.h"
#include "workload/parallel.h"
#include "workload/parallel_tensor.h"
#include "workload_run.h"

/* workload_run.h's Korthikanti layer on t ranks. */
static void korthikanti(struct job_spec *s, int layers, int t, bool sp)
{
    korthikanti_job(s, layers, ATTN_EAGER);
    s->parallel.tensor_parallel = t;
    s->parallel.sequence_parallel = sp;
}

static void preset_on(struct job_spec *s, const char *preset, int t)
{
    job_spec_init(s);
    snprintf(s->model.preset, sizeof s->model.preset, "%s", preset);
    s->parallel.tensor_parallel = t;
}

/* Activation bytes one layer leaves for backward (2 layers minus 1). */
static int64_t per_layer(int t, bool sp)
{
    struct job_spec s1, s2;
    korthikanti(&s1, 1, t, sp);
    korthikanti(&s2, 2, t, sp);
    return saved_activations(&s2) - saved_activations(&s1);
}

static void test_korthikanti(void)
{
    const int64_t s = 128, b = 4, h = 256, a = 8, sbh = s * b * h;
    /* workload_generate_test: sbh(34 + 5as/h) + 16sb at t = 1 (the LayerNorms' fp32 mean and rstd) */
    is_int(per_layer(1, false), 34 * sbh + 5 * a * s * s * b + 16 * s * b, "t = 1: sbh(34 + 5as/h) + 16sb");
    for (int t = 2; t <= 4; t *= 2) {
        /* Eq. 2: the two LayerNorm inputs, the dropout masks after the attention and the MLP and the inputs
         * of the QKV and first MLP linear stay whole (10sbh); the rest is over t; so do the norms' stats */
        int64_t eq2 = 10 * sbh + 24 * sbh / t + 5 * a * s * s * b / t;
        is_int(per_layer(t, false), eq2 + 16 * s * b, "t = %d: sbh(10 + 24/t + 5as/(ht)) + 16sb = %lld B", t,
               (long long)(eq2 + 16 * s * b));
        /* Eq. 4: everything over t, the column-parallel inputs saved as the rank's shard */
        int64_t eq4 = 34 * sbh / t + 5 * a * s * s * b / t;
        is_int(per_layer(t, true), eq4 + 16 * s * b / t, "t = %d, sequence parallel: sbh(34/t + 5as/(ht)) + 16sb/t = %lld B",
               t, (long long)(eq4 + 16 * s * b / t));
    }
}

/* Table 2 on GPT-3's layer (Table 3: a 96, h 12288, s 2048, v 51200, micro-batch 1): 5as/h = 80 as the
 * paper says, sbh = 25,165,824. At micro-batch 1 PyTorch keeps 4sbh/t more than their count, with or
 * without tensor parallelism: torch.matmul folds (b, heads) of the eager attention's [B, H, S, D] operands
 * without copying them when B == 1 (nn_attention.c), so views of the fused qkv projection are saved instead
 * of copies. */
static int64_t gpt3_layer(int t, bool sp)
{
    int64_t v[2];
    for (int layers = 1; layers <= 2; layers++) {
        struct job_spec s;
        korthikanti(&s, layers, t, sp);
        s.model.hidden = 12288;
        s.model.heads = 96;
        s.model.ffn = 4 * 12288;
        s.model.vocab = 51200;
        s.model.max_positions = 2048;
        s.batch = 1;
        s.seq_len = 2048;
        v[layers - 1] = saved_activations(&s);
    }
    return v[1] - v[0];
}

static void test_gpt3_layer(void)
{
    const int64_t sbh = 2048LL * 12288, sb = 2048;
    is_int(gpt3_layer(1, false), sbh * (34 + 80) + 16 * sb + 4 * sbh,
           "GPT-3 layer: sbh(34 + 80) = 2,868,903,936 B (workload-memory.md 1.6) + 16sb, + 4sbh at micro-batch 1");
    is_int(gpt3_layer(8, false), sbh * 23 + 16 * sb + 4 * sbh / 8,
           "at t = 8: sbh(10 + 24/8 + 80/8) = 578,813,952 B + 16sb + 4sbh/8");
    is_int(gpt3_layer(8, true), sbh * 34 / 8 + sbh * 10 + 16 * sb / 8 + 4 * sbh / 8,
           "with sequence parallelism: sbh(34/8 + 80/8) = 358,612,992 B + 16sb/8 + 4sbh/8");
}

/* Checkpointing every layer keeps its input: 2sbh, and 2sbh/t when sequence parallelism splits it. */
static void test_checkpointed_layer(void)
{
    const int64_t sbh = 128 * 4 * 256;
    for (int sp = 0; sp < 2; sp++) {
        struct job_spec s1, s2;
        korthikanti(&s1, 1, 4, sp);
        korthikanti(&s2, 2, 4, sp);
        s1.fixes = s2.fixes = 1u << FIX_GRADIENT_CHECKPOINTING;
        is_int(saved_activations(&s2) - saved_activations(&s1), sp ? 2 * sbh / 4 : 2 * sbh,
               "t = 4, gradient checkpointing%s: %s per layer", sp ? ", sequence parallel" : "", sp ? "2sbh/t" : "2sbh");
    }
}

static void test_whole_step(void)
{
    struct job_spec s;
    struct live_sink k;
    korthikanti(&s, 3, 4, true);
    s.steps = 2;
    s.eval.every = 1;
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "TP 4 + SP, 2 steps and eval: consistent");
    int64_t rest = k.live - k.cat[CAT_PARAM] - k.cat[CAT_OPTIMIZER_STATE] - k.cat[CAT_WORKSPACE] - k.cat[CAT_OTHER];
    is_int(rest, 0, "only params, optimizer state, the workspace and the gather buffer stay");
    is_int(k.cat[CAT_OTHER], 128 * 4 * 256 * 2, "Megatron's global buffer: one gathered [s, b, h] in bf16");
    live_sink_fini(&k);
    korthikanti(&s, 3, 2, false);
    s.fixes = 1u << FIX_GRADIENT_CHECKPOINTING;
    s.steps = 2;
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "TP 2 with gradient checkpointing: consistent");
    is_int(k.live - k.cat[CAT_PARAM] - k.cat[CAT_OPTIMIZER_STATE] - k.cat[CAT_WORKSPACE], 0, "and leaves nothing behind");
    live_sink_fini(&k);
    korthikanti(&s, 2, 2, true);
    s.fixes = 1u << FIX_GRADIENT_CHECKPOINTING;
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "TP 2 + SP with checkpointing (recomputed gathers): consistent");
    live_sink_fini(&k);
    korthikanti(&s, 2, 2, true);
    s.trainable = TRAIN_LORA;
    s.steps = 2;
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "TP 2 + SP with LoRA: consistent");
    is_int(k.cat[CAT_OTHER], 0, "frozen weights gather into new tensors (linear_with_frozen_weight), not the buffer");
    live_sink_fini(&k);
}

static void test_vocab_loss(void)
{
    is_int(tensor_parallel_vocab(128256, 2), 64128, "Llama-3 vocabulary on 2 ranks: 128256 is a multiple of 256");
    is_int(tensor_parallel_vocab(128256, 4), 32128, "on 4: padded to 128512 (a multiple of 512), 32128 each");
    is_int(tensor_parallel_vocab(50257, 8), 6400, "GPT-2 on 8: padded to 51200");
    /* the logits' loss: the fp32 copy of [sb, v/t] is what autograd keeps (Korthikanti's 4sbv/t) */
    struct job_spec s1, s2;
    korthikanti(&s1, 1, 2, false);
    korthikanti(&s2, 1, 2, false);
    s2.model.vocab = 1024;
    is_int(saved_activations(&s2) - saved_activations(&s1), 4 * 128 * 4 * (1024 - 512) / 2, "512 more vocabulary entries keep 4sb(512)/t more bytes of fp32 softmax");
}

static void test_llama_params(void)
{
    struct job_spec s;
    struct live_sink k;
    preset_on(&s, "llama-3-8b", 4);
    s.load_dtype = s.param_dtype = DT_BF16;
    s.batch = 1;
    s.seq_len = 64;
    s.steps = 1;
    /* per rank: embed_tokens and lm_head 32128 x 4096; per layer q 4096 x 1024, k and v 4096 x 256, o 1024 x
     * 4096, gate, up and down 4096 x 3584, two norms of 4096 (replicated); the final norm */
    const int64_t hsz = 4096, layer = hsz * 1024 * 2 + hsz * 256 * 2 + 3 * hsz * 3584 + 2 * hsz;
    const int64_t want = 2 * 32128 * hsz + 32 * layer + hsz;
    is_int(want, 2008289280LL, "Llama-3-8B at TP 4: 2,008,289,280 parameters per rank");
    ok(run(&s, &k) == 0, "runs");
    is_int(cat_at(&k, "forward", 0, CAT_PARAM), 2 * want, "the rank's bf16 weights");
    live_sink_fini(&k);
}

static void test_with_zero2(void)
{
    struct job_spec s;
    struct live_sink k;
    korthikanti(&s, 2, 2, false);
    s.steps = 2;
    s.optimizer = OPT_ADAMW;
    s.parallel.strategy = PAR_ZERO2;
    s.parallel.world_size = 4; /* 2-way tensor x 2-way data parallel */
    /* the rank's parameters at TP 2: wte 256 x 256, wpe 512 x 256; per layer ln_1, c_attn 256 x 384 + 384,
     * c_proj 128 x 256 + 256, ln_2, c_fc 256 x 512 + 512, c_proj 512 x 256 + 256; ln_f */
    const int64_t layer = 512 + 256 * 384 + 384 + 128 * 256 + 256 + 512 + 256 * 512 + 512 + 512 * 256 + 256;
    const int64_t p = 256 * 256 + 512 * 256 + 2 * layer + 512;
    int64_t part = (p + 3) / 4 * 4 / 2; /* padded to 2 * dp, over the dp group of 2 */
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "TP 2 x ZeRO-2 on 2 data-parallel ranks: consistent");
    is_int(cat_at(&k, "optimizer", 1, CAT_OPTIMIZER_STATE), 3 * 4 * part,
           "fp32 master, exp_avg and exp_avg_sq of half of the TP rank's %lld parameters", (long long)p);
    live_sink_fini(&k);
}

static void refused(struct job_spec *s, const char *want, const char *what)
{
    struct err e = {0};
    ok(job_spec_validate(s, &e) < 0 && strstr(e.msg, want), "%s: %s", what, e.msg);
}

static void test_checks(void)
{
    struct job_spec s;
    korthikanti(&s, 1, 3, false);
    refused(&s, "model.heads", "3 does not divide 8 heads");
    preset_on(&s, "llama-3-8b", 16);
    refused(&s, "model.kv_heads", "Llama-3-8B's 8 KV heads over 16");
    korthikanti(&s, 1, 2, false);
    s.parallel.world_size = 8;
    refused(&s, "job.parallel.strategy", "8 ranks of TP 2 with no data-parallel strategy");
    korthikanti(&s, 1, 4, false);
    s.parallel.strategy = PAR_DDP;
    s.parallel.world_size = 6;
    refused(&s, "not a multiple of tensor_parallel", "world_size 6 with TP 4");
    korthikanti(&s, 1, 2, true);
    s.seq_len = 127;
    refused(&s, "job.parallel.sequence_parallel", "seq_len 127 split over 2");
    preset_on(&s, "flan-t5-base", 2);
    refused(&s, "model.family decoder", "T5 is not a decoder-only model");
    korthikanti(&s, 1, 2, false);
    s.fixes = 1u << FIX_FUSED_LINEAR_CROSS_ENTROPY;
    refused(&s, "fused_linear_cross_entropy", "the fused linear cross-entropy");
    korthikanti(&s, 1, 1, true);
    struct err e = {0};
    ok(job_spec_validate(&s, &e) == 0, "sequence_parallel at TP 1 is ignored, as Megatron does");
}

int main(void)
{
    test_korthikanti();
    test_gpt3_layer();
    test_checkpointed_layer();
    test_whole_step();
    test_vocab_loss();
    test_llama_params();
    test_with_zero2();
    test_checks();
    workload_destroy(last);
    done_testing();
}
