/* generate.c: the training job as phases: load (from_pretrained, .to(device), .to(dtype), master
 * weights, EMA shadow, frozen extras), then per step forward / backward per micro-batch, optimizer,
 * zero_grad, EMA update, and eval (no_grad forward, or diffusion sampling and VAE decode, optionally
 * inside the EMA context). Faults and fixes act here by their ids, after their rows' settings hooks
 * have changed the job (switches_apply_settings). A diffusion job (job.kind diffusion) is run by
 * diffusion_job.c on the modules enumerated here. */
#include "workload/generate.h"
#include "workload/diffusion_job.h"
#include "workload/gen.h"
#include "workload/job_kinds.h"
#include "util/map_array.h"
#include "workload/models/models.h"
#include "workload/optimizer.h"
#include "workload/parallel.h"
#include "workload/parallel_tensor.h"
#include "workload/parallel_pipeline.h"
#include "workload/strpool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MODULES (1 + SPEC_MAX_EXTRAS)
#define MAX_KEPT 4096
#define EMA_DECAY 0.9999f

struct module {
    struct model_spec m;
    const char *prefix;      /* "" for the trained model, "text_encoder", "vae" */
    int32_t first, count;    /* parameter range */
    bool on_device;
    enum dtype dtype;
    int role;                /* -1 trained model, else enum extra_role */
};

struct workload {
    struct gen g;
    struct module mod[MAX_MODULES];
    int nmod;
    tref kept[MAX_KEPT];     /* tensors a fault keeps alive (losses, samples) */
    int nkept;
    int captured;            /* debug_activation_capture forwards kept */
};

/* ---- parameter enumeration ---- */

static void mark_trainable(struct gen *g, const struct module *md)
{
    for (int32_t i = md->first; i < md->first + md->count; i++) {
        struct param *p = &g->params[i];
        if (md->role >= 0 || p->buffer)
            p->trainable = false;
        else if (g->spec.trainable == TRAIN_LORA)
            p->trainable = p->lora;
        else if (g->spec.trainable == TRAIN_LINEAR_PROBE)
            p->trainable = p->head;
        else
            p->trainable = true;
    }
}

static void enumerate(struct workload *w, struct module *md)
{
    struct gen *g = &w->g;
    struct batch bt = {1, 1, 1, 64, 1};
    g->mode = GEN_PARAMS;
    g->module_id = (int32_t)(md - w->mod);
    md->first = g->nparams;
    if (md->prefix[0])
        gen_push(g, "%s", md->prefix);
    model_forward(g, &md->m, &bt, true);
    if (md->prefix[0])
        gen_pop(g);
    md->count = g->nparams - md->first;
    mark_trainable(g, md);
}

static int gen_init(struct gen *g, const struct job_spec *spec, struct err *e)
{
    memset(g, 0, sizeof *g);
    g->spec = *spec;
    g->e = e;
    g->free_t = -1;
    g->ctx_override = g->pooled_override = TNONE;
    g->pool = strpool_create();
    if (!g->pool)
        return err_set(e, ERR_INTERNAL, "workload: out of host memory");
    return 0;
}

static void gen_fini(struct gen *g)
{
    strpool_destroy(g->pool);
    map_array_free(g->params, g->cap_params, sizeof *g->params);
    map_array_free(g->t, g->cap_t, sizeof *g->t);
    map_array_free(g->tape, g->cap_tape, sizeof *g->tape);
    param_index_free(g);
    free(g->forward_held.v);
    free(g->step_held.v);
    parallel_free(g);
    pipeline_free(g);
}

int64_t model_param_count(const struct model_spec *m, struct err *e)
{
    struct job_spec s;
    job_spec_init(&s);
    s.model = *m;
    s.model.preset[0] = 0;
    if (model_spec_resolve(&s.model, NULL, e))
        return -1;
    struct workload *w = calloc(1, sizeof *w);
    if (!w)
        return err_set(e, ERR_INTERNAL, "workload: out of host memory");
    int64_t n = -1;
    if (gen_init(&w->g, &s, e) == 0) {
        w->mod[0] = (struct module){.m = s.model, .prefix = "", .role = -1};
        enumerate(w, &w->mod[0]);
        n = 0;
        for (int32_t i = 0; i < w->g.nparams; i++)
            n += w->g.params[i].buffer ? 0 : w->g.params[i].numel;
        if (w->g.failed)
            n = -1;
    }
    gen_fini(&w->g);
    free(w);
    return n;
}

static int64_t text_width(const struct model_spec *m);

/* An MMDiT takes token states cross_attention_dim wide and a pooled embedding pooled_dim wide: Flux gets
 * each from one text encoder; SD3 its states from T5 and the CLIP encoders joined (sd3_clip_check). */
