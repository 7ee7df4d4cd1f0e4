/* diffusion_job.c: a diffusers text-to-image pipeline call (pipeline_stable_diffusion.py,
 * pipeline_stable_diffusion_xl.py __call__) under torch.no_grad, as the allocations it makes:
 * encode_prompt (the text encoders on the prompts; the negative prompt's embeddings; repeat for
 * num_images_per_prompt; torch.cat([negative, positive]) for classifier-free guidance), denoise
 * (prepare_latents, then per step the UNet on the doubled latents, the guidance combination and
 * EulerDiscreteScheduler.step) and decode (the VAE's upcast to fp32, latents / scaling_factor,
 * AutoencoderKL.decode with slicing and tiling from autoencoder_kl.py, or AutoencoderTiny, then the
 * image processor's denormalize). Offload follows accelerate's hooks (hooks.py): CpuOffload for
 * enable_model_cpu_offload (the previous component moved to the CPU and the cache emptied before the
 * next one is moved in), AlignDevicesHook for enable_sequential_cpu_offload (a leaf module's weights
 * copied in before its forward and dropped after). */
#include "workload/diffusion_job.h"
#include "workload/models/models.h"

#include <stdlib.h>
#include <string.h>

#define MAX_PARTS (SPEC_MAX_EXTRAS + 2)
#define STREAM_MAX 8
#define GUIDANCE_SCALE 7.5f   /* StableDiffusionPipeline's default (SDXL's is 5.0; the bytes are the same) */
#define EULER_DT (-0.1f)      /* sigma_next - sigma: a value for the update, its size does not matter */

struct pipe {
    struct gen *g;
    const struct job_spec *s;
    struct diffusion_part parts[MAX_PARTS]; /* by module id; the tiny autoencoder after the extras */
    int nparts;
    struct diffusion_part *unet, *vae, *te[SPEC_MAX_EXTRAS];
    int nte;
    const struct diffusion_part *resident;  /* model offload: the component on the device */
    int32_t streamed[STREAM_MAX];           /* sequential offload: the running leaf module's weights */
    int nstreamed;
    const char *streamed_module;
    int64_t images, height, width;
    bool upcast, tiny, sdxl;
};

/* ---- weights on and off the device ---- */

static void weight_on(struct gen *g, int32_t i, enum dtype dt)
{
    struct param *p = &g->params[i];
    p->data = t_new2(g, p->dims[0], p->dims[1], dt, CAT_PARAM, p->tag);
    param_load_values(g, p, p->data);
}

static void weight_off(struct gen *g, int32_t i)
{
    t_release(g, g->params[i].data);
    g->params[i].data = TNONE;
}

static void part_on(struct pipe *P, const struct diffusion_part *c)
{
    for (int32_t i = c->first; i < c->first + c->count; i++)
        weight_on(P->g, i, c->dtype);
}

static void part_off(struct pipe *P, const struct diffusion_part *c)
{
    for (int32_t i = c->first; i < c->first + c->count; i++)
        weight_off(P->g, i);
}

/* enable_model_cpu_offload: CpuOffload.pre_forward offloads the previous component, empties the cache
 * (clear_device_cache) and moves this one in. */
static void resident(struct pipe *P, const struct diffusion_part *c)
{
    if (P->s->diffusion.offload != OFFLOAD_MODEL || P->resident == c)
        return;
    if (P->resident) {
        part_off(P, P->resident);
        struct op op = {.kind = OP_EMPTY_CACHE};
        gen_emit(P->g, &op);
    }
    part_on(P, c);
    P->resident = c;
}

static void stream_release(struct pipe *P)
{
    for (int i = 0; i < P->nstreamed; i++)
        weight_off(P->g, P->streamed[i]);
    P->nstreamed = 0;
    P->streamed_module = NULL;
}

/* enable_sequential_cpu_offload: AlignDevicesHook copies a leaf module's weights in at its pre_forward
 * and drops them at its post_forward, i.e. before the next module's come in. */
static void stream_weight(struct gen *g, int32_t i, void *ctx)
{
    struct pipe *P = ctx;
    struct param *p = &g->params[i];
    if (p->module != P->streamed_module || P->nstreamed == STREAM_MAX)
        stream_release(P);
    P->streamed_module = p->module;
    if (p->data != TNONE)
        return;
    weight_on(g, i, P->parts[p->module_id].dtype);
    P->streamed[P->nstreamed++] = i;
}

