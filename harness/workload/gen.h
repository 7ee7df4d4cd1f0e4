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
#include <stdint.h>

#include "program/program.h"
#include "workload/spec.h"

typedef int32_t tref; /* tensor handle (slab index); TNONE = no tensor */
#define TNONE (-1)
#define TMAX_DIMS 4

/* Kernels the generator launches, emitted as WORKLOAD_KERNEL_BASE + this (not yet kernels.h ids). */
enum wl_kernel {
    WK_GEMM,        /* dims M, N, K; tensors A, B, C */
    WK_BGEMM,       /* dims batch, M, N, K */
    WK_CONV2D,      /* dims N, Cin, H, W, Cout, k, stride, pad */
    WK_CONV2D_BWD,  /* same dims; tensors dY, X|W, dX|dW */
    WK_ATTENTION,   /* fused SDPA: dims B, heads, Sq, Sk, head_dim, causal */
    WK_ATTENTION_BWD,
    WK_SOFTMAX,     /* dims rows, cols */
    WK_SOFTMAX_BWD,
    WK_LAYERNORM,   /* dims rows, cols */
    WK_RMSNORM,
    WK_GROUPNORM,   /* dims N, C, HW, groups */
    WK_NORM_BWD,
    WK_ACT,         /* dims n, act kind */
    WK_ACT_BWD,
    WK_DROPOUT,     /* dims n; fparam p */
    WK_DROPOUT_BWD,
    WK_ADD,         /* dims n */
    WK_MUL,
    WK_CAST,        /* dims n, from dtype */
    WK_COPY,
    WK_EMBEDDING,   /* dims tokens, dim, vocab */
    WK_EMBEDDING_BWD,
    WK_UPSAMPLE,    /* dims N, C, H, W (nearest x2) */
    WK_UPSAMPLE_BWD,
    WK_CROSS_ENTROPY, /* dims rows, vocab */
    WK_CROSS_ENTROPY_BWD,
    WK_REDUCE,      /* dims rows, cols (bias grads, pooling) */
    WK_FILL,        /* dims n */
    WK_SGD,         /* dims n; tensors param, grad, momentum */
    WK_ADAMW,       /* dims n; tensors param, grad, m, v */
    WK_ADAMW_8BIT,  /* dims n, blocks; tensors param, grad, m, v, absmax_m, absmax_v */
    WK_ADAFACTOR,   /* dims rows, cols; tensors param, grad, row, col */
    WK_EMA,         /* dims n; tensors ema, param */
    WK_COUNT
};

enum gen_mode { GEN_PARAMS, GEN_RUN };

struct tensor {
    uint64_t id;          /* op-program id */
    uint64_t bytes;
    int64_t dims[TMAX_DIMS];
    uint8_t ndim, dtype, category;
    bool requires_grad;
    int32_t refs;         /* storage references; FREE at zero */
    int32_t holds;        /* tape nodes naming this tensor */
    tref grad;            /* gradient accumulated during backward */
    int32_t param;        /* parameter index, or -1 */
    int32_t next_free;
};

struct param {
    const char *tag;      /* "decoder.block.3.layer.2.DenseReluDense.wi_0.weight" */
    const char *module;   /* "decoder.block.3.layer.2.DenseReluDense.wi_0" */
    int64_t dims[2];      /* rows, cols (cols 1 for vectors); conv weights flattened to [out, in*k*k] */
    int64_t numel;
    bool trainable;
    bool head;            /* trained under a linear probe */
    bool lora;            /* a LoRA adapter */
    int32_t module_id;    /* which module (main model or an extra) */
    tref data;            /* weight on the device */
    tref grad;            /* .grad */
    tref state[3];        /* optimizer state */
    tref master;          /* fp32 master copy */
    tref ema;             /* EMA shadow */
    tref cast;            /* autocast cache for the current forward */
    tref stale;           /* a reference kept to an old copy (duplicate_dtype_conversion) */
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
    tref extra[3];        /* other inputs (encoder states, position bias) */
};

enum node_kind {
    N_LINEAR, N_EMBED, N_NORM, N_ACT, N_DROPOUT, N_ADD, N_MUL, N_CAST, N_ATTN, N_CONV, N_UPSAMPLE,
    N_CE, N_REDUCE, N_SCALE, N_GLU, N_CKPT
};

#define NODE_MAX_SAVED 6

struct node {
    uint8_t kind;
    uint8_t flags;
    tref out;
    tref in[4];
    tref saved[NODE_MAX_SAVED];
    int32_t param[2];     /* weight, bias */
    int64_t a[8];         /* op-specific dims */
    const char *tag;
    struct ckpt ck;
};

struct strpool;

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

    struct param *params;
    int32_t nparams, cap_params, cursor;
    int32_t module_id;         /* module being registered or run */
    bool in_head;              /* registering the head (linear probe) */
    bool in_lora_target;       /* registering an attention projection that gets a LoRA adapter */

    struct tensor *t;
    int32_t nt, cap_t, free_t;
    uint64_t next_id;

    struct node *tape;
    int32_t ntape, cap_tape;

    bool grad_enabled;
    bool training;             /* model.train(): dropout active */
    bool recomputing;          /* inside a checkpointed segment's recompute */
    bool checkpointing;        /* gradient checkpointing on for the model being run */
    bool autocast;             /* inside an autocast region */
    enum dtype act_dtype;      /* dtype of the model's inputs (its parameter dtype) */
    tref ctx_override;         /* UNet: text-encoder output to use as encoder_hidden_states */
    int stream;
    bool workspace_done[8];
    int64_t live_bytes;        /* sum of live tensor bytes (for diagnostics) */
};

