/* diffusion_job_test.c: job.kind diffusion checked against numbers worked here: classifier-free
 * guidance doubles the UNet's input, a batch-4 VAE decode peaks at 4x one image's and at one image's
 * plus the three decoded images kept with vae_slicing, tiled_decode's tile count and a decode peak
 * that stops growing with the image, TAESD's parameter count, what model and sequential offload leave
 * on the device, and bad settings refused with the key named. Uses the live-bytes sink (no allocator). */
#include <string.h>

#include "tap.h"
#include "workload/diffusion_job.h"
#include "workload/generate.h"
#include "workload/live_sink.h"

/* The live sink, plus the bytes of the UNet's first noisy_latents input. */
struct probe {
    struct op_sink base;
    struct live_sink live;
    uint64_t noisy;
};

static int probe_emit(struct op_sink *sink, const struct op *op, struct err *e)
{
    struct probe *p = (struct probe *)sink;
    if (op->kind == OP_ALLOC && !p->noisy && op->name && !strcmp(op->name, "noisy_latents"))
        p->noisy = op->bytes;
    return p->live.base.emit(&p->live.base, op, e);
}

static struct workload *last; /* kept until the next run: the marks' names are its strings */

static int run(const struct job_spec *s, struct probe *p)
{
    struct err e = {0};
    memset(p, 0, sizeof *p);
    p->base.emit = probe_emit;
    live_sink_init(&p->live, &e);
    workload_destroy(last);
    last = workload_create(s, &e);
    int rc = last ? workload_run(last, &p->base, &e) : -1;
    if (rc < 0)
        diag("generate failed: %s", e.msg);
    return rc;
}

/* SD 1.5 at `side` pixels, one denoising step, fp32 weights, the SD VAE (and no text encoder: the
 * prompt embeddings are an input). */
static void sd15(struct job_spec *s, int batch, int side)
{
    job_spec_init(s);
    snprintf(s->model.preset, sizeof s->model.preset, "sd15-unet");
    s->kind = JOB_DIFFUSION;
    s->batch = batch;
    s->image_size = side;
    s->diffusion.steps = 1;
    s->nextras = 1;
    s->extras[0] = (struct extra_spec){"sd-vae", EXTRA_VAE, DT_F32, true};
}

/* What the decode adds to what was live when it began, at its peak. */
static int64_t decode_extra(const struct job_spec *s)
{
    struct probe p;
    int64_t v = -1;
    if (run(s, &p) == 0) {
        const struct live_mark *m = live_sink_mark(&p.live, "decode", 0);
        v = m ? m->peak_after - m->live : -1;
    }
    live_sink_fini(&p.live);
    return v;
}

static void test_guidance(void)
{
    struct job_spec s;
    struct probe p;
    sd15(&s, 2, 64);
    s.load_dtype = DT_F16;
    s.diffusion.images_per_prompt = 3;
    ok(run(&s, &p) == 0 && live_sink_consistent(&p.live), "SD 1.5, 2 prompts x 3 images, guidance: consistent");
    /* 2 prompts x 3 images x 2 (uncond, cond) x 4 channels x (64 / 8)^2 latents x 2 B */
    is_int((int64_t)p.noisy, 2 * 3 * 2 * 4 * 8 * 8 * 2, "the UNet's input is torch.cat([latents] * 2): 3,072 B");
    is_int(diffusion_unet_batch(&s), 12, "UNet batch 12");
    live_sink_fini(&p.live);
    s.diffusion.guidance = false;
    ok(run(&s, &p) == 0, "without guidance");
    is_int((int64_t)p.noisy, 2 * 3 * 4 * 8 * 8 * 2, "the UNet's input is the latents' size: 1,536 B");
    live_sink_fini(&p.live);
    s.diffusion.height = 128; /* 128 x 64 pixels: 16 x 8 latents */
    ok(run(&s, &p) == 0 && live_sink_consistent(&p.live), "a 128 x 64 image: consistent");
    is_int((int64_t)p.noisy, 2 * 3 * 4 * 16 * 8 * 2, "the UNet's input is 16 x 8 latents: 3,072 B");
    live_sink_fini(&p.live);
}

