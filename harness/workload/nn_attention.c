/* nn_attention.c: the attention core, forward and backward. q is [B, S, heads*head_dim] and the keys
 * and values come from one fused k/v projection [B, Sk, 2*kv_heads*head_dim] (or one fused qkv),
 * the token-major layout kernels.h's attention kernels take. Eager attention allocates every
 * tensor HF's math path does (scores, scaled scores, masked scores, fp32 probabilities and their
 * cast, dropout mask and dropped probabilities, per-head context, merged output) and computes them
 * with K_ATTN_FWD (K_ATTN_BIAS_FWD with T5's position bias); SDPA is flash attention. */
#include "workload/gen.h"

#include <string.h>

enum { AF_FUSED = 1, AF_ROTARY = 2, AF_GQA = 4, AF_EAGER = 8, AF_SCALE = 16, AF_DROPOUT = 32, AF_UPCAST = 64,
       AF_BIAS = 128 };
enum { AS_Q, AS_KV, AS_PROBS, AS_MASK, AS_P };   /* saved, eager */
enum { AS_O = 2, AS_LSE = 3 };                   /* saved, SDPA */

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

/* Rotary embedding of the first `heads` heads of each row of x into y (y may be x). */
static void rope(struct gen *g, tref x, tref y, int64_t heads, int64_t head_dim, bool inverse, const char *tag)
{
    const struct tensor *t = &g->t[x];
    int64_t d[6] = {t->dims[0], t->dims[1], heads, head_dim, t->dims[2], inverse};
    tref ts[2] = {x, y};
    kern(g, K_ROPE, (enum dtype)t->dtype, d, 6, ts, 2, NULL, 0, tag);
}

/* Score-sized tensors PyTorch's math path allocates one after the other (a new one, the old freed). */
static tref next_scores(struct gen *g, tref cur, const int64_t *kd, enum dtype dt, enum category cat, const char *tag)
{
    tref nx = heads_tensor(g, kd[0], kd[1], kd[2], kd[3], dt, cat, tag);
    t_release(g, cur);
    return nx;
}

