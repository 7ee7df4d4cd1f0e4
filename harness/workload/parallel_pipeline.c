/* parallel_pipeline.c: one stage of pipeline-parallel training of a decoder (job.parallel.pipeline_parallel
 * P, micro_batches M, schedule), the allocations that stage's rank makes. The harness runs every stage.
 *
 * Split (Megatron-LM: megatron/training/arguments.py asserts num_layers % pipeline_model_parallel_size
 * == 0; megatron/core/transformer/transformer_block.py get_num_layers_to_build gives each stage
 * num_layers // P layers and transformer_layer.py _get_layer_offset starts stage s at s * that;
 * torch.distributed.pipelining splits where the user's split points say, here the same even split):
 * stage s runs layers [s L/P, (s+1) L/P). The first stage
 * (pre_process) also holds the embedding, the last (post_process) the final norm, the LM head and the
 * loss; with tied embeddings the last stage keeps its own copy of the word embedding as the head
 * (Megatron's shared embedding, its gradient all-reduced with the first stage's). Parameters,
 * gradients and optimizer state are those of the stage's parameters only.
 *
 * Schedules: 1F1B as Megatron-LM's forward_backward_pipelining_without_interleaving
 * (megatron/core/pipeline_parallel/schedules.py): min(P - s - 1, M) warm-up forwards, then for each
 * remaining micro-batch one forward and the backward of the oldest, then the cool-down backwards, so
 * stage s holds min(P - s, M) micro-batches' activations at once (torch.distributed.pipelining's
 * Schedule1F1B, torch/distributed/pipelining/schedules.py, warms up with min(M, P - s) forwards and
 * reaches the same count). GPipe as ScheduleGPipe: every forward, then every backward, so M at once.
 * Each micro-batch's forward and backward are the real op stream of the layers (the tape of each
 * micro-batch kept apart until its backward runs), so the allocator sees the true interleaving.
 *
 * Point-to-point (megatron/core/pipeline_parallel/p2p_communication.py): recv_forward allocates the
 * input of every stage after the first, [micro_batch, seq, hidden] in the dtype of the hidden states
 * (the parameter dtype, Megatron's pipeline_dtype = params_dtype), requiring grad, kept (input_tensors)
 * until its backward; the stage's output is kept (output_tensors) until then, or with deallocate_outputs
 * (Megatron's deallocate_pipeline_outputs, which megatron/training/arguments.py turns on) replaced by
 * one element once sent; recv_backward allocates the output's gradient on every stage before the last,
 * and the input's gradient is sent back (send_backward) and freed.
 *
 * With strategy ddp the job is one rank of world_size / stages data-parallel replicas of its stage
 * (world_size counts every rank, as Megatron's: tp x pp x dp): DDP's buckets (parallel.c) hold the
 * stage's gradients only.
 *
 * With tensor_parallel t (Megatron's 3D parallelism, one rank per stage shown): the stage's layers are
 * sharded as parallel_tensor.c shards them (the spec's heads, KV heads, intermediate and padded
 * vocabulary / t before the run), the vocab-parallel embedding on the first stage, the column-parallel
 * LM head and vocab-parallel cross-entropy on the last. The p2p buffers stay [micro_batch, seq, hidden],
 * or with sequence_parallel [micro_batch, seq / t, hidden] (schedules.py get_tensor_shapes:
 * seq_length // tensor_model_parallel_size), the stage's output being the sequence-sharded hidden
 * states. world_size is t x stages x data-parallel ranks (parallel_tensor.c model_parallel_world_check).
 *
 * Modelled differently: sends and receives are not kernels (their time is not modelled) and complete
 * at once; NCCL's own buffers are outside the caching allocator and are not modelled; the loss is not
 * divided by M (in place, no memory).
 */
#include "workload/parallel_pipeline.h"

#include "workload/gen.h"
#include "util/map_array.h"
#include "workload/models/models.h"
#include "workload/parallel_tensor.h"

#include <stdlib.h>

