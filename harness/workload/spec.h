/* spec.h: the complete description of a training job as plain C structs, for the workload generator.
 *
 * Contract: call job_spec_init() first (it sets every default below, and every fault's and fix's
 * parameters to their rows' defaults), then set fields directly or through the name tables
 * (family_from_name, ..., fault_enable, fix_enable, the parameter accessors of faults.h and fixes.h),
 * then job_spec_validate(). A model is either a preset (model.preset, expanded by preset_apply) or a
 * family with its dimensions. Faults and fixes are bit sets, with a parameter slot per switch (see
 * switches.h). Every string is a fixed-size array, so a spec can be copied with `=`; nothing in it
 * owns memory.
 * C++-includable. */
#ifndef OOMLAB_WORKLOAD_SPEC_H
#define OOMLAB_WORKLOAD_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "program/program.h"
#include "util/err.h"
#include "workload/faults.h"
#include "workload/fixes.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SPEC_NAME_MAX 64
#define SPEC_MAX_LEVELS 8   /* UNet / VAE / CNN resolution levels; MLP hidden layers */
#define SPEC_MAX_EXTRAS 4   /* frozen extra modules resident beside the trained model */

enum model_family {
    FAMILY_DECODER,    /* decoder-only transformer: GPT-2, Llama */
    FAMILY_ENCODER,    /* encoder-only transformer: BERT */
    FAMILY_T5,         /* T5 encoder-decoder */
    FAMILY_UNET,       /* diffusers UNet2DConditionModel (SD 1.x, SDXL) */
    FAMILY_VAE,        /* diffusers AutoencoderKL */
    FAMILY_CLIP_TEXT,  /* CLIPTextModel(WithProjection) */
    FAMILY_MLP,        /* stack of Linear + activation */
    FAMILY_CNN,        /* conv + BatchNorm-free GroupNorm + ReLU stages, global pool, linear head */
    FAMILY_VIT,        /* ViTModel / ViTForImageClassification */
    FAMILY_CLIP_VISION,/* CLIPVisionModel(WithProjection) */
    FAMILY_MMDIT,      /* diffusers FluxTransformer2DModel (double- and single-stream blocks), SD3Transformer2DModel */
    FAMILY_COUNT
};

/* NORM_RMSNORM is transformers' composite (LlamaRMSNorm, T5LayerNorm); NORM_RMSNORM_FUSED is PyTorch's
 * native op (torch.nn.RMSNorm, F.rms_norm): one kernel that saves its input and rstd. */
enum norm_kind { NORM_LAYERNORM, NORM_RMSNORM, NORM_GROUPNORM, NORM_RMSNORM_FUSED, NORM_COUNT };
enum norm_place { NORM_PRE, NORM_POST, NORM_PLACE_COUNT };          /* pre-LN (GPT) / post-LN (BERT) */
enum ffn_kind { FFN_MLP, FFN_GATED, FFN_COUNT };                    /* up-act-down / act(gate)*up-down */
/* Fused activations are one kernel that saves its input; ACT_GELU_NEW is transformers' NewGELUActivation
 * (`gelu_new`: GPT-2, T5 v1.1 / FLAN-T5 gated-gelu), a composite of eight small ops whose autograd saves
 * three more tensors of the input's size (see nn_act). */
enum act_kind { ACT_GELU, ACT_GELU_TANH, ACT_QUICK_GELU, ACT_SILU, ACT_RELU, ACT_GELU_NEW, ACT_COUNT };
enum pos_kind { POS_LEARNED, POS_ROTARY, POS_RELATIVE_BIAS, POS_NONE, POS_COUNT };
enum attn_impl { ATTN_EAGER, ATTN_SDPA, ATTN_COUNT };  /* unfused matmuls + materialized mask / fused SDPA */

/* The model: a preset name, or a family with its dimensions (preset_apply fills these from a preset). */
struct model_spec {
    char preset[SPEC_NAME_MAX];  /* "" = described by the fields below */
    /* The preset the fields were filled from (they may since have been overridden): validation
     * expands `preset` only when it names another one. */
    char expanded_from[SPEC_NAME_MAX];
    enum model_family family;

