/* scenario_families_test.c: every model family loads from its minimal keys (the dimensions it cannot
 * run without; the rest default), runs through the generator and the allocator model on the
 * simulated RTX 5090, and has the parameter count its architecture gives (worked out here from the
 * Hugging Face / diffusers layouts); leaving out any one of those keys is an input error naming it.
 * Family-form models written like a preset, without the keys that default, count as the preset does. */
#include <stdlib.h>
#include <unistd.h>

#include "run/harness.h"
#include "tap.h"

struct family_case {
    const char *name;
    const char *keys[8]; /* the model's minimal keys, "key: value" */
    const char *job;
    int64_t params;
};

/* ---- parameter counts of the layouts ---- */

static int64_t linear(int64_t in, int64_t out, bool bias)
{
    return in * out + (bias ? out : 0);
}

static int64_t conv3(int64_t cin, int64_t cout, bool bias)
{
    return cin * cout * 9 + (bias ? cout : 0);
}

/* diffusers ResnetBlock2D (GroupNorm with affine bias, biased convs, optional time projection). */
static int64_t resnet(int64_t cin, int64_t cout, int64_t temb)
{
    return 2 * cin + conv3(cin, cout, true) + (temb ? linear(temb, cout, true) : 0) + 2 * cout +
           conv3(cout, cout, true) + (cin != cout ? linear(cin, cout, true) : 0);
}

/* A pre-norm transformer layer without biases (LayerNorm weights only): attention (q, fused k/v, o),
 * FFN (up, down). */
static int64_t plain_layer(int64_t h, int64_t f)
{
    return h + 4 * h * h + h + 2 * h * f;
}

static int64_t vae_attention(int64_t c)
{
    return 2 * c + linear(c, c, true) + linear(c, 2 * c, true) + linear(c, c, true);
}

