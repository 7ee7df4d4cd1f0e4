/* parallel_tensor.c: one rank of Megatron-style tensor parallelism of a decoder (job.parallel.tensor_parallel),
 * with sequence parallelism (sequence_parallel), as megatron/core/tensor_parallel/layers.py, mappings.py and
 * cross_entropy.py allocate it.
 *
 * Sharding (layers.py): q/k/v (or GPT-2's fused qkv), gate/up and the LM head are ColumnParallelLinear, their
 * output features divided over t ranks (heads, KV heads, intermediate and vocabulary / t); o and down are
 * RowParallelLinear, their input features divided, their partial outputs all-reduced in place
 * (mappings.py _reduce: all_reduce(input_) and the input returned; the backward's all-reduce of the
 * column-parallel inputs' gradients is in place too); norms and the row-parallel biases are replicated. The
 * embedding is VocabParallelEmbedding of vocabulary / t rows: the mask of ids outside them and the masked ids
 * (input_.clone() - start, which the lookup saves), and output_parallel[input_mask, :] = 0.0, whose backward
 * keeps the mask and zeroes a copy of the gradient. The vocabulary is padded first, as Megatron's
 * tokenizer does (_vocab_size_with_padding: a multiple of make_vocab_size_divisible_by (128) * t). The rank's
 * model is the decoder with those dimensions; world_size, with a strategy, counts tensor x pipeline x
 * data-parallel ranks (Megatron's parallel_state.py initialize_model_parallel: data_parallel_size =
 * world_size / (tp x pp x cp)), and the data-parallel code runs on the world_size / (t x stages) group.
 *
 * Sequence parallel (mappings.py, layers.py LinearWithGradAccumulationAndAsyncCommunication): norms, dropout
 * and residuals hold seq_len / t tokens. Before a column-parallel linear the sequence is all-gathered into
 * Megatron's global memory buffer ("mpu", kept and grown, never freed), which the linear reads; autograd saves
 * the rank's shard, not the gathered copy, and the backward gathers again into the same buffer, then
 * reduce-scatters the input gradient into a new seq_len / t tensor (sub_grad_input). Frozen weights (LoRA) take
 * linear_with_frozen_weight: gather_from_sequence_parallel_region into a new tensor, nothing saved for it, the
 * gradient reduce-scattered. After a row-parallel
 * linear the output is reduce-scattered into a new seq_len / t tensor (its backward all-gathers a new full
 * one). The embedding output is split to this rank's tokens (the reduce-scatter or clone of
 * LanguageModelEmbedding).
 *
 * The loss is vocab_parallel_cross_entropy (cross_entropy.py): logits.float() (a new fp32 copy of the
 * rank's [tokens, vocabulary / t], the logits themselves when fp32), the max and its indices, the target
 * mask and masked targets, the predicted logits, the exp, sum and division in place; saved are the fp32
 * softmax, the mask and the masked targets; the backward edits the softmax in place and returns it, and
 * the engine casts it to the logits' dtype.
 *
 * Modelled differently: oomlab runs Hugging Face's decoder in [batch, seq, hidden] (Megatron: [seq, batch,
 * hidden]; the same sizes) with its own tensors (e.g. its KV cache in training, q/k/v as three linears,
 * inputs_embeds kept until the forward returns); collectives are not kernels (their time is not modelled);
 * NCCL's own buffers are outside the caching allocator; a gathered sequence of another shape than the
 * buffer's takes its own allocation (Megatron views a large enough buffer).
 */
#include "workload/parallel_tensor.h"
#include "workload/parallel_impl.h"

#include <string.h>

#define VOCAB_DIVISIBLE_BY 128 /* Megatron's --make-vocab-size-divisible-by default */

static int tp(const struct job_spec *s)
{
    return s->parallel.tensor_parallel > 1 ? s->parallel.tensor_parallel : 1;
}

