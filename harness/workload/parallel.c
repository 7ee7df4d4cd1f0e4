/* parallel.c: one rank of data-parallel training (job.parallel), the allocations that rank makes.
 *
 * DDP (torch/nn/parallel/distributed.py, torch/csrc/distributed/c10d/reducer.cpp): full replicas. With
 * find_unused_parameters=False the Reducer is built with one bucket holding every gradient
 * (bucket_size_limits [sys.maxsize]); after the first iteration _rebuild_buckets lays them out again
 * in the order the gradients became ready, a first bucket of _DEFAULT_FIRST_BUCKET_BYTES (1 MiB) then
 * bucket_cap_mb, each closed once it reaches its limit (compute_bucket_assignment_by_size).
 * gradient_as_bucket_view=False keeps .grad apart from the buckets (gradients twice);
 * True makes .grad views of the buckets: they exist from construction and zero_grad frees nothing.
 *
 * ZeRO-1/2 (deepspeed/runtime/zero/stage_1_and_2.py, DeepSpeedZeroOptimizer): the 16-bit parameters
 * stay whole; the trainable elements, padded to a multiple of 2 * world_size
 * (nccl_start_alignment_factor), are split into world_size partitions; this rank (0) keeps the fp32
 * master of its partition (single_partition_of_fp32_groups) and Adam's exp_avg and exp_avg_sq of it,
 * created at construction by initialize_optimizer_states (a zero fp32 gradient of the partition and
 * one step). backward() allocates the contiguous-gradient bucket (ipg_buffer: reduce_bucket_size
 * elements of the parameter dtype, two with overlap_comm). Each gradient is copied into the bucket and
 * its .grad freed; a full bucket is reduced and the gradients of parameters in this rank's partition
 * copied to grads_in_partition (the summed numel of every parameter touching the partition, allocated
 * at first use). ZeRO-1 keeps the full .grad through backward and buckets them afterwards
 * (reduce_gradients) unless overlap_comm registers the hooks. The epilogue drops the buckets; step()
 * flattens the partition's gradients (16-bit), casts them to fp32, frees the 16-bit ones, updates the
 * master, frees the fp32 gradient and writes the partition back into the 16-bit parameters, which
 * all-gather in place: runtime/utils.py all_gather_dp_groups uses all_gather_into_tensor into the flat
 * 16-bit buffer (its older path's allgather_bucket_size shards are views of that buffer), so
 * allgather_bucket_size allocates nothing and is not a key.
 *
 * ZeRO-3 shares this file's partition, bucket and step code (its sharded parameters are parallel_shard.c's):
 * the partition is the sum of each parameter's ceil(numel / N), the gradient partitions and the one
 * bucket are kept from construction, and the step runs sub_group_size elements at a time.
 *
 * offload_optimizer (cpu_offload): master weights, Adam state, the gradient partitions and the step
 * live in host memory (DeepSpeedCPUAdam); the device keeps the 16-bit parameters and the buckets.
 *
 * Modelled differently: DeepSpeed's flat bit16 buffer is the per-parameter tensors it views (the same
 * bytes up to the 2 * world_size padding); the all-gathers and reductions are not kernels in the op
 * program (their time is not modelled). NCCL's own buffers are outside the caching allocator: reported apart
 * (parallel_nccl.c).
 */
#include "workload/gen.h"
#include "workload/parallel.h"
#include "workload/parallel_impl.h"
#include "workload/parallel_tensor.h"
#include "workload/parallel_pipeline.h"

#include <stdlib.h>
#include <string.h>

#define DDP_FIRST_BUCKET_BYTES (1024 * 1024) /* dist._DEFAULT_FIRST_BUCKET_BYTES */
#define NCCL_ALIGN 2                          /* nccl_start_alignment_factor */


void parallel_spec_init(struct parallel_spec *p)
{
    memset(p, 0, sizeof *p);
    p->world_size = 1;
    p->bucket_cap_bytes = 25ULL * 1024 * 1024;
    p->reduce_bucket_size = 500000000;
    p->contiguous_gradients = true;
    p->prefetch_bucket_size = 50000000;
    p->max_live_parameters = 1000000000;
    p->param_persistence_threshold = 100000;
    p->sub_group_size = 1000000000;
    p->reshard_after_forward = true;
    p->forward_prefetch = 1;
    p->tensor_parallel = 1;
    p->backward_prefetch = BWD_PREFETCH_PRE;
    p->nccl_channels = 2;
    p->nccl_buffsize = 4ULL * 1024 * 1024;
    p->nccl_transport = NCCL_P2P;
    p->pipeline_parallel = 1;
    p->micro_batches = 1;
}

