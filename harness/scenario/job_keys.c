/* job_keys.c: the `job:` key table (also a variant's `job:`), with its `eval:` and `extras:` tables. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_kind.h"
#include "scenario/key_macros.h"
#include "scenario/scenario_file.h"
#include "workload/parallel_pipeline.h"

/* Enum names through int-indexed wrappers of the workload's name functions. */
static const char *optimizer_at(int i) { return optimizer_name((enum optimizer_kind)i); }
static const char *trainable_at(int i) { return trainable_name((enum trainable_kind)i); }
static const char *ema_place_at(int i) { return ema_place_name((enum ema_place)i); }
static const char *extra_role_at(int i) { return extra_role_name((enum extra_role)i); }
static const char *job_kind_at(int i) { return job_kind_name((enum job_kind)i); }
static const char *cache_kind_at(int i) { return cache_kind_name((enum cache_kind)i); }
static const char *on_oom_at(int i) { return on_oom_name((enum on_oom_policy)i); }
static const char *strategy_at(int i) { return parallel_strategy_name((enum parallel_strategy)i); }
static const char *bwd_prefetch_at(int i) { return fsdp_backward_prefetch_name((enum fsdp_backward_prefetch)i); }
static const char *nccl_transport_at(int i) { return nccl_transport_name((enum nccl_transport)i); }
static const char *mp_dtype_at(int i) { return i == 0 ? "none" : float_dtype_at(i - 1); }
static const char *schedule_at(int i) { return pipe_schedule_name((enum pipe_schedule)i); }
static const char *offload_at(int i) { return offload_name((enum offload_kind)i); }
static const char *vae_upcast_at(int i) { return vae_upcast_name((enum vae_upcast_kind)i); }

/* A scenario's job leaves the cuBLAS workspace to its device unless it sets one. */
static void job_defaults(void *obj)
{
    job_spec_init(obj);
    ((struct job_spec *)obj)->cublas_workspace_bytes = 0;
}

JOB_MEMBER_DEFAULTS(eval_defaults, struct eval_spec, eval)
JOB_MEMBER_DEFAULTS(generate_defaults, struct generate_spec, generate)
JOB_MEMBER_DEFAULTS(robust_defaults, struct robust_spec, robust)
JOB_MEMBER_DEFAULTS(diffusion_defaults, struct diffusion_spec, diffusion)

/* diffusion.attention_slicing: off, auto, max or a slice size (pipeline_utils.py enable_attention_slicing). */
static int parse_attention_slicing(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field,
                                   struct err *e)
{
    (void)k;
    char got[96], *end;
    int *slice = field;
    const char *s = v->type == YAML_SCALAR_NODE && !yaml_is_null(v) ? yaml_scalar_text(v) : NULL;
    if (s && !strcmp(s, "off"))
        *slice = 0;
    else if (s && !strcmp(s, "auto"))
        *slice = ATTN_SLICE_AUTO;
    else if (s && !strcmp(s, "max"))
        *slice = ATTN_SLICE_MAX;
    else {
        long n = s ? strtol(s, &end, 10) : 0;
        if (!s || *end || end == s || n < 1 || n > 1 << 20)
            return yaml_doc_error(c->doc, v, e, "%s must be off, auto, max or a slice size of at least 1, got %s",
                                  c->where, yaml_node_describe(v, got, sizeof got));
        *slice = (int)n;
    }
    return 0;
}