/* One micro-batch in flight: its tape, its received input and its output (or loss). */
struct pipe_slot {
    struct node *tape;
    int32_t ntape;
    size_t cap_tape;
    tref input, out;
    tref stub;               /* deallocate_outputs: the one element left of the sent output */
};

struct pipeline {
    int8_t *stage_of;        /* per parameter: the stage holding it */
    bool tied;               /* the last stage holds the first parameter (the word embedding) too */
    struct pipe_slot *slot;  /* per micro-batch */
    tref input;              /* the running forward's received input */
};

bool pipeline_on(const struct job_spec *s)
{
    return s->parallel.pipeline_parallel > 1;
}

struct pipe_split pipeline_split(int layers, int stages, int stage)
{
    int per = layers / stages;
    return (struct pipe_split){stage * per, (stage + 1) * per, stage == 0, stage == stages - 1};
}

int pipeline_in_flight(int stages, int stage, int micro_batches, enum pipe_schedule sch)
{
    if (sch == PIPE_GPIPE || stages - stage > micro_batches)
        return micro_batches;
    return stages - stage;
}

int pipeline_spec_check(const struct job_spec *s, struct err *e)
{
    const struct parallel_spec *p = &s->parallel;
    if (!pipeline_on(s) && p->micro_batches != 1)
        return err_set(e, ERR_INPUT, "parallel.micro_batches: only with parallel.pipeline_parallel above 1 (on one "
                                     "GPU, job.grad_accum)");
    if (!pipeline_on(s))
        return 0;
    const char *why = NULL;
    if (s->kind != JOB_TRAIN)
        why = "training jobs (job.kind train)";
    else if (s->model.family != FAMILY_DECODER)
        why = "decoder-only transformers (model.family decoder)";
    else if (p->strategy != PAR_NONE && p->strategy != PAR_DDP)
        why = "strategy none or ddp (pipeline with ZeRO or FSDP is not built)";
    else if (s->trainable != TRAIN_FULL)
        why = "full training (trainable full)";
    else if (s->quant.type != QUANT_NONE || s->nextras > 0)
        why = "unquantized weights and no extras";
    else if (s->grad_accum != 1)
        why = "grad_accum 1 (the micro-batches are parallel.micro_batches)";
    else if (s->eval.every || s->eval.before_training)
        why = "no eval within training (job.eval)";
    else if (s->robust.on_oom != ON_OOM_FAIL)
        why = "robust.on_oom fail";
    else if (spec_has_fault(s, FAULT_UNRELEASED_GRADIENTS) || spec_has_fault(s, FAULT_DEBUG_ACTIVATION_CAPTURE))
        why = "faults that keep a step's graph (unreleased_gradients, debug_activation_capture)";
    if (why)
        return err_set(e, ERR_INPUT, "parallel.pipeline_parallel: modelled for %s", why);
    if (p->pipeline_parallel > PIPE_MAX_STAGES)
        return err_set(e, ERR_INPUT, "parallel.pipeline_parallel: at most %d stages (got %d)", PIPE_MAX_STAGES,
                       p->pipeline_parallel);
    if (s->model.layers % p->pipeline_parallel)
        return err_set(e, ERR_INPUT, "parallel.pipeline_parallel: model.layers (%d) must split evenly over %d stages "
                       "(Megatron-LM: num_layers %% pipeline_model_parallel_size == 0)", s->model.layers,
                       p->pipeline_parallel);
    if (p->micro_batches < 1)
        return err_set(e, ERR_INPUT, "parallel.micro_batches: must be at least 1 (got %d)", p->micro_batches);
    if (p->pipeline_stage < 0 || p->pipeline_stage >= p->pipeline_parallel)
        return err_set(e, ERR_INTERNAL, "pipeline stage %d of %d", p->pipeline_stage, p->pipeline_parallel);
    return 0;
}

/* ---- generator ---- */

static bool run_on(const struct gen *g)
{
    return g->mode == GEN_RUN && pipeline_on(&g->spec);
}

