/* families.c: the model families, one row each: its name, its forward (one file each), the dimensions
 * it cannot run without, what its zero-valued dimensions mean, and its checks. model_spec_resolve is
 * the one place those defaults are filled in, before the generator walks a model; the family files
 * then read every dimension as it is. */
#include "workload/models/models.h"

#include <string.h>

/* A dimension a family cannot run without: below 1 is an error naming the key. */
struct needed {
    const char *key;
    size_t offset; /* of its int in struct model_spec */
};

#define NEED(k, field) {k, offsetof(struct model_spec, field)}
#define MAX_NEEDED 8

/* A model being resolved: as written, with its family's defaults, and the job it is to run (NULL when
 * the model is resolved alone). */
struct resolving {
    const struct model_spec *m;
    const struct model_spec *r;
    const struct job_spec *job;
};

struct family {
    const char *name;
    tref (*forward)(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss);
    struct needed needs[MAX_NEEDED];
    const char *also;                       /* docs: what its checks need beyond `needs` (NULL: nothing) */
    void (*defaults)(struct model_spec *m); /* what zero means, filled in (NULL: zero means zero) */
    int (*check)(const struct resolving *x, struct err *e); /* beyond the needed dimensions (NULL: none) */
};

/* ---- transformers: decoder, encoder, T5, CLIP text, MMDiT's heads (vision transformers below) ---- */

static int transformer_check(const struct resolving *x, struct err *e)
{
    const struct model_spec *m = x->m;
    if (!m->head_dim && m->hidden % m->heads)
        return err_set(e, ERR_INPUT, "model.hidden %d is not a multiple of model.heads %d", m->hidden, m->heads);
    if (m->kv_heads && m->heads % m->kv_heads)
        return err_set(e, ERR_INPUT, "model.heads %d is not a multiple of model.kv_heads %d", m->heads, m->kv_heads);
    return 0;
}

/* Learned positions hold the job's sequence. */
static int positions_check(const struct resolving *x, struct err *e)
{
    if (x->job && x->job->seq_len > x->m->max_positions)
        return err_set(e, ERR_INPUT, "seq_len %d exceeds the model's %d learned positions", x->job->seq_len,
                       x->m->max_positions);
    return 0;
}

static int decoder_check(const struct resolving *x, struct err *e)
{
    if (transformer_check(x, e))
        return -1;
    if (x->m->pos != POS_LEARNED)
        return 0;
    if (x->m->max_positions < 1)
        return err_set(e, ERR_INPUT, "model.max_positions is needed by family decoder with pos: learned");
    return positions_check(x, e);
}

/* One label is transformers' regression (MSELoss), not modelled. */
static int labels_check(const struct model_spec *m, struct err *e)
{
    if (m->num_labels == 1)
        return err_set(e, ERR_INPUT, "model.num_labels 1 is regression (MSELoss), not modelled: at least 2 classes");
    return 0;
}

static int encoder_check(const struct resolving *x, struct err *e)
{
    return transformer_check(x, e) || positions_check(x, e) || labels_check(x->m, e) ? -1 : 0;
}

/* CLIP reads job.context_len tokens, each with a learned position. */
static int clip_check(const struct resolving *x, struct err *e)
{
    if (transformer_check(x, e))
        return -1;
    if (x->job && x->job->context_len > x->m->max_positions)
        return err_set(e, ERR_INPUT, "context_len %d exceeds the model's %d learned positions", x->job->context_len,
                       x->m->max_positions);
    return 0;
}

static void transformer_defaults(struct model_spec *m)
{
    if (!m->kv_heads)
        m->kv_heads = m->heads;
    if (!m->head_dim)
        m->head_dim = m->hidden / m->heads;
}

static void t5_defaults(struct model_spec *m)
{
    transformer_defaults(m);
    if (!m->decoder_layers)
        m->decoder_layers = m->layers;
    if (!m->rel_buckets)
        m->rel_buckets = 32; /* transformers' relative_attention_num_buckets */
}

/* ---- convolutional: UNet, VAE, CNN ---- */

