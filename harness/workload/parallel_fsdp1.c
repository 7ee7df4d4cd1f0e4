/* parallel_fsdp1.c: FSDP1's flat parameters (FullyShardedDataParallel with an auto-wrap policy of the
 * transformer block), the memory one rank keeps. The units, the unit switch and prefetch are
 * parallel_shard.c's, as for FSDP2; what differs is here.
 *
 * torch/distributed/fsdp/_flat_param.py: each unit's parameters are flattened into one FlatParameter
 * (_init_flat_param_and_metadata; with use_orig_params each parameter starts aligned to 16 bytes of
 * param_dtype, _get_aligned_numel, and the total is padded to a multiple of world_size). Wrapping a unit
 * whose parameters are on the device concatenates them (flatten_tensors), frees them, and keeps this
 * rank's chunk (_get_shard: flat.chunk(world_size)[rank].clone(), padded to ceil(flat / world_size)).
 * unshard() allocates the padded unsharded flat parameter (_full_param_padded, shard * world_size
 * elements of param_dtype) and all-gathers into it; the parameters are views of it. reshard() frees it.
 * The root's unit is not resharded after forward (_runtime_utils.py _post_forward_reshard).
 *
 * Backward: autograd's split of the flat parameter into views concatenates the views' gradients into one
 * gradient of the flat parameter (the padding's and frozen parameters' as zeros), after the unit's last
 * one. _runtime_utils.py _post_backward_hook then reshards (and, with BACKWARD_POST, prefetches the next
 * unit), casts the gradient to reduce_dtype, pads it to shard * world_size when it is not a multiple
 * (_get_reduce_scatter_tensors: F.pad, without use_orig_params), reduce-scatters it into a new shard,
 * casts that to the shard's dtype and keeps or adds it (_accumulate_sharded_grad); the hook's locals keep
 * every one of these until it returns. With BACKWARD_PRE (the default), the pre-backward hook of a unit
 * gathers the next one in backward.
 *
 * The optimizer sees one FlatParameter per unit (its state includes the padding), or with use_orig_params
 * each original parameter as its view of the shard (only the elements this rank holds; none for those
 * wholly on other ranks).
 *
 * limit_all_gathers (_limiter_utils.py, 2 all-gathers in flight) holds the CPU thread back so that the GPU
 * only holds the running unit and the one prefetched; the caching allocator sees the same blocks with or
 * without it here, where each free happens in program order, so it is not a key.
 *
 * Modelled differently: the parameters' views name the flat buffer's allocation (their kernels read it);
 * LoRA adapters (made after the load) stay whole on every rank instead of joining their unit's flat
 * parameter;
 * collectives are not kernels; the post-backward and all-gather streams are the compute stream.
 */
#include "workload/gen.h"
#include "workload/optimizer.h"
#include "workload/parallel.h"
#include "workload/parallel_impl.h"

#include <stdio.h>
#include <stdlib.h>

static int64_t world(const struct gen *g)
{
    return g->spec.parallel.world_size;
}

static bool orig_params(const struct gen *g)
{
    return g->spec.parallel.use_orig_params;
}

int fsdp1_init(struct gen *g, struct parallel *par)
{
    par->fu = calloc((size_t)par->nunits, sizeof *par->fu);
    par->fu_off = calloc((size_t)g->nparams + 1, sizeof *par->fu_off);
    if (!par->fu || !par->fu_off)
        return err_set(g->e, ERR_INTERNAL, "workload: out of host memory for FSDP1 flat parameters");
    int64_t align = orig_params(g) ? 16 / dtype_size(fsdp_gather_dtype(&g->spec)) : 0;
    for (int32_t u = 0; u < par->nunits; u++)
        par->fu[u] = (struct fsdp1_unit){.local = TNONE, .full = TNONE, .grad = TNONE, .first = -1, .last = -1};
    for (int32_t i = 0; i < g->nparams; i++) {
        const struct param *p = &g->params[i];
        if (p->buffer || p->lora) { /* FSDP flattens parameters only; LoRA adapters are kept whole */
            par->sp[i].unit = -1;
            continue;
        }
        struct fsdp1_unit *f = &par->fu[par->sp[i].unit];
        if (align > 0 && f->flat % align)
            f->flat += align - f->flat % align;
        par->fu_off[i] = f->flat;
        f->flat += p->numel;
        if (f->first < 0) {
            size_t n = block_prefix(p->tag);
            char tag[160];
            snprintf(tag, sizeof tag, "%.*s_flat_param", (int)n, p->tag);
            f->tag = gen_intern(g, tag);
            f->first = i;
        }
        f->last = i;
    }
    for (int32_t u = 0; u < par->nunits; u++) {
        struct fsdp1_unit *f = &par->fu[u];
        if (orig_params(g) && f->flat % world(g))
            f->flat += world(g) - f->flat % world(g);
        f->shard = (f->flat + world(g) - 1) / world(g);
    }
    return 0;
}

