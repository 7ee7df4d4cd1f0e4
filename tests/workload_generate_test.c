/* workload_generate_test.c: the generator's op program checked against numbers derived here from
 * the formulas (workload-memory.md 1.2, failure-modes.md): ALLOC/FREE/KERNEL consistency, what is
 * live after a step, Korthikanti's sbh(34 + 5as/h) per layer, SDPA and checkpointing, and the
 * generation time of one FLAN-T5-XL step. Uses a sink that sums live ALLOC bytes (no allocator). */
#include <string.h>
#include <time.h>

#include "tap.h"
#include "kernels.h"
#include "workload/generate.h"
#include "workload/live_sink.h"
#include "workload_run.h"


static void test_consistency(void)
{
    static const char *models[] = {"tiny-transformer", "tiny-mlp", "tiny-cnn", "gpt2", "flan-t5-base",
                                   "bert-large-uncased", "clip-l-text", "llama-2-7b"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        struct job_spec s;
        struct live_sink k;
        job_spec_init(&s);
        snprintf(s.model.preset, sizeof s.model.preset, "%s", models[i]);
        s.batch = 2;
        s.seq_len = 64;
        s.image_size = 32;
        s.steps = 2;
        s.eval.every = 1;
        if (i == 7)
            s.param_dtype = s.load_dtype = DT_BF16;
        ok(run(&s, &k) == 0 && live_sink_consistent(&k), "%s: every FREE names a live id, every kernel tensor is live, ids unique",
           models[i]);
        int64_t rest = k.live - k.cat[CAT_PARAM] - k.cat[CAT_OPTIMIZER_STATE] - k.cat[CAT_WORKSPACE];
        is_int(rest, 0, "%s: only params, optimizer state and the workspace are live after the steps", models[i]);
        is_int(k.cat[CAT_WORKSPACE], CUBLAS_WORKSPACE_DEFAULT_BYTES, "%s: one cuBLAS workspace, never freed", models[i]);
        live_sink_fini(&k);
    }
    struct job_spec s;
    struct live_sink k;
    job_spec_init(&s);
    snprintf(s.model.preset, sizeof s.model.preset, "sd15-unet");
    s.batch = 1;
    s.image_size = 64;
    s.nextras = 2;
    s.extras[0] = (struct extra_spec){"clip-l-text", EXTRA_TEXT_ENCODER, DT_F16, true};
    s.extras[1] = (struct extra_spec){"sd-vae", EXTRA_VAE, DT_F16, true};
    s.ema = EMA_GPU;
    s.eval.every = 1;
    s.eval.sampling_steps = 2;
    s.eval.vae_decode = true;
    s.streams = 2;
    ok(run(&s, &k) == 0 && live_sink_consistent(&k), "sd15-unet with text encoder, VAE, EMA and eval: consistent");
    is_int(k.cat[CAT_WORKSPACE], 2 * CUBLAS_WORKSPACE_DEFAULT_BYTES, "two streams, two workspaces");
    is_int(k.cat[CAT_EMA], 859520964LL * 4, "fp32 EMA shadow of the UNet");
    is_int(k.cat[CAT_PARAM], 859520964LL * 4 + (123060480LL + 83653863LL) * 2, "UNet fp32, extras fp16");
    live_sink_fini(&k);
}

static void test_korthikanti(void)
{
    struct job_spec s1, s2;
    korthikanti_job(&s1, 1, ATTN_EAGER);
    korthikanti_job(&s2, 2, ATTN_EAGER);
    int64_t s = 128, b = 4, h = 256, a = 8;
    int64_t sbh = s * b * h;
    /* sbh(34 + 5as/h) plus the fp32 mean and rstd per row of the two LayerNorms (16sb) */
    int64_t want = sbh * 34 + 5 * a * s * s * b + 16 * s * b;
    int64_t per_layer = saved_activations(&s2) - saved_activations(&s1);
    is_int(per_layer, want, "eager, dropout, bf16: one layer saves sbh(34 + 5as/h) + 16sb = %lld B", (long long)want);

    korthikanti_job(&s1, 1, ATTN_SDPA);
    korthikanti_job(&s2, 2, ATTN_SDPA);
    int64_t sdpa = saved_activations(&s2) - saved_activations(&s1);
    /* SDPA drops probabilities, their dropout mask and dropped copy (5as^2b) and eager's copy of q for its
     * matmul (2sbh); its q is a view that keeps the fused qkv projection (6sbh), the KV cache's copies of
     * k and v are saved either way, its output is the output projection's input as eager's merged heads
     * are; it adds an fp32 log-sum-exp per row and head (4asb) and the RNG seed and offset (16 + 8 B) */
    is_int(per_layer - sdpa, 5 * a * s * s * b - 4 * sbh - 4 * a * s * b - 24, "sdpa_attention removes the 5as^2b terms");

    korthikanti_job(&s1, 1, ATTN_EAGER);
    korthikanti_job(&s2, 2, ATTN_EAGER);
    s1.fixes = s2.fixes = 1u << FIX_GRADIENT_CHECKPOINTING;
    is_int(saved_activations(&s2) - saved_activations(&s1), 2 * sbh,
           "gradient checkpointing keeps only the layer input, 2sbh per layer");
    gradient_checkpointing_params_set(&s1, &(struct gradient_checkpointing_params){.every = 2});
    gradient_checkpointing_params_set(&s2, &(struct gradient_checkpointing_params){.every = 2});
    s1.model.layers = 2;
    s2.model.layers = 4;
    is_int(saved_activations(&s2) - saved_activations(&s1), 2 * sbh,
           "checkpointing every 2 layers keeps one input per 2 layers");
    struct live_sink k;
    korthikanti_job(&s1, 3, ATTN_EAGER);
    s1.fixes = 1u << FIX_GRADIENT_CHECKPOINTING;
    ok(run(&s1, &k) == 0 && live_sink_consistent(&k), "checkpointed backward (recompute) is consistent");
    is_int(k.live - k.cat[CAT_PARAM] - k.cat[CAT_OPTIMIZER_STATE] - k.cat[CAT_WORKSPACE], 0, "and leaves nothing behind");
    live_sink_fini(&k);
}