struct pipe_split pipeline_layers(const struct gen *g, int layers)
{
    if (!run_on(g))
        return (struct pipe_split){0, layers, true, true};
    return pipeline_split(layers, g->spec.parallel.pipeline_parallel, g->spec.parallel.pipeline_stage);
}

/* The layer number in a decoder parameter's tag ("model.layers.12.mlp..." 12), or -1 (embedding, head). */
static int layer_of(const char *tag)
{
    for (const char *c = tag; *c; c++) {
        if (*c != '.' || c[1] < '0' || c[1] > '9')
            continue;
        char *end;
        long n = strtol(c + 1, &end, 10);
        if (*end == '.')
            return (int)n;
    }
    return -1;
}

/* Each parameter's stage: a layer's by the split; before the first layer (the embeddings) the first
 * stage, after the layers (final norm, head) the last. The first parameter, the word embedding, is
 * the tied head's weight too. */
static void assign_stages(struct gen *g, struct pipeline *p)
{
    int stages = g->spec.parallel.pipeline_parallel, per = g->spec.model.layers / stages;
    bool seen_layer = false;
    for (int32_t i = 0; i < g->nparams; i++) {
        int l = layer_of(g->params[i].tag);
        seen_layer |= l >= 0;
        p->stage_of[i] = (int8_t)(l >= 0 ? l / per : seen_layer ? stages - 1 : 0);
    }
    p->tied = g->spec.model.tied_embeddings;
}

void pipeline_free(struct gen *g)
{
    struct pipeline *p = g->pipe;
    if (!p)
        return;
    for (int i = 0; p->slot && i < g->spec.parallel.micro_batches; i++)
        map_array_free(p->slot[i].tape, p->slot[i].cap_tape, sizeof *p->slot[i].tape);
    free(p->stage_of);
    free(p->slot);
    free(p);
    g->pipe = NULL;
}

static struct pipeline *pipe_get(struct gen *g)
{
    if (g->pipe)
        return g->pipe;
    int m = g->spec.parallel.micro_batches;
    struct pipeline *p = g->pipe = calloc(1, sizeof *p);
    if (p) {
        p->stage_of = calloc((size_t)g->nparams + 1, sizeof *p->stage_of);
        p->slot = calloc((size_t)m, sizeof *p->slot);
    }
    if (!p || !p->stage_of || !p->slot) {
        pipeline_free(g);
        if (!g->failed)
            err_set(g->e, ERR_INTERNAL, "workload: out of host memory for the pipeline");
        g->failed = 1;
        return NULL;
    }
    p->input = TNONE;
    for (int i = 0; i < m; i++)
        p->slot[i].input = p->slot[i].out = p->slot[i].stub = TNONE;
    assign_stages(g, p);
    return p;
}

bool pipeline_holds(struct gen *g, int32_t i)
{
    if (!run_on(g))
        return true;
    struct pipeline *p = pipe_get(g);
    if (!p)
        return false;
    int s = g->spec.parallel.pipeline_stage;
    return p->stage_of[i] == s || (i == 0 && p->tied && s == g->spec.parallel.pipeline_parallel - 1);
}

tref pipeline_recv_forward(struct gen *g, int64_t b, int64_t s, int64_t hidden)
{
    struct pipeline *p = pipe_get(g);
    if (!p)
        return TNONE;
    const char *tag = gen_intern(g, "pipeline.recv_forward");
    if (tp_sequence_parallel(g)) /* get_tensor_shapes: seq_length // tensor_model_parallel_size */
        s /= g->spec.parallel.tensor_parallel;
    int64_t d[3] = {b, s, hidden};
    tref x = t_new(g, d, 3, g->act_dtype, CAT_ACTIVATION, tag);
    kern_init_uniform(g, x, -1.0f, 1.0f, tag); /* the previous stage's hidden states */
    T(g, x)->requires_grad = true;
    p->input = x;
    return t_ref(g, x);
}

