/* workload_mmdit_test.c: the MMDiT family (diffusers FluxTransformer2DModel), T5's encoder alone and the
 * text encoders of Flux and SDXL: exact parameter counts (the presets against the published ones, a
 * small model against the module shapes summed here), the LoRA adapters diffusers' Flux LoRA script
 * adds, a consistent op program that leaves nothing behind in full, LoRA and checkpointed training,
 * checkpointing keeping fewer activations, the text encoders feeding the transformer, and bad input. */
#include <string.h>

#include "tap.h"
#include "workload/generate.h"
#include "workload/live_sink.h"

static struct workload *last;

static int run(const struct job_spec *s, struct live_sink *k, struct err *e)
{
    *e = (struct err){0};
    live_sink_init(k, e);
    workload_destroy(last);
    last = workload_create(s, e);
    return last ? workload_run(last, &k->base, e) : -1;
}

/* hidden 64, 2 heads of 32, ffn 256, 16 packed channels, text 32 wide, pooled 16 */
static void small(struct job_spec *s, int layers, int single, bool guidance)
{
    job_spec_init(s);
    struct model_spec *m = &s->model;
    m->preset[0] = 0;
    m->family = FAMILY_MMDIT;
    m->layers = layers;
    m->single_layers = single;
    m->hidden = 64;
    m->heads = 2;
    m->head_dim = 32;
    m->ffn = 256;
    m->in_channels = 16;
    m->cross_attention_dim = 32;
    m->pooled_dim = 16;
    m->guidance_embed = guidance;
    m->qk_norm = true;
    m->attn = ATTN_SDPA;
    s->load_dtype = s->param_dtype = DT_BF16;
    s->batch = 2;
    s->image_size = 64; /* 64 / 8 / 2 = 4: 16 image tokens */
    s->context_len = 8;
    s->steps = 2;
}

/* The small model as SD3: 2x2 PatchEmbed over 16 latent channels with an 8x8 position table (latents
 * of 64 / 8 = 8 a side: 16 patches), no q/k norms, no single blocks. */
static void small_sd3(struct job_spec *s, int layers)
{
    small(s, layers, 0, false);
    s->model.qk_norm = false;
    s->model.patch_size = 2;
    s->model.pos_embed_max = 8;
}

/* transformer_sd3.py and JointTransformerBlock summed by hand: the last block is context_pre_only. */
static long long small_sd3_count(long long L)
{
    long long D = 64, F = 256, C = 16, T = 32, P = 16;
#define LIN(i, o) ((i) * (o) + (o))
    long long embed = C * D * 4 + D + LIN(256, D) + LIN(D, D) + LIN(P, D) + LIN(D, D) + LIN(T, D);
    long long ff = LIN(D, F) + LIN(F, D);
    long long joint = 2 * LIN(D, 6 * D) + 8 * LIN(D, D) + 2 * ff;
    long long pre_only = LIN(D, 6 * D) + LIN(D, 2 * D) + 7 * LIN(D, D) + ff;
    return embed + (L - 1) * joint + pre_only + LIN(D, 2 * D) + LIN(D, 4 * C);
#undef LIN
}

/* The module shapes of transformer_flux.py summed by hand. */
static long long small_count(long long L, long long Ls, bool guidance)
{
    long long D = 64, inner = 64, hd = 32, F = 256, C = 16, T = 32, P = 16, lin = 0;
#define LIN(i, o) ((i) * (o) + (o))
    lin = LIN(C, D) + LIN(T, D);                                     /* x_embedder, context_embedder */
    lin += (guidance ? 2 : 1) * (LIN(256, D) + LIN(D, D));           /* timestep (and guidance) embedders */
    lin += LIN(P, D) + LIN(D, D);                                    /* text_embedder */
    long long dbl = 2 * LIN(D, 6 * D) + 6 * LIN(D, inner) + 4 * hd + LIN(inner, D) * 2 + 2 * (LIN(D, F) + LIN(F, D));
    long long sgl = LIN(D, 3 * D) + LIN(D, F) + LIN(inner + F, D) + 3 * LIN(D, inner) + 2 * hd;
    return lin + L * dbl + Ls * sgl + LIN(D, 2 * D) + LIN(D, C); /* norm_out, proj_out */
#undef LIN
}

