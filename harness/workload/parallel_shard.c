/* parallel_shard.c: sharded parameters of one rank, FSDP2 and DeepSpeed ZeRO-3.
 *
 * Each parameter lives as this rank's shard; its gathered copy is an unbacked tensor (the tensor
 * autograd saves keeps its identity, as the real unsharded parameter's storage is resized to 0),
 * allocated again when a unit is gathered and freed when it is resharded. A kernel reading a
 * gathered copy, or a node's backward naming a parameter, first runs the unit switch:
 *
 * FSDP2 (torch/distributed/fsdp/_fully_shard/_fsdp_param.py, _fsdp_collectives.py, _fsdp_param_group.py)
 * with fully_shard on every transformer block (one unit: the parameters under "...layers.N.") and on the
 * root (everything else, gathered at its first use and kept until backward ends: the root's
 * reshard_after_forward is False). A shard is dim-0 of the parameter padded to world_size rows,
 * ceil(rows / N) * cols. foreach_all_gather allocates the all-gather output (every padded shard of the
 * unit, world_size times; the input is a view of it), foreach_all_gather_copy_out the unsharded
 * parameters, and the output is freed. After a unit's forward it is resharded (reshard_after_forward),
 * and forward_prefetch units ahead (behind, in backward) are gathered with it. Its post-backward
 * (foreach_reduce) allocates the reduce-scatter input (the padded gradients), frees the unsharded
 * gradients, keeps the reduce-scattered shard as .grad and reshards. torch.optim then runs on the
 * shards (the optimizer's own rules: foreach temporaries, lazily made state).
 *
 * ZeRO-3 (deepspeed/runtime/zero/partition_parameters.py, partitioned_param_coordinator.py,
 * stage3.py): each parameter is partitioned alone, ceil(numel / N) elements (ds_tensor), except those
 * of at most stage3_param_persistence_threshold elements, kept whole (ds_persist). A unit is one
 * module: its parameters are all-gathered into buffers of ceil(numel / N) * N elements before its
 * forward and again before its backward, and released after. Before the trace is complete (the first
 * step) nothing is prefetched; then the modules after it (before it, in backward) are fetched until
 * stage3_prefetch_bucket_size elements are in flight, within stage3_max_live_parameters. Gradients go
 * through the kept bucket into the kept gradient partitions (parallel.c).
 *
 * FSDP's mixed precision and CPU offload are parallel_fsdp.c's; FSDP1's flat parameters, which share the
 * units, the unit switch and prefetch here, are parallel_fsdp1.c's.
 *
 * Modelled differently: FSDP's reduce-scatter output is one tensor per parameter, not one per unit;
 * the order of modules for ZeRO-3's prefetch is their registration order (DeepSpeed records the
 * executed order); collectives are not kernels (their time is not modelled).
 */
#include "workload/optimizer.h"
#include "workload/parallel_impl.h"

#include <stdlib.h>
#include <string.h>

static bool fsdp(const struct gen *g) /* FSDP1 or FSDP2: units of transformer blocks and the root */
{
    return parallel_fsdp(&g->spec);
}

static bool fsdp1(const struct gen *g)
{
    return g->spec.parallel.strategy == PAR_FSDP1;
}