static bool last_stage(const struct gen *g)
{
    return g->spec.parallel.pipeline_stage == g->spec.parallel.pipeline_parallel - 1;
}

/* The running tape handed to a micro-batch's slot, or a slot's tape back to the generator. */
static void tape_swap(struct gen *g, struct pipe_slot *sl)
{
    struct node *t = g->tape;
    int32_t n = g->ntape;
    size_t cap = g->cap_tape;
    g->tape = sl->tape;
    g->ntape = sl->ntape;
    g->cap_tape = sl->cap_tape;
    sl->tape = t;
    sl->ntape = n;
    sl->cap_tape = cap;
}

static void forward_one(struct gen *g, struct pipeline *p, int i, pipe_forward_fn fwd, void *ctx,
                        const struct batch *bt)
{
    struct pipe_slot *sl = &p->slot[i];
    p->input = TNONE;
    sl->out = fwd(g, ctx, bt); /* the last stage's loss, else sent on (send_forward) and kept */
    sl->input = p->input;
    if (g->spec.parallel.deallocate_outputs && !last_stage(g) && sl->out != TNONE) {
        /* deallocate_output_tensor: out.data = torch.empty((1,)); its grad_fn stays for the backward */
        t_storage_free(g, sl->out);
        sl->stub = t_new2(g, 1, 1, (enum dtype)T(g, sl->out)->dtype, CAT_ACTIVATION,
                          gen_intern(g, "pipeline.deallocated_output"));
    }
    tape_swap(g, sl);
}

static void backward_one(struct gen *g, struct pipeline *p, int i)
{
    struct pipe_slot *sl = &p->slot[i];
    gen_phase(g, gen_intern(g, "backward"));
    tape_swap(g, sl);
    parallel_backward_begin(g);
    if (last_stage(g)) {
        tref scaled = TNONE;
        if (g->spec.loss_scaling) /* scaler.scale(loss).backward() */
            scaled = nn_scale(g, "grad_scaler.scale", sl->out, nn_loss_scale());
        backward(g, scaled != TNONE ? scaled : sl->out, 0);
        t_release(g, scaled);
    } else { /* recv_backward: the next stage's gradient of this stage's output */
        const char *tag = gen_intern(g, "pipeline.recv_backward");
        tref gy = t_like(g, sl->out, (enum dtype)T(g, sl->out)->dtype, CAT_TEMP, tag);
        kern_init_uniform(g, gy, -1.0f, 1.0f, tag);
        backward_from(g, sl->out, gy, 0);
    }
    parallel_backward_end(g);
    if (sl->input != TNONE) { /* send_backward: the input's gradient goes back, then is freed */
        tref gx = T(g, sl->input)->grad;
        T(g, sl->input)->grad = TNONE;
        t_release(g, gx);
    }
    t_release(g, sl->input);
    t_release(g, sl->out);
    t_release(g, sl->stub);
    sl->input = sl->out = sl->stub = TNONE;
    tape_swap(g, sl); /* the slot keeps the emptied tape's array, the generator its own */
}

void pipeline_step(struct gen *g, pipe_forward_fn fwd, void *ctx, const struct batch *bt)
{
    struct pipeline *p = pipe_get(g);
    if (!p)
        return;
    const struct parallel_spec *ps = &g->spec.parallel;
    int m = ps->micro_batches;
    int warm = ps->pipeline_parallel - ps->pipeline_stage - 1; /* Megatron's num_warmup_microbatches */
    if (ps->schedule == PIPE_GPIPE || warm > m)
        warm = m;
    for (int i = 0; i < warm && !g->failed; i++)
        forward_one(g, p, i, fwd, ctx, bt);
    for (int i = 0; i < m - warm && !g->failed; i++) { /* steady state: one forward, one backward */
        forward_one(g, p, warm + i, fwd, ctx, bt);
        backward_one(g, p, i);
    }
    for (int i = m - warm; i < m && !g->failed; i++) /* cool-down */
        backward_one(g, p, i);
}