/* vae.to(dtype): each parameter converted and swapped in place (the old storage freed at once); with
 * sequential offload the CPU copies convert and the streamed weights arrive in the new dtype. */
static void vae_to(struct pipe *P, enum dtype dt)
{
    struct gen *g = P->g;
    if (P->s->diffusion.offload != OFFLOAD_SEQUENTIAL)
        for (int32_t i = P->vae->first; i < P->vae->first + P->vae->count; i++) {
            struct param *p = &g->params[i];
            tref nw = t_new2(g, p->dims[0], p->dims[1], dt, CAT_PARAM, p->tag);
            kern_cast(g, p->data, nw, p->module);
            t_release(g, p->data);
            p->data = nw;
        }
    P->vae->dtype = dt;
}

/* ---- tensors ---- */

/* blocks {outer, len, src_stride, src_off, dst_stride, dst_off} of x into y */
static void copy(struct gen *g, tref x, tref y, int64_t outer, int64_t len, int64_t ss, int64_t so, int64_t ds,
                 int64_t dof, const char *tag)
{
    int64_t b[6] = {outer, len, ss, so, ds, dof};
    kern_copy_blocks(g, x, y, b, false, tag);
}

static tref new4(struct gen *g, int64_t a, int64_t b, int64_t c, int64_t d, enum dtype dt, enum category cat,
                 const char *tag)
{
    int64_t dims[4] = {a, b, c, d};
    return t_new(g, dims, 4, dt, cat, tag);
}

static tref as_dtype(struct gen *g, tref x, enum dtype dt, const char *name)
{
    if (T(g, x)->dtype == dt)
        return x;
    tref c = nn_cast(g, name, x, dt);
    t_release(g, x);
    return c;
}

static void frozen(struct gen *g, const struct diffusion_part *c)
{
    g->grad_enabled = false;
    g->training = false;
    g->cursor = c->first;
    g->act_dtype = c->dtype;
}

/* ---- encode_prompt ---- */

/* The text encoders on the prompts, [B, context, sum of widths] in the UNet's dtype: one encoder's
 * output, or SDXL's torch.concat(prompt_embeds_list, dim=-1). Without text encoders the caller passes
 * prompt_embeds. */
static tref encode(struct pipe *P, int64_t b)
{
    struct gen *g = P->g;
    int64_t ctx = P->s->context_len, width = P->unet->m->cross_attention_dim;
    if (!P->nte) {
        int64_t d[3] = {b, ctx, width};
        return nn_input(g, d, 3, P->unet->dtype, "prompt_embeds");
    }
    tref out[SPEC_MAX_EXTRAS];
    for (int i = 0; i < P->nte; i++) {
        const struct diffusion_part *te = P->te[i];
        resident(P, te);
        frozen(g, te);
        struct batch tb = {b, ctx, 0, 0, ctx};
        gen_push(g, "%s", te->prefix);
        out[i] = as_dtype(g, model_forward(g, te->m, &tb, false), P->unet->dtype, "prompt_embeds.to");
        gen_pop(g);
        stream_release(P); /* its last module's post_forward */
    }
    if (P->nte == 1)
        return out[0];
    const char *tag = gen_intern(g, "prompt_embeds.concat");
    int64_t d[3] = {b, ctx, width}, off = 0;
    tref cat = t_new(g, d, 3, P->unet->dtype, CAT_ACTIVATION, tag);
    for (int i = 0; i < P->nte; i++) {
        int64_t w = T(g, out[i])->dims[2];
        copy(g, out[i], cat, b * ctx, w, w, 0, width, off, tag);
        off += w;
        t_release(g, out[i]);
    }
    return cat;
}

/* prompt_embeds.repeat(1, num_images_per_prompt, 1).view(B * N, ...): always a copy */
static tref repeat(struct gen *g, tref x, int n)
{
    const char *tag = gen_intern(g, "prompt_embeds.repeat");
    int64_t b = T(g, x)->dims[0], per = t_numel(g, x) / b, d[3] = {b * n, T(g, x)->dims[1], T(g, x)->dims[2]};
    tref y = t_new(g, d, 3, (enum dtype)T(g, x)->dtype, CAT_ACTIVATION, tag);
    for (int k = 0; k < n; k++)
        copy(g, x, y, b, per, per, 0, n * per, k * per, tag);
    t_release(g, x);
    return y;
}