#define DS struct diffusion_spec
static const struct key diffusion_keys[] = {
    K_INT(DS, "steps", steps, 1, 100000, NULL, "num_inference_steps: UNet forwards per image batch."),
    K_BOOL(DS, "guidance", guidance,
           "Classifier-free guidance (guidance_scale > 1): the UNet runs on torch.cat([latents] * 2) against "
           "torch.cat([negative_prompt_embeds, prompt_embeds]), twice the images per forward."),
    K_INT(DS, "images_per_prompt", images_per_prompt, 1, 1 << 16, NULL,
          "num_images_per_prompt: images per prompt (the UNet batch is batch_size x this, doubled by guidance)."),
    K_INT(DS, "height", height, 0, 65536, "job.image_size", "Image height in pixels."),
    K_INT(DS, "width", width, 0, 65536, "job.image_size", "Image width in pixels."),
    K_ENUM(DS, "vae_upcast", vae_upcast, vae_upcast_at, VAE_UPCAST_COUNT,
           "The VAE decode in fp32 (the SDXL pipeline's upcast_vae when the VAE is fp16 and its config has "
           "force_upcast: its weights converted to fp32 for the decode and back after, the latents cast to "
           "fp32). `auto`: as the SDXL pipeline does with the stock SDXL VAE (a UNet with SDXL's "
           "add-embedding and an fp16 VAE); `true` or `false` say so."),
    {.name = "attention_slicing", .type = KEY_CUSTOM, FIELD(DS, attention_slicing), .parse = parse_attention_slicing,
     .doc_type = "`off`, `auto`, `max` or a slice size", .zero_means = "off",
     .help = "pipe.enable_attention_slicing(): every UNet attention runs diffusers' SlicedAttnProcessor (eager "
             "baddbmm and softmax over `slice_size` rows of batch x heads at a time, in place of SDPA); `auto` "
             "is half the heads of each attention, `max` one, a number that many rows (at most the heads)."},
    K_BOOL(DS, "vae_slicing", vae_slicing, "vae.enable_slicing(): decode the latents one image at a time."),
    K_BOOL(DS, "vae_tiling", vae_tiling,
           "vae.enable_tiling(): decode latents larger than a tile as overlapping tiles (tiled_decode), every "
           "decoded tile kept until they are blended and concatenated."),
    K_INT(DS, "tile_size", tile_size, 0, 65536, "the VAE config's sample_size: 1024 beside an SDXL UNet, else 512",
          "tile_sample_min_size: a tile's side in pixels (its latent side is this / vae_scale)."),
    {.name = "tile_overlap", .type = KEY_FLOAT, FIELD(DS, tile_overlap), .fmin = 0, .fmax = 0.5, .fopen = false,
     .help = "tile_overlap_factor: the share of a tile that overlaps its neighbour (tiles start every "
             "tile x (1 - overlap) latents)."},
    K_ENUM(DS, "offload", offload, offload_at, OFFLOAD_COUNT,
           "CPU offload: `none` (pipe.to(\"cuda\")), `model` (enable_model_cpu_offload: only the running component "
           "(text encoder, UNet, VAE) on the device, the previous one moved back to the CPU when the next one "
           "starts) or `sequential` (enable_sequential_cpu_offload: each leaf module's weights copied to the device "
           "when it runs and dropped after)."),
    K_BOOL(DS, "tiny_autoencoder", tiny_autoencoder,
           "Decode with AutoencoderTiny (TAESD, or TAESDXL beside an SDXL UNet: madebyollin/taesd) instead of "
           "the KL VAE extra, which is then not loaded."),
};
#undef DS

static const struct key_table diffusion_table = {
    .name = "job.diffusion",
    .help = "A diffusers text-to-image pipeline call (`job.kind: diffusion`), once per job step on `batch_size` "
            "prompts under torch.no_grad: the text encoder extras encode the prompts (phase encode_prompt), the "
            "UNet (`model`, weights in `load_dtype`) denoises `steps` times (denoise), the VAE extra decodes "
            "(decode).",
    .keys = diffusion_keys, .nkeys = COUNT(diffusion_keys), .obj_size = sizeof(struct diffusion_spec),
    .init = diffusion_defaults,
};

static void extra_defaults(void *obj)
{
    struct extra_spec *x = obj;
    memset(x, 0, sizeof *x);
    x->dtype = DT_F32;
    x->on_device = true;
}

#define EV struct eval_spec
static const struct key eval_keys[] = {
    K_INT(EV, "every", every, 0, INT_MAX, "never", "Evaluate after every N optimizer steps."),
    K_BOOL(EV, "before_training", before_training, "Evaluate once before the first step."),
    K_INT(EV, "batch_size", batch, 0, 1 << 20, "the training batch", "Eval batch size."),
    K_INT(EV, "batches", batches, 1, 1 << 20, NULL, "Batches per eval."),
    K_INT(EV, "sampling_steps", sampling_steps, 0, 100000, "one no_grad forward",
          "Diffusion: denoising steps per sample batch."),
    K_BOOL(EV, "vae_decode", vae_decode, "Decode the generated latents with the VAE extra."),
};
#undef EV

static const struct key_table eval_table = {
    .name = "job.eval",
    .help = "What an evaluation does and when it runs.",
    .keys = eval_keys, .nkeys = COUNT(eval_keys), .obj_size = sizeof(struct eval_spec), .init = eval_defaults,
};

