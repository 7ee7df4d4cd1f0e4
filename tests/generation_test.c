/* generation_test.c: job.kind generate and eval against worked numbers: the KV cache's bytes, the
 * per-phase peaks of a small Llama-style model (the sampling step is its peak: the vocabulary dwarfs
 * its layers), dynamic against static caches, and the checks' messages. No allocator: a live sink sums
 * live ALLOC bytes. */
#include <string.h>

#include "live_run.h"
#include "workload/job_kinds.h"

static int64_t peak_in(const char *name)
{
    return mark(name)->peak_after;
}

/* 2 layers, hidden 64, 4 heads of 16, 2 kv heads, SwiGLU 128, vocab 32000: per token per layer
 * 2 x 2 x 16 x 2 B = 128 B of cache; the last position's logits (64,000 B bf16, 128,000 B as fp32
 * scores, 128,000 B of probabilities) outweigh any layer's activations. */
static void small(struct job_spec *s)
{
    job_spec_init(s);
    s->model.preset[0] = 0;
    s->model = (struct model_spec){
        .family = FAMILY_DECODER, .layers = 2, .hidden = 64, .heads = 4, .kv_heads = 2, .head_dim = 16, .ffn = 128,
        .vocab = 32000, .norm = NORM_RMSNORM, .ffn_kind = FFN_GATED, .act = ACT_SILU, .pos = POS_ROTARY,
        .causal = true, .lm_head = true, .attn = ATTN_SDPA,
    };
    s->kind = JOB_GENERATE;
    s->batch = 1;
    s->load_dtype = DT_BF16;
    s->generate.prompt_len = 64;
    s->generate.new_tokens = 4;
}

static void cache_bytes(void)
{
    struct model_spec m;
    struct err e = {0};
    preset_apply(&m, "llama-3-8b", &e);
    model_spec_resolve(&m, NULL, &e);
    /* 32 layers x 2 x 8 kv heads x 128 x 8192 tokens x 2 B */
    is_int((int64_t)kv_cache_bytes(&m, 1, 8192, DT_BF16), 1073741824, "Llama-3-8B bf16, B=1, 8192 tokens: 1 GiB");
    is_int((int64_t)kv_cache_bytes(&m, 16, 3328, DT_BF16), 16LL * 3328 * 131072, "128 KiB per token and sample");
}

static void phases(void)
{
    struct job_spec s;
    struct err e = {0};
    small(&s);
    ok(gen(&s) == 0, "a dynamic-cache generation runs and its stream is consistent");
    int64_t W = 2 * model_param_count(&s.model, &e), ws = (int64_t)CUBLAS_WORKSPACE_DEFAULT_BYTES;
    int64_t V = 32000, P = 64, N = 4;
    /* at the sampling step: weights, workspace, cache, input_ids and attention_mask [1, len] int64,
     * logits, fp32 scores, the picked token [1, 1] int64 */
    int64_t greedy_tail = 2 * V + 4 * V + 8;
    int64_t prefill = W + ws + 128 * 2 * P + 2 * 8 * P + greedy_tail;
    is_int(peak_in("prefill"), prefill,
           "prefill peak: cache of 64 tokens, the last position's logits only (logits_to_keep=1), fp32 scores");
    int64_t L = P + N - 1; /* tokens cached at the last decode step's sampling */
    is_int(peak_in("decode"), W + ws + 128 * 2 * L + 2 * 8 * L + greedy_tail, "decode peak: cache of 67 tokens");
    const struct live_mark *end = live_sink_mark(&sink, "end", 0);
    ok(end && end->cat[CAT_ACTIVATION] == 0 && end->live == W + ws, "the cache and the sequences are gone at the end");

    s.generate.do_sample = true;
    gen(&s);
    is_int(peak_in("decode"), W + ws + 128 * 2 * L + 2 * 8 * L + greedy_tail + 4 * V,
           "do_sample adds the fp32 softmax over the vocabulary (128,000 B)");
    s.generate.do_sample = false;

    s.generate.cache = CACHE_STATIC;
    s.generate.max_cache_len = 256;
    gen(&s);
    /* StaticCache: zeros of max_cache_len at the prefill; the mask [1, 1, q, 256] bool is gone by sampling */
    is_int(peak_in("decode"), W + ws + 128 * 2 * 256 + 2 * 8 * L + greedy_tail,
           "static cache: 256 tokens preallocated per layer, whatever was generated");
    const struct live_mark *dec = live_sink_mark(&sink, "decode", 0);
    ok(dec && dec->cat[CAT_ACTIVATION] == 128 * 2 * 256, "static cache at the first decode step: 65,536 B");
}