int tensor_parallel_check(const struct job_spec *s, struct err *e)
{
    const struct parallel_spec *p = &s->parallel;
    const struct model_spec *m = &s->model;
    int t = p->tensor_parallel;
    if (t < 1)
        return err_set(e, ERR_INPUT, "job.parallel.tensor_parallel: must be at least 1 (got %d)", t);
    if (t == 1) /* Megatron turns sequence parallelism off without tensor parallelism (arguments.py) */
        return 0;
    const char *k = "job.parallel.tensor_parallel";
    if (s->kind != JOB_TRAIN)
        return err_set(e, ERR_INPUT, "%s: modelled for training jobs (job.kind train)", k);
    if (m->family != FAMILY_DECODER)
        return err_set(e, ERR_INPUT, "%s: modelled for decoder-only transformers (model.family decoder)", k);
    if (m->experts)
        return err_set(e, ERR_INPUT, "%s: not modelled with a mixture of experts (model.experts)", k);
    if (s->quant.type != QUANT_NONE)
        return err_set(e, ERR_INPUT, "%s: not modelled with quantized weights (quantization)", k);
    if (s->nextras > 0)
        return err_set(e, ERR_INPUT, "%s: modelled without extras", k);
    if (spec_has_fix(s, FIX_FUSED_LINEAR_CROSS_ENTROPY))
        return err_set(e, ERR_INPUT, "%s: Megatron's vocab-parallel cross-entropy is the loss; the "
                                     "fused_linear_cross_entropy fix is not modelled with it", k);
    if (m->heads % t)
        return err_set(e, ERR_INPUT, "%s: %d does not divide model.heads (%d): each rank takes heads / %d", k, t,
                       m->heads, t);
    if (m->kv_heads % t)
        return err_set(e, ERR_INPUT, "%s: %d does not divide model.kv_heads (%d): each rank takes KV heads / %d",
                       k, t, m->kv_heads, t);
    if (m->ffn % t)
        return err_set(e, ERR_INPUT, "%s: %d does not divide model.ffn (%d)", k, t, m->ffn);
    if (p->sequence_parallel && s->seq_len % t)
        return err_set(e, ERR_INPUT, "job.parallel.sequence_parallel: seq_len %d is not a multiple of "
                                     "tensor_parallel %d", s->seq_len, t);
    return 0;
}

int model_parallel_ranks(const struct job_spec *s)
{
    return tp(s) * (s->parallel.pipeline_parallel > 1 ? s->parallel.pipeline_parallel : 1);
}

int model_parallel_world_check(const struct job_spec *s, struct err *e)
{
    const struct parallel_spec *p = &s->parallel;
    int u = model_parallel_ranks(s), w = p->world_size;
    if (u == 1)
        return 0;
    const char *what = tp(s) == 1 ? "pipeline_parallel"
                     : u == tp(s) ? "tensor_parallel"
                                  : "tensor_parallel x pipeline_parallel";
    if (p->strategy == PAR_NONE && w != 1 && w != u)
        return err_set(e, ERR_INPUT, "job.parallel.world_size: %d ranks with %s %d leave %d data-parallel ranks; "
                       "give job.parallel.strategy for them", w, what, u, w / u);
    if (p->strategy != PAR_NONE && w % u)
        return err_set(e, ERR_INPUT, "job.parallel.world_size: %d is not a multiple of %s %d (world_size counts "
                       "tensor x pipeline x data-parallel ranks)", w, what, u);
    return 0;
}

int64_t tensor_parallel_vocab(int64_t vocab, int t)
{
    int64_t multiple = (int64_t)VOCAB_DIVISIBLE_BY * t;
    return (vocab + multiple - 1) / multiple * multiple / t;
}

void tensor_parallel_shard(struct job_spec *s)
{
    if (s->parallel.strategy != PAR_NONE) /* the data-parallel group of this rank */
        s->parallel.world_size /= model_parallel_ranks(s);
    int t = tp(s);
    if (t == 1)
        return;
    struct model_spec *m = &s->model;
    m->heads /= t;
    m->kv_heads /= t;
    m->ffn /= t;
    m->vocab = (int)tensor_parallel_vocab(m->vocab, t);
}

static bool tp_on(const struct gen *g)
{
    return tp(&g->spec) > 1;
}