#define GS struct generate_spec
static const struct key generate_keys[] = {
    K_INT(GS, "prompt_len", prompt_len, 1, BIG, NULL, "Tokens per prompt: the prefill forward's length."),
    K_INT(GS, "new_tokens", new_tokens, 1, BIG, NULL,
          "max_new_tokens: the prefill makes the first, each decode step one more."),
    K_ENUM(GS, "cache", cache, cache_kind_at, CACHE_COUNT,
           "transformers' KV cache: `dynamic` (DynamicCache, the default: torch.cat per decode step allocates "
           "each layer's keys and values one token longer and frees the old ones) or `static` (StaticCache: "
           "[batch, kv_heads, max_cache_len, head_dim] per layer allocated at the prefill, written in place)."),
    K_INT(GS, "max_cache_len", max_cache_len, 0, BIG, "prompt_len + new_tokens",
          "Static cache: tokens preallocated per layer (at least prompt_len + new_tokens)."),
    K_BOOL(GS, "do_sample", do_sample,
           "Sample the next token (fp32 softmax over the vocabulary, then multinomial) instead of greedy argmax."),
};
#undef GS

static const struct key_table generate_table = {
    .name = "job.generate",
    .help = "What a text generation does (`job.kind: generate`): model.generate() on `batch_size` prompts under "
            "torch.no_grad, weights in `load_dtype`, for decoders with rotary positions (Llama, Mistral, Qwen2) "
            "or learned ones (GPT-2).",
    .keys = generate_keys, .nkeys = COUNT(generate_keys), .obj_size = sizeof(struct generate_spec),
    .init = generate_defaults,
};

/* robust.fallback: device specs, each checked by the one device-spec parser. */
static int parse_fallback(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e)
{
    char got[96];
    struct robust_spec *r = field; /* the key's offset is the table's start: it fills fallback and nfallback */
    if (v->type != YAML_SEQUENCE_NODE)
        return yaml_doc_error(c->doc, v, e, "%s must be a list of devices, got %s", c->where,
                              yaml_node_describe(v, got, sizeof got));
    int n = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++, n++) {
        yaml_node_t *item = yaml_doc_node(c->doc, *it);
        if (n == SPEC_MAX_FALLBACKS)
            return yaml_doc_error(c->doc, item, e, "%s has more than %d devices", c->where, SPEC_MAX_FALLBACKS);
        struct device_spec spec;
        struct err pe = {0};
        if (item->type != YAML_SCALAR_NODE || yaml_is_null(item))
            return yaml_doc_error(c->doc, item, e, "%s must list devices, got %s", c->where,
                                  yaml_node_describe(item, got, sizeof got));
        if (device_spec_parse(yaml_scalar_text(item), &spec, &pe))
            return yaml_doc_error(c->doc, item, e, "%s: %s", c->where, pe.msg);
        snprintf(r->fallback[n], sizeof r->fallback[n], "%s", yaml_scalar_text(item));
    }
    r->nfallback = n;
    return 0;
}

#define R struct robust_spec
static const struct key robust_keys[] = {
    K_ENUM(R, "on_oom", on_oom, on_oom_at, ON_OOM_COUNT,
           "What the script does when a step runs out of memory: `fail` lets the error end the run; `halve_batch` "
           "catches it, frees what the failed attempt held (zero_grad(set_to_none=True), gc.collect()), empties the "
           "cache and restarts its training loop with half the batch."),
    K_INT(R, "min_batch_size", min_batch_size, 1, 1 << 20, NULL, "The smallest batch `halve_batch` tries."),
    K_INT(R, "max_retries", max_retries, 0, 16, NULL, "The most retries on one device."),
    K_BOOL(R, "keep_effective_batch", keep_effective_batch,
           "Double grad_accum as the batch halves, so each optimizer step sees as many samples."),
    {.name = "fallback", .type = KEY_CUSTOM, .offset = 0, .size = sizeof(R), .parse = parse_fallback,
     .doc_type = "list of devices (`sim:PROFILE`, `host`, `cuda:N`, ...)", .zero_means = "none",
     .help = "Devices tried next, in order, when the smallest batch or the last retry still runs out of memory "
             "(`host` stands for the CPU); each starts again from the job's batch."},
};
#undef R