static void cases(struct family_case *c)
{
    const int64_t h = 64, f = 256, v = 1000, temb = 4 * 32;
    c[0] = (struct family_case){"decoder",
                                {"family: decoder", "layers: 2", "hidden: 64", "heads: 4", "vocab: 1000", "ffn: 256",
                                 "max_positions: 128"},
                                "{ batch_size: 2, seq_len: 128 }",
                                v * h + 128 * h + 2 * plain_layer(h, f) + h + v * h};
    c[1] = (struct family_case){"encoder",
                                {"family: encoder", "layers: 2", "hidden: 64", "heads: 4", "vocab: 1000", "ffn: 256",
                                 "max_positions: 128"},
                                "{ batch_size: 2, seq_len: 128 }",
                                v * h + 128 * h + h + 2 * plain_layer(h, f)};
    /* shared embedding; each stack a 32-bucket position bias; the decoder's layers add cross-attention */
    c[2] = (struct family_case){"t5",
                                {"family: t5", "layers: 2", "hidden: 64", "heads: 4", "vocab: 1000", "ffn: 256"},
                                "{ batch_size: 2, seq_len: 128 }",
                                v * h + 32 * 4 + 2 * plain_layer(h, f) + h + 32 * 4 +
                                    2 * (plain_layer(h, f) + h + 4 * h * h) + h + v * h};
    /* time embedding 32 -> 128 -> 128; down: a resnet per level, one downsampler; mid: two resnets; up:
     * two resnets per level on the skips (128 = 64 + 64, 96 = 64 + 32, then 96, 64), one upsampler */
    c[3] = (struct family_case){"unet",
                                {"family: unet", "channels: [32, 64]", "groups: 8", "layers_per_block: 1",
                                 "latent_channels: 4"},
                                "{ batch_size: 2, image_size: 64 }",
                                linear(32, temb, true) + linear(temb, temb, true) + conv3(4, 32, true) +
                                    resnet(32, 32, temb) + conv3(32, 32, true) + resnet(32, 64, temb) +
                                    2 * resnet(64, 64, temb) + resnet(128, 64, temb) + resnet(96, 64, temb) +
                                    conv3(64, 64, true) + resnet(96, 32, temb) + resnet(64, 32, temb) + 2 * 32 +
                                    conv3(32, 4, true)};
    c[4] = (struct family_case){"vae",
                                {"family: vae", "channels: [32, 64]", "groups: 8", "layers_per_block: 1",
                                 "in_channels: 3", "latent_channels: 4"},
                                "{ batch_size: 2, image_size: 64 }",
                                /* encoder, quant_conv */
                                conv3(3, 32, true) + resnet(32, 32, 0) + conv3(32, 32, true) + resnet(32, 64, 0) +
                                    2 * resnet(64, 64, 0) + vae_attention(64) + 2 * 64 + conv3(64, 8, true) +
                                    linear(8, 8, true) +
                                    /* post_quant_conv, decoder */
                                    linear(4, 4, true) + conv3(4, 64, true) + 2 * resnet(64, 64, 0) +
                                    vae_attention(64) + 2 * resnet(64, 64, 0) + conv3(64, 64, true) +
                                    resnet(64, 32, 0) + resnet(32, 32, 0) + 2 * 32 + conv3(32, 3, true)};
    c[5] = (struct family_case){"clip_text",
                                {"family: clip_text", "layers: 2", "hidden: 64", "heads: 4", "vocab: 1000", "ffn: 256",
                                 "max_positions: 77"},
                                "{ batch_size: 2 }",
                                v * h + 77 * h + 2 * plain_layer(h, f) + h};
    c[6] = (struct family_case){"mlp", {"family: mlp", "mlp_in: 16", "mlp_out: 4"}, "{ batch_size: 2 }",
                                linear(16, 4, false)};
    c[7] = (struct family_case){"cnn",
                                {"family: cnn", "channels: [16, 32]", "groups: 4", "layers_per_block: 1",
                                 "in_channels: 3", "out_channels: 10"},
                                "{ batch_size: 2, image_size: 32 }",
                                conv3(3, 16, false) + 2 * 16 + conv3(16, 32, false) + 2 * 32 + linear(32, 10, true)};
    /* 8x8 patches of 32 pixels: 16 + the class token; ViT's patch conv has a bias, CLIP's none; ViT's final
     * layernorm, CLIP's pre_layrnorm and post_layernorm */
    const int64_t patch = 3 * 8 * 8 * h, pos = 17 * h;
    c[8] = (struct family_case){"vit",
                                {"family: vit", "layers: 2", "hidden: 64", "heads: 4", "ffn: 256", "max_positions: 17",
                                 "patch_size: 8", "in_channels: 3"},
                                "{ batch_size: 2, image_size: 32 }",
                                patch + h + h + pos + 2 * plain_layer(h, f) + h};
    c[9] = (struct family_case){"clip_vision",
                                {"family: clip_vision", "layers: 2", "hidden: 64", "heads: 4", "ffn: 256",
                                 "max_positions: 17", "patch_size: 8", "in_channels: 3"},
                                "{ batch_size: 2, image_size: 32 }",
                                h + patch + pos + h + 2 * plain_layer(h, f) + h};
    /* Flux: x and context embedders, timestep and pooled-text embedders, one double block (two 6-way
     * modulations, q/k/v/out on each stream, RMSNorm(head_dim) on four of them, two feed-forwards),
     * norm_out's 2-way modulation, proj_out */
    /* (no q/k norms: qk_norm is off unless written) */
    c[10] = (struct family_case){"mmdit",
                                {"family: mmdit", "layers: 1", "hidden: 64", "heads: 4", "ffn: 256", "in_channels: 16",
                                 "cross_attention_dim: 32", "pooled_dim: 16"},
                                "{ batch_size: 2, image_size: 64 }",
                                linear(16, h, true) + linear(32, h, true) + linear(256, h, true) + linear(h, h, true) +
                                    linear(16, h, true) + linear(h, h, true) + 2 * linear(h, 6 * h, true) +
                                    8 * linear(h, h, true) + 2 * (linear(h, f, true) + linear(f, h, true)) +
                                    linear(h, 2 * h, true) + linear(h, 16, true)};
}

/* Writes a scenario with the model keys (all but `skip`, when given) and loads it. */
static int load(const struct family_case *c, const char *skip, struct scenario *s, struct err *e)
{
    char path[] = "/tmp/oomlab-family-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f)
        return err_set(e, ERR_INTERNAL, "cannot write a temporary scenario");
    fprintf(f, "name: family-%s\ntitle: t\nsource: tests\nmodel:\n", c->name);
    for (int i = 0; i < 8 && c->keys[i]; i++)
        if (c->keys[i] != skip)
            fprintf(f, "  %s\n", c->keys[i]);
    fprintf(f, "job: %s\nvariants:\n  before: { expect: { oom: false } }\n", c->job);
    fclose(f);
    int rc = scenario_load(path, s, e);
    unlink(path);
    return rc;
}

