/* nn_attention.c: the attention core, rotary embeddings and the KV cache, forward and backward, with
 * the tensors PyTorch's autograd allocates and saves for transformers' attention functions (and
 * diffusers' fp32 rotary embedding).
 *
 * Layouts: projections are token-major [B, S, heads * head_dim], as linear layers produce them;
 * kernels.h's attention kernels take q [B, S, H, D] and k and v packed in one [B, Sk, 2, Hkv, D]
 * tensor (or one fused qkv). Where PyTorch holds K and V as two tensors (the cache's copies, the
 * copies eager matmuls make, two projections SDPA saves), one packed tensor of the same bytes stands
 * for them: the one deviation from PyTorch's blocks, which the kernels' layout requires.
 *
 * Eager (transformers' eager_attention_forward): torch.matmul folds (b, h) into one batch dim, so a
 * [B, H, S, D] view of a token-major projection is copied when B > 1 (the fold needs
 * stride_b == H * stride_h) and used as it is when B == 1; the scores, their scaling, bias and mask
 * additions, softmax, dropout (output, then its mask), P v and the merged heads are each a tensor.
 * SDPA: the flash kernel for 16-bit inputs without a mask, memory-efficient otherwise
 * (sdp_utils.cpp on sm_90; cuDNN attention is not modelled); they write the output as [B, S, H, D]
 * (so transformers' transpose(1, 2).contiguous() copies nothing) and save it with the log-sum-exp and
 * two RNG tensors. */
#include "workload/gen.h"

#include <string.h>

enum {
    AF_EAGER = 1, AF_QKV = 2, AF_PACKED = 4, AF_FUSED_KV = 8, AF_CACHE = 16, AF_GQA = 32, AF_DROPOUT = 64,
    AF_UPCAST = 128, AF_BIAS = 256, AF_ROTARY = 512, AF_FLASH = 1024, AF_SCALE = 2048, AF_P_IN_PROBS = 4096,
    AF_MASK = 8192, AF_CONVERT = 16384, AF_SOFTCAP = 32768
};
/* saved: the tensors the kernel reads; a cache held for memory only (the kernel reads the fused qkv
 * holding the same values); eager: softmax output, dropout mask, the probabilities P v reads;
 * SDPA: output, log-sum-exp and the RNG seed and offset */
enum { AS_Q, AS_KV, AS_HOLD, AS_PROBS, AS_MASK, AS_P, AS_TANH };
enum { AS_O = 3, AS_LSE, AS_SEED, AS_OFFSET };

static tref heads_tensor(struct gen *g, int64_t b, int64_t h, int64_t s, int64_t d, enum dtype dt,
                         enum category cat, const char *tag)
{
    int64_t dims[4] = {b, h, s, d};
    return t_new(g, dims, 4, dt, cat, tag);
}

static tref tokens(struct gen *g, int64_t b, int64_t s, int64_t width, enum dtype dt, enum category cat,
                   const char *tag)
{
    int64_t d[3] = {b, s, width};
    return t_new(g, d, 3, dt, cat, tag);
}

static int64_t row_width(const struct gen *g, tref x)
{
    return g->t[x].dims[g->t[x].ndim - 1];
}

/* Columns [off, off + len) of each row of x (rows of width `width`) into columns [dst_off, +len) of
 * each row of y (rows of width dst_width). */
static void copy_cols(struct gen *g, tref x, int64_t width, int64_t off, tref y, int64_t dst_width, int64_t dst_off,
                      int64_t len, const char *tag)
{
    int64_t blocks[6] = {t_numel(g, x) / width, len, width, off, dst_width, dst_off};
    kern_copy_blocks(g, x, y, blocks, false, tag);
}

/* A new packed [B, Sk, 2 * kv * D] tensor holding k and v: from separate tensors, or from a fused qkv
 * (k == v) whose rows hold q_cols of query first. */
static tref pack_kv(struct gen *g, tref k, tref v, int64_t q_cols, int64_t kvw, enum category cat, const char *tag)
{
    const struct tensor *t = &g->t[k];
    tref kv = tokens(g, t->dims[0], t->dims[1], 2 * kvw, (enum dtype)t->dtype, cat, tag);
    int64_t w = row_width(g, k);
    copy_cols(g, k, w, q_cols, kv, 2 * kvw, 0, kvw, tag);
    copy_cols(g, v, row_width(g, v), k == v ? q_cols + kvw : 0, kv, 2 * kvw, kvw, kvw, tag);
    return kv;
}

tref nn_kv_cache(struct gen *g, const char *name, tref k, tref v, int64_t q_heads, int64_t kv_heads, int64_t head_dim)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    /* DynamicLayer.update (cache_utils.py): self.keys = torch.cat([self.keys, key_states], dim=-2) on an
     * empty layer is a contiguous copy of the keys, and likewise of the values */
    return pack_kv(g, k, v, q_heads * head_dim, kv_heads * head_dim, CAT_ACTIVATION, gen_tag(g, name));
}