static const struct key_table robust_table = {
    .name = "job.robust",
    .help = "An OOM-robust training script: on an OOM it halves the batch and retries, then falls back to other "
            "devices; the run reports every attempt, the batch it settles on, the work thrown away, and what "
            "`oomlab fit` finds up front.",
    .keys = robust_keys, .nkeys = COUNT(robust_keys), .obj_size = sizeof(struct robust_spec), .init = robust_defaults,
};

static void parallel_defaults(void *obj)
{
    parallel_spec_init(obj);
}

static void mp_defaults(void *obj)
{
    struct parallel_spec p;
    parallel_spec_init(&p);
    *(struct fsdp_mp_spec *)obj = p.mp;
}

#define M struct fsdp_mp_spec
static const struct key mp_keys[] = {
    K_ENUM(M, "param_dtype", param_dtype, mp_dtype_at, SPEC_FLOAT_DTYPES + 1,
           "The dtype the parameters are gathered and computed in; the shards, their gradients and the optimizer "
           "stay in the job's param_dtype. none: no cast."),
    K_ENUM(M, "reduce_dtype", reduce_dtype, mp_dtype_at, SPEC_FLOAT_DTYPES + 1,
           "The dtype of the gradient reduce-scatter (its input and output); the reduced shard is then cast to "
           "the job's param_dtype. none: the gradients' own dtype (param_dtype's when it is set)."),
};
#undef M

static const struct key_table mp_table = {
    .name = "job.parallel.mixed_precision",
    .help = "FSDP mixed precision (FSDP1 MixedPrecision, FSDP2 MixedPrecisionPolicy): fp32 shards kept, 16-bit "
            "copies gathered, gradients reduced in reduce_dtype and cast back to the shards' dtype.",
    .keys = mp_keys, .nkeys = COUNT(mp_keys), .obj_size = sizeof(struct fsdp_mp_spec), .init = mp_defaults,
};