/* The UNet's encoder_hidden_states: the prompts' embeddings, with guidance torch.cat([negative,
 * positive]); SDXL's negative is torch.zeros_like (force_zeros_for_empty_prompt), SD 1.x encodes "". */
static tref encode_prompt(struct pipe *P)
{
    struct gen *g = P->g;
    const struct job_spec *s = P->s;
    gen_phase(g, gen_intern(g, "encode_prompt"));
    tref pos = repeat(g, encode(P, s->batch), s->diffusion.images_per_prompt);
    if (!s->diffusion.guidance)
        return pos;
    tref neg;
    if (P->sdxl) {
        neg = t_like(g, pos, (enum dtype)T(g, pos)->dtype, CAT_ACTIVATION, gen_intern(g, "negative_prompt_embeds"));
        kern_fill(g, neg, 0.0f, gen_intern(g, "negative_prompt_embeds"));
    } else {
        neg = repeat(g, encode(P, s->batch), s->diffusion.images_per_prompt);
    }
    const char *tag = gen_intern(g, "prompt_embeds.cat");
    int64_t n = t_numel(g, pos), d[3] = {2 * T(g, pos)->dims[0], T(g, pos)->dims[1], T(g, pos)->dims[2]};
    tref cat = t_new(g, d, 3, (enum dtype)T(g, pos)->dtype, CAT_ACTIVATION, tag);
    copy(g, neg, cat, 1, n, n, 0, 2 * n, 0, tag);
    copy(g, pos, cat, 1, n, n, 0, 2 * n, n, tag);
    t_release(g, neg);
    t_release(g, pos);
    return cat;
}

/* ---- denoise ---- */

/* noise_pred_uncond + guidance_scale * (noise_pred_text - noise_pred_uncond); chunk(2)'s halves are
 * views in PyTorch, latent-sized copies here (kilobytes to a few MiB). */
static tref guide(struct gen *g, tref pred)
{
    int64_t b = T(g, pred)->dims[0] / 2, per = t_numel(g, pred) / (2 * b), d[4];
    memcpy(d, T(g, pred)->dims, sizeof d);
    d[0] = b;
    tref un = nn_slice(g, "noise_pred.chunk", pred, d, 4, 1, b * per, 2 * b * per, 0);
    tref tx = nn_slice(g, "noise_pred.chunk", pred, d, 4, 1, b * per, 2 * b * per, b * per);
    t_release(g, pred);
    tref diff = nn_sub(g, "guidance.diff", tx, un);
    t_release(g, tx);
    tref sc = nn_scale(g, "guidance.scale", diff, GUIDANCE_SCALE);
    t_release(g, diff);
    tref out = nn_add(g, "guidance.sum", un, sc);
    t_release(g, un);
    t_release(g, sc);
    return out;
}

/* EulerDiscreteScheduler.step: the sample upcast to fp32, prev_sample = sample + derivative * dt (the
 * derivative is the noise prediction for epsilon models; pred_original_sample's fp32 temporary is folded
 * into it), cast back to the model output's dtype. */
static tref scheduler_step(struct gen *g, tref latents, tref eps)
{
    tref s32 = nn_cast(g, "scheduler.sample", latents, DT_F32);
    tref d = nn_scale(g, "scheduler.derivative", eps, EULER_DT);
    tref prev = nn_add(g, "scheduler.prev_sample", s32, d);
    t_release(g, s32);
    t_release(g, d);
    tref out = as_dtype(g, prev, (enum dtype)T(g, eps)->dtype, "scheduler.prev_sample.to");
    t_release(g, eps);
    return out;
}

static tref denoise(struct pipe *P, tref embeds)
{
    struct gen *g = P->g;
    const struct job_spec *s = P->s;
    const struct model_spec *m = P->unet->m;
    gen_phase(g, gen_intern(g, "denoise"));
    resident(P, P->unet);
    int64_t d[4] = {P->images, m->latent_channels, P->height / m->vae_scale, P->width / m->vae_scale};
    tref noise = nn_input(g, d, 4, P->unet->dtype, "latents"); /* randn_tensor */
    tref latents = nn_scale(g, "latents.init_noise_sigma", noise, 1.0f);
    t_release(g, noise);
    struct batch bt = {diffusion_unet_batch(s), 1, 0, P->height, s->context_len};
    g->attn_slice = s->diffusion.attention_slicing;
    g->image_w = P->width;
    for (int k = 0; k < s->diffusion.steps && !g->failed; k++) {
        frozen(g, P->unet);
        g->ctx_override = embeds;
        tref eps = model_forward(g, m, &bt, false); /* its noisy_latents input is torch.cat([latents] * 2) */
        g->ctx_override = TNONE;
        stream_release(P);
        if (s->diffusion.guidance)
            eps = guide(g, eps);
        latents = scheduler_step(g, latents, eps);
    }
    g->attn_slice = 0;
    g->image_w = 0;
    return latents;
}