/* ---- rotary embeddings (transformers' apply_rotary_pos_emb) ---- */

void nn_rotary_tables(struct gen *g, int64_t s, int64_t head_dim, enum dtype dt, tref *cos, tref *sin)
{
    *cos = *sin = TNONE;
    if (g->mode != GEN_RUN)
        return;
    /* LlamaRotaryEmbedding.forward: freqs = inv_freq @ positions [1, S, D/2] (fp32), emb = cat(freqs,
     * freqs), cos and sin of it times attention_scaling, then .to(x.dtype); the (1, S, D) tables are
     * what every layer's rotation multiplies by (K_ROPE recomputes their values from theta) */
    const char *tag = gen_tag(g, "rotary_emb");
    int64_t half[3] = {1, s, head_dim / 2}, full[3] = {1, s, head_dim};
    tref freqs = t_new(g, half, 3, DT_F32, CAT_ACTIVATION, tag);
    tref emb = t_new(g, full, 3, DT_F32, CAT_ACTIVATION, tag);
    tref tab[2];
    for (int i = 0; i < 2; i++) {
        tref raw = t_new(g, full, 3, DT_F32, CAT_ACTIVATION, tag);
        tab[i] = t_new(g, full, 3, DT_F32, CAT_ACTIVATION, tag); /* * attention_scaling */
        t_release(g, raw);
    }
    for (int i = 0; i < 2 && dt != DT_F32; i++) {
        tref c = t_new(g, full, 3, dt, CAT_ACTIVATION, tag);
        kern_cast(g, tab[i], c, tag);
        t_release(g, tab[i]);
        tab[i] = c;
    }
    t_release(g, freqs);
    t_release(g, emb);
    *cos = tab[0];
    *sin = tab[1];
}

static void rope(struct gen *g, tref x, tref y, int64_t heads, int64_t head_dim, bool inverse, const char *tag)
{
    const struct tensor *t = &g->t[x];
    int64_t d[6] = {t->dims[0], t->dims[1], heads, head_dim, row_width(g, x), inverse};
    tref ts[2] = {x, y};
    kern(g, K_ROPE, (enum dtype)t->dtype, d, 6, ts, 2, NULL, 0, tag);
}

/* The node of either rotation: the muls save cos and sin (x's gradient needs them), not x. */
static void record_rope(struct gen *g, const char *tag, tref x, tref y, int64_t heads, int64_t head_dim, tref cos,
                        tref sin, bool fp32)
{
    if (!nn_records(g, t_rg(g, x)))
        return;
    struct node *n = tape_push(g, N_ROPE, y, tag);
    if (!n)
        return;
    node_input(g, n, 0, x);
    node_save(g, n, 0, cos);
    node_save(g, n, 1, sin);
    n->a[0] = heads;
    n->a[1] = head_dim;
    n->a[2] = fp32;
}

tref nn_rotary(struct gen *g, const char *name, tref x, int64_t heads, int64_t head_dim, tref cos, tref sin)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    enum dtype dt = (enum dtype)g->t[x].dtype;
    int64_t B = g->t[x].dims[0], S = g->t[x].dims[1], w = row_width(g, x);
    /* x * cos + rotate_half(x) * sin, rotate_half = cat(-x2, x1): each a tensor; the mul by cos saves
     * cos (x's gradient needs it), not x, so the projection's output is free once this returns */
    tref xc = tokens(g, B, S, w, dt, CAT_ACTIVATION, tag);
    tref neg = tokens(g, B, S, w / 2, dt, CAT_ACTIVATION, tag);
    tref cat = tokens(g, B, S, w, dt, CAT_ACTIVATION, tag);
    t_release(g, neg);
    tref xs = tokens(g, B, S, w, dt, CAT_ACTIVATION, tag);
    t_release(g, cat);
    tref y = tokens(g, B, S, w, dt, CAT_ACTIVATION, tag);
    rope(g, x, y, heads, head_dim, false, tag);
    t_release(g, xc);
    t_release(g, xs);
    record_rope(g, tag, x, y, heads, head_dim, cos, sin, false);
    return y;
}