    /* transformers (decoder, encoder, T5, CLIP text) */
    int layers;             /* blocks; T5: encoder layers */
    int decoder_layers;     /* T5 decoder layers (0 = same as layers) */
    bool encoder_only;      /* T5: the encoder alone (T5EncoderModel) */
    int hidden;             /* d_model */
    int heads;
    int kv_heads;           /* GQA key/value heads (0 = heads) */
    int head_dim;           /* 0 = hidden / heads; T5 d_kv */
    int ffn;                /* intermediate size */
    int vocab;
    int max_positions;      /* learned position table rows */
    int type_vocab;         /* BERT token types (0 = none) */
    enum norm_kind norm;
    enum norm_place norm_place;
    bool norm_bias;         /* LayerNorm with bias (RMSNorm never has one) */
    enum ffn_kind ffn_kind;
    enum act_kind act;
    bool bias;              /* biases on linear layers */
    bool qkv_bias;          /* biases on the q, k and v projections only (Qwen2) */
    bool tied_embeddings;   /* LM head shares the token embedding */
    enum pos_kind pos;
    int rel_buckets;        /* relative-position buckets (T5: 32) */
    bool causal;            /* causal mask (decoder, CLIP text) */
    bool pooler;            /* BERT pooler dense + tanh */
    int projection_dim;     /* CLIP text_projection / visual_projection output (0 = none) */
    int patch_size;         /* ViT, CLIP vision: pixels per patch side (the patch conv's kernel and stride);
                             * SD3: PatchEmbed conv stride (0: Flux's 2x2 packing, rotary) */
    int num_labels;         /* classifier outputs (ViTForImageClassification; 0 = no classifier) */
    bool lm_head;           /* decoder / T5: produce vocabulary logits and a cross-entropy loss */
    enum attn_impl attn;
    float dropout;          /* dropout probability (0 = no dropout masks) */
    /* decoder variants read from Hugging Face configs (hf_config.c) */
    bool qk_norm;           /* RMSNorm over each head of the query and key (Qwen3, Gemma3: before rotary; Flux, SD3.5) */
    bool sandwich_norm;     /* norms after the attention and the MLP as well (Gemma2, Gemma3) */
    bool embed_scale;       /* embeddings multiplied by sqrt(hidden) (Gemma's normalizer) */
    bool parallel_residual; /* x + attn(ln1(x)) + mlp(ln2(x)) (GPT-NeoX) */
    float logit_softcap;    /* final logits become cap * tanh(logits / cap) (Gemma2; 0 = none) */
    float attn_softcap;     /* eager attention scores become cap * tanh(scores / cap) (Gemma2; 0 = none) */
    int experts;            /* sparse MoE feed-forward with this many gated experts (Mixtral; 0 = dense) */
    int experts_top_k;      /* experts each token is routed to (num_experts_per_tok) */
    bool router_logits_out; /* output_router_logits: the auxiliary loss's inputs (warned: not modelled) */

    /* convolutional families (UNet, VAE, CNN) */
    int in_channels;        /* image channels (also ViT's and CLIP vision's num_channels) */
    int out_channels;       /* CNN: classes */
    int nlevels;
    int channels[SPEC_MAX_LEVELS];          /* block_out_channels */
    int layers_per_block;
    int groups;                             /* GroupNorm groups */
    int transformer_depth[SPEC_MAX_LEVELS]; /* UNet: transformer blocks per attention, per level (0 = none) */
    int attn_heads[SPEC_MAX_LEVELS];        /* UNet: heads per level (diffusers' attention_head_dim) */
    int mid_transformer_depth;              /* UNet mid block */
    int cross_attention_dim;                /* UNet: text-embedding width */
    bool linear_projection;                 /* UNet: proj_in/out linear (SDXL) instead of 1x1 conv */
    int time_embed_input;                   /* UNet: sinusoidal time projection width (= channels[0]) */
    int add_time_embed_dim;                 /* SDXL add-embedding: per-value time projection (0 = none) */
    int add_embed_input;                    /* SDXL: projection_class_embeddings_input_dim */
    int latent_channels;                    /* VAE latent channels; UNet in/out channels */
    int vae_scale;                          /* pixels per latent (8) */
    bool no_quant_conv;                     /* VAE without quant_conv / post_quant_conv (Flux, SD3) */