static void test_counts(void)
{
    is_int(preset_param_count("flux.1-dev"), 11901408320LL, "flux.1-dev transformer: 11,901,408,320 parameters");
    is_int(preset_param_count("t5-v1.1-xxl"), 4762310656LL, "t5-v1.1-xxl encoder: 4,762,310,656 parameters");
    is_int(preset_param_count("clip-l-text-proj"), 123650304LL, "clip-l-text-proj (SD3 text_encoder): 123,650,304 "
           "parameters, clip-l-text's and a 768 x 768 projection");
    is_int(preset_param_count("openclip-bigg-text"), 694659840LL,
           "openclip-bigg-text (SDXL text_encoder_2): 694,659,840 parameters");
    /* Flux's VAE: SD's with 16 latent channels (encoder conv_out to 32, decoder conv_in from 16), no
     * quant_conv or post_quant_conv */
    long long sd = 83653863LL, delta = (512 * 32 * 9 + 32) - (512 * 8 * 9 + 8) + (16 * 512 * 9) - (4 * 512 * 9) -
                                       (8 * 8 + 8) - (4 * 4 + 4);
    is_int(preset_param_count("flux-vae"), sd + delta, "flux-vae: 83,819,683 parameters, sd-vae's changed as diffusers' "
           "config says");
    is_int(sd + delta, 83819683LL, "which is FLUX.1-dev's vae: 83,819,683");
    struct job_spec s;
    struct err e = {0};
    small(&s, 2, 3, true);
    is_int(model_param_count(&s.model, &e), small_count(2, 3, true), "small mmdit with guidance: the module shapes");
    small(&s, 1, 0, false);
    is_int(model_param_count(&s.model, &e), small_count(1, 0, false), "one double block, no single, no guidance");
    is_int(preset_param_count("sd3-medium"), 2028328000LL, "sd3-medium transformer: 2,028,328,000 parameters (the "
           "position table is a buffer)");
    small_sd3(&s, 3);
    is_int(model_param_count(&s.model, &e), small_sd3_count(3), "small SD3: the module shapes, last block context_pre_only");
    /* T5's encoder alone: the full model less the decoder stack and the LM head */
    struct model_spec t5;
    preset_apply(&t5, "flan-t5-base", &e);
    long long full = model_param_count(&t5, &e);
    t5.encoder_only = true;
    long long d = 768, f = 2048, dec_block = 4 * d * d + 4 * d * d + 3 * d * f + 3 * d; /* self, cross, ff, 3 norms */
    is_int(model_param_count(&t5, &e), full - 12 * dec_block - 32 * 12 - d - 32128 * d,
           "flan-t5-base encoder_only drops 12 decoder blocks, their position bias, final norm and lm_head");
}

static int64_t params_at_forward(const struct job_spec *s)
{
    struct live_sink k;
    struct err e = {0};
    int64_t v = -1;
    if (run(s, &k, &e) == 0) {
        const struct live_mark *mk = live_sink_mark(&k, "forward", 0);
        v = mk ? mk->cat[CAT_PARAM] : -1;
    } else {
        diag("%s", e.msg);
    }
    live_sink_fini(&k);
    return v;
}

/* diffusers' Flux LoRA scripts target attn.to_q, to_k, to_v and to_out.0: 19 x 4 + 38 x 3 projections of
 * 3072 -> 3072, r (3072 + 3072) each; rank 4 gives the 4.67M the flux-qlora blog reports. */
static void test_lora(void)
{
    struct job_spec s;
    job_spec_init(&s);
    snprintf(s.model.preset, sizeof s.model.preset, "flux.1-dev");
    s.load_dtype = s.param_dtype = DT_BF16;
    s.batch = 1;
    s.image_size = 256;
    s.context_len = 16;
    s.steps = 1;
    s.fixes |= 1u << FIX_GRADIENT_CHECKPOINTING;
    int64_t base = params_at_forward(&s);
    s.trainable = TRAIN_LORA;
    s.lora_rank = 4;
    int64_t lora = params_at_forward(&s);
    is_int((lora - base) / 2, 4669440, "rank-4 LoRA on to_q/k/v/out.0: 4,669,440 adapter parameters (bf16)");
    /* SD3's recipe adds the text stream's add_q/k/v_proj and to_add_out: 23 blocks of 8 projections and
     * the context_pre_only last of 7, 1536 -> 1536 each */
    snprintf(s.model.preset, sizeof s.model.preset, "sd3-medium");
    s.trainable = TRAIN_FULL;
    base = params_at_forward(&s);
    s.trainable = TRAIN_LORA;
    is_int((params_at_forward(&s) - base) / 2, (23 * 8 + 7) * 4LL * (1536 + 1536),
           "SD3 rank-4 LoRA on both streams' projections: 2,347,008 adapter parameters");
    /* SD3's position table is loaded with the weights: 192 x 192 x 1536, bf16 */
    s.trainable = TRAIN_FULL;
    is_int(params_at_forward(&s), (2028328000LL + 192LL * 192 * 1536) * 2, "sd3-medium on the device: its weights "
           "and its pos_embed buffer");
}

