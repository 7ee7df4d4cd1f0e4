/* cpu_kernels_extra.h: CPU implementations of the kernels appended to the table for the workload
 * generator (broadcast and layout ops, ReLU, quick GELU, rotary embedding, biased attention, SGD,
 * 16-bit-state AdamW, Adafactor, initialisation); see kernels.h for each contract. */
#ifndef OOMLAB_CPU_KERNELS_EXTRA_H
#define OOMLAB_CPU_KERNELS_EXTRA_H

#include "cpu/cpu_kernels.h"
#include "elementwise.h"

/* pointwise_extra.c */
CPU_KERNEL(cpu_mul_bcast);
CPU_KERNEL(cpu_add_bcast);
CPU_KERNEL(cpu_expand);
CPU_KERNEL(cpu_reduce_sum);
CPU_KERNEL(cpu_transpose);
CPU_KERNEL(cpu_copy_blocks);
CPU_KERNEL(cpu_rand_uniform);
CPU_KERNEL(cpu_randint);
/* activation_extra.c */
CPU_KERNEL(cpu_relu_fwd);
CPU_KERNEL(cpu_relu_bwd);
CPU_KERNEL(cpu_quick_gelu_fwd);
CPU_KERNEL(cpu_quick_gelu_bwd);
CPU_KERNEL(cpu_rope);
/* attention_extra.c */
CPU_KERNEL(cpu_attn_bias_fwd);
CPU_KERNEL(cpu_attn_dscores);
/* optim_extra.c */
CPU_KERNEL(cpu_sgd);
CPU_KERNEL(cpu_adamw_t);
CPU_KERNEL(cpu_adafactor);

#endif