    /* MMDiT (Flux): `layers` double-stream blocks, `in_channels` packed latent channels (2x2 patches of
     * latent_channels), cross_attention_dim the text encoder's width (joint_attention_dim) */
    int single_layers;                      /* single-stream blocks */
    int pos_embed_max;                      /* SD3: side of the learned position table (pos_embed_max_size) */
    int pooled_dim;                         /* pooled text embedding width (pooled_projection_dim) */
    bool guidance_embed;                    /* guidance embedder (guidance-distilled Flux.1-dev) */

    /* MLP */
    int mlp_in;
    int mlp_hidden[SPEC_MAX_LEVELS];
    int mlp_depth;          /* hidden layers used in mlp_hidden */
    int mlp_out;
};

/* The paged kinds are bitsandbytes' PagedAdamW8bit and PagedAdamW32bit (state in unified memory). */
enum optimizer_kind {
    OPT_SGD, OPT_ADAMW, OPT_ADAMW_8BIT, OPT_ADAFACTOR, OPT_PAGED_ADAMW_8BIT, OPT_PAGED_ADAMW_32BIT, OPT_COUNT
};
/* bitsandbytes weight quantization (quant.c): none, 4-bit NormalFloat or FP4 (Linear4bit), LLM.int8. */
enum quant_kind { QUANT_NONE, QUANT_NF4, QUANT_FP4, QUANT_INT8, QUANT_COUNT };
enum trainable_kind { TRAIN_FULL, TRAIN_LORA, TRAIN_LINEAR_PROBE, TRAIN_COUNT };
enum ema_place { EMA_OFF, EMA_GPU, EMA_CPU, EMA_COUNT };
/* What the job does with the model: train it, evaluate it, generate text with it, or run diffusion
 * inference. */
enum job_kind { JOB_TRAIN, JOB_EVAL, JOB_GENERATE, JOB_DIFFUSION, JOB_KIND_COUNT };
/* transformers' KV caches (cache_utils.py): DynamicCache grows by torch.cat per step, StaticCache is
 * preallocated to max_cache_len and written in place. */
enum cache_kind { CACHE_DYNAMIC, CACHE_STATIC, CACHE_COUNT };
/* diffusers' CPU offload of a pipeline (pipeline_utils.py): none (pipe.to("cuda")), model
 * (enable_model_cpu_offload: one component on the device at a time) or sequential
 * (enable_sequential_cpu_offload: each leaf module's weights on the device only while it runs). */
enum offload_kind { OFFLOAD_NONE, OFFLOAD_MODEL, OFFLOAD_SEQUENTIAL, OFFLOAD_COUNT };
/* The VAE decode's upcast to fp32 (pipeline_stable_diffusion_xl.py: an fp16 VAE whose config has
 * force_upcast): auto = the SDXL pipeline's rule, on or off as the config says. */
enum vae_upcast_kind { VAE_UPCAST_AUTO, VAE_UPCAST_ON, VAE_UPCAST_OFF, VAE_UPCAST_COUNT };
enum extra_role { EXTRA_TEXT_ENCODER, EXTRA_VAE, EXTRA_ROLE_COUNT };

/* What an eval does. */
struct eval_spec {
    int every;              /* eval after every N steps (0 = never) */
    bool before_training;   /* one eval before the first step */
    int batch;              /* eval batch (0 = training batch) */
    int batches;            /* eval batches per eval (default 1) */
    int sampling_steps;     /* diffusion: denoising steps per sample batch (0 = one no_grad forward) */
    bool vae_decode;        /* decode the generated latents with the VAE extra */
};

/* What a text generation (job.kind generate) does: model.generate() on batch_size prompts. */
struct generate_spec {
    int prompt_len;         /* tokens per prompt (prefill) */
    int new_tokens;         /* max_new_tokens: decode steps (the prefill makes the first) */
    enum cache_kind cache;
    int max_cache_len;      /* static cache length (0 = prompt_len + new_tokens) */
    bool do_sample;         /* softmax + multinomial over the vocabulary (false: greedy argmax) */
};