tref nn_attention(struct gen *g, const char *name, tref q, tref kv, const struct attn_args *a)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    bool packed = a->fused_qkv;
    int64_t B = g->t[q].dims[0], S = g->t[q].dims[1], H = a->heads, D = a->head_dim;
    int64_t KV = a->kv_heads ? a->kv_heads : H;
    int64_t Sk = packed ? S : g->t[kv].dims[1];
    enum dtype cd = nn_compute_dtype(g, q);
    bool rg = nn_records(g, t_rg(g, q) || t_rg(g, kv) || t_rg(g, a->bias));
    bool drop = a->dropout > 0 && g->training;
    int flags = (packed ? AF_FUSED : 0) | (a->rotary ? AF_ROTARY : 0) | (a->eager ? AF_EAGER : 0);
    tref qu = nn_as_dtype(g, "autocast", q, cd);
    tref kvu = packed ? t_ref(g, qu) : nn_as_dtype(g, "autocast", kv, cd);
    if (a->rotary) { /* q_embed a new tensor; k rotated in place inside the k/v tensor (k's old copy dies) */
        tref r = t_like(g, qu, cd, CAT_ACTIVATION, tag);
        rope(g, qu, r, packed ? H + KV : H, D, false, tag);
        t_release(g, qu);
        qu = r;
        if (packed) {
            t_release(g, kvu);
            kvu = t_ref(g, r);
        } else {
            rope(g, kvu, kvu, KV, D, false, tag);
        }
    }
    int64_t kd[8] = {B, H, S, Sk, D, a->causal, KV, packed};
    float scale = a->scale;
    bool full_bias = a->bias != TNONE && t_numel(g, a->bias) == B * H * S * Sk;
    tref y = TNONE;
    struct node *n = NULL;
    if (a->eager) {
        if (KV < H && !packed) { /* repeat_kv: keys and values copied out to every query head */
            flags |= AF_GQA;
            tref ke = tokens(g, B, Sk, 2 * H * D, cd, CAT_ACTIVATION, tag);
            int64_t ori[3] = {B * Sk * 2 * KV, H / KV, D};
            kern_bcast(g, K_EXPAND, kvu, TNONE, ke, ori, 1.0f, 0.0f, tag);
            t_release(g, kvu);
            kvu = ke;
            kd[6] = H;
        }
        tref cur = heads_tensor(g, B, H, S, Sk, cd, CAT_ACTIVATION, tag); /* q k^T */
        int steps = (a->scale_op ? 1 : 0) + (a->causal || a->bias != TNONE ? 1 : 0);
        if (a->scale_op)
            flags |= AF_SCALE;
        for (int i = 0; i < steps; i++) /* scaling, then mask / position bias */
            cur = next_scores(g, cur, kd, cd, CAT_ACTIVATION, tag);
        enum dtype sm = (g->autocast || a->upcast_softmax) ? DT_F32 : cd;
        if (a->upcast_softmax)
            flags |= AF_UPCAST;
        tref probs = heads_tensor(g, B, H, S, Sk, sm, CAT_ACTIVATION, tag);
        t_release(g, cur);
        tref pv = t_ref(g, probs);
        if (sm != cd) /* softmax(dtype=fp32).to(cd) */
            pv = next_scores(g, pv, kd, cd, CAT_ACTIVATION, tag);
        tref mask = TNONE;
        if (drop) {
            flags |= AF_DROPOUT;
            mask = heads_tensor(g, B, H, S, Sk, DT_U8, CAT_ACTIVATION, tag);
            pv = next_scores(g, pv, kd, cd, CAT_ACTIVATION, tag);
        }
        tref ctx = heads_tensor(g, B, H, S, D, cd, CAT_ACTIVATION, tag); /* P v, before the heads merge */
        y = tokens(g, B, S, H * D, cd, CAT_ACTIVATION, tag);
        if (full_bias) {
            flags |= AF_BIAS;
            tref bias = nn_as_dtype(g, "bias", a->bias, cd);
            tref ts[5] = {qu, kvu, bias, pv, y};
            kern(g, K_ATTN_BIAS_FWD, cd, kd, 8, ts, 5, &scale, 1, tag);
            t_release(g, bias);
        } else { /* masks are additive zeros (padding) or causal (the kernel's flag) */
            tref ts[4] = {qu, kvu, pv, y};
            kern(g, K_ATTN_FWD, cd, kd, 8, ts, 4, &scale, 1, tag);
        }
        t_release(g, ctx);
        if (rg && (n = tape_push(g, N_ATTN, y, tag))) {
            node_save(g, n, AS_Q, qu);
            node_save(g, n, AS_KV, kvu);
            node_save(g, n, AS_PROBS, probs);
            node_save(g, n, AS_MASK, mask);
            node_save(g, n, AS_P, pv);
        }
        t_release(g, probs);
        t_release(g, mask);
        t_release(g, pv);
    } else {
        tref o = heads_tensor(g, B, H, S, D, cd, CAT_ACTIVATION, tag);
        int64_t ld[3] = {B, H, S};
        tref lse = t_new(g, ld, 3, DT_F32, CAT_ACTIVATION, tag);
        tref ts[4] = {qu, kvu, o, lse};
        kern(g, K_FLASH_FWD, cd, kd, 8, ts, 4, &scale, 1, tag);
        y = tokens(g, B, S, H * D, cd, CAT_ACTIVATION, tag); /* .transpose(1, 2).contiguous() */
        kern_scale(g, o, y, 1.0f, tag);
        if (rg && (n = tape_push(g, N_ATTN, y, tag))) {
            node_save(g, n, AS_Q, qu);
            node_save(g, n, AS_KV, kvu);
            node_save(g, n, AS_O, o);
            node_save(g, n, AS_LSE, lse);
        }
        t_release(g, o);
        t_release(g, lse);
    }
    if (n) {
        node_input(g, n, 0, q);
        if (!packed)
            node_input(g, n, 1, kv);
        node_input(g, n, 3, a->bias);
        memcpy(n->a, kd, sizeof kd);
        n->flags = (uint8_t)flags;
        n->dtype = (uint8_t)cd;
        n->f = scale;
        n->kv_heads = (int32_t)KV;
    }
    t_release(g, qu);
    t_release(g, kvu);
    return y;
}

/* The gradient of an additive bias: the scores' gradient (eager), or zeros under SDPA, whose flash
 * kernels take no bias. */
static void bias_grad(struct gen *g, const struct node *n, tref ds, tref gy)
{
    tref bias = n->in[3];
    if (bias == TNONE)
        return;
    if (n->flags & AF_BIAS) {
        tref ts[4] = {n->saved[AS_KV], n->saved[AS_P], gy, ds};
        kern(g, K_ATTN_DSCORES, (enum dtype)n->dtype, n->a, 8, ts, 4, &n->f, 1, n->tag);
        grad_accumulate(g, bias, nn_grad_to_shape(g, bias, ds, n->tag));
        return;
    }
    tref db = t_like(g, bias, (enum dtype)g->t[bias].dtype, CAT_TEMP, n->tag);
    kern_fill(g, db, 0.0f, n->tag);
    grad_accumulate(g, bias, db);
}