tref nn_rotary_fp32(struct gen *g, const char *name, tref x, int64_t heads, int64_t head_dim, tref cos, tref sin)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    enum dtype dt = (enum dtype)g->t[x].dtype;
    int64_t B = g->t[x].dims[0], S = g->t[x].dims[1], w = row_width(g, x);
    /* x_rotated = stack([-x_imag, x_real], -1).flatten(3) (the halves are views of x); then
     * (x.float() * cos + x_rotated.float() * sin).to(x.dtype), each operand a temporary */
    tref neg = tokens(g, B, S, w / 2, dt, CAT_ACTIVATION, tag);
    tref xr = tokens(g, B, S, w, dt, CAT_ACTIVATION, tag);
    t_release(g, neg);
    tref xf = tokens(g, B, S, w, DT_F32, CAT_ACTIVATION, tag);
    tref m1 = tokens(g, B, S, w, DT_F32, CAT_ACTIVATION, tag);
    t_release(g, xf);
    tref xrf = tokens(g, B, S, w, DT_F32, CAT_ACTIVATION, tag);
    tref m2 = tokens(g, B, S, w, DT_F32, CAT_ACTIVATION, tag);
    t_release(g, xrf);
    tref sum = tokens(g, B, S, w, DT_F32, CAT_ACTIVATION, tag);
    t_release(g, m1);
    t_release(g, m2);
    tref y = tokens(g, B, S, w, dt, CAT_ACTIVATION, tag);
    rope(g, x, y, heads, head_dim, false, tag);
    t_release(g, sum);
    t_release(g, xr); /* the function's local, until it returns */
    record_rope(g, tag, x, y, heads, head_dim, cos, sin, true);
    return y;
}

/* diffusers' apply_rotary_emb backward: the gradient to fp32 (.to's backward), times sin (x_rotated's
 * path, back to its dtype, the negated half, the halves stacked back into x's layout), times cos (x's
 * path, back to its dtype), and the sum of both paths. */
static void rotary_fp32_backward(struct gen *g, struct node *n, tref *gy)
{
    tref x = n->in[0];
    enum dtype dt = (enum dtype)g->t[*gy].dtype;
    int64_t B = g->t[*gy].dims[0], S = g->t[*gy].dims[1], w = row_width(g, *gy);
    const char *tag = n->tag;
    tref g32 = tokens(g, B, S, w, DT_F32, CAT_TEMP, tag);
    kern_cast(g, *gy, g32, tag);
    t_release(g, *gy);
    *gy = TNONE;
    tref gs = tokens(g, B, S, w, DT_F32, CAT_TEMP, tag); /* the rotation undone: the values of dx */
    rope(g, g32, gs, n->a[0], n->a[1], true, tag);
    tref gsc = tokens(g, B, S, w, dt, CAT_TEMP, tag);
    kern_cast(g, gs, gsc, tag);
    t_release(g, gs);
    tref neg = tokens(g, B, S, w / 2, dt, CAT_TEMP, tag);
    tref stacked = tokens(g, B, S, w, dt, CAT_TEMP, tag);
    kern_scale(g, gsc, stacked, 1.0f, tag);
    t_release(g, neg);
    t_release(g, gsc);
    tref gc = tokens(g, B, S, w, DT_F32, CAT_TEMP, tag);
    t_release(g, g32);
    tref gcd = tokens(g, B, S, w, dt, CAT_TEMP, tag);
    t_release(g, gc);
    tref dx = tokens(g, B, S, w, dt, CAT_TEMP, tag);
    kern_scale(g, stacked, dx, 1.0f, tag);
    t_release(g, stacked);
    t_release(g, gcd);
    grad_accumulate(g, x, dx);
}

void nn_rotary_backward(struct gen *g, struct node *n, tref *gy)
{
    tref x = n->in[0];
    enum dtype dt = (enum dtype)g->t[*gy].dtype;
    int64_t B = g->t[*gy].dims[0], S = g->t[*gy].dims[1], w = row_width(g, *gy);
    const char *tag = n->tag;
    if (n->a[2]) {
        rotary_fp32_backward(g, n, gy);
        return;
    }
    /* rotate_half's backward: g * sin, then -(.) of one half, each half scattered into a zeroed full
     * tensor (SliceBackward), summed out of place; then g * cos and the sum of both paths */
    tref gs = tokens(g, B, S, w, dt, CAT_TEMP, tag);
    tref neg = tokens(g, B, S, w / 2, dt, CAT_TEMP, tag);
    tref s1 = tokens(g, B, S, w, dt, CAT_TEMP, tag);
    t_release(g, neg);
    tref s2 = tokens(g, B, S, w, dt, CAT_TEMP, tag);
    t_release(g, gs);
    tref halves = tokens(g, B, S, w, dt, CAT_TEMP, tag);
    t_release(g, s1);
    t_release(g, s2);
    tref gc = tokens(g, B, S, w, dt, CAT_TEMP, tag);
    tref sum = tokens(g, B, S, w, dt, CAT_TEMP, tag);
    /* the slice gradients are zero-filled contiguous [B, H, S, D] tensors, so the sum is head-major and
     * the view back to [B, S, H * D] copies it */
    tref dx = tokens(g, B, S, w, dt, CAT_TEMP, tag);
    rope(g, *gy, dx, n->a[0], n->a[1], true, tag);
    t_release(g, *gy);
    *gy = TNONE;
    t_release(g, halves);
    t_release(g, gc);
    t_release(g, sum);
    grad_accumulate(g, x, dx);
}

/* ---- the attention core ---- */