static int64_t world(const struct gen *g)
{
    return g->spec.parallel.world_size;
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

int64_t shard_numel(const struct gen *g, const struct param *p)
{
    if (g->spec.parallel.strategy == PAR_FSDP)
        return ceil_div(p->dims[0], world(g)) * p->dims[1];
    return ceil_div(p->numel, world(g));
}

/* Elements of the gathered buffer: the unsharded parameter (FSDP), or the whole all-gather (ZeRO-3). */
static int64_t gathered_numel(const struct gen *g, const struct param *p)
{
    return g->spec.parallel.strategy == PAR_FSDP ? p->numel : ceil_div(p->numel, world(g)) * world(g);
}

/* Length of the block prefix "model.layers.12." of a tag, or 0 (the root). */
size_t block_prefix(const char *tag)
{
    for (const char *c = tag; *c; c++) {
        if (*c != '.' || c[1] < '0' || c[1] > '9')
            continue;
        const char *d = c + 1;
        while (*d >= '0' && *d <= '9')
            d++;
        if (*d == '.' || !*d)
            return (size_t)(d - tag);
    }
    return 0;
}

static int assign_units(struct gen *g, struct parallel *par)
{
    par->sp = calloc((size_t)g->nparams, sizeof *par->sp);
    par->gathered = calloc((size_t)g->nparams + 1, sizeof *par->gathered);
    if (!par->sp || !par->gathered)
        return err_set(g->e, ERR_INTERNAL, "workload: out of host memory for sharded parameters");
    int32_t unit = fsdp(g) ? 0 : -1; /* FSDP's unit 0 is the root */
    const struct param *prev = NULL;
    for (int32_t i = 0; i < g->nparams; i++) {
        const struct param *p = &g->params[i];
        struct shard_param *s = &par->sp[i];
        s->shard = s->grad = TNONE;
        if (fsdp(g)) {
            size_t n = block_prefix(p->tag);
            size_t pn = prev ? block_prefix(prev->tag) : 0;
            if (n && (!prev || pn != n || strncmp(prev->tag, p->tag, n)))
                unit++;
            s->unit = n ? unit : 0;
            if (n)
                prev = p;
        } else if (p->numel <= g->spec.parallel.param_persistence_threshold) {
            s->unit = -1;
        } else {
            if (!prev || prev->module != p->module)
                unit++;
            s->unit = unit;
            prev = p;
        }
    }
    par->nunits = unit + 1;
    par->cur = -1;
    return fsdp1(g) ? fsdp1_init(g, par) : 0;
}

void parallel_shard_loaded(struct gen *g, int32_t i)
{
    if (!parallel_shards_params(&g->spec) || g->failed)
        return;
    struct parallel *par = parallel_get(g);
    if (!par || (!par->sp && assign_units(g, par) < 0)) {
        g->failed = 1;
        return;
    }
    struct param *p = &g->params[i];
    if (fsdp1(g)) {
        fsdp1_loaded(g, i);
        return;
    }
    if (par->sp[i].unit < 0)
        return;
    tref x = p->data;
    if (!g->spec.parallel.offload_param && !g->spec.parallel.cpu_offload) { /* offload: shards in host memory */
        par->sp[i].shard = t_new2(g, shard_numel(g, p), 1, (enum dtype)g->t[x].dtype, CAT_PARAM, p->tag);
        kern_init_uniform(g, par->sp[i].shard, -0.02f, 0.02f, p->module);
    }
    g->t[x].param = i;
    t_storage_free(g, x);
    g->t[x].dtype = (uint8_t)fsdp_gather_dtype(&g->spec); /* gathered in mixed_precision's param_dtype */
}

void shard_free(struct parallel *p)
{
    free(p->sp);
    free(p->gathered);
    free(p->fu);
    free(p->fu_off);
    free(p->held.v);
}

static void gather(struct gen *g, int32_t u)
{
    struct parallel *par = g->par;
    if (u < 0 || par->gathered[u])
        return;
    par->gathered[u] = true;
    if (fsdp1(g)) {
        fsdp1_gather(g, u);
        return;
    }
    tref out = TNONE;
    if (fsdp(g)) {
        int64_t n = 0;
        enum dtype dt = fsdp_gather_dtype(&g->spec);
        fsdp2_gather_inputs(g, u);
        for (int32_t i = 0; i < g->nparams; i++)
            if (par->sp[i].unit == u)
                n += shard_numel(g, &g->params[i]) * world(g);
        out = t_new2(g, n, 1, dt, CAT_PARAM, gen_intern(g, "fsdp.all_gather_output"));
        gen_release_held(g, &par->held);
    }
    for (int32_t i = 0; i < g->nparams; i++)
        if (par->sp[i].unit == u) {
            struct param *p = &g->params[i];
            t_storage_alloc(g, p->data, (uint64_t)gathered_numel(g, p) * dtype_size(g->t[p->data].dtype));
        }
    t_release(g, out);
}

static void reshard(struct gen *g, int32_t u)
{
    struct parallel *par = g->par;
    if (u < 0 || !par->gathered[u])
        return;
    par->gathered[u] = false;
    if (fsdp1(g)) {
        fsdp1_reshard(g, u);
        return;
    }
    for (int32_t i = 0; i < g->nparams; i++)
        if (par->sp[i].unit == u)
            t_storage_free(g, g->params[i].data);
}

/* FSDP's post-backward of a unit: its gradients reduce-scattered to shards, then resharded. */
static void post_backward(struct gen *g, int32_t u)
{
    struct parallel *par = g->par;
    if (u < 0)
        return;
    if (fsdp1(g)) {
        tref flat = fsdp1_flat_grad(g, u);
        reshard(g, u);
        if (g->spec.parallel.backward_prefetch == BWD_PREFETCH_POST && u > 1) /* the next unit in backward */
            gather(g, u - 1);
        fsdp1_reduce(g, u, flat);
        return;
    }
    if (fsdp(g)) {
        int64_t n = 0;
        for (int32_t i = 0; i < g->nparams; i++)
            if (par->sp[i].unit == u && g->params[i].grad != TNONE)
                n += shard_numel(g, &g->params[i]) * world(g);
        if (n > 0) {
            enum dtype rd = fsdp_reduce_dtype(&g->spec), sd = g->spec.param_dtype;
            bool offload = g->spec.parallel.cpu_offload;
            tref in = t_new2(g, n, 1, rd, CAT_GRAD, gen_intern(g, "fsdp.reduce_scatter_input"));
            bool flat_out = rd != sd || offload; /* an output of its own, cast or copied to the host */
            for (int32_t i = 0; i < g->nparams; i++) {
                struct param *p = &g->params[i];
                if (par->sp[i].unit != u || p->grad == TNONE)
                    continue;
                t_release(g, p->grad);
                p->grad = TNONE;
                par->sp[i].reduced = true;
                if (!flat_out && par->sp[i].grad == TNONE)
                    par->sp[i].grad = t_new2(g, shard_numel(g, p), 1, sd, CAT_GRAD, p->tag);
            }
            tref out = TNONE;
            if (flat_out)
                out = t_new2(g, n / world(g), 1, rd, CAT_GRAD, gen_intern(g, "fsdp.reduce_scatter_output"));
            for (int32_t i = 0; i < g->nparams; i++) {
                struct param *p = &g->params[i];
                if (par->sp[i].reduced && flat_out && !offload && par->sp[i].grad == TNONE) {
                    par->sp[i].grad = t_new2(g, shard_numel(g, p), 1, sd, CAT_GRAD, p->tag);
                    kern_cast(g, out, par->sp[i].grad, p->tag); /* its share of the output, in the shard's dtype */
                }
                par->sp[i].reduced = false;
            }
            t_release(g, out);
            t_release(g, in);
        }
    }
    reshard(g, u);
}

/* Units prefetched with u: FSDP forward_prefetch units on; ZeRO-3 modules on, once the trace exists,
 * up to stage3_prefetch_bucket_size elements within stage3_max_live_parameters. */
static void prefetch(struct gen *g, int32_t u, int dir)
{
    struct parallel *par = g->par;
    const struct parallel_spec *ps = &g->spec.parallel;
    if (fsdp(g)) {
        int depth = fsdp1(g) && dir < 0 ? ps->backward_prefetch == BWD_PREFETCH_PRE : ps->forward_prefetch;
        for (int k = 1; k <= depth; k++)
            if (u + dir * k > 0 && u + dir * k < par->nunits)
                gather(g, u + dir * k);
        return;
    }
    if (g->opt_steps == 0)
        return;
    int64_t live = 0, ahead = 0;
    for (int32_t i = 0; i < g->nparams; i++)
        if (par->sp[i].unit >= 0 && par->gathered[par->sp[i].unit])
            live += g->params[i].numel;
    for (int32_t v = u + dir; v >= 0 && v < par->nunits && ahead < ps->prefetch_bucket_size; v += dir) {
        int64_t n = 0;
        for (int32_t i = 0; i < g->nparams; i++)
            if (par->sp[i].unit == v)
                n += g->params[i].numel;
        if (live + n > ps->max_live_parameters)
            break;
        gather(g, v);
        live += n;
        ahead += n;
    }
}

void parallel_param_use(struct gen *g, int32_t p)
{
    struct parallel *par = g->par;
    if (!par || !par->sp || g->failed)
        return;
    int32_t u = par->sp[p].unit;
    if (u < 0)
        return;
    if (u == par->cur || (fsdp(g) && u == 0)) { /* the running unit, or FSDP's root (kept gathered) */
        gather(g, u);
        return;
    }
    int32_t prev = par->cur;
    bool backward = par->in_backward; /* a checkpointed unit's recompute is part of its backward */
    par->cur = u;
    if (backward)
        post_backward(g, prev);
    else if (!fsdp(g) || g->spec.parallel.reshard_after_forward)
        reshard(g, prev);
    gather(g, u);
    prefetch(g, u, backward ? -1 : 1);
}

void shard_backward_begin(struct gen *g)
{
    struct parallel *par = g->par;
    if (!par->sp)
        return;
    for (int32_t u = fsdp(g) ? 1 : 0; u < par->nunits; u++) /* the last forward's units, resharded */
        if (!fsdp(g) || g->spec.parallel.reshard_after_forward)
            reshard(g, u);
    par->cur = -1;
    par->in_backward = true;
}

void shard_backward_end(struct gen *g)
{
    struct parallel *par = g->par;
    if (!par->sp)
        return;
    for (int32_t u = 0; u < par->nunits; u++)
        if (par->gathered[u] || (fsdp(g) && u == 0))
            post_backward(g, u);
    if (fsdp1(g))
        fsdp1_backward_end(g);
    par->cur = -1;
    par->in_backward = false;
}

/* torch.optim on the shards: each parameter stands as its shard, with its shard of the gradient. */
void shard_optimizer_step(struct gen *g)
{
    struct parallel *par = g->par;
    if (g->spec.parallel.cpu_offload) { /* torch.optim on the host's shards */
        gen_phase(g, gen_intern(g, "optimizer"));
        g->opt_steps++;
        return;
    }
    struct saved { tref data, grad; int64_t dims[2], numel; } *sv = calloc((size_t)g->nparams, sizeof *sv);
    if (!sv) {
        if (!g->failed)
            err_set(g->e, ERR_INTERNAL, "workload: out of host memory for the optimizer");
        g->failed = 1;
        return;
    }
    for (int32_t i = 0; i < g->nparams; i++) {
        struct param *p = &g->params[i];
        sv[i] = (struct saved){p->data, p->grad, {p->dims[0], p->dims[1]}, p->numel};
        if (fsdp1(g) && par->sp)
            fsdp1_optimizer_view(g, i);
        if (fsdp1(g) || !par->sp || par->sp[i].unit < 0)
            continue;
        p->data = par->sp[i].shard;
        p->grad = par->sp[i].grad;
        p->dims[0] = shard_numel(g, p);
        p->dims[1] = 1;
        p->numel = p->dims[0];
    }
    optimizer_step(g);
    for (int32_t i = 0; i < g->nparams; i++) {
        struct param *p = &g->params[i];
        p->data = sv[i].data;
        p->grad = sv[i].grad;
        p->dims[0] = sv[i].dims[0];
        p->dims[1] = sv[i].dims[1];
        p->numel = sv[i].numel;
    }
    free(sv);
}

void shard_zero_grad(struct gen *g)
{
    struct parallel *par = g->par;
    if (fsdp1(g))
        fsdp1_zero_grad(g);
    for (int32_t i = 0; par->sp && i < g->nparams; i++) {
        t_release(g, par->sp[i].grad);
        par->sp[i].grad = TNONE;
    }
}
