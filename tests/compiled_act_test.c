/* compiled_act_test.c: the fix compiled_activations against worked numbers: a SwiGLU layer no longer
 * keeps silu(gate) for backward, GPT-2's gelu_new keeps its input only; the gradients are unchanged. */
#include "live_run.h"

/* Llama-style: 2 layers, hidden 64, SwiGLU 128; batch 4 x 64 = 256 tokens, fp32 */
static void llama(struct job_spec *s)
{
    job_spec_init(s);
    s->model.preset[0] = 0;
    s->model = (struct model_spec){
        .family = FAMILY_DECODER, .layers = 2, .hidden = 64, .heads = 4, .kv_heads = 2, .ffn = 128, .vocab = 512,
        .norm = NORM_RMSNORM, .ffn_kind = FFN_GATED, .act = ACT_SILU, .pos = POS_ROTARY, .causal = true,
        .lm_head = true, .attn = ATTN_SDPA,
    };
    s->batch = 4;
    s->seq_len = 64;
    s->optimizer = OPT_SGD;
}

static void swiglu(void)
{
    struct job_spec s;
    llama(&s);
    ok(gen(&s) == 0, "SwiGLU, eager");
    int64_t saved = mark("backward")->live, grads = mark("optimizer")->cat[CAT_GRAD];
    fix_enable(&s, "compiled_activations", &(struct err){0});
    ok(gen(&s) == 0, "SwiGLU, compiled: a consistent stream");
    is_int(saved - mark("backward")->live, 2LL * 256 * 128 * 4,
           "end of forward: silu(gate) [256, 128] fp32 no longer saved, in each of 2 layers");
    is_int(mark("optimizer")->cat[CAT_GRAD], grads, "the same gradients");
}

static void gelu_new(void)
{
    struct job_spec s;
    job_spec_init(&s); /* tiny-transformer (4 layers, MLP 1024) with gelu_new; batch 4 x 64 */
    s.model.act = ACT_GELU_NEW;
    s.batch = 4;
    s.seq_len = 64;
    s.model.dropout = 0;
    s.optimizer = OPT_SGD;
    gen(&s);
    int64_t saved = mark("backward")->live;
    fix_enable(&s, "compiled_activations", &(struct err){0});
    ok(gen(&s) == 0, "gelu_new, compiled");
    is_int(saved - mark("backward")->live, 3LL * 4 * 256 * 1024 * 4,
           "gelu_new's three extra saved tensors [256, 1024] fp32 gone in each of 4 layers");
}

int main(void)
{
    live_run_init();
    swiglu();
    gelu_new();
    live_run_fini();
    return done_testing();
}