/* The position bias as the bias kernel reads it, [B, H, S, Sk], in the scores it is added to: a
 * [1 or B, H, S, Sk] bias broadcast over the batch; T5's [S, Sk, H] embedding output (which PyTorch
 * adds through a permuted view) is read as if it were [H, S, Sk], a consistent permutation of the
 * table the backward keeps (bias_grad), so the memory is PyTorch's and the values a fixed relabelling. */
static void bias_fill(struct gen *g, tref bias, tref cur, const char *tag)
{
    int64_t n = t_numel(g, bias), ori[3] = {1, t_numel(g, cur) / n, n};
    if (ori[1] == 1)
        kern_scale(g, bias, cur, 1.0f, tag);
    else
        kern_bcast(g, K_EXPAND, bias, TNONE, cur, ori, 1.0f, 0.0f, tag);
}

/* Score-sized tensors PyTorch's math path allocates one after the other (a new one, the old freed). */
static tref next_scores(struct gen *g, tref cur, const int64_t *kd, enum dtype dt, enum category cat, const char *tag)
{
    tref nx = heads_tensor(g, kd[0], kd[1], kd[2], kd[3], dt, cat, tag);
    t_release(g, cur);
    return nx;
}

/* sdp_utils.cpp (sm_80+): flash needs 16-bit inputs and no attn_mask; memory-efficient takes the rest. */
static bool sdpa_flash(enum dtype cd, bool masked)
{
    return (cd == DT_BF16 || cd == DT_F16) && !masked;
}

/* The log-sum-exp SDPA saves: flash [B, H, S]; memory-efficient pads the query dim to a multiple of 32
 * (aten/src/ATen/native/transformers/cuda/attention.cu, _efficient_attention_forward:
 * logsumexp = at::empty({B, num_heads, compute_logsumexp ? ceil_div(M, kAlignLSE) * kAlignLSE : 0}),
 * kAlignLSE = 32). */
static tref sdpa_lse(struct gen *g, int64_t B, int64_t H, int64_t S, bool flash, const char *tag)
{
    int64_t d[3] = {B, H, flash ? S : (S + 31) / 32 * 32};
    return t_new(g, d, 3, DT_F32, CAT_ACTIVATION, tag);
}

/* The RNG seed and offset SDPA returns for its backward: flash a {2} uint64 seed and a {} uint64 offset,
 * memory-efficient two {} int64 (the meta functions of _scaled_dot_product_{flash,efficient}_attention). */
static void sdpa_rng(struct gen *g, bool flash, const char *tag, tref *seed, tref *offset)
{
    int64_t two[1] = {flash ? 2 : 1}, one[1] = {1};
    *seed = t_new(g, two, 1, DT_I64, CAT_ACTIVATION, tag);
    *offset = t_new(g, one, 1, DT_I64, CAT_ACTIVATION, tag);
}

