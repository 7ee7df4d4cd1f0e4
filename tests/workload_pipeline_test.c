/* workload_pipeline_test.c: pipeline-parallel training (job.parallel.pipeline_parallel) against numbers
 * worked here: the micro-batches each stage holds in flight under 1F1B and GPipe, the layer split,
 * the parameters each stage of GPT-2 (12 layers, tied head) keeps on 4 stages, and activations that
 * scale with the micro-batches in flight; plus the job's checks. Uses the live-bytes sink. */
#include <string.h>

#include "tap.h"
#include "workload/generate.h"
#include "workload/live_sink.h"
#include "workload/parallel_pipeline.h"
#include "workload_run.h"

#define WTE (50257LL * 768)
#define WPE (1024LL * 768)
#define LN_F (2LL * 768)
/* one GPT-2 block: ln_1, c_attn, attn.c_proj, ln_2, c_fc, mlp.c_proj */
#define BLOCK (4LL * 768 + 2304LL * 768 + 2304 + 768LL * 768 + 768 + 3072LL * 768 + 3072 + 768LL * 3072 + 768)

static void gpt2_pipe(struct job_spec *s, int stages, int micro, enum pipe_schedule sch, int stage)
{
    gpt2_bf16_job(s);
    s->parallel.pipeline_parallel = stages;
    s->parallel.micro_batches = micro;
    s->parallel.schedule = sch;
    s->parallel.pipeline_stage = stage;
}

static void test_counts(void)
{
    int f[4], g[4];
    for (int s = 0; s < 4; s++) {
        f[s] = pipeline_in_flight(4, s, 8, PIPE_1F1B);
        g[s] = pipeline_in_flight(4, s, 8, PIPE_GPIPE);
    }
    ok(f[0] == 4 && f[1] == 3 && f[2] == 2 && f[3] == 1, "1F1B, P=4, M=8: 4, 3, 2, 1 in flight");
    ok(g[0] == 8 && g[1] == 8 && g[2] == 8 && g[3] == 8, "GPipe, P=4, M=8: 8 on every stage");
    ok(pipeline_in_flight(4, 0, 2, PIPE_1F1B) == 2 && pipeline_in_flight(4, 3, 2, PIPE_1F1B) == 1,
       "1F1B with fewer micro-batches than stages: min(P - s, M)");
    struct pipe_split a = pipeline_split(12, 4, 0), b = pipeline_split(12, 4, 2), c = pipeline_split(12, 4, 3);
    ok(a.first == 0 && a.last == 3 && a.embed && !a.head, "stage 0 of 4: layers 0-2 and the embedding");
    ok(b.first == 6 && b.last == 9 && !b.embed && !b.head, "stage 2: layers 6-8 only");
    ok(c.first == 9 && c.last == 12 && !c.embed && c.head, "stage 3: layers 9-11, norm, head, loss");
}

static void test_params(void)
{
    const int64_t want[4] = {WTE + WPE + 3 * BLOCK, 3 * BLOCK, 3 * BLOCK, 3 * BLOCK + LN_F + WTE};
    const char *what[4] = {"stage 0: wte, wpe and 3 blocks", "stage 1: 3 blocks", "stage 2: 3 blocks",
                           "stage 3: 3 blocks, ln_f and its copy of the tied wte"};
    int64_t sum = 0;
    for (int s = 0; s < 4; s++) {
        struct job_spec j;
        struct live_sink k;
        gpt2_pipe(&j, 4, 8, PIPE_1F1B, s);
        ok(run(&j, &k) == 0 && live_sink_consistent(&k), "gpt2 bf16, 4 stages, stage %d runs, consistent", s);
        is_int(cat_at(&k, "forward", 0, CAT_PARAM), 2 * want[s], "%s in bf16", what[s]);
        is_int(cat_at(&k, "forward", 1 * 8, CAT_OPTIMIZER_STATE), 4 * want[s],
               "after step 1, AdamW's exp_avg and exp_avg_sq (bf16, as the parameters) of the stage's only");
        sum += want[s];
        live_sink_fini(&k);
    }
    is_int(sum, 124439808LL + WTE, "the stages together: GPT-2's parameters plus the last stage's wte copy");
}