bool tp_sequence_parallel(const struct gen *g)
{
    return tp_on(g) && g->spec.parallel.sequence_parallel && g->mode == GEN_RUN;
}

bool tp_vocab_loss(const struct gen *g)
{
    return tp_on(g);
}

/* [B, S, H] -> [B, S / t, H] or back (along dims[1]) */
static void seq_dims(const struct gen *g, tref x, int64_t *d, bool shard)
{
    memcpy(d, g->t[x].dims, sizeof(int64_t) * TMAX_DIMS);
    d[1] = shard ? d[1] / tp(&g->spec) : d[1] * tp(&g->spec);
}

/* A new tensor of x's sequence split (or gathered), recorded so its backward gathers (splits) again. */
static tref seq_new(struct gen *g, tref x, bool shard, enum node_kind kind, const char *leaf, tref saved)
{
    int64_t d[TMAX_DIMS];
    seq_dims(g, x, d, shard);
    const char *tag = gen_tag(g, leaf);
    tref y = t_new(g, d, g->t[x].ndim, (enum dtype)g->t[x].dtype, CAT_ACTIVATION, tag);
    if (nn_records(g, t_rg(g, x))) {
        struct node *n = tape_push(g, kind, y, tag);
        if (n) {
            node_input(g, n, 0, x);
            if (saved != TNONE)
                node_save(g, n, 0, saved);
        }
    }
    return y;
}

tref tp_sequence_scatter(struct gen *g, tref x)
{
    if (!tp_sequence_parallel(g))
        return t_ref(g, x);
    return seq_new(g, x, true, N_TP_SPLIT, "sequence_parallel_scatter", TNONE);
}

tref tp_row_output(struct gen *g, tref y)
{
    if (!tp_sequence_parallel(g))
        return y; /* all-reduced in place */
    tref o = seq_new(g, y, true, N_TP_SPLIT, "reduce_scatter", TNONE);
    t_release(g, y);
    return o;
}

/* GlobalMemoryBuffer.get_tensor(shape, dtype, "mpu") (parallel_state.py): kept, replaced when too small. */
static tref gather_buffer(struct gen *g, const int64_t *d, int nd, enum dtype dt)
{
    struct parallel *p = parallel_get(g);
    if (!p)
        return TNONE;
    const char *tag = gen_intern(g, "mpu.global_memory_buffer");
    tref b = p->tp_buffer;
    if (b != TNONE && g->t[b].dtype == dt && g->t[b].ndim == nd && !memcmp(g->t[b].dims, d, sizeof(int64_t) * (size_t)nd))
        return t_ref(g, b);
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= d[i];
    if (b != TNONE && (int64_t)g->t[b].bytes >= n * dtype_size(dt)) /* another shape: its own tensor */
        return t_new(g, d, nd, dt, CAT_OTHER, tag);
    t_release(g, b);
    p->tp_buffer = t_new(g, d, nd, dt, CAT_OTHER, tag);
    return t_ref(g, p->tp_buffer);
}

tref tp_column_input(struct gen *g, tref x)
{
    if (!tp_sequence_parallel(g))
        return t_ref(g, x);
    if (g->spec.trainable != TRAIN_FULL) /* linear_with_frozen_weight: gather_from_sequence_parallel_region */
        return seq_new(g, x, false, N_TP_GATHER, "sequence_parallel_gather", TNONE);
    int64_t d[TMAX_DIMS];
    seq_dims(g, x, d, false);
    tref y = gather_buffer(g, d, g->t[x].ndim, (enum dtype)g->t[x].dtype);
    if (y == TNONE)
        return TNONE;
    g->t[y].requires_grad = false;
    if (nn_records(g, t_rg(g, x))) {
        struct node *n = tape_push(g, N_TP_GATHER, y, gen_tag(g, "sequence_parallel_gather"));
        if (n) {
            node_input(g, n, 0, x);
            node_save(g, n, 0, x); /* ctx.save_for_backward(input, ...): the shard */
        }
    }
    return y;
}

static tref vec(struct gen *g, int64_t n, enum dtype dt, enum category cat, const char *tag)
{
    return t_new2(g, n, 1, dt, cat, tag);
}

