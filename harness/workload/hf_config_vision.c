/* hf_config_vision.c: a vision transformer's model_spec from a Hugging Face config.json, for model_type
 * vit (ViTConfig: ViTForImageClassification or ViTModel by `architectures`), clip (CLIPConfig: the vision
 * tower of CLIPModel with its visual_projection, read from `vision_config` and the top-level
 * projection_dim; the text tower is not built) and clip_vision_model (CLIPVisionConfig: CLIPVisionModel,
 * or WithProjection by `architectures`). Absent fields take the defaults of ViTConfig and
 * CLIPVisionConfig (transformers/models/vit/configuration_vit.py, models/clip/configuration_clip.py):
 * ViT hidden_size 768, num_hidden_layers 12, num_attention_heads 12, intermediate_size 3072, hidden_act
 * gelu, dropouts 0.0, image_size 224, patch_size 16, num_channels 3, qkv_bias true; CLIP vision the same
 * but patch_size 32, hidden_act quick_gelu, projection_dim 512, attention_dropout 0.0; CLIPConfig's
 * projection_dim 512. A classifier's labels are `num_labels`, else the entries of `id2label`, else
 * PretrainedConfig's 2. */
#include "workload/hf_config.h"

#include <jansson.h>
#include <string.h>

/* One JSON object being read: where names it in messages ("config.json", "config.json: vision_config"). */
struct obj {
    json_t *o;
    const char *where;
};

static int int_at(const struct obj *c, const char *key, int *out, struct err *e)
{
    json_t *v = json_object_get(c->o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 30))
        return err_set(e, ERR_INPUT, "%s: field '%s' must be a whole number from 1", c->where, key);
    *out = (int)json_integer_value(v);
    return 0;
}

static int prob_at(const struct obj *c, const char *key, double *out, struct err *e)
{
    json_t *v = json_object_get(c->o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) >= 1)
        return err_set(e, ERR_INPUT, "%s: field '%s' must be a probability in [0, 1)", c->where, key);
    *out = json_number_value(v);
    return 0;
}

static int str_at(const struct obj *c, const char *key, const char **out, struct err *e)
{
    json_t *v = json_object_get(c->o, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return err_set(e, ERR_INPUT, "%s: field '%s' must be a string", c->where, key);
    *out = json_string_value(v);
    return 0;
}

/* architectures[0], or NULL */
static int architecture(const struct obj *c, const char **out, struct err *e)
{
    json_t *v = json_object_get(c->o, "architectures");
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v) || json_array_size(v) < 1 || !json_is_string(json_array_get(v, 0)))
        return err_set(e, ERR_INPUT, "%s: field 'architectures' must be a list of class names", c->where);
    *out = json_string_value(json_array_get(v, 0));
    return 0;
}

/* transformers' ACT2FN names (activations.py) that the generator models */
static int activation(const struct obj *c, const char *name, enum act_kind *out, struct err *e)
{
    static const struct { const char *name; enum act_kind act; } acts[] = {
        {"gelu", ACT_GELU},         {"quick_gelu", ACT_QUICK_GELU}, {"gelu_pytorch_tanh", ACT_GELU_TANH},
        {"gelu_new", ACT_GELU_NEW}, {"relu", ACT_RELU},             {"silu", ACT_SILU},
    };
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        if (!strcmp(name, acts[i].name)) {
            *out = acts[i].act;
            return 0;
        }
    return err_set(e, ERR_INPUT, "%s: hidden_act '%s' is not modelled", c->where, name);
}

/* The dimensions both configs name alike; image_size and patch_size become the position table. */
static int common(const struct obj *c, struct model_spec *m, const char *act, struct err *e)
{
    int image = 224;
    if (int_at(c, "hidden_size", &m->hidden, e) || int_at(c, "num_hidden_layers", &m->layers, e) ||
        int_at(c, "num_attention_heads", &m->heads, e) || int_at(c, "intermediate_size", &m->ffn, e) ||
        int_at(c, "image_size", &image, e) || int_at(c, "patch_size", &m->patch_size, e) ||
        int_at(c, "num_channels", &m->in_channels, e) || str_at(c, "hidden_act", &act, e) ||
        activation(c, act, &m->act, e))
        return -1;
    if (m->hidden % m->heads)
        return err_set(e, ERR_INPUT, "%s: hidden_size %d is not a multiple of num_attention_heads %d", c->where,
                       m->hidden, m->heads);
    if (image % m->patch_size)
        return err_set(e, ERR_INPUT, "%s: image_size %d does not divide by patch_size %d", c->where, image,
                       m->patch_size);
    m->max_positions = 1 + (image / m->patch_size) * (image / m->patch_size);
    return 0;
}

static int labels(const struct obj *c, int *out, struct err *e)
{
    json_t *ids = json_object_get(c->o, "id2label");
    *out = 2; /* PretrainedConfig: num_labels 2 unless id2label says otherwise */
    if (ids && !json_is_null(ids)) {
        if (!json_is_object(ids) || json_object_size(ids) < 1)
            return err_set(e, ERR_INPUT, "%s: field 'id2label' must be an object of labels", c->where);
        *out = (int)json_object_size(ids);
    }
    return int_at(c, "num_labels", out, e);
}

