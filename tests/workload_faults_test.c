/* workload_faults_test.c: each fault raises live bytes and each fix lowers them, by amounts derived
 * here from the parameter counts and shapes (no allocator: a sink sums live ALLOC bytes). */
#include "tap.h"
#include "workload/generate.h"
#include "workload/live_sink.h"

static struct live_sink k;
static struct workload *w; /* kept until the next run: the sink's mark names are its strings */

static int gen(const struct job_spec *s)
{
    struct err e = {0};
    live_sink_fini(&k);
    live_sink_init(&k, &e);
    workload_destroy(w);
    w = workload_create(s, &e);
    int rc = w ? workload_run(w, &k.base, &e) : -1;
    if (rc < 0)
        diag("generate: %s", e.msg);
    return rc == 0 && live_sink_consistent(&k) ? 0 : -1;
}

static int64_t at(const char *mark, int n)
{
    const struct live_mark *m = live_sink_mark(&k, mark, n);
    return m ? m->live : -1;
}

static int64_t peak_in(const char *mark, int n)
{
    const struct live_mark *m = live_sink_mark(&k, mark, n);
    return m ? m->peak_after : -1;
}

static void base(struct job_spec *s)
{
    job_spec_init(s); /* tiny-transformer: 4 layers, hidden 256, vocab 8192, 512 positions */
    s->batch = 4;
    s->seq_len = 64;
}

static const int64_t P = 8192LL * 256 + 512 * 256 + 4 * (12 * 256 * 256 + 13 * 256) + 2 * 256;
static const int64_t WTE = 8192LL * 256;

static void duplicate_conversion(void)
{
    struct job_spec s;
    base(&s);
    s.steps = 0;
    s.load_dtype = DT_F32;
    s.param_dtype = DT_BF16;
    gen(&s);
    int64_t plain = k.peak;
    is_int(plain, 4 * P + 2 * WTE, "fp32 load + in-place .to(bf16): fp32 size plus the largest parameter in bf16");
    s.faults = 1u << FAULT_DUPLICATE_DTYPE_CONVERSION;
    gen(&s);
    is_int(k.peak, 4 * P + 2 * P + 4 * P, "duplicate_dtype_conversion: fp32 kept + bf16 + fp32 state dict");
    s.fixes = 1u << FIX_CONVERT_ONCE;
    gen(&s);
    is_int(k.peak, 2 * P, "convert_once: bf16 weights only");
}

static void unreleased_gradients(void)
{
    struct job_spec s;
    base(&s);
    s.steps = 2;
    s.optimizer = OPT_SGD;
    gen(&s);
    int64_t fwd = at("forward", 1), peak = k.peak;
    s.faults = 1u << FAULT_UNRELEASED_GRADIENTS;
    gen(&s);
    is_int(at("forward", 1) - fwd, 4 * P + 4, "unreleased_gradients: fp32 .grad (4P) and the first loss live into step 2");
    ok(k.peak > peak, "and the peak rises (%lld > %lld)", (long long)k.peak, (long long)peak);
    s.fixes = 1u << FIX_ZERO_GRAD_SET_TO_NONE;
    gen(&s);
    is_int(at("forward", 1) - fwd, 4, "zero_grad_set_to_none: only step 1's kept loss remains (4 B)");
}

static void ema_spike(void)
{
    struct job_spec s;
    base(&s);
    s.ema = EMA_GPU;
    s.eval.every = 1;
    gen(&s);
    int64_t eval_peak = peak_in("eval", 0);
    s.faults = 1u << FAULT_EMA_CONTEXT_SPIKE;
    gen(&s);
    is_int(peak_in("eval", 0) - eval_peak, 4 * P, "ema_context_spike: store() clones every parameter (4P) for eval");
    s.fixes = 1u << FIX_SKIP_EMA_EVAL;
    gen(&s);
    is_int(peak_in("eval", 0), eval_peak, "skip_ema_eval: back to the plain eval peak");
    s.fixes = 1u << FIX_EMA_ON_CPU;
    gen(&s);
    is_int(peak_in("eval", 0), eval_peak - 4 * P, "ema_on_cpu: no shadow and no stored copy on the device");
}