void nn_attention_backward(struct gen *g, const struct node *n, tref gy)
{
    const int64_t *kd = n->a;
    int64_t B = kd[0], H = kd[1], S = kd[2], Sk = kd[3], D = kd[4], KVc = kd[6], KV = n->kv_heads;
    int flags = n->flags;
    bool packed = kd[7] != 0;
    enum dtype cd = (enum dtype)n->dtype;
    const char *tag = n->tag;
    tref qs = n->saved[AS_Q], kvs = n->saved[AS_KV];
    tref dq = TNONE, dkv = TNONE;
    if (flags & AF_EAGER) {
        tref cur = heads_tensor(g, B, H, S, Sk, cd, CAT_TEMP, tag); /* dP */
        if (packed)
            dq = dkv = tokens(g, B, S, (H + 2 * KVc) * D, cd, CAT_TEMP, tag);
        else
            dkv = tokens(g, B, Sk, 2 * KVc * D, cd, CAT_TEMP, tag);
        enum dtype sm = (enum dtype)g->t[n->saved[AS_PROBS]].dtype;
        if (flags & AF_DROPOUT)
            cur = next_scores(g, cur, kd, cd, CAT_TEMP, tag);
        if (sm != cd)
            cur = next_scores(g, cur, kd, sm, CAT_TEMP, tag);
        cur = next_scores(g, cur, kd, sm, CAT_TEMP, tag); /* softmax backward: dS */
        if (sm != cd || (flags & AF_SCALE))
            cur = next_scores(g, cur, kd, cd, CAT_TEMP, tag);
        bias_grad(g, n, cur, gy);
        if (!packed)
            dq = tokens(g, B, S, H * D, cd, CAT_TEMP, tag);
        tref ts[6] = {qs, kvs, n->saved[AS_P], gy, dq, dkv};
        kern(g, K_ATTN_BWD, cd, kd, 8, ts, 6, &n->f, 1, tag);
        t_release(g, cur);
    } else {
        if (packed) {
            dq = dkv = tokens(g, B, S, (H + 2 * KVc) * D, cd, CAT_TEMP, tag);
        } else {
            dq = tokens(g, B, S, H * D, cd, CAT_TEMP, tag);
            dkv = tokens(g, B, Sk, 2 * KVc * D, cd, CAT_TEMP, tag);
        }
        tref acc = tokens(g, B, S, H * D, DT_F32, CAT_TEMP, tag); /* flash's fp32 dq accumulator */
        int64_t sd[4] = {B, H, S, 2};
        tref stats = t_new(g, sd, 4, DT_F32, CAT_TEMP, tag);
        tref tp[4] = {n->saved[AS_O], gy, n->saved[AS_LSE], stats};
        kern(g, K_FLASH_BWD_PREP, cd, kd, 8, tp, 4, &n->f, 1, tag);
        tref ts[6] = {qs, kvs, stats, gy, dq, dkv};
        kern(g, K_FLASH_BWD, cd, kd, 8, ts, 6, &n->f, 1, tag);
        t_release(g, acc);
        t_release(g, stats);
        bias_grad(g, n, TNONE, gy);
    }
    if (flags & AF_GQA) { /* sum the expanded heads back to kv_heads */
        tref r = tokens(g, B, Sk, 2 * KV * D, cd, CAT_TEMP, tag);
        int64_t ori[3] = {B * Sk * 2 * KV, H / KV, D};
        kern_bcast(g, K_REDUCE_SUM, dkv, TNONE, r, ori, 1.0f, 0.0f, tag);
        t_release(g, dkv);
        dkv = r;
    }
    if (flags & AF_ROTARY) {
        if (packed) {
            rope(g, dq, dq, H + KV, D, true, tag);
        } else {
            tref rq = t_like(g, dq, cd, CAT_TEMP, tag);
            rope(g, dq, rq, H, D, true, tag);
            t_release(g, dq);
            dq = rq;
            rope(g, dkv, dkv, KV, D, true, tag);
        }
    }
    if (packed) {
        grad_accumulate(g, n->in[0], dq);
        return;
    }
    grad_accumulate(g, n->in[0], dq);
    grad_accumulate(g, n->in[1], dkv);
}