/* Activations live when the first backward starts: the micro-batches in flight. */
static int64_t act_first_backward(int stage, enum pipe_schedule sch, int64_t *peak)
{
    struct job_spec j;
    struct live_sink k;
    gpt2_pipe(&j, 4, 8, sch, stage);
    j.steps = 1;
    int64_t a = run(&j, &k) == 0 ? cat_at(&k, "backward", 0, CAT_ACTIVATION) : -1;
    *peak = k.peak;
    live_sink_fini(&k);
    return a;
}

static void test_activations(void)
{
    int64_t p1, p2, pg, p0;
    int64_t a1 = act_first_backward(1, PIPE_1F1B, &p1), a2 = act_first_backward(2, PIPE_1F1B, &p2);
    int64_t g1 = act_first_backward(1, PIPE_GPIPE, &pg);
    ok(a1 > 0 && a1 % 3 == 0 && a2 % 2 == 0 && a1 / 3 == a2 / 2,
       "1F1B: stage 1 holds 3 micro-batches' activations, stage 2 two of the same size (%lld, %lld B)",
       (long long)a1, (long long)a2);
    is_int(g1, a1 / 3 * 8, "GPipe: stage 1 holds all 8");
    diag("peaks (live bytes): GPipe stage 1 %lld, 1F1B stage 1 %lld, stage 2 %lld", (long long)pg, (long long)p1,
         (long long)p2);
    struct job_spec j;
    struct live_sink k;
    gpt2_pipe(&j, 4, 8, PIPE_1F1B, 1);
    j.steps = 1;
    j.parallel.deallocate_outputs = true;
    int ran = run(&j, &k) == 0 && live_sink_consistent(&k);
    int64_t d1 = ran ? cat_at(&k, "backward", 0, CAT_ACTIVATION) : -1;
    live_sink_fini(&k);
    is_int(d1, a1 - 3 * (64 * 768 * 2 - 2), "deallocate_outputs: the 3 sent outputs (64 x 768 bf16) are one "
           "element each");
    int64_t a0 = act_first_backward(0, PIPE_1F1B, &p0);
    ok(a0 > 4 * (a1 / 3), "stage 0 holds 4 micro-batches, each with its embedding's output too");
}

/* DDP over each stage's replicas: its Reducer buckets the stage's gradients only. */
static void test_ddp(void)
{
    const int64_t first = WTE + WPE + 3 * BLOCK, middle = 3 * BLOCK;
    for (int s = 0; s < 2; s++) {
        struct job_spec j;
        struct live_sink k;
        gpt2_pipe(&j, 4, 2, PIPE_1F1B, s);
        j.parallel.strategy = PAR_DDP;
        j.parallel.world_size = 8; /* 4 stages x 2 data-parallel ranks */
        ok(run(&j, &k) == 0 && live_sink_consistent(&k), "DDP x pipeline, stage %d runs, consistent", s);
        is_int(cat_at(&k, "forward", 0, CAT_GRAD), 2 * (s ? middle : first),
               "stage %d: the Reducer's one bucket of the stage's gradients, bf16", s);
        is_int(cat_at(&k, "optimizer", 0, CAT_GRAD), 4 * (s ? middle : first), "and .grad beside it at the step");
        live_sink_fini(&k);
    }
}

/* Megatron's 3D parallelism, one rank of each stage: Llama-3-8B at TP 2 x PP 4. A layer's q, k, v, gate and up
 * (column-parallel) and o and down (row-parallel) are halved, its two norms whole; embed_tokens (stage 0) and
 * lm_head (stage 3) are 128256 / 2 = 64128 rows (a multiple of 128 x 2 already). */
