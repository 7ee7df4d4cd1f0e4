/* diffusion_job.h: the diffusion inference job (job.kind diffusion), internal to the workload
 * generator: its checks (called by job_spec_validate), its run (called by workload_run instead of
 * training), the sliced attention it can put on the UNet, and AutoencoderTiny (TAESD). */
#ifndef OOMLAB_WORKLOAD_DIFFUSION_JOB_H
#define OOMLAB_WORKLOAD_DIFFUSION_JOB_H

#include "workload/gen.h"

/* One component of the pipeline as the generator enumerated it: the UNet (role -1) or an extra. */
struct diffusion_part {
    const struct model_spec *m;
    const char *prefix;      /* "" for the UNet, "text_encoder", "vae" */
    int32_t first, count;    /* parameter range */
    enum dtype dtype;
    int role;                /* -1 the UNet, else enum extra_role */
};

/* job.diffusion against the model and extras: a UNet, a VAE extra (or tiny_autoencoder), text encoders
 * whose widths add up to the UNet's cross_attention_dim, square images the VAE and UNet can halve, a
 * slice size within every attention's heads; no faults or generator fixes (allocator fixes apply).
 * Messages name the key. */
int diffusion_check(const struct job_spec *s, struct err *e);
/* The pipeline called job.steps times (OP_STEP each, its bytes the images made): load, then per call
 * phases encode_prompt, denoise and decode. Registers the tiny autoencoder's parameters first when the
 * job asks for it. */
void diffusion_run(struct gen *g, const struct diffusion_part *parts, int nparts);

/* diffusion_check.c: sizes of a validated job. The UNet's batch: prompts x images_per_prompt, twice that
 * with classifier-free guidance; the image's height and width (job.image_size unless set). */
int64_t diffusion_unet_batch(const struct job_spec *s);
int64_t diffusion_image_height(const struct job_spec *s);
int64_t diffusion_image_width(const struct job_spec *s);
/* AutoencoderKL's tiles: tile_sample_min_size (pixels), tile_latent_min_size, the latents between tile
 * starts (int(tile_latent x (1 - overlap))); whether _decode tiles latents of lat_h x lat_w (tiling on
 * and a side longer than a tile), and then the tiles along a side of `latent` latents (at most
 * DIFFUSION_MAX_TILES, as diffusion_check ensures). */
#define DIFFUSION_MAX_TILES 64
int diffusion_tile_sample(const struct job_spec *s);
int64_t diffusion_tile_latent(const struct job_spec *s);
int64_t diffusion_tile_stride(const struct job_spec *s);
bool diffusion_tiled(const struct job_spec *s, int64_t lat_h, int64_t lat_w);
int diffusion_tiles_per_side(const struct job_spec *s, int64_t latent);

/* sliced_attention.c: SlicedAttnProcessor over q [B, S, heads*D] and a fused k/v [B, Sk, 2*heads*D],
 * g->attn_slice rows of batch x heads per slice; returns [B, S, heads*D]. No autograd record. */
tref nn_sliced_attention(struct gen *g, const char *name, tref q, tref kv, int64_t heads, int64_t head_dim);

/* taesd.c: diffusers' AutoencoderTiny with madebyollin/taesd's config (EncoderTiny and DecoderTiny,
 * 64 channels, ReLU): registers both halves (GEN_PARAMS), or decodes latents [B, 4, h, w] to images
 * [B, 3, 8h, 8w] (GEN_RUN; the encoder is not run). */
void taesd_register(struct gen *g);
tref taesd_decode(struct gen *g, tref latents);
#define TAESD_PARAMS 2445063 /* 1,222,532 encoder + 1,222,531 decoder (worked in taesd.c) */

#endif