static int read_vit(const struct obj *c, struct model_spec *m, struct err *e)
{
    const char *arch = NULL, *pooler_act = "tanh";
    double hidden_drop = 0, attn_drop = 0;
    bool qkv_bias = true;
    json_t *q = json_object_get(c->o, "qkv_bias");
    if (q && !json_is_boolean(q))
        return err_set(e, ERR_INPUT, "%s: field 'qkv_bias' must be true or false", c->where);
    qkv_bias = !q || json_is_true(q);
    int pooler_out = 0;
    if (architecture(c, &arch, e) || common(c, m, "gelu", e) || prob_at(c, "hidden_dropout_prob", &hidden_drop, e) ||
        prob_at(c, "attention_probs_dropout_prob", &attn_drop, e) || str_at(c, "pooler_act", &pooler_act, e) ||
        int_at(c, "pooler_output_size", &pooler_out, e))
        return -1;
    /* ViTSelfAttention: bias=config.qkv_bias on q, k, v; every other linear has one */
    if (!qkv_bias)
        return err_set(e, ERR_INPUT, "%s: qkv_bias false is not modelled (biases on every linear but q, k, v)",
                       c->where);
    if (hidden_drop != attn_drop)
        return err_set(e, ERR_INPUT, "%s: hidden_dropout_prob %g and attention_probs_dropout_prob %g differ: one "
                       "dropout probability is modelled", c->where, hidden_drop, attn_drop);
    m->dropout = (float)hidden_drop;
    if (!arch || !strcmp(arch, "ViTModel")) { /* add_pooling_layer=True: dense + pooler_act */
        if (pooler_out && pooler_out != m->hidden)
            return err_set(e, ERR_INPUT, "%s: pooler_output_size %d other than hidden_size is not modelled", c->where,
                           pooler_out);
        if (strcmp(pooler_act, "tanh"))
            return err_set(e, ERR_INPUT, "%s: pooler_act '%s' is not modelled (tanh)", c->where, pooler_act);
        m->pooler = true;
        return 0;
    }
    if (strcmp(arch, "ViTForImageClassification"))
        return err_set(e, ERR_INPUT, "%s: architectures '%s' is not modelled for model_type vit (ViTModel, "
                       "ViTForImageClassification)", c->where, arch);
    return labels(c, &m->num_labels, e);
}

/* CLIPVisionConfig's fields; with_projection: the visual_projection of projection_dim */
static int read_clip_vision(const struct obj *c, struct model_spec *m, bool with_projection, int projection,
                            struct err *e)
{
    double attn_drop = 0;
    m->patch_size = 32;
    if (common(c, m, "quick_gelu", e) || prob_at(c, "attention_dropout", &attn_drop, e) ||
        int_at(c, "projection_dim", &projection, e))
        return -1;
    m->dropout = (float)attn_drop; /* CLIP vision has attention dropout only */
    m->projection_dim = with_projection ? projection : 0;
    return 0;
}

bool hf_config_vision_type(const char *type)
{
    return !strcmp(type, "vit") || !strcmp(type, "clip") || !strcmp(type, "clip_vision_model");
}

int hf_config_vision_fill(void *root, const char *path, const char *type, struct model_spec *m, FILE *warn,
                          struct err *e)
{
    struct obj c = {root, path};
    bool vit = !strcmp(type, "vit");
    if (preset_apply(m, vit ? "vit-base-patch16-224" : "clip-vit-l14-vision", e))
        return -1;
    m->preset[0] = m->expanded_from[0] = 0;
    /* the base preset's dimensions are replaced by the config's or its class's defaults */
    m->hidden = 768;
    m->layers = m->heads = 12;
    m->ffn = 3072;
    m->in_channels = 3;
    m->patch_size = 16;
    m->num_labels = 0;
    if (vit)
        return read_vit(&c, m, e);
    const char *arch = NULL;
    if (architecture(&c, &arch, e))
        return -1;
    if (!strcmp(type, "clip_vision_model")) {
        if (arch && strcmp(arch, "CLIPVisionModel") && strcmp(arch, "CLIPVisionModelWithProjection"))
            return err_set(e, ERR_INPUT, "%s: architectures '%s' is not modelled for model_type clip_vision_model "
                           "(CLIPVisionModel, CLIPVisionModelWithProjection)", path, arch);
        return read_clip_vision(&c, m, arch && !strcmp(arch, "CLIPVisionModelWithProjection"), 512, e);
    }
    /* clip: the vision tower of CLIPModel, its visual_projection of the top-level projection_dim */
    int projection = 512;
    if (int_at(&c, "projection_dim", &projection, e))
        return -1;
    json_t *vc = json_object_get(root, "vision_config");
    if (vc && !json_is_null(vc) && !json_is_object(vc))
        return err_set(e, ERR_INPUT, "%s: field 'vision_config' must be an object", path);
    char where[600];
    snprintf(where, sizeof where, "%s: vision_config", path);
    json_t *empty = json_object();
    struct obj v = {vc && json_is_object(vc) ? vc : empty, where};
    int rc = read_clip_vision(&v, m, true, 512, e);
    json_decref(empty);
    if (rc)
        return -1;
    m->projection_dim = projection; /* CLIPModel's visual_projection: config.projection_dim */
    if (warn)
        fprintf(warn, "note: %s: model_type clip: the vision tower with its visual_projection "
                      "(CLIPVisionModelWithProjection) is built; the text tower is not\n", path);
    return 0;
}