/* gen.c: context, strings, tensors, op emission */
const char *gen_intern(struct gen *g, const char *s);
const char *gen_tag(struct gen *g, const char *leaf);          /* scope + "." + leaf, interned */
void gen_push(struct gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gen_pop(struct gen *g);
int gen_emit(struct gen *g, const struct op *op);
int gen_phase(struct gen *g, const char *name);
int gen_mark(struct gen *g, const char *label);
tref t_new(struct gen *g, const int64_t *dims, int ndim, enum dtype dt, enum category cat, const char *tag);
tref t_new2(struct gen *g, int64_t a, int64_t b, enum dtype dt, enum category cat, const char *tag);
tref t_like(struct gen *g, tref x, enum dtype dt, enum category cat, const char *tag);
tref t_ref(struct gen *g, tref x);
void t_release(struct gen *g, tref x);
int64_t t_numel(const struct gen *g, tref x);
static inline struct tensor *T(struct gen *g, tref x) { return &g->t[x]; }
static inline bool t_rg(const struct gen *g, tref x) { return x != TNONE && g->t[x].requires_grad; }
void kern(struct gen *g, enum wl_kernel k, enum dtype dt, const int64_t *dims, int ndims, const tref *ts, int nts,
          float fparam, const char *tag);
void kern_gemm(struct gen *g, int64_t m, int64_t n, int64_t k, enum dtype dt, tref a, tref b, tref c, const char *tag);

/* params.c: registration and the parameter cursor */
int32_t param_add(struct gen *g, const char *leaf, int64_t rows, int64_t cols);
int32_t param_next(struct gen *g);      /* GEN_RUN: the next parameter in registration order */
int32_t param_peek(const struct gen *g); /* index the next nn_* call will register or take */
bool param_trains(const struct gen *g, int32_t p);

/* autograd.c: tape and backward */
struct node *tape_push(struct gen *g, enum node_kind kind, tref out, const char *tag);
void node_save(struct gen *g, struct node *n, int slot, tref x);
void node_input(struct gen *g, struct node *n, int slot, tref x);
int backward(struct gen *g, tref loss, int32_t base);
void tape_drop(struct gen *g, int32_t base); /* release nodes without running backward */
void grad_accumulate(struct gen *g, tref x, tref gx);              /* consumes gx */
/* Where a parameter gradient goes: the .grad itself on the first backward (stolen), else a temp that
 * pgrad_end adds into .grad and frees. `like` gives the dtype the kernel produces. */
tref pgrad_begin(struct gen *g, int32_t p, enum dtype computed);
void pgrad_end(struct gen *g, int32_t p, tref dst);
void t_unhold(struct gen *g, tref x);
void nn_backward(struct gen *g, const struct node *n, tref gy);

/* nn.c: layers (forward and their backward) */
tref nn_input(struct gen *g, const int64_t *dims, int ndim, enum dtype dt, const char *leaf);
tref nn_linear(struct gen *g, const char *name, tref x, int64_t in, int64_t out, bool bias);
tref nn_linear_tied(struct gen *g, const char *name, tref x, int32_t weight); /* weight shared, no bias */
tref nn_embedding(struct gen *g, const char *name, tref ids, int64_t rows, int64_t dim, int32_t shared);
tref nn_norm(struct gen *g, const char *name, tref x, int64_t channels, enum norm_kind kind, bool bias, int64_t groups);
tref nn_act(struct gen *g, const char *name, tref x, enum act_kind act);
tref nn_dropout(struct gen *g, const char *name, tref x, float p);
tref nn_add(struct gen *g, const char *name, tref x, tref y);
tref nn_mul(struct gen *g, const char *name, tref x, tref y);
tref nn_cast(struct gen *g, const char *name, tref x, enum dtype dt);
tref nn_conv(struct gen *g, const char *name, tref x, int64_t cin, int64_t cout, int k, int stride, bool bias);
tref nn_upsample(struct gen *g, const char *name, tref x);
tref nn_reduce(struct gen *g, const char *name, tref x, const int64_t *dims, int ndim);
tref nn_cross_entropy(struct gen *g, const char *name, tref logits, tref labels);
tref nn_scale(struct gen *g, const char *name, tref x);
/* Gated unit on one projection p [.., 2n]: act(p[.., n:]) * p[.., :n] (GEGLU); saves p and act. */
tref nn_glu(struct gen *g, const char *name, tref p, enum act_kind act);
/* A new tensor of the given shape holding x's elements (permute + contiguous, or a broadcast fill). */
tref nn_reshape(struct gen *g, const char *name, tref x, const int64_t *dims, int ndim);
/* Attention core on projected q, k, v [B, S, heads*head_dim] (k, v with kv_heads):
 * eager = QK^T, scale, bias/mask, softmax, dropout, PV, merged heads; SDPA = one fused kernel. */
struct attn_args {
    int64_t heads, kv_heads, head_dim;
    bool causal;
    bool eager;
    float dropout;
    tref bias;            /* added to the scores (T5 position bias / mask), or TNONE */
    bool rotary;          /* rotate q and k first (new tensors) */
    bool fused_qkv;       /* q is one [B, S, 3*heads*head_dim] tensor holding q, k and v */
    bool scale_op;        /* eager: scores scaled by a separate op (a second score-sized tensor) */
    bool upcast_softmax;  /* eager: softmax in fp32 then cast back (Llama) */
};
tref nn_attention(struct gen *g, const char *name, tref q, tref k, tref v, const struct attn_args *a);
/* Runs `count` layers from `layer` through fn, checkpointed (inputs kept, recomputed in backward). */
tref nn_checkpoint(struct gen *g, const struct ckpt *c, tref x);

/* dtype of an op's output from its inputs (promotion; autocast handled by each op) */
enum dtype gen_promote(enum dtype a, enum dtype b);

#endif