static int conv_check(const struct resolving *x, struct err *e)
{
    const struct model_spec *m = x->m;
    if (m->nlevels > SPEC_MAX_LEVELS)
        return err_set(e, ERR_INPUT, "model.channels: at most %d levels", SPEC_MAX_LEVELS);
    for (int i = 0; i < m->nlevels; i++)
        if (m->channels[i] % m->groups)
            return err_set(e, ERR_INPUT, "model.channels[%d] %d is not a multiple of model.groups %d", i,
                           m->channels[i], m->groups);
    if (x->job && x->job->image_size < 8)
        return err_set(e, ERR_INPUT, "image_size %d: a conv family needs at least 8 pixels", x->job->image_size);
    return 0;
}

/* Each level but the last halves the side, and the way up doubles it back (onto the skips of a
 * UNet): the side must divide by 2^(levels - 1). */
static int halvings_check(const struct model_spec *m, int64_t side, const char *what, struct err *e)
{
    int64_t step = (int64_t)1 << (m->nlevels - 1);
    if (side % step)
        return err_set(e, ERR_INPUT, "%s %lld does not divide by %lld, for the model's %d levels", what,
                       (long long)side, (long long)step, m->nlevels);
    return 0;
}

static int unet_check(const struct resolving *x, struct err *e)
{
    const struct model_spec *m = x->m;
    if (conv_check(x, e))
        return -1;
    for (int i = 0; i <= m->nlevels; i++) { /* the levels, then the mid block on the last level's heads */
        int depth = i < m->nlevels ? m->transformer_depth[i] : m->mid_transformer_depth;
        int level = i < m->nlevels ? i : m->nlevels - 1;
        if (!depth)
            continue;
        if (m->attn_heads[level] < 1 || m->channels[level] % m->attn_heads[level])
            return err_set(e, ERR_INPUT, "model.attn_heads[%d] must divide model.channels[%d] (%d): level %d has "
                           "transformer blocks", level, level, m->channels[level], level);
        if (m->cross_attention_dim < 1)
            return err_set(e, ERR_INPUT, "model.cross_attention_dim is needed by family unet with transformer blocks");
    }
    if (m->add_time_embed_dim && m->add_embed_input < 1)
        return err_set(e, ERR_INPUT, "model.add_embed_input is needed with model.add_time_embed_dim");
    if (!x->job)
        return 0;
    if (x->job->image_size % x->r->vae_scale)
        return err_set(e, ERR_INPUT, "image_size %d does not divide by model.vae_scale %d", x->job->image_size,
                       x->r->vae_scale);
    return halvings_check(m, x->job->image_size / x->r->vae_scale, "the latent side", e);
}

static void unet_defaults(struct model_spec *m)
{
    if (!m->time_embed_input)
        m->time_embed_input = m->channels[0]; /* diffusers: time_proj is block_out_channels[0] wide */
    if (!m->vae_scale)
        m->vae_scale = 8;
}

static int vae_check(const struct resolving *x, struct err *e)
{
    if (conv_check(x, e))
        return -1;
    return x->job ? halvings_check(x->m, x->job->image_size, "image_size", e) : 0;
}

/* ---- MMDiT (Flux) ---- */

/* The latents are cut in 2x2 (Flux) or patch_size (SD3) patches: the side must divide by that times
 * vae_scale, and SD3's fit its position table; the text encoder's tokens are job.context_len. */
static int mmdit_check(const struct resolving *x, struct err *e)
{
    const struct model_spec *m = x->m;
    if (transformer_check(x, e))
        return -1;
    if (m->patch_size > 16)
        return err_set(e, ERR_INPUT, "model.patch_size must be from 0 to 16 for family mmdit, got %d", m->patch_size);
    if (m->patch_size && m->single_layers)
        return err_set(e, ERR_INPUT, "model.single_layers: single-stream blocks are Flux's (model.patch_size 0); "
                       "SD3 (model.patch_size %d) has none", m->patch_size);
    if (m->patch_size && m->pos_embed_max < 1)
        return err_set(e, ERR_INPUT, "model.pos_embed_max is needed by family mmdit with model.patch_size");
    if (!x->job)
        return 0;
    if (x->job->eval.sampling_steps > 0) /* generate.c's eval samples a UNet's latents only */
        return err_set(e, ERR_INPUT, "eval.sampling_steps: sampling during eval is modelled for family unet, not "
                       "mmdit (use a no_grad eval forward: sampling_steps 0)");
    int p = m->patch_size ? m->patch_size : 2;
    int64_t step = (int64_t)p * x->r->vae_scale;
    if (x->job->image_size < step || x->job->image_size % step)
        return err_set(e, ERR_INPUT, "image_size %d does not divide by %lld (%dx%d patches of model.vae_scale %d)",
                       x->job->image_size, (long long)step, p, p, x->r->vae_scale);
    if (m->patch_size && x->job->image_size / step > m->pos_embed_max)
        return err_set(e, ERR_INPUT, "image_size %d: %lld patches a side exceed model.pos_embed_max %d",
                       x->job->image_size, (long long)(x->job->image_size / step), m->pos_embed_max);
    if (x->job->context_len < 1)
        return err_set(e, ERR_INPUT, "context_len must be at least 1 for family mmdit (the text tokens)");
    return 0;
}