static void growth(void)
{
    struct job_spec s;
    base(&s);
    s.seq_len = 256;
    gen(&s);
    int64_t long_act = live_sink_mark(&k, "backward", 0)->cat[CAT_ACTIVATION];
    base(&s);
    gen(&s);
    int64_t short_act = live_sink_mark(&k, "backward", 0)->cat[CAT_ACTIVATION];
    s.faults = 1u << FAULT_ACTIVATION_GROWTH;
    struct activation_growth_params growth = {.max_length = 256};
    activation_growth_params_set(&s, &growth);
    gen(&s);
    is_int(live_sink_mark(&k, "backward", 0)->cat[CAT_ACTIVATION], long_act,
           "activation_growth: padding to max_length 256 saves what a 256-token batch saves");
    ok(long_act > short_act, "which is more than the 64-token batch");
    s.fixes = 1u << FIX_PAD_TO_LONGEST;
    gen(&s);
    is_int(live_sink_mark(&k, "backward", 0)->cat[CAT_ACTIVATION], short_act, "pad_to_longest: back to 64 tokens");
    growth.seq_step = 64;
    activation_growth_params_set(&s, &growth);
    s.steps = 4;
    gen(&s);
    is_int(live_sink_mark(&k, "backward", 3)->cat[CAT_ACTIVATION], long_act, "growth of 64 tokens per step: step 4 has 256");
}

static void variable_length(void)
{
    struct job_spec s;
    base(&s);
    s.steps = 6;
    gen(&s);
    int64_t peak = k.peak;
    s.faults = 1u << FAULT_VARIABLE_LENGTH_FRAGMENTATION;
    gen(&s);
    int distinct = 0;
    int64_t seen[6];
    for (int i = 0; i < 6; i++) {
        int64_t v = live_sink_mark(&k, "backward", i)->cat[CAT_ACTIVATION];
        int dup = 0;
        for (int j = 0; j < distinct; j++)
            dup |= seen[j] == v;
        if (!dup)
            seen[distinct++] = v;
    }
    ok(distinct > 2, "variable_length_fragmentation: %d distinct activation sizes over 6 steps", distinct);
    ok(k.peak <= peak, "lengths never exceed seq_len: live peak does not rise (the cost is fragmentation)");
}

static void debug_capture(void)
{
    struct job_spec s;
    base(&s);
    s.steps = 2;
    gen(&s);
    int64_t end = k.live;
    s.faults = 1u << FAULT_DEBUG_ACTIVATION_CAPTURE;
    gen(&s);
    int64_t logits = 4LL * 64 * 8192 * 4;
    ok(k.live - end >= 2 * logits, "debug_activation_capture: two kept forwards hold at least their logits (%lld B kept)",
       (long long)(k.live - end));
    debug_activation_capture_params_set(&s, &(struct debug_activation_capture_params){.batches = 1});
    int64_t two = k.live - end;
    gen(&s);
    ok(k.live - end < two && k.live - end >= logits, "capture bounded to 1 batch keeps about half");
}

static void diffusion(struct job_spec *s)
{
    job_spec_init(s);
    s->model.preset[0] = 0;
    s->model.family = FAMILY_UNET;
    s->model.nlevels = 2;
    s->model.channels[0] = 32;
    s->model.channels[1] = 64;
    s->model.transformer_depth[0] = s->model.transformer_depth[1] = 1;
    s->model.attn_heads[0] = s->model.attn_heads[1] = 4;
    s->model.mid_transformer_depth = 1;
    s->model.layers_per_block = 1;
    s->model.groups = 8;
    s->model.cross_attention_dim = 768;
    s->model.latent_channels = 4;
    s->model.vae_scale = 8;
    s->model.time_embed_input = 32;
    s->batch = 2;
    s->image_size = 64;
    s->nextras = 2;
    s->extras[0] = (struct extra_spec){"clip-l-text", EXTRA_TEXT_ENCODER, DT_F32, false};
    s->extras[1] = (struct extra_spec){"sd-vae", EXTRA_VAE, DT_F32, true};
    s->eval.every = 1;
    s->eval.batch = 4;
    s->eval.sampling_steps = 1;
}

static void diffusion_faults(void)
{
    struct job_spec s;
    diffusion(&s);
    ok(gen(&s) == 0, "tiny UNet with a VAE and a CPU text encoder generates consistently");
    int64_t load = at("step", 0);
    s.faults = 1u << FAULT_RESIDENT_TEXT_ENCODER;
    gen(&s);
    is_int(at("step", 0) - load, 123060480LL * 4, "resident_text_encoder: CLIP-L's 123,060,480 fp32 params on the device");
    s.fixes = 1u << FIX_OFFLOAD_TEXT_ENCODER;
    gen(&s);
    is_int(at("step", 0), load, "offload_text_encoder: back on the CPU");

    diffusion(&s);
    s.eval.vae_decode = true;
    s.fixes = 1u << FIX_CHUNKED_DECODE;
    gen(&s);
    int64_t one = peak_in("decode", 0) - at("decode", 0);
    s.fixes = 0;
    s.faults = 1u << FAULT_VAE_DECODE_BURST;
    gen(&s);
    int64_t burst = peak_in("decode", 0) - at("decode", 0);
    is_int(burst, 4 * one, "vae_decode_burst: decoding 4 images at once needs 4x one image's decode memory");

    diffusion(&s);
    gen(&s);
    int64_t end = k.live;
    s.faults = 1u << FAULT_EVAL_SAMPLES_ON_DEVICE;
    gen(&s);
    is_int(k.live - end, 4LL * 4 * 8 * 8 * 4, "eval_samples_on_device: the 4 fp32 latents of 4x8x8 stay");
    s.eval.vae_decode = true;
    gen(&s);
    int64_t imgs = k.live - end;
    is_int(imgs, 4LL * 3 * 64 * 64 * 4, "with VAE decode: the 4 decoded 3x64x64 fp32 images stay");
    s.fixes = 1u << FIX_SAMPLES_TO_CPU;
    gen(&s);
    is_int(k.live, end, "samples_to_cpu: nothing stays");
}

