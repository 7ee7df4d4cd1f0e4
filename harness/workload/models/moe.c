/* moe.c: Mixtral's sparse mixture-of-experts feed-forward block as transformers writes it
 * (models/mixtral/modeling_mixtral.py, MixtralSparseMoeBlock and MixtralBlockSparseTop2MLP): the
 * router `gate` (hidden -> experts, no bias) gives the router logits, F.softmax(dtype=torch.float)
 * the fp32 routing weights, torch.topk the k best per token, .to(hidden dtype); per expert hit, the
 * tokens routed to it are gathered (hidden_states[None, top_x]), run through its w1/w3/w2 SwiGLU,
 * multiplied by their routing weights and index_add_'ed into a zeros output.
 * Which tokens go where depends on the data: routing is assumed balanced (tokens * k / experts per
 * expert, the remainder one more each on the first experts) and each expert's tokens contiguous; the
 * renormalisation of the top-k weights (a [tokens, k] fp32 division) is not modelled. */
#include "workload/models/models.h"

#include <stdio.h>
#include <string.h>

/* F.softmax(x, dim=-1, dtype=torch.float): x.to(float) (its own autograd node), then _softmax
 * saving its output. */
static tref softmax_f32(struct gen *g, const char *name, tref x)
{
    const char *tag = gen_tag(g, name);
    int64_t cols = g->t[x].dims[g->t[x].ndim - 1], d[2] = {t_numel(g, x) / cols, cols};
    tref y = t_like(g, x, DT_F32, CAT_ACTIVATION, tag);
    tref xf = nn_as_dtype(g, "cast", x, DT_F32);
    tref ts[2] = {xf, y};
    kern(g, K_SOFTMAX_FWD, DT_F32, d, 2, ts, 2, NULL, 0, tag);
    if (nn_records(g, t_rg(g, xf))) {
        struct node *n = tape_push(g, N_SOFTMAX, y, tag);
        if (n) {
            node_input(g, n, 0, xf);
            node_save(g, n, 0, y);
            memcpy(n->a, d, sizeof d);
        }
    }
    t_release(g, xf);
    return y;
}

/* out.index_add_(0, rows, src) with src's rows landing at out[row ...]: in place, saving nothing
 * but the index; backward hands src its rows of out's gradient (and out's earlier writers all of it). */
static void index_add_rows(struct gen *g, const char *name, tref out, tref src, int64_t row, bool chained)
{
    const char *tag = gen_tag(g, name);
    int64_t n = t_numel(g, src), width = n / g->t[src].dims[0];
    int64_t blocks[6] = {1, n, n, 0, t_numel(g, out), row * width};
    kern_copy_blocks(g, src, out, blocks, true, tag);
    if (nn_records(g, t_rg(g, src))) {
        struct node *nd = tape_push(g, N_INDEX_ADD, out, tag);
        if (nd) {
            node_input(g, nd, 0, src);
            nd->a[0] = n;
            nd->a[1] = row * width;
            nd->a[2] = chained;
        }
    }
}

/* The index tensor an indexing op's autograd node (y's, just recorded) saves for backward. */
static void save_index(struct gen *g, tref y, tref index)
{
    if (g->ntape > 0 && g->tape[g->ntape - 1].out == y)
        node_save(g, &g->tape[g->ntape - 1], 0, index);
}

void nn_moe_backward(struct gen *g, const struct node *n, tref gy)
{
    tref x = n->in[0];
    if (n->kind == N_SOFTMAX) {
        tref dx = t_like(g, n->saved[0], DT_F32, CAT_TEMP, n->tag);
        tref ts[3] = {n->saved[0], gy, dx};
        kern(g, K_SOFTMAX_BWD, DT_F32, n->a, 2, ts, 3, NULL, 0, n->tag);
        grad_accumulate(g, x, dx);
        return;
    }
    if (n->a[2]) /* the earlier index_add_ calls (and the zeros) see the same gradient */
        g->t[n->out].grad = t_ref(g, gy);
    if (x == TNONE)
        return;
    tref dx = t_like(g, x, (enum dtype)g->t[gy].dtype, CAT_TEMP, n->tag);
    int64_t blocks[6] = {1, n->a[0], t_numel(g, gy), n->a[1], n->a[0], 0};
    kern_copy_blocks(g, gy, dx, blocks, false, n->tag);
    grad_accumulate(g, x, dx);
}

/* MixtralBlockSparseTop2MLP: w1, w2, w3 registered in that order; forward w2(act(w1(x)) * w3(x)). */
static const struct tf_names expert_names = {.gate = "w1", .up = "w3", .act = "act_fn", .down = "w2"};