tref nn_attention(struct gen *g, const char *name, tref q, tref k, tref v, const struct attn_args *a)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    bool qkv = k == TNONE, fused_kv = !qkv && k == v;
    int64_t B = g->t[q].dims[0], S = g->t[q].dims[1], H = a->heads, D = a->head_dim;
    int64_t KV = a->kv_heads ? a->kv_heads : H;
    int64_t Sk = qkv ? S : g->t[k].dims[1];
    enum dtype cd = nn_compute_dtype(g, q);
    bool rg = nn_records(g, t_rg(g, q) || (!qkv && (t_rg(g, k) || t_rg(g, v))) || t_rg(g, a->bias));
    bool drop = a->dropout > 0 && g->training;
    bool masked = a->mask != TNONE || a->bias != TNONE;
    int flags = (a->eager ? AF_EAGER : 0) | (qkv ? AF_QKV : 0) | (fused_kv ? AF_FUSED_KV : 0) |
                (a->rotary ? AF_ROTARY : 0) | (a->cache != TNONE ? AF_CACHE : 0) |
                (a->mask != TNONE ? AF_MASK : 0);
    /* autocast: the projections in the compute dtype (nn_as_dtype records the casts); with a cache,
     * the cache's copies are what the core reads (the projections may be freed already) */
    bool own_kv = !qkv && a->cache == TNONE;
    tref qu = nn_as_dtype(g, "autocast", q, cd);
    tref ku = own_kv ? nn_as_dtype(g, "autocast", k, cd) : TNONE;
    tref vu = !own_kv ? TNONE : fused_kv ? t_ref(g, ku) : nn_as_dtype(g, "autocast", v, cd);
    /* kq, kkv: what the kernel reads; hold: a cache the kernel does not read */
    tref kq = t_ref(g, qu), kkv = TNONE, hold = TNONE;
    bool copies = a->eager && B > 1; /* eager matmuls copy [B, H, S, D] views of token-major tensors */
    if (a->cache != TNONE && qkv && !copies) { /* the fused qkv holds the cache's values */
        kkv = t_ref(g, qu);
        hold = t_ref(g, a->cache);
    } else if (a->cache != TNONE) {
        kkv = t_ref(g, a->cache);
    } else if (qkv) {
        kkv = copies ? pack_kv(g, qu, qu, H * D, KV * D, CAT_ACTIVATION, tag) : t_ref(g, qu);
    } else if (fused_kv) {
        kkv = t_ref(g, ku);
    } else { /* eager B > 1: the k^T and v copies; else the two projections as one tensor */
        kkv = pack_kv(g, ku, vu, 0, KV * D, CAT_ACTIVATION, tag);
    }
    if (copies && !fused_kv) { /* the query's copy for its matmul */
        tref qc = tokens(g, B, S, H * D, cd, CAT_ACTIVATION, tag);
        copy_cols(g, qu, row_width(g, qu), 0, qc, H * D, 0, H * D, tag);
        t_release(g, kq);
        kq = qc;
    }
    bool packed = kq == kkv;
    flags |= packed ? AF_PACKED : 0;
    int64_t kd[8] = {B, H, S, Sk, D, a->causal, KV, packed};
    float scale = a->scale;
    tref y = TNONE;
    struct node *n = NULL;
    if (a->eager) {
        if (KV < H) { /* repeat_kv: expand + reshape copies keys and values out to every query head */
            flags |= AF_GQA;
            tref ke = tokens(g, B, Sk, 2 * H * D, cd, CAT_ACTIVATION, tag);
            int64_t ori[3] = {B * Sk * 2 * KV, H / KV, D};
            kern_bcast(g, K_EXPAND, kkv, TNONE, ke, ori, 1.0f, 0.0f, tag);
            t_release(g, kkv);
            kkv = ke;
            kd[6] = H;
        }
        tref cur = heads_tensor(g, B, H, S, Sk, cd, CAT_ACTIVATION, tag); /* q k^T */
        if (a->scale_op) {
            flags |= AF_SCALE;
            cur = next_scores(g, cur, kd, cd, CAT_ACTIVATION, tag); /* * scaling */
        }
        tref tanh_out = TNONE;
        if (a->softcap > 0) { /* Gemma2's eager_attention_forward: / cap, tanh, * cap; TanhBackward saves
                               * its result, the divisions by a Python number save nothing */
            flags |= AF_SOFTCAP;
            cur = next_scores(g, cur, kd, cd, CAT_ACTIVATION, tag);
            tanh_out = heads_tensor(g, B, H, S, Sk, cd, CAT_ACTIVATION, tag);
            t_release(g, cur);
            cur = heads_tensor(g, B, H, S, Sk, cd, CAT_ACTIVATION, tag);
        }
        enum dtype st = cd; /* the scores' dtype: a bias in another dtype promotes them (autocast) */
        if (a->bias != TNONE) { /* + position_bias */
            flags |= AF_BIAS;
            st = gen_promote(cd, (enum dtype)g->t[a->bias].dtype);
            cur = next_scores(g, cur, kd, st, CAT_ACTIVATION, tag);
        }
        if (a->mask != TNONE)
            cur = next_scores(g, cur, kd, st, CAT_ACTIVATION, tag); /* + attention_mask */
        tref bias_src = TNONE; /* the scores the bias was added to: the bias kernel reads the bias there */
        if (a->bias != TNONE) {
            bias_fill(g, a->bias, cur, tag);
            bias_src = t_ref(g, cur);
            if (st != cd) { /* the kernel's bias in its compute dtype: a copy only the kernel needs */
                tref c = heads_tensor(g, B, H, S, Sk, cd, CAT_TEMP, tag);
                kern_cast(g, cur, c, tag);
                t_release(g, bias_src);
                bias_src = c;
            }
            y = tokens(g, B, S, H * D, cd, CAT_ACTIVATION, tag); /* before the kernel that writes it */
        }
        enum dtype sm = (g->autocast || a->upcast_softmax) ? DT_F32 : cd;
        if (sm != st && cd != DT_F16) { /* softmax(dtype=fp32) converts its input first (SoftMax.cpp) */
            flags |= AF_CONVERT;
            cur = next_scores(g, cur, kd, sm, CAT_ACTIVATION, tag);
        }
        tref probs = heads_tensor(g, B, H, S, Sk, sm, CAT_ACTIVATION, tag);
        tref pv = t_ref(g, probs);
        if (sm != cd) { /* .to(query.dtype) */
            flags |= AF_UPCAST;
            pv = next_scores(g, pv, kd, cd, CAT_ACTIVATION, tag);
        }
        if (a->bias != TNONE) { /* P into the first probabilities in the compute dtype */
            flags |= sm == cd ? AF_P_IN_PROBS : 0;
            tref ts[5] = {kq, kkv, bias_src, pv, y};
            kern(g, K_ATTN_BIAS_FWD, cd, kd, 8, ts, 5, &scale, 1, tag);
            t_release(g, bias_src);
        }
        t_release(g, cur);
        tref mask = TNONE;
        if (drop) { /* native_dropout: the output, then the mask */
            flags |= AF_DROPOUT;
            tref out = heads_tensor(g, B, H, S, Sk, cd, CAT_ACTIVATION, tag);
            mask = heads_tensor(g, B, H, S, Sk, DT_U8, CAT_ACTIVATION, tag);
            if (a->bias != TNONE && sm != cd) /* P is only in the cast, which dies here: keep it */
                kern_scale(g, pv, out, 1.0f, tag);
            t_release(g, pv);
            pv = out;
        }
        tref ctx = heads_tensor(g, B, H, S, D, cd, CAT_ACTIVATION, tag); /* P v, before the heads merge */
        if (a->bias == TNONE) {
            y = tokens(g, B, S, H * D, cd, CAT_ACTIVATION, tag); /* .transpose(1, 2).contiguous() */
            tref ts[4] = {kq, kkv, pv, y}; /* causal masking is the kernel's flag; padding masks are zero */
            kern(g, K_ATTN_FWD, cd, kd, 8, ts, 4, &scale, 1, tag);
        }
        t_release(g, ctx);
        if (rg && (n = tape_push(g, N_ATTN, y, tag))) {
            node_save(g, n, AS_PROBS, probs);
            node_save(g, n, AS_MASK, mask);
            node_save(g, n, AS_P, pv);
            node_save(g, n, AS_TANH, tanh_out);
        }
        t_release(g, tanh_out);
        t_release(g, probs);
        t_release(g, mask);
        t_release(g, pv);
    } else {
        bool flash = sdpa_flash(cd, masked);
        flags |= flash ? AF_FLASH : 0;
        if (KV < H && masked) { /* enable_gqa only without a mask (sdpa_attention.py use_gqa_in_sdpa) */
            flags |= AF_GQA;
            tref ke = tokens(g, B, Sk, 2 * H * D, cd, CAT_ACTIVATION, tag);
            int64_t ori[3] = {B * Sk * 2 * KV, H / KV, D};
            kern_bcast(g, K_EXPAND, kkv, TNONE, ke, ori, 1.0f, 0.0f, tag);
            t_release(g, kkv);
            kkv = ke;
            kd[6] = H;
        }
        y = tokens(g, B, S, H * D, cd, CAT_ACTIVATION, tag);
        tref lse = sdpa_lse(g, B, H, S, flash, tag), seed, offset;
        sdpa_rng(g, flash, tag, &seed, &offset);
        tref ts[4] = {kq, kkv, y, lse};
        kern(g, K_FLASH_FWD, cd, kd, 8, ts, 4, &scale, 1, tag);
        if (rg && (n = tape_push(g, N_ATTN, y, tag))) {
            node_save(g, n, AS_O, y);
            node_save(g, n, AS_LSE, lse);
            node_save(g, n, AS_SEED, seed);
            node_save(g, n, AS_OFFSET, offset);
        }
        t_release(g, lse);
        t_release(g, seed);
        t_release(g, offset);
    }
    if (n) {
        node_save(g, n, AS_Q, kq);
        node_save(g, n, AS_KV, kkv);
        node_save(g, n, AS_HOLD, hold);
        node_input(g, n, 0, q);
        if (!qkv)
            node_input(g, n, 1, k);
        if (!qkv && !fused_kv)
            node_input(g, n, 2, v);
        node_input(g, n, 3, a->bias);
        memcpy(n->a, kd, sizeof kd);
        n->flags = (uint16_t)flags;
        n->dtype = (uint8_t)cd;
        n->f = scale;
        n->kv_heads = (int32_t)KV;
    }
    t_release(g, kq);
    t_release(g, kkv);
    t_release(g, hold);
    t_release(g, qu);
    t_release(g, ku);
    t_release(g, vu);
    return y;
}

