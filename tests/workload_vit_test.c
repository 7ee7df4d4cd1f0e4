/* workload_vit_test.c: the vision transformers (models/vit.c). Preset counts against the published ones
 * and the dimensions formula; the image size checked against the position table; a step's op program
 * consistent, with every parameter (class token and position embeddings included) given optimizer state,
 * or only the classifier under a linear probe. */
#include <string.h>

#include "workload_step.h"

/* Parameters of a ViT from its dimensions (transformers' modeling_vit.py / modeling_clip.py): patch conv
 * (bias in ViT only), class token, position table, per layer q/k/v/o with biases, two LayerNorms and the
 * MLP; ViT's final layernorm and classifier, or CLIP's pre_layrnorm, post_layernorm and projection. */
static long long vit_formula(long long h, long long layers, long long ffn, long long patch, long long side,
                             long long labels, bool clip, long long proj)
{
    long long n = (side / patch) * (side / patch);
    long long layer = 4 * (h * h + h) + 4 * h + (h * ffn + ffn) + (ffn * h + h);
    long long total = 3 * patch * patch * h + (clip ? 0 : h) + h + (1 + n) * h + layers * layer;
    if (clip)
        return total + 2 * h + 2 * h + proj * h;
    return total + 2 * h + (labels ? labels * h + labels : 0);
}

static void test_counts(void)
{
    /* google/vit-base-patch16-224 and -large: 86,567,656 and 304,326,632 in their model cards'
     * safetensors metadata; openai/clip-vit-large-patch14's vision tower: 303,179,776 */
    is_int(preset_param_count("vit-base-patch16-224"), 86567656LL, "vit-base-patch16-224: 86,567,656");
    is_int(vit_formula(768, 12, 3072, 16, 224, 1000, false, 0), 86567656LL, "... as the dimensions give");
    is_int(preset_param_count("vit-large-patch16-224"), 304326632LL, "vit-large-patch16-224: 304,326,632");
    is_int(vit_formula(1024, 24, 4096, 16, 224, 1000, false, 0), 304326632LL, "... as the dimensions give");
    is_int(preset_param_count("clip-vit-l14-vision"), 303179776LL, "clip-vit-l14-vision: 303,179,776");
    is_int(vit_formula(1024, 24, 4096, 14, 224, 0, true, 0), 303179776LL, "... as the dimensions give");

    struct model_spec m;
    struct err e = {0};
    preset_apply(&m, "clip-vit-l14-vision", &e);
    m.projection_dim = 768; /* CLIPVisionModelWithProjection */
    is_int(model_param_count(&m, &e), 303179776LL + 768 * 1024, "with visual_projection: 303,966,208");
    preset_apply(&m, "vit-base-patch16-224", &e);
    m.num_labels = 0;
    m.pooler = true; /* ViTModel, add_pooling_layer=True */
    is_int(model_param_count(&m, &e), 86567656LL - 769000 + 768 * 768 + 768, "ViTModel with its pooler");
}

/* ViT-B/16 validated at an image side: 0, or the error holding both strings. */
static void image_case(int side, const char *want1, const char *want2, const char *what)
{
    struct job_spec s;
    struct err e = {0};
    job_spec_init(&s);
    snprintf(s.model.preset, sizeof s.model.preset, "vit-base-patch16-224");
    s.image_size = side;
    int rc = job_spec_validate(&s, &e);
    if (!want1)
        is_int(rc, 0, "%s", what);
    else
        ok(rc < 0 && strstr(e.msg, want1) && strstr(e.msg, want2), "%s: %s", what, e.msg);
}

static void test_checks(void)
{
    image_case(224, NULL, NULL, "224 pixels fit ViT-B/16's 197 positions");
    image_case(230, "image_size 230", "patch_size 16", "an image side that does not divide by the patch");
    image_case(384, "576 patches", "197", "another image size needs another position table");
    struct model_spec m = {.family = FAMILY_VIT, .layers = 1, .hidden = 64, .heads = 4, .ffn = 128,
                           .max_positions = 17, .in_channels = 3};
    struct err e = {0};
    ok(model_spec_resolve(&m, NULL, &e) < 0 && strstr(e.msg, "model.patch_size"), "patch_size is needed: %s",
       e.msg);
}

/* Two AdamW steps of ViT-B/16 at batch 2. */
static void test_step(enum trainable_kind trainable, int64_t trained, const char *what)
{
    struct job_spec s;
    job_spec_init(&s);
    snprintf(s.model.preset, sizeof s.model.preset, "vit-base-patch16-224");
    s.batch = 2;
    s.image_size = 224;
    s.steps = 2;
    s.trainable = trainable;
    check_adamw_steps(&s, trained, what);
}

int main(void)
{
    test_counts();
    test_checks();
    test_step(TRAIN_FULL, 86567656LL, "full fine-tuning");
    test_step(TRAIN_LINEAR_PROBE, 769000LL, "linear probe (the classifier only)");
    return done_testing();
}