static int text_encoder_check(const struct model_spec *m, const struct module *md, int i, struct err *e)
{
    if (m->family != FAMILY_MMDIT || md->role != EXTRA_TEXT_ENCODER)
        return 0;
    if (!(md->m.family == FAMILY_T5 && md->m.encoder_only) && md->m.family != FAMILY_CLIP_TEXT)
        return err_set(e, ERR_INPUT, "extras[%d]: %s is not a text encoder (an encoder-only t5, or clip_text)", i,
                       md->m.preset);
    int64_t wd = text_width(&md->m);
    if (m->patch_size && md->m.family == FAMILY_T5 && wd != m->cross_attention_dim)
        return err_set(e, ERR_INPUT, "extras[%d]: T5 encoder %s is %lld wide, not model.cross_attention_dim (%d)", i,
                       md->m.preset, (long long)wd, m->cross_attention_dim);
    if (!m->patch_size && wd != m->cross_attention_dim && wd != m->pooled_dim)
        return err_set(e, ERR_INPUT, "extras[%d]: text encoder %s is %lld wide: neither model.cross_attention_dim "
                       "(%d) nor model.pooled_dim (%d)", i, md->m.preset, (long long)wd, m->cross_attention_dim,
                       m->pooled_dim);
    return 0;
}

/* SD3 joins the pooled outputs of its CLIP encoders on the device into pooled_dim, and their states,
 * padded, into cross_attention_dim. */
static int sd3_clip_check(const struct workload *w, struct err *e)
{
    const struct model_spec *m = &w->mod[0].m;
    int64_t sum = 0;
    for (int i = 1; i < w->nmod; i++)
        if (w->mod[i].role == EXTRA_TEXT_ENCODER && w->mod[i].on_device && w->mod[i].m.family == FAMILY_CLIP_TEXT)
            sum += text_width(&w->mod[i].m);
    if (m->family != FAMILY_MMDIT || !m->patch_size || !sum || (sum == m->pooled_dim && sum <= m->cross_attention_dim))
        return 0;
    return err_set(e, ERR_INPUT, "extras: the CLIP text encoders on the device are %lld wide together; SD3 joins "
                   "their pooled outputs into model.pooled_dim (%d) and pads their states to model.cross_attention_dim "
                   "(%d)", (long long)sum, m->pooled_dim, m->cross_attention_dim);
}

struct workload *workload_create(const struct job_spec *spec, struct err *e)
{
    struct job_spec s = *spec;
    if (job_spec_validate(&s, e) < 0)
        return NULL;
    switches_apply_settings(&s);
    if (s.kind == JOB_GENERATE || s.kind == JOB_DIFFUSION) /* inference on the weights as from_pretrained loads them */
        s.param_dtype = s.load_dtype;
    tensor_parallel_shard(&s); /* one rank of the tensor-parallel group */
    struct workload *w = calloc(1, sizeof *w);
    if (!w) {
        err_set(e, ERR_INTERNAL, "workload: out of host memory");
        return NULL;
    }
    if (gen_init(&w->g, &s, e) < 0) {
        free(w);
        return NULL;
    }
    w->mod[0] = (struct module){.m = s.model, .prefix = "", .on_device = true, .dtype = s.param_dtype, .role = -1};
    w->nmod = 1;
    int tes = 0;
    for (int i = 0; i < s.nextras; i++) {
        struct module *md = &w->mod[w->nmod++];
        md->prefix = extra_role_name(s.extras[i].role);
        if (s.extras[i].role == EXTRA_TEXT_ENCODER && tes++) /* SDXL's second, as diffusers names it */
            md->prefix = "text_encoder_2";
        md->on_device = s.extras[i].on_device;
        md->dtype = s.extras[i].dtype;
        md->role = s.extras[i].role;
        if (preset_apply(&md->m, s.extras[i].preset, e) || model_spec_resolve(&md->m, NULL, e) ||
            text_encoder_check(&s.model, md, i, e)) {
            workload_destroy(w);
            return NULL;
        }
    }
    if (sd3_clip_check(w, e)) {
        workload_destroy(w);
        return NULL;
    }
    for (int i = 0; i < w->nmod; i++)
        enumerate(w, &w->mod[i]);
    w->g.module_id = 0; /* the trained model runs, unless run_extra says otherwise */
    if (!w->g.failed && lora_check_targets(&w->g, e)) {
        workload_destroy(w);
        return NULL;
    }
    if (w->g.failed) {
        workload_destroy(w);
        return NULL;
    }
    return w;
}

void workload_destroy(struct workload *w)
{
    if (!w)
        return;
    gen_fini(&w->g);
    free(w);
}