/* A saved tensor released where PyTorch releases it: the node holding it has run (composite ops are
 * one node here). */
static void drop_saved(struct gen *g, struct node *n, int slot)
{
    t_release(g, n->saved[slot]);
    n->saved[slot] = TNONE;
}

/* The gradients of the inputs from the gradients of q and the packed k/v. Packed (one fused qkv the
 * kernel read whole): dq and dkv are one [B, S, (H + 2 KV) D] tensor, SplitBackward's torch.cat
 * itself. Otherwise the k and v parts are copied out (ViewBackward0 reshaping a head-major
 * gradient): into GPT-2's fused qkv by one torch.cat with q's, or as the gradients of the key and
 * value projections, v's first; eager attention's dq is head-major too and is copied back, unless a
 * rotary embedding's backward (which ends in that copy) comes next. */
static void input_grads(struct gen *g, const struct node *n, tref dq, tref dkv)
{
    const int64_t *kd = n->a;
    int64_t B = kd[0], H = kd[1], S = kd[2], Sk = kd[3], D = kd[4], KV = n->kv_heads;
    enum dtype cd = (enum dtype)n->dtype;
    const char *tag = n->tag;
    int flags = n->flags;
    if (flags & AF_PACKED) {
        grad_accumulate(g, n->in[0], dq);
        return;
    }
    if (flags & AF_FUSED_KV) {
        grad_accumulate(g, n->in[0], dq);
        grad_accumulate(g, n->in[1], dkv);
        return;
    }
    tref dv = tokens(g, B, Sk, KV * D, cd, CAT_TEMP, tag);
    copy_cols(g, dkv, 2 * KV * D, KV * D, dv, KV * D, 0, KV * D, tag);
    tref dk = tokens(g, B, Sk, KV * D, cd, CAT_TEMP, tag);
    copy_cols(g, dkv, 2 * KV * D, 0, dk, KV * D, 0, KV * D, tag);
    t_release(g, dkv);
    if (flags & AF_QKV) {
        int64_t w = (H + 2 * KV) * D;
        tref d = tokens(g, B, S, w, cd, CAT_TEMP, tag);
        copy_cols(g, dq, H * D, 0, d, w, 0, H * D, tag);
        copy_cols(g, dk, KV * D, 0, d, w, H * D, KV * D, tag);
        copy_cols(g, dv, KV * D, 0, d, w, (H + KV) * D, KV * D, tag);
        t_release(g, dk);
        t_release(g, dq);
        t_release(g, dv);
        grad_accumulate(g, n->in[0], d);
        return;
    }
    grad_accumulate(g, n->in[2], dv);
    grad_accumulate(g, n->in[1], dk);
    if ((flags & AF_EAGER) && !(flags & AF_ROTARY)) {
        tref c = tokens(g, B, S, H * D, cd, CAT_TEMP, tag);
        kern_scale(g, dq, c, 1.0f, tag);
        t_release(g, dq);
        dq = c;
    }
    grad_accumulate(g, n->in[0], dq);
}

