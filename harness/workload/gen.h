/* gen.h: internal state of the workload generator, shared by its files (not a public interface).
 *
 * The generator is a tensor-liveness simulation. Tensors live in a slab with a storage reference
 * count (FREE is emitted when it drops to zero) and an autograd identity that tape nodes hold until
 * backward consumes them. Model families describe themselves once, through the nn_* layer calls:
 * in GEN_PARAMS mode those calls only register parameters (tag, shape); in GEN_RUN mode they take
 * the parameters back in the same order and emit ALLOC/KERNEL/FREE ops, recording a tape node with
 * the tensors autograd saves. Backward walks the tape in reverse. */
#ifndef OOMLAB_WORKLOAD_GEN_H
#define OOMLAB_WORKLOAD_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "program/program.h"
#include "workload/spec.h"

typedef int32_t tref; /* tensor handle (slab index); TNONE = no tensor */
#define TNONE (-1)
#define TMAX_DIMS 4

enum gen_mode { GEN_PARAMS, GEN_RUN };

/* LoRA on a projection: none, or on its whole output. */
enum lora_target { LORA_NONE, LORA_FULL };

struct tensor {
    uint64_t id;          /* op-program id */
    uint64_t bytes;
    int64_t dims[TMAX_DIMS];
    uint8_t ndim, dtype, category;
    bool requires_grad;
    bool unbacked;        /* storage freed while references remain (a resharded parameter) */
    int32_t refs;         /* storage references; FREE at zero */
    int32_t holds;        /* tape nodes naming this tensor */
    tref grad;            /* gradient accumulated during backward */
    union {               /* 72 bytes, not 80: flux.1-dev's slab peaks near 6,000 tensors */
        int32_t param;     /* in use: parameter index of a sharded parameter's gathered copy, or -1 */
        int32_t next_free; /* on the free list (refs -1): the next free slot */
    };
};

struct param {
    const char *tag;      /* "decoder.block.3.layer.2.DenseReluDense.wi_0.weight" */
    const char *module;   /* "decoder.block.3.layer.2.DenseReluDense.wi_0" */
    int64_t dims[2];      /* rows, cols (cols 1 for vectors); conv weights flattened to [out, in*k*k] */
    int64_t numel;
    bool trainable;
    bool head;            /* trained under a linear probe */
    bool lora;            /* a LoRA adapter */
    bool quant;           /* a bitsandbytes-quantized weight (quant.c): data holds its packed codes */
    bool buffer;          /* a persistent buffer (register_buffer): loaded with the weights, not a parameter */
    int32_t module_id;    /* which module (main model or an extra) */
    tref data;            /* weight on the device */
    tref grad;            /* .grad */
    tref state[4];        /* optimizer state (8-bit AdamW: m, v, m_absmax, v_absmax) */
    tref master;          /* fp32 master copy */
    tref ema;             /* EMA shadow */
    tref cast;            /* autocast cache for the current forward */
    tref stale;           /* a reference kept to an old copy (duplicate_dtype_conversion) */
    tref qstate[5];       /* quantized: absmax (f32, or u8 codes), nested absmax, offset, code table, nested code */
};

struct gen;
struct ckpt;
typedef tref (*layer_fn)(struct gen *g, const struct ckpt *c, tref x);

/* A checkpointed segment: enough to run its forward again in backward. */
struct ckpt {
    layer_fn fn;
    const void *model;    /* family context (lives for the whole generation) */
    int layer;            /* first layer of the segment */
    int count;            /* layers in the segment */
    int32_t cursor;       /* parameter cursor at the segment's start */
#define CKPT_EXTRAS 5
    tref extra[CKPT_EXTRAS]; /* other inputs (mask, position bias, rotary tables, encoder states) */
    const char *scope;    /* module scope at the checkpoint, so recomputed ops keep their tags */
    bool autocast;        /* the forward ran under autocast: so does the recompute (torch.utils.checkpoint) */
};