/* ---- VocabParallelEmbedding ---- */

tref tp_embedding_ids(struct gen *g, tref ids, int64_t rows, tref *mask)
{
    *mask = TNONE;
    if (!tp_on(g) || g->mode != GEN_RUN)
        return t_ref(g, ids);
    const char *tag = gen_tag(g, "vocab_parallel_mask");
    int64_t n = t_numel(g, ids);
    /* (input_ < start) | (input_ >= end); input_.clone() - start */
    tref lt = vec(g, n, DT_U8, CAT_TEMP, tag), ge = vec(g, n, DT_U8, CAT_TEMP, tag);
    *mask = vec(g, n, DT_U8, CAT_ACTIVATION, tag);
    t_release(g, lt);
    t_release(g, ge);
    tref clone = vec(g, n, DT_I64, CAT_TEMP, tag);
    tref masked = t_like(g, ids, DT_I64, CAT_ACTIVATION, tag);
    t_release(g, clone);
    kern_init_ids(g, masked, rows, tag);
    return masked;
}

void tp_embedding_masked(struct gen *g, tref y, tref mask)
{
    if (mask == TNONE)
        return;
    if (nn_records(g, t_rg(g, y))) { /* IndexPutBackward keeps the mask */
        struct node *n = tape_push(g, N_TP_MASK, y, gen_tag(g, "vocab_parallel_mask"));
        if (n)
            node_save(g, n, 0, mask);
    }
    t_release(g, mask);
}

/* ---- vocab_parallel_cross_entropy ---- */

tref tp_lm_loss(struct gen *g, tref logits, tref labels)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    gen_push(g, "loss");
    const char *tag = gen_tag(g, NULL);
    int64_t vt = g->t[logits].dims[g->t[logits].ndim - 1], n = t_numel(g, logits) / vt;
    tref target = t_like(g, labels, DT_I64, CAT_ACTIVATION, tag); /* labels.transpose(0, 1).contiguous() */
    kern_init_ids(g, target, vt, tag);
    /* calculate_logits_max: .float(), then torch.max's values and indices */
    int64_t d2[2] = {n, vt};
    tref lf = logits;
    if (g->t[logits].dtype != DT_F32) {
        lf = t_new(g, d2, 2, DT_F32, CAT_ACTIVATION, tag);
        kern_cast(g, logits, lf, tag);
    } else {
        t_ref(g, lf);
    }
    tref mx = vec(g, n, DT_F32, CAT_TEMP, tag), idx = vec(g, n, DT_I64, CAT_TEMP, tag);
    t_release(g, idx);
    /* calculate_predicted_logits: the mask of two comparisons, target.clone() - start, arange, the
     * predicted logits and their clone, exp in place, the sum */
    tref lt = vec(g, n, DT_U8, CAT_TEMP, tag), ge = vec(g, n, DT_U8, CAT_TEMP, tag);
    tref mask = vec(g, n, DT_U8, CAT_ACTIVATION, tag);
    t_release(g, lt);
    t_release(g, ge);
    tref clone = vec(g, n, DT_I64, CAT_TEMP, tag), masked = vec(g, n, DT_I64, CAT_ACTIVATION, tag);
    t_release(g, clone);
    kern_init_ids(g, masked, vt, tag);
    tref ar = vec(g, n, DT_I64, CAT_TEMP, tag), pred = vec(g, n, DT_F32, CAT_TEMP, tag);
    tref pred2 = vec(g, n, DT_F32, CAT_TEMP, tag);
    t_release(g, pred);
    tref sum = vec(g, n, DT_F32, CAT_TEMP, tag);
    /* calculate_cross_entropy_loss: log(sum) - predicted; the division in place. One kernel computes each
     * row's loss and log-sum-exp, the in-place pass leaves log-softmax (the softmax's size and time). */
    tref lg = vec(g, n, DT_F32, CAT_TEMP, tag), loss = vec(g, n, DT_F32, CAT_ACTIVATION, tag);
    tref ts[4] = {lf, masked, loss, sum};
    kern(g, K_CROSS_ENTROPY_FWD, DT_F32, d2, 2, ts, 4, NULL, 0, tag);
    int64_t ori[3] = {n, vt, 1};
    kern_bcast(g, K_ADD_BCAST, lf, sum, lf, ori, 1.0f, -1.0f, tag);
    t_release(g, lg);
    t_release(g, mx);
    t_release(g, ar);
    t_release(g, pred2);
    t_release(g, sum);
    /* the training loop's mean over the tokens */
    int64_t one[1] = {1}, mean[3] = {1, n, 1};
    tref out = t_new(g, one, 1, DT_F32, CAT_ACTIVATION, tag);
    kern_bcast(g, K_REDUCE_SUM, loss, TNONE, out, mean, 1.0f / (float)n, 0.0f, tag);
    t_release(g, loss);
    if (nn_records(g, t_rg(g, logits))) {
        struct node *nd = tape_push(g, N_TP_CE, out, tag);
        if (nd) {
            node_input(g, nd, 0, logits);
            node_save(g, nd, 0, lf);
            node_save(g, nd, 1, mask);
            node_save(g, nd, 2, masked);
            nd->a[0] = n;
            nd->a[1] = vt;
        }
    }
    t_release(g, lf);
    t_release(g, mask);
    t_release(g, masked);
    t_release(g, target);
    gen_pop(g);
    return out;
}