#define P struct parallel_spec
static const struct key parallel_keys[] = {
    K_ENUM(P, "strategy", strategy, strategy_at, PAR_COUNT,
           "`ddp` (full replicas, gradient buckets), `zero1` (DeepSpeed: fp32 master weights and Adam state "
           "partitioned), `zero2` (also gradients), `zero3` (also parameters, gathered per module), `fsdp` (FSDP2: "
           "every transformer block a unit, parameters sharded on dim 0 and gathered per unit), `fsdp1` (FSDP1: one "
           "flat parameter per unit, padded to world_size, gathered into one buffer). The run simulates rank 0; "
           "NCCL's own buffers are outside the caching allocator and reported apart."),
    K_INT(P, "world_size", world_size, 1, 1 << 20, NULL,
          "Ranks, every one (Megatron's world size): data-parallel ones times `tensor_parallel` times "
          "`pipeline_parallel`. Without a `strategy`, 1 or tensor_parallel x pipeline_parallel."),
    {.name = "bucket_cap", .type = KEY_SIZE, FIELD(P, bucket_cap_bytes), .imin = 1,
     .help = "DDP bucket_cap_mb: gradient buckets after the first iteration's rebuild (the first is 1 MiB)."},
    K_BOOL(P, "gradient_as_bucket_view", gradient_as_bucket_view,
           "DDP: .grad are views of the buckets, allocated when DDP wraps the model and never freed; false keeps "
           "the gradients twice (in .grad and in the buckets)."),
    K_INT(P, "reduce_bucket_size", reduce_bucket_size, 1, 1LL << 40, NULL,
          "ZeRO: elements of the contiguous-gradient bucket (DeepSpeed's 5e8: 1 GB of 16-bit gradients); ZeRO-1/2 "
          "allocate it in every backward, ZeRO-3 keeps one."),
    K_BOOL(P, "contiguous_gradients", contiguous_gradients, "ZeRO-1/2: gradients copied into the bucket as they arrive."),
    K_BOOL(P, "overlap_comm", overlap_comm, "ZeRO-1/2: two buckets, one reducing while the other fills."),
    K_INT(P, "stage3_prefetch_bucket_size", prefetch_bucket_size, 0, 1LL << 40, NULL,
          "ZeRO-3: parameter elements gathered ahead of the running module (from the second step, once the trace "
          "is recorded)."),
    K_INT(P, "stage3_max_live_parameters", max_live_parameters, 0, 1LL << 40, NULL,
          "ZeRO-3: gathered parameter elements the prefetch stays within."),
    K_INT(P, "stage3_param_persistence_threshold", param_persistence_threshold, 0, 1LL << 40, NULL,
          "ZeRO-3: parameters of at most this many elements are never partitioned."),
    K_INT(P, "sub_group_size", sub_group_size, 1, 1LL << 40, NULL,
          "ZeRO-3: elements per optimizer sub-group (the step's fp32 gradient is one sub-group's)."),
    K_BOOL(P, "offload_optimizer", offload_optimizer,
           "ZeRO: fp32 master weights, Adam state, gradient partitions and the step in host memory "
           "(DeepSpeedCPUAdam); the device keeps the 16-bit parameters and the buckets."),
    K_BOOL(P, "offload_param", offload_param, "ZeRO-3: parameter partitions in host memory, gathered to the device "
                                             "per module."),
    K_BOOL(P, "reshard_after_forward", reshard_after_forward,
           "FSDP: free a unit's gathered parameters after its forward (gathered again for its backward)."),
    K_INT(P, "forward_prefetch", forward_prefetch, 0, 64, NULL,
          "FSDP: units gathered ahead of the running one (behind it in backward). fsdp1 takes 0 or 1 "
          "(forward_prefetch=False or True): the default 1 is FSDP2's, so write 0 for FSDP1's own default."),
    K_INT(P, "tensor_parallel", tensor_parallel, 1, 1024, NULL,
          "Megatron tensor parallelism of a decoder: q/k/v, up/gate and the LM head column-parallel (heads, KV "
          "heads, intermediate and vocabulary / N per rank; the vocabulary padded to a multiple of 128 N), o and down "
          "row-parallel with their outputs all-reduced in place, the embedding vocab-parallel, norms replicated, "
          "Megatron's vocab-parallel cross-entropy (fp32 logits of vocab / N, softmax in place). With a `strategy`, "
          "`world_size` counts every rank and the data-parallel group is world_size / N. With `pipeline_parallel` "
          "(3D parallelism) each stage's layers are sharded so, the vocab-parallel embedding on the first stage "
          "and the LM head and loss on the last."),
    K_BOOL(P, "sequence_parallel", sequence_parallel,
           "Megatron sequence parallelism (with tensor_parallel > 1; ignored at 1, as Megatron does): norms, "
           "dropout and residuals on seq_len / N tokens; the sequence all-gathered before each column-parallel "
           "linear into one kept buffer (regathered in backward, the shard saved) and reduce-scattered after each "
           "row-parallel one."),
    K_TABLE(P, "mixed_precision", mp, mp_table, false, "FSDP: param_dtype and reduce_dtype."),
    K_BOOL(P, "cpu_offload", cpu_offload,
           "FSDP (CPUOffload(offload_params=True), FSDP2 CPUOffloadPolicy): the sharded parameters, their "
           "gradients and the optimizer step in host memory; each unit is copied to the device to be gathered."),
    K_BOOL(P, "use_orig_params", use_orig_params,
           "FSDP1: the optimizer sees the original parameters as views of the flat shard (state only for their "
           "elements), and each parameter starts 16-byte aligned in the flat parameter; false: one "
           "FlatParameter per unit, padding included."),
    K_ENUM(P, "backward_prefetch", backward_prefetch, bwd_prefetch_at, BWD_PREFETCH_COUNT,
           "FSDP1: the next unit in backward gathered before the current one's gradients (backward_pre), after "
           "it is resharded (backward_post), or when it runs (none)."),
    K_INT(P, "nccl_channels", nccl_channels, 0, 64, NULL,
          "NCCL's channels, as its topology search picks them (NCCL_DEBUG=INFO prints them; typically 2 over "
          "PCIe, more over NVLink): each gives the rank a receive and a send connection of its ring."),
    {.name = "nccl_buffsize", .type = KEY_SIZE, FIELD(P, nccl_buffsize),
     .help = "NCCL_BUFFSIZE: the Simple protocol's buffer per receive connection (LL's 512 KiB and LL128's "
             "4,915,200 B come with it), 4KiB..4GiB."},
    K_ENUM(P, "nccl_transport", nccl_transport, nccl_transport_at, NCCL_TRANSPORT_COUNT,
           "p2p (NVLink or PCIe peer access: the buffers in device memory) or shm (GPUs without peer access, "
           "such as GeForce cards over PCIe: the buffers in host shared memory, none on the device)."),
    K_INT(P, "pipeline_parallel", pipeline_parallel, 1, PIPE_MAX_STAGES, NULL,
          "Pipeline stages of a decoder (Megatron-LM's split: `model.layers` / stages consecutive layers each, "
          "the embedding on the first, the final norm, LM head and loss on the last). oomlab runs every stage "
          "and reports each; the job's result is the stage that OOMs first, else the one that peaks. With "
          "`strategy: none`, or `ddp` (each stage replicated over world_size / (stages x tensor_parallel) "
          "data-parallel ranks, DDP bucketing its gradients), and with `tensor_parallel` (each stage's layers sharded; the p2p buffers [micro_batch, "
          "seq, hidden], seq / tensor_parallel with `sequence_parallel`)."),
    K_INT(P, "micro_batches", micro_batches, 1, 1 << 16, NULL,
          "Pipeline: micro-batches per step, each `job.batch` samples."),
    K_ENUM(P, "schedule", schedule, schedule_at, PIPE_SCHEDULE_COUNT,
           "Pipeline: `1f1b` (Megatron-LM's, torch.distributed.pipelining's Schedule1F1B: stage s holds "
           "min(stages - s, micro_batches) micro-batches' activations) or `gpipe` (every forward, then every "
           "backward: all of them)."),
    K_BOOL(P, "deallocate_outputs", deallocate_outputs,
           "Pipeline: once a stage's output is sent, its storage is replaced by one element (Megatron-LM's "
           "deallocate_pipeline_outputs, which its training scripts turn on); false keeps it until its backward, "
           "as ModelParallelConfig's default and torch.distributed.pipelining do."),
};
#undef P