static void test_tensor_parallel_params(void)
{
    const int64_t h = 4096, layer = h * 2048 * 2 + h * 512 * 2 + 3 * h * 7168 + 2 * h, vocab = 64128 * h;
    is_int(layer, 109060096LL, "a Llama-3-8B layer at TP 2: (218,112,000 - 8192) / 2 + 8192 parameters");
    const int64_t want[4] = {vocab + 8 * layer, 8 * layer, 8 * layer, 8 * layer + h + vocab};
    for (int s = 0; s < 4; s++) {
        struct job_spec j;
        struct live_sink k;
        job_spec_init(&j);
        snprintf(j.model.preset, sizeof j.model.preset, "llama-3-8b");
        j.load_dtype = j.param_dtype = DT_BF16;
        j.seq_len = 32;
        j.steps = 1;
        j.parallel.tensor_parallel = 2;
        j.parallel.pipeline_parallel = 4;
        j.parallel.micro_batches = 2;
        j.parallel.pipeline_stage = s;
        ok(run(&j, &k) == 0 && live_sink_consistent(&k), "Llama-3-8B TP 2 x PP 4, stage %d runs, consistent", s);
        is_int(cat_at(&k, "forward", 0, CAT_PARAM), 2 * want[s], "stage %d: %s in bf16", s,
               s == 0 ? "embed_tokens / 2 and 8 halved layers" : s == 3 ? "8 halved layers, norm, lm_head / 2"
                                                                        : "8 halved layers");
        live_sink_fini(&k);
    }
}

/* GPT-2 (12 heads, 3072 intermediate) at TP 2 x PP 4, stage 1 of 1F1B with 8 micro-batches. */
static int64_t tp_stage1_act(bool sp, bool dealloc)
{
    struct job_spec j;
    struct live_sink k;
    gpt2_pipe(&j, 4, 8, PIPE_1F1B, 1);
    j.steps = 1;
    j.parallel.tensor_parallel = 2;
    j.parallel.sequence_parallel = sp;
    j.parallel.deallocate_outputs = dealloc;
    int ran = run(&j, &k) == 0 && live_sink_consistent(&k);
    int64_t a = ran ? cat_at(&k, "backward", 0, CAT_ACTIVATION) : -1;
    live_sink_fini(&k);
    return a;
}

/* The p2p tensors: [micro_batch, seq, hidden], or [micro_batch, seq / t, hidden] with sequence parallelism
 * (schedules.py get_tensor_shapes); each sent output, freed to one element by deallocate_outputs, shows
 * its size, and the micro-batches in flight stay min(P - s, M). */
static void test_tensor_parallel_p2p(void)
{
    int64_t a = tp_stage1_act(false, false), ad = tp_stage1_act(false, true);
    int64_t sp = tp_stage1_act(true, false), spd = tp_stage1_act(true, true);
    is_int(a - ad, 3 * (64 * 768 * 2 - 2), "TP 2, stage 1: the 3 outputs in flight are 1 x 64 x 768 bf16 each");
    is_int(sp - spd, 3 * (32 * 768 * 2 - 2), "TP 2 + SP: 1 x 32 x 768 each (seq / t)");
    ok(sp > 0 && sp < a, "sequence parallelism keeps less of each micro-batch (%lld < %lld B)", (long long)sp,
       (long long)a);
    struct job_spec j;
    struct live_sink k;
    gpt2_pipe(&j, 4, 8, PIPE_1F1B, 2);
    j.steps = 1;
    j.parallel.tensor_parallel = 2;
    int64_t a2 = run(&j, &k) == 0 ? cat_at(&k, "backward", 0, CAT_ACTIVATION) : -1;
    live_sink_fini(&k);
    ok(a > 0 && a % 3 == 0 && a2 % 2 == 0 && a / 3 == a2 / 2,
       "TP 2: stage 1 holds 3 micro-batches, stage 2 two of the same size (%lld, %lld B)", (long long)a, (long long)a2);
    gpt2_pipe(&j, 4, 2, PIPE_1F1B, 3);
    j.parallel.tensor_parallel = 2;
    j.parallel.sequence_parallel = true;
    j.parallel.strategy = PAR_DDP;
    j.parallel.world_size = 16; /* 2-way tensor x 4 stages x 2-way data parallel */
    ok(run(&j, &k) == 0 && live_sink_consistent(&k), "TP 2 + SP x DDP 2, last stage (the vocab-parallel loss) runs");
    /* 3 GPT-2 blocks at TP 2: ln_1, c_attn 768 x 1152 + 1152, c_proj 384 x 768 + 768, ln_2, c_fc 768 x 1536
     * + 1536, c_proj 1536 x 768 + 768; ln_f; the tied wte copy of 50432 / 2 rows */
    const int64_t blk = 4 * 768 + 768 * 1152 + 1152 + 384 * 768 + 768 + 768 * 1536 + 1536 + 1536 * 768 + 768;
    is_int(cat_at(&k, "forward", 0, CAT_GRAD), 2 * (3 * blk + LN_F + 25216LL * 768),
           "DDP's bucket: the last stage's TP-sharded gradients, bf16");
    live_sink_fini(&k);
}