/* What the training script does when a step runs out of memory (run/robust.c): ON_OOM_FAIL lets the error
 * end the run; ON_OOM_HALVE_BATCH catches it, frees what the failed attempt held (leaving the except block,
 * zero_grad(set_to_none=True), gc.collect()), empties the cache and restarts its training loop with half the
 * batch, down to min_batch_size, at most max_retries times, then on the next device of `fallback`. */
enum on_oom_policy { ON_OOM_FAIL, ON_OOM_HALVE_BATCH, ON_OOM_COUNT };
#define SPEC_MAX_FALLBACKS 4
struct robust_spec {
    enum on_oom_policy on_oom;
    int min_batch_size;          /* the smallest batch tried (default 1) */
    int max_retries;             /* retries on one device (default 8) */
    bool keep_effective_batch;   /* double grad_accum as the batch halves (default true) */
    int nfallback;
    char fallback[SPEC_MAX_FALLBACKS][64]; /* device specs tried next, in order */
};

/* What a diffusion inference (job.kind diffusion) does: one pipeline call per job step on batch_size
 * prompts (diffusion_job.c). */
#define ATTN_SLICE_AUTO (-1) /* enable_attention_slicing("auto"): half the heads per slice */
#define ATTN_SLICE_MAX (-2)  /* enable_attention_slicing("max"): one head per slice */
struct diffusion_spec {
    int steps;              /* num_inference_steps (50) */
    bool guidance;          /* classifier-free guidance: the UNet runs on uncond and cond latents at once */
    int images_per_prompt;  /* num_images_per_prompt (1) */
    int height, width;      /* pixels (0 = job.image_size) */
    enum vae_upcast_kind vae_upcast;
    int attention_slicing;  /* 0 off, ATTN_SLICE_AUTO, ATTN_SLICE_MAX, or rows of batch x heads per slice */
    bool vae_slicing;       /* vae.enable_slicing(): decode one image at a time */
    bool vae_tiling;        /* vae.enable_tiling(): decode overlapping tiles */
    int tile_size;          /* tile_sample_min_size in pixels (0 = the VAE config's sample_size) */
    double tile_overlap;    /* tile_overlap_factor (0.25) */
    enum offload_kind offload;
    bool tiny_autoencoder;  /* AutoencoderTiny (TAESD) decodes instead of the KL VAE */
};

/* A frozen module resident on the device beside the trained model (not trained, no grads). */
struct extra_spec {
    char preset[SPEC_NAME_MAX];  /* "clip-l-text", "sd-vae", ... */
    enum extra_role role;
    enum dtype dtype;
    bool on_device;              /* false: kept on the CPU (its outputs still reach the device) */
};

/* Data-parallel sharding (workload/parallel.c): the job is one rank of world_size, and the generator
 * emits that rank's allocations. */
enum parallel_strategy { PAR_NONE, PAR_DDP, PAR_ZERO1, PAR_ZERO2, PAR_ZERO3, PAR_FSDP, PAR_FSDP1, PAR_COUNT };
/* FSDP1's backward_prefetch (BackwardPrefetch): the next unit gathered before or after the current one's
 * gradients, or not at all. */
enum fsdp_backward_prefetch { BWD_PREFETCH_PRE, BWD_PREFETCH_POST, BWD_PREFETCH_NONE, BWD_PREFETCH_COUNT };
/* How NCCL connects the GPUs of one node: peer-to-peer (NVLink, PCIe P2P) or through host shared memory. */
enum nccl_transport { NCCL_P2P, NCCL_SHM, NCCL_TRANSPORT_COUNT };

/* FSDP mixed precision (FSDP1 MixedPrecision, FSDP2 MixedPrecisionPolicy): 0 = none (no cast), else a
 * float dtype + 1 (fsdp_mp_dtype in parallel.h reads them). */
