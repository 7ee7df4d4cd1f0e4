/* kernel_table.h: the CUDA kernel table (kernel_table.cu) as C sees it, for its test; no CUDA
 * headers needed. */
#ifndef OOMLAB_CUDA_KERNEL_TABLE_H
#define OOMLAB_CUDA_KERNEL_TABLE_H

#ifdef __cplusplus
extern "C" {
#endif

/* The kernel name of row id of the CUDA table, or NULL past its end; *has_launcher is 1 if the row
 * has a CUDA function. */
const char *cuda_kernel_row(unsigned id, int *has_launcher);

#ifdef __cplusplus
}
#endif

#endif