int parallel_spec_check(const struct job_spec *s, struct err *e)
{
    const struct parallel_spec *p = &s->parallel;
    if (tensor_parallel_check(s, e) < 0 || pipeline_spec_check(s, e) < 0 || model_parallel_world_check(s, e) < 0)
        return -1;
    if (p->strategy == PAR_NONE)
        return 0;
    if (fsdp_spec_check(s, e) < 0)
        return -1;
    if (p->nccl_buffsize < 4096 || p->nccl_buffsize > (1ULL << 32))
        return err_set(e, ERR_INPUT, "parallel.nccl_buffsize: 4KiB..4GiB (got %llu B)",
                       (unsigned long long)p->nccl_buffsize);
    if (p->world_size < 1)
        return err_set(e, ERR_INPUT, "parallel.world_size: must be at least 1 (got %d)", p->world_size);
    bool zero = parallel_zero(s);
    if (s->kind != JOB_TRAIN)
        return err_set(e, ERR_INPUT, "parallel.strategy: %s is modelled for training jobs (job.kind train)",
                       parallel_strategy_name(p->strategy));
    if (s->quant.type != QUANT_NONE && p->strategy != PAR_DDP)
        return err_set(e, ERR_INPUT, "parallel.strategy: %s is not modelled with quantized weights (quantization)",
                       parallel_strategy_name(p->strategy));
    if (parallel_fsdp(s) && s->master_weights)
        return err_set(e, ERR_INPUT, "parallel.strategy: fsdp keeps its sharded parameters in param_dtype; "
                                     "master_weights is not modelled with it");
    if (parallel_shards_params(s) && s->nextras > 0)
        return err_set(e, ERR_INPUT, "parallel.strategy: %s is modelled without extras", parallel_strategy_name(p->strategy));
    if (zero && s->optimizer != OPT_ADAMW)
        return err_set(e, ERR_INPUT, "parallel.strategy: %s is modelled with DeepSpeed's Adam (optimizer adamw), not %s",
                       parallel_strategy_name(p->strategy), optimizer_name(s->optimizer));
    if (zero && s->trainable != TRAIN_FULL)
        return err_set(e, ERR_INPUT, "parallel.strategy: %s is modelled for full training (trainable full)",
                       parallel_strategy_name(p->strategy));
    if (p->offload_optimizer && !zero)
        return err_set(e, ERR_INPUT, "parallel.offload_optimizer: only with zero1, zero2 or zero3");
    if (p->offload_param && p->strategy != PAR_ZERO3)
        return err_set(e, ERR_INPUT, "parallel.offload_param: only with zero3");
    if (zero && p->reduce_bucket_size < 1)
        return err_set(e, ERR_INPUT, "parallel.reduce_bucket_size: must be at least 1");
    return 0;
}

bool parallel_zero(const struct job_spec *s)
{
    enum parallel_strategy st = s->parallel.strategy;
    return st == PAR_ZERO1 || st == PAR_ZERO2 || st == PAR_ZERO3;
}

bool parallel_shards_params(const struct job_spec *s)
{
    return s->parallel.strategy == PAR_ZERO3 || parallel_fsdp(s);
}

static bool zero3(const struct gen *g)
{
    return g->spec.parallel.strategy == PAR_ZERO3;
}

static int64_t round_up(int64_t x, int64_t m)
{
    return (x + m - 1) / m * m;
}

struct zero_sizes zero_partition(const int64_t *numel, int32_t n, int world)
{
    struct zero_sizes z = {0};
    for (int32_t i = 0; i < n; i++)
        z.total += numel[i];
    z.padded = round_up(z.total, (int64_t)NCCL_ALIGN * world);
    z.part = z.padded / world;
    int64_t at = 0;
    for (int32_t i = 0; i < n && at < z.part; i++) { /* rank 0's partition is [0, part) */
        z.in_part += numel[i];
        at += numel[i];
    }
    return z;
}

int64_t ds_zero2_gpu_bytes(int64_t total_params, int gpus, bool cpu_offload)
{
    if (cpu_offload)
        return 2 * total_params;
    return 4 * total_params + (int64_t)(16.0 * (double)total_params / gpus);
}