/* ---- decode ---- */

static int32_t first_param(const struct gen *g, const struct diffusion_part *c, const char *prefix)
{
    size_t n = strlen(prefix);
    for (int32_t i = c->first; i < c->first + c->count; i++)
        if (!strncmp(g->params[i].tag, prefix, n))
            return i;
    return c->first;
}

/* AutoencoderKL._decode without tiling (post_quant_conv, decoder), or AutoencoderTiny's decoder. */
static tref decode_whole(struct pipe *P, tref z)
{
    struct gen *g = P->g;
    frozen(g, P->vae);
    g->cursor = first_param(g, P->vae, P->tiny ? "vae.decoder" : "vae.post_quant_conv");
    gen_push(g, "vae");
    tref img = P->tiny ? taesd_decode(g, z) : vae_decode(g, P->vae->m, z);
    gen_pop(g);
    stream_release(P);
    return img;
}

/* z[:, :, i:i+h, j:j+w] of latents [b, c, H, W]: rows, then columns (two latent-sized copies; a view in
 * PyTorch). */
static tref latent_tile(struct gen *g, tref z, int64_t i, int64_t j, int64_t h, int64_t w)
{
    const char *tag = gen_intern(g, "vae.tile");
    struct tensor *t = T(g, z);
    int64_t bc = t->dims[0] * t->dims[1], H = t->dims[2], W = t->dims[3];
    tref rows = new4(g, t->dims[0], t->dims[1], h, W, (enum dtype)t->dtype, CAT_TEMP, tag);
    copy(g, z, rows, bc, h * W, H * W, i * W, h * W, 0, tag);
    tref tile = new4(g, t->dims[0], t->dims[1], h, w, (enum dtype)t->dtype, CAT_TEMP, tag);
    copy(g, rows, tile, bc * h, w, W, j, w, 0, tag);
    t_release(g, rows);
    return tile;
}

/* tile[:, :, :ch, :cw] into columns [off, off + cw) of row [b, 3, ch, RW]: torch.cat reads the cropped
 * view; here a crop taller than the row is gathered first (a temporary of the cropped tile). */
static void crop_into(struct gen *g, tref tile, tref row, int64_t off, int64_t cw, const char *tag)
{
    struct tensor *t = T(g, tile);
    int64_t bc = t->dims[0] * t->dims[1], th = t->dims[2], tw = t->dims[3];
    int64_t ch = T(g, row)->dims[2], rw = T(g, row)->dims[3];
    tref src = tile;
    if (ch < th) {
        src = new4(g, t->dims[0], t->dims[1], ch, tw, (enum dtype)t->dtype, CAT_TEMP, tag);
        copy(g, tile, src, bc, ch * tw, th * tw, 0, ch * tw, 0, tag);
    }
    copy(g, src, row, bc * ch, cw, tw, 0, rw, off, tag);
    if (src != tile)
        t_release(g, src);
}

/* AutoencoderKL.tiled_decode: every tile decoded and kept (rows of tiles), then each row's crops
 * (row_limit = tile_sample_min_size - blend_extent) concatenated along the width and the rows along the
 * height. blend_v / blend_h work in place, row by row (their per-row temporaries are not modelled). */