static void mmdit_defaults(struct model_spec *m)
{
    transformer_defaults(m);
    if (!m->vae_scale)
        m->vae_scale = 8;
}

/* ---- MLP ---- */

static int mlp_check(const struct resolving *x, struct err *e)
{
    const struct model_spec *m = x->m;
    if (m->mlp_depth < 0 || m->mlp_depth > SPEC_MAX_LEVELS)
        return err_set(e, ERR_INPUT, "model.mlp_hidden: 0..%d hidden layers", SPEC_MAX_LEVELS);
    for (int i = 0; i < m->mlp_depth; i++)
        if (m->mlp_hidden[i] < 1)
            return err_set(e, ERR_INPUT, "model.mlp_hidden[%d] must be at least 1", i);
    return 0;
}

/* ---- vision transformers: ViT, CLIP vision ---- */

/* The position table holds the class token and one row per patch of the job's image: another size would
 * need interpolate_pos_encoding (not modelled). */
static int vit_check(const struct resolving *x, struct err *e)
{
    const struct model_spec *m = x->m;
    if (transformer_check(x, e) || labels_check(m, e))
        return -1;
    if (!x->job)
        return 0;
    int side = x->job->image_size;
    if (side % m->patch_size)
        return err_set(e, ERR_INPUT, "image_size %d does not divide by model.patch_size %d", side, m->patch_size);
    int64_t patches = (int64_t)(side / m->patch_size) * (side / m->patch_size);
    if (patches + 1 != m->max_positions)
        return err_set(e, ERR_INPUT, "image_size %d makes %lld patches + the class token, but the model has %d learned "
                       "positions (model.max_positions = 1 + (image_size / patch_size)^2 of its config; "
                       "interpolate_pos_encoding is not modelled)", side, (long long)patches, m->max_positions);
    return 0;
}

/* ---- the table ---- */

#define TRANSFORMER_NEEDS \
    NEED("layers", layers), NEED("hidden", hidden), NEED("heads", heads), NEED("vocab", vocab), NEED("ffn", ffn)
#define VIT_NEEDS                                                                                            \
    NEED("layers", layers), NEED("hidden", hidden), NEED("heads", heads), NEED("ffn", ffn),                 \
        NEED("max_positions", max_positions), NEED("patch_size", patch_size), NEED("in_channels", in_channels)
#define VIT_ALSO "`max_positions` = 1 + (`image_size` / `patch_size`)^2"
#define CONV_NEEDS NEED("channels", nlevels), NEED("groups", groups), NEED("layers_per_block", layers_per_block)