enum node_kind {
    N_LINEAR, N_EMBED, N_NORM, N_ACT, N_DROPOUT, N_ADD, N_MUL, N_CAST, N_ATTN, N_CONV, N_UPSAMPLE,
    N_CE, N_MEAN, N_SCALE, N_GLU, N_CKPT, N_TRANSPOSE, N_EXPAND, N_SLICE, N_CONCAT, N_ROPE,
    N_PARAM_CAT, N_PARAM_ADD,
    N_FUSED_CE, /* fused_ce.c */
    N_GATED,    /* compiled_act.c */
    N_DORA,     /* dora.c: DoRA's magnitude / weight_norm */
    N_SOFTMAX, N_INDEX_ADD, /* models/moe.c */
    N_TP_GATHER, N_TP_SPLIT, N_TP_CE, N_TP_MASK /* parallel_tensor.c */
};

#define NODE_MAX_SAVED 8
#define NODE_MAX_IN (1 + CKPT_EXTRAS) /* a checkpoint's input and extras */

struct node {            /* 152 bytes, no padding: the tape of a step holds thousands */
    uint8_t kind;
    uint8_t dtype;        /* compute dtype (attention) */
    uint16_t flags;
    float f;              /* op-specific scalar (dropout p, scale alpha, attention scale, sub's beta) */
    int32_t kv_heads;     /* attention: key/value heads before repeat_kv */
    tref out;
    tref in[NODE_MAX_IN];
    tref saved[NODE_MAX_SAVED];
    int32_t param[2];     /* weight, bias */
    const char *tag;
    union {                /* by kind: a tape of flux.1-dev holds thousands of nodes, few of them checkpoints */
        int64_t a[8];      /* op-specific dims */
        struct ckpt ck;    /* N_CKPT's segment, run again in backward (no dims of its own) */
    };
};

struct strpool;
struct param_entry;

/* References the generator keeps for a while, as the training loop's Python objects keep them. */
struct tref_list {
    tref *v;
    int32_t n, cap;
};

struct gen {
    struct job_spec spec;      /* the resolved spec: fixes and faults folded in where they are settings */
    enum gen_mode mode;
    struct op_sink *sink;
    struct err *e;
    int failed;

    struct strpool *pool;
    char scope[512];
    int scope_len;
    int scope_marks[32];       /* scope_len before each gen_push, so gen_pop undoes parts with dots */
    int scope_depth;
    const char *scope_tag;     /* the scope interned (gen_tag(g, NULL)), until the scope changes; NULL: not yet */

    struct param *params;
    int32_t nparams, cursor;
    size_t cap_params;         /* these three arrays grow by map_array_grow (map_array.h) */
    struct param_entry *param_index; /* tag -> parameter, built at the first out-of-order take */
    int32_t module_id;         /* module being registered or run */
    bool in_head;              /* registering the head (linear probe) */
    enum lora_target lora;     /* the attention projection being registered or run gets a LoRA adapter */
    uint32_t lora_matched;     /* bit i: job lora.targets[i] matched a linear module */

    struct tensor *t;
    int32_t nt, free_t;
    size_t cap_t;
    uint64_t next_id;

    struct node *tape;
    int32_t ntape;
    size_t cap_tape;