static const struct key_table parallel_table = {
    .name = "job.parallel",
    .help = "Parallel training: the job is one rank of `world_size` (data parallel, and tensor parallel with "
            "`tensor_parallel`, and pipeline stages with `pipeline_parallel`), and oomlab runs that rank's "
            "allocations through the allocator model.",
    .keys = parallel_keys, .nkeys = COUNT(parallel_keys), .obj_size = sizeof(struct parallel_spec),
    .init = parallel_defaults,
};

#define X struct extra_spec
static const struct key extra_keys[] = {
    {.name = "preset", .type = KEY_CUSTOM, FIELD(X, preset), .parse = parse_preset, .required = true,
     .doc_type = "preset name, see [Presets](#presets)", .help = "The frozen module (`clip-l-text`, `sd-vae`, ...)."},
    {.name = "role", .type = KEY_ENUM, FIELD(X, role), .name_of = extra_role_at, .nnames = EXTRA_ROLE_COUNT,
     .required = true,
     .help = "What the training loop uses it for. A UNet reads its first text encoder's states. Flux runs every "
             "text encoder on the device, taking its token states from the one `model.cross_attention_dim` wide (T5) "
             "and its pooled embedding from the one `model.pooled_dim` wide (CLIP's last token); SD3 joins its CLIP "
             "encoders' states (padded to `cross_attention_dim`) and T5's, and their pooled outputs. A VAE encodes "
             "each batch's images for a UNet or an MMDiT."},
    K_ENUM(X, "dtype", dtype, float_dtype_at, SPEC_FLOAT_DTYPES, "Dtype of its weights."),
    K_BOOL(X, "on_device", on_device, "Resident on the device (false: kept on the CPU)."),
};
#undef X

static const struct key_table extra_table = {
    .name = "job.extras[]",
    .help = "One frozen module resident beside the trained model (no gradients, no optimizer state).",
    .keys = extra_keys, .nkeys = COUNT(extra_keys), .obj_size = sizeof(struct extra_spec), .init = extra_defaults,
};

static int parse_extras(const struct key_ctx *c, const struct key *k, yaml_node_t *v, void *field, struct err *e)
{
    char got[96], path[300];
    struct job_spec *job = field; /* the key's offset is 0: it fills extras and nextras */
    if (v->type != YAML_SEQUENCE_NODE)
        return yaml_doc_error(c->doc, v, e, "%s must be a list of mappings, got %s", c->where,
                              yaml_node_describe(v, got, sizeof got));
    int n = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++, n++) {
        yaml_node_t *item = yaml_doc_node(c->doc, *it);
        if (n == SPEC_MAX_EXTRAS)
            return yaml_doc_error(c->doc, item, e, "%s has more than %d entries", c->where, SPEC_MAX_EXTRAS);
        snprintf(path, sizeof path, "%s[%d]", c->where, n);
        struct key_ctx sub = {c->doc, c->root, path};
        extra_defaults(&job->extras[n]);
        if (keytable_expect_mapping(c, item, path, e) || keytable_apply(&extra_table, &sub, item, &job->extras[n], e))
            return -1;
    }
    job->nextras = n;
    return 0;
}