struct fsdp_mp_spec {
    int param_dtype;   /* the gathered (unsharded) parameters' dtype */
    int reduce_dtype;  /* the gradient reduce-scatter's dtype */
};

struct parallel_spec {
    enum parallel_strategy strategy;
    int world_size;
    uint64_t bucket_cap_bytes;      /* DDP bucket_cap_mb (25 MiB) */
    bool gradient_as_bucket_view;   /* DDP: .grad are views of the buckets */
    int64_t reduce_bucket_size;     /* ZeRO: elements of the gradient bucket (5e8) */
    bool contiguous_gradients;      /* ZeRO-2/3: gradients copied into the bucket as they arrive */
    bool overlap_comm;              /* ZeRO-1/2: two buckets, one reducing while the other fills */
    int64_t prefetch_bucket_size;   /* ZeRO-3: elements gathered ahead (5e7) */
    int64_t max_live_parameters;    /* ZeRO-3: gathered elements kept live (1e9) */
    int64_t param_persistence_threshold; /* ZeRO-3: parameters this small are never partitioned (1e5) */
    int64_t sub_group_size;         /* ZeRO-3: elements per optimizer sub-group (1e9) */
    bool offload_optimizer;         /* ZeRO: master weights, optimizer state and the step on the CPU */
    bool offload_param;             /* ZeRO-3: parameter partitions on the CPU */
    bool reshard_after_forward;     /* FSDP: free a unit's gathered parameters after its forward */
    int forward_prefetch;           /* FSDP: units gathered ahead of the one running (1) */
    int tensor_parallel;            /* Megatron tensor-parallel degree (1: none; parallel_tensor.c) */
    bool sequence_parallel;         /* Megatron sequence parallelism inside the tensor-parallel group */
    struct fsdp_mp_spec mp;         /* FSDP: mixed_precision */
    bool cpu_offload;               /* FSDP: sharded parameters, gradients and the step on the host */
    bool use_orig_params;           /* FSDP1: optimizer on the original parameters' views of the shard */
    int backward_prefetch;          /* FSDP1: enum fsdp_backward_prefetch (backward_pre) */
    int nccl_channels;              /* NCCL's channels (2) */
    uint64_t nccl_buffsize;         /* NCCL_BUFFSIZE: the Simple protocol's buffer per connection (4 MiB) */
    int nccl_transport;             /* enum nccl_transport (p2p) */
};

/* Weight quantization of the decoder's linear layers (transformers' BitsAndBytesConfig). */
struct quant_spec {
    enum quant_kind type;
    int blocksize;              /* bnb_4bit blocksize (64) */
    bool double_quant;          /* bnb_4bit_use_double_quant: absmax quantized to 8 bits */
    enum dtype compute_dtype;   /* bnb_4bit_compute_dtype: the GEMM's dtype */
    bool prepare_kbit;          /* peft's prepare_model_for_kbit_training: other 16-bit weights to fp32 */
};

#define SPEC_LORA_TARGETS 8
/* Where LoRA adapters go (PEFT's LoraConfig; lora.c). */
struct lora_spec {
    char targets[SPEC_LORA_TARGETS][32]; /* module names (target_modules), matched as PEFT does: by the last name */
    int ntargets;               /* 0 = the family's default (q and v projections) */
    bool all_linear;            /* "all-linear": every linear layer but the output head */
    float alpha;                /* lora_alpha: a scale, no memory effect */
    float dropout;              /* lora_dropout on the adapter's input */
    bool dora;                  /* use_dora: weight-decomposed adapters (magnitude vector, weight norm) */
    int dtype;                  /* adapter weights' dtype: 0 = auto (fp32 on a quantized base, as peft
                                 * creates them; else the model's param dtype), else 1 + enum dtype */
};

/* The training job. */
struct job_spec {
    char name[SPEC_NAME_MAX];   /* scenario or variant name (for tags and reports) */
    enum job_kind kind;         /* default JOB_TRAIN */
    struct model_spec model;

    int batch;                  /* per optimizer step (before gradient accumulation) */
    int seq_len;                /* transformers: tokens per sample (T5: encoder input) */
    int target_len;             /* T5: decoder tokens (0 = seq_len) */
    int image_size;             /* UNet / VAE / CNN / ViT: pixels per side (UNet latent = image_size / vae_scale) */
    int context_len;            /* UNet: text tokens for cross-attention (77) */