    bool grad_enabled;
    bool training;             /* model.train(): dropout active */
    bool recomputing;          /* inside a checkpointed segment's recompute */
    bool checkpointing;        /* gradient checkpointing on for the model being run */
    bool autocast;             /* inside an autocast region */
    enum dtype act_dtype;      /* dtype of the model's inputs (its parameter dtype) */
    tref ctx_override;         /* UNet, MMDiT: text-encoder output to use as encoder_hidden_states */
    tref pooled_override;      /* MMDiT: pooled text embedding from a text encoder (pooled_projections) */
    int stream;
    bool workspace_done[8];
    int64_t live_bytes;        /* sum of live tensor bytes (for diagnostics) */
    int64_t opt_steps;         /* optimizer steps taken (the step number the optimizer kernels see) */
    struct tref_list forward_held; /* the model output's KV cache: dropped with the output after the loss */
    struct tref_list step_held;    /* the batch: lives until the step ends */
    struct parallel *par;          /* job.parallel: this rank's buckets and partitions (parallel.c) */
    struct pipeline *pipe;         /* job.parallel.pipeline_parallel: this stage's schedule (parallel_pipeline.c) */
    int64_t image_w;           /* UNet: pixels across when the image is not square (job.diffusion.width; 0 =
                                * the batch's image side) */
    int attn_slice;            /* UNet attention through diffusers' SlicedAttnProcessor: rows of batch x heads
                                * per slice, ATTN_SLICE_AUTO or ATTN_SLICE_MAX; 0 = the model's own */
    /* Called with each parameter a forward takes (sequential CPU offload, diffusion_job.c), or NULL. */
    void (*on_take)(struct gen *g, int32_t p, void *ctx);
    void *on_take_ctx;
    /* Where gen.c builds the ALLOC and FREE ops of tensors: only the header changes, the kernel part is never
     * written and stays zero (clearing a whole struct op, some 200 bytes, would cost more than the rest). */
    struct op mem_op;
    struct op kern_op;        /* where kernel_emit.c builds KERNEL ops: its kernel part written whole, the rest zero */
    const char *grad_sum_tag; /* "autograd.grad_sum", interned at its first use: every gradient sum is tagged so */
};

