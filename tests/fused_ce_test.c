/* fused_ce_test.c: the fix fused_linear_cross_entropy against worked numbers: Liger's chunk rule, the
 * bytes a LoRA step no longer holds at the end of its forward (the fp32 log-probabilities over the
 * vocabulary, replaced by grad_input), the forward's peak lower by at least the logits, and the head's
 * gradient computed in forward becoming .grad. No allocator: a live sink sums live ALLOC bytes. */
#include "live_run.h"
#include "workload/fused_ce.h"

static void chunk_rule(void)
{
    /* Liger's docstring: BT = 4096 x 4, V = 32000, H = 4096: inc_factor 8, chunk 2048 */
    is_int(fused_ce_chunk_rows(16384, 32000, 4096, 0), 2048, "Liger's example: 16,384 rows, vocab 32,000, hidden 4,096");
    /* Llama-3-8B at 8,192 tokens: ceil(128256 / 4096) = 32, 8192 / 32 = 256 */
    is_int(fused_ce_chunk_rows(8192, 128256, 4096, 0), 256, "Llama-3-8B, 8,192 tokens: 256 rows per chunk");
    is_int(fused_ce_chunk_rows(100, 128256, 4096, 0), 4, "100 rows: ceil(100 / 32) = 4, a power of 2");
    is_int(fused_ce_chunk_rows(3, 8, 256, 0), 3, "a vocabulary smaller than hidden: one chunk of every row");
    is_int(fused_ce_chunk_rows(100, 128256, 4096, 64), 64, "chunk: 64 as asked");
    is_int(fused_ce_chunk_rows(100, 128256, 4096, 1000), 100, "a chunk above the rows is all of them");
}

/* tiny-transformer: 4 layers, hidden 256, vocab 8192, tied head; batch 4 x 64 = 256 rows, fp32 */
static void base(struct job_spec *s)
{
    job_spec_init(s);
    s->batch = 4;
    s->seq_len = 64;
}

static void lora_step(void)
{
    struct job_spec s;
    base(&s);
    s.trainable = TRAIN_LORA;
    int64_t BT = 256, V = 8192, H = 256;
    ok(gen(&s) == 0, "LoRA step, plain loss");
    int64_t end_fwd = mark("backward")->live, fwd_peak = mark("forward")->peak_after;
    s.fixes = 1u << FIX_FUSED_LINEAR_CROSS_ENTROPY;
    ok(gen(&s) == 0, "LoRA step, fused linear cross-entropy: a consistent stream");
    /* plain keeps log_softmax's fp32 output [BT, V], its lse [BT] and the shifted labels [BT] int64 for
     * backward; fused keeps grad_input [BT, H] (the frozen head has no grad_weight) */
    is_int(end_fwd - mark("backward")->live, BT * V * 4 + BT * 4 + BT * 8 - BT * H * 4,
           "end of forward: 8 MiB of log-probabilities (and lse, labels) replaced by 256 KiB of grad_input");
    ok(fwd_peak - mark("forward")->peak_after >= BT * V * 4,
       "forward peak lower by at least the fp32 logits (%lld >= %lld)", (long long)(fwd_peak - mark("forward")->peak_after),
       (long long)(BT * V * 4));
    s.fix_params[FIX_FUSED_LINEAR_CROSS_ENTROPY] = (struct switch_params){{0}};
    struct fused_linear_cross_entropy_params p = {.chunk = 128};
    fused_linear_cross_entropy_params_set(&s, &p);
    gen(&s);
    int64_t small = mark("forward")->peak_after;
    p.chunk = 256;
    fused_linear_cross_entropy_params_set(&s, &p);
    gen(&s);
    /* at the chunk's grad_input product, per row: logits V x 4, hidden-state copy and product H x 4 each,
     * label 8, loss and lse 4 each; one chunk of 256 rows against two of 128 */
    is_int(mark("forward")->peak_after - small, 128 * (V * 4 + 2 * H * 4 + 16),
           "chunk 256 against chunk 128: 128 more rows of logits and of the chunk's temporaries");
}

static void full_step(void)
{
    struct job_spec s;
    base(&s);
    s.optimizer = OPT_SGD;
    gen(&s);
    int64_t grads = mark("optimizer")->cat[CAT_GRAD];
    s.fixes = 1u << FIX_FUSED_LINEAR_CROSS_ENTROPY;
    ok(gen(&s) == 0, "full step with a trained, tied head");
    is_int(mark("optimizer")->cat[CAT_GRAD], grads, "the same .grad bytes: grad_weight became the head's .grad");
    is_int(mark("backward")->cat[CAT_GRAD], 8192LL * 256 * 4, "grad_weight [V, H] fp32 is allocated in forward");
}

/* Under no_grad (an eval job): chunks of logits and no gradients, but grad_input is allocated anyway
 * (zeros_like before Liger looks at requires_grad). */
static void no_grad(void)
{
    struct job_spec s;
    base(&s);
    s.kind = JOB_EVAL;
    gen(&s);
    int64_t plain = mark("eval")->peak_after;
    s.fixes = 1u << FIX_FUSED_LINEAR_CROSS_ENTROPY;
    ok(gen(&s) == 0, "eval job with the fused loss");
    ok(plain - mark("eval")->peak_after >= 256LL * 8192 * 4, "eval peak lower by at least the fp32 logits (%lld)",
       (long long)(plain - mark("eval")->peak_after));
    is_int(mark("end")->cat[CAT_GRAD], 0, "no gradient anywhere");
}

int main(void)
{
    live_run_init();
    chunk_rule();
    lora_step();
    full_step();
    no_grad();
    live_run_fini();
    return done_testing();
}