/* The dynamic cache's reallocation: with a vocabulary of 8, a layer's old and new caches are the step's peak. */
static void reallocation(void)
{
    struct job_spec s;
    struct err e = {0};
    small(&s);
    s.model.vocab = 8;
    s.generate.prompt_len = 4000;
    s.generate.new_tokens = 2;
    gen(&s);
    const struct live_mark *dec = live_sink_mark(&sink, "decode", 0);
    int64_t layer = 128 * 4000; /* one layer's cache before the step */
    ok(dec && dec->cat[CAT_ACTIVATION] == 2 * layer, "decode starts with 2 layers x 4000 tokens x 128 B");
    /* torch.cat: the new [1, 4001] layer cache is written while the old one (counted at the start) lives */
    int64_t dd = dec ? peak_in("decode") - dec->live : -1;
    ok(dd >= 128 * 4001 && dd < 128 * 4001 + layer,
       "dynamic step: a layer's new cache beside its old one (peak - start %lld in [%lld, %lld))", (long long)dd,
       (long long)(128 * 4001), (long long)(128 * 4001 + layer));
    s.generate.cache = CACHE_STATIC;
    gen(&s);
    dec = live_sink_mark(&sink, "decode", 0);
    /* written in place, but the padded mask makes SDPA repeat the keys and values to all 4 heads
     * (use_gqa_in_sdpa: no enable_gqa with a mask): [1, 4002, 2 x 4 x 16] bf16 per layer, in turn */
    int64_t d = dec ? peak_in("decode") - dec->live : -1, rep = 2 * 128 * 4002;
    ok(d >= rep && d < rep + layer, "static: no reallocation; SDPA's repeat_kv of one layer (%lld in [%lld, %lld))",
       (long long)d, (long long)rep, (long long)(rep + layer));
    (void)e;
}

/* GPT-2 (fused c_attn, learned positions): 2 of its layers, 12 heads of 64, fp32, 2 prompts of 32 tokens */
static void gpt2(void)
{
    struct job_spec s;
    struct err e = {0};
    job_spec_init(&s);
    preset_apply(&s.model, "gpt2", &e);
    s.model.layers = 2;
    s.kind = JOB_GENERATE;
    s.batch = 2;
    s.generate.prompt_len = 32;
    s.generate.new_tokens = 3;
    ok(gen(&s) == 0, "GPT-2 generation runs");
    is_int(mark("decode")->cat[CAT_ACTIVATION], 2LL * 2 * 768 * 32 * 2 * 4,
           "its cache after the prefill: 2 layers x (k, v) x 768 x 32 tokens x 2 prompts x 4 B");
}

/* job.kind eval with the Trainer's on-device logits: batches 1..3 concatenated, the last cat holding
 * two and three batches' logits at once (tiny-transformer: vocab 8192, fp32). */
static void eval_logits(void)
{
    struct job_spec s;
    job_spec_init(&s);
    s.kind = JOB_EVAL;
    s.batch = 2;
    s.seq_len = 32;
    s.eval.batches = 3;
    gen(&s);
    int64_t plain = peak_in("eval"), logits = 2LL * 32 * 8192 * 4;
    s.faults = 1u << FAULT_EVAL_SAMPLES_ON_DEVICE;
    ok(gen(&s) == 0, "eval job with on-device logits runs");
    const struct live_mark *end = live_sink_mark(&sink, "end", 0);
    ok(peak_in("eval") >= 5 * logits, "the third torch.cat holds 2 + 3 batches of logits (%lld >= %lld)",
       (long long)peak_in("eval"), (long long)(5 * logits));
    ok(end && end->cat[CAT_OUTPUT] == 0, "and they leave the device when the loop ends");
    s.fixes = 1u << FIX_SAMPLES_TO_CPU;
    gen(&s);
    ok(peak_in("eval") < plain + logits, "samples_to_cpu: no accumulation (%lld < %lld)", (long long)peak_in("eval"),
       (long long)(plain + logits));
}

static void checks(void)
{
    struct job_spec s;
    struct err e = {0};
    small(&s);
    s.generate.cache = CACHE_STATIC;
    s.generate.max_cache_len = 10;
    ok(job_spec_validate(&s, &e) < 0 && strstr(e.msg, "max_cache_len") && e.code == ERR_INPUT,
       "a static cache shorter than prompt + new tokens is refused: %s", e.msg);
    small(&s);
    preset_apply(&s.model, "flan-t5-base", &e);
    memset(&e, 0, sizeof e);
    ok(job_spec_validate(&s, &e) < 0 && strstr(e.msg, "this model is t5"), "T5 is refused: %s", e.msg);
    small(&s);
    s.kind = JOB_DIFFUSION;
    memset(&e, 0, sizeof e);
    ok(job_spec_validate(&s, &e) < 0 && strstr(e.msg, "job.kind diffusion runs a UNet2DConditionModel"), "%s", e.msg);
    small(&s);
    s.kind = JOB_EVAL;
    s.eval.every = 1;
    memset(&e, 0, sizeof e);
    ok(job_spec_validate(&s, &e) < 0 && strstr(e.msg, "job.eval.every"), "eval cadence in an eval job: %s", e.msg);
}

int main(void)
{
    live_run_init();
    cache_bytes();
    phases();
    reallocation();
    gpt2();
    eval_logits();
    checks();
    live_run_fini();
    return done_testing();
}