static void run_family(const struct family_case *c)
{
    struct scenario s;
    struct err e = {0};
    if (!ok(load(c, NULL, &s, &e) == 0, "%s loads from its minimal keys %s", c->name, e.msg))
        return;
    const struct model_spec *m = &s.variants[0].job.model;
    is_int(model_param_count(m, &e), c->params, "%s: %lld parameters, as its layout gives", c->name,
           (long long)c->params);
    struct harness_options opt = {0};
    struct job_result r;
    ok(harness_run_variant(&s, &s.variants[0], NULL, &opt, &r, &e) == 0 && !r.run.oom.happened && r.run.steps == 1,
       "%s runs a training step on sim %s", c->name, e.msg);
    ok(r.run.kernels > 0 && r.run.peak_allocated > (uint64_t)c->params * 4,
       "%s: kernels ran, and the peak (%llu B) holds at least the fp32 weights", c->name,
       (unsigned long long)r.run.peak_allocated);
    scenario_free(&s);

    /* every key past the family's name is needed */
    for (int i = 1; i < 8 && c->keys[i]; i++) {
        char key[32], want[96];
        snprintf(key, sizeof key, "%.*s", (int)strcspn(c->keys[i], ":"), c->keys[i]);
        snprintf(want, sizeof want, "model.%s is needed by family %s", key, c->name);
        e = (struct err){0};
        int rc = load(c, c->keys[i], &s, &e);
        ok(rc < 0 && e.code == ERR_INPUT && strstr(e.msg, want), "%s without %s: '%s' (got: %s)", c->name, key, want,
           e.msg);
        if (rc == 0)
            scenario_free(&s);
    }
}

/* A family-form model with a preset's dimensions, leaving out the keys that default, counts as the
 * preset does: the defaults are the preset's values. */
static void as_preset(const char *preset, const char *model)
{
    char path[] = "/tmp/oomlab-family-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!ok(f != NULL, "temporary scenario for %s", preset))
        return;
    fprintf(f, "name: like-%s\ntitle: t\nsource: tests\nmodel: %s\njob: { batch_size: 1, image_size: 64 }\n"
               "variants:\n  before: { expect: { oom: false } }\n",
            preset, model);
    fclose(f);
    struct scenario s;
    struct err e = {0};
    int rc = scenario_load(path, &s, &e);
    unlink(path);
    if (!ok(rc == 0, "%s written as a family loads %s", preset, e.msg))
        return;
    is_int(model_param_count(&s.variants[0].job.model, &e), preset_param_count(preset),
           "%s written as a family, defaults left out, has the preset's parameters", preset);
    scenario_free(&s);
}

int main(void)
{
    if (access("scenarios", F_OK) != 0)
        tap_skip_all("run from the repository root");
    struct family_case c[FAMILY_COUNT];
    cases(c);
    for (int i = 0; i < FAMILY_COUNT; i++) {
        is_str(c[i].name, family_name((enum model_family)i), "case %d is family %s", i, family_name(i));
        run_family(&c[i]);
    }
    /* time_embed_input (channels[0]) and vae_scale left out */
    as_preset("tiny-unet", "{ family: unet, attn: sdpa, latent_channels: 4, channels: [32, 64], transformer_depth: "
                           "[1, 0], attn_heads: [4, 4], layers_per_block: 1, groups: 8, mid_transformer_depth: 1, "
                           "cross_attention_dim: 768 }");
    as_preset("sdxl-unet", "{ family: unet, attn: sdpa, latent_channels: 4, channels: [320, 640, 1280], "
                           "transformer_depth: [0, 2, 10], attn_heads: [5, 10, 20], layers_per_block: 2, groups: 32, "
                           "mid_transformer_depth: 10, cross_attention_dim: 2048, linear_projection: true, "
                           "add_time_embed_dim: 256, add_embed_input: 2816 }");
    /* head_dim (hidden / heads) and vae_scale (8) left out */
    as_preset("flux.1-dev", "{ family: mmdit, attn: sdpa, layers: 19, single_layers: 38, hidden: 3072, heads: 24, "
                            "ffn: 12288, in_channels: 64, latent_channels: 16, cross_attention_dim: 4096, "
                            "pooled_dim: 768, guidance_embed: true, qk_norm: true }");
    as_preset("sd3-medium", "{ family: mmdit, attn: sdpa, layers: 24, hidden: 1536, heads: 24, ffn: 6144, "
                            "patch_size: 2, pos_embed_max: 192, in_channels: 16, cross_attention_dim: 4096, "
                            "pooled_dim: 2048 }");
    /* decoder_layers (layers), rel_buckets (32) and head_dim (hidden / heads) left out */
    as_preset("flan-t5-base", "{ family: t5, norm: rmsnorm, ffn_kind: gated, act: gelu_tanh, pos: relative_bias, "
                              "attn: eager, hidden: 768, ffn: 2048, layers: 12, heads: 12, vocab: 32128, "
                              "max_positions: 512, dropout: 0.1 }");
    /* kv_heads (heads) and head_dim left out */
    as_preset("gpt2", "{ family: decoder, norm_bias: true, act: gelu_tanh, bias: true, attn: sdpa, lm_head: true, "
                      "hidden: 768, layers: 12, heads: 12, ffn: 3072, vocab: 50257, max_positions: 1024, "
                      "tied_embeddings: true, causal: true }");
    return done_testing();
}
