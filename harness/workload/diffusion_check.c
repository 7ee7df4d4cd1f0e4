/* diffusion_check.c: job.kind diffusion's checks (diffusion_check, called by job_spec_validate) and the
 * sizes they and the run share: the UNet's batch, the image side, and AutoencoderKL's tiles. */
#include "workload/diffusion_job.h"

int diffusion_tile_sample(const struct job_spec *s)
{
    if (s->diffusion.tile_size)
        return s->diffusion.tile_size;
    return s->model.add_time_embed_dim ? 1024 : 512; /* sample_size in the SDXL and SD 1.5 VAE configs */
}

int64_t diffusion_unet_batch(const struct job_spec *s)
{
    return (int64_t)s->batch * s->diffusion.images_per_prompt * (s->diffusion.guidance ? 2 : 1);
}

/* AutoencoderKL.__init__: tile_latent_min_size = sample_size / 2^(levels - 1); tiled_decode steps by
 * overlap_size = int(tile_latent_min_size * (1 - tile_overlap_factor)); _decode tiles only latents
 * larger than a tile. */
int64_t diffusion_tile_latent(const struct job_spec *s)
{
    return diffusion_tile_sample(s) / s->model.vae_scale;
}

int64_t diffusion_tile_stride(const struct job_spec *s)
{
    return (int64_t)((double)diffusion_tile_latent(s) * (1.0 - s->diffusion.tile_overlap));
}

bool diffusion_tiled(const struct job_spec *s, int64_t lat_h, int64_t lat_w)
{
    return s->diffusion.vae_tiling && (lat_h > diffusion_tile_latent(s) || lat_w > diffusion_tile_latent(s));
}

int diffusion_tiles_per_side(const struct job_spec *s, int64_t latent)
{
    return (int)((latent + diffusion_tile_stride(s) - 1) / diffusion_tile_stride(s)); /* range(0, L, stride) */
}
int64_t diffusion_image_height(const struct job_spec *s)
{
    return s->diffusion.height ? s->diffusion.height : s->image_size;
}

int64_t diffusion_image_width(const struct job_spec *s)
{
    return s->diffusion.width ? s->diffusion.width : s->image_size;
}

static int check_extras(const struct job_spec *s, struct err *e)
{
    int vaes = 0, width = 0, tes = 0;
    for (int i = 0; i < s->nextras; i++) {
        struct model_spec m;
        if (preset_apply(&m, s->extras[i].preset, e) < 0)
            return err_prefix(e, "job.extras[%d]: ", i);
        if (!s->extras[i].on_device)
            return err_set(e, ERR_INPUT,
                           "job.extras[%d].on_device: job.kind diffusion places its components by "
                           "job.diffusion.offload",
                           i);
        if (s->extras[i].role == EXTRA_VAE)
            vaes++;
        else {
            width += m.hidden;
            tes++;
        }
    }
    if (vaes > 1)
        return err_set(e, ERR_INPUT, "job.extras: job.kind diffusion decodes with one VAE extra, got %d", vaes);
    if (!vaes && !s->diffusion.tiny_autoencoder)
        return err_set(e, ERR_INPUT,
                       "job.extras: job.kind diffusion decodes with a VAE extra (role: vae, preset sd-vae) or "
                       "job.diffusion.tiny_autoencoder");
    if (tes && width != s->model.cross_attention_dim)
        return err_set(e, ERR_INPUT,
                       "job.extras: the text encoders' hidden widths add up to %d, the UNet's cross_attention_dim "
                       "is %d (SDXL concatenates clip-l-text's 768 and openclip-bigg-text's 1280)",
                       width, s->model.cross_attention_dim);
    return 0;
}

static int check_switches(const struct job_spec *s, struct err *e)
{
    if (s->faults)
        return err_set(e, ERR_INPUT, "faults: job.kind diffusion takes no faults (they act on a training loop)");
    int n;
    const struct switch_info *fx = fix_table(&n);
    for (int i = 0; i < n; i++)
        if (spec_has_fix(s, (enum fix_id)i) && !fx[i].alloc_edit)
            return err_set(e, ERR_INPUT,
                           "fixes: %s acts on a training loop; job.kind diffusion takes its memory options from "
                           "job.diffusion (allocator fixes apply)",
                           fx[i].name);
    return 0;
}

static int check_slicing(const struct job_spec *s, struct err *e)
{
    const struct model_spec *m = &s->model;
    if (s->diffusion.attention_slicing <= 0)
        return 0;
    for (int i = 0; i < m->nlevels; i++)
        if ((m->transformer_depth[i] || (i == m->nlevels - 1 && m->mid_transformer_depth)) &&
            s->diffusion.attention_slicing > m->attn_heads[i])
            return err_set(e, ERR_INPUT,
                           "job.diffusion.attention_slicing: %d is more than the %d heads of the attentions of "
                           "level %d (set_attention_slice: size has to be smaller or equal)",
                           s->diffusion.attention_slicing, m->attn_heads[i], i);
    return 0;
}

int diffusion_check(const struct job_spec *s, struct err *e)
{
    const struct diffusion_spec *d = &s->diffusion;
    if (s->model.family != FAMILY_UNET)
        return err_set(e, ERR_INPUT,
                       "model: job.kind diffusion runs a UNet2DConditionModel (preset sd15-unet or sdxl-unet), got "
                       "a %s model",
                       family_name(s->model.family));
    int64_t unit = (int64_t)s->model.vae_scale << (s->model.nlevels - 1);
    int64_t side[2] = {diffusion_image_height(s), diffusion_image_width(s)};
    for (int i = 0; i < 2; i++) {
        if (side[i] < unit || side[i] % unit)
            return err_set(e, ERR_INPUT,
                           "job.diffusion.%s: %lld must be a multiple of %lld (the VAE's %d pixels per latent, "
                           "halved by the UNet's %d levels)",
                           i ? "width" : "height", (long long)side[i], (long long)unit, s->model.vae_scale,
                           s->model.nlevels);
        if (d->vae_tiling && diffusion_tiles_per_side(s, side[i] / s->model.vae_scale) > DIFFUSION_MAX_TILES)
            return err_set(e, ERR_INPUT, "job.diffusion.tile_size: more than %d tiles across %lld pixels",
                           DIFFUSION_MAX_TILES, (long long)side[i]);
    }
    if (d->steps < 1 || d->images_per_prompt < 1)
        return err_set(e, ERR_INPUT, "job.diffusion.steps and images_per_prompt: at least 1");
    if (d->vae_tiling && d->tiny_autoencoder)
        return err_set(e, ERR_INPUT,
                       "job.diffusion.vae_tiling: with tiny_autoencoder is not built yet (AutoencoderTiny tiles "
                       "its own way)");
    if (d->vae_tiling && (diffusion_tile_sample(s) % s->model.vae_scale || diffusion_tile_stride(s) < 1))
        return err_set(e, ERR_INPUT,
                       "job.diffusion.tile_size: %d must be a multiple of the VAE's %d pixels per latent, and "
                       "tile_overlap leave tiles a stride of at least one latent",
                       diffusion_tile_sample(s), s->model.vae_scale);
    if (check_slicing(s, e) || check_extras(s, e))
        return -1;
    return check_switches(s, e);
}