int64_t ds_zero2_cpu_bytes(int64_t total_params, int gpus_per_node, int nodes, bool cpu_offload, double factor)
{
    int total = gpus_per_node * nodes;
    if (cpu_offload)
        return (int64_t)((double)total_params * (4 * total > 16 ? 4 * total : 16) * factor);
    return (int64_t)((double)total_params * 4 * gpus_per_node * factor);
}

int64_t ds_zero3_gpu_bytes(int64_t total_params, int64_t largest_layer_params, int gpus, bool offload_optimizer,
                           bool offload_params)
{
    int64_t largest = 4 * largest_layer_params;
    if (offload_optimizer)
        return offload_params ? largest : largest + (int64_t)(2.0 * (double)total_params / gpus);
    return largest + (int64_t)(18.0 * (double)total_params / gpus);
}

struct parallel *parallel_get(struct gen *g)
{
    if (g->par)
        return g->par;
    struct parallel *p = calloc(1, sizeof *p);
    if (!p) {
        if (!g->failed)
            err_set(g->e, ERR_INTERNAL, "workload: out of host memory for job.parallel");
        g->failed = 1;
        return NULL;
    }
    p->master = p->m = p->v = p->grads_part = TNONE;
    p->ipg[0] = p->ipg[1] = TNONE;
    p->tp_buffer = TNONE;
    g->par = p;
    return p;
}

void parallel_free(struct gen *g)
{
    if (g->par) {
        free(g->par->buckets);
        shard_free(g->par);
    }
    free(g->par);
    g->par = NULL;
}

static enum dtype grad_dtype(const struct gen *g)
{
    return g->spec.param_dtype;
}

/* ---- DDP ---- */

static bool ddp_view(const struct gen *g)
{
    return g->spec.parallel.gradient_as_bucket_view;
}

static int ddp_add_bucket(struct gen *g, int64_t numel)
{
    struct parallel *p = g->par;
    tref *nb = realloc(p->buckets, (size_t)(p->nbuckets + 1) * sizeof *nb);
    if (!nb) {
        if (!g->failed)
            err_set(g->e, ERR_INTERNAL, "workload: out of host memory for DDP buckets");
        g->failed = 1;
        return -1;
    }
    p->buckets = nb;
    tref b = t_new2(g, numel, 1, grad_dtype(g), CAT_GRAD, gen_intern(g, "ddp.bucket"));
    kern_fill(g, b, 0.0f, gen_intern(g, "ddp.bucket"));
    p->buckets[p->nbuckets++] = b;
    return 0;
}

/* Reducer construction: .grad views of the buckets (one tensor per parameter here), or one bucket of
 * every gradient. */
static void ddp_setup(struct gen *g)
{
    int64_t all = 0;
    for (int32_t i = 0; i < g->nparams; i++) {
        struct param *pr = &g->params[i];
        if (!pr->trainable)
            continue;
        if (ddp_view(g)) {
            pr->grad = t_new2(g, pr->dims[0], pr->dims[1], grad_dtype(g), CAT_GRAD, pr->tag);
            kern_fill(g, pr->grad, 0.0f, pr->module);
        }
        all += pr->numel;
    }
    if (!ddp_view(g) && all > 0)
        ddp_add_bucket(g, all);
}

/* _rebuild_buckets before the second forward: gradients in the order they became ready (the reverse
 * of registration), a bucket closed once it reaches its limit. */
static void ddp_rebuild(struct gen *g)
{
    struct parallel *p = g->par;
    p->rebuilt = true;
    if (ddp_view(g))
        return;
    for (int i = 0; i < p->nbuckets; i++)
        t_release(g, p->buckets[i]);
    p->nbuckets = 0;
    int64_t size = 0, elems = 0, limit = DDP_FIRST_BUCKET_BYTES, es = dtype_size(grad_dtype(g));
    for (int32_t i = g->nparams - 1; i >= 0 && !g->failed; i--) {
        if (!g->params[i].trainable)
            continue;
        elems += g->params[i].numel;
        size += g->params[i].numel * es;
        if (size >= limit) {
            ddp_add_bucket(g, elems);
            size = elems = 0;
            limit = (int64_t)g->spec.parallel.bucket_cap_bytes;
        }
    }
    if (elems > 0)
        ddp_add_bucket(g, elems);
}

/* ---- ZeRO ---- */

static void zero_flush(struct gen *g);
static void zero_backward_begin(struct gen *g);