/* gen.c: context, strings, tensors, op emission */
const char *gen_intern(struct gen *g, const char *s);
const char *gen_tag(struct gen *g, const char *leaf);          /* scope + "." + leaf, interned */
/* Whether s is the string gen_tag(g, leaf) would give, compared in place (no copy, no hash). */
bool gen_tag_is(const struct gen *g, const char *s, const char *leaf);
void gen_push(struct gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* a + "." + b in buf (len >= 1; cut to len - 1 characters as snprintf cuts), returned: a name made per
 * op, without printf. */
const char *gen_dotted(char *buf, size_t len, const char *a, const char *b);
void gen_pop(struct gen *g);
/* op to the sink in GEN_RUN mode: 0, or -1 once the generator has failed. Inline: every op passes here. */
static inline int gen_emit(struct gen *g, const struct op *op)
{
    if (g->failed || g->mode != GEN_RUN)
        return g->failed ? -1 : 0;
    if (g->sink->emit(g->sink, op, g->e) < 0) {
        g->failed = 1;
        return -1;
    }
    return 0;
}
int gen_phase(struct gen *g, const char *name);
int gen_mark(struct gen *g, const char *label);
/* Takes over the reference to x until gen_release_held(list). */
void gen_hold(struct gen *g, struct tref_list *list, tref x);
void gen_release_held(struct gen *g, struct tref_list *list);
tref t_new(struct gen *g, const int64_t *dims, int ndim, enum dtype dt, enum category cat, const char *tag);
tref t_new2(struct gen *g, int64_t a, int64_t b, enum dtype dt, enum category cat, const char *tag);
/* An [a, b] tensor in unified memory (cudaMallocManaged), outside the caching allocator. */
tref t_new_managed(struct gen *g, int64_t a, int64_t b, enum dtype dt, enum category cat, const char *tag);
tref t_like(struct gen *g, tref x, enum dtype dt, enum category cat, const char *tag);
/* A new reference to x (TNONE: nothing), returned. Inline: autograd takes one for every tensor it saves. */
static inline tref t_ref(struct gen *g, tref x)
{
    if (x != TNONE)
        g->t[x].refs++;
    return x;
}
/* x's storage freed, or allocated again (bytes, a new id), while references to x remain: a sharded
 * parameter's gathered copy, freed after use and gathered again (FSDP, ZeRO-3). */
void t_storage_free(struct gen *g, tref x);
void t_storage_alloc(struct gen *g, tref x, uint64_t bytes);
/* t_release past the last reference (refs already taken down): x's FREE, and its slot back once nothing names it. */
void t_release_last(struct gen *g, tref x);
/* Drops a reference to x (TNONE: nothing). Inline: most drops are not the last. */
static inline void t_release(struct gen *g, tref x)
{
    if (x != TNONE && --g->t[x].refs <= 0)
        t_release_last(g, x);
}
static inline struct tensor *T(struct gen *g, tref x) { return &g->t[x]; }
/* Inline: most kernels take an element count. */
static inline int64_t t_numel(const struct gen *g, tref x)
{
    const struct tensor *t = &g->t[x];
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->dims[i];
    return n;
}
static inline bool t_rg(const struct gen *g, tref x) { return x != TNONE && g->t[x].requires_grad; }
/* kernel_emit.c: KERNEL ops in kernels.h's contract (tensors in the documented order, all live) */
void kern(struct gen *g, enum kernel_id k, enum dtype dt, const int64_t *dims, int ndims, const tref *ts, int nts,
          const float *fparam, int nfparam, const char *tag);
/* C = op(A) op(B), alpha 1, beta 0; ta/tb transpose A/B. */
void kern_gemm(struct gen *g, int64_t m, int64_t n, int64_t k, bool ta, bool tb, tref a, tref b, tref c,
               const char *tag);
void kern_cast(struct gen *g, tref x, tref y, const char *tag);              /* y = x in y's dtype */
void kern_fill(struct gen *g, tref y, float value, const char *tag);
void kern_scale(struct gen *g, tref x, tref y, float alpha, const char *tag); /* y = alpha x (y may be x) */
void kern_add(struct gen *g, tref a, tref b, tref y, float alpha, float beta, const char *tag);
/* {outer, repeat, inner} kernels (K_MUL_BCAST, K_ADD_BCAST, K_EXPAND, K_REDUCE_SUM). */
void kern_bcast(struct gen *g, enum kernel_id k, tref a, tref b, tref y, const int64_t *ori, float alpha, float beta,
                const char *tag);
void kern_copy_blocks(struct gen *g, tref x, tref y, const int64_t *blocks, bool accumulate, const char *tag);
/* Real values for a tensor the job gets from outside (weights from a checkpoint, a batch): seeded
 * uniform floats in [lo, hi), or token ids in [0, high). */
void kern_init_uniform(struct gen *g, tref y, float lo, float hi, const char *tag);
void kern_init_ids(struct gen *g, tref y, int64_t high, const char *tag);

/* generate.c: the checkpoint's values of a parameter, as the copy to the device lands them */
void param_load_values(struct gen *g, const struct param *p, tref x);

/* params.c: registration and the parameter cursor */
int32_t param_add(struct gen *g, const char *leaf, int64_t rows, int64_t cols);
/* A persistent buffer: on the device with the weights (cast with them), never trained or counted. */
int32_t param_add_buffer(struct gen *g, const char *leaf, int64_t rows, int64_t cols);
/* GEN_RUN: the parameter registered as scope + "." + leaf (the cursor's, when it is next in order). */
int32_t param_take(struct gen *g, const char *leaf);
void param_index_free(struct gen *g);
bool param_trains(const struct gen *g, int32_t p);

/* autograd.c: tape and backward */
struct node *tape_push(struct gen *g, enum node_kind kind, tref out, const char *tag);
void node_save(struct gen *g, struct node *n, int slot, tref x);
void node_input(struct gen *g, struct node *n, int slot, tref x);
int backward(struct gen *g, tref loss, int32_t base);
int backward_from(struct gen *g, tref out, tref gy, int32_t base); /* out's gradient given (consumed) */
void tape_drop(struct gen *g, int32_t base); /* release nodes without running backward */
void grad_accumulate(struct gen *g, tref x, tref gx);              /* consumes gx */
/* Where a parameter gradient goes: the .grad itself on the first backward (stolen), else a temp that
 * pgrad_end adds into .grad and frees. `like` gives the dtype the kernel produces. */
tref pgrad_begin(struct gen *g, int32_t p, enum dtype computed);
void pgrad_end(struct gen *g, int32_t p, tref dst);
void t_unhold(struct gen *g, tref x);
void nn_backward(struct gen *g, struct node *n, tref *gy); /* may release *gy early (then TNONE) */

/* nn.c: layers (forward and their backward); norms in nn_norm.c */
/* A batch input with real values: floats uniform in [-1, 1), or (nn_ids) int64 ids in [0, high). */
tref nn_input(struct gen *g, const int64_t *dims, int ndim, enum dtype dt, const char *leaf);
tref nn_ids(struct gen *g, const int64_t *dims, int ndim, int64_t high, const char *leaf);
tref nn_linear(struct gen *g, const char *name, tref x, int64_t in, int64_t out, bool bias);
tref nn_linear_tied(struct gen *g, const char *name, tref x, int32_t weight); /* weight shared, no bias */
tref nn_linear_param(struct gen *g, const char *tag, tref x, int32_t weight);  /* a taken weight, no bias */
tref nn_embedding(struct gen *g, const char *name, tref ids, int64_t rows, int64_t dim, int32_t shared);
/* An embedding's weight registered (or taken) ahead of its lookup, for modules whose parameters are in
 * another order than their forward uses them; pass it to nn_embedding as `shared`. */
int32_t nn_embedding_param(struct gen *g, const char *name, int64_t rows, int64_t dim);
tref nn_norm(struct gen *g, const char *name, tref x, int64_t channels, enum norm_kind kind, bool bias, int64_t groups);
/* diffusers' RMSNorm (models/normalization.py): transformers' composite whose product multiplies the
 * input itself by the fp32 rsqrt, so autograd keeps the input too. */
tref nn_rmsnorm_diffusers(struct gen *g, const char *name, tref x, int64_t channels);
/* LayerNorm without weight or bias (elementwise_affine=False): no parameters to register. */
tref nn_layernorm_plain(struct gen *g, const char *name, tref x, int64_t channels);
tref nn_act(struct gen *g, const char *name, tref x, enum act_kind act);
tref nn_dropout(struct gen *g, const char *name, tref x, float p);
/* x + y, x - y, x * y; the smaller operand broadcasts (its dims aligned to the left or the right). */
tref nn_add(struct gen *g, const char *name, tref x, tref y);
tref nn_sub(struct gen *g, const char *name, tref x, tref y);
tref nn_mul(struct gen *g, const char *name, tref x, tref y);
tref nn_cast(struct gen *g, const char *name, tref x, enum dtype dt);
tref nn_conv(struct gen *g, const char *name, tref x, int64_t cin, int64_t cout, int k, int stride, bool bias);
/* The same with an explicit zero padding (nn_conv pads k / 2: "same" for odd kernels). */
tref nn_conv_pad(struct gen *g, const char *name, tref x, int64_t cin, int64_t cout, int k, int stride, int pad,
                 bool bias);
tref nn_upsample(struct gen *g, const char *name, tref x);
tref nn_cross_entropy(struct gen *g, const char *name, tref logits, tref labels);
tref nn_scale(struct gen *g, const char *name, tref x, float alpha);
/* Gated unit on one projection p [.., 2n]: act(p[.., n:]) * p[.., :n] (GEGLU); saves p and act. */
tref nn_glu(struct gen *g, const char *name, tref p, enum act_kind act);
/* Layout ops, each a new tensor of shape dims (ndim): x [batch, rows, cols] transposed; x [outer, inner]
 * broadcast to [outer, repeat, inner]; the mean of x [outer, repeat, inner] over repeat; blocks of
 * `len` elements of x (every src_stride from src_off, `outer` times) gathered; and the concatenation
 * of two tensors of the same rank along dimension 1 ([B, C, H, W] along C, [B, S, D] along S), or
 * (nn_concat_last) along their last dimension. */
tref nn_transpose(struct gen *g, const char *name, tref x, int64_t batch, int64_t rows, int64_t cols,
                  const int64_t *dims, int ndim);
tref nn_expand(struct gen *g, const char *name, tref x, const int64_t *ori, const int64_t *dims, int ndim);
tref nn_mean(struct gen *g, const char *name, tref x, const int64_t *ori, const int64_t *dims, int ndim);
tref nn_slice(struct gen *g, const char *name, tref x, const int64_t *dims, int ndim, int64_t outer, int64_t len,
              int64_t src_stride, int64_t src_off);
tref nn_concat(struct gen *g, const char *name, tref x, tref y);
tref nn_concat_last(struct gen *g, const char *name, tref x, tref y);
/* Attention (nn_attention.c). q is the query projection [B, S, heads*head_dim], or GPT-2's fused
 * qkv [B, S, (heads + 2 kv_heads) head_dim] when k and v are TNONE; k and v are the key and value
 * projections [B, Sk, kv_heads*head_dim], or one fused k/v projection [B, Sk, 2 kv_heads head_dim]
 * passed as both. The caller keeps its references and frees the projections where the library's
 * module would. eager = transformers' eager_attention_forward (scores, scaling, bias and mask
 * additions, softmax, dropout, P v, merged heads: each a tensor); SDPA = flash or memory-efficient. */
struct attn_args {
    int64_t heads, kv_heads, head_dim;
    bool causal;
    bool eager;
    float dropout;
    float scale;          /* score scale (0 = 1/sqrt(head_dim); T5: 1) */
    tref bias;            /* position bias [1 or B, heads, S, Sk] added to the scores (T5), or TNONE */
    tref mask;            /* additive attention mask [B, 1, S, Sk] (masking_utils), or TNONE */
    tref cache;           /* the KV cache's copies of k and v (nn_kv_cache), or TNONE */
    bool rotary;          /* q and k come from nn_rotary (their gradients are laid out by its backward) */
    bool scale_op;        /* eager: scores scaled by a separate multiply (a second score-sized tensor) */
    bool upcast_softmax;  /* eager: softmax in fp32 then cast back (Llama) */
    float softcap;        /* eager: scores soft-capped, cap * tanh(scores / cap) (Gemma2; 0 = none) */
};
tref nn_attention(struct gen *g, const char *name, tref q, tref k, tref v, const struct attn_args *a);
/* The KV cache's copies of the keys and values (DynamicCache.update on an empty layer), packed
 * [B, Sk, 2 kv_heads head_dim]: of separate k and v, or of a fused qkv (k == v) whose rows hold
 * q_heads query heads first. Not recorded: the attention that reads it owns its gradient path. */
tref nn_kv_cache(struct gen *g, const char *name, tref k, tref v, int64_t q_heads, int64_t kv_heads, int64_t head_dim);
/* The (1, S, head_dim) cos and sin tables of a rotary embedding in dtype dt, made once per forward. */
void nn_rotary_tables(struct gen *g, int64_t s, int64_t head_dim, enum dtype dt, tref *cos, tref *sin);
/* x [B, S, heads*head_dim] rotated (apply_rotary_pos_emb's x * cos + rotate_half(x) * sin). */
tref nn_rotary(struct gen *g, const char *name, tref x, int64_t heads, int64_t head_dim, tref cos, tref sin);
/* The same rotation as diffusers' apply_rotary_emb (embeddings.py, use_real): pairs of x negated and
 * stacked, then (x.float() * cos + x_rotated.float() * sin).to(x.dtype), its temporaries in fp32. */
tref nn_rotary_fp32(struct gen *g, const char *name, tref x, int64_t heads, int64_t head_dim, tref cos, tref sin);
/* Helpers the layer files share (nn.c). */
bool nn_records(const struct gen *g, bool any_input_grad);
enum dtype nn_compute_dtype(const struct gen *g, tref x);
tref nn_as_dtype(struct gen *g, const char *name, tref x, enum dtype dt); /* x, or a recorded cast */
/* A parameter in dtype dt for an op autocast runs in fp32 (norms): a new reference to it, or an
 * uncached cast (autocast caches only casts to the 16-bit dtype). The caller releases it. */
tref nn_param_as(struct gen *g, int32_t p, enum dtype dt);
/* [outer, repeat, inner] of big such that small broadcasts along repeat; false if it does not. */
bool nn_bcast_split(const struct gen *g, tref big, tref small, int64_t *ori);
tref nn_grad_to_shape(struct gen *g, tref x, tref gy, const char *tag); /* gy summed/cast to x's shape */
float nn_loss_scale(void);                                               /* GradScaler's scale */
/* Backward functions that release the incoming gradient early (as the engine does once the node that
 * consumed it has run) take it by address and set it to TNONE. */
void nn_attention_backward(struct gen *g, struct node *n, tref *gy); /* nn_attention.c */
void nn_rotary_backward(struct gen *g, struct node *n, tref *gy);
void nn_norm_backward(struct gen *g, struct node *n, tref *gy);      /* nn_norm.c */
void nn_act_backward(struct gen *g, struct node *n, tref *gy);       /* nn.c */
void nn_layout_backward(struct gen *g, const struct node *n, tref gy);    /* nn_layout.c */
void nn_moe_backward(struct gen *g, const struct node *n, tref gy);       /* models/moe.c */
/* Parameters used as tensors (nn_param.c). x [B, N, dim] after a parameter `name` [1, dim] broadcast over
 * the batch: torch.cat((param.expand(B, -1, -1), x), dim=1), a new [B, 1 + N, dim] tensor (ViT's cls_token).
 * And x [B, rows, cols] + a parameter `name` [1, rows, cols] (ViT's position_embeddings). Both register the
 * parameter in GEN_PARAMS mode; the output's dtype is the promotion of x's and the parameter's. */
tref nn_param_prepend(struct gen *g, const char *name, tref x, int64_t dim);
tref nn_param_add(struct gen *g, const char *name, tref x, int64_t rows, int64_t cols);
void nn_param_backward(struct gen *g, const struct node *n, tref gy);
void nn_fused_ce_backward(struct gen *g, struct node *n, tref gy);       /* fused_ce.c */
void nn_gated_compiled_backward(struct gen *g, const struct node *n, tref gy); /* compiled_act.c */
/* Runs `count` layers from `layer` through fn, checkpointed (inputs kept, recomputed in backward). */
tref nn_checkpoint(struct gen *g, const struct ckpt *c, tref x);
/* Leaving an autocast region: its cached 16-bit weight casts are released. */
void nn_end_autocast(struct gen *g);

/* quant.c: bitsandbytes 4-bit weights. quant_applies: the linear being registered is quantized (a
 * decoder layer's linear in the trained model, not the head). quant_load puts a weight on the device
 * as Linear4bit holds it; quant_weight dequantizes it to a new tensor of dtype dt (freed by the caller
 * after its matmul), as dequantize_4bit does in MatMul4Bit's forward and again in its backward. */
bool quant_applies(const struct gen *g);
void quant_load(struct gen *g, struct param *p, enum dtype load_dtype);
tref quant_weight(struct gen *g, int32_t p, enum dtype dt, const char *tag);
/* LLM.int8's MatMul8bitLt forward of x through weight p: y in x's dtype; *saved is what autograd keeps. */
tref quant_int8_forward(struct gen *g, const char *tag, tref x, int32_t p, tref *saved);
/* peft's prepare_model_for_kbit_training (job quantization.prepare_kbit): the module's parameters that
 * are neither quantized nor yet on the device as fp32 are cast to fp32 in place. */
void quant_prepare_kbit(struct gen *g, int32_t first, int32_t count);

/* lora.c: PEFT's LoRA. lora_wanted: the linear module in scope gets an adapter; lora_register
 * adds its parameters; lora_forward adds lora_B(lora_A(dropout(x))) * scaling to y (consumes y). */
bool lora_wanted(struct gen *g);
void lora_register(struct gen *g, int64_t in, int64_t out);
tref lora_forward(struct gen *g, tref x, tref y, int32_t pw, int32_t pb);
/* get_peft_model after from_pretrained: the module's adapters land on the device in their dtype. */
void lora_load(struct gen *g, int32_t first, int32_t count, enum dtype model_dtype);
/* After enumeration: every lora_targets name matched a linear module (else ERR_INPUT naming it). */
int lora_check_targets(const struct gen *g, struct err *e);
/* dora.c: DoRA (use_dora). dora_register adds the magnitude vector; dora_init sets it at load (update_layer);
 * dora_forward returns y + the DoRA output (consumes y); dora_backward: the magnitude's gradient. */
void dora_register(struct gen *g, int64_t out);
void dora_init(struct gen *g, int32_t pw, int32_t pa, int32_t pb, int32_t pm);
tref dora_forward(struct gen *g, tref x, tref y, int32_t pw, int32_t pbias);
void dora_backward(struct gen *g, const struct node *n, tref gy);

/* scratch.c: kernels' own temporaries from the caching allocator (job kernel_scratch), allocated before
 * an op's kernel and freed with scratch_free after it. */
#define SCRATCH_MAX 16
struct scratch_list {
    tref t[SCRATCH_MAX];
    int n;
};
void scratch_free(struct gen *g, struct scratch_list *l);
void scratch_embedding_backward(struct gen *g, int64_t n, int64_t rows, int64_t dim, const char *tag,
                                struct scratch_list *l);
void scratch_flash_backward(struct gen *g, int64_t b, int64_t h, int64_t kv, int64_t sq, int64_t sk, int64_t d,
                            enum dtype dt, const char *tag, struct scratch_list *l);
void scratch_efficient_backward(struct gen *g, int64_t b, int64_t h, int64_t m, int64_t k, enum dtype dt,
                                const char *tag, struct scratch_list *l);
void scratch_layernorm_backward(struct gen *g, int64_t rows, int64_t n, bool beta, enum dtype dt, const char *tag,
                                struct scratch_list *l);

/* parallel.c: one rank of DDP or ZeRO, hooked where the training loop's library acts. parallel_setup
 * runs after the load (DDP's Reducer, ZeRO's optimizer); parallel_optimizer_step and
 * parallel_zero_grad return false when the plain optimizer's step or zero_grad runs instead. */
int parallel_setup(struct gen *g);
void parallel_free(struct gen *g);
void parallel_forward_begin(struct gen *g);
void parallel_backward_begin(struct gen *g);
void parallel_grad_ready(struct gen *g, int32_t p);
void parallel_backward_end(struct gen *g);
bool parallel_optimizer_step(struct gen *g);
bool parallel_zero_grad(struct gen *g);
/* Sharded parameters (parallel_shard.c): a loaded parameter replaced by this rank's shard; a use of a
 * parameter's gathered copy by a kernel, or by a node's backward, gathers its unit first. */
void parallel_shard_loaded(struct gen *g, int32_t p);
void parallel_param_use(struct gen *g, int32_t p);

/* dtype of an op's output from its inputs (promotion; autocast handled by each op) */
enum dtype gen_promote(enum dtype a, enum dtype b);

#endif