/* The gradient of an additive position bias: dS summed over the batch the bias was broadcast over
 * (sum_to_size: a new [1, H, S, Sk]), in bias_fill's element order. */
static void bias_grad(struct gen *g, const struct node *n, tref p, tref go, tref ds)
{
    tref bias = n->in[3];
    if (bias == TNONE)
        return;
    tref ts[4] = {n->saved[AS_KV], p, go, ds};
    kern(g, K_ATTN_DSCORES, (enum dtype)n->dtype, n->a, 8, ts, 4, &n->f, 1, n->tag);
    int64_t nb = t_numel(g, bias), ori[3] = {1, t_numel(g, ds) / nb, nb};
    tref db = t_like(g, bias, (enum dtype)g->t[ds].dtype, CAT_TEMP, n->tag);
    if (ori[1] == 1)
        kern_scale(g, ds, db, 1.0f, n->tag);
    else
        kern_bcast(g, K_REDUCE_SUM, ds, TNONE, db, ori, 1.0f, 0.0f, n->tag);
    grad_accumulate(g, bias, db);
}

static void eager_backward(struct gen *g, struct node *n, tref *gy, tref *dq, tref *dkv)
{
    const int64_t *kd = n->a;
    int64_t B = kd[0], H = kd[1], S = kd[2], Sk = kd[3], D = kd[4], KVc = kd[6];
    int flags = n->flags;
    enum dtype cd = (enum dtype)n->dtype, sm = (enum dtype)g->t[n->saved[AS_PROBS]].dtype;
    const char *tag = n->tag;
    bool packed = flags & AF_PACKED;
    /* the merged heads' gradient as [B, H, S, D] for the bmm: a copy when B > 1 */
    tref go = *gy;
    if (B > 1) {
        go = tokens(g, B, S, H * D, cd, CAT_TEMP, tag);
        kern_scale(g, *gy, go, 1.0f, tag);
        t_release(g, *gy);
        *gy = TNONE;
    }
    /* dV = P^T dO (dK later lands in the same packed tensor), dP = dO V^T; the kernel computes dq and
     * dkv now, while what it reads is live, so dq exists earlier than PyTorch's */
    if (packed)
        *dq = *dkv = tokens(g, B, S, (H + 2 * KVc) * D, cd, CAT_TEMP, tag);
    else
        *dkv = tokens(g, B, Sk, 2 * KVc * D, cd, CAT_TEMP, tag);
    tref cur = heads_tensor(g, B, H, S, Sk, cd, CAT_TEMP, tag);
    if (!packed)
        *dq = tokens(g, B, S, H * D, cd, CAT_TEMP, tag);
    tref p = n->saved[(flags & AF_P_IN_PROBS) ? AS_PROBS : AS_P];
    tref ts[6] = {n->saved[AS_Q], n->saved[AS_KV], p, go, *dq, *dkv};
    kern(g, K_ATTN_BWD, cd, kd, 8, ts, 6, &n->f, 1, tag);
    bias_grad(g, n, p, go, cur);
    if (go != *gy)
        t_release(g, go);
    drop_saved(g, n, AS_P);
    if (flags & AF_DROPOUT) {
        cur = next_scores(g, cur, kd, cd, CAT_TEMP, tag);
        drop_saved(g, n, AS_MASK);
    }
    if (flags & AF_UPCAST)
        cur = next_scores(g, cur, kd, sm, CAT_TEMP, tag);
    cur = next_scores(g, cur, kd, sm, CAT_TEMP, tag); /* softmax backward: dS */
    drop_saved(g, n, AS_PROBS);
    if (flags & AF_CONVERT) /* the input conversion's backward */
        cur = next_scores(g, cur, kd, cd, CAT_TEMP, tag);
    if (flags & AF_SOFTCAP) { /* * cap's backward, tanh_backward (its saved result), / cap's */
        cur = next_scores(g, cur, kd, cd, CAT_TEMP, tag);
        cur = next_scores(g, cur, kd, cd, CAT_TEMP, tag);
        drop_saved(g, n, AS_TANH);
        cur = next_scores(g, cur, kd, cd, CAT_TEMP, tag);
    }
    if (flags & AF_SCALE)
        cur = next_scores(g, cur, kd, cd, CAT_TEMP, tag);
    t_release(g, cur);
}

