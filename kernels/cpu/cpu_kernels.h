/* cpu_kernels.h: the CPU implementations behind the kernel table (kernels/kernel_table.c):
 * cpu_<name> for each row of kernel_list.def, in the file of its family (kernels/cpu/F.c beside
 * kernels/cuda/F.cu). Each takes a validated call and host pointers to its tensors (order as in
 * kernels.h); 0, or -1 with e set. Also what several of those files share. */
#ifndef OOMLAB_CPU_KERNELS_H
#define OOMLAB_CPU_KERNELS_H

#include "kernels.h"

#define CPU_KERNEL(name) int name(const struct kernel_call *k, void *const *t, struct err *e)

#define KERNEL(id, name, ...) CPU_KERNEL(cpu_##name);
#include "kernel_list.def"

/* codes[i] = oom_qmap_encode(dynamic map, x[i]) (signed map for m, unsigned for v) by the direct
 * lookup 8-bit AdamW uses; returns 0 (codes untouched) if the lookup table could not be built
 * (optim.c). */
int cpu_qmap_encode_fast(int is_signed, uint8_t *codes, const float *x, size_t n);

/* Scratch buffer of n floats for a kernel, or NULL with an ERR_INTERNAL message. */
float *cpu_scratch(size_t n, const char *what, struct err *e);

/* Checks id (row `row` of kernel `name`) is in [0, limit), or negative when allow_negative (an
 * ignored row); else an ERR_INPUT message naming the row. */
int cpu_id_check(const char *name, int64_t row, int64_t id, int64_t limit, int allow_negative, struct err *e);

#endif