static void optimizer_fixes(void)
{
    struct job_spec s;
    base(&s);
    gen(&s);
    is_int(k.cat[CAT_OPTIMIZER_STATE], 8 * P, "AdamW: fp32 exp_avg and exp_avg_sq, 8 B/param");
    int64_t peak = k.peak;
    s.fixes = 1u << FIX_ADAMW_8BIT;
    gen(&s);
    /* tensors of >= 4096 elements: two u8 states + 2 fp32 absmax per 256-element block; smaller: fp32 */
    int64_t small = 4 * (4 * 256 + 3 * 256 + 256 + 4 * 256 + 256) + 2 * 256; /* norms and biases */
    int64_t big = P - small;
    int64_t blocks = 0;
    int64_t sizes[] = {8192LL * 256, 512 * 256, 256 * 768, 256 * 256, 256 * 1024, 1024 * 256};
    int counts[] = {1, 1, 4, 4, 4, 4};
    for (int i = 0; i < 6; i++)
        blocks += counts[i] * ((sizes[i] + 255) / 256);
    is_int(k.cat[CAT_OPTIMIZER_STATE], 2 * big + 2 * 4 * blocks + 8 * small,
           "adamw_8bit: 2 B/param + block absmax, small tensors kept 32-bit");
    ok(k.peak < peak, "adamw_8bit lowers the peak");

    base(&s);
    s.optimizer = OPT_ADAMW;
    s.foreach = true;
    gen(&s);
    int64_t fe = peak_in("optimizer", 0) - at("optimizer", 0);
    s.foreach = false;
    gen(&s);
    int64_t loop = peak_in("optimizer", 0) - at("optimizer", 0);
    is_int(fe, 12 * P, "foreach AdamW, first step: fp32 state (8P) plus one temporary per parameter at once (4P)");
    is_int(loop, 8 * P + 8 * WTE,
           "foreach off: all state first (_init_group), then one parameter's sqrt and quotient at a time");

    base(&s);
    s.batch = 8;
    gen(&s);
    int64_t act8 = live_sink_mark(&k, "backward", 0)->cat[CAT_ACTIVATION];
    s.fixes = 1u << FIX_GRADIENT_ACCUMULATION;
    gradient_accumulation_params_set(&s, &(struct gradient_accumulation_params){.micro_batch = 2});
    gen(&s);
    ok(live_sink_mark(&k, "backward", 3) && !live_sink_mark(&k, "backward", 4), "gradient_accumulation: 4 micro-batches of 2");
    ok(live_sink_mark(&k, "backward", 0)->cat[CAT_ACTIVATION] < act8 / 3, "each saving about a quarter of the activations");

    base(&s);
    s.batch = 16;
    s.seq_len = 256;
    gen(&s);
    int64_t fp32_act = live_sink_mark(&k, "backward", 0)->cat[CAT_ACTIVATION];
    s.fixes = 1u << FIX_MIXED_PRECISION;
    gen(&s);
    ok(live_sink_mark(&k, "backward", 0)->cat[CAT_ACTIVATION] < fp32_act, "mixed_precision: 16-bit activations save less");

    int nf, nx;
    fault_table(&nf);
    fix_table(&nx);
    is_int(nf, FAULT_COUNT, "fault table complete");
    is_int(nx, FIX_COUNT, "fix table complete");
}

int main(void)
{
    struct err e = {0};
    live_sink_init(&k, &e);
    duplicate_conversion();
    unreleased_gradients();
    ema_spike();
    growth();
    variable_length();
    debug_capture();
    diffusion_faults();
    optimizer_fixes();
    live_sink_fini(&k);
    workload_destroy(w);
    return done_testing();
}
