/* sliced_attention.c: diffusers' SlicedAttnProcessor (attention_processor.py), what
 * pipe.enable_attention_slicing() puts on every UNet attention in place of SDPA: eager attention over
 * slice_size rows of batch x heads at a time. head_to_batch_dim copies q, k and v to [B*heads, S, D];
 * hidden_states is a zeros [B*heads, S, D]; each slice runs get_attention_scores (torch.empty as the
 * baddbmm input, the scores, then the softmax's probabilities as the scores are deleted) and a bmm
 * whose result is copied into hidden_states; batch_to_head_dim copies it back to [B, S, heads*D].
 * Inference only (no autograd record): the pipelines call it under torch.no_grad. Each slice's q and k/v
 * rows are gathered into tensors of their own for the kernel, where PyTorch slices views: n x (S x D +
 * Sk x 2D) elements more than PyTorch holds, beside the slice's two n x S x Sk score tensors. */
#include "workload/diffusion_job.h"

/* [B, S, heads*D] (token-major) to [B*heads, S, width*D]: two batched transposes (PyTorch's
 * permute + reshape is one copy; the first transpose's output is a temporary of x's size). `width` is 2
 * for a fused k/v projection [B, S, 2*heads*D]: each row of the result holds a head's key then value. */
static tref heads_first(struct gen *g, tref x, int64_t heads, int64_t d, int width, const char *tag)
{
    int64_t B = T(g, x)->dims[0], S = T(g, x)->dims[1];
    int64_t mid[3] = {B, heads * d, S * width}, out[3] = {B * heads, S, width * d};
    tref t = nn_transpose(g, tag, x, B, S * width, heads * d, mid, 3);
    tref y = nn_transpose(g, tag, t, B * heads, d, S * width, out, 3);
    t_release(g, t);
    return y;
}

/* The rows [start, start + n) of a [rows, per] tensor as a tensor of its own (a view in diffusers). */
static tref rows_of(struct gen *g, tref x, int64_t start, int64_t n, int64_t per, const char *tag)
{
    int64_t rows = t_numel(g, x) / per, d[3] = {n, T(g, x)->dims[1], T(g, x)->dims[2]};
    tref y = t_new(g, d, 3, (enum dtype)T(g, x)->dtype, CAT_TEMP, tag);
    int64_t blocks[6] = {1, n * per, rows * per, start * per, n * per, 0};
    kern_copy_blocks(g, x, y, blocks, false, tag);
    return y;
}

tref nn_sliced_attention(struct gen *g, const char *name, tref q, tref kv, int64_t heads, int64_t head_dim)
{
    if (g->mode != GEN_RUN)
        return TNONE;
    const char *tag = gen_tag(g, name);
    enum dtype dt = (enum dtype)T(g, q)->dtype;
    int64_t B = T(g, q)->dims[0], S = T(g, q)->dims[1], Sk = T(g, kv)->dims[1], D = head_dim, BH = B * heads;
    int64_t slice = g->attn_slice == ATTN_SLICE_MAX ? 1
                    : g->attn_slice == ATTN_SLICE_AUTO ? (heads / 2 > 0 ? heads / 2 : 1) /* sliceable_head_dim // 2 */
                    : g->attn_slice;
    tref qh = heads_first(g, q, heads, D, 1, tag), kvh = heads_first(g, kv, heads, D, 2, tag);
    int64_t hd[3] = {BH, S, D};
    tref hs = t_new(g, hd, 3, dt, CAT_ACTIVATION, tag); /* torch.zeros */
    kern_fill(g, hs, 0.0f, tag);
    float scale = 0.0f; /* attn.scale = dim_head ** -0.5 */
    for (int64_t start = 0; start < BH && !g->failed; start += slice) {
        int64_t n = start + slice <= BH ? slice : BH - start;
        tref qs = rows_of(g, qh, start, n, S * D, tag), kvs = rows_of(g, kvh, start, n, Sk * 2 * D, tag);
        int64_t sd[4] = {n, 1, S, Sk};
        tref empty = t_new(g, sd, 4, dt, CAT_TEMP, tag); /* baddbmm_input */
        tref scores = t_new(g, sd, 4, dt, CAT_TEMP, tag);
        t_release(g, empty);                              /* del baddbmm_input */
        tref probs = t_new(g, sd, 4, dt, CAT_TEMP, tag);  /* softmax */
        t_release(g, scores);                             /* del attention_scores */
        int64_t od[3] = {n, S, D};
        tref o = t_new(g, od, 3, dt, CAT_TEMP, tag);      /* torch.bmm(attn_slice, value) */
        int64_t kd[8] = {n, 1, S, Sk, D, 0, 1, 0};
        tref ts[4] = {qs, kvs, probs, o};
        kern(g, K_ATTN_FWD, dt, kd, 8, ts, 4, &scale, 1, tag);
        t_release(g, probs);
        int64_t blocks[6] = {1, n * S * D, n * S * D, 0, BH * S * D, start * S * D};
        kern_copy_blocks(g, o, hs, blocks, false, tag); /* hidden_states[start_idx:end_idx] = attn_slice */
        t_release(g, o);
        t_release(g, qs);
        t_release(g, kvs);
    }
    t_release(g, qh);
    t_release(g, kvh);
    /* batch_to_head_dim: [B*heads, S, D] back to [B, S, heads*D] */
    int64_t mid[3] = {B, heads * D, S}, out[3] = {B, S, heads * D};
    tref t = nn_transpose(g, tag, hs, BH, S, D, mid, 3);
    t_release(g, hs);
    tref y = nn_transpose(g, tag, t, B, heads * D, S, out, 3);
    t_release(g, t);
    return y;
}