static void test_program(void)
{
    static const struct {
        bool sd3, lora, ckpt;
    } modes[] = {{false, false, false}, {false, true, false}, {false, false, true}, {false, true, true},
                 {true, false, false}, {true, true, false}, {true, false, true}, {true, true, true}};
    int64_t saved[2][2] = {{0, 0}, {0, 0}};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        struct job_spec s;
        struct live_sink k;
        struct err e = {0};
        if (modes[i].sd3)
            small_sd3(&s, 3);
        else
            small(&s, 3, 2, true);
        s.trainable = modes[i].lora ? TRAIN_LORA : TRAIN_FULL;
        if (modes[i].ckpt)
            s.fixes |= 1u << FIX_GRADIENT_CHECKPOINTING;
        char what[64];
        snprintf(what, sizeof what, "%s, %s%s", modes[i].sd3 ? "SD3" : "Flux", modes[i].lora ? "LoRA" : "full",
                 modes[i].ckpt ? ", checkpointed" : "");
        ok(run(&s, &k, &e) == 0 && live_sink_consistent(&k), "%s: the op program is consistent %s", what, e.msg);
        int64_t rest = k.live - k.cat[CAT_PARAM] - k.cat[CAT_OPTIMIZER_STATE] - k.cat[CAT_WORKSPACE];
        is_int(rest, 0, "%s: only params, optimizer state and the workspace are live after the steps", what);
        const struct live_mark *mk = live_sink_mark(&k, "backward", 0);
        if (!modes[i].lora)
            saved[modes[i].sd3][modes[i].ckpt] = mk ? mk->cat[CAT_ACTIVATION] : -1;
        live_sink_fini(&k);
    }
    for (int f = 0; f < 2; f++)
        ok(saved[f][1] > 0 && saved[f][1] * 3 < saved[f][0], "%s: checkpointing every block keeps under a third of "
           "the activations (%lld of %lld B)", f ? "SD3" : "Flux", (long long)saved[f][1], (long long)saved[f][0]);
}

/* Flux's text encoders in front of a small transformer: T5's encoder gives the token states, CLIP's
 * pooled output the pooled projection; offloaded, neither runs. */
/* An op sink that keeps the size of the first allocation named `name`. */
struct named_sink {
    struct op_sink base;
    const char *name;
    long long bytes;
};

static int named_emit(struct op_sink *sink, const struct op *op, struct err *e)
{
    struct named_sink *n = (struct named_sink *)sink;
    (void)e;
    if (op->kind == OP_ALLOC && !n->bytes && op->name && !strcmp(op->name, n->name))
        n->bytes = (long long)op->bytes;
    return 0;
}

/* A small transformer as wide as Flux's text encoders, with T5-XXL's encoder and `second` in front. */
static void with_encoders(struct job_spec *s, const char *second)
{
    small(s, 1, 1, true);
    s->model.cross_attention_dim = 4096;
    s->model.pooled_dim = 768;
    s->context_len = 16;
    s->steps = 1;
    s->nextras = 2;
    snprintf(s->extras[0].preset, sizeof s->extras[0].preset, "t5-v1.1-xxl");
    snprintf(s->extras[1].preset, sizeof s->extras[1].preset, "%s", second);
    for (int i = 0; i < 2; i++) {
        s->extras[i].role = EXTRA_TEXT_ENCODER;
        s->extras[i].dtype = DT_BF16;
        s->extras[i].on_device = true;
    }
}

/* Flux's text encoders in front of a small transformer: T5's encoder gives the token states, CLIP's
 * pooled output the pooled projection; offloaded, neither runs. */