static int zero_setup(struct gen *g)
{
    struct parallel *p = g->par;
    int64_t *numel = malloc((size_t)(g->nparams ? g->nparams : 1) * sizeof *numel);
    if (!numel)
        return err_set(g->e, ERR_INTERNAL, "workload: out of host memory for job.parallel");
    int32_t n = 0;
    int world = g->spec.parallel.world_size;
    int64_t s3 = 0; /* ZeRO-3: each parameter's own ds_tensor, ceil(numel / world) (partition_parameters.py) */
    for (int32_t i = 0; i < g->nparams; i++)
        if (g->params[i].trainable) {
            numel[n++] = g->params[i].numel;
            s3 += (g->params[i].numel + world - 1) / world;
        }
    struct zero_sizes z = zero_partition(numel, n, world);
    free(numel);
    p->part = zero3(g) ? s3 : z.part;
    p->in_part = zero3(g) ? s3 : z.in_part;
    const char *tag = gen_intern(g, "zero.partition");
    if (g->spec.parallel.offload_optimizer) { /* DeepSpeedCPUAdam: all of it in host memory */
        if (zero3(g))
            zero_backward_begin(g);
        return 0;
    }
    p->master = t_new2(g, p->part, 1, DT_F32, CAT_OPTIMIZER_STATE, tag);
    kern_init_uniform(g, p->master, -0.02f, 0.02f, tag); /* the partition's weights, cloned to fp32 */
    /* initialize_optimizer_states: a zero fp32 gradient of the partition (of the largest sub-group with
     * ZeRO-3), one step, the gradient freed */
    int64_t sub = zero3(g) && g->spec.parallel.sub_group_size < p->part ? g->spec.parallel.sub_group_size : p->part;
    tref grad = t_new2(g, sub, 1, DT_F32, CAT_TEMP, tag);
    kern_fill(g, grad, 0.0f, tag);
    p->m = t_new2(g, p->part, 1, DT_F32, CAT_OPTIMIZER_STATE, tag);
    kern_fill(g, p->m, 0.0f, tag);
    p->v = t_new2(g, p->part, 1, DT_F32, CAT_OPTIMIZER_STATE, tag);
    kern_fill(g, p->v, 0.0f, tag);
    t_release(g, grad);
    if (zero3(g)) { /* stage3.py: the gradient partitions' flat buffer and the one bucket, both kept */
        zero_flush(g);
        zero_backward_begin(g);
    }
    return 0;
}

static void zero_flush(struct gen *g)
{
    struct parallel *p = g->par;
    if ((p->ipg_fill > 0 || zero3(g)) && p->grads_part == TNONE && !g->spec.parallel.offload_optimizer) { /* copy_grads_in_partition, first use */
        p->grads_part = t_new2(g, p->in_part, 1, grad_dtype(g), CAT_GRAD, gen_intern(g, "zero.grads_in_partition"));
        kern_fill(g, p->grads_part, 0.0f, gen_intern(g, "zero.grads_in_partition"));
    }
    p->ipg_fill = 0;
}

/* One parameter's gradient into the bucket (reduce_independent_p_g_buckets_and_remove_grads). */
static void zero_take_grad(struct gen *g, int32_t i)
{
    struct parallel *p = g->par;
    struct param *pr = &g->params[i];
    if (pr->grad == TNONE)
        return;
    if (p->ipg_fill + pr->numel > g->spec.parallel.reduce_bucket_size)
        zero_flush(g);
    p->ipg_fill += pr->numel;
    t_release(g, pr->grad); /* copied into the bucket (or reduced from itself when larger than it) */
    pr->grad = TNONE;
}

static bool zero_hooks(const struct gen *g)
{
    return g->spec.parallel.strategy != PAR_ZERO1 || g->spec.parallel.overlap_comm;
}

static void zero_backward_begin(struct gen *g)
{
    struct parallel *p = g->par;
    if (!g->spec.parallel.contiguous_gradients)
        return;
    const char *tag = gen_intern(g, "zero.ipg_buffer");
    for (int k = 0; k < (g->spec.parallel.overlap_comm && !zero3(g) ? 2 : 1); k++)
        p->ipg[k] = t_new2(g, g->spec.parallel.reduce_bucket_size, 1, grad_dtype(g), CAT_GRAD, tag);
}