/* Counts the GEMMs of the backward phase by dtype. */
struct gemm_count {
    struct op_sink base;
    bool backward;
    uint64_t by_dtype[DT_COUNT];
};

static int count_gemm(struct op_sink *sink, const struct op *op, struct err *e)
{
    (void)e;
    struct gemm_count *c = (struct gemm_count *)sink;
    if (op->kind == OP_PHASE)
        c->backward = !strcmp(op->name, "backward");
    if (op->kind == OP_KERNEL && c->backward && op->kernel.kernel == K_GEMM && op->kernel.dtype < DT_COUNT)
        c->by_dtype[op->kernel.dtype]++;
    return 0;
}

/* torch.utils.checkpoint re-enters the forward's autocast state: an fp32 model trained under fp16
 * autocast recomputes its checkpointed layers in fp16, so its backward runs no fp32 GEMM. */
static void test_checkpoint_under_autocast(void)
{
    struct job_spec s;
    korthikanti_job(&s, 2, ATTN_EAGER);
    s.load_dtype = s.param_dtype = DT_F32;
    s.fixes = 1u << FIX_GRADIENT_CHECKPOINTING | 1u << FIX_MIXED_PRECISION;
    struct err e = {0};
    struct workload *w = workload_create(&s, &e);
    struct gemm_count c = {.base.emit = count_gemm};
    ok(w && workload_run(w, &c.base, &e) == 0, "checkpointed fp32 model under autocast generates %s", e.msg);
    ok(c.by_dtype[DT_F16] + c.by_dtype[DT_BF16] > 0, "its backward runs 16-bit GEMMs (%llu)",
       (unsigned long long)(c.by_dtype[DT_F16] + c.by_dtype[DT_BF16]));
    is_int((int64_t)c.by_dtype[DT_F32], 0, "and no fp32 GEMM: the recompute runs under autocast too");
    workload_destroy(w);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void test_flan_t5_xl_step(void)
{
    struct job_spec s;
    job_spec_init(&s);
    snprintf(s.model.preset, sizeof s.model.preset, "flan-t5-xl");
    s.batch = 8;
    s.seq_len = 512;
    s.load_dtype = s.param_dtype = DT_BF16;
    s.steps = 1;
    struct err e = {0};
    struct workload *w = workload_create(&s, &e);
    ok(w != NULL, "flan-t5-xl workload created");
    if (!w)
        return;
    struct live_sink k;
    live_sink_init(&k, &e);
    double t0 = now_ms();
    int rc = workload_run(w, &k.base, &e);
    double ms = now_ms() - t0;
    ok(rc == 0 && live_sink_consistent(&k), "flan-t5-xl b8 s512 step: consistent (%llu ops)", (unsigned long long)k.ops);
    diag("flan-t5-xl b8 s512: one step generated in %.1f ms; generator host memory %.2f MiB", ms,
         workload_host_bytes(w) / 1048576.0);
    ok(workload_host_bytes(w) < 100u << 20, "generator host memory stays under 100 MiB");
    is_int(k.cat[CAT_PARAM], 2849757184LL * 2, "bf16 weights");
    live_sink_fini(&k);
    workload_destroy(w);
}

int main(void)
{
    test_consistency();
    test_korthikanti();
    test_checkpoint_under_autocast();
    test_flan_t5_xl_step();
    workload_destroy(last);
    return done_testing();
}