static const struct family families[FAMILY_COUNT] = {
    [FAMILY_DECODER] = {"decoder", decoder_forward, {TRANSFORMER_NEEDS},
                        "`max_positions` (at least `seq_len`) with `pos: learned`", transformer_defaults,
                        decoder_check},
    [FAMILY_ENCODER] = {"encoder", encoder_forward, {TRANSFORMER_NEEDS, NEED("max_positions", max_positions)},
                        "`max_positions` at least `seq_len`", transformer_defaults, encoder_check},
    [FAMILY_T5] = {"t5", t5_forward, {TRANSFORMER_NEEDS}, NULL, t5_defaults, transformer_check},
    [FAMILY_UNET] = {"unet", unet_forward, {CONV_NEEDS, NEED("latent_channels", latent_channels)},
                     "`attn_heads` and `cross_attention_dim` where `transformer_depth` or `mid_transformer_depth` "
                     "is set; `add_embed_input` with `add_time_embed_dim`; `image_size / vae_scale` halvable "
                     "once per level after the first",
                     unet_defaults, unet_check},
    [FAMILY_VAE] = {"vae", vae_forward,
                    {CONV_NEEDS, NEED("in_channels", in_channels), NEED("latent_channels", latent_channels)},
                    "`image_size` halvable once per level after the first", NULL, vae_check},
    [FAMILY_CLIP_TEXT] = {"clip_text", clip_text_forward, {TRANSFORMER_NEEDS, NEED("max_positions", max_positions)},
                          "`max_positions` at least `job.context_len`", transformer_defaults, clip_check},
    [FAMILY_MLP] = {"mlp", mlp_forward, {NEED("mlp_in", mlp_in), NEED("mlp_out", mlp_out)}, NULL, NULL, mlp_check},
    [FAMILY_MMDIT] = {"mmdit", mmdit_forward,
                      {NEED("layers", layers), NEED("hidden", hidden), NEED("heads", heads), NEED("ffn", ffn),
                       NEED("in_channels", in_channels), NEED("cross_attention_dim", cross_attention_dim),
                       NEED("pooled_dim", pooled_dim)},
                      "`image_size` divisible by `vae_scale` times 2 (Flux) or `patch_size` (SD3, with "
                      "`pos_embed_max` patches a side at most); `context_len` text tokens; no `single_layers` with "
                      "`patch_size`; no `eval.sampling_steps`",
                      mmdit_defaults,
                      mmdit_check},
    [FAMILY_CNN] = {"cnn", cnn_forward,
                    {CONV_NEEDS, NEED("in_channels", in_channels), NEED("out_channels", out_channels)}, NULL, NULL,
                    conv_check},
    [FAMILY_VIT] = {"vit", vit_forward, {VIT_NEEDS}, VIT_ALSO, transformer_defaults, vit_check},
    [FAMILY_CLIP_VISION] = {"clip_vision", vit_forward, {VIT_NEEDS}, VIT_ALSO, transformer_defaults, vit_check},
};

const char *family_name(enum model_family f)
{
    return (unsigned)f < FAMILY_COUNT ? families[f].name : "?";
}

int family_from_name(const char *s)
{
    for (int i = 0; i < FAMILY_COUNT; i++)
        if (!strcmp(s, families[i].name))
            return i;
    return -1;
}

void family_needs_text(enum model_family family, char *buf, size_t len)
{
    const struct family *f = &families[(unsigned)family < FAMILY_COUNT ? family : 0];
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < MAX_NEEDED && f->needs[i].key && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s`%s`", i ? ", " : "", f->needs[i].key);
    if (f->also && used < len)
        snprintf(buf + used, len - used, "; %s", f->also);
}

int model_spec_resolve(struct model_spec *m, const struct job_spec *job, struct err *e)
{
    if ((unsigned)m->family >= FAMILY_COUNT)
        return err_set(e, ERR_INPUT, "model.family: unknown family");
    const struct family *f = &families[m->family];
    for (int i = 0; i < MAX_NEEDED && f->needs[i].key; i++) {
        int v;
        memcpy(&v, (const char *)m + f->needs[i].offset, sizeof v);
        if (v < 1)
            return err_set(e, ERR_INPUT, "model.%s is needed by family %s (at least 1)", f->needs[i].key, f->name);
    }
    struct model_spec r = *m;
    if (f->defaults)
        f->defaults(&r);
    struct resolving x = {m, &r, job};
    if (f->check && f->check(&x, e))
        return -1;
    *m = r;
    return 0;
}

int model_image_size(const struct model_spec *m)
{
    if ((m->family != FAMILY_VIT && m->family != FAMILY_CLIP_VISION) || m->max_positions < 2)
        return 0;
    int side = 1;
    while ((int64_t)side * side < m->max_positions - 1)
        side++;
    return (int64_t)side * side == m->max_positions - 1 ? side * m->patch_size : 0;
}

tref model_forward(struct gen *g, const struct model_spec *m, const struct batch *bt, bool loss)
{
    return (unsigned)m->family < FAMILY_COUNT ? families[m->family].forward(g, m, bt, loss) : TNONE;
}