static tref expert(struct gen *g, const struct tf_cfg *c, int e, tref x)
{
    char scope[32];
    snprintf(scope, sizeof scope, "experts.%d", e);
    struct tf_names nm = expert_names;
    nm.ffn = scope;
    struct tf_cfg ec = {.m = c->m, .nm = &nm};
    if (g->mode == GEN_RUN)
        return tf_ffn(g, &ec, x);
    gen_push(g, "%s", scope);
    nn_linear(g, "w1", TNONE, c->m->hidden, c->m->ffn, false);
    nn_linear(g, "w2", TNONE, c->m->ffn, c->m->hidden, false);
    nn_linear(g, "w3", TNONE, c->m->hidden, c->m->ffn, false);
    gen_pop(g);
    return TNONE;
}

/* Tokens routed to expert e under balanced routing: slots / experts, the first (slots % experts) one more. */
int64_t moe_expert_tokens(int64_t tokens, int top_k, int experts, int e)
{
    int64_t slots = tokens * top_k;
    return slots / experts + (e < slots % experts);
}

tref tf_moe(struct gen *g, const struct tf_cfg *c, tref h)
{
    const struct model_spec *m = c->m;
    int64_t hid = m->hidden, nexp = m->experts, k = m->experts_top_k;
    gen_push(g, "block_sparse_moe");
    tref logits = nn_linear(g, "gate", h, hid, nexp, false);
    if (g->mode != GEN_RUN) {
        for (int e = 0; e < nexp; e++)
            expert(g, c, e, TNONE);
        gen_pop(g);
        return TNONE;
    }
    enum dtype dt = (enum dtype)g->t[h].dtype;
    int64_t tokens = t_numel(g, h) / hid, tk[2] = {tokens, k}, th[2] = {tokens, hid};
    tref probs = softmax_f32(g, "softmax", logits);
    tref top = nn_slice(g, "topk", probs, tk, 2, tokens, k, nexp, 0); /* the assumed picks' weights */
    t_release(g, probs);
    tref picks = t_new(g, tk, 2, DT_I64, CAT_TEMP, gen_tag(g, "topk.indices"));
    kern_init_ids(g, picks, nexp, gen_tag(g, "topk.indices"));
    save_index(g, top, picks); /* TopkBackward scatters by them */
    tref weights = nn_as_dtype(g, "to", top, dt);
    t_release(g, top);
    tref out = t_new(g, th, 2, dt, CAT_ACTIVATION, gen_tag(g, "zeros"));
    kern_fill(g, out, 0.0f, gen_tag(g, "zeros"));
    int64_t md[3] = {nexp, k, tokens};
    tref mask = t_new(g, md, 3, DT_I64, CAT_TEMP, gen_tag(g, "one_hot")); /* one_hot(...).permute(2, 1, 0) */
    kern_init_ids(g, mask, 2, gen_tag(g, "one_hot"));
    bool written = false;
    for (int64_t e = 0, slot = 0; e < nexp; e++) {
        int64_t n = moe_expert_tokens(tokens, (int)k, (int)nexp, (int)e);
        if (n == 0)
            continue; /* not in expert_hit */
        int64_t row = slot % tokens < tokens - n ? slot % tokens : tokens - n, nd[2] = {n, hid}, wd[2] = {n, 1};
        tref where[2]; /* torch.where(expert_mask[e]): idx and top_x */
        for (int i = 0; i < 2; i++) {
            where[i] = t_new(g, &n, 1, DT_I64, CAT_TEMP, gen_tag(g, "where"));
            kern_init_ids(g, where[i], i ? tokens : k, gen_tag(g, "where"));
        }
        tref xs = nn_slice(g, "index", h, nd, 2, 1, n * hid, tokens * hid, row * hid);
        save_index(g, xs, where[1]); /* hidden_states[None, top_x] */
        tref y = expert(g, c, (int)e, xs);
        t_release(g, xs);
        tref w = nn_slice(g, "routing_weights.index", weights, wd, 2, 1, n, tokens * k, slot);
        save_index(g, w, where[0]); /* routing_weights[top_x, idx, None] (top_x saved above) */
        tref yw = nn_mul(g, "mul", y, w);
        t_release(g, y);
        t_release(g, w);
        index_add_rows(g, "index_add_", out, yw, row, written);
        written = written || t_rg(g, yw);
        t_release(g, yw);
        t_release(g, where[0]);
        t_release(g, where[1]);
        slot += n;
    }
    t_release(g, mask);
    t_release(g, picks);
    t_release(g, weights);
    t_release(g, logits); /* router_logits, returned with the output and dropped by the layer */
    gen_pop(g);
    return out;
}