static void test_vae_slicing(void)
{
    struct job_spec s;
    sd15(&s, 1, 128);
    int64_t one = decode_extra(&s);
    sd15(&s, 4, 128);
    int64_t four = decode_extra(&s);
    s.diffusion.vae_slicing = true;
    int64_t sliced = decode_extra(&s);
    int64_t latent = 4 * 16 * 16 * 4, image = 3 * 128 * 128 * 4;
    ok(one > 0, "one 128-pixel image's fp32 decode adds %lld B at its peak", (long long)one);
    is_int(four, 4 * one, "batch 4 decoded at once: 4x one image's");
    /* the last slice: one image's decode, the three images already decoded, the batch's scaled latents
     * (three more than one image's) and the slice's copy of its latents */
    is_int(sliced, one + 3 * image + 3 * latent + latent, "vae_slicing: one image's, plus 3 images kept and the latents");
    ok(four * 100 / sliced >= 350, "slicing cuts the batch-4 decode peak %.2fx (at most 4x)", (double)four / (double)sliced);
}

static void test_vae_tiling(void)
{
    struct job_spec s;
    sd15(&s, 1, 512);
    s.diffusion.vae_tiling = true;
    s.diffusion.tile_size = 128; /* latent tile 16, a tile every int(16 x 0.75) = 12 latents */
    struct err e = {0};
    ok(job_spec_validate(&s, &e) == 0, "SD 1.5 at 512 with 128-pixel tiles validates (%s)", e.msg);
    is_int(diffusion_tiles_per_side(&s, 64), 6, "512 pixels, 128-pixel tiles: tiles at 0, 12, ..., 60: 6 per side");
    ok(diffusion_tiled(&s, 64, 64) && !diffusion_tiled(&s, 16, 16), "latents that fit one tile are not tiled");
    is_int(diffusion_tiles_per_side(&s, 16), 2, "a 16-latent side of tiled latents: tiles at 0 and 12 (range(0, 16, 12))");
    struct job_spec xl;
    job_spec_init(&xl);
    snprintf(xl.model.preset, sizeof xl.model.preset, "sdxl-unet");
    xl.kind = JOB_DIFFUSION;
    xl.diffusion.vae_tiling = true;
    xl.image_size = 1024;
    xl.nextras = 1;
    xl.extras[0] = (struct extra_spec){"sd-vae", EXTRA_VAE, DT_F16, true};
    ok(job_spec_validate(&xl, &e) == 0, "SDXL at 1024 with tiling validates (%s)", e.msg);
    ok(!diffusion_tiled(&xl, 128, 128), "SDXL's VAE tiles from 1024 pixels: a 1024x1024 image is not tiled");

    int64_t tiled512 = decode_extra(&s);
    s.diffusion.vae_tiling = false;
    int64_t whole512 = decode_extra(&s);
    s.image_size = 1024;
    s.diffusion.vae_tiling = true;
    int64_t tiled1024 = decode_extra(&s);
    /* every decoded tile is kept until the blend: 512 px: 5 tiles of 128 and one of 32 per side;
     * 1024 px (128 latents): tiles at 0, 12, ..., 120: 10 of 128 and one of 64 (from 120) per side */
    int64_t kept512 = (5 * 128 + 32) * (5 * 128 + 32) * 3 * 4, kept1024 = (10 * 128 + 64) * (10 * 128 + 64) * 3 * 4;
    ok(tiled512 * 3 < whole512, "tiling 512 px into 128-pixel tiles: %lld B against %lld B whole", (long long)tiled512,
       (long long)whole512);
    int64_t per512 = tiled512 - kept512, per1024 = tiled1024 - kept1024;
    ok(per1024 - per512 < 1 << 20 && per512 - per1024 < 1 << 20,
       "beyond the kept tiles the decode stays one tile's, within 1 MiB: %lld B at 512 px, %lld B at 1024 px",
       (long long)per512, (long long)per1024);
    ok(tiled1024 < whole512, "tiled, 4x the pixels decode in less than 512 px whole: %lld B", (long long)tiled1024);
}