static bool in_unit(const struct gen *g, int32_t i, int32_t u)
{
    return g->par->sp[i].unit == u;
}

/* FSDP wraps a unit once its parameters are on the device: flatten, keep this rank's chunk. */
static void wrap_unit(struct gen *g, int32_t u)
{
    struct fsdp1_unit *f = &g->par->fu[u];
    enum dtype dt = g->spec.param_dtype;
    tref flat = t_new2(g, f->flat, 1, dt, CAT_PARAM, f->tag);
    kern_fill(g, flat, 0.0f, f->tag); /* torch.cat of the parameters (and padding) */
    for (int32_t i = f->first; i <= f->last; i++)
        if (in_unit(g, i, u)) {
            t_storage_free(g, g->params[i].data);
            g->t[g->params[i].data].dtype = (uint8_t)fsdp_gather_dtype(&g->spec); /* views of the bf16 buffer */
        }
    if (!g->spec.parallel.cpu_offload) { /* offload: the shard is pinned host memory */
        f->local = t_new2(g, f->shard, 1, dt, CAT_PARAM, f->tag);
        kern_init_uniform(g, f->local, -0.02f, 0.02f, f->tag);
    }
    t_release(g, flat);
}

void fsdp1_loaded(struct gen *g, int32_t i)
{
    struct parallel *par = g->par;
    int32_t u = par->sp[i].unit;
    if (u < 0)
        return;
    g->t[g->params[i].data].param = i;
    if (par->fu[u].last == i)
        wrap_unit(g, u);
}

/* pre_unshard (the low-precision shard, or the shard copied from the host), unshard (the all-gather into
 * the padded flat buffer), post_unshard (the low-precision shard freed). */
void fsdp1_gather(struct gen *g, int32_t u)
{
    struct fsdp1_unit *f = &g->par->fu[u];
    enum dtype sd = g->spec.param_dtype, gd = fsdp_gather_dtype(&g->spec);
    bool offload = g->spec.parallel.cpu_offload;
    if (f->first < 0) /* a unit of buffers only */
        return;
    tref in = TNONE, src = f->local;
    if (gd != sd) { /* _use_low_precision_shard: _mp_shard.copy_(_local_shard.to(device)) */
        in = t_new2(g, f->shard, 1, gd, CAT_PARAM, f->tag);
        if (offload) {
            src = t_new2(g, f->shard, 1, sd, CAT_PARAM, f->tag);
            kern_init_uniform(g, src, -0.02f, 0.02f, f->tag);
        }
        kern_cast(g, src, in, f->tag);
        if (offload)
            t_release(g, src);
    } else if (offload) { /* flat_param_to(device) */
        in = t_new2(g, f->shard, 1, sd, CAT_PARAM, f->tag);
        kern_init_uniform(g, in, -0.02f, 0.02f, f->tag);
    }
    f->full = t_new2(g, f->shard * world(g), 1, gd, CAT_PARAM, f->tag);
    t_release(g, in);
    for (int32_t i = f->first; i <= f->last; i++) {
        if (!in_unit(g, i, u))
            continue;
        struct tensor *t = &g->t[g->params[i].data]; /* a view of the flat buffer */
        t->unbacked = false;
        t->id = g->t[f->full].id;
        t->bytes = 0;
    }
}

void fsdp1_reshard(struct gen *g, int32_t u)
{
    struct fsdp1_unit *f = &g->par->fu[u];
    for (int32_t i = f->first; i >= 0 && i <= f->last; i++)
        if (in_unit(g, i, u))
            g->t[g->params[i].data].unbacked = true;
    t_release(g, f->full);
    f->full = TNONE;
}