static void refused(struct job_spec *j, const char *want, const char *what)
{
    struct err e = {0};
    ok(job_spec_validate(j, &e) < 0 && strstr(e.msg, want), "%s refused: %s", what, e.msg);
}

static void test_checks(void)
{
    struct job_spec j;
    struct err e = {0};
    gpt2_pipe(&j, 5, 8, PIPE_1F1B, 0);
    ok(job_spec_validate(&j, &e) < 0 && strstr(e.msg, "parallel.pipeline_parallel") &&
       strstr(e.msg, "model.layers (12)"), "12 layers over 5 stages refused: %s", e.msg);
    gpt2_pipe(&j, 4, 8, PIPE_1F1B, 0);
    j.parallel.strategy = PAR_ZERO1;
    e = (struct err){0};
    ok(job_spec_validate(&j, &e) < 0 && strstr(e.msg, "parallel.pipeline_parallel") && strstr(e.msg, "strategy"),
       "pipeline with ZeRO refused: %s", e.msg);
    gpt2_pipe(&j, 4, 8, PIPE_1F1B, 0);
    j.parallel.tensor_parallel = 2;
    j.parallel.world_size = 16;
    refused(&j, "leave 2 data-parallel ranks", "TP 2 x 4 stages on 16 ranks without a strategy");
    j.parallel.world_size = 8;
    e = (struct err){0};
    ok(job_spec_validate(&j, &e) == 0, "TP 2 x 4 stages on 8 ranks, no strategy: one replica");
    j.parallel.strategy = PAR_DDP;
    j.parallel.world_size = 12;
    refused(&j, "not a multiple of tensor_parallel x pipeline_parallel 8", "TP 2 x 4 stages x DDP on 12 ranks");
    gpt2_pipe(&j, 4, 8, PIPE_1F1B, 0);
    j.parallel.strategy = PAR_DDP;
    j.parallel.world_size = 6;
    refused(&j, "not a multiple of pipeline_parallel 4", "4 stages x DDP on 6 ranks");
    gpt2_pipe(&j, 4, 8, PIPE_1F1B, 0);
    j.parallel.tensor_parallel = 5;
    refused(&j, "model.heads", "TP 5 x pipeline: 12 heads");
    gpt2_pipe(&j, 4, 8, PIPE_1F1B, 0);
    j.grad_accum = 2;
    e = (struct err){0};
    ok(job_spec_validate(&j, &e) < 0 && strstr(e.msg, "grad_accum"), "grad_accum with a pipeline refused: %s", e.msg);
    gpt2_pipe(&j, 1, 8, PIPE_1F1B, 0);
    e = (struct err){0};
    ok(job_spec_validate(&j, &e) < 0 && strstr(e.msg, "parallel.micro_batches"),
       "micro-batches without stages refused: %s", e.msg);
    gpt2_pipe(&j, 1, 1, PIPE_GPIPE, 0);
    e = (struct err){0};
    ok(job_spec_validate(&j, &e) == 0, "one stage, one micro-batch: no pipeline, nothing to check");
}

int main(void)
{
    test_counts();
    test_params();
    test_activations();
    test_ddp();
    test_tensor_parallel_params();
    test_tensor_parallel_p2p();
    test_checks();
    workload_destroy(last);
    done_testing();
}