static tref decode_tiled(struct pipe *P, tref z)
{
    struct gen *g = P->g;
    const struct job_spec *s = P->s;
    int64_t H = T(g, z)->dims[2], W = T(g, z)->dims[3], T_ = diffusion_tile_latent(s), step = diffusion_tile_stride(s);
    int64_t limit = diffusion_tile_sample(s) - (int64_t)((double)diffusion_tile_sample(s) * s->diffusion.tile_overlap);
    int nh = diffusion_tiles_per_side(s, H), n = diffusion_tiles_per_side(s, W); /* n: tiles per row */
    tref *tiles = calloc((size_t)nh * (size_t)n, sizeof *tiles);
    if (!tiles) {
        if (!g->failed)
            err_set(g->e, ERR_INTERNAL, "workload: out of host memory for %d VAE tiles", nh * n);
        g->failed = 1;
        return TNONE;
    }
    for (int a = 0; a < nh && !g->failed; a++)
        for (int c = 0; c < n && !g->failed; c++) {
            int64_t i = a * step, j = c * step;
            tref lt = latent_tile(g, z, i, j, H - i < T_ ? H - i : T_, W - j < T_ ? W - j : T_);
            tiles[a * n + c] = decode_whole(P, lt);
            t_release(g, lt);
        }
    const char *tag = gen_intern(g, "vae.tiled_decode.cat");
    tref out = TNONE;
    if (!g->failed) {
        int64_t b = T(g, z)->dims[0], rw = 0, h = 0, ch[DIFFUSION_MAX_TILES];
        for (int c = 0; c < n; c++) {
            int64_t tw = T(g, tiles[c])->dims[3];
            rw += tw < limit ? tw : limit;
        }
        for (int a = 0; a < nh; a++) {
            int64_t th = T(g, tiles[a * n])->dims[2];
            ch[a] = th < limit ? th : limit;
            h += ch[a];
        }
        enum dtype dt = (enum dtype)T(g, tiles[0])->dtype;
        tref rows[DIFFUSION_MAX_TILES];
        for (int a = 0; a < nh; a++) {
            rows[a] = new4(g, b, 3, ch[a], rw, dt, CAT_ACTIVATION, tag);
            int64_t off = 0;
            for (int c = 0; c < n; c++) {
                int64_t tw = T(g, tiles[a * n + c])->dims[3], cw = tw < limit ? tw : limit;
                crop_into(g, tiles[a * n + c], rows[a], off, cw, tag);
                off += cw;
            }
        }
        out = new4(g, b, 3, h, rw, dt, CAT_OUTPUT, tag);
        int64_t at = 0;
        for (int a = 0; a < nh; a++) {
            copy(g, rows[a], out, b * 3, ch[a] * rw, ch[a] * rw, 0, h * rw, at * rw, tag);
            at += ch[a];
            t_release(g, rows[a]);
        }
    }
    for (int k = 0; k < nh * n; k++)
        t_release(g, tiles[k]);
    free(tiles);
    return out;
}

static tref decode_one(struct pipe *P, tref z)
{
    if (diffusion_tiled(P->s, T(P->g, z)->dims[2], T(P->g, z)->dims[3]))
        return decode_tiled(P, z);
    return decode_whole(P, z);
}

/* AutoencoderKL.decode: with use_slicing, z.split(1) decoded one by one and the list torch.cat'ed. */
static tref decode_batch(struct pipe *P, tref z)
{
    struct gen *g = P->g;
    int64_t b = T(g, z)->dims[0];
    if (!P->s->diffusion.vae_slicing || b == 1)
        return decode_one(P, z);
    int64_t per = t_numel(g, z) / b, d[4];
    memcpy(d, T(g, z)->dims, sizeof d);
    d[0] = 1;
    tref *imgs = calloc((size_t)b, sizeof *imgs);
    if (!imgs) {
        if (!g->failed)
            err_set(g->e, ERR_INTERNAL, "workload: out of host memory for %lld decoded slices", (long long)b);
        g->failed = 1;
        return TNONE;
    }
    for (int64_t i = 0; i < b && !g->failed; i++) {
        tref zi = nn_slice(g, "vae.slice", z, d, 4, 1, per, b * per, i * per);
        imgs[i] = decode_one(P, zi);
        t_release(g, zi);
    }
    tref out = TNONE;
    if (!g->failed) {
        const char *tag = gen_intern(g, "vae.slices.cat");
        struct tensor *t = T(g, imgs[0]);
        int64_t n = t_numel(g, imgs[0]);
        out = new4(g, b, t->dims[1], t->dims[2], t->dims[3], (enum dtype)t->dtype, CAT_OUTPUT, tag);
        for (int64_t i = 0; i < b; i++)
            copy(g, imgs[i], out, 1, n, n, 0, b * n, i * n, tag);
    }
    for (int64_t i = 0; i < b; i++)
        t_release(g, imgs[i]);
    free(imgs);
    return out;
}