tref fsdp1_flat_grad(struct gen *g, int32_t u)
{
    struct fsdp1_unit *f = &g->par->fu[u];
    tref flat = TNONE;
    for (int32_t i = f->first; i >= 0 && i <= f->last; i++) {
        struct param *p = &g->params[i];
        if (!in_unit(g, i, u) || p->grad == TNONE)
            continue;
        if (flat == TNONE) { /* the split's backward: torch.cat of every view's gradient */
            flat = t_new2(g, f->flat, 1, (enum dtype)g->t[p->grad].dtype, CAT_GRAD, f->tag);
            kern_fill(g, flat, 0.0f, f->tag);
        }
    }
    for (int32_t i = f->first; i <= f->last && flat != TNONE; i++) {
        struct param *p = &g->params[i];
        if (in_unit(g, i, u) && p->grad != TNONE) {
            t_release(g, p->grad);
            p->grad = TNONE;
        }
    }
    return flat;
}

/* The rest of _post_backward_hook: every step's tensor is held until the hook returns. */
void fsdp1_reduce(struct gen *g, int32_t u, tref flat)
{
    struct parallel *par = g->par;
    struct fsdp1_unit *f = &par->fu[u];
    if (flat == TNONE)
        return;
    enum dtype rd = fsdp_reduce_dtype(&g->spec), sd = g->spec.param_dtype;
    gen_hold(g, &par->held, flat);
    tref x = flat;
    if (g->t[x].dtype != rd) { /* flat_param.grad.to(reduce_dtype) */
        tref c = t_new2(g, f->flat, 1, rd, CAT_GRAD, f->tag);
        kern_cast(g, x, c, f->tag);
        gen_hold(g, &par->held, c);
        x = c;
    }
    if (f->flat != f->shard * world(g)) { /* F.pad to shard * world_size */
        x = t_new2(g, f->shard * world(g), 1, rd, CAT_GRAD, f->tag);
        kern_fill(g, x, 0.0f, f->tag);
        gen_hold(g, &par->held, x);
    }
    tref out = t_new2(g, f->shard, 1, rd, CAT_GRAD, f->tag); /* reduce_scatter_single's output */
    kern_fill(g, out, 0.0f, f->tag);
    if (rd != sd) { /* _cast_grad_to_param_dtype */
        tref c = t_new2(g, f->shard, 1, sd, CAT_GRAD, f->tag);
        kern_cast(g, out, c, f->tag);
        gen_hold(g, &par->held, out);
        out = c;
    }
    if (f->grad == TNONE) {
        f->grad = out;
    } else { /* _saved_grad_shard += the new one */
        kern_add(g, f->grad, out, f->grad, 1.0f, 1.0f, f->tag);
        gen_hold(g, &par->held, out);
    }
    gen_release_held(g, &par->held);
}

static void free_unit_grads(struct gen *g)
{
    struct parallel *par = g->par;
    for (int32_t u = 0; par->fu && u < par->nunits; u++) {
        t_release(g, par->fu[u].grad);
        par->fu[u].grad = TNONE;
    }
}

/* With cpu_offload the sharded gradients were copied to _cpu_grad; prepare_gradient_for_optim (the
 * post-backward final callback) drops the device ones. */
void fsdp1_backward_end(struct gen *g)
{
    if (g->spec.parallel.cpu_offload)
        free_unit_grads(g);
}

/* Parameter i as the optimizer sees it: its unit's FlatParameter (held by the unit's first parameter), or
 * with use_orig_params its own elements of the shard [0, shard) (rank 0's). */
void fsdp1_optimizer_view(struct gen *g, int32_t i)
{
    struct parallel *par = g->par;
    struct param *p = &g->params[i];
    int32_t u = par->sp[i].unit;
    if (u < 0)
        return;
    const struct fsdp1_unit *f = &par->fu[u];
    int64_t n = f->shard;
    if (orig_params(g)) {
        int64_t end = par->fu_off[i] + p->numel < f->shard ? par->fu_off[i] + p->numel : f->shard;
        n = end > par->fu_off[i] ? end - par->fu_off[i] : 0;
    }
    bool takes = orig_params(g) ? n > 0 && p->trainable : i == f->first;
    p->data = f->local;
    p->grad = takes ? f->grad : TNONE;
    p->dims[0] = n;
    p->dims[1] = 1;
    p->numel = n;
}

void fsdp1_zero_grad(struct gen *g)
{
    optimizer_zero_grad(g, g->spec.set_to_none); /* the .grad of what stays whole (LoRA adapters) */
    free_unit_grads(g);
}