    enum dtype load_dtype;      /* from_pretrained torch_dtype */
    bool load_on_device;        /* device_map="cuda": weights land on the device at load */
    enum dtype param_dtype;     /* dtype of the trained weights after .to(dtype) */
    bool autocast;              /* forward under torch.autocast */
    enum dtype autocast_dtype;
    bool master_weights;        /* fp32 master copy of 16-bit weights, kept by the optimizer */
    bool loss_scaling;          /* fp16 GradScaler: scaled loss, unscale before the step */

    enum optimizer_kind optimizer;
    bool foreach;               /* multi-tensor optimizer step (default on) */
    bool set_to_none;           /* zero_grad(set_to_none=True), the default since PyTorch 2.0 */
    int grad_accum;             /* micro-batches per optimizer step (1 = none) */
    int steps;                  /* optimizer steps */

    enum ema_place ema;
    struct eval_spec eval;
    struct generate_spec generate; /* JOB_GENERATE */
    struct diffusion_spec diffusion; /* JOB_DIFFUSION */

    enum trainable_kind trainable;
    int lora_rank;              /* TRAIN_LORA: rank r */
    struct lora_spec lora;      /* TRAIN_LORA: targets, dropout, DoRA, adapter dtype */
    struct quant_spec quant;    /* quantized base weights (frozen) */

    int nextras;
    struct extra_spec extras[SPEC_MAX_EXTRAS];

    uint32_t faults;            /* bit (1u << enum fault_id) */
    struct switch_params fault_params[FAULT_COUNT]; /* read through the accessors of faults.h */
    uint32_t fixes;             /* bit (1u << enum fix_id) */
    struct switch_params fix_params[FIX_COUNT];     /* read through the accessors of fixes.h */

    uint64_t cublas_workspace_bytes; /* per stream, allocated at its first GEMM, never freed */
    int streams;                /* CUDA streams: stream 0 trains; with 2+, eval runs on stream 1 */

    /* How transformers is called, and what a GPU adds that a meta-device recording cannot see. */
    bool use_cache;             /* the model builds its KV cache in training (transformers' default; off
                                 * under gradient checkpointing, as transformers turns it off) */
    bool padding;               /* the batch has padding: an attention mask is built (masking_utils) */
    bool kernel_scratch;        /* kernels' own temporaries from the caching allocator (default on; off:
                                 * what a meta-device recording sees, for the conformance test) */

    struct robust_spec robust;  /* on an OOM: fail, or halve the batch and retry */
    struct parallel_spec parallel; /* DDP, ZeRO or FSDP: one rank's share */
};

#define CUBLAS_WORKSPACE_HOPPER_BYTES (32ULL * 1024 * 1024) /* sm_90, sm_100, sm_120 (RTX 5090) */
#define CUBLAS_WORKSPACE_DEFAULT_BYTES 8519680ULL          /* :4096:2:16:8 on other cards */

/* Defaults: tiny-transformer, batch 8, seq 128, fp32 everywhere, AdamW foreach, set_to_none,
 * 1 step, no EMA, no eval, full training, no extras, no faults or fixes, 8,519,680 B workspace,
 * 1 stream, KV cache on, no padding, kernel scratch on; fault and fix parameters at their rows'
 * defaults. */
void job_spec_init(struct job_spec *spec);
/* Expands model.preset (if set) and checks the job is coherent; messages name the field. */
int job_spec_validate(struct job_spec *spec, struct err *e);
/* Every extra of that role resident on the device, or kept on the CPU. */
void job_spec_place_extras(struct job_spec *spec, enum extra_role role, bool on_device);