static void test_text_encoders(void)
{
    struct job_spec s;
    struct live_sink k;
    struct err e = {0};
    with_encoders(&s, "clip-l-text");
    ok(run(&s, &k, &e) == 0 && live_sink_consistent(&k), "T5-XXL and CLIP-L feed the transformer %s", e.msg);
    const struct live_mark *mk = live_sink_mark(&k, "forward", 0);
    int64_t resident = mk ? mk->cat[CAT_PARAM] : -1;
    ok(resident > (4762310656LL + 123060480LL) * 2, "both encoders' bf16 weights are resident (%lld B)",
       (long long)resident);
    ok(k.peak - resident > 16LL * 16 * 4096 * 2, "T5 runs on the device: its activations add to the peak");
    live_sink_fini(&k);
    int64_t on = params_at_forward(&s);
    s.fixes |= 1u << FIX_OFFLOAD_TEXT_ENCODER;
    int64_t off = params_at_forward(&s);
    is_int(on - off, (4762310656LL + 123060480LL) * 2, "offload_text_encoder keeps both encoders off the device");

    /* an encoder whose width is neither the token states' nor the pooled embedding's */
    with_encoders(&s, "openclip-bigg-text");
    ok(run(&s, &k, &e) < 0 && strstr(e.msg, "extras[1]") && strstr(e.msg, "1280") && strstr(e.msg, "pooled_dim"),
       "a 1280-wide encoder beside an MMDiT is refused: %s", e.msg);
    live_sink_fini(&k);
    with_encoders(&s, "flan-t5-base");
    ok(run(&s, &k, &e) < 0 && strstr(e.msg, "extras[1]: flan-t5-base is not a text encoder"),
       "a T5 with its decoder is not a text encoder: %s", e.msg);
    live_sink_fini(&k);

    /* SD3's three encoders: CLIP-L and CLIP-G must give pooled_dim together */
    with_encoders(&s, "openclip-bigg-text");
    s.model.patch_size = 2;
    s.model.pos_embed_max = 8;
    s.model.single_layers = 0;
    s.model.guidance_embed = false;
    s.model.qk_norm = false;
    s.model.pooled_dim = 2048;
    ok(run(&s, &k, &e) < 0 && strstr(e.msg, "1280 wide together") && strstr(e.msg, "model.pooled_dim (2048)"),
       "SD3 with CLIP-G alone on the device: %s", e.msg);
    live_sink_fini(&k);
    s.nextras = 3;
    s.extras[2] = s.extras[1];
    snprintf(s.extras[1].preset, sizeof s.extras[1].preset, "clip-l-text-proj");
    struct named_sink ns = {.base = {named_emit}, .name = "prompt_embeds"};
    workload_destroy(last);
    last = workload_create(&s, &e);
    ok(last && workload_run(last, &ns.base, &e) == 0, "SD3 with T5-XXL, CLIP-L and CLIP-G on the device runs %s", e.msg);
    is_int(ns.bytes, 2LL * (77 + 16) * 4096 * 2, "its text tokens: CLIP's 77 (768 + 1280 wide, padded to 4096), then "
           "T5's 16");
}

static void test_bad_input(void)
{
    struct job_spec s;
    struct err e = {0};
    small(&s, 1, 1, false);
    s.image_size = 72; /* not a multiple of 16 */
    ok(job_spec_validate(&s, &e) < 0 && strstr(e.msg, "image_size 72"), "an image side that cannot be packed: %s",
       e.msg);
    small(&s, 1, 1, false);
    e = (struct err){0};
    s.model.pooled_dim = 0;
    ok(job_spec_validate(&s, &e) < 0 && strstr(e.msg, "model.pooled_dim") && strstr(e.msg, "mmdit"),
       "pooled_dim is needed: %s", e.msg);
    small(&s, 1, 1, false);
    e = (struct err){0};
    s.model.head_dim = 0;
    s.model.heads = 3;
    ok(job_spec_validate(&s, &e) < 0 && strstr(e.msg, "model.heads 3"), "hidden not a multiple of heads: %s", e.msg);
    small(&s, 1, 1, false);
    e = (struct err){0};
    s.context_len = 0;
    ok(job_spec_validate(&s, &e) < 0 && strstr(e.msg, "context_len"), "no text tokens: %s", e.msg);
    small_sd3(&s, 2);
    e = (struct err){0};
    s.model.single_layers = 1;
    ok(job_spec_validate(&s, &e) < 0 && strstr(e.msg, "model.single_layers"), "SD3 with single blocks: %s", e.msg);
    small_sd3(&s, 2);
    e = (struct err){0};
    s.image_size = 128; /* 8 patches a side, the table holds 8 */
    ok(job_spec_validate(&s, &e) == 0, "SD3 at the table's side validates %s", e.msg);
    s.image_size = 144;
    ok(job_spec_validate(&s, &e) < 0 && strstr(e.msg, "model.pos_embed_max 8"), "past the table's side: %s", e.msg);
    small_sd3(&s, 2);
    e = (struct err){0};
    s.model.pos_embed_max = 0;
    ok(job_spec_validate(&s, &e) < 0 && strstr(e.msg, "model.pos_embed_max is needed"), "no table: %s", e.msg);
    small(&s, 1, 1, false);
    e = (struct err){0};
    s.eval.every = 1;
    s.eval.sampling_steps = 4;
    ok(job_spec_validate(&s, &e) < 0 && strstr(e.msg, "eval.sampling_steps"), "eval sampling is refused: %s", e.msg);
    is_str(family_name(FAMILY_MMDIT), "mmdit", "family name");
    is_int(family_from_name("mmdit"), FAMILY_MMDIT, "family from name");
}

int main(void)
{
    test_counts();
    test_lora();
    test_program();
    test_text_encoders();
    test_bad_input();
    workload_destroy(last);
    return done_testing();
}