/* _VocabParallelCrossEntropy.backward: arange, 1 - target_mask.float(), the update and the scaling in place
 * on the saved softmax, which is returned as the gradient. */
static void ce_backward(struct gen *g, const struct node *n)
{
    int64_t rows = n->a[0];
    tref ar = vec(g, rows, DT_I64, CAT_TEMP, n->tag), mf = vec(g, rows, DT_F32, CAT_TEMP, n->tag);
    tref upd = vec(g, rows, DT_F32, CAT_TEMP, n->tag);
    t_release(g, mf);
    kern_fill(g, upd, 0.0f, n->tag); /* the saved rows hold log-softmax: a zero log-sum-exp recovers it */
    float scale = (g->spec.loss_scaling ? nn_loss_scale() : 1.0f) / (float)rows;
    tref ts[4] = {n->saved[0], n->saved[2], upd, n->saved[0]};
    kern(g, K_CROSS_ENTROPY_BWD, DT_F32, n->a, 2, ts, 4, &scale, 1, n->tag);
    t_release(g, ar);
    t_release(g, upd);
    grad_accumulate(g, n->in[0], t_ref(g, n->saved[0]));
}

void tp_backward(struct gen *g, const struct node *n, tref gy)
{
    switch ((enum node_kind)n->kind) {
    case N_TP_CE:
        ce_backward(g, n);
        return;
    case N_TP_GATHER: { /* the saved shard regathered into the buffer; the input gradient reduce-scattered */
        tref b = TNONE;
        if (n->saved[0] != TNONE)
            b = gather_buffer(g, g->t[gy].dims, g->t[gy].ndim, (enum dtype)g->t[n->saved[0]].dtype);
        int64_t d[TMAX_DIMS];
        seq_dims(g, gy, d, true);
        tref dx = t_new(g, d, g->t[gy].ndim, (enum dtype)g->t[gy].dtype, CAT_TEMP, n->tag);
        t_release(g, b);
        grad_accumulate(g, n->in[0], dx);
        return;
    }
    case N_TP_MASK: { /* the gradient with the masked rows zeroed: a new tensor */
        tref c = t_like(g, gy, (enum dtype)g->t[gy].dtype, CAT_TEMP, n->tag);
        kern_scale(g, gy, c, 1.0f, n->tag);
        grad_accumulate(g, n->out, c);
        return;
    }
    case N_TP_SPLIT: { /* _gather_along_first_dim: a new full tensor */
        int64_t d[TMAX_DIMS];
        seq_dims(g, gy, d, false);
        grad_accumulate(g, n->in[0], t_new(g, d, g->t[gy].ndim, (enum dtype)g->t[gy].dtype, CAT_TEMP, n->tag));
        return;
    }
    default:
        return;
    }
}