static void decode(struct pipe *P, tref latents)
{
    struct gen *g = P->g;
    gen_phase(g, gen_intern(g, "decode"));
    resident(P, P->vae);
    enum dtype vae_dt = P->vae->dtype;
    if (P->upcast) /* needs_upcasting: vae.to(torch.float32) (diffusers PR 12619: the whole VAE) */
        vae_to(P, DT_F32);
    tref z = as_dtype(g, t_ref(g, latents), P->vae->dtype, "latents.to_vae");
    /* latents / vae.config.scaling_factor: 0.18215 (SD), 0.13025 (SDXL), 1.0 (TAESD): a new tensor */
    float factor = P->tiny ? 1.0f : P->sdxl ? 0.13025f : 0.18215f;
    tref zs = nn_scale(g, "latents.scaling_factor", z, 1.0f / factor);
    t_release(g, z);
    tref img = decode_batch(P, zs);
    t_release(g, zs);
    if (img != TNONE) { /* image_processor.postprocess: denormalize (image / 2 + 0.5).clamp(0, 1), then .cpu() */
        tref den = nn_scale(g, "image_processor.denormalize", img, 0.5f);
        t_release(g, den);
        t_release(g, img);
    }
    if (P->upcast)
        vae_to(P, vae_dt);
    if (P->s->diffusion.offload == OFFLOAD_MODEL && P->resident) { /* maybe_free_model_hooks */
        part_off(P, P->resident);
        P->resident = NULL;
    }
}

/* ---- the run ---- */

static void setup(struct pipe *P, const struct diffusion_part *parts, int nparts)
{
    struct gen *g = P->g;
    const struct job_spec *s = P->s;
    memcpy(P->parts, parts, (size_t)nparts * sizeof *parts);
    P->nparts = nparts;
    for (int i = 0; i < nparts; i++) {
        struct diffusion_part *c = &P->parts[i];
        if (c->role < 0)
            P->unet = c;
        else if (c->role == EXTRA_VAE)
            P->vae = c;
        else
            P->te[P->nte++] = c;
    }
    P->tiny = s->diffusion.tiny_autoencoder;
    P->sdxl = P->unet->m->add_time_embed_dim > 0;
    if (P->tiny) { /* AutoencoderTiny replaces the KL VAE (pipe.vae = ...): registered as one more module */
        enum dtype dt = P->vae ? P->vae->dtype : P->unet->dtype;
        struct diffusion_part *c = &P->parts[P->nparts];
        g->mode = GEN_PARAMS;
        g->module_id = P->nparts;
        *c = (struct diffusion_part){.prefix = "vae", .first = g->nparams, .dtype = dt, .role = EXTRA_VAE};
        gen_push(g, "vae");
        taesd_register(g);
        gen_pop(g);
        c->count = g->nparams - c->first;
        g->mode = GEN_RUN;
        param_index_free(g); /* built before these were registered */
        P->vae = c;
        P->nparts++;
    }
    enum vae_upcast_kind up = s->diffusion.vae_upcast;
    P->upcast = up == VAE_UPCAST_ON || (up == VAE_UPCAST_AUTO && P->sdxl && !P->tiny && P->vae->dtype == DT_F16);
    P->images = (int64_t)s->batch * s->diffusion.images_per_prompt;
    P->height = diffusion_image_height(s);
    P->width = diffusion_image_width(s);
}

void diffusion_run(struct gen *g, const struct diffusion_part *parts, int nparts)
{
    struct pipe *P = calloc(1, sizeof *P);
    if (!P) {
        err_set(g->e, ERR_INTERNAL, "workload: out of host memory");
        g->failed = 1;
        return;
    }
    P->g = g;
    P->s = &g->spec;
    setup(P, parts, nparts);
    gen_phase(g, gen_intern(g, "load"));
    if (P->s->diffusion.offload == OFFLOAD_NONE) { /* pipe.to("cuda"), in register_modules order */
        part_on(P, P->vae);
        for (int i = 0; i < P->nte; i++)
            part_on(P, P->te[i]);
        part_on(P, P->unet);
    }
    if (P->s->diffusion.offload == OFFLOAD_SEQUENTIAL) {
        g->on_take = stream_weight;
        g->on_take_ctx = P;
    }
    for (int call = 1; call <= P->s->steps && !g->failed; call++) {
        struct op op = {.kind = OP_STEP, .id = (uint64_t)call, .bytes = (uint64_t)P->images};
        gen_emit(g, &op);
        tref embeds = encode_prompt(P);
        tref latents = denoise(P, embeds);
        t_release(g, embeds);
        if (!g->failed)
            decode(P, latents);
        t_release(g, latents);
        stream_release(P);
    }
    g->on_take = NULL;
    g->on_take_ctx = NULL;
    free(P);
}