static void zero_backward_end(struct gen *g)
{
    struct parallel *p = g->par;
    if (!zero_hooks(g)) /* reduce_gradients: every .grad through the bucket now */
        for (int32_t i = 0; i < g->nparams && !g->failed; i++)
            if (g->params[i].trainable)
                zero_take_grad(g, i);
    zero_flush(g);
    if (zero3(g))
        return;
    for (int k = 0; k < 2; k++) { /* _release_ipg_buffers */
        t_release(g, p->ipg[k]);
        p->ipg[k] = TNONE;
    }
}

/* One optimizer (sub-)group of n elements: its gradients flattened (16-bit), cast to fp32, the update. */
static void zero_step_group(struct gen *g, int64_t n)
{
    struct parallel *p = g->par;
    const char *tag = gen_intern(g, "zero.partition");
    tref flat = t_new2(g, n, 1, grad_dtype(g), CAT_TEMP, tag); /* flatten_dense_tensors_aligned */
    kern_fill(g, flat, 0.0f, tag);
    tref g32 = flat;
    if (grad_dtype(g) != DT_F32) {
        g32 = t_new2(g, n, 1, DT_F32, CAT_TEMP, tag);
        kern_cast(g, flat, g32, tag);
        t_release(g, flat);
    }
    if (!zero3(g)) { /* averaged_gradients = None (ZeRO-3 keeps its gradient buffer) */
        t_release(g, p->grads_part);
        p->grads_part = TNONE;
    }
    /* the update of the group's share of the master weights and state (the first n elements stand for it) */
    float adam[4] = {1e-3f, 0.9f, 0.999f, 0.01f};
    int64_t d[4] = {n, g->opt_steps, 0, 1};
    tref ts[4] = {p->master, g32, p->m, p->v};
    kern(g, K_ADAMW, DT_F32, d, 4, ts, 4, adam, 4, tag);
    t_release(g, g32);
}

static void zero_step(struct gen *g)
{
    gen_phase(g, gen_intern(g, "optimizer"));
    g->opt_steps++;
    if (g->spec.parallel.offload_optimizer) /* the step runs on the CPU; the copy back is in place */
        return;
    int64_t sub = zero3(g) ? g->spec.parallel.sub_group_size : g->par->part;
    for (int64_t at = 0; at < g->par->part && !g->failed; at += sub) /* stage3.py: one sub-group at a time */
        zero_step_group(g, g->par->part - at < sub ? g->par->part - at : sub);
}

/* ---- hooks ---- */

int parallel_setup(struct gen *g)
{
    if (g->spec.parallel.strategy == PAR_NONE)
        return 0;
    if (!parallel_get(g))
        return -1;
    if (parallel_fsdp(&g->spec))
        return 0;
    if (g->spec.parallel.strategy == PAR_DDP) {
        ddp_setup(g);
        return g->failed ? -1 : 0;
    }
    if (zero_setup(g) < 0) {
        g->failed = 1;
        return -1;
    }
    return 0;
}

void parallel_forward_begin(struct gen *g)
{
    if (g->par && g->spec.parallel.strategy == PAR_DDP && g->opt_steps > 0 && !g->par->rebuilt)
        ddp_rebuild(g);
}

void parallel_backward_begin(struct gen *g)
{
    if (!g->par)
        return;
    shard_backward_begin(g);
    if (parallel_zero(&g->spec) && !zero3(g))
        zero_backward_begin(g);
}

void parallel_grad_ready(struct gen *g, int32_t p)
{
    if (g->par && parallel_zero(&g->spec) && zero_hooks(g))
        zero_take_grad(g, p);
}

void parallel_backward_end(struct gen *g)
{
    if (!g->par)
        return;
    shard_backward_end(g);
    if (parallel_zero(&g->spec))
        zero_backward_end(g);
}

bool parallel_optimizer_step(struct gen *g)
{
    if (!g->par)
        return false;
    if (parallel_zero(&g->spec))
        zero_step(g);
    else if (parallel_fsdp(&g->spec))
        shard_optimizer_step(g);
    else
        return false;
    return true;
}

bool parallel_zero_grad(struct gen *g)
{
    if (!g->par || g->spec.parallel.strategy == PAR_NONE) /* tensor parallel alone: the plain zero_grad */
        return false;
    if (parallel_fsdp(&g->spec))
        shard_zero_grad(g);
    /* ZeRO freed every .grad into its buckets; DDP's bucket views are never freed */
    return g->spec.parallel.strategy != PAR_DDP || ddp_view(g);
}
