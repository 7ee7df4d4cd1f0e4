/* cpu_threads.h: the split of chunked CPU kernels over the cores (cpu_threads.c). */
#ifndef OOMLAB_CPU_THREADS_H
#define OOMLAB_CPU_THREADS_H

#include <stddef.h>

#include "kernels.h"

/* Processes elements [i0, i0 + len) of a call, len <= the chunk size cpu_for_chunks was given. */
typedef void cpu_chunk_fn(const struct kernel_call *k, void *const *t, size_t i0, size_t len);

/* Runs fn over [0, n) in chunks of `chunk` elements; long ranges are split over the cores.
 * Chunk boundaries do not depend on the split, so neither do the results. */
void cpu_for_chunks(const struct kernel_call *k, void *const *t, size_t n, size_t chunk, cpu_chunk_fn *fn);
/* The same where each of the n elements stands for work/n elements of work (a column of a reduction), so
 * the number of threads follows the work, not n. */
void cpu_for_chunks_of(const struct kernel_call *k, void *const *t, size_t n, size_t chunk, size_t work,
                       cpu_chunk_fn *fn);

/* The most threads a CPU kernel may use: the cores this process may run on, capped by
 * kernel_cpu_set_threads (kernels that thread themselves, such as oneDNN's, are given this many). */
size_t cpu_threads_most(void);

#endif