size_t workload_host_bytes(const struct workload *w)
{
    const struct gen *g = &w->g;
    return sizeof *w + strpool_bytes(g->pool) + g->cap_params * sizeof(struct param) + g->cap_t * sizeof(struct tensor) +
           g->cap_tape * sizeof(struct node);
}

/* ---- load ---- */

static tref param_tensor(struct gen *g, const struct param *p, enum dtype dt, enum category cat)
{
    return t_new2(g, p->dims[0], p->dims[1], dt, cat, p->tag);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* The checkpoint's values of a parameter, as the copy to the device lands them: matrices uniform in
 * +-1/sqrt(fan_in) (PyTorch's default bound), biases small, norm scales 1. */
void param_load_values(struct gen *g, const struct param *p, tref x)
{
    if (p->dims[1] > 1) {
        float bound = 1.0f / sqrtf((float)p->dims[1]);
        kern_init_uniform(g, x, -bound, bound, p->module);
    } else if (ends_with(p->tag, ".bias")) {
        kern_init_uniform(g, x, -0.02f, 0.02f, p->module);
    } else {
        kern_fill(g, x, 1.0f, p->module);
    }
}

static void load_module(struct workload *w, const struct module *md)
{
    struct gen *g = &w->g;
    const struct job_spec *s = &g->spec;
    bool main = md->role < 0;
    bool convert = main && s->load_dtype != s->param_dtype && !spec_has_fix(s, FIX_CONVERT_ONCE) &&
                   !parallel_shards_params(s); /* shards are made in param_dtype */
    bool dup = main && spec_has_fault(s, FAULT_DUPLICATE_DTYPE_CONVERSION) && !spec_has_fix(s, FIX_CONVERT_ONCE);
    enum dtype first = convert ? s->load_dtype : md->dtype;
    for (int32_t i = md->first; i < md->first + md->count; i++) {
        struct param *p = &g->params[i];
        if (p->lora) /* get_peft_model adds them after loading (lora_load) */
            continue;
        if (main && !pipeline_holds(g, i)) { /* another pipeline stage's */
            p->trainable = false;
            continue;
        }
        if (p->quant) {
            quant_load(g, p, s->load_dtype);
            continue;
        }
        p->data = param_tensor(g, p, first, CAT_PARAM);
        param_load_values(g, p, p->data);
        if (main)
            parallel_shard_loaded(g, i);
    }
    if (convert) { /* model.to(dtype): each parameter swapped in place, the old storage freed at once */
        for (int32_t i = md->first; i < md->first + md->count; i++) {
            struct param *p = &g->params[i];
            if (p->lora || p->quant || !pipeline_holds(g, i))
                continue;
            tref nw = param_tensor(g, p, s->param_dtype, CAT_PARAM);
            kern_cast(g, p->data, nw, p->module);
            if (dup)
                p->stale = p->data; /* a reference to the fp32 weights lives on */
            else
                t_release(g, p->data);
            p->data = nw;
        }
    }
    if (dup) { /* a state dict moved to the device a second time and kept */
        for (int32_t i = md->first; i < md->first + md->count; i++) {
            struct param *p = &g->params[i];
            if (!pipeline_holds(g, i))
                continue;
            tref sd = param_tensor(g, p, s->load_dtype, CAT_OTHER);
            param_load_values(g, p, sd);
            if (w->nkept < MAX_KEPT)
                w->kept[w->nkept++] = sd;
        }
    }
    if (main) {
        quant_prepare_kbit(g, md->first, md->count);
        lora_load(g, md->first, md->count, md->dtype);
    }
}

static void load(struct workload *w)
{
    struct gen *g = &w->g;
    const struct job_spec *s = &g->spec;
    gen_phase(g, gen_intern(g, "load"));
    for (int i = 0; i < w->nmod; i++)
        if (w->mod[i].on_device)
            load_module(w, &w->mod[i]);
    const struct module *md = &w->mod[0];
    for (int32_t i = md->first; i < md->first + md->count; i++) {
        struct param *p = &g->params[i];
        if (!p->trainable)
            continue;
        if (s->master_weights && !parallel_zero(s) && g->t[p->data].dtype != DT_F32) { /* ZeRO: its own */
            p->master = param_tensor(g, p, DT_F32, CAT_OPTIMIZER_STATE);
            kern_cast(g, p->data, p->master, p->module);
        }
        if (s->ema == EMA_GPU) {
            p->ema = param_tensor(g, p, DT_F32, CAT_EMA);
            kern_cast(g, p->data, p->ema, p->module);
        }
    }
    parallel_setup(g);
}

/* ---- forward helpers ---- */

static const struct module *extra(const struct workload *w, enum extra_role role)
{
    for (int i = 1; i < w->nmod; i++)
        if (w->mod[i].role == (int)role)
            return &w->mod[i];
    return NULL;
}

/* Runs an extra (frozen) module under no_grad; returns its output. */
static tref run_extra(struct workload *w, const struct module *md, const struct batch *bt, bool encode)
{
    struct gen *g = &w->g;
    bool grad = g->grad_enabled, train = g->training;
    int32_t cursor = g->cursor, module = g->module_id;
    enum dtype act = g->act_dtype;
    g->grad_enabled = false;
    g->training = false;
    g->cursor = md->first;
    g->module_id = (int32_t)(md - w->mod); /* an extra: no adapters, no quantization */
    g->act_dtype = md->dtype;
    gen_push(g, "%s", md->prefix);
    tref out;
    if (md->m.family == FAMILY_VAE && encode) {
        int64_t d[4] = {bt->b, md->m.in_channels, bt->image, bt->image};
        tref img = nn_input(g, d, 4, md->dtype, "pixel_values");
        out = vae_encode(g, &md->m, img);
        t_release(g, img);
    } else {
        out = model_forward(g, &md->m, bt, false);
    }
    gen_pop(g);
    g->cursor = cursor;
    g->module_id = module;
    g->grad_enabled = grad;
    g->training = train;
    g->act_dtype = act;
    return out;
}

/* A text encoder's output over `tokens` tokens, in the trained model's dtype. */
static tref encode_text(struct workload *w, const struct module *te, int64_t b, int64_t tokens, const char *name)
{
    struct gen *g = &w->g;
    struct batch tb = {b, tokens, 0, 0, tokens};
    tref hs = run_extra(w, te, &tb, false);
    if (g->t[hs].dtype != g->spec.param_dtype) { /* the dtype main_forward gives the model's inputs */
        tref c = nn_cast(g, name, hs, g->spec.param_dtype);
        t_release(g, hs);
        hs = c;
    }
    return hs;
}

/* The tokens an MMDiT's text encoder reads: T5 the job's context_len (max_sequence_length), CLIP its
 * tokenizer's max_length (padding="max_length"), its learned positions. */
static int64_t mmdit_tokens(const struct module *te, const struct batch *bt)
{
    return te->m.family == FAMILY_CLIP_TEXT ? te->m.max_positions : bt->context;
}

static int64_t text_width(const struct model_spec *m)
{
    return m->projection_dim ? m->projection_dim : m->hidden;
}

/* CLIPTextModel's pooler_output, or the text_embeds of the projection: the last token's state gathered. */
static tref pooled_of(struct gen *g, tref hs, const char *name)
{
    int64_t b = T(g, hs)->dims[0], s = T(g, hs)->dims[1], d = T(g, hs)->dims[2], pd[2] = {b, d};
    return nn_slice(g, name, hs, pd, 2, b, d, s * d, (s - 1) * d);
}

/* a, then b after it along the last dimension (either may be TNONE); takes over both references */
static tref join_last(struct gen *g, const char *name, tref a, tref b)
{
    if (a == TNONE || b == TNONE)
        return a == TNONE ? b : a;
    tref j = nn_concat_last(g, name, a, b);
    t_release(g, a);
    t_release(g, b);
    return j;
}

/* Flux: every text encoder on the device runs; the one as wide as cross_attention_dim gives the token
 * states (T5), the one as wide as pooled_dim the pooled embedding (CLIP). workload_create checks each
 * matches one of them. */
static void flux_conditioning(struct workload *w, const struct batch *bt)
{
    struct gen *g = &w->g;
    const struct model_spec *m = &w->mod[0].m;
    for (int i = 1; i < w->nmod; i++) {
        const struct module *te = &w->mod[i];
        if (te->role != EXTRA_TEXT_ENCODER || !te->on_device)
            continue;
        if (text_width(&te->m) == m->cross_attention_dim && g->ctx_override == TNONE) {
            g->ctx_override = encode_text(w, te, bt->b, mmdit_tokens(te, bt), "encoder_hidden_states");
            continue;
        }
        tref hs = encode_text(w, te, bt->b, mmdit_tokens(te, bt), "pooled_projections");
        t_release(g, g->pooled_override);
        g->pooled_override = pooled_of(g, hs, "pooled_projections");
        t_release(g, hs);
    }
}

/* SD3 (StableDiffusion3Pipeline.encode_prompt): the CLIP encoders' states joined along the width and
 * padded to cross_attention_dim, then T5's tokens after them (an input when T5 is not on the device);
 * their pooled outputs joined. Without a CLIP encoder on the device the embeddings are inputs, but
 * T5's states when it runs. */
static void sd3_conditioning(struct workload *w, const struct batch *bt)
{
    struct gen *g = &w->g;
    const struct model_spec *m = &w->mod[0].m;
    tref clip = TNONE, pooled = TNONE, t5 = TNONE;
    for (int i = 1; i < w->nmod; i++) {
        const struct module *te = &w->mod[i];
        if (te->role != EXTRA_TEXT_ENCODER || !te->on_device)
            continue;
        if (te->m.family == FAMILY_T5) {
            t5 = encode_text(w, te, bt->b, mmdit_tokens(te, bt), "t5_prompt_embeds");
            continue;
        }
        tref hs = encode_text(w, te, bt->b, mmdit_tokens(te, bt), "prompt_embeds");
        pooled = join_last(g, "pooled_prompt_embeds", pooled, pooled_of(g, hs, "pooled_prompt_embeds"));
        clip = join_last(g, "clip_prompt_embeds", clip, hs);
    }
    if (clip == TNONE) {
        g->ctx_override = t5;
        return;
    }
    int64_t b = T(g, clip)->dims[0], s = T(g, clip)->dims[1];
    int64_t zd[3] = {b, s, m->cross_attention_dim - T(g, clip)->dims[2]}, td[3] = {b, bt->context, m->cross_attention_dim};
    if (zd[2] > 0) { /* F.pad: the zeros, then the padded copy */
        tref z = t_new(g, zd, 3, (enum dtype)T(g, clip)->dtype, CAT_ACTIVATION, gen_intern(g, "clip_prompt_embeds"));
        kern_fill(g, z, 0.0f, gen_intern(g, "clip_prompt_embeds"));
        clip = join_last(g, "clip_prompt_embeds", clip, z);
    }
    if (t5 == TNONE)
        t5 = nn_input(g, td, 3, g->spec.param_dtype, "t5_prompt_embeds");
    g->ctx_override = nn_concat(g, "prompt_embeds", clip, t5);
    t_release(g, clip);
    t_release(g, t5);
    g->pooled_override = pooled;
}

/* The text conditioning of a UNet or MMDiT step: the text encoders' outputs when they are on the device. */
static void conditioning(struct workload *w, const struct batch *bt)
{
    struct gen *g = &w->g;
    const struct module *te = extra(w, EXTRA_TEXT_ENCODER);
    g->ctx_override = g->pooled_override = TNONE;
    if (w->mod[0].m.family == FAMILY_MMDIT) {
        if (w->mod[0].m.patch_size)
            sd3_conditioning(w, bt);
        else
            flux_conditioning(w, bt);
        return;
    }
    if (w->mod[0].m.family != FAMILY_UNET || !te || !te->on_device)
        return;
    g->ctx_override = encode_text(w, te, bt->b, bt->context, "encoder_hidden_states");
}

static void release_conditioning(struct gen *g)
{
    t_release(g, g->ctx_override);
    t_release(g, g->pooled_override);
    g->ctx_override = g->pooled_override = TNONE;
}

static tref main_forward(struct workload *w, const struct batch *bt, bool loss)
{
    struct gen *g = &w->g;
    g->cursor = w->mod[0].first;
    g->act_dtype = fsdp_gather_dtype(&g->spec); /* FSDP's mixed precision computes in its param_dtype */
    g->autocast = g->spec.autocast;
    tref out = model_forward(g, &w->mod[0].m, bt, loss);
    g->autocast = false;
    nn_end_autocast(g);
    gen_release_held(g, &g->forward_held); /* the model's output (its KV cache) is dropped with the loss taken */
    return out;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

/* Shapes of a training step's micro-batch, after activation growth, padding and varying lengths. */
static struct batch step_batch(const struct gen *g, int step)
{
    const struct job_spec *s = &g->spec;
    struct batch bt = {s->batch, s->seq_len, s->target_len, s->image_size, s->context_len};
    if (spec_has_fault(s, FAULT_ACTIVATION_GROWTH)) {
        struct activation_growth_params p = activation_growth_params(s);
        if (p.batch_every > 0)
            bt.b += (step - 1) / p.batch_every;
        bt.s += (int64_t)(step - 1) * p.seq_step;
        if (!spec_has_fix(s, FIX_PAD_TO_LONGEST)) {
            int64_t max = p.max_length ? p.max_length : (s->model.max_positions ? s->model.max_positions : bt.s);
            if (max > bt.s)
                bt.s = max;
        }
    }
    if (spec_has_fault(s, FAULT_VARIABLE_LENGTH_FRAGMENTATION)) {
        struct variable_length_fragmentation_params p = variable_length_fragmentation_params(s);
        int64_t lo = p.min > 0 ? p.min : (s->seq_len / 4 > 0 ? s->seq_len / 4 : 1);
        int64_t hi = s->seq_len;
        if (lo > hi)
            lo = hi;
        bt.s = lo + (int64_t)(mix(p.seed * 1000003ULL + (uint64_t)step) % (uint64_t)(hi - lo + 1));
    }
    if (bt.t == 0)
        bt.t = bt.s;
    return bt;
}

/* ---- training step ---- */

static void keep(struct workload *w, tref x)
{
    if (w->nkept < MAX_KEPT)
        w->kept[w->nkept++] = x;
    else
        t_release(&w->g, x);
}

static void train_micro_batch(struct workload *w, const struct batch *bt)
{
    struct gen *g = &w->g;
    gen_phase(g, gen_intern(g, "forward"));
    g->grad_enabled = true;
    g->training = true;
    g->checkpointing = spec_has_fix(&g->spec, FIX_GRADIENT_CHECKPOINTING);
    const struct module *vae = extra(w, EXTRA_VAE);
    bool diffusion = w->mod[0].m.family == FAMILY_UNET || w->mod[0].m.family == FAMILY_MMDIT;
    if (diffusion && vae && vae->on_device) { /* latents of the batch, no_grad */
        tref lat = run_extra(w, vae, bt, true);
        t_release(g, lat);
    }
    conditioning(w, bt);
    parallel_forward_begin(g);
    int32_t base = g->ntape;
    tref loss = main_forward(w, bt, true), scaled = TNONE;
    release_conditioning(g);
    if (g->spec.loss_scaling) /* scaler.scale(loss).backward(): the scaled loss is a temporary */
        scaled = nn_scale(g, "grad_scaler.scale", loss, nn_loss_scale());
    gen_phase(g, gen_intern(g, "backward"));
    parallel_backward_begin(g);
    backward(g, scaled != TNONE ? scaled : loss, base);
    parallel_backward_end(g);
    if (scaled != TNONE)
        t_release(g, scaled);
    if (spec_has_fault(&g->spec, FAULT_UNRELEASED_GRADIENTS))
        keep(w, loss); /* total_loss += loss: the loss tensor of every step stays referenced */
    else
        t_release(g, loss);
}

/* One micro-batch's forward through a pipeline stage (parallel_pipeline.c runs the schedule). */
static tref pipe_forward(struct gen *g, void *ctx, const struct batch *bt)
{
    gen_phase(g, gen_intern(g, "forward"));
    g->grad_enabled = true;
    g->training = true;
    g->checkpointing = spec_has_fix(&g->spec, FIX_GRADIENT_CHECKPOINTING);
    parallel_forward_begin(g);
    return main_forward(ctx, bt, true);
}

static void ema_update(struct workload *w)
{
    struct gen *g = &w->g;
    if (g->spec.ema != EMA_GPU)
        return;
    gen_phase(g, gen_intern(g, "ema"));
    for (int32_t i = 0; i < g->nparams; i++) {
        struct param *p = &g->params[i];
        if (p->ema == TNONE)
            continue;
        tref diff = param_tensor(g, p, DT_F32, CAT_TEMP); /* s_param - param, in fp32 */
        kern_cast(g, p->data, diff, p->module);
        int64_t d[1] = {p->numel};
        tref ts[2] = {diff, p->ema};
        float decay = EMA_DECAY;
        kern(g, K_EMA, DT_F32, d, 1, ts, 2, &decay, 1, p->module);
        t_release(g, diff);
    }
}

static void debug_capture(struct workload *w, const struct batch *bt)
{
    struct gen *g = &w->g;
    int limit = debug_activation_capture_params(&g->spec).batches;
    if (limit > 0 && w->captured >= limit)
        return;
    w->captured++;
    gen_phase(g, gen_intern(g, "debug"));
    g->grad_enabled = true; /* the analysis forward runs outside no_grad */
    g->training = false;
    tref out = main_forward(w, bt, false);
    keep(w, out); /* the hook keeps the output, and with it the graph and everything it saved */
}

/* ---- eval ---- */

static void ema_store(struct workload *w, tref *stored)
{
    struct gen *g = &w->g;
    for (int32_t i = 0; i < w->mod[0].count; i++) {
        struct param *p = &g->params[w->mod[0].first + i];
        stored[i] = TNONE;
        if (!p->trainable)
            continue;
        if (g->spec.ema != EMA_GPU) /* store() and copy_to() on the CPU */
            continue;
        stored[i] = param_tensor(g, p, (enum dtype)g->t[p->data].dtype, CAT_EMA); /* store(): clone */
        kern_scale(g, p->data, stored[i], 1.0f, p->module);
        kern_cast(g, p->ema, p->data, p->module); /* copy_to(): EMA weights in */
    }
}

static void ema_restore(struct workload *w, tref *stored)
{
    struct gen *g = &w->g;
    for (int32_t i = 0; i < w->mod[0].count; i++) {
        struct param *p = &g->params[w->mod[0].first + i];
        if (stored[i] == TNONE)
            continue;
        kern_scale(g, stored[i], p->data, 1.0f, p->module);
        t_release(g, stored[i]);
    }
}

/* The VAE's first decoder parameter (post_quant_conv, or without one the decoder's conv_in; the
 * encoder's come first). */
static int32_t decoder_first(const struct gen *g, const struct module *vae)
{
    for (int32_t i = vae->first; i < vae->first + vae->count; i++)
        if (ends_with(g->params[i].module, "post_quant_conv") || ends_with(g->params[i].module, "decoder.conv_in"))
            return i;
    return vae->first;
}

static void decode_samples(struct workload *w, tref latents, const struct batch *bt)
{
    struct gen *g = &w->g;
    const struct module *vae = extra(w, EXTRA_VAE);
    bool on_device = spec_has_fault(&g->spec, FAULT_EVAL_SAMPLES_ON_DEVICE) && !spec_has_fix(&g->spec, FIX_SAMPLES_TO_CPU);
    if (!g->spec.eval.vae_decode || !vae || !vae->on_device) {
        if (on_device)
            keep(w, t_ref(g, latents));
        return;
    }
    gen_phase(g, gen_intern(g, "decode"));
    int64_t chunk = spec_has_fix(&g->spec, FIX_CHUNKED_DECODE) ? chunked_decode_params(&g->spec).chunk : bt->b;
    for (int64_t at = 0; at < bt->b; at += chunk) {
        int64_t n = at + chunk <= bt->b ? chunk : bt->b - at;
        int64_t d[4] = {n, vae->m.latent_channels, T(g, latents)->dims[2], T(g, latents)->dims[3]};
        int64_t per = t_numel(g, latents) / bt->b;
        tref part = nn_slice(g, "latents.chunk", latents, d, 4, 1, n * per, bt->b * per, at * per);
        if (T(g, part)->dtype != vae->dtype) {
            tref c = nn_cast(g, "latents.to_vae", part, vae->dtype);
            t_release(g, part);
            part = c;
        }
        bool grad = g->grad_enabled;
        int32_t cursor = g->cursor;
        g->grad_enabled = false;
        g->cursor = decoder_first(g, vae);
        gen_push(g, "%s", vae->prefix);
        tref img = vae_decode(g, &vae->m, part);
        gen_pop(g);
        g->cursor = cursor;
        g->grad_enabled = grad;
        t_release(g, part);
        if (on_device)
            keep(w, img); /* samples appended to a list on the device */
        else
            t_release(g, img); /* .cpu() */
    }
}

/* torch.cat((acc, x), dim=0): a new tensor of both (x itself when acc is TNONE), acc freed. */
static tref concat_rows(struct gen *g, tref acc, tref x)
{
    if (acc == TNONE) /* the first batch's tensor itself */
        return t_ref(g, x);
    const char *tag = gen_intern(g, "eval.all_preds");
    int64_t na = t_numel(g, acc), nx = t_numel(g, x), d[TMAX_DIMS];
    memcpy(d, T(g, acc)->dims, sizeof d);
    d[0] += T(g, x)->dims[0];
    tref c = t_new(g, d, T(g, acc)->ndim, (enum dtype)T(g, acc)->dtype, CAT_OUTPUT, tag);
    int64_t ba[6] = {1, na, na, 0, na + nx, 0}, bx[6] = {1, nx, nx, 0, na + nx, na};
    kern_copy_blocks(g, acc, c, ba, false, tag);
    kern_copy_blocks(g, x, c, bx, false, tag);
    t_release(g, acc);
    return c;
}

static void eval(struct workload *w)
{
    struct gen *g = &w->g;
    const struct job_spec *s = &g->spec;
    int stream = g->stream;
    g->stream = s->streams > 1 ? 1 : 0;
    gen_phase(g, gen_intern(g, "eval"));
    bool ema_ctx = spec_has_fault(s, FAULT_EMA_CONTEXT_SPIKE) && s->ema != EMA_OFF && !spec_has_fix(s, FIX_SKIP_EMA_EVAL);
    tref *stored = NULL;
    if (ema_ctx && (stored = calloc((size_t)w->mod[0].count + 1, sizeof *stored)))
        ema_store(w, stored);
    struct batch bt = step_batch(g, 1);
    if (s->eval.batch)
        bt.b = s->eval.batch;
    g->grad_enabled = false;
    g->training = false;
    /* Trainer's evaluation_loop without eval_accumulation_steps: each batch's logits concatenated on the
     * device (EvalLoopContainer.add, nested_concat); the model outputs are what is kept (its loss
     * with labels is not modelled on this path) */
    bool outputs_on_device = w->mod[0].m.family != FAMILY_UNET && spec_has_fault(s, FAULT_EVAL_SAMPLES_ON_DEVICE) &&
                             !spec_has_fix(s, FIX_SAMPLES_TO_CPU);
    tref preds = TNONE;
    for (int b = 0; b < (s->eval.batches ? s->eval.batches : 1) && !g->failed; b++) {
        if (w->mod[0].m.family == FAMILY_UNET && s->eval.sampling_steps > 0) {
            int64_t lat = bt.image / w->mod[0].m.vae_scale;
            int64_t d[4] = {bt.b, w->mod[0].m.latent_channels, lat, lat};
            tref latents = nn_input(g, d, 4, g->spec.param_dtype, "latents");
            conditioning(w, &bt);
            for (int k = 0; k < s->eval.sampling_steps && !g->failed; k++) {
                tref eps = main_forward(w, &bt, false);
                tref next = nn_add(g, "scheduler.step", latents, eps);
                t_release(g, eps);
                t_release(g, latents);
                latents = next;
            }
            release_conditioning(g);
            decode_samples(w, latents, &bt);
            t_release(g, latents);
        } else if (outputs_on_device) {
            tref out = main_forward(w, &bt, false);
            preds = concat_rows(g, preds, out);
            t_release(g, out);
        } else {
            conditioning(w, &bt);
            tref out = main_forward(w, &bt, true);
            release_conditioning(g);
            t_release(g, out);
        }
    }
    t_release(g, preds); /* nested_numpify at the end of the loop */
    gen_release_held(g, &g->step_held);
    if (stored) {
        ema_restore(w, stored);
        free(stored);
    }
    g->stream = stream;
}

int eval_job_check(const struct job_spec *s, struct err *e)
{
    if (s->eval.every || s->eval.before_training)
        return err_set(e, ERR_INPUT, "job.eval.every and job.eval.before_training: eval cadence within training; "
                                     "job.kind eval runs one evaluation of job.eval.batches batches");
    return 0;
}

int workload_run(struct workload *w, struct op_sink *sink, struct err *e)
{
    struct gen *g = &w->g;
    const struct job_spec *s = &g->spec;
    g->sink = sink;
    g->e = e;
    g->mode = GEN_RUN;
    if (s->kind == JOB_DIFFUSION) {
        struct diffusion_part parts[MAX_MODULES];
        for (int i = 0; i < w->nmod; i++)
            parts[i] = (struct diffusion_part){&w->mod[i].m, w->mod[i].prefix, w->mod[i].first, w->mod[i].count,
                                               w->mod[i].dtype, w->mod[i].role};
        diffusion_run(g, parts, w->nmod);
        gen_mark(g, "end");
        return g->failed ? -1 : 0;
    }
    load(w);
    if (s->kind == JOB_GENERATE)
        generation_run(g, &w->mod[0].m, w->mod[0].first);
    if (s->kind == JOB_EVAL)
        eval(w);
    if (s->kind != JOB_TRAIN) {
        gen_mark(g, "end");
        return g->failed ? -1 : 0;
    }
    if (s->eval.before_training)
        eval(w);
    for (int step = 1; step <= s->steps && !g->failed; step++) {
        struct batch bt = step_batch(g, step);
        int accum = pipeline_on(s) ? s->parallel.micro_batches : s->grad_accum;
        struct op op = {.kind = OP_STEP, .id = (uint64_t)step, .bytes = (uint64_t)(bt.b * accum)};
        gen_emit(g, &op);
        if (pipeline_on(s))
            pipeline_step(g, pipe_forward, w, &bt);
        for (int k = 0; k < s->grad_accum && !pipeline_on(s) && !g->failed; k++)
            train_micro_batch(w, &bt);
        if (!parallel_optimizer_step(g))
            optimizer_step(g);
        gen_phase(g, gen_intern(g, "zero_grad")); /* a point of its own: what set_to_none frees shows there */
        if (!parallel_zero_grad(g))
            optimizer_zero_grad(g, s->set_to_none);
        gen_release_held(g, &g->step_held); /* the batch */
        ema_update(w);
        if (spec_has_fault(s, FAULT_DEBUG_ACTIVATION_CAPTURE))
            debug_capture(w, &bt);
        if (s->eval.every > 0 && step % s->eval.every == 0)
            eval(w);
    }
    gen_mark(g, "end");
    return g->failed ? -1 : 0;
}

int workload_generate(const struct job_spec *spec, struct op_sink *sink, struct err *e)
{
    struct workload *w = workload_create(spec, e);
    if (!w)
        return -1;
    int rc = workload_run(w, sink, e);
    workload_destroy(w);
    return rc;
}
