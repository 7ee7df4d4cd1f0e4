/* hf_config_vision.c: the readers of the vision transformers' rows of hf_config.c's table: model_type vit
 * (ViTConfig: ViTForImageClassification or ViTModel by `architectures`), clip (CLIPConfig: the vision tower
 * of CLIPModel with its visual_projection, read from `vision_config` and the top-level projection_dim;
 * the text tower is not built) and clip_vision_model (CLIPVisionConfig: CLIPVisionModel, or
 * WithProjection by `architectures`). Absent fields take the defaults of ViTConfig and CLIPVisionConfig
 * (transformers/models/vit/configuration_vit.py, models/clip/configuration_clip.py): ViT hidden_size 768,
 * num_hidden_layers 12, num_attention_heads 12, intermediate_size 3072, hidden_act gelu, dropouts 0.0,
 * image_size 224, patch_size 16, num_channels 3, qkv_bias true; CLIP vision the same but patch_size 32,
 * hidden_act quick_gelu, projection_dim 512, attention_dropout 0.0; CLIPConfig's projection_dim 512. A
 * classifier's labels are `num_labels`, else the entries of `id2label`, else PretrainedConfig's 2. */
#include "workload/hf_config.h"

#include <jansson.h>
#include <string.h>

/* The dimensions both configs name alike, over their classes' defaults; image_size and patch_size make
 * the position table. */
static int common(struct hf_reader *r, int patch, enum act_kind act, struct err *e)
{
    struct model_spec *m = r->m;
    int image = 224;
    m->hidden = 768;
    m->layers = m->heads = 12;
    m->ffn = 3072;
    m->in_channels = 3;
    m->patch_size = patch;
    m->act = act;
    m->num_labels = 0;
    if (hf_int(r, "hidden_size", false, &m->hidden, e) || hf_int(r, "num_hidden_layers", false, &m->layers, e) ||
        hf_int(r, "num_attention_heads", false, &m->heads, e) || hf_int(r, "intermediate_size", false, &m->ffn, e) ||
        hf_int(r, "image_size", false, &image, e) || hf_int(r, "patch_size", false, &m->patch_size, e) ||
        hf_int(r, "num_channels", false, &m->in_channels, e) || hf_act(r, "hidden_act", &m->act, e))
        return -1;
    if (m->hidden % m->heads)
        return err_set(e, ERR_INPUT, "%s: hidden_size %d is not a multiple of num_attention_heads %d", r->path,
                       m->hidden, m->heads);
    if (image % m->patch_size)
        return err_set(e, ERR_INPUT, "%s: image_size %d does not divide by patch_size %d", r->path, image,
                       m->patch_size);
    m->max_positions = 1 + (image / m->patch_size) * (image / m->patch_size);
    return 0;
}

int hf_read_vit(struct hf_reader *r, struct err *e)
{
    struct model_spec *m = r->m;
    const char *arch = NULL, *pooler_act = "tanh";
    double drop = 0, adrop = 0;
    bool qkv_bias = true;
    int pooler_out = 0;
    if (hf_architecture(r, &arch, e) || common(r, 16, ACT_GELU, e) || hf_number(r, "hidden_dropout_prob", &drop, e) ||
        hf_number(r, "attention_probs_dropout_prob", &adrop, e) || hf_bool(r, "qkv_bias", &qkv_bias, e) ||
        hf_str(r, "pooler_act", &pooler_act, e) || hf_int(r, "pooler_output_size", false, &pooler_out, e))
        return -1;
    /* ViTSelfAttention: bias=config.qkv_bias on q, k, v; every other linear has one */
    if (!qkv_bias)
        return err_set(e, ERR_INPUT, "%s: qkv_bias false is not modelled (biases on every linear but q, k, v)",
                       r->path);
    if (drop != adrop)
        return err_set(e, ERR_INPUT, "%s: hidden_dropout_prob %g and attention_probs_dropout_prob %g differ: one "
                       "dropout probability is modelled", r->path, drop, adrop);
    m->dropout = (float)drop;
    if (!arch || !strcmp(arch, "ViTModel")) { /* add_pooling_layer=True: dense + pooler_act */
        if (pooler_out && pooler_out != m->hidden)
            return err_set(e, ERR_INPUT, "%s: pooler_output_size %d other than hidden_size is not modelled", r->path,
                           pooler_out);
        if (strcmp(pooler_act, "tanh"))
            return err_set(e, ERR_INPUT, "%s: pooler_act '%s' is not modelled (tanh)", r->path, pooler_act);
        m->pooler = true;
        return 0;
    }
    if (strcmp(arch, "ViTForImageClassification"))
        return err_set(e, ERR_INPUT, "%s: architectures '%s' is not modelled for model_type vit (ViTModel, "
                       "ViTForImageClassification)", r->path, arch);
    return hf_num_labels(r, &m->num_labels, e);
}

/* CLIPVisionConfig's fields; with_projection: the visual_projection of projection_dim */
static int clip_vision(struct hf_reader *r, bool with_projection, struct err *e)
{
    struct model_spec *m = r->m;
    double adrop = 0;
    int projection = 512;
    if (common(r, 32, ACT_QUICK_GELU, e) || hf_number(r, "attention_dropout", &adrop, e) ||
        hf_int(r, "projection_dim", false, &projection, e))
        return -1;
    m->dropout = (float)adrop; /* CLIP vision has attention dropout only */
    m->projection_dim = with_projection ? projection : 0;
    return 0;
}

int hf_read_clip_vision(struct hf_reader *r, struct err *e)
{
    const char *arch = NULL;
    if (hf_architecture(r, &arch, e))
        return -1;
    if (arch && strcmp(arch, "CLIPVisionModel") && strcmp(arch, "CLIPVisionModelWithProjection"))
        return err_set(e, ERR_INPUT, "%s: architectures '%s' is not modelled for model_type clip_vision_model "
                       "(CLIPVisionModel, CLIPVisionModelWithProjection)", r->path, arch);
    return clip_vision(r, arch && !strcmp(arch, "CLIPVisionModelWithProjection"), e);
}

int hf_read_clip(struct hf_reader *r, struct err *e)
{
    int projection = 512;
    if (hf_int(r, "projection_dim", false, &projection, e))
        return -1;
    json_t *vc = json_object_get((json_t *)r->root, "vision_config");
    if (vc && !json_is_null(vc) && !json_is_object(vc))
        return err_set(e, ERR_INPUT, "%s: field 'vision_config' must be an object", r->path);
    char where[600];
    snprintf(where, sizeof where, "%s: vision_config", r->path);
    json_t *empty = json_object();
    struct hf_reader v = *r;
    v.root = vc && json_is_object(vc) ? vc : empty;
    v.path = where;
    int rc = clip_vision(&v, true, e);
    json_decref(empty);
    if (rc)
        return -1;
    r->m->projection_dim = projection; /* CLIPModel's visual_projection: config.projection_dim */
    hf_note(r, "model_type clip: the vision tower with its visual_projection (CLIPVisionModelWithProjection) is "
               "built; the text tower is not");
    return 0;
}