#define J struct job_spec
static const struct key job_keys[] = {
    K_ENUM(J, "kind", kind, job_kind_at, JOB_KIND_COUNT,
           "What the job does: `train` (training steps, the default), `eval` (one evaluation: `eval.batches` "
           "no_grad forwards of `eval.batch_size`), `generate` (text generation, see "
           "[`job.generate`](#jobgenerate)) or `diffusion` (text-to-image inference, see "
           "[`job.diffusion`](#jobdiffusion))."),
    K_INT(J, "batch_size", batch, 1, 1 << 20, NULL, "Samples per optimizer step, before gradient accumulation."),
    K_INT(J, "seq_len", seq_len, 1, BIG, NULL, "Tokens per sample (T5: encoder input)."),
    K_INT(J, "target_len", target_len, 0, BIG, "seq_len", "T5: decoder tokens."),
    K_INT(J, "image_size", image_size, 0, 65536, NULL,
          "Pixels per side (UNet, VAE, CNN; the UNet latent is image_size / vae_scale)."),
    K_INT(J, "context_len", context_len, 0, BIG, NULL,
          "UNet: text tokens for cross-attention; MMDiT: T5's tokens (max_sequence_length; a CLIP encoder reads its "
          "77 learned positions, and SD3 puts CLIP's tokens before T5's), or the text tokens of precomputed "
          "embeddings."),
    K_ENUM(J, "load_dtype", load_dtype, float_dtype_at, SPEC_FLOAT_DTYPES, "torch_dtype given to from_pretrained."),
    K_BOOL(J, "load_on_device", load_on_device, "Weights land on the device at load (device_map=\"cuda\")."),
    K_ENUM(J, "param_dtype", param_dtype, float_dtype_at, SPEC_FLOAT_DTYPES,
           "Dtype of the trained weights after .to(dtype)."),
    K_BOOL(J, "autocast", autocast, "Run the forward under torch.autocast."),
    K_ENUM(J, "autocast_dtype", autocast_dtype, float_dtype_at, SPEC_FLOAT_DTYPES, "The autocast dtype."),
    K_BOOL(J, "master_weights", master_weights, "The optimizer keeps an fp32 master copy of 16-bit weights."),
    K_BOOL(J, "loss_scaling", loss_scaling, "fp16 GradScaler: scaled loss, unscale before the step."),
    K_ENUM(J, "optimizer", optimizer, optimizer_at, OPT_COUNT,
           "The optimizer. paged_adamw_8bit and paged_adamw_32bit are bitsandbytes' paged AdamW: the state of "
           "tensors from 1e5 elements in CUDA unified memory, outside the caching allocator (reported apart "
           "from reserved memory, modelled resident on the device while it has room)."),
    K_BOOL(J, "foreach", foreach, "Multi-tensor (foreach) optimizer step, with parameter-sized temporaries."),
    K_BOOL(J, "set_to_none", set_to_none, "zero_grad(set_to_none=True), PyTorch's default since 2.0."),
    K_INT(J, "grad_accum", grad_accum, 1, 1 << 20, NULL, "Micro-batches per optimizer step (1 = none)."),
    K_INT(J, "steps", steps, 1, 1 << 20, NULL, "Optimizer steps to run (a diffusion job: pipeline calls)."),
    K_ENUM(J, "ema", ema, ema_place_at, EMA_COUNT, "Exponential moving average of the weights, and where it lives."),
    K_TABLE(J, "eval", eval, eval_table, false, "Evaluation cadence and contents."),
    K_TABLE(J, "generate", generate, generate_table, false, "Text generation (`kind: generate`)."),
    K_TABLE(J, "diffusion", diffusion, diffusion_table, false, "Diffusion inference (`kind: diffusion`)."),
    K_ENUM(J, "trainable", trainable, trainable_at, TRAIN_COUNT, "Which weights train."),
    K_INT(J, "lora_rank", lora_rank, 0, 65536, NULL, "LoRA rank r."),
    {.name = "lora_targets", .type = KEY_CUSTOM, FIELD(J, lora), .parse = parse_lora_targets,
     .doc_type = "`all-linear` or a list of module names", .zero_means = "the attention's query and value projections",
     .help = "Linear modules that get a LoRA adapter (PEFT's target_modules: a module whose full name is the "
             "target or ends in '.' + target, as the family names them: q_proj, k_proj, v_proj, o_proj, gate_proj, "
             "up_proj, down_proj for Llama; c_attn, c_proj, c_fc for GPT-2; query, key, value, dense for BERT; q, "
             "k, v, o, wi_0, wi_1, wo for T5 v1.1). all-linear: every linear but the output head. A name that matches no module "
             "is an error."},
    {.name = "lora_alpha", .type = KEY_FLOAT, FIELD(J, lora.alpha), .fmin = 0, .fmax = 1e6,
     .help = "lora_alpha: the adapter output is scaled by alpha / r (a multiply; no other memory effect)."},
    {.name = "lora_dropout", .type = KEY_FLOAT, FIELD(J, lora.dropout), .fmin = 0, .fmax = 1, .fopen = false,
     .zero_means = "nn.Identity",
     .help = "Dropout on each adapter's input: its output and mask are saved for backward."},
    K_BOOL(J, "use_dora", lora.dora,
           "DoRA (PEFT's DoraLinearLayer): a trainable magnitude vector per adapted linear; each forward builds "
           "lora_B @ lora_A at the weight's full size to take the row norms of W + scaling * B @ A, and saves the "
           "base output and lora_B's output. Refused (not modelled yet) with a quantized base, lora_dropout > 0, "
           "autocast or sharded parameters."),
    K_ENUM(J, "lora_dtype", lora.dtype, lora_dtype_at, SPEC_FLOAT_DTYPES + 1,
           "Adapter weights' dtype. auto: fp32 on a quantized base (as PEFT creates them there), else the "
           "model's param dtype; PEFT's autocast_adapter_dtype=True makes them fp32 on a 16-bit base too."),
    K_TABLE(J, "quantization", quant, scenario_quant_table, false, "Quantized base weights (bitsandbytes)."),
    {.name = "extras", .type = KEY_CUSTOM, .offset = 0, .size = sizeof(J), .parse = parse_extras, .sub = &extra_table,
     .doc_type = "list of mappings, see [`job.extras[]`](#jobextras)", .zero_means = "none",
     .help = "Frozen modules resident beside the model (text encoder, VAE)."},
    {.name = "cublas_workspace", .type = KEY_SIZE, FIELD(J, cublas_workspace_bytes),
     .zero_means = "the device's: PyTorch's default for its architecture (32 MiB from Hopper on, 8,519,680 B before)",
     .help = "cuBLAS workspace per stream, allocated at its first GEMM and never freed."},
    K_INT(J, "streams", streams, 1, 8, NULL, "CUDA streams: stream 0 trains; with 2 or more, eval runs on stream 1."),
    K_BOOL(J, "use_cache", use_cache,
           "The model builds its KV cache in training, as transformers does by default (GPT-2, Llama, T5's "
           "decoder): each attention keeps copies of its keys and values (DynamicCache.update's torch.cat). "
           "Gradient checkpointing turns it off, as transformers does."),
    K_BOOL(J, "padding", padding,
           "The batch has padding, so transformers builds a [batch, 1, seq, seq] attention mask (without padding "
           "it builds none, except eager attention's causal mask)."),
    K_BOOL(J, "kernel_scratch", kernel_scratch,
           "Temporaries CUDA kernels take from the caching allocator inside one op (embedding backward's sorting "
           "buffers, flash and memory-efficient attention backward's accumulators, LayerNorm backward's partial "
           "sums). false leaves them out: what a recording on PyTorch's meta device sees (the conformance "
           "scenarios set it)."),
    K_TABLE(J, "robust", robust, robust_table, false, "What the script does on an out-of-memory error."),
    K_TABLE(J, "parallel", parallel, parallel_table, false, "DDP, ZeRO or FSDP: the memory of one rank."),
};
#undef J

const struct key_table scenario_job_table = {
    .name = "job",
    .help = "The training job. A variant's own `job:` mapping changes these keys for that variant only.",
    .keys = job_keys, .nkeys = COUNT(job_keys), .obj_size = sizeof(struct job_spec), .init = job_defaults,
};