static void sdpa_backward(struct gen *g, struct node *n, tref *gy, tref *dq, tref *dkv)
{
    const int64_t *kd = n->a;
    int64_t B = kd[0], H = kd[1], S = kd[2], Sk = kd[3], D = kd[4], KVc = kd[6];
    enum dtype cd = (enum dtype)n->dtype;
    const char *tag = n->tag;
    if (n->flags & AF_PACKED) {
        *dq = *dkv = tokens(g, B, S, (H + 2 * KVc) * D, cd, CAT_TEMP, tag);
    } else {
        *dq = tokens(g, B, S, H * D, cd, CAT_TEMP, tag);
        *dkv = tokens(g, B, Sk, 2 * KVc * D, cd, CAT_TEMP, tag);
    }
    /* kernels.h's (lse, rowsum(dO * O)) per row: the flash kernel's softmax_d, the memory-efficient
     * kernel's delta */
    int64_t sd[4] = {B, H, S, 2};
    struct scratch_list sl = {0};
    if (n->flags & AF_FLASH)
        scratch_flash_backward(g, B, H, n->kv_heads, S, Sk, D, cd, tag, &sl);
    else
        scratch_efficient_backward(g, B, H, S, D, cd, tag, &sl);
    tref stats = t_new(g, sd, 4, DT_F32, CAT_TEMP, tag);
    tref tp[4] = {n->saved[AS_O], *gy, n->saved[AS_LSE], stats};
    kern(g, K_FLASH_BWD_PREP, cd, kd, 8, tp, 4, &n->f, 1, tag);
    tref ts[6] = {n->saved[AS_Q], n->saved[AS_KV], stats, *gy, *dq, *dkv};
    kern(g, K_FLASH_BWD, cd, kd, 8, ts, 6, &n->f, 1, tag);
    t_release(g, stats);
    scratch_free(g, &sl);
    t_release(g, *gy);
    *gy = TNONE;
    if (n->in[3] != TNONE) { /* the flash kernels take no bias: its gradient is zero */
        tref db = t_like(g, n->in[3], (enum dtype)g->t[n->in[3]].dtype, CAT_TEMP, tag);
        kern_fill(g, db, 0.0f, tag);
        grad_accumulate(g, n->in[3], db);
    }
}

void nn_attention_backward(struct gen *g, struct node *n, tref *gy)
{
    const int64_t *kd = n->a;
    int64_t B = kd[0], Sk = kd[3], D = kd[4], KV = n->kv_heads;
    int flags = n->flags;
    enum dtype cd = (enum dtype)n->dtype;
    tref dq = TNONE, dkv = TNONE;
    if (flags & AF_EAGER)
        eager_backward(g, n, gy, &dq, &dkv);
    else
        sdpa_backward(g, n, gy, &dq, &dkv);
    for (int s = 0; s < NODE_MAX_SAVED; s++)
        drop_saved(g, n, s);
    if (flags & AF_GQA) { /* repeat_kv's backward: the expanded heads summed back to kv_heads */
        tref r = tokens(g, B, Sk, 2 * KV * D, cd, CAT_TEMP, n->tag);
        int64_t ori[3] = {B * Sk * 2 * KV, kd[1] / KV, D};
        kern_bcast(g, K_REDUCE_SUM, dkv, TNONE, r, ori, 1.0f, 0.0f, n->tag);
        t_release(g, dkv);
        dkv = r;
    }
    input_grads(g, n, dq, dkv);
}

