/* cpu_kernels.h: the CPU implementations behind the kernel table (kernels/kernel_table.c).
 * Each takes a validated call and host pointers to its tensors (order as in kernels.h). */
#ifndef OOMLAB_CPU_KERNELS_H
#define OOMLAB_CPU_KERNELS_H

#include "kernels.h"

#define CPU_KERNEL(name) int name(const struct kernel_call *k, void *const *t, struct err *e)

/* gemm.c */
CPU_KERNEL(cpu_gemm);
/* conv.c */
CPU_KERNEL(cpu_conv2d_fwd);
CPU_KERNEL(cpu_conv2d_bwd_data);
CPU_KERNEL(cpu_conv2d_bwd_filter);
/* attention.c, flash_attention.c */
CPU_KERNEL(cpu_attn_fwd);
CPU_KERNEL(cpu_attn_bwd);
CPU_KERNEL(cpu_flash_fwd);
CPU_KERNEL(cpu_flash_bwd_prep);
CPU_KERNEL(cpu_flash_bwd);
/* norm.c */
CPU_KERNEL(cpu_softmax_fwd);
CPU_KERNEL(cpu_softmax_bwd);
CPU_KERNEL(cpu_layernorm_fwd);
CPU_KERNEL(cpu_layernorm_bwd_dx);
CPU_KERNEL(cpu_layernorm_bwd_params);
CPU_KERNEL(cpu_rmsnorm_fwd);
CPU_KERNEL(cpu_rmsnorm_bwd);
CPU_KERNEL(cpu_groupnorm_fwd);
CPU_KERNEL(cpu_groupnorm_bwd_dx);
CPU_KERNEL(cpu_groupnorm_bwd_params);
/* activation.c */
CPU_KERNEL(cpu_gelu_fwd);
CPU_KERNEL(cpu_gelu_bwd);
CPU_KERNEL(cpu_silu_fwd);
CPU_KERNEL(cpu_silu_bwd);
CPU_KERNEL(cpu_geglu_fwd);
CPU_KERNEL(cpu_geglu_bwd);
CPU_KERNEL(cpu_swiglu_fwd);
CPU_KERNEL(cpu_swiglu_bwd);
/* dropout.c */
CPU_KERNEL(cpu_dropout_fwd);
CPU_KERNEL(cpu_dropout_bwd);
/* pointwise.c */
CPU_KERNEL(cpu_cast);
CPU_KERNEL(cpu_add);
CPU_KERNEL(cpu_scale);
CPU_KERNEL(cpu_fill);
CPU_KERNEL(cpu_bias_add);
CPU_KERNEL(cpu_bias_bwd);
CPU_KERNEL(cpu_upsample2x_fwd);
CPU_KERNEL(cpu_upsample2x_bwd);
/* optim.c */
CPU_KERNEL(cpu_adamw);
CPU_KERNEL(cpu_adamw8);
/* codes[i] = oom_qmap_encode(dynamic map, x[i]) (signed map for m, unsigned for v) by the direct
 * lookup 8-bit AdamW uses; returns 0 (codes untouched) if the lookup table could not be built. */
int cpu_qmap_encode_fast(int is_signed, uint8_t *codes, const float *x, size_t n);
CPU_KERNEL(cpu_ema);
/* loss.c */
CPU_KERNEL(cpu_cross_entropy_fwd);
CPU_KERNEL(cpu_cross_entropy_bwd);
CPU_KERNEL(cpu_embedding_fwd);
CPU_KERNEL(cpu_embedding_bwd);

/* Scratch buffer of n floats for a kernel, or NULL with an ERR_INTERNAL message. */
float *cpu_scratch(size_t n, const char *what, struct err *e);

#endif