/* Name tables for the loader: *_name returns "?" when out of range, *_from_name -1 when unknown. */
const char *family_name(enum model_family f);
int family_from_name(const char *s);
const char *norm_name(enum norm_kind n);
int norm_from_name(const char *s);
const char *norm_place_name(enum norm_place p);
int norm_place_from_name(const char *s);
const char *ffn_name(enum ffn_kind f);
int ffn_from_name(const char *s);
const char *act_name(enum act_kind a);
int act_from_name(const char *s);
const char *pos_name(enum pos_kind p);
int pos_from_name(const char *s);
const char *attn_name(enum attn_impl a);
int attn_from_name(const char *s);
const char *optimizer_name(enum optimizer_kind o);
int optimizer_from_name(const char *s);
const char *trainable_name(enum trainable_kind t);
int trainable_from_name(const char *s);
const char *ema_place_name(enum ema_place p);
int ema_place_from_name(const char *s);
const char *on_oom_name(enum on_oom_policy p);
int on_oom_from_name(const char *s);
const char *extra_role_name(enum extra_role r);
int extra_role_from_name(const char *s);
const char *parallel_strategy_name(enum parallel_strategy p);
const char *fsdp_backward_prefetch_name(enum fsdp_backward_prefetch p);
int fsdp_backward_prefetch_from_name(const char *s);
const char *nccl_transport_name(enum nccl_transport t);
int nccl_transport_from_name(const char *s);
int parallel_strategy_from_name(const char *s);
/* job.parallel's defaults (DeepSpeed's and PyTorch's) and its checks (workload/parallel.c). */
void parallel_spec_init(struct parallel_spec *p);
int parallel_spec_check(const struct job_spec *s, struct err *e);
const char *job_kind_name(enum job_kind k);
int job_kind_from_name(const char *s);
const char *cache_kind_name(enum cache_kind c);
int cache_kind_from_name(const char *s);
const char *quant_name(enum quant_kind q);
int quant_from_name(const char *s);
/* Checks of the quantization and LoRA settings (quant.c, lora.c), messages naming the key. */
int quant_spec_check(const struct job_spec *s, struct err *e);
int lora_spec_check(const struct job_spec *s, struct err *e);
const char *offload_name(enum offload_kind o);
int offload_from_name(const char *s);
const char *vae_upcast_name(enum vae_upcast_kind v);
int vae_upcast_from_name(const char *s);
/* The dtypes of weights and compute: fp32, bf16 and fp16, the first SPEC_FLOAT_DTYPES of enum dtype;
 * float_dtype_at(i) names the i-th (for key rows). */
#define SPEC_FLOAT_DTYPES (DT_F16 + 1)
const char *float_dtype_at(int i);

/* Presets (presets.c). */
int preset_apply(struct model_spec *m, const char *name, struct err *e); /* -1 if unknown */
int64_t preset_param_count(const char *name);                              /* -1 if unknown */
void presets_print(FILE *out);
/* Parameters of a model as the generator enumerates them (-1 and e set on a bad spec). */
int64_t model_param_count(const struct model_spec *m, struct err *e);

/* Model families (models/families.c). Checks that the model has the dimensions its family needs (the
 * family's "minimal keys": model.groups for a UNet, ...) and fills in what a zero dimension means
 * (kv_heads: heads; head_dim: hidden / heads; decoder_layers: layers; rel_buckets: 32; UNet
 * time_embed_input: channels[0], vae_scale: 8): the one place those defaults are written. With a job,
 * also checks the job's shapes against the model (seq_len within learned positions, an image side the
 * levels can halve). Errors name the key ("model.groups ...", "seq_len ..."); m is unchanged then. */
int model_spec_resolve(struct model_spec *m, const struct job_spec *job, struct err *e);
/* The image side a ViT or CLIP vision model's position table was made for (patch_size times the patches
 * per side), or 0 for other families. */
int model_image_size(const struct model_spec *m);
/* The keys a family needs, for the docs ("`layers`, `hidden`, ...; `max_positions` with ..."). */
void family_needs_text(enum model_family family, char *buf, size_t len);

static inline bool spec_has_fault(const struct job_spec *s, enum fault_id f) { return (s->faults >> f) & 1u; }
static inline bool spec_has_fix(const struct job_spec *s, enum fix_id f) { return (s->fixes >> f) & 1u; }

#ifdef __cplusplus
}
#endif

#endif
