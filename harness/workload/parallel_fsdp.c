/* parallel_fsdp.c: what FSDP1 and FSDP2 share beyond their sharding: the dtypes of mixed precision, CPU
 * offload of the parameters, and the checks of those keys.
 *
 * Mixed precision. FSDP1 (torch/distributed/fsdp/_flat_param.py, _init_param_attributes and
 * _init_param_reduce_dtypes): the shard stays in the parameter's dtype (_local_shard); a low-precision
 * shard (_mp_shard, param_dtype) is made for the all-gather and freed after it (pre_unshard /
 * post_unshard); the unsharded flat parameter (_full_param_padded) is in param_dtype; reduce_dtype
 * defaults to param_dtype when only that is set, else to the parameter's dtype. _runtime_utils.py
 * (_post_backward_hook, _reduce_grad, _cast_grad_to_param_dtype): the unsharded gradient is cast to
 * reduce_dtype, reduce-scattered, and the sharded gradient cast back to the shard's dtype.
 * FSDP2 (_fully_shard/_fsdp_param.py init_dtype_attrs; _fsdp_collectives.py _get_param_all_gather_inputs,
 * foreach_reduce, _cast_and_view_sharded_grads): the shards are cast into one flat all-gather input of
 * param_dtype; the reduce-scatter input and output are in reduce_dtype (without one, the gradients' own
 * dtype: _fsdp_param_group.py _get_reduce_dtype), the output cast to the shards' dtype. Either way the
 * gathered parameters, hence the forward's activations and the unsharded gradients, are in param_dtype.
 *
 * CPU offload (FSDP1 CPUOffload(offload_params=True): _flat_param.py _init_param_attributes pins
 * _local_shard and _cpu_grad in host memory; FSDP2 CPUOffloadPolicy: _fsdp_param.py all_gather_inputs
 * copies each shard to the device, foreach_reduce copies each sharded gradient to the host): the shards,
 * the sharded gradients and the optimizer step (torch.optim on the CPU) are in host memory; the device
 * holds the gathered units, the shards copied in for their all-gather, the unsharded gradients and the
 * reduce-scatter buffers.
 */
#include "workload/gen.h"
#include "workload/parallel.h"
#include "workload/parallel_impl.h"

static enum dtype mp_dtype(int v, enum dtype none)
{
    return v > 0 ? (enum dtype)(v - 1) : none;
}

bool parallel_fsdp(const struct job_spec *s)
{
    return s->parallel.strategy == PAR_FSDP || s->parallel.strategy == PAR_FSDP1;
}

enum dtype fsdp_gather_dtype(const struct job_spec *s)
{
    return parallel_fsdp(s) ? mp_dtype(s->parallel.mp.param_dtype, s->param_dtype) : s->param_dtype;
}

enum dtype fsdp_reduce_dtype(const struct job_spec *s)
{
    return mp_dtype(s->parallel.mp.reduce_dtype, fsdp_gather_dtype(s));
}

int fsdp_spec_check(const struct job_spec *s, struct err *e)
{
    const struct parallel_spec *p = &s->parallel;
    bool fsdp = parallel_fsdp(s), fsdp1 = p->strategy == PAR_FSDP1;
    if (!fsdp && (p->mp.param_dtype || p->mp.reduce_dtype))
        return err_set(e, ERR_INPUT, "parallel.mixed_precision: only with fsdp or fsdp1 (got %s)",
                       parallel_strategy_name(p->strategy));
    if (!fsdp && p->cpu_offload)
        return err_set(e, ERR_INPUT, "parallel.cpu_offload: only with fsdp or fsdp1 (ZeRO offloads with "
                                     "offload_optimizer and offload_param)");
    if (!fsdp1 && p->use_orig_params)
        return err_set(e, ERR_INPUT, "parallel.use_orig_params: only with fsdp1");
    if (!fsdp1 && p->backward_prefetch != BWD_PREFETCH_PRE)
        return err_set(e, ERR_INPUT, "parallel.backward_prefetch: only with fsdp1");
    if (fsdp1 && p->forward_prefetch > 1)
        return err_set(e, ERR_INPUT, "parallel.forward_prefetch: fsdp1 prefetches at most 1 unit "
                                     "(forward_prefetch=True), got %d", p->forward_prefetch);
    /* _flat_param.py _validate_tensors_to_flatten: "Must flatten tensors with uniform requires_grad when
     * use_orig_params=False" */
    if (fsdp1 && p->cpu_offload && s->trainable != TRAIN_FULL)
        return err_set(e, ERR_INPUT, "parallel.cpu_offload: fsdp1 with trainable %s is not modelled (the adapters "
                                     "are kept whole on the device)", trainable_name(s->trainable));
    if (fsdp1 && !p->use_orig_params && s->trainable != TRAIN_FULL)
        return err_set(e, ERR_INPUT, "parallel.use_orig_params: fsdp1 with trainable %s mixes frozen and trained "
                                     "parameters in one flat parameter, which needs use_orig_params: true",
                       trainable_name(s->trainable));
    return 0;
}

/* FSDP2's all-gather inputs of unit u, held in par->held until the caller has allocated the output:
 * without mixed precision or offload, views of the shards (nothing); with mixed precision, one flat
 * param_dtype copy of them (the foreach-copy path); with offload, each shard copied to the device, then
 * cast when param_dtype differs. */
void fsdp2_gather_inputs(struct gen *g, int32_t u)
{
    struct parallel *par = g->par;
    enum dtype sd = g->spec.param_dtype, gd = fsdp_gather_dtype(&g->spec);
    const char *tag = gen_intern(g, "fsdp.all_gather_input");
    if (!g->spec.parallel.cpu_offload) {
        if (gd == sd)
            return;
        int64_t numel = 0;
        for (int32_t i = 0; i < g->nparams; i++)
            if (par->sp[i].unit == u)
                numel += shard_numel(g, &g->params[i]);
        tref in = t_new2(g, numel, 1, gd, CAT_PARAM, tag);
        kern_fill(g, in, 0.0f, tag); /* torch._foreach_copy_ of the shards, cast */
        gen_hold(g, &par->held, in);
        return;
    }
    for (int32_t i = 0; i < g->nparams; i++) {
        if (par->sp[i].unit != u)
            continue;
        int64_t numel = shard_numel(g, &g->params[i]);
        tref in = t_new2(g, numel, 1, sd, CAT_PARAM, tag);
        kern_init_uniform(g, in, -0.02f, 0.02f, tag); /* the host shard's values, copied in */
        if (gd != sd) {
            tref c = t_new2(g, numel, 1, gd, CAT_PARAM, tag);
            kern_cast(g, in, c, tag);
            t_release(g, in);
            in = c;
        }
        gen_hold(g, &par->held, in);
    }
}