/* The denoising phase's peak with attention_slicing `slice` (SD 1.5 at 512 pixels, one prompt, guidance). */
static int64_t denoise_peak(int slice)
{
    struct job_spec s;
    struct probe p;
    sd15(&s, 1, 512);
    s.load_dtype = DT_F16;
    s.diffusion.attention_slicing = slice;
    int64_t v = -1;
    if (run(&s, &p) == 0 && live_sink_consistent(&p.live)) {
        const struct live_mark *m = live_sink_mark(&p.live, "denoise", 0);
        v = m ? m->peak_after : -1;
    }
    live_sink_fini(&p.live);
    return v;
}

static void test_attention_slicing(void)
{
    /* the first level's self-attention: 64 x 64 = 4,096 tokens; a slice of n rows of (2 images x 8 heads)
     * holds two [n, 4096, 4096] fp16 tensors at once (the baddbmm input and the scores, then the scores and
     * the probabilities): 2 x n x 4096^2 x 2 B, and the row's q (4096 x 40 head dims) and k/v (4096 x 80),
     * gathered for the kernel (views in PyTorch): 983,040 B a row */
    int64_t one = denoise_peak(ATTN_SLICE_MAX), four = denoise_peak(4), auto_ = denoise_peak(ATTN_SLICE_AUTO);
    int64_t eight = denoise_peak(8), sdpa = denoise_peak(0);
    int64_t per_row = 2LL * 4096 * 4096 * 2 + 4096 * 40 * 2 + 4096 * 80 * 2;
    is_int(four - one, 3 * per_row, "slice 4 against max: 3 more rows, 204,275,712 B");
    is_int(eight - four, 4 * per_row, "slice 8 against 4: 4 more rows, 272,367,616 B");
    is_int(auto_, four, "auto is half of SD 1.5's 8 heads: 4");
    ok(sdpa < one, "SDPA (no score matrix) peaks below even one row at a time: %lld B against %lld B", (long long)sdpa,
       (long long)one);
}

static void test_tiny_autoencoder(void)
{
    struct job_spec s;
    struct probe p;
    sd15(&s, 1, 64);
    ok(run(&s, &p) == 0, "with the KL VAE");
    const struct live_mark *m = live_sink_mark(&p.live, "encode_prompt", 0);
    int64_t kl = m ? m->cat[CAT_PARAM] : -1;
    live_sink_fini(&p.live);
    s.diffusion.tiny_autoencoder = true;
    ok(run(&s, &p) == 0 && live_sink_consistent(&p.live), "with AutoencoderTiny: consistent");
    m = live_sink_mark(&p.live, "encode_prompt", 0);
    int64_t tiny = m ? m->cat[CAT_PARAM] : -1;
    is_int(kl - tiny, (83653863LL - TAESD_PARAMS) * 4, "TAESD's 2,445,063 parameters load instead of the VAE's 83,653,863");
    live_sink_fini(&p.live);
}

static int64_t params_at(const struct probe *p, const char *phase)
{
    const struct live_mark *m = live_sink_mark(&p->live, phase, 0);
    return m ? m->cat[CAT_PARAM] : -1;
}

