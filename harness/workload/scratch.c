/* scratch.c: temporaries CUDA kernels take from the caching allocator inside one op, which a
 * recording on PyTorch's meta device cannot see (its meta functions allocate the outputs only). Each
 * is allocated right before its op's kernel and freed after it, as the op's C++ frees its locals;
 * job key kernel_scratch: false leaves them all out (the conformance test compares that way). Sizes
 * follow the source of torch 2.15 (cited per function). Not modelled: cross-entropy (log_softmax,
 * nll_loss and their backward allocate only their outputs: SoftMax.cu, Loss.cu), the cuBLASLt
 * workspace (shared with the cuBLAS one when TORCH_CUBLASLT_UNIFIED_WORKSPACE is unset,
 * CublasHandlePool.cpp), the staging buffers of TensorIterator reductions (Reduce.cuh sizes them from
 * launch configurations) and cuDNN's convolution workspaces (chosen by its heuristics at run time;
 * the cuda device takes them from the allocator model). */
#include "workload/gen.h"

static bool on(const struct gen *g)
{
    return g->spec.kernel_scratch && g->mode == GEN_RUN;
}

static tref scratch(struct gen *g, int64_t elems, enum dtype dt, const char *tag, struct scratch_list *l)
{
    tref t = t_new2(g, elems > 0 ? elems : 1, 1, dt, CAT_TEMP, tag);
    if (l->n < SCRATCH_MAX)
        l->t[l->n++] = t;
    return t;
}

void scratch_free(struct gen *g, struct scratch_list *l)
{
    while (l->n > 0)
        t_release(g, l->t[--l->n]);
}

static int64_t round_up(int64_t x, int64_t m)
{
    return (x + m - 1) / m * m;
}

/* embedding_dense_backward_cuda (Embedding.cu): more than 3072 indices take the sorting path:
 * sorted_indices and orig_indices (int64, one per index), arange(num_indices) and cub's radix-sort
 * storage (its alternate key and value buffers, 16 B per index) for radix_sort_pairs, then
 * embedding_backward_cuda_kernel (EmbeddingBackwardKernel.cu): segment_offsets [n], partials_per_segment
 * and its offsets [min(n, V)], partial_segment_offset [n / NROWS_PER_THREAD + min(n, V)]
 * (NROWS_PER_THREAD = 10) and grad_weight_per_segment [that, C] in fp32 for 16-bit gradients. The
 * result (grad_weight [V, C]) is the gradient the caller allocates. */
void scratch_embedding_backward(struct gen *g, int64_t n, int64_t rows, int64_t dim, const char *tag,
                                struct scratch_list *l)
{
    if (!on(g) || n <= 3072)
        return;
    scratch(g, n, DT_I64, tag, l);            /* sorted_indices */
    scratch(g, n, DT_I64, tag, l);            /* orig_indices */
    struct scratch_list sort = {0};
    scratch(g, n, DT_I64, tag, &sort);        /* arange */
    scratch(g, 2 * n, DT_I64, tag, &sort);    /* radix sort's alternate buffers */
    scratch_free(g, &sort);
    int64_t max_segments = n < rows ? n : rows, max_partial = n / 10 + max_segments;
    scratch(g, n, DT_I64, tag, l);            /* segment_offsets */
    scratch(g, 1, DT_I64, tag, l);            /* num_of_segments */
    scratch(g, max_segments, DT_I64, tag, l); /* partials_per_segment */
    scratch(g, max_segments, DT_I64, tag, l); /* partials_per_segment_offset */
    scratch(g, 1, DT_I64, tag, l);            /* num_of_partial_segments */
    scratch(g, max_partial, DT_I64, tag, l);  /* partial_segment_offset */
    scratch(g, max_partial * dim, DT_F32, tag, l); /* grad_weight_per_segment, in acc_type */
}

/* mha_bwd (flash_attn/flash_api.cpp): besides softmax_d [B, H, round(Sq, 128)] fp32 (the attention
 * backward's stats tensor stands for it), the fp32 dq accumulator [B, round(Sq, 128), H, round(D, 32)];
 * with fewer key/value heads, dk and dv for every query head ([B, Sk, H, D] each), summed into dk and
 * dv after the kernel. */
void scratch_flash_backward(struct gen *g, int64_t b, int64_t h, int64_t kv, int64_t sq, int64_t sk, int64_t d,
                            enum dtype dt, const char *tag, struct scratch_list *l)
{
    if (!on(g))
        return;
    int64_t sqr = round_up(sq, 128);
    scratch(g, b * sqr * h * round_up(d, 32), DT_F32, tag, l);
    if (kv != h) {
        scratch(g, b * sk * h * d, dt, tag, l);
        scratch(g, b * sk * h * d, dt, tag, l);
    }
}

/* _efficient_attention_backward (attention_backward.cu): delta, fp32 [B, H, M] (the attention
 * backward's stats tensor stands for it): for 16-bit inputs the kernel computes it; for fp32 it is
 * (grad_out.to(float) * out.to(float)).sum(-1).transpose(-2, -1).contiguous(), whose product of the
 * output's size and [B, M, H] sum come first. Then the kernel's workspace
 * (kernel_backward.h, workspace_size): per batch and head the fp32 dq accumulator of
 * ceil(M / kBlockSizeI) x ceil(K / kN) GradQ tiles of kBlockSizeI x kN, with kBlockSizeI = kN = 64
 * for the sm80+ kernels of head dim <= 64 and 128 above. */
void scratch_efficient_backward(struct gen *g, int64_t b, int64_t h, int64_t m, int64_t k, enum dtype dt,
                                const char *tag, struct scratch_list *l)
{
    if (!on(g))
        return;
    if (dt == DT_F32) {
        struct scratch_list tmp = {0};
        scratch(g, b * m * h * k, DT_F32, tag, &tmp);
        scratch(g, b * m * h, DT_F32, tag, &tmp);
        scratch_free(g, &tmp);
    }
    int64_t tile = k <= 64 ? 64 : 128;
    scratch(g, b * h * round_up(m, tile) * round_up(k, tile), DT_F32, tag, l);
}

/* LaunchGammaBetaBackwardCUDAKernel (layer_norm_kernel.cu): for more than 64 * 1024 rows, when the
 * width leaves most SMs idle (N / 32 < SM count / 2, taken as on a 128-SM GPU such as the H100 or RTX
 * 4090: the device profiles carry no SM count), dgamma and dbeta are reduced in two passes
 * through [blocks.y, N] partial buffers in their dtype, blocks.y = min(32768 / ceil(N / 32),
 * ceil(M / 32)), then .sum(0). */
void scratch_layernorm_backward(struct gen *g, int64_t rows, int64_t n, bool beta, enum dtype dt, const char *tag,
                                struct scratch_list *l)
{
    if (!on(g) || rows <= 64 * 1024 || n / 32 >= 64)
        return;
    int64_t bx = (n + 31) / 32, by = (rows + 31) / 32;
    if (by > 32768 / bx)
        by = 32768 / bx;
    scratch(g, by * n, dt, tag, l);
    if (beta)
        scratch(g, by * n, dt, tag, l);
}