static void test_offload(void)
{
    struct job_spec s;
    struct probe p;
    sd15(&s, 1, 64);
    s.load_dtype = DT_F16;
    s.nextras = 2;
    s.extras[0] = (struct extra_spec){"clip-l-text", EXTRA_TEXT_ENCODER, DT_F16, true};
    s.extras[1] = (struct extra_spec){"sd-vae", EXTRA_VAE, DT_F16, true};
    s.diffusion.offload = OFFLOAD_MODEL;
    ok(run(&s, &p) == 0 && live_sink_consistent(&p.live), "model offload: consistent");
    is_int(params_at(&p, "encode_prompt"), 0, "model offload: nothing on the device after the load");
    is_int(params_at(&p, "denoise"), 123060480LL * 2, "the text encoder alone when denoise begins");
    is_int(params_at(&p, "decode"), 859520964LL * 2, "the UNet alone when decode begins");
    is_int(p.live.cat[CAT_PARAM], 0, "maybe_free_model_hooks: nothing left on the device");
    live_sink_fini(&p.live);
    s.diffusion.offload = OFFLOAD_SEQUENTIAL;
    ok(run(&s, &p) == 0 && live_sink_consistent(&p.live), "sequential offload: consistent");
    ok(params_at(&p, "denoise") == 0 && params_at(&p, "decode") == 0 && p.live.cat[CAT_PARAM] == 0,
       "sequential offload: no weights between components");
    live_sink_fini(&p.live);
}

/* job_spec_validate's message for a diffusion job changed by `edit`, or "" when it validates. */
static const char *refusal(void (*edit)(struct job_spec *), struct err *e)
{
    struct job_spec s;
    sd15(&s, 1, 512);
    edit(&s);
    memset(e, 0, sizeof *e);
    return job_spec_validate(&s, e) < 0 && e->code == ERR_INPUT ? e->msg : "";
}

static void no_vae(struct job_spec *s) { s->nextras = 0; }
static void odd_width(struct job_spec *s) { s->diffusion.width = 520; }
static void odd_side(struct job_spec *s) { s->diffusion.height = s->diffusion.width = 520; }
static void slice_too_big(struct job_spec *s) { s->diffusion.attention_slicing = 9; }
static void tiny_tiling(struct job_spec *s) { s->diffusion.tiny_autoencoder = s->diffusion.vae_tiling = true; }
static void on_cpu(struct job_spec *s) { s->extras[0].on_device = false; }
static void training_fix(struct job_spec *s) { s->fixes |= 1u << FIX_GRADIENT_CHECKPOINTING; }
static void not_unet(struct job_spec *s) { snprintf(s->model.preset, sizeof s->model.preset, "gpt2"); }
static void width_mismatch(struct job_spec *s)
{
    s->nextras = 2;
    s->extras[1] = (struct extra_spec){"openclip-bigg-text", EXTRA_TEXT_ENCODER, DT_F16, true};
}

static void test_refusals(void)
{
    static const struct {
        void (*edit)(struct job_spec *);
        const char *key;
    } cases[] = {
        {no_vae, "job.extras: job.kind diffusion decodes with a VAE extra"},
        {odd_width, "job.diffusion.width: 520 must be a multiple of 64"},
        {odd_side, "job.diffusion.height: 520 must be a multiple of 64"},
        {slice_too_big, "job.diffusion.attention_slicing: 9 is more than the 8 heads"},
        {tiny_tiling, "job.diffusion.vae_tiling: with tiny_autoencoder is not built yet"},
        {on_cpu, "job.extras[0].on_device"},
        {training_fix, "fixes: gradient_checkpointing acts on a training loop"},
        {not_unet, "model: job.kind diffusion runs a UNet2DConditionModel"},
        {width_mismatch, "job.extras: the text encoders' hidden widths add up to 1280, the UNet's cross_attention_dim is 768"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct err e;
        const char *msg = refusal(cases[i].edit, &e);
        ok(strstr(msg, cases[i].key) != NULL, "refused: %s", msg);
    }
}

int main(void)
{
    test_guidance();
    test_vae_slicing();
    test_vae_tiling();
    test_attention_slicing();
    test_tiny_autoencoder();
    test_offload();
    test_refusals();
    workload_destroy(last);
    return done_testing();
}
